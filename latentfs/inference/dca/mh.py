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

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.count_draws import assignment_dtype
from latentfs.core.data import DataError
from latentfs.core.driver import SamplerRun
from latentfs.core.memory import check_draw_memory
from latentfs.core.options import check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options, shared
from latentfs.core.random import dirichlet_rows
from latentfs.core.registry import register_spec
from latentfs.inference.dca.collapsed_state import (
    _numba_seed,
)
from latentfs.inference.dca.common import check_store, dims_and_coords, prepare, resolve_model
from latentfs.inference.dca.gibbs import average_chain_outputs, keep_count_state, sample_doc_latent, wrap_count_states
from latentfs.inference.dca.loo import count_constants, draw_marginal_loglik, lazy_marginal_loglik
from latentfs.inference.dca.mh_state import (  # noqa: F401 - re-exported: the sampler's state lives there
    BYTES_PER_TOKEN,
    MH_STEPS,
    MHCorpus,
    MHState,
    check_mh_invariants,
    mh_hyper,
    mh_init,
    mh_log_joint,
    mh_step,
    sweep_order,
)
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

# Defaults of fit_mh: the chain lengths of collapsed_gibbs (the same vocabulary and defaults, not measured for mh
# separately); MH cycles per token (MH_STEPS, in mh_state) by benchmarks/dca_mh.py, section 3 (fit_mh's docstring).
NUM_WARMUP = 100
NUM_SAMPLES = 50

#: Visiting orders of a sweep's halves (:func:`mh_step`); "auto" picks one by :func:`sweep_order`.
ORDERS = ("auto", "document", "word")

#: Tokens × ``mh_steps`` from which the default ``chain_method="auto"`` runs the chains in threads (the sweep
#: kernel releases the GIL); below it the Python work around a sweep is a large share of it.
CHAIN_THREADS_WORK = 400_000


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

    Parameters
    ----------
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
    (Θ ~ Dir(γ + N) each kept sweep, kept as the sweep's count state and drawn on demand:
    :class:`~latentfs.core.count_draws.CountStateDraws`); ``trace`` the collapsed log joint per sweep, warm-up included;
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
            # (topic_word is kept as its count state: one small integer a token, and its draw's seed)
            shapes: dict[str, tuple[tuple[int, ...], Any]] = {
                "topic_word": ((corpus.n_tokens,), assignment_dtype(K)), "_topic_word_seed": ((), np.int64),
                model.doc_site: ((I, K), np.float64), "_loglik": ((I,), np.float64)}
            kept = [*sites, *(["_loglik"] if o.log_likelihood and "topic_word" not in sites else [])]
            kept += ["_topic_word_seed"] if "topic_word" in sites else []
            check_draw_memory({s: np.broadcast_to(np.zeros((), dt), shape) for s, (shape, dt) in shapes.items()
                               if s in kept},
                              o.num_chains, o.num_samples, o.memory_budget, self.describe(type(model).__name__))
        hyper = mh_hyper(model, J)
        order = sweep_order(I, J) if o.order == "auto" else o.order
        dims, coords = dims_and_coords(model, dca_data)
        return _Prep(model, dca_data, corpus, hyper, {"alpha": torch.as_tensor(hyper["alpha"])}, sites, order,
                     dims, coords)

    def is_threadable(self, prep: _Prep, o: Options) -> bool:
        return prep.corpus.n_tokens * o.mh_steps >= CHAIN_THREADS_WORK  # threads pay on a large corpus only

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
        seed = _numba_seed(state.draw_generator)
        eager_ll = o.log_likelihood and "topic_word" not in prep.sites
        theta = dirichlet_rows(conc, np.random.default_rng(seed)) if eager_ll else None
        conc /= conc.sum(1, keepdims=True)  # E[Θ | counts], in place: one K × J array a sweep
        chain.rb_sum += conc
        chain.cc_sum += state.doc_counts
        chain.kept += 1
        kept: dict[str, np.ndarray] = {}
        if "topic_word" in prep.sites:  # Θ kept as this sweep's count state, drawn on demand from the same seed
            keep_count_state(kept, state.assignment, seed, prep.model.n_components)
        if prep.store_doc:
            latent = sample_doc_latent(prep.model, torch.from_numpy(state.doc_counts.astype(np.float64)),
                                       prep.t_hyper, state.draw_generator)
            chain.doc_sum += latent.numpy()
            kept[prep.model.doc_site] = latent.numpy()
        if theta is not None:  # Θ is not kept: the marginal of this draw now
            kept["_loglik"] = draw_marginal_loglik(prep.model, prep.data, theta, prep.t_hyper, o.seed)
        return kept

    def export(self, prep: _Prep, o: Options, outcome: SamplerRun) -> Export:
        draws = dict(outcome.draws)
        loglik = draws.pop("_loglik", None)
        chains: list[_Chain] = outcome.final_states
        prior = np.broadcast_to(prep.hyper["gamma"], (len(chains), prep.hyper["gamma"].size))
        wrap_count_states(draws, (prep.corpus.words, prior), prep.model.n_components)
        proposals = np.stack([ch.state.proposals for ch in chains]).astype(np.float64)
        counts = prep.data.counts
        means = _chain_means(prep, chains)
        for ch in chains:  # exported: the chains' states and sums are not kept beside the result while it is aligned
            ch.state = ch.rb_sum = ch.cc_sum = ch.doc_sum = None  # type: ignore[assignment]
        return Export(
            dims=prep.dims,
            coords=prep.coords,
            draws=draws,
            # each chain's running means, in its own labels until after_align permutes and averages them
            extras={"kept_documents": counts.kept_documents, "doc_lengths": counts.doc_lengths,
                    **means},
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
            sample_stats={"lp": outcome.kept_trace(o.num_warmup, o.thin)},
            relabel=("topic_word", "component") if o.align else None,
            chain_extras=_chain_mean_axes(prep),  # permuted by each chain's modal relabelling in the alignment
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
        """Each chain's running means, permuted by the chain's modal relabelling (``Export.chain_extras``), averaged
        over chains; left per chain when the draws were not relabelled (``align=False``, or no ``topic_word``
        draws) and there are several chains (their components carry different labels)."""
        average_chain_outputs(post, _chain_mean_axes(prep), len(outcome.final_states))


fit_mh = register_spec(MetropolisHastings(), DirichletDCA)
