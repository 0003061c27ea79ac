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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options, shared
from latentfs.core.random import dirichlet_sample, group_softmax, log_gamma_sample
from latentfs.core.registry import register_spec
from latentfs.core.results import Posterior
from latentfs.inference.dca.common import (
    DCAData,
    DCAModel,
    cgp_zero_probability,
    check_store,
    dims_and_coords,
    hyper_tensors,
    log_length_factorials,
    model_groups,
    prepare,
    resolve_model,
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


@dataclass(frozen=True)
class GibbsState:
    """State of the direct Gibbs sampler.

    Attributes
    ----------
    topic_word : Tensor (K, J), Θ (row k is θ_{·,k})
    doc_latent : Tensor (I, K), m_(i) (DM) or l_(i) (GaP)
    doc_counts : Tensor (I, K), c_(i): words of each document assigned to each component
    word_counts : Tensor (K, J), Σ_i v_{·,k,(i)}: words assigned to each component
    assignment : LongTensor (S,), the component of each token (token order of :class:`TokenIndex`)
    """

    topic_word: torch.Tensor
    doc_latent: torch.Tensor
    doc_counts: torch.Tensor
    word_counts: torch.Tensor
    assignment: torch.Tensor


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


@dataclass(frozen=True)
class TokenIndex:
    """Tokens of the corpus: non-zeros with count 1 come first (their CDF rows are used in place)."""

    order: torch.Tensor  # (nnz,) non-zeros reordered: singles first
    n_single: int
    multi_rows: torch.Tensor  # (S - n_single,) index into the reordered non-zeros, one per extra token
    doc: torch.Tensor  # (S,) document of each token
    word: torch.Tensor  # (S,) word of each token


def token_index(data: DCAData) -> TokenIndex:
    from latentfs.inference.dca.collapsed_state import check_token_budget

    # Expanding the counts into tokens costs three int64 entries per token (row, document, word) plus
    # the assignments: check the total against the memory budget before anything is allocated.
    check_token_budget(data.values.detach().cpu().numpy(), bytes_per_token=40, what="direct Gibbs")
    counts = data.values.round().long()
    single = counts == 1
    order = torch.cat([torch.nonzero(single).ravel(), torch.nonzero(~single).ravel()])
    n_single = int(single.sum())
    rest = counts[order[n_single:]]
    multi_rows = torch.repeat_interleave(torch.arange(n_single, order.numel(), device=order.device), rest)
    rows = torch.cat([torch.arange(n_single, device=order.device), multi_rows])
    nz = order[rows]
    return TokenIndex(order=order, n_single=n_single, multi_rows=multi_rows, doc=data.doc[nz], word=data.word[nz])


def theta_sample(conc: torch.Tensor, groups: torch.Tensor | None, generator: torch.Generator) -> torch.Tensor:
    """θ_{·,k} ~ Dirichlet(conc_k) for each row, one Dirichlet per group when ``groups`` is given."""
    return group_softmax(log_gamma_sample(conc, generator), groups)


def sample_cgp_scores(
    doc_counts: torch.Tensor, hyper: dict[str, torch.Tensor], generator: torch.Generator
) -> torch.Tensor:
    """Table 3, CGP: l_k = 0 with the zero probability when c_k = 0, else Gamma(c_k + α_k, rate 1 + β_k).

    ``hyper["zero_prob"]`` holds P(l_k = 0 | c_k = 0) (:func:`cgp_zero_probability`). One uniform U per
    entry serves both the zero decision (U < p0) and, rescaled to (U − p0)/(1 − p0), the gamma draw of
    :func:`log_gamma_sample`; with p0 = 0 the draws equal GaP's bit for bit.
    """
    conc = doc_counts + hyper["alpha"]
    g = torch._standard_gamma(conc + 1, generator=generator)
    u = torch.rand(conc.shape, generator=generator, dtype=conc.dtype, device=conc.device)
    p0 = torch.where(doc_counts == 0, hyper["zero_prob"].expand_as(conc), torch.zeros_like(conc))
    zero = u < p0
    u = torch.where(zero, torch.ones_like(u), (u - p0) / (1 - p0))
    tiny = torch.finfo(conc.dtype).tiny
    log_g = torch.log(g.clamp_min(tiny)) + torch.log(u.clamp_min(tiny)) / conc
    return torch.where(zero, torch.zeros_like(conc), torch.exp(log_g) / (1 + hyper["beta"]))


def _sample_dm(doc_counts: torch.Tensor, hyper: dict[str, torch.Tensor], generator: torch.Generator) -> torch.Tensor:
    return dirichlet_sample(doc_counts + hyper["alpha"], generator)


def _sample_gap(doc_counts: torch.Tensor, hyper: dict[str, torch.Tensor], generator: torch.Generator) -> torch.Tensor:
    return torch.exp(log_gamma_sample(doc_counts + hyper["alpha"], generator)) / (1 + hyper["beta"])


# Table 3, one row per model family.
DOC_SAMPLERS: dict[type, Callable[[torch.Tensor, dict[str, torch.Tensor], torch.Generator], torch.Tensor]] = {
    DirichletDCA: _sample_dm,
    GammaPoissonDCA: _sample_gap,
    ConditionalGammaPoissonDCA: sample_cgp_scores,
}


def sample_doc_latent(
    model: DCAModel, doc_counts: torch.Tensor, hyper: dict[str, torch.Tensor], generator: torch.Generator
) -> torch.Tensor:
    """Table 3: m ~ Dirichlet(c + α), l_k ~ Gamma(c_k + α_k, rate 1 + β_k), or the CGP rule."""
    sampler = next(DOC_SAMPLERS[cls] for cls in type(model).__mro__ if cls in DOC_SAMPLERS)
    return sampler(doc_counts, hyper, generator)


def sample_assignments(
    data: DCAData,
    tokens: TokenIndex,
    topic_word: torch.Tensor,
    doc_latent: torch.Tensor,
    generator: torch.Generator,
    return_rates: bool = False,
) -> Any:
    """Each token's component, drawn ∝ latent_k θ_{jk}; returns (S,) in token order.

    With ``return_rates``, also returns (Θ latent)_j at each non-zero in the reordered order
    ``tokens.order`` (the chapter's Fig. 5 step 1c accumulates the likelihood from them).
    """
    nz = tokens.order
    cdf = torch.index_select(doc_latent, 0, data.doc[nz]).mul_(torch.index_select(topic_word.T, 0, data.word[nz]))
    cdf = torch.cumsum(cdf, dim=1, out=cdf)
    token_cdf = cdf
    if tokens.multi_rows.numel():  # tokens of words seen more than once in a document share their CDF row
        token_cdf = torch.cat([cdf[: tokens.n_single], cdf.index_select(0, tokens.multi_rows)])
    u = torch.rand(token_cdf.shape[0], 1, generator=generator, dtype=cdf.dtype, device=cdf.device) * token_cdf[:, -1:]
    k = torch.searchsorted(token_cdf, u).squeeze(1).clamp_max_(topic_word.shape[0] - 1)
    return (k, cdf[:, -1]) if return_rates else k


def count_assignments(
    assignment: torch.Tensor, tokens: TokenIndex, n_documents: int, n_features: int, K: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """(c (I, K), N (K, J)) from token assignments."""
    doc_counts = torch.bincount(tokens.doc * K + assignment, minlength=n_documents * K).reshape(n_documents, K)
    word_counts = torch.bincount(assignment * n_features + tokens.word, minlength=K * n_features).reshape(K, n_features)
    return doc_counts.to(dtype), word_counts.to(dtype)


def check_count_invariants(state: GibbsState, data: DCAData) -> None:
    """Σ_k c_k = L_(i); Σ_j N_kj = Σ_i c_k; Σ_k N_kj = Σ_i w_j. Raises RuntimeError naming what broke."""
    lengths = data.doc_lengths
    word_totals = torch.zeros(data.n_features, dtype=data.dtype, device=data.device)
    word_totals.index_add_(0, data.word, data.values)
    problems = []
    if not torch.equal(state.doc_counts.sum(1), lengths):
        problems.append("document totals Σ_k c_k differ from the document lengths")
    if not torch.equal(state.word_counts.sum(1), state.doc_counts.sum(0)):
        problems.append("component totals differ between word and document counts")
    if not torch.equal(state.word_counts.sum(0), word_totals):
        problems.append("word totals Σ_k N_kj differ from the corpus word counts")
    if problems:
        raise RuntimeError("Gibbs count invariants broken: " + "; ".join(problems))


def _hyper(model: DCAModel, data: DCAData) -> dict[str, torch.Tensor]:
    out = hyper_tensors(model, data)  # α, γ, and β for GaP/CGP
    if isinstance(model, ConditionalGammaPoissonDCA):
        out["rho"] = torch.as_tensor(model.rho, dtype=data.dtype, device=data.device)
        out["zero_prob"] = cgp_zero_probability(out["alpha"], out["beta"], out["rho"])
    groups = model_groups(model, data)
    if groups is not None:
        out["groups"] = groups
    # constants of log p(w | latent, Θ): Σ_ij log w_ij! and Σ_i log L_i! (Σ_i Σ_g log L_ig! when grouped)
    out["log_factorials"] = data.log_factorials.sum()
    out["log_lengths_factorial"] = log_length_factorials(model, data).sum()
    return out


def gibbs_init(
    model: DCAModel, data: DCAData, tokens: TokenIndex, hyper: dict[str, torch.Tensor], generator: torch.Generator
) -> GibbsState:
    """Uniformly random token assignments, then Θ | V and the document latents | c."""
    K = model.n_components
    assignment = torch.randint(0, K, (tokens.doc.numel(),), generator=generator, device=data.device)
    doc_counts, word_counts = count_assignments(assignment, tokens, data.n_documents, data.n_features, K, data.dtype)
    theta = theta_sample(word_counts + hyper["gamma"], hyper.get("groups"), generator)
    latent = sample_doc_latent(model, doc_counts, hyper, generator)
    return GibbsState(theta, latent, doc_counts, word_counts, assignment)


def gibbs_step(
    model: DCAModel,
    data: DCAData,
    tokens: TokenIndex,
    state: GibbsState,
    hyper: dict[str, torch.Tensor],
    generator: torch.Generator,
    vstep: str = "auto",
) -> GibbsState:
    """One major cycle of Fig. 5: latents | c, then V | latents, Θ, then Θ | V."""
    return gibbs_step_with_loglik(model, data, tokens, state, hyper, generator, vstep)[0]


_VSTEP_KERNEL: Any = None


def _compiled_vstep() -> Any:
    """The V step as a compiled loop (numba): per non-zero, the cumulative weights m_k θ_jk once, then one
    uniform and a bisection per token. Exact, O(K) per non-zero plus O(log K) per token; it draws from
    numba's own generator, seeded from the chain's torch generator every sweep."""
    global _VSTEP_KERNEL
    if _VSTEP_KERNEL is None:
        from numba import njit

        @njit(cache=True)
        def kernel(indptr, cols, vals, latent, theta_t, seed, z, ndk, nwk):  # pragma: no cover - compiled
            np.random.seed(seed)
            K = latent.shape[1]
            cum = np.empty(K)
            loglik = 0.0
            t = 0
            for i in range(indptr.shape[0] - 1):
                for p in range(indptr[i], indptr[i + 1]):
                    j = cols[p]
                    total = 0.0
                    for k in range(K):
                        total += latent[i, k] * theta_t[j, k]
                        cum[k] = total
                    loglik += vals[p] * np.log(max(total, 1e-300))
                    for _ in range(int(vals[p])):
                        u = np.random.random() * total
                        lo, hi = 0, K - 1
                        while lo < hi:
                            mid = (lo + hi) // 2
                            if cum[mid] <= u:
                                lo = mid + 1
                            else:
                                hi = mid
                        z[t] = lo
                        t += 1
                        ndk[i, lo] += 1
                        nwk[lo, j] += 1
            return loglik

        _VSTEP_KERNEL = kernel
    return _VSTEP_KERNEL


VSTEPS = ("auto", "compiled", "torch")


def _use_compiled(vstep: str, data: DCAData) -> bool:
    if vstep not in VSTEPS:
        raise DataError(f"vstep must be one of {VSTEPS}; got {vstep!r}.")
    return vstep == "compiled" or (vstep == "auto" and data.device.type == "cpu")


def gibbs_step_with_loglik(
    model: DCAModel,
    data: DCAData,
    tokens: TokenIndex,
    state: GibbsState,
    hyper: dict[str, torch.Tensor],
    generator: torch.Generator,
    vstep: str = "auto",
) -> tuple[GibbsState, float]:
    """:func:`gibbs_step`, also returning log p(w | latent, Θ) at the values the V step used (Fig. 5, 1c).

    ``vstep``: ``"compiled"`` (the numba loop of :func:`_compiled_vstep`, CPU), ``"torch"`` (vectorised
    inverse-CDF sampling, any device) or ``"auto"`` (compiled on CPU, torch elsewhere). Both draw from the
    same conditional; with the compiled step ``assignment`` is in CSR token order, else in
    :class:`TokenIndex` order.
    """
    latent = sample_doc_latent(model, state.doc_counts, hyper, generator)
    if _use_compiled(vstep, data):
        K, csr = model.n_components, data.counts.csr
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
        z = np.empty(tokens.doc.numel(), dtype=np.int64)
        ndk = np.zeros((data.n_documents, K), dtype=np.int64)
        nwk = np.zeros((K, data.n_features), dtype=np.int64)
        latent_np = np.ascontiguousarray(latent.detach().cpu().numpy(), dtype=np.float64)
        theta_t = np.ascontiguousarray(state.topic_word.detach().cpu().numpy().T, dtype=np.float64)
        words_loglik = _compiled_vstep()(csr.indptr, csr.indices, csr.data, latent_np, theta_t, seed, z, ndk, nwk)
        assignment = torch.from_numpy(z)
        doc_counts = torch.from_numpy(ndk).to(dtype=data.dtype)
        word_counts = torch.from_numpy(nwk).to(dtype=data.dtype)
        loglik = float(words_loglik)
    else:
        assignment, rates = sample_assignments(data, tokens, state.topic_word, latent, generator, return_rates=True)
        doc_counts, word_counts = count_assignments(
            assignment, tokens, data.n_documents, data.n_features, model.n_components, data.dtype
        )
        tiny = torch.finfo(rates.dtype).tiny
        loglik = float((data.values[tokens.order] * torch.log(rates.clamp_min(tiny))).sum())
    theta = theta_sample(word_counts + hyper["gamma"], hyper.get("groups"), generator)
    loglik -= float(hyper["log_factorials"])
    if isinstance(model, DirichletDCA):
        loglik += float(hyper["log_lengths_factorial"])
    else:
        loglik -= float(latent.sum())
    return GibbsState(theta, latent, doc_counts, word_counts, assignment), loglik


def _check_vstep(name: str, value: Any) -> str:
    if value not in VSTEPS:
        raise DataError(f"vstep must be one of {VSTEPS}; got {value!r}.")
    return str(value)


def _check_log_likelihood(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise DataError(f"log_likelihood must be True or False; got {value!r}.")
    return bool(value)


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
        "store": Option(None, None, "tuple of str or None",
                        "sites whose draws are kept: ('topic_word',) by default, add the document site for its draws"),
        "align": Option(True, None, "bool",
                        "relabel the draws and each chain's running means before chains are averaged"),
        "log_likelihood": Option(True, _check_log_likelihood, "bool",
                                 "the pointwise log p(w_(i) | Θ), latents integrated out, computed on first use"),
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
        draws = dict(outcome.draws)
        loglik = draws.pop("_loglik", None)
        dims, coords = dims_and_coords(model, data)
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
        trace = outcome.trace
        return Export(
            dims=dims, coords=coords, draws=draws, extras=extras, log_likelihood=loglik,
            diagnostics={
                "num_warmup": o.num_warmup,
                "thin": o.thin,
                "observation_dim": "document",
                "stored_sites": list(prep.sites),
                **({"hyper_drift": drifts} if learn else {}),
                **({"no_pointwise_log_likelihood": NO_LOO_REASON} if prep.cgp and o.log_likelihood else {}),
            },
            sample_stats={"lp": trace[:, o.num_warmup:][:, o.thin - 1 :: o.thin][:, : outcome.n_draws]},
            relabel=("topic_word", "component") if o.align else None,
            chain_extras={**averaged, **per_chain},  # permuted by each chain's modal relabelling in the alignment
        )

    def finalize(self, post: Any, prep: _Prep, o: Options, outcome: Any) -> None:
        """The pointwise log-likelihood of every kept Θ draw, computed on first use (each in its chain's labels,
        at its chain's hyperparameters)."""
        if prep.lazy_ll:
            chains, data = outcome.final_states, prep.data
            post.log_likelihood = lazy_marginal_loglik(post, data.counts.csr, count_constants(prep.model, data),
                                                       [prep.model] * len(chains), [ch.hyper for ch in chains], o.seed)

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
