"""The data back-end of the pipeline: a fit's rows as shards, each prepared once, and one E-step call per shard.

An engine whose E-step is additive over rows (documents, samples: EM and VB over additive statistics) writes that
step once, as a function of one prepared shard, and asks a :class:`ShardSet` to run it over whatever holds the data
(DESIGN contract 8; the engine-contract pipeline, :mod:`latentfs.core.pipeline`):

* **in memory** (numpy, scipy.sparse, …) the data are one shard, prepared here; every call runs here on it, with no
  copy, no conversion and no summation, so the in-memory fit is exactly the fit of the engine's own arithmetic;
* **a dask array**: its row chunks are the shards (:func:`latentfs.core.shards.row_shards`). Each shard is
  validated and prepared inside its own task and kept where it was computed (``persist=True``; with ``False`` it
  is prepared again from its source for every pass, for corpora larger than the cluster's memory). An E-step is
  one task per shard; its additive outputs are summed in a tree of tasks next to the shards, so only the totals
  reach the driver, and the per-shard part of the state it returns (documents' proportions, their variational
  shapes) stays on the shard's worker. A DataError raised inside a shard's task names the shard and its rows.

The engine never sees which back-end runs: it calls :meth:`ShardSet.summaries` (one pass returning a value per
shard), :meth:`ShardSet.estep` (sums, kept state, gathered parts), :meth:`ShardSet.start` and
:meth:`ShardSet.lazy`. Arguments broadcast to every shard (parameters) are sent once per pass (one dask key;
torch tensors travel as host numpy arrays), so a shard function turns them into tensors with
``torch.as_tensor(value, dtype=..., device=...)``, which is a no-op in memory.

This module knows no model family.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from latentfs.core import shards as _shards

__all__ = ["ShardSet", "shard_data"]


def _host(value: Any) -> Any:
    """``value`` with its torch tensors as host numpy arrays (dicts, lists and tuples followed), for dask."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: _host(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_host(v) for v in value)
    return value


