"""Topic coherence of components' top words on a reference corpus, and alignment of components across runs.

Both coherence measures use document co-occurrence in a reference count matrix R (documents × words;
only whether a word occurs in a document matters). With D(v) the number of documents containing v,
D(v, v') the number containing both, N the number of documents, and a component's top words
v_1, …, v_M in decreasing order of θ:

* **UMass** (Mimno, Wallach, Talley, Leenders & McCallum 2011), on the training corpus, over the M(M−1)/2
  ordered pairs (v_m, v_l), l < m. Two conventions are in use, and the numbers they give for the same topic
  differ by more than an order of magnitude (with 10 top words, a sum over 45 pairs against a mean):

  - ``"gensim"`` (default; gensim's ``CoherenceModel(coherence="u_mass")``, the one most numbers are compared
    against): the **mean** over the pairs of log[(D(v_m, v_l)/N + ε) / (D(v_l)/N)] with ε = 10⁻¹²
    (gensim's ``direct_confirmation_measure.EPSILON``), i.e. ε is added to the co-document *fraction*;
  - ``"mimno"``: the paper's eq. 1, the **sum** Σ_{m=2}^{M} Σ_{l=1}^{m−1} log[(D(v_m, v_l) + 1) / D(v_l)]
    (+1 added to the co-document *count*).

  Both are ≤ 0 up to the smoothing; a pair that never co-occurs scores log(ε N / D(v_l)) ≈ −27 under gensim's
  convention, against log(1 / D(v_l)) under Mimno's.

* **NPMI** (Bouma 2009; Aletras & Stevenson 2013), the mean over the M(M−1)/2 pairs of

      NPMI(v_i, v_j) = log[P(v_i, v_j) / (P(v_i) P(v_j))] / (−log P(v_i, v_j)),  P(·) = D(·)/N,

  in [−1, 1], with the limits −1 for pairs that never co-occur and 1 for pairs present in every document.

Higher is more coherent for both. :func:`align_components` matches the components of two runs by the
Hungarian algorithm (:func:`latentfs.core.relabel.matching_permutation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from latentfs.core.data import DataError, as_counts
from latentfs.core.relabel import matching_permutation

__all__ = ["MEASURES", "UMASS_CONVENTIONS", "top_word_indices", "umass", "npmi", "topic_coherence",
           "ComponentAlignment", "align_components"]


def _weights(topic_word: Any, name: str = "topic_word") -> np.ndarray:
    from latentfs.core.results import Posterior

    if isinstance(topic_word, Posterior):
        topic_word = topic_word.mean("topic_word")
    tw = np.asarray(topic_word, dtype=np.float64)
    if tw.ndim != 2 or not np.isfinite(tw).all() or (tw < 0).any():
        raise DataError(
            f"{name} must be a fitted result or a 2-D (components × features) array of finite non-negative "
            f"weights; got shape {tw.shape}."
        )
    return tw


def top_word_indices(topic_word: Any, n_top: int = 10) -> np.ndarray:
    """Indices (K, n_top) of each component's largest weights, in decreasing order (ties by index).

    Examples
    --------
    >>> top_word_indices(np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]]), 2).tolist()
    [[1, 2], [0, 2]]
    """
    tw = _weights(topic_word)
    if isinstance(n_top, bool) or not isinstance(n_top, (int, np.integer)) or not 2 <= n_top <= tw.shape[1]:
        raise DataError(f"n_top must be an integer in [2, {tw.shape[1]}] (pairs of words are scored); got {n_top!r}.")
    return np.argsort(-tw, axis=1, kind="stable")[:, :n_top]


def _document_frequencies(reference: Any, words: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """D(v) (M,) and D(v, v') (M, M) for the words of one component, and N."""
    presence = reference[:, words]
    presence = (presence > 0).astype(np.float64)
    co = np.asarray((presence.T @ presence).todense()) if sp.issparse(presence) else presence.T @ presence
    return np.diag(co).copy(), co, reference.shape[0]


UMASS_CONVENTIONS = ("gensim", "mimno")
"""Conventions of :func:`umass` (module docstring): gensim's mean with ε = 1e-12, or Mimno et al.'s sum with +1."""

_GENSIM_EPSILON = 1e-12  # gensim.topic_coherence.direct_confirmation_measure.EPSILON


def _umass_gensim(co: np.ndarray, df_l: np.ndarray, n: int) -> float:
    # mean over pairs of log((D(v_m, v_l)/N + ε) / (D(v_l)/N))
    return float(np.mean(np.log((co / n + _GENSIM_EPSILON) / (df_l / n))))


def _umass_mimno(co: np.ndarray, df_l: np.ndarray, n: int) -> float:
    # Mimno et al. (2011), eq. 1: Σ log((D(v_m, v_l) + 1) / D(v_l))
    return float(np.sum(np.log((co + 1.0) / df_l)))


_UMASS: dict[str, Callable[[np.ndarray, np.ndarray, int], float]] = {
    "gensim": _umass_gensim,
    "mimno": _umass_mimno,
}


def _check_umass_convention(convention: Any, name: str = "convention") -> str:
    if not isinstance(convention, str) or convention not in _UMASS:
        raise DataError(
            f"{name} must be 'gensim' or 'mimno'; got {convention!r}. 'gensim' is the mean over pairs with "
            "ε = 1e-12 (gensim's u_mass); 'mimno' is the sum with +1 smoothing (Mimno et al. 2011, eq. 1)."
        )
    return convention


def umass(words: np.ndarray, reference: sp.csr_matrix, *, convention: str = "gensim") -> float:
    """C_UMass of one ordered list of word indices (module docstring).

    ``convention="gensim"`` (default): the mean over the pairs (v_m, v_l), l < m, of
    log((D(v_m, v_l)/N + 1e-12) / (D(v_l)/N)), as gensim's ``CoherenceModel(coherence="u_mass")``;
    ``convention="mimno"``: the sum of log((D(v_m, v_l) + 1) / D(v_l)) (Mimno et al. 2011, eq. 1).

    Examples
    --------
    >>> R = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 1], [1, 0, 0]]))
    >>> round(umass(np.array([0, 1, 2]), R), 4)  # mean of log(1/3), log(1/3), log(1e-12 / (1/3))
    -9.5765
    >>> round(umass(np.array([0, 1, 2]), R, convention="mimno"), 4)  # log(2/3) + log(2/3) + log(1/1)
    -0.8109
    """
    convention = _check_umass_convention(convention)
    df, co, n = _document_frequencies(reference, words)
    if (df == 0).any():
        raise DataError(
            f"reference must contain every top word for UMass; word index {int(words[np.flatnonzero(df == 0)[0]])} "
            "occurs in no reference document. Use the training corpus as reference (Mimno et al.), or NPMI."
        )
    m, l_ = np.tril_indices(len(words), k=-1)  # pairs l < m
    return _UMASS[convention](co[m, l_], df[l_], n)


def npmi(words: np.ndarray, reference: sp.csr_matrix) -> float:
    """Mean NPMI over the pairs of one list of word indices (module docstring).

    Examples
    --------
    >>> R = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 1], [0, 1, 0], [0, 0, 0]]))
    >>> round(npmi(np.array([0, 1]), R), 4)  # log((1/4)/(1/2 · 1/2)) / log 4 = 0
    0.0
    """
    df, co, n = _document_frequencies(reference, words)
    i, j = np.triu_indices(len(words), k=1)
    p_ij, p_i, p_j = co[i, j] / n, df[i] / n, df[j] / n
    out = np.full(p_ij.shape, -1.0)  # never together: the limit −1
    both = p_ij > 0
    full = both & (p_ij >= 1)
    part = both & ~full
    out[part] = np.log(p_ij[part] / (p_i[part] * p_j[part])) / -np.log(p_ij[part])
    out[full] = 1.0  # together in every document: the limit 1
    return float(out.mean())


MEASURES: dict[str, Callable[[np.ndarray, sp.csr_matrix], float]] = {"umass": umass, "npmi": npmi}


def topic_coherence(
    topic_word: Any, reference: Any, *, measure: str = "umass", n_top: int = 10, umass_convention: str = "gensim"
) -> np.ndarray:
    """Coherence of each component's ``n_top`` words on the ``reference`` counts (module docstring).

    Parameters
    ----------
    topic_word : Posterior, array (K, J), or a list of ordered word-index lists
        Components (their top ``n_top`` words are used) or the top words themselves.
    reference : count matrix (documents × J)
        Reference corpus (the training corpus for UMass; a large external corpus suits NPMI).
    measure : {"umass", "npmi"}
    n_top : int
        M, words per component.
    umass_convention : {"gensim", "mimno"}, default "gensim"
        For ``measure="umass"``: gensim's mean over pairs with ε = 1e-12, or the sum with +1 smoothing of
        Mimno et al. (2011), eq. 1 (see :func:`umass`).

    Returns
    -------
    ndarray (K,)

    Examples
    --------
    >>> R = np.array([[2, 1, 0, 0], [1, 3, 0, 0], [0, 0, 1, 2], [0, 1, 1, 1]])
    >>> theta = np.array([[0.5, 0.4, 0.05, 0.05], [0.05, 0.05, 0.5, 0.4]])
    >>> topic_coherence(theta, R, measure="npmi", n_top=2).round(3).tolist()  # log(4/3)/log 2, log 2/log 2
    [0.415, 1.0]
    """
    if measure not in MEASURES:
        raise DataError(f"measure must be one of {sorted(MEASURES)}; got {measure!r}.")
    convention = _check_umass_convention(umass_convention, "umass_convention")
    ref = as_counts(reference, name="reference", empty_documents="keep").csr
    if isinstance(topic_word, (list, tuple)):
        tops = [np.asarray(t, dtype=np.int64) for t in topic_word]
        for t in tops:
            if t.ndim != 1 or t.size < 2 or (t < 0).any() or (t >= ref.shape[1]).any() or np.unique(t).size != t.size:
                raise DataError(
                    f"topic_word lists must hold at least 2 distinct word indices in [0, {ref.shape[1] - 1}]; got "
                    f"{t.tolist()}."
                )
    else:
        tw = _weights(topic_word)
        if tw.shape[1] != ref.shape[1]:
            raise DataError(
                f"reference must have {tw.shape[1]} features (as topic_word); got {ref.shape[1]}. Use the same "
                "vocabulary."
            )
        tops = list(top_word_indices(tw, n_top))
    if measure == "umass":
        return np.array([umass(t, ref, convention=convention) for t in tops])
    return np.array([MEASURES[measure](t, ref) for t in tops])


@dataclass(frozen=True)
class ComponentAlignment:
    """How the components of run b map onto those of run a.

    Attributes
    ----------
    permutation : ndarray (K,), ``b[permutation]`` is aligned with ``a``
    distances : ndarray (K,), L1 distance between each aligned pair of (normalised) rows
    mean_distance : float
    """

    permutation: np.ndarray
    distances: np.ndarray
    mean_distance: float


def align_components(topic_word_a: Any, topic_word_b: Any) -> ComponentAlignment:
    """Match the components of two fits (Hungarian algorithm on the L1 distance of normalised rows).

    Examples
    --------
    >>> a = np.array([[0.8, 0.2, 0.0], [0.0, 0.1, 0.9]])
    >>> al = align_components(a, a[::-1])
    >>> al.permutation.tolist(), al.mean_distance
    ([1, 0], 0.0)
    """
    a, b = _weights(topic_word_a, "topic_word_a"), _weights(topic_word_b, "topic_word_b")
    if a.shape != b.shape:
        raise DataError(f"topic_word_a and topic_word_b must have the same shape; got {a.shape} and {b.shape}.")
    if (a.sum(1) <= 0).any() or (b.sum(1) <= 0).any():
        raise DataError("every component needs a positive total weight; a row of topic_word_a or _b sums to 0.")
    a, b = a / a.sum(1, keepdims=True), b / b.sum(1, keepdims=True)
    perm, mean = matching_permutation(a, b)
    dist = np.abs(a - b[perm]).sum(1)
    return ComponentAlignment(perm, dist, float(mean))
