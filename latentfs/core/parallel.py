"""How a sampler's chains run, and optimiser restarts in other processes (``chain_method``, NumPyro's name).

* ``"auto"`` (the default): chains in threads of this process where the engine's steps run in compiled code
  that releases the GIL (collapsed Gibbs for DCA on a large corpus) and torch may use two or more threads
  (``torch.get_num_threads()``; ``torch.set_num_threads(1)`` keeps one core); otherwise one after another.
  Optimiser restarts run one after another.
* ``"sequential"``: chains and restarts one after another.
* ``"threads"``: every sampler's chains in threads of this process, as many at once as there are cores
  (restarts one after another). Each chain computes exactly what it computes alone, so the draws are the
  sequential ones. It pays only where the steps release the GIL.
* ``"parallel"``: chains, or restarts, each in a process of its own.

``latentfs.fit(..., chain_method="parallel")`` runs a sampler's chains, or an optimiser's restarts, each in a
process of its own: on the active ``dask.distributed`` Client when one exists (so the chains go to the
cluster), else in a pool of local worker processes (joblib's loky executor, which scikit-learn ships; the pool
is reused between fits and closes after a minute idle). The engines do not change: :mod:`latentfs.core.driver`
sends each chain's ``init``/``step``/``collect`` functions (closures are serialised by value with cloudpickle)
with the chain's own generator, and every chain keeps its accumulators in its own state, so a chain computes
exactly what it computes in the sequential loop: the draws are identical for the same seed.

What differs from ``"sequential"``:

* warnings raised inside a chain are recorded there and raised again in the calling process, once each;
* Ctrl-C reaches the worker processes too (they share the terminal's process group); each returns the
  draws it had made, as the sequential loop does. A chain on a remote cluster cannot be interrupted: it is
  cancelled, and the chains that had finished are kept;
* on the local pool the first chain (restart) runs in the calling process while the others run in workers;
* each local worker runs torch and BLAS with ``torch.get_num_threads() // (workers + 1)`` threads (at least one).
  Bit-for-bit equality with the sequential loop holds when both run with the same number of threads (one
  thread in the calling process gives one in each worker); otherwise sums may be reduced in another order.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from latentfs.core.errors import DataError

__all__ = [
    "CHAIN_METHODS", "available_cores", "chain_method", "check_chain_method", "current_chain_method", "run_tasks",
]

CHAIN_METHODS = ("auto", "sequential", "threads", "parallel")
_METHOD: ContextVar[str] = ContextVar("latentfs_chain_method", default="auto")
_IDLE_TIMEOUT = 60  # seconds a local worker pool waits for the next fit before its processes exit


def check_chain_method(value: Any) -> str:
    """``chain_method`` must be one of :data:`CHAIN_METHODS`."""
    if not isinstance(value, str) or value not in CHAIN_METHODS:
        raise DataError(
            f"chain_method must be one of {list(CHAIN_METHODS)}; got {value!r}. Use 'auto' (the default), "
            "'sequential' to run chains one after another, 'threads' to run them in threads of this process, "
            "or 'parallel' to run chains (and restarts) in separate processes."
        )
    return value


@contextlib.contextmanager
def chain_method(value: str) -> Iterator[None]:
    """Within the block, samplers run their chains and optimisers their restarts as ``value`` says."""
    token = _METHOD.set(check_chain_method(value))
    try:
        yield
    finally:
        _METHOD.reset(token)


def current_chain_method() -> str:
    """The chain method in force (``"auto"`` unless inside :func:`chain_method`)."""
    return _METHOD.get()


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _in_worker(fn: Callable[..., Any], args: tuple[Any, ...], n_threads: int) -> tuple[Any, list[Any]]:
    """Run ``fn(*args)`` in a worker with ``n_threads`` torch threads, recording its warnings."""
    import torch
    from threadpoolctl import threadpool_limits

    limits = contextlib.nullcontext() if n_threads <= 0 else threadpool_limits(n_threads)
    if n_threads > 0:
        torch.set_num_threads(n_threads)
    with limits, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [(w.category, str(w.message)) for w in caught]


def _reraise(records: list[Any], seen: set[tuple[Any, str]]) -> None:
    for category, message in records:
        if (category, message) not in seen:
            seen.add((category, message))
            warnings.warn(message, category, stacklevel=4)


def run_tasks(
    fn: Callable[..., Any], args: Sequence[tuple[Any, ...]], on_done: Callable[[int, Any], None]
) -> bool:
    """Run ``fn(*args[i])`` for every i; call ``on_done(i, result)`` in this process as each finishes (in any
    order). Returns True when Ctrl-C ended the wait: the tasks that had returned (local workers return what
    they had when interrupted) have been passed to ``on_done``, the others are cancelled.

    On the local worker pool, task 0 runs in this process while the others run in workers: this process
    would otherwise only wait, and a worker's start (a new Python importing torch and latentfs, a few
    seconds) then overlaps task 0 instead of delaying every task. On a Dask cluster every task goes to it.
    """
    from latentfs.core.shards import distributed_client

    seen: set[tuple[Any, str]] = set()
    client = distributed_client()
    if client is not None:
        return _run_on_client(client, fn, args, on_done, seen)
    from joblib.externals.loky import get_reusable_executor

    workers = max(1, min(len(args) - 1, available_cores()))
    import torch

    threads = max(1, torch.get_num_threads() // (workers + 1))
    executor = get_reusable_executor(max_workers=workers, timeout=_IDLE_TIMEOUT)
    futures = {executor.submit(_in_worker, fn, a, threads): i for i, a in enumerate(args) if i > 0}
    pending = set(futures)
    interrupted = False
    from concurrent.futures import FIRST_COMPLETED, wait

    try:  # task 0 here (it returns what it has on Ctrl-C, as the workers do)
        out, records = _in_worker(fn, args[0], 0)
        _reraise(records, seen)
        on_done(0, out)
    except KeyboardInterrupt:
        interrupted = True
    if interrupted:  # Ctrl-C outside the task's own loop: collect what the workers return, briefly
        done, pending = wait(pending, timeout=30)
        for f in pending:
            f.cancel()
        pending = set(done)

    while pending:
        try:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
        except KeyboardInterrupt:
            interrupted = True
            # The workers got the same Ctrl-C and are returning what they have; wait for them briefly.
            done, pending = wait(pending, timeout=30)
            for f in pending:
                f.cancel()
            pending = set()
        for f in done:
            exc = f.exception()
            if exc is not None:
                if isinstance(exc, KeyboardInterrupt):
                    interrupted = True
                    continue
                for g in pending:
                    g.cancel()
                raise exc
            out, records = f.result()
            _reraise(records, seen)
            on_done(futures[f], out)
    return interrupted


def _run_on_client(client: Any, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]],
                   on_done: Callable[[int, Any], None], seen: set[tuple[Any, str]]) -> bool:
    from distributed import as_completed

    futures = [client.submit(_in_worker, fn, a, 0, pure=False) for a in args]
    index = {f.key: i for i, f in enumerate(futures)}
    try:
        for f in as_completed(futures):
            out, records = f.result()
            _reraise(records, seen)
            on_done(index[f.key], out)
    except KeyboardInterrupt:  # the chains that had finished were passed on above; cancel the rest
        for f in futures:
            if not f.done():
                f.cancel()
        return True
    return False
