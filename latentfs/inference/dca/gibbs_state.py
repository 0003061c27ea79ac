"""The direct Gibbs sampler's state and sweeps for DCA (:mod:`.gibbs`): the chain's counts and assignments
(:class:`GibbsState`), the token index, the conditional draws of Θ, the document latents and the assignments
(Buntine & Jakulin 2006, Table 3), one sweep with and without the log-likelihood, and the count invariants. The
sampler's spec, its options and the algorithm's description are in :mod:`.gibbs`, which re-exports every name
here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.random import dirichlet_sample, group_softmax, log_gamma_sample
from latentfs.inference.dca.common import (
    DCAData,
    DCAModel,
    cgp_zero_probability,
    hyper_tensors,
    log_length_factorials,
    model_groups,
)
from latentfs.models.dca import ConditionalGammaPoissonDCA, DirichletDCA, GammaPoissonDCA

__all__ = [
    "GibbsState",
    "TokenIndex",
    "token_index",
    "theta_sample",
    "sample_cgp_scores",
    "sample_doc_latent",
    "sample_assignments",
    "count_assignments",
    "check_count_invariants",
    "gibbs_init",
    "gibbs_step",
    "VSTEPS",
    "gibbs_step_with_loglik",
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
