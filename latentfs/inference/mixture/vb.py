"""Mean-field variational Bayes for finite mixtures; Titterington (2006) §1.6, Bishop (2006) §10.2.

q(θ, z) = q(θ) Π_n q(z_n), with q(θ) in the conjugate family of :mod:`latentfs.inference.mixture.gibbs`
(Dirichlet weights; Normal–Wishart, Normal–Gamma or Beta/Dirichlet component parameters). Each
iteration, at the current q(θ):

* ρ_nk = E[log η_k] + E[log g_k(y_n)] (Bishop eq. 10.46) and q(z_n = k) = r_nk = softmax_k ρ_nk;
* the bound at that optimal q(z) is ℒ = Σ_n log Σ_k exp ρ_nk − KL(q(θ) ‖ p(θ)) (the q(z) terms collapse into
  the log-sum-exp);
* q(θ) ← conjugate update from the soft statistics of r (Bishop eqs. 10.58–10.63).

Both halves are coordinate ascent steps, so ℒ never decreases.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.distributions import Dirichlet, Gamma, kl_divergence

from latentfs.core.data import check_choice
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.inference.mixture.em import _check_n_init, _coords, entropy_of
from latentfs.inference.mixture.families import (
    FULL_E_STEPS,
    CategoricalFamily,
    GaussianFamily,
    _gaussian_log_diagonal,
    family_for,
    responsibilities,
)
from latentfs.inference.mixture.gibbs import conjugate_posterior, prior_tensors
from latentfs.inference.mixture.starts import INITIALISATIONS, initial_responsibilities
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

__all__ = ["expected_log_component", "kl_wishart", "kl_parameters", "vb_step"]

_LOG_2PI = math.log(2 * math.pi)


def _multi_digamma(x: torch.Tensor, d: int) -> torch.Tensor:
    """ψ_d(x) = Σ_{i=1}^{d} ψ(x + (1 − i)/2)."""
    i = torch.arange(d, dtype=x.dtype, device=x.device)
    return torch.digamma(x[..., None] - i / 2).sum(-1)


def expected_logdet_wishart(dof: torch.Tensor, scale_inv: torch.Tensor) -> torch.Tensor:
    """E[log |Λ|] = ψ_d(ν/2) + d log 2 + log |W| (Bishop eq. 10.65), W = scale_inv⁻¹."""
    d = scale_inv.shape[-1]
    return _multi_digamma(dof / 2, d) + d * math.log(2.0) - torch.logdet(scale_inv)


def kl_wishart(
    dof: torch.Tensor, scale_inv: torch.Tensor, dof0: torch.Tensor, scale_inv0: torch.Tensor
) -> torch.Tensor:
    """KL(Wishart(ν, W) ‖ Wishart(ν0, W0)) with W = scale_inv⁻¹ (batched over leading axes):
    (ν − ν0)/2 E[log|Λ|] − ν d/2 + ν/2 tr(W0⁻¹ W) − (ν − ν0) d/2 log 2 − ν/2 log|W| + ν0/2 log|W0|
    − log Γ_d(ν/2) + log Γ_d(ν0/2)."""
    d = scale_inv.shape[-1]
    w = torch.linalg.inv(scale_inv)
    logdet_w, logdet_w0 = -torch.logdet(scale_inv), -torch.logdet(scale_inv0)
    e_logdet = expected_logdet_wishart(dof, scale_inv)
    trace = torch.einsum("...ij,...ji->...", scale_inv0, w)
    return (
        (dof - dof0) / 2 * e_logdet
        - dof * d / 2
        + dof / 2 * trace
        - (dof - dof0) * d / 2 * math.log(2.0)
        - dof / 2 * logdet_w
        + dof0 / 2 * logdet_w0
        - torch.mvlgamma(dof / 2, d)
        + torch.mvlgamma(dof0 / 2, d)
    )


def _kl_dirichlet_blocks(conc: torch.Tensor, conc0: torch.Tensor, block: torch.Tensor, n_blocks: int) -> torch.Tensor:
    """Σ over blocks of KL(Dir(α_block) ‖ Dir(α0_block)) along the last axis (blocks = items of a latent class)."""

    def bsum(v: torch.Tensor) -> torch.Tensor:
        return torch.zeros(*v.shape[:-1], n_blocks, dtype=v.dtype, device=v.device).index_add_(-1, block, v)

    a_sum = bsum(conc)
    kl = (
        torch.lgamma(a_sum)
        - torch.lgamma(bsum(conc0))
        - bsum(torch.lgamma(conc))
        + bsum(torch.lgamma(conc0))
        + bsum((conc - conc0) * (torch.digamma(conc) - torch.digamma(a_sum)[..., block]))
    )
    return kl.sum()


def _expected_log_gaussian(fam: GaussianFamily, q: dict[str, torch.Tensor]) -> torch.Tensor:
    """E_q[log N(x_n; μ_k, Λ_k⁻¹)] (Bishop eq. 10.64–10.67; diagonal analogue with E[λ] = a/b,
    E[log λ] = ψ(a) − log b; missing entries contribute nothing)."""
    if fam.kind == "wishart":
        w = torch.linalg.inv(q["scale_inv"])
        e_prec = q["dof"][:, None, None] * w
        params = {
            "means": q["mean"],
            "precision": e_prec,
            "logdet_precision": expected_logdet_wishart(q["dof"], q["scale_inv"]),
        }
        return FULL_E_STEPS[fam.e_step_variant](fam, params) - 0.5 * fam.d / q["kappa"]
    a, b = q["shape"], q["rate"]
    e_lam = (a / b).expand(fam.k, fam.d)
    base = _gaussian_log_diagonal(fam, {"means": q["mean"], "precision": e_lam})
    # base used log E[λ]; swap in E[log λ] and add the mean's uncertainty −1/(2κ) per observed entry.
    corr = (0.5 * (torch.digamma(a) - torch.log(a))).expand(fam.k, fam.d) - 0.5 / q["kappa"]
    return base + fam.obs @ corr.T


def _expected_log_items(fam: CategoricalFamily, q: dict[str, torch.Tensor]) -> torch.Tensor:
    """E_q[log g_k(y_n)] = Σ_i Σ_s y_nis (ψ(c_iks) − ψ(Σ_s c_iks))."""
    return fam.onehot @ _expected_log_probs(fam, q["item_concentration"]).T


def _expected_log_probs(fam: CategoricalFamily, conc: torch.Tensor) -> torch.Tensor:
    totals = torch.zeros(conc.shape[0], fam.d, dtype=conc.dtype, device=conc.device).index_add_(
        1, fam.item_of_level, conc)
    return torch.digamma(conc) - torch.digamma(totals)[:, fam.item_of_level]


def expected_log_component(fam: Any, q: dict[str, torch.Tensor]) -> torch.Tensor:
    """ρ_nk − E[log η_k], shape (n, K)."""
    return (_expected_log_items if fam.kind == "categorical" else _expected_log_gaussian)(fam, q)


def kl_parameters(fam: Any, q: dict[str, torch.Tensor], pr: dict[str, torch.Tensor]) -> torch.Tensor:
    """KL(q(θ) ‖ p(θ)) in closed form: Dirichlet weights + component parameters."""
    kl = kl_divergence(Dirichlet(q["alpha"]), Dirichlet(pr["alpha"]))
    if fam.kind == "categorical":
        conc0 = pr["item"].expand_as(q["item_concentration"])
        return kl + _kl_dirichlet_blocks(q["item_concentration"], conc0, fam.item_of_level, fam.d)
    d = fam.d
    kappa, kappa0 = q["kappa"], pr["kappa"]
    dev = q["mean"] - pr["mean"]
    if fam.kind == "wishart":
        # KL of the precision(s), plus E_Λ KL(N(m_k, (κ_k Λ)⁻¹) ‖ N(m0, (κ0 Λ)⁻¹)) per component.
        kl_prec = kl_wishart(q["dof"], q["scale_inv"], pr["dof"], pr["scale_inv"]).sum()
        e_prec = q["dof"][:, None, None] * torch.linalg.inv(q["scale_inv"])
        maha = torch.einsum("ki,kij,kj->k", dev, e_prec.expand(fam.k, d, d), dev)
        kl_mean = 0.5 * (d * kappa0 / kappa - d + d * torch.log(kappa / kappa0) + kappa0 * maha).sum()
        return kl + kl_prec + kl_mean
    a, b = q["shape"], q["rate"]
    kl_prec = kl_divergence(Gamma(a.expand_as(b), b), Gamma(pr["shape"].expand_as(b), pr["rate"].expand_as(b))).sum()
    e_lam = (a / b).expand(fam.k, d)
    kl_mean = 0.5 * (kappa0 / kappa - 1 + torch.log(kappa / kappa0) + kappa0 * e_lam * dev**2).sum()
    return kl + kl_prec + kl_mean


def vb_step(fam: Any, q: dict[str, torch.Tensor], pr: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], float]:
    """One coordinate-ascent sweep: returns the new q(θ) and the bound ℒ at the input q(θ) (with its optimal q(z))."""
    rho = torch.digamma(q["alpha"]) - torch.digamma(q["alpha"].sum()) + expected_log_component(fam, q)
    resp, lse = responsibilities(rho)
    bound = float(lse.sum() - kl_parameters(fam, q, pr))
    return conjugate_posterior(fam, fam.statistics(resp), pr), bound


def _fitted_sites(fam: Any, q: dict[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Sites for the Posterior, storing q(θ) itself: Dirichlet weights; Wishart (ν_k, W_k) or Gamma
    (a, b) precisions; Normal means with the marginal Student-t matched by its variance, plus ``kappa`` κ_k
    so that the conditional q(μ_k | Λ_k) = N(m_k, (κ_k Λ_k)⁻¹) can be rebuilt (Bishop 2006, eq. 10.59);
    plug-in covariance E[Λ]⁻¹ as a point; latent-class probabilities at their means (their Dirichlet
    concentrations are in ``extras["item_concentration"]``). Computed on the host from q(θ) moved there."""
    q = {name: value.cpu() for name, value in q.items()}
    out: dict[str, dict[str, Any]] = {"weights": {"family": "dirichlet", "concentration": q["alpha"].numpy()}}
    if fam.kind == "categorical":
        conc = q["item_concentration"]
        item_of_level = fam.item_of_level.cpu()
        totals = torch.zeros(conc.shape[0], fam.d, dtype=conc.dtype).index_add_(1, item_of_level, conc)
        out["item_probs"] = {"family": "point", "value": fam.to_item_probs(conc / totals[:, item_of_level])}
        return out
    k, d = fam.k, fam.d
    shape = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,), "tied_diag": (d,)}[
        fam.covariance_type
    ]
    means = (q["mean"] + fam.shift.cpu()).numpy()
    if fam.kind == "wishart":
        w = torch.linalg.inv(q["scale_inv"])
        w = 0.5 * (w + w.transpose(-1, -2))
        e_prec = q["dof"][:, None, None] * w
        denom = (q["dof"] - d - 1).clamp_min(1e-3)[:, None]
        var = torch.diagonal(q["scale_inv"], dim1=-2, dim2=-1) / denom / q["kappa"][:, None]
        tied = fam.covariance_type == "tied"
        out["precision"] = {
            "family": "wishart",
            "dof": (q["dof"][0] if tied else q["dof"]).numpy(),
            "scale": w.reshape(shape).numpy(),
        }
        out["covariance"] = {"family": "point", "value": torch.linalg.inv(e_prec).reshape(shape).numpy()}
    else:
        a, b = q["shape"].expand_as(q["rate"]), q["rate"]
        var = (b / (a - 1).clamp_min(1e-3)).expand(k, d) / q["kappa"]
        out["precision"] = {
            "family": "gamma",
            "concentration": a.reshape(shape).numpy(),
            "rate": b.reshape(shape).numpy(),
        }
        out["covariance"] = {"family": "point", "value": (b / a).reshape(shape).numpy()}
    kappa = q["kappa"].expand(k) if q["kappa"].dim() <= 1 else q["kappa"]
    out["means"] = {"family": "normal", "loc": means, "scale": var.sqrt().numpy(), "kappa": kappa.numpy()}
    return out


