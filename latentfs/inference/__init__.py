"""Fast inference engines, one folder per family: :mod:`~latentfs.inference.dca`,
:mod:`~latentfs.inference.plsa`, :mod:`~latentfs.inference.factor`, :mod:`~latentfs.inference.mixture`,
:mod:`~latentfs.inference.hmm`, :mod:`~latentfs.inference.hmrf`, :mod:`~latentfs.inference.latent_trait`,
:mod:`~latentfs.inference.hdda`.

Each family folder holds its engines (each an :class:`~latentfs.core.pipeline.EngineSpec` registered with
``register_spec(Spec(), ModelClass, ...)`` from :mod:`latentfs.core.registry`, run by the one pipeline), its
transforms of new data, its hyperparameter code, its estimators and its feature weights. :func:`latentfs.fit`
imports a built-in model's own family (its engines register on import); :func:`load_all` imports every family
package found here, so engines are found without a hand-kept list. Importing this package alone imports no
family. The shared machinery (data, drivers, results, relabelling) is in :mod:`latentfs.core`.
"""

import importlib
import pkgutil

__all__ = ["load_all"]


def load_all() -> None:
    """Import every family package under :mod:`latentfs.inference`; each registers its engines on import."""
    for mod in pkgutil.iter_modules(__path__):
        if mod.ispkg and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
