"""latentfs: latent-structure models and feature selection.

Latent models are declared as Pyro models (:mod:`latentfs.models`), fitted by hand-written torch
engines through one entry point, :func:`fit`, and return one result type (:class:`Posterior`) that
exports to ArviZ. Everything that scores features returns :class:`FeatureWeights`.

Examples
--------
>>> import latentfs
>>> model = latentfs.DirichletDCA(3)
>>> X = model.simulate(n_documents=50, n_features=20, doc_length=60, seed=0)["counts"]
>>> result = latentfs.fit(model, X, method="vb", seed=0, warn=False)
>>> latentfs.word_importance(result).top(3)  # doctest: +SKIP
"""

from typing import TYPE_CHECKING

from latentfs._lazy import attach
from latentfs._notebook import quiet_tqdm_auto

quiet_tqdm_auto()  # in a Jupyter kernel without ipywidgets: no "IProgress not found" from Pyro's import of tqdm.auto

# What the package exports, by the module that defines it. Each module is imported when one of its names is
# first read (latentfs._lazy), so ``import latentfs`` and ``latentfs --help`` do not wait for torch or the families.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.core.data": ("DataError", "DataWarning", "as_continuous", "as_counts"),
    # a subclass of scikit-learn's, so it imports scikit-learn: on first read only, like every name here
    "latentfs.core.convergence_warning": ("ConvergenceWarning",),
    "latentfs.core.driver": ("InterruptedFitWarning",),
    "latentfs.core.parallel": ("chain_method",),
    "latentfs.core.registry": ("fit", "methods_for"),
    "latentfs.core.results": ("Posterior", "load"),
    "latentfs.core.weights": ("FeatureWeights",),
    "latentfs.inference.dca": ("DCA", "DCAClassifier", "DCAFeatures", "top_words", "word_importance", "word_relevance"),
    "latentfs.inference.factor": (
        "FactorAnalyzer",
        "MixtureOfFactorAnalyzersClusterer",
        "communalities",
        "loading_weights",
    ),
    "latentfs.inference.hdda": ("HDDA", "HDDC", "hdda_feature_weights"),
    "latentfs.inference.hmm": ("CategoricalHMMEstimator", "GaussianHMMEstimator", "state_marginals", "viterbi"),
    "latentfs.inference.latent_trait": ("LatentTraitAnalyzer", "discrimination_weights", "item_characteristic_curves"),
    "latentfs.inference.mixture": (
        "GaussianMixtureClusterer",
        "LatentClassClusterer",
        "LatentProfileClusterer",
        "MixtureSeparationSelector",
        "mixture_feature_weights",
    ),
    "latentfs.inference.plsa": ("PLSAEstimator", "PLSATransformer"),
    "latentfs.models.dca": ("ConditionalGammaPoissonDCA", "DirichletDCA", "GammaPoissonDCA"),
    "latentfs.models.factor": ("FactorAnalysis", "LoadingConstraints", "MixtureOfFactorAnalyzers"),
    "latentfs.models.hdda": ("HDDAModel",),
    "latentfs.models.hmm": ("CategoricalHMM", "GaussianHMM"),
    "latentfs.models.hmrf": ("HiddenPotts",),
    "latentfs.models.latent_trait": ("LatentTrait",),
    "latentfs.models.mixture": ("GaussianMixture", "LatentClass", "LatentProfile", "UnivariateMixtureK"),
    "latentfs.models.plsa": ("PLSA",),
}
_SUBPACKAGES = ("core", "datasets", "evaluate", "inference", "models", "plots", "select", "subspace", "testing")

__getattr__, __dir__ = attach(__name__, _EXPORTS, _SUBPACKAGES)

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from latentfs.core.convergence_warning import ConvergenceWarning
    from latentfs.core.data import DataError, DataWarning, as_continuous, as_counts
    from latentfs.core.driver import InterruptedFitWarning
    from latentfs.core.parallel import chain_method
    from latentfs.core.registry import fit, methods_for
    from latentfs.core.results import Posterior, load
    from latentfs.core.weights import FeatureWeights
    from latentfs.inference.dca import DCA, DCAClassifier, DCAFeatures, top_words, word_importance, word_relevance
    from latentfs.inference.factor import (
        FactorAnalyzer,
        MixtureOfFactorAnalyzersClusterer,
        communalities,
        loading_weights,
    )
    from latentfs.inference.hdda import HDDA, HDDC, hdda_feature_weights
    from latentfs.inference.hmm import CategoricalHMMEstimator, GaussianHMMEstimator, state_marginals, viterbi
    from latentfs.inference.latent_trait import LatentTraitAnalyzer, discrimination_weights, item_characteristic_curves
    from latentfs.inference.mixture import (
        GaussianMixtureClusterer,
        LatentClassClusterer,
        LatentProfileClusterer,
        MixtureSeparationSelector,
        mixture_feature_weights,
    )
    from latentfs.inference.plsa import PLSAEstimator, PLSATransformer
    from latentfs.models.dca import ConditionalGammaPoissonDCA, DirichletDCA, GammaPoissonDCA
    from latentfs.models.factor import FactorAnalysis, LoadingConstraints, MixtureOfFactorAnalyzers
    from latentfs.models.hdda import HDDAModel
    from latentfs.models.hmm import CategoricalHMM, GaussianHMM
    from latentfs.models.hmrf import HiddenPotts
    from latentfs.models.latent_trait import LatentTrait
    from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile, UnivariateMixtureK
    from latentfs.models.plsa import PLSA

__version__ = "0.1.0"

__all__ = [
    "CategoricalHMM",
    "CategoricalHMMEstimator",
    "ConditionalGammaPoissonDCA",
    "ConvergenceWarning",
    "DCA",
    "DCAClassifier",
    "DCAFeatures",
    "DataError",
    "DataWarning",
    "DirichletDCA",
    "FactorAnalysis",
    "FactorAnalyzer",
    "FeatureWeights",
    "GammaPoissonDCA",
    "GaussianHMM",
    "GaussianHMMEstimator",
    "GaussianMixture",
    "GaussianMixtureClusterer",
    "HDDA",
    "HDDAModel",
    "HDDC",
    "HiddenPotts",
    "InterruptedFitWarning",
    "LatentClass",
    "LatentClassClusterer",
    "LatentProfile",
    "LatentProfileClusterer",
    "LatentTrait",
    "LatentTraitAnalyzer",
    "LoadingConstraints",
    "MixtureOfFactorAnalyzers",
    "MixtureOfFactorAnalyzersClusterer",
    "UnivariateMixtureK",
    "MixtureSeparationSelector",
    "PLSA",
    "PLSAEstimator",
    "PLSATransformer",
    "Posterior",
    "__version__",
    "as_continuous",
    "as_counts",
    "chain_method",
    "communalities",
    "discrimination_weights",
    "fit",
    "hdda_feature_weights",
    "item_characteristic_curves",
    "load",
    "loading_weights",
    "methods_for",
    "mixture_feature_weights",
    "state_marginals",
    "top_words",
    "viterbi",
    "word_importance",
    "word_relevance",
]
