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

from latentfs.data import DataError, DataWarning
from latentfs.inference import Posterior, fit, load, methods_for
from latentfs.inference.driver import ConvergenceWarning, InterruptedFitWarning
from latentfs.models import (
    HDDA,
    HDDC,
    PLSA,
    ConditionalGammaPoissonDCA,
    DirichletDCA,
    FactorAnalysis,
    GammaPoissonDCA,
    GaussianMixture,
    HDDAModel,
    LatentClass,
    LatentProfile,
    LoadingConstraints,
    MixtureOfFactorAnalyzers,
)
from latentfs.select.posterior import top_words, word_importance, word_relevance
from latentfs.select.weights import FeatureWeights

__version__ = "0.1.0"

__all__ = [
    "PLSA",
    "ConditionalGammaPoissonDCA",
    "ConvergenceWarning",
    "DataError",
    "DataWarning",
    "DirichletDCA",
    "FactorAnalysis",
    "FeatureWeights",
    "GammaPoissonDCA",
    "GaussianMixture",
    "HDDA",
    "HDDAModel",
    "HDDC",
    "InterruptedFitWarning",
    "LatentClass",
    "LatentProfile",
    "LoadingConstraints",
    "MixtureOfFactorAnalyzers",
    "Posterior",
    "__version__",
    "fit",
    "load",
    "methods_for",
    "top_words",
    "word_importance",
    "word_relevance",
]
