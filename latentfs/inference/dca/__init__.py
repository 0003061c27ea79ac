"""Discrete component analysis (Buntine & Jakulin 2006): the engines of :mod:`latentfs.models.dca`.

* :mod:`~latentfs.inference.dca.vb` mean-field VB, :mod:`~latentfs.inference.dca.gibbs` direct Gibbs,
  :mod:`~latentfs.inference.dca.collapsed` collapsed Gibbs, :mod:`~latentfs.inference.dca.cgp` VB for the
  conditional GaP, :mod:`~latentfs.inference.dca.em` KL-NMF / PLSI / MAP, :mod:`~latentfs.inference.dca.reference`
  Pyro's NUTS and SVI (the reference), :mod:`~latentfs.inference.dca.partially_collapsed` exact partially
  collapsed Gibbs whose row blocks are swept in process or as Dask tasks (same draws for any chunking);
* :mod:`~latentfs.inference.dca.common` data on a device, log joint; :mod:`~latentfs.inference.dca.hyper`
  hyperparameter learning;
* :mod:`~latentfs.inference.dca.weights` word relevance and importance;
  :mod:`~latentfs.inference.dca.features` document features and the class-as-extra-group classifier.

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

from typing import TYPE_CHECKING

from latentfs._lazy import attach_family, public_names
from latentfs.core.registry import register_new_data as _register_new_data
from latentfs.inference.dca.weights import component_shares, top_words, word_importance, word_relevance  # noqa: F401

# Engines register themselves on import; the scikit-learn estimators hold none and are imported on first use.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.inference.dca.estimator": ("DCA",),
    "latentfs.inference.dca.features": ("DCAClassifier", "DCAFeatures", "component_features", "fold_in_features"),
}
__getattr__, __dir__ = attach_family(__name__, __path__, _EXPORTS)
__all__ = public_names(_EXPORTS, "component_shares", "top_words", "word_importance", "word_relevance")

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from latentfs.inference.dca.estimator import DCA  # noqa: F401
    from latentfs.inference.dca.features import DCAClassifier, DCAFeatures, component_features, fold_in_features  # noqa: F401

# Posterior.transform / predict / score of DCA results (core names no family: each family registers its own)
_register_new_data("DirichletDCA", "latentfs.inference.dca.estimator", "DCA", lambda h: {"model": "dirichlet"})
_register_new_data("GammaPoissonDCA", "latentfs.inference.dca.estimator", "DCA", lambda h: {"model": "gamma_poisson"})
