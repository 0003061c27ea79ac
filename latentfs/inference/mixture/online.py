"""Stepwise (mini-batch) EM for finite mixtures: Gaussian, latent profile and latent class.

Mini-batches B_t of rows arrive one after another. Each gets an E-step at the current parameters, and the
running average of the per-row sufficient statistics moves part of the way towards the batch's:

    ŝ_t = (1 / |B_t|) Σ_{n ∈ B_t} Σ_k τ_nk t(y_n),     s ← (1 − ρ_t) s + ρ_t ŝ_t,     θ ← M(s),
    ρ_t = (τ0 + t)^(−κ)

(Cappé & Moulines 2009, "On-line expectation–maximization algorithm for latent data models", JRSS-B 71(3),
eq. (7)–(8); Liang & Klein 2009, "Online EM for unsupervised models", Algorithm "stepwise EM"). With
κ ∈ (0.5, 1] the step sizes satisfy Σ ρ_t = ∞, Σ ρ_t² < ∞, and the recursion converges to a stationary
point of the likelihood (Cappé & Moulines 2009, Theorem 1). The statistics t(y) and the M-step M(·) are the
batch EM's (:mod:`latentfs.inference.mixture.families`); averaging per row leaves every estimate unchanged
(each is a ratio of statistics), so no data-set size is needed.

The first batch fixes the centring (its column means) and the scale of the ``reg_covar`` variance floor
(its column variances), and gives the start: a short batch EM on that batch alone
(:func:`latentfs.inference.mixture.em.fit_em` with ``init``, ``n_init`` and its short-run restarts, at most
:data:`INIT_MAX_ITER` iterations, relative tolerance :data:`INIT_TOL`). Stepwise EM keeps the local
optimum its start leads to (a latent class fit from one random start merged two classes in a quarter of
the seeds tried), so the restarts are made where they are cheap, on the first batch. A shuffled first
batch of a few hundred rows or more is therefore advisable.

:func:`partial_fit_state` is the one update (the mixture estimators' ``partial_fit``); :func:`fit_online_em`
(``latentfs.fit(model, X, method="online_em")``, the spec :class:`MixtureOnlineEM` run by the one pipeline, one
step per mini-batch) streams a matrix's rows in mini-batches for several passes (a dask array one computed batch
at a time), or an iterable of chunks once. The option names are those of
the DCA online engine (:mod:`latentfs.inference.dca.online`): ``batch_size``, ``n_passes``, ``tau0``,
``kappa``, ``shuffle``, ``seed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, check_float, check_int, check_seed
from latentfs.core.diagnostics import CollapsedComponentWarning
from latentfs.core.driver import StreamEnd, make_generator
from latentfs.core.options import check_moments
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.core.results import Posterior
from latentfs.core.streams import chunk_stream, is_batch_stream, row_batches
from latentfs.inference.mixture.data import validate_rows
from latentfs.inference.mixture.em import (
    DEFAULT_REG_COVAR,
    _coords,
    collapse_message,
    collapsed_components,
    criteria,
    entropy_of,
    fit_em,
)
from latentfs.inference.mixture.families import (
    CategoricalFamily,
    GaussianFamily,
    add_eps,
    e_step_variant,
    scaled_reg,
)
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

__all__ = ["MixtureOnlineEM", "OnlineEMState", "fit_online_em", "online_em_init", "online_posterior",
           "partial_fit_state"]

_END = object()  # the end of the mini-batch stream

#: The start's batch EM on the first batch: at most this many iterations, to this relative tolerance.
INIT_MAX_ITER = 100
INIT_TOL = 1e-4


@dataclass(frozen=True)
class OnlineEMState:
    """Everything stepwise EM carries from one mini-batch to the next.

    Attributes
    ----------
    model : GaussianMixture, LatentProfile or LatentClass
    n_features : int
    tau0, kappa : float
        The step size ρ_t = (τ0 + t)^(−κ).
    seed : int or None
        Seeds the start on the first batch.
    reg_covar : float; init : str or None; n_init : "auto" or int; e_step : str
        As batch EM (:func:`latentfs.inference.mixture.em._em_engine`), for the start on the first batch.
    shift, column_variance : ndarray (d,) or None
        The first batch's column means and variances (centring; the floor's scale).
    stats : dict of Tensor or None
        s, the running per-row statistics (without the ``eps`` of the counts).
    params : dict of Tensor or None
        θ = M(s), in the families' internal (centred) form.
    n_updates : int
        t, the number of mini-batches seen; n_seen : int, the rows seen.
    trace : tuple of float
        Each batch's mean log-likelihood per row at the parameters it was given (before its update).
    feature_names : tuple of str
    """

    model: Any
    n_features: int
    tau0: float
    kappa: float
    seed: int | None
    reg_covar: float
    init: Any
    n_init: Any
    e_step: str
    shift: np.ndarray | None = None
    column_variance: np.ndarray | None = None
    stats: dict[str, torch.Tensor] | None = None
    params: dict[str, torch.Tensor] | None = None
    n_updates: int = 0
    n_seen: int = 0
    trace: tuple[float, ...] = ()
    feature_names: tuple[str, ...] = ()

    def step_size(self) -> float:
        """ρ_t = (τ0 + t)^(−κ) for the next batch (at most 1; 1 when τ0 + t = 0)."""
        base = self.tau0 + self.n_updates
        return 1.0 if base <= 1.0 else float(base ** (-self.kappa))


def _check_online_model(model: Any) -> None:
    if not isinstance(model, (GaussianMixture, LatentClass)):
        raise DataError(
            f"model must be a GaussianMixture, LatentProfile or LatentClass for online EM; got {type(model).__name__}."
        )


def _tau0_option(name: str, value: Any) -> float:
    return float(check_float(
        name, value, 0.0, remedy="τ0 ≥ 0 down-weights the first batches (Cappé & Moulines 2009); try 1.0."
    ))


def _kappa_option(name: str, value: Any) -> float:
    return float(check_float(
        name, value, 0.5, 1.0, low_open=True,
        remedy="κ in (0.5, 1] makes the step sizes (τ0 + t)^−κ converge (Cappé & Moulines 2009); try 0.7.",
    ))


def _reg_covar_option(name: str, value: Any) -> float:
    return float(check_float(name, value, 0.0, remedy="Pass a small non-negative number, e.g. 1e-6."))


def _check_online_options(model: Any, tau0: Any, kappa: Any, reg_covar: Any) -> tuple[float, float, float]:
    _check_online_model(model)
    return _tau0_option("tau0", tau0), _kappa_option("kappa", kappa), _reg_covar_option("reg_covar", reg_covar)


def online_em_init(
    model: Any,
    n_features: int,
    *,
    tau0: float = 1.0,
    kappa: float = 0.7,
    seed: int | None = 0,
    reg_covar: float = DEFAULT_REG_COVAR,
    init: Any = None,
    n_init: Any = "auto",
    e_step: str = "auto",
    feature_names: Any = None,
) -> OnlineEMState:
    """The state before the first mini-batch (the start is computed on the first batch).

    Examples
    --------
    >>> state = online_em_init(GaussianMixture(2), 3)
    >>> state.step_size()  # ρ_0 = (1 + 0)^−0.7
    1.0
    """
    tau0, kappa, reg_covar = _check_online_options(model, tau0, kappa, reg_covar)
    n_features = check_int("n_features", n_features, low=1)
    seed = check_seed(seed)
    if seed is not None and not isinstance(seed, (int, np.integer)):
        raise DataError(f"seed must be an integer or None for online EM; got {seed!r}.")
    if init is not None and not isinstance(init, str):
        raise DataError(f"init must be 'kmeans', 'kmeans++' or 'random' for online EM; got {init!r}.")
    if not (isinstance(n_init, str) and n_init == "auto"):
        n_init = check_int("n_init", n_init, low=1, remedy="Pass n_init='auto' or a positive number of starts, e.g. 5.")
    names = tuple(f"x{j}" for j in range(n_features)) if feature_names is None else tuple(str(f) for f in feature_names)
    variant = "categorical" if isinstance(model, LatentClass) else e_step_variant(model, 0, n_features, e_step)
    return OnlineEMState(
        model=model, n_features=int(n_features), tau0=tau0, kappa=kappa, seed=None if seed is None else int(seed),
        reg_covar=reg_covar, init=init, n_init=n_init, e_step=variant, feature_names=names,
    )


def _family(state: OnlineEMState, v: np.ndarray) -> Any:
    if isinstance(state.model, LatentClass):
        return CategoricalFamily.from_rows(state.model, v, state.feature_names)
    return GaussianFamily.from_rows(state.model, v, state.shift, state.column_variance, state.e_step,
                                    state.feature_names)


def _scale(stats: dict[str, torch.Tensor], c: float) -> dict[str, torch.Tensor]:
    return {k: v * c for k, v in stats.items()}


def partial_fit_state(state: OnlineEMState, batch: Any) -> OnlineEMState:
    """One stepwise EM update (module docstring) with the mini-batch ``batch`` (rows × features); returns
    the new state. The first batch also fixes the centring and the floor and gives the start."""
    v = validate_rows(state.model, batch, name="batch")
    if v.shape[1] != state.n_features:
        raise DataError(
            f"batch must have the {state.n_features} features the fit started with; got {v.shape[1]}. Pass every "
            "mini-batch with the same columns in the same order."
        )
    if isinstance(state.model, GaussianMixture):
        check_moments(v, name="batch")  # squares that overflow (or underflow) would surface as a singular M-step
    nb = v.shape[0]
    stats: dict[str, torch.Tensor] | None
    params: dict[str, torch.Tensor] | None
    if state.params is None:
        k = state.model.n_components
        if nb < max(2, k):
            raise DataError(
                f"the first batch must have at least max(2, n_components) = {max(2, k)} rows (it gives the start); "
                f"got {nb}. Pass a larger first batch."
            )
        shift = variance = None
        if isinstance(state.model, GaussianMixture):
            with np.errstate(invalid="ignore"):
                shift, variance = np.nanmean(v, axis=0), np.nanvar(v, axis=0)
            bad = ~np.isfinite(variance) | (variance < 1e-280)
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                raise DataError(
                    f"the first batch's column {state.feature_names[j]!r} is constant (or entirely missing): it "
                    "fixes the scale of the variance floor. Pass a larger, shuffled first batch."
                )
        state = replace(state, shift=shift, column_variance=variance)
        fam = _family(state, v)
        reg = scaled_reg(fam, state.reg_covar)
        start = fit_em(fam, n_init=state.n_init, init=state.init, reg_covar=state.reg_covar, max_iter=INIT_MAX_ITER,
                       tol=INIT_TOL, seed=make_generator(state.seed), warn=False, progress=False)
        stats = _scale(fam.statistics(start["resp"], eps=0.0), 1.0 / nb)
        params = start["params"]
    else:
        fam = _family(state, v)
        reg = scaled_reg(fam, state.reg_covar)
        stats, params = state.stats, state.params
    assert stats is not None and params is not None
    resp, row_ll = fam.e_step(params)
    s_hat = _scale(fam.statistics(resp, eps=0.0), 1.0 / nb)
    rho = state.step_size()
    new = {k: (1.0 - rho) * stats[k] + rho * s_hat[k] for k in stats}  # Cappé & Moulines (2009), eq. (7)
    return replace(
        state, stats=new, params=fam.params_from_statistics(add_eps(new), reg), n_updates=state.n_updates + 1,
        n_seen=state.n_seen + nb, trace=(*state.trace, float(row_ll.mean())),
    )


def _count_option(name: str, value: Any) -> int:
    return int(check_int(name, value, low=1))


def _shuffle_option(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise DataError(f"shuffle must be True or False; got {value!r}.")
    return value


def _init_option(name: str, value: Any) -> Any:
    if value is not None and not isinstance(value, str):
        raise DataError(f"init must be 'kmeans', 'kmeans++' or 'random' for online EM; got {value!r}.")
    return value


def _n_init_option(name: str, value: Any) -> Any:
    if isinstance(value, str) and value == "auto":
        return value
    return check_int(name, value, low=1, remedy="Pass n_init='auto' or a positive number of starts, e.g. 5.")


@dataclass
class OnlineEMPrep:
    """What :meth:`MixtureOnlineEM.prepare` makes of the input: the stream of mini-batches and the state before
    the first of them."""

    batches: Iterator[Any]
    n_batches: int | None  # the stream's length; None for an iterator (its end ends the run)
    state: OnlineEMState
    values: np.ndarray | None  # the rows of an in-memory matrix (their log-likelihood at the final parameters)


class MixtureOnlineEM(EngineSpec):
    """A finite mixture by stepwise EM (``latentfs.fit(model, X, method="online_em", ...)``): a spec run by the one
    pipeline, one step per mini-batch (:func:`partial_fit_state`), the run as long as the stream.

    Parameters
    ----------
    X : matrix (n, d), a dask array, or an iterable of chunks
        A matrix is validated as batch EM validates it and streamed in mini-batches of ``batch_size`` rows
        for ``n_passes`` passes, in a new random order each pass when ``shuffle``; a dask array likewise,
        each mini-batch computed on its own (only one is ever in memory). An iterator (or a list of 2-D
        chunks) is taken as the mini-batches themselves, in order; an iterator is read once.
    batch_size : int
        Rows per mini-batch when ``X`` is a matrix (1000 by default: the first batch gives the start).
    n_passes : int
        Passes over a matrix or a list of chunks (an iterator allows 1).
    tau0, kappa : float
        Step sizes ρ_t = (τ0 + t)^(−κ), τ0 ≥ 0, κ ∈ (0.5, 1] (Cappé & Moulines 2009).
    shuffle, seed : the order of the rows in each pass, and the start on the first batch.
    reg_covar, init, n_init, e_step : as batch EM (``init`` a string), for the start: a short batch EM on
        the first batch, with its own ``n_init`` restarts drawn from ``seed`` (module docstring).

    Returns
    -------
    Posterior
        Point estimates as batch EM's. ``trace`` holds each batch's mean log-likelihood per row before its
        update (noisy: each is a different batch); ``diagnostics["converged"]`` is None (the run is as long as
        the stream: it has no stopping rule). For an in-memory matrix, ``diagnostics`` also holds the
        log-likelihood of all rows at the final parameters (with AIC/BIC/ICL), ``extras`` their
        responsibilities and the pointwise log-likelihood is set, as batch EM.

    Examples
    --------
    >>> import latentfs
    >>> X = GaussianMixture(2, mean_precision=0.02).simulate(2000, 2, seed=0)["data"]
    >>> res = latentfs.fit(GaussianMixture(2), X, method="online_em", batch_size=200, n_passes=2)
    >>> res.mean("means").shape, res.diagnostics["n_iter"]
    ((2, 2), 20)
    """

    affine_equivariant = True  # checked by check_engine: the fit of a·X + b is the fit of X transformed

    takes_dask = True  # fits a dask array shard by shard

    method = "online_em"
    kind = "optimizer"
    degenerate_warning = CollapsedComponentWarning  # a collapsed component is flagged, as batch EM flags it
    desc = "online EM"
    options = {
        "batch_size": Option(1000, _count_option, "int ≥ 1",
                             "rows per mini-batch when X is a matrix (the first batch gives the start)"),
        "n_passes": Option(1, _count_option, "int ≥ 1", "passes over a matrix or a list of chunks (an iterator: 1)"),
        "tau0": Option(1.0, _tau0_option, "float ≥ 0", "τ0 of the step size ρ_t = (τ0 + t)^(−κ)"),
        "kappa": Option(0.7, _kappa_option, "float in (0.5, 1]", "κ of the step size ρ_t = (τ0 + t)^(−κ)"),
        "shuffle": Option(True, _shuffle_option, "bool", "a new random order of a matrix's rows each pass"),
        "seed": shared("seed"),
        "reg_covar": Option(DEFAULT_REG_COVAR, _reg_covar_option, "float ≥ 0",
                            "the variance floor, scaled by the first batch's column variances (as batch EM)"),
        "init": Option(None, _init_option, "str or None",
                       "'kmeans', 'kmeans++' or 'random': the start of the first batch's short batch EM"),
        "n_init": Option("auto", _n_init_option, "'auto' or int ≥ 1",
                         "the restarts of the first batch's short batch EM (as batch EM)"),
        "e_step": Option("auto", None, "str", "the Gaussian E-step's variant (as batch EM)"),
        "progress": shared("progress"),
        "warn": shared("warn"),
        "callback": shared("callback", meaning="called as callback(batch, state, objective) after every mini-batch"),
    }

    def prepare(self, model: Any, X: Any, o: Options) -> OnlineEMPrep:
        from latentfs.core.shards import is_dask_array

        _check_online_model(model)
        values: np.ndarray | None = None
        names: Any = None
        batches: Iterable[Any]
        n_batches: int | None
        if is_batch_stream(X):
            n_batches = None if isinstance(X, Iterator) else len(X) * o.n_passes
            first, batches = chunk_stream(X, o.n_passes)
            n_features = int(first.shape[1])
        elif is_dask_array(X):
            if X.ndim != 2:
                raise DataError(f"X must be a 2-D dask array (rows × features); got {X.ndim} dimension(s).")
            if any(np.isnan(n) for n in X.shape):
                raise DataError(
                    f"X is a dask array of unknown size {X.shape} (its chunk sizes are unknown, as after boolean "
                    "indexing); online EM draws its mini-batches by row. Call X.compute_chunk_sizes() first."
                )
            n_features, n_rows = int(X.shape[1]), int(X.shape[0])
            n_batches = o.n_passes * -(-n_rows // o.batch_size)
            # each mini-batch of a dask array computed on its own: only one batch is ever in memory
            batches = row_batches(n_rows, o.batch_size, o.n_passes, o.shuffle, o.seed, lambda rows: X[rows].compute())
        else:
            data = model.check_data(X)
            values, names = data.values, data.feature_names
            n_features = values.shape[1]
            rows_of = values
            n_batches = o.n_passes * -(-values.shape[0] // o.batch_size)
            batches = row_batches(values.shape[0], o.batch_size, o.n_passes, o.shuffle, o.seed,
                                  lambda rows: rows_of[rows])
        state = online_em_init(model, n_features, tau0=o.tau0, kappa=o.kappa, seed=o.seed, reg_covar=o.reg_covar,
                               init=o.init, n_init=o.n_init, e_step=o.e_step, feature_names=names)
        return OnlineEMPrep(iter(batches), n_batches, state, values)

    def n_starts(self, prep: OnlineEMPrep, o: Options) -> int:
        return 1  # one pass over a stream; the restarts are the first batch's own (its short batch EM's n_init)

    def max_iter(self, prep: OnlineEMPrep, o: Options) -> int | None:
        return prep.n_batches  # one step per mini-batch; None: the iterator's end ends the run

    def stop_tol(self, prep: OnlineEMPrep, o: Options) -> float | None:
        return None  # no stopping rule: each objective is another batch's log-likelihood

    def start(self, prep: OnlineEMPrep, o: Options, gen: torch.Generator, index: int) -> OnlineEMState:
        # the start is made at the first batch (a short batch EM there, its restarts drawn from the generator of
        # ``seed`` as partial_fit_state draws them, so a fit and partial_fit over the same batches agree)
        return prep.state

    def step(self, prep: OnlineEMPrep, o: Options, state: OnlineEMState) -> tuple[OnlineEMState, float]:
        batch = next(prep.batches, _END)
        if batch is _END:  # the stream has ended: so does the run
            raise StreamEnd
        try:
            new = partial_fit_state(state, batch)
        except DataError as exc:  # name the mini-batch: in a stream of thousands, "X" alone says too little
            rows = getattr(batch, "shape", (0,))[0]
            raise DataError(f"mini-batch {state.n_updates} (0-based, {rows} rows): {exc}") from None
        return new, new.trace[-1]  # the batch's mean log-likelihood at the parameters it was given

    def degenerate(self, prep: OnlineEMPrep, o: Options, state: OnlineEMState) -> list[dict[str, Any]]:
        # batch EM's rule on the final parameters: a component whose covariance, less the floor, is singular
        if state.params is None:
            return []
        fam = _family(state, np.zeros((0, state.n_features)))
        return collapsed_components(fam, state.params, scaled_reg(fam, state.reg_covar), state.reg_covar)

    def degenerate_message(self, prep: OnlineEMPrep, o: Options, flags: list[dict[str, Any]]) -> str:
        return "stepwise EM: " + collapse_message(flags, o.reg_covar)

    def export(self, prep: OnlineEMPrep, o: Options, outcome: Any) -> Export:
        dims, coords, fitted, extras, diagnostics, log_lik = _online_sites(outcome.run.state, prep.values)
        return Export(dims=dims, coords=coords, fitted=fitted, extras=extras, diagnostics=diagnostics,
                      log_likelihood=log_lik)


#: the spec, callable as ``fit_online_em(model, X, **options)`` (the pipeline runs it)
fit_online_em = register_spec(MixtureOnlineEM(), GaussianMixture, LatentProfile, LatentClass)


def online_posterior(state: OnlineEMState, X: Any = None) -> Posterior:
    """The Posterior of a stepwise EM state (point estimates); given the rows ``X`` (an in-memory matrix),
    also their log-likelihood, responsibilities and information criteria at the final parameters."""
    dims, coords, fitted, extras, diagnostics, log_lik = _online_sites(state, X)
    return Posterior(
        model=type(state.model).__name__,
        method="online_em",
        dims=dims,
        coords=coords,
        trace=np.asarray(state.trace)[None],
        fitted=fitted,
        diagnostics={"converged": None, "n_iter": state.n_updates, **diagnostics},
        log_likelihood=log_lik,
        extras=extras,
        hyperparameters=state.model.hyperparameters(),
    )


def _online_sites(state: OnlineEMState, X: Any) -> tuple[
    dict[str, tuple[str, ...]], dict[str, list[str]], dict[str, Any], dict[str, Any], dict[str, Any], Any
]:
    """The result of a stepwise EM state: dims, coords, fitted sites, extras, the engine's diagnostics and the
    pointwise log-likelihood (given the rows ``X``, else None)."""
    if state.params is None:
        raise DataError("state has seen no mini-batch yet; call partial_fit_state(state, batch) first.")
    model = state.model
    empty = np.zeros((0, state.n_features))
    fam = _family(state, empty)
    params = fam.export(state.params)
    diag: dict[str, Any] = {
        "n_seen": state.n_seen,
        "tau0": state.tau0,
        "kappa": state.kappa,
        "observation_dim": "sample",
        "reg_covar": state.reg_covar,
    }
    extras: dict[str, Any] = {"n_updates": state.n_updates}
    log_lik = None
    if X is not None:
        v = validate_rows(model, X)
        full = _family(state, v)
        resp, row_ll = full.e_step(state.params)
        ll = float(row_ll.sum())
        n_params = model.n_parameters(full.d)
        diag.update({"log_likelihood": ll, "n_parameters": n_params, "n_observations": full.n,
                     "entropy": entropy_of(resp)})
        diag.update(criteria(ll, n_params, full.n, diag["entropy"]))
        extras["responsibilities"] = np.ascontiguousarray(resp.numpy())
        log_lik = row_ll.numpy()[None, None]
    fitted = {k: {"family": "point", "value": val} for k, val in params.items()}
    return fam.dims(), _coords(fam), fitted, extras, diag, log_lik
