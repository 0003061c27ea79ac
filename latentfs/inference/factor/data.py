"""The data side of factor-analysis EM and MAP (:mod:`latentfs.inference.factor.em`), written once for every back-end.

The fit's rows are a :class:`~latentfs.core.backends.ShardSet` (DESIGN contract 8): in memory one shard, for a dask
array one per row chunk (dense blocks, every column in one chunk). Three functions of one shard are all the engine
runs on data, whichever back-end holds it:

* :func:`prepare_shard` validates the rows and prepares them for the E-step (:class:`FAShard`; rows grouped by
  missingness pattern, and the mean and covariance of a complete shard);
* :func:`summarise` gives the shard's :class:`FASummary`: row and column counts, the per-feature sums of squares,
  the missingness patterns, the mean and covariance of complete rows, the observed entries' column means and
  variances; :func:`pool` combines the summaries of disjoint shards exactly (the pairwise update of Chan, Golub &
  LeVeque 1979: M2 = Σ_s [M2_s + n_s (ȳ_s − ȳ)(ȳ_s − ȳ)ᵗ], more accurate than Σ y yᵗ − n ȳ ȳᵗ). The summary of one
  shard is returned as it is, so an in-memory fit reads its own data's moments, untouched;
* :func:`shard_estep`, the per-pattern E-step (:func:`~latentfs.inference.factor.numerics._estep_patterns`),
  whose statistics (A, B, log-likelihood) are additive over shards.

With complete data and ``use_moments`` the E-step depends on the data only through the pooled moments, so after
the summaries pass EM runs on the driver with no further pass; otherwise every EM step is one
:func:`shard_estep` per shard. The ``"pca"`` start with missing entries needs the covariance of the mean-imputed
data: one more pass (:func:`filled_covariance`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, as_continuous
from latentfs.core.options import check_moments
from latentfs.inference.factor.numerics import FAData, FAParams, _estep_patterns, prepare_fa_data
from latentfs.inference.factor.starts import _check_fa_shape, _validate_fa
from latentfs.models.factor import FactorAnalysis

__all__ = ["FAShard", "FASummary", "filled_covariance", "pool", "prepare_shard", "row_shard_values", "shard_estep",
           "summarise"]


# ---------------------------------------------------------------------------------------------- one shard
@dataclass
class FAShard:
    """One shard of a factor-analysis fit, prepared once.

    Attributes
    ----------
    values : ndarray (n, d), float64, NaN where missing (the validated rows).
    data : FAData
        The rows prepared for the E-step in the fit's dtype and device (with the moments when complete).
    row_shard : bool
        True for one row chunk of a larger array (then a column may be missing or constant within it).
    feature_names, sample_names : list of str or None
        The input's names (whole data only).
    """

    values: np.ndarray
    data: FAData
    row_shard: bool
    feature_names: list[str] | None = None
    sample_names: list[str] | None = None


def row_shard_values(rows: Any) -> np.ndarray:
    """Validate one row chunk and return it as float64 with NaN where missing.

    A column missing or constant throughout one chunk is allowed here; the pooled summaries are checked on the
    driver (:func:`check_totals`).
    """
    values = as_continuous(rows, missing="allow", row_shard=True).values
    check_moments(values)
    return values


def prepare_shard(rows: Any, model: FactorAnalysis, dtype: torch.dtype, device: Any, row_shard: bool) -> FAShard:
    """Validate and prepare one shard: the whole data in memory (checked against ``model`` as a whole, with the
    messages of an in-memory fit), or one row chunk of a dask array (``row_shard``)."""
    if row_shard:
        values = row_shard_values(rows)
        names: tuple[list[str] | None, list[str] | None] = (None, None)
    else:
        matrix = _validate_fa(model, rows)
        check_moments(matrix.values)
        values = matrix.values
        names = (list(matrix.feature_names), list(matrix.sample_names))
    data = prepare_fa_data(values, dtype=dtype, device=device, use_moments=True)
    return FAShard(values, data, row_shard, *names)


def shard_estep(shard: FAShard, loadings: Any, noise_variance: Any, mean: Any) -> tuple[Any, Any, Any]:
    """The per-pattern E-step of one shard at the given parameters: (A, B, log-likelihood), additive over shards
    (:class:`~latentfs.inference.factor.numerics.EStats`)."""
    values = shard.data.values
    p = FAParams(*(torch.as_tensor(v, dtype=values.dtype, device=values.device)
                   for v in (loadings, noise_variance, mean)))
    stats = _estep_patterns(p, shard.data)[0]
    return stats.A, stats.B, stats.loglik


# ---------------------------------------------------------------------------------------------- summaries
@dataclass
class FASummary:
    """What a factor-analysis fit reads from its data besides the E-step, for one shard or pooled over shards.

    Attributes
    ----------
    n : int, rows.
    count : Tensor (d,), rows observing each feature (n_j); sum_squares : Tensor (d,), Σ_n y_nj² over them.
    patterns : Tensor (P, d) of 0/1, the distinct missingness patterns.
    col_mean, col_cov : Tensor (d,), (d, d) or None
        Complete data only: ȳ and the biased covariance S (the E-step on the moments).
    mean : ndarray (d,), float64
        The observed entries' column means (where the starts centre the data).
    obs_var : ndarray (d,) or None
        The observed entries' column variances (``np.nanvar``): the noise floor and the Heywood check of data with
        missing entries (complete data use the diagonal of ``col_cov``). Row shards have it even when complete.
    filled_var : ndarray (d,) or None
        The column variances of the data with missing entries set to ``mean`` (the starts), missing data only.
    low, high : ndarray (d,) or None
        Row shards only: the observed entries' column minima and maxima (the constant-column check).
    """

    n: int
    count: torch.Tensor
    sum_squares: torch.Tensor
    patterns: torch.Tensor
    col_mean: torch.Tensor | None
    col_cov: torch.Tensor | None
    mean: np.ndarray
    obs_var: np.ndarray | None = None
    filled_var: np.ndarray | None = None
    low: np.ndarray | None = None
    high: np.ndarray | None = None


def _observed_moments(values: np.ndarray, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and variances of the observed entries (0 for a column with none, in a row shard)."""
    if seen.all():
        return np.nanmean(values, axis=0), np.nanvar(values, axis=0)
    mean, var = np.zeros(values.shape[1]), np.zeros(values.shape[1])
    mean[seen], var[seen] = np.nanmean(values[:, seen], axis=0), np.nanvar(values[:, seen], axis=0)
    return mean, var


