"""State of the collapsed DCA sampler: Table 4 in numpy, the collapsed log joint, the token corpus, the count
state, its initialisations, the sweep dispatch and the count invariants (Buntine & Jakulin 2006, Section 7.3).

The compiled sweeps are in :mod:`.collapsed_kernels`; the public ``fit`` driver and the module overview are in
:mod:`.collapsed`. Expanding a bag of counts into tokens is checked against a memory budget first
(:func:`check_token_budget`): a corpus of S tokens takes about :data:`BYTES_PER_TOKEN` · S bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.special import gammaln

from latentfs.core.data import DataError
from latentfs.inference.dca.collapsed_kernels import kernels as _kernels
from latentfs.inference.dca.common import DCAData, DCAModel
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

__all__ = [
    "BYTES_PER_TOKEN",
    "INITS",
    "CollapsedCorpus",
    "CollapsedState",
    "check_invariants",
    "check_token_budget",
    "collapsed_init",
    "collapsed_log_joint",
    "collapsed_step",
    "document_blocks",
    "table4_conditional",
    "table4_scale",
]

# Peak bytes per token while the corpus is expanded and the chain initialised: the word (int32) and the
# assignment (int32) of every token, plus the int64 temporaries of the random start (component draws,
# document of each token, bincount keys).
BYTES_PER_TOKEN = 32
_INT32_MAX = 2**31 - 1


def check_token_budget(
    counts: np.ndarray,
    *,
    budget: float | None = None,
    bytes_per_token: int = BYTES_PER_TOKEN,
    what: str = "collapsed Gibbs",
) -> int:
    """The number of tokens S = Σ counts, after checking that expanding them fits in memory.

    Raises a :class:`~latentfs.core.data.DataError` *before anything is allocated* when S · ``bytes_per_token``
    exceeds ``budget`` (default: half the memory available now), naming S, the bytes and the remedy, or when
    a count is not a whole number the token arrays can index (S and every count below 2^63; a document's or
    word's total below 2^31 for the int32 count arrays is checked by the caller).
    """
    from latentfs.core.driver import available_memory

    values = np.asarray(counts)
    total_f = float(values.sum(dtype=np.float64))
    if not np.isfinite(total_f) or total_f >= 2.0**62:
        raise DataError(
            f"{what} expands the counts into one entry per token; got {total_f:.4g} tokens in all, more than any "
            "array can index. Scale the counts down (they are occurrences, not weights), or use method='vb'."
        )
    total = int(values.sum(dtype=np.int64)) if values.dtype.kind in "iu" else int(round(total_f))
    if budget is None:
        avail = available_memory()
        budget = None if avail is None else avail / 2
    need = total * bytes_per_token
    if budget is not None and need > budget:
        raise DataError(
            f"{what} expands the counts into one entry per token: {total:,} tokens need about "
            f"{need / 2**30:.2f} GiB ({bytes_per_token} bytes a token), over the memory budget of "
            f"{budget / 2**30:.2f} GiB. Use method='vb' (its memory grows with the non-zeros, not the tokens), "
            "subsample or scale down the counts, or free memory."
        )
    return total


# ----------------------------------------------------------------------------- the math, in numpy
def table4_scale(model: DCAModel) -> np.ndarray:
    """s_k of Table 4 with the common factor divided out: 1 (DM) or (1 + min β) / (1 + β_k) (GaP)."""
    if getattr(model, "beta", 0) is None:
        raise DataError(
            "beta of GammaPoissonDCA is not set; Table 4 needs it. Pass beta=… to the model, or use the "
            "model returned in a fit's hyperparameters."
        )
    return _TABLE4_SCALE[type(model)](model)


_TABLE4_SCALE: dict[type, Callable[[Any], np.ndarray]] = {
    DirichletDCA: lambda m: np.ones(m.n_components),
    GammaPoissonDCA: lambda m: (1.0 + np.min(m.beta)) / (1.0 + np.asarray(m.beta, dtype=np.float64)),
}


def table4_conditional(
    model: DCAModel,
    word: int,
    doc_counts: np.ndarray,
    word_counts: np.ndarray,
    component_counts: np.ndarray,
    gamma: np.ndarray,
) -> np.ndarray:
    """P(k_l = k | rest) of one token (Table 4, re-derived), normalised over k.

    Parameters
    ----------
    model : DirichletDCA or GammaPoissonDCA (with β set)
    word : int, j, the token's word
    doc_counts : (K,), c_k of the token's document, *excluding* the token
    word_counts : (K,), N_jk of word j over the corpus, excluding the token
    component_counts : (K,), N_k, excluding the token
    gamma : (J,), γ

    Examples
    --------
    >>> model = DirichletDCA(2, alpha=0.5, gamma=0.5)
    >>> p = table4_conditional(model, 0, np.array([1, 0]), np.array([2, 0]), np.array([3, 1]), np.full(3, 0.5))
    >>> p.round(3).tolist()
    [0.893, 0.107]
    """
    weights = (
        (gamma[word] + np.asarray(word_counts, dtype=np.float64))
        / (gamma.sum() + np.asarray(component_counts, dtype=np.float64))
        * (np.asarray(doc_counts, dtype=np.float64) + model.alpha)
        * table4_scale(model)
    )
    return weights / weights.sum()


def _doc_constant_dm(model: DirichletDCA, lengths: np.ndarray, component_counts: np.ndarray) -> float:
    # Σ_i [log Γ(Σα) − log Γ(L_(i) + Σα)]; the Γ(c + α) / Γ(α) terms come from the counts.
    a = float(model.alpha.sum())
    return float(lengths.size * gammaln(a) - gammaln(lengths + a).sum())


def _doc_constant_gap(model: GammaPoissonDCA, lengths: np.ndarray, component_counts: np.ndarray) -> float:
    # Σ_i Σ_k [α_k log β_k − (c_k + α_k) log(1 + β_k)] − Σ_i log L_(i)! (the token order of a Poisson bag).
    alpha, beta = model.alpha, np.asarray(model.beta, dtype=np.float64)
    per_doc = float((alpha * (np.log(beta) - np.log1p(beta))).sum())
    return float(lengths.size * per_doc - (component_counts * np.log1p(beta)).sum() - gammaln(lengths + 1).sum())


_DOC_CONSTANT: dict[type, Callable[..., float]] = {
    DirichletDCA: _doc_constant_dm,
    GammaPoissonDCA: _doc_constant_gap,
}


def collapsed_log_joint(
    model: DCAModel,
    doc_counts: np.ndarray,
    word_counts: np.ndarray,
    lengths: np.ndarray,
    gamma: np.ndarray,
    *,
    state: CollapsedState | None = None,
    word_totals: np.ndarray | None = None,
) -> float:
    """log p(w, k) of the token-sequence form with the latents and Θ integrated out (eqs. 20 and 21).

    DM (21): Σ_i [log Γ(Σα) − log Γ(L + Σα) + Σ_k log Γ(c_k + α_k)/Γ(α_k)] + Θ part;
    GaP (20): Σ_i [Σ_k α_k log β_k + log Γ(c_k + α_k)/Γ(α_k) − (c_k + α_k) log(1 + β_k) − log L!] + Θ part;
    Θ part: Σ_k [log Γ(Σγ) − log Γ(Σγ + N_k) + Σ_j log Γ(γ_j + N_jk)/Γ(γ_j)]. The bag form adds
    Σ log(L! / Π v!) terms that do not depend on the order of the tokens.

    ``doc_counts`` is (I, K); ``word_counts`` is (J, K) (word-major, as the sampler stores it). With the
    sampler's ``state`` (sparse word lists) and ``word_totals``, a symmetric γ and an ungrouped model, the
    log Γ sums run over the non-zero counts by table look-up (same value, a fraction of the cost).
    """
    doc_counts = np.asarray(doc_counts)
    word_counts = np.asarray(word_counts)
    groups = model.groups_for(word_counts.shape[0])
    nk = (state.component_counts if state is not None else word_counts.sum(0)).astype(np.float64)
    lengths = np.asarray(lengths, float)
    max_word = int(word_totals.max(initial=0)) if word_totals is not None else -1
    if (state is not None and state.word_list is not None and groups is None and 0 <= max_word <= 2**22
            and gamma.size and bool((gamma == gamma[0]).all())):
        max_doc = int(lengths.max(initial=0))
        doc_sum, word_sum = _kernels()["count_lgamma_sym"](
            doc_counts, state.word_ptr, state.word_list, np.ascontiguousarray(model.alpha, dtype=np.float64),
            float(gamma[0]), max_doc, max_word)
    else:
        doc_sum, word_sum = _kernels()["count_lgamma"](doc_counts, word_counts, model.alpha, gamma)
    if groups is None:
        g = float(gamma.sum())
        theta_part = word_sum + float((gammaln(g) - gammaln(g + nk)).sum())
    else:  # one Dirichlet per group and component: Σ_{g,k} [log Γ(γ_g) − log Γ(γ_g + N_gk)]
        g_sum = np.bincount(groups, weights=gamma)[:, None]
        ngk = np.zeros((g_sum.shape[0], word_counts.shape[1]))
        np.add.at(ngk, groups, word_counts)
        theta_part = word_sum + float((gammaln(g_sum) - gammaln(g_sum + ngk)).sum())
    return float(doc_sum + theta_part + _DOC_CONSTANT[type(model)](model, lengths, nk))



# ----------------------------------------------------------------------------- state
@dataclass(frozen=True)
class CollapsedCorpus:
    """The corpus as token sequences (each bag expanded, words in column order within a document).

    Attributes
    ----------
    doc_ptr : int64 (I + 1,), tokens of document i are ``words[doc_ptr[i]:doc_ptr[i + 1]]``
    words : int32 (S,), the word j of each token
    lengths : float64 (I,), L_(i); word_totals : int64 (J,), Σ_i w_{j,(i)}
    """

    doc_ptr: np.ndarray
    words: np.ndarray
    lengths: np.ndarray
    word_totals: np.ndarray

    @property
    def n_documents(self) -> int:
        return int(self.doc_ptr.size - 1)

    @classmethod
    def from_data(cls, data: DCAData, *, memory_budget: float | None = None) -> CollapsedCorpus:
        """Expand the bag of counts into tokens, after :func:`check_token_budget` (before any allocation)."""
        csr = data.counts.csr
        check_token_budget(csr.data, budget=memory_budget)
        reps = csr.data.astype(np.int64)
        doc_ptr = np.concatenate([[0], np.cumsum(reps)]).astype(np.int64)[csr.indptr]
        doc_len = np.diff(doc_ptr)
        word_tot = np.bincount(csr.indices, weights=csr.data.astype(np.float64), minlength=data.n_features)
        if (doc_len.size and doc_len.max() > _INT32_MAX) or (word_tot.size and word_tot.max() > _INT32_MAX):
            raise DataError(
                "collapsed Gibbs keeps its document and word counts in int32; got a document or word with "
                f"{int(max(doc_len.max(initial=0), word_tot.max(initial=0))):,} tokens (over 2^31 − 1). Scale the "
                "counts down or use method='vb'."
            )
        words = np.repeat(csr.indices.astype(np.int32), reps)
        totals = np.bincount(words, minlength=data.n_features).astype(np.int64)
        return cls(doc_ptr, words, doc_ptr[1:] - doc_ptr[:-1] + 0.0, totals)


@dataclass(frozen=True)
class CollapsedState:
    """State of the collapsed sampler. The count arrays are updated in place by each sweep.

    Attributes
    ----------
    assignment : int32 (S,), k_l of every token (document-major order of :class:`CollapsedCorpus`)
    doc_counts : int32 (I, K), c_(i), tokens of document i in component k
    word_counts : int32 (J, K), N_jk = Σ_i v_{jk,(i)} (word-major: ``topic_word`` counts transposed)
    component_counts : int64 (K,), N_k = Σ_j N_jk
    word_ptr, word_list : sparse sweep only (else None). int64 (J + 1,) and int32 (2 P,): word j's segment
        starts at b = 2 word_ptr[j]; ``word_list[b]`` is its number n of non-zero counts, followed by n
        (k, N_jk) pairs (any order) from ``word_list[b + 2]``; room for min(K, Σ_i w_{j,(i)}) pairs
    draw_generator : torch.Generator for the output draws of Θ and the document site
    group_counts : grouped models only (else None): int64 (G, K), N_gk, tokens of group g in component k
    """

    assignment: np.ndarray
    doc_counts: np.ndarray
    word_counts: np.ndarray
    component_counts: np.ndarray
    word_ptr: np.ndarray | None
    word_list: np.ndarray | None
    draw_generator: torch.Generator
    group_counts: np.ndarray | None = None


def _numba_seed(generator: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())


def _hyper(model: DCAModel, n_features: int) -> dict[str, Any]:
    gamma = model.gamma_vector(n_features).copy()
    out = {
        "alpha": np.ascontiguousarray(model.alpha, dtype=np.float64),
        "gamma": np.ascontiguousarray(gamma),
        "gamma_sum": float(gamma.sum()),
        "scale": np.ascontiguousarray(table4_scale(model), dtype=np.float64),
    }
    groups = model.groups_for(n_features)
    if groups is not None:
        out["word_group"] = np.ascontiguousarray(groups, dtype=np.int64)
        out["group_gamma_sum"] = np.bincount(groups, weights=gamma).astype(np.float64)
    return out


def collapsed_init(
    model: DCAModel,
    corpus: CollapsedCorpus,
    n_features: int,
    generator: torch.Generator,
    *,
    sweep: str = "sparse",
    init: str = "random",
) -> CollapsedState:
    """Initial assignments and their counts; ``init`` picks the scheme from :data:`INITS`.

    ``"random"`` (default) draws them uniformly over the K components. ``"sequential"`` draws every
    token in turn from Table 4 given the tokens already placed (one sweep over an empty state): the
    counts start sparse, so the first sparse sweeps are cheaper, but the greedy start traps chains in
    worse modes: on the benchmark's 270k-token corpus (K = 50, 4 seeds) the held-out log-likelihood
    after 300 sweeps was −6.736 from it against −6.693 from random starts. Neither changes what the
    chain converges to in the limit.
    """
    K = model.n_components
    hyper = _hyper(model, n_features)
    z = np.zeros(corpus.words.size, np.int32)
    ndk = np.zeros((corpus.n_documents, K), np.int32)
    nwk = np.zeros((n_features, K), np.int32)
    nk = np.zeros(K, np.int64)
    wptr = wlist = None
    if sweep == "sparse":
        wptr = np.concatenate([[0], np.cumsum(np.minimum(corpus.word_totals, K) + 1)]).astype(np.int64)
        wlist = np.zeros(2 * int(wptr[-1]), np.int32)
    ngk = None
    if "word_group" in hyper:  # grouped models use their own O(K) sweep (module docstring)
        ngk = np.zeros((hyper["group_gamma_sum"].size, K), np.int64)
        wptr = wlist = None
    state = CollapsedState(z, ndk, nwk, nk, wptr, wlist, torch.Generator(), ngk)
    INITS[init](state, corpus, hyper, generator, sweep)
    state.draw_generator.manual_seed(_numba_seed(generator))
    return state


def _init_random(state: CollapsedState, corpus: CollapsedCorpus, hyper: dict[str, Any], generator: torch.Generator,
                 sweep: str) -> None:
    K = state.doc_counts.shape[1]
    z = torch.randint(0, K, (corpus.words.size,), generator=generator).numpy().astype(np.int32)
    doc_of = np.repeat(np.arange(corpus.n_documents), np.diff(corpus.doc_ptr))
    state.assignment[:] = z
    state.doc_counts[:] = np.bincount(doc_of * K + z, minlength=state.doc_counts.size).reshape(-1, K)
    state.word_counts[:] = np.bincount(corpus.words.astype(np.int64) * K + z,
                                       minlength=state.word_counts.size).reshape(-1, K)
    state.component_counts[:] = state.word_counts.sum(0)
    if state.group_counts is not None:
        state.group_counts[:] = 0
        np.add.at(state.group_counts, hyper["word_group"], state.word_counts)
    if state.word_list is not None:
        _kernels()["dense_to_lists"](state.word_counts, state.word_ptr, state.word_list)


def _init_sequential(state: CollapsedState, corpus: CollapsedCorpus, hyper: dict[str, Any],
                     generator: torch.Generator, sweep: str) -> None:
    _run_sweep(state, corpus, hyper, generator, sweep, first=True)


INITS = {"sequential": _init_sequential, "random": _init_random}


def document_blocks(corpus: CollapsedCorpus, n_blocks: int) -> np.ndarray:
    """Split the documents into ``n_blocks`` contiguous blocks of about equal token counts.

    Returns int64 (n_blocks + 1,) document boundaries: block b is documents ``[out[b], out[b + 1])``.
    """
    cuts = np.searchsorted(corpus.doc_ptr, np.linspace(0, corpus.doc_ptr[-1], n_blocks + 1)[1:-1])
    return np.concatenate([[0], np.clip(cuts, 0, corpus.n_documents), [corpus.n_documents]]).astype(np.int64)


def _run_sweep(state: CollapsedState, corpus: CollapsedCorpus, hyper: dict[str, Any], generator: torch.Generator,
               sweep: str, first: bool, n_threads: int = 1) -> None:
    kern = _kernels()
    if n_threads > 1 and not first:
        if sweep != "sparse" or state.group_counts is not None or state.word_list is None:
            raise DataError(
                f"n_threads={n_threads} needs the sparse sweep of an ungrouped model; got sweep={sweep!r}"
                f"{' and a grouped model' if state.group_counts is not None else ''}. Use n_threads=1."
            )
        import numba

        seeds = torch.randint(0, 2**31 - 1, (n_threads,), generator=generator).numpy().astype(np.int64)
        before = numba.get_num_threads()
        numba.set_num_threads(max(1, min(n_threads, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
        try:
            kern["sparse_blocks"](document_blocks(corpus, n_threads), seeds, corpus.doc_ptr, corpus.words,
                                  state.assignment, state.doc_counts, state.word_counts, state.component_counts,
                                  state.word_ptr, state.word_list, hyper["alpha"], hyper["gamma"], hyper["gamma_sum"],
                                  hyper["scale"])
        finally:
            numba.set_num_threads(before)
        return
    seed = _numba_seed(generator)
    common = (corpus.doc_ptr, corpus.words, state.assignment, state.doc_counts, state.word_counts,
              state.component_counts)
    if state.group_counts is not None:
        kern["grouped"](*common, state.group_counts, hyper["word_group"], hyper["alpha"], hyper["gamma"],
                        hyper["group_gamma_sum"], seed, first)
        return
    tail = (hyper["alpha"], hyper["gamma"], hyper["gamma_sum"], hyper["scale"], seed, first)
    if sweep == "sparse":
        kern["sparse"](*common, state.word_ptr, state.word_list, *tail)
    else:
        kern["reference"](*common, *tail)


def collapsed_step(
    state: CollapsedState,
    corpus: CollapsedCorpus,
    hyper: dict[str, Any],
    generator: torch.Generator,
    *,
    sweep: str,
    n_threads: int = 1,
) -> CollapsedState:
    """One major cycle of Fig. 6: every token resampled in turn from Table 4. Mutates and returns ``state``.

    (Copying the O(JK) count arrays every sweep would cost more than the sweep itself.) ``n_threads > 1``
    (sparse sweep only) runs the document-partitioned sweep with stale word counts (module docstring).
    """
    _run_sweep(state, corpus, hyper, generator, sweep, first=False, n_threads=n_threads)
    return state


def count_problems(state: Any, corpus: Any) -> list[str]:
    """What is wrong with the counts of a token-assignment state (``assignment``, ``doc_counts`` c, ``word_counts``
    N, ``component_counts``) for its corpus (``doc_ptr``, ``words``, ``lengths``, ``word_totals``); empty when
    nothing is. The checks every collapsed sampler of the family shares: assignments in 0..K-1, the document and
    word totals, N_k = Σ_i c_k = Σ_j N_jk, and c and N equal to the counts recomputed from the assignments."""
    K = state.doc_counts.shape[1]
    z = state.assignment.astype(np.int64)
    problems = []
    if (z < 0).any() or (z >= K).any():
        problems.append("an assignment lies outside 0..K-1")
    doc_of = np.repeat(np.arange(corpus.n_documents), np.diff(corpus.doc_ptr))
    ndk = np.bincount(doc_of * K + z, minlength=corpus.n_documents * K).reshape(-1, K)
    nwk = np.bincount(corpus.words.astype(np.int64) * K + z, minlength=state.word_counts.shape[0] * K).reshape(-1, K)
    if not np.array_equal(state.doc_counts.sum(1), corpus.lengths):
        problems.append("document totals Σ_k c_k differ from the document lengths L_(i)")
    if not np.array_equal(state.word_counts.sum(1), corpus.word_totals):
        problems.append("word totals Σ_k N_jk differ from the corpus word counts")
    if not (np.array_equal(state.component_counts, state.doc_counts.sum(0))
            and np.array_equal(state.component_counts, state.word_counts.sum(0))):
        problems.append("component totals N_k differ from Σ_i c_k or Σ_j N_jk")
    if not np.array_equal(state.doc_counts, ndk):
        problems.append("document counts c differ from the counts of the assignments")
    if not np.array_equal(state.word_counts, nwk):
        problems.append("word counts N differ from the counts of the assignments")
    return problems


def check_invariants(state: CollapsedState, corpus: CollapsedCorpus) -> None:
    """Raise RuntimeError unless the counts agree with the assignments (digest §1.10, oracle 8).

    Checks Σ_k c_{k,(i)} = L_(i); Σ_k N_jk = Σ_i w_{j,(i)}; N_k = Σ_i c_{k,(i)} = Σ_j N_jk; that c and N
    equal the counts recomputed from the assignments (hence Σ_k v_{jk,(i)} = w_{j,(i)} for every
    document and word); and, for the sparse sweep, that each word's component list is exactly
    {(k, N_jk) : N_jk > 0}.
    """
    K = state.doc_counts.shape[1]
    problems = count_problems(state, corpus)
    if state.word_list is not None and state.word_ptr is not None:
        for j in range(state.word_counts.shape[0]):
            base, n = 2 * state.word_ptr[j] + 2, state.word_list[2 * state.word_ptr[j]]
            listed = np.zeros(K, np.int64)
            listed[state.word_list[base : base + 2 * n : 2]] = state.word_list[base + 1 : base + 2 * n : 2]
            if n != (state.word_counts[j] > 0).sum() or not np.array_equal(listed, state.word_counts[j]):
                problems.append(f"word {j}'s component list differs from its counts {{(k, N_jk) : N_jk > 0}}")
                break
    if problems:
        raise RuntimeError("collapsed Gibbs count invariants broken: " + "; ".join(problems))
