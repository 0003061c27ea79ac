"""The state of the Metropolis–Hastings sampler for the collapsed DirichletDCA (:mod:`.mh`): the corpus split into
the arrays its kernels walk (:class:`MHCorpus`), a chain's counts and assignments (:class:`MHState`), its start,
one sweep (:func:`mh_step`), the collapsed log joint and the count invariants. The sampler's spec, its options and
the algorithm's description are in :mod:`.mh`, which re-exports every name here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from scipy.special import gammaln

from latentfs.core.data import DataError
from latentfs.inference.dca.collapsed_state import (
    CollapsedCorpus,
    _doc_constant_dm,
    _hyper,
    _numba_seed,
    check_token_budget,
    count_problems,
)
from latentfs.inference.dca.mh_kernels import TOPIC_BITS
from latentfs.inference.dca.mh_kernels import kernels as _kernels
from latentfs.models.dca import DirichletDCA

__all__ = [
    "BYTES_PER_TOKEN",
    "MH_STEPS",
    "MHCorpus",
    "MHState",
    "check_mh_invariants",
    "mh_hyper",
    "mh_init",
    "mh_log_joint",
    "mh_step",
    "sweep_order",
]

# Peak bytes per token while the corpus is split and indexed (int64 sort keys and permutations), and the
# token arrays kept afterwards (word, assignment, word-major index, word-table entries).
BYTES_PER_TOKEN = 64

#: MH cycles per token, the default of ``mh_steps`` (benchmarks/dca_mh.py, section 3)
MH_STEPS = 2


# ----------------------------------------------------------------------------- corpus and state
@dataclass(frozen=True)
class MHCorpus:
    """The corpus as token sequences, every document's tokens in two halves (module docstring).

    Attributes
    ----------
    doc_ptr : int64 (I + 1,), tokens of document i are ``words[doc_ptr[i]:doc_ptr[i + 1]]``
    doc_mid : int64 (I,), half 0 of document i is ``[doc_ptr[i], doc_mid[i])``, half 1 ``[doc_mid[i], doc_ptr[i + 1])``
    words : int32 (S,), the word j of each token
    lengths : float64 (I,), L_(i); word_totals : int64 (J,), Σ_i w_{j,(i)}
    by_word_ptr : int64 (2, J + 1), by_word : int32 or int64 (S,): the tokens of word j in half h are
        ``by_word[by_word_ptr[h, j]:by_word_ptr[h, j + 1]]`` (positions in ``words``); by_word_doc : int32 (S,),
        the document of each of them
    word_scale : float64 (2, J), λ_w while half h is fixed: word j's tokens over its tokens in half h (0 if none)
    half_scale : float64 (2,), λ while half h is fixed: all tokens over half h's tokens (0 if none)
    """

    doc_ptr: np.ndarray
    doc_mid: np.ndarray
    words: np.ndarray
    lengths: np.ndarray
    word_totals: np.ndarray
    by_word_ptr: np.ndarray
    by_word: np.ndarray
    by_word_doc: np.ndarray
    word_scale: np.ndarray
    half_scale: np.ndarray

    @property
    def n_documents(self) -> int:
        return int(self.doc_ptr.size - 1)

    @property
    def n_tokens(self) -> int:
        return int(self.words.size)

    @classmethod
    def from_data(cls, data: Any, *, memory_budget: float | None = None) -> MHCorpus:
        """Expand the bag of counts into tokens (after :func:`check_token_budget`, before any allocation) and
        split them."""
        check_token_budget(data.counts.csr.data, budget=memory_budget, bytes_per_token=BYTES_PER_TOKEN,
                           what="method='mh'")
        tokens = CollapsedCorpus.from_data(data, memory_budget=memory_budget)
        return cls.from_tokens(tokens.doc_ptr, tokens.words, data.n_features)

    @classmethod
    def from_tokens(cls, doc_ptr: np.ndarray, words: np.ndarray, n_features: int) -> MHCorpus:
        """Split document-major tokens into the two halves: within every word, its occurrences in corpus order
        alternate between half 0 and half 1; every document's half-0 tokens come first."""
        doc_ptr = np.asarray(doc_ptr, np.int64)
        words = np.asarray(words, np.int32)
        S, I, J = words.size, doc_ptr.size - 1, int(n_features)
        totals = np.bincount(words, minlength=J).astype(np.int64)
        order = np.argsort(words, kind="stable")
        starts = np.concatenate([[0], np.cumsum(totals)[:-1]]).astype(np.int64)
        rank = np.empty(S, np.int64)
        rank[order] = np.arange(S, dtype=np.int64) - starts[words[order]]
        del order
        half = (rank & 1).astype(np.int8)
        del rank
        doc_of = np.repeat(np.arange(I, dtype=np.int64), np.diff(doc_ptr))
        perm = np.argsort(doc_of * 2 + half, kind="stable")
        doc_mid = doc_ptr[:-1] + np.bincount(doc_of[half == 0], minlength=I).astype(np.int64)
        del doc_of
        words = words[perm]
        half = half[perm]
        del perm
        index = np.int32 if S < 2**31 else np.int64
        parts, ptr = [], np.zeros((2, J + 1), np.int64)
        word_scale = np.zeros((2, J))
        half_scale = np.zeros(2)
        offset = 0
        for h in range(2):
            idx = np.flatnonzero(half == h)
            idx = idx[np.argsort(words[idx], kind="stable")]
            counts = np.bincount(words[idx], minlength=J).astype(np.int64)
            ptr[h] = offset + np.concatenate([[0], np.cumsum(counts)])
            np.divide(totals, counts, out=word_scale[h], where=counts > 0)
            half_scale[h] = S / idx.size if idx.size else 0.0
            parts.append(idx.astype(index))
            offset += idx.size
        by_word = np.concatenate(parts) if parts else np.zeros(0, index)
        by_word_doc = (np.searchsorted(doc_ptr, by_word, side="right") - 1).astype(np.int32)
        lengths = np.diff(doc_ptr).astype(np.float64)
        return cls(doc_ptr, doc_mid, words, lengths, totals, ptr, by_word, by_word_doc, word_scale, half_scale)


