"""Gaussian-mixture plots (:mod:`latentfs.plots`): the components as ellipses over the data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from latentfs.core.data import DataError
from latentfs.core.results import Posterior
from latentfs.plots._common import _check_level, _names, _pyplot


def _covariances(result: Posterior, cov: np.ndarray, K: int, D: int) -> np.ndarray:
    """Covariance parameters of any stored shape → (..., K, D, D) (works on draws with leading axes)."""
    cov = np.asarray(cov, dtype=np.float64)
    kind = str(result.hyperparameters.get("covariance_type", "full"))
    if cov.shape[-3:] == (K, D, D):
        return cov
    if kind in ("diag",) and cov.shape[-2:] == (K, D):
        return cov[..., :, :, None] * np.eye(D)
    if cov.shape[-2:] == (D, D):  # tied full
        return np.broadcast_to(cov[..., None, :, :], (*cov.shape[:-2], K, D, D))
    if cov.shape[-1:] == (D,) and kind != "spherical":  # tied diagonal
        return np.broadcast_to((cov[..., :, None] * np.eye(D))[..., None, :, :], (*cov.shape[:-1], K, D, D))
    if cov.shape[-1:] == (K,):  # spherical
        return cov[..., :, None, None] * np.eye(D)
    raise DataError(f"covariance of shape {cov.shape} (covariance_type {kind!r}) is not one this plot knows.")


def _mixture_params(result: Posterior, draws: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, means, covariances); with ``draws`` each gets a leading (S,) axis of posterior draws."""
    get = (lambda s: result.samples(s).reshape(-1, *result.samples(s).shape[2:])) if draws else result.mean
    if "means" in result.sites and "covariance" in result.sites:
        means = np.asarray(get("means"))
        K, D = means.shape[-2:]
        return np.asarray(get("weights")), means, _covariances(result, get("covariance"), K, D)
    if {"loadings", "mean", "noise_variance", "weights"} <= set(result.sites):  # mixture of factor analyzers
        loadings = np.asarray(get("loadings"))
        means = np.asarray(get("mean"))
        noise = np.asarray(get("noise_variance"))
        K, D = means.shape[-2:]
        cov = loadings @ np.swapaxes(loadings, -1, -2)
        noise = noise if noise.shape[-2:] == (K, D) else np.broadcast_to(noise[..., None, :], (*noise.shape[:-1], K, D))
        return np.asarray(get("weights")), means, cov + noise[..., :, :, None] * np.eye(D)
    raise DataError(
        f"result must come from a Gaussian mixture (sites weights, means, covariance) or a mixture of factor "
        f"analyzers; got sites {result.sites}."
    )


def _ellipse(ax: Any, mean: np.ndarray, cov: np.ndarray, scale: float, **style: Any) -> Any:
    from matplotlib.patches import Ellipse

    vals, vecs = np.linalg.eigh(cov)
    vals = np.clip(vals, 0, None)
    angle = float(np.degrees(np.arctan2(vecs[1, 1], vecs[0, 1])))
    patch = Ellipse(tuple(mean), 2 * scale * np.sqrt(vals[1]), 2 * scale * np.sqrt(vals[0]), angle=angle, **style)
    ax.add_patch(patch)
    return patch


