"""When do more features hurt? Navot, Gilad-Bachrach, Navot & Tishby (2006), "Is Feature Selection Still
Necessary?", LNCS 3940, pp. 127–138: two spherical Gaussians.

Classes y = ±1 with equal priors, x | y ~ N(y μ, I_N), |μ_j| non-increasing in j. The maximum-likelihood
rule trained on m examples is ĥ(x) = sign(μ̂_n · x_n) on the first n features, with μ̂ = (1/m) Σ_i y_i x_i
~ N(μ, I/m). Its generalisation error given μ̂ is (eqs. 2–3)

    error(μ̂, n) = Φ(−Σ_{j≤n} μ̂_j μ_j / √(Σ_{j≤n} μ̂_j²)),

and moving the expectation over training sets inside Φ (eq. 4) gives the criterion (eq. 7)

    f(n, m) = s_n / √(n/m + s_n),   s_n = Σ_{j≤n} μ_j²,   n_opt ≈ argmax_n f(n, m),   error ≈ Φ(−f).

:func:`expected_error_mc` computes the exact average error (eq. 1) by Monte Carlo over μ̂, using the
same draws for every n so that the curve over n is smooth. Errata (digest): Example 1's partial sum is
1 − 2^(−n), and Statement 2 needs Σ μ_j², not Σ μ_j; the functions here use exact partial sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr

from latentfs.core.data import DataError, as_rng

__all__ = [
    "NavotOptimum",
    "approximate_error",
    "expected_error_mc",
    "linear_rule_error",
    "make_two_gaussians",
    "navot_criterion",
    "optimal_num_features",
    "optimal_num_features_curve",
]




def _check_mu(mu: Any) -> np.ndarray:
    arr = np.asarray(mu, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise DataError(f"mu must be a non-empty 1-D array of class-mean coordinates; got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise DataError("mu must be finite; it holds NaN or inf.")
    if np.any(np.diff(np.abs(arr)) > 0):
        raise DataError(
            "mu must be sorted by decreasing |mu_j| (the best n features are then the first n); "
            "pass mu[np.argsort(-np.abs(mu), kind='stable')]."
        )
    if arr[0] == 0:
        raise DataError("mu must have a non-zero first coordinate (otherwise no feature carries signal).")
    return arr


def _check_m(m: Any) -> float:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise DataError(f"m (training-set size) must be a positive integer; got {m!r}.")
    return float(m)


def navot_criterion(mu: Any, m: int) -> np.ndarray:
    """f(n, m) = s_n/√(n/m + s_n) for n = 1..N (Navot et al. 2006, eq. 7).

    Examples
    --------
    >>> f = navot_criterion(2.0 ** (-np.arange(1, 2001) / 2), 16)
    >>> int(np.argmax(f)) + 1
    4
    """
    arr, mm = _check_mu(mu), _check_m(m)
    s = np.cumsum(arr**2)
    n = np.arange(1, arr.size + 1)
    return s / np.sqrt(n / mm + s)


def approximate_error(mu: Any, m: int) -> np.ndarray:
    """Φ(−f(n, m)) for n = 1..N: the approximate expected error of the ML rule on the first n features."""
    return ndtr(-navot_criterion(mu, m))


@dataclass(frozen=True)
class NavotOptimum:
    """The approximate optimum: number of features and the error there (eq. 7)."""

    n_features: int
    error: float


def optimal_num_features(mu: Any, m: int) -> NavotOptimum:
    """n_opt = argmax_n f(n, m) (ties: the smallest n) and Φ(−f(n_opt, m)).

    Examples
    --------
    >>> opt = optimal_num_features(1 / np.arange(1, 2001), 100)
    >>> opt.n_features, round(opt.error, 4)
    (10, 0.1138)
    """
    f = navot_criterion(mu, m)
    best = int(np.argmax(f))
    return NavotOptimum(best + 1, float(ndtr(-f[best])))


def optimal_num_features_curve(mu: Any, ms: Any) -> tuple[np.ndarray, np.ndarray]:
    """n_opt(m) and Φ(−f(n_opt, m)) for each training-set size in ``ms``.

    Examples
    --------
    >>> n_opt, err = optimal_num_features_curve(1 / np.arange(1, 2001), [16, 100, 1000])
    >>> n_opt.tolist()
    [4, 10, 32]
    """
    ms_arr = np.atleast_1d(np.asarray(ms))
    if ms_arr.ndim != 1 or ms_arr.size == 0 or ms_arr.dtype.kind not in "iu":
        raise DataError(f"ms must be a non-empty 1-D array of positive integers; got {ms!r}.")
    opts = [optimal_num_features(mu, int(m)) for m in ms_arr]
    return np.array([o.n_features for o in opts]), np.array([o.error for o in opts])


def expected_error_mc(
    mu: Any, m: int, *, n_repeats: int = 2000, seed: Any = None, chunk: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo of eq. 1: the average over μ̂ ~ N(μ, I/m) of error(μ̂, n), for n = 1..N.

    Returns (mean error per n, its standard error). The same μ̂ draws serve every n.

    Examples
    --------
    >>> mean, se = expected_error_mc(1 / np.arange(1, 51), 16, n_repeats=500, seed=0)
    >>> int(np.argmin(mean)) + 1, bool(se.max() < 0.01)
    (4, True)
    """
    arr, mm = _check_mu(mu), _check_m(m)
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, (int, np.integer)) or n_repeats < 2:
        raise DataError(f"n_repeats must be an integer ≥ 2; got {n_repeats!r}.")
    rng = as_rng(seed)
    total = np.zeros(arr.size)
    total_sq = np.zeros(arr.size)
    done = 0
    while done < n_repeats:
        r = min(chunk, n_repeats - done)
        mu_hat = arr + rng.standard_normal((r, arr.size)) / np.sqrt(mm)
        err = ndtr(-np.cumsum(mu_hat * arr, axis=1) / np.sqrt(np.cumsum(mu_hat**2, axis=1)))
        total += err.sum(axis=0)
        total_sq += (err**2).sum(axis=0)
        done += r
    mean = total / n_repeats
    var = np.maximum(total_sq / n_repeats - mean**2, 0.0) * n_repeats / (n_repeats - 1)
    return mean, np.sqrt(var / n_repeats)


