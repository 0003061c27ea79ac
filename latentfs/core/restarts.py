"""Restarts of an optimiser: every start from its own generator, optional short runs with the best continued, runs
ranked by degeneracy then objective, near-ties to the earlier start (:func:`run_starts`, run by
:func:`latentfs.core.pipeline.run` for every optimiser spec and by the engines that drive their own restarts)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from latentfs.core.driver import OptimizerRun, chain_generators, run_optimizer, run_restarts

__all__ = ["SHORT_RUN_TOL", "TIE_RTOL", "Starts", "run_starts"]

#: Starts whose objectives agree to this relative tolerance reached the same optimum (often in another labelling);
#: the earlier start is kept, so that summation-order rounding (a sharded fit) picks the same one.
TIE_RTOL = 1e-9
SHORT_RUN_TOL = 1e-4


class _Rank:
    """How :func:`run_starts` ranks a run: runs that are not degenerate first, then the objective; a later start
    replaces the one kept so far only when its objective is higher by more than :data:`TIE_RTOL` (relative), so
    near-ties go to the earlier start (``max`` keeps its first item unless a later key compares greater)."""

    __slots__ = ("ok", "value")

    def __init__(self, ok: bool, value: float) -> None:
        self.ok, self.value = bool(ok), float(value)

    def __gt__(self, other: _Rank) -> bool:
        if self.ok != other.ok:
            return self.ok
        if not math.isfinite(other.value):
            return self.value > other.value
        return self.value > other.value + TIE_RTOL * max(abs(other.value), 1.0)

    def __lt__(self, other: _Rank) -> bool:
        return other > self


@dataclass
class Starts:
    """What :func:`run_starts` returns.

    Attributes
    ----------
    run : OptimizerRun
        The kept run; with short runs its trace is the short run's followed by the continuation's, and ``n_iter``
        counts both.
    runs : list of OptimizerRun
        Every start's run (its short run when short runs are used), in start order; a dropped start (``drop=``)
        has ``state=None``, an empty trace and ``info["dropped"]`` (the reason).
    best_index : int
        The start that was kept.
    """

    run: OptimizerRun
    runs: list[OptimizerRun]
    best_index: int

    @property
    def restart_objectives(self) -> list[float]:
        """The objective each start reached (−inf for a dropped start)."""
        return [float(r.objective) for r in self.runs]


    @property
    def dropped(self) -> list[str]:
        """The reasons the dropped starts were dropped, in start order."""
        return [str(r.info["dropped"]) for r in self.runs if "dropped" in r.info]

    @property
    def all_dropped(self) -> bool:
        return len(self.dropped) == len(self.runs)

    @property
    def interrupted(self) -> bool:
        return any(bool(r.interrupted) for r in self.runs) or bool(self.run.interrupted)

    def diagnostics(self) -> dict[str, Any]:
        """The diagnostics of every optimiser with restarts: ``converged``, ``n_iter``, ``interrupted``,
        ``restart_objectives`` and ``best_restart``."""
        return {
            "converged": None if self.run.converged is None else bool(self.run.converged),
            "n_iter": int(self.run.n_iter),
            "interrupted": self.interrupted,
            "restart_objectives": self.restart_objectives,
            "best_restart": int(self.best_index),
        }


def _dropped_run(reason: str) -> OptimizerRun:
    # A dropped start ends without running out of iterations: marked converged so that the restart loop never warns
    # about it (it ranks last, and the family refuses the fit when every start is dropped).
    return OptimizerRun(None, np.empty(0), converged=True, interrupted=False, n_iter=0, info={"dropped": reason})


def run_starts(
    start: Callable[..., Any],
    step: Callable[[Any], tuple[Any, float]],
    *,
    n_init: int,
    seed: Any,
    max_iter: int | None,
    tol: float | None,
    short_iter: int = 0,
    short_tol: float = SHORT_RUN_TOL,
    degenerate: Callable[[Any], bool] | None = None,
    finish: Callable[[Any], Any] | None = None,
    drop: tuple[type[BaseException], ...] = (),
    warn: bool = True,
    desc: str = "fit",
    remedies: str = "raise max_iter, loosen tol, or raise n_init",
    progress: bool | None = None,
    callback: Callable[[int, Any, float], None] | None = None,
    settled: Callable[[Any], bool] | None = None,
    indexed: bool = False,
    score: Callable[[OptimizerRun], float] | None = None,
) -> Starts:
    """The restart driver of every optimiser, in the spirit of scikit-learn's ``BaseMixture``: the engine supplies
    the math, this function the restarts.

    Start ``r`` (r = 0 … ``n_init`` − 1) is ``start(generators[r])`` with ``generators = chain_generators(seed,
    n_init)`` (:func:`~latentfs.core.driver.chain_generators`), so it depends only on the seed and ``r``: the starts
    run one after another or, under ``latentfs.chain_method("parallel")``, in worker processes, with the same
    result. Each start is iterated with ``step(state) -> (state, objective)`` (the objective at the state passed
    in) by :func:`~latentfs.core.driver.run_optimizer`, the starts by :func:`~latentfs.core.driver.run_restarts`.

    With ``short_iter > 0`` and several starts, each start gets a short run (``short_iter`` iterations or a relative
    change below ``max(tol, short_tol)``) and only the best is continued to convergence (the "short runs of EM"
    strategy of Biernacki, Celeux & Govaert 2003, CSDA 41); otherwise every start runs to convergence. Runs are
    ranked by ``degenerate(state)`` (degenerate last) and then the objective, near-ties (:data:`TIE_RTOL`) going to
    the earlier start. An exception of a type in ``drop`` raised by a start or a step of a start's (short) run drops
    that start (HDDC: a cluster lost its points); it ranks last, and :attr:`Starts.all_dropped` tells the engine
    that nothing is left. ``finish(state)`` completes a run's last state (e.g. a state stopped before its first
    step). At most one :class:`~latentfs.core.driver.ConvergenceWarning` per fit, for the run kept. With
    ``indexed`` the start is called as ``start(generator, r)`` (an engine whose first start is a deterministic one,
    such as factor analysis's principal axes, and whose others are random). ``score(run)`` ranks the runs instead
    of their final objective (PLSA with early stopping: the validation score of the iterate it kept).

    Examples
    --------
    >>> import torch
    >>> out = run_starts(lambda g: float(torch.rand((), generator=g)), lambda x: (x / 2, -x),
    ...                  n_init=3, seed=0, max_iter=100, tol=1e-9, warn=False, progress=False)
    >>> len(out.runs), sorted(out.diagnostics())
    (3, ['best_restart', 'converged', 'interrupted', 'n_iter', 'restart_objectives'])
    """
    n_init = int(n_init)
    gens = chain_generators(seed, n_init)
    short = n_init > 1 and short_iter > 0

    def one_run(state: Any, iters: int | None, tolerance: float | None, warn_now: bool) -> OptimizerRun:
        out = run_optimizer(state, step, max_iter=iters, tol=tolerance, desc=desc, progress=progress,
                            warn=warn_now, remedies=remedies, callback=callback, settled=settled)
        if finish is not None:
            out.state = finish(out.state)
        return out

    def one(r: int) -> OptimizerRun:
        iters, tolerance = (short_iter if max_iter is None else min(short_iter, max_iter),
                            short_tol if tol is None else max(tol, short_tol)) if short else (max_iter, tol)
        try:
            return one_run(start(gens[r], r) if indexed else start(gens[r]), iters, tolerance, False)
        except drop as exc:
            return _dropped_run(str(exc))

    def key(run: OptimizerRun) -> _Rank:
        if "dropped" in run.info:
            return _Rank(False, -math.inf)
        return _Rank(degenerate is None or not degenerate(run.state), run.objective if score is None else score(run))

    best, runs = run_restarts(n_init, one, warn=warn and not short, desc=desc, remedies=remedies, key=key)
    best_index = int(best.info["restart"])
    if short and not best.interrupted and "dropped" not in best.info:
        # The winner of the short runs, continued to convergence: its own ConvergenceWarning (the only one).
        more = one_run(best.state, None if max_iter is None else max(max_iter - best.n_iter, 1), tol, warn)
        best = OptimizerRun(more.state, np.concatenate([best.trace, more.trace]), more.converged,
                            more.interrupted, best.n_iter + more.n_iter, {**best.info, **more.info})
    return Starts(best, runs, best_index)
