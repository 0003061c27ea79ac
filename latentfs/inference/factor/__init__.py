"""Factor analysis and mixtures of factor analysers: the engines of :mod:`latentfs.models.factor`.

* :mod:`~latentfs.inference.factor.em` EM (exact missing-data E-step) and MAP for FA;
  :mod:`~latentfs.inference.factor.mfa` EM for mixtures of factor analysers;
  :mod:`~latentfs.inference.factor.gibbs` Gibbs for Bayesian FA;
* :mod:`~latentfs.inference.factor.sharded` FA EM / MAP on a dask array (one task per row shard) and
  :func:`factor_scores` (lazy for a dask array);
* :mod:`~latentfs.inference.factor.weights` loadings and communalities as feature weights, rotations.

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

import importlib
import pkgutil

from latentfs.inference.factor.estimator import FactorAnalyzer, MixtureOfFactorAnalyzersClusterer
from latentfs.inference.factor.sharded import factor_scores
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

# Engines register themselves on import.
for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")
