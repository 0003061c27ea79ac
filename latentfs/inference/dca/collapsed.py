"""Collapsed (Rao-Blackwellised) Gibbs sampling for DCA: Buntine & Jakulin (2006), Section 7.3, Fig. 6.

Both the document latents (m_(i) or l_(i)) and Θ are integrated out; the chain runs over the component
assignment of every token. The collapsed posterior is eq. (20) for GaP and eq. (21) for DM, and one
token's full conditional is Table 4 (re-derived in the digest, §1.6.5), with every count *excluding* the
token being resampled:

    GaP: P(k | rest) ∝ (γ_j + N_jk) / (Σγ + N_k) · (c_k + α_k) / (1 + β_k)
    DM : P(k | rest) ∝ (γ_j + N_jk) / (Σγ + N_k) · (c_k + α_k)

(N_jk: tokens of word j in component k over the corpus; N_k = Σ_j N_jk; c_k: tokens of the current
document in component k.) The constant factor 1 / (1 + β_min) is divided out of the GaP weights, so with
a common β the GaP and DM weights are bitwise equal and the two chains coincide under one random stream
(the digest's remark after Table 4).

Two sweeps draw from exactly this conditional (variants chosen by :data:`SWEEPS`):

``"reference"``
    the plain sequential sweep: the K weights of every token, a cumulative sum, one uniform. O(K) per
    token; the reference the tests compare against.
``"sparse"`` (default)
    SparseLDA (Yao, Mimno & McCallum 2009): the weight splits into three buckets,
    γ_j α_k d_k  +  γ_j c_k d_k  +  N_jk (c_k + α_k) d_k  with d_k = s_k / (Σγ + N_k),
    whose totals are kept up to date in O(1) per count change; the last bucket is summed over the
    components that word j actually has (a list kept per word), the middle one over the components
    present in the document. The cost per token is O(#components of the word + #components of the
    document), not O(K). This is *not* an approximation: every token is drawn from the exact Table 4
    conditional (the bucket totals are recomputed at the start of every document so rounding cannot
    drift); only the order in which the unit interval is cut differs from ``"reference"``.

Speed (``benchmarks/dca_collapsed.py``, 1 thread, results in ``benchmarks/results/dca_collapsed.md``):
on a 270k-token DM corpus at K = 50 the sparse sweep took ~50 ns/token (tomotopy ~73, the ``lda``
package ~277, the reference sweep ~108) and reached a common held-out level 1.3× sooner than tomotopy
and 7× sooner than ``lda``. On a 2.2M-token, 60,000-word corpus it was 1.6× faster than tomotopy at
K = 200 but 0.8× at K = 20 and 50 (memory-bound: one cache miss per token to the word's segment).

Threads (``n_threads``, default 1). With ``n_threads=1`` every sweep is the exact sequential sweep above.
With ``n_threads = B > 1`` (sparse sweep, ungrouped model) the sweep is document-partitioned, as AD-LDA
(Newman, Asuncion, Smyth & Welling 2009, "Distributed algorithms for topic models", JMLR 10) and
tomotopy's partition scheme: the documents are cut into B contiguous blocks of about equal token counts;
each block is swept (numba ``prange``, one block per thread) against its *own copy* of the word–component
counts N_jk and N_k taken at the start of the sweep, updated only by its own tokens. The approximation is
exactly this: within a sweep, a token sees the other blocks' word–component counts as they were at the
start of the sweep (stale by up to one sweep of their moves); its document's counts c are exact (a
document lies in one block). At the end of the sweep the counts are merged exactly (start counts plus
every block's changes), so counts and assignments agree after every sweep, but the chain is no longer a
Gibbs sampler of eq. (21) with a guaranteed stationary distribution. On a planted corpus (tests) the
held-out log-likelihood differed from one thread's by ~0.001 nats/token. Each block seeds numba's
generator from the chain's torch generator, so a chain depends on (seed, n_threads) only, not on how
many cores run it.

The sweeps are compiled with numba (a runtime dependency of this engine only, imported on first use).
numba's ``np.random`` inside a jitted function uses numba's own generator state (one per thread),
separate from numpy's; every sweep re-seeds it with ``np.random.seed(s)`` *inside* the kernel, where
``s`` is drawn from the chain's torch generator, so a chain is a deterministic function of its seed,
whatever ran before. Only numba's own state is overwritten; numpy's and torch's global states are not
touched.

Output per kept sweep (the chapter prefers sampled quantities to count means): Θ rows
θ_{·,k} ~ Dirichlet(γ + N_{·k}), kept as the sweep's *count state* (every token's component, one byte a token
for K ≤ 256, and the seed of its draw) and drawn on demand (:class:`~latentfs.core.count_draws.CountStateDraws`:
the same values every time, and those a sampler keeping Θ would have kept), so the kept draws cost chains × draws
× tokens bytes, not × K × J × 8 (2 chains × 50 draws at K = 200 on a 60,000-word, 2.4M-token corpus: 0.24 GB,
not 9.6 GB); relabelling matches each draw's E[Θ | N], and ``result.mean("topic_word")`` is the
Rao-Blackwellised mean. A grouped model keeps its Θ draws. Only when asked (``store=``), the document site from
its count posterior, m ~ Dir(c + α) (DM) or l_k ~ Gamma(c_k + α_k, rate 1 + β_k) (GaP). Everything else is a
running sum or lazy:
``extras["topic_word_mean"]`` is the Rao-Blackwellised E[Θ | counts] = (γ_j + N_jk) / (Σγ + N_k) and
``extras["component_counts"]`` the mean c_(i), both averaged over the kept sweeps (per chain, aligned); the
pointwise log-likelihood log p(w_(i) | Θ) at every kept draw, with each document's latent integrated out (what
``az.loo`` assumes, :mod:`.loo`), is computed on first use from the kept Θ draws.

Layout: the compiled sweeps are in :mod:`.collapsed_kernels`; Table 4 in numpy, the collapsed log joint,
the corpus, the count state, initialisation and the sweep dispatch in :mod:`.collapsed_state`; this module
holds the engine, an :class:`~latentfs.core.pipeline.EngineSpec` (:class:`CollapsedGibbs`, also importable and
callable as ``fit_collapsed_gibbs``) run by the one pipeline, and re-exports the names of both. The pipeline owns
the chains (``chain_method``: threads under ``"auto"`` when :meth:`CollapsedGibbs.is_threadable` says a sweep is
long enough), the seed rule, ``memory_budget`` for the kept draws, the relabelling of the draws with each chain's
running means (``Export.chain_extras``) and the one R̂/ESS; the spec keeps the sweeps, hyperparameter learning,
the Rao-Blackwellised outputs and the lazy LOO log-likelihood (:mod:`.loo`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options, shared
from latentfs.core.random import dirichlet_rows
from latentfs.core.registry import register_spec
from latentfs.inference.dca import collapsed_state as _state
from latentfs.inference.dca.collapsed_kernels import (
    _count_lgamma,
    _dense_to_lists,
    _sparse_docs,
    _sweep_grouped,
    _sweep_reference,
    _sweep_sparse,
    _sweep_sparse_blocks,
)
from latentfs.inference.dca.collapsed_kernels import kernels as _kernels
from latentfs.inference.dca.collapsed_state import (  # noqa: F401  (re-exported: __all__ below names them)
    BYTES_PER_TOKEN,
    INITS,
    CollapsedCorpus,
    CollapsedState,
    _hyper,
    _init_random,
    _init_sequential,
    _numba_seed,
    _run_sweep,
    check_invariants,
    check_token_budget,
    collapsed_init,
    collapsed_log_joint,
    collapsed_step,
    document_blocks,
    table4_conditional,
    table4_scale,
)
from latentfs.inference.dca.common import (
    DCAModel,
    check_store,
    model_groups,
    prepare,
    resolve_model,
)
from latentfs.inference.dca.gibbs import (
    DRAW_OPTIONS,
    average_chain_outputs,
    chain_export,
    keep_count_state,
    lazy_pointwise_loglik,
    sample_doc_latent,
    theta_sample,
)
from latentfs.inference.dca.hyper import (  # noqa: F401 - re-exported: they lived here
    _digamma_diff,
    minka_alpha_hist,
    minka_symmetric_gamma,
)
from latentfs.inference.dca.loo import draw_marginal_loglik
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

# the state's public names (this module re-exports them) and the engine's own
__all__ = sorted([*_state.__all__, "SWEEPS", "CollapsedGibbs", "fit_collapsed_gibbs", "minka_symmetric_gamma"])

# Private names the tests and benchmarks reach through this module.
_PRIVATE = (_count_lgamma, _dense_to_lists, _sparse_docs, _sweep_grouped, _sweep_reference, _sweep_sparse,
            _sweep_sparse_blocks, _kernels, _hyper, _init_random, _init_sequential, _numba_seed, _run_sweep)

SWEEPS = ("reference", "sparse")

# Defaults of CollapsedGibbs, chosen by measurement (its docstring, "Defaults").
NUM_WARMUP = 100
NUM_SAMPLES = 50


# ----------------------------------------------------------------------------- driver
#: Tokens × components from which the default ``chain_method="auto"`` runs the chains in threads (the sweep
#: kernels release the GIL). Below it a sweep takes a few milliseconds and the Python work around the sweeps,
#: which does not run in parallel, is a large share of a fit.
CHAIN_THREADS_WORK = 2_000_000

@dataclass
class _Chain:
    """One chain of :class:`CollapsedGibbs`: the sampler state and what the chain accumulates (its
    hyperparameters and the model at them, their per-sweep trace, and the running sums over kept sweeps of
    E[Θ | counts], of c_(i) and of the document site). It all travels with the chain, so chains can run in
    other processes."""

    state: CollapsedState
    hyper: dict[str, Any]
    model: DCAModel
    hyper_trace: dict[str, list[Any]]
    rb_sum: np.ndarray
    cc_sum: np.ndarray
    doc_sum: np.ndarray


def _check_sweep(name: str, value: Any) -> str:
    if value not in SWEEPS:
        raise DataError(f"sweep must be one of {list(SWEEPS)}; got {value!r}. Use 'sparse' for speed.")
    return str(value)


def _check_init(name: str, value: Any) -> str:
    if value not in INITS:
        raise DataError(f"init must be one of {sorted(INITS)}; got {value!r}. Use 'random' (the default).")
    return str(value)


def _check_n_threads(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DataError(f"n_threads must be an integer >= 1; got {value!r}. Use 1 (exact) or 2 (two cores).")
    return int(value)


@dataclass(frozen=True)
class _Prep:
    """What every chain of one fit shares: the resolved model, the corpus, the starting hyperparameters and what
    the options decided."""

    model: DCAModel
    data: Any
    corpus: CollapsedCorpus
    hyper0: dict[str, Any]
    learning: tuple[str, ...]
    sites: tuple[str, ...]
    doc_site: str
    groups: Any
    lazy_ll: bool

    def t_hyper(self, h: dict[str, Any]) -> dict[str, torch.Tensor]:
        out = {"alpha": torch.as_tensor(h["alpha"])}
        if isinstance(self.model, GammaPoissonDCA):
            out["beta"] = torch.as_tensor(np.asarray(self.model.beta, dtype=np.float64))
        return out


class CollapsedGibbs(EngineSpec):
    """Sample a DCA posterior by collapsed Gibbs (``latentfs.fit(model, X, method="collapsed_gibbs", ...)``).

    Parameters
    ----------
    num_samples, num_warmup, num_chains, thin : chain lengths, in sweeps.
        Defaults (2 chains, 100 warm-up + 50 kept sweeps each, α and γ learned during warm-up) were chosen
        by measurement on the benchmark's sim50 corpus (1,800 documents, 270k tokens, 5,000 words, K = 50,
        ``benchmarks/dca_collapsed.py``): one chain started from DirichletDCA(50)'s α = 1/K, γ = 0.5 and
        learning both reached a held-out per-token log-likelihood (document completion of its current counts)
        of −6.879, −6.756, −6.707, −6.706, −6.706, −6.700 after 25, 50, 100, 150, 200, 300 sweeps (α → 0.10,
        γ → 0.011, the planted values being 0.1 and 0.01), so held-out stops improving after ~100 sweeps; the
        whole default fit ended at −6.706, against −6.95 to −7.01 for the previous defaults (200 + 100
        sweeps, γ = 0.5 fixed). Two chains are the fewest that give R̂ (``diagnostics["convergence"]``).
    seed : int or torch.Generator; each chain gets an independent generator derived from it (the pipeline's seed
        rule), which also seeds numba's generator before every sweep (module docstring).
    sweep : ``"sparse"`` (SparseLDA buckets, default, fastest) or ``"reference"`` (plain O(K) loop);
        both draw every token from the exact Table 4 conditional. A grouped DirichletDCA (``groups=``)
        always uses its own O(K) sweep, Table 4 with the word factor normalised within the word's group
        (recorded in ``diagnostics["sweep"]``).
    init : ``"random"`` (default: uniform over components) or ``"sequential"`` (each token drawn from
        Table 4 given those before it; a greedy start that mixes worse); see :func:`collapsed_init`.
    trace : record the collapsed log joint (eqs. 20/21, sequence form) after every sweep (one pass over the
        non-zero counts by table look-up; ``False`` records NaN).
    store : sites to keep draws of: ``("topic_word",)`` by default; ``("topic_word", "doc_topic")`` keeps
        the document site's draws too (I·K floats per kept sweep). Its posterior mean is always in
        ``extras``.
    align : relabel every draw (within and across chains, by the pipeline on ``topic_word``) and permute each
        chain's running means and learned α by its chain's relabelling before the chains are averaged;
        ``align=False`` keeps chain-level outputs per chain (leading chain axis).
    log_likelihood : make log p(w_(i) | Θ) per kept draw and document, the document's latent integrated out
        (:mod:`latentfs.inference.dca.loo`), available as ``post.log_likelihood`` and the ArviZ
        ``log_likelihood`` group (computed on first use; ``False``: none).
    learn_alpha : bool or None
        DirichletDCA only: Minka's fixed point for α on the sweep's counts c_(i) (:func:`minka_alpha_hist`)
        after every warm-up sweep (stochastic EM); each chain keeps the mean of its updates over the second
        half of warm-up, with the convergence gate and outputs of method ``"gibbs"``
        (:class:`latentfs.inference.dca.gibbs.DirectGibbs`). None (default): True for a DirichletDCA, False
        otherwise.
    learn_gamma : bool or None
        Ungrouped models with a symmetric γ: Minka's fixed point for γ on the sweep's word counts N
        (:func:`minka_symmetric_gamma`) after every warm-up sweep, on the same schedule as ``learn_alpha``
        (the learned value is in ``hyperparameters["gamma"]`` and ``extras["gamma_trace"]``). None (default):
        True for an ungrouped model with a scalar γ.

        So by default the model's α and γ are *starting values* and the kept draws come from the posterior
        at the learned values (empirical Bayes, as tomotopy's ``optim_interval`` for α and Mallet's
        ``--optimize-interval``); ``hyperparameters["learned"]`` lists what was learned. Pass
        ``learn_alpha=False, learn_gamma=False`` to sample under the model's prior exactly as given.
    warn : bool
        Warn (``ConvergenceWarning``) when the relabelled draws have not converged or learning had not
        settled.
    n_threads : int
        1 (default): the exact sequential sweep. ``n_threads > 1`` (sparse sweep, ungrouped model): the
        documents are cut into ``n_threads`` blocks of equal token counts, swept in parallel, each block
        against the word–component counts as they were at the start of the sweep plus its own changes
        (AD-LDA, Newman et al. 2009; module docstring): an approximation, not an exact Gibbs sampler. Draws
        are reproducible for a given ``seed`` and ``n_threads`` (whatever the number of cores).
        Two cores are also used, exactly, by running the chains side by side: with ``n_threads=1``, the
        default ``chain_method="auto"`` runs the chains in threads when tokens × K ≥
        :data:`CHAIN_THREADS_WORK` and ``torch.get_num_threads()`` ≥ 2 (the draws are those of the chains run
        one after another; ``diagnostics["chain_method"]`` says how they ran when not one after another).
    memory_budget : float, optional
        Bytes allowed for the token arrays and for the kept draws (default: half the memory available);
        over it the fit is refused with a ``DataError`` naming the remedy before anything large is allocated.

    Returns a Posterior with draws of ``topic_word`` (Θ ~ Dir(γ + N) each kept sweep, kept as count states and
    drawn on demand; one Dirichlet per group when grouped, kept as values); ``trace`` is the collapsed log joint
    per sweep, warm-up included; ``extras`` (relabelled per chain, then averaged over chains): ``topic_word_mean``
    (K, J), the Rao-Blackwellised E[Θ | counts]
    averaged over the kept sweeps, ``component_counts`` (I, K) the mean c_(i), ``doc_topic_mean`` /
    ``doc_scores_mean`` (I, K) the mean of the document site: of its stored draws when it is stored, else
    the Rao-Blackwellised E[latent | c] averaged over the kept sweeps ((c + α)/(L + Σα) for DM,
    (c + α)/(1 + β) for GaP). The pipeline owns the chains (``chain_method``), the seed rule
    (``diagnostics["seed"]``), the relabelling and the one R̂/ESS (``diagnostics["convergence"]``).

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2, alpha=0.5)
    >>> X = model.simulate(n_documents=20, n_features=10, doc_length=30, seed=0)["counts"]
    >>> post = latentfs.fit(model, X, method="collapsed_gibbs", seed=0, num_warmup=20, num_samples=5, warn=False)
    >>> post.samples("topic_word").shape
    (2, 5, 2, 10)
    >>> post.extras["component_counts"].shape
    (20, 2)
    """

    method = "collapsed_gibbs"
    kind = "sampler"
    desc = "collapsed Gibbs"
    options = {
        **chain_options(num_chains=2, num_warmup=NUM_WARMUP, num_samples=NUM_SAMPLES),
        "sweep": Option("sparse", _check_sweep, "'sparse' or 'reference'",
                        "the sweep: SparseLDA buckets (fastest) or the plain O(K) loop; the same conditional"),
        "init": Option("random", _check_init, "'random' or 'sequential'", "the start of every token's component"),
        "trace": Option(True, None, "bool", "record the collapsed log joint after every sweep (False: NaN)"),
        "empty_documents": shared("empty_documents"),
        **DRAW_OPTIONS,
        "learn_alpha": Option(None, None, "bool or None",
                              "learn α (DirichletDCA) during warm-up; None: True for a DirichletDCA"),
        "learn_gamma": Option(None, None, "bool or None",
                              "learn a symmetric γ during warm-up; None: True for an ungrouped model with scalar γ"),
        "n_threads": Option(1, _check_n_threads, "int ≥ 1",
                            "1: the exact sweep; more: document blocks swept in parallel (AD-LDA, approximate)"),
        "memory_budget": Option(None, None, "float or None",
                                "bytes allowed for the token arrays and the kept draws (None: half the memory)"),
    }

    def prepare(self, model: Any, data: Any, o: Options) -> _Prep:
        from latentfs.inference.dca.hyper import check_learn

        n_threads = o.n_threads
        grouped = getattr(model, "groups", None) is not None
        if n_threads > 1 and (o.sweep != "sparse" or grouped):
            raise DataError(
                f"n_threads={n_threads} needs sweep='sparse' and an ungrouped model; got sweep={o.sweep!r}"
                f"{' and a grouped model' if grouped else ''}. Use n_threads=1."
            )
        warm = o.num_warmup > 0
        learn_alpha, learn_gamma = o.learn_alpha, o.learn_gamma
        if learn_alpha is None:
            learn_alpha = warm and isinstance(model, DirichletDCA)
        if learn_gamma is None:
            learn_gamma = warm and not grouped and np.asarray(model.gamma).ndim == 0
        if (learn_alpha is True or learn_gamma is True) and not warm:
            raise DataError(
                f"learning hyperparameters happens during warm-up; got num_warmup={o.num_warmup!r}. Give "
                "num_warmup ≥ 1 or pass learn_alpha=False, learn_gamma=False."
            )
        learn = check_learn(model, learn_alpha=learn_alpha)
        if learn and not isinstance(model, DirichletDCA):
            raise DataError(
                f"learn_alpha=True with method='collapsed_gibbs' needs a DirichletDCA; got {type(model).__name__}. "
                "Use method='gibbs' to learn a GammaPoissonDCA's α."
            )
        if not isinstance(learn_gamma, (bool, np.bool_)):
            raise DataError(f"learn_gamma must be True or False; got {learn_gamma!r}.")
        if learn_gamma and (grouped or np.asarray(model.gamma).ndim > 0):
            raise DataError(
                "learn_gamma=True learns one symmetric γ; got a grouped model or a vector γ. Pass a scalar gamma "
                "and no groups, or drop learn_gamma."
            )
        learning = learn + (("gamma",) if learn_gamma else ())
        dca = prepare(data, dtype=torch.float64, empty_documents=o.empty_documents)
        model = resolve_model(model, dca)
        corpus = CollapsedCorpus.from_data(dca, memory_budget=o.memory_budget)
        sites = tuple(check_store(model, o.store))
        _kernels()  # numba imported and the kernels bound here, before chains may start in threads
        return _Prep(model, dca, corpus, _hyper(model, dca.n_features), learning, sites, model.doc_site,
                     model_groups(model, dca), o.log_likelihood and "topic_word" in sites)

    def hyperparameters(self, model: Any, prep: _Prep, o: Options) -> dict[str, Any]:
        return dict(prep.model.hyperparameters())

    def is_threadable(self, prep: _Prep, o: Options) -> bool:
        """Chains in threads under ``chain_method="auto"`` when the sweeps are long enough (tokens × K ≥
        :data:`CHAIN_THREADS_WORK`) and one chain's sweep is sequential."""
        return o.n_threads == 1 and float(prep.corpus.lengths.sum()) * prep.model.n_components >= CHAIN_THREADS_WORK

    def init(self, prep: _Prep, o: Options, gen: torch.Generator) -> _Chain:
        h0 = prep.hyper0
        J, K, I = prep.data.n_features, prep.model.n_components, prep.corpus.n_documents
        h = {**h0, "alpha": h0["alpha"].copy(), "gamma": h0["gamma"].copy()}
        return _Chain(collapsed_init(prep.model, prep.corpus, J, gen, sweep=o.sweep, init=o.init), h, prep.model,
                      {name: [] for name in prep.learning}, np.zeros((K, J)), np.zeros((I, K)), np.zeros((I, K)))

    def _learn(self, prep: _Prep, o: Options, chain: _Chain) -> None:
        from latentfs.inference.dca.hyper import warmup_average, with_hyperparameters

        learning, J = prep.learning, prep.data.n_features
        h, traces, state = chain.hyper, chain.hyper_trace, chain.state
        done = len(traces[learning[0]])
        if done < o.num_warmup:
            if "alpha" in learning:
                h["alpha"] = np.ascontiguousarray(minka_alpha_hist(h["alpha"], state.doc_counts, prep.corpus.lengths))
            if "gamma" in learning:
                g = minka_symmetric_gamma(float(h["gamma"][0]), state.word_counts)
                h["gamma"] = np.full(J, g)
        elif done == o.num_warmup:  # end of warm-up: keep the average of the settled updates
            if "alpha" in learning:
                h["alpha"] = np.ascontiguousarray(warmup_average(np.stack(traces["alpha"])))
            if "gamma" in learning:
                h["gamma"] = np.full(J, float(warmup_average(np.asarray(traces["gamma"]))))
        h["gamma_sum"] = float(h["gamma"].sum())
        if done <= o.num_warmup:
            chain.model = with_hyperparameters(
                prep.model, **{name: (h[name] if name == "alpha" else h["gamma"][0]) for name in learning})
        for name in learning:
            traces[name].append(h[name].copy() if name == "alpha" else float(h["gamma"][0]))

    def sample(self, prep: _Prep, o: Options, chain: _Chain, gen: torch.Generator) -> tuple[_Chain, float]:
        h, corpus = chain.hyper, prep.corpus
        chain.state = state = collapsed_step(chain.state, corpus, h, gen, sweep=o.sweep, n_threads=o.n_threads)
        if prep.learning:
            self._learn(prep, o, chain)
        lp = (collapsed_log_joint(chain.model, state.doc_counts, state.word_counts, corpus.lengths, h["gamma"],
                                  state=state, word_totals=corpus.word_totals) if o.trace else math.nan)
        return chain, lp

    def collect(self, prep: _Prep, o: Options, chain: _Chain) -> dict[str, Any]:
        h, state, groups = chain.hyper, chain.state, prep.groups
        conc = state.word_counts.T + h["gamma"][None, :]  # (K, J), float64
        kept: dict[str, np.ndarray] = {}
        eager_ll = o.log_likelihood and not prep.lazy_ll
        if groups is None:
            seed = _numba_seed(state.draw_generator)
            # Θ is kept as this sweep's count state and drawn on demand from the same seed (module docstring)
            theta = dirichlet_rows(conc, np.random.default_rng(seed)) if eager_ll else None
            conc /= conc.sum(1, keepdims=True)  # E[Θ | counts], in place: one K × J array a sweep, not three
            chain.rb_sum += conc
            if "topic_word" in prep.sites:
                keep_count_state(kept, state.assignment, seed, prep.model.n_components)
        else:
            conc_t = torch.from_numpy(conc)
            totals = torch.zeros_like(conc_t).index_add_(1, groups, conc_t)[:, groups]
            chain.rb_sum += (conc_t / totals).numpy()
            theta = theta_sample(conc_t, groups, state.draw_generator).numpy()
            if "topic_word" in prep.sites:
                kept["topic_word"] = theta
        chain.cc_sum += state.doc_counts
        if prep.doc_site in prep.sites:
            latent = sample_doc_latent(chain.model, torch.from_numpy(state.doc_counts.astype(np.float64)),
                                       prep.t_hyper(h), state.draw_generator)
            chain.doc_sum += latent.numpy()
            kept[prep.doc_site] = latent.numpy()
        if eager_ll and theta is not None:  # Θ is not kept: the marginal of this draw now (chain's labels)
            kept["_loglik"] = draw_marginal_loglik(chain.model, prep.data, theta, prep.t_hyper(h), o.seed)
        return kept

    def _chain_outputs(self, prep: _Prep) -> tuple[dict[str, int], dict[str, int]]:
        """The chain-level extras (name -> component axis within one chain's array): averaged over chains, and
        kept per chain."""
        averaged = {"topic_word_mean": 0, "component_counts": 1, f"{prep.doc_site}_mean": 1}
        if "alpha" in prep.learning:
            return {**averaged, "alpha": 0}, {"alpha_trace": 1}
        return averaged, {}

    def export(self, prep: _Prep, o: Options, outcome: Any) -> Export:
        from latentfs.inference.dca.hyper import check_warmup_learning

        model, data, corpus, learning = prep.model, prep.data, prep.corpus, prep.learning
        averaged, per_chain = self._chain_outputs(prep)
        chains: list[_Chain] = outcome.final_states
        n_kept = max(outcome.n_draws, 1)
        mean_counts = np.stack([ch.cc_sum for ch in chains]) / n_kept
        if prep.doc_site in prep.sites:
            doc_mean = np.stack([ch.doc_sum for ch in chains]) / n_kept
        else:  # Rao-Blackwellised: E[latent | c] is linear in c, so its mean over sweeps is E[latent | mean c]
            alphas = np.stack([ch.hyper["alpha"] for ch in chains])[:, None, :]
            if isinstance(model, DirichletDCA):
                doc_mean = (mean_counts + alphas) / (corpus.lengths[None, :, None] + alphas.sum(-1, keepdims=True))
            else:
                doc_mean = (mean_counts + alphas) / (1.0 + np.asarray(model.beta, dtype=np.float64))
        extras: dict[str, Any] = {
            "kept_documents": data.counts.kept_documents,
            "doc_lengths": data.counts.doc_lengths,
            "topic_word_mean": np.stack([ch.rb_sum for ch in chains]) / n_kept,
            "component_counts": mean_counts,
            f"{prep.doc_site}_mean": doc_mean,
        }
        drifts: dict[str, float] = {}
        if learning:
            steps = min(len(ch.hyper_trace[learning[0]]) for ch in chains)
            traces = {name: np.array([ch.hyper_trace[name][:steps] for ch in chains]) for name in learning}
            if "alpha" in learning:
                extras["alpha"] = np.stack([ch.hyper["alpha"] for ch in chains])
                extras["alpha_trace"] = traces["alpha"]
            drifts = check_warmup_learning(traces, o.num_warmup, warn=o.warn,
                                           method=f"{type(model).__name__} collapsed Gibbs")
            if "gamma" in learning:
                extras["gamma_trace"] = traces["gamma"]
        count_states = (corpus.words, np.stack([ch.hyper["gamma"] for ch in chains])) if prep.groups is None else None
        for ch in chains:  # exported: the chains' states and sums are not kept beside the result while it is aligned
            ch.state = ch.rb_sum = ch.cc_sum = ch.doc_sum = None  # type: ignore[assignment]
        return chain_export(prep, o, outcome, extras=extras, chain_extras={**averaged, **per_chain},
                            count_states=count_states, diagnostics={
            "sweep": "grouped" if prep.groups is not None else o.sweep,
            "init": o.init,
            "n_threads": o.n_threads,
            **({"chain_method": outcome.chain_method} if outcome.chain_method != "sequential" else {}),
            "observation_dim": "document",
            "stored_sites": list(prep.sites),
            **({"hyper_drift": drifts} if learning else {}),
        })

    def finalize(self, post: Any, prep: _Prep, o: Options, outcome: Any) -> None:
        """The pointwise log-likelihood of every kept Θ draw, computed on first use (each in its chain's labels,
        at its chain's hyperparameters)."""
        chains = outcome.final_states
        lazy_pointwise_loglik(post, prep, o, [ch.model for ch in chains], [prep.t_hyper(ch.hyper) for ch in chains])

    def after_align(self, post: Any, prep: _Prep, o: Options, outcome: Any) -> None:
        """Each chain's running means and learned α, permuted by the chain's modal relabelling
        (``Export.chain_extras``), averaged over chains (per chain when not relabelled, :func:`~latentfs.inference.
        dca.gibbs.average_chain_outputs`); the learned values become the result's hyperparameters."""
        from latentfs.inference.dca.hyper import with_hyperparameters

        averaged = average_chain_outputs(post, self._chain_outputs(prep)[0], len(outcome.final_states))
        if prep.learning:
            values: dict[str, Any] = {}
            if "alpha" in prep.learning:
                values["alpha"] = averaged.get("alpha", post.extras["alpha"][0])
                post.extras.pop("alpha", None)
            if "gamma" in prep.learning:
                values["gamma"] = float(np.mean([ch.hyper["gamma"][0] for ch in outcome.final_states]))
            post.hyperparameters = {**with_hyperparameters(prep.model, **values).hyperparameters(),
                                    "learned": list(prep.learning)}


fit_collapsed_gibbs = register_spec(CollapsedGibbs(), DirichletDCA, GammaPoissonDCA)
