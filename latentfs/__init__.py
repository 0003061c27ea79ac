"""latentfs: latent-structure models and feature selection.

Latent models are declared as Pyro models (``latentfs.models``), fitted by hand-written torch engines
through one entry point, :func:`fit`, and return one result type (:class:`Posterior`) that exports to
ArviZ. Everything that scores features returns :class:`FeatureWeights`.
"""

from latentfs.data import DataError, DataWarning
from latentfs.select.weights import FeatureWeights

__version__ = "0.1.0"

__all__ = ["DataError", "DataWarning", "FeatureWeights", "__version__"]
