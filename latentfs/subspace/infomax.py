"""Auxiliary variational InfoMax projections (Agakov & Barber 2006, LNCS 3940, pp. 204–215).

A linear noisy channel p(y | x) = N(W x, s² I) with orthonormal rows W Wᵀ = I sends a source x (|x| = D) to a code
y (|y| = K < D). Mutual information I(x, y) = H(x) − H(x | y) is intractable for a non-Gaussian source, so the
chapter maximises lower bounds on it with the **IM algorithm**: coordinate ascent alternating a variational decoder
q and the encoder (Barber & Agakov 2003).

* **Simple bound** (eq. 4): I(x, y) ≥ H(x) + ⟨log q(x | y)⟩. With a linear Gaussian decoder q(x|y) = N(U y, S) its
  optimum over the encoder is Linsker's as-if-Gaussian I_G (eq. 3) minus the negentropy of x, whose maximiser is
  the PCA subspace: the simple bound cannot beat PCA.
* **Auxiliary bound** (eq. 8): an auxiliary variable z ∈ {1..J}, p(z_j | x) = softmax_j(v_jᵀx + b_j) (eq. 9, not
  transmitted), and a mixture-of-experts decoder q(x | y, z_j) = N(U_j y, S_j) with a y-independent q(z) give

      I(x, y) ≥ H(x) + ⟨log q(x | y, z)⟩ − (1/M) Σ_i KL(p(z | x_i) ‖ q(z)).

  J = 1 is the simple bound.
* **Hybrid channel** (eq. 10–12): z is sent too, x → {y, z}, and the bound on I(x, {y, z}) drops the KL term:

      Ĩ_H = H(x) + ⟨log q(x | y, z)⟩,  ⟨log q⟩ = −(1/2M) Σ_ij p_ij [tr S_j⁻¹(d_ij d_ijᵀ + s² U_j U_jᵀ) + log|S_j|]
      (+ the −(D/2) log 2π this module keeps), d_ij = x_i − U_j W x_i.

The chapter gives the objective but not the update equations. The updates here (digest §3.6, derived from eqs. 8–12):

* decoder step, closed form for fixed W and p: U_j = C_j Wᵀ (W C_j Wᵀ + s² I)⁻¹ (optimal for any S_j), S_j the
  maximiser within the chosen family (``decoder_cov``: σ_j² I with σ_j² = tr(A_j)/D, diag(A_j), or A_j) of
  A_j = C_j − U_j W C_j, the Gaussian conditional covariance of x given y, plus a ridge ``reg_covar``; q(z_j) = r_j/M.
  C_j = Σ_i p_ij x_i x_iᵀ / r_j, r_j = Σ_i p_ij.
* encoder step: gradient ascent on W over the Stiefel manifold (the Euclidean gradient from torch autograd
  projected on the tangent space, then the chapter's map W = (W̃ W̃ᵀ)^(−1/2) W̃ as retraction), and on (V, b), each
  with a backtracking (Armijo) line search, so no step lowers the objective.

The ridge makes S_j non-singular when M < D (the chapter has M = 30 < D = 196 and does not say how S_j was kept
non-singular). The objective actually maximised is the bound computed with A_j + ρI in place of A_j, that is the
bound minus (ρ/2) Σ_j (r_j/M) tr S_j⁻¹; it is never above the bound, and it is exactly the bound when ρ = 0.

**What ``bound_`` is.** Reported values exclude H(x), as the chapter's Fig. 3 does: each is the sample mean over
the rows of ⟨log q(x_i | y, z)⟩ (minus the KL term for the auxiliary channel), a cross-entropy term in nats of a
*density* q. For a continuous source with differential entropy H(x), its expectation at fixed parameters plus
H(x) is a lower bound on I(x, y) (on I(x, {y, z}) for the hybrid channel); the value itself is not a bound on
I − H(x) for the data at hand. For the empirical distribution of the rows (a discrete source, H(x) = log M,
I(x, y) ≤ H(x)) I − H(x) ≤ 0, while ``bound_`` can be any number: on 600 of the 8 × 8 digits (5 components,
``decoder_cov="full"``, ``scale=True``) it ends at +20.0. It also
depends on the units of x (rescaling x by c shifts it by −D log c at the matching channel noise; digest §3.7).
Use it to compare fits on the same data in the same units (restarts, n_auxiliary, channels), not as mutual
information.

**Scale and degenerate data.** The channel noise s² fixes the units of x, so without ``scale=True`` the data
must be representable in those units: ``fit`` refuses (with a :class:`DataError`) centred values whose squares
overflow or underflow float64. With ``scale=True`` every feature is standardised first (computed without
forming squares of huge values), and the fit does not depend on the units. Constant columns are centred to
exactly zero (they carry no variation); data whose rows are all identical are refused.

Also here: :func:`gaussian_channel_mi` (the exact I(x, y) = ½ log|I + W C Wᵀ/s²| of a Gaussian source, which is
Linsker's I_G of the data covariance), :func:`as_if_gaussian_mi` (eq. 3 written with the joint covariance blocks),
:func:`linear_gaussian_bound` (bound (4) for a Gaussian source with the optimal linear decoder, tight),
:func:`linsker_projection` (maximises I_G by Stiefel gradient ascent; the baseline of §3.7), :func:`pca_components`
and :func:`subspace_overlap` (the W W_pcaᵀ (W W_pcaᵀ)ᵀ matrix of Fig. 3b).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin

from latentfs.core.base import ParamsAsDataError, check_fitted, check_X
from latentfs.core.data import DataError
from latentfs.core.driver import ConvergenceWarning, OptimizerRun, chain_generators, run_restarts
from latentfs.core.options import as_rng, check_choice, check_float, check_int, check_seed
from latentfs.core.weights import FeatureWeights

__all__ = [
    "CHANNELS",
    "DECODER_COVARIANCES",
    "InfoMaxProjection",
    "as_if_gaussian_mi",
    "gaussian_channel_mi",
    "infomax_bound",
    "linear_gaussian_bound",
    "linsker_projection",
    "pca_components",
    "subspace_overlap",
]

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


# --------------------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------------------
class InfoMaxProjection(ParamsAsDataError, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Orthonormal linear projection maximising an auxiliary variational bound on mutual information
    (Agakov & Barber 2006): the IM algorithm with auxiliary variables, for the auxiliary or the hybrid channel.

    Parameters
    ----------
    n_components : int, default 2
        ``|y|``, the dimension of the code; at most the number of features (the chapter has ``|y| < |x|``).
    n_auxiliary : int, default 3
        ``|z|``, the number of states of the auxiliary variable (decoder experts); 1 gives the simple bound (4),
        whose optimum is the PCA subspace.
    channel : {"auxiliary", "hybrid"}, default "auxiliary"
        ``"auxiliary"``: z is not transmitted, bound (8) on I(x, y) with the penalty −KL(p(z|x) ‖ q(z)).
        ``"hybrid"``: z is transmitted, bound (10) on I(x, {y, z}).
    channel_noise : float, default 1.0
        s², the variance of the channel noise (fixed, as in the chapter).
    decoder_cov : {"isotropic", "diag", "full"}, default "isotropic"
        Family of the decoder covariances S_j. ``"full"`` with ``reg_covar=0`` needs M > D per expert.
    reg_covar : float, default 1e-6
        Ridge ρ added to each S_j, relative to the mean per-feature variance of the (centred, scaled) data.
    scale : bool, default False
        Divide each centred feature by its standard deviation (constant features keep scale 1). The data are
        always centred (the channel has no bias).
    init : {"pca", "random"}, default "pca"
        Initial encoder: the chapter's W_pca, or a random orthonormal W (seeded per restart).
    max_iter : int, default 30
        IM iterations T (the chapter's Fig. 3 uses 30).
    inner_steps : int, default 10
        Line-searched gradient steps on W and on (V, b) per IM iteration.
    tol : float, default 0.0
        Stop when an iteration raises the bound by at most ``tol · max(1, |bound|)``; 0 runs ``max_iter``
        iterations (a :class:`ConvergenceWarning` is raised only when ``tol > 0`` and it was not met).
    n_init : int, default 1
        Random restarts (different (V, b), and W when ``init="random"``); the restart with the highest final
        bound is kept.
    init_scale : float, default 0.1
        Standard deviation of the initial v_j·x + b_j ("random around zero").
    seed : int, Generator or None, default 0

    Attributes
    ----------
    components_ : (K, D) array
        W, orthonormal rows, acting on the centred (scaled) inputs.
    mean_, scale_ : (D,) arrays
    aux_coef_, aux_intercept_ : (J, D), (J,) arrays
        V and b of p(z | x) = softmax(V x + b).
    decoder_ : dict
        ``"U"`` (J, D, K), ``"S"`` (the covariances in the ``decoder_cov`` family), ``"q"`` (J,) q(z),
        ``"ridge"`` (the absolute ρ), ``"code_mean"`` (J, K) and ``"code_cov"`` (J, K, K), the per-expert moments
        of the noisy code used by :meth:`code_posterior`.
    bound_ : (T + 1,) array
        The objective (nats, with the ridge) after the first decoder step and after every IM iteration, for the
        kept restart; non-decreasing. It is the bound minus H(x) for a continuous source: the mean over the rows
        of ⟨log q(x | y, z)⟩ (minus the KL term for the auxiliary channel), a log-density in the units of the
        (centred, scaled) inputs. It is not a bound on I − H(x) for the empirical distribution of the rows,
        where I − H(x) ≤ 0 while this value can be positive (+20.0 on digits); see the module docstring.
    init_bounds_ : (n_init,) array
        Final bound of each restart.
    n_iter_ : int
    n_features_in_, feature_names_in_

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-3, 1, (50, 4)), rng.normal(3, 1, (50, 4))])
    >>> model = InfoMaxProjection(n_components=1, n_auxiliary=2, max_iter=5).fit(X)
    >>> model.transform(X).shape
    (100, 1)
    >>> bool(np.all(np.diff(model.bound_) >= -1e-9))
    True
    """

    def __init__(
        self, n_components: int = 2, *, n_auxiliary: int = 3, channel: str = "auxiliary",
        channel_noise: float = 1.0, decoder_cov: str = "isotropic", reg_covar: float = 1e-6, scale: bool = False,
        init: str = "pca", max_iter: int = 30, inner_steps: int = 10, tol: float = 0.0, n_init: int = 1,
        init_scale: float = 0.1, seed: Any = 0,
    ) -> None:
        self.n_components = n_components
        self.n_auxiliary = n_auxiliary
        self.channel = channel
        self.channel_noise = channel_noise
        self.decoder_cov = decoder_cov
        self.reg_covar = reg_covar
        self.scale = scale
        self.init = init
        self.max_iter = max_iter
        self.inner_steps = inner_steps
        self.tol = tol
        self.n_init = n_init
        self.init_scale = init_scale
        self.seed = seed

    # --- checks ---------------------------------------------------------------------------------
    def _check_params(self, M: int, D: int) -> None:
        check_int("n_components", self.n_components, low=1, high=D,
                  remedy=f"X has n_features = {D}, so pass n_components ≤ {D} (the chapter's codes are smaller "
                         "than the source).")
        check_int("n_auxiliary", self.n_auxiliary, low=1, high=max(M, 1),
                  remedy=f"Each auxiliary state needs data: X has {M} rows, pass n_auxiliary ≤ {M} (e.g. 3).")
        check_choice("channel", self.channel, CHANNELS)
        check_choice("decoder_cov", self.decoder_cov, DECODER_COVARIANCES)
        check_choice("init", self.init, ("pca", "random"))
        check_float("channel_noise", self.channel_noise, 0.0, low_open=True,
                    remedy="Pass the channel-noise variance s² > 0, e.g. channel_noise=1.0.")
        check_float("reg_covar", self.reg_covar, 0.0, remedy="Pass a small non-negative ridge, e.g. reg_covar=1e-6.")
        check_float("init_scale", self.init_scale, 0.0, remedy="Pass a small non-negative number, e.g. 0.1.")
        check_float("tol", self.tol, 0.0, remedy="Pass a small non-negative number, e.g. tol=1e-6 (0 runs max_iter).")
        check_int("max_iter", self.max_iter, low=1, remedy="Pass e.g. max_iter=30.")
        check_int("inner_steps", self.inner_steps, low=1, remedy="Pass e.g. inner_steps=10.")
        check_int("n_init", self.n_init, low=1, remedy="Pass e.g. n_init=1.")
        check_seed(self.seed)
        if not isinstance(self.scale, (bool, np.bool_)):
            raise DataError(f"scale must be True or False; got {self.scale!r}. Pass scale=True to standardise.")
        if self.decoder_cov == "full" and self.reg_covar == 0 and M <= D:
            raise DataError(
                f"decoder_cov='full' with reg_covar=0 needs more rows than features (got {M} rows, n_features = "
                f"{D}): the decoder covariance would be singular. Pass reg_covar > 0 or decoder_cov='isotropic'."
            )

    # --- fitting --------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> InfoMaxProjection:
        """Run the IM algorithm on the rows of X (``y`` is ignored)."""
        Xv = check_X(self, X, reset=True, ensure_min_samples=2)
        M, D = Xv.shape
        self._check_params(M, D)
        self.mean_, self.scale_, Xs, var = _centre_and_scale(Xv, bool(self.scale))
        ridge = float(self.reg_covar) * var
        W_pca = pca_components(Xs, self.n_components)
        Xt = torch.as_tensor(Xs, dtype=torch.float64)
        gens = chain_generators(self.seed, self.n_init)  # start r depends on (seed, r) only

        def one(r: int) -> OptimizerRun:
            rng = as_rng(gens[r])
            W0 = W_pca if self.init == "pca" else _orthonormalise(rng.standard_normal((self.n_components, D)))
            run = self._fit_one(Xt, W0, rng, ridge)
            return OptimizerRun(state=run, trace=np.asarray(run["trace"], dtype=np.float64),
                                converged=bool(run["converged"]), interrupted=False, n_iter=len(run["trace"]) - 1)

        # the driver's one restart loop (the convergence warning below is this estimator's own)
        try:
            kept, runs = run_restarts(self.n_init, one, warn=False, desc="InfoMaxProjection")
        except torch.linalg.LinAlgError:
            raise DataError(
                f"the decoder covariance S_j is not positive definite (decoder_cov={self.decoder_cov!r}, "
                f"reg_covar={self.reg_covar!r}): X has {M} rows and {D} features and its covariance within an expert "
                "is singular (collinear or constant features). Pass reg_covar=1e-6 (a ridge) or "
                "decoder_cov='isotropic'."
            ) from None
        best: dict[str, Any] = kept.state
        finals = [r.objective for r in runs]
        if not all(np.isfinite(best[k]).all() for k in ("W", "V", "b", "U", "S", "q")) \
                or not np.isfinite(best["trace"]).all():  # the checks in _centre_and_scale should make this unreachable
            raise DataError(
                f"InfoMaxProjection reached non-finite parameters on X (mean square {var:.3g} in the model's units, "
                f"channel_noise={self.channel_noise!r}). Rescale X (e.g. X / X.std()) or pass scale=True."
            )
        self.components_ = best["W"]
        self.aux_coef_ = best["V"]
        self.aux_intercept_ = best["b"]
        self.decoder_ = {key: best[key] for key in ("U", "S", "q", "code_mean", "code_cov")}
        self.decoder_["ridge"] = ridge
        self.bound_ = np.asarray(best["trace"])
        self.init_bounds_ = np.asarray(finals)
        self.n_iter_ = len(best["trace"]) - 1
        self.n_components_ = int(self.n_components)
        if self.tol > 0 and not best["converged"]:
            warnings.warn(
                f"InfoMaxProjection: the bound still rose by more than tol={self.tol} after max_iter={self.max_iter} "
                "IM iterations; raise max_iter.", ConvergenceWarning, stacklevel=2,
            )
        return self

    def _fit_one(self, X: torch.Tensor, W0: np.ndarray, rng: np.random.Generator, ridge: float) -> dict[str, Any]:
        M, D = X.shape
        J = int(self.n_auxiliary)
        s2 = float(self.channel_noise)
        cov, channel = self.decoder_cov, self.channel
        rms = math.sqrt(max(float((X * X).sum(dim=1).mean()), 1e-300))
        V = torch.as_tensor(rng.normal(0.0, self.init_scale / rms, (J, D)))
        b = torch.as_tensor(rng.normal(0.0, self.init_scale, J))
        if J == 1:
            V, b = torch.zeros(1, D, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
        W = torch.as_tensor(W0.copy())

        def objective(Wm: torch.Tensor, Vm: torch.Tensor, bm: torch.Tensor, dec: tuple[Any, ...]) -> torch.Tensor:
            return _bound_per_sample(X, Wm, Vm, bm, dec[0], dec[1], dec[2], s2, cov, ridge, channel).mean()

        with torch.no_grad():
            dec = _decoder_step(X, W, _responsibilities(X, V, b)[0], s2, cov, ridge)
            f = float(objective(W, V, b, dec))
        trace = [f]
        steps = {"W": 1.0 / max(float((X * X).sum(dim=1).mean()) / s2, 1e-12), "Vb": 1.0}
        converged = False
        for _ in range(self.max_iter):
            f_start = f
            for _ in range(self.inner_steps):
                W, f, moved_w = self._encoder_line_search(objective, W, V, b, dec, f, steps, "W")
                if J > 1:
                    (V, b), f, moved_v = self._encoder_line_search(objective, W, V, b, dec, f, steps, "Vb")
                else:
                    moved_v = False
                if not (moved_w or moved_v):
                    break
            with torch.no_grad():
                new_dec = _decoder_step(X, W, _responsibilities(X, V, b)[0], s2, cov, ridge)
                f_new = float(objective(W, V, b, new_dec))
            if f_new >= f:  # exact maximiser, so this holds up to rounding; never accept a rounding loss
                dec, f = new_dec, f_new
            trace.append(f)
            if self.tol > 0 and f - f_start <= self.tol * max(1.0, abs(f)):
                converged = True
                break
        U, S, q = (t.detach().numpy().copy() for t in dec)
        with torch.no_grad():
            p = _responsibilities(X, V, b)[0]
            r = p.sum(dim=0).clamp_min(1e-300)
            Y0 = X @ W.T
            m = (p.T @ Y0) / r[:, None]  # W m_j  (J, K)
            dev = Y0[None] - m[:, None, :]
            G = torch.einsum("mj,jmk,jml->jkl", p, dev, dev) / r[:, None, None] + s2 * torch.eye(W.shape[0])
        return {"W": W.numpy().copy(), "V": V.numpy().copy(), "b": b.numpy().copy(), "U": U, "S": S, "q": q,
                "code_mean": m.numpy().copy(), "code_cov": G.numpy().copy(), "trace": trace, "converged": converged}

    @staticmethod
    def _encoder_line_search(
        objective: Any, W: torch.Tensor, V: torch.Tensor, b: torch.Tensor, dec: tuple[Any, ...], f: float,
        steps: dict[str, float], which: str,
    ) -> tuple[Any, float, bool]:
        """One gradient-ascent step with Armijo backtracking on W (Stiefel) or on (V, b); never lowers f."""
        if which == "W":
            Wv = W.clone().requires_grad_(True)
            val = objective(Wv, V, b, dec)
            (g,) = torch.autograd.grad(val, Wv)
            Wn = W.numpy()
            xi = _tangent(g.numpy(), Wn)
            g2 = float(np.sum(xi * xi))
        else:
            Vv, bv = V.clone().requires_grad_(True), b.clone().requires_grad_(True)
            val = objective(W, Vv, bv, dec)
            gV, gb = torch.autograd.grad(val, (Vv, bv))
            g2 = float((gV * gV).sum() + (gb * gb).sum())
        if not math.isfinite(g2) or g2 <= 1e-300:
            return (W if which == "W" else (V, b)), f, False
        t = steps[which]
        with torch.no_grad():
            for _ in range(60):
                if which == "W":
                    cand = torch.as_tensor(_orthonormalise(Wn + t * xi))
                    f_new = float(objective(cand, V, b, dec))
                else:
                    cand_v, cand_b = V + t * gV, b + t * gb
                    f_new = float(objective(W, cand_v, cand_b, dec))
                if math.isfinite(f_new) and f_new >= f + 1e-4 * t * g2:
                    steps[which] = t * 2.0
                    if which == "W":
                        return cand, f_new, True
                    return (cand_v, cand_b), f_new, True
                t *= 0.5
        steps[which] = t * 2.0**30
        return (W if which == "W" else (V, b)), f, False

    # --- using the fit --------------------------------------------------------------------------
    @property
    def _n_features_out(self) -> int:
        return int(self.n_components_)

    def _inputs(self, X: Any) -> np.ndarray:
        check_fitted(self, "components_", call="fit(X)")
        Xv = check_X(self, X, reset=False)
        return (Xv - self.mean_) / self.scale_

    def transform(self, X: Any) -> np.ndarray:
        """The noiseless code W x (x centred and scaled as in fit), (M, n_components)."""
        return self._inputs(X) @ self.components_.T

    def aux_proba(self, X: Any) -> np.ndarray:
        """p(z | x) (eq. 9) for the rows of X, (M, n_auxiliary)."""
        Xs = torch.as_tensor(self._inputs(X))
        p, _ = _responsibilities(Xs, torch.as_tensor(self.aux_coef_), torch.as_tensor(self.aux_intercept_))
        return p.numpy()

    def sample_code(self, X: Any, *, seed: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Send X through the channel: y = W x + s ε and z ~ p(z | x); returns ``(y, z)``."""
        rng = as_rng(seed)
        Y = self.transform(X)
        Y = Y + math.sqrt(float(self.channel_noise)) * rng.standard_normal(Y.shape)
        P = self.aux_proba(X)
        z = (P.cumsum(axis=1) > rng.random((P.shape[0], 1))).argmax(axis=1)
        return Y, z

    def reconstruct(self, Y: Any, z: Any = None) -> np.ndarray:
        """Decoder mean ⟨x⟩_{q(x | y, z)} = U_z y, back in the input units (the chapter's Fig. 4 reconstruction).

        Without ``z`` (the auxiliary channel, where z is not sent) the experts' means are averaged with weights
        p(z_j | y) ∝ q(z_j) N(y; W m_j, W Σ_j Wᵀ + s² I), m_j and Σ_j the responsibility-weighted mean and
        covariance of the training inputs: a moment-matched (as-if-Gaussian per expert) stand-in for the
        Bayes-consistent p(z | y) ∝ p(z) p(y | z) of the chapter's footnote 2 (whose printed weight reads
        p(y | z)). Pass ``z`` for the exact decoder mean of one expert.
        """
        check_fitted(self, "components_", call="fit(X)")
        Yv = np.asarray(Y, dtype=np.float64)
        K = self.n_components_
        if Yv.ndim != 2 or Yv.shape[1] != K or not np.isfinite(Yv).all():
            raise DataError(f"Y must be a finite (n, {K}) array of codes; got shape {Yv.shape}. Pass transform(X).")
        U = self.decoder_["U"]
        if z is None:
            Xs = np.einsum("mj,jdk,mk->md", self.code_posterior(Yv), U, Yv)
        else:
            zv = np.asarray(z)
            if zv.shape != (Yv.shape[0],) or zv.dtype.kind not in "iu" or zv.min() < 0 or zv.max() >= U.shape[0]:
                raise DataError(
                    f"z must hold one auxiliary state in 0..{U.shape[0] - 1} per row of Y ({Yv.shape[0]} rows); "
                    f"got {zv!r:.60}. Pass the z returned by sample_code, or aux_proba(X).argmax(axis=1)."
                )
            Xs = np.einsum("mdk,mk->md", U[zv], Yv)
        return Xs * self.scale_ + self.mean_

    def code_posterior(self, Y: Any) -> np.ndarray:
        """p(z | y) ∝ q(z_j) N(y; W m_j, W Σ_j Wᵀ + s² I) for codes Y (see :meth:`reconstruct`), (n, n_auxiliary)."""
        check_fitted(self, "components_", call="fit(X)")
        Yv = np.asarray(Y, dtype=np.float64)
        means, covs, q = self.decoder_["code_mean"], self.decoder_["code_cov"], self.decoder_["q"]
        logw = np.empty((Yv.shape[0], q.size))
        for j in range(q.size):
            diff = Yv - means[j]
            _, logdet = np.linalg.slogdet(covs[j])
            maha = np.einsum("mk,mk->m", diff @ np.linalg.inv(covs[j]), diff)
            logw[:, j] = np.log(max(float(q[j]), 1e-300)) - 0.5 * (maha + logdet)
        logw -= logw.max(axis=1, keepdims=True)
        w = np.exp(logw)
        return w / w.sum(axis=1, keepdims=True)

    def score_samples(self, X: Any) -> np.ndarray:
        """Per-row value of the bound minus H(x) at the fitted parameters (the terms whose mean is the bound)."""
        Xs = torch.as_tensor(self._inputs(X))
        d = self.decoder_
        with torch.no_grad():
            vals = _bound_per_sample(
                Xs, torch.as_tensor(self.components_), torch.as_tensor(self.aux_coef_),
                torch.as_tensor(self.aux_intercept_), torch.as_tensor(d["U"]), torch.as_tensor(d["S"]),
                torch.as_tensor(d["q"]), float(self.channel_noise), self.decoder_cov, float(d["ridge"]), self.channel,
            )
        return vals.numpy()

    def score(self, X: Any, y: Any = None) -> float:
        """The bound minus H(x) on X at the fitted parameters (mean of :meth:`score_samples`; higher is better)."""
        return float(np.mean(self.score_samples(X)))

    def feature_weights(self, method: str = "encoder") -> FeatureWeights:
        """Per-feature relevance read from the fitted projection.

        ``method="encoder"``: ‖W e_d‖² = Σ_k W_kd², the squared length of feature d's unit axis after projection
        onto the code subspace — the share of that feature's direction that passes through the channel. In
        [0, 1], summing to n_components. The scores are in the units the model saw: with ``scale=True``
        (standardised inputs) features compete on an equal footing; without it, a feature with a larger spread
        tends to get a larger score.

        ``method="decoder"``: Σ_j q(z_j) ‖U_j[d, :]‖², how strongly feature d is reconstructed from the code,
        averaged over the experts (expert-specific loadings are in ``info["per_expert"]``).
        """
        check_fitted(self, "components_", call="fit(X)")
        check_choice("method", method, ("encoder", "decoder"))
        names = getattr(self, "feature_names_in_", None)
        if method == "encoder":
            scores = np.sum(self.components_**2, axis=0)
            info: dict[str, Any] = {"definition": "sum_k W[k, d]^2 (squared norm of the projected unit axis)"}
        else:
            per = np.sum(self.decoder_["U"] ** 2, axis=2)  # (J, D)
            scores = self.decoder_["q"] @ per
            info = {"definition": "sum_j q(z_j) ||U_j[d, :]||^2", "per_expert": per.tolist()}
        info.update(scale=bool(self.scale), channel=self.channel, n_auxiliary=int(self.n_auxiliary))
        return FeatureWeights(scores, method=f"infomax.{method}",
                              feature_names=None if names is None else list(names), info=info)
