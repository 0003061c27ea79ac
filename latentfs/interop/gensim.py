"""A fitted topic model to gensim's ``LdaModel`` and back, so gensim's tools (``CoherenceModel``, ``show_topics``,
``get_document_topics``, pyLDAvis's gensim adapter) work on a latentfs fit.

The two libraries hold the same model (Blei, Ng & Jordan 2003; latentfs's :class:`~latentfs.models.dca.
DirichletDCA`): documents' component proportions ~ Dirichlet(α), components' word distributions Θ_k ~
Dirichlet(η). gensim's ``LdaModel`` keeps the variational posterior of Θ, q(Θ_k) = Dirichlet(λ_k), as
λ = η + ``state.sstats`` (Hoffman, Blei & Bach 2010, eq. 5's λ), α as ``alpha`` and η as ``eta``; latentfs's VB
result keeps the same q as the ``topic_word`` site's Dirichlet concentration, α as ``hyperparameters["alpha"]``
and η as ``hyperparameters["gamma"]`` (DCA's name for it). So the conversion copies λ, α and η and nothing is
refitted:

* :func:`to_gensim`: λ, α and η of a VB fit (a fit holding draws or a point of Θ has no λ and is refused);
* :func:`from_gensim`: a :class:`~latentfs.core.results.Posterior` of method ``"gensim"`` holding
  q(Θ) = Dirichlet(λ), with α, η and the dictionary's words as feature names; ``top_words``, ``topic_coherence``,
  ``word_relevance`` on one component and :class:`~latentfs.DCA`-style fold-in read it like a latentfs fit.

gensim is not a dependency of latentfs: install the extra, ``pip install "latentfs[gensim]"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from latentfs.core.data import DataError
from latentfs.core.results import Posterior

__all__ = ["to_gensim", "from_gensim"]


def _gensim() -> Any:
    try:
        import gensim
    except ImportError as err:
        raise ImportError(
            "latentfs.interop.gensim needs gensim, which latentfs does not install by default. Install the "
            "extra: pip install \"latentfs[gensim]\" (or pip install gensim)."
        ) from err
    return gensim


def _posterior_of(fitted: Any) -> Posterior:
    if isinstance(fitted, Posterior):
        post = fitted
    elif isinstance(getattr(fitted, "posterior_", None), Posterior):
        post = fitted.posterior_
    else:
        raise DataError(
            f"fitted must be a fitted DirichletDCA result (latentfs.fit(DirichletDCA(k), X, ...)) or a fitted "
            f"latentfs.DCA estimator; got {type(fitted).__name__}. Fit the model first."
        )
    if post.model != "DirichletDCA":
        raise DataError(
            f"only DirichletDCA fits convert to gensim's LdaModel (the same model); got a {post.model} fit. Fit "
            "latentfs.DirichletDCA, or DCA(model='dirichlet')."
        )
    return post


def _lambda_of(post: Posterior) -> np.ndarray:
    """λ (K, J), the Dirichlet concentration of q(Θ) (module docstring)."""
    spec = post._fitted.get("topic_word")
    if spec is None or spec["family"] != "dirichlet":
        kind = "draws" if "topic_word" in post._draws else "a point"
        raise DataError(
            f"to_gensim needs the fit's Dirichlet posterior of topic_word (gensim's lambda); this {post.method} fit "
            f"holds {kind}. Fit with method='vb' (theta_update='chapter' or 'full')."
        )
    return np.array(spec["concentration"], dtype=np.float64)


def to_gensim(fitted: Any, *, dtype: Any = np.float64) -> Any:
    """A gensim ``LdaModel`` holding the fit's q(Θ) (λ), α and η, and a dictionary of its feature names.

    Parameters
    ----------
    fitted : Posterior or DCA
        A fitted :class:`~latentfs.models.dca.DirichletDCA` result, or a fitted :class:`~latentfs.DCA` estimator
        with ``model="dirichlet"``.
    dtype : numpy float type, default float64
        gensim's working precision (its own default is float32).

    Returns
    -------
    gensim.models.LdaModel
        ``id2word`` maps word j to the fit's feature name j, so a gensim corpus must use the fit's column order
        (``gensim.matutils.Sparse2Corpus(X, documents_columns=False)`` of the fitted matrix ``X``).

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2, alpha=0.5)
    >>> X = model.simulate(40, 10, doc_length=50, seed=0)["counts"]
    >>> lda = to_gensim(latentfs.fit(model, X, method="vb", seed=0, warn=False))
    >>> lda.num_topics, lda.num_terms, lda.get_topics().shape
    (2, 10, (2, 10))
    """
    gensim = _gensim()
    post = _posterior_of(fitted)
    names = post.coords.get("feature") or []
    hyper = post.hyperparameters
    k = int(hyper.get("n_components", len(post.coords.get("component", []))))
    alpha = np.broadcast_to(np.asarray(hyper["alpha"], dtype=np.float64), (k,)).copy()
    eta_given = np.asarray(hyper["gamma"], dtype=np.float64)
    theta_mean = np.asarray(post.mean("topic_word"), dtype=np.float64)
    j = theta_mean.shape[1]
    names = list(names) if len(names) == j else [f"w{i}" for i in range(j)]
    eta = np.broadcast_to(eta_given, (j,)).copy() if eta_given.ndim <= 1 else eta_given.copy()
    lam = _lambda_of(post)
    sstats = lam - (eta if eta.ndim == 2 else eta[None, :])
    if (sstats < -1e-9 * np.abs(lam).max()).any():
        raise DataError(
            "the fit's q(topic_word) concentration is below its prior gamma for some entries, which gensim's "
            "LdaModel (lambda = eta + sufficient statistics >= eta) cannot hold. Fit with theta_update='chapter'."
        )
    dictionary = gensim.corpora.Dictionary()
    dictionary.token2id = {str(name): i for i, name in enumerate(names)}
    dictionary.id2token = {i: str(name) for i, name in enumerate(names)}
    # gensim's LdaModel checks eta's shape against num_terms and takes alpha and eta as arrays; no corpus: no training
    lda = gensim.models.LdaModel(
        num_topics=k, id2word=dictionary, alpha=alpha, eta=eta, dtype=dtype, random_state=0
    )
    lda.state.sstats[...] = np.maximum(sstats, 0.0).astype(dtype)
    lda.sync_state()
    return lda


def from_gensim(lda: Any, *, feature_names: Any = None) -> Posterior:
    """A latentfs :class:`~latentfs.core.results.Posterior` (``model="DirichletDCA"``, ``method="gensim"``) holding
    a gensim ``LdaModel``'s q(Θ) = Dirichlet(λ) as its ``topic_word`` site, with α and η.

    Parameters
    ----------
    lda : gensim.models.LdaModel (or LdaMulticore)
    feature_names : sequence of str, optional
        Word j's name; by default the model's ``id2word``.

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2, alpha=0.5)
    >>> X = model.simulate(40, 10, doc_length=50, seed=0)["counts"]
    >>> back = from_gensim(to_gensim(latentfs.fit(model, X, method="vb", seed=0, warn=False)))
    >>> back.method, back.mean("topic_word").shape
    ('gensim', (2, 10))
    """
    gensim = _gensim()
    if not isinstance(lda, gensim.models.LdaModel):
        raise DataError(f"lda must be a gensim.models.LdaModel; got {type(lda).__name__}. Pass a trained LdaModel.")
    lam = np.asarray(lda.state.get_lambda(), dtype=np.float64)
    k, j = lam.shape
    if feature_names is None:
        id2word = lda.id2word
        names = [str(id2word[i]) for i in range(j)] if id2word is not None and len(id2word) >= j else None
    else:
        names = [str(n) for n in feature_names]
        if len(names) != j:
            raise DataError(f"feature_names must have one name per word of the model ({j}); got {len(names)}.")
    if names is None or len(set(names)) != j:
        names = [f"w{i}" for i in range(j)]
    eta = np.asarray(lda.eta, dtype=np.float64)
    gamma: Any = float(eta.flat[0]) if np.all(eta == eta.flat[0]) else eta.tolist()
    alpha = np.asarray(lda.alpha, dtype=np.float64)
    return Posterior(
        model="DirichletDCA",
        method="gensim",
        dims={"topic_word": ("component", "feature")},
        coords={"component": [f"c{i}" for i in range(k)], "feature": names},
        trace=np.zeros((1, 0)),
        fitted={"topic_word": {"family": "dirichlet", "concentration": lam}},
        diagnostics={"source": f"gensim {gensim.__version__} LdaModel", "observation_dim": "document"},
        hyperparameters={"n_components": k, "alpha": alpha.tolist(), "gamma": gamma},
    )
