"""The plots people expect from a fitted latent model, as static matplotlib figures.

* :func:`topic_summary` — the top words of every component of a topic model, with credible bands;
* :func:`to_pyldavis` — the arrays ``pyLDAvis.prepare`` takes (Sievert & Shirley 2014), from a result;
* :func:`trace` — the objective or a site's draws per chain, with a legend and the warm-up marked;
* :func:`mixture_ellipses` — a Gaussian mixture's components as ellipses over the data;
* :func:`loadings_heatmap` — factor loadings, with their bands when the result holds draws.

Every function returns the :class:`matplotlib.figure.Figure` it drew (nothing is shown or saved).
matplotlib is imported only inside the functions: install it with ``pip install 'latentfs[plot]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from latentfs.core.data import DataError
from latentfs.core.results import Posterior

__all__ = ["loadings_heatmap", "mixture_ellipses", "to_pyldavis", "topic_summary", "trace"]


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise DataError(
            "plots need the package 'matplotlib', which is not installed. Install it with "
            "pip install 'latentfs[plot]'."
        ) from None
    return plt


def _check_result(result: Any, needs: Sequence[str], what: str) -> Posterior:
    if not isinstance(result, Posterior):
        raise DataError(f"result must be a latentfs Posterior (from latentfs.fit); got {type(result).__name__}.")
    missing = [s for s in needs if s not in result.sites]
    if missing:
        raise DataError(
            f"result must come from {what} (sites {list(needs)}); sites {missing} are missing from {result.sites}."
        )
    return result


def _names(given: Sequence[str] | None, fallback: Sequence[str] | None, n: int, arg: str, prefix: str) -> list[str]:
    if given is not None:
        names = [str(x) for x in given]
        if len(names) != n:
            raise DataError(f"{arg} must have one name per column ({n}); got {len(names)} names. Pass {n} names.")
        return names
    if fallback is not None and len(fallback) == n:
        return [str(x) for x in fallback]
    return [f"{prefix}{j}" for j in range(n)]


def _check_level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < float(level) < 1:
        raise DataError(f"level must lie in (0, 1); got {level!r}. Use e.g. 0.9 for a 90% band.")
    return float(level)


def _grid(n: int, ncols: int) -> tuple[int, int]:
    ncols = max(1, min(ncols, n))
    return -(-n // ncols), ncols


# ---------------------------------------------------------------------------------------------- topics
def _doc_mean(result: Posterior) -> np.ndarray:
    """Posterior mean of the documents' component site (N, K): a stored site, or the mean a sampler keeps."""
    for site in ("doc_topic", "doc_scores"):
        if site in result.sites:
            return np.asarray(result.mean(site), dtype=np.float64)
        if f"{site}_mean" in result.extras:
            return np.asarray(result.extras[f"{site}_mean"], dtype=np.float64)
    raise DataError(
        f"result must come from a topic model (DirichletDCA, GammaPoissonDCA, PLSA …: sites topic_word and "
        f"doc_topic or doc_scores); got sites {result.sites} and extras {sorted(result.extras)}."
    )


