"""The numerics of partial least squares (:mod:`latentfs.subspace.pls`): the fitted components (the state), the
dominant singular pair, NIPALS in its regression and canonical modes, SIMPLS (:data:`PLS_ALGORITHMS`), VIP values,
and the centring and checks of X and Y. The method and its references are in the module docstring of
:mod:`latentfs.subspace.pls`, which re-exports everything here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from latentfs.core.data import DataError, as_continuous


def _check_choice(value: Any, name: str, choices: Any) -> Any:
    if value not in choices:
        raise DataError(f"{name} must be one of {sorted(choices)}; got {value!r}.")
    return value


# --------------------------------------------------------------------------------------------------
# State: the fitted components
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PLSComponents:
    """What a PLS fit extracts, in the chapter's symbols (all float64, in centred/scaled units).

    Attributes
    ----------
    x_weights : (N, A) array
        W, unit-norm weights acting on the deflated X (NIPALS). For SIMPLS, the Gram–Schmidt basis of R
        (see :func:`_orthonormal_weights`), which equals NIPALS's W when both fit the same model; VIP is
        always computed from W.
    x_loadings : (N, A) array
        P, p = Xᵀt/(tᵀt).
    y_weights : (M, A) array
        c of the inner loop (unit norm in Mode A; the unnormalised Yᵀt/(tᵀt) in regression mode, as in
        scikit-learn).
    y_loadings : (M, A) array
        C (regression: Y ≈ T Cᵀ, c = Yᵀt/(tᵀt)) or Q (Mode A: q = Yᵀu/(uᵀu)).
    x_scores, y_scores : (n, A) arrays
        T and U.
    x_rotations : (N, A) array
        W(PᵀW)⁻¹ (NIPALS) or R (SIMPLS): maps centred X to T.
    coef : (N, M) array
        B = W(PᵀW)⁻¹Cᵀ (Rosipal & Krämer, Section 2.4), for centred/scaled X and Y.
    n_iter : tuple of int
        Inner iterations per component (1 when computed by SVD).
    """

    x_weights: np.ndarray
    x_loadings: np.ndarray
    y_weights: np.ndarray
    y_loadings: np.ndarray
    x_scores: np.ndarray
    y_scores: np.ndarray
    x_rotations: np.ndarray
    coef: np.ndarray
    n_iter: tuple[int, ...]


# --------------------------------------------------------------------------------------------------
# Math: small functions named after the quantity they compute
# --------------------------------------------------------------------------------------------------
def _flip_sign(w: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic sign: the entry of w largest in magnitude is positive (scikit-learn's rule)."""
    s = np.sign(w[np.argmax(np.abs(w))]) or 1.0
    return w * s, c * s


def dominant_singular_pair(
    cross: np.ndarray, *, inner: str = "svd", tol: float = 1e-20, max_iter: int = 500
) -> tuple[np.ndarray, np.ndarray, int]:
    """Dominant left/right singular vectors (w, c) of a cross-product matrix X_aᵀY_a (eq. 3).

    ``inner="power"`` is the NIPALS loop: c ← Sᵀw, w ← Sc/‖Sc‖ until ‖Δw‖² < tol, started from the first
    non-zero column of S (i.e. u = the first non-zero column of Y); ``inner="svd"`` computes the fixed
    point directly. Both return w with unit norm and c = Sᵀw/‖Sᵀw‖.
    """
    if cross.shape[1] == 1:  # PLS1: one iteration (Section 2.1)
        w = cross[:, 0] / np.linalg.norm(cross[:, 0])
        return w, np.ones(1), 1
    if inner == "svd":
        u, _, vt = np.linalg.svd(cross, full_matrices=False)
        return u[:, 0], vt[0], 1
    norms = np.linalg.norm(cross, axis=0)
    start = int(np.flatnonzero(norms > 0)[0])
    w = cross[:, start] / norms[start]
    it = 0
    while it < max_iter:
        it += 1
        c = cross.T @ w
        w_new = cross @ c
        w_new /= np.linalg.norm(w_new)
        done = float(np.sum((w_new - w) ** 2)) < tol
        w = w_new
        if done:
            break
    c = cross.T @ w
    return w, c / np.linalg.norm(c), it


