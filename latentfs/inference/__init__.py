"""Fast inference engines, one folder per family: :mod:`~latentfs.inference.dca`,
:mod:`~latentfs.inference.plsa`, :mod:`~latentfs.inference.factor`, :mod:`~latentfs.inference.mixture`,
:mod:`~latentfs.inference.hdda`.

Each family folder holds its engines (registered with ``@register(ModelClass, "method")`` from
:mod:`latentfs.core.registry`), its transforms of new data, its hyperparameter code, its estimators and its
feature weights. Every family package is imported here, so :func:`latentfs.fit` finds the engines
without a hand-kept list. The shared machinery (data, drivers, results, relabelling) is in
:mod:`latentfs.core`.
"""

import importlib
import pkgutil

for _mod in pkgutil.iter_modules(__path__):
    if _mod.ispkg and not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")