def summarise(shard: FAShard) -> FASummary:
    """One shard's :class:`FASummary`, by the formulas an in-memory fit has always used for its data."""
    data, values = shard.data, shard.values
    out = FASummary(n=data.n_samples, count=data.count, sum_squares=data.sum_squares, patterns=data.patterns,
                    col_mean=data.col_mean, col_cov=data.col_cov, mean=np.empty(0))
    if data.observed is None:
        out.mean = values.mean(0)
        if shard.row_shard:  # pooled with shards that have missing entries
            out.obs_var = values.var(0)
    else:
        nan = np.isnan(values)
        seen = ~nan.all(0)
        out.mean, out.obs_var = _observed_moments(values, seen)
        out.filled_var = np.where(nan, out.mean, values).var(0)
    if shard.row_shard:
        low, high = np.full(values.shape[1], np.inf), np.full(values.shape[1], -np.inf)
        seen = np.asarray(data.count.cpu().numpy() > 0)
        low[seen], high[seen] = np.nanmin(values[:, seen], axis=0), np.nanmax(values[:, seen], axis=0)
        out.low, out.high = low, high
    return out


def _f64(t: torch.Tensor) -> np.ndarray:
    return np.asarray(t.cpu().numpy(), dtype=np.float64)


def _total(parts: list[torch.Tensor]) -> torch.Tensor:
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def pool(parts: list[FASummary]) -> FASummary:
    """The summary of the union of disjoint shards (module docstring); one shard's is returned as it is."""
    if len(parts) == 1:
        return parts[0]
    like = parts[0].count
    t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=like.dtype, device=like.device)  # noqa: E731
    n = sum(p.n for p in parts)
    count = _f64(_total([p.count for p in parts]))
    # the observed entries' means and spreads, column by column (Chan et al. with per-column counts)
    counts = [_f64(p.count) for p in parts]
    seen = np.maximum(count, 1.0)  # a column missing everywhere is refused by check_totals, after pooling
    mean = np.sum([c * p.mean for c, p in zip(counts, parts, strict=True)], axis=0) / seen
    m2 = np.sum([c * (p.obs_var + (p.mean - mean) ** 2) for c, p in zip(counts, parts, strict=True)],  # type: ignore[operator]
                axis=0)
    patterns = np.unique(np.concatenate([p.patterns.cpu().numpy() > 0 for p in parts]), axis=0)
    out = FASummary(
        n=n, count=t(count), sum_squares=_total([p.sum_squares for p in parts]),
        patterns=t(patterns), col_mean=None, col_cov=None, mean=mean, obs_var=m2 / seen, filled_var=m2 / n,
        low=np.min([p.low for p in parts], axis=0), high=np.max([p.high for p in parts], axis=0),  # type: ignore[arg-type]
    )
    if all(p.col_cov is not None for p in parts):
        means = [_f64(p.col_mean) for p in parts]  # type: ignore[arg-type]
        centre = np.sum([p.n * m for p, m in zip(parts, means, strict=True)], axis=0) / n
        cross = np.sum([p.n * _f64(p.col_cov) + p.n * np.outer(m - centre, m - centre)  # type: ignore[arg-type]
                        for p, m in zip(parts, means, strict=True)], axis=0)
        out.col_mean, out.col_cov = t(centre), t(cross / n)
    return out


