"""EM (Baum–Welch) for hidden Markov models; Titterington (2006) §1.4, Rabiner (1989) §III.C.

E-step: the scaled forward–backward pass (:func:`~latentfs.inference.hmm.forward_backward.forward_backward`)
gives γ_t(k) = P(z_t = k | y) and Σ_t ξ_t(k, l) = Σ_t P(z_{t−1} = k, z_t = l | y). M-step (Rabiner eqs.
40a–c): π = Σ_s γ_{start_s} / n_sequences; A_kl = Σ_t ξ_t(k, l) / Σ_l' Σ_t ξ_t(k, l'); the emission
parameters are the weighted M-step of the mixture family with weights γ (Gaussian: weighted means and
covariances, plus ``reg_covar`` on the diagonal; categorical: weighted symbol frequencies). The
log-likelihood Σ_s log f(y_s | θ) never decreases (Baum et al. 1970; Dempster, Laird & Rubin 1977).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, check_choice
from latentfs.core.diagnostics import CollapsedComponentWarning
from latentfs.core.options import check_float, check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, run_starts, shared
from latentfs.core.registry import register_spec
from latentfs.inference.hmm.family import HMMFamily, check_optimizer_options, prepare
from latentfs.inference.hmm.forward_backward import ForwardBackward, forward_backward
from latentfs.models.hmm import CategoricalHMM, GaussianHMM

__all__ = ["HMMEM", "HMM_OPTIONS", "INITIALISATIONS", "collapsed_states", "em_step", "fit_em", "initial_params",
           "m_step"]

INITIALISATIONS = ("kmeans", "random")


def _onehot(labels: torch.Tensor, k: int) -> torch.Tensor:
    out = torch.zeros(labels.shape[0], k, dtype=torch.float64, device=labels.device)
    out[torch.arange(labels.shape[0], device=labels.device), labels] = 1.0
    return out


def _kmeans_labels(points: np.ndarray, k: int, gen: torch.Generator) -> torch.Tensor:
    """k-means labels (scikit-learn, one k-means++ start seeded from ``gen``)."""
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning

    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen).item())
    with warnings.catch_warnings():
        # Fewer distinct points than K: k-means says so; EM starts from the softened labels regardless.
        warnings.simplefilter("ignore", SkConvergenceWarning)
        labels = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(points).labels_
    return torch.as_tensor(labels, dtype=torch.long)


def _transition_counts(fam: HMMFamily, labels: torch.Tensor) -> torch.Tensor:
    """Σ_t [z_{t−1} = k, z_t = l] over the transitions inside sequences."""
    inside = ~fam.layout.is_start[1:]
    counts = torch.zeros(fam.k, fam.k, dtype=torch.float64, device=labels.device)
    ones = torch.ones(int(inside.sum()), dtype=torch.float64, device=labels.device)
    counts.index_put_((labels[:-1][inside], labels[1:][inside]), ones, accumulate=True)
    return counts


def initial_states(fam: HMMFamily, init: str | None, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Starting state weights (N, K) and hard labels (N,): k-means states (default for Gaussian emissions;
    softened to 0.9 / 0.1 so no state starts empty) or random responsibilities (default for categorical
    emissions). Drawn on the host and moved to the family's device, so a fit on a GPU starts where the CPU
    fit starts."""
    if init is None:
        init = "random" if fam.categorical else "kmeans"
    check_choice("init", init, INITIALISATIONS)
    k = fam.k
    if init == "kmeans":
        points = fam.emission.init_points().cpu().numpy()
        labels = _kmeans_labels(points, k, gen).to(fam.device)
        return 0.9 * _onehot(labels, k) + 0.1 / k, labels
    resp = torch.rand(fam.n, k, generator=gen, dtype=torch.float64).to(fam.device)
    resp = resp / resp.sum(1, keepdim=True)
    return resp, resp.argmax(1)


