"""Minimum-cost assignment of a square cost matrix that can start from a previous solution.

The relabelling iterations (:mod:`latentfs.core.relabel`) solve, for every draw, an assignment problem whose
cost rows change only where the pivot's rows moved. A solver started from scratch pays O(K³) each time; this
one keeps each draw's optimal matching and its dual variables, and re-inserts only the rows whose costs
changed.

The method is the shortest augmenting path algorithm (Jonker & Volgenant 1987; the rectangular form in
Crouse 2016, "On implementing 2D rectangular assignment algorithms", IEEE TAES 52(4)): rows are matched one at
a time along a shortest alternating path in reduced costs c_ij − u_i − v_j, found by Dijkstra's method, and the
duals are updated so that every matched row keeps c_ij − u_i − v_j ≥ 0 for all columns, with equality at its
matched column. Any matching and duals with that property on the matched rows is a valid start: when only
some rows' costs change, the other rows keep their matches and duals, the changed rows are unmatched, and
only they are augmented again. Once every row is matched, the duals certify the matching is a minimum (linear
programming duality), so a warm start returns the optimum of the new costs, not an approximation of it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = ["Assignment"]


def _augment(cost, u, v, row4col, col4row, rows, shortest, path, seen_row, seen_col, remaining):  # pragma: no cover
    """Match each row of ``rows`` (all unmatched) along a shortest augmenting path; ``u``, ``v``, ``row4col``
    and ``col4row`` are updated in place. Returns 0, or 1 when a row cannot be matched (infinite costs)."""
    n = cost.shape[0]
    for r in range(rows.size):
        cur = rows[r]
        for j in range(n):
            shortest[j] = np.inf
            path[j] = -1
            seen_col[j] = False
            seen_row[j] = False
            remaining[j] = n - 1 - j
        left = n
        low = 0.0
        i = cur
        sink = -1
        while sink < 0:
            seen_row[i] = True
            best = np.inf
            index = -1
            base = low - u[i]
            for t in range(left):
                j = remaining[t]
                d = base + cost[i, j] - v[j]
                if d < shortest[j]:
                    path[j] = i
                    shortest[j] = d
                # ties go to a free column: the path ends there
                if shortest[j] < best or (shortest[j] == best and row4col[j] < 0):
                    best = shortest[j]
                    index = t
            if index < 0 or best == np.inf:
                return 1
            low = best
            j = remaining[index]
            if row4col[j] < 0:
                sink = j
            else:
                i = row4col[j]
            seen_col[j] = True
            left -= 1
            remaining[index] = remaining[left]
        u[cur] += low
        for i in range(n):
            if seen_row[i] and i != cur:
                u[i] += low - shortest[col4row[i]]
        for j in range(n):
            if seen_col[j]:
                v[j] -= low - shortest[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            previous = col4row[i]
            col4row[i] = j
            j = previous
            if i == cur:
                break
    return 0


@functools.cache
def _kernel() -> Any:
    import numba

    from latentfs.core.compiled import jit

    return jit(numba, _augment)


class Assignment:
    """The optimal matching of rows to columns of a square cost matrix, kept with its duals for a warm start.

    ``solve(cost)`` matches every row; ``solve(cost, changed=rows)`` assumes only ``rows`` of ``cost`` differ
    from the previous call's costs and re-matches only them (the result is the optimum of the new costs all the
    same). ``cols[i]`` is the column matched to row i.

    Examples
    --------
    >>> a = Assignment(3)
    >>> a.solve(np.array([[4.0, 1.0, 3.0], [2.0, 0.0, 5.0], [3.0, 2.0, 2.0]])).tolist()
    [1, 0, 2]
    >>> a.solve(np.array([[4.0, 1.0, 3.0], [2.0, 0.0, 5.0], [0.0, 9.0, 9.0]]), changed=np.array([2])).tolist()
    [2, 1, 0]
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.u = np.zeros(n)
        self.v = np.zeros(n)
        self.cols = np.full(n, -1, dtype=np.int64)
        self._rows = np.full(n, -1, dtype=np.int64)

    def solve(self, cost: np.ndarray, changed: np.ndarray | None = None) -> np.ndarray:
        cost = np.ascontiguousarray(cost, dtype=np.float64)
        n = self.n
        if cost.shape != (n, n):
            raise ValueError(f"cost: expected a {n} × {n} matrix, got shape {cost.shape}")
        if changed is None or (self.cols < 0).any():
            self.u[:] = 0.0
            self.v[:] = 0.0
            self.cols[:] = -1
            self._rows[:] = -1
            rows = np.arange(n, dtype=np.int64)
        else:
            rows = np.asarray(changed, dtype=np.int64)
            self._rows[self.cols[rows]] = -1
            self.cols[rows] = -1
        scratch = np.empty(n)
        path = np.empty(n, dtype=np.int64)
        seen = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.bool_)
        remaining = np.empty(n, dtype=np.int64)
        args = (cost, self.u, self.v, self._rows, self.cols, rows, scratch, path, seen[0], seen[1], remaining)
        if _kernel()(*args):
            raise ValueError("cost: no finite matching exists (a row or column has only infinite costs)")
        return self.cols.copy()

    def set_from_row_minima(self, cost: np.ndarray, cols: np.ndarray) -> None:
        """Take ``cols`` (each row's cheapest column, all different: then the optimum) as the matching, with duals
        u_i = min_j c_ij, v = 0, which certify it, so that a later ``solve(..., changed=…)`` can start from it."""
        self.cols[:] = cols
        self._rows[cols] = np.arange(self.n)
        self.u[:] = cost[np.arange(self.n), cols]
        self.v[:] = 0.0
