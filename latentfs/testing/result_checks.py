"""Checks of a fitted result against what the one contract promises, run by :func:`latentfs.testing.check_engine`
(moved here from ``latentfs/testing/__init__.py``, verbatim): the joint relabelling of a planted label switch, the
path of a·X + b, a planted collapse flagged, and the data kept as ArviZ's ``observed_data``. Each raises
``AssertionError`` naming what differed; all are exported by :mod:`latentfs.testing`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from latentfs.core.count_draws import CountStateDraws

__all__ = ["check_affine", "check_observed", "check_planted_collapse", "check_planted_switch", "planted_collapse"]


def check_planted_switch(result: Any, where: str = "result") -> None:
    """A sampler's relabelling undoes a label switch planted in its first chain, on every site jointly.

    For a result whose draws were relabelled by permutation (``result.alignment`` with ``permutations``; at
    least two chains and two components), a copy has the first chain's components rotated by one on every axis
    the alignment permutes (its ``dim`` and ``also`` dims, in every stored site: a genuine relabelling of that
    chain) and is aligned again. The chains must then agree as closely as before, site by site: a site left out of
    the joint relabelling, or permuted on one axis only, leaves the first chain's means apart from the others'.
    """
    import copy

    info = result.alignment
    if not result.is_sampled or info is None or "permutations" not in info or result.trace.shape[0] < 2:
        return
    dim, also = info["dim"], tuple(info.get("also", ()))
    axes = {s: [ax for ax, name in enumerate(result.dims.get(s, ())) if name == dim or name in also]
            for s in result.sites}
    k = next((result.samples(s).shape[2 + ax[0]] for s, ax in axes.items() if ax), 0)
    if k < 2:
        return

    def spread(post: Any) -> dict[str, float]:  # the largest gap between a chain's mean and the first chain's
        out = {}
        for s, ax in axes.items():
            if ax:
                m = np.nanmean(post.samples(s), axis=1)
                out[s] = float(np.nanmax(np.abs(m[1:] - m[:1])))
        return out

    before = spread(result)
    planted = copy.deepcopy(result)
    roll = np.roll(np.arange(k), 1)
    for s, ax in axes.items():
        if isinstance(planted._draws[s], CountStateDraws):  # count states: chain 0's draws in another labelling
            perms = np.tile(np.arange(k), (*planted._draws[s].shape[:2], 1))
            perms[0] = roll
            planted._draws[s].permute(perms)
            continue
        chain0 = planted._draws[s][0]  # (draw, ...site axes): a view, written in place
        for a in ax:
            chain0[...] = np.take(chain0, roll, axis=1 + a)
    planted.align(info["site"], dim, also=also, warn=False)
    after = spread(planted)
    for s, gap in after.items():
        scale = float(np.nanmax(np.abs(result.samples(s)))) or 1.0
        if not gap <= before[s] + 1e-8 * scale:
            raise AssertionError(f"{where}: a label switch planted in chain 0 is not undone on site {s!r} (chains "
                                 f"{gap:.3g} apart after relabelling, {before[s]:.3g} before).")


def check_affine(fit: Callable[[Any], Any], data: Any, where: str = "fit", a: float = 10.0, b: float = 3.0) -> None:
    """``fit(a·X + b)`` follows ``fit(X)``'s path: as many iterations, and every iteration's objective shifted by
    the same constant (the Jacobian of the map), to 1e-8 of the objective's size. ``data`` is an array or a list of
    arrays (sequences); integer-valued data (codes, counts) are not continuous observations and are not checked."""
    arrays = list(data) if isinstance(data, (list, tuple)) else [data]
    values = [np.asarray(x) for x in arrays]
    if not all(np.issubdtype(v.dtype, np.floating) and not np.all(np.mod(v[np.isfinite(v)], 1) == 0) for v in values):
        return  # integer-valued data are codes or counts, not continuous observations
    moved = [a * np.asarray(x, dtype=np.float64) + b for x in arrays]
    base, other = fit(data), fit(moved if isinstance(data, (list, tuple)) else moved[0])
    t0, t1 = np.asarray(base.trace, dtype=np.float64).ravel(), np.asarray(other.trace, dtype=np.float64).ravel()
    if t0.size != t1.size:
        raise AssertionError(f"{where}: a fit of {a:g}·X + {b:g} ran {t1.size} iterations where the fit of X ran "
                             f"{t0.size}.")
    shift = t0 - t1
    spread = float(np.ptp(shift)) if shift.size else 0.0
    if not spread <= 1e-8 * max(float(np.abs(t0).max()), 1.0):
        raise AssertionError(f"{where}: the fit of {a:g}·X + {b:g} leaves the path of the fit of X (the objective's "
                             f"shift varies by {spread:.3g} over the iterations; it should be one constant).")


#: Model classes whose components (or features) carry their own variance, which a fit can drive to zero.
_SCALED = ("GaussianMixture", "LatentProfile", "MixtureOfFactorAnalyzers", "HDDAModel", "GaussianHMM", "FactorAnalysis")
#: A fitted variance below this fraction of the data's mean column variance is a collapse.
COLLAPSED_FRACTION = 1e-5


def planted_collapse(model: Any) -> tuple[Any, Any, dict[str, Any]] | None:
    """A model (one more component than :func:`tiny_model`'s) and tiny data with a collapse planted where a
    maximum-likelihood fit falls into it: 15 copies of one far row (mixtures, HDDC, MFA), a run of one repeated
    value (an HMM), a column that nearly copies another (factor analysis: a Heywood case); None for a model whose
    components carry no variance of their own."""
    from latentfs.testing import tiny_data  # the package's tiny problems (it imports this module first)

    name = type(model).__name__
    if name not in _SCALED:
        return None
    X, needed = tiny_data(model)
    X = np.asarray(X, dtype=np.float64)
    if name == "FactorAnalysis":
        return model, np.column_stack([X, X[:, 0] + 1e-3 * np.random.default_rng(1).normal(size=len(X))]), needed
    bigger = model.with_n_components(model.n_components + 1)
    if name == "GaussianHMM":
        X = X.copy()
        X[5:15] = X.max() + 10.0
        return bigger, X, needed
    return bigger, np.vstack([X, np.tile(X.max(0) + 10.0, (15, 1))]), needed


def _smallest_variance(result: Any, data: np.ndarray) -> float:
    """The smallest variance of the fit (a component's covariance eigenvalue, a diagonal variance, a noise or
    signal variance; precisions inverted) over the data's mean column variance."""
    scale = float(np.mean(np.var(data, axis=0)))
    smallest = math.inf
    for site in result.sites:
        if not any(word in site for word in ("covariance", "variance", "precision")):
            continue
        value: np.ndarray = np.asarray(result.mean(site), dtype=np.float64)
        if site.endswith("covariance") and value.ndim >= 2 and value.shape[-1] == value.shape[-2]:
            value = np.linalg.eigvalsh(value)
        elif "precision" in site:
            if value.ndim >= 2 and value.shape[-1] == value.shape[-2]:
                value = 1.0 / np.linalg.eigvalsh(value)
            else:
                value = 1.0 / value
        positive = value[np.isfinite(value)]
        if positive.size:
            smallest = min(smallest, float(positive.min()) / max(scale, 1e-300))
    return smallest


def check_planted_collapse(model: Any, method: str, options: Mapping[str, Any], engine: Any,
                           where: str = "fit") -> None:
    """A fit that ends collapsed on a planted collapse (:func:`planted_collapse`) says so: the engine declares a
    degeneracy warning, warns with it and lists the collapse in its diagnostics. An engine whose fit does not
    collapse there (a prior, a shared covariance) passes."""
    import latentfs

    planted = planted_collapse(model)
    if planted is None:
        return
    bigger, data, needed = planted
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loud = {"warn": True} if "warn" in getattr(engine, "options", {}) else {}
        result = latentfs.fit(bigger, data, method=method, **{**options, **needed, "seed": 3, **loud})
    smallest = _smallest_variance(result, data)
    if smallest >= COLLAPSED_FRACTION:
        return
    declared = getattr(engine, "degenerate_warning", None)
    said = f"a planted collapse ends with a variance at {smallest:.2g} of the data's"
    if declared is None:
        raise AssertionError(f"{where}: {said}, and the engine declares no degeneracy check (degenerate_warning).")
    if not result.diagnostics.get(engine.degenerate_key):
        raise AssertionError(f"{where}: {said}, and diagnostics[{engine.degenerate_key!r}] does not list it.")
    if not any(issubclass(w.category, declared) for w in caught):
        raise AssertionError(f"{where}: {said}, and no {declared.__name__} was issued.")


def check_observed(result: Any, data: Any, where: str = "result") -> None:
    """The result keeps the in-memory data it was fitted to, and exports them as ArviZ's ``observed_data``."""
    from latentfs.core.posterior_io import observed_array

    given = observed_array(data)
    if given is None:
        return
    kept = result.observed
    dense = [np.asarray(a.toarray() if hasattr(a, "toarray") else a, dtype=np.float64) for a in (given, kept)
             if a is not None]
    if kept is None or dense[0].shape != dense[1].shape or not np.array_equal(dense[0], dense[1], equal_nan=True):
        raise AssertionError(f"{where}: result.observed is not the data the fit was given.")
    idata = result.to_inference_data()
    if "observed_data" not in idata.groups():
        raise AssertionError(f"{where}: the ArviZ export has no observed_data group.")
    (exported,) = idata.observed_data.data_vars.values()
    if not np.array_equal(np.asarray(exported.values, dtype=np.float64), dense[0], equal_nan=True):
        raise AssertionError(f"{where}: observed_data is not the data the fit was given.")
