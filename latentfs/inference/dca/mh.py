"""Metropolis–Hastings with alias tables for the collapsed DirichletDCA (LDA) posterior: a cost per token flat in K.

The chain runs over the component assignment k_l of every token, as :mod:`.collapsed` does, and targets the
same collapsed posterior (Buntine & Jakulin 2006, eq. 21; one token's full conditional is Table 4):

    p(k | rest) ∝ (c_k + α_k) (N_wk + γ_w) / (N_k + Σγ)

with every count *excluding* the token (c_k: its document's tokens in component k; N_wk: word w's tokens in
k over the corpus; N_k = Σ_w N_wk). Instead of drawing from this conditional (O(K), or O(components present)
for SparseLDA), each token takes ``mh_steps`` cycles of two Metropolis–Hastings steps whose proposals cost O(1),
cycling a *word proposal* and a *document proposal* as LightLDA does (Yuan et al. 2015, "LightLDA: Big Topic
Models on Modest Computer Clusters", WWW; alias tables with MH for LDA: Li, Ahmed, Ravi & Smola 2014,
"Reducing the sampling complexity of topic models", KDD):

* **document proposal** q_d(k) = (c_k + 1[k = s] + α_k)/(L + Σα), s the token's current component, drawn in
  O(1) by taking, with probability L/(L + Σα), the current component of a uniformly chosen token of the
  document (this one included), else k ~ α/Σα from an alias table. It reads the assignments as they are now,
  so it is never stale. Its ratio cancels the document factor of p: accept k with
  min(1, [(N_wk + γ_w)/(N_k + Σγ)] / [(N_ws + γ_w)/(N_s + Σγ)]), as in LightLDA.
* **word proposal** q_w(k) ∝ (λ_w H_wk + γ_w)/(λ H_k + Σγ), drawn in O(1) from alias tables (one per word
  over the components it has, plus one dense table over all K shared by every word). Accept k with
  min(1, p(k) q_w(s) / (p(s) q_w(k))), both q_w values computed from the very counts H the tables were
  built from.

**Exactness, and why the tables are built from half of the tokens.** An MH step leaves p invariant when its proposal
does not depend on the coordinate it moves, and may depend on any coordinate it conditions on. Alias tables built
from *all* word–component counts at an earlier time (LightLDA, AliasLDA) are stale: an acceptance ratio that
evaluates q_w with the current counts is not the proposal's, and even with the stale table's own probabilities, a
table built from a past state depends on past values of the coordinates being moved (this very token's included), so
it is not a fixed kernel of the current state. Here the tokens are split in two fixed halves (within every word,
alternate occurrences), and a sweep is two phases: the tokens of half 0 move while half 1 stays put, with word
tables built from half 1's assignments (H = half 1's counts, scaled up by λ_w = tokens of w / tokens of w in half 1
and λ = all tokens / half 1's tokens to estimate N); then half 1 moves against tables from half 0. During a phase
the tables are a function of coordinates that do not move, so every word step is an MH step with a fixed proposal
and its acceptance ratio uses that proposal's exact probabilities; every document step reads current values only.
Each step leaves the collapsed posterior invariant, hence so does every sweep, and both proposals put mass on every
component (α, γ > 0), so the chain is irreducible: its stationary distribution is eq. (21) exactly, whatever
``mh_steps``. The tests check this against the posterior enumerated over every assignment of tiny corpora.

Cost: O(``mh_steps``) per token, whatever K, plus O(tokens + J + K) per phase to rebuild the tables (one pass
over the fixed half's tokens, word by word). Memory: the dense counts c (I × K) and the word–component counts N
and the fixed half's H interleaved ((J, K, 2), so that N_wk and H_wk share a cache line), as uint16 when every
document's and word's total is below 2^16 (else int32), the tokens (word, assignment and a word-major index, 12
bytes each) and the word tables (16 bytes an entry, at most one entry per token).

Speed (``benchmarks/dca_mh.py``, results in ``benchmarks/results/dca_mh.md``; one thread, three simulated corpora of
~1M tokens, K = 20 to 1,000, fixed α = 5/K and γ = 0.01): a sweep with 2 MH cycles cost 1.1–2.5× the sparse sweep
of ``collapsed_gibbs`` (63–223 ns per token against 36–153), except on short documents at K = 1,000 (0.94×), and
the held-out at equal CPU time trailed the sparse sweep's at every K (by 0.05–0.32 nats per token): MH also mixes
less per sweep. ``collapsed_gibbs`` stays the default. Against tomotopy (collapsed Gibbs, 631 ns per token at
K = 1,000), mh reached the same held-out 1.28× sooner at K = 1,000 and 0.43–0.86× as fast at K ≤ 200. The cost per
token grew 2.1–3.1× from K = 50 to 1,000 (the issue's target is ≤ 2×): the work per token is O(1), but the counts
read at random, one cache line per (word, component) pair in dense J × K rows, leave the cache as K grows.

Hyperparameters: α and γ are the model's, fixed (no learning; ``collapsed_gibbs`` learns them during warm-up by
default). The result has the shape and sites of ``collapsed_gibbs``: draws of ``topic_word``
(θ_{·,k} ~ Dir(γ + N_{·k}) at every kept sweep), the collapsed log joint as ``trace``, the Rao-Blackwellised
means in ``extras``, a lazily computed pointwise log-likelihood.

This engine is an :class:`~latentfs.core.pipeline.EngineSpec` (:class:`MetropolisHastings`) run by the one pipeline,
which owns the options' rules, the seed rule, the chains (one after another, in threads or in processes), the run
diagnostics, the relabelling of the draws and their one R̂/ESS check; each chain's running means are permuted by
its modal relabelling before they are averaged (:meth:`MetropolisHastings.after_align`).
"""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from scipy.special import gammaln

