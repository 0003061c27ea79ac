"""Mean-field variational inference for DCA: Buntine & Jakulin (2006), Section 7, eq. (13)–(18), Fig. 4.

q(latent, V) = q(latent) q(V) with q(m) = Dirichlet(a) (DirichletDCA) or q(l_k) = Gamma(a_k, b_k) with
b_k = 1 + β_k (GammaPoissonDCA), and q(v_{j,·}) = Multinomial(w_j, n_{j,·}). One major cycle updates every
document's a once (vectorised over all documents: the responsibilities n are never stored, only the
sparse ratios w_j / Z_j), then Θ.

The Θ update is an option (digest §1.6.1):

* ``"chapter"`` — θ_{jk} ∝ S_{jk} + γ_j (eq. 15), the posterior mean of Dirichlet(γ + S);
* ``"map"`` — θ_{jk} ∝ max(S_{jk} + γ_j − 1, 0), the MAP under θ_{·,k} ~ Dirichlet(γ);
* ``"full"`` — q(θ_{·,k}) = Dirichlet(λ_{·,k}), λ = γ + S, and eq. (14) uses exp E[log θ]. This is the
  model scikit-learn's ``LatentDirichletAllocation`` fits (doc_topic_prior = α, topic_word_prior = γ).

The reported objective is the sum of the per-document bounds (16)/(18), plus the term that makes the
whole cycle coordinate ascent: Σ_{j,k} γ_j log θ_{jk} for ``"chapter"``, the log prior of Θ for
``"map"``, and the Θ part of the ELBO for ``"full"``. With the chapter's schedule (one document update
per cycle, continuing from the last cycle) it never decreases from one cycle to the next; by default
documents restart each cycle and take three updates (see :func:`fit_vb`), which finds better optima
sooner but is no longer guaranteed monotone.

Grouped DirichletDCA (``groups=``, Section 4.4): the responsibilities n_jk and the document update are
unchanged (each group's probabilities Σ_k m_k θ_jk are already normalised), the bound's multinomial
coefficient becomes Σ_g log L_g! − Σ_j log w_j!, and Θ is normalised within each group
(``theta_update`` "chapter" or "map").

Hyperparameter learning ascends the objective the fit records. ``learn_gamma=True`` (``theta_update="full"``
only) sets the symmetric topic–word prior γ, every cycle from the first, to the maximiser of the
γ-dependent part of that bound, Σ_k E_q[log Dirichlet(θ_k | γ)] (:func:`gamma_update`), between the λ updates:
coordinate ascent on the recorded bound, iterated until γ itself has settled. The bound has several local optima
in (q, γ), and a learned γ follows its start into one of them, so γ is learned from each of several starts
(``gamma_starts``, by default 0.01, 0.1 and 1, each a short run of :data:`GAMMA_SHORT_ITER` cycles) and the start
with the highest bound is continued: type-II maximum likelihood over starts, which the model's γ does not enter.
The chapter's and the MAP updates of Θ are point updates: their objectives contain Σ γ log θ without the
normaliser in γ, and with it the joint maximiser in (Θ, γ) is γ → 0 (no smoothing at all), so γ cannot be
learned on them and is refused there;
choose it by held-out score instead (the model's default γ is 1/K, as in scikit-learn and gensim).
``learn_alpha`` / ``learn_beta`` update the hyperparameters after every cycle from document shapes converged at
the cycle's Θ (:func:`latentfs.inference.dca.hyper.vb_hyper_update`: Newton on Σ_i E_q[log m_(i)] for DM α, the
gamma shape equation for GaP α, β_k = α_k I / Σ_i E_q[l_ik] for GaP β), each the maximiser of the document
bounds' α- (β-) dependent part with q held.

A fit whose components are still all alike when it stops (the symmetric saddle of the near-uniform start, where
the model is a unigram model repeated K times) is returned with a ``ConvergenceWarning`` and
``diagnostics["symmetric_saddle"] = True`` (:func:`components_separated`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, check_choice
from latentfs.core.driver import OptimizerRun
from latentfs.core.options import check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.inference.dca.common import DCAModel
from latentfs.inference.dca.hyper import gamma_update  # noqa: F401  (re-exported: it was importable from here)
from latentfs.inference.dca.vb_cycle import VBPrep, VBTrack, prepare_vb
from latentfs.inference.dca.vb_result import (  # noqa: F401  (state_from_posterior re-exported)
    _pointwise_loglik,
    state_from_posterior,
    vb_export,
)
from latentfs.inference.dca.vb_stopping import (  # noqa: F401  (the saddle and γ helpers, re-exported)
    GAMMA_TOL,
    SADDLE_TV,
    components_separated,
    flag_saddle,
    gamma_settled,
)
from latentfs.inference.dca.vb_updates import (  # noqa: F401  (the numerics of one cycle, re-exported)
    THREADED_WORK,
    VBState,
    _compiled_pass,
    _hyper,
    _theta_from_stats,
    compiled_updates,
    converge_documents,
    doc_bound_from_words,
    documents_at_theta,
    exp_expected_log_theta,
    expected_log_doc,
    expected_log_theta,
    init_topic_word,
    restart_shape,
    theta_objective,
    theta_stats,
    vb_doc_bound,
    vb_estep,
    vb_init,
    vb_step,
    vb_threads,
)
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

__all__ = [
    "DCAVB",
    "VBState",
    "vb_init",
    "vb_step",
    "vb_estep",
    "vb_doc_bound",
    "fit_vb",
    "restart_shape",
    "theta_stats",
]

THETA_UPDATES = ("chapter", "map", "full")

def _gamma_starts(model: DCAModel, o: Options, learn_gamma: bool) -> tuple[float, ...]:
    """γ's starts (:data:`GAMMA_STARTS` unless given): none when γ is not learned (``gamma_starts`` then refused),
    and only the model's γ for a warm start (``init``), which continues the fit it was given."""
    if not learn_gamma:
        if o.gamma_starts is not None:
            raise DataError(f"gamma_starts={o.gamma_starts!r} sets γ's starts when it is learned; pass "
                            "learn_gamma=True (theta_update='full'), or drop gamma_starts and set the model's gamma.")
        return ()
    if o.init is not None:
        if o.gamma_starts is not None:
            raise DataError("gamma_starts with init=…: a warm start continues the fit it was given from its γ; drop "
                            "gamma_starts, or init.")
        return (float(np.ravel(model.gamma)[0]),)
    return GAMMA_STARTS if o.gamma_starts is None else tuple(o.gamma_starts)


