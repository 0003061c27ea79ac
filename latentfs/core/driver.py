"""The shared loops: one for iterative optimisers (EM, VB, MAP), one for samplers.

Engines supply pure functions; the loops own convergence, restarts, progress bars, interruption
(Ctrl-C returns what was computed so far, with a warning) and the non-convergence warning
(STYLE.md, item 3).

* :func:`run_optimizer` drives ``step(state) -> (state, objective)`` where ``objective`` is the value
  of the maximised objective (bound, log-likelihood, log posterior) *at the state passed in*.
* :func:`run_sampler` drives ``init(generator) -> state`` and ``step(state, generator) -> (state, lp)``,
  collecting ``collect(state) -> {site: array}`` after warm-up every ``thin`` steps, chain after chain.
"""

from __future__ import annotations

import contextvars
import itertools
import math
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from latentfs.core.errors import DataError
from latentfs.core.memory import _gib, available_memory, check_draw_memory  # noqa: F401

if TYPE_CHECKING:
    from latentfs.core.convergence_warning import ConvergenceWarning

__all__ = [
    "ConvergenceWarning",
    "DivergedFitError",
    "StreamEnd",
    "InterruptedFitWarning",
    "OptimizerRun",
    "SamplerRun",
    "chain_generators",
    "make_generator",
    "run_optimizer",
    "run_sampler",
    "best_run",
    "run_restarts",
    "available_memory",
    "check_draw_memory",
    "dask_dashboard",
    "note_above_bar",
]


def __getattr__(name: str) -> Any:
    # ConvergenceWarning subclasses scikit-learn's, and importing scikit-learn costs 0.7 s: the class lives in
    # latentfs.core.convergence_warning, imported on the first read of driver.ConvergenceWarning (PEP 562).
    if name == "ConvergenceWarning":
        from latentfs.core.convergence_warning import ConvergenceWarning

        return ConvergenceWarning
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class InterruptedFitWarning(UserWarning):
    """A fit was interrupted (Ctrl-C); the result holds what was computed so far."""


def make_generator(seed: int | torch.Generator | None, device: str | torch.device = "cpu") -> torch.Generator:
    """A torch generator from ``seed`` (an int, an existing torch generator, a numpy Generator or
    SeedSequence, or None for a fresh random seed)."""
    if isinstance(seed, torch.Generator):
        return seed
    gen = torch.Generator(device=device)
    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    elif isinstance(seed, np.random.Generator):
        seed = int(seed.integers(0, 2**63 - 1))
    elif isinstance(seed, np.random.SeedSequence):
        seed = int(seed.generate_state(1, dtype=np.uint64)[0] % 2**63)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        from latentfs.core.data import DataError

        raise DataError(f"seed must be an int, a torch.Generator or None; got {seed!r}.")
    gen.manual_seed(int(seed))
    return gen


def chain_generators(
    seed: int | torch.Generator | None, n: int, device: str | torch.device = "cpu"
) -> list[torch.Generator]:
    """``n`` independent generators derived from one seed (numpy SeedSequence spawning)."""
    if isinstance(seed, torch.Generator):
        base = int(torch.randint(0, 2**62, (1,), generator=seed).item())
    elif isinstance(seed, np.random.Generator):
        base = int(seed.integers(0, 2**62))
    elif isinstance(seed, np.random.SeedSequence):
        base = int(seed.generate_state(1, dtype=np.uint64)[0])
    elif seed is None:
        base = None
    else:
        base = int(seed)
    children = np.random.SeedSequence(base).spawn(n)
    return [make_generator(int(c.generate_state(1, dtype=np.uint64)[0] % 2**63), device) for c in children]


def host_generator(generator: torch.Generator) -> torch.Generator:
    """A CPU generator with ``generator``'s seed (``generator`` itself on the CPU): random starts are drawn on the
    host and moved to the fit's device, so a fit on a GPU starts where the same seed's CPU fit starts (the CUDA
    stream of a seed is another stream)."""
    if generator.device.type == "cpu":
        return generator
    return torch.Generator().manual_seed(generator.initial_seed())