from latentfs.core.data import DataError
from latentfs.core.driver import SamplerRun
from latentfs.core.memory import check_draw_memory
from latentfs.core.options import check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options, run, shared
from latentfs.core.posterior_align import _SWITCH_TOLERANCE
from latentfs.core.random import dirichlet_rows
from latentfs.core.registry import register_spec
from latentfs.core.relabel import apply_permutations
from latentfs.core.results import Posterior
from latentfs.inference.dca.collapsed_state import (
    CollapsedCorpus,
    _doc_constant_dm,
    _hyper,
    _numba_seed,
    check_token_budget,
)
from latentfs.inference.dca.common import check_store, dims_and_coords, prepare, resolve_model
from latentfs.inference.dca.gibbs import sample_doc_latent
from latentfs.inference.dca.loo import count_constants, draw_marginal_loglik, lazy_marginal_loglik
from latentfs.inference.dca.mh_kernels import TOPIC_BITS
from latentfs.inference.dca.mh_kernels import kernels as _kernels
from latentfs.models.dca import DirichletDCA

__all__ = [
    "BYTES_PER_TOKEN",
    "MHCorpus",
    "MHState",
    "MetropolisHastings",
    "check_mh_invariants",
    "fit_mh",
    "mh_hyper",
    "mh_init",
    "mh_log_joint",
    "mh_step",
]

# Peak bytes per token while the corpus is split and indexed (int64 sort keys and permutations), and the
# token arrays kept afterwards (word, assignment, word-major index, word-table entries).
BYTES_PER_TOKEN = 64

# Defaults of fit_mh: the chain lengths of collapsed_gibbs (the same vocabulary and defaults, not measured for mh
# separately); MH cycles per token by benchmarks/dca_mh.py, section 3 (fit_mh's docstring).
NUM_WARMUP = 100
NUM_SAMPLES = 50
MH_STEPS = 2

#: Visiting orders of a sweep's halves (:func:`mh_step`); "auto" picks one by :func:`sweep_order`.
ORDERS = ("auto", "document", "word")

