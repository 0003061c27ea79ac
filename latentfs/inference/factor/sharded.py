"""The data side of factor analysis (EM and MAP) on a dask array: one task per row shard (DESIGN contract 8).

The engine is the in-memory one, :class:`~latentfs.inference.factor.em.FactorAnalysisEM`, run by the one pipeline;
this module only gives it what it needs from the shards (:func:`prepare_shards`: the E-step, the starts, the
totals), so the restarts, the steps, the Heywood check and the result are those of the in-memory fit.

A ``dask.array.Array`` whose row chunks are the shards (dense blocks, every column in one chunk) is fitted
without gathering its rows (:mod:`latentfs.core.shards`). Each shard is validated inside its task.

* **Complete data** (the default ``use_moments=True``): the E-step depends on the data only through the
  column means, the biased covariance and the per-column sums of squares (:func:`em._estep_moments`). These
  are one additive pass over the shards: each task returns its row count, column means and centred
  cross-products, which the driver pools exactly (the pairwise update of Chan, Golub & LeVeque 1979:
  M2 = Σ_s [M2_s + n_s (ȳ_s − ȳ)(ȳ_s − ȳ)ᵗ], more accurate than Σ y yᵗ − n ȳ ȳᵗ). After that pass EM runs
  on the driver alone, with no further pass over the data.
* **Missing entries** (NaN), or ``use_moments=False``: each shard is prepared once (rows grouped by
  missingness pattern) and kept where it was computed (:func:`latentfs.core.shards.persist`); every EM
  step runs :func:`em._estep_patterns` as one task per shard and sums their statistics (``EStats`` is
  additive over row shards); the M-step runs on the driver.

The start is the in-memory fit's: the ``"pca"`` start needs the means, variances and covariance of the
mean-imputed data, which are pooled the same way (one more pass when entries are missing); the random
starts draw from the same generator. The result therefore equals the in-memory fit up to summation order.

Row-level outputs are not gathered: the result has no ``factor_scores``, ``factor_score_covariance``,
``pattern_of_row``, per-row log-likelihood or ``sample`` coordinate; :func:`factor_scores` computes the
scores lazily (a dask array with the input's row chunks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, as_continuous
from latentfs.core.options import check_moments
from latentfs.core.results import Posterior
from latentfs.inference.factor.em import (
    EStats,
    FAData,
    FAParams,
    FAPrep,
    _check_covariance,
    _check_fa_shape,
    _estep_patterns,
    fa_estep,
    factor_posterior,
    initial_params_from_moments,
    prepare_fa_data,
)
from latentfs.models.factor import FactorAnalysis

__all__ = ["factor_scores", "prepare_shards"]


# ---------------------------------------------------------------------------------------------- shard tasks
def _shard_values(block: Any) -> np.ndarray:
    """Validate one shard (as the in-memory fit validates X) and return it as float64 with NaN for missing.

    A column missing throughout one shard is allowed here (only a column missing in every shard is an
    error, checked on the driver); constant columns are checked on the driver too.
    """
    arr = as_continuous(block, missing="allow", row_shard=True).values
    check_moments(arr)
    return arr


@dataclass
class _ShardSummary:
    """One shard's additive summary: rows, per-column observed counts, sums of squares, means and centred
    sums of squares of the observed entries, minima and maxima, and (complete shards) the centred
    cross-products; the distinct missingness patterns."""

    n: int
    count: np.ndarray
    sum_squares: np.ndarray
    obs_mean: np.ndarray
    obs_m2: np.ndarray
    low: np.ndarray
    high: np.ndarray
    cross: np.ndarray | None
    patterns: np.ndarray


def _summarise(values: np.ndarray) -> _ShardSummary:
    nan = np.isnan(values)
    n, d = values.shape
    count = (~nan).sum(0).astype(np.float64)
    zeroed = np.where(nan, 0.0, values)
    with np.errstate(invalid="ignore", divide="ignore"):
        obs_mean = np.where(count > 0, zeroed.sum(0) / np.maximum(count, 1.0), 0.0)
    centred = np.where(nan, 0.0, values - obs_mean)
    has_nan = bool(nan.any())
    low = np.full(d, np.inf)
    high = np.full(d, -np.inf)
    seen = count > 0
    low[seen] = np.nanmin(values[:, seen], axis=0)
    high[seen] = np.nanmax(values[:, seen], axis=0)
    return _ShardSummary(
        n=n, count=count, sum_squares=(zeroed * zeroed).sum(0), obs_mean=obs_mean, obs_m2=(centred**2).sum(0),
        low=low, high=high, cross=None if has_nan else centred.T @ centred,
        patterns=np.unique(~nan, axis=0) if has_nan else np.ones((1, d), dtype=bool),
    )


def _filled_moments(values: np.ndarray, mean: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Rows, column means and centred cross-products of the shard with missing entries set to ``mean``."""
    filled = np.where(np.isnan(values), mean, values)
    centre = filled.mean(0)
    c = filled - centre
    return filled.shape[0], centre, c.T @ c


