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

from typing import TYPE_CHECKING

from latentfs._lazy import attach

# imported on first read (latentfs._lazy): ``import latentfs.core.data`` need not import scikit-learn
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.core.data": ("DataError", "DataWarning"),
    "latentfs.core.driver": ("ConvergenceWarning", "InterruptedFitWarning"),
    "latentfs.core.estimator": ("LatentEstimator",),
    "latentfs.core.registry": ("fit", "methods_for", "register"),
    "latentfs.core.results": ("Posterior", "load"),
    "latentfs.core.weights": ("FeatureWeights",),
}

__getattr__, __dir__ = attach(__name__, _EXPORTS)

if TYPE_CHECKING:  # the same names, for type checkers and editors
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
