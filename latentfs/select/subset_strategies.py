"""Mladenić's search strategies over feature subsets (Mladenić 2006, §2), guided by a subset criterion J(S):
forward selection, backward elimination, the two stepwise searches and random mutation hill climbing. The
strategies, the stopping rule and the tie rule are described in the module docstring of
:mod:`latentfs.select.text_search`, which re-exports everything here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from latentfs.core.data import DataError, check_choice
from latentfs.core.options import as_rng

STRATEGIES = ("forward", "backward", "forward_stepwise", "backward_stepwise", "random_mutation")
"""Mladenić's search strategies (the module docstring of :mod:`latentfs.select.text_search`)."""

Criterion = Callable[[tuple[int, ...]], float]
"""A subset criterion J(S) (larger is better) on a sorted tuple of column indices."""


# --------------------------------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SearchStep:
    """One taken move: ``action`` ("start", "add", "remove"), the feature moved (−1 for "start"), J after it."""

    action: str
    feature: int
    size: int
    score: float


@dataclass(frozen=True)
class SearchResult:
    """A search's outcome: the final subset (sorted column indices), its J, the moves taken, the J evaluations."""

    subset: np.ndarray
    score: float
    path: tuple[SearchStep, ...]
    n_evaluations: int
    strategy: str = ""

    @property
    def scores(self) -> np.ndarray:
        """J along the path (one value per taken move, the start included)."""
        return np.array([s.score for s in self.path])


class _Memo:
    """J on the *set* of columns, each distinct set evaluated once; J(∅) = −inf."""

    def __init__(self, criterion: Criterion) -> None:
        self.criterion = criterion
        self.memo: dict[frozenset[int], float] = {}

    def __call__(self, cols: frozenset[int]) -> float:
        if not cols:
            return -np.inf
        if cols not in self.memo:
            value = float(self.criterion(tuple(sorted(cols))))
            if np.isnan(value):
                raise DataError(f"the criterion returned NaN for the subset {sorted(cols)}; it must return a number.")
            self.memo[cols] = value
        return self.memo[cols]


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    ok = not isinstance(value, bool) and isinstance(value, (int, np.integer))
    if not ok or value < low or (high is not None and value > high):
        rng = f"[{low}, {high}]" if high is not None else f"≥ {low}"
        raise DataError(f"{name} must be an integer {rng}; got {value!r}.")
    return int(value)


def subset_search(
    criterion: Criterion,
    n_features: int,
    *,
    strategy: str = "forward",
    candidates: Sequence[int] | None = None,
    n_features_to_select: int | None = None,
    tol: float = 0.0,
    max_iter: int = 200,
    initial: Sequence[int] | None = None,
    seed: int | np.random.Generator | None = 0,
) -> SearchResult:
    """Search subsets of ``candidates`` (default: all ``n_features`` columns) with one of :data:`STRATEGIES`.

    Parameters
    ----------
    criterion : callable
        J(S) on a sorted tuple of column indices, larger is better; called once per distinct subset.
    n_features : int
        Number of columns.
    strategy : str
        One of :data:`STRATEGIES` (module docstring).
    candidates : sequence of int, optional
        The columns the search may use (e.g. the top 50 words by a filter score, best first); all by default.
        Their order breaks ties in J.
    n_features_to_select : int, optional
        ``"forward"``/``"backward"`` only: go to exactly this size instead of stopping when J stops improving.
    tol : float
        Minimum gain in J for a greedy move to be taken (a removal is also taken when it loses at most ``tol``);
        random mutation keeps any change that does not lower J.
    max_iter : int
        Maximum number of moves (for ``"random_mutation"``: of proposals); not applied when
        ``n_features_to_select`` fixes the path's length.
    initial : sequence of int, optional
        ``"random_mutation"`` only: the starting subset (default: each candidate with probability ½).
    seed : int or Generator, optional
        ``"random_mutation"`` only.

    Returns
    -------
    SearchResult

    Examples
    --------
    >>> weights = {0: 3.0, 1: -1.0, 2: 2.0, 3: 0.5}
    >>> J = lambda S: sum(weights[j] for j in S)
    >>> subset_search(J, 4, strategy="forward").subset.tolist()
    [0, 2, 3]
    >>> subset_search(J, 4, strategy="backward").subset.tolist()
    [0, 2, 3]
    """
    check_choice("strategy", strategy, STRATEGIES)
    D = _check_int("n_features", n_features, 1)
    pool = list(range(D)) if candidates is None else list(dict.fromkeys(int(c) for c in candidates))
    if not pool or min(pool) < 0 or max(pool) >= D:
        raise DataError(f"candidates must be a non-empty set of column indices in [0, {D - 1}]; got {candidates!r}.")
    max_iter = _check_int("max_iter", max_iter, 1)
    if not np.isfinite(tol) or tol < 0:
        raise DataError(f"tol must be a finite number ≥ 0; got {tol!r}.")
    k = None
    if n_features_to_select is not None:
        if strategy not in ("forward", "backward"):
            raise DataError(
                f"n_features_to_select applies to strategy='forward' or 'backward' only; got strategy={strategy!r}. "
                "The stepwise and random-mutation searches stop by themselves."
            )
        k = _check_int("n_features_to_select", n_features_to_select, 1, len(pool))
    if initial is not None and strategy != "random_mutation":
        raise DataError(f"initial applies to strategy='random_mutation' only; got strategy={strategy!r}.")
    J = _Memo(criterion)
    if strategy == "random_mutation":
        result = _random_mutation(J, pool, initial, max_iter, seed)
    else:
        result = _greedy(J, pool, strategy, k, tol, max_iter)
    subset, path = result
    return SearchResult(np.array(sorted(subset), dtype=np.int64), path[-1].score, tuple(path), len(J.memo), strategy)


