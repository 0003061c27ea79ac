"""Held-out likelihood of topic-style models by document completion: one definition for every engine.

Each test document's tokens are split at random into an *observed* part and a *held-out* part
(:func:`split_documents`). The document's mixture is estimated from the observed part with Θ fixed
(:func:`fold_in`: the mean-field fixed point of eq. (17) with Θ held, i.e. the DM VB document update
iterated to convergence), and the held-out tokens are scored under it:

    per-token log-likelihood = Σ_d Σ_j h_{dj} log Σ_k m̂_{dk} θ_{kj} / Σ_d Σ_j h_{dj},

with h the held-out counts and m̂ = E_q[m] = a / Σa. This is the sequence likelihood per token (no
multinomial coefficient; Buntine & Jakulin §3.1 recommend reporting it so) and the quantity
``exp(−value)`` is the per-token perplexity. Because it only needs a topic–word matrix, the same code
scores latentfs's engines and the peers (scikit-learn, ``lda``, tomotopy, gensim) in benchmarks. See
Wallach et al. (2009) for this and other estimators.

Each model is scored in its own terms (:func:`scoring_terms` reads them off a fitted Posterior):

* a **grouped** DirichletDCA (Section 4.4) normalises Θ within every group, and a held-out token's
  probability is its probability within its group (the group's multinomial); normalising over the whole
  vocabulary instead would shift every score by −log G;
* a **GammaPoissonDCA** with per-component rates β folds in with the GaP update (E[log l_k] =
  ψ(a_k) − log(1 + β_k)) and mixes by E[l] / Σ E[l]; with a common β this is the DM fold-in (Lemma 1);
* a **ConditionalGammaPoissonDCA** folds in with its spike-and-slab document step;
* a held-out token of probability 0 (maximum-likelihood fits) is counted, never clamped: the score is
  −inf with a warning that gives the count and the score of the other tokens (:func:`completion_score`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from latentfs.core.data import DataError, DataWarning, as_counts, check_positive
from latentfs.core.options import as_rng

__all__ = [
    "split_documents",
    "ScoringTerms",
    "scoring_terms",
    "normalise_topic_word",
    "fold_in",
    "fold_in_shapes",
    "completion_score",
    "completion_loglik",
    "document_completion",
]


def split_documents(X: Any, fraction: float = 0.5, *, seed: int = 0) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Split every document's tokens at random: returns (observed, held_out) count matrices.

    Exactly ``floor(fraction · L)`` tokens of each document are held out, chosen uniformly without
    replacement (a multivariate hypergeometric split of its counts).

    Examples
    --------
    >>> obs, held = split_documents(np.array([[4, 0, 2], [1, 1, 0]]), 0.5, seed=0)
    >>> (obs + held).toarray().tolist()
    [[4.0, 0.0, 2.0], [1.0, 1.0, 0.0]]
    >>> np.asarray(held.sum(axis=1)).ravel().tolist()
    [3.0, 1.0]
    """
    if not 0 < fraction < 1:
        raise DataError(f"fraction must lie strictly between 0 and 1; got {fraction}.")
    counts = as_counts(X, name="X").csr
    rng = as_rng(seed)
    held = counts.copy()
    held.data = held.data.copy()
    for i in range(counts.shape[0]):
        lo, hi = counts.indptr[i], counts.indptr[i + 1]
        row = counts.data[lo:hi].astype(np.int64)
        n_held = int(np.floor(fraction * row.sum()))
        held.data[lo:hi] = rng.multivariate_hypergeometric(row, n_held) if n_held > 0 else 0
    observed = counts - held
    observed.eliminate_zeros()
    held.eliminate_zeros()
    return sp.csr_matrix(observed), sp.csr_matrix(held)


@dataclass(frozen=True)
class ScoringTerms:
    """What a held-out score needs from a fit, resolved once (:func:`scoring_terms`).

    Attributes
    ----------
    topic_word : ndarray (K, J)
        Θ with every row normalised over the vocabulary, or within every group for a grouped model.
    groups : ndarray (J,) of int or None
        The group of every feature (grouped DirichletDCA, Section 4.4 of Buntine & Jakulin).
    beta : ndarray (K,) or None
        GammaPoissonDCA's per-component rates when they differ; None for DirichletDCA and for a common
        rate (then p(w | L) is DirichletDCA's, Lemma 1 of Buntine & Jakulin, and the DM formulas apply).
    model : str or None
        The fitted model's name when a Posterior was given.
    result : Posterior or None
    """

    topic_word: np.ndarray
    groups: np.ndarray | None
    beta: np.ndarray | None
    model: str | None
    result: Any = None


