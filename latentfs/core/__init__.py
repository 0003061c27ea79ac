"""The shared core every family builds on, and that knows no family.

* :mod:`~latentfs.core.data`: input conversion and validation (data enters latentfs here, once);
* :mod:`~latentfs.core.registry`: the one entry point ``fit(model, data, method=...)`` and the engine registry;
* :mod:`~latentfs.core.driver`: the shared loops for optimisers and samplers (restarts, convergence,
  progress, interruption);
* :mod:`~latentfs.core.results`: :class:`Posterior`, the one result type, with save/load;
* :mod:`~latentfs.core.relabel`: label switching, one recorded relabelling mechanism;
* :mod:`~latentfs.core.weights`: :class:`FeatureWeights`, the one feature-weights type;
* :mod:`~latentfs.core.base`: the base class of selectors and estimators.
"""

from latentfs.core.data import DataError, DataWarning
from latentfs.core.driver import ConvergenceWarning, InterruptedFitWarning
from latentfs.core.estimator import LatentEstimator
from latentfs.core.registry import fit, methods_for, register
from latentfs.core.results import Posterior, load
from latentfs.core.weights import FeatureWeights

__all__ = [
    "ConvergenceWarning",
    "DataError",
    "DataWarning",
    "FeatureWeights",
    "InterruptedFitWarning",
    "LatentEstimator",
    "Posterior",
    "fit",
    "load",
    "methods_for",
    "register",
]