def dask_dashboard(data: Any) -> str | None:
    """The link to the Dask dashboard of the current ``dask.distributed`` Client when ``data`` is a dask collection
    (its tasks run there); None otherwise: in-memory data, no Client, or a scheduler without a dashboard. Imports
    neither dask nor distributed: no dask object and no Client can exist unless they were loaded already."""
    dask = sys.modules.get("dask")
    distributed = sys.modules.get("distributed")
    if dask is None or distributed is None or not dask.is_dask_collection(data):
        return None
    try:
        link = distributed.default_client().dashboard_link  # ValueError when no Client has started
    except Exception:  # a courtesy link: whatever asking the scheduler raises, the fit goes on without it
        return None
    return link if isinstance(link, str) and link else None


class _Note:
    """A line waiting to be written above a fit's first shown progress bar."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.written = False


#: the note of the fit running in this context (:func:`note_above_bar`)
_BAR_NOTE: contextvars.ContextVar[_Note | None] = contextvars.ContextVar("latentfs_bar_note", default=None)


@contextmanager
def note_above_bar(line: str | None) -> Iterator[None]:
    """Write ``line`` once, above the first progress bar shown inside the block, before its first iteration (a fit
    whose restarts each have a bar writes it above the first); nothing when no bar is shown or ``line`` is None.
    The pipeline passes the Dask dashboard's link (:func:`dask_dashboard`) this way. A fit run inside another
    fit's block (a start from a sub-fit) shares the outer note, so the line is written once."""
    if line is None or _BAR_NOTE.get() is not None:
        yield
        return
    token = _BAR_NOTE.set(_Note(line))
    try:
        yield
    finally:
        _BAR_NOTE.reset(token)


def _progress(total: int | None, desc: str, show: bool | None) -> Any:
    """The fit's progress bar. ``show=None`` (the default): a bar in a terminal and in a Jupyter kernel, none
    otherwise (CI logs, pipes); ``False`` never, ``True`` always. In a kernel the bar is a widget when ipywidgets
    is installed (the ``notebook`` extra) and text on stderr otherwise, with no "IProgress not found" warning."""
    from latentfs._notebook import in_kernel, widgets_available

    kernel = in_kernel()
    if show is None:
        show = kernel or sys.stderr.isatty()
    widget = bool(show and kernel and widgets_available())
    if widget:
        from tqdm.notebook import tqdm as bar
    else:
        from tqdm.std import tqdm as bar
    # In a kernel the finished bar stays under the cell (how many iterations, the last objective: what a notebook
    # reader looks for); a terminal's bar clears itself so the prompt stays clean.
    out = bar(total=total, desc=desc, disable=not show, leave=kernel, dynamic_ncols=True)
    note = _BAR_NOTE.get()
    if show and note is not None and not note.written:
        # Through the bar, which clears and redraws itself around the line; a text bar's line goes where the bar
        # is drawn (stderr), a widget's under the cell's output. Not in the bar's desc: warnings quote the desc.
        out.write(note.line, file=None if widget else sys.stderr)
        note.written = True
    return out


def _close_progress(bar: Any, finished: bool) -> None:
    """Close the bar. A run that ``finished`` (it converged before ``max_iter``, or its stream ended) ends its bar
    full at the iterations it took, so a notebook widget is drawn as a success; tqdm paints a widget closed
    short of its total red, the sign it keeps for a run that was interrupted or failed."""
    if finished and bar.total is not None and not bar.disable and bar.n < bar.total:
        bar.total = bar.n
        container = getattr(bar, "container", None)  # tqdm.notebook: (label, progress, text) widgets
        if container is not None:
            container.children[1].max = bar.n
        bar.refresh()
    bar.close()


@dataclass
class OptimizerRun:
    """What :func:`run_optimizer` returns.

    Attributes
    ----------
    state : the last state (the one the last objective value was *not* yet computed at).
    trace : ndarray (n_iter,), the objective at each iteration's input state.
    converged : bool, or None for a run without a stopping rule; interrupted : bool; n_iter : int.
    """

    state: Any
    trace: np.ndarray
    converged: bool | None
    interrupted: bool
    n_iter: int
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def objective(self) -> float:
        return float(self.trace[-1]) if self.trace.size else -math.inf


