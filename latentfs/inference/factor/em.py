"""EM and MAP for factor analysis (with missing values, priors and constraints) and EM for MFA.

Factor analysis by EM (Dempster, Laird & Rubin 1977, as presented by Titterington 2006; the factor-
analysis updates are Rubin & Thayer 1982), in the augmented form of Gruber & Weiss (2006, eqs. 3-8)
with z̃ = (z, 1) and w̃_j = (w_j, μ_j):

* E-step (per missingness pattern o, Gruber & Weiss eq. 3-6 with zero precision on missing entries):
  ``M_o = I + W_o^t Λ_o^{-1} W_o``, ``V_o = M_o^{-1}``, ``E[z|y_o] = V_o W_o^t Λ_o^{-1}(y_o − μ_o)``,
  ``E[zz^t|y_o] = V_o + E[z]E[z]^t``. Rows are grouped by pattern: M_o is factorised once per pattern.
* M-step, feature by feature over the rows where feature j is observed (Gruber & Weiss eq. 7-8, the
  exact form that keeps the covariance of z̃; ``A_j = Σ y_nj E[z̃_n]``, ``B_j = Σ E[z̃_n z̃_n^t]``):
  ``w̃_j = A_j B_j^{-1}`` and ``λ_j = (Σ y_nj² − w̃_j·A_j) / n_j``.
  With a Gaussian prior on the loadings, an inverse-gamma prior on λ_j, or linear constraints
  ``C_j w_j = c_j``, w̃_j solves the constrained ridge problem by its KKT system and λ_j is updated
  given w̃_j (an ECM step, still monotone; Gruber & Weiss's structure prior, eq. 11, in MAP form).
* With nothing missing the statistics depend on the data only through the mean and the covariance
  (one d × d product per iteration, no pass over the rows), and starting from μ = ȳ the iterates are
  those of plain Rubin–Thayer EM.

The objective reported per iteration (``Posterior.trace``) is the log-likelihood of the observed
entries (plus the log prior for ``"map"``) *at the input parameters*; it is non-decreasing.

Mixtures of factor analysers: Ghahramani & Hinton (1996), as listed by Titterington (2006).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, as_continuous, check_n_components, check_positive
from latentfs.core.options import check_flag, check_int, check_moments
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.models.factor import FactorAnalysis, LoadingConstraints

__all__ = [
    "HeywoodWarning",
    "FAParams",
    "FAData",
    "prepare_fa_data",
    "fa_estep",
    "factor_posterior",
    "fa_mstep",
    "fa_log_prior",
    "fa_initial_params",
    "FactorAnalysisEM",
    "em_factor_analysis",
    "heywood_message",
    "map_factor_analysis",
]

_LOG_2PI = math.log(2 * math.pi)

#: A noise variance below this fraction of its column's variance flags a Heywood case.
HEYWOOD_FRACTION = 5e-3


class HeywoodWarning(UserWarning):
    """A factor-analysis solution with a noise variance (uniqueness) at or near zero (a Heywood case)."""


def _check_n_init(n_init: Any, init: Any) -> int:
    if isinstance(n_init, bool) or not isinstance(n_init, (int, np.integer)) or n_init < 1:
        raise DataError(f"n_init must be a positive integer; got {n_init!r}. Pass e.g. n_init=5.")
    return 1 if isinstance(init, dict) else int(n_init)


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
        The number of rows when ``values`` does not hold them: a sharded fit's driver keeps only the sums
        and moments (``values`` is then empty, see :mod:`latentfs.inference.factor.sharded`).
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
            torch.tensor(model.noise_shape, dtype=W.dtype), torch.tensor(model.noise_scale, dtype=W.dtype)
        )
        total = total + ig.log_prob(params.noise_variance).sum()
    if model.mean_scale is not None:
        total = total + torch.distributions.Normal(0.0, model.mean_scale).log_prob(params.mean).sum()
    return total


# ---------------------------------------------------------------------------------------------- validation, init
def _validate_fa(model: Any, X: Any) -> Any:
    if not isinstance(model, FactorAnalysis):
        raise DataError(f"model must be a FactorAnalysis; got {type(model).__name__}.")
    data = as_continuous(X, missing="allow", allow_constant=False, min_samples=2)
    _check_fa_shape(model, *data.shape)
    return data


def _check_fa_shape(model: FactorAnalysis, n: int, d: int) -> None:
    """The checks of the data's shape against the model (also run on a sharded fit's totals)."""
    q = model.n_components
    if d < 2:
        raise DataError(f"X must have at least 2 features for factor analysis; got {d}. Pass more columns.")
    check_n_components(q, d - 1, what=f"one less than the number of features, {d}")
    check_n_components(q, n, what=f"the number of samples, {n}")
    if model.constraints is not None and model.constraints.n_features != d:
        raise DataError(
            f"constraints must have one block per feature ({d}); got {model.constraints.n_features}."
        )


def _check_covariance(cov: np.ndarray, n: int, regularization: float | None) -> None:
    """Refuse a singular sample covariance (complete data) unless a noise floor is requested."""
    if regularization is not None:
        return
    d = cov.shape[0]
    scale = np.sqrt(np.diag(cov))
    eig = np.linalg.eigvalsh(cov / np.outer(scale, scale))
    if eig[0] <= 1e-10 * eig[-1]:
        rank = int((eig > 1e-10 * eig[-1]).sum())
        why = f"fewer rows ({n}) than columns" if n <= d else "some columns are exact linear combinations of others"
        raise DataError(
            f"X has a singular covariance matrix (rank {rank} of {d}: {why}); maximum-likelihood factor "
            "analysis then drives noise variances to zero. Drop redundant columns, or pass "
            "regularization=1e-3 (a floor on each noise variance, as a fraction of its column's variance)."
        )


def _noise_floor(values: np.ndarray, regularization: float | None, dtype: torch.dtype, device: Any,
                 covariance: np.ndarray | None = None) -> torch.Tensor:
    var = np.nanvar(values, axis=0) if covariance is None else np.diag(covariance).copy()
    frac = 1e-8 if regularization is None else float(check_positive(regularization, "regularization"))
    return torch.as_tensor(frac * var, dtype=dtype, device=device)


def fa_initial_params(
    values: np.ndarray,
    n_components: int,
    *,
    init: Any,
    generator: torch.Generator,
    dtype: torch.dtype,
    device: Any,
    covariance: np.ndarray | None = None,
) -> FAParams:
    """Initial parameters: ``"pca"`` (principal axes of the covariance of the mean-imputed data),
    ``"random"`` (small Gaussian loadings), or a dict with ``loadings`` and ``noise_variance``
    (and optionally ``mean``)."""
    if covariance is None:
        mean = np.nanmean(values, axis=0)
        filled = np.where(np.isnan(values), mean, values)
        var = filled.var(0)

        def cov_of_filled() -> np.ndarray:
            return np.asarray(np.cov(filled, rowvar=False, bias=True))

        cov_fn = cov_of_filled
    else:
        mean, var = values.mean(0), np.diag(covariance).copy()
        cov = covariance
        cov_fn = lambda: cov  # noqa: E731
    return initial_params_from_moments(mean, var, cov_fn, n_components, init=init, generator=generator,
                                       dtype=dtype, device=device)


def initial_params_from_moments(
    mean: np.ndarray,
    var: np.ndarray,
    covariance: Any,
    n_components: int,
    *,
    init: Any,
    generator: torch.Generator,
    dtype: torch.dtype,
    device: Any,
) -> FAParams:
    """:func:`fa_initial_params` from the column means and variances of the (mean-imputed) data and a
    callable returning their covariance (called only by ``init="pca"``): all a sharded fit has."""
    d, n_factors = int(np.shape(mean)[0]), int(n_components)
    if isinstance(init, dict):
        missing = {"loadings", "noise_variance"} - set(init)
        if missing:
            raise DataError(f"init must hold 'loadings' and 'noise_variance'; missing {sorted(missing)}.")
        W = np.asarray(init["loadings"], dtype=np.float64)
        if W.shape != (d, n_factors):
            raise DataError(f"init['loadings'] must have shape ({d}, {n_factors}); got {W.shape}.")
        psi = check_positive(
            np.broadcast_to(np.asarray(init["noise_variance"], dtype=np.float64), (d,)), "init['noise_variance']"
        )
        mu = np.broadcast_to(np.asarray(init.get("mean", mean), dtype=np.float64), (d,))
    elif init == "pca":
        # Principal axes of the *correlation* matrix, rescaled to the columns: ML factor analysis is
        # scale-equivariant, and so is this start (axes of the covariance itself are dominated by the
        # columns with the largest units and led unscaled wine to a worse optimum).
        cov = covariance()
        sd = np.sqrt(np.maximum(np.diag(cov), 1e-300))
        evals, evecs = np.linalg.eigh(cov / np.outer(sd, sd))
        evals, evecs = evals[::-1], evecs[:, ::-1]
        sigma2 = max(evals[n_factors:].mean(), 1e-12)
        W = sd[:, None] * evecs[:, :n_factors] * np.sqrt(np.maximum(evals[:n_factors] - sigma2, 1e-6 * evals[0]))
        psi = np.maximum(var - (W**2).sum(1), 0.1 * var)
        mu = mean
    elif init == "random":
        z = torch.randn(d, n_factors, generator=generator, dtype=torch.float64).numpy()
        W = 0.1 * z * np.sqrt(var)[:, None]
        psi = var.copy()
        mu = mean
    else:
        raise DataError(f"init must be 'pca', 'random' or a dict of parameters; got {init!r}.")
    t = lambda a: torch.as_tensor(np.array(a, dtype=np.float64), dtype=dtype, device=device)  # noqa: E731
    return FAParams(loadings=t(W), noise_variance=t(psi), mean=t(mu))


def _project(params: FAParams, constraints: LoadingConstraints | None) -> FAParams:
    """Project the loadings onto {W : C_j w_j = c_j} (Euclidean, row by row)."""
    if constraints is None:
        return params
    W = params.loadings.cpu().numpy().copy()
    for j in range(W.shape[0]):
        C = constraints.matrix[j][constraints.active[j]]
        if C.size:
            c = constraints.target[j][constraints.active[j]]
            W[j] -= C.T @ np.linalg.solve(C @ C.T, C @ W[j] - c)
    return FAParams(torch.as_tensor(W, dtype=params.loadings.dtype, device=params.loadings.device),
                    params.noise_variance, params.mean)


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


# ---------------------------------------------------------------------------------------------- engines
@dataclass
class FAPrep:
    """What a factor-analysis fit needs from its data, in memory or over a dask array's shards: the E-step
    ``estep(params) -> EStats`` (on the covariance when nothing is missing, else over the rows or the shards),
    ``data`` (whose per-feature sums the M-step reads), the r-th start ``start_params(init, generator)``, the
    noise floor, the columns' variances (for the Heywood check) and the names and totals of the result."""

    model: FactorAnalysis
    method: str
    use_priors: bool
    data: FAData
    estep: Any
    start_params: Any
    floor: torch.Tensor
    var: np.ndarray
    feature_names: list[str]
    sample_names: list[str] | None
    n_samples: int
    n_observed: float
    n_patterns: int
    started: float
    step: Any = None
    shards: int | None = None
    kept: Any = None