def topic_summary(
    result: Posterior,
    feature_names: Sequence[str] | None = None,
    n_words: int = 10,
    *,
    components: Sequence[int] | None = None,
    lam: float = 1.0,
    level: float = 0.9,
    num_draws: int = 200,
    ncols: int = 4,
    seed: int = 0,
) -> Any:
    """Top words of each component, one panel per component, with credible bands.

    Each panel shows the ``n_words`` words ranked by their relevance to the component
    (:func:`latentfs.word_relevance`, Sievert & Shirley 2014; ``lam=1`` ranks by the word's probability in
    the component, ``lam=0.6`` is the authors' user-study optimum) and plots the word's probability
    θ_kj in the component: the posterior mean as a dot and, when the result holds a distribution or draws,
    an equal-tailed band at ``level`` (for a fitted Dirichlet, the exact quantiles of its Beta marginal).
    Point estimates (EM) get no band. The panel title gives the component's share of the corpus's tokens.

    Parameters
    ----------
    result : Posterior
        A fitted topic model (sites ``topic_word`` and ``doc_topic`` or ``doc_scores``).
    feature_names : sequence of str, optional
        Word names; default: the result's feature coordinates.
    n_words : int
        Words per component.
    components : sequence of int, optional
        Which components to draw (default: all).
    lam : float
        Relevance weight λ in [0, 1] used to rank the words.
    level : float
        Coverage of the bands.
    num_draws : int
        Draws taken from a variational posterior for the bands.
    ncols : int
        Panels per row.
    seed : int
        Seed of the draws from a variational posterior.

    Returns
    -------
    matplotlib.figure.Figure
        One axes per drawn component.
    """
    import latentfs

    _check_result(result, ("topic_word",), "a topic model")
    doc = _doc_mean(result)
    level = _check_level(level)
    theta_mean = result.mean("topic_word")
    K, J = theta_mean.shape
    names = _names(feature_names, result.coords.get("feature"), J, "feature_names", "w")
    if isinstance(n_words, bool) or not isinstance(n_words, (int, np.integer)) or not 1 <= n_words <= J:
        raise DataError(f"n_words must be an integer in [1, {J}]; got {n_words!r}.")
    comps = list(range(K)) if components is None else [int(k) for k in components]
    bad = [k for k in comps if not 0 <= k < K]
    if bad or not comps:
        raise DataError(f"components must be a non-empty list of integers in [0, {K - 1}]; got {components!r}.")
    kind = result.kind("topic_word")
    beta = None  # a fitted Dirichlet's marginals are Beta(c_kj, c_k· − c_kj): exact bands, no sampling
    draws = None
    if kind == "distribution" and result.fitted_params("topic_word")["family"] == "dirichlet":
        conc = np.asarray(result.fitted_params("topic_word")["concentration"], dtype=np.float64)
        beta = (conc, conc.sum(-1, keepdims=True) - conc)
    elif kind != "point":
        draws = result.samples("topic_word", num_draws, seed=seed).reshape(-1, K, J)
    lengths = result.extras.get("doc_lengths")
    weights = doc * (lengths[:, None] if lengths is not None and result.model == "DirichletDCA" else 1.0)
    share = weights.sum(0) / weights.sum()

    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    nrows, ncols = _grid(len(comps), ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 0.24 * n_words * nrows + 0.9 * nrows),
                             squeeze=False)
    for ax in axes.ravel()[len(comps):]:
        ax.remove()
    for ax, k in zip(axes.ravel(), comps, strict=False):
        if lam == 1:  # relevance with λ = 1 ranks by the word's probability in the component
            relevance = theta_mean[k]
        else:
            relevance = latentfs.word_relevance(result, k, lam=lam, num_draws=num_draws, seed=seed).scores
        top = np.argsort(-relevance, kind="stable")[:n_words][::-1]
        y = np.arange(top.size)
        mean = theta_mean[k, top]
        if beta is not None:
            from scipy.stats import beta as beta_dist

            a_k, b_k = beta[0][k, top], beta[1][k, top]
            lo, hi = beta_dist.ppf((1 - level) / 2, a_k, b_k), beta_dist.ppf((1 + level) / 2, a_k, b_k)
            ax.hlines(y, lo, hi, color="tab:blue", lw=2.5, alpha=0.45)
        elif draws is not None:
            lo, hi = np.quantile(draws[:, k, top], [(1 - level) / 2, (1 + level) / 2], axis=0)
            ax.hlines(y, lo, hi, color="tab:blue", lw=2.5, alpha=0.45)
        ax.plot(mean, y, "o", color="tab:blue", ms=4)
        ax.set_yticks(y, [names[j] for j in top], fontsize=8)
        ax.set_xlim(0, None)
        ax.xaxis.set_major_locator(MaxNLocator(3))
        ax.tick_params(axis="x", labelsize=7)
        ax.set_title(f"component {k} ({share[k]:.0%} of tokens)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    band = f"dot: posterior mean; bar: {level:.0%} band ({result.method})" if kind != "point" else (
        f"point estimate ({result.method}): no band")
    rank = "probability" if lam == 1 else f"relevance, λ = {lam:g}"
    fig.supxlabel(f"probability of the word in the component — {band}; words ranked by {rank}", fontsize=8)
    fig.tight_layout()
    return fig


