"""Mixture EM on a dask array: one E-step task per row chunk, the additive statistics reduced on the driver.

The E-step of a finite mixture is a function of (parameters, rows) whose M-step needs only the τ-weighted
sufficient statistics Σ_n τ_nk t(y_n) (Dempster, Laird & Rubin 1977; Titterington 2006, §1.4), which add up
over any partition of the rows (DESIGN contract 8). :func:`prepare_sharded` turns a ``dask.array.Array``
whose row chunks are the shards into a family that the EM driver (:func:`latentfs.inference.mixture.em.fit_em`)
uses exactly as an in-memory one:

1. every shard is validated inside its own task (finite values; NaN only where the model allows missing
   entries; item codes for latent class models) and kept where it was computed (``dask.persist``: on a
   worker under a ``distributed.Client``);
2. two passes of per-column counts, sums and centred sums of squares give the column means (the centring
   ``shift``) and variances (the scale of the ``reg_covar`` floor) of the whole data, as ``np.nanmean`` /
   ``np.nanvar`` give them in memory;
3. each shard builds its :class:`~latentfs.inference.mixture.families.GaussianFamily` (or
   :class:`~latentfs.inference.mixture.families.CategoricalFamily`) rows with that global shift, so its
   statistics are the in-memory statistics of its rows;
4. each EM iteration is one ``dask.compute`` of one task per shard, returning the shard's statistics
   (``eps=0``), log-likelihood and classification entropy; the driver sums them and runs the M-step.

No shard is gathered into the driver: only the statistics, and the rows of the seeded start sample
(:func:`latentfs.inference.mixture.em.sample_start`, ``init_rows`` rows), travel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core import shards
from latentfs.core.data import DataError, as_continuous
from latentfs.inference.mixture.families import (
    CategoricalFamily,
    GaussianFamily,
    add_eps,
    e_step_variant,
)
from latentfs.models.mixture import GaussianMixture, LatentClass

__all__ = ["ShardStatistics", "ShardedCategoricalFamily", "ShardedGaussianFamily", "prepare_sharded", "validate_rows"]


@dataclass(frozen=True)
class ShardStatistics:
    """What an E-step over the shards returns in place of responsibilities: the summed statistics (with the
    in-memory ``eps`` added once) and the summed classification entropy −Σ τ log τ."""

    stats: dict[str, torch.Tensor]
    entropy: float


# ----------------------------------------------------------------------------- inside the shard tasks
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


def _first_moments(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column observed counts and sums."""
    obs = ~np.isnan(v)
    return obs.sum(0).astype(np.float64), np.where(obs, v, 0.0).sum(0)