def _prepare_in_memory(model: FactorAnalysis, X: Any, o: Any, *, method: str, use_priors: bool,
                       started: float) -> FAPrep:
    matrix = _validate_fa(model, X)
    check_moments(matrix.values)
    values = matrix.values
    dtype, device = o.dtype, o.device
    data = prepare_fa_data(values, dtype=dtype, device=device, use_moments=True)
    cov = None if data.col_cov is None else data.col_cov.cpu().numpy()
    if cov is not None:
        _check_covariance(cov, data.n_samples, o.regularization)
    if not o.use_moments:
        data.col_cov = data.col_mean = None
    floor = _noise_floor(values, o.regularization, dtype, device, cov)
    use_moments = o.use_moments

    def estep(state: FAParams) -> EStats:
        return fa_estep(state, data, use_moments=use_moments)

    def start_params(init: Any, gen: torch.Generator) -> FAParams:
        return fa_initial_params(values, model.n_components, init=init, generator=gen, dtype=dtype, device=device,
                                 covariance=cov)

    # the columns' variances are the covariance's diagonal when it was formed (np.nanvar would re-read X)
    var = np.nanvar(values, axis=0) if cov is None else np.diag(cov).copy()
    return FAPrep(model, method, use_priors, data, estep, start_params, floor, var,
                  feature_names=list(matrix.feature_names), sample_names=list(matrix.sample_names),
                  n_samples=data.n_samples, n_observed=float(data.count.sum()),
                  n_patterns=int(data.patterns.shape[0]), started=started)


