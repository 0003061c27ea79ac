"""Probabilistic latent semantic analysis (Monay et al.): the engines of :mod:`latentfs.models.plsa`.

* :mod:`~latentfs.inference.plsa.em` EM and tempered EM, early stopping, fold-in.
* :mod:`~latentfs.inference.plsa.sharded` EM and tempered EM on a dask array (one task per row shard);
* :mod:`~latentfs.inference.plsa.transformer` :class:`PLSATransformer` (scikit-learn feature extractor).

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

import importlib
import pkgutil

from latentfs.inference.plsa.em import fold_in, plsa_loglik
from latentfs.inference.plsa.estimator import PLSAEstimator
from latentfs.inference.plsa.transformer import PLSATransformer

__all__ = [
    "PLSAEstimator",
    "PLSATransformer",
    "fold_in",
    "plsa_loglik",
]

# Engines register themselves on import.
for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")