def normalise_topic_word(tw: np.ndarray, groups: np.ndarray | None) -> np.ndarray:
    """Rows of ``tw`` normalised to sum to 1, or to 1 within every group of ``groups``."""
    if groups is None:
        sums = tw.sum(1, keepdims=True)
        if (sums <= 0).any():
            raise DataError("topic_word has a component with no mass; every row needs a positive sum.")
        return tw / sums
    n_groups = int(groups.max()) + 1
    totals = np.zeros((tw.shape[0], n_groups))
    np.add.at(totals.T, groups, tw.T)
    if (totals <= 0).any():
        k, g = np.argwhere(totals <= 0)[0]
        raise DataError(
            f"topic_word component {k} has no mass in group {g}; a grouped Θ needs a positive sum within every "
            "group. Pass the fitted Θ (or a Posterior) of the grouped model."
        )
    return tw / totals[:, groups]


def scoring_terms(topic_word: Any, *, groups: Any = None, beta: Any = None) -> ScoringTerms:
    """Resolve Θ, the groups and GaP's rates from a fitted Posterior or an array.

    A Posterior of a grouped model contributes its ``groups`` and a GammaPoissonDCA Posterior its ``beta``
    (``hyperparameters``); explicit ``groups=`` / ``beta=`` override them. Θ is normalised within groups.

    Examples
    --------
    >>> terms = scoring_terms(np.array([[0.9, 0.1, 0.5, 0.5]]), groups=[0, 0, 1, 1])
    >>> terms.topic_word.tolist()
    [[0.9, 0.1, 0.5, 0.5]]
    """
    from latentfs.core.results import Posterior
    from latentfs.models.dca import check_groups

    model, result = None, None
    if isinstance(topic_word, Posterior):
        result, model = topic_word, topic_word.model
        hp = topic_word.hyperparameters
        if groups is None and hp.get("groups") is not None:
            groups = hp["groups"]
        if beta is None and model == "GammaPoissonDCA" and hp.get("beta") is not None:
            beta = hp["beta"]
        topic_word = topic_word.mean("topic_word")
    tw = np.asarray(topic_word, dtype=np.float64)
    if tw.ndim != 2:
        raise DataError(f"topic_word must be 2-D (components × features); got shape {tw.shape}.")
    if (tw < 0).any() or not np.isfinite(tw).all():
        raise DataError("topic_word must hold finite non-negative values; normalise the component-word weights.")
    K, J = tw.shape
    g = None
    if groups is not None:
        g = check_groups(groups)
        if g.shape != (J,):
            raise DataError(
                f"groups must have one entry per feature ({J}); got {g.size}. Pass the grouped model's groups."
            )
        g = np.unique(g, return_inverse=True)[1].astype(np.int64)  # contiguous codes
    elif model is None:
        sums = tw.sum(1)
        if K and J > 1 and sums.min() > 1.5 and np.allclose(sums, np.round(sums[0]), rtol=1e-9, atol=0):
            warnings.warn(
                f"every row of topic_word sums to {sums[0]:.0f}, as a Θ normalised within {sums[0]:.0f} groups does; "
                "it is normalised over the whole vocabulary here, which shifts every score by -log(number of "
                "groups). Pass groups=… (or the fitted Posterior, which carries them).",
                DataWarning, stacklevel=3,
            )
    b = None
    if beta is not None:
        b = check_positive(beta, "beta", shape=(K,))
        if np.allclose(b, b[0], rtol=1e-12, atol=0):
            b = None  # a common rate: Lemma 1, the DM formulas are exact
    return ScoringTerms(normalise_topic_word(tw, g), g, b, model, result)


def _topic_word(topic_word: Any, groups: Any = None) -> np.ndarray:
    return scoring_terms(topic_word, groups=groups).topic_word


