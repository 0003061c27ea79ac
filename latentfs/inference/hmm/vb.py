"""Variational Bayes for hidden Markov models; MacKay (1997), Beal (2003) ch. 3, Titterington (2006) §1.6.

The posterior p(θ, z | y) is approximated by q(θ) q(z) (Beal 2003, eq. 3.52), with q(θ) in the conjugate
family of the Gibbs sampler: q(π) = Dirichlet(w_π), each row q(A_k·) = Dirichlet(w_A,k·) and the emission
parameters Normal–Gamma (``diag``), Normal–Wishart (``full``) or Dirichlet (categorical) — the finite
mixture's q (:mod:`latentfs.inference.mixture.vb`) with the state marginals in place of the
responsibilities. Each iteration, at the current q(θ):

* **VB E-step** (Beal eqs. 3.68–3.71; MacKay 1997): q(z) is the hidden Markov chain with the
  *sub-normalised* parameters π̃_k = exp E[log π_k] = exp(ψ(w_π,k) − ψ(Σ_l w_π,l)),
  Ã_kl = exp E[log A_kl] = exp(ψ(w_A,kl) − ψ(Σ_m w_A,km)) and b̃_k(y_t) = exp E[log g_k(y_t)]; rows of π̃
  and Ã sum to less than one (Jensen), and the ordinary forward–backward pass
  (:func:`~latentfs.inference.hmm.forward_backward.forward_backward`, which normalises per step) gives its
  marginals γ_t, Σ ξ_t and the normalisers Z̃_s = Σ_z π̃_{z_1} b̃_{z_1}(y_1) Π_t Ã_{z_{t−1} z_t} b̃_{z_t}(y_t);
* the **bound** at that optimal q(z) is ℒ = Σ_s log Z̃_s − KL(q(π) ‖ p(π)) − Σ_k KL(q(A_k·) ‖ p(A_k·))
  − KL(q(φ) ‖ p(φ)) (Beal eq. 3.73: the q(z) entropy and expected log joint collapse into log Z̃);
* **VB M-step** (Beal eqs. 3.63–3.65): w_π = α_π + Σ_s γ_{start_s}, w_A = α_A + Σ_t ξ_t, and q(φ) the
  conjugate update with the soft state counts γ.

Both halves are coordinate ascent steps on ℒ, so ℒ never decreases.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.distributions import Dirichlet, kl_divergence

from latentfs.core.data import DataError, check_choice
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.inference.hmm.em import (
    HMM_OPTIONS,
    INITIALISATIONS,
    _hyperparameters,
    _transition_counts,
    initial_states,
)
from latentfs.inference.hmm.family import HMMFamily, prepare
from latentfs.inference.hmm.forward_backward import ForwardBackward, forward_backward
from latentfs.inference.hmm.gibbs import chain_prior
from latentfs.inference.mixture.gibbs import conjugate_posterior
from latentfs.inference.mixture.vb import expected_log_component, kl_parameters
from latentfs.models.hmm import CategoricalHMM, GaussianHMM

__all__ = [
    "expected_log_dirichlet",
    "initial_posterior",
    "kl_chain",
    "vb_bound",
    "vb_e_step",
    "vb_m_step",
    "vb_step",
]


def expected_log_dirichlet(conc: torch.Tensor) -> torch.Tensor:
    """E[log p] under Dirichlet(conc) along the last axis: ψ(c_k) − ψ(Σ_l c_l)."""
    return torch.digamma(conc) - torch.digamma(conc.sum(-1, keepdim=True))


def subnormalised_parameters(fam: HMMFamily, q: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """π̃ (K,), Ã (K, K) and log b̃ = E_q[log g_k(y_t)] (N, K), the parameters of the chain q(z)."""
    start = torch.exp(expected_log_dirichlet(q["start"]))
    trans = torch.exp(expected_log_dirichlet(q["trans"]))
    return start, trans, expected_log_component(fam.emission, q["emission"])


def vb_e_step(fam: HMMFamily, q: dict[str, Any]) -> ForwardBackward:
    """q(z) at q(θ): forward–backward with the sub-normalised parameters; ``log_likelihood`` holds log Z̃_s."""
    start, trans, log_em = subnormalised_parameters(fam, q)
    return forward_backward(start, trans, log_em, fam.layout)


def kl_chain(q: dict[str, Any], pr: dict[str, Any]) -> torch.Tensor:
    """KL(q(π) ‖ p(π)) + Σ_k KL(q(A_k·) ‖ p(A_k·)), Dirichlet in closed form."""
    return kl_divergence(Dirichlet(q["start"]), Dirichlet(pr["start"])) + kl_divergence(
        Dirichlet(q["trans"]), Dirichlet(pr["trans"])
    ).sum()


def kl_emission(fam: HMMFamily, q: dict[str, Any], pr: dict[str, Any]) -> torch.Tensor:
    """KL(q(φ) ‖ p(φ)) of the emission parameters. The mixture's KL also holds a Dirichlet term for its
    weights, which an HMM does not have: it is set to zero by giving q the prior's weights."""
    return kl_parameters(fam.emission, {**q["emission"], "alpha": pr["emission"]["alpha"]}, pr["emission"])