def _em_map(prep: FAPrep) -> Any:
    """One EM (ECM) step of ``prep``'s fit: the new parameters and the objective at the input parameters."""
    spec, variant = _mstep_spec(prep.model, prep.use_priors, prep.floor)

    def em_map(state: FAParams) -> tuple[FAParams, float]:
        try:
            stats = prep.estep(state)
        except torch.linalg.LinAlgError:
            raise DataError(
                "the model covariance became singular during EM (a noise variance collapsed to zero: a "
                "Heywood case); pass regularization=1e-3 to floor the noise variances, or fewer factors (n_components)."
            ) from None
        objective = stats.loglik + (fa_log_prior(prep.model, state) if prep.use_priors else 0.0)
        return fa_mstep(stats, prep.data, state, spec, variant), float(objective)

    return em_map


def _acceleration(name: str, value: Any) -> str:
    if value not in _ACCELERATIONS:
        raise DataError(f"{name} must be one of {sorted(_ACCELERATIONS)}; got {value!r}.")
    return str(value)


def _fa_init(name: str, value: Any) -> Any:
    if isinstance(value, dict) or value in ("pca", "random"):
        return value
    raise DataError(f"{name} must be 'pca', 'random' or a dict of parameters; got {value!r}.")


def _regularization(name: str, value: Any) -> Any:
    return None if value is None else float(check_positive(value, name))