def initial_params(fam: HMMFamily, init: Any, gen: torch.Generator, reg: float) -> dict[str, Any]:
    """Starting values: user parameters (a dict in :meth:`HMMFamily.export`'s shapes), or the M-step of
    :func:`initial_states`' weights, with π uniform and A from the labels' transition counts plus one."""
    if isinstance(init, dict):
        return fam.import_(init, reg)
    if init is not None and not isinstance(init, str):
        raise DataError(f"init must be one of {list(INITIALISATIONS)} or a dict of starting values; got {init!r}.")
    resp, labels = initial_states(fam, init, gen)
    k = fam.k
    counts = _transition_counts(fam, labels) + 1.0
    return {
        "startprob": torch.full((k,), 1.0 / k, dtype=torch.float64, device=fam.device),
        "transmat": counts / counts.sum(1, keepdim=True),
        "emission": fam.emission.m_step(resp, reg),
    }


def m_step(fam: HMMFamily, fb: ForwardBackward, params: dict[str, Any], reg: float) -> dict[str, Any]:
    """Maximum-likelihood π, A and emission parameters from γ and Σ ξ (a row of A with no expected
    transitions out of its state keeps its value: it does not enter the likelihood)."""
    start = fb.gamma[fam.layout.starts].sum(0)
    start = start / start.sum()
    rows = fb.xi_sum.sum(1, keepdim=True)
    trans = torch.where(rows > 0, fb.xi_sum / rows.clamp_min(1e-300), params["transmat"])
    return {"startprob": start, "transmat": trans, "emission": fam.emission.m_step(fb.gamma, reg)}


def e_step(fam: HMMFamily, params: dict[str, Any]) -> ForwardBackward:
    """Forward–backward at ``params``."""
    return forward_backward(params["startprob"], params["transmat"], fam.log_emission(params), fam.layout)


def em_step(fam: HMMFamily, params: dict[str, Any], reg: float) -> tuple[dict[str, Any], float]:
    """One Baum–Welch iteration; returns the new parameters and ℓ at the *input* parameters."""
    fb = e_step(fam, params)
    return m_step(fam, fb, params, reg), float(fb.log_likelihood.sum())


def fit_em(
    fam: HMMFamily,
    *,
    n_init: int = 3,
    init: Any = None,
    reg_covar: float = 1e-6,
    max_iter: int = 1000,
    tol: float = 1e-6,
    seed: Any = None,
    warn: bool = True,
    progress: bool | None = None,
    callback: Any = None,
) -> dict[str, Any]:
    """Baum–Welch with restarts on a prepared family (start r from the r-th generator spawned from ``seed``); the
    run with the highest final ℓ is kept. The same starts and steps as ``latentfs.fit(model, X, method="em")``."""
    opts = check_optimizer_options(n_init=n_init, max_iter=max_iter, tol=tol, seed=seed, reg_covar=reg_covar)
    reg = _floor(fam, opts["reg_covar"])
    out = run_starts(lambda gen: initial_params(fam, init, gen, reg), lambda p: em_step(fam, p, reg),
                     n_init=1 if isinstance(init, dict) else int(n_init), seed=seed, max_iter=max_iter, tol=tol,
                     warn=warn, desc=f"EM {type(fam.model).__name__}", progress=progress, callback=callback,
                     remedies="raise max_iter, loosen tol, or raise n_init")
    best = out.run
    return {"params": best.state, "run": best, "runs": out.runs, "fb": e_step(fam, best.state), "reg": reg}


def _floor(fam: HMMFamily, reg_covar: float) -> Any:
    """The emission variance floor: relative to each column's variance, so a fit of c·X is the fit of X scaled (an
    absolute 1e-6 floor decoded the states of daily returns × 1e-8 at chance); as given for categorical emissions."""
    from latentfs.inference.emissions import scaled_reg

    return scaled_reg(fam.emission, reg_covar) if not fam.categorical else reg_covar


