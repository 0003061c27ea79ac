"""The data side of mixture EM (:mod:`latentfs.inference.mixture.em`), written once for every back-end.

The fit's rows are a :class:`~latentfs.core.backends.ShardSet` (DESIGN contract 8): in memory one shard, for a dask
array one per row chunk (dense blocks, every column in one chunk). Each shard is the in-memory family object itself
(:class:`~latentfs.inference.emissions.GaussianFamily` or :class:`~latentfs.inference.emissions.CategoricalFamily`
of its rows), and these functions of one shard are all that EM runs on data, whichever back-end holds it:

* :func:`shard_estep`, the E-step at given parameters: the τ-weighted sufficient statistics Σ_n τ_nk t(y_n)
  (with ``eps=0``, so that they add up over any partition of the rows; Dempster, Laird & Rubin 1977;
  Titterington 2006, §1.4) and the log-likelihood Σ_n log Σ_k η_k g_k(y_n); in memory also the rows' τ and
  log-likelihoods, kept for the export;
* :func:`shard_entropy`, the classification entropy −Σ τ log τ of a shard (:func:`entropy_of`);
* :func:`shard_responsibilities` and :func:`shard_row_loglik`, the per-row outputs of a dask fit (lazily);
* :func:`sample_rows`, the raw values of some of the shard's rows (the seeded start sample).

Preparing: in memory the one shard is the family's own :meth:`prepare` (the model's ``check_data`` messages, its
column moments). A dask array's shards are centred at the column means of the whole data (so that their statistics
add up) and floored at its column variances, which need every row: :func:`column_moments` makes two passes of
per-column counts, sums and centred sums of squares over the validated row chunks (:func:`validate_rows`, kept
where they are computed), as ``np.nanmean`` / ``np.nanvar`` give them in memory, and makes the checks that need
every row. Each validated chunk is then built into its family with those moments, where it is
(:meth:`ShardSet.update <latentfs.core.backends.ShardSet.update>`: the source rows are read once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.backends import ShardSet, shard_data
from latentfs.core.data import DataError, as_continuous
from latentfs.core.shards import is_dask_array
from latentfs.inference.emissions import CategoricalFamily, GaussianFamily, e_step_variant, family_for
from latentfs.models.mixture import GaussianMixture, LatentClass

__all__ = [
    "ColumnMoments",
    "EMData",
    "column_moments",
    "entropy_of",
    "local_data",
    "prepare_data",
    "prepare_shard",
    "sample_rows",
    "shard_entropy",
    "shard_estep",
    "shard_responsibilities",
    "shard_row_loglik",
    "validate_rows",
]


# ---------------------------------------------------------------------------------------------- rows
def validate_rows(model: Any, block: Any, *, name: str = "X") -> np.ndarray:
    """One shard's (or mini-batch's) rows as a float64 array, with the row-local checks of the model's
    ``check_data``: finite values, NaN only where the model allows missing entries (and no row entirely
    missing), item codes 0..S_i−1 for latent class models. Column-wise checks (constant or entirely missing
    columns, at least K rows) need every row and are made by the caller."""
    v = as_continuous(block, name=name, missing="allow", row_shard=True).values
    nan = np.isnan(v)
    if nan.any() and not getattr(model, "allows_missing", False):
        r, c = np.argwhere(nan)[0]
        raise DataError(
            f"{name} must not contain NaN for this model; row {r} column {c} is NaN. Impute or drop the "
            "missing values, or use a diagonal covariance type (they integrate missing entries out)."
        )
    if isinstance(model, LatentClass):
        obs = ~nan
        levels = model.levels(v.shape[1])
        bad = obs & ((v != np.round(np.nan_to_num(v))) | (v < 0) | (np.nan_to_num(v) >= levels[None, :]))
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise DataError(
                f"{name} must hold item codes 0, 1, …, S_i−1 (item {c} has S={levels[c]}) or NaN for missing; row "
                f"{r} column {c} holds {v[r, c]:g}. Recode the answers as consecutive integers from 0."
            )
    return v


def _validated(rows: Any, model: Any) -> np.ndarray:
    return validate_rows(model, rows)


def _first_moments(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column observed counts and sums."""
    obs = ~np.isnan(v)
    return obs.sum(0).astype(np.float64), np.where(obs, v, 0.0).sum(0)


