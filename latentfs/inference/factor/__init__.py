"""Factor analysis and mixtures of factor analysers: the engines of :mod:`latentfs.models.factor`.

* :mod:`~latentfs.inference.factor.em` EM (exact missing-data E-step) and MAP for FA;
  :mod:`~latentfs.inference.factor.mfa` EM for mixtures of factor analysers;
  :mod:`~latentfs.inference.factor.gibbs` Gibbs for Bayesian FA;
* :mod:`~latentfs.inference.factor.data` the data side of FA EM / MAP, in memory or one task per row shard of a
  dask array; :mod:`~latentfs.inference.factor.scores` :func:`factor_scores` (lazy for a dask array);
* :mod:`~latentfs.inference.factor.weights` loadings and communalities as feature weights, rotations.

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

from typing import TYPE_CHECKING

from latentfs._lazy import attach_family
from latentfs.core.registry import register_new_data as _register_new_data
from latentfs.inference.factor.scores import factor_scores
from latentfs.inference.factor.weights import (
    bootstrap_draws,
    communalities,
    loading_weights,
    promax,
    quartimax,
    rotate,
    varimax,
)

__all__ = [
    "FactorAnalyzer",
    "MixtureOfFactorAnalyzersClusterer",
    "bootstrap_draws",
    "communalities",
    "factor_scores",
    "loading_weights",
    "promax",
    "quartimax",
    "rotate",
    "varimax",
]

# Engines register themselves on import; the scikit-learn estimators hold none and are imported on first use.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.inference.factor.estimator": ("FactorAnalyzer", "MixtureOfFactorAnalyzersClusterer"),
}
__getattr__, __dir__ = attach_family(__name__, __path__, _EXPORTS)

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from latentfs.inference.factor.estimator import FactorAnalyzer, MixtureOfFactorAnalyzersClusterer

# Posterior.transform / predict / score of FA and MFA results (core names no family: each family registers its own)
_register_new_data("FactorAnalysis", "latentfs.inference.factor.estimator", "FactorAnalyzer")
_register_new_data("MixtureOfFactorAnalyzers", "latentfs.inference.factor.estimator",
                   "MixtureOfFactorAnalyzersClusterer", lambda h: {"n_factors": h.get("n_factors", 1)})
