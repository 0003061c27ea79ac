"""Where factor-analysis EM starts (:mod:`latentfs.inference.factor.em`): the data checked against the model,
the floor on the noise variances, the starting parameters (``"pca"``, ``"random"`` or given), and their projection
onto the model's linear constraints on the loadings.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, as_continuous, check_n_components, check_positive
from latentfs.inference.factor.numerics import FAParams
from latentfs.models.factor import FactorAnalysis, LoadingConstraints


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
