"""The densest interval on one coordinate for :mod:`latentfs.subspace.fpc` (Algorithm 1's inner steps: the interval
log-likelihood, eq. 3, the density score, eq. 13, optimalBounds and selectDensestInterval), with a brute-force
reference; :mod:`latentfs.subspace.fpc`, which states the method, re-exports everything here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import xlogy

from latentfs.core.data import DataError
from latentfs.core.options import check_choice, check_int

_TIE = 1e-9  # relative tolerance under which two log-likelihoods count as tied


# --------------------------------------------------------------------------------------------------
# One coordinate: eq. 3, eq. 13, optimalBounds and selectDensestInterval
# --------------------------------------------------------------------------------------------------
def interval_log_likelihood(count: Any, width: Any, m: int, r: float) -> np.ndarray:
    """Profile log-likelihood LL of eq. 3 for intervals holding ``count`` of ``m`` points over ``width`` of the
    diameter ``r`` (0 · log 0 = 0; broadcasts over arrays).

    Examples
    --------
    >>> float(interval_log_likelihood(10, 1.0, 10, 1.0))  # the whole range: uniform density 1, log 1 = 0
    0.0
    >>> bool(interval_log_likelihood(50, 0.1, 100, 1.0) > interval_log_likelihood(10, 0.1, 100, 1.0))
    True
    """
    xi = np.asarray(count, dtype=np.float64)
    w = np.asarray(width, dtype=np.float64)
    rest = m - xi
    with np.errstate(divide="ignore", invalid="ignore"):
        out = xlogy(rest, rest / m) - xlogy(rest, r - w) + xlogy(xi, xi / m) - xlogy(xi, w)
    return np.asarray(out)


def density_score(count: Any, width: Any, m: int, r: float) -> np.ndarray:
    """F(a, b, r, m) of eq. 13: the fraction of points in the interval over the fraction of the diameter it
    spans (1 for uniform data; ∞ for an interval of zero width).

    Examples
    --------
    >>> float(density_score(50, 0.5, 100, 1.0))
    1.0
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.asarray(count, dtype=np.float64) / m * (r / np.asarray(width, dtype=np.float64)))