def mixture_ellipses(
    result: Posterior,
    X: Any,
    dims: tuple[int, int] = (0, 1),
    *,
    feature_names: Sequence[str] | None = None,
    levels: Sequence[float] = (0.5, 0.9),
    num_draws: int = 20,
    ax: Any = None,
) -> Any:
    """The data on two features, coloured by most probable component, with each component's ellipses.

    Each component's covariance, projected on the two features, is drawn as the ellipses that hold
    ``levels`` of its probability mass (a chi-square quantile with 2 degrees of freedom); the component
    mean is a cross. Points are coloured by their most probable component under the posterior mean (all
    features used). When the result holds draws, ``num_draws`` posterior draws of the outer ellipse are
    drawn faintly: their spread is the uncertainty of the component's shape and place.

    Parameters
    ----------
    result : Posterior
        A fitted :class:`~latentfs.GaussianMixture`, :class:`~latentfs.LatentProfile` or
        :class:`~latentfs.MixtureOfFactorAnalyzers`.
    X : array-like or DataFrame (n_samples, n_features)
        The data the model was fitted on.
    dims : pair of int
        The two features to draw.
    feature_names : sequence of str, optional
        Axis labels; default: the DataFrame's columns, then the result's feature coordinates.
    levels : sequence of float
        Probability mass inside each drawn ellipse.
    num_draws : int
        Posterior draws shown for a sampled result.
    ax : matplotlib axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from scipy.stats import chi2, multivariate_normal

    if not isinstance(result, Posterior):
        raise DataError(f"result must be a latentfs Posterior (from latentfs.fit); got {type(result).__name__}.")
    columns = [str(c) for c in X.columns] if hasattr(X, "columns") else None
    data = np.asarray(X.to_numpy() if hasattr(X, "to_numpy") else X, dtype=np.float64)
    weights, means, covs = _mixture_params(result, draws=False)
    K, D = means.shape
    if data.ndim != 2 or data.shape[1] != D:
        raise DataError(f"X must be the data the mixture was fitted on, with {D} columns; got shape {data.shape}.")
    if len(dims) != 2 or any(not 0 <= int(d) < D for d in dims) or dims[0] == dims[1]:
        raise DataError(f"dims must be two different feature indices in [0, {D - 1}]; got {dims!r}.")
    levels = [_check_level(v) for v in levels]
    names = _names(feature_names, columns if columns is not None else result.coords.get("feature"), D,
                   "feature_names", "x")
    i, j = int(dims[0]), int(dims[1])
    finite = np.isfinite(data).all(1)
    logp = np.stack([np.log(max(weights[k], 1e-300)) + multivariate_normal(means[k], covs[k], allow_singular=True)
                     .logpdf(data[finite]) for k in range(K)], axis=1).reshape(-1, K)
    labels = np.full(data.shape[0], -1)
    labels[finite] = logp.argmax(1)

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 5)) if ax is None else (ax.figure, ax)
    sub = np.ix_([i, j], [i, j])
    for k in range(K):
        pts = data[labels == k]
        ax.scatter(pts[:, i], pts[:, j], s=9, alpha=0.55, color=f"C{k}", label=f"component {k} ({weights[k]:.0%})")
    if (labels < 0).any():
        pts = data[labels < 0]
        ax.scatter(pts[:, i], pts[:, j], s=9, color="0.5", marker="x", label="incomplete rows")
    if result.is_sampled:
        w_d, m_d, c_d = _mixture_params(result, draws=True)
        pick = np.linspace(0, m_d.shape[0] - 1, min(int(num_draws), m_d.shape[0])).astype(int)
        scale = float(np.sqrt(chi2.ppf(max(levels), 2)))
        for s in pick:
            for k in range(K):
                _ellipse(ax, m_d[s, k, [i, j]], c_d[s, k][sub], scale, fill=False, color=f"C{k}", lw=0.5, alpha=0.25)
    for k in range(K):
        for level in levels:
            scale = float(np.sqrt(chi2.ppf(level, 2)))
            _ellipse(ax, means[k, [i, j]], covs[k][sub], scale, fill=False, color=f"C{k}", lw=1.8,
                     ls="-" if level == max(levels) else "--")
        ax.plot(means[k, i], means[k, j], "x", color="k", ms=8, mew=2)
    ax.set_xlabel(names[i])
    ax.set_ylabel(names[j])
    shown = " and ".join(f"{v:.0%}" for v in levels)
    extra = f"\nfaint: the outer ellipse in {len(pick)} posterior draws" if result.is_sampled else ""
    ax.set_title(f"{result.model} ({result.method}): ellipses hold {shown} of each component{extra}", fontsize=9)
    ax.legend(fontsize=8, loc="best")
    ax.autoscale_view()
    fig.tight_layout()
    return fig