def fold_in(
    topic_word: Any,
    X: Any,
    alpha: Any,
    *,
    max_iter: int = 200,
    tol: float = 1e-6,
    dtype: torch.dtype = torch.float64,
    groups: Any = None,
    beta: Any = None,
    n_threads: int | None = None,
    method: str = "vb",
) -> np.ndarray:
    """E_q[m] for each document of ``X`` with Θ fixed: iterate a = α + Σ_j w_j n_jk(a) (eq. 17) to convergence.

    For a GammaPoissonDCA with per-component rates β (``beta``, or the Posterior's), the GaP update
    (eq. 14: E[log l_k] = ψ(a_k) − log(1 + β_k)) is iterated and the mixture is E[l] / Σ E[l] with
    E[l_k] = a_k / (1 + β_k). Documents with no counts get the prior mean. Returns (n_documents, K).
    The documents run in parallel on ``n_threads`` threads (:func:`fold_in_shapes`); the result is the same
    for any number.

    ``method="cvb0"`` folds in by zero-order collapsed variational Bayes instead (Asuncion et al. 2009, eq. 6
    with Θ fixed; DirichletDCA and common-rate GaP only): responsibilities γ_jk ∝ (n_k^¬ + α_k) θ_jk for every
    distinct word, the mixture (n + α) / (L + Σα). It needs no digamma and, measured by document completion
    on held-out halves (``benchmarks/dca_foldin.py``), scores higher than the mean-field fixed point, most at
    large K (where exp ψ(a) empties components with few tokens); ``tol`` bounds the change of the totals n over
    a sweep. Its scratch is (widest document's distinct words) × K values per thread.
    """
    if method not in ("vb", "cvb0"):
        raise DataError(f"method must be 'vb' or 'cvb0'; got {method!r}. Pass method='vb' (the default).")
    terms = scoring_terms(topic_word, groups=groups, beta=beta)
    if method == "cvb0":
        return _fold_in_cvb0(terms, X, alpha, max_iter=max_iter, tol=tol, dtype=dtype, n_threads=n_threads)
    a = fold_in_shapes(terms.topic_word, X, alpha, max_iter=max_iter, tol=tol, dtype=dtype, groups=terms.groups,
                       beta=terms.beta, n_threads=n_threads)
    if terms.beta is not None:
        a = a / (1 + terms.beta)
    return a / a.sum(-1, keepdims=True)


def fold_in_shapes(
    topic_word: Any,
    X: Any,
    alpha: Any,
    *,
    max_iter: int = 200,
    tol: float = 1e-6,
    dtype: torch.dtype = torch.float64,
    groups: Any = None,
    beta: Any = None,
    n_threads: int | None = None,
) -> np.ndarray:
    """The Dirichlet (DM) or gamma (GaP, rate 1 + β) shapes a_(i) of q at the fold-in fixed point, Θ fixed.

    Each document starts from a = α + L/K and stops when none of its shapes moves by more than ``tol``
    (or after ``max_iter`` updates), independently of the other documents: a document's shapes are the same
    whichever batch it is folded in with. The updates run in a compiled kernel
    (:mod:`latentfs.inference.dca.foldin_kernels`) on the CSR form of ``X`` (never densified), the documents
    in parallel on ``n_threads`` threads (None: numba's current setting, ``numba.get_num_threads()``, which
    ``NUMBA_NUM_THREADS`` and ``numba.set_num_threads`` control; at most ``NUMBA_NUM_THREADS``). The result
    is the same for every number of threads. ``dtype`` (torch.float64 or torch.float32) is the precision of
    the arithmetic. Returns (n_documents, K).

    Examples
    --------
    >>> theta = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    >>> fold_in_shapes(theta, np.array([[4, 0, 0], [0, 0, 0]]), 0.5).round(6).tolist()
    [[4.5, 0.5], [0.5, 0.5]]
    """
    from latentfs.inference.dca.foldin_kernels import fold_in_csr

    terms = scoring_terms(topic_word, groups=groups, beta=beta)
    tw = terms.topic_word
    K, J = tw.shape
    counts, np_dtype, threads = _fold_in_inputs(tw, X, max_iter, tol, dtype, n_threads)
    a0 = check_positive(alpha, "alpha", shape=(K,))
    log_rate = None if terms.beta is None else np.log1p(np.asarray(terms.beta, dtype=np.float64))
    shapes, _ = fold_in_csr(counts.indptr, counts.indices, counts.data, np.ascontiguousarray(tw.T, dtype=np_dtype),
                            a0, log_rate, max_iter=int(max_iter), tol=float(tol), n_threads=threads)
    return shapes


