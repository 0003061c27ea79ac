"""Bock–Aitkin marginal maximum likelihood EM for the latent trait model, with Gauss–Hermite quadrature.

Bock & Aitkin (1981, Psychometrika 46, "Marginal maximum likelihood estimation of item parameters:
application of an EM algorithm"), as listed by Titterington (2006, §1.4, "latent trait"): on a fixed
(non-adaptive) product Gauss–Hermite grid z_1..z_G with weights ω_g (:mod:`.quadrature`),

* E-step: the posterior weight of each node for each person, w_ig ∝ ω_g Π_j g_j(y_ij | z_g), and the
  "artificial data" N_jgs = Σ_i w_ig [y_ij = s], the expected number of people at node g answering s to
  item j (missing answers add nothing);
* M-step: item by item, the weighted cumulative-logit (binary: logistic) regression of the artificial
  data on the nodes, max Σ_g Σ_s N_jgs log P(y_j = s | z_g). It is concave in (α_j·, α_j) (Pratt 1981), so
  one safeguarded Newton step per EM iteration raises it (a generalised EM step): the step is halved until
  the item's objective does not fall and its thresholds stay ordered. Binary items use the closed-form
  gradient and Hessian of the logistic regression; ordinal items get them by automatic differentiation.

Under the quadrature rule the model is a finite mixture over the nodes, so this is exact (generalised) EM
for the quadrature marginal and the traced log-likelihood never falls (Dempster, Laird & Rubin 1977).
Person scores are the posterior means (EAP) and standard deviations of z on the same grid.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from latentfs.core.data import (
    DataError,
    check_choice,
    check_int,
)
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.inference.latent_trait.quadrature import (
    ItemData,
    TraitParams,
    gauss_hermite_grid,
    item_log_probs,
    node_posterior,
    prepare_items,
    trait_posterior,
)
from latentfs.models.latent_trait import LatentTrait

__all__ = [
    "em_latent_trait",
    "default_n_nodes",
    "initial_params",
    "em_step",
    "mstep",
    "orient",
    "setup",
    "build_export",
    "LatentTraitEM",
    "TRAIT_OPTIONS",
]


def default_n_nodes(n_components: int) -> int:
    """21 nodes for one trait (as R's ltm), 15 per trait for two, 7 per trait beyond."""
    return 21 if n_components == 1 else (15 if n_components == 2 else 7)


def initial_params(
    values: np.ndarray, levels: np.ndarray, n_components: int, *, init: str, generator: torch.Generator,
    dtype: torch.dtype, device: Any,
) -> TraitParams:
    """A start. ``"pca"`` takes the top principal axes of the items' correlation matrix as underlying-variable
    loadings λ_j and converts them, α_j = 1.7 λ_j / √(1 − ‖λ_j‖²) (the logit–probit scaling of Bartholomew et
    al. 2011, §7.5); ``"random"`` draws α_jk ~ N(0, 1). Intercepts are the logits of the cumulative
    proportions P̂(y_j ≥ s), widened by √(1 + ‖α_j‖²/1.7²)."""
    n, p = values.shape
    q = n_components
    if init == "pca":
        filled = np.where(np.isnan(values), np.nanmean(values, axis=0), values)
        corr = np.nan_to_num(np.atleast_2d(np.corrcoef(filled, rowvar=False))) + 1e-9 * np.eye(p)
        vals, vecs = np.linalg.eigh(corr)
        order = np.argsort(vals)[::-1][:q]
        lam = vecs[:, order] * np.sqrt(np.clip(vals[order], 0.0, None))
        norm = np.linalg.norm(lam, axis=1, keepdims=True)
        lam = lam * np.minimum(1.0, 0.9 / np.maximum(norm, 1e-12))
        A = 1.7 * lam / np.sqrt(1.0 - (lam**2).sum(1, keepdims=True))
    else:
        A = torch.randn(p, q, generator=generator, dtype=torch.float64).numpy()
    m = int(levels.max()) - 1
    C = np.zeros((p, m))
    widen = np.sqrt(1.0 + (A**2).sum(1) / 1.7**2)
    for j in range(p):
        col = values[~np.isnan(values[:, j]), j]
        for s in range(1, int(levels[j])):
            prop = np.clip((col >= s).mean(), 0.5 / col.size, 1 - 0.5 / col.size)
            C[j, s - 1] = math.log(prop / (1 - prop)) * widen[j]
        for s in range(1, int(levels[j]) - 1):  # strictly decreasing (ties from clipping)
            C[j, s] = min(C[j, s], C[j, s - 1] - 1e-3)
    return TraitParams(torch.as_tensor(C, dtype=dtype, device=device), torch.as_tensor(A, dtype=dtype, device=device))


# ---------------------------------------------------------------------------------------------- M-step
def _item_objective(theta: torch.Tensor, counts: torch.Tensor, vt: torch.Tensor, vc: torch.Tensor,
                    nodes: torch.Tensor) -> torch.Tensor:
    """Σ_g Σ_s N_gs log P(y = s | z_g) of one item; theta = (α_1..α_m, α_j (q))."""
    m = vt.shape[-1]
    logp = item_log_probs(theta[None, :m], theta[None, m:], nodes, vt[None], vc[None])[0]
    return (counts * logp).sum()


def _graded_derivatives(counts: torch.Tensor, data: ItemData, nodes: torch.Tensor) -> tuple[Callable, Callable]:
    from torch.func import grad, jacrev, vmap

    vt, vc = data.valid_thresholds, data.valid_categories
    f = vmap(_item_objective, in_dims=(0, 0, 0, 0, None))
    g = vmap(grad(_item_objective), in_dims=(0, 0, 0, 0, None))
    # reverse-over-reverse (forward-mode AD would load torch.jit decompositions, deprecated in torch 2.13)
    h = vmap(jacrev(grad(_item_objective)), in_dims=(0, 0, 0, 0, None))

    def objective(theta: torch.Tensor) -> torch.Tensor:
        return f(theta, counts, vt, vc, nodes)

    def derivatives(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return g(theta, counts, vt, vc, nodes), h(theta, counts, vt, vc, nodes)

    return objective, derivatives


def _binary_derivatives(counts: torch.Tensor, nodes: torch.Tensor) -> tuple[Callable, Callable]:
    """The weighted logistic regression of the artificial data (closed form): r_g successes of n_g trials
    at design x̃_g = (1, z_g); gradient Σ_g (r_g − n_g σ_g) x̃_g, Hessian −Σ_g n_g σ_g (1 − σ_g) x̃_g x̃_gᵀ."""
    design = torch.cat([torch.ones_like(nodes[:, :1]), nodes], 1)  # (G, 1 + q)
    trials = counts.sum(-1)  # (p, G)
    success = counts[..., 1]

    def objective(theta: torch.Tensor) -> torch.Tensor:
        u = theta @ design.T
        logsig = torch.nn.functional.logsigmoid
        return (success * logsig(u) + (trials - success) * logsig(-u)).sum(-1)

    def derivatives(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        prob = torch.sigmoid(theta @ design.T)
        grad = (success - trials * prob) @ design
        hess = -torch.einsum("pg,ga,gb->pab", trials * prob * (1 - prob), design, design)
        return grad, hess

    return objective, derivatives


def _ordered(theta: torch.Tensor, vt: torch.Tensor) -> torch.Tensor:
    """Whether each item's used thresholds are strictly decreasing, (p,)."""
    m = vt.shape[-1]
    if m < 2:
        return torch.ones(theta.shape[0], dtype=torch.bool, device=theta.device)
    step = theta[:, 1:m] - theta[:, : m - 1]
    both = vt[:, 1:] & vt[:, :-1]
    return ~((step >= 0) & both).any(-1)


def mstep(params: TraitParams, counts: torch.Tensor, data: ItemData, nodes: torch.Tensor) -> TraitParams:
    """One safeguarded Newton step per item on its expected complete-data log-likelihood (module docstring)."""
    m = params.intercepts.shape[1]
    theta = torch.cat([params.intercepts, params.discrimination], 1)  # (p, m + q)
    vt = data.valid_thresholds
    if data.binary:
        objective, derivatives = _binary_derivatives(counts, nodes)
    else:
        objective, derivatives = _graded_derivatives(counts, data, nodes)
    g, H = derivatives(theta)
    k = theta.shape[1]
    free = torch.cat([vt, torch.ones_like(theta[:, m:], dtype=torch.bool)], 1)  # padded thresholds stay
    eye = torch.eye(k, dtype=theta.dtype, device=theta.device)
    neg = -H * (free[:, :, None] & free[:, None, :]) + torch.diag_embed((~free).to(theta.dtype))
    neg = 0.5 * (neg + neg.transpose(-1, -2))
    lam_min = torch.linalg.eigvalsh(neg)[:, 0]
    scale = torch.diagonal(neg, dim1=-2, dim2=-1).abs().amax(-1).clamp(min=1.0)
    shift = torch.clamp(1e-10 * scale - lam_min, min=0.0)  # keep the Newton matrix positive definite
    direction = torch.linalg.solve(neg + shift[:, None, None] * eye, (g * free)[..., None])[..., 0]
    old = objective(theta)
    step = torch.ones(theta.shape[0], dtype=theta.dtype, device=theta.device)
    done = torch.zeros(theta.shape[0], dtype=torch.bool, device=theta.device)
    new_theta = theta.clone()
    for _ in range(40):
        cand = theta + step[:, None] * direction
        val = objective(cand)
        ok = torch.isfinite(val) & (val >= old) & _ordered(cand, vt) & ~done
        new_theta[ok] = cand[ok]
        done |= ok
        if bool(done.all()):
            break
        step = torch.where(done, step, 0.5 * step)
    return TraitParams(new_theta[:, :m].contiguous(), new_theta[:, m:].contiguous())


def em_step(params: TraitParams, data: ItemData, nodes: torch.Tensor, log_weights: torch.Tensor
            ) -> tuple[TraitParams, float]:
    """One EM iteration: the new parameters and the marginal log-likelihood at ``params``."""
    post, marginal = node_posterior(params, data, nodes, log_weights)
    counts = torch.einsum("pg,pjs->jgs", post * data.counts[:, None], data.onehot)
    loglik = float((data.counts * marginal).sum())
    return mstep(params, counts, data, nodes), loglik


def orient(params: TraitParams) -> TraitParams:
    """Flip each trait so that its discriminations sum to a non-negative number (z is identified up to sign)."""
    sign = torch.where(params.discrimination.sum(0) < 0, -1.0, 1.0).to(params.discrimination.dtype)
    return TraitParams(params.intercepts, params.discrimination * sign)


def setup(model: Any, X: Any, dtype: torch.dtype, device: Any) -> tuple[Any, np.ndarray, ItemData]:
    """Validate ``X`` for ``model`` and prepare its response patterns."""
    if not isinstance(model, LatentTrait):
        raise DataError(f"model must be a LatentTrait; got {type(model).__name__}.")
    matrix = model.check_data(X)
    levels = model.levels(matrix.values.shape[1])
    return matrix, levels, prepare_items(matrix.values, levels, dtype=dtype, device=device)


def build_export(
    model: LatentTrait,
    matrix: Any,
    levels: np.ndarray,
    data: ItemData,
    params: TraitParams,
    *,
    n_nodes: int | None,
    seconds: float,
    fitted_traits: dict[str, Any] | None = None,
    extra_diagnostics: dict[str, Any] | None = None,
) -> Export:
    """What a latent trait fit's result holds: item parameters as points, EAP person scores (quadrature, at the
    fitted parameters) in extras, the quadrature log-likelihood per person."""
    ll: np.ndarray | None
    if n_nodes is not None:
        nodes, logw = gauss_hermite_grid(model.n_components, n_nodes, dtype=params.intercepts.dtype,
                                         device=params.intercepts.device)
        eap, sd, ll = trait_posterior(params, data, nodes, logw)
    elif fitted_traits is not None:  # too many traits for the grid: the variational q(z) stands in
        eap, sd, ll = fitted_traits["loc"], fitted_traits["scale"], None
    else:
        raise DataError("build_export needs n_nodes or fitted traits.")
    p, q = params.discrimination.shape
    values = params.numpy()
    intercepts = values["intercepts"].copy()
    s = np.arange(intercepts.shape[1])
    intercepts[s[None, :] >= (levels - 1)[:, None]] = np.nan  # padding of ragged ordinal items
    binary = model.binary
    if binary:
        intercepts = intercepts[:, 0]
    n_par = model.n_parameters(p)
    loglik = float(ll.sum()) if ll is not None else math.nan
    n = data.n_samples
    fitted: dict[str, dict[str, Any]] = {
        "intercepts": {"family": "point", "value": intercepts},
        "discrimination": {"family": "point", "value": values["discrimination"]},
    }
    if fitted_traits is not None:
        fitted["traits"] = fitted_traits
    dims: dict[str, tuple[str, ...]] = {
        "intercepts": ("item",) if binary else ("item", "threshold"),
        "discrimination": ("item", "trait"),
        "traits": ("sample", "trait"),
    }
    coords = {
        "item": list(matrix.feature_names),
        "trait": [f"z{k}" for k in range(q)],
        "sample": list(matrix.sample_names),
    }
    if not binary:
        coords["threshold"] = [f"t{k + 1}" for k in range(intercepts.shape[1])]
    diagnostics = {
        "log_likelihood": loglik,
        "n_parameters": int(n_par),
        "aic": float(-2 * loglik + 2 * n_par),
        "bic": float(-2 * loglik + n_par * math.log(n)),
        "n_nodes": None if n_nodes is None else int(n_nodes),
        "quadrature": "none" if n_nodes is None else f"Gauss-Hermite product rule, {n_nodes}^{q} fixed nodes",
        "n_patterns": int(data.onehot.shape[0]),
        "seconds": float(seconds),
        "observation_dim": "sample",
        **(extra_diagnostics or {}),
    }
    return Export(
        dims={k: v for k, v in dims.items() if k in fitted},
        coords=coords,
        fitted=fitted,
        diagnostics=diagnostics,
        log_likelihood=None if ll is None else ll[None, None, :],
        extras={"trait_scores": eap, "trait_sd": sd, "levels": levels},
    )


def _init_option(name: str, value: Any) -> str:
    return str(check_choice(name, value, ("pca", "random")))


def _float64_only(name: str, value: Any) -> torch.dtype:
    """The latent-trait engines run in float64 only. In float32 the marginal log-likelihood stops changing
    (at float32's resolution) while the slow EM/VB steps still move the discriminations: on 300 answers to 6
    binary items the float32 fit stopped after 14 of float64's 68 iterations, 4.7e-3 (normwise) short of it
    (``benchmarks/gpu_check.py``'s float32 part)."""
    from latentfs.core.options import check_dtype

    dtype = check_dtype(value, name=name)
    if dtype != torch.float64:
        raise DataError(
            f"{name} must be float64 for the latent-trait engines, got {value!r}: in float32 the log-likelihood "
            "stops changing before the discriminations settle (4.7e-3 off on a 6-item test). "
            f"Pass {name}=torch.float64 (the default); device='cuda' runs in float64 too.")
    return dtype


#: the options both latent-trait engines take
TRAIT_OPTIONS: dict[str, Option] = {
    "seed": shared("seed"),
    "max_iter": shared("max_iter", 5000),
    "tol": shared("tol", 1e-10),
    "n_init": Option(1, lambda n, v: check_int(n, v, low=1), "int ≥ 1",
                     "starts: init first, then random ones; the best objective is kept"),
    "init": Option("pca", _init_option, "str", "'pca' (principal axes of the items' correlations) or 'random'"),
    "dtype": Option(torch.float64, _float64_only, "torch.float64",
                    "float64 only: float32 stops before the discriminations settle"),
    "device": shared("device"),
    "progress": shared("progress"),
    "warn": shared("warn"),
}


class LatentTraitEM(EngineSpec):
    """Marginal maximum likelihood for :class:`~latentfs.models.latent_trait.LatentTrait` by Bock–Aitkin EM.

    Parameters
    ----------
    model : LatentTrait
    X : array (n_samples, n_items) of item codes (0/1 for binary items, 0..S_j − 1 for ordinal items);
        NaN marks a missing answer (it integrates out under local independence).
    seed : int, generator or None (used by the random starts: start r draws from the r-th generator spawned
        from the seed).
    max_iter, tol : stop when the relative change of the marginal log-likelihood is at most ``tol``.
    n_init : int, default 1
        Starts: ``init`` first, then random ones; the highest log-likelihood is kept (one
        :class:`~latentfs.core.driver.ConvergenceWarning` per fit, for the kept run).
    n_nodes : int, optional
        Gauss–Hermite nodes per trait: a fixed (non-adaptive) product grid of n_nodes^q nodes (default 21
        for q = 1, 15 for q = 2, 7 beyond; at most 20000 nodes in all).
    init : {"pca", "random"}
    dtype, device : torch dtype (float64 default) and device.

    Returns
    -------
    Posterior with point sites ``intercepts`` and ``discrimination`` (``kind() == "point"``: no band),
    extras ``trait_scores`` (EAP, E[z | y]) and ``trait_sd`` (posterior SD), the per-person marginal
    log-likelihood, and the log-likelihood trace (non-decreasing).

    Examples
    --------
    >>> import latentfs
    >>> lt = LatentTrait(1)
    >>> X = lt.simulate(300, intercepts=[1.0, 0.0, -0.5, 0.5], discrimination=[[1.5], [1.0], [2.0], [1.2]],
    ...                 seed=0)["items"]
    >>> post = latentfs.fit(lt, X, method="em")
    >>> post.kind(), post.mean("discrimination").shape, bool(np.all(np.diff(post.trace[0]) >= 0))
    ('point', (4, 1), True)
    """

    method = "em"
    kind = "optimizer"
    desc = "LatentTrait em"
    options = {
        **TRAIT_OPTIONS,
        "n_nodes": Option(None, lambda n, v: None if v is None else check_int(n, v, low=2), "int ≥ 2 or None",
                          "Gauss–Hermite nodes per trait (default 21, 15 or 7 for 1, 2 or more traits)"),
    }

    def prepare(self, model: Any, X: Any, o: Options) -> Any:
        from types import SimpleNamespace

        started = time.perf_counter()
        n_nodes = default_n_nodes(model.n_components) if o.n_nodes is None else o.n_nodes
        matrix, levels, data = setup(model, X, o.dtype, o.device)
        nodes, logw = gauss_hermite_grid(model.n_components, n_nodes, dtype=o.dtype, device=o.device)
        return SimpleNamespace(model=model, matrix=matrix, levels=levels, data=data, nodes=nodes, logw=logw,
                               n_nodes=n_nodes, started=started)

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> TraitParams:
        return initial_params(prep.matrix.values, prep.levels, prep.model.n_components,
                              init=o.init if index == 0 else "random", generator=gen, dtype=o.dtype, device=o.device)

    def step(self, prep: Any, o: Options, state: TraitParams) -> tuple[TraitParams, float]:
        return em_step(state, prep.data, prep.nodes, prep.logw)

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        return build_export(prep.model, prep.matrix, prep.levels, prep.data, orient(outcome.run.state),
                            n_nodes=prep.n_nodes, seconds=time.perf_counter() - prep.started)


#: the spec, callable as ``em_latent_trait(model, X, **options)`` (the pipeline runs it)
em_latent_trait = register_spec(LatentTraitEM(), LatentTrait)
