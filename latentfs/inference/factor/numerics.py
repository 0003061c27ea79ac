"""The numerics of factor-analysis EM (:mod:`latentfs.inference.factor.em`): the state, the data prepared for
the E-step, the E-step (Gruber & Weiss 2006, eqs. 3-6), the M-step (eqs. 7-8, and its constrained ridge form by a
KKT system), the log prior, and SQUAREM around the EM map. The method, its formulas and its references are in the
module docstring of :mod:`latentfs.inference.factor.em`; the engine spec that runs these is there too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.models.factor import FactorAnalysis

_LOG_2PI = math.log(2 * math.pi)


# ---------------------------------------------------------------------------------------------- state
@dataclass
class FAParams:
    """Factor-analysis parameters (the EM state).

    Attributes
    ----------
    loadings : Tensor (n_features, n_components)
        W (Titterington), A = S^t (Gruber & Weiss).
    noise_variance : Tensor (n_features,)
        diag Λ (Ψ in Gruber & Weiss).
    mean : Tensor (n_features,)
        μ.
    """

    loadings: torch.Tensor
    noise_variance: torch.Tensor
    mean: torch.Tensor

    def numpy(self) -> dict[str, np.ndarray]:
        return {
            "loadings": self.loadings.cpu().numpy(),
            "noise_variance": self.noise_variance.cpu().numpy(),
            "mean": self.mean.cpu().numpy(),
        }


@dataclass
class FAData:
    """Data prepared once for the E-step.

    Attributes
    ----------
    values : Tensor (n, d); 0 where missing.
    observed : Tensor (n, d) of 0/1, or None when nothing is missing.
    patterns : Tensor (P, d) of 0/1, the distinct missingness patterns; pattern_of_row : (n,) long.
    pattern_counts : Tensor (P,), rows per pattern.
    count : Tensor (d,), rows observing each feature (n_j).
    sum_squares : Tensor (d,), Σ_n y_nj² over observed entries.
    values_sq : Tensor (n, d), y² (0 where missing); kept when entries are missing.
    col_mean, col_cov : Tensor (d,), (d, d); complete data only: ȳ and the biased covariance S.
    n_rows : int, optional
        The number of rows when ``values`` does not hold them: a fit's driver keeps only the pooled sums
        and moments (``values`` is then empty, see :mod:`latentfs.inference.factor.data`).
    """

    values: torch.Tensor
    observed: torch.Tensor | None
    patterns: torch.Tensor
    pattern_of_row: torch.Tensor
    pattern_counts: torch.Tensor
    count: torch.Tensor
    sum_squares: torch.Tensor
    col_mean: torch.Tensor | None = None
    col_cov: torch.Tensor | None = None
    values_sq: torch.Tensor | None = None
    n_rows: int | None = None

    @property
    def n_samples(self) -> int:
        return int(self.values.shape[0]) if self.n_rows is None else int(self.n_rows)


@dataclass
class EStats:
    """Expected sufficient statistics of one E-step (additive over row shards).

    ``A`` (d, q+1): Σ_n y_nj E[z̃_n]; ``B`` (d, q+1, q+1) or (q+1, q+1) when shared by all features:
    Σ_n E[z̃_n z̃_n^t] over rows observing j; ``loglik``: Σ_n log p(y_n,o).
    """

    A: torch.Tensor
    B: torch.Tensor
    loglik: torch.Tensor


def prepare_fa_data(values: np.ndarray, *, dtype: torch.dtype, device: Any, use_moments: bool = True) -> FAData:
    """Group rows by missingness pattern and precompute the per-feature sums (and moments if complete)."""
    nan = np.isnan(values)
    complete = not nan.any()
    # complete data are used as they are (read only; no copy when the dtype already matches)
    X = torch.as_tensor(values if complete else np.where(nan, 0.0, values), dtype=dtype, device=device)
    n, d = values.shape
    if complete:
        patterns = torch.ones(1, d, dtype=dtype, device=device)
        of_row = torch.zeros(n, dtype=torch.long, device=device)
        counts = torch.tensor([float(n)], dtype=dtype, device=device)
        observed = None
    else:
        pats, inverse, cnt = np.unique(~nan, axis=0, return_inverse=True, return_counts=True)
        patterns = torch.as_tensor(pats, dtype=dtype, device=device)
        of_row = torch.as_tensor(inverse.reshape(-1), dtype=torch.long, device=device)
        counts = torch.as_tensor(cnt, dtype=dtype, device=device)
        observed = torch.as_tensor(~nan, dtype=dtype, device=device)
    values_sq = None if observed is None else X * X
    mean = cov = None
    if observed is None and use_moments:
        mean = X.mean(0)
        Xc = X - mean
        cov = Xc.T @ Xc / n
        sum_squares = n * (torch.diagonal(cov) + mean * mean)  # Σ_n x_nj² from the moments, not another pass
    else:
        sum_squares = values_sq.sum(0) if values_sq is not None else torch.einsum("ij,ij->j", X, X)
    data = FAData(
        values=X,
        observed=observed,
        patterns=patterns,
        pattern_of_row=of_row,
        pattern_counts=counts,
        count=(patterns * counts[:, None]).sum(0),
        sum_squares=sum_squares,
        values_sq=values_sq,
    )
    data.col_mean, data.col_cov = mean, cov
    return data


# ---------------------------------------------------------------------------------------------- E-step
def _unpack_symmetric(packed: torch.Tensor, size: int) -> torch.Tensor:
    """(..., size(size+1)/2) upper-triangle entries -> (..., size, size) symmetric matrices."""
    rows, cols = torch.triu_indices(size, size, device=packed.device)
    out = torch.zeros(packed.shape[:-1] + (size, size), dtype=packed.dtype, device=packed.device)
    out[..., rows, cols] = packed
    out[..., cols, rows] = packed
    return out


def _pack_outer(a: torch.Tensor) -> torch.Tensor:
    """Upper-triangle entries of a_i a_iᵗ for each row of ``a`` (m, k) -> (m, k(k+1)/2)."""
    rows, cols = torch.triu_indices(a.shape[1], a.shape[1], device=a.device)
    return a[:, rows] * a[:, cols]


def posterior_precision(loadings: torch.Tensor, noise_variance: torch.Tensor, patterns: torch.Tensor) -> torch.Tensor:
    """M_o = I + W_o^t Λ_o^{-1} W_o for each pattern (P, q, q); Gruber & Weiss eq. (3) with σ_x = 1.

    One product (P × d) @ (d × q(q+1)/2) over the packed symmetric outer products w_j w_jᵗ / λ_j.
    """
    q = loadings.shape[1]
    packed = _pack_outer(loadings) / noise_variance[:, None]
    eye = torch.eye(q, dtype=loadings.dtype, device=loadings.device)
    return eye + _unpack_symmetric(patterns @ packed, q)


def _estep_moments(params: FAParams, data: FAData) -> tuple[EStats, torch.Tensor, torch.Tensor]:
    """E-step from the mean and covariance (complete data): O(d² q) per iteration."""
    W, psi, mu = params.loadings, params.noise_variance, params.mean
    n, q = data.n_samples, W.shape[1]
    S, ybar = data.col_cov, data.col_mean
    if S is None or ybar is None:  # internal invariant: only called on complete data
        raise RuntimeError("_estep_moments needs the moments of complete data")
    delta = ybar - mu
    T = S + torch.outer(delta, delta)  # (1/n) Σ r_n r_n^t with r_n = y_n − μ
    Wp = W / psi[:, None]  # Λ^{-1} W
    M = torch.eye(q, dtype=W.dtype, device=W.device) + W.T @ Wp
    L = torch.linalg.cholesky(M)
    V = torch.cholesky_inverse(L)
    beta = V @ Wp.T  # (q, d): E[z|y] = β (y − μ)
    TbT = T @ beta.T  # (d, q)
    Ez_sum = beta @ delta  # (1/n) Σ E[z_n]
    B = torch.empty(q + 1, q + 1, dtype=W.dtype, device=W.device)
    B[:q, :q] = V + beta @ TbT
    B[:q, q] = Ez_sum
    B[q, :q] = Ez_sum
    B[q, q] = 1.0
    A = torch.cat([(S + torch.outer(ybar, delta)) @ beta.T, ybar[:, None]], dim=1)
    logdet = 2 * torch.log(torch.diagonal(L)).sum() + torch.log(psi).sum()
    # tr(Σ^{-1} T) with Σ^{-1} = Λ^{-1} − Λ^{-1} W V W^t Λ^{-1} (Woodbury)
    trace = (torch.diagonal(T) / psi).sum() - (TbT * Wp).sum()
    loglik = -0.5 * n * (W.shape[0] * _LOG_2PI + logdet + trace)
    return EStats(A=n * A, B=n * B, loglik=loglik), V[None], beta


def factor_posterior(params: FAParams, data: FAData) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Posterior of the factors and the marginal log-likelihood of each row (Gruber & Weiss eqs. 3-6).

    Returns V_o per pattern (P, q, q), E[z_n | y_n,o] (n, q) and log p(y_n,o | θ) (n,), where
    log p(y_o) = −½(|o| log 2π + log|M_o| + Σ_{j∈o} log λ_j + r_oᵗΛ_o^{-1}r_o − b_oᵗ V_o b_o),
    r_o = y_o − μ_o, b_o = W_oᵗ Λ_o^{-1} r_o (matrix determinant lemma and Woodbury).
    """
    W, psi, mu = params.loadings, params.noise_variance, params.mean
    obs = data.observed
    L = torch.linalg.cholesky(posterior_precision(W, psi, data.patterns))
    eye = torch.eye(W.shape[1], dtype=W.dtype, device=W.device)
    V = torch.cholesky_solve(eye.expand_as(L), L)
    logdet_M = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    Wp = W / psi[:, None]
    if obs is None:
        R = data.values - mu
        b = R @ Wp  # W_oᵗ Λ_o^{-1} r_o
        Ez = b @ V[0]
        logdet = logdet_M[0] + torch.log(psi).sum()
        n_obs: Any = float(W.shape[0])
        quad = R.square_() @ (1.0 / psi)  # R is this call's own temporary: squared in place
    else:
        # r_o = y_o − μ_o expanded, so that no (n, d) temporary is formed: products with the mask only
        values_sq = data.values_sq if data.values_sq is not None else data.values * data.values
        b = data.values @ Wp - obs @ (mu[:, None] * Wp)
        Ez = (V[data.pattern_of_row] @ b[:, :, None]).squeeze(-1)
        logdet = logdet_M[data.pattern_of_row] + obs @ torch.log(psi)
        n_obs = obs.sum(1)
        quad = values_sq @ (1.0 / psi) - 2 * data.values @ (mu / psi) + obs @ (mu * mu / psi)
    quad = quad - (b * Ez).sum(1)
    return V, Ez, -0.5 * (n_obs * _LOG_2PI + logdet + quad)