def vb_bound(fam: HMMFamily, fb: ForwardBackward, q: dict[str, Any], pr: dict[str, Any]) -> float:
    """ℒ(q(θ), q*(z)) = Σ_s log Z̃_s − KL(q(θ) ‖ p(θ)) (Beal 2003, eq. 3.73)."""
    return float(fb.log_likelihood.sum() - kl_chain(q, pr) - kl_emission(fam, q, pr))


def vb_m_step(
    fam: HMMFamily, gamma: torch.Tensor, xi_sum: torch.Tensor, pr: dict[str, Any]
) -> dict[str, Any]:
    """q(θ) from the (soft) state statistics: w_π = α_π + Σ_s γ_{start_s}, w_A = α_A + Σ_t ξ_t, and the
    emission's conjugate update with weights γ."""
    return {
        "start": pr["start"] + gamma[fam.layout.starts].sum(0),
        "trans": pr["trans"] + xi_sum,
        "emission": conjugate_posterior(fam.emission, fam.emission.statistics(gamma), pr["emission"]),
    }


def vb_step(fam: HMMFamily, q: dict[str, Any], pr: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """One sweep: returns the new q(θ) and the bound ℒ at the *input* q(θ) (with its optimal q(z))."""
    fb = vb_e_step(fam, q)
    return vb_m_step(fam, fb.gamma, fb.xi_sum, pr), vb_bound(fam, fb, q, pr)


def initial_posterior(fam: HMMFamily, init: str | None, gen: torch.Generator, pr: dict[str, Any]) -> dict[str, Any]:
    """q(θ) from starting states (k-means or random, as EM): the M-step of their weights, with the hard
    labels' transition counts."""
    resp, labels = initial_states(fam, init, gen)
    return vb_m_step(fam, resp, _transition_counts(fam, labels), pr)


def _fitted_sites(fam: HMMFamily, q: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, np.ndarray]]:
    """The Posterior's sites and the exact variational parameters kept in ``extras``.

    ``startprob``, ``transmat`` and ``emission_probs`` are Dirichlet; diagonal Gaussian ``precision`` is
    Gamma(a, b), and ``means`` is Normal with q's location and the variance of the marginal Student-t
    b / ((a − 1) κ) (the conditional q(μ | λ) = N(m, (κλ)⁻¹) is kept via ``extras["mean_precision"]`` = κ).
    Full covariances: ``precision`` is the Wishart q(Λ) = W(ν, W) itself (mean νW, drawn on demand); ν and
    W⁻¹ are also in ``extras`` (``precision_dof``, ``precision_scale_inv``). Computed on the host.
    """
    q = {"start": q["start"].cpu(), "trans": q["trans"].cpu(),
         "emission": {name: value.cpu() for name, value in q["emission"].items()}}
    sites: dict[str, dict[str, Any]] = {
        "startprob": {"family": "dirichlet", "concentration": q["start"].numpy().copy()},
        "transmat": {"family": "dirichlet", "concentration": q["trans"].numpy().copy()},
    }
    em = q["emission"]
    if fam.categorical:
        sites["emission_probs"] = {"family": "dirichlet", "concentration": em["item_concentration"].numpy().copy()}
        return sites, {}
    k, d = fam.k, fam.n_features
    emission = fam.emission
    extras = {"mean_precision": em["kappa"].numpy().copy()}
    if emission.kind == "wishart":
        denom = (em["dof"] - d - 1).clamp_min(1e-3)[:, None]
        var = torch.diagonal(em["scale_inv"], dim1=-2, dim2=-1) / denom / em["kappa"][:, None]
        scale = torch.linalg.inv(em["scale_inv"])
        scale = 0.5 * (scale + scale.transpose(-1, -2))
        sites["precision"] = {"family": "wishart", "dof": em["dof"].numpy().copy(), "scale": scale.numpy()}
        extras.update(precision_dof=em["dof"].numpy().copy(), precision_scale_inv=em["scale_inv"].numpy().copy())
    else:
        a, b = em["shape"].expand(k, d), em["rate"].expand(k, d)
        var = b / (a - 1).clamp_min(1e-3) / em["kappa"]
        sites["precision"] = {"family": "gamma", "concentration": a.numpy().copy(), "rate": b.numpy().copy()}
    sites["means"] = {"family": "normal", "loc": (em["mean"] + emission.shift.cpu()).numpy(),
                      "scale": var.sqrt().numpy()}
    return sites, extras