def collapsed_states(fam: HMMFamily, params: dict[str, Any], reg: Any, reg_covar: float) -> list[dict[str, Any]]:
    """States whose emission variance sits at the floor ([] for categorical emissions).

    A state on rows that tie (returns of exactly 0 on market holidays) has a likelihood limited only by the
    floor: a degenerate maximiser, not a better fit, which information criteria would reward (the mixture
    family's check, :func:`latentfs.inference.mixture.em.collapsed_components`, on the emission parameters)."""
    if fam.categorical:
        return []
    from latentfs.inference.mixture.em import collapsed_components

    found = collapsed_components(fam.emission, params["emission"], reg, reg_covar)
    for entry in found:
        entry["state"] = entry.pop("component")
    return found


def collapse_message(found: list[dict[str, Any]], reg_covar: float) -> str:
    """The warning of :func:`collapsed_states`: which state, which feature, the remedies."""
    parts = "; ".join(f"state {c['state']} has variance {c['relative_variance']:.2g} × the column variance "
                      f"along {c['feature']!r}" for c in found)
    return (
        f"EM kept a fit with collapsed state(s): {parts}. Such a state sits on rows that tie in that feature "
        "(exact zeros, a rounded or censored value) and its likelihood is limited only by reg_covar="
        f"{reg_covar:g}: a degenerate maximiser, not a better fit, and its log-likelihood and BIC are "
        "inflated. Use fewer states, a larger reg_covar, add jitter to the tied values, or method='vb' / "
        "'gibbs' with a proper prior."
    )


def information_criteria(loglik: float, n_params: int, n: int) -> dict[str, float]:
    """AIC = −2ℓ + 2ν and BIC = −2ℓ + ν log N (N observations), minimised."""
    return {"aic": -2 * loglik + 2 * n_params, "bic": -2 * loglik + n_params * math.log(n)}


def _init_option(name: str, value: Any) -> Any:
    if value is None or isinstance(value, dict):
        return value
    if not isinstance(value, str):
        raise DataError(f"init must be one of {list(INITIALISATIONS)} or a dict of starting values; got {value!r}.")
    return check_choice(name, value, INITIALISATIONS)


#: The options the HMM optimisers share (EM adds reg_covar).
HMM_OPTIONS: dict[str, Option] = {
    "lengths": Option(None, None, "sequence of int or None", "lengths of the sequences concatenated in the data"),
    "n_init": Option(3, lambda n, v: check_int(n, v, low=1, remedy="Pass n_init=1 or more restarts."), "int ≥ 1",
                     "restarts; the best final objective is kept"),
    "init": Option(None, _init_option, "str, dict or None", "'kmeans', 'random', or starting values"),
    "max_iter": shared("max_iter", 1000),
    "tol": shared("tol", 1e-6),
    "seed": shared("seed"),
    "warn": shared("warn"),
    "progress": shared("progress"),
    "callback": shared("callback"),
    "device": shared("device"),
}


