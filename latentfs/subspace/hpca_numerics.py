"""The numerics of hyperbolic PCA (Maurer 2006; :class:`~latentfs.subspace.hpca.HyperbolicPCA`): the margin loss and
the generalisation bound (Sections 2-3 and 6), the empirical margin risk and its best threshold, the pair-weight
matrix and the dual eigenproblem (Section 6), and the one-example nearest-neighbour error of Section 7. The
module docstring of :mod:`latentfs.subspace.hpca`, which re-exports everything here, states the method.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from latentfs.core.data import DataError, as_labels
from latentfs.core.options import check_float, check_int, check_n_components


# --------------------------------------------------------------------------------------------------
# The bound and the margin risk (Maurer, Sections 2–3 and 6)
# --------------------------------------------------------------------------------------------------
def _check_margin(margin: Any, *, allow_zero: bool = False) -> float:
    return check_float(
        "margin", margin, 0.0, low_open=not allow_zero,
        remedy="It is the margin γ of the loss f_γ; the chapter's experiments use 0.01.",
    )


def _check_delta(delta: Any) -> float:
    return check_float("delta", delta, 0.0, 1.0, low_open=True, high_open=True,
                       remedy="It is the failure probability of the bound, e.g. delta=0.05.")


def margin_loss(t: Any, margin: float) -> np.ndarray:
    """The margin function f_γ(t): 1 for t ≤ 0, 1 − t/γ for 0 < t < γ, 0 for t ≥ γ (Maurer, Section 3).

    ``margin=0`` gives the 0–1 loss that counts t = 0 ("undecided") as an error.

    Examples
    --------
    >>> margin_loss([-1.0, 0.0, 0.05, 0.2], 0.1).tolist()
    [1.0, 1.0, 0.5, 0.0]
    """
    g = _check_margin(margin, allow_zero=True)
    t = np.asarray(t, dtype=np.float64)
    if g == 0.0:
        return (t <= 0).astype(np.float64)
    return np.clip(1.0 - t / g, 0.0, 1.0)


def eta_from_threshold(c: float, margin: float) -> tuple[float, float]:
    """The chapter's weights (η₋₁, η₁) = (min{1/(1 − c²), 1/γ}, −min{1/c², 1/γ}) for a threshold c ∈ (0, 1)
    and margin γ > 0 (Maurer, Section 6): with them 1 + η_r (c² − q) ≥ f_γ(r (c² − q)) for all q ∈ [0, 1].

    Returns the signed pair; :class:`HyperbolicPCA` takes ``eta_neg = η₋₁`` and ``eta_pos = −η₁``.

    Examples
    --------
    >>> eta_from_threshold(0.5, 0.01)
    (1.3333333333333333, -4.0)
    """
    c = check_float("c", c, 0.0, 1.0, low_open=True, high_open=True,
                    remedy="It is the distance threshold, which lies in (0, 1) on an embedding of diameter 1.")
    g = _check_margin(margin)
    return min(1.0 / (1.0 - c * c), 1.0 / g), -min(1.0 / (c * c), 1.0 / g)


def operator_bound(
    m: int, hs_norm: float, op_norm: float, *, margin: float, delta: float, empirical_risk: float = 0.0
) -> float:
    """Theorem 3 of Maurer (2006): R(T^½, c, ρ) ≤ R̂_γ + (1/√m)(2(‖𝒯‖_HS + ‖𝒯‖_∞)/γ + √(ln(1/δ)/2)).

    Parameters
    ----------
    m : int
        Number of i.i.d. equivalence constraints.
    hs_norm, op_norm : float
        Sup of the Hilbert–Schmidt and operator norms over the operator class 𝒯 (√d and 1 for the
        d-dimensional projections, which gives :func:`generalization_bound`).
    margin, delta : float
        γ > 0 and the failure probability δ ∈ (0, 1).
    empirical_risk : float
        R̂_γ on the sample (0 gives the estimation-error term alone).

    Examples
    --------
    >>> round(operator_bound(10_000, 2.0, 1.0, margin=0.5, delta=0.05), 4)
    0.1322
    """
    m = check_int("m", m, low=1, remedy="It is the number of training constraints.")
    hs = check_float("hs_norm", hs_norm, 0.0, remedy="It is sup ‖T‖_HS over the operator class.")
    op = check_float("op_norm", op_norm, 0.0, remedy="It is sup ‖T‖_∞ over the operator class.")
    g, dl = _check_margin(margin), _check_delta(delta)
    risk = check_float("empirical_risk", empirical_risk, 0.0, 1.0)
    return risk + (2.0 * (hs + op) / g + math.sqrt(math.log(1.0 / dl) / 2.0)) / math.sqrt(m)


def generalization_bound(
    m: int, n_components: int, *, margin: float, delta: float, empirical_risk: float = 0.0
) -> float:
    """Theorem 1 of Maurer (2006): with probability > 1 − δ over m i.i.d. constraints, every d-dimensional
    projection P has R(P, ρ) ≤ inf_c R̂_γ(P, c, S) + (1/√m)(2(√d + 1)/γ + √(ln(1/δ)/2)).

    Pass the infimum over c of the empirical margin risk as ``empirical_risk``
    (:meth:`HyperbolicPCA.generalization_bound` does). For the all-pairs sample of m labelled points the
    chapter's worst case replaces the m² pairs by m (end of Section 6).

    Examples
    --------
    >>> round(generalization_bound(10_000, 4, margin=0.5, delta=0.05), 4)
    0.1322
    >>> generalization_bound(10_000, 9, margin=0.5, delta=0.05) > generalization_bound(10_000, 4, margin=0.5,
    ...                                                                                 delta=0.05)
    True
    """
    d = check_n_components(n_components, 10**12)
    return operator_bound(m, math.sqrt(d), 1.0, margin=margin, delta=delta, empirical_risk=empirical_risk)


def _check_sq_r(sq_dist: Any, r: Any) -> tuple[np.ndarray, np.ndarray]:
    D = np.asarray(sq_dist, dtype=np.float64).ravel()
    rr = _as_pair_labels(r, D.size)
    if not np.isfinite(D).all() or (D < 0).any():
        raise DataError("sq_dist must hold finite non-negative squared distances; got a negative or non-finite "
                        "value. Pass ‖P(ψ(x) − ψ(x′))‖² per pair.")
    return D, rr


def _as_pair_labels(r: Any, n: int) -> np.ndarray:
    rr = np.asarray(r)
    if rr.ndim != 1 or rr.shape[0] != n:
        raise DataError(f"r must be 1-D with one entry per pair ({n}); got shape {rr.shape}. Pass +1/−1 per pair.")
    if rr.dtype == bool:
        return np.where(rr, 1, -1).astype(np.int64)
    if rr.dtype.kind not in "iuf" or not np.isin(rr, (-1, 1)).all():
        bad = rr.ravel()[0] if rr.dtype.kind not in "iuf" else rr[~np.isin(rr, (-1, 1))][0].item()
        raise DataError(
            f"r must hold +1 (same label) or −1 (different labels) for each pair; got {bad!r}. Map the "
            "equivalence constraints to ±1 (or pass a boolean 'same label' array)."
        )
    return rr.astype(np.int64)


def _weights(r: np.ndarray, balanced: bool) -> np.ndarray:
    """Per-pair weights of the (balanced) empirical distribution: ρ̄ gives each sign half the mass."""
    if not balanced:
        return np.full(r.size, 1.0 / r.size)
    w = np.zeros(r.size)
    for s in (-1, 1):
        k = int(np.sum(r == s))
        if k:
            w[r == s] = (0.5 if np.sum(r == -s) else 1.0) / k
    return w


def margin_risk(sq_dist: Any, r: Any, c: float, margin: float = 0.0, *, balanced: bool = True) -> float:
    """R̂_γ(P, c, S) = Σ_i ρ̂_i f_γ(r_i (c² − ‖P(x_i − x′_i)‖²)) (Maurer, Section 6).

    ``sq_dist`` are the projected squared distances of the pairs, ``r`` their ±1 labels; ρ̂ is uniform
    (``balanced=False``) or gives each sign half the mass (``balanced=True``, the chapter's ρ̄).
    ``margin=0`` is the error rate counting "undecided" (distance = c) as an error.

    Examples
    --------
    >>> margin_risk([0.01, 0.5, 0.6, 0.02], [1, -1, -1, -1], c=0.3)
    0.16666666666666666
    """
    D, rr = _check_sq_r(sq_dist, r)
    c = check_float("c", c, 0.0, low_open=True, remedy="It is the distance threshold.")
    return float(np.sum(_weights(rr, balanced) * margin_loss(rr * (c * c - D), margin)))


def _risk_curve(D: np.ndarray, r: np.ndarray, t: np.ndarray, margin: float, balanced: bool) -> np.ndarray:
    """The margin risk at squared thresholds t, by sorting and prefix sums (O((n + len(t)) log n))."""
    out = np.zeros(t.size)
    w = _weights(r, balanced)
    for s in (1, -1):
        Ds = np.sort(D[r == s])
        if Ds.size == 0:
            continue
        ws = w[r == s][0]
        pre = np.concatenate([[0.0], np.cumsum(Ds)])
        if s == 1:  # f_γ(t − D): 1 for D ≥ t, 1 − (t − D)/γ for t − γ < D < t
            lo = np.searchsorted(Ds, t, "left")
            full = Ds.size - lo
            if margin > 0:
                a = np.searchsorted(Ds, t - margin, "right")
                cnt, sd = lo - a, pre[lo] - pre[a]
                full = full + cnt * (1 - t / margin) + sd / margin
        else:  # f_γ(D − t): 1 for D ≤ t, 1 − (D − t)/γ for t < D < t + γ
            hi = np.searchsorted(Ds, t, "right")
            full = hi.astype(np.float64)
            if margin > 0:
                b = np.searchsorted(Ds, t + margin, "left")
                cnt, sd = b - hi, pre[b] - pre[hi]
                full = full + cnt * (1 + t / margin) - sd / margin
        out += ws * full
    return out


def best_threshold(
    sq_dist: Any, r: Any, margin: float = 0.0, *, balanced: bool = True, c_max: float = 1.0
) -> tuple[float, float]:
    """(c*, R*): the threshold c ∈ (0, c_max) minimising :func:`margin_risk`, and that minimum.

    The risk is piecewise linear in c² with breakpoints at ‖P(x − x′)‖² and ‖P(x − x′)‖² ± γ; it is
    evaluated at every breakpoint and every midpoint between consecutive ones, so the minimum is exact.
    ``c_max=1`` is the chapter's range (an embedding of diameter 1); pass ``np.inf`` for another metric.

    Examples
    --------
    >>> c, risk = best_threshold([0.01, 0.04, 0.5, 0.6], [1, 1, -1, -1])
    >>> bool(0.2 < c < 0.7), risk
    (True, 0.0)
    """
    D, rr = _check_sq_r(sq_dist, r)
    g = _check_margin(margin, allow_zero=True)
    cm = check_float("c_max", c_max, 0.0, low_open=True)
    t_max = cm * cm
    knots = np.concatenate([D, D + g, D - g]) if g > 0 else D
    knots = np.unique(knots[(knots > 0) & (knots < t_max)])
    hi_end = t_max if np.isfinite(t_max) else 2.0 * float(knots.max(initial=0.5)) + 1.0
    ends = np.concatenate([[0.0], knots, [hi_end]])
    cand = np.concatenate([knots, (ends[1:] + ends[:-1]) / 2])
    risks = _risk_curve(D, rr, cand, g, balanced)
    k = int(np.argmin(risks))
    return float(np.sqrt(cand[k])), float(risks[k])


# --------------------------------------------------------------------------------------------------
# The eigenproblem (Maurer, Section 6)
# --------------------------------------------------------------------------------------------------
def pair_weight_matrix(y: Any, eta_neg: float, eta_pos: float = 1.0, *, balanced: bool = True) -> np.ndarray:
    """The all-pairs matrix A with T̂ = Ψᵀ A Ψ: A_ij = 2(δ_ij Σ_n a_in − a_ij) (Maurer, end of Section 6).

    a_ij (i ≠ j) is η₋₁/m² for pairs of different labels and −|η₁|/m² for pairs of equal labels
    (``balanced=False``, the chapter's formula), or η₋₁/N₋ and −|η₁|/N₊ with N∓ the numbers of ordered pairs
    of each kind (``balanced=True``). A is a weighted graph Laplacian: its rows sum to zero.

    Examples
    --------
    >>> A = pair_weight_matrix([0, 0, 1], eta_neg=1.0, eta_pos=1.0, balanced=False)
    >>> bool(np.allclose(A.sum(axis=1), 0))
    True
    """
    codes = np.asarray(y).ravel()
    m = codes.size
    en = check_float("eta_neg", eta_neg, 0.0, low_open=True, remedy="It is the weight η₋₁ > 0 of negative pairs.")
    ep = check_float("eta_pos", eta_pos, 0.0, remedy="It is the weight |η₁| ≥ 0 of positive pairs.")
    same = codes[:, None] == codes[None, :]
    np.fill_diagonal(same, False)
    diff = codes[:, None] != codes[None, :]
    if balanced:
        n_pos, n_neg = int(same.sum()), int(diff.sum())
        a = (en / max(n_neg, 1)) * diff - (ep / max(n_pos, 1)) * same
    else:
        a = (en * diff - ep * same) / float(m * m)
    return 2.0 * (np.diag(a.sum(axis=1)) - a)


def hpca_dual(G: Any, A: Any, n_components: int, *, rtol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Top-d solutions of the generalised eigenproblem G A G γ = λ G γ (Maurer, Section 6).

    With G = U Λ Uᵀ (eigenvalues ≤ ``rtol``·max dropped), β solves the symmetric problem
    (Λ^½ Uᵀ A U Λ^½) β = λ β and γ = U Λ^(−½) β, so that w = Σ_k γ_k ψ(x_k) has ‖w‖ = ‖β‖ = 1 and the w's are
    orthonormal. The same call solves eq. 4 for independent pairs (G = Γ, A = D).

    Returns
    -------
    eigenvalues : (d,) array, decreasing
    coef : (m, d) array of γ's

    Examples
    --------
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.1], [1.0, 0.1]])
    >>> A = pair_weight_matrix([0, 1, 0, 1], eta_neg=1.0)
    >>> lam, g = hpca_dual(X @ X.T, A, 1)
    >>> np.round(np.abs(X.T @ g).ravel(), 6).tolist()  # the direction that separates the labels
    [1.0, 0.0]
    """
    lam, coef = _dual_spectrum(G, A, rtol)
    d = check_n_components(n_components, int(lam.size), what=f"the rank {lam.size} of the Gram matrix")
    return lam[:d], coef[:, :d]


def _dual_spectrum(G: Any, A: Any, rtol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """All r solutions of G A G γ = λ G γ on the range of G (r = its numerical rank), λ decreasing."""
    G = np.asarray(G, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    lam, U = np.linalg.eigh((G + G.T) / 2)
    keep = lam > rtol * max(float(lam.max(initial=0.0)), 0.0)
    if not keep.any():
        raise DataError("the Gram matrix of the pairs is zero (all pair differences vanish), so no direction "
                        "can be chosen. Pass pairs of distinct points.")
    lam, U = lam[keep], U[:, keep]
    half = U * np.sqrt(lam)
    M = half.T @ A @ half
    mu, B = np.linalg.eigh((M + M.T) / 2)
    order = np.argsort(-mu, kind="stable")
    return mu[order], (U / np.sqrt(lam)) @ B[:, order]


def _sign_flip(cols: np.ndarray) -> np.ndarray:
    """One sign per column: the entry largest in magnitude is positive."""
    idx = np.argmax(np.abs(cols), axis=0)
    s = np.sign(cols[idx, np.arange(cols.shape[1])])
    s[s == 0] = 1.0
    return s


# --------------------------------------------------------------------------------------------------
# Evaluation: the one-example nearest-neighbour error of Section 7
# --------------------------------------------------------------------------------------------------
def one_shot_nn_error(D: Any, y: Any) -> float:
    """Exact mean error of 1-NN trained on *one* example per class, over all choices of those examples.

    Maurer's Section 7 protocol ("leave-(n − 1)-out"): from the test sample S′ one example per class is the
    training set, the other points are classified by their nearest example, and the error rate is averaged
    over every choice. Rather than enumerating the Π_c n_c choices this computes the average exactly: a point
    x of class y, not chosen, is correct when the chosen example p of y is nearer than every chosen example of
    the other classes, which for independent uniform choices has probability
    (1/n_y) Σ_{p ≠ x} Π_{c ≠ y} #{q ∈ c : D(x, q) > D(x, p)}/n_c (ties count as errors).

    Parameters
    ----------
    D : (n, n) array
        Distances between the points of S′ (any metric).
    y : (n,) labels

    Examples
    --------
    >>> D = np.abs(np.subtract.outer([0.0, 0.1, 5.0, 5.2], [0.0, 0.1, 5.0, 5.2]))
    >>> one_shot_nn_error(D, [0, 0, 1, 1])
    0.0
    """
    Dm = np.asarray(D, dtype=np.float64)
    n = Dm.shape[0]
    if Dm.ndim != 2 or Dm.shape != (n, n) or not np.isfinite(Dm).all():
        raise DataError(f"D must be a square finite distance matrix; got shape {Dm.shape}. Pass D[i, j] = d(x_i, x_j).")
    codes, classes = as_labels(y, n, min_classes=2)
    K = classes.size
    if n == K:
        raise DataError("y: every class has one example, so no point is left to test. Pass more points per class.")
    members = [np.flatnonzero(codes == k) for k in range(K)]
    sorted_rows = [np.sort(Dm[:, idx], axis=1) for idx in members]
    wrong = 0.0
    for i in range(n):
        own = members[codes[i]]
        ny = own.size
        if ny == 1:
            continue
        t = Dm[i, own[own != i]]
        p_ok = np.ones(t.size)
        for k in range(K):
            if k == codes[i]:
                continue
            row = sorted_rows[k][i]
            p_ok *= (row.size - np.searchsorted(row, t, "right")) / row.size
        wrong += (ny - 1) / ny - p_ok.sum() / ny
    return float(wrong / (n - K))