class StreamEnd(Exception):  # noqa: N818 - an event, not an error
    """Raised by an optimiser's ``step`` when the stream it reads has ended (online VB and stepwise EM over an
    iterator of mini-batches): :func:`run_optimizer` ends the run there, as finished, not interrupted. A dedicated
    exception rather than ``StopIteration``, so that a ``StopIteration`` leaking from the arithmetic is never
    mistaken for the end of the data."""


class DivergedFitError(DataError, FloatingPointError):
    """The objective of a fit became NaN or infinite: a :class:`~latentfs.core.data.DataError` (the data or the
    options cannot be fitted as given; the message has the remedy), and still a ``FloatingPointError`` for the
    engines that catch that to add a family-specific remedy."""


def run_optimizer(
    state: Any,
    step: Callable[[Any], tuple[Any, float]],
    *,
    max_iter: int | None,
    tol: float | None,
    min_iter: int = 2,
    desc: str = "fit",
    progress: bool | None = None,
    warn: bool = True,
    remedies: str = "raise max_iter, loosen tol, or try another initialisation",
    callback: Callable[[int, Any, float], None] | None = None,
    settled: Callable[[Any], bool] | None = None,
) -> OptimizerRun:
    """Iterate ``step`` until the relative change of the objective is below ``tol``.

    Convergence is declared when ``|f_t - f_{t-1}| <= tol * |f_t|`` and, when ``settled`` is given,
    ``settled(state)`` holds: an engine passes it to refuse a stop where the objective only *looks*
    converged, such as the slow plateau near a symmetric saddle (every component alike) that a fit from a
    near-uniform start crosses before the components separate. Ctrl-C stops the loop and returns the state
    reached so far (with an :class:`InterruptedFitWarning`).

    A run over a stream (online VB: one step per mini-batch) has no stopping rule: ``tol=None`` runs ``max_iter``
    steps, or (``max_iter=None``) until ``step`` raises :class:`StreamEnd` because its input has ended; such a run
    returns ``converged=None`` and never warns.
    """
    trace: list[float] = []
    converged = interrupted = finished = False
    bar = _progress(max_iter, desc, progress)
    try:
        for it in range(max_iter) if max_iter is not None else itertools.count():
            try:
                new_state, value = step(state)
            except StreamEnd:  # the stream the steps read has ended
                break
            value = float(value)
            if not math.isfinite(value):
                raise DivergedFitError(
                    f"{desc}: the objective became {value} at iteration {it}; the fit diverged. Check the "
                    "input scale, raise the prior strength, or use float64."
                )
            trace.append(value)
            state = new_state
            bar.update(1)
            if callback is not None:
                callback(it, state, value)
            if it >= 1 and tol is not None:
                change = abs(trace[-1] - trace[-2]) / max(abs(trace[-1]), 1e-300)
                bar.set_postfix(objective=f"{value:.6g}", rel_change=f"{change:.2e}", refresh=False)
                if it + 1 >= min_iter and change <= tol and (settled is None or settled(state)):
                    converged = True
                    break
        finished = True
    except KeyboardInterrupt:
        interrupted = True
        warnings.warn(
            f"{desc} interrupted after {len(trace)} iterations; returning the state reached so far.",
            InterruptedFitWarning,
            stacklevel=2,
        )
    finally:
        _close_progress(bar, finished)
    if warn and tol is not None and not converged and not interrupted:
        from latentfs.core.convergence_warning import ConvergenceWarning

        warnings.warn(
            f"{desc} did not converge in {max_iter} iterations (tol={tol:g}, last relative change "
            f"{_last_change(trace):.3g}); {remedies}.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return OptimizerRun(state, np.asarray(trace), None if tol is None else converged, interrupted, len(trace))


def _last_change(trace: list[float]) -> float:
    if len(trace) < 2:
        return math.nan
    return abs(trace[-1] - trace[-2]) / max(abs(trace[-1]), 1e-300)


def best_run(runs: list[OptimizerRun], key: Callable[[OptimizerRun], Any] | None = None) -> OptimizerRun:
    """The run with the highest final objective (or highest ``key(run)``, e.g. a validation score)."""
    return max(runs, key=key or (lambda r: r.objective))


def _call_with_index(fn: Callable[[int], Any], r: int) -> Any:
    return fn(r)


def run_restarts(
    n_init: int,
    run_one: Callable[[int], OptimizerRun],
    *,
    warn: bool = True,
    desc: str = "fit",
    remedies: str = "raise max_iter, loosen tol, or raise n_init",
    key: Callable[[OptimizerRun], Any] | None = None,
) -> tuple[OptimizerRun, list[OptimizerRun]]:
    """The one restart loop: ``run_one(r)`` for r = 0, 1, … (each calling :func:`run_optimizer` with
    ``warn=False``), the best run kept, and at most one :class:`ConvergenceWarning` per fit (for the run
    that is kept, as scikit-learn does). Ctrl-C during a restart ends the whole fit: the restarts not yet
    begun are skipped and the best of the runs so far is returned (marked ``interrupted``). ``key`` ranks the
    runs (default: the final objective). Under ``chain_method="parallel"`` (:mod:`latentfs.core.parallel`)
    the restarts run in separate processes; each restart draws its start from its own index ``r``, so the
    runs, and the one kept, are those of the sequential loop.
    """
    from latentfs.core.parallel import current_chain_method, run_tasks

    runs: list[OptimizerRun] = []
    if current_chain_method() == "parallel" and int(n_init) > 1:
        arrived: dict[int, OptimizerRun] = {}
        stopped = run_tasks(_call_with_index, [(run_one, r) for r in range(int(n_init))],
                            lambda r, run: arrived.__setitem__(r, run))
        if not arrived:
            raise KeyboardInterrupt(f"{desc} interrupted before any restart finished; nothing to return.")
        for r in sorted(arrived):  # in restart order, as the sequential loop keeps them
            arrived[r].info.setdefault("restart", r)
            runs.append(arrived[r])
        interrupted = stopped or any(run.interrupted for run in runs)
    else:
        for r in range(int(n_init)):
            run = run_one(r)
            run.info.setdefault("restart", r)
            runs.append(run)
            if run.interrupted:
                break
        interrupted = runs[-1].interrupted
    best = best_run(runs, key)
    if interrupted:
        best.interrupted = True
    if warn and best.converged is False and not best.interrupted:
        from latentfs.core.convergence_warning import ConvergenceWarning

        warnings.warn(
            f"{desc} did not converge in {best.n_iter} iterations (best of {len(runs)} start(s), last relative "
            f"change {_last_change(list(best.trace)):.3g}); {remedies}.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return best, runs


@dataclass
class SamplerRun:
    """What :func:`run_sampler` returns.

    Attributes
    ----------
    draws : dict site -> ndarray (chain, draw, *site_shape)
    trace : ndarray (chain, n_steps), the ``lp`` reported by each step (warm-up included).
    interrupted : bool; n_draws : int (per chain, equal across chains).
    chain_method : how the chains ran: "sequential", "threads" or "parallel".
    """

    draws: dict[str, np.ndarray]
    trace: np.ndarray
    interrupted: bool
    n_draws: int
    final_states: list[Any]
    chain_method: str = "sequential"

    def kept_trace(self, num_warmup: int, thin: int) -> np.ndarray:
        """The ``lp`` of the kept sweeps, (chain, draw): after the warm-up, every ``thin``-th, as many as the draws
        (the ``sample_stats`` a sampler exports beside its draws)."""
        return self.trace[:, num_warmup:][:, thin - 1 :: thin][:, : self.n_draws]


@dataclass
class _ChainRecord:
    """What one chain has made so far: its lp per step, its last state, its kept draws and their number."""

    lps: list[float] = field(default_factory=list)
    final: Any = None
    count: int = 0
    draws: dict[str, np.ndarray] | None = None
    interrupted: bool = False


def _chain_loop(
    record: _ChainRecord,
    init: Callable[[torch.Generator], Any],
    step: Callable[[Any, torch.Generator], tuple[Any, float]],
    collect: Callable[[Any], dict[str, np.ndarray]],
    gen: torch.Generator,
    num_warmup: int,
    num_samples: int,
    thin: int,
    keep: Callable[[dict[str, np.ndarray], int], None],
    tick: Callable[[], None],
    stop: threading.Event | None = None,
) -> None:
    """One chain: ``num_warmup + num_samples * thin`` steps, ``keep(draw, i)`` for the i-th kept draw; the
    record is current after every step, so an interruption leaves it holding what was made. With ``stop``
    (chains in threads), the chain ends after the step during which it was set."""
    if stop is not None and stop.is_set():
        return
    state = init(gen)
    record.final = state
    for t in range(num_warmup + num_samples * thin):
        if stop is not None and stop.is_set():
            record.interrupted = True
            return
        state, lp = step(state, gen)
        record.final = state
        record.lps.append(float(lp))
        tick()
        if t >= num_warmup and (t - num_warmup + 1) % thin == 0:
            keep({site: np.asarray(v) for site, v in collect(state).items()}, record.count)
            record.count += 1


def _remote_chain(
    init: Callable[[torch.Generator], Any],
    step: Callable[[Any, torch.Generator], tuple[Any, float]],
    collect: Callable[[Any], dict[str, np.ndarray]],
    gen: torch.Generator,
    num_chains: int,
    num_warmup: int,
    num_samples: int,
    thin: int,
    memory_budget: float | None,
    desc: str,
) -> _ChainRecord:
    """One chain in a worker process (``chain_method="parallel"``): its draws in arrays of its own; Ctrl-C
    returns what it had made."""
    record = _ChainRecord()

    def keep(sample: dict[str, np.ndarray], i: int) -> None:
        if record.draws is None:
            check_draw_memory(sample, num_chains, num_samples, memory_budget, desc)
            record.draws = {site: np.empty((num_samples, *v.shape), dtype=v.dtype) for site, v in sample.items()}
        for site, value in sample.items():
            record.draws[site][i] = value

    try:
        _chain_loop(record, init, step, collect, gen, num_warmup, num_samples, thin, keep, lambda: None)
    except KeyboardInterrupt:
        record.interrupted = True
    return record


def run_sampler(
    init: Callable[[torch.Generator], Any],
    step: Callable[[Any, torch.Generator], tuple[Any, float]],
    collect: Callable[[Any], dict[str, np.ndarray]],
    *,
    num_chains: int,
    num_warmup: int,
    num_samples: int,
    thin: int = 1,
    seed: int | torch.Generator | None = None,
    device: str | torch.device = "cpu",
    desc: str = "sample",
    progress: bool | None = None,
    memory_budget: float | None = None,
    threadable: bool = False,
) -> SamplerRun:
    """Run ``num_chains`` chains, one after another, each in a thread of this process
    (``chain_method="threads"``) or each in a process of its own (``"parallel"``; :mod:`latentfs.core.parallel`);
    Ctrl-C keeps the draws made so far.

    ``threadable``: the engine's steps spend their time in code that releases the GIL (compiled kernels), so
    under ``chain_method="auto"`` (the default) the chains run in threads when there are at least two of
    them and torch may use at least two threads (``torch.get_num_threads()``); otherwise one after another.

    Each chain has its own generator (spawned from ``seed``) and keeps everything it accumulates in its own
    state (``init``'s return value), so the draws do not depend on how the chains are run. At the first kept
    draw (``collect`` is called only for kept draws), the bytes of all requested draws are estimated from it
    and the run is refused with the remedy when they exceed ``memory_budget`` (default: half the available
    memory); the draws are written into arrays allocated once. After an interruption every chain is
    truncated to the number of draws of the shortest chain that has any (chains with none are dropped), so
    the result stays rectangular.
    """
    from latentfs.core.data import DataError
    from latentfs.core.parallel import available_cores, current_chain_method, run_tasks

    for name, v, low in (("num_chains", num_chains, 1), ("num_warmup", num_warmup, 0),
                         ("num_samples", num_samples, 1), ("thin", thin, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise DataError(f"{name} must be an integer ≥ {low}; got {v!r}.")
    gens = chain_generators(seed, num_chains, device)
    steps_per_chain = num_warmup + num_samples * thin
    storage: dict[str, np.ndarray] = {}
    records = [_ChainRecord() for _ in range(num_chains)]
    interrupted = False
    bar = _progress(num_chains * steps_per_chain, desc, progress)
    method = current_chain_method()
    workers = min(num_chains, torch.get_num_threads())
    if method == "auto":
        method = "threads" if threadable and workers > 1 else "sequential"
    elif method == "threads":  # asked for: as many threads as chains and cores
        workers = min(num_chains, available_cores())
    if num_chains == 1:
        method = "sequential"
    lock = threading.Lock()  # chains in threads share the storage's allocation and the progress bar

    def allocate(sample: dict[str, np.ndarray]) -> None:
        # The first kept draw sizes the whole run: refuse before allocating it.
        check_draw_memory(sample, num_chains, num_samples, memory_budget, desc)
        storage.update({site: np.empty((num_chains, num_samples, *v.shape), dtype=v.dtype)
                        for site, v in sample.items()})

    def keeper(c: int) -> Callable[[dict[str, np.ndarray], int], None]:
        def keep(sample: dict[str, np.ndarray], i: int) -> None:
            if not storage:
                with lock:
                    if not storage:
                        allocate(sample)
            for site, value in sample.items():
                storage[site][c, i] = value

        return keep

    def tick() -> None:
        with lock:
            bar.update(1)

    def arrived(c: int, record: _ChainRecord) -> None:  # a whole chain from a worker
        records[c] = record
        if record.draws is not None and record.count:
            if not storage:
                allocate({site: v[0] for site, v in record.draws.items()})
            for site, value in record.draws.items():
                storage[site][c, : record.count] = value[: record.count]
        record.draws = None
        bar.update(len(record.lps))

    try:
        if method == "parallel":
            interrupted = run_tasks(_remote_chain, [
                (init, step, collect, gens[c], num_chains, num_warmup, num_samples, thin, memory_budget, desc)
                for c in range(num_chains)], arrived)
            interrupted = interrupted or any(r.interrupted for r in records)
        elif method == "threads":
            interrupted = _chains_in_threads(
                num_chains, workers,
                lambda c, stop: _chain_loop(records[c], init, step, collect, gens[c], num_warmup, num_samples, thin,
                                            keeper(c), tick, stop),
            )
            interrupted = interrupted or any(r.interrupted for r in records)
        else:
            for c in range(num_chains):
                _chain_loop(records[c], init, step, collect, gens[c], num_warmup, num_samples, thin, keeper(c),
                            lambda: bar.update(1))
                bar.set_postfix(chain=c, lp=f"{records[c].lps[-1]:.6g}", refresh=False)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    counts = [r.count for r in records]
    keep = [i for i, n in enumerate(counts) if n > 0]
    if not keep:
        raise KeyboardInterrupt(f"{desc} interrupted before any draw was kept; nothing to return.")
    n_draws = min(counts[i] for i in keep)
    if interrupted:
        warnings.warn(
            f"{desc} interrupted; keeping {len(keep)} chain(s) × {n_draws} draws made so far.",
            InterruptedFitWarning,
            stacklevel=2,
        )
    if len(keep) == num_chains and n_draws == num_samples:
        draws = storage
    else:
        draws = {site: arr[keep, :n_draws] for site, arr in storage.items()}
    n_steps = min(len(records[i].lps) for i in keep)
    trace = np.array([records[i].lps[:n_steps] for i in keep])
    return SamplerRun(draws, trace, interrupted, n_draws, [records[i].final for i in keep], method)


def _chains_in_threads(num_chains: int, workers: int, run_chain: Callable[[int, threading.Event], None]) -> bool:
    """``run_chain(c, stop)`` for every chain, at most ``workers`` at once, in threads of this process; True
    when interrupted. Ctrl-C (in the caller or inside a chain) sets ``stop``: every chain ends
    after its current step and keeps what it made. Another error in a chain stops the others and is raised."""
    from concurrent.futures import ThreadPoolExecutor

    stop = threading.Event()
    interrupted = False
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="latentfs-chain")
    futures = [pool.submit(run_chain, c, stop) for c in range(num_chains)]
    try:
        for f in futures:
            f.result()
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
    except BaseException:
        stop.set()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)  # after Ctrl-C: the chains finish their current step
    for f in futures:
        if isinstance(f.exception(), KeyboardInterrupt):
            interrupted = True
        elif f.exception() is not None:
            raise f.exception()  # type: ignore[misc]
    return interrupted
