"""Direct (uncollapsed) Gibbs sampling for DCA: Buntine & Jakulin (2006), Section 7.2, Fig. 5 and Table 3.

One sweep, vectorised over all documents and non-zeros:

1. each document's latent given its component counts c_(i) (Table 3): m ~ Dirichlet(c + α) (DM) or
   l_k ~ Gamma(c_k + α_k, 1 + β_k) (GaP);
2. each word's split over components, v_{j,·,(i)} ~ Multinomial(w_{j,(i)}, ∝ latent_k θ_{jk}), by
   inverse-CDF sampling of every token (FIELD_NOTES: ~10× faster than ``torch.multinomial``);
3. each component's word distribution θ_{·,k} ~ Dirichlet(γ + Σ_i v_{·,k,(i)}) (the chapter's Fig. 5
   says "rows"; columns of its J × K Θ are meant, rows of our K × J ``topic_word``).

Conditional GaP (Table 3, CGP row): a component with c_k = 0 gets l_k = 0 with probability
ρ_k(1+β_k)^{α_k} / [(1−ρ_k)β_k^{α_k} + ρ_k(1+β_k)^{α_k}], otherwise l_k ~ Gamma(α_k, 1+β_k); c_k > 0 is
the GaP case. The zero decision reuses the uniform of the log-space gamma draw (split at the zero
probability and rescaled, which leaves the decision and the rescaled uniform independent), so the
random stream is the GaP sampler's and ρ = 0 reproduces the GaP chain draw for draw.

Grouped DirichletDCA (Section 4.4): the document and token steps are unchanged (a token of word j is
drawn ∝ m_k θ_jk, θ normalised within j's group); each θ_{·,k} is drawn as one Dirichlet per group.

Hyperparameters can be learned during warm-up (``learn_alpha``, ``learn_beta``, ``learn_rho``; a
stochastic-EM step after every warm-up sweep, from the current counts and scores, see
:mod:`latentfs.inference.dca.hyper`); each chain then keeps the mean of its updates over the second half
of its warm-up, fixed while draws are kept, so the kept draws come from the posterior at the learned
values; a ``ConvergenceWarning`` says when the updates had not settled (:class:`DirectGibbs`).

The engine is an :class:`~latentfs.core.pipeline.EngineSpec` (:class:`DirectGibbs`, also importable as
``fit_gibbs``) run by the one pipeline, which owns the chains (``chain_method``), the seed rule, the
relabelling of the draws and their one R̂/ESS. Chain-level outputs (running means over kept draws, learned
component-indexed hyperparameters) are permuted by their chain's modal relabelling in that alignment
(``Export.chain_extras``) and then averaged over chains (:func:`average_chain_outputs`, ``after_align``).

Gamma and Dirichlet draws are made in log space (Gamma(a) = Gamma(a + 1) · U^{1/a}) so that small
concentrations such as γ = 0.01 do not underflow in float32 (FIELD_NOTES).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options, shared
from latentfs.core.registry import register_spec
from latentfs.core.results import Posterior
from latentfs.inference.dca.common import (
    DCAData,
    DCAModel,
    cgp_zero_probability,
    check_store,
    dims_and_coords,
    prepare,
    resolve_model,
)
from latentfs.inference.dca.gibbs_state import (  # noqa: F401 - re-exported: the sampler's state lives there
    VSTEPS,
    GibbsState,
    TokenIndex,
    _compiled_vstep,
    _hyper,
    _sample_dm,
    _sample_gap,
    _use_compiled,
    check_count_invariants,
    count_assignments,
    gibbs_init,
    gibbs_step,
    gibbs_step_with_loglik,
    sample_assignments,
    sample_cgp_scores,
    sample_doc_latent,
    theta_sample,
    token_index,
)
from latentfs.inference.dca.loo import NO_LOO_REASON, count_constants, draw_marginal_loglik, lazy_marginal_loglik
from latentfs.models.dca import ConditionalGammaPoissonDCA, DirichletDCA, GammaPoissonDCA

__all__ = [
    "DirectGibbs",
    "GibbsState",
    "gibbs_init",
    "gibbs_step",
    "fit_gibbs",
    "check_count_invariants",
    "sample_cgp_scores",
    "theta_sample",
]


@dataclass
class _Chain:
    """One chain of :class:`DirectGibbs`: the sampler state and everything the chain accumulates (its learned
    hyperparameters, their per-sweep trace, the running sums of c_(i) and of the document site over kept
    draws). It all travels with the chain, so chains can run in other processes."""

    state: GibbsState
    hyper: dict[str, torch.Tensor]
    hyper_trace: dict[str, list[np.ndarray]]
    counts_sum: torch.Tensor
    doc_sum: torch.Tensor


def _check_vstep(name: str, value: Any) -> str:
    if value not in VSTEPS:
        raise DataError(f"vstep must be one of {VSTEPS}; got {value!r}.")
    return str(value)


def _check_log_likelihood(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise DataError(f"log_likelihood must be True or False; got {value!r}.")
    return bool(value)


#: The draw options of the family's Gibbs samplers (this direct one and the collapsed one): the sites kept, the
#: relabelling, the pointwise log-likelihood.
DRAW_OPTIONS: dict[str, Option] = {
    "store": Option(None, None, "tuple of str or None",
                    "sites whose draws are kept: ('topic_word',) by default, add the document site for its draws"),
    "align": Option(True, None, "bool", "relabel the draws and each chain's running means before chains are averaged"),
    "log_likelihood": Option(True, _check_log_likelihood, "bool",
                             "the pointwise log p(w_(i) | Θ), latents integrated out, computed on first use"),
}


def chain_export(prep: Any, o: Options, outcome: Any, *, extras: dict[str, Any], diagnostics: dict[str, Any],
                 chain_extras: dict[str, Any], count_states: tuple[np.ndarray, np.ndarray] | None = None) -> Export:
    """The result of one of the family's Gibbs samplers: the kept draws (the pointwise log-likelihood, when kept
    with them, taken out of them), ``lp`` per kept draw, the warm-up and thinning followed by the sampler's own
    ``diagnostics``, the draws relabelled by ``topic_word`` when ``o.align``, and each chain's running means
    (``chain_extras``, permuted by its chain's modal relabelling in the alignment). A collapsed sampler that kept
    ``topic_word`` as count states (:func:`keep_count_state`) gives ``count_states``: the tokens' words and each
    chain's γ (chain, J)."""
    draws = dict(outcome.draws)
    loglik = draws.pop("_loglik", None)
    wrap_count_states(draws, count_states, prep.model.n_components)
    dims, coords = dims_and_coords(prep.model, prep.data)
    return Export(
        dims=dims, coords=coords, draws=draws, extras=extras, log_likelihood=loglik,
        diagnostics={"num_warmup": o.num_warmup, "thin": o.thin, **diagnostics},
        sample_stats={"lp": outcome.kept_trace(o.num_warmup, o.thin)},
        relabel=("topic_word", "component") if o.align else None,
        chain_extras=chain_extras,
    )


def keep_count_state(kept: dict[str, Any], assignment: np.ndarray, seed: int, n_components: int) -> None:
    """Keep ``topic_word`` of one kept sweep as its count state: the tokens' components (the smallest type that
    holds K) and the seed its Θ ~ Dirichlet(γ + N) is drawn with on demand (:mod:`latentfs.core.count_draws`)."""
    from latentfs.core.count_draws import assignment_dtype

    kept["topic_word"] = assignment.astype(assignment_dtype(n_components))
    kept["_topic_word_seed"] = np.int64(seed)


def wrap_count_states(draws: dict[str, Any], count_states: tuple[np.ndarray, np.ndarray] | None,
                      n_components: int) -> None:
    """Make ``draws["topic_word"]`` a :class:`~latentfs.core.count_draws.CountStateDraws` when the sweeps kept count
    states (:func:`keep_count_state`); ``count_states`` is (the tokens' words, each chain's γ)."""
    from latentfs.core.count_draws import CountStateDraws

    seeds = draws.pop("_topic_word_seed", None)
    if seeds is None:
        return
    if count_states is None:  # assignments alone are not Θ: never hand them on as its draws
        raise RuntimeError("the sweeps kept topic_word as count states, but its words and γ were not given")
    words, prior = count_states
    draws["topic_word"] = CountStateDraws(words, draws["topic_word"], seeds, prior, n_components)


def lazy_pointwise_loglik(post: Any, prep: Any, o: Options, models: list[Any], hypers: list[Any]) -> None:
    """When the sampler keeps it (``prep.lazy_ll``), the pointwise log-likelihood of every kept Θ draw, computed on
    first use with chain c's model ``models[c]`` and hyperparameters ``hypers[c]``."""
    if prep.lazy_ll:
        data = prep.data
        post.log_likelihood = lazy_marginal_loglik(post, data.counts.csr, count_constants(prep.model, data), models,
                                                   hypers, o.seed)


def average_chain_outputs(post: Posterior, names: Any, n_chains: int) -> dict[str, np.ndarray]:
    """Average the chain-level extras ``names`` (arrays shaped (chain, ...), already in the relabelled labels:
    ``Export.chain_extras``) over chains, in ``post.extras``; returns the averages. Nothing is averaged when the
    draws were not relabelled and there are several chains: averaging components in different label orders
    would mix them."""
    out: dict[str, np.ndarray] = {}
    if post.alignment is not None or n_chains == 1:
        for name in names:
            out[name] = post.extras[name] = np.asarray(post.extras[name]).mean(0)
    return out


@dataclass(frozen=True)
class _Prep:
    """What every chain of one fit shares: the resolved model, the corpus and its tokens, the model's
    hyperparameters as tensors, and what the options decided."""

    model: DCAModel
    data: DCAData
    tokens: TokenIndex
    hyper: dict[str, torch.Tensor]
    learn: tuple[str, ...]
    sites: tuple[str, ...]
    doc_site: str
    cgp: bool
    lazy_ll: bool
    eager_ll: bool

    def chain_outputs(self) -> tuple[dict[str, int], dict[str, int]]:
        """The chain-level extras (name -> component axis within one chain's array): averaged over chains, and
        kept per chain."""
        averaged = {"component_counts": 1, f"{self.doc_site}_mean": 1, **{name: 0 for name in self.learn}}
        return averaged, {f"{name}_trace": 1 for name in self.learn}


class DirectGibbs(EngineSpec):
    """Sample a DCA posterior by direct Gibbs (``latentfs.fit(model, X, method="gibbs", ...)``; module docstring).

    Parameters
    ----------
    num_chains, num_warmup, num_samples, thin, seed, progress, warn : the chain lengths (2 chains, 200 warm-up and
        200 kept sweeps by default) and the shared options.
    dtype : torch.float64 (default) or torch.float32 (faster; sampling stays stable in log space).
    device : where the updates run; every random draw is made on the chain's generator on that device.
    store : sites to keep draws of: ``("topic_word",)`` by default; add the document site
        (``store=("topic_word", "doc_topic")``) to keep its draws too (I·K floats per kept sweep). The
        document site's posterior mean is always kept, as ``extras["doc_topic_mean"]`` (or
        ``"doc_scores_mean"``), shaped (I, K).
    align : relabel every draw (within and across chains, by the pipeline on ``topic_word`` jointly with every
        component-indexed global site) and permute each chain's running means and learned hyperparameters by
        its chain's relabelling before they are averaged over chains. ``align=False`` leaves labels alone and
        keeps every chain-level output per chain (leading chain axis), since averaging unmatched components
        would mix them.
    log_likelihood : make log p(w_(i) | Θ) per kept draw and document, the document's latent integrated out
        (:mod:`latentfs.inference.dca.loo`), available as ``post.log_likelihood`` and the ArviZ
        ``log_likelihood`` group (computed on first use). ConditionalGammaPoissonDCA has no estimator of it:
        none, and ``diagnostics["no_pointwise_log_likelihood"]`` says why.
    learn_alpha, learn_beta, learn_rho : bool
        Learn α (DM: Minka's fixed point from the counts c; GaP/CGP: the gamma-shape equation from the
        sampled scores), β (GaP/CGP, with α fixed) or ρ (CGP: the fraction of zero scores) by one
        stochastic-EM step after every warm-up sweep. Schedule: each chain learns from the model's values
        during its warm-up; the value it keeps while sampling is the mean of its updates over the second
        half of the warm-up (:func:`~latentfs.inference.dca.hyper.warmup_average`); a
        ``ConvergenceWarning`` says when the updates were still moving (the means of the last two
        warm-up quarters differ by more than 10%: raise ``num_warmup``). The kept draws are from the
        posterior at the kept values. ``hyperparameters`` holds the mean over chains of the kept values,
        after relabelling; ``extras["<name>_trace"]`` the value after every sweep, (chain, sweep, K),
        relabelled; ``diagnostics["hyper_drift"]`` the gate's figures.
    vstep : {"auto", "compiled", "torch"}
        How the word splits V are drawn: a compiled loop (numba, CPU; the default there) or vectorised torch
        (any device). The same conditional either way; the compiled loop is ~6× faster on CPU.

    Returns a Posterior with draws of the stored sites; ``extras["component_counts"]`` (I, K) the mean of c_(i)
    over the kept draws and chains, ``extras["<doc_site>_mean"]`` (I, K) the mean of the document site, and for
    ConditionalGammaPoissonDCA ``extras["doc_scores_mean"]`` is instead the Rao-Blackwellised corrected
    posterior mean E[l | c] (digest §1.5); all three are relabelled per chain before the chains are
    averaged. ``trace`` holds log p(w | latent, Θ) of every sweep at the values its V step used (the
    chapter's Fig. 5, step 1c: a training trace, not a held-out measure), warm-up included. The pipeline owns
    the chains (``chain_method``), the seed rule (``diagnostics["seed"]``), the relabelling and the one R̂/ESS
    (``diagnostics["convergence"]``).

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2, alpha=0.5)
    >>> X = model.simulate(n_documents=20, n_features=10, doc_length=30, seed=0)["counts"]
    >>> post = latentfs.fit(model, X, method="gibbs", num_warmup=20, num_samples=5, warn=False)
    >>> post.samples("topic_word").shape
    (2, 5, 2, 10)
    >>> post.extras["component_counts"].shape
    (20, 2)
    """

    method = "gibbs"
    kind = "sampler"
    desc = "Gibbs"
    options = {
        **chain_options(num_chains=2, num_warmup=200, num_samples=200),
        "dtype": shared("dtype"),
        "device": shared("device"),
        "empty_documents": shared("empty_documents"),
        **DRAW_OPTIONS,
        "learn_alpha": Option(False, None, "bool", "learn α by stochastic EM during warm-up"),
        "learn_beta": Option(False, None, "bool", "learn β (GaP, CGP) by stochastic EM during warm-up"),
        "learn_rho": Option(False, None, "bool", "learn ρ (CGP) by stochastic EM during warm-up"),
        "vstep": Option("auto", _check_vstep, "'auto', 'compiled' or 'torch'",
                        "how the word splits are drawn: compiled loop (CPU) or vectorised torch (any device)"),
    }

    def prepare(self, model: Any, data: Any, o: Options) -> _Prep:
        from latentfs.inference.dca.hyper import check_learn

        learn = check_learn(model, learn_alpha=o.learn_alpha, learn_beta=o.learn_beta, learn_rho=o.learn_rho)
        corpus = prepare(data, dtype=o.dtype, device=o.device, empty_documents=o.empty_documents)
        model = resolve_model(model, corpus)
        hyper = _hyper(model, corpus)
        tokens = token_index(corpus)
        sites = tuple(check_store(model, o.store))
        cgp = isinstance(model, ConditionalGammaPoissonDCA)
        # the pointwise log-likelihood with each document's latent integrated out (loo.py); CGP has none
        lazy_ll = o.log_likelihood and not cgp and "topic_word" in sites
        eager_ll = o.log_likelihood and not cgp and not lazy_ll
        return _Prep(model, corpus, tokens, hyper, learn, sites, model.doc_site, cgp, lazy_ll, eager_ll)

    def hyperparameters(self, model: Any, prep: _Prep, o: Options) -> dict[str, Any]:
        return dict(prep.model.hyperparameters())

    def init(self, prep: _Prep, o: Options, gen: torch.Generator) -> _Chain:
        data = prep.data
        zeros = torch.zeros(data.n_documents, prep.model.n_components, dtype=o.dtype, device=o.device)
        h = dict(prep.hyper)
        return _Chain(gibbs_init(prep.model, data, prep.tokens, h, gen), h, {name: [] for name in prep.learn}, zeros,
                      zeros.clone())

    def sample(self, prep: _Prep, o: Options, chain: _Chain, gen: torch.Generator) -> tuple[_Chain, float]:
        from latentfs.inference.dca.hyper import gibbs_hyper_update, warmup_average

        h, learn = chain.hyper, prep.learn
        chain.state, lp = gibbs_step_with_loglik(prep.model, prep.data, prep.tokens, chain.state, h, gen, o.vstep)
        if learn:
            trace = chain.hyper_trace
            done = len(trace[learn[0]])
            if done < o.num_warmup:
                h.update(gibbs_hyper_update(prep.model, chain.state, prep.data, h, learn))
            elif done == o.num_warmup:  # end of warm-up: keep the average of the settled updates
                kept = {name: torch.as_tensor(warmup_average(np.stack(trace[name])), dtype=o.dtype, device=o.device)
                        for name in learn}
                if prep.cgp:
                    kept["zero_prob"] = cgp_zero_probability(
                        kept.get("alpha", h["alpha"]), kept.get("beta", h["beta"]), kept.get("rho", h["rho"])
                    )
                h.update(kept)
            for name in learn:
                trace[name].append(h[name].cpu().numpy().copy())
        return chain, lp

    def collect(self, prep: _Prep, o: Options, chain: _Chain) -> dict[str, Any]:
        state = chain.state
        chain.counts_sum += state.doc_counts
        if prep.cgp:
            # E[l | c] (digest §1.5, corrected): (c+α)/(1+β) if c > 0, else π α/(1+β); averaged over draws
            h, c = chain.hyper, state.doc_counts
            scale = 1 + h["beta"]
            chain.doc_sum += torch.where(c > 0, (c + h["alpha"]) / scale, (1 - h["zero_prob"]) * h["alpha"] / scale)
        else:
            chain.doc_sum += state.doc_latent
        out = {"topic_word": state.topic_word, prep.doc_site: state.doc_latent}
        kept = {s: out[s].detach().cpu().numpy() for s in prep.sites}
        if prep.eager_ll:  # Θ is not kept: the marginal of this draw now (the chain's labels)
            kept["_loglik"] = draw_marginal_loglik(prep.model, prep.data, state.topic_word.detach().cpu().numpy(),
                                                   chain.hyper, o.seed)
        return kept

    def export(self, prep: _Prep, o: Options, outcome: Any) -> Export:
        from latentfs.inference.dca.hyper import check_warmup_learning

        model, data, learn = prep.model, prep.data, prep.learn
        averaged, per_chain = prep.chain_outputs()
        chains: list[_Chain] = outcome.final_states
        n_kept = max(outcome.n_draws, 1)
        extras: dict[str, Any] = {
            "kept_documents": data.counts.kept_documents,
            "doc_lengths": data.counts.doc_lengths,
            "component_counts": torch.stack([ch.counts_sum for ch in chains]).cpu().numpy() / n_kept,
            f"{prep.doc_site}_mean": torch.stack([ch.doc_sum for ch in chains]).cpu().numpy() / n_kept,
        }
        drifts: dict[str, float] = {}
        if learn:
            traces: dict[str, np.ndarray] = {}
            for name in learn:
                extras[name] = np.stack([ch.hyper[name].cpu().numpy() for ch in chains])
                steps = min(len(ch.hyper_trace[name]) for ch in chains)
                traces[name] = extras[f"{name}_trace"] = np.array([ch.hyper_trace[name][:steps] for ch in chains])
            drifts = check_warmup_learning(traces, o.num_warmup, warn=o.warn,
                                           method=f"{type(model).__name__} Gibbs")
        return chain_export(prep, o, outcome, extras=extras, chain_extras={**averaged, **per_chain}, diagnostics={
            "observation_dim": "document",
            "stored_sites": list(prep.sites),
            **({"hyper_drift": drifts} if learn else {}),
            **({"no_pointwise_log_likelihood": NO_LOO_REASON} if prep.cgp and o.log_likelihood else {}),
        })

    def finalize(self, post: Any, prep: _Prep, o: Options, outcome: Any) -> None:
        """The pointwise log-likelihood of every kept Θ draw, computed on first use (each in its chain's labels,
        at its chain's hyperparameters)."""
        chains = outcome.final_states
        lazy_pointwise_loglik(post, prep, o, [prep.model] * len(chains), [ch.hyper for ch in chains])

    def after_align(self, post: Any, prep: _Prep, o: Options, outcome: Any) -> None:
        """Each chain's running means and learned hyperparameters, permuted by the chain's modal relabelling
        (``Export.chain_extras``), averaged over chains; left per chain when the draws were not relabelled
        (``align=False``, or no ``topic_word`` draws) and there are several chains (their components carry
        different labels). The learned values become the result's hyperparameters."""
        from latentfs.inference.dca.hyper import with_hyperparameters

        averaged = average_chain_outputs(post, prep.chain_outputs()[0], len(outcome.final_states))
        if prep.learn:
            values = {name: averaged.get(name, post.extras[name][0]) for name in prep.learn}
            for name in prep.learn:
                post.extras.pop(name, None)
            post.hyperparameters = {**with_hyperparameters(prep.model, **values).hyperparameters(),
                                    "learned": list(prep.learn)}


fit_gibbs = register_spec(DirectGibbs(), DirichletDCA, GammaPoissonDCA, ConditionalGammaPoissonDCA)