def _n_starts(name: str, value: Any) -> int:
    return check_int(name, value, low=1, remedy=f"Pass a positive number of starts, e.g. {name}=5.")


class FactorAnalysisEM(EngineSpec):
    """Maximum-likelihood factor analysis by EM (``method="em"``), or maximum a posteriori factor analysis
    (``method="map"``: the same spec with the priors; below); NaN entries of ``X`` are missing (exact E-step).

    Priors declared on the model are ignored (use ``method="map"``); linear constraints on the
    loadings are honoured. With nothing missing the E-step works on the covariance matrix
    (``use_moments=False`` forces the per-row form, which gives the same iterates).

    ``method="map"`` is maximum a posteriori factor analysis (ECM) with the model's priors and loading
    constraints: the Gaussian prior on the loadings and the mean and the inverse-gamma prior on the noise
    variances enter the M-step (Gruber & Weiss 2006, structure prior of eq. 11 in its MAP form); the objective
    traced is log p(y_o | θ) + log p(θ), non-decreasing. Options as for ``"em"``.

    Parameters
    ----------
    model : FactorAnalysis
    X : array (n_samples, n_features); NaN means missing.
    seed : int, generator or None (used by the random starts: start r draws from the r-th generator spawned
        from the seed, so the starts do not depend on how many ran before).
    max_iter, tol : stop when the relative change of the log-likelihood is below ``tol``.
    init : "pca", "random" or dict(loadings=..., noise_variance=..., mean=...).
        ``"pca"`` takes the principal axes of the correlation matrix, rescaled to the columns (a
        scale-equivariant start, as the ML solution is).
    n_init : int, default 1
        Number of starts: ``init`` first, then random starts; the highest log-likelihood is kept
        (``diagnostics["restart_objectives"]``). One :class:`ConvergenceWarning` per fit, for the
        kept run. The default start reaches the better of the two optima of unscaled wine (q=3) that
        factor_analyzer and random starts find; raise ``n_init`` on hard problems.
    regularization : float, optional
        Floor on each noise variance as a fraction of its column's variance (default 1e-8); set it to
        fit data with a singular covariance.
    dtype, device : torch dtype (float64 default) and device.
    acceleration : "squarem" (default; each traced iteration is one safeguarded SQUAREM cycle of three
        EM steps) or "none" (plain EM, one step per iteration). Both trace a non-decreasing objective.

    Heywood cases (a noise variance below 0.5% of its column's variance: the solution sits on, or
    drifts to, the boundary) give a :class:`HeywoodWarning` naming the features and the remedies, and
    are listed in ``diagnostics["heywood_features"]``.

    ``X`` may be a ``dask.array.Array`` whose row chunks (dense, one column chunk) are the shards (needs
    ``pip install "latentfs[dask]"``; :mod:`latentfs.inference.factor.sharded`, also for ``"map"``): with
    complete data its moments are one pass of shard tasks and EM then runs on the driver; with missing
    entries every EM step is one E-step task per shard, summed on the driver. The result equals the
    in-memory fit for the same seed up to summation order; no row is gathered, so it holds no
    ``factor_scores`` (:func:`latentfs.inference.factor.factor_scores` computes them lazily), per-row
    log-likelihood or ``sample`` coordinate.

    Returns
    -------
    Posterior with point sites ``loadings``, ``noise_variance``, ``mean``; extras ``factor_scores``
    (E[z|y_o]), ``factor_score_covariance``, ``communalities``; per-row log-likelihood; the
    log-likelihood trace.

    Examples
    --------
    >>> import latentfs
    >>> fa = FactorAnalysis(1)
    >>> X = fa.simulate(200, loadings=[[1.0], [0.9], [0.8]], noise_variance=0.2, mean=0.0, seed=0)["data"]
    >>> post = latentfs.fit(fa, X, method="em")
    >>> post.mean("loadings").shape, bool(np.all(np.diff(post.trace[0]) >= -1e-9))
    ((3, 1), True)
    >>> fa = FactorAnalysis(1, loading_scale=1.0, noise_shape=2.0, noise_scale=0.5)
    >>> X = fa.simulate(100, loadings=[[1.0], [0.9], [0.8]], noise_variance=0.2, mean=0.0, seed=0)["data"]
    >>> latentfs.fit(fa, X, method="map").diagnostics["log_prior"] < 0
    True
    """

    kind = "optimizer"
    remedies = "raise max_iter, loosen tol, or standardise the columns"
    options = {
        "seed": shared("seed"),
        "max_iter": shared("max_iter", 5000),
        "tol": shared("tol", 1e-9),
        "init": Option("pca", _fa_init, "str or dict",
                       "'pca' (principal axes of the correlation matrix), 'random', or starting parameters"),
        "regularization": Option(None, _regularization, "float > 0 or None",
                                 "floor on each noise variance as a fraction of its column's variance (1e-8)"),
        "dtype": shared("dtype"),
        "device": shared("device"),
        "progress": shared("progress"),
        "warn": shared("warn"),
        "callback": shared("callback", meaning="called as callback(iteration, parameters, objective)"),
        "use_moments": Option(True, lambda n, v: bool(check_flag(n, v)), "bool",
                              "with nothing missing, run the E-step on the covariance matrix"),
        "acceleration": Option("squarem", _acceleration, "str", "'squarem' (default) or 'none' (plain EM)"),
        "n_init": Option(1, _n_starts, "int ≥ 1", "starts: init first, then random; the best objective is kept"),
    }
    degenerate_warning = HeywoodWarning
    degenerate_key = "heywood_features"
    rank_degenerate = False  # a Heywood case may be the maximum likelihood itself

    def __init__(self, method: str, use_priors: bool) -> None:
        self.method, self.use_priors = method, use_priors
        self.desc = "FactorAnalysis"

    def prepare(self, model: Any, data: Any, o: Options) -> FAPrep:
        from latentfs.core.shards import is_dask_array

        started = time.perf_counter()
        if not isinstance(model, FactorAnalysis):
            raise DataError(f"model must be a FactorAnalysis; got {type(model).__name__}.")
        if is_dask_array(data):
            from latentfs.inference.factor.sharded import prepare_shards

            prep = prepare_shards(model, data, o, method=self.method, use_priors=self.use_priors, started=started)
        else:
            prep = _prepare_in_memory(model, data, o, method=self.method, use_priors=self.use_priors,
                                      started=started)
        prep.step = _ACCELERATIONS[o.acceleration](_em_map(prep), prep.floor)
        return prep

    def n_starts(self, prep: FAPrep, o: Options) -> int:
        return 1 if isinstance(o.init, dict) else int(o.n_init)

    def start(self, prep: FAPrep, o: Options, gen: torch.Generator, index: int) -> FAParams:
        # the first start is ``init``; the others are random (small Gaussian loadings)
        first = _project(prep.start_params(o.init if index == 0 else "random", gen), prep.model.constraints)
        return FAParams(first.loadings, torch.maximum(first.noise_variance, prep.floor), first.mean)

    def step(self, prep: FAPrep, o: Options, state: FAParams) -> tuple[FAParams, float]:
        return prep.step(state)  # type: ignore[no-any-return]

    def degenerate(self, prep: FAPrep, o: Options, state: FAParams) -> list[Any]:
        return [prep.feature_names[j] for j in _heywood(prep, state)[0]]

    def degenerate_message(self, prep: FAPrep, o: Options, flags: list[Any]) -> str:
        return heywood_message(prep, prep.kept)

    def export(self, prep: FAPrep, o: Options, outcome: Any) -> Export:
        return _fa_export(prep, outcome.run)

    def finish(self, prep: FAPrep, o: Options, state: FAParams) -> FAParams:
        prep.kept = state  # the degeneracy message reads the state the flags were computed on
        return state


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