def _second_moments(v: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column centred sums of squares and largest absolute centred value."""
    dev = np.nan_to_num(v - shift)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return (dev * dev).sum(0), np.abs(dev).max(0)


@dataclass(frozen=True)
class ColumnMoments:
    """What every row chunk of a dask fit is built with.

    Attributes
    ----------
    shift : ndarray (d,), the column means of the observed entries (the common centring).
    variance : ndarray (d,), the column variances (the scale of the ``reg_covar`` floor).
    variant : str, the E-step variant (:func:`~latentfs.inference.emissions.e_step_variant` at the whole data's
        size; ``"categorical"`` for latent class models).
    names : tuple of str, the feature names.
    n : int, rows of the whole data.
    """

    shift: np.ndarray
    variance: np.ndarray
    variant: str
    names: tuple[str, ...]
    n: int


def column_moments(model: Any, rows: ShardSet, n: int, d: int, e_step: str = "auto") -> ColumnMoments:
    """The whole dask array's column moments from its validated row chunks ``rows`` (module docstring), with the
    checks that need every row: columns entirely missing, fewer rows than components, constant columns or values
    whose squares overflow."""
    first = rows.summaries(_first_moments)
    count = np.sum([f[0] for f in first], axis=0)
    total = np.sum([f[1] for f in first], axis=0)
    names = tuple(f"x{j}" for j in range(d))
    empty = np.flatnonzero(count == 0)
    if empty.size:
        raise DataError(
            f"X has columns that are entirely missing (columns {empty[:5].tolist()}). Drop them: they carry no "
            "information."
        )
    k = int(model.n_components)
    if n < 2 or k > n:
        raise DataError(
            f"n_components must be at most the number of rows of X ({n}); got {k}. Use fewer components or more rows."
        )
    shift = total / count
    second = rows.summaries(_second_moments, shift)
    variance = np.sum([s[0] for s in second], axis=0) / count
    largest = np.max([s[1] for s in second], axis=0)
    bad = ~np.isfinite(variance) | (largest > 1e150) | (variance < 1e-280)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        what = "is constant" if variance[j] < 1e-280 else "has values whose squares overflow float64"
        raise DataError(
            f"X column {names[j]!r} {what} (variance {variance[j]:g} over all shards). Drop a constant column; "
            "rescale a column with huge values (e.g. divide it by its standard deviation) before fitting."
        )
    variant = "categorical" if isinstance(model, LatentClass) else e_step_variant(model, n, d, e_step)
    return ColumnMoments(shift, variance, variant, names, n)


def _family_of_rows(v: np.ndarray, model: Any, m: ColumnMoments) -> Any:
    """Validated rows ``v`` built into their family with the whole data's moments ``m`` (a row chunk of a dask array,
    or no rows: the driver's family)."""
    if isinstance(model, LatentClass):
        return CategoricalFamily.from_rows(model, v, m.names)
    if isinstance(model, GaussianMixture):
        return GaussianFamily.from_rows(model, v, m.shift, m.variance, m.variant, m.names)
    raise DataError(f"model must be a GaussianMixture, LatentProfile or LatentClass; got {type(model).__name__}.")


def prepare_shard(rows: Any, model: Any, e_step: str, device: Any) -> Any:
    """The in-memory fit's one shard: the family of the whole data (its own checks, messages and column moments)."""
    if isinstance(model, GaussianMixture):
        return family_for(model, rows, e_step=e_step, device=device)
    return family_for(model, rows, device=device)


# ---------------------------------------------------------------------------------------------- the fit's data
@dataclass
class EMData:
    """What mixture EM reads of its data.

    Attributes
    ----------
    shards : ShardSet
        The rows: one shard in memory, one per row chunk of a dask array; each shard a family.
    fam : GaussianFamily or CategoricalFamily
        The driver's family (M-step, starting values, export, collapse checks): the one shard in memory; for a dask
        array a family of no rows with the whole data's centring, column variances, E-step variant and names.
    n : int
        Rows of the whole data.
    """

    shards: ShardSet
    fam: Any
    n: int


def prepare_data(model: Any, X: Any, *, e_step: str = "auto", device: Any = None) -> EMData:
    """The fit's data as shards of families (module docstring)."""
    if not is_dask_array(X):  # in memory: one shard, the family itself
        ss = shard_data(X, prepare_shard, model, e_step, device)
        return EMData(ss, ss.local, ss.local.n)
    if np.dtype(X.dtype).kind not in "biuf":
        raise DataError(f"X must be numeric; got a dask array of dtype {X.dtype}. Pass real numbers.")
    ss = shard_data(X, _validated, model)  # each row chunk validated in its task and kept there
    moments = column_moments(model, ss, int(X.shape[0]), int(X.shape[1]), e_step)
    ss.update(_family_of_rows, model, moments)  # each chunk becomes its family where it is
    return EMData(ss, _family_of_rows(np.zeros((0, len(moments.names))), model, moments), moments.n)


def _as_is(rows: Any, fam: Any) -> Any:
    return fam


def local_data(fam: Any) -> EMData:
    """A prepared in-memory family as EM's data: one shard, the family itself."""
    return EMData(shard_data(fam.raw, _as_is, fam), fam, fam.n)


# ---------------------------------------------------------------------------------------------- per shard
def _tensors(fam: Any, params: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Parameters as tensors on the shard's device (a no-op on the tensors of an in-memory fit; a dask task
    receives host numpy arrays)."""
    return {key: torch.as_tensor(value, device=fam.device) for key, value in params.items()}


def shard_estep(fam: Any, params: dict[str, Any], keep_rows: bool) -> tuple[Any, ...]:
    """The E-step of one shard at ``params``: its statistics (``eps=0``: additive over shards) and log-likelihood,
    then, with ``keep_rows``, the rows' responsibilities τ (n, K) and log-likelihoods (n,)."""
    resp, row_ll = fam.e_step(_tensors(fam, params))
    stats = fam.statistics(resp, eps=0.0)  # a dict: the back-end adds shards' key by key
    if keep_rows:
        return stats, float(row_ll.sum()), (resp, row_ll)
    return stats, float(row_ll.sum())


def entropy_of(resp: torch.Tensor) -> float:
    """Classification entropy −Σ_nk τ_nk log τ_nk (Biernacki, Celeux & Govaert 2000)."""
    return float(-(resp * torch.log(resp.clamp_min(1e-300))).sum())


def shard_entropy(fam: Any, params: dict[str, Any]) -> tuple[float]:
    """One shard's classification entropy at ``params`` (additive over shards)."""
    return (entropy_of(fam.e_step(_tensors(fam, params))[0]),)


def shard_responsibilities(fam: Any, params: dict[str, Any]) -> np.ndarray:
    """One shard's responsibilities τ (n, K) at ``params``, as a host array."""
    return fam.e_step(_tensors(fam, params))[0].cpu().numpy().copy()


def shard_row_loglik(fam: Any, params: dict[str, Any]) -> np.ndarray:
    """One shard's row log-likelihoods log Σ_k η_k g_k(y_n) (n,) at ``params``, as a host array."""
    return fam.e_step(_tensors(fam, params))[1].cpu().numpy().copy()


def sample_rows(fam: Any, rows: np.ndarray) -> np.ndarray:
    """The raw values (NaN = missing) of the shard's ``rows`` (numbered within the shard)."""
    return np.asarray(fam.raw[rows], dtype=np.float64)


def rows_of_shards(ss: ShardSet, rows: np.ndarray) -> np.ndarray:
    """The raw values of the whole data's (sorted) ``rows``: each shard gives its own."""
    rows = np.asarray(rows, dtype=np.int64)
    local = [rows[(rows >= lo) & (rows < hi)] - lo for lo, hi in zip(ss.starts, ss.stops, strict=True)]
    parts = ss.summaries(sample_rows, state=local)
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


def lazy_rows(ss: ShardSet, fn: Any, params: dict[str, torch.Tensor], width: int | None) -> Any:
    """A lazy dask array of a per-row quantity of a dask fit (:func:`shard_responsibilities`,
    :func:`shard_row_loglik`), one block per shard, computed only when asked for."""
    import dask.array as da

    blocks = [da.from_delayed(part, shape=(hi - lo,) if width is None else (hi - lo, width), dtype=np.float64)
              for part, lo, hi in zip(ss.lazy(fn, params), ss.starts, ss.stops, strict=True)]
    return da.concatenate(blocks, axis=0)