_FOLD_IN_DTYPES: dict[Any, Any] = {torch.float64: np.float64, torch.float32: np.float32}


def _fold_in_inputs(
    tw: np.ndarray, X: Any, max_iter: Any, tol: Any, dtype: Any, n_threads: Any
) -> tuple[sp.csr_matrix, Any, int]:
    """Check the fold-in options; returns (X as CSR, never densified, the numpy dtype, threads)."""
    np_dtype = _FOLD_IN_DTYPES.get(dtype)
    if np_dtype is None:
        raise DataError(f"dtype must be torch.float64 or torch.float32; got {dtype!r}. Pass torch.float64.")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise DataError(f"max_iter must be a positive integer; got {max_iter!r}. Pass e.g. max_iter=200.")
    if isinstance(tol, bool) or not (isinstance(tol, (int, float, np.floating, np.integer)) and tol >= 0):
        raise DataError(f"tol must be a non-negative number; got {tol!r}. Pass e.g. tol=1e-6.")
    threads = _fold_in_threads(n_threads)
    counts = X if sp.isspmatrix_csr(X) or isinstance(X, sp.csr_array) else sp.csr_matrix(X, dtype=np.float64)
    if not counts.has_canonical_format:  # repeated (row, column) entries are one word's count
        counts = counts.copy()
        counts.sum_duplicates()
    if counts.shape[1] != tw.shape[1]:
        raise DataError(f"X must have {tw.shape[1]} features (as topic_word); got {counts.shape[1]}.")
    return counts, np_dtype, threads


def _fold_in_cvb0(
    terms: ScoringTerms, X: Any, alpha: Any, *, max_iter: int, tol: float, dtype: Any, n_threads: Any
) -> np.ndarray:
    """:func:`fold_in` with ``method="cvb0"``: mixtures (n + α) / (L + Σα) (n_documents, K)."""
    from latentfs.inference.dca.foldin_kernels import cvb0_csr

    if terms.beta is not None:
        raise DataError(
            "method='cvb0' folds in DirichletDCA (and GammaPoissonDCA with a common rate) only; got per-component "
            "rates beta. Use method='vb', whose GaP update takes the rates."
        )
    tw = terms.topic_word
    counts, np_dtype, threads = _fold_in_inputs(tw, X, max_iter, tol, dtype, n_threads)
    a0 = check_positive(alpha, "alpha", shape=(tw.shape[0],))
    mixture, _ = cvb0_csr(counts.indptr, counts.indices, counts.data, np.ascontiguousarray(tw.T, dtype=np_dtype), a0,
                          max_iter=int(max_iter), tol=float(tol), n_threads=threads)
    return mixture


def _fold_in_threads(n_threads: Any) -> int:
    """The threads ``n_threads`` means: None is numba's current setting."""
    if n_threads is None:
        import numba

        return int(numba.get_num_threads())
    if isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)) or n_threads < 1:
        raise DataError(f"n_threads must be a positive integer or None; got {n_threads!r}. Pass e.g. n_threads=1.")
    return int(n_threads)


def completion_score(topic_word: Any, doc_topic: np.ndarray, held_out: Any, *, groups: Any = None) -> dict[str, Any]:
    """Score ``held_out`` counts under mixtures ``doc_topic`` and ``topic_word``, with the tokens of probability 0.

    Returns a dict: ``per_token`` (Σ h log p / Σ h over all held-out tokens; −inf when any token has
    probability 0), ``per_token_scored`` (the same over the tokens of positive probability only),
    ``n_tokens`` and ``n_zero_probability`` (held-out tokens to which the mixture gives probability 0,
    as maximum-likelihood fits such as PLSA can).

    Examples
    --------
    >>> theta = np.array([[1.0, 0.0], [0.5, 0.5]])
    >>> out = completion_score(theta, np.array([[1.0, 0.0]]), np.array([[1, 1]]))
    >>> out["n_zero_probability"], out["per_token"], out["per_token_scored"]
    (1, -inf, 0.0)
    """
    tw = _topic_word(topic_word, groups)
    held = sp.csr_matrix(held_out, dtype=np.float64).tocoo()
    if held.shape[1] != tw.shape[1]:
        raise DataError(f"held_out must have {tw.shape[1]} features (as topic_word); got {held.shape[1]}.")
    if held.nnz == 0:
        raise DataError("held_out holds no tokens; raise fraction or pass longer documents.")
    probs = np.einsum("nk,kn->n", np.asarray(doc_topic, dtype=np.float64)[held.row], tw[:, held.col])
    zero = probs <= 0
    n_zero = int(held.data[zero].sum())
    scored = held.data[~zero]
    per_scored = float((scored * np.log(probs[~zero])).sum() / scored.sum()) if scored.size else -math.inf
    return {
        "per_token": -math.inf if n_zero else per_scored,
        "per_token_scored": per_scored,
        "n_tokens": int(held.data.sum()),
        "n_zero_probability": n_zero,
    }


