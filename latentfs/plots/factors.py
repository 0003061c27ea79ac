"""Factor-model plots (:mod:`latentfs.plots`): the loadings as a heatmap, with bands when the result holds draws."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from latentfs.core.data import DataError
from latentfs.core.results import Posterior
from latentfs.plots._common import _check_level, _check_result, _names, _pyplot


def loadings_heatmap(
    result: Posterior,
    feature_names: Sequence[str] | None = None,
    *,
    rotation: str = "none",
    level: float = 0.9,
    ax: Any = None,
) -> Any:
    """Factor loadings as a heatmap (features × factors), each cell annotated with its value.

    For a sampled result (Gibbs) the colour is the posterior mean and each cell also prints its
    equal-tailed band at ``level``; cells whose band covers 0 are hatched, so the loadings that the data
    do not pin down stand out. For a point estimate (EM, MAP) the cells print the estimate only.

    ``rotation`` (``"varimax"``, ``"quartimax"``, ``"promax"``) rotates the posterior-mean loadings for
    reporting; the same rotation matrix is applied to every draw, so the bands are those of the rotated
    loadings under that one rotation.

    Parameters
    ----------
    result : Posterior
        A fitted :class:`~latentfs.FactorAnalysis` (site ``loadings`` shaped (feature, factor)).
    feature_names : sequence of str, optional
        Row labels; default: the result's feature coordinates.
    rotation : {"none", "varimax", "quartimax", "promax"}
        Rotation applied before drawing.
    level : float
        Coverage of the bands.
    ax : matplotlib axes, optional

    Returns
    -------
    matplotlib.figure.Figure
        The heatmap's axes and its colour bar's.
    """
    _check_result(result, ("loadings",), "a factor analysis")
    level = _check_level(level)
    mean = np.asarray(result.mean("loadings"), dtype=np.float64)
    if mean.ndim != 2:
        raise DataError(
            f"loadings must be shaped (feature, factor); got {mean.shape}. For a mixture of factor analyzers "
            "plot one component: pass a result whose loadings are two-dimensional."
        )
    J, F = mean.shape
    names = _names(feature_names, result.coords.get("feature"), J, "feature_names", "x")
    factors = _names(None, result.coords.get("factor"), F, "factor_names", "f")
    matrix = np.eye(F)
    if rotation != "none":
        from latentfs.inference.factor import rotate

        rotated, _ = rotate(mean, rotation)
        matrix = np.linalg.lstsq(mean, rotated, rcond=None)[0]  # the F × F map from the loadings to the rotation
        mean = rotated
        factors = [f"{rotation} {k}" for k in range(F)]
    band = None
    if result.kind("loadings") == "draws":
        draws = result.samples("loadings").reshape(-1, J, F) @ matrix
        band = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)

    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.1 + 1.25 * F * (1.6 if band is not None else 1.0), 0.9 + 0.32 * J))
    else:
        fig = ax.figure
    limit = float(np.abs(mean).max()) or 1.0
    image = ax.imshow(mean, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    for r in range(J):
        for c in range(F):
            value = mean[r, c]
            text = f"{value:.2f}"
            if band is not None:
                lo, hi = band[0, r, c], band[1, r, c]
                text += f" [{lo:.2f}, {hi:.2f}]"
                if lo <= 0 <= hi:
                    ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="///", ec="0.55", lw=0))
            ax.text(c, r, text, ha="center", va="center", fontsize=7,
                    color="white" if abs(value) > 0.6 * limit else "black")
    ax.set_xticks(range(F), factors)
    ax.set_yticks(range(J), names, fontsize=8)
    fig.colorbar(image, ax=ax, label="loading" + (" (posterior mean)" if band is not None else ""))
    title = f"{result.model} loadings ({result.method}{', ' + rotation if rotation != 'none' else ''})"
    if band is not None:
        title += f"\n[{level:.0%} band]; hatched: band covers 0"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