#: Tokens × ``mh_steps`` from which the default ``chain_method="auto"`` runs the chains in threads (the sweep
#: kernel releases the GIL); below it the Python work around a sweep is a large share of it.
CHAIN_THREADS_WORK = 400_000


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
    K = state.doc_counts.shape[1]
    z = state.assignment.astype(np.int64)
    problems = []
    if (z < 0).any() or (z >= K).any():
        problems.append("an assignment lies outside 0..K-1")
    doc_of = np.repeat(np.arange(corpus.n_documents), np.diff(corpus.doc_ptr))
    ndk = np.bincount(doc_of * K + z, minlength=corpus.n_documents * K).reshape(-1, K)
    J = state.pair_counts.shape[0]
    nwk = np.bincount(corpus.words.astype(np.int64) * K + z, minlength=J * K).reshape(-1, K)
    if not np.array_equal(state.doc_counts, ndk):
        problems.append("document counts c differ from the counts of the assignments")
    if not np.array_equal(state.word_counts, nwk):
        problems.append("word counts N differ from the counts of the assignments")
    if not np.array_equal(state.doc_counts.sum(1), corpus.lengths):
        problems.append("document totals Σ_k c_k differ from the document lengths L_(i)")
    if not np.array_equal(state.word_counts.sum(1), corpus.word_totals):
        problems.append("word totals Σ_k N_jk differ from the corpus word counts")
    if not (np.array_equal(state.component_counts, ndk.sum(0)) and np.array_equal(state.component_counts, nwk.sum(0))):
        problems.append("component totals N_k differ from Σ_i c_k or Σ_j N_jk")
    if not np.array_equal(np.sort(corpus.by_word), np.arange(corpus.n_tokens)):
        problems.append("the word-major index does not list every token once")
    if problems:
        raise RuntimeError("MH sampler count invariants broken: " + "; ".join(problems))


# ----------------------------------------------------------------------------- the engine spec
@dataclass
class _Chain:
    """One chain: the sampler state and its running sums over kept sweeps (E[Θ | counts], c_(i), the document
    site) and their number; it all travels with the chain, so chains can run in threads or other processes."""

    state: MHState
    rb_sum: np.ndarray
    cc_sum: np.ndarray
    doc_sum: np.ndarray
    kept: int = 0


@dataclass(frozen=True)
class _Prep:
    """What every chain of one fit shares: the model (K checked against the data), the data, the split corpus,
    the kernels' hyperparameters (and α as a tensor for the document site's draws), the kept sites and the
    visiting order "auto" resolved."""

    model: DirichletDCA
    data: Any
    corpus: MHCorpus
    hyper: dict[str, Any]
    t_hyper: dict[str, torch.Tensor]
    sites: tuple[str, ...]
    order: str
    dims: dict[str, tuple[str, ...]]
    coords: dict[str, list[str]]

    @property
    def store_doc(self) -> bool:
        return self.model.doc_site in self.sites


def _mh_steps(name: str, value: Any) -> int:
    return check_int(name, value, low=1, remedy="Pass mh_steps=2 (the default) or another integer ≥ 1.")


def _order(name: str, value: Any) -> str:
    if not isinstance(value, str) or value not in ORDERS:
        raise DataError(f"order must be one of {list(ORDERS)}; got {value!r}. Use 'auto' (the default).")
    return value


