"""Mean-field VB for the conditional Gamma-Poisson (CGP) model; Buntine & Jakulin (2006), Sections 4.2 and 7.1.

The chapter gives VB for GaP (eq. 13–16) and only the Gibbs rule for CGP (Table 3). This module derives a
mean-field approximation for CGP's spike-and-slab scores (the derivation is ours; the model is eq. 3 and
its component-count form eq. 8–9).

Derivation
----------
Write the spike with a latent s_k = 1[l_k > 0] ~ Bernoulli(1 − ρ_k); given s_k = 1, l_k ~ Gamma(α_k, β_k),
and c_k | l_k ~ Poisson(l_k), v_{·,k} ~ Mult(c_k, θ_{·,k}) (eq. 5/8). Take the mean-field family
q(s, l, V) = ∏_k q(s_k, l_k) · ∏_j Mult(v_{j,·}; w_j, n_{j,·}). The optimal q(s_k, l_k) is
∝ exp E_{q(V)}[log p], and the Poisson factor contributes l_k^{c_k}: on the spike (l_k = 0) its expectation
is log 0 · E[c_k] = −∞ unless q(V) gives component k no words at all. So every optimum has one of two
forms per document and component:

* **on** (π_k = 1): q(l_k) = Gamma(a_k, b_k) with b_k = 1 + β_k and a_k = α_k + Σ_j w_j n_jk, exactly GaP's
  update (14), with n_jk ∝ θ_jk exp E[log l_k];
* **off**: n_{·k} = 0 (so E[c_k] = 0) and q(s_k, l_k) is the exact conditional given c_k = 0:
  q(l_k) = π_k Gamma(α_k, b_k) + (1 − π_k) δ_0 with π_k = (1−ρ_k)β_k^{α_k} / [(1−ρ_k)β_k^{α_k} + ρ_k b_k^{α_k}]
  (digest §1.5), the family q(l_k) = π_k Gamma(a_k, b_k) + (1 − π_k) δ_0 with a_k = α_k.

The ELBO of one document for an on-set A (any a, with n = n*(a) over the on components) is

    B(A, a) = − Σ_j log w_j!
              + Σ_{k∈A} [log(1−ρ_k) − log Γ(α_k) + α_k log β_k − a_k log b_k + log Γ(a_k) + (α_k − a_k) E[log l_k]]
              + Σ_{k∉A} log[(1−ρ_k)(β_k/b_k)^{α_k} + ρ_k]
              + Σ_j w_j log Σ_{k∈A} θ_jk exp E[log l_k],

the GaP bound (16) for the on components plus log(1−ρ_k) each, and the exact log marginal (9) at c_k = 0
for the off ones. Each document step is coordinate ascent on B: first the single toggle of A (on→off, or
off→on with a_k = α_k) that raises B most, if any raises it; then GaP's a-update for the on components.
With ρ_k = 0 the off state has no prior mass and is never proposed, so ρ = 0 reproduces the GaP VB
iterates exactly. Θ is updated as in the chapter (eq. 15), and the reported objective,
Σ_i B_i + Σ_{j,k} γ_j log θ_jk, never decreases from cycle to cycle.

Outputs: E_q[l_k] = π_k a_k / b_k — for an off component π_k α_k/(1+β_k), the corrected posterior mean of
digest §1.5 at c_k = 0 — and E[c_k] = a_k − α_k ("component-generated counts"). ``learn_rho`` sets
ρ_k to the mean over documents of q(l_ik = 0) after each cycle (the EM step for the spike weight).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.driver import chain_generators, host_generator
from latentfs.core.options import check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.core.results import Posterior
from latentfs.inference.dca.common import (
    DCAData,
    cgp_zero_probability,
    dims_and_coords,
    hyper_tensors,
    prepare,
    resolve_model,
)
from latentfs.inference.dca.em import RUN_OPTIONS
from latentfs.inference.dca.hyper import check_learn, with_hyperparameters, zero_fraction
from latentfs.inference.dca.vb import exp_expected_log_theta, theta_objective
from latentfs.models.dca import ConditionalGammaPoissonDCA

__all__ = [
    "CGPState",
    "cgp_doc_bound",
    "cgp_doc_update",
    "cgp_fold_in",
    "cgp_off_term",
    "cgp_on_term",
    "cgp_vb_init",
    "cgp_vb_step",
    "fit_cgp_vb",
]

_TOGGLE_TOL = 1e-9  # a toggle must raise a document's bound by more than this (nats)
RHO_FLOOR = 0.01  # learn_rho keeps ρ in [RHO_FLOOR, 1 − RHO_FLOOR] (fit_cgp_vb)


@dataclass(frozen=True)
class CGPState:
    """State of the CGP mean-field iteration.

    Attributes
    ----------
    doc_shape : Tensor (I, K), a_(i): gamma shapes of the slab of q(l) (α_k for an off component)
    active : BoolTensor (I, K), the on-set A_(i) (π_ik = 1 where on, the prior-conditional π_k where off)
    topic_word : Tensor (K, J), Θ
    """

    doc_shape: torch.Tensor
    active: torch.Tensor
    topic_word: torch.Tensor


def cgp_on_term(a: torch.Tensor, hyper: dict[str, torch.Tensor]) -> torch.Tensor:
    """The bound's term of an on component (module docstring), elementwise over a (…, K)."""
    alpha, beta, rho = hyper["alpha"], hyper["beta"], hyper["rho"]
    log_b = torch.log1p(beta)
    elog = torch.digamma(a) - log_b
    return (
        torch.log1p(-rho) - torch.lgamma(alpha) + alpha * torch.log(beta) - a * log_b + torch.lgamma(a)
        + (alpha - a) * elog
    )


