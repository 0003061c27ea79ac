"""Fast inference engines, the shared drivers and the result type.

Every module in this package that registers engines (``@register(ModelClass, "method")``) is imported
here, so :func:`latentfs.fit` finds them without a hand-kept list.
"""

import importlib
import pkgutil

from latentfs.inference.registry import fit, methods_for, register
from latentfs.inference.results import Posterior, load

__all__ = ["Posterior", "fit", "load", "methods_for", "register"]

_SHARED = {"registry", "results", "driver", "align"}
for _mod in pkgutil.iter_modules(__path__):
    if _mod.name not in _SHARED and not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")