def to_pyldavis(
    result: Posterior,
    X: Any,
    feature_names: Sequence[str] | None = None,
    *,
    prepare: bool = False,
    **prepare_options: Any,
) -> Any:
    """The arrays ``pyLDAvis.prepare`` takes, from a fitted topic model and its count matrix.

    pyLDAvis (Sievert & Shirley 2014) ranks words with the same relevance as
    :func:`latentfs.word_relevance`; it is not a dependency of latentfs. By default this returns the
    dict; ``pyLDAvis.prepare(**to_pyldavis(result, X))`` then builds the interactive view. With
    ``prepare=True`` it calls ``pyLDAvis.prepare`` itself (``prepare_options`` are passed on) and
    raises :class:`~latentfs.DataError` naming the install command if pyLDAvis is missing.

    Parameters
    ----------
    result : Posterior
        A fitted topic model (sites ``topic_word`` and ``doc_topic`` or ``doc_scores``).
    X : array-like, scipy.sparse matrix or pandas DataFrame (documents × words)
        The counts the model was fitted on (rows the fit dropped as empty are dropped here too).
    feature_names : sequence of str, optional
        Vocabulary; default: the DataFrame's columns, then the result's feature coordinates.

    Returns
    -------
    dict or pyLDAvis.PreparedData
        ``topic_term_dists`` (K, J), ``doc_topic_dists`` (N, K), ``doc_lengths`` (N,), ``vocab`` (J,),
        ``term_frequency`` (J,) — posterior means, every distribution normalised to sum to 1.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.plots import to_pyldavis
    >>> model = latentfs.DirichletDCA(2, alpha=0.5)
    >>> X = model.simulate(30, 8, doc_length=40, seed=0)["counts"]
    >>> data = to_pyldavis(latentfs.fit(model, X, method="vb", seed=0, warn=False), X)
    >>> sorted(data), data["topic_term_dists"].shape, data["doc_topic_dists"].shape
    (['doc_lengths', 'doc_topic_dists', 'term_frequency', 'topic_term_dists', 'vocab'], (2, 8), (30, 2))
    """
    _check_result(result, ("topic_word",), "a topic model")
    theta = np.asarray(result.mean("topic_word"), dtype=np.float64)
    K, J = theta.shape
    columns = None
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):
        columns = [str(c) for c in X.columns]
        X = X.sparse.to_coo() if hasattr(X, "sparse") and _all_sparse(X) else X.to_numpy()
    counts = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else sp.csr_matrix(np.asarray(X, dtype=np.float64))
    if counts.shape[1] != J:
        raise DataError(
            f"X must have one column per word of the fit ({J}); got shape {counts.shape}. Pass the matrix the "
            "model was fitted on."
        )
    kept = result.extras.get("kept_documents")
    doc = _doc_mean(result)
    if (kept is not None and len(kept) == doc.shape[0] and counts.shape[0] != doc.shape[0]
            and counts.shape[0] > int(np.max(kept, initial=-1))):
        counts = counts[np.asarray(kept, dtype=int)]
    if counts.shape[0] != doc.shape[0]:
        raise DataError(
            f"X must have one row per document of the fit ({doc.shape[0]}); got {counts.shape[0]} rows. Pass the "
            "matrix the model was fitted on."
        )
    vocab = _names(feature_names, columns if columns is not None else result.coords.get("feature"), J,
                   "feature_names", "w")
    doc = doc / np.maximum(doc.sum(1, keepdims=True), 1e-300)
    data = {
        "topic_term_dists": theta / theta.sum(1, keepdims=True),
        "doc_topic_dists": doc,
        "doc_lengths": np.asarray(counts.sum(1)).ravel(),
        "vocab": vocab,
        "term_frequency": np.asarray(counts.sum(0)).ravel(),
    }
    if not prepare:
        return data
    try:
        import pyLDAvis
    except ImportError:
        raise DataError(
            "prepare=True needs the package 'pyLDAvis', which is not installed. Install it with pip install "
            "pyLDAvis, or call to_pyldavis(...) without prepare to get the arrays."
        ) from None
    return pyLDAvis.prepare(**data, **prepare_options)


def _all_sparse(frame: Any) -> bool:
    try:
        import pandas as pd

        return all(isinstance(t, pd.SparseDtype) for t in frame.dtypes)
    except ImportError:  # pragma: no cover - a DataFrame implies pandas
        return False


# ---------------------------------------------------------------------------------------------- traces
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


# ---------------------------------------------------------------------------------------------- mixtures
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


# ---------------------------------------------------------------------------------------------- factors
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