def cgp_off_term(hyper: dict[str, torch.Tensor]) -> torch.Tensor:
    """log[(1−ρ_k)(β_k/(1+β_k))^{α_k} + ρ_k]: eq. (9) at c_k = 0, the bound's term of an off component (K,)."""
    alpha, beta, rho = hyper["alpha"], hyper["beta"], hyper["rho"]
    return torch.logaddexp(torch.log1p(-rho) + alpha * (torch.log(beta) - torch.log1p(beta)), torch.log(rho))


def _exp_elog(a: torch.Tensor, active: torch.Tensor, hyper: dict[str, torch.Tensor]) -> torch.Tensor:
    """exp E_q[log l_k] = exp(ψ(a_k) − log b_k) for on components, 0 for off ones (I, K)."""
    on = torch.exp(torch.digamma(a) - torch.log1p(hyper["beta"]))
    return torch.where(active, on, torch.zeros_like(on))


def cgp_doc_bound(
    data: DCAData, a: torch.Tensor, active: torch.Tensor, log_z: torch.Tensor, hyper: dict[str, torch.Tensor]
) -> torch.Tensor:
    """B(A, a) of every document (I,) (module docstring); ``log_z`` is log Z_j at each non-zero."""
    words = torch.zeros_like(data.doc_lengths).index_add_(0, data.doc, data.values * log_z)
    on = torch.where(active, cgp_on_term(a, hyper), cgp_off_term(hyper).expand_as(a)).sum(-1)
    return -data.log_factorials + on + words