def _shard_data(values: np.ndarray, dtype: torch.dtype, device: str) -> FAData:
    return prepare_fa_data(values, dtype=dtype, device=device, use_moments=False)


def _shard_estep(data: FAData, params: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, float]:
    """The per-pattern E-step of one shard at ``params``: (A, B, log-likelihood), additive over shards."""
    p = FAParams(*(torch.as_tensor(params[k], dtype=data.values.dtype, device=data.values.device)
                   for k in ("loadings", "noise_variance", "mean")))
    stats = _estep_patterns(p, data)[0]
    return stats.A.cpu().numpy(), stats.B.cpu().numpy(), float(stats.loglik)


def _pool(parts: list[tuple[int, np.ndarray, np.ndarray]]) -> tuple[int, np.ndarray, np.ndarray]:
    """Pool (rows, means, centred cross-products or sums of squares) of disjoint row sets (Chan et al. 1979)."""
    n = sum(int(p[0]) for p in parts)
    mean = sum(p[0] * p[1] for p in parts) / n
    m2 = sum(p[2] for p in parts)
    for rows, m, _ in parts:
        delta = m - mean
        m2 = m2 + rows * (np.outer(delta, delta) if np.ndim(m2) == 2 else delta * delta)
    return n, np.asarray(mean), np.asarray(m2)


# ---------------------------------------------------------------------------------------------- the fit
def prepare_shards(model: FactorAnalysis, X: Any, o: Any, *, method: str, use_priors: bool,
                   started: float) -> FAPrep:
    """The data side of the ``"em"`` / ``"map"`` spec (:class:`~latentfs.inference.factor.em.FactorAnalysisEM`) on
    a dask array (module docstring): the shards' summaries in one pass, the E-step on the pooled covariance
    (complete data) or one task per shard, the starts from the pooled moments."""
    from latentfs.core import shards

    dtype, device, regularization = o.dtype, o.device, o.regularization
    blocks, starts = shards.row_shards(X)
    stops = starts[1:] + [int(X.shape[0])]
    task = shards.delayed(shards.shard_task, pure=True)
    values = [task(_shard_values, i, lo, hi, b)
              for i, (b, lo, hi) in enumerate(zip(blocks, starts, stops, strict=True))]
    parts: list[_ShardSummary] = list(shards.compute(*[shards.delayed(_summarise, pure=True)(v) for v in values]))
    n = sum(p.n for p in parts)
    d = int(X.shape[1])
    count = np.sum([p.count for p in parts], axis=0)
    missing = any(p.cross is None for p in parts)
    if (count == 0).any():
        cols = np.flatnonzero(count == 0)
        raise DataError(
            f"X has columns that are entirely missing (columns {cols[:5].tolist()}). "
            "Drop them: they carry no information."
        )
    if n < 2:
        raise DataError(f"X needs at least 2 rows for this method; got {n}. Pass more samples.")
    low = np.min([p.low for p in parts], axis=0)
    high = np.max([p.high for p in parts], axis=0)
    const = np.flatnonzero(high - low == 0)
    if const.size:
        raise DataError(
            f"X has {const.size} constant (zero-variance) column(s) (columns "
            f"{const[:5].tolist()}). Drop them before fitting, e.g. X[:, X.std(axis=0) > 0]."
        )
    _check_fa_shape(model, n, d)
    # the observed entries' means and variances, pooled column by column
    obs_mean = np.sum([p.count * p.obs_mean for p in parts], axis=0) / count
    obs_m2 = np.sum([p.obs_m2 + p.count * (p.obs_mean - obs_mean) ** 2 for p in parts], axis=0)
    sum_squares = np.sum([p.sum_squares for p in parts], axis=0)
    n_patterns = int(np.unique(np.concatenate([p.patterns for p in parts]), axis=0).shape[0])
    t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=dtype, device=device)  # noqa: E731
    summary = FAData(
        values=torch.empty((0, d), dtype=dtype, device=device), observed=None,
        patterns=torch.ones(1, d, dtype=dtype, device=device),
        pattern_of_row=torch.empty(0, dtype=torch.long, device=device),
        pattern_counts=t([float(n)]), count=t(count), sum_squares=t(sum_squares), n_rows=n,
    )
    cov: np.ndarray | None = None
    if not missing:
        _, mean, m2 = _pool([(p.n, p.obs_mean, p.cross) for p in parts])  # type: ignore[misc]
        cov = m2 / n
        _check_covariance(cov, n, regularization)
        var = np.diag(cov).copy()
        floor_var = var
    else:
        mean = obs_mean
        var = obs_m2 / n  # variance of the mean-imputed columns (the imputed entries add nothing)
        floor_var = obs_m2 / count  # nanvar
    frac = 1e-8 if regularization is None else float(regularization)
    floor = torch.as_tensor(frac * floor_var, dtype=dtype, device=device)
    dev = str(device)
    persisted: list[Any] = []
    if missing or not o.use_moments:
        persisted = shards.persist([shards.delayed(_shard_data, pure=True)(v, dtype, dev) for v in values])

    def covariance() -> np.ndarray:
        if cov is not None:
            return cov
        # mean-imputed covariance of the pca start: one more pass over the shards
        mean_key = shards.wrap(mean)
        fill = shards.delayed(_filled_moments, pure=True)
        pooled = shards.compute(*[fill(_values_of(p), mean_key) for p in persisted])
        return _pool(list(pooled))[2] / n

    def start_params(init: Any, gen: torch.Generator) -> FAParams:
        return initial_params_from_moments(mean, var, covariance, model.n_components, init=init, generator=gen,
                                           dtype=dtype, device=device)

    if cov is not None and o.use_moments:
        summary.col_mean, summary.col_cov = t(mean), t(cov)

        def estep(state: FAParams) -> EStats:
            return fa_estep(state, summary, use_moments=True)  # no pass over the data
    else:
        step_task = shards.delayed(shards.shard_task, nout=3, pure=True)

        def estep(state: FAParams) -> EStats:
            key = shards.wrap(state.numpy())
            outs = [step_task(_shard_estep, i, lo, hi, p, key)
                    for i, (p, lo, hi) in enumerate(zip(persisted, starts, stops, strict=True))]
            A_parts, B_parts, ll_parts = shards.compute([o[0] for o in outs], [o[1] for o in outs],
                                                        [o[2] for o in outs])
            B = _sum_b(B_parts, d)
            return EStats(A=t(np.sum(A_parts, axis=0)), B=t(B), loglik=t(float(np.sum(ll_parts))))

    return FAPrep(model, method, use_priors, summary, estep, start_params, floor, floor_var,
                  feature_names=[f"x{j}" for j in range(d)], sample_names=None, n_samples=n,
                  n_observed=float(count.sum()), n_patterns=n_patterns, started=started, shards=len(blocks))