def _check_left(cross: np.ndarray, start_norm: float, a: int) -> None:
    if start_norm <= 1e-300:
        raise DataError(
            "Y: XᵀY is zero after centring (Y is constant, or every column of X is uncorrelated with Y), so "
            "PLS has no direction to extract. Check that Y varies and belongs to these samples."
        )
    if np.linalg.norm(cross) <= 1e-12 * start_norm:
        raise DataError(
            f"n_components: X and Y have no covariance left after {a} component(s) (the deflated XᵀY "
            f"is zero), so component {a + 1} is undefined. Use n_components={a} or fewer."
        )


def _nipals_regression(
    X: np.ndarray, Y: np.ndarray, n_components: int, inner: str, tol: float, max_iter: int
) -> PLSComponents:
    """PLS1/PLS2 with implicit deflation X ← X − t pᵀ, Y ← Y − t cᵀ (Rosipal & Krämer, Section 2.2)."""
    n, N = X.shape
    M = Y.shape[1]
    W = np.zeros((N, n_components))
    P = np.zeros((N, n_components))
    C = np.zeros((M, n_components))
    T = np.zeros((n, n_components))
    U = np.zeros((n, n_components))
    cross = X.T @ Y  # X_aᵀY_a, deflated by a rank-one update each step
    start_norm = float(np.linalg.norm(cross))
    iters = []
    for a in range(n_components):
        _check_left(cross, start_norm, a)
        w, _, it = dominant_singular_pair(cross, inner=inner, tol=tol, max_iter=max_iter)
        w, _ = _flip_sign(w, w[:1])
        iters.append(it)
        Ta, Pa, Ca = T[:, :a], P[:, :a], C[:, :a]
        t = X @ w - Ta @ (Pa.T @ w)  # t = X_a w
        tt = float(t @ t)
        Tt = Ta.T @ t  # ≈ 0; kept so that p and c equal the explicitly deflated X_aᵀt, Y_aᵀt
        p = (X.T @ t - Pa @ Tt) / tt
        c = (Y.T @ t - Ca @ Tt) / tt
        cc = float(c @ c)
        u = (Y @ c - Ta @ (Ca.T @ c)) / cc if cc > 0 else np.zeros(n)  # u = Y_a c/(cᵀc)
        W[:, a], P[:, a], C[:, a], T[:, a], U[:, a] = w, p, c, t, u
        cross = cross - np.outer(p, c) * tt  # X_{a+1}ᵀY_{a+1} = X_aᵀY_a − p (tᵀY_a)
    rotations = W @ np.linalg.pinv(P.T @ W)
    return PLSComponents(W, P, C.copy(), C, T, U, rotations, rotations @ C.T, tuple(iters))


def _nipals_canonical(
    X: np.ndarray, Y: np.ndarray, n_components: int, inner: str, tol: float, max_iter: int
) -> PLSComponents:
    """PLS Mode A: X ← X − t pᵀ and Y ← Y − u qᵀ with unit-norm w and c (Section 2.2)."""
    n, N = X.shape
    M = Y.shape[1]
    Xa, Ya = X.copy(), Y.copy()
    W, P = np.zeros((N, n_components)), np.zeros((N, n_components))
    Cw, Q = np.zeros((M, n_components)), np.zeros((M, n_components))
    T, U = np.zeros((n, n_components)), np.zeros((n, n_components))
    start_norm = float(np.linalg.norm(X.T @ Y))
    iters = []
    for a in range(n_components):
        cross = Xa.T @ Ya
        _check_left(cross, start_norm, a)
        w, c, it = dominant_singular_pair(cross, inner=inner, tol=tol, max_iter=max_iter)
        w, c = _flip_sign(w, c)
        iters.append(it)
        t, u = Xa @ w, Ya @ c
        p = Xa.T @ t / (t @ t)
        q = Ya.T @ u / (u @ u)
        Xa -= np.outer(t, p)
        Ya -= np.outer(u, q)
        W[:, a], P[:, a], Cw[:, a], Q[:, a], T[:, a], U[:, a] = w, p, c, q, t, u
    rotations = W @ np.linalg.pinv(P.T @ W)
    return PLSComponents(W, P, Cw, Q, T, U, rotations, rotations @ Q.T, tuple(iters))