def _estep_patterns(params: FAParams, data: FAData) -> tuple[EStats, torch.Tensor, torch.Tensor, torch.Tensor]:
    """E-step row by row, grouped by missingness pattern (any data): O(n d q²) per iteration.

    Returns the statistics, V per pattern (P, q, q), E[z|y] per row (n, q) and log p(y_n,o) per row.
    """
    W = params.loadings
    q = W.shape[1]
    obs = data.observed
    V, Ez, ll_rows = factor_posterior(params, data)
    n = Ez.shape[0]
    ones = torch.ones(n, 1, dtype=W.dtype, device=W.device)
    Ezt = torch.cat([Ez, ones], dim=1)
    A = data.values.T @ Ezt  # missing entries of values are 0
    # E[z̃z̃ᵗ] = [[V + E[z]E[z]ᵗ, E[z]], [E[z]ᵗ, 1]], packed (upper triangle), summed over rows observing j
    rows, cols = torch.triu_indices(q + 1, q + 1, device=W.device)
    Vpad = torch.zeros(V.shape[0], q + 1, q + 1, dtype=W.dtype, device=W.device)
    Vpad[:, :q, :q] = V
    Vpacked = Vpad[:, rows, cols]
    outer = _pack_outer(Ezt)
    if obs is None:
        B = _unpack_symmetric(outer.sum(0) + data.pattern_counts[0] * Vpacked[0], q + 1)
    elif data.patterns.shape[0] * 2 > n:
        # (almost) one pattern per row: fold V into the per-row sum, one product over rows
        B = _unpack_symmetric(obs.T @ (outer + Vpacked[data.pattern_of_row]), q + 1)
    else:
        B = _unpack_symmetric(obs.T @ outer + data.patterns.T @ (data.pattern_counts[:, None] * Vpacked), q + 1)
    return EStats(A=A, B=B, loglik=ll_rows.sum()), V, Ez, ll_rows