def _greedy(
    J: _Memo, pool: list[int], strategy: str, k: int | None, tol: float, max_iter: int
) -> tuple[set[int], list[SearchStep]]:
    current: set[int] = set() if strategy in ("forward", "forward_stepwise") else set(pool)
    can_add = strategy != "backward"
    can_remove = strategy != "forward"
    score = J(frozenset(current))
    path = [SearchStep("start", -1, len(current), score)]
    for _ in range(max_iter if k is None else len(pool)):
        if k is not None and len(current) == k:
            break
        moves: list[tuple[float, int, int, str]] = []  # (−J, rank in pool, feature, action)
        if can_add:
            moves += [(-J(frozenset(current | {f})), r, f, "add") for r, f in enumerate(pool) if f not in current]
        if can_remove and len(current) > 1:
            moves += [(-J(frozenset(current - {f})), r, f, "remove") for r, f in enumerate(pool) if f in current]
        if not moves:
            break
        neg, _, f, action = min(moves, key=lambda m: (m[0], m[3] == "add", m[1]))  # best J, removal, first
        new = -neg
        forced = k is not None
        if not (forced or new > score + tol or (action == "remove" and new >= score - tol)):
            break
        current = current | {f} if action == "add" else current - {f}
        score = new
        path.append(SearchStep(action, f, len(current), score))
    return current, path


def _random_mutation(
    J: _Memo, pool: list[int], initial: Sequence[int] | None, max_iter: int, seed: Any
) -> tuple[set[int], list[SearchStep]]:
    rng = as_rng(seed)
    if initial is None:
        current = {f for f in pool if rng.random() < 0.5} or {pool[int(rng.integers(len(pool)))]}
    else:
        current = {int(f) for f in initial}
        if not current or not current <= set(pool):
            raise DataError(f"initial must be a non-empty subset of the candidates; got {initial!r}.")
    score = J(frozenset(current))
    path = [SearchStep("start", -1, len(current), score)]
    for _ in range(max_iter):
        f = pool[int(rng.integers(len(pool)))]
        action = "remove" if f in current else "add"
        proposal = current - {f} if action == "remove" else current | {f}
        if not proposal:
            continue
        new = J(frozenset(proposal))
        if new >= score:  # J does not decrease: neutral moves are kept (they let the search cross plateaux)
            current, score = proposal, new
            path.append(SearchStep(action, f, len(current), score))
    return current, path
