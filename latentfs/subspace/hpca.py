"""Hyperbolic PCA: subspace selection from equivalence constraints (Maurer 2006; LNCS 3940, pp. 185–200).

A metric representation is learned from *equivalence constraints* (x, x′, r): r = +1 when x and x′ carry the
same label, r = −1 otherwise. Points are embedded by a kernel map ψ into a Hilbert space H with
‖ψ(x) − ψ(x′)‖ ≤ 1, and a d-dimensional orthogonal projection P is chosen so that same-label pairs come
close and different-label pairs stay apart: x′ is declared "of the type of x" when ‖P(ψ(x) − ψ(x′))‖ < c.

**The bound (Theorem 1).** With f_γ the margin function (1 for t ≤ 0, 1 − t/γ on (0, γ), 0 for t ≥ γ) and
the empirical margin risk R̂_γ(P, c, S) = (1/m) Σ_i f_γ(r_i (c² − ‖P(x_i − x′_i)‖²)), with probability
> 1 − δ over m i.i.d. constraints, for every d-dimensional projection P,

    R(P, ρ) ≤ inf_{c ∈ (0, 1)} R̂_γ(P, c, S) + (1/√m) (2(√d + 1)/γ + √(ln(1/δ)/2)).

Theorem 3 replaces √d and 1 by ‖𝒯‖_HS and ‖𝒯‖_∞ for a class 𝒯 of positive Hilbert–Schmidt operators
(:func:`operator_bound`); :func:`generalization_bound` is Theorem 1.

**The algorithm (Section 6).** For c ∈ (0, 1) and γ > 0 let η₋₁ = min{1/(1 − c²), 1/γ} and
η₁ = −min{1/c², 1/γ} (:func:`eta_from_threshold`) and T̂ = (1/m) Σ_i η_{r_i} Q_{x_i − x′_i}, where
Q_v w = ⟨w, v⟩ v. Then R̂_γ(P, c, S) ≤ 1 + (c²/m) Σ_i η_{r_i} − ⟨T̂, P⟩_HS, and the right-hand side is
minimised over projections of rank d by the projection onto the top-d eigenvectors of T̂. T̂ is not positive
(positive pairs enter with a negative weight), so its quadratic form has hyperboloids as level sets: hence
*hyperbolic* PCA. With negative constraints only it is PCA.

Kernel forms: for independent pairs the eigenvectors are w = Σ_i α_i (ψ(x_i) − ψ(x′_i)) with
Γ D Γ α = λ Γ α, Γ the Gram matrix of the differences, D = diag(η_{r_i}) (eq. 4); for *all* pairs of a
labelled sample, w = Σ_k γ_k ψ(x_k) with G A G γ = λ G γ, G the Gram matrix and
A_ij = (2/m²)(δ_ij Σ_n η_{r_in} − η_{r_ij}), a weighted graph Laplacian (end of Section 6). Both are solved
here by :func:`hpca_dual` through the symmetric r × r problem on the range of the Gram matrix.

Conventions of this module (the chapter's experiments, Section 7): rows are scaled to unit length
(``normalize=True``) and the kernel is κ(x, y) = ½ exp(−C‖x − y‖²), whose embedding has
‖ψ(x) − ψ(x′)‖² = 1 − exp(−C‖x − x′‖²) ≤ 1 as the bounds require; ``kernel="linear"`` is ⟨x, y⟩.
The weights are given as ``eta_neg`` = η₋₁ > 0 and ``eta_pos`` = |η₁| ≥ 0 (the chapter reports η₋₁ "with
η₁ = 1"); ``balanced=True`` weights the mean over negative pairs against the mean over positive pairs,
T̂ = η₋₁ · mean_neg Q − |η₁| · mean_pos Q, the chapter's balanced risk ρ̄ (Section 2).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.spatial.distance import pdist
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.preprocessing import normalize as _unit_rows

from latentfs.core.base import ParamsAsDataError, check_fitted, check_X, require_y
from latentfs.core.data import DataError, as_labels
from latentfs.core.options import check_choice, check_float, check_int, check_n_components
from latentfs.core.weights import FeatureWeights

__all__ = [
    "HPCA_KERNELS",
    "HyperbolicPCA",
    "best_threshold",
    "eta_from_threshold",
    "generalization_bound",
    "hpca_dual",
    "margin_loss",
    "margin_risk",
    "one_shot_nn_error",
    "operator_bound",
    "pair_weight_matrix",
    "select_hpca",
]

HPCA_KERNELS = ("rbf", "linear")
"""Kernels of :class:`HyperbolicPCA`: ``"rbf"`` is ½ exp(−C‖x − y‖²) (Maurer, Section 7), ``"linear"`` ⟨x, y⟩."""


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


# --------------------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------------------
class HyperbolicPCA(ParamsAsDataError, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Hyperbolic PCA (Maurer 2006): the projection onto the top eigenvectors of the constraint operator T̂.

    ``fit(X, y)`` uses every pair of the labelled sample (the chapter's all-pairs variant, solved as
    G A G γ = λ G γ); :meth:`fit_pairs` takes explicit constraints (x_i, x′_i, r_i) (eq. 4).
    :meth:`transform` gives the coordinates ⟨w_k, ψ(x)⟩ in the chosen subspace, so Euclidean distances of the
    output are the projected distances ‖P(ψ(x) − ψ(x′))‖.

    Parameters
    ----------
    n_components : int, default 2
        d, the rank of the projection.
    kernel : {"rbf", "linear"}, default "rbf"
        ``"rbf"``: κ(x, y) = ½ exp(−C‖x − y‖²) (Section 7; embedding diameter ≤ 1). ``"linear"``: ⟨x, y⟩.
    C : float, default 8.0
        Width of the RBF kernel (the chapter uses 16 for handwritten digits and 8 elsewhere).
    eta_neg : float, default 0.1
        η₋₁ > 0, the weight of negative (different-label) pairs.
    eta_pos : float, default 1.0
        ``|η₁|`` ≥ 0, the weight of positive (same-label) pairs (0 gives PCA of the pair differences).
    balanced : bool, default True
        Weight the *mean* over negative pairs against the mean over positive pairs (the chapter's ρ̄).
    normalize : bool, default True
        Scale every row to unit Euclidean length first (Section 7; zero rows stay zero).

    Attributes
    ----------
    eigenvalues_ : (d,) array
        The top-d eigenvalues of T̂ (decreasing; they may be negative).
    components_ : (d, n_features) array
        The orthonormal directions w_k (``kernel="linear"`` only: the RBF directions live in the RKHS and
        are given by ``dual_coef_`` on ``X_fit_``).
    mean_ : (n_features,) array
        Mean of the (normalised) training points (``kernel="linear"``).
    X_fit_ : (n_support, n_features) array
        The (normalised) training points that carry the RBF directions.
    dual_coef_ : (n_support, d) array
        w_k = Σ_l dual_coef_[l, k] ψ(X_fit_[l]).
    offset_ : (d,) array
        Subtracted so that the training points have mean coordinates zero.
    n_components_, n_features_in_ : int
    n_constraints_ : int
        Number of training constraints (ordered pairs i ≠ j for ``fit``, pairs for ``fit_pairs``).
    n_independent_ : int
        The m of the bounds: ``fit_pairs``'s number of pairs, or for ``fit`` the number of points (the
        chapter's worst case for the dependent all-pairs sample).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 5)); y = np.repeat([0, 1, 2], 20); X[:, 0] += 3 * y
    >>> hp = HyperbolicPCA(1, kernel="linear", normalize=False).fit(X, y)
    >>> bool(abs(hp.components_[0, 0]) > 0.95)
    True
    """

    def __init__(
        self, n_components: int = 2, *, kernel: str = "rbf", C: float = 8.0, eta_neg: float = 0.1,
        eta_pos: float = 1.0, balanced: bool = True, normalize: bool = True,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.C = C
        self.eta_neg = eta_neg
        self.eta_pos = eta_pos
        self.balanced = balanced
        self.normalize = normalize

    # ------------------------------------------------------------------ helpers
    def _check_params(self) -> None:
        check_choice("kernel", self.kernel, HPCA_KERNELS)
        check_float("C", self.C, 0.0, low_open=True, remedy="It is the RBF width, e.g. C=8 (Maurer, Section 7).")
        check_float("eta_neg", self.eta_neg, 0.0, low_open=True,
                    remedy="It is the weight η₋₁ > 0 of negative pairs, e.g. eta_neg=0.1.")
        check_float("eta_pos", self.eta_pos, 0.0, remedy="It is the weight |η₁| ≥ 0 of positive pairs, e.g. 1.0.")
        for name in ("balanced", "normalize"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise DataError(f"{name} must be True or False; got {getattr(self, name)!r}.")
        check_n_components(self.n_components, 10**12)

    def _prep(self, Xv: np.ndarray) -> np.ndarray:
        return _unit_rows(Xv) if self.normalize else Xv

    def _gram(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        if self.kernel == "linear":
            return A @ B.T
        return 0.5 * np.exp(-float(self.C) * euclidean_distances(A, B, squared=True))

    def _check_spread(self, Xv: np.ndarray, Z: np.ndarray) -> None:
        """Refuse data without variation: identical rows (after normalising, when asked), or, for the RBF kernel,
        rows whose embeddings cannot be told apart in floating point (the centred Gram matrix would be rounding
        noise, and its eigenvectors arbitrary)."""
        n = Xv.shape[0]
        if (np.ptp(Z, axis=0) == 0).all():
            after = " after scaling every row to unit length (normalize=True)" if self.normalize else ""
            raise DataError(
                f"X has zero variance: all {n} rows of its {Xv.shape[1]} feature(s) are identical{after}, so no "
                "direction separates the labels. "
                "Pass rows that differ" + (" in direction, or normalize=False." if self.normalize else ".")
            )
        if self.kernel == "rbf":
            spread = float(-np.expm1(-float(self.C) * euclidean_distances(Z, Z, squared=True).max()))
            if spread <= 1e-12:  # ‖ψ(x) − ψ(x′)‖² = 1 − exp(−C‖x − x′‖²), at most 1
                raise DataError(
                    f"X has no spread in the RBF feature space: the largest ‖ψ(x) − ψ(x′)‖² is {spread:.3g} "
                    f"(rule: > 1e-12) with C={self.C!r}, so every pair of rows is the same point to float precision. "
                    "Standardise X (recentre and rescale its columns) or raise C."
                )

    def _rank_error(self, rank: int, n: int, p: int) -> DataError:
        return DataError(
            f"n_components must be at most {rank}, the rank of the pair differences in feature space "
            f"(n_samples = {n}, n_features = {p}); got {self.n_components}. Choose fewer components or pass "
            "more (distinct) data."
        )

    def _solve(self, G: np.ndarray, A: np.ndarray, n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
        lam, coef = _dual_spectrum(G, A)
        if self.n_components > lam.size:
            raise self._rank_error(int(lam.size), n, p)
        d = int(self.n_components)
        return lam[:d], coef[:, :d]

    def _finish_linear(self, Z: np.ndarray, lam: np.ndarray, W: np.ndarray) -> None:
        W = W * _sign_flip(W)
        self.components_ = W.T
        self.mean_ = Z.mean(axis=0)
        self._support = Z
        self.eigenvalues_ = lam
        self.n_components_ = int(W.shape[1])

    def _finish_kernel(self, Z: np.ndarray, lam: np.ndarray, coef: np.ndarray) -> None:
        coef = coef * _sign_flip(coef)
        self.X_fit_ = Z
        self.dual_coef_ = coef
        self.offset_ = np.zeros(coef.shape[1])
        self.offset_ = self._features(Z).mean(axis=0)
        self.eigenvalues_ = lam
        self.n_components_ = int(coef.shape[1])

    def _features(self, Zn: np.ndarray) -> np.ndarray:
        if self.kernel == "linear":
            return (Zn - self.mean_) @ self.components_.T
        return self._gram(Zn, self.X_fit_) @ self.dual_coef_ - self.offset_

    def _linear_top(self, T: np.ndarray, n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
        lam, V = np.linalg.eigh((T + T.T) / 2)
        order = np.argsort(-lam, kind="stable")[: int(self.n_components)]
        return lam[order], V[:, order]

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any = None) -> HyperbolicPCA:
        """Fit on all pairs (i ≠ j) of a labelled sample: r_ij = +1 when y_i = y_j, −1 otherwise.

        Needs at least two classes (negative pairs); a sample whose labels are all distinct has no positive
        pair, and HPCA is then PCA of the (normalised) data.
        """
        require_y(self, y, "HyperbolicPCA learns from the equivalence constraints given by the labels y")
        self._check_params()
        Xv = check_X(self, X, reset=True)
        n, p = Xv.shape
        if n < 2:
            raise DataError(f"X needs at least 2 samples to form a pair; got n_samples = {n} (1 sample). "
                            "Pass more samples.")
        codes, _ = as_labels(y, n, min_classes=2)
        Z = self._prep(Xv)
        self._check_spread(Xv, Z)
        A = pair_weight_matrix(codes, self.eta_neg, self.eta_pos, balanced=bool(self.balanced))
        if self.kernel == "linear":
            rank = int(np.linalg.matrix_rank(Z - Z.mean(axis=0)))
            if self.n_components > rank:
                raise self._rank_error(rank, n, p)
            lam, W = self._linear_top(Z.T @ A @ Z, n, p)
            self._finish_linear(Z, lam, W)
        else:
            H = np.eye(n) - 1.0 / n
            G = H @ self._gram(Z, Z) @ H  # differences span the centred embedding; A 1 = 0 so T̂ is unchanged
            lam, coef = self._solve(G, A, n, p)
            self._finish_kernel(Z, lam, H @ coef)
        self._train: tuple[Any, ...] = ("labels", self._features(Z), codes)
        self.n_constraints_ = int(n * (n - 1))
        self.n_independent_ = int(n)
        return self

    def fit_pairs(self, X1: Any, X2: Any, r: Any) -> HyperbolicPCA:
        """Fit on explicit equivalence constraints (X1[i], X2[i], r[i]), r = +1 (same) or −1 (different)
        (eq. 4: Γ D Γ α = λ Γ α with Γ the Gram matrix of the differences ψ(x_i) − ψ(x′_i))."""
        self._check_params()
        X1v = check_X(self, X1, reset=True)
        X2v = check_X(self, X2, reset=False)
        m, p = X1v.shape
        if X2v.shape[0] != m:
            raise DataError(f"X2 must have one row per row of X1 ({m}); got {X2v.shape[0]}. Pass paired rows.")
        rr = _as_pair_labels(r, m)
        if not (rr == -1).any():
            raise DataError("r holds no negative pair (−1): HPCA needs pairs of different labels to spread. "
                            "Add pairs of points with different labels.")
        n_neg, n_pos = int(np.sum(rr == -1)), int(np.sum(rr == 1))
        en, ep = float(self.eta_neg), float(self.eta_pos)
        if self.balanced:
            dw = np.where(rr == -1, en / n_neg, -ep / max(n_pos, 1))
        else:
            dw = np.where(rr == -1, en, -ep) / m
        Z1, Z2 = self._prep(X1v), self._prep(X2v)
        if self.kernel == "linear":
            Delta = Z1 - Z2
            rank = int(np.linalg.matrix_rank(Delta))
            if self.n_components > rank:
                raise self._rank_error(rank, m, p)
            lam, W = self._linear_top(Delta.T @ (dw[:, None] * Delta), m, p)
            self._finish_linear(np.vstack([Z1, Z2]), lam, W)
        else:
            Gamma = self._gram(Z1, Z1) - self._gram(Z1, Z2) - self._gram(Z2, Z1) + self._gram(Z2, Z2)
            lam, alpha = self._solve(Gamma, np.diag(dw), m, p)
            self._finish_kernel(np.vstack([Z1, Z2]), lam, np.vstack([alpha, -alpha]))
        self._train = ("pairs", self._features(Z1), self._features(Z2), rr)
        self.n_constraints_ = int(m)
        self.n_independent_ = int(m)
        return self

    @property
    def _n_features_out(self) -> int:
        return int(self.n_components_)

    # ------------------------------------------------------------------ use
    def transform(self, X: Any) -> np.ndarray:
        """Coordinates ⟨w_k, ψ(x)⟩ (centred on the training points) of the rows of X."""
        check_fitted(self, "eigenvalues_", call="fit(X, y) or fit_pairs(X1, X2, r)")
        Xv = check_X(self, X, reset=False)
        return self._features(self._prep(Xv))

    def pair_distance(self, X1: Any, X2: Any) -> np.ndarray:
        """‖P(ψ(x_i) − ψ(x′_i))‖ for paired rows of X1 and X2."""
        Z1, Z2 = self.transform(X1), self.transform(X2)
        if Z1.shape[0] != Z2.shape[0]:
            raise DataError(f"X2 must have one row per row of X1 ({Z1.shape[0]}); got {Z2.shape[0]}.")
        return np.sqrt(np.sum((Z1 - Z2) ** 2, axis=1))

    def _constraints(self, X: Any = None, y: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Squared projected distances and ±1 labels: of all pairs i < j of (X, y), or of the training set."""
        check_fitted(self, "eigenvalues_", call="fit(X, y) or fit_pairs(X1, X2, r)")
        if X is None:
            if y is not None:
                raise DataError("y was given without X; pass both (X, y) or neither (the training constraints).")
            if self._train[0] == "pairs":
                _, E1, E2, rr = self._train
                return np.sum((E1 - E2) ** 2, axis=1), rr
            _, E, codes = self._train
        else:
            require_y(self, y, "the constraints of a new sample come from its labels y")
            E = self.transform(X)
            codes, _ = as_labels(y, E.shape[0], min_classes=2)
        same = pdist(codes[:, None].astype(np.float64), "cityblock") == 0
        return pdist(E, "sqeuclidean"), np.where(same, 1, -1)

    def empirical_margin_risk(
        self, c: float, margin: float = 0.01, X: Any = None, y: Any = None, *, balanced: bool | None = None
    ) -> float:
        """R̂_γ(P, c, S) on the training constraints, or on all pairs of (X, y) (:func:`margin_risk`).
        ``balanced`` defaults to the estimator's setting."""
        D, rr = self._constraints(X, y)
        return margin_risk(D, rr, c, margin, balanced=self.balanced if balanced is None else bool(balanced))

    def best_threshold(
        self, X: Any = None, y: Any = None, *, margin: float = 0.0, balanced: bool | None = None
    ) -> tuple[float, float]:
        """(c*, R*): the threshold minimising the (balanced) margin risk on the training constraints or on
        all pairs of (X, y); with ``margin=0`` R* is the error rate of the one-example threshold classifier
        (Section 7's "R* balanced" and "c*")."""
        D, rr = self._constraints(X, y)
        c_max = 1.0 if self.kernel == "rbf" else np.inf
        return best_threshold(D, rr, margin, balanced=self.balanced if balanced is None else bool(balanced),
                              c_max=c_max)

    def generalization_bound(self, delta: float = 0.05, margin: float = 0.01) -> float:
        """Theorem 1 evaluated at the fitted projection: inf_c R̂_γ on the training constraints (uniform
        weights, as the theorem's sample) plus the estimation error with m = ``n_independent_``.

        Needs an embedding of diameter ≤ 1, which the RBF kernel guarantees; for ``kernel="linear"`` it is
        checked on the training points."""
        check_fitted(self, "eigenvalues_", call="fit(X, y) or fit_pairs(X1, X2, r)")
        if self.kernel == "linear":
            Z = self._support
            diam = float(np.sqrt(pdist(Z, "sqeuclidean").max())) if Z.shape[0] > 1 else 0.0
            if diam > 1.0 + 1e-12:
                raise DataError(
                    f"the bound needs ‖x − x′‖ ≤ 1 in feature space (Maurer, Section 2); the training points "
                    f"reach {diam:.3g} with kernel='linear'. Use kernel='rbf' or scale X by 1/{diam:.3g}."
                )
        g = _check_margin(margin)
        D, rr = self._constraints()
        _, risk = best_threshold(D, rr, g, balanced=False)
        return generalization_bound(self.n_independent_, self.n_components_, margin=g, delta=delta,
                                    empirical_risk=min(risk, 1.0))

    def feature_weights(self, max_points: int = 200) -> FeatureWeights:
        """How much each input feature moves the projected point: the mean diagonal of JᵀJ, J the Jacobian of
        x ↦ (⟨w_k, ψ(x)⟩)_k with respect to the (normalised) input, over at most ``max_points`` training
        points. For ``kernel="linear"`` J = W and the score is diag(P) = Σ_k w_kf² (digest §6.6)."""
        check_fitted(self, "eigenvalues_", call="fit(X, y) or fit_pairs(X1, X2, r)")
        k = check_int("max_points", max_points, low=1)
        names = getattr(self, "feature_names_in_", None)
        if self.kernel == "linear":
            scores = np.sum(self.components_**2, axis=0)
            info: dict[str, Any] = {"definition": "diagonal of the projector P = Σ_k w_k w_kᵀ (sums to n_components)"}
        else:
            Z = self.X_fit_
            pts = Z[np.linspace(0, Z.shape[0] - 1, min(k, Z.shape[0])).astype(np.int64)]
            K = self._gram(pts, Z)  # (b, s)
            C = float(self.C)
            scores = np.zeros(Z.shape[1])
            for b in range(pts.shape[0]):
                Wb = self.dual_coef_ * K[b][:, None]  # (s, d)
                J = -2.0 * C * (np.outer(Wb.sum(axis=0), pts[b]) - Wb.T @ Z)  # (d, p)
                scores += np.sum(J**2, axis=0)
            scores /= pts.shape[0]
            info = {"definition": "mean over training points of diag(JᵀJ), J = Jacobian of the projection",
                    "n_points": int(pts.shape[0])}
        return FeatureWeights(scores, method="hpca.metric_diagonal",
                              feature_names=None if names is None else list(names), info=info)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


# --------------------------------------------------------------------------------------------------
# Model selection (Section 7): grid over (d, η₋₁), scored by the balanced empirical margin risk
# --------------------------------------------------------------------------------------------------
def select_hpca(
    X: Any, y: Any, n_components: Any = (8, 16, 24), eta_neg: Any = (0.01, 0.03, 0.1, 0.3), *,
    margin: float = 0.01, **params: Any,
) -> tuple[HyperbolicPCA, list[dict[str, float]]]:
    """Fit HPCA on every (d, η₋₁) of the grid and keep the one with the smallest balanced empirical risk
    inf_c R̂_γ(P, c, S⁽²⁾) on the training pairs (Maurer, Section 7, γ = 0.01).

    The eigenproblem is solved once per η₋₁ and truncated for each d. ``params`` go to
    :class:`HyperbolicPCA` (kernel, C, eta_pos, normalize; ``balanced`` is True as in the chapter).

    Returns
    -------
    best : HyperbolicPCA, fitted
    table : list of dict with keys ``n_components``, ``eta_neg``, ``c``, ``risk``
    """
    g = _check_margin(margin)
    ds = sorted({check_n_components(d, 10**12) for d in np.atleast_1d(n_components).tolist()})
    etas = [check_float("eta_neg", e, 0.0, low_open=True) for e in np.atleast_1d(eta_neg).tolist()]
    if not etas:
        raise DataError("eta_neg must hold at least one value; got an empty grid.")
    if params.get("balanced", True) is not True:
        raise DataError("select_hpca scores by the balanced risk; leave balanced=True.")
    table: list[dict[str, float]] = []
    best: tuple[float, int, float] | None = None
    for e in etas:
        est = HyperbolicPCA(max(ds), eta_neg=e, **params).fit(X, y)
        _, E, codes = est._train
        same = pdist(codes[:, None].astype(np.float64), "cityblock") == 0
        rr = np.where(same, 1, -1)
        for d in ds:
            c, risk = best_threshold(pdist(E[:, :d], "sqeuclidean"), rr, g,
                                     c_max=1.0 if est.kernel == "rbf" else np.inf)
            table.append({"n_components": d, "eta_neg": e, "c": c, "risk": risk})
            if best is None or risk < best[0] - 1e-12:
                best = (risk, d, e)
    assert best is not None
    return HyperbolicPCA(best[1], eta_neg=best[2], **params).fit(X, y), table