class HMMEM(EngineSpec):
    """Maximum likelihood by Baum–Welch EM with restarts (:func:`latentfs.fit` with ``method="em"``).

    Parameters
    ----------
    lengths : sequence of int, optional
        Lengths of the sequences concatenated in ``data`` (hmmlearn's convention); omit it when ``data``
        is a list of arrays (one per sequence) or a single sequence.
    n_init : int
        Restarts, start r drawn from the r-th generator spawned from ``seed``; the run with the highest final
        log-likelihood is kept, a run with a collapsed state only when every run has one.
    init : {"kmeans", "random"} or dict, optional
        k-means states (default for Gaussian emissions; scikit-learn ``KMeans``), random responsibilities
        (default for categorical emissions), or starting values ``startprob``, ``transmat`` and ``means`` with
        ``covariance`` (or ``precision``) / ``emission_probs`` in the shapes of the result's sites.
    reg_covar : float
        Added to each emission variance after the M-step (Gaussian emissions).
    max_iter, tol : stopping rule of :func:`~latentfs.core.driver.run_optimizer` (relative change of ℓ).
    device : str or torch.device
        Where the E- and M-steps run (``"cpu"``, ``"cuda"``, ``"cuda:1"``), in float64: on the CPU the compiled
        forward–backward recursion, elsewhere the torch scans. Starts are drawn on the host; results come
        back as NumPy arrays.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.hmm import GaussianHMM
    >>> hmm = GaussianHMM(2, mean_precision=0.02)
    >>> sim = hmm.simulate(4, 50, seed=0)
    >>> res = latentfs.fit(hmm, sim["data"], method="em", lengths=sim["lengths"], seed=0)
    >>> res.mean("transmat").shape, bool(res.diagnostics["converged"])
    ((2, 2), True)
    """

    affine_equivariant = True  # checked by check_engine: the fit of a·X + b is the fit of X transformed

    method = "em"
    kind = "optimizer"
    desc = "EM"
    options = {
        **HMM_OPTIONS,
        "reg_covar": Option(1e-6, lambda n, v: check_float(n, v, 0.0, remedy="Pass a small non-negative variance "
                                                           "floor, e.g. reg_covar=1e-6."), "float ≥ 0",
                            "added to each emission variance, as a multiple of that column's variance"),
    }
    degenerate_warning = CollapsedComponentWarning

    def prepare(self, model: Any, data: Any, o: Options) -> Any:
        from types import SimpleNamespace

        fam = prepare(model, data, o.lengths, device=o.device)
        return SimpleNamespace(model=model, fam=fam, reg=_floor(fam, o.reg_covar))

    def n_starts(self, prep: Any, o: Options) -> int:
        return 1 if isinstance(o.init, dict) else int(o.n_init)

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> dict[str, Any]:
        return initial_params(prep.fam, o.init, gen, prep.reg)

    def step(self, prep: Any, o: Options, state: dict[str, Any]) -> tuple[dict[str, Any], float]:
        return em_step(prep.fam, state, prep.reg)

    def degenerate(self, prep: Any, o: Options, state: dict[str, Any]) -> list[dict[str, Any]]:
        return collapsed_states(prep.fam, state, prep.reg, float(o.reg_covar))

    def degenerate_message(self, prep: Any, o: Options, flags: list[dict[str, Any]]) -> str:
        return collapse_message(flags, float(o.reg_covar))

    def hyperparameters(self, model: Any, prep: Any, o: Options) -> dict[str, Any]:
        return _hyperparameters(model, prep.fam)

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        fam, model = prep.fam, prep.model
        params = outcome.run.state
        fb: ForwardBackward = e_step(fam, params)
        ll = float(fb.log_likelihood.sum())
        n_params = model.n_parameters(fam.n_features)
        diag = {
            "log_likelihood": ll,
            "n_parameters": n_params,
            "n_observations": fam.n,
            "n_sequences": len(fam.data.lengths),
            "observation_dim": "sequence",
            "reg_covar": float(o.reg_covar),
            **information_criteria(ll, n_params, fam.n),
        }
        return Export(
            dims=fam.dims(), coords=fam.coords(), diagnostics=diag,
            fitted={k: {"family": "point", "value": v} for k, v in fam.export(params).items()},
            log_likelihood=fb.log_likelihood.cpu().numpy()[None, None],
            extras={"state_marginals": fb.gamma.cpu().numpy(), "lengths": fam.data.lengths},
        )


def _hyperparameters(model: Any, fam: HMMFamily) -> dict[str, Any]:
    """The model's hyperparameters, with the number of categories the fit used."""
    hp = model.hyperparameters()
    if fam.categorical:
        hp["n_categories"] = fam.n_categories
    return hp


register_spec(HMMEM(), GaussianHMM, CategoricalHMM)
