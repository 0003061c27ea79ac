"""The warm-started assignment solver behind relabelling (latentfs.core.assignment), against SciPy's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from latentfs.core.assignment import Assignment


def _optimum(cost: np.ndarray) -> float:
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].sum())


def _total(cost: np.ndarray, cols: np.ndarray) -> float:
    return float(cost[np.arange(cost.shape[0]), cols].sum())


@pytest.mark.parametrize("ties", [False, True])
def test_cold_and_warm_solves_reach_scipys_optimum(ties):
    # Costs of every scale, whole numbers (many ties) or continuous; each matrix then has random subsets of its
    # rows replaced five times, and the warm start must reach the optimum of the new costs each time.
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(1, 40))
        scale = 10 ** rng.uniform(-3, 3)
        cost = rng.normal(size=(n, n)) * scale
        if ties:
            cost = np.round(cost / scale * 2)
        solver = Assignment(n)
        cols = solver.solve(cost)
        assert np.unique(cols).size == n
        assert _total(cost, cols) == pytest.approx(_optimum(cost), rel=1e-12, abs=1e-12 * scale)
        if not ties:  # continuous costs: the optimum is unique, so the matching is SciPy's
            np.testing.assert_array_equal(cols, linear_sum_assignment(cost)[1])
        for _ in range(5):
            changed = np.unique(rng.integers(0, n, size=int(rng.integers(1, n + 1))))
            cost = cost.copy()
            cost[changed] = rng.normal(size=(changed.size, n)) * scale
            if ties:
                cost[changed] = np.round(cost[changed] / scale * 2)
            cols = solver.solve(cost, changed=changed)
            assert np.unique(cols).size == n
            assert _total(cost, cols) == pytest.approx(_optimum(cost), rel=1e-12, abs=1e-12 * scale)


def test_a_start_from_row_minima_is_a_valid_warm_start():
    rng = np.random.default_rng(4)
    n = 12
    cost = rng.random((n, n)) + 5.0 * np.eye(n)[rng.permutation(n)] * -1  # each row's own cheapest column
    best = cost.argmin(axis=1)
    assert np.unique(best).size == n
    solver = Assignment(n)
    solver.set_from_row_minima(cost, best)
    cost[[2, 7]] = rng.random((2, n))
    cols = solver.solve(cost, changed=np.array([2, 7]))
    assert _total(cost, cols) == pytest.approx(_optimum(cost), rel=1e-12)


def test_bad_costs_are_named():
    with pytest.raises(ValueError, match=r"cost: expected a 3 × 3 matrix, got shape \(3, 2\)"):
        Assignment(3).solve(np.zeros((3, 2)))
    cost = np.zeros((2, 2))
    cost[0] = np.inf
    with pytest.raises(ValueError, match="cost: no finite matching exists"):
        Assignment(2).solve(cost)
