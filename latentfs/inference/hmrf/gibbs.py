"""Gibbs sampling for the hidden Potts model, with a pseudo-likelihood Metropolis step for η.

Each sweep: (1) the labels by checkerboard Gibbs updates (Geman & Geman 1984): each colour in turn drawn from
P(z_s = k | z_∂s, y_s, θ) ∝ exp(η n_k(s)) g_k(y_s) (same-colour sites are conditionally independent);
(2) the emission parameters from their conjugate Normal–Gamma posterior given the labels; (3) η by one
random-walk Metropolis step whose target is **the pseudo-likelihood** PL(η; z) (Besag 1975) times the
Uniform(0, η_max) prior, not the exact conditional p(η | z) ∝ exp(η A(z)) / G(η), which needs the
intractable G(η) (Titterington §1.6: block Gibbs for hidden MRFs is "problematic", Rydén & Titterington
1998). Steps (1)–(2) are exact Gibbs updates; the η-marginal is therefore a pseudo-posterior, which
concentrates around the maximum pseudo-likelihood estimate (Besag 1975 consistency) but is not the exact
posterior of η.

The proposal's standard deviation is fixed per chain: 2.4 / √(−∂² log PL) at the chain's start
(``interaction_step`` overrides it). The labels of every kept draw are stored (one byte per pixel and draw
for K ≤ 256) and, once the pipeline has aligned the draws (``Posterior.align``), each draw's labels are renamed
by that draw's permutation before they are counted (:meth:`PottsGibbs.after_align`), so the label marginals of
a chain whose labels switched do not mix components (counting the raw labels gave ≈ 0.5 everywhere against
exact marginals of 0.12–0.82).

The sampler runs in the standardised coordinates of :mod:`~latentfs.inference.hmrf.family` (the prior's m0
and σ0² from the standardised data, or the model's values mapped over), and the draws are aligned and checked
(R̂, ESS) there and then mapped to the data's units: the labels and η of c·y + b are those of y for the same
seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latentfs.core.options import check_float
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options
from latentfs.core.registry import register_spec
from latentfs.inference.hmrf.family import (
    INTERACTION,
    LatticeFamily,
    PottsFit,
    flag_interaction_at_bound,
    prepare_fit,
    pseudo_log_likelihood,
    warn_overflowed_variance,
)
from latentfs.inference.hmrf.icm import icm_objective, initial_state
from latentfs.models.hmrf import HiddenPotts, neighbour_sum, potts_sweep

__all__ = ["GibbsFit", "PottsGibbs", "conjugate_emissions", "interaction_step_size", "metropolis_interaction",
           "relabelled_marginals"]


def conjugate_emissions(
    fam: LatticeFamily, labels: torch.Tensor, prior: dict[str, torch.Tensor], gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """(μ, σ²) ~ p(μ, λ | z, y) in the family's standardised coordinates (``prior`` in them too,
    :meth:`~latentfs.inference.hmrf.family.LatticeFamily.prior`): per label and feature λ ~ Gamma(a_n, b_n),
    μ | λ ~ N(m_n, 1/(κ_n λ)) with
    κ_n = κ0 + n_k, m_n = (κ0 m0 + n_k ȳ_k)/κ_n, a_n = ν0/2 + n_k/2,
    b_n = ν0 σ0²/2 + S_k/2 + κ0 n_k (ȳ_k − m0)² / (2 κ_n) (S_k the within-label sum of squares)."""
    w = fam.onehot(labels).reshape(fam.n, fam.k)
    y = fam.y.reshape(fam.n, fam.d)
    nk = w.sum(0)[:, None]
    ybar = (w.T @ y) / nk.clamp_min(1.0)
    ss = (w.T @ y.square()) - nk * ybar.square()
    kappa0, m0, nu0, s0 = prior["mean_precision"], prior["mean"], prior["dof"], prior["variance"]
    kn = kappa0 + nk
    mn = (kappa0 * m0 + nk * ybar) / kn
    an = nu0 / 2 + nk / 2
    bn = nu0 * s0 / 2 + ss.clamp_min(0.0) / 2 + kappa0 * nk * (ybar - m0).square() / (2 * kn)
    lam = torch._standard_gamma(an.expand(fam.k, fam.d).contiguous(), generator=gen) / bn
    lam = lam.clamp_min(1e-300)
    means = mn + torch.randn(fam.k, fam.d, generator=gen, dtype=torch.float64) / (kn * lam).sqrt()
    return means, 1.0 / lam


def interaction_step_size(onehot: torch.Tensor, eta: float) -> float:
    """2.4 / √(−∂²_η log PL) at η: the curvature is −Σ_s Var_{P(·|z_∂s)}(n(s)), by the concavity of log PL."""
    n = neighbour_sum(onehot)
    p = torch.softmax(eta * n, -1)
    var = float(((p * n.square()).sum(-1) - (p * n).sum(-1).square()).sum())
    return 2.4 / math.sqrt(max(var, 1e-8))


def metropolis_interaction(
    onehot: torch.Tensor, eta: float, step: float, eta_max: float, gen: torch.Generator
) -> tuple[float, bool]:
    """One random-walk Metropolis step for η targeting PL(η; z) on [0, η_max] (uniform prior); returns the
    new η and whether the proposal was accepted."""
    proposal = eta + step * float(torch.randn(1, generator=gen, dtype=torch.float64))
    if not 0.0 <= proposal <= eta_max:
        return eta, False
    log_ratio = pseudo_log_likelihood(onehot, proposal) - pseudo_log_likelihood(onehot, eta)
    if math.log(float(torch.rand(1, generator=gen, dtype=torch.float64)) + 1e-300) < log_ratio:
        return proposal, True
    return eta, False


def relabelled_marginals(labels: np.ndarray, perms: np.ndarray, k: int) -> np.ndarray:
    """Per-chain label marginals (chain, H, W, K) from the labels of every draw (chain, draw, H, W), each draw's
    labels renamed by its alignment permutation first: the aligned component j of a draw is its raw component
    ``perm[j]``, so a pixel labelled l is counted for component ``argsort(perm)[l]``."""
    chains, draws = labels.shape[:2]
    out = np.zeros((chains, *labels.shape[2:], k), dtype=np.float64)
    for c in range(chains):
        uniq, which = np.unique(perms[c], axis=0, return_inverse=True)
        for u, perm in enumerate(uniq):
            block = labels[c, np.flatnonzero(which.ravel() == u)]
            inverse = np.argsort(perm)
            for raw in range(k):
                out[c, ..., inverse[raw]] += (block == raw).sum(0)
    return out / max(draws, 1)


@dataclass
class GibbsFit(PottsFit):
    """:class:`~latentfs.inference.hmrf.family.PottsFit` with the emission prior in standardised coordinates
    (:meth:`~latentfs.inference.hmrf.family.LatticeFamily.prior`)."""

    prior: dict[str, torch.Tensor] = field(default_factory=dict)


def _interaction_step(name: str, value: Any) -> float | None:
    if value is None:
        return None
    return check_float(name, value, 0.0, low_open=True, remedy=f"Pass e.g. {name}=0.02, or None.")


class PottsGibbs(EngineSpec):
    """Checkerboard Gibbs with conjugate emissions and a pseudo-likelihood Metropolis step for η
    (:func:`latentfs.fit` with ``method="gibbs"``; see the module docstring for what the η draws are).

    Parameters
    ----------
    data : array (H, W) or (H, W, d)
    interaction : float, optional
        A fixed η (no Metropolis step); by default η is sampled (with one label η is not identified and is fixed
        at 0; :func:`~latentfs.inference.hmrf.family.check_interaction`).
    interaction_step : float, optional
        Random-walk standard deviation for η (default from the pseudo-likelihood's curvature at the start).
    num_chains, num_warmup, num_samples, thin, seed : the sampler loop (:func:`~latentfs.core.driver.run_sampler`).
        Each chain starts from ICM's k-means start.

    Returns
    -------
    Posterior
        Draws of ``interaction``, ``means``, ``variance``, relabelled per draw on every component site jointly
        by the pipeline, in standardised coordinates, where R̂/ESS are checked too (``diagnostics["convergence"]``;
        ``interaction`` only when it is sampled), then mapped to the data's units (:meth:`after_align`);
        ``extras["label_marginals"]`` (chain, H, W, K), the share of each chain's kept draws with each aligned
        label, and ``extras["labels"]`` (H, W), the marginal modes; ``sample_stats["interaction_accepted"]``;
        ``diagnostics["at_bound"]`` (``["interaction"]`` when the median η draw lies in the top 5% of
        [0, interaction_max], with an :class:`~latentfs.inference.hmrf.family.InteractionAtBoundWarning`). The fit
        is equivariant to an affine change of each feature's units.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.hmrf import HiddenPotts
    >>> sim = HiddenPotts(2).simulate((16, 16), params={"interaction": 0.8, "means": [[0.0], [3.0]],
    ...                                                 "precision": [[1.0], [1.0]]}, seed=0)
    >>> res = latentfs.fit(HiddenPotts(2), sim["data"], method="gibbs", num_chains=2, num_warmup=20,
    ...                    num_samples=30, seed=0, warn=False)
    >>> res.samples("interaction").shape, res.extras["label_marginals"].shape
    ((2, 30), (2, 16, 16, 2))
    """

    method = "gibbs"
    kind = "sampler"
    desc = "Gibbs"
    options = {
        **chain_options(num_chains=4, num_warmup=200, num_samples=500),
        "interaction": INTERACTION,
        "interaction_step": Option(None, _interaction_step, "float > 0 or None",
                                   "random-walk sd of η; None: 2.4 / √(−∂² log PL) at each chain's start"),
    }

    def prepare(self, model: Any, data: Any, o: Options) -> GibbsFit:
        base = prepare_fit(model, data, o)
        return GibbsFit(model=base.model, fam=base.fam, fixed=base.fixed, reg=base.reg, prior=base.fam.prior())

    def init(self, prep: GibbsFit, o: Options, gen: torch.Generator) -> dict[str, Any]:
        start = initial_state(prep.fam, gen, prep.reg, prep.fixed)
        onehot = prep.fam.onehot(start["labels"])
        step = o.interaction_step if o.interaction_step is not None else interaction_step_size(onehot, start["eta"])
        return {**start, "step": step, "accepted": False}

    def sample(self, prep: GibbsFit, o: Options, state: dict[str, Any],
               gen: torch.Generator) -> tuple[dict[str, Any], float]:
        fam, eta = prep.fam, state["eta"]
        log_g = fam.standard_log_emission(state["means"], state["variance"])
        labels = potts_sweep(state["labels"], log_g, eta, fam.k, gen)
        means, variance = conjugate_emissions(fam, labels, prep.prior, gen)
        accepted = False
        if prep.fixed is None:
            eta, accepted = metropolis_interaction(fam.onehot(labels), eta, state["step"], prep.model.interaction_max,
                                                   gen)
        lp = icm_objective(fam, labels, fam.standard_log_emission(means, variance), eta) + prep.jacobian
        new = {"labels": labels, "means": means, "variance": variance, "eta": eta, "step": state["step"],
               "accepted": accepted}
        return new, lp

    def collect(self, prep: GibbsFit, o: Options, state: dict[str, Any]) -> dict[str, Any]:
        return {
            "interaction": np.asarray(state["eta"], dtype=np.float64),
            "means": state["means"].numpy(),
            "variance": state["variance"].numpy(),
            "interaction_accepted": np.asarray(state["accepted"]),
            "labels": state["labels"].numpy().astype(np.uint8 if prep.fam.k <= 256 else np.int32),
        }

    def export(self, prep: GibbsFit, o: Options, outcome: Any) -> Export:
        fam = prep.fam
        draws = dict(outcome.draws)
        accepted = draws.pop("interaction_accepted")
        draws.pop("labels")  # counted once the draws are aligned (after_align)
        if prep.fixed is not None:
            draws["interaction"] = np.full_like(draws["interaction"], prep.fixed)
        return Export(
            dims=fam.dims(),
            coords=fam.coords(),
            draws=draws,
            diagnostics={
                "observation_dim": "pixel",
                "n_pixels": fam.n,
                "interaction_estimated": prep.fixed is None,
                "interaction_target": "pseudo-likelihood (Besag 1975) times Uniform(0, interaction_max)",
                "interaction_step": [float(s["step"]) for s in outcome.final_states],
                "interaction_acceptance": float(accepted.mean()) if prep.fixed is None else None,
            },
            sample_stats={"interaction_accepted": accepted},
            # aligned, and checked, in standardised coordinates (finite at any scale of the data; R̂ and ESS do not
            # change under the affine map to the data's units that after_align applies)
            relabel=("means", "component"),
        )

    def after_align(self, post: Any, prep: GibbsFit, o: Options, outcome: Any) -> None:
        """The label marginals of the aligned draws; the draws in the data's units; the η-at-bound flag."""
        fam = prep.fam
        labels = outcome.draws["labels"]
        perms = post.relabel_permutations
        if perms is None:  # pragma: no cover - align always records them for a sampled site
            perms = np.broadcast_to(np.arange(fam.k), (*labels.shape[:2], fam.k))
        marginals = relabelled_marginals(labels, perms, fam.k)
        post.extras["label_marginals"] = marginals
        post.extras["labels"] = marginals.mean(0).argmax(-1).astype(np.int64)
        if prep.fixed is not None:  # a fixed η is not sampled: its draws are a constant, with nothing to check
            post.diagnostics["convergence"].pop("interaction", None)
        # samples() hands back the stored arrays: map them to the data's units where they are.
        means_draws, variance_draws = post.samples("means"), post.samples("variance")
        means_draws[...], variance_draws[...] = fam.to_data_units(means_draws, variance_draws)
        warn_overflowed_variance(variance_draws, "gibbs", warn=bool(o.warn))
        flag_interaction_at_bound(post, post.samples("interaction"), prep.model, estimated=prep.fixed is None,
                                  warn=bool(o.warn))


register_spec(PottsGibbs(), HiddenPotts)
