"""One entry point to fit (DESIGN.md, contract 2): ``fit(model, data, method=..., **options)``.

Engines register themselves for a ``(model class, method)`` pair with :func:`register`. An unknown
pair raises an error that lists the methods the model has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from latentfs.core.data import DataError

__all__ = ["fit", "register", "methods_for"]

_ENGINES: dict[tuple[type, str], Callable[..., Any]] = {}


def register(model_type: type, method: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``engine(model, data, **options)`` for ``(model_type, method)``."""

    def deco(engine: Callable[..., Any]) -> Callable[..., Any]:
        _ENGINES[(model_type, method)] = engine
        return engine

    return deco


def methods_for(model: Any) -> list[str]:
    """The methods registered for ``model``'s class (or its bases)."""
    _load_engines()
    mro = type(model).__mro__ if not isinstance(model, type) else model.__mro__
    return sorted({m for (cls, m) in _ENGINES if cls in mro})


def fit(model: Any, data: Any, method: str | None = None, **options: Any) -> Any:
    """Fit ``model`` to ``data`` with the engine registered for ``method``.

    Parameters
    ----------
    model : a latentfs model instance (for example :class:`latentfs.DirichletDCA`)
    data : the data, in any form :mod:`latentfs.core.data` accepts for that model
    method : str, optional
        Engine name; defaults to the model's ``default_method``.
    **options
        Passed to the engine (``seed``, ``max_iter``, ``num_samples``…; see each engine's docstring).

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2)
    >>> X = model.simulate(n_documents=30, n_features=12, doc_length=40, seed=0)["counts"]
    >>> result = latentfs.fit(model, X, method="vb", seed=0, max_iter=50, warn=False)
    >>> result.samples("topic_word").shape
    (1, 200, 2, 12)
    """
    _load_engines()
    if method is None:
        method = getattr(model, "default_method", None)
    for cls in type(model).__mro__:
        engine = _ENGINES.get((cls, method))  # type: ignore[arg-type]
        if engine is not None:
            return engine(model, data, **options)
    available = methods_for(model)
    if not available:
        raise DataError(f"model must be a latentfs model with registered engines; got {type(model).__name__}.")
    raise DataError(f"method must be one of {available} for {type(model).__name__}; got {method!r}.")


def _load_engines() -> None:
    import latentfs.inference  # noqa: F401  (engine modules register on import)
