"""High-dimensional discriminant analysis and clustering: the engines of :mod:`latentfs.models.hdda`.

* :mod:`~latentfs.inference.hdda.numerics` the sub-model table, dimension choice, estimation and costs;
  :mod:`~latentfs.inference.hdda.hddc` HDDC by EM (restarts through the mixtures' EM driver) and
  :mod:`~latentfs.inference.hdda.em` its engine for :func:`latentfs.fit`;
* :mod:`~latentfs.inference.hdda.estimators` the :class:`HDDA` classifier and :class:`HDDC` clusterer;
* :mod:`~latentfs.inference.hdda.weights` feature weights from the class subspaces.

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

from typing import TYPE_CHECKING

from latentfs._lazy import attach_family, public_names

# Engines register themselves on import; the estimators and weights hold none and are imported on first use, so a
# fit does not import scikit-learn.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.inference.hdda.estimators": ("HDDA", "HDDC"),
    "latentfs.inference.hdda.weights": ("HDDAWeights", "hdda_feature_weights", "subspace_weights"),
}
__getattr__, __dir__ = attach_family(__name__, __path__, _EXPORTS)
__all__ = public_names(_EXPORTS)

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from latentfs.inference.hdda.estimators import HDDA, HDDC  # noqa: F401
    from latentfs.inference.hdda.weights import HDDAWeights, hdda_feature_weights, subspace_weights  # noqa: F401
