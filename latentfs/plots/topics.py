"""Topic-model plots (:mod:`latentfs.plots`): :func:`topic_summary`, and :func:`to_pyldavis` for pyLDAvis."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from latentfs.core.data import DataError
from latentfs.core.results import Posterior
from latentfs.plots._common import _check_level, _check_result, _grid, _names, _pyplot


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
    tops = {}
    for k in comps:
        if lam == 1:  # relevance with λ = 1 ranks by the word's probability in the component
            relevance = theta_mean[k]
        else:
            relevance = latentfs.word_relevance(result, k, lam=lam, num_draws=num_draws, seed=seed).scores
        tops[k] = np.argsort(-relevance, kind="stable")[:n_words][::-1]
    if beta is None and kind != "point":
        # only the drawn entries' draws, read a block of draws at a time: a sampler's count states are never
        # all made into values at once (a large fit's Θ draws need not fit in memory)
        entries = np.unique(np.concatenate([k * J + tops[k] for k in comps]))
        draws = np.concatenate([block.reshape(block.shape[0], -1)[:, entries] for block in
                                result.draw_blocks("topic_word", num_draws=num_draws, seed=seed)])
        where = {int(e): i for i, e in enumerate(entries)}
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
        top = tops[k]
        y = np.arange(top.size)
        mean = theta_mean[k, top]
        if beta is not None:
            from scipy.stats import beta as beta_dist

            a_k, b_k = beta[0][k, top], beta[1][k, top]
            lo, hi = beta_dist.ppf((1 - level) / 2, a_k, b_k), beta_dist.ppf((1 + level) / 2, a_k, b_k)
            ax.hlines(y, lo, hi, color="tab:blue", lw=2.5, alpha=0.45)
        elif draws is not None:
            cols = [where[k * J + int(j)] for j in top]
            lo, hi = np.quantile(draws[:, cols], [(1 - level) / 2, (1 + level) / 2], axis=0)
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
