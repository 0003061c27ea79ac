"""Probabilistic latent semantic analysis (Monay et al.): the engines of :mod:`latentfs.models.plsa`.

* :mod:`~latentfs.inference.plsa.em` EM and tempered EM (on a dask array they run through the pipeline's data
  back-end, :mod:`latentfs.core.backends`), early stopping, fold-in;
* :mod:`~latentfs.inference.plsa.transformer` :class:`PLSATransformer` (scikit-learn feature extractor).

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

from typing import TYPE_CHECKING

from latentfs._lazy import attach_family, public_names
from latentfs.core.registry import register_new_data as _register_new_data
from latentfs.inference.plsa.em import fold_in, plsa_loglik  # noqa: F401

# Engines register themselves on import; the scikit-learn estimators hold none and are imported on first use.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.inference.plsa.estimator": ("PLSAEstimator",),
    "latentfs.inference.plsa.transformer": ("PLSATransformer",),
}
__getattr__, __dir__ = attach_family(__name__, __path__, _EXPORTS)
__all__ = public_names(_EXPORTS, "fold_in", "plsa_loglik")

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from latentfs.inference.plsa.estimator import PLSAEstimator  # noqa: F401
    from latentfs.inference.plsa.transformer import PLSATransformer  # noqa: F401

# Posterior.transform / score of PLSA results (core names no family: each family registers its own)
_register_new_data("PLSA", "latentfs.inference.plsa.estimator", "PLSAEstimator")