def check_totals(model: FactorAnalysis, total: FASummary, d: int) -> None:
    """The checks an in-memory fit makes on its whole data, made on a dask array's pooled summaries."""
    count = total.count.cpu().numpy()
    if (count == 0).any():
        cols = np.flatnonzero(count == 0)
        raise DataError(
            f"X has columns that are entirely missing (columns {cols[:5].tolist()}). "
            "Drop them: they carry no information."
        )
    if total.n < 2:
        raise DataError(f"X needs at least 2 rows for this method; got {total.n}. Pass more samples.")
    const = np.flatnonzero(total.high - total.low == 0)  # type: ignore[operator]
    if const.size:
        raise DataError(
            f"X has {const.size} constant (zero-variance) column(s) (columns "
            f"{const[:5].tolist()}). Drop them before fitting, e.g. X[:, X.std(axis=0) > 0]."
        )
    _check_fa_shape(model, total.n, d)


# ---------------------------------------------------------------------------------------------- the pca start
def _filled_moments(shard: FAShard, mean: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Rows, column means and biased covariance of the shard with its missing entries set to ``mean``."""
    filled = np.where(np.isnan(shard.values), mean, shard.values)
    return filled.shape[0], filled.mean(0), np.asarray(np.cov(filled, rowvar=False, bias=True))


def filled_covariance(shards: Any, mean: np.ndarray) -> np.ndarray:
    """The biased covariance of the data with missing entries set to ``mean`` (one pass over a ShardSet)."""
    parts = shards.summaries(_filled_moments, mean)
    if len(parts) == 1:
        return parts[0][2]  # type: ignore[no-any-return]
    n = sum(p[0] for p in parts)
    centre = np.sum([p[0] * p[1] for p in parts], axis=0) / n
    return np.sum([p[0] * (p[2] + np.outer(p[1] - centre, p[1] - centre)) for p in parts], axis=0) / n  # type: ignore[no-any-return]
