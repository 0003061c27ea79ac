"""High-dimensional discriminant analysis and clustering: the engines of :mod:`latentfs.models.hdda`.

* :mod:`~latentfs.inference.hdda.numerics` the sub-model table, dimension choice, estimation and costs;
  :mod:`~latentfs.inference.hdda.hddc` HDDC by EM (restarts through the mixtures' EM driver) and
  :mod:`~latentfs.inference.hdda.em` its engine for :func:`latentfs.fit`;
* :mod:`~latentfs.inference.hdda.estimators` the :class:`HDDA` classifier and :class:`HDDC` clusterer;
* :mod:`~latentfs.inference.hdda.weights` feature weights from the class subspaces.

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

import importlib
import pkgutil

from latentfs.inference.hdda.estimators import HDDA, HDDC
from latentfs.inference.hdda.weights import HDDAWeights, hdda_feature_weights, subspace_weights

__all__ = [
    "HDDA",
    "HDDAWeights",
    "HDDC",
    "hdda_feature_weights",
    "subspace_weights",
]

# Engines register themselves on import.
for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")