def linear_rule_error(w: Any, b: float, mu: Any) -> float:
    """Exact error of sign(w·x + b) in the two-Gaussian model: ½Φ(−(w·μ + b)/‖w‖) + ½Φ(−(w·μ − b)/‖w‖).

    Examples
    --------
    >>> round(linear_rule_error([1.0, 0.0], 0.0, [1.0, 0.5]), 4)
    0.1587
    """
    w_arr, mu_arr = np.asarray(w, dtype=np.float64), np.asarray(mu, dtype=np.float64)
    if w_arr.shape != mu_arr.shape or w_arr.ndim != 1:
        raise DataError(f"w and mu must be 1-D of the same length; got shapes {w_arr.shape} and {mu_arr.shape}.")
    norm = float(np.linalg.norm(w_arr))
    if norm == 0:
        raise DataError("w must be non-zero; a zero normal defines no rule.")
    proj = float(w_arr @ mu_arr)
    return float(0.5 * ndtr(-(proj + b) / norm) + 0.5 * ndtr(-(proj - b) / norm))


def make_two_gaussians(mu: Any, m: int, *, seed: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Draw m labelled points: y = ±1 with probability ½ each, x | y ~ N(y μ, I).

    Examples
    --------
    >>> X, y = make_two_gaussians([1.0, 0.5], 4, seed=0)
    >>> X.shape, sorted(set(y.tolist())) <= [-1, 1]
    ((4, 2), True)
    """
    arr = np.asarray(mu, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise DataError(f"mu must be a non-empty 1-D array; got shape {arr.shape}.")
    mm = int(_check_m(m))
    rng = as_rng(seed)
    y = rng.choice(np.array([-1, 1]), size=mm)
    return y[:, None] * arr + rng.standard_normal((mm, arr.size)), y