def _true_or_false(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise DataError(f"{name} must be True or False; got {value!r}.")
    return bool(value)


def _chain_mean_axes(prep: _Prep) -> dict[str, int]:
    """The chain-level running means (:func:`_chain_means`) and the component axis of one chain's array."""
    return {"topic_word_mean": 0, "component_counts": 1, f"{prep.model.doc_site}_mean": 1}


def _chain_means(prep: _Prep, chains: list[_Chain]) -> dict[str, np.ndarray]:
    """Each chain's running means over its kept sweeps, as (chain, ...) arrays: E[Θ | counts], the component counts
    c_(i), the document site (its draws' mean when stored, else Rao-Blackwellised: E[m | c] = (c + α)/(L + Σα) is
    linear in c)."""
    kept = np.array([max(ch.kept, 1) for ch in chains], dtype=np.float64)
    mean_counts = np.stack([ch.cc_sum for ch in chains]) / kept[:, None, None]
    if prep.store_doc:
        doc_mean = np.stack([ch.doc_sum for ch in chains]) / kept[:, None, None]
    else:
        doc_mean = (mean_counts + prep.hyper["alpha"]) / (prep.corpus.lengths[None, :, None] + prep.hyper["alpha_sum"])
    return {
        "topic_word_mean": np.stack([ch.rb_sum for ch in chains]) / kept[:, None, None],
        "component_counts": mean_counts,
        f"{prep.model.doc_site}_mean": doc_mean,
    }


class MetropolisHastings(EngineSpec):
    """Sample a DirichletDCA (LDA) posterior by Metropolis–Hastings with alias tables
    (``latentfs.fit(model, X, method="mh", ...)``); the chain and its exactness are in the module docstring.

    Options
    -------
    num_samples, num_warmup, num_chains, thin : chain lengths, in sweeps, with ``collapsed_gibbs``'s defaults (50,
        100, 2, 1). An MH sweep moves tokens less than a Gibbs sweep, so the same held-out needs more sweeps
        (``benchmarks/results/dca_mh.md``, section 2).
    seed : int, torch.Generator or None (fresh entropy); default 0. Each chain gets an independent generator
        derived from it, which also seeds numba's generator before every sweep: same seed, same draws.
    mh_steps : int
        Cycles of (word proposal, document proposal) per token and sweep (default 2). More cycles bring each token
        closer to a draw from its conditional, at a cost per cycle. At equal CPU time (``benchmarks/dca_mh.py``,
        section 3: 1M tokens, 20,000 words) one cycle gave the best held-out at K = 50 (−8.089 against −8.116 for
        two) and four at K = 1,000 (−8.542 against −8.556 for two; −8.741 for one): two is the compromise.
    order : "auto" (default), "document" or "word"
        The order in which a sweep visits the tokens of each half: document by document or word by word. Both
        leave the posterior invariant (each step conditions on the current values of all other tokens); they
        differ in speed through the memory they read at random. "auto" is :func:`sweep_order` (recorded in
        ``diagnostics["sweep"]``).
    trace : record the collapsed log joint (eq. 21, sequence form) after every sweep, in O(tokens)
        (``False`` records NaN).
    empty_documents : "error" (default), "drop" or "keep": what to do with documents without tokens.
    progress : show a progress bar (None: when stderr is a terminal).
    store : sites to keep draws of: ``("topic_word",)`` (default) or ``("topic_word", "doc_topic")``.
    align : relabel the draws within and across chains (on ``topic_word``) and permute every chain's running
        means before they are averaged; ``False`` keeps chain-level outputs per chain.
    log_likelihood : make log p(w_(i) | Θ) per kept draw and document, m integrated out
        (:mod:`latentfs.inference.dca.loo`), available as ``post.log_likelihood`` and the ArviZ
        ``log_likelihood`` group (computed on first use; ``False``: none).
    warn : bool
        Warn (``ConvergenceWarning``) when the relabelled draws have not converged.
    memory_budget : float, optional
        Bytes allowed for the token arrays and for the kept draws (default: half the memory available).

    The model's α and γ are used as given (no hyperparameter learning). Grouped models are refused. The chains
    run one after another, or in threads (the sweep kernel releases the GIL) from ``CHAIN_THREADS_WORK`` tokens ×
    ``mh_steps`` on under ``chain_method="auto"``.

    Returns
    -------
    Posterior with the sites, extras and diagnostics of ``method="collapsed_gibbs"``: draws of ``topic_word``
    (Θ ~ Dir(γ + N) each kept sweep); ``trace`` the collapsed log joint per sweep, warm-up included;
    ``extras["topic_word_mean"]`` (K, J) the Rao-Blackwellised E[Θ | counts] averaged over kept sweeps,
    ``extras["component_counts"]`` the mean c_(i), ``extras["doc_topic_mean"]``; ``diagnostics["acceptance"]``
    the share of accepted word and document proposals per chain.

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2, alpha=0.5)
    >>> X = model.simulate(n_documents=20, n_features=10, doc_length=30, seed=0)["counts"]
    >>> post = latentfs.fit(model, X, method="mh", num_warmup=20, num_samples=5, warn=False)
    >>> post.samples("topic_word").shape
    (2, 5, 2, 10)
    >>> post.extras["component_counts"].shape
    (20, 2)
    """

    method = "mh"
    kind = "sampler"
    # registered for DirichletDCA alone: the progress bar and the warnings say "DirichletDCA MH"
    desc = "DirichletDCA MH"
    options = {
        **chain_options(num_chains=2, num_warmup=NUM_WARMUP, num_samples=NUM_SAMPLES),
        "mh_steps": Option(MH_STEPS, _mh_steps, "int ≥ 1", "cycles of (word proposal, document proposal) per token "
                                                           "and sweep"),
        "order": Option("auto", _order, "str", "the order a sweep visits each half's tokens: 'auto', 'document' "
                                               "or 'word'"),
        "trace": Option(True, _true_or_false, "bool", "record the collapsed log joint after every sweep (False: "
                                                      "NaN)"),
        "empty_documents": shared("empty_documents"),
        "store": Option(None, None, "tuple of str or None",
                        "sites whose draws are kept: ('topic_word',) by default, add 'doc_topic'"),
        "align": Option(True, _true_or_false, "bool", "relabel the draws and permute each chain's running means "
                                                      "before averaging them (False: per-chain outputs)"),
        "log_likelihood": Option(True, _true_or_false, "bool", "the pointwise log-likelihood of each kept draw, "
                                                               "m integrated out, computed on first use"),
        "memory_budget": Option(None, None, "float or None", "bytes allowed for the token arrays and the kept "
                                                             "draws (None: half the memory available)"),
    }

    def __call__(self, model: Any, data: Any, **options: Any) -> Posterior:
        # Whether the chains run in threads depends on the corpus (``threadable``, read by the pipeline once
        # prepare has seen it): each fit runs on its own copy of the spec, so fits in other threads never share it.
        return run(copy.copy(self), model, data, options)

    def prepare(self, model: Any, data: Any, o: Options) -> _Prep:
        if not isinstance(model, DirichletDCA):
            raise DataError(f"model must be a DirichletDCA for method='mh'; got {type(model).__name__}. "
                            "Use method='collapsed_gibbs' for a GammaPoissonDCA.")
        if model.groups is not None:
            raise DataError("method='mh' samples the ungrouped DirichletDCA; got a model with groups=. "
                            "Use method='collapsed_gibbs' for a grouped model.")
        dca_data = prepare(data, dtype=torch.float64, empty_documents=o.empty_documents)
        model = resolve_model(model, dca_data)  # type: ignore[assignment]
        sites = check_store(model, o.store)
        corpus = MHCorpus.from_data(dca_data, memory_budget=o.memory_budget)
        J, K, I = dca_data.n_features, model.n_components, corpus.n_documents
        if o.memory_budget is not None:
            # the kept draws against memory_budget, before the first sweep (the pipeline's chain runner checks
            # them against its default budget, half the memory available, at the first kept draw)
            shapes = {"topic_word": (K, J), model.doc_site: (I, K), "_loglik": (I,)}
            kept = [*sites, *(["_loglik"] if o.log_likelihood and "topic_word" not in sites else [])]
            check_draw_memory({s: np.broadcast_to(np.zeros(()), shapes[s]) for s in shapes if s in kept},
                              o.num_chains, o.num_samples, o.memory_budget, self.describe(type(model).__name__))
        self.threadable = corpus.n_tokens * o.mh_steps >= CHAIN_THREADS_WORK
        hyper = mh_hyper(model, J)
        order = sweep_order(I, J) if o.order == "auto" else o.order
        dims, coords = dims_and_coords(model, dca_data)
        return _Prep(model, dca_data, corpus, hyper, {"alpha": torch.as_tensor(hyper["alpha"])}, sites, order,
                     dims, coords)

    def init(self, prep: _Prep, o: Options, gen: torch.Generator) -> _Chain:
        K, J, I = prep.model.n_components, prep.data.n_features, prep.corpus.n_documents
        return _Chain(mh_init(prep.model, prep.corpus, J, gen), np.zeros((K, J)), np.zeros((I, K)), np.zeros((I, K)))

    def sample(self, prep: _Prep, o: Options, chain: _Chain, gen: torch.Generator) -> tuple[_Chain, float]:
        mh_step(chain.state, prep.corpus, prep.hyper, gen, mh_steps=o.mh_steps, order=prep.order)
        return chain, (mh_log_joint(prep.model, chain.state, prep.corpus, prep.hyper["gamma"]) if o.trace
                       else math.nan)

    def collect(self, prep: _Prep, o: Options, chain: _Chain) -> dict[str, Any]:
        state = chain.state
        conc = state.word_counts.T + prep.hyper["gamma"][None, :]  # (K, J)
        chain.rb_sum += conc / conc.sum(1, keepdims=True)
        chain.cc_sum += state.doc_counts
        chain.kept += 1
        theta = dirichlet_rows(conc, np.random.default_rng(_numba_seed(state.draw_generator)))
        kept: dict[str, np.ndarray] = {}
        if "topic_word" in prep.sites:
            kept["topic_word"] = theta
        if prep.store_doc:
            latent = sample_doc_latent(prep.model, torch.from_numpy(state.doc_counts.astype(np.float64)),
                                       prep.t_hyper, state.draw_generator)
            chain.doc_sum += latent.numpy()
            kept[prep.model.doc_site] = latent.numpy()
        if o.log_likelihood and "topic_word" not in prep.sites:  # Θ is not kept: the marginal of this draw now
            kept["_loglik"] = draw_marginal_loglik(prep.model, prep.data, theta, prep.t_hyper, o.seed)
        return kept

    def export(self, prep: _Prep, o: Options, outcome: SamplerRun) -> Export:
        draws = dict(outcome.draws)
        loglik = draws.pop("_loglik", None)
        chains: list[_Chain] = outcome.final_states
        proposals = np.stack([ch.state.proposals for ch in chains]).astype(np.float64)
        counts = prep.data.counts
        return Export(
            dims=prep.dims,
            coords=prep.coords,
            draws=draws,
            # each chain's running means, in its own labels until after_align permutes and averages them
            extras={"kept_documents": counts.kept_documents, "doc_lengths": counts.doc_lengths,
                    **_chain_means(prep, chains)},
            log_likelihood=loglik,
            diagnostics={
                "num_draws": outcome.n_draws,
                "num_warmup": o.num_warmup,
                "thin": o.thin,
                "mh_steps": o.mh_steps,
                "sweep": f"{prep.order}-major",
                "acceptance": {"word": (proposals[:, 1] / np.maximum(proposals[:, 0], 1)).tolist(),
                               "document": (proposals[:, 3] / np.maximum(proposals[:, 2], 1)).tolist()},
                **({"chain_method": outcome.chain_method} if outcome.chain_method != "sequential" else {}),
                "observation_dim": "document",
                "stored_sites": list(prep.sites),
            },
            sample_stats={"lp": outcome.trace[:, o.num_warmup:][:, o.thin - 1 :: o.thin][:, : outcome.n_draws]},
            relabel=("topic_word", "component") if o.align else None,
        )

    def finalize(self, post: Any, prep: _Prep, o: Options, outcome: Any) -> None:
        """The pointwise log-likelihood log p(w_(i) | Θ) of every kept Θ draw, m integrated out
        (:mod:`latentfs.inference.dca.loo`), computed on first use in each chain's own labels."""
        if o.log_likelihood and "topic_word" in prep.sites:
            n_chains = len(outcome.final_states)
            constants = count_constants(prep.model, prep.data)
            post.log_likelihood = lazy_marginal_loglik(post, prep.data.counts.csr, constants, [prep.model] * n_chains,
                                                       [prep.t_hyper] * n_chains, o.seed)

    def after_align(self, post: Any, prep: _Prep, o: Options, outcome: Any) -> None:
        """Each chain's running means permuted by the chain's modal relabelling (``post.alignment``), then
        averaged over chains; left per chain when the draws were not relabelled (``align=False``, or no
        ``topic_word`` draws) and there are several chains (their components carry different labels)."""
        means = _chain_mean_axes(prep)
        if post.alignment is not None:
            modes = [np.asarray(p) for p in post.alignment["permutations"]]
            for name, axis in means.items():
                post.extras[name] = apply_permutations(post.extras[name][:, None], modes, axis)[:, 0]
            post.alignment["chain_extras"] = sorted(means)
            switched = max(post.alignment["switch_share"])
            if o.warn and switched > _SWITCH_TOLERANCE:  # Posterior.align's warning for chain-level outputs
                from latentfs.core.convergence_warning import ConvergenceWarning  # imports scikit-learn

                warnings.warn(
                    f"labels switched within a chain ({switched:.0%} of one chain's draws are in another "
                    f"labelling); the chain-level outputs {sorted(means)} mix components. Store the per-draw sites "
                    "instead (store=...), or run a longer warm-up.",
                    ConvergenceWarning, stacklevel=2)
        if post.alignment is not None or len(outcome.final_states) == 1:
            for name in means:
                post.extras[name] = post.extras[name].mean(0)


fit_mh = register_spec(MetropolisHastings(), DirichletDCA)