def _init_option(name: str, value: Any) -> Any:
    return None if value is None else check_choice(name, value, sorted(INITIALISATIONS))


def _bound_at(fam: Any, q: dict[str, torch.Tensor], pr: dict[str, torch.Tensor]) -> tuple[torch.Tensor, float]:
    """The responsibilities and the bound ℒ at q(θ) with its optimal q(z)."""
    rho = torch.digamma(q["alpha"]) - torch.digamma(q["alpha"].sum()) + expected_log_component(fam, q)
    resp, lse = responsibilities(rho)
    return resp, float(lse.sum() - kl_parameters(fam, q, pr))


class MixtureVB(EngineSpec):
    """Mean-field VB with restarts (:func:`latentfs.fit` with ``method="vb"``); the best bound wins.

    Start r draws its responsibilities from the r-th generator spawned from ``seed`` (the pipeline's restart rule),
    so the starts run one after another or in worker processes with the same result.

    ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``) is where the updates run, in float64; the starts are drawn
    on the host and moved there, and the result holds NumPy arrays.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.mixture import LatentClass
    >>> lc = LatentClass(2)
    >>> X = lc.simulate(200, 5, seed=0)["items"]
    >>> res = latentfs.fit(lc, X, method="vb", seed=0)
    >>> res.samples("weights").shape, bool(res.diagnostics["converged"])
    ((1, 200, 2), True)
    """

    affine_equivariant = True  # checked by check_engine: the fit of a·X + b is the fit of X transformed

    method = "vb"
    kind = "optimizer"
    desc = "VB"
    remedies = "raise max_iter, loosen tol, or raise n_init"
    options = {
        "n_init": shared("n_init", 3, "random starts; the best bound is kept"),
        "init": Option(None, _init_option, "str or None", "'kmeans', 'kmeans++' or 'random' starting responsibilities"),
        "max_iter": shared("max_iter", 1000),
        "tol": shared("tol", 1e-8),
        "seed": shared("seed"),
        "warn": shared("warn"),
        "progress": shared("progress"),
        "callback": shared("callback", meaning="called as callback(iteration, q, bound)"),
        "device": shared("device"),
    }
    errors = {FloatingPointError: "The data may hold extreme values or near-duplicate rows: rescale the columns, "
                                  "or set a stronger prior (covariance_prior, degrees_of_freedom)."}

    def prepare(self, model: Any, data: Any, o: Options) -> Any:
        from types import SimpleNamespace

        fam = family_for(model, data, device=o.device)
        return SimpleNamespace(model=model, fam=fam, pr=prior_tensors(fam), n_starts=_check_n_init(fam, o.n_init))

    def n_starts(self, prep: Any, o: Options) -> int:
        return int(prep.n_starts)

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> Any:
        resp0 = initial_responsibilities(prep.fam, o.init, gen)
        return conjugate_posterior(prep.fam, prep.fam.statistics(resp0), prep.pr)

    def step(self, prep: Any, o: Options, state: Any) -> tuple[Any, float]:
        return vb_step(prep.fam, state, prep.pr)

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        fam, q = prep.fam, outcome.run.state
        resp, bound = _bound_at(fam, q, prep.pr)
        diag = {
            "bound": bound,
            "n_observations": fam.n,
            "n_parameters": prep.model.n_parameters(fam.d),
            "entropy": entropy_of(resp),
            "observation_dim": "sample",
        }
        extras = {"responsibilities": resp.cpu().numpy()}
        if fam.kind == "categorical":
            extras["item_concentration"] = q["item_concentration"].cpu().numpy()
        return Export(dims=fam.dims(), coords=_coords(fam), fitted=_fitted_sites(fam, q), extras=extras,
                      diagnostics=diag)


register_spec(MixtureVB(), GaussianMixture, LatentProfile, LatentClass)
