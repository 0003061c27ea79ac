"""Row shards of a dask array, for engines whose E-step is additive over documents (DESIGN contract 8).

A ``dask.array.Array`` given to an engine is fitted shard by shard: its row chunks are the shards (dense
numpy or scipy.sparse blocks, e.g. ``da.from_array(csr, chunks=(rows, -1), asarray=False)``); each shard
is validated *inside its task* and the E-step runs as one task per shard on whatever scheduler is active
(a ``dask.distributed.Client`` if one exists, else dask's default), through :func:`dask.compute` and
:func:`dask.persist`. Only the small additive statistics come back to the driver; no shard is ever
gathered into the driver process.

This module knows no model family: it finds the shards, imports dask lazily (with a :class:`DataError`
naming the ``latentfs[dask]`` extra when it is missing), and wraps dask's compute/persist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from latentfs.core.data import DataError

__all__ = [
    "DASK_EXTRA",
    "ShardError",
    "compute",
    "delayed",
    "distributed_client",
    "is_dask_array",
    "persist",
    "require_dask",
    "row_shards",
    "shard_task",
]

DASK_EXTRA = 'pip install "latentfs[dask]"'


class ShardError(DataError):
    """A :class:`DataError` raised inside one shard's task, with the shard's rows in its message."""


def require_dask() -> Any:
    """Import and return ``dask`` (with ``dask.array``), or raise a DataError naming the extra."""
    try:
        import dask
        import dask.array  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only where dask is absent
        raise DataError(
            f"X is a dask array but dask is not installed ({exc}); install the extra with {DASK_EXTRA}."
        ) from exc
    return dask


def is_dask_array(X: Any) -> bool:
    """True when ``X`` is a ``dask.array.Array`` (without importing dask: none can exist unless it was loaded)."""
    import sys

    da = sys.modules.get("dask.array")
    return da is not None and isinstance(X, da.Array)


def row_shards(X: Any, *, name: str = "X") -> tuple[list[Any], list[int]]:
    """The row chunks of a 2-D dask array as delayed blocks, with each chunk's first row.

    The columns must lie in one chunk (each shard holds whole documents); otherwise a DataError says how
    to rechunk.
    """
    require_dask()
    if X.ndim != 2:
        raise DataError(
            f"{name} must be a 2-D dask array (documents × features); got {X.ndim} dimension(s). Reshape it "
            "so that rows are documents."
        )
    if any(c != c for c in X.chunks[0]) or any(c != c for c in X.chunks[1]):  # NaN chunk sizes
        raise DataError(
            f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first (every shard's rows must "
            "be known to place its documents)."
        )
    if len(X.chunks[1]) != 1:
        raise DataError(
            f"{name} must hold every feature of a document in one chunk; got {len(X.chunks[1])} column chunks "
            f"{X.chunks[1]}. Rechunk by rows only: {name}.rechunk({{1: -1}}), or build it with chunks=(rows, -1)."
        )
    blocks = X.to_delayed()
    starts: list[int] = []
    at = 0
    for size in X.chunks[0]:
        starts.append(at)
        at += int(size)
    return [blocks[i, 0] for i in range(blocks.shape[0])], starts


def shard_task(fn: Callable[..., Any], index: int, start: int, stop: int, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(*args, **kwargs)``; a DataError it raises names the shard and its rows (input row numbers in
    the message are relative to the shard's first row, ``start``)."""
    try:
        return fn(*args, **kwargs)
    except ShardError:
        raise
    except DataError as exc:
        raise ShardError(
            f"in row chunk {index} (input rows {start}–{stop - 1}; row numbers below count from {start}): {exc}"
        ) from exc


def delayed(fn: Callable[..., Any], *, nout: int | None = None, pure: bool = False) -> Callable[..., Any]:
    """``dask.delayed(fn)`` (imported lazily)."""
    dask = require_dask()
    return dask.delayed(fn, nout=nout, pure=pure)  # type: ignore[no-any-return]


def wrap(value: Any) -> Any:
    """One dask key holding ``value``, so that every task that takes it shares one copy (not one per task)."""
    dask = require_dask()
    return dask.delayed(value, pure=False)


def compute(*objs: Any) -> tuple[Any, ...]:
    """``dask.compute`` on the active scheduler (a distributed Client when one exists)."""
    dask = require_dask()
    return tuple(dask.compute(*objs))


def persist(objs: Sequence[Any]) -> list[Any]:
    """``dask.persist``: each result stays where it was computed (on a worker under a distributed Client)."""
    dask = require_dask()
    return list(dask.persist(*objs))


def distributed_client() -> Any:
    """The active ``dask.distributed`` Client, or None (also when distributed is not installed)."""
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:
        return None