class ShardSet:
    """A fit's rows as prepared shards (module docstring). Build one with :func:`shard_data`.

    Attributes
    ----------
    n_shards : int
        Number of shards (1 in memory).
    starts, stops : list of int
        Each shard's first row and one past its last, in the input's row numbering.
    is_local : bool
        True in memory: :attr:`local` is the one prepared shard, which the engine may also read directly (names,
        warm starts, validation splits: what only an in-memory fit offers).
    """

    n_shards: int
    starts: list[int]
    stops: list[int]
    is_local: bool

    @property
    def local(self) -> Any:
        """The one prepared shard of an in-memory ShardSet (a DataError-free programming error otherwise)."""
        raise AttributeError("a sharded data set has no local shard")

    def summaries(self, fn: Callable[..., Any], *args: Any, state: Sequence[Any] | None = None) -> list[Any]:
        """``[fn(shard, *args) for each shard]`` (with ``fn(shard, s, *args)`` for each shard's ``state`` entry
        ``s`` when ``state`` is given), computed, in shard order."""
        raise NotImplementedError

    def estep(
        self,
        fn: Callable[..., tuple[Any, ...]],
        *args: Any,
        state: Sequence[Any] | None = None,
        n_sum: int = 1,
        keep: bool = False,
        gather: bool = False,
    ) -> tuple[tuple[Any, ...], list[Any] | None, list[Any] | None]:
        """Run ``fn`` on every shard and combine: ``(sums, kept, gathered)``.

        ``fn(shard, *args)`` (or ``fn(shard, s, *args)`` with ``state``) returns a tuple whose first ``n_sum``
        items are additive over shards (arrays, tensors, floats, or dicts of them added key by key: summed; one
        shard's are returned as they are), followed by the shard's new state when ``keep`` (returned as a list,
        kept where it was computed: pass it back as ``state``) and then a per-shard value to bring back when
        ``gather`` (returned as a computed list, in shard order).
        """
        raise NotImplementedError

    def start(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """Each shard's starting state, ``fn(shard, *args)``, kept where it is computed (lazily on dask)."""
        raise NotImplementedError

    def lazy(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """Each shard's ``fn(shard, *args)`` left uncomputed on dask (delayed values, one per shard, for per-row
        outputs computed only when asked for); in memory, computed."""
        return self.start(fn, *args)


class _LocalShards(ShardSet):
    """The in-memory back-end: one shard, every call made here."""

    def __init__(self, prepared: Any, n_rows: int) -> None:
        self._shard = prepared
        self.n_shards, self.starts, self.stops, self.is_local = 1, [0], [n_rows], True

    @property
    def local(self) -> Any:
        return self._shard

    def _call(self, fn: Callable[..., Any], args: tuple[Any, ...], state: Sequence[Any] | None) -> Any:
        if state is None:
            return fn(self._shard, *args)
        return fn(self._shard, state[0], *args)

    def summaries(self, fn: Callable[..., Any], *args: Any, state: Sequence[Any] | None = None) -> list[Any]:
        return [self._call(fn, args, state)]

    def estep(self, fn: Callable[..., tuple[Any, ...]], *args: Any, state: Sequence[Any] | None = None,
              n_sum: int = 1, keep: bool = False, gather: bool = False
              ) -> tuple[tuple[Any, ...], list[Any] | None, list[Any] | None]:
        out = self._call(fn, args, state)
        kept = [out[n_sum]] if keep else None
        gathered = [out[n_sum + int(keep)]] if gather else None
        return tuple(out[:n_sum]), kept, gathered

    def start(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        return [fn(self._shard, *args)]


class _DaskShards(ShardSet):
    """The dask back-end: the row chunks of a dask array, one task per shard (module docstring)."""

    def __init__(self, X: Any, prepare_shard: Callable[..., Any], args: tuple[Any, ...], persist: bool) -> None:
        blocks, starts = _shards.row_shards(X)
        self.starts = starts
        self.stops = starts[1:] + [int(X.shape[0])]
        self.n_shards, self.is_local = len(blocks), False
        task = _shards.delayed(_shards.shard_task, pure=True)
        prepared = [task(prepare_shard, i, lo, hi, block, *args)
                    for i, (block, lo, hi) in enumerate(zip(blocks, self.starts, self.stops, strict=True))]
        self._prepared = _shards.persist(prepared) if persist else prepared

    def _tasks(self, fn: Callable[..., Any], args: tuple[Any, ...], state: Sequence[Any] | None,
               nout: int | None) -> list[Any]:
        keys = tuple(_shards.wrap(_host(a)) for a in args)  # one copy of each broadcast argument per pass
        task = _shards.delayed(_shards.shard_task, nout=nout, pure=False)
        bounds = zip(self._prepared, self.starts, self.stops, strict=True)
        if state is None:
            return [task(fn, i, lo, hi, p, *keys) for i, (p, lo, hi) in enumerate(bounds)]
        return [task(fn, i, lo, hi, p, s, *keys) for i, ((p, lo, hi), s) in enumerate(zip(bounds, state, strict=True))]

    def summaries(self, fn: Callable[..., Any], *args: Any, state: Sequence[Any] | None = None) -> list[Any]:
        return list(_shards.compute(*self._tasks(fn, args, state, None)))

    def estep(self, fn: Callable[..., tuple[Any, ...]], *args: Any, state: Sequence[Any] | None = None,
              n_sum: int = 1, keep: bool = False, gather: bool = False
              ) -> tuple[tuple[Any, ...], list[Any] | None, list[Any] | None]:
        outs = self._tasks(fn, args, state, n_sum + int(keep) + int(gather))
        totals = [_shards.tree_sum([o[j] for o in outs]) for j in range(n_sum)]
        kept: list[Any] | None = None
        if keep:
            # the new states stay with their shards (each persisted on its own); the sums are reduced in a tree of
            # tasks on the workers, and only the totals reach the driver
            persisted = _shards.persist([o[n_sum] for o in outs] + totals)
            kept, totals = persisted[: len(outs)], persisted[len(outs):]
        gathered: list[Any] | None = None
        if gather:
            computed = _shards.compute(totals, [o[n_sum + int(keep)] for o in outs])
            sums, gathered = tuple(computed[0]), list(computed[1])
        else:
            sums = tuple(_shards.compute(*totals))
        return sums, kept, gathered

    def start(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        task = _shards.delayed(fn, pure=True)
        return [task(p, *args) for p in self._prepared]


def shard_data(X: Any, prepare_shard: Callable[..., Any], *args: Any, persist: bool = True) -> ShardSet:
    """The data back-end for ``X``: ``prepare_shard(rows, *args)`` once per shard (module docstring).

    In memory, ``prepare_shard(X, *args)`` is called here and its DataErrors propagate unchanged; for a dask array
    each row chunk is prepared in its own task (kept where it was computed when ``persist``).
    """
    if _shards.is_dask_array(X):
        return _DaskShards(X, prepare_shard, args, persist)
    shape = getattr(X, "shape", None)
    return _LocalShards(prepare_shard(X, *args), int(shape[0]) if shape is not None and len(shape) else 0)