def fa_estep(params: FAParams, data: FAData, *, use_moments: bool = True) -> EStats:
    """Expected sufficient statistics and the observed-data log-likelihood at ``params``.

    Complete data with ``use_moments`` uses the covariance form; otherwise the per-pattern form.
    """
    if use_moments and data.col_cov is not None:
        return _estep_moments(params, data)[0]
    return _estep_patterns(params, data)[0]


# ---------------------------------------------------------------------------------------------- M-step
@dataclass
class _MStepSpec:
    """What the M-step needs besides the statistics: prior precisions, IG prior, constraints, floor."""

    prior_precision: torch.Tensor | None  # (q+1,) diagonal of the Gaussian prior precision on w̃_j
    noise_shape: float | None
    noise_scale: float | None
    constraint_matrix: torch.Tensor | None  # (d, r, q+1)
    constraint_target: torch.Tensor | None  # (d, r)
    constraint_inactive: torch.Tensor | None  # (d, r) 1.0 where inactive
    noise_floor: torch.Tensor  # (d,)


def _rows_ml(stats: EStats, spec: _MStepSpec, psi: torch.Tensor) -> torch.Tensor:
    """w̃_j = A_j B_j^{-1} (Gruber & Weiss eq. 7, exact form)."""
    if stats.B.ndim == 2:
        return torch.linalg.solve(stats.B, stats.A.T).T  # B symmetric: (B^{-1} A^t)^t = A B^{-1}
    return torch.linalg.solve(stats.B, stats.A[:, :, None]).squeeze(-1)