def _heywood(prep: FAPrep, state: FAParams) -> tuple[np.ndarray, np.ndarray]:
    """Features whose noise variance is within :data:`HEYWOOD_FRACTION` of zero (or at the floor), and every
    feature's noise variance over its column's variance."""
    psi = state.noise_variance.cpu().numpy()
    ratio = psi / np.maximum(prep.var, 1e-300)
    at_floor = psi <= 1.01 * prep.floor.cpu().numpy()
    return np.flatnonzero((ratio < HEYWOOD_FRACTION) | at_floor), ratio


def heywood_message(prep: FAPrep, state: FAParams) -> str:
    """The warning of a Heywood case: which features, how close to zero, the remedies."""
    bad, ratio = _heywood(prep, state)
    listed = ", ".join(f"{prep.feature_names[j]!r} ({ratio[j]:.2g} of its variance)" for j in bad)
    return (
        f"FactorAnalysis {prep.method}: Heywood case: the noise variance of {listed} is at or near zero, so "
        "that feature is explained entirely by the factors and the fit sits on the boundary of the "
        "parameter space (the likelihood can be flat or still rising there). Try fewer factors "
        "(n_components), more starts (n_init=10), a noise prior with method='map', or drop a feature that "
        "is almost a linear combination of others."
    )


def _fa_export(prep: FAPrep, run: Any) -> Export:
    """The FA result's sites, extras and diagnostics from the kept run (row-level extras only in memory)."""
    model, params = prep.model, run.state
    p = params.numpy()
    W, psi = p["loadings"], p["noise_variance"]
    common = (W**2).sum(1)
    q = model.n_components
    d = W.shape[0]
    n_free = d * q + 2 * d - q * (q - 1) // 2
    if model.constraints is not None:
        n_free = d * q + 2 * d - int(model.constraints.n_active().sum())
    coords: dict[str, list[str]] = {"feature": prep.feature_names, "factor": [f"f{k}" for k in range(q)]}
    extras: dict[str, Any] = {}
    log_likelihood = None
    if prep.shards is None:
        V, Ez, ll_rows = factor_posterior(params, prep.data)
        loglik = float(ll_rows.sum())
        log_likelihood = ll_rows.cpu().numpy()[None, None, :]
        extras.update(
            factor_scores=Ez.cpu().numpy(),
            factor_score_covariance=(V[prep.data.pattern_of_row].cpu().numpy() if V.shape[0] > 1
                                     else V[0].cpu().numpy()),
        )
    else:
        loglik = float(prep.estep(params).loglik)
    extras["communalities"] = common / (common + psi)
    if prep.shards is None:
        extras["pattern_of_row"] = prep.data.pattern_of_row.cpu().numpy()
    if prep.sample_names is not None:
        coords["sample"] = prep.sample_names
    diagnostics = {
        "log_likelihood": loglik,
        "log_prior": float(fa_log_prior(model, params)) if prep.use_priors else 0.0,
        "n_parameters": int(n_free),
        "bic": float(-2 * loglik + n_free * math.log(prep.n_samples)),
        "missing_fraction": 1.0 - prep.n_observed / (prep.n_samples * d),
        "n_patterns": prep.n_patterns,
        "seconds": time.perf_counter() - prep.started,
        "observation_dim": "sample",
    }
    if prep.shards is not None:
        diagnostics["shards"] = prep.shards
    return Export(
        dims={"loadings": ("feature", "factor"), "noise_variance": ("feature",), "mean": ("feature",)},
        coords=coords, fitted={k: {"family": "point", "value": v} for k, v in p.items()},
        diagnostics=diagnostics, log_likelihood=log_likelihood, extras=extras,
    )


#: the two specs, callable as ``engine(model, X, **options)`` (the pipeline runs them), under their earlier names
em_factor_analysis = register_spec(FactorAnalysisEM("em", use_priors=False), FactorAnalysis)
map_factor_analysis = register_spec(FactorAnalysisEM("map", use_priors=True), FactorAnalysis)
