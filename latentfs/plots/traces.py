"""Trace plots (:mod:`latentfs.plots`): the objective or a site's draws per chain, warm-up marked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from latentfs.core.data import DataError
from latentfs.core.results import Posterior
from latentfs.plots._common import _pyplot


def _num_warmup(result: Posterior) -> int:
    """Iterations of ``result.trace`` that are warm-up (0 when unknown or not a sampler)."""
    d = result.diagnostics
    if "num_warmup" in d:
        return int(d["num_warmup"])
    if result.is_sampled and "num_samples" in d:
        n_iter = result.trace.shape[1]
        kept = int(d["num_samples"]) * int(d.get("thin", 1))
        return max(n_iter - kept, 0)
    return 0


def _entry_label(result: Posterior, site: str, index: tuple[int, ...]) -> str:
    labels = []
    for dim, i in zip(result.dims.get(site, ()), index, strict=False):
        coord = result.coords.get(dim)
        labels.append(coord[i] if coord is not None and i < len(coord) else str(i))
    return f"{site}[{', '.join(labels)}]" if labels else site


def trace(
    result: Posterior,
    site: str = "objective",
    entries: Sequence[Sequence[int] | int] | None = None,
    *,
    max_entries: int = 3,
) -> Any:
    """Trace plot per chain, with a legend and the warm-up marked.

    ``site="objective"`` plots ``result.trace`` — the objective at every iteration, warm-up included —
    one line per chain, with the warm-up shaded (``result.diagnostics["num_warmup"]``). Any other site
    plots the stored draws of a sampler (after warm-up): for each entry a panel of the trace per chain
    and, beside it, a histogram per chain (chains that agree overlap).

    Parameters
    ----------
    result : Posterior
    site : str
        ``"objective"`` or a site of a sampled result (for example ``"topic_word"``).
    entries : sequence of index tuples (or ints for 1-D sites), optional
        Which entries of the site to draw; default: the ``max_entries`` entries with the largest
        posterior mean magnitude (the ones people read).
    max_entries : int
        How many entries to choose when ``entries`` is not given.

    Returns
    -------
    matplotlib.figure.Figure
        One axes for the objective; two per entry (histogram, trace) for a site.
    """
    if not isinstance(result, Posterior):
        raise DataError(f"result must be a latentfs Posterior (from latentfs.fit); got {type(result).__name__}.")
    plt = _pyplot()
    warmup = _num_warmup(result)
    if site == "objective":
        values = np.atleast_2d(result.trace)
        fig, ax = plt.subplots(figsize=(7.5, 3.2))
        if warmup > 0:
            ax.axvspan(0, warmup, color="0.88", label=f"warm-up ({warmup} iterations)")
        for c in range(values.shape[0]):
            ax.plot(np.arange(values.shape[1]), values[c], lw=0.9, label=f"chain {c}")
        finite = values[np.isfinite(values)]
        if finite.size and warmup > 0 and warmup < values.shape[1]:
            # Zoom on what follows the first few iterations: the start is usually orders of magnitude lower.
            after = values[:, min(warmup // 5, values.shape[1] - 1):]
            after = after[np.isfinite(after)]
            lo, hi = float(after.min()), float(after.max())
            pad = 0.05 * (hi - lo or 1.0)
            ax.set_ylim(lo - pad, hi + pad)
        ax.set_xlabel("iteration" + (" (warm-up shaded)" if warmup else ""))
        ax.set_ylabel("objective")
        ax.set_title(f"{result.model}, {result.method}: objective per iteration")
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        return fig

    if site not in result.sites:
        raise DataError(f"site must be 'objective' or one of {result.sites}; got {site!r}.")
    if result.kind(site) != "draws":
        raise DataError(
            f"trace of site {site!r} needs draws from a sampler, and this {result.method!r} result holds "
            f"a {result.kind(site)}. Use site='objective', or fit with a sampler (e.g. method='gibbs')."
        )
    draws = result.samples(site)
    shape = draws.shape[2:]
    if entries is None:
        mean = np.abs(draws.mean(axis=(0, 1))).ravel()
        picked = np.argsort(-mean, kind="stable")[: max(1, int(max_entries))]
        index_list = [tuple(int(i) for i in np.unravel_index(p, shape)) for p in picked]
    else:
        index_list = [tuple(int(i) for i in np.atleast_1d(e)) for e in entries]
        for idx in index_list:
            if len(idx) != len(shape) or any(not 0 <= i < n for i, n in zip(idx, shape, strict=True)):
                raise DataError(
                    f"entries must index the site {site!r} of shape {shape}; got {idx}. Pass tuples of "
                    f"{len(shape)} integers within the shape."
                )
    n = len(index_list)
    fig, axes = plt.subplots(n, 2, figsize=(9, 2.1 * n + 0.4), squeeze=False, gridspec_kw={"width_ratios": [1, 3]})
    chains = draws.shape[0]
    for row, idx in enumerate(index_list):
        values = draws.reshape(*draws.shape[:2], -1)[:, :, int(np.ravel_multi_index(idx, shape))]
        label = _entry_label(result, site, idx)
        bins = np.histogram_bin_edges(values.ravel(), bins=30)
        for c in range(chains):
            axes[row, 0].hist(values[c], bins=bins, histtype="step", lw=1.1, color=f"C{c}")
            axes[row, 1].plot(values[c], lw=0.7, color=f"C{c}", label=f"chain {c}")
        axes[row, 0].set_ylabel(label, fontsize=8)
        axes[row, 0].set_yticks([])
        axes[row, 1].set_ylabel("value", fontsize=8)
    axes[0, 1].legend(loc="upper right", fontsize=7, ncols=min(chains, 4))
    axes[-1, 0].set_xlabel("value (histogram per chain)")
    axes[-1, 1].set_xlabel(f"draw, after {warmup} warm-up iterations" if warmup else "draw")
    fig.suptitle(f"{result.model}, {result.method}: draws of {site} per chain", fontsize=10)
    fig.tight_layout()
    return fig