def _candidates(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Φ of eq. 8 for sorted x, with #{x ≤ φ} and #{x < φ} for each candidate."""
    distinct = x[:-1] != x[1:]
    mids = 0.5 * (x[:-1][distinct] + x[1:][distinct])
    phi = np.unique(np.concatenate([x[:1], mids, x[-1:]]))
    return phi, np.searchsorted(x, phi, side="right"), np.searchsorted(x, phi, side="left")


def _best_pair(
    phi: np.ndarray, le: np.ndarray, lt: np.ndarray, lo_idx: np.ndarray, hi_idx: np.ndarray, m: int, r: float
) -> tuple[int, int, float]:
    """argmax of LL over pairs (i, j) ∈ lo_idx × hi_idx with φ_i < φ_j; ties go to the densest, then the first."""
    xi = np.clip(le[hi_idx][None, :] - lt[lo_idx][:, None], 0, m)  # pairs with φ_i ≥ φ_j are masked below
    w = phi[hi_idx][None, :] - phi[lo_idx][:, None]
    # eq. 3 with the count terms k log(k/m) read from a table (same values as interval_log_likelihood)
    k = np.arange(m + 1, dtype=np.float64)
    g = xlogy(k, k / m)
    pos, gap = w > 0, r - w
    log_w = np.log(w, out=np.zeros_like(w), where=pos)
    log_gap = np.log(gap, out=np.zeros_like(gap), where=gap > 0)
    ll = g[xi] + g[m - xi] - (m - xi) * log_gap - xi * log_w
    ll = np.where(pos, ll, -np.inf)
    # An interval touching min x or max x and its complement have the same LL (eq. 3 is symmetric in
    # inside/outside), so exact ties are common; among pairs within 1e-9 (relative) of the maximum take the
    # densest (largest ξ/(b − a), scale-free), then the first. Rounding then cannot flip the choice.
    top = float(ll.max())
    near = ll >= top - _TIE * max(1.0, abs(top))
    with np.errstate(divide="ignore", invalid="ignore"):
        dens = np.where(near, xi / np.where(pos, w, 1.0), -np.inf)
    best = int(np.argmax(dens))
    i, j = divmod(best, hi_idx.size)
    return int(lo_idx[i]), int(hi_idx[j]), float(ll[i, j])


def _coarse_indices(le: np.ndarray, s_min: int) -> np.ndarray:
    """Indices into Φ of the coarse bounds of eq. 9: start at min x, step on after passing s_min points; the
    last interval may hold fewer (max x closes the list)."""
    idx = [0]
    n = le.size
    while True:
        k = int(np.searchsorted(le, le[idx[-1]] + s_min, side="left"))
        if k >= n:
            break
        idx.append(k)
    if idx[-1] != n - 1:
        idx.append(n - 1)
    return np.asarray(idx, dtype=np.int64)


def optimal_bounds(x: Any, min_support: int, *, search: str = "coarse-to-fine", presorted: bool = False) -> tuple[
    float, float
]:
    """``optimalBounds`` of Algorithm 1: the bounds (φ_i, φ_j) maximising LL (eq. 3) over the candidates Φ.

    Parameters
    ----------
    x : 1-D array
        Values of one coordinate.
    min_support : int
        s_min, the spacing of the coarse bounds (eq. 9).
    search : {"coarse-to-fine", "exhaustive"}
        The chapter's two-phase search (eqs. 10–12; O(m) pairs when s_min ≈ √m, may miss the optimum) or all
        pairs of Φ (O(m²), the exact maximiser; :func:`brute_force_bounds` is its loop-by-loop reference).
    presorted : bool
        Skip sorting when ``x`` is already sorted ascending.

    Returns
    -------
    (phi_i, phi_j) : floats with phi_i < phi_j, or (min x, max x) when all values are equal.
    """
    xs = np.asarray(x, dtype=np.float64) if presorted else np.sort(np.asarray(x, dtype=np.float64))
    m = xs.size
    r = float(xs[-1] - xs[0])
    if r == 0:
        return float(xs[0]), float(xs[-1])
    phi, le, lt = _candidates(xs)
    if search == "exhaustive":
        every = np.arange(phi.size)
        i, j, _ = _best_pair(phi, le, lt, every, every, m, r)
        return float(phi[i]), float(phi[j])
    coarse = _coarse_indices(le, max(1, int(min_support)))
    ci, cj, _ = _best_pair(phi, le, lt, coarse, coarse, m, r)
    pi, pj = int(np.searchsorted(coarse, ci)), int(np.searchsorted(coarse, cj))

    def around(p: int) -> np.ndarray:  # Φ^{φ̂_p} of eq. 12
        lo = coarse[max(p - 1, 0)]
        hi = coarse[min(p + 1, coarse.size - 1)]
        return np.arange(lo, hi + 1)

    i, j, _ = _best_pair(phi, le, lt, around(pi), around(pj), m, r)
    return float(phi[i]), float(phi[j])


def brute_force_bounds(x: Any) -> tuple[float, float]:
    """Reference for :func:`optimal_bounds` with ``search="exhaustive"``: two plain loops over Φ (eq. 8) and
    eq. 3 evaluated pair by pair with ``math.log``; ties (within 1e-9) go to the densest pair, then the first,
    as in :func:`optimal_bounds`. O(m³) Python steps; for tests."""
    xs = sorted(float(v) for v in np.ravel(x))
    m, r = len(xs), xs[-1] - xs[0]
    if r == 0:
        return xs[0], xs[-1]
    phi = sorted({xs[0], xs[-1]} | {(xs[k] + xs[k + 1]) / 2 for k in range(m - 1) if xs[k] != xs[k + 1]})
    scored = []
    for i, a in enumerate(phi):
        for b in phi[i + 1:]:
            xi = sum(1 for v in xs if a <= v <= b)
            w = b - a
            ll = 0.0
            if m - xi > 0:
                ll += (m - xi) * math.log((1 - xi / m) / (r - w))
            if xi > 0:
                ll += xi * math.log((xi / m) / w)
            scored.append((ll, xi / w, a, b))
    top = max(s[0] for s in scored)
    tied = [s for s in scored if s[0] >= top - _TIE * max(1.0, abs(top))]
    best = max(s[1] for s in tied)
    return next((a, b) for _, d, a, b in tied if d == best)


@dataclass(frozen=True)
class Interval:
    """A densest interval along one coordinate.

    Attributes
    ----------
    low, high : float
        The bounds a ≤ b (both inclusive).
    count : int
        Points of the input with low ≤ x ≤ high.
    valid : bool
        Whether it came from a valid split (eq. 7: at least s_min points on each side). For
        ``refine=True`` an invalid result means no split was valid and the interval is the whole range.
    n_rounds : int
        Valid refinement rounds taken.
    """

    low: float
    high: float
    count: int
    valid: bool
    n_rounds: int


def _select(xs: np.ndarray, phi_i: float, phi_j: float) -> tuple[float, float]:
    """``selectDensestInterval``: the candidate of eq. 14 with the largest F (zero-width candidates skipped)."""
    lo, hi = float(xs[0]), float(xs[-1])
    r = hi - lo
    if r == 0:
        return lo, hi
    cands = [(lo, phi_i), (phi_i, phi_j), (phi_j, hi)]
    best, arg = -np.inf, (phi_i, phi_j)
    for a, b in cands:
        if b <= a:
            continue
        cnt = int(np.searchsorted(xs, b, side="right") - np.searchsorted(xs, a, side="left"))
        f = float(density_score(cnt, b - a, xs.size, r))
        if f > best:
            best, arg = f, (a, b)
    return arg


def _s_min(fixed: int, m: int, adaptive: bool) -> int:
    return max(1, math.ceil(math.sqrt(m))) if adaptive else fixed


def _refine(
    xs: np.ndarray, s_min: int, adaptive: bool, search: str, refine: bool
) -> tuple[float, float, int, bool, int]:
    """The inner ``while valid`` loop of ``addBounds`` on sorted values: (a, b, count, valid, rounds)."""
    lo_i, hi_i = 0, xs.size  # current slice of xs
    a, b, valid_any, rounds = float(xs[0]), float(xs[-1]), False, 0
    count = xs.size
    while True:
        cur = xs[lo_i:hi_i]
        s = _s_min(s_min, cur.size, adaptive)
        pi, pj = optimal_bounds(cur, s, search=search, presorted=True)
        na, nb = _select(cur, pi, pj)
        new_lo = lo_i + int(np.searchsorted(cur, na, side="left"))
        new_hi = lo_i + int(np.searchsorted(cur, nb, side="right"))
        inside = new_hi - new_lo
        ok = inside >= s and cur.size - inside >= s
        if not refine:
            return na, nb, inside, ok, int(ok)
        if not ok:
            return a, b, count, valid_any, rounds
        a, b, count, valid_any, rounds = na, nb, inside, True, rounds + 1
        lo_i, hi_i = new_lo, new_hi


def densest_interval(
    x: Any, min_support: int | str = "sqrt", *, refine: bool = True, search: str = "coarse-to-fine",
    adaptive: bool = False,
) -> Interval:
    """The densest interval of one coordinate (Savu-Krohn & Auer, Section 2.1).

    ``optimalBounds`` (eqs. 8–12) followed by ``selectDensestInterval`` (eq. 14); with ``refine=True`` the
    pair is re-run on the points inside the chosen interval while the split stays valid (eq. 7), which is the
    inner loop of ``addBounds`` in Algorithm 1.

    Parameters
    ----------
    x : 1-D array of finite values (at least 2)
    min_support : int or "sqrt"
        s_min; ``"sqrt"`` is ⌈√m⌉ for the m values given (eq. 7).
    refine : bool
        Refine until no valid split remains (default) or return the first pass, valid or not.
    search : {"coarse-to-fine", "exhaustive"}
        See :func:`optimal_bounds`.
    adaptive : bool
        Recompute s_min = ⌈√m'⌉ for the m' points of each refinement round (default: fixed s_min).

    Returns
    -------
    Interval

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.uniform(0, 10, 700), rng.uniform(4, 5, 300)])
    >>> iv = densest_interval(x, 32, refine=False)
    >>> round(iv.low, 1), round(iv.high, 1)
    (4.0, 5.0)
    """
    v = np.asarray(x, dtype=np.float64).ravel() if not isinstance(x, np.ndarray) else x.astype(np.float64).ravel()
    if v.size < 2:
        raise DataError(f"x must hold at least 2 values; got {v.size}. Pass the values of one coordinate.")
    if not np.isfinite(v).all():
        bad = int(np.flatnonzero(~np.isfinite(v))[0])
        raise DataError(f"x must be finite; x[{bad}] is {v[bad]}. Drop or impute non-finite values.")
    check_choice("search", search, ["coarse-to-fine", "exhaustive"])
    s_min = _check_min_support(min_support, v.size)
    a, b, count, valid, rounds = _refine(np.sort(v), s_min, bool(adaptive), search, refine)
    return Interval(a, b, int(count), bool(valid), int(rounds))


def _check_min_support(min_support: Any, n: int) -> int:
    if isinstance(min_support, str):
        check_choice("min_support", min_support, ["sqrt"])
        return max(1, math.ceil(math.sqrt(n)))
    return check_int(
        "min_support", min_support, low=1, high=n,
        remedy=f"It is s_min, the fewest points a cluster may hold; use 'sqrt' (⌈√{n}⌉ = "
        f"{math.ceil(math.sqrt(n))} here) or an integer between 1 and the number of samples ({n}).",
    )