def _toggle(
    data: DCAData, a: torch.Tensor, active: torch.Tensor, exp_doc: torch.Tensor, z: torch.Tensor,
    exp_theta: torch.Tensor, hyper: dict[str, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """The single on/off switch per document that raises B most (if any does); returns new (a, active)."""
    alpha = hyper["alpha"]
    prior_exp = torch.exp(torch.digamma(alpha) - torch.log1p(hyper["beta"]))  # exp E[log l] at a = α
    candidate = torch.where(active, exp_doc, prior_exp.expand_as(exp_doc))
    contrib = candidate[data.doc] * exp_theta.T[data.word]  # (nnz, K): θ_jk exp E[log l_k]
    tiny = torch.finfo(z.dtype).tiny
    log_z = torch.log(z.clamp_min(tiny))[:, None]
    sign = torch.where(active[data.doc], -1.0, 1.0).to(z.dtype)
    changed = torch.log((z[:, None] + sign * contrib).clamp_min(tiny)) - log_z
    word_gain = torch.zeros_like(a).index_add_(0, data.doc, data.values[:, None] * changed)
    off = cgp_off_term(hyper).expand_as(a)
    term_gain = torch.where(active, off - cgp_on_term(a, hyper), cgp_on_term(alpha.expand_as(a), hyper) - off)
    gain = torch.where((hyper["rho"] > 0).expand_as(a), term_gain + word_gain, torch.full_like(a, -torch.inf))
    best_gain, best = gain.max(-1)
    flip = torch.zeros_like(active).scatter_(1, best[:, None], (best_gain > _TOGGLE_TOL)[:, None])
    return torch.where(flip, alpha.expand_as(a), a), active ^ flip


def cgp_doc_update(
    data: DCAData, a: torch.Tensor, active: torch.Tensor, exp_theta: torch.Tensor, hyper: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One document step with Θ fixed: toggle, then a_k = α_k + Σ_j w_j n_jk (eq. 14) over the on set.

    Returns (new a, new active, the bound B at the input (a, active), the Θ statistics S (K, J) of the
    responsibilities that gave the new a, log Z at the input).
    """
    exp_doc = _exp_elog(a, active, hyper)
    z = data.rates_at_nonzeros(exp_doc, exp_theta)
    log_z = torch.log(z.clamp_min(torch.finfo(z.dtype).tiny))
    bound = cgp_doc_bound(data, a, active, log_z, hyper)
    if bool((hyper["rho"] > 0).any()):
        a, active = _toggle(data, a, active, exp_doc, z, exp_theta, hyper)
        exp_doc = _exp_elog(a, active, hyper)
        z = data.rates_at_nonzeros(exp_doc, exp_theta)
    ratio = data.values / z
    stats = exp_theta * (data.csr_t(ratio) @ exp_doc).T
    new_a = hyper["alpha"] + exp_doc * data.times_t(ratio, exp_theta)
    return new_a, active, bound, stats, log_z


def cgp_vb_init(model: ConditionalGammaPoissonDCA, data: DCAData, generator: torch.Generator) -> CGPState:
    """GaP's start (:func:`latentfs.inference.dca.vb.vb_init`): near-uniform Θ, a_k = (Σα + L)/K, all on."""
    K, J = model.n_components, data.n_features
    shape = torch.full((K, J), 100.0, dtype=data.dtype)  # drawn on the host: a GPU fit starts where the CPU fit does
    noise = (torch._standard_gamma(shape, generator=host_generator(generator)) / 100.0).to(data.device)
    theta = noise / noise.sum(-1, keepdim=True)
    start = (float(model.alpha.sum()) + data.doc_lengths) / K
    a = start[:, None].expand(-1, K).clone()
    return CGPState(doc_shape=a, active=torch.ones_like(a, dtype=torch.bool), topic_word=theta)


def cgp_vb_step(
    model: ConditionalGammaPoissonDCA, data: DCAData, state: CGPState, hyper: dict[str, torch.Tensor],
    inner_iters: int = 1,
) -> tuple[CGPState, float, float]:
    """One major cycle: ``inner_iters`` document steps, then Θ ∝ S + γ (eq. 15).

    Returns (new state, objective Σ_i B_i + Σ γ_j log θ_jk at the input state, Σ_i B_i at the input state).
    """
    exp_theta = exp_expected_log_theta(state.topic_word, "chapter")
    a, active = state.doc_shape, state.active
    bound = stats = torch.zeros(())
    for it in range(inner_iters):
        a, active, b, stats, _ = cgp_doc_update(data, a, active, exp_theta, hyper)
        if it == 0:
            bound = b.sum()
    objective = bound + theta_objective(state.topic_word, hyper["gamma"], "chapter")
    shifted = (stats + hyper["gamma"]).clamp_min(torch.finfo(stats.dtype).tiny)
    theta = shifted / shifted.sum(-1, keepdim=True)
    return CGPState(doc_shape=a, active=active, topic_word=theta), float(objective), float(bound)


def _cgp_hyper(model: ConditionalGammaPoissonDCA, data: DCAData) -> dict[str, torch.Tensor]:
    out = hyper_tensors(model, data)
    out["rho"] = torch.as_tensor(model.rho, dtype=data.dtype, device=data.device)
    return out


def q_zero_probability(state: CGPState, hyper: dict[str, torch.Tensor]) -> torch.Tensor:
    """q(l_ik = 0) (I, K): 0 for on components, 1 − π_k for off ones."""
    p0 = cgp_zero_probability(hyper["alpha"], hyper["beta"], hyper["rho"]).expand_as(state.doc_shape)
    return torch.where(state.active, torch.zeros_like(p0), p0)


@dataclass
class _CGPTrack:
    """What one start's run carries besides its state: its hyperparameters (ρ may be learned), the bound per cycle
    and ρ's values per cycle."""

    hyper: dict[str, torch.Tensor]
    bounds: list[float]
    rho_trace: list[np.ndarray]


def _no_learning(name: str, value: Any) -> Any:
    if value is not False:
        raise DataError(
            "learn_alpha and learn_beta are not available for ConditionalGammaPoissonDCA with method='vb'; use "
            "method='gibbs', or learn_rho=True only."
        )
    return value


def _learn_after(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise DataError(f"{name} must be a non-negative integer (cycles before learning); got {value!r}.")
    return int(value)


class CGPVB(EngineSpec):
    """A CGP model by the spike-and-slab mean field (module docstring); ``fit(model, X, method="vb")``.

    Parameters
    ----------
    max_iter, tol : stop after ``max_iter`` cycles or when the objective's relative change ≤ ``tol``.
    inner_iters : int
        Document steps (toggle + a-update) per cycle.
    learn_rho : bool
        Set ρ_k to the mean of q(l_ik = 0) after every cycle; recorded in ``hyperparameters`` and
        ``extras["rho_trace"]`` (n_iter, K). (``learn_alpha``/``learn_beta`` are available with
        ``method="gibbs"`` only.) ρ is kept within [0.01, 0.99] (:data:`RHO_FLOOR`): ρ = 0 is an absorbing
        state of this update (with ρ → 0 no document gains by switching a component off, so q(l = 0) → 0
        and ρ stays at 0: a planted ρ = 0.5 went to 0 from a start of 0.05); from the floor a component
        whose documents do not use it can still switch off, so ρ can grow again.
    learn_after : int
        Cycles with ρ fixed before learning starts (the on/off sets of a near-uniform starting Θ say
        nothing about ρ).
    num_draws : int
        Draws from q(l) stored as the ``doc_scores`` site (its spike at zero is not a fitted family).
    init : CGPState, optional
        Warm start (used by the first start).
    n_init : int
        Starts from independent random initialisations (the seed's streams); the one with the highest final
        objective is kept, and the others' objectives are in ``diagnostics["restart_objectives"]``.

    Returns
    -------
    Posterior
        ``topic_word``: Dirichlet(γ + S); ``doc_scores``: draws from q. ``extras``: ``doc_scores_mean``
        E_q[l] (the corrected mean of digest §1.5 for off components), ``component_counts`` E[c] = a − α,
        ``active_prob`` q(l > 0), ``doc_shape`` a, ``bound_trace``.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models import ConditionalGammaPoissonDCA
    >>> model = ConditionalGammaPoissonDCA(2, alpha=0.5, beta=0.02, rho=0.5)
    >>> X = model.simulate(30, 10, seed=0)["counts"]
    >>> X = X[X.sum(1) > 0]
    >>> result = latentfs.fit(model, X, method="vb", seed=0, warn=False)
    >>> result.extras["doc_scores_mean"].shape == (X.shape[0], 2)
    True
    """

    method = "vb"
    kind = "optimizer"
    desc = "ConditionalGammaPoissonDCA VB"
    remedies = "raise max_iter, loosen tol, or use inner_iters > 1"
    options = {
        "max_iter": shared("max_iter", 500),
        "tol": shared("tol", 1e-6),
        "inner_iters": Option(1, lambda n, v: check_int(n, v, low=1), "int ≥ 1", "document steps per cycle"),
        **RUN_OPTIONS,
        "learn_rho": Option(False, None, "bool", "learn ρ (the share of components switched off)"),
        "learn_alpha": Option(False, _no_learning, "False", "not available with VB (method='gibbs')"),
        "learn_beta": Option(False, _no_learning, "False", "not available with VB (method='gibbs')"),
        "num_draws": Option(200, lambda n, v: check_int(n, v, low=1), "int ≥ 1",
                            "draws from q(l) stored as the doc_scores site"),
        "init": Option(None, None, "CGPState or None", "warm start of the first start"),
        "callback": shared("callback"),
        "learn_after": Option(20, _learn_after, "int ≥ 0", "cycles with ρ fixed before learning starts"),
        "n_init": Option(1, lambda n, v: check_int(n, v, low=1), "int ≥ 1", "independent random starts"),
    }

    def describe(self, model_name: str) -> str:
        return self.desc

    def prepare(self, model: Any, X: Any, o: Options) -> Any:
        from types import SimpleNamespace

        learn = check_learn(model, learn_rho=o.learn_rho)
        data = prepare(X, dtype=o.dtype, device=o.device, empty_documents=o.empty_documents)
        model = cast(ConditionalGammaPoissonDCA, resolve_model(model, data))
        if o.init is not None:
            expect = ((data.n_documents, model.n_components), (model.n_components, data.n_features))
            if (tuple(o.init.doc_shape.shape), tuple(o.init.topic_word.shape)) != expect:
                raise DataError(f"init must hold doc_shape {expect[0]} and topic_word {expect[1]}; got other shapes.")
        return SimpleNamespace(model=model, data=data, learn=learn, hyper0=_cgp_hyper(model, data))

    def n_starts(self, prep: Any, o: Options) -> int:
        return int(o.n_init)

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> Any:
        if o.init is not None and index == 0:
            state = o.init
        else:
            state = cgp_vb_init(prep.model, prep.data, gen)
        return state, _CGPTrack(dict(prep.hyper0), [], [])

    def step(self, prep: Any, o: Options, state: Any) -> tuple[Any, float]:
        s, track = state
        new, objective, bound = cgp_vb_step(prep.model, prep.data, s, track.hyper, o.inner_iters)
        track.bounds.append(bound)
        if prep.learn:
            if len(track.bounds) > o.learn_after:
                track.hyper["rho"] = zero_fraction(q_zero_probability(new, track.hyper), floor=RHO_FLOOR)
            track.rho_trace.append(track.hyper["rho"].cpu().numpy().copy())
        return (new, track), objective

    def report(self, o: Options) -> Any:
        callback = o.callback
        return None if callback is None else (lambda it, state, value: callback(it, state[0], value))

    def hyperparameters(self, model: Any, prep: Any, o: Options) -> dict[str, Any]:
        return dict(prep.model.hyperparameters())

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        run = outcome.run
        state, track = run.state
        # q(l)'s draws come from the first start's generator after its random start (replayed here, so the
        # draws do not depend on where the starts ran; both are drawn on the host, so not on the device either)
        gen = host_generator(chain_generators(o.seed, 1)[0])
        if o.init is None:
            cgp_vb_init(prep.model, prep.data, gen)
        return _export(prep.model, prep.data, run, state, track, o.num_draws, gen, o.n_init)

    def finalize(self, post: Any, prep: Any, o: Options, outcome: Any) -> None:
        track = outcome.run.state[1]
        if prep.learn:
            post.hyperparameters = dict(with_hyperparameters(prep.model, rho=track.hyper["rho"]).hyperparameters())
        if track.rho_trace:
            post.hyperparameters["learned"] = ["rho"]


#: the spec, callable as ``fit_cgp_vb(model, X, **options)`` (the pipeline runs it)
fit_cgp_vb = register_spec(CGPVB(), ConditionalGammaPoissonDCA)


def _export(
    model: ConditionalGammaPoissonDCA, data: DCAData, run: Any, state: CGPState, track: _CGPTrack, num_draws: int,
    gen: torch.Generator, n_init: int,
) -> Export:
    hyper, bounds, rho_trace = track.hyper, track.bounds, track.rho_trace
    exp_theta = exp_expected_log_theta(state.topic_word, "chapter")
    exp_doc = _exp_elog(state.doc_shape, state.active, hyper)
    ratio = data.values / data.rates_at_nonzeros(exp_doc, exp_theta)
    stats = exp_theta * (data.csr_t(ratio) @ exp_doc).T
    to_np = lambda t: t.detach().cpu().numpy().astype(np.float64)  # noqa: E731
    a = to_np(state.doc_shape)
    rate = to_np(1 + hyper["beta"])
    zero = to_np(q_zero_probability(state, hyper))
    rng = np.random.default_rng(int(torch.randint(0, 2**31, (1,), generator=host_generator(gen))))
    slab = rng.standard_gamma(a, size=(num_draws, *a.shape)) * (1 / rate)
    draws = np.where(rng.uniform(size=slab.shape) < zero, 0.0, slab)
    dims, coords = dims_and_coords(model, data)
    extras = {
        "doc_scores_mean": (1 - zero) * a / rate,
        "component_counts": a - to_np(hyper["alpha"]),
        "active_prob": 1 - zero,
        "doc_shape": a,
        "bound_trace": np.asarray(bounds[: run.n_iter]),
        "kept_documents": data.counts.kept_documents,
        "doc_lengths": data.counts.doc_lengths,
    }
    if rho_trace:
        extras["rho_trace"] = np.asarray(rho_trace[: run.n_iter])
    return Export(
        dims=dims, coords=coords, draws={"doc_scores": draws[None]},
        fitted={"topic_word": {"family": "dirichlet", "concentration": to_np(stats + hyper["gamma"])}},
        diagnostics={
            "objective": run.objective,
            "bound": bounds[run.n_iter - 1] if run.n_iter else None,
            "observation_dim": "document",
            "n_init": n_init,
        },
        extras=extras,
    )


def cgp_fold_in(
    result: Posterior, X: Any, *, max_iter: int = 200, tol: float = 1e-8, dtype: torch.dtype = torch.float64
) -> dict[str, np.ndarray]:
    """Document steps with Θ fixed at the result's mean, to convergence, for new documents ``X``.

    Returns ``{"doc_shape", "active_prob", "component_counts", "doc_scores_mean"}``, each (n_documents, K).
    """
    from latentfs.core.data import as_counts

    hp = result.hyperparameters
    model = ConditionalGammaPoissonDCA(len(hp["alpha"]), alpha=hp["alpha"], beta=hp["beta"], rho=hp["rho"],
                                       gamma=hp["gamma"])
    data = prepare(as_counts(X, empty_documents="keep"), dtype=dtype)
    hyper = _cgp_hyper(model, data)
    theta = torch.as_tensor(result.mean("topic_word"), dtype=dtype)
    if theta.shape[1] != data.n_features:
        raise DataError(f"X must have {theta.shape[1]} features (as the fitted model); got {data.n_features}.")
    exp_theta = exp_expected_log_theta(theta, "chapter")
    K = model.n_components
    a = ((float(model.alpha.sum()) + data.doc_lengths) / K)[:, None].expand(-1, K).clone()
    active = torch.ones_like(a, dtype=torch.bool)
    for _ in range(max_iter):
        new_a, new_active, _, _, _ = cgp_doc_update(data, a, active, exp_theta, hyper)
        done = torch.equal(new_active, active) and bool(((new_a - a).abs() <= tol * new_a).all())
        a, active = new_a, new_active
        if done:
            break
    state = CGPState(a, active, theta)
    zero = q_zero_probability(state, hyper).numpy()
    a_np = a.numpy()
    rate = (1 + hyper["beta"]).numpy()
    return {
        "doc_shape": a_np,
        "active_prob": 1 - zero,
        "component_counts": a_np - model.alpha,
        "doc_scores_mean": (1 - zero) * a_np / rate,
    }


