"""Maximum-likelihood and MAP paths for DCA: KL-NMF, PLSI EM and MAP (Buntine & Jakulin 2006, §7.1).

Every engine here keeps a point estimate (doc latent, Θ) and iterates a multiplicative / EM update,
vectorised over the sparse non-zeros: the rates (Θ l)_j are evaluated at the non-zeros only
(``sampled_addmm``), the ratios w_j / (Θ l)_j form one sparse matrix, and two sparse–dense products give

* the expected component counts E[c_(i)]_k = l_k Σ_j θ_{jk} w_j / (Θ l)_j (responsibilities summed over
  words, never stored), and
* the expected word counts per component S_{kj} = θ_{jk} Σ_i l_k w_j / (Θ l)_j.

The engines (``latentfs.fit(model, X, method=...)``):

==========================  ==========  =======================================================
model                       method      update (objective, never decreasing)
==========================  ==========  =======================================================
GammaPoissonDCA             nmf_kl      Lee & Seung (2001) KL multiplicative updates; Lemma 2 of
                                        the chapter: GaP maximum likelihood with α = β = 0
                                        (log-likelihood of eq. 2; equivalently −D_KL(W ‖ Θ L))
DirichletDCA                plsi_em     Hofmann's PLSI EM, asymmetric form (digest §1.8):
                                        m_k ← Σ_j w_j r_jk / L, θ_jk ∝ Σ_i w_j r_jk
DirichletDCA                map         MAP of (m, Θ): m_k ∝ Σ_j w_j r_jk + α_k − 1,
                                        θ_jk ∝ Σ_i w_j r_jk + γ_j − 1 (log posterior)
GammaPoissonDCA             map         MAP of (l, Θ): l_k ← (E[c_k] + α_k − 1)/(1 + β_k),
                                        θ_jk ∝ S_jk + γ_j − 1 (log posterior)
==========================  ==========  =======================================================

With α = γ = 1 the DM MAP iterates *are* the PLSI EM iterates (Girolami & Kabán 2003), and with
Θ normalised and l = L m the NMF iterates (``schedule="em"``) are the PLSI iterates (Gaussier &
Goutte 2005); the tests check both identities exactly.

NMF schedules (a dict, :data:`NMF_SCHEDULES`):

* ``"em"`` — both factors from the same ratios: the chapter's rewrite rules, which are EM for the
  GaP likelihood with α = β = 0; after each update Σ_k l_k = L.
* ``"alternating"`` — the scores first, then Θ from the *new* scores, as in Lee & Seung's paper and
  scikit-learn's ``NMF(solver="mu")``. Θ is renormalised after each step with the compensating
  rescaling of l, which leaves the product Θ L (and the objective) unchanged, so the iterates' product
  equals scikit-learn's unnormalised run from the same start.

Priors below 1 (α_k < 1 or γ_j < 1) make the posterior density unbounded at the simplex boundary,
so no interior MAP exists. The MAP engines then clip the updates at 0 (the usual convention; a
clipped entry stays 0) and drop the ``(α − 1) log 0`` terms from the reported objective; only with
α, γ ≥ 1 is the objective guaranteed not to decrease.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.options import check_choice, check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.inference.dca.common import (
    DCAData,
    DCAModel,
    dims_and_coords,
    doc_loglik,
    log_length_factorials,
    model_groups,
    prepare,
    resolve_model,
)
from latentfs.inference.dca.point_updates import (  # noqa: F401  (the updates, re-exported)
    _MAP_STEPS,
    _TINY,
    NMF_SCHEDULES,
    PointState,
    _clipped_simplex,
    _log_of_positive,
    _MapStep,
    _normalise_rows,
    _rates,
    expected_counts,
    gap_ml_loglik,
    kl_divergence,
    map_dm_step,
    map_gap_step,
    map_log_posterior,
    nmf_alternating_step,
    nmf_em_step,
    nmf_step,
    plsi_step,
    theta_simplex,
)
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

__all__ = [
    "PointState",
    "NMF_SCHEDULES",
    "expected_counts",
    "nmf_step",
    "plsi_step",
    "map_dm_step",
    "map_gap_step",
    "kl_divergence",
    "gap_ml_loglik",
    "fit_nmf_kl",
    "fit_plsi",
    "fit_map",
]

# ----------------------------------------------------------------------------------------- init
def point_init(model: DCAModel, data: DCAData, generator: torch.Generator, scores: bool) -> PointState:
    """Θ with Dirichlet(1)-random rows; doc latent uniform: l_k = L/K (scores) or m_k = 1/K."""
    K, J = model.n_components, data.n_features
    from latentfs.core.driver import host_generator

    # drawn on the host: a GPU fit starts where the same seed's CPU fit does
    e = -torch.log(torch.rand(K, J, generator=host_generator(generator), dtype=data.dtype).clamp_min(_TINY))
    e = e.to(data.device)
    theta = theta_simplex(e, model_groups(model, data))
    if scores:
        doc = (data.doc_lengths / K)[:, None].expand(-1, K).clone()
    else:
        doc = torch.full((data.n_documents, K), 1.0 / K, dtype=data.dtype, device=data.device)
    return PointState(doc, theta)


def _init_state(init: Any, model: DCAModel, data: DCAData, scores: bool) -> PointState:
    """A user-given start: a PointState or a pair (doc_latent (I, K), topic_word (K, J)) of arrays."""
    if isinstance(init, PointState):
        doc, theta = init.doc_latent, init.topic_word
    elif isinstance(init, (tuple, list)) and len(init) == 2:
        doc, theta = init
    else:
        raise DataError(
            "init must be a PointState or a pair (doc_latent, topic_word) of arrays; got "
            f"{type(init).__name__}. Pass e.g. init=(W0, H0)."
        )
    kw: dict[str, Any] = {"dtype": data.dtype, "device": data.device}
    doc = torch.as_tensor(np.asarray(doc, dtype=np.float64), **kw)
    theta = torch.as_tensor(np.asarray(theta, dtype=np.float64), **kw)
    K = model.n_components
    if doc.shape != (data.n_documents, K) or theta.shape != (K, data.n_features):
        raise DataError(
            f"init must hold doc_latent of shape {(data.n_documents, K)} and topic_word of shape "
            f"{(K, data.n_features)}; got {tuple(doc.shape)} and {tuple(theta.shape)}."
        )
    if not (torch.isfinite(doc).all() and torch.isfinite(theta).all()) or (doc < 0).any() or (theta < 0).any():
        raise DataError("init must hold finite non-negative values; got a negative or non-finite entry.")
    if (theta.sum(-1) <= 0).any():
        raise DataError("init topic_word has a row with no mass; every component needs a positive sum.")
    groups = model_groups(model, data)
    scale = theta.sum(-1)
    theta = theta / scale[:, None] if groups is None else theta_simplex(theta, groups)
    if scores:
        doc = doc * scale  # keep the product doc @ topic_word
    else:
        doc = _normalise_rows(doc)
    return PointState(doc, theta)


# ----------------------------------------------------------------------------------------- the specs
def _point_export(model: DCAModel, data: DCAData, run: Any, *, diagnostics: dict[str, Any],
                  extras: dict[str, np.ndarray]) -> Export:
    state: PointState = run.state
    to_np = lambda t: t.detach().cpu().numpy().astype(np.float64)  # noqa: E731
    dims, coords = dims_and_coords(model, data)
    loglik = doc_loglik(model, data, state.topic_word, state.doc_latent)
    return Export(
        dims=dims, coords=coords,
        fitted={
            "topic_word": {"family": "point", "value": to_np(state.topic_word)},
            model.doc_site: {"family": "point", "value": to_np(state.doc_latent)},
        },
        diagnostics={"objective": run.objective, "observation_dim": "document", **diagnostics},
        log_likelihood=to_np(loglik)[None, None, :],
        extras={"kept_documents": data.counts.kept_documents, "doc_lengths": data.counts.doc_lengths, **extras},
    )


def _tempering(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise DataError(f"{name} must be a number in (0, 1]; got {value!r}. Use 1 for plain EM.")
    return float(value)


def _schedule(name: str, value: Any) -> str:
    return str(check_choice(name, value, sorted(NMF_SCHEDULES)))


#: The run options every optimiser of the family takes, with their shared defaults and rules (the point engines
#: here, the conditional GaP's VB in :mod:`~latentfs.inference.dca.cgp`).
RUN_OPTIONS: dict[str, Option] = {
    name: shared(name) for name in ("seed", "dtype", "device", "empty_documents", "progress", "warn")
}

#: The options the point-estimate engines share.
POINT_OPTIONS: dict[str, Option] = {
    "max_iter": shared("max_iter", 500),
    "tol": shared("tol", 1e-6),
    "n_init": Option(1, lambda n, v: check_int(n, v, low=1), "int ≥ 1",
                     "random starts (Θ rows Dirichlet(1)); the best objective is kept"),
    "init": Option(None, None, "PointState, (doc_latent, topic_word) or None", "the first start"),
    **RUN_OPTIONS,
}


class DCAPoint(EngineSpec):
    """The point-estimate engines of the DCA family: a start (the user's ``init`` for the first, Θ rows
    Dirichlet(1) otherwise, start r from the r-th generator spawned from the seed) and one step; the subclasses
    say which step and what the result reports.

    Parameters
    ----------
    max_iter, tol : stop after ``max_iter`` iterations, or when the objective's relative change ≤ ``tol``.
    n_init : int
        Random starts (Θ rows Dirichlet(1)); the run with the highest objective is returned.
    init : PointState or (doc_latent, topic_word), optional
        Start of the first restart (Θ's rows are normalised; GaP scores are rescaled to keep the product).
    seed, dtype, device, empty_documents, progress, warn : see :func:`latentfs.fit`.
    """

    kind = "optimizer"
    remedies = "raise max_iter, loosen tol, or use n_init > 1"
    scores = False

    def describe(self, model_name: str) -> str:
        return self.desc

    def prepare(self, model: Any, X: Any, o: Options) -> Any:
        from types import SimpleNamespace

        data = prepare(X, dtype=o.dtype, device=o.device, empty_documents=o.empty_documents)
        return SimpleNamespace(data=data, model=resolve_model(model, data))

    def n_starts(self, prep: Any, o: Options) -> int:
        return int(o.n_init)

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> PointState:
        if o.init is not None and index == 0:
            return _init_state(o.init, prep.model, prep.data, self.scores)
        return point_init(prep.model, prep.data, gen, self.scores)


class NMFKL(DCAPoint):
    """KL-NMF by Lee–Seung multiplicative updates = GaP maximum likelihood with α = β = 0 (Lemma 2).

    ``latentfs.fit(GammaPoissonDCA(K), X, method="nmf_kl")``; the model's α, β and γ are not used (no
    priors: this is maximum likelihood of the scores and Θ jointly, which the chapter warns overfits
    more easily than the marginal likelihood).

    Parameters
    ----------
    schedule : {"em", "alternating"}
        ``"em"``: both factors from the same ratios (the chapter's rewrite rules; equal to PLSI EM with
        l = L m). ``"alternating"``: scores then Θ, as scikit-learn's ``NMF(solver="mu")``.
    max_iter, tol, n_init, init, seed, dtype, device, empty_documents, progress, warn
        As every point-estimate engine of the family (:class:`DCAPoint`).

    Returns
    -------
    Posterior
        Point sites ``topic_word`` (Θ, rows sum to 1) and ``doc_scores`` (l, NMF's W rescaled by Θ's row
        sums, so that ``doc_scores @ topic_word`` is NMF's W H). ``trace`` is the Poisson
        log-likelihood (eq. 2) per iteration; ``diagnostics["kl_divergence"]`` is Lee & Seung's cost
        D(X ‖ W H) at the result.

    Examples
    --------
    >>> import latentfs
    >>> X = latentfs.GammaPoissonDCA(2, alpha=1.0, beta=0.05).simulate(30, 12, seed=0)["counts"]
    >>> result = latentfs.fit(latentfs.GammaPoissonDCA(2), X, method="nmf_kl", seed=0, warn=False)
    >>> bool((np.diff(result.trace[0]) >= -1e-9).all())
    True
    >>> np.allclose(result.mean("doc_scores").sum(1), X.sum(1))  # Σ_k l_k = L after an l-update
    True
    """

    method = "nmf_kl"
    desc = "KL-NMF"
    scores = True
    options = {"schedule": Option("em", _schedule, "str", "'em' (the chapter's) or 'alternating' (scikit-learn's)"),
               **POINT_OPTIONS}

    def step(self, prep: Any, o: Options, state: PointState) -> tuple[PointState, float]:
        new, objective = nmf_step(prep.data, state, o.schedule)
        return new, float(objective)

    def hyperparameters(self, model: Any, prep: Any, o: Options) -> dict[str, Any]:
        return {"n_components": prep.model.n_components,
                "prior": "none: maximum likelihood, GaP with alpha = beta = 0 (Lemma 2)"}

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        state: PointState = outcome.run.state
        return _point_export(
            prep.model, prep.data, outcome.run,
            diagnostics={"schedule": o.schedule,
                         "kl_divergence": kl_divergence(prep.data, state.doc_latent, state.topic_word),
                         "objective_name": "Poisson log-likelihood (eq. 2), alpha = beta = 0"},
            extras={"component_counts": state.doc_latent.detach().cpu().numpy()},
        )


class PLSI(DCAPoint):
    """PLSI by EM, asymmetric form (Hofmann 1999; digest §1.8): the non-Bayesian LDA.

    ``latentfs.fit(DirichletDCA(K), X, method="plsi_em")``; α and γ are not used (PLSI has no priors;
    with α = γ = 1 it is the MAP of DirichletDCA, ``method="map"``).

    Parameters
    ----------
    tempering : float in (0, 1]
        τ of tempered EM (Hofmann 2001): responsibilities ∝ (θ_jk m_k)^τ. 1 is plain EM, the only
        value for which the log-likelihood is guaranteed not to decrease. For the validation-driven
        schedule of τ use :class:`latentfs.inference.plsa.transformer.PLSATransformer`.
    max_iter, tol, n_init, init, seed, dtype, device, empty_documents, progress, warn
        As every point-estimate engine of the family (:class:`DCAPoint`).

    Returns
    -------
    Posterior
        Point sites ``topic_word`` (P(w | z)) and ``doc_topic`` (P(z | d)); ``trace`` is the multinomial
        log-likelihood Σ_i log p(w_(i) | m_(i), Θ) of eq. (4) (multinomial coefficient included).

    Examples
    --------
    >>> import latentfs
    >>> X = latentfs.DirichletDCA(2, alpha=0.5).simulate(30, 12, doc_length=40, seed=0)["counts"]
    >>> result = latentfs.fit(latentfs.DirichletDCA(2), X, method="plsi_em", seed=0, warn=False)
    >>> np.allclose(result.mean("doc_topic").sum(1), 1.0)
    True
    """

    method = "plsi_em"
    desc = "PLSI EM"
    options = {"tempering": Option(1.0, _tempering, "float in (0, 1]", "τ of tempered EM; 1 is plain EM"),
               **POINT_OPTIONS}

    def prepare(self, model: Any, X: Any, o: Options) -> Any:
        prep = super().prepare(model, X, o)
        prep.coef = float((log_length_factorials(prep.model, prep.data) - prep.data.log_factorials).sum())
        prep.groups = model_groups(prep.model, prep.data)
        return prep

    def step(self, prep: Any, o: Options, state: PointState) -> tuple[PointState, float]:
        new, objective = plsi_step(prep.data, state, float(o.tempering), prep.groups)
        return new, float(objective) + prep.coef

    def hyperparameters(self, model: Any, prep: Any, o: Options) -> dict[str, Any]:
        return {"n_components": prep.model.n_components, "prior": "none: maximum likelihood (PLSI)",
                "tempering": float(o.tempering)}

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        state: PointState = outcome.run.state
        return _point_export(
            prep.model, prep.data, outcome.run, diagnostics={"objective_name": "multinomial log-likelihood (eq. 4)"},
            extras={"component_counts": (state.doc_latent * prep.data.doc_lengths[:, None]).detach().cpu().numpy()},
        )


class MAP(DCAPoint):
    """MAP of the document latents and Θ jointly, by EM (digest §1.8; module docstring).

    ``latentfs.fit(model, X, method="map")`` for :class:`DirichletDCA` (m, Θ) or
    :class:`GammaPoissonDCA` (l, Θ). The objective is the model's log joint p(W, latent, Θ), which
    never decreases when every α_k ≥ 1 and γ_j ≥ 1; smaller values clip entries to 0 (module docstring).

    Parameters
    ----------
    max_iter, tol, n_init, init, seed, dtype, device, empty_documents, progress, warn
        As every point-estimate engine of the family (:class:`DCAPoint`).

    Returns
    -------
    Posterior
        Point sites ``topic_word`` and ``doc_topic`` / ``doc_scores``; ``trace`` is the log joint.

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2, alpha=1.0, gamma=1.0)
    >>> X = model.simulate(30, 12, doc_length=40, seed=0)["counts"]
    >>> result = latentfs.fit(model, X, method="map", seed=0, warn=False)
    >>> bool((np.diff(result.trace[0]) >= -1e-9).all())
    True
    """

    method = "map"
    options = POINT_OPTIONS

    def describe(self, model_name: str) -> str:
        return f"{model_name} MAP"

    def prepare(self, model: Any, X: Any, o: Options) -> Any:
        prep = super().prepare(model, X, o)
        prep.hyper = _hyper(prep.model, prep.data)
        prep.map_step = _MAP_STEPS[type(prep.model)]
        return prep

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> PointState:
        scores = isinstance(prep.model, GammaPoissonDCA)
        if o.init is not None and index == 0:
            return _init_state(o.init, prep.model, prep.data, scores)
        return point_init(prep.model, prep.data, gen, scores)

    def step(self, prep: Any, o: Options, state: PointState) -> tuple[PointState, float]:
        new, _ = prep.map_step(prep.data, state, prep.hyper)
        return new, float(map_log_posterior(prep.model, prep.data, state, prep.hyper))

    def hyperparameters(self, model: Any, prep: Any, o: Options) -> dict[str, Any]:
        return dict(prep.model.hyperparameters())

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        state: PointState = outcome.run.state
        hyper, data = prep.hyper, prep.data
        scores = isinstance(prep.model, GammaPoissonDCA)
        boundary = bool((hyper["alpha"] < 1).any() or (hyper["gamma"] < 1).any())
        comp = state.doc_latent if scores else state.doc_latent * data.doc_lengths[:, None]
        return _point_export(
            prep.model, data, outcome.run,
            diagnostics={"objective_name": "log joint p(W, latent, Theta)", "clipped_priors": boundary,
                         "zero_doc_entries": int((state.doc_latent == 0).sum()),
                         "zero_topic_word_entries": int((state.topic_word == 0).sum())},
            extras={"component_counts": comp.detach().cpu().numpy()},
        )


def _hyper(model: DCAModel, data: DCAData) -> dict[str, torch.Tensor]:
    kw: dict[str, Any] = {"dtype": data.dtype, "device": data.device}
    out = {"alpha": torch.as_tensor(model.alpha, **kw),
           "gamma": torch.as_tensor(model.gamma_vector(data.n_features), **kw)}
    if isinstance(model, GammaPoissonDCA):
        out["beta"] = torch.as_tensor(model.beta, **kw)
    groups = model_groups(model, data)
    if groups is not None:
        out["groups"] = groups
    return out



#: the specs, callable as ``engine(model, X, **options)`` (the pipeline runs them), under their earlier names
fit_nmf_kl = register_spec(NMFKL(), GammaPoissonDCA)
fit_plsi = register_spec(PLSI(), DirichletDCA)
fit_map = register_spec(MAP(), DirichletDCA, GammaPoissonDCA)
