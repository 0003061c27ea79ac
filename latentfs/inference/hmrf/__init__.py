"""Hidden Markov random fields (the hidden Potts model): the engines of :mod:`latentfs.models.hmrf`.

* :mod:`~latentfs.inference.hmrf.family` the prepared lattice, Gaussian emissions, full conditionals and
  the pseudo-likelihood of η (Besag 1975) with its maximiser;
* :mod:`~latentfs.inference.hmrf.icm` iterated conditional modes with pseudo-likelihood η (Besag 1986),
  :mod:`~latentfs.inference.hmrf.mean_field` mean-field EM (Zhang 1992; Celeux, Forbes & Peyrard 2003),
  :mod:`~latentfs.inference.hmrf.gibbs` checkerboard Gibbs with a pseudo-likelihood Metropolis step for η.

Each engine is a spec of the one pipeline (:mod:`latentfs.core.pipeline`: ``PottsICM``, ``PottsMeanField``,
``PottsGibbs``), registered with :func:`latentfs.fit` when this package is imported.
"""

import importlib
import pkgutil

from latentfs.inference.hmrf.family import (
    InteractionAtBoundWarning,
    maximise_pseudo_likelihood,
    pseudo_log_likelihood,
)

__all__ = ["InteractionAtBoundWarning", "maximise_pseudo_likelihood", "pseudo_log_likelihood"]

# Engines register themselves on import.
for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")