def _simpls(
    X: np.ndarray, Y: np.ndarray, n_components: int, inner: str, tol: float, max_iter: int
) -> PLSComponents:
    """SIMPLS (de Jong 1993; the digest's [EXT] algorithm): orthonormal T, B = R Qᵀ."""
    n, N = X.shape
    M = Y.shape[1]
    R, P, V = np.zeros((N, n_components)), np.zeros((N, n_components)), np.zeros((N, n_components))
    Q, Cw = np.zeros((M, n_components)), np.zeros((M, n_components))
    T, U = np.zeros((n, n_components)), np.zeros((n, n_components))
    cross = X.T @ Y
    start_norm = float(np.linalg.norm(cross))
    iters = []
    for a in range(n_components):
        _check_left(cross, start_norm, a)
        r, c, it = dominant_singular_pair(cross, inner=inner, tol=tol, max_iter=max_iter)
        r, c = _flip_sign(r, c)
        iters.append(it)
        t = X @ r
        norm_t = float(np.linalg.norm(t))
        t, r = t / norm_t, r / norm_t
        p, q = X.T @ t, Y.T @ t
        v = p - V[:, :a] @ (V[:, :a].T @ p)
        v /= np.linalg.norm(v)
        cross = cross - np.outer(v, v @ cross)
        R[:, a], P[:, a], V[:, a], Q[:, a], Cw[:, a], T[:, a], U[:, a] = r, p, v, q, c, t, Y @ q
    W = _orthonormal_weights(R)
    return PLSComponents(W, P, Cw, Q, T, U, R, R @ Q.T, tuple(iters))


def _orthonormal_weights(R: np.ndarray) -> np.ndarray:
    """W from SIMPLS's R: the Gram–Schmidt basis of R's columns, each signed to agree with its r_a.

    In NIPALS, W is orthonormal and PᵀW is upper triangular, so R = W(PᵀW)⁻¹ has span(r_1..r_a) =
    span(w_1..w_a) for every a and W is the Gram–Schmidt basis of R. Defining SIMPLS's W the same way
    makes W (and hence VIP) identical to NIPALS's whenever both fit the same model (one response: both
    span the Krylov space of XᵀX and Xᵀy; de Jong 1993).
    """
    Qm, Rm = np.linalg.qr(R)
    signs = np.sign(np.diag(Rm))
    signs[signs == 0] = 1.0
    return Qm * signs


PLS_ALGORITHMS: dict[tuple[str, str], Callable[..., PLSComponents]] = {
    ("nipals", "regression"): _nipals_regression,
    ("nipals", "canonical"): _nipals_canonical,
    ("simpls", "regression"): _simpls,
}
"""Fitting function per (algorithm, deflation)."""


def vip_values(weights: np.ndarray, scores: np.ndarray, y_loadings: np.ndarray) -> np.ndarray:
    """VIP_j = sqrt(N Σ_a SS_a (w_ja/‖w_a‖)² / Σ_a SS_a), SS_a = ‖c_a‖² t_aᵀt_a (Wold et al.)."""
    ss = np.sum(y_loadings**2, axis=0) * np.sum(scores**2, axis=0)
    wn2 = (weights / np.linalg.norm(weights, axis=0)) ** 2
    return np.sqrt(weights.shape[0] * (wn2 @ ss) / ss.sum())


def _centre_scale(A: np.ndarray, scale: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = A.mean(axis=0)
    A = A - mean
    if scale:
        std = A.std(axis=0, ddof=1)
        std[std == 0] = 1.0
        A /= std
    else:
        std = np.ones(A.shape[1])
    return A, mean, std


def _validate_xy(X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], bool]:
    xm = as_continuous(X, name="X", min_samples=2)
    if not hasattr(Y, "iloc"):
        Y = np.asarray(Y)
        if Y.dtype == object:  # numbers stored as objects: read them as numbers
            try:
                Y = Y.astype(np.float64)
            except (TypeError, ValueError):
                pass
    one_d = Y.ndim == 1
    ym = as_continuous(np.asarray(Y).reshape(-1, 1) if one_d else Y, name="Y")
    if ym.shape[0] != xm.shape[0]:
        raise DataError(
            f"Y must have one row per row of X: got {ym.shape[0]} rows of Y for {xm.shape[0]} of X. "
            "Pass the responses of the same samples."
        )
    return xm.values, ym.values, xm.feature_names, one_d
