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
* Ctrl-C stops every chain: each returns the draws it had made, as the sequential loop does, and the call returns
  them (or raises ``KeyboardInterrupt`` when no chain had kept a draw). The calling process passes its Ctrl-C on
  to its local workers, so a SIGINT to it alone (a notebook's interrupt button) stops them as a terminal's Ctrl-C
  to the whole process group does; a worker that has not returned ``_GRACE`` seconds later, or after a second
  Ctrl-C, is stopped and its chain dropped. A worker between tasks, or still starting, ignores Ctrl-C, so the
  pool survives it (no ``BrokenProcessPool``). A chain on a remote cluster cannot be interrupted: it is
  cancelled, and the chains that had finished are kept;
* on the local pool the first chain (restart) runs in the calling process while the others run in workers;
* each local worker runs torch and BLAS with ``torch.get_num_threads() // (workers + 1)`` threads (at least one).
  Bit-for-bit equality with the sequential loop holds when both run with the same number of threads (one
  thread in the calling process gives one in each worker); otherwise sums may be reduced in another order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
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
# Seconds the local workers get, after Ctrl-C, to return what they have made before they are stopped: a chain
# or an optimiser returns at its next step, unless one step runs longer in compiled code.
_GRACE = 10.0
_RESEND = 0.5


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


def _worker_start() -> None:
    """Initializer of each local worker process: ignore Ctrl-C while waiting for a task (a terminal's Ctrl-C reaches
    every process of its group, and a worker stopped between tasks would break the pool). Workers started by a fit
    hold it from their first instruction (:func:`_spawning_defers_sigint`); this covers the ones the
    pool restarts by itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # started with SIGINT blocked (_spawning_defers_sigint): drop a held one
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def _first_interrupt_only() -> Iterator[None]:
    """In a local worker, during one task: the first SIGINT raises ``KeyboardInterrupt`` (the task returns what it
    has made), later ones are ignored (the terminal's Ctrl-C and the one the calling process passes on may both
    arrive, and the second must not cut the return short)."""
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover - loky runs tasks in main
        yield
        return
    fired = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal fired
        if not fired:
            fired = True
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _in_worker(
    fn: Callable[..., Any], args: tuple[Any, ...], n_threads: int, interruptible: bool = False
) -> tuple[Any, list[Any]]:
    """Run ``fn(*args)`` in a worker with ``n_threads`` torch threads, recording its warnings; ``interruptible``:
    a local worker process, where SIGINT is ignored between tasks and raised once inside one."""
    import torch
    from threadpoolctl import threadpool_limits

    limits = contextlib.nullcontext() if n_threads <= 0 else threadpool_limits(n_threads)
    if n_threads > 0:
        torch.set_num_threads(n_threads)
    interrupts = _first_interrupt_only() if interruptible else contextlib.nullcontext()
    with interrupts, limits, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [(w.category, str(w.message)) for w in caught]


class _CtrlC:
    """While a fit waits for its local workers: Ctrl-C in the calling process is counted, passed on to the workers
    (the first time: a SIGINT to this process alone, as a notebook's interrupt sends, reaches no worker otherwise)
    and raised here as ``KeyboardInterrupt``, as Python's own handler does. Installed only in the main thread and
    only over Python's default handler."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.count = 0
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            current = signal.getsignal(signal.SIGINT)
            if current is signal.default_int_handler:
                self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _handler(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count == 1:
            self.pass_on()
        raise KeyboardInterrupt

    def pass_on(self) -> None:
        """SIGINT to every worker process of the pool (a worker between tasks ignores it)."""
        for pid in list(getattr(self.executor, "_processes", {}) or {}):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGINT)


@contextlib.contextmanager
def _spawning_defers_sigint() -> Iterator[None]:
    """SIGINT blocked (held, not lost) while submitting, which starts the pool's missing workers.

    A process inherits the signal mask through fork and exec, so a worker starts with SIGINT blocked and a Ctrl-C
    while it imports stays pending instead of killing it and breaking the pool; its initializer (:func:`_worker_start`)
    ignores SIGINT and only then unblocks it, which discards that pending one. In the calling process the held
    Ctrl-C is delivered as soon as the submission is done (loky may wait there seconds for new workers to start: an
    ignored Ctrl-C in that window was lost, and the calling process's own chain ran on)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _stop_workers(executor: Any) -> None:
    """Stop the pool's worker processes now (their tasks' results are lost); the next fit starts a new pool."""
    with contextlib.suppress(Exception):
        executor.shutdown(wait=True, kill_workers=True)


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
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    from joblib.externals.loky import get_reusable_executor

    workers = max(1, min(len(args) - 1, available_cores()))
    import torch

    threads = max(1, torch.get_num_threads() // (workers + 1))
    executor = get_reusable_executor(max_workers=workers, timeout=_IDLE_TIMEOUT, initializer=_worker_start)
    interrupted = False
    with _CtrlC(executor) as ctrl_c:
        futures: dict[Any, int] = {}
        try:
            with _spawning_defers_sigint():
                futures = {executor.submit(_in_worker, fn, a, threads, True): i for i, a in enumerate(args) if i > 0}
        except KeyboardInterrupt:
            interrupted = True  # a Ctrl-C held while the workers started: the wait below stops them
        pending = set(futures)
        try:  # task 0 here (it returns what it has on Ctrl-C, as the workers do)
            if not interrupted:
                out, records = _in_worker(fn, args[0], 0)
                _reraise(records, seen)
                on_done(0, out)
        except KeyboardInterrupt:
            interrupted = True  # Ctrl-C outside the task's own loop
        deadline: float | None = None
        while pending:
            if (interrupted or ctrl_c.count) and deadline is None:
                # Ctrl-C: tasks not begun are dropped; the running ones return what they have
                if not ctrl_c.count:  # the interrupt did not pass through the handler (another thread's, say)
                    ctrl_c.pass_on()
                interrupted = True
                deadline = time.monotonic() + _GRACE
                for f in pending:
                    f.cancel()
            # after Ctrl-C, the SIGINT is passed on again every _RESEND seconds: a worker that was still starting
            # (it ignores SIGINT until its task begins) is stopped once its chain runs
            timeout = None if deadline is None else max(0.0, min(_RESEND, deadline - time.monotonic()))
            try:
                done, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:
                interrupted = True
                done = set()
            if deadline is not None and pending:
                ctrl_c.pass_on()
            for f in done:
                if f.cancelled():
                    continue
                exc = f.exception()
                if exc is not None:
                    if isinstance(exc, KeyboardInterrupt) or (
                        (interrupted or ctrl_c.count) and isinstance(exc, BrokenProcessPool)
                    ):
                        interrupted = True  # a worker stopped by Ctrl-C (while starting, say): nothing to keep
                        continue
                    for g in pending:
                        g.cancel()
                    raise exc
                out, records = f.result()
                _reraise(records, seen)
                on_done(futures[f], out)
            if pending and deadline is not None and (time.monotonic() >= deadline or ctrl_c.count > 1):
                _stop_workers(executor)  # not back in time, or a second Ctrl-C: their chains are dropped
                pending = set()
    return interrupted or ctrl_c.count > 0


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
