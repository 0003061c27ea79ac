"""The information-theoretic quantities behind :class:`~latentfs.subspace.infomax.InfoMaxProjection`: the
Gaussian-channel mutual information and its bounds, Linsker's projection, PCA and subspace overlap, and the
auxiliary (variational) bound with its closed-form decoder step. The method and its references are in the module
docstring of :mod:`latentfs.subspace.infomax`, which re-exports everything here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.options import as_rng, check_choice, check_float, check_int

CHANNELS = ("auxiliary", "hybrid")
"""``"auxiliary"``: z is not sent, bound (8) on I(x, y); ``"hybrid"``: z is sent, bound (10) on I(x, {y, z})."""

DECODER_COVARIANCES = ("isotropic", "diag", "full")
"""Families of the decoder covariances S_j: σ_j² I, diagonal, or full (each plus the ridge)."""

_LOG_2PI = math.log(2.0 * math.pi)


# --------------------------------------------------------------------------------------------------
# Gaussian-channel formulas
# --------------------------------------------------------------------------------------------------
def _as_matrix(A: Any, name: str) -> np.ndarray:
    arr = np.asarray(A, dtype=np.float64)
    if arr.ndim != 2 or not np.isfinite(arr).all():
        raise DataError(f"{name} must be a finite 2-D array; got shape {arr.shape}. Pass a matrix of numbers.")
    return arr


def _check_pair(W: Any, C: Any, channel_noise: Any) -> tuple[np.ndarray, np.ndarray, float]:
    W = _as_matrix(W, "W")
    C = _as_matrix(C, "C")
    if C.shape != (W.shape[1], W.shape[1]):
        raise DataError(
            f"C must be the {W.shape[1]} × {W.shape[1]} covariance of the source (W has {W.shape[1]} columns); "
            f"got shape {C.shape}. Pass the covariance of the same features W projects."
        )
    s2 = check_float("channel_noise", channel_noise, 0.0, low_open=True, remedy="Pass the variance s² > 0, e.g. 1.0.")
    return W, C, s2


def gaussian_channel_mi(W: Any, C: Any, channel_noise: float = 1.0) -> float:
    """I(x, y) = ½ log|I + W C Wᵀ / s²| in nats for x ~ N(·, C) and y = W x + s ε (exact).

    For any source it is Linsker's as-if-Gaussian I_G of the covariance C (Agakov & Barber, eq. 3 with the
    proportionality constant ½, written in the form that stays finite when C is singular).

    Examples
    --------
    >>> round(gaussian_channel_mi(np.eye(1, 2), np.diag([3.0, 1.0]), 1.0), 6)  # ½ log 4
    0.693147
    """
    W, C, s2 = _check_pair(W, C, channel_noise)
    sign, logdet = np.linalg.slogdet(np.eye(W.shape[0]) + W @ C @ W.T / s2)
    return 0.5 * float(logdet)


def as_if_gaussian_mi(W: Any, C: Any, channel_noise: float = 1.0) -> float:
    """Linsker's I_G (Agakov & Barber, eqs. 2–3): ½ (log|Σ_xx| − log|Σ_xx − Σ_xy Σ_yy⁻¹ Σ_xyᵀ|) with the moments of
    the Gaussian p_G(x, y) matched to p(x) p(y|x): Σ_xx = C, Σ_xy = C Wᵀ, Σ_yy = W C Wᵀ + s² I.

    Needs a non-singular C; :func:`gaussian_channel_mi` is the same number in a form that does not.

    Examples
    --------
    >>> C = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> W = np.array([[0.6, 0.8]])
    >>> bool(np.isclose(as_if_gaussian_mi(W, C), gaussian_channel_mi(W, C)))
    True
    """
    W, C, s2 = _check_pair(W, C, channel_noise)
    sign_c, logdet_c = np.linalg.slogdet(C)
    if sign_c <= 0:
        raise DataError(
            "C must be positive definite for the eq.-3 form of I_G; it is singular. Use gaussian_channel_mi, "
            "which is the same quantity and finite for singular C."
        )
    Sxy = C @ W.T
    Syy = W @ C @ W.T + s2 * np.eye(W.shape[0])
    cond = C - Sxy @ np.linalg.solve(Syy, Sxy.T)
    return 0.5 * float(logdet_c - np.linalg.slogdet(cond)[1])


def linear_gaussian_bound(W: Any, C: Any, channel_noise: float = 1.0) -> float:
    """Bound (4), H(x) + ⟨log q(x | y)⟩, for a Gaussian source N(·, C) with the optimal linear Gaussian decoder
    q(x | y) = N(U y, S) (U = C Wᵀ(W C Wᵀ + s² I)⁻¹, S = C − U W C), in nats.

    The decoder is then the exact posterior, so the bound is tight: it equals :func:`gaussian_channel_mi`
    (digest §3.9, oracle 3). Needs a non-singular C.
    """
    W, C, s2 = _check_pair(W, C, channel_noise)
    D = C.shape[0]
    U = C @ W.T @ np.linalg.inv(W @ C @ W.T + s2 * np.eye(W.shape[0]))
    S = C - U @ W @ C
    A = C - U @ W @ C - C @ W.T @ U.T + U @ (W @ C @ W.T + s2 * np.eye(W.shape[0])) @ U.T  # E(x − Uy)(x − Uy)ᵀ
    sign_c, logdet_c = np.linalg.slogdet(C)
    sign_s, logdet_s = np.linalg.slogdet(S)
    if sign_c <= 0 or sign_s <= 0:
        raise DataError("C must be positive definite for linear_gaussian_bound; it is singular. Pass a full-rank C.")
    entropy = 0.5 * (D * (1.0 + _LOG_2PI) + logdet_c)
    expected_log_q = -0.5 * (np.trace(np.linalg.solve(S, A)) + logdet_s + D * _LOG_2PI)
    return float(entropy + expected_log_q)


def pca_components(X: Any, n_components: int) -> np.ndarray:
    """The top ``n_components`` unit eigenvectors (rows) of the second moment ⟨x xᵀ⟩ of the centred rows of X.

    This is the chapter's W_pca (the initial encoder of §4.1); its rows are orthonormal. Signs: the largest
    entry of each row is positive.
    """
    Xc = _as_matrix(X, "X")
    Xc = Xc - Xc.mean(axis=0)
    _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    W = vt[:n_components].copy()
    idx = np.argmax(np.abs(W), axis=1)
    W *= np.sign(W[np.arange(W.shape[0]), idx])[:, None]
    return W


def subspace_overlap(W1: Any, W2: Any) -> np.ndarray:
    """W1 W2ᵀ (W1 W2ᵀ)ᵀ for orthonormal-row W1, W2 (Agakov & Barber, Fig. 3b): the identity exactly when both
    span the same subspace. Its eigenvalues are the squared cosines of the principal angles between the subspaces.

    Examples
    --------
    >>> R = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> W = np.eye(2, 4)
    >>> bool(np.allclose(subspace_overlap(R @ W, W), np.eye(2)))
    True
    """
    A = _as_matrix(W1, "W1") @ _as_matrix(W2, "W2").T
    return A @ A.T


def _centre_and_scale(X: np.ndarray, scale: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(mean, scale, the centred and scaled X, its mean square) for the model, refusing what it cannot represent.

    Constant columns (every value equal) are centred to exactly 0: the mean of n copies of 0.1 is not 0.1 in
    floating point, and the rounding residue would otherwise be fitted as variation. Squares are formed only
    after dividing each column by its largest |value|, so ×1e300 data give finite moments.
    """
    M = X.shape[0]
    constant = np.ptp(X, axis=0) == 0
    if constant.all():
        raise DataError(
            f"X has zero variance: all {M} rows are identical (every column is constant, e.g. column 0 = "
            f"{X[0, 0]:g}). InfoMax projects variation; pass data whose rows differ."
        )
    top = np.max(np.abs(X), axis=0)
    top = np.where(top > 0, top, 1.0)
    mean = (X / top).mean(axis=0) * top  # no overflow in the sum
    mean[constant] = X[0, constant]
    with np.errstate(over="ignore", invalid="ignore"):
        Xc = X - mean
    if not np.isfinite(Xc).all():
        raise DataError(
            "X's values span more than the float range once centred (a column reaches both ends of ±1.8e308). "
            "Divide X by a large number first."
        )
    Xc[:, constant] = 0.0
    amax = np.max(np.abs(Xc), axis=0)  # > 0 on the varying columns
    unit = np.where(amax > 0, amax, 1.0)
    ms_unit = ((Xc / unit) ** 2).mean(axis=0)  # mean square of each column in units of its largest |value|
    if scale:
        sd = unit * np.sqrt(ms_unit)
        sd = np.where(constant | (sd <= 0), 1.0, sd)
        Xs = Xc / sd
        return mean, sd, Xs, float(np.mean(Xs * Xs))
    big = float(amax.max())
    if not big <= math.sqrt(1e300 / (M * X.shape[1])):
        raise DataError(
            f"X's centred values reach {big:.3g}, whose squares overflow float64 in the fit's moments (the rule: "
            f"n_samples · n_features · max|x − x̄|² ≤ 1e300). The channel noise s² = channel_noise fixes the units "
            "of x, so the model is not scale-free: pass scale=True (each feature standardised) or rescale X, "
            "e.g. X / X.std()."
        )
    var = float(np.sum(amax**2 * ms_unit) / X.shape[1])  # mean square over all entries
    if not var >= 1e-280:
        raise DataError(
            f"X's centred values are at most {big:.3g}: their squares underflow float64 in the fit's moments (the "
            f"rule: mean square ≥ 1e-280; got {var:.3g}). The channel noise s² = channel_noise fixes the units of "
            "x, so the model is not scale-free: pass scale=True (each feature standardised) or rescale X, e.g. "
            "X / X.std()."
        )
    return mean, np.ones(X.shape[1]), Xc, var