def _vb_init_option(name: str, value: Any) -> Any:
    if value is None:
        return value
    if not isinstance(value, str):
        raise DataError(f"init must be one of {list(INITIALISATIONS)} for VB; got {type(value).__name__}.")
    return check_choice(name, value, INITIALISATIONS)


class HMMVB(EngineSpec):
    """Variational Bayes with restarts (:func:`latentfs.fit` with ``method="vb"``); the best bound wins.

    Parameters
    ----------
    lengths : sequence of int, optional
        As for EM (:class:`~latentfs.inference.hmm.em.HMMEM`).
    n_init : int
        Restarts, start r drawn from the r-th generator spawned from ``seed``; the run with the highest final
        bound is kept.
    init : {"kmeans", "random"}, optional
        Starting states, as for EM: k-means (default for Gaussian emissions) or random responsibilities
        (default for categorical emissions); q(θ) starts at their conjugate update.
    max_iter, tol : stopping rule on the relative change of the bound.
    device : str or torch.device
        Where the updates run (``"cpu"``, ``"cuda"``, ``"cuda:1"``), in float64; starts are drawn on the host and
        the result holds NumPy arrays.

    Returns
    -------
    Posterior
        Fitted distributions (see :func:`_fitted_sites`), the bound per iteration in ``trace``, the final
        bound in ``diagnostics["bound"]``, and q(z)'s marginals in ``extras["state_marginals"]``.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.hmm import CategoricalHMM
    >>> sim = CategoricalHMM(2, 3).simulate(3, 40, seed=0)
    >>> res = latentfs.fit(CategoricalHMM(2), sim["data"], method="vb", lengths=sim["lengths"], seed=0)
    >>> res.kind(), res.samples("transmat", 10).shape
    ('distribution', (1, 10, 2, 2))
    """

    affine_equivariant = True  # checked by check_engine: the fit of a·X + b is the fit of X transformed

    method = "vb"
    kind = "optimizer"
    desc = "VB"
    options = {
        **HMM_OPTIONS,
        "init": Option(None, _vb_init_option, "str or None", "'kmeans' or 'random' starting states"),
        "tol": shared("tol", 1e-8),
    }

    def prepare(self, model: Any, data: Any, o: Options) -> Any:
        from types import SimpleNamespace

        fam = prepare(model, data, o.lengths, device=o.device)
        return SimpleNamespace(model=model, fam=fam, pr=chain_prior(fam))

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> Any:
        return initial_posterior(prep.fam, o.init, gen, prep.pr)

    def step(self, prep: Any, o: Options, state: Any) -> tuple[Any, float]:
        return vb_step(prep.fam, state, prep.pr)  # type: ignore[no-any-return]

    def hyperparameters(self, model: Any, prep: Any, o: Options) -> dict[str, Any]:
        return _hyperparameters(model, prep.fam)

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        fam, model, q = prep.fam, prep.model, outcome.run.state
        fb = vb_e_step(fam, q)
        bound = vb_bound(fam, fb, q, prep.pr)
        start, trans, log_em = subnormalised_parameters(fam, q)
        sites, extras = _fitted_sites(fam, q)
        diag = {
            "bound": bound,
            "n_observations": fam.n,
            "n_sequences": len(fam.data.lengths),
            "n_parameters": model.n_parameters(fam.n_features),
            "observation_dim": "sequence",
        }
        return Export(
            dims={site: dim for site, dim in fam.dims().items() if site in sites}, coords=fam.coords(),
            fitted=sites, diagnostics=diag,
            extras={
                "state_marginals": fb.gamma.cpu().numpy(),
                "lengths": fam.data.lengths,
                "log_normaliser": fb.log_likelihood.cpu().numpy(),
                "startprob_subnormalised": start.cpu().numpy(),
                "transmat_subnormalised": trans.cpu().numpy(),
                "expected_log_emission": log_em.cpu().numpy(),
                **extras,
            },
        )


register_spec(HMMVB(), GaussianHMM, CategoricalHMM)