@dataclass
class MHState:
    """State of the MH sampler; the arrays are updated in place by every sweep.

    Attributes
    ----------
    assignment : int32 (S,), k_l of every token (the token order of :class:`MHCorpus`)
    doc_counts : uint16 or int32 (I, K), c_(i), tokens of document i in component k (uint16 when every document
        has fewer than 2^16 tokens)
    pair_counts : uint16 or int32 (J, K, 2) (uint16 when every word has fewer than 2^16 tokens): ``[:, :, 0]``
        is N_jk (tokens of word j in component k), ``[:, :, 1]`` the
        fixed half's counts H_jk the current word tables were built from (scratch between sweeps)
    component_counts : int64 (K,), N_k = Σ_j N_jk; half_totals : int64 (K,), H_k
    table : float64 (P, 2), the word tables of q_w (:func:`.mh_kernels._rebuild_word_tables`): row p of a word's
        table holds the alias threshold of slot p and (slot's component << 26) | (its alias's component); word j
        has room for min(K, tokens of j in the larger half) rows
    meta : float64 (J, 4), per word: first row in ``table``, entries in use, Σ of the table's weights, λ_w
    draw_generator : torch.Generator for the output draws of Θ and the document site
    proposals : int64 (4,), running totals: word proposals, accepted, document proposals, accepted (a proposal
        of the current component counts as accepted)
    """

    assignment: np.ndarray
    doc_counts: np.ndarray
    pair_counts: np.ndarray
    component_counts: np.ndarray
    half_totals: np.ndarray
    table: np.ndarray
    meta: np.ndarray
    draw_generator: torch.Generator
    proposals: np.ndarray = field(default_factory=lambda: np.zeros(4, np.int64))

    @property
    def word_counts(self) -> np.ndarray:
        """N (J, K) (a view)."""
        return self.pair_counts[:, :, 0]


def mh_hyper(model: DirichletDCA, n_features: int) -> dict[str, Any]:
    """α, γ and their sums as the kernels take them, and the alias table of α/Σα (document proposal; (K, 2):
    thresholds and aliases)."""
    hyper = _hyper(model, n_features)
    K = model.n_components
    alpha = hyper["alpha"]
    prob, alias = np.empty(K), np.empty(K, np.int64)
    _kernels()["alias_build"](alpha, K, prob, alias, np.empty(K, np.int64), np.empty(K, np.int64))
    hyper.update(alpha_sum=float(alpha.sum()), alpha_table=np.ascontiguousarray(np.stack([prob, alias], 1)))
    return hyper


def _count_dtype(totals: np.ndarray) -> np.dtype[Any]:
    """uint16 when every total fits (half the memory and cache lines of int32), else int32."""
    return np.dtype(np.uint16 if totals.max(initial=0) < 2**16 else np.int32)


