"""Hyperparameter updates for the DCA engines (``learn_alpha``, ``learn_beta``, ``learn_rho`` of ``fit``).

The chapter leaves α, β estimation to the cited works (Buntine & Jakulin 2006, Section 7.5); these are the
standard updates recommended in the digest (§1.8, [EXT]):

* DM α from Gibbs counts: Minka's (2000) fixed point for the Dirichlet-multinomial likelihood of the
  component counts c_(i),
  α_k ← α_k [Σ_i ψ(c_ik + α_k) − I ψ(α_k)] / [Σ_i ψ(L_i + Σα) − I ψ(Σα)]   (:func:`minka_alpha`);
* DM α for VB: Newton's method on Σ_i E_q[log p(m_(i) | α)], whose stationary point satisfies
  ψ(Σα) − ψ(α_k) + (1/I) Σ_i E_q[log m_ik] = 0 (Minka 2000, the Dirichlet MLE from mean log
  proportions; :func:`dirichlet_alpha_newton`);
* GaP α with β fixed: solve ψ(α_k) = log β_k + (1/I) Σ_i E[log l_ik] by Newton (:func:`gamma_shape_newton`);
* GaP β with α fixed: β_k = α_k I / Σ_i E[l_ik], the gamma-rate MLE from expected scores (:func:`gamma_rate`);
* CGP ρ: the expected fraction of documents whose score l_ik is zero (:func:`zero_fraction`);
* the symmetric topic–word γ for VB: Newton on Σ_k E_q[log Dirichlet(θ_k | γ)] (:func:`gamma_update`).

Each function is pure: it takes the current value and the statistics and returns the new value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError

__all__ = [
    "check_learn",
    "dirichlet_alpha_newton",
    "gamma_update",
    "gamma_rate",
    "gamma_shape_newton",
    "gibbs_hyper_update",
    "minka_alpha",
    "minka_alpha_hist",
    "minka_symmetric_gamma",
    "vb_hyper_update",
    "with_hyperparameters",
    "zero_fraction",
]

_MIN = 1e-10


def minka_alpha(
    alpha: torch.Tensor, doc_counts: torch.Tensor, doc_lengths: torch.Tensor, *, max_iter: int = 200, tol: float = 1e-10
) -> torch.Tensor:
    """Minka's fixed point for the Dirichlet α from component counts c (I, K) with totals L (I,).

    Iterated to convergence (relative change ≤ ``tol``); the fixed point maximises
    Σ_i log ∫ Mult(c_(i) | L_i, m) Dir(m | α) dm. Documents with L_i = 0 carry no information and are
    dropped.
    """
    keep = doc_lengths > 0
    c, lengths = doc_counts[keep], doc_lengths[keep]
    n = c.shape[0]
    a = alpha.clone()
    for _ in range(max_iter):
        num = torch.digamma(c + a).sum(0) - n * torch.digamma(a)
        den = torch.digamma(lengths + a.sum()).sum() - n * torch.digamma(a.sum())
        new = (a * num / den).clamp_min(_MIN)
        done = bool(((new - a).abs() <= tol * a).all())
        a = new
        if done:
            break
    return a


def dirichlet_alpha_newton(
    alpha: torch.Tensor, mean_log: torch.Tensor, *, max_iter: int = 100, tol: float = 1e-12
) -> torch.Tensor:
    """Newton's method for the Dirichlet α given s_k = (1/I) Σ_i E[log m_ik] (Minka 2000, Section 1).

    The Hessian of f(α) = log Γ(Σα) − Σ log Γ(α_k) + Σ (α_k − 1) s_k is diag(−ψ'(α)) + ψ'(Σα) 1 1ᵀ, so the
    step is O(K) by Sherman–Morrison; a step that would leave α ≤ 0 is halved until it does not.
    """
    a = alpha.clone()
    for _ in range(max_iter):
        grad = torch.digamma(a.sum()) - torch.digamma(a) + mean_log
        q = -torch.polygamma(1, a)
        z = torch.polygamma(1, a.sum())
        b = (grad / q).sum() / (1 / z + (1 / q).sum())
        step = (grad - b) / q
        scale = 1.0
        while bool(((a - scale * step) <= 0).any()) and scale > 1e-8:
            scale /= 2
        new = (a - scale * step).clamp_min(_MIN)
        done = bool(((new - a).abs() <= tol * a).all())
        a = new
        if done:
            break
    return a


def gamma_shape_newton(target: torch.Tensor, *, n_iter: int = 8) -> torch.Tensor:
    """Solve ψ(α) = ``target`` for α > 0 (the inverse digamma, Minka's initialisation and Newton steps).

    For GaP with β fixed, ``target`` = log β_k + (1/I) Σ_i E[log l_ik].
    """
    euler = -torch.digamma(torch.ones_like(target))  # −ψ(1) = Euler's constant
    a = torch.where(target >= -2.22, torch.exp(target) + 0.5, -1 / (target + euler))
    for _ in range(n_iter):
        a = (a - (torch.digamma(a) - target) / torch.polygamma(1, a)).clamp_min(_MIN)
    return a


def gamma_rate(alpha: torch.Tensor, mean_scores: torch.Tensor) -> torch.Tensor:
    """β_k = α_k / ((1/I) Σ_i E[l_ik]): the gamma-rate MLE with the shape fixed."""
    return alpha / mean_scores.clamp_min(_MIN)


def zero_fraction(zero_probs: torch.Tensor, *, floor: float = 1e-6) -> torch.Tensor:
    """ρ_k = (1/I) Σ_i P(l_ik = 0): the expected fraction of zero scores, kept inside [floor, 1 − floor]."""
    return zero_probs.mean(0).clamp(floor, 1 - floor)


# ------------------------------------------------------------------ engine glue

_LEARNABLE = {
    "alpha": ("DirichletDCA", "GammaPoissonDCA", "ConditionalGammaPoissonDCA"),
    "beta": ("GammaPoissonDCA", "ConditionalGammaPoissonDCA"),
    "rho": ("ConditionalGammaPoissonDCA",),
}


def check_learn(model: Any, **flags: Any) -> tuple[str, ...]:
    """Validate ``learn_<name>`` flags for ``model``; returns the names to learn, in a fixed order."""
    names = []
    for flag, value in flags.items():
        if not isinstance(value, bool):
            raise DataError(f"{flag} must be True or False; got {value!r}.")
        name = flag.removeprefix("learn_")
        if value:
            if type(model).__name__ not in _LEARNABLE[name]:
                raise DataError(
                    f"{flag}=True needs a model with a {name} hyperparameter ({', '.join(_LEARNABLE[name])}); "
                    f"got {type(model).__name__}. Drop {flag}."
                )
            names.append(name)
    return tuple(n for n in ("alpha", "beta", "rho") if n in names)


def with_hyperparameters(model: Any, **values: Any) -> Any:
    """A copy of a DCA model with some hyperparameters replaced (numpy or torch values)."""
    from latentfs.models.dca import ConditionalGammaPoissonDCA, DirichletDCA

    kw: dict[str, Any] = {"alpha": model.alpha, "gamma": model.gamma}
    if isinstance(model, DirichletDCA):
        kw["groups"] = model.groups
    else:
        kw["beta"] = model.beta
    if isinstance(model, ConditionalGammaPoissonDCA):
        kw["rho"] = model.rho
    kw.update({k: np.asarray(v.cpu().numpy() if isinstance(v, torch.Tensor) else v, dtype=np.float64)
               for k, v in values.items()})
    cls: Any = type(model)
    return cls(model.n_components, **kw)


def _refresh_zero_prob(hyper: dict[str, torch.Tensor], out: dict[str, torch.Tensor]) -> None:
    if "rho" in hyper:
        from latentfs.inference.dca.common import cgp_zero_probability

        merged = {**hyper, **out}
        out["zero_prob"] = cgp_zero_probability(merged["alpha"], merged["beta"], merged["rho"])


def gibbs_hyper_update(
    model: Any, state: Any, data: Any, hyper: dict[str, torch.Tensor], learn: tuple[str, ...]
) -> dict[str, torch.Tensor]:
    """New values of the learned hyperparameters after a Gibbs sweep (stochastic EM, module docstring).

    DM α: :func:`minka_alpha` on the sweep's counts c_(i). GaP/CGP: from the sampled scores l (for CGP
    over the documents where l_ik > 0, the slab's draws): α by :func:`gamma_shape_newton`, β by
    :func:`gamma_rate`, ρ by :func:`zero_fraction` of P(l_ik = 0 | c_ik) (the Table 3 zero probability
    where c_ik = 0: the expected fraction of zero scores given the sweep's counts).
    """
    from latentfs.models.dca import DirichletDCA

    out: dict[str, torch.Tensor] = {}
    if isinstance(model, DirichletDCA):
        out["alpha"] = minka_alpha(hyper["alpha"], state.doc_counts, data.doc_lengths)
        return out
    scores = state.doc_latent
    active = (scores > 0).to(scores.dtype)
    n_active = active.sum(0).clamp_min(1.0)
    if "alpha" in learn:
        mean_log = (torch.log(scores.clamp_min(1e-300)) * active).sum(0) / n_active
        out["alpha"] = gamma_shape_newton(torch.log(hyper["beta"]) + mean_log)
    if "beta" in learn:
        out["beta"] = gamma_rate(out.get("alpha", hyper["alpha"]), scores.sum(0) / n_active)
    if "rho" in learn:
        # Rao-Blackwellised: P(l_ik = 0 | c_ik) is the Table 3 zero probability where c_ik = 0, else 0
        p0 = torch.where(state.doc_counts == 0, hyper["zero_prob"].expand_as(scores), torch.zeros_like(scores))
        out["rho"] = zero_fraction(p0)
    _refresh_zero_prob(hyper, out)
    return out


def vb_hyper_update(
    model: Any, doc_shape: torch.Tensor, hyper: dict[str, torch.Tensor], learn: tuple[str, ...]
) -> dict[str, torch.Tensor]:
    """New α (and β) after a VB cycle, from q(m) = Dir(a) or q(l_k) = Gamma(a_k, 1 + β_k).

    DM α: :func:`dirichlet_alpha_newton` on the mean of E_q[log m] = ψ(a) − ψ(Σa). GaP: α from the mean
    of E_q[log l] = ψ(a) − log(1 + β) by :func:`gamma_shape_newton`; β from the mean of E_q[l] = a/(1 + β)
    by :func:`gamma_rate`. Each maximises the α- (β-) dependent part of Σ_i E_q[log p(latent_(i))] with q
    held, so it is a coordinate-ascent step on the bound with q's rate held at its current value.
    """
    from latentfs.models.dca import DirichletDCA

    out: dict[str, torch.Tensor] = {}
    a = doc_shape
    if isinstance(model, DirichletDCA):
        mean_log = (torch.digamma(a) - torch.digamma(a.sum(-1, keepdim=True))).mean(0)
        out["alpha"] = dirichlet_alpha_newton(hyper["alpha"], mean_log)
        return out
    rate = 1 + hyper["beta"]
    if "alpha" in learn:
        mean_log = (torch.digamma(a) - torch.log(rate)).mean(0)
        out["alpha"] = gamma_shape_newton(torch.log(hyper["beta"]) + mean_log)
    if "beta" in learn:
        out["beta"] = gamma_rate(out.get("alpha", hyper["alpha"]), (a / rate).mean(0))
    return out


# ------------------------------------------------------------------ sampler schedule
DRIFT_TOLERANCE = 0.1


def warmup_average(trace: np.ndarray) -> np.ndarray:
    """The value a sampler keeps after learning during warm-up: the mean of the second half of the updates.

    Each warm-up sweep's update is one stochastic-EM step (Celeux & Diebolt 1985): the iterates do not
    converge to a point but fluctuate around the estimate, and averaging the iterates once they have
    settled (Nielsen 2000, "The stochastic EM algorithm: estimation and asymptotic results", Bernoulli 6)
    gives a less noisy value than the last one. ``trace`` is (sweep, ...).
    """
    trace = np.asarray(trace, dtype=np.float64)
    return trace[trace.shape[0] // 2 :].mean(0)


def warmup_drift(trace: np.ndarray) -> float:
    """The convergence gate of warm-up learning: max relative change between the means of the last two
    quarters of the updates (``trace`` (sweep, ...)); 0 when there are fewer than 4 updates."""
    trace = np.asarray(trace, dtype=np.float64)
    n = trace.shape[0]
    if n < 4:
        return 0.0
    q3, q4 = trace[n // 2 : 3 * n // 4].mean(0), trace[3 * n // 4 :].mean(0)
    scale = np.maximum(np.abs(q3) + np.abs(q4), 1e-12) / 2
    return float(np.max(np.abs(q4 - q3) / scale))


def minka_alpha_np(alpha: np.ndarray, doc_counts: np.ndarray, doc_lengths: np.ndarray) -> np.ndarray:
    """:func:`minka_alpha` on numpy counts (the collapsed sampler's c_(i))."""
    out = minka_alpha(torch.as_tensor(np.asarray(alpha, dtype=np.float64)),
                      torch.as_tensor(np.asarray(doc_counts, dtype=np.float64)),
                      torch.as_tensor(np.asarray(doc_lengths, dtype=np.float64)))
    return out.numpy()


def check_warmup_learning(
    traces: dict[str, np.ndarray], num_warmup: int, *, warn: bool, method: str
) -> dict[str, float]:
    """The convergence gate: :func:`warmup_drift` of each learned hyperparameter's warm-up updates over
    every chain (``traces[name]`` (chain, sweep, K)); warns with a ``ConvergenceWarning`` above 10%."""
    import warnings

    drifts = {name: max(warmup_drift(chain[:num_warmup]) for chain in trace) for name, trace in traces.items()}
    bad = {name: d for name, d in drifts.items() if d > DRIFT_TOLERANCE}
    if warn and bad:
        from latentfs.core.convergence_warning import ConvergenceWarning  # imports scikit-learn: only to warn

        what = ", ".join(f"{name} moved {d:.0%}" for name, d in bad.items())
        warnings.warn(
            f"{method}: learned hyperparameters were still moving at the end of warm-up ({what} between the last "
            f"two quarters of the {num_warmup} warm-up sweeps, over {DRIFT_TOLERANCE:.0%}); the kept draws use an "
            "unsettled value. Raise num_warmup.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return drifts


def gamma_update(stats: torch.Tensor, gamma: float, *, floor: float = 1e-6) -> float:
    """The symmetric topic–word prior γ that maximises Σ_k E_q[log Dirichlet(θ_k | γ)] with q(θ_k) =
    Dirichlet(γ_old + S_k), S (K, J) a cycle's expected counts.

    With T = Σ_{k,j} E_q[log θ_kj] = Σ_{k,j} [ψ(λ_kj) − ψ(Σ_j λ_kj)], λ = γ_old + S, the maximiser solves
    ψ(Jγ) − ψ(γ) = −T / (KJ) (the variational-EM estimate of smoothed LDA's η in Blei, Ng & Jordan 2003, with a
    symmetric parameter); Newton's method on log γ, where the left side is monotone.
    Costs J·K digammas per call.
    """
    from scipy.special import digamma, polygamma

    K, J = stats.shape[-2:]
    lam = stats + gamma
    psi_rows = torch.digamma(lam.sum(-1, keepdim=True))
    T = float(lam.digamma_().sub_(psi_rows).sum())  # in place: one K × J temporary, not three
    target = -T / (K * J)
    x = float(np.log(gamma))
    for _ in range(100):
        g = float(np.exp(x))
        step = (digamma(J * g) - digamma(g) - target) / ((J * polygamma(1, J * g) - polygamma(1, g)) * g)
        x -= float(np.clip(step, -2.0, 2.0))
        if abs(step) < 1e-12:
            break
    return max(float(np.exp(x)), floor)


# ----------------------------------------------------------------------------- Minka's updates from integer counts
# (collapsed Gibbs learns α and γ from its count tables between sweeps)
def _digamma_diff(values: np.ndarray, weights: np.ndarray, a: Any) -> np.ndarray:
    """Σ_n weights[n] [ψ(values[n] + a) − ψ(a)], broadcast over a's trailing axes."""
    from scipy.special import digamma  # here: the VB path imports this module and needs no scipy.special

    return (weights * (digamma(values + a) - digamma(a))).sum(0)


def minka_symmetric_gamma(
    gamma: float, word_counts: np.ndarray, *, max_iter: int = 100, tol: float = 1e-8, floor: float = 1e-6
) -> float:
    """Minka's fixed point for a symmetric Dirichlet γ of the K topic–word distributions, from counts N (J, K).

    γ ← γ · Σ_{j,k} [ψ(N_jk + γ) − ψ(γ)] / (J · Σ_k [ψ(N_k + Jγ) − ψ(Jγ)]) (Minka 2000, "Estimating a
    Dirichlet distribution", eq. 55 with a symmetric parameter; Wallach, Mimno & McCallum 2009, "Rethinking
    LDA: why priors matter"). The sums run over a histogram of the non-zero counts (entries with N_jk = 0
    contribute 0), so one iteration costs O(#distinct counts), not O(J·K).
    """
    from scipy.special import digamma

    n = np.asarray(word_counts)
    J = n.shape[0]
    hist = np.bincount(n.ravel().astype(np.int64))
    values = np.nonzero(hist[1:])[0] + 1
    weights = hist[values].astype(np.float64)
    values = values.astype(np.float64)
    nk = n.sum(0).astype(np.float64)
    g = float(gamma)
    for _ in range(max_iter):
        num = float(_digamma_diff(values, weights, np.float64(g)))
        den = J * float((digamma(nk + J * g) - digamma(J * g)).sum())
        new = max(g * num / den, floor) if den > 0 else g
        done = abs(new - g) <= tol * g
        g = new
        if done:
            break
    return g


def minka_alpha_hist(alpha: np.ndarray, doc_counts: np.ndarray, lengths: np.ndarray, *, max_iter: int = 200,
                     tol: float = 1e-10, floor: float = 1e-10) -> np.ndarray:
    """Minka's fixed point for the document Dirichlet α from the counts c (I, K), by count histograms.

    The same fixed point as :func:`latentfs.inference.dca.hyper.minka_alpha`,
    α_k ← α_k Σ_i [ψ(c_ik + α_k) − ψ(α_k)] / Σ_i [ψ(L_i + Σα) − ψ(Σα)]. For integer counts each digamma
    difference is a sum, ψ(c + a) − ψ(a) = Σ_{m<c} 1/(a + m), so Σ_i [ψ(c_ik + α_k) − ψ(α_k)] =
    Σ_m #{i : c_ik > m} / (α_k + m) (Wallach 2008, "Structured topic models for language", §2.4): an iteration
    costs O(K · max c) divisions and no digamma. Documents with L_i = 0 add 0 to both sums.
    """
    c = np.asarray(doc_counts)
    K = c.shape[1]
    top = int(c.max(initial=0))
    index = np.dtype(np.int32 if (top + 1) * K < 2**31 else np.int64)  # int64 broadcasting is ~20x slower here
    cells: np.ndarray = c.astype(index, copy=False) * K + np.arange(K, dtype=index)
    hist = np.bincount(cells.ravel(), minlength=(top + 1) * K).reshape(top + 1, K)
    above = np.cumsum(hist[::-1], 0)[::-1][1:].astype(np.float64)  # above[m, k] = #{i : c_ik > m}
    steps = np.arange(top, dtype=np.float64)[:, None]
    length_above = np.cumsum(np.bincount(np.asarray(lengths).astype(np.int64))[::-1])[::-1][1:].astype(np.float64)
    length_steps = np.arange(length_above.size, dtype=np.float64)
    a = np.asarray(alpha, dtype=np.float64).copy()
    for _ in range(max_iter):
        num = (above / (steps + a)).sum(0)
        den = float((length_above / (length_steps + a.sum())).sum())
        new = np.maximum(a * num / den, floor)
        done = bool((np.abs(new - a) <= tol * a).all())
        a = new
        if done:
            break
    return a