def _values_of(data: Any) -> Any:
    """The shard's values with NaN where missing (a delayed call on a persisted :class:`FAData`)."""
    from latentfs.core import shards

    return shards.delayed(_nan_values, pure=True)(data)


def _nan_values(data: FAData) -> np.ndarray:
    values = data.values.cpu().numpy().astype(np.float64)
    if data.observed is not None:
        values = np.where(data.observed.cpu().numpy() > 0, values, np.nan)
    return values


def _sum_b(parts: list[np.ndarray], d: int) -> np.ndarray:
    """Σ B over shards; a complete shard's B (q+1, q+1) is shared by all features, so it is broadcast to the
    per-feature form (d, q+1, q+1) when another shard has missing entries."""
    if all(b.ndim == 2 for b in parts):
        return np.sum(parts, axis=0)
    q1 = parts[0].shape[-1]
    return np.sum([np.broadcast_to(b, (d, q1, q1)) for b in parts], axis=0)


# ---------------------------------------------------------------------------------------------- scores
def _block_scores(block: Any, params: dict[str, np.ndarray]) -> np.ndarray:
    values = _shard_values(block)
    data = prepare_fa_data(values, dtype=torch.float64, device="cpu", use_moments=False)
    p = FAParams(*(torch.as_tensor(params[k], dtype=torch.float64) for k in ("loadings", "noise_variance", "mean")))
    return factor_posterior(p, data)[1].numpy()


def factor_scores(result: Posterior, X: Any) -> Any:
    """E[z | y_o] for every row of ``X`` under a fitted factor analysis (Gruber & Weiss 2006, eq. 5).

    For a dask array the scores are a lazy dask array with ``X``'s row chunks (one task per chunk, nothing
    gathered); otherwise an ndarray (n_samples, n_factors). NaN entries of ``X`` are missing.

    Examples
    --------
    >>> import latentfs
    >>> fa = FactorAnalysis(1)
    >>> X = fa.simulate(50, loadings=[[1.0], [0.9], [0.8]], noise_variance=0.2, mean=0.0, seed=0)["data"]
    >>> factor_scores(latentfs.fit(fa, X, method="em"), X).shape
    (50, 1)
    """
    if not isinstance(result, Posterior) or result.model != "FactorAnalysis":
        raise DataError("result must be a FactorAnalysis fit (latentfs.fit(FactorAnalysis(q), X, method='em')).")
    params = {k: np.asarray(result.mean(k), dtype=np.float64) for k in ("loadings", "noise_variance", "mean")}
    d, q = params["loadings"].shape
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2 and shape[1] != d:
        raise DataError(f"X must have {d} features (as the fit); got {X.shape[1]}.")
    from latentfs.core.shards import is_dask_array, row_shards

    if is_dask_array(X):
        row_shards(X)  # one column chunk, known chunk sizes
        return X.map_blocks(_block_scores, params, chunks=(X.chunks[0], (q,)), dtype=np.float64,
                            meta=np.empty((0, 0), dtype=np.float64))
    return _block_scores(X, params)