def completion_loglik(
    topic_word: Any, doc_topic: np.ndarray, held_out: Any, *, groups: Any = None, warn: bool = True
) -> float:
    """Per-token log-likelihood of ``held_out`` counts under mixtures ``doc_topic`` and ``topic_word``.

    A held-out token to which the mixture gives probability 0 makes the value −inf (it is not clamped);
    with ``warn`` a :class:`~latentfs.core.data.DataWarning` says how many tokens and gives the score of
    the others (:func:`completion_score` returns both).
    """
    out = completion_score(topic_word, doc_topic, held_out, groups=groups)
    if out["n_zero_probability"] and warn:
        warnings.warn(
            f"{out['n_zero_probability']} of {out['n_tokens']} held-out tokens have probability 0 under the fitted "
            f"model, so the per-token log-likelihood is -inf (perplexity inf); over the other tokens it is "
            f"{out['per_token_scored']:.4f}. A maximum-likelihood fit (PLSA, KL-NMF) gives probability 0 to words "
            "its components never emit: smooth it, stop early, use tempered EM, or fit a Bayesian DCA.",
            DataWarning, stacklevel=2,
        )
    return float(out["per_token"])



def document_completion(
    topic_word: Any,
    X_test: Any,
    alpha: Any,
    *,
    fraction: float = 0.5,
    seed: int = 0,
    split: tuple[Any, Any] | None = None,
    groups: Any = None,
    beta: Any = None,
) -> float:
    """Per-token held-out log-likelihood by document completion (module docstring).

    Parameters
    ----------
    topic_word : array (K, J) or Posterior
        Component–word distributions (rows normalised here, within groups for a grouped model); a Posterior
        contributes its mean and, from its hyperparameters, its ``groups`` (grouped DirichletDCA) and
        ``beta`` (GammaPoissonDCA).
    X_test : count matrix (n_documents, J)
        Test documents (ignored when ``split`` is given).
    alpha : float or array (K,)
        The prior used to fold the observed halves in (use the same α for every library compared).
    fraction, seed : the held-out fraction of each document's tokens and the split's seed.
    split : (observed, held_out), optional
        A split made once with :func:`split_documents`, to score several models on identical halves.
    groups : array (J,), optional
        The feature groups of a grouped model: Θ is normalised within each group and every held-out
        token is scored by its probability within its group (a binary vote scores about log 1/2, not
        log 1/(2G)).
    beta : float or array (K,), optional
        GammaPoissonDCA's rates: the observed part is folded in with the GaP update and the mixture is
        E[l] / Σ E[l]. A ConditionalGammaPoissonDCA Posterior is folded in with its spike-and-slab
        document step (:func:`latentfs.inference.dca.cgp.cgp_fold_in`).

    Examples
    --------
    >>> theta = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]])
    >>> X = np.array([[4, 4, 0, 0], [0, 0, 3, 5]])
    >>> round(document_completion(theta, X, 0.1, seed=0), 2)  # log 0.5 = -0.69, less what α spreads
    -0.72
    """
    observed, held = split if split is not None else split_documents(X_test, fraction, seed=seed)
    terms = scoring_terms(topic_word, groups=groups, beta=beta)
    if terms.model == "ConditionalGammaPoissonDCA":
        from latentfs.inference.dca.cgp import cgp_fold_in

        if terms.groups is not None:
            raise DataError("document_completion has no grouped ConditionalGammaPoissonDCA; fit it ungrouped.")
        scores = cgp_fold_in(terms.result, observed)["doc_scores_mean"]
        mixture = scores / scores.sum(1, keepdims=True)
    else:
        mixture = fold_in(terms.topic_word, observed, alpha, groups=terms.groups, beta=terms.beta)
    return completion_loglik(terms.topic_word, mixture, held, groups=terms.groups)