def _rows_kkt(stats: EStats, spec: _MStepSpec, psi: torch.Tensor) -> torch.Tensor:
    """argmin ½ λ_j^{-1}(w̃^t B_j w̃ − 2 A_j w̃) + ½ w̃^t P w̃ subject to C̃_j w̃ = c_j (KKT system)."""
    d, q1 = stats.A.shape
    B = stats.B.expand(d, q1, q1) if stats.B.ndim == 2 else stats.B
    H = B / psi[:, None, None]
    if spec.prior_precision is not None:
        H = H + torch.diag(spec.prior_precision)
    g = stats.A / psi[:, None]
    if spec.constraint_matrix is None or spec.constraint_target is None or spec.constraint_inactive is None:
        return torch.linalg.solve(H, g[:, :, None]).squeeze(-1)
    C = spec.constraint_matrix
    r = C.shape[1]
    K = torch.zeros(d, q1 + r, q1 + r, dtype=H.dtype, device=H.device)
    K[:, :q1, :q1] = H
    K[:, :q1, q1:] = C.transpose(1, 2)
    K[:, q1:, :q1] = C
    K[:, q1:, q1:] = -torch.diag_embed(spec.constraint_inactive)
    rhs = torch.cat([g, spec.constraint_target], dim=1)
    return torch.linalg.solve(K, rhs[:, :, None]).squeeze(-1)[:, :q1]


_ROW_UPDATES = {"ml": _rows_ml, "kkt": _rows_kkt}


def expected_residual(stats: EStats, rows: torch.Tensor, data: FAData) -> torch.Tensor:
    """Σ_n E[(y_nj − w̃_j z̃_n)²] over rows observing j, for each j (d,)."""
    Bw = rows @ stats.B if stats.B.ndim == 2 else (stats.B @ rows[:, :, None]).squeeze(-1)
    return data.sum_squares - 2 * (stats.A * rows).sum(1) + (rows * Bw).sum(1)


def fa_mstep(stats: EStats, data: FAData, params: FAParams, spec: _MStepSpec, variant: str) -> FAParams:
    """New (W, μ, λ) from the statistics: row update chosen by ``variant`` ("ml" or "kkt"), then λ."""
    rows = _ROW_UPDATES[variant](stats, spec, params.noise_variance)
    resid = expected_residual(stats, rows, data)
    if spec.noise_shape is None or spec.noise_scale is None:
        psi = resid / data.count
    else:
        psi = (spec.noise_scale + 0.5 * resid) / (spec.noise_shape + 1.0 + 0.5 * data.count)
    psi = torch.maximum(psi, spec.noise_floor)
    return FAParams(loadings=rows[:, :-1].contiguous(), noise_variance=psi, mean=rows[:, -1].contiguous())


