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

import functools
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
        reduce: str = "tree",
    ) -> tuple[tuple[Any, ...], list[Any] | None, list[Any] | None]:
        """Run ``fn`` on every shard and combine: ``(sums, kept, gathered)``.

        ``fn(shard, *args)`` (or ``fn(shard, s, *args)`` with ``state``) returns a tuple whose first ``n_sum``
        items are additive over shards (arrays, tensors, floats, or dicts of them added key by key: summed; one
        shard's are returned as they are), followed by the shard's new state when ``keep`` (returned as a list,
        kept where it was computed: pass it back as ``state``) and then a per-shard value to bring back when
        ``gather`` (returned as a computed list, in shard order).

        ``reduce`` says where several shards' sums are added: ``"tree"`` (default) in a binary tree of tasks on the
        workers, next to the shards, so only the total travels (statistics as large as the model, e.g. K × J topic
        counts); ``"driver"``, brought back and added in shard order on the driver (statistics much smaller than a
        task's overhead: no addition tasks).
        """
        raise NotImplementedError

    def start(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """Each shard's starting state, ``fn(shard, *args)``, kept where it is computed (lazily on dask)."""
        raise NotImplementedError

    def update(self, fn: Callable[..., Any], *args: Any) -> None:
        """Prepare every shard further, ``shard = fn(shard, *args)``, where it is (persisted as the set is): a second
        preparation that needs what only the whole data tell (the columns' centring and scale, from
        :meth:`summaries`), without reading the source rows again."""
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
              n_sum: int = 1, keep: bool = False, gather: bool = False, reduce: str = "tree"
              ) -> tuple[tuple[Any, ...], list[Any] | None, list[Any] | None]:
        out = self._call(fn, args, state)
        kept = [out[n_sum]] if keep else None
        gathered = [out[n_sum + int(keep)]] if gather else None
        return tuple(out[:n_sum]), kept, gathered

    def start(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        return [fn(self._shard, *args)]

    def update(self, fn: Callable[..., Any], *args: Any) -> None:
        self._shard = fn(self._shard, *args)


class _DaskShards(ShardSet):
    """The dask back-end: the row chunks of a dask array, one task per shard (module docstring)."""

    def __init__(self, X: Any, prepare_shard: Callable[..., Any], args: tuple[Any, ...], persist: bool) -> None:
        blocks, starts = _shards.row_shards(X)
        self.starts = starts
        self.stops = starts[1:] + [int(X.shape[0])]
        self.n_shards, self.is_local = len(blocks), False
        task = _shards.delayed(_shards.shard_task, pure=True)
        prepare = functools.partial(_sized, prepare_shard)
        prepared = [task(prepare, i, lo, hi, block, *args)
                    for i, (block, lo, hi) in enumerate(zip(blocks, self.starts, self.stops, strict=True))]
        self._persist = persist
        self._prepared = _shards.persist(prepared) if persist else prepared

    def _tasks(self, fn: Callable[..., Any], args: tuple[Any, ...], state: Sequence[Any] | None,
               nout: int | None) -> list[Any]:
        keys = tuple(_shards.wrap(_host(a)) for a in args)  # one copy of each broadcast argument per pass
        task = _shards.delayed(_shards.shard_task, nout=nout, pure=False)
        bounds = zip(self._prepared, self.starts, self.stops, strict=True)
        fn = functools.partial(_on_shard, fn)
        if state is None:
            return [task(fn, i, lo, hi, p, *keys) for i, (p, lo, hi) in enumerate(bounds)]
        return [task(fn, i, lo, hi, p, s, *keys) for i, ((p, lo, hi), s) in enumerate(zip(bounds, state, strict=True))]

    def summaries(self, fn: Callable[..., Any], *args: Any, state: Sequence[Any] | None = None) -> list[Any]:
        return list(_shards.compute(*self._tasks(fn, args, state, None)))

    def estep(self, fn: Callable[..., tuple[Any, ...]], *args: Any, state: Sequence[Any] | None = None,
              n_sum: int = 1, keep: bool = False, gather: bool = False, reduce: str = "tree"
              ) -> tuple[tuple[Any, ...], list[Any] | None, list[Any] | None]:
        if reduce not in ("tree", "driver"):
            raise ValueError(f"reduce must be 'tree' or 'driver'; got {reduce!r}")
        rest = int(keep) + int(gather)
        # each task returns its additive outputs as one tuple: one tree of n_shards − 1 additions sums them all, or
        # the driver adds the tuples
        outs = self._tasks(functools.partial(_grouped, fn, n_sum), args, state, 1 + rest)
        parts = [o[0] for o in outs]
        to_sum = [_shards.tree_sum(parts)] if reduce == "tree" else parts
        kept: list[Any] | None = None
        if keep:
            # the new states stay with their shards (each persisted on its own), computed in the same pass as the
            # sums; only the sums (a tree's total, or each shard's) reach the driver
            persisted = _shards.persist([o[1] for o in outs] + to_sum)
            kept, to_sum = persisted[: len(outs)], persisted[len(outs):]
        gathered: list[Any] | None = None
        if gather:
            summed, got = _shards.compute(to_sum, [o[rest] for o in outs])
            gathered = list(got)
        else:
            (summed,) = _shards.compute(to_sum)
        return tuple(_add_in_order(list(summed))), kept, gathered

    def update(self, fn: Callable[..., Any], *args: Any) -> None:
        task = _shards.delayed(_shards.shard_task, pure=True)
        bounds = zip(self._prepared, self.starts, self.stops, strict=True)
        again = functools.partial(_sized, functools.partial(_on_shard, fn))
        updated = [task(again, i, lo, hi, p, *args) for i, (p, lo, hi) in enumerate(bounds)]
        self._prepared = _shards.persist(updated) if self._persist else updated

    def start(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        task = _shards.delayed(functools.partial(_on_shard, fn), pure=True)
        return [task(p, *args) for p in self._prepared]


def _nbytes(obj: Any, depth: int = 0) -> int:
    """The bytes held by ``obj``'s arrays (numpy, torch, scipy.sparse), found through containers and attributes."""
    import sys

    if isinstance(getattr(obj, "nbytes", None), int):  # numpy arrays
        return int(obj.nbytes)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return int(obj.element_size() * obj.nelement())
    if depth >= 4:
        return 0
    if isinstance(obj, dict):
        return sum(_nbytes(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        if len(obj) > 64 and _nbytes(obj[0], depth + 1) == 0:  # names and other small objects: not walked
            return 0
        return sum(_nbytes(v, depth + 1) for v in obj)
    fields = getattr(obj, "__dict__", None)
    if fields is None and hasattr(obj, "__slots__"):
        fields = {name: getattr(obj, name, None) for name in obj.__slots__}
    return sum(_nbytes(v, depth + 1) for v in fields.values()) if fields else 0


class _Sized:
    """A prepared shard with the bytes its arrays hold, which dask's ``sizeof`` reads (``__sizeof__``): the
    scheduler then runs a shard's tasks where the shard is and moves the (smaller) parameters, instead of moving an
    object it would otherwise take for a few bytes."""

    __slots__ = ("value", "nbytes")

    def __init__(self, value: Any) -> None:
        self.value, self.nbytes = value, _nbytes(value)

    def __sizeof__(self) -> int:
        return self.nbytes


def _sized(fn: Callable[..., Any], *args: Any) -> _Sized:
    """``fn(*args)`` as a :class:`_Sized` (a shard prepared in its task)."""
    return _Sized(fn(*args))


def _on_shard(fn: Callable[..., Any], shard: _Sized, *args: Any) -> Any:
    """``fn`` called on the prepared shard itself."""
    return fn(shard.value, *args)


def _add_in_order(parts: list[Any]) -> Any:
    """The parts added one after another, in shard order."""
    total = parts[0]
    for part in parts[1:]:
        total = _shards._add(total, part)
    return total


def _grouped(fn: Callable[..., tuple[Any, ...]], n_sum: int, *args: Any) -> tuple[Any, ...]:
    """``fn(*args)`` with its first ``n_sum`` outputs grouped into one tuple (added item by item)."""
    out = fn(*args)
    return (tuple(out[:n_sum]), *out[n_sum:])


def shard_data(X: Any, prepare_shard: Callable[..., Any], *args: Any, persist: bool = True) -> ShardSet:
    """The data back-end for ``X``: ``prepare_shard(rows, *args)`` once per shard (module docstring).

    In memory, ``prepare_shard(X, *args)`` is called here and its DataErrors propagate unchanged; for a dask array
    each row chunk is prepared in its own task (kept where it was computed when ``persist``).
    """
    if _shards.is_dask_array(X):
        return _DaskShards(X, prepare_shard, args, persist)
    shape = getattr(X, "shape", None)
    return _LocalShards(prepare_shard(X, *args), int(shape[0]) if shape is not None and len(shape) else 0)