def _check_learn_gamma(model: DCAModel, learn_gamma: Any, theta_update: str) -> bool:
    """``learn_gamma`` checked: a bool; True needs a scalar γ, no groups and ``theta_update="full"``."""
    if not isinstance(learn_gamma, (bool, np.bool_)):
        raise DataError(f"learn_gamma must be True or False; got {learn_gamma!r}. Pass True to learn γ.")
    scalar = getattr(model, "groups", None) is None and np.asarray(model.gamma).ndim == 0
    if learn_gamma and not scalar:
        raise DataError(
            "learn_gamma=True learns one symmetric γ; got a grouped model or a vector γ. Pass a scalar gamma and "
            "no groups, or learn_gamma=False."
        )
    if learn_gamma and theta_update != "full":
        raise DataError(
            f"learn_gamma=True needs theta_update='full' (γ is learned by maximising the variational bound of "
            f"q(Θ)); got theta_update={theta_update!r}, whose point update of Θ has no bound in γ. Pass "
            "theta_update='full', or keep γ fixed (learn_gamma=False) and choose it by held-out score."
        )
    return bool(learn_gamma)


def _doc_restart_option(name: str, value: Any) -> Any:
    if value is not None and not isinstance(value, bool):
        raise DataError(f"{name} must be True, False or None (automatic); got {value!r}.")
    return value