def _orthonormalise(A: np.ndarray) -> np.ndarray:
    """(A Aᵀ)^(−1/2) A: the chapter's map from W̃ to an orthonormal-row W (the polar factor)."""
    evals, evecs = np.linalg.eigh(A @ A.T)
    return (evecs / np.sqrt(evals)) @ evecs.T @ A


def _tangent(G: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Projection of a Euclidean gradient G on the tangent space of the Stiefel manifold at W (W Wᵀ = I)."""
    GW = G @ W.T
    return G - 0.5 * (GW + GW.T) @ W


def linsker_projection(
    X: Any, n_components: int, channel_noise: float = 1.0, *, max_iter: int = 500, tol: float = 1e-10,
    seed: Any = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Linsker's as-if-Gaussian InfoMax projection: maximise I_G(W) = ½ log|I + W C Wᵀ/s²| over orthonormal-row W
    (C the sample covariance of X), by Riemannian gradient ascent with a backtracking line search from a random
    orthonormal start.

    Returns ``(W, trace)``: the K × D encoder and the I_G value (nats) per iteration. For this isotropic channel
    the maximiser is the top-K principal subspace (digest §3.2), which the tests check; the function is the
    baseline the chapter compares with and does not assume that answer.
    """
    Xv = _as_matrix(X, "X")
    M, D = Xv.shape
    K = check_int("n_components", n_components, low=1, high=D, remedy=f"X has {D} features; pass at most {D}.")
    max_iter = check_int("max_iter", max_iter, low=1)
    tol = check_float("tol", tol, 0.0)
    s2 = check_float("channel_noise", channel_noise, 0.0, low_open=True, remedy="Pass the variance s² > 0, e.g. 1.0.")
    Xc = Xv - Xv.mean(axis=0)
    C = Xc.T @ Xc / M
    W = _orthonormalise(as_rng(seed).standard_normal((K, D)))

    def value(Wm: np.ndarray) -> float:
        return 0.5 * float(np.linalg.slogdet(np.eye(K) + Wm @ C @ Wm.T / s2)[1])

    f = value(W)
    trace = [f]
    step = 1.0 / max(float(np.trace(C)) / s2, 1e-12)
    for _ in range(max_iter):
        B = np.linalg.inv(np.eye(K) + W @ C @ W.T / s2)
        xi = _tangent(B @ W @ C / s2, W)  # Euclidean gradient of ½ log|I + W C Wᵀ/s²| is B W C / s²
        g2 = float(np.sum(xi * xi))
        if g2 < 1e-30:
            break
        while step > 1e-14:
            W_new = _orthonormalise(W + step * xi)
            f_new = value(W_new)
            if f_new >= f + 1e-4 * step * g2:
                break
            step *= 0.5
        else:
            break
        gain = f_new - f
        W, f = W_new, f_new
        trace.append(f)
        step *= 2.0
        if gain <= tol * max(1.0, abs(f)):
            break
    return W, np.asarray(trace)


# --------------------------------------------------------------------------------------------------
# The auxiliary bound and its closed-form decoder step (torch, float64)
# --------------------------------------------------------------------------------------------------
def _responsibilities(X: torch.Tensor, V: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """p(z_j | x_i) = softmax_j(v_jᵀ x_i + b_j) (eq. 9, sign immaterial) and its logarithm, each (M, J)."""
    logp = torch.log_softmax(X @ V.T + b, dim=1)
    return logp.exp(), logp


def _decoder_step(
    X: torch.Tensor, W: torch.Tensor, p: torch.Tensor, s2: float, cov: str, ridge: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Closed-form maximiser of ⟨log q(x | y, z)⟩ over (U_j, S_j) and of −KL over q(z), for fixed W and p.

    Returns U (J, D, K), S (J,) variances, (J, D) diagonals or (J, D, D) matrices, and q (J,).
    """
    M, D = X.shape
    K = W.shape[0]
    r = p.sum(dim=0).clamp_min(1e-300)  # (J,)
    Y0 = X @ W.T  # noiseless codes (M, K)
    CWt = torch.einsum("mj,md,mk->jdk", p, X, Y0) / r[:, None, None]  # C_j Wᵀ  (J, D, K)
    WCWt = torch.einsum("mj,mk,ml->jkl", p, Y0, Y0) / r[:, None, None]  # W C_j Wᵀ (J, K, K)
    eye = torch.eye(K, dtype=X.dtype)
    U = torch.linalg.solve(WCWt + s2 * eye, CWt.transpose(1, 2)).transpose(1, 2)  # (W C Wᵀ + s²I) symmetric
    if cov == "isotropic":
        trC = torch.einsum("mj,m->j", p, (X * X).sum(dim=1)) / r
        S = (trC - torch.einsum("jdk,jdk->j", U, CWt)) / D + ridge
        S = S.clamp_min(ridge if ridge > 0 else 1e-300)
    elif cov == "diag":
        diagC = torch.einsum("mj,md->jd", p, X * X) / r[:, None]
        S = (diagC - torch.einsum("jdk,jdk->jd", U, CWt)) + ridge
        S = S.clamp_min(ridge if ridge > 0 else 1e-300)
    else:
        C = torch.einsum("mj,md,me->jde", p, X, X) / r[:, None, None]
        S = C - U @ CWt.transpose(1, 2) + ridge * torch.eye(D, dtype=X.dtype)
        S = 0.5 * (S + S.transpose(1, 2))
    q = p.sum(dim=0) / M
    return U, S, q


def _log_q_terms(
    X: torch.Tensor, W: torch.Tensor, U: torch.Tensor, S: torch.Tensor, s2: float, cov: str, ridge: float
) -> torch.Tensor:
    """E_{y ~ N(W x_i, s² I)} log q(x_i | y, z_j) for every i, j (eq. 11 with the constants kept), computed with
    S_j ⁻¹(A + ρI) in place of S_j⁻¹A (the ridge penalty; module docstring). Returns (M, J)."""
    D = X.shape[1]
    recon = torch.einsum("jdk,mk->jmd", U, X @ W.T)  # U_j W x_i
    d = X[None] - recon  # (J, M, D), eq. 12
    if cov == "isotropic":
        quad = ((d * d).sum(dim=2) + s2 * (U * U).sum(dim=(1, 2))[:, None] + ridge * D) / S[:, None]
        logdet = D * torch.log(S)
    elif cov == "diag":
        quad = ((d * d) / S[:, None, :]).sum(dim=2) + (s2 * (U * U).sum(dim=2) / S).sum(dim=1)[:, None]
        quad = quad + (ridge / S).sum(dim=1)[:, None]
        logdet = torch.log(S).sum(dim=1)
    else:
        L = torch.linalg.cholesky(S)
        Ld = torch.linalg.solve_triangular(L, d.transpose(1, 2), upper=False)  # (J, D, M)
        LU = torch.linalg.solve_triangular(L, U, upper=False)
        Linv = torch.linalg.solve_triangular(L, torch.eye(D, dtype=X.dtype).expand_as(S), upper=False)
        quad = (Ld * Ld).sum(dim=1) + (s2 * (LU * LU).sum(dim=(1, 2)) + ridge * (Linv * Linv).sum(dim=(1, 2)))[:, None]
        logdet = 2.0 * torch.log(torch.diagonal(L, dim1=1, dim2=2)).sum(dim=1)
    return (-0.5 * (quad + logdet[:, None] + D * _LOG_2PI)).T


def _bound_per_sample(
    X: torch.Tensor, W: torch.Tensor, V: torch.Tensor, b: torch.Tensor, U: torch.Tensor, S: torch.Tensor,
    q: torch.Tensor, s2: float, cov: str, ridge: float, channel: str,
) -> torch.Tensor:
    """Σ_j p_ij E log q(x_i | y, z_j) [− KL(p(z|x_i) ‖ q(z)) for the auxiliary channel]: the bound minus H(x),
    per sample (M,); its mean is the objective."""
    p, logp = _responsibilities(X, V, b)
    out = (p * _log_q_terms(X, W, U, S, s2, cov, ridge)).sum(dim=1)
    if channel == "auxiliary":
        out = out - (p * (logp - torch.log(q.clamp_min(1e-300)))).sum(dim=1)
    return out


def infomax_bound(
    X: Any, W: Any, V: Any, b: Any, U: Any, S: Any, q: Any, *, channel_noise: float = 1.0,
    decoder_cov: str = "isotropic", reg_covar: float = 0.0, channel: str = "auxiliary",
) -> float:
    """The auxiliary bound (eq. 8) or the hybrid bound (eq. 10) minus H(x), in nats, at given parameters.

    ``X`` (M, D) in the units the model sees (centred, scaled); ``W`` (K, D); ``V`` (J, D); ``b`` (J,); ``U``
    (J, D, K); ``S`` the decoder covariances in the ``decoder_cov`` family; ``q`` (J,); ``reg_covar`` the absolute
    ridge ρ (the bound then has −(ρ/2) Σ_j (r_j/M) tr S_j⁻¹ added; see the module docstring).
    """
    check_choice("channel", channel, CHANNELS)
    check_choice("decoder_cov", decoder_cov, DECODER_COVARIANCES)
    t = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in
         {"X": X, "W": W, "V": V, "b": b, "U": U, "S": S, "q": q}.items()}
    with torch.no_grad():
        vals = _bound_per_sample(t["X"], t["W"], t["V"], t["b"], t["U"], t["S"], t["q"], float(channel_noise),
                                 decoder_cov, float(reg_covar), channel)
    return float(vals.mean())