def _second_moments(v: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column centred sums of squares and largest absolute centred value."""
    dev = np.nan_to_num(v - shift)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return (dev * dev).sum(0), np.abs(dev).max(0)


def _build(model: Any, v: np.ndarray, shift: np.ndarray, variance: np.ndarray, variant: str,
           names: tuple[str, ...]) -> Any:
    if isinstance(model, LatentClass):
        return CategoricalFamily.from_rows(model, v, names)
    return GaussianFamily.from_rows(model, v, shift, variance, variant, names)


def _shard_estep(fam: Any, params: dict[str, torch.Tensor]) -> tuple[dict[str, np.ndarray], float, float]:
    """The shard's statistics at ``params`` (``eps=0``: they add up), log-likelihood and entropy."""
    resp, row_ll = fam.e_step(params)
    stats = {k: v.numpy().copy() for k, v in fam.statistics(resp, eps=0.0).items()}
    entropy = float(-(resp * torch.log(resp.clamp_min(1e-300))).sum())
    return stats, float(row_ll.sum()), entropy


def _shard_statistics(fam: Any, resp: torch.Tensor) -> dict[str, np.ndarray]:
    return {k: v.numpy().copy() for k, v in fam.statistics(resp, eps=0.0).items()}


def _shard_rows(fam: Any, rows: np.ndarray) -> np.ndarray:
    return np.asarray(fam.raw[rows], dtype=np.float64)


def _shard_resp(fam: Any, params: dict[str, torch.Tensor]) -> np.ndarray:
    return fam.e_step(params)[0].numpy().copy()


def _shard_row_ll(fam: Any, params: dict[str, torch.Tensor]) -> np.ndarray:
    return fam.e_step(params)[1].numpy().copy()


# ----------------------------------------------------------------------------- the driver's view
class _Sharded:
    """The shard bookkeeping the two sharded families share (mixed into a family subclass)."""

    shard_families: list[Any]
    shard_starts: list[int]
    shard_sizes: list[int]
    n_rows: int

    @property
    def n(self) -> int:
        return self.n_rows

    @property
    def n_shards(self) -> int:
        return len(self.shard_families)

    def e_step(self, params: dict[str, torch.Tensor]) -> tuple[Any, torch.Tensor]:  # type: ignore[override]
        """One task per shard; returns :class:`ShardStatistics` and the total log-likelihood (a 1-element
        tensor, so that ``row_ll.sum()`` is the data's log-likelihood as in memory)."""
        task = shards.delayed(shards.shard_task, pure=False)
        key = shards.wrap(params)
        outs = [task(_shard_estep, i, lo, lo + size, fam, key)
                for i, (fam, lo, size) in enumerate(self._shards())]
        parts = shards.compute(*outs)
        stats = {k: torch.as_tensor(np.sum(np.stack([p[0][k] for p in parts]), axis=0)) for k in parts[0][0]}
        ll = float(np.sum([p[1] for p in parts]))
        entropy = float(np.sum([p[2] for p in parts]))
        return ShardStatistics(add_eps(stats), entropy), torch.tensor([ll], dtype=torch.float64)

    def statistics(self, resp: Any, eps: float = 0.0) -> dict[str, torch.Tensor]:  # type: ignore[override]
        if not isinstance(resp, ShardStatistics):
            raise DataError(
                "per-row responsibilities are not available for a dask array X (they stay with their shards); "
                "pass init as starting parameters (weights, means, covariance / item_probs) or a string."
            )
        return resp.stats

    def _shards(self) -> list[tuple[Any, int, int]]:
        return list(zip(self.shard_families, self.shard_starts, self.shard_sizes, strict=True))

    def gather_rows(self, rows: np.ndarray) -> np.ndarray:
        """The raw values of the (sorted) global ``rows``: one task per shard that holds some of them."""
        rows = np.asarray(rows, dtype=np.int64)
        task = shards.delayed(_shard_rows, pure=True)
        parts = []
        for fam, lo, size in self._shards():
            local = rows[(rows >= lo) & (rows < lo + size)] - lo
            if local.size:
                parts.append(task(fam, local))
        return np.concatenate(shards.compute(*parts), axis=0)

    def dask_rows(self, fn: Any, params: dict[str, torch.Tensor], width: int | None) -> Any:
        """A lazy dask array of a per-row quantity (responsibilities, row log-likelihoods), one block per
        shard, computed only when asked for."""
        import dask.array as da

        key = shards.wrap(params)
        task = shards.delayed(fn, pure=True)
        blocks = [
            da.from_delayed(task(fam, key), shape=(size,) if width is None else (size, width), dtype=np.float64)
            for fam, _, size in self._shards()
        ]
        return da.concatenate(blocks, axis=0)


class ShardedGaussianFamily(_Sharded, GaussianFamily):
    """A :class:`GaussianFamily` whose rows live in dask shards (``x`` is empty on the driver)."""

    _width: int

    @property
    def width(self) -> int:
        return self._width


class ShardedCategoricalFamily(_Sharded, CategoricalFamily):
    """A :class:`CategoricalFamily` whose rows live in dask shards (``onehot`` is empty on the driver)."""

    _width: int

    @property
    def width(self) -> int:
        return self._width


def prepare_sharded(model: Any, X: Any, *, e_step: str = "auto") -> ShardedGaussianFamily | ShardedCategoricalFamily:
    """Validate a dask array shard by shard and return the sharded family (module docstring, steps 1–3)."""
    blocks, starts = shards.row_shards(X)
    n, d = int(X.shape[0]), int(X.shape[1])
    if np.dtype(X.dtype).kind not in "biuf":
        raise DataError(f"X must be numeric; got a dask array of dtype {X.dtype}. Pass real numbers.")
    stops = starts[1:] + [n]
    task = shards.delayed(shards.shard_task, pure=True)
    valid = shards.persist([task(validate_rows, i, lo, hi, model, b)
                            for i, (b, lo, hi) in enumerate(zip(blocks, starts, stops, strict=True))])
    first = shards.compute(*[shards.delayed(_first_moments, pure=True)(v) for v in valid])
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
    second = shards.compute(*[shards.delayed(_second_moments, pure=True)(v, shift) for v in valid])
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
    build = shards.delayed(_build, pure=True)
    fams = shards.persist([build(model, v, shift, variance, variant, names) for v in valid])
    del valid  # each shard now lives in its family only
    sizes = [int(hi - lo) for lo, hi in zip(starts, stops, strict=True)]
    fam: Any
    if isinstance(model, LatentClass):
        levels = model.levels(d)
        fam = ShardedCategoricalFamily(
            model, torch.zeros(0, int(levels.sum()), dtype=torch.float64), torch.zeros(0, d, dtype=torch.float64),
            torch.as_tensor(np.repeat(np.arange(d), levels)), levels, names, np.zeros((0, d)),
        )
        fam._width = int(levels.sum())
    elif isinstance(model, GaussianMixture):
        fam = ShardedGaussianFamily(
            model, torch.zeros(0, d, dtype=torch.float64), torch.as_tensor(shift), None, None, None, None, variant,
            names, np.zeros((0, d)), torch.as_tensor(variance),
        )
        p = d * (d + 1) // 2 + d + 1
        fam._width = p if variant == "gram" else (d * d if fam.kind == "wishart" else d)
    else:  # pragma: no cover - the registry only routes mixture models here
        raise DataError(f"model must be a GaussianMixture, LatentProfile or LatentClass; got {type(model).__name__}.")
    fam.shard_families = fams
    fam.shard_starts = starts
    fam.shard_sizes = sizes
    fam.n_rows = n
    return fam  # type: ignore[no-any-return]
