"""Block Gibbs sampling with data augmentation for finite mixtures; Titterington (2006) §1.6.

Each sweep draws z ~ p(z | θ, y) (one categorical per row, τ_n· of the EM E-step) and then θ ~ p(θ | z, y)
from the conjugate posterior (Diebolt & Robert 1994): η | z ~ Dirichlet(α + n), and per component a
Normal–Wishart (``full``/``tied``; Bishop 2006 eqs. 10.60–10.63 with hard counts) or Normal–Gamma
(diagonal types) update, or Beta/Dirichlet updates of the item probabilities (latent class).
Chains run through :func:`run_sampler`; every draw is relabelled within and across chains
(``Posterior.align``, Stephens 2000) before R̂ and ESS are computed and checked.

:func:`conjugate_posterior` maps (possibly soft) sufficient statistics to the posterior hyperparameters;
the VB engine reuses it with responsibilities in place of hard counts.
"""

from __future__ import annotations

from typing import Any

import torch

from latentfs.core.data import check_choice
from latentfs.core.options import check_flag
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options
from latentfs.core.random import dirichlet_sample, group_softmax, log_gamma_sample
from latentfs.core.registry import register_spec
from latentfs.inference.mixture.em import _coords
from latentfs.inference.mixture.families import (
    CategoricalFamily,
    GaussianFamily,
    family_for,
    log_joint_components,
    responsibilities,
)
from latentfs.inference.mixture.starts import INITIALISATIONS, initial_responsibilities
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

__all__ = ["conjugate_posterior", "prior_tensors", "sample_parameters", "sample_wishart"]


# ----------------------------------------------------------------------------- priors
def prior_tensors(fam: Any) -> dict[str, torch.Tensor]:
    """The model's resolved prior as float64 tensors, in the family's centred coordinates.

    Gaussian: ``alpha`` (K,), ``mean`` m0 (d,), ``kappa`` κ0, and either ``dof`` ν0 with ``scale_inv`` W0⁻¹ =
    ν0 Σ0 (Wishart types) or ``shape`` a0 = ν0/2 with ``rate`` b0 = ν0 σ0²/2 (Gamma types, b0 averaged over
    features for ``spherical``). Latent class: ``alpha`` and ``item`` c. On the family's device.
    """
    model, dev = fam.model, fam.device
    alpha = torch.full((fam.k,), float(model.weight_concentration), dtype=torch.float64, device=dev)
    if isinstance(fam, CategoricalFamily):
        return {"alpha": alpha, "item": torch.tensor(float(model.item_concentration), dtype=torch.float64, device=dev)}
    pr = {k: torch.as_tensor(v, dtype=torch.float64, device=dev) for k, v in model.prior(fam.raw, fam.d).items()}
    out = {"alpha": alpha, "mean": pr["mean"] - fam.shift, "kappa": pr["mean_precision"]}
    if fam.kind == "wishart":
        out.update(dof=pr["dof"], scale_inv=pr["dof"] * pr["covariance"])
    else:
        rate = pr["dof"] * pr["covariance"] / 2
        if fam.covariance_type == "spherical":
            rate = rate.mean().reshape(1, 1)
        out.update(shape=pr["dof"] / 2, rate=rate)
    return out