def fa_log_prior(model: FactorAnalysis, params: FAParams) -> torch.Tensor:
    """log p(W) + log p(λ) + log p(μ) as declared by the model (0 for flat priors)."""
    W = params.loadings
    total = torch.zeros((), dtype=W.dtype, device=W.device)
    if model.loading_scale is not None:
        total = total + torch.distributions.Normal(0.0, model.loading_scale).log_prob(W).sum()
    if model.noise_shape is not None:
        ig = torch.distributions.InverseGamma(
            torch.tensor(model.noise_shape, dtype=W.dtype, device=W.device),
            torch.tensor(model.noise_scale, dtype=W.dtype, device=W.device),
        )
        total = total + ig.log_prob(params.noise_variance).sum()
    if model.mean_scale is not None:
        total = total + torch.distributions.Normal(0.0, model.mean_scale).log_prob(params.mean).sum()
    return total


def _mstep_spec(model: FactorAnalysis, use_priors: bool, floor: torch.Tensor) -> tuple[_MStepSpec, str]:
    dtype, device = floor.dtype, floor.device
    q = model.n_components
    prior = None
    if use_priors and (model.loading_scale is not None or model.mean_scale is not None):
        p = np.zeros(q + 1)
        if model.loading_scale is not None:
            p[:q] = 1.0 / model.loading_scale**2
        if model.mean_scale is not None:
            p[q] = 1.0 / model.mean_scale**2
        prior = torch.as_tensor(p, dtype=dtype, device=device)
    cm = ct = ci = None
    if model.constraints is not None:
        c = model.constraints
        mat = np.concatenate([c.matrix, np.zeros(c.matrix.shape[:2] + (1,))], axis=2)
        cm = torch.as_tensor(mat, dtype=dtype, device=device)
        ct = torch.as_tensor(c.target, dtype=dtype, device=device)
        ci = torch.as_tensor((~c.active).astype(np.float64), dtype=dtype, device=device)
    spec = _MStepSpec(
        prior_precision=prior,
        noise_shape=model.noise_shape if use_priors else None,
        noise_scale=model.noise_scale if use_priors else None,
        constraint_matrix=cm,
        constraint_target=ct,
        constraint_inactive=ci,
        noise_floor=floor,
    )
    variant = "kkt" if (prior is not None or cm is not None) else "ml"
    return spec, variant



# ---------------------------------------------------------------------------------------------- acceleration
def _plain(em_map: Any, floor: torch.Tensor) -> Any:
    return em_map


def _to_vector(p: FAParams) -> torch.Tensor:
    # log λ keeps extrapolated noise variances positive
    return torch.cat([p.loadings.reshape(-1), torch.log(p.noise_variance), p.mean])


def _from_vector(v: torch.Tensor, like: FAParams, floor: torch.Tensor) -> FAParams:
    d, q = like.loadings.shape
    W = v[: d * q].reshape(d, q)
    psi = torch.maximum(torch.exp(v[d * q : d * q + d]), floor)
    return FAParams(W, psi, v[d * q + d :])


def _squarem(em_map: Any, floor: torch.Tensor) -> Any:
    """SQUAREM (Varadhan & Roland 2008, scheme S3) around the EM map, with a monotone safeguard.

    θ1 = F(θ0), θ2 = F(θ1), r = θ1 − θ0, v = θ2 − 2θ1 + θ0, α = −max(1, ‖r‖/‖v‖),
    θ' = θ0 − 2αr + α²v; the step returns F(θ') when ℓ(θ') ≥ ℓ(θ1), else θ2. Either way the next
    objective is ≥ ℓ(θ1) ≥ ℓ(θ0), so the traced objective stays non-decreasing. The extrapolation is an
    affine combination, so linear constraints on the loadings stay satisfied.
    """

    def step(state: FAParams) -> tuple[FAParams, float]:
        p1, obj0 = em_map(state)
        p2, obj1 = em_map(p1)
        x0, x1, x2 = _to_vector(state), _to_vector(p1), _to_vector(p2)
        r = x1 - x0
        v = x2 - 2 * x1 + x0
        nv = float(torch.linalg.vector_norm(v))
        if nv == 0.0 or not math.isfinite(nv):
            return p2, obj0
        alpha = -max(1.0, float(torch.linalg.vector_norm(r)) / nv)
        candidate = _from_vector(x0 - 2 * alpha * r + alpha**2 * v, state, floor)
        try:
            p3, obj_c = em_map(candidate)
        except DataError:
            return p2, obj0
        if math.isfinite(obj_c) and obj_c >= obj1:
            return p3, obj0
        return p2, obj0

    return step


_ACCELERATIONS = {"none": _plain, "squarem": _squarem}
