"""Probabilistic latent semantic analysis (Monay et al.): the engines of :mod:`latentfs.models.plsa`.

* :mod:`~latentfs.inference.plsa.em` EM and tempered EM, early stopping, fold-in.
* :mod:`~latentfs.inference.plsa.sharded` EM and tempered EM on a dask array (one task per row shard);
* :mod:`~latentfs.inference.plsa.transformer` :class:`PLSATransformer` (scikit-learn feature extractor).

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

from typing import TYPE_CHECKING

from latentfs._lazy import attach_family
from latentfs.core.registry import register_new_data as _register_new_data
from latentfs.inference.plsa.em import fold_in, plsa_loglik

__all__ = [
    "PLSAEstimator",
    "PLSATransformer",
    "fold_in",
    "plsa_loglik",
]

# Engines register themselves on import; the scikit-learn estimators hold none and are imported on first use.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.inference.plsa.estimator": ("PLSAEstimator",),
    "latentfs.inference.plsa.transformer": ("PLSATransformer",),
}
__getattr__, __dir__ = attach_family(__name__, __path__, _EXPORTS)

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from latentfs.inference.plsa.estimator import PLSAEstimator
    from latentfs.inference.plsa.transformer import PLSATransformer

# Posterior.transform / score of PLSA results (core names no family: each family registers its own)
_register_new_data("PLSA", "latentfs.inference.plsa.estimator", "PLSAEstimator")