# ----------------------------------------------------------------------------- conjugate updates
def _normal_wishart_posterior(
    fam: GaussianFamily, st: dict[str, torch.Tensor], pr: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """κ_k = κ0 + N_k, m_k = (κ0 m0 + N_k x̄_k)/κ_k, ν_k = ν0 + N_k,
    W_k⁻¹ = W0⁻¹ + S_k + κ0 N_k/κ_k (x̄_k − m0)(x̄_k − m0)ᵀ (summed over k when tied); Bishop eqs. 10.60–10.63."""
    nk = st["n"]
    xbar = st["sum"] / nk[:, None]
    scatter = st["sum_sq"] - nk[:, None, None] * xbar[:, :, None] * xbar[:, None, :]
    kappa = pr["kappa"] + nk
    mean = (pr["kappa"] * pr["mean"] + nk[:, None] * xbar) / kappa[:, None]
    dev = xbar - pr["mean"]
    extra = scatter + (pr["kappa"] * nk / kappa)[:, None, None] * dev[:, :, None] * dev[:, None, :]
    if fam.covariance_type == "tied":
        return {
            "kappa": kappa,
            "mean": mean,
            "dof": (pr["dof"] + nk.sum()).reshape(1),
            "scale_inv": (pr["scale_inv"] + extra.sum(0))[None],
        }
    return {"kappa": kappa, "mean": mean, "dof": pr["dof"] + nk, "scale_inv": pr["scale_inv"] + extra}


_GROUP_AXES = {"diag": (), "spherical": (1,), "tied_diag": (0,)}


def _normal_gamma_posterior(
    fam: GaussianFamily, st: dict[str, torch.Tensor], pr: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """κ_kj = κ0 + N_kj, m_kj = (κ0 m0 + N_kj x̄_kj)/κ_kj, a = a0 + ½ Σ N_kj,
    b = b0 + ½ Σ [SS_kj + κ0 N_kj/κ_kj (x̄_kj − m0_j)²], the sums over the features (spherical) or
    components (tied_diag) that share a precision."""
    nkj = st["n"]
    xbar = st["sum"] / nkj
    ss = (st["sum_sq"] - xbar * st["sum"]).clamp_min(0.0)
    kappa = pr["kappa"] + nkj
    mean = (pr["kappa"] * pr["mean"] + nkj * xbar) / kappa
    extra = ss + pr["kappa"] * nkj / kappa * (xbar - pr["mean"]) ** 2
    axes = _GROUP_AXES[fam.covariance_type]
    shape_inc, rate_inc = nkj, extra
    if axes:
        shape_inc, rate_inc = nkj.sum(axes, keepdim=True), extra.sum(axes, keepdim=True)
    return {"kappa": kappa, "mean": mean, "shape": pr["shape"] + shape_inc / 2, "rate": pr["rate"] + rate_inc / 2}


def _dirichlet_items_posterior(
    fam: CategoricalFamily, st: dict[str, torch.Tensor], pr: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """θ_ik· | z ~ Dirichlet(c + Σ_n [z_n = k] y_ni·) (Beta for binary items)."""
    return {"item_concentration": pr["item"] + st["counts"]}


def conjugate_posterior(fam: Any, st: dict[str, torch.Tensor], pr: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Posterior hyperparameters of θ given (hard or soft) statistics; includes ``alpha`` = α + N_k."""
    n_k = st["n"] if getattr(fam, "kind", "") == "wishart" else st["n_k"]
    updates: dict[str, Any] = {
        "wishart": _normal_wishart_posterior,
        "gamma": _normal_gamma_posterior,
        "categorical": _dirichlet_items_posterior,
    }
    post = updates[fam.kind](fam, st, pr)
    post["alpha"] = pr["alpha"] + n_k
    return post


# ----------------------------------------------------------------------------- random draws with a generator
def sample_wishart(dof: torch.Tensor, scale_inv: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Λ ~ Wishart(ν, W) with W = scale_inv⁻¹, batched over the leading axis (Bartlett decomposition:
    Λ = L A Aᵀ Lᵀ, W = L Lᵀ, A lower triangular, A_ii² ~ χ²(ν − i), A_ij ~ N(0, 1) below the diagonal)."""
    g, d = scale_inv.shape[0], scale_inv.shape[-1]
    chol_w = torch.linalg.cholesky(torch.linalg.inv(scale_inv))
    idx = torch.arange(d, dtype=torch.float64)
    chi2 = 2.0 * torch._standard_gamma(((dof.reshape(-1, 1) - idx) / 2).expand(g, d).contiguous(), generator=gen)
    a = torch.tril(torch.randn(g, d, d, generator=gen, dtype=torch.float64), diagonal=-1)
    a = a + torch.diag_embed(chi2.sqrt())
    la = chol_w @ a
    return la @ la.transpose(-1, -2)


def _sample_gaussian_params(
    fam: GaussianFamily, post: dict[str, torch.Tensor], gen: torch.Generator
) -> dict[str, torch.Tensor]:
    if fam.kind == "wishart":
        prec = sample_wishart(post["dof"], post["scale_inv"], gen)
        prec = 0.5 * (prec + prec.transpose(-1, -2))
        chol = torch.linalg.cholesky(prec.expand(fam.k, fam.d, fam.d) * post["kappa"][:, None, None])
        eps = torch.randn(fam.k, fam.d, 1, generator=gen, dtype=torch.float64)
        means = post["mean"] + torch.linalg.solve_triangular(chol.transpose(-1, -2), eps, upper=True)[..., 0]
        cov = torch.linalg.inv(prec)
        logdet = torch.logdet(prec)
        return {"means": means, "precision": prec, "covariance": cov, "logdet_precision": logdet}
    lam = torch._standard_gamma(post["shape"].expand_as(post["rate"]).contiguous(), generator=gen) / post["rate"]
    lam = lam.clamp_min(1e-300)
    eps = torch.randn(fam.k, fam.d, generator=gen, dtype=torch.float64)
    means = post["mean"] + eps / (post["kappa"] * lam).sqrt()
    return {"means": means, "precision": lam, "covariance": 1.0 / lam, "logdet_precision": torch.log(lam)}


def _sample_item_params(
    fam: CategoricalFamily, post: dict[str, torch.Tensor], gen: torch.Generator
) -> dict[str, torch.Tensor]:
    # one Dirichlet per item, drawn in log space (small concentrations do not underflow)
    return {"probs": group_softmax(log_gamma_sample(post["item_concentration"], gen), fam.item_of_level)}


def sample_parameters(fam: Any, post: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """θ ~ p(θ | z, y) from the conjugate posterior hyperparameters."""
    params = (_sample_item_params if fam.kind == "categorical" else _sample_gaussian_params)(fam, post, gen)
    params["weights"] = dirichlet_sample(post["alpha"], gen)
    return params


def _sample_assignment(log_joint: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """z_n ~ Categorical(τ_n·) by inverse CDF (one uniform per row)."""
    resp, _ = responsibilities(log_joint)
    u = torch.rand(resp.shape[0], 1, generator=gen, dtype=resp.dtype)
    return (torch.cumsum(resp, 1) < u).sum(1).clamp_max(resp.shape[1] - 1)


def _onehot(z: torch.Tensor, k: int) -> torch.Tensor:
    out = torch.zeros(z.shape[0], k, dtype=torch.float64)
    out[torch.arange(z.shape[0]), z] = 1.0
    return out


def _init_option(name: str, value: Any) -> Any:
    return None if value is None else check_choice(name, value, sorted(INITIALISATIONS))


class MixtureGibbs(EngineSpec):
    """Block Gibbs with data augmentation (:func:`latentfs.fit` with ``method="gibbs"``).

    Each chain starts from k-means++ (or random) responsibilities, draws z from them and θ given z, then
    alternates z | θ and θ | z. Every draw is relabelled (within and across chains, Stephens 2000) on
    every component-indexed site jointly (``weights``, ``means``, ``covariance``; ``item_probs`` for latent class)
    by the pipeline; the permutations are recorded in
    ``Posterior.alignment`` and ``Posterior.relabel_permutations``. Rank-normalised R̂ and bulk / tail ESS of
    the relabelled draws are stored in ``diagnostics["convergence"]`` (:meth:`Posterior.check_convergence`);
    with ``warn`` (default) a :class:`~latentfs.core.driver.ConvergenceWarning` names each site that has not
    converged.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.mixture import LatentProfile
    >>> lp = LatentProfile(2, mean_precision=0.02)
    >>> X = lp.simulate(100, 3, seed=0)["data"]
    >>> res = latentfs.fit(lp, X, method="gibbs", num_chains=2, num_warmup=20, num_samples=30, seed=0, warn=False)
    >>> res.samples("means").shape
    (2, 30, 2, 3)
    """

    method = "gibbs"
    kind = "sampler"
    desc = "Gibbs"
    options = {
        **chain_options(num_chains=4, num_warmup=200, num_samples=500),
        "init": Option(None, _init_option, "str or None", "'kmeans', 'kmeans++' or 'random' starting responsibilities"),
        "pointwise_loglik": Option(True, lambda n, v: bool(check_flag(n, v)), "bool",
                                   "keep each row's log-likelihood per draw (the log_likelihood group, DIC, LOO)"),
    }

    def prepare(self, model: Any, data: Any, o: Options) -> Any:
        from types import SimpleNamespace

        fam = family_for(model, data)
        return SimpleNamespace(model=model, fam=fam, pr=prior_tensors(fam))

    def init(self, prep: Any, o: Options, gen: torch.Generator) -> Any:
        fam, pr = prep.fam, prep.pr
        resp = initial_responsibilities(fam, o.init, gen)
        u = torch.rand(fam.n, 1, generator=gen, dtype=resp.dtype)
        z = (torch.cumsum(resp, 1) < u).sum(1).clamp_max(fam.k - 1)
        params = sample_parameters(fam, conjugate_posterior(fam, fam.statistics(_onehot(z, fam.k)), pr), gen)
        return {"params": params, "z": z, "row_ll": None, "lj": log_joint_components(fam, params)}

    # A state carries log p(x_i, z_i = k | its params) ("lj"): the next step's assignment draw and the kept
    # draw's log-likelihood both need it; computing it once per step saved a fifth of a small fit's time.
    def sample(self, prep: Any, o: Options, state: Any, gen: torch.Generator) -> tuple[Any, float]:
        fam = prep.fam
        lj = state["lj"]
        row_ll = torch.logsumexp(lj, 1)
        z = _sample_assignment(lj, gen)
        post = conjugate_posterior(fam, fam.statistics(_onehot(z, fam.k)), prep.pr)
        params = sample_parameters(fam, post, gen)
        new = {"params": params, "z": z, "row_ll": row_ll, "lj": log_joint_components(fam, params)}
        return new, float(row_ll.sum())

    def collect(self, prep: Any, o: Options, state: Any) -> dict[str, Any]:
        out: dict[str, Any] = prep.fam.export(state["params"])
        row_ll = torch.logsumexp(state["lj"], 1)
        out["log_likelihood"] = float(row_ll.sum())
        if o.pointwise_loglik:
            out["pointwise"] = row_ll.numpy()
        return out

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        fam = prep.fam
        draws = dict(outcome.draws)
        pointwise = draws.pop("pointwise", None)
        total_ll = draws.pop("log_likelihood")
        return Export(
            dims=fam.dims(), coords=_coords(fam), draws=draws, log_likelihood=pointwise,
            diagnostics={"observation_dim": "sample", "n_observations": fam.n,
                         "n_parameters": prep.model.n_parameters(fam.d)},
            sample_stats={"total_log_likelihood": total_ll},
            relabel=("item_probs" if fam.kind == "categorical" else "means", "component"),
        )


register_spec(MixtureGibbs(), GaussianMixture, LatentProfile, LatentClass)
