"""The updates of DCA's point-estimate engines (:mod:`latentfs.inference.dca.em`; Buntine & Jakulin 2006, §7.1):
the state, the rates (Θ l)_j at the non-zeros, the expected component and word counts, KL-NMF's two schedules,
PLSI EM, and the MAP steps with the log posterior they ascend. The update rules and their identities are listed
in the module docstring of :mod:`latentfs.inference.dca.em`, with the engine specs that run them.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from latentfs.inference.dca.common import (
    DCAData,
    DCAModel,
    doc_loglik,
    group_totals,
)
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

_TINY = 1e-300


@dataclass(frozen=True)
class PointState:
    """A point estimate of a DCA model.

    Attributes
    ----------
    doc_latent : Tensor (I, K)
        Scores l_(i) (GaP, NMF: the rows of NMF's W) or proportions m_(i) (DM, PLSI: P(z | d)).
    topic_word : Tensor (K, J)
        Θ with each row θ_{·,k} summing to 1 (PLSI: P(w | z); NMF: H with rows normalised).
    """

    doc_latent: torch.Tensor
    topic_word: torch.Tensor


# ----------------------------------------------------------------------------------------- math
def _rates(data: DCAData, doc: torch.Tensor, topic_word: torch.Tensor) -> torch.Tensor:
    """(doc @ topic_word) at the non-zeros, floored so that w / rate stays finite."""
    return data.rates_at_nonzeros(doc, topic_word).clamp_min(_TINY)


def expected_counts(
    data: DCAData, doc: torch.Tensor, topic_word: torch.Tensor, ratio: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """E-step sufficient statistics from the sparse ratios ``ratio`` = w_j / (doc Θ)_j at the non-zeros.

    Returns (E[c] (I, K), S (K, J)): E[c]_ik = doc_ik Σ_j θ_kj ratio_ij and
    S_kj = θ_kj Σ_i doc_ik ratio_ij (Buntine & Jakulin eq. 14–15 with point estimates).
    """
    doc_counts = doc * data.times_t(ratio, topic_word)
    word_counts = topic_word * (data.csr_t(ratio) @ doc).T
    return doc_counts, word_counts


def gap_ml_loglik(data: DCAData, doc_scores: torch.Tensor, rates: torch.Tensor) -> torch.Tensor:
    """log p(W | Θ, L) of the Poisson model (eq. 2) with Θ rows normalised, from the rates at the non-zeros."""
    return (data.values * torch.log(rates)).sum() - doc_scores.sum() - data.log_factorials.sum()


def kl_divergence(data: DCAData, doc_scores: torch.Tensor, topic_word: torch.Tensor) -> float:
    """Generalised KL divergence D(W ‖ L Θ) = Σ_ij [w log(w / r) − w + r] (Lee & Seung 2001's cost).

    It equals −log p(W | Θ, L) of the GaP with α = β = 0 plus Σ_ij [w log w − w − log w!], a constant:
    Lemma 2 of Buntine & Jakulin. Θ need not be normalised.
    """
    rates = _rates(data, doc_scores, topic_word)
    w = data.values
    total_rate = (doc_scores.sum(0) * topic_word.sum(-1)).sum()
    return float((w * torch.log(w / rates)).sum() - w.sum() + total_rate)


def _normalise_rows(x: torch.Tensor) -> torch.Tensor:
    return x / x.sum(-1, keepdim=True).clamp_min(_TINY)


def theta_simplex(x: torch.Tensor, groups: torch.Tensor | None = None) -> torch.Tensor:
    """Rows of the non-negative ``x`` (K, J) normalised, within every group of a grouped model
    (Buntine & Jakulin §4.4); a row (or group) with no mass becomes uniform."""
    if groups is None:
        total = x.sum(-1, keepdim=True)
        size = torch.full_like(total, float(x.shape[-1]))
    else:
        n_groups = int(groups.max().item()) + 1
        total = group_totals(x, groups, n_groups)[..., groups]
        size = group_totals(torch.ones_like(x[:1]), groups, n_groups)[..., groups]
    return torch.where(total > 0, x / total.clamp_min(_TINY), 1.0 / size)


def nmf_em_step(data: DCAData, state: PointState) -> tuple[PointState, torch.Tensor]:
    """One EM step of GaP-ML (the chapter's rewrite rules): both factors from the same ratios."""
    rates = _rates(data, state.doc_latent, state.topic_word)
    objective = gap_ml_loglik(data, state.doc_latent, rates)
    doc_counts, word_counts = expected_counts(data, state.doc_latent, state.topic_word, data.values / rates)
    # l_k ← E[c_k] (Σ_j θ_jk = 1); θ_·k ∝ S_·k.
    return PointState(doc_counts, _normalise_rows(word_counts)), objective


def nmf_alternating_step(data: DCAData, state: PointState) -> tuple[PointState, torch.Tensor]:
    """One Lee–Seung iteration in scikit-learn's order: scores, then Θ from the new scores."""
    theta = state.topic_word
    rates = _rates(data, state.doc_latent, theta)
    objective = gap_ml_loglik(data, state.doc_latent, rates)
    # W-update of Lee & Seung: l_k ← l_k Σ_j θ_jk w_j/(Θl)_j / Σ_j θ_jk, and Σ_j θ_jk = 1.
    scores = state.doc_latent * data.times_t(data.values / rates, theta)
    ratio = data.values / _rates(data, scores, theta)
    # H-update: θ_jk ← θ_jk Σ_i l_ik w_ij/(Θl_i)_j / Σ_i l_ik.
    raw = theta * (data.csr_t(ratio) @ scores).T / scores.sum(0).clamp_min(_TINY)[:, None]
    scale = raw.sum(-1)
    # Renormalise Θ and rescale l: the product, hence the next iterate's product, is unchanged.
    return PointState(scores * scale, raw / scale.clamp_min(_TINY)[:, None]), objective


NMF_SCHEDULES: dict[str, Callable[[DCAData, PointState], tuple[PointState, torch.Tensor]]] = {
    "em": nmf_em_step,
    "alternating": nmf_alternating_step,
}


def nmf_step(data: DCAData, state: PointState, schedule: str = "em") -> tuple[PointState, torch.Tensor]:
    """One KL-NMF iteration; returns (new state, GaP α=β=0 log-likelihood at the input state)."""
    return NMF_SCHEDULES[schedule](data, state)


def plsi_step(
    data: DCAData, state: PointState, tempering: float = 1.0, groups: torch.Tensor | None = None
) -> tuple[PointState, torch.Tensor]:
    """One PLSI EM step (Hofmann 1999; digest §1.8), optionally tempered (Hofmann 2001).

    r_jk ∝ (θ_jk m_k)^τ (τ = ``tempering``; 1 is plain EM), m_k ← Σ_j w_j r_jk / L,
    θ_jk ∝ Σ_i w_j r_jk. Returns the new state and Σ_i Σ_j w_ij log(Θ m_i)_j at the input state (the
    sequence log-likelihood; add the multinomial coefficients for the bag model's value). With ``groups``
    (grouped DirichletDCA) Θ is normalised within every group; the m-update is unchanged because
    Σ_j (Θ m)_j = 1 within every group.
    """
    m, theta = state.doc_latent, state.topic_word
    rates = _rates(data, m, theta)
    objective = (data.values * torch.log(rates)).sum()
    if tempering != 1.0:
        # (θ m)^τ = θ^τ m^τ, so the tempered normaliser is one more sampled product.
        m, theta = m.pow(tempering), theta.pow(tempering)
        rates = _rates(data, m, theta)
    doc_counts, word_counts = expected_counts(data, m, theta, data.values / rates)
    new_m = doc_counts / data.doc_lengths[:, None]
    return PointState(_normalise_rows(new_m), theta_simplex(word_counts, groups)), objective


def _clipped_simplex(stats: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Rows of max(stats + shift, 0), normalised; a row with nothing left keeps its largest statistic
    (document latents)."""
    x = (stats + shift).clamp_min(0)
    empty = x.sum(-1) <= 0
    if bool(empty.any()):
        onehot = torch.zeros_like(x)
        onehot.scatter_(-1, stats.argmax(-1, keepdim=True), 1.0)
        x = torch.where(empty[:, None], onehot, x)
    return _normalise_rows(x)


def _log_of_positive(x: torch.Tensor) -> torch.Tensor:
    """log x where x > 0 and 0 where x == 0 (the clipped entries' (a − 1) log 0 terms are dropped)."""
    return torch.where(x > 0, torch.log(x.clamp_min(_TINY)), torch.zeros_like(x))


def map_log_posterior(
    model: DCAModel, data: DCAData, state: PointState, hyper: dict[str, torch.Tensor]
) -> torch.Tensor:
    """log p(W, latent, Θ) of the bag model; equals the Pyro trace's ``log_prob_sum`` when every entry > 0.

    Entries clipped to exactly 0 (possible only with α < 1 or γ < 1) drop their (a − 1) log 0 term.
    """
    doc, theta = state.doc_latent, state.topic_word
    alpha, gamma = hyper["alpha"], hyper["gamma"]
    n_components, n_docs = theta.shape[0], doc.shape[0]
    # log Dirichlet(θ_k | γ) summed over components (one Dirichlet per group when grouped)
    groups = hyper.get("groups")
    gamma_totals = gamma.sum() if groups is None else group_totals(gamma, groups, int(groups.max()) + 1)
    lp_theta = n_components * (torch.lgamma(gamma_totals).sum() - torch.lgamma(gamma).sum())
    lp_theta = lp_theta + ((gamma - 1) * _log_of_positive(theta)).sum()
    if isinstance(model, DirichletDCA):
        # log Dirichlet(m_(i) | α) summed over documents
        lp_doc = n_docs * (torch.lgamma(alpha.sum()) - torch.lgamma(alpha).sum())
        lp_doc = lp_doc + ((alpha - 1) * _log_of_positive(doc)).sum()
    else:
        beta = hyper["beta"]
        # log Gamma(l_k | α_k, β_k) (rate) summed over documents and components
        lp_doc = alpha * torch.log(beta) - torch.lgamma(alpha) + (alpha - 1) * _log_of_positive(doc) - beta * doc
        lp_doc = lp_doc.sum()
    return lp_theta + lp_doc + doc_loglik(model, data, theta, doc).sum()


def map_dm_step(
    data: DCAData, state: PointState, hyper: dict[str, torch.Tensor]
) -> tuple[PointState, torch.Tensor]:
    """One EM step for the MAP of DirichletDCA's (m, Θ) (digest §1.8): m ∝ max(E[c] + α − 1, 0),
    θ_·k ∝ max(S_·k + γ − 1, 0). Returns the new state and the rates at the input state."""
    rates = _rates(data, state.doc_latent, state.topic_word)
    doc_counts, word_counts = expected_counts(data, state.doc_latent, state.topic_word, data.values / rates)
    new_m = _clipped_simplex(doc_counts, hyper["alpha"] - 1)
    new_theta = theta_simplex((word_counts + hyper["gamma"] - 1).clamp_min(0), hyper.get("groups"))
    return PointState(new_m, new_theta), rates


def map_gap_step(
    data: DCAData, state: PointState, hyper: dict[str, torch.Tensor]
) -> tuple[PointState, torch.Tensor]:
    """One EM step for the MAP of GammaPoissonDCA's (l, Θ) (digest §1.8).

    l_k ← max(E[c_k] + α_k − 1, 0)/(1 + β_k) (with α = 1, β = 0 the NMF score update) and
    θ_·k ∝ max(S_·k + γ − 1, 0). Returns the new state and the rates at the input state.
    """
    rates = _rates(data, state.doc_latent, state.topic_word)
    doc_counts, word_counts = expected_counts(data, state.doc_latent, state.topic_word, data.values / rates)
    scores = (doc_counts + hyper["alpha"] - 1).clamp_min(0) / (1 + hyper["beta"])
    dead = scores.sum(-1) <= 0
    if bool(dead.any()):
        # every score clipped: keep the strongest component so the document still has a rate
        keep = torch.zeros_like(scores).scatter_(-1, doc_counts.argmax(-1, keepdim=True), 1.0)
        scores = torch.where(dead[:, None], keep * doc_counts / (1 + hyper["beta"]), scores)
    return PointState(scores, theta_simplex((word_counts + hyper["gamma"] - 1).clamp_min(0))), rates


_MapStep = Callable[[DCAData, PointState, dict[str, torch.Tensor]], tuple[PointState, torch.Tensor]]
_MAP_STEPS: dict[type, _MapStep] = {DirichletDCA: map_dm_step, GammaPoissonDCA: map_gap_step}