def _n_threads_option(name: str, value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
        raise DataError(f"{name} must be None (automatic) or an integer >= 1; got {value!r}. Use 1 for one thread.")
    return value


def _learn_after_option(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise DataError(f"{name} must be a non-negative integer (cycles before learning starts); got {value!r}.")
    return int(value)


#: γ's starts when it is learned (``gamma_starts=None``): the learned γ follows its start into a local optimum of
#: the bound (on the Reuters sample 0.05 / 0.07 / 0.23 from 0.01 / 0.1 / 1, on a wide simulated corpus 0.04 / 0.10
#: / 0.19), so the fit learns it from each of these and keeps the highest bound.
GAMMA_STARTS = (0.01, 0.1, 1.0)
#: cycles each of γ's starts runs before the best is continued (short runs, as the pipeline's restarts make them)
GAMMA_SHORT_ITER = 30


def _gamma_starts_option(name: str, value: Any) -> Any:
    if value is None:
        return None
    values = [value] if isinstance(value, (int, float, np.floating, np.integer)) else value
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        out = ()
    if not out or isinstance(value, (str, bool)) or not all(np.isfinite(v) and v > 0 for v in out):
        raise DataError(f"{name} must be None or a non-empty sequence of positive numbers (γ's starts when "
                        f"learn_gamma=True); got {value!r}. Pass e.g. (0.01, 0.1, 1.0), or None for those.")
    return out


def _theta_update_option(name: str, value: Any) -> str:
    return str(check_choice(name, value, THETA_UPDATES))


def _flag(name: str, value: Any) -> Any:
    return value  # learn_alpha / learn_beta / learn_gamma: checked against the model in prepare


class DCAVB(EngineSpec):
    """DCA by mean-field VB (``latentfs.fit(model, X, method="vb", ...)``): a spec run by the one pipeline.

    Parameters
    ----------
    theta_update : {"chapter", "map", "full"}
        How Θ is updated (module docstring).
    max_iter, tol : stop after ``max_iter`` cycles, or when the objective's relative change ≤ ``tol``.
    inner_iters : int
        Document updates per cycle (the chapter's Fig. 4 uses 1).
    doc_restart : bool, optional
        Restart every document's a from α + L/K at each cycle before its ``inner_iters`` updates, as batch
        VB implementations do, instead of continuing from the last cycle. ``inner_iters=1,
        doc_restart=False`` is the chapter's Fig. 4 exactly (its objective never decreases). None (default):
        True, except with ``learn_gamma=True``, where documents continue from the last cycle so that every step
        (documents, q(Θ), γ) is a coordinate step on the recorded bound: with restarts, γ learned on the 1,000 ×
        10,000 corpus of benchmarks/dca_vb_gamma.py drove the bound down (−52 nats at one cycle) and ran to 2.9;
        ``doc_restart=True`` with ``learn_gamma=True`` is refused. The restart default
        (3 updates from a restart) was chosen by measurement: on planted corpora with small γ and on the
        Reuters sample the warm-started scheme settles in visibly worse optima (held-out 0.05–0.1 nats per
        token lower), while restarts reach scikit-learn's batch optimum 5–8× sooner (benchmarks/RESULTS.md).
    n_init : int
        Independent random starts, start r from the r-th generator spawned from ``seed``; the one with the
        highest objective is returned.
    seed, dtype, device, empty_documents, progress, warn : see :func:`latentfs.fit`.
    init : Posterior or VBState, optional
        Warm start: the result of an earlier VB fit of the same model on the same documents (its q(m) and q(Θ);
        :func:`state_from_posterior`), or a state. The first restart starts there.
    num_ll_draws : int
        Draws of Θ from q for the pointwise log-likelihood log p(w_(i) | Θ) (each document's latent integrated
        out, :mod:`latentfs.inference.dca.loo`), exported with ``to_inference_data(num_draws=...)``; 0 skips it
        (the result then has no ``log_likelihood``, so ``az.loo``/``az.waic`` cannot use it).
    callback : callable, optional
        Called as ``callback(iteration, state, objective)`` after every cycle (monitoring, benchmarks).
    learn_alpha, learn_beta : bool
        Learn α (DM: Newton on Σ_i E_q[log m]; GaP: the gamma-shape equation, β fixed) and/or GaP's β
        (β_k = α_k I / Σ_i E_q[l_ik], α fixed) after every cycle (module docstring). The learned values
        are in ``hyperparameters`` (``hyperparameters["learned"]`` lists them) and their value after every
        cycle in ``extras["<name>_trace"]`` (n_iter, K).
    gamma_starts : sequence of float > 0, optional
        ``learn_gamma`` only: γ's starts (None: :data:`GAMMA_STARTS`, 0.01, 0.1 and 1). Each start runs
        :data:`GAMMA_SHORT_ITER` cycles, the best bound is continued to convergence (``n_init`` random starts per
        γ start); ``diagnostics["restart_objectives"]`` has the short runs' bounds. One value: a single start.
    learn_after : int
        Cycles run with α (β) fixed before they are learned (γ is learned from the first cycle). From then on every
        cycle starts from document shapes run to convergence at the current Θ, and each update is made from shapes
        converged at the new Θ (:func:`converge_documents`), whatever ``inner_iters`` and ``doc_restart``
        say: with the default 3 updates from a restart, Θ and q(m) are flatter than at the optimum and a
        planted α = [0.1, 0.3, 1.0] was learned as ~[0.8, 0.5, 1.1]; with converged documents, [0.10, 0.29,
        0.97] (tests/inference/dca/test_dca_trust.py). Learning α from the first cycle,
        when the near-uniform starting Θ makes every q(m) flat, can run away (α → ∞ keeps the components
        identical; seen on the Reuters sample); 20 cycles avoided it in every case measured.
    learn_gamma : bool, default False
        Learn the symmetric topic–word prior γ (ungrouped model, scalar γ; ``theta_update="full"`` only, see the
        module docstring) by empirical Bayes: every cycle from the first, γ is set to the maximiser of the bound's
        Σ_k E_q[log Dirichlet(θ_k | γ)] given the cycle's expected counts (:func:`gamma_update`) before λ is
        updated, and the fit stops only once γ has settled (relative change ≤ :data:`GAMMA_TOL` per cycle) as well
        as the bound. The recorded bound never falls. γ is learned from each of ``gamma_starts`` and the highest
        bound is kept (the model's γ is not a start, except for a warm start ``init``, which continues from it).
        After 20 cycles at a fixed start (the schedule before), the learned γ followed its start: 0.048 / 0.073 /
        0.225 from 0.01 / 0.1 / 1 on the Reuters sample; learned from the first cycle 0.212 / 0.215 / 0.223, and on
        a wide simulated corpus (1,000 × 10,000, K = 50) still 0.04 / 0.10 / 0.19, which the starts settle by the
        bound (0.0415, the highest of the three). The learned value is in ``hyperparameters["gamma"]``
        (``hyperparameters["learned"]`` lists it) and its value after every cycle in ``extras["gamma_trace"]``; dask
        input learns it in the driver from the summed statistics, on the same schedule. Off by default: with the
        chapter's Θ update (the default), a small fixed γ (the model's default 1/K) scored better held-out than γ
        learned by the full model's bound on every corpus measured (benchmarks/RESULTS.md, "γ in VB").
    persist : bool
        Dask input only (see Notes): keep every validated shard in memory where it was first computed (on a
        worker under a distributed Client), instead of reading and validating it again at every cycle.
        ``persist=False`` bounds memory by the shards in flight, at the cost of re-reading them.
    n_threads : int, optional
        Threads for the document updates on the CPU (blocks of documents; exact: documents are independent
        given Θ, only the order of the Θ statistics' sums changes). ``None`` (default): one thread when a
        cycle's work (non-zeros × K) is below :data:`THREADED_WORK`, else ``torch.get_num_threads()``
        (which follows ``OMP_NUM_THREADS``). Ignored for dask input (one task per shard) and off the CPU.

    Notes
    -----
    ``X`` may be a ``dask.array.Array`` whose row chunks (dense or scipy.sparse blocks, one column chunk)
    are the shards (needs ``pip install "latentfs[dask]"``). Each cycle then runs the document updates as
    one task per shard on the active scheduler (a ``dask.distributed.Client`` if one exists); the tasks
    return the additive Θ statistics and bound (:func:`vb_estep`), the driver sums them and updates Θ,
    and each shard's document shapes stay with it. Every shard is validated inside its task, and no
    shard's counts are gathered into the driver. The per-shard step is the one an in-memory fit runs on its
    single shard (:mod:`latentfs.inference.dca.vb_cycle`), and Θ starts as in memory (it depends on J and the
    token total only), so the result equals the in-memory fit for the same seed up to summation order. Not with
    dask input: ``learn_alpha``/``learn_beta``, ``init``, and the pointwise log-likelihood (``num_ll_draws``
    is ignored).

    Returns
    -------
    Posterior
        ``topic_word``: Dirichlet(γ + S) (``"chapter"``; its mean is the chapter's Θ), Dirichlet(λ)
        (``"full"``) or a point (``"map"``); the document site: Dirichlet(a) or Gamma(a, 1 + β).
        ``extras["component_counts"]`` holds E[c_(i)] = a − α, the component-generated word counts;
        ``extras["bound_trace"]`` the sum of document bounds per cycle (``trace`` is the monotone
        objective).
    """

    takes_dask = True  # fits a dask array shard by shard

    method = "vb"
    kind = "optimizer"
    desc = "VB"
    remedies = "raise max_iter, loosen tol, or use inner_iters > 1"
    options = {
        "theta_update": Option("chapter", _theta_update_option, "str", "how Θ is updated: 'chapter', 'map', 'full'"),
        "max_iter": shared("max_iter", 500),
        "tol": shared("tol", 1e-5),
        "inner_iters": Option(3, lambda n, v: check_int(n, v, low=1), "int ≥ 1", "document updates per cycle"),
        "doc_restart": Option(None, _doc_restart_option, "bool or None",
                              "restart every document's shape at each cycle (None: unless γ is learned)"),
        "n_init": Option(1, lambda n, v: check_int(n, v, low=1), "int ≥ 1", "independent random starts"),
        "seed": shared("seed"),
        "dtype": shared("dtype"),
        "device": shared("device"),
        "empty_documents": shared("empty_documents"),
        "progress": shared("progress"),
        "warn": shared("warn"),
        "init": Option(None, None, "Posterior, VBState or None", "warm start: an earlier VB fit of the same model"),
        "num_ll_draws": Option(100, lambda n, v: check_int(n, v, low=0, remedy="Pass num_ll_draws=0 to skip the "
                                                           "pointwise log-likelihood, or e.g. 100."), "int ≥ 0",
                               "draws from q for the pointwise log-likelihood (0: none)"),
        "callback": shared("callback", meaning="called as callback(iteration, state, objective) after every cycle"),
        "learn_alpha": Option(False, _flag, "bool", "learn α (empirical Bayes)"),
        "learn_beta": Option(False, _flag, "bool", "learn GaP's β (empirical Bayes)"),
        "learn_after": Option(20, _learn_after_option, "int ≥ 0", "cycles before hyperparameters are learned"),
        "persist": Option(True, None, "bool", "dask input: keep every validated shard where it was computed"),
        "n_threads": Option(None, _n_threads_option, "int ≥ 1 or None", "threads for the document updates"),
        "learn_gamma": Option(False, _flag, "bool", "learn the symmetric topic–word prior γ (theta_update='full')"),
        "gamma_starts": Option(None, _gamma_starts_option, "sequence of floats > 0 or None",
                               "learn_gamma: γ's starts, the highest bound kept (None: 0.01, 0.1, 1)"),
    }

    def describe(self, model_name: str) -> str:
        return f"{model_name} VB"

    def prepare(self, model: Any, X: Any, o: Options) -> VBPrep:
        from latentfs.core.shards import is_dask_array
        from latentfs.inference.dca.hyper import check_learn

        theta_update = o.theta_update
        learn = check_learn(model, learn_alpha=o.learn_alpha, learn_beta=o.learn_beta)
        learn_g = _check_learn_gamma(model, o.learn_gamma, theta_update)
        if learn_g and o.doc_restart:
            raise DataError(
                "doc_restart=True with learn_gamma=True: documents restarted every cycle are not a coordinate step on "
                "the bound that γ is learned on, and the bound can fall. Drop doc_restart (documents then continue "
                "from the last cycle) or learn_gamma."
            )
        doc_restart = not learn_g if o.doc_restart is None else o.doc_restart
        gamma_starts = _gamma_starts(model, o, learn_g)
        if model.groups is not None and theta_update == "full":
            raise DataError(
                "theta_update='full' is not available for a grouped model (groups=…); use theta_update='chapter' or "
                "'map'."
            )
        if is_dask_array(X):
            if learn:
                raise DataError(
                    f"learn_alpha/learn_beta are not available for a dask array X (got {sorted(learn)}); fit with "
                    "fixed hyperparameters, or learn them on an in-memory sample and pass them to the model."
                )
            if o.init is not None:
                raise DataError(
                    f"init is not available for a dask array X; got a {type(o.init).__name__}. Omit init (fit from "
                    "seed)."
                )
            if not isinstance(o.persist, bool):
                raise DataError(f"persist must be True or False; got {o.persist!r}.")
        prep = prepare_vb(model, X, o, learn, learn_g, doc_restart)
        return replace(prep, gamma_starts=gamma_starts)

    def n_starts(self, prep: VBPrep, o: Options) -> int:
        return int(o.n_init) * max(1, len(prep.gamma_starts))

    def short_iter(self, prep: VBPrep, o: Options) -> int:
        # γ's starts are compared after short runs, and the best is continued (GAMMA_SHORT_ITER)
        return GAMMA_SHORT_ITER if len(prep.gamma_starts) > 1 else 0

    def start(self, prep: VBPrep, o: Options, gen: torch.Generator, index: int) -> Any:
        hyper = dict(prep.hyper0)  # this start's hyperparameters (learned ones move)
        names = prep.learn + (("gamma",) if prep.learn_gamma else ())
        if not prep.gamma_starts:
            return prep.start_state(gen, index), VBTrack([], hyper, {name: [] for name in names})
        gamma = prep.gamma_starts[index % len(prep.gamma_starts)]
        hyper["gamma"] = torch.full_like(prep.hyper0["gamma"], gamma)
        return prep.start_state(gen, index, gamma), VBTrack([], hyper, {name: [] for name in names})

    def step(self, prep: VBPrep, o: Options, state: Any) -> tuple[Any, float]:
        inner, track = state
        new, objective = prep.cycle(inner, track)
        return (new, track), objective

    def settled(self, prep: VBPrep, o: Options, state: Any) -> bool:
        # not at the symmetric saddle, and a learned γ has stopped moving
        inner, track = state
        return components_separated(inner.topic_word) and gamma_settled(track.hyper_trace.get("gamma"))

    def report(self, o: Options) -> Any:
        callback = o.callback
        return None if callback is None else (lambda it, state, value: callback(it, state[0], value))

    def _fitted_model(self, prep: VBPrep, hyper: dict[str, torch.Tensor]) -> DCAModel:
        from latentfs.inference.dca.hyper import with_hyperparameters

        if not (prep.learn or prep.learn_gamma):
            return prep.model
        return with_hyperparameters(prep.model, **{name: hyper[name] for name in prep.learn},
                                    **({"gamma": float(hyper["gamma"][0])} if prep.learn_gamma else {}))

    def hyperparameters(self, model: Any, prep: VBPrep, o: Options) -> dict[str, Any]:
        return dict(prep.model.hyperparameters())  # the learned values replace these in finalize

    def export(self, prep: VBPrep, o: Options, outcome: Any) -> Export:
        run = outcome.run
        inner, track = run.state
        fitted = self._fitted_model(prep, track.hyper)
        stats, state = prep.final(inner, track.hyper, fitted)
        bounds = np.asarray(track.bounds[: run.n_iter])
        kept = OptimizerRun(state, run.trace, run.converged, run.interrupted, run.n_iter, run.info)
        ex = vb_export(fitted, kept, prep.theta_update, track.hyper, stats=stats, a=state.doc_shape, dims=prep.dims,
                       coords=prep.coords, kept_documents=prep.kept_documents, doc_lengths=prep.doc_lengths,
                       groups=prep.groups, bounds=bounds)
        if prep.shards is not None:
            ex.diagnostics["shards"] = prep.shards
        return ex

    def finalize(self, post: Any, prep: VBPrep, o: Options, outcome: Any) -> None:
        run = outcome.run
        inner, track = run.state
        fitted = self._fitted_model(prep, track.hyper)
        post.hyperparameters = dict(fitted.hyperparameters())
        if prep.data is not None and o.num_ll_draws > 0:
            data, n = prep.data, o.num_ll_draws
            # computed on first use (ArviZ export, LOO), not at every fit
            post.log_likelihood = lambda: _pointwise_loglik(fitted, data, post, n)
        flag_saddle(post, inner.topic_word, warn=o.warn, n_iter=run.n_iter)
        learned = prep.learn + (("gamma",) if prep.learn_gamma else ())
        if learned:
            post.hyperparameters["learned"] = list(learned)
            for name, values in track.hyper_trace.items():
                post.extras[f"{name}_trace"] = np.asarray(values[: run.n_iter])


#: the spec, callable as ``fit_vb(model, X, **options)`` (the pipeline runs it)
fit_vb = register_spec(DCAVB(), DirichletDCA, GammaPoissonDCA)
