"""Package namespaces whose names are imported on first use (PEP 562).

``import latentfs`` used to import every family, torch, Pyro and scikit-learn: 4–5 s before ``latentfs --help``
printed a line. A package built with :func:`attach` names what it exports, and each name's module is imported
when the name is first read (``latentfs.fit``, ``from latentfs import DirichletDCA``). The value is then stored
in the package, so later reads cost nothing. Subpackages listed in ``submodules`` are imported the same way
(``latentfs.select`` after a bare ``import latentfs``).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["attach", "attach_family", "public_names"]


def attach(package: str, exports: Mapping[str, Iterable[str]],
           submodules: Iterable[str] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a module's full name to the names it
    gives the package; ``submodules`` are the package's subpackages to import on first read."""
    where = {name: module for module, names in exports.items() for name in names}
    subs = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in where:
            value = getattr(importlib.import_module(where[name]), name)
        elif name in subs:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where) | subs)

    return __getattr__, __dir__


def attach_family(package: str, path: Iterable[str], exports: Mapping[str, Iterable[str]]) -> tuple[
        Callable[[str], Any], Callable[[], list[str]]]:
    """:func:`attach` for an inference family: first imports every module of the family that ``exports`` does not
    name (its engines register with :func:`latentfs.fit` on import). The modules ``exports`` names, the
    scikit-learn estimators, hold no engine and are imported on first use, so a fit does not import
    scikit-learn."""
    for module in pkgutil.iter_modules(path):
        name = f"{package}.{module.name}"
        if name not in exports:
            importlib.import_module(name)
    return attach(package, exports)


def public_names(exports: Mapping[str, Iterable[str]], *own: str) -> list[str]:
    """``__all__`` for a package built with :func:`attach`: the names ``exports`` gives it and those it defines or
    imports itself (``own``), sorted, so each exported name is written once, where its module is named."""
    return sorted({*own, *(name for names in exports.values() for name in names)})