def mh_init(model: DirichletDCA, corpus: MHCorpus, n_features: int, generator: torch.Generator) -> MHState:
    """Assignments drawn uniformly over the K components, and their counts."""
    K, J, I = model.n_components, int(n_features), corpus.n_documents
    if K >= 2**TOPIC_BITS:
        raise DataError(f"method='mh' packs component numbers in {TOPIC_BITS} bits; got n_components={K}. "
                        "Use fewer components or method='collapsed_gibbs'.")
    z = torch.randint(0, K, (corpus.n_tokens,), generator=generator).numpy().astype(np.int32)
    doc_of = np.repeat(np.arange(I, dtype=np.int64), np.diff(corpus.doc_ptr))
    doc_counts: np.ndarray = np.bincount(doc_of * K + z, minlength=I * K).reshape(I, K)
    doc_counts = doc_counts.astype(_count_dtype(corpus.lengths))
    del doc_of
    pairs: np.ndarray = np.zeros((J, K, 2), _count_dtype(corpus.word_totals))
    pairs[:, :, 0] = np.bincount(corpus.words.astype(np.int64) * K + z, minlength=J * K).reshape(J, K)
    halves = np.diff(corpus.by_word_ptr, axis=1)  # (2, J)
    room = np.minimum(K, halves.max(0))
    meta = np.zeros((J, 4))
    meta[:, 0] = np.concatenate([[0], np.cumsum(room)[:-1]])
    state = MHState(z, doc_counts, pairs, pairs[:, :, 0].sum(0).astype(np.int64), np.zeros(K, np.int64),
                    np.zeros((int(room.sum()), 2)), meta, torch.Generator())
    state.draw_generator.manual_seed(_numba_seed(generator))
    return state


def sweep_order(n_documents: int, n_features: int) -> str:
    """The visiting order "auto" picks: each step reads one row of the word–component counts (J × K, two counts a
    cell) and one row of the document–component counts (I × K) at a proposed component. Visiting the tokens
    document by document keeps the document's row in cache and reads the word rows at random; word by word, the
    reverse. The smaller table is the one to read at random: "word" when I < 2 J, else "document".

    Measured once during development (1M simulated tokens, 2 MH cycles, 20 sweeps in, CPU ns per token and
    sweep, word order vs document order): 5,000 documents × 20,000 words, 81 vs 99 at K = 50 and 251 vs 273 at
    K = 1,000; 20,000 × 2,000, 63 vs 71 at K = 50 and 241 vs 188 at K = 1,000.
    """
    return "word" if n_documents < 2 * n_features else "document"


def mh_step(state: MHState, corpus: MHCorpus, hyper: dict[str, Any], generator: torch.Generator, *,
            mh_steps: int = MH_STEPS, order: str = "document") -> MHState:
    """One sweep (both halves, module docstring), visiting each half's tokens ``order``-major ("document" or
    "word"; the order changes the chain, not its stationary distribution); mutates and returns ``state``."""
    _kernels()["sweep"](
        corpus.doc_ptr, corpus.doc_mid, corpus.words, state.assignment, state.doc_counts, state.pair_counts,
        state.component_counts, state.half_totals, corpus.by_word_ptr, corpus.by_word, corpus.by_word_doc,
        corpus.word_scale, corpus.half_scale, state.table, state.meta, hyper["alpha"], hyper["alpha_sum"],
        hyper["alpha_table"], hyper["gamma"], hyper["gamma_sum"], int(mh_steps), order == "word",
        _numba_seed(generator), state.proposals)
    return state


def mh_log_joint(model: DirichletDCA, state: MHState, corpus: MHCorpus, gamma: np.ndarray) -> float:
    """The collapsed log joint log p(w, k) of eq. (21) in sequence form, the value
    :func:`latentfs.inference.dca.collapsed.collapsed_log_joint` gives for the same counts, in O(tokens + K)."""
    max_doc = int(corpus.lengths.max(initial=0))
    max_word = int(corpus.word_totals.max(initial=0))
    doc_sum, word_sum = _kernels()["count_lgamma"](
        corpus.doc_ptr, state.assignment, state.doc_counts, state.pair_counts, corpus.by_word_ptr, corpus.by_word,
        np.ascontiguousarray(model.alpha, dtype=np.float64), gamma, max_doc, max_word)
    nk = state.component_counts.astype(np.float64)
    g = float(gamma.sum())
    theta_part = word_sum + float((gammaln(g) - gammaln(g + nk)).sum())
    return float(doc_sum + theta_part + _doc_constant_dm(model, corpus.lengths, nk))


def check_mh_invariants(state: MHState, corpus: MHCorpus) -> None:
    """Raise RuntimeError unless the counts agree with the assignments: c and N equal the counts recomputed from
    the assignments, N_k = Σ_i c_ik = Σ_j N_jk, the document and word totals match the corpus, and the halves
    index every token once."""
    problems = count_problems(state, corpus)
    if not np.array_equal(np.sort(corpus.by_word), np.arange(corpus.n_tokens)):
        problems.append("the word-major index does not list every token once")
    if problems:
        raise RuntimeError("MH sampler count invariants broken: " + "; ".join(problems))
