"""EM and MAP for factor analysis (with missing values, priors and constraints) and EM for MFA.

Factor analysis by EM (Dempster, Laird & Rubin 1977, as presented by Titterington 2006; the factor-
analysis updates are Rubin & Thayer 1982), in the augmented form of Gruber & Weiss (2006, eqs. 3-8)
with z̃ = (z, 1) and w̃_j = (w_j, μ_j):

* E-step (per missingness pattern o, Gruber & Weiss eq. 3-6 with zero precision on missing entries):
  ``M_o = I + W_o^t Λ_o^{-1} W_o``, ``V_o = M_o^{-1}``, ``E[z|y_o] = V_o W_o^t Λ_o^{-1}(y_o − μ_o)``,
  ``E[zz^t|y_o] = V_o + E[z]E[z]^t``. Rows are grouped by pattern: M_o is factorised once per pattern.
* M-step, feature by feature over the rows where feature j is observed (Gruber & Weiss eq. 7-8, the
  exact form that keeps the covariance of z̃; ``A_j = Σ y_nj E[z̃_n]``, ``B_j = Σ E[z̃_n z̃_n^t]``):
  ``w̃_j = A_j B_j^{-1}`` and ``λ_j = (Σ y_nj² − w̃_j·A_j) / n_j``.
  With a Gaussian prior on the loadings, an inverse-gamma prior on λ_j, or linear constraints
  ``C_j w_j = c_j``, w̃_j solves the constrained ridge problem by its KKT system and λ_j is updated
  given w̃_j (an ECM step, still monotone; Gruber & Weiss's structure prior, eq. 11, in MAP form).
* With nothing missing the statistics depend on the data only through the mean and the covariance
  (one d × d product per iteration, no pass over the rows), and starting from μ = ȳ the iterates are
  those of plain Rubin–Thayer EM.

The objective reported per iteration (``Posterior.trace``) is the log-likelihood of the observed
entries (plus the log prior for ``"map"``) *at the input parameters*; it is non-decreasing.

Mixtures of factor analysers: Ghahramani & Hinton (1996), as listed by Titterington (2006).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from latentfs.core.backends import shard_data
from latentfs.core.data import DataError, check_positive
from latentfs.core.options import check_flag, check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.core.shards import is_dask_array
from latentfs.inference.factor.data import (
    check_totals,
    filled_covariance,
    pool,
    prepare_shard,
    shard_estep,
    summarise,
)
from latentfs.inference.factor.numerics import (  # noqa: F401  (the E-step, M-step and SQUAREM, re-exported)
    _ACCELERATIONS,
    _LOG_2PI,
    _ROW_UPDATES,
    EStats,
    FAData,
    FAParams,
    _estep_moments,
    _estep_patterns,
    _from_vector,
    _mstep_spec,
    _MStepSpec,
    _pack_outer,
    _plain,
    _rows_kkt,
    _rows_ml,
    _squarem,
    _to_vector,
    _unpack_symmetric,
    expected_residual,
    fa_estep,
    fa_log_prior,
    fa_mstep,
    factor_posterior,
    posterior_precision,
    prepare_fa_data,
)
from latentfs.inference.factor.starts import (  # noqa: F401  (checks and starting values, re-exported)
    _check_covariance,
    _check_fa_shape,
    _noise_floor,
    _project,
    _validate_fa,
    fa_initial_params,
    initial_params_from_moments,
)
from latentfs.models.factor import FactorAnalysis

__all__ = [
    "HeywoodWarning",
    "FAParams",
    "FAData",
    "prepare_fa_data",
    "fa_estep",
    "factor_posterior",
    "fa_mstep",
    "fa_log_prior",
    "fa_initial_params",
    "FactorAnalysisEM",
    "em_factor_analysis",
    "heywood_message",
    "map_factor_analysis",
]


#: A noise variance below this fraction of its column's variance flags a Heywood case.
HEYWOOD_FRACTION = 5e-3


class HeywoodWarning(UserWarning):
    """A factor-analysis solution with a noise variance (uniqueness) at or near zero (a Heywood case)."""


def _check_n_init(n_init: Any, init: Any) -> int:
    if isinstance(n_init, bool) or not isinstance(n_init, (int, np.integer)) or n_init < 1:
        raise DataError(f"n_init must be a positive integer; got {n_init!r}. Pass e.g. n_init=5.")
    return 1 if isinstance(init, dict) else int(n_init)


# ---------------------------------------------------------------------------------------------- engines
@dataclass
class FAPrep:
    """What a factor-analysis fit needs from its data, whichever back-end holds it
    (:mod:`latentfs.inference.factor.data`): the E-step ``estep(params) -> EStats`` (on the pooled moments when
    nothing is missing, else one :func:`~latentfs.inference.factor.data.shard_estep` per shard), ``data`` (the
    per-feature totals the M-step reads, and the moments), the r-th start ``start_params(init, generator)``, the
    noise floor, the columns' variances (for the Heywood check) and the names and totals of the result.
    ``rows`` is the prepared data of an in-memory fit (the row-level outputs); ``shards`` the number of row
    shards of a dask array (None in memory)."""

    model: FactorAnalysis
    method: str
    use_priors: bool
    data: FAData
    estep: Any
    start_params: Any
    floor: torch.Tensor
    var: np.ndarray
    feature_names: list[str]
    sample_names: list[str] | None
    n_samples: int
    n_observed: float
    n_patterns: int
    started: float
    rows: FAData | None = None
    step: Any = None
    shards: int | None = None
    kept: Any = None


def _prepare(model: FactorAnalysis, X: Any, o: Any, *, method: str, use_priors: bool, started: float) -> FAPrep:
    """The data side of a fit, one path for every back-end: the shards prepared and summarised in one pass, the
    summaries pooled (one shard's as they are), then the E-step on the pooled moments (complete data with
    ``use_moments``: no further pass) or one per-pattern E-step per shard and step."""
    dtype, device = o.dtype, o.device
    shards = shard_data(X, prepare_shard, model, dtype, device, is_dask_array(X))
    total = pool(shards.summaries(summarise))
    d = int(total.count.shape[0])
    if not shards.is_local:  # in memory the whole data were checked when prepared
        check_totals(model, total, d)
    cov = None if total.col_cov is None else total.col_cov.cpu().numpy()
    if cov is not None:
        _check_covariance(cov, total.n, o.regularization)
        var = start_var = np.diag(cov).copy()  # the columns' variances (Heywood check, floor, starts)
    else:  # the observed entries' variances (Heywood check, floor); those of the mean-imputed data (starts)
        var, start_var = cast(np.ndarray, total.obs_var), cast(np.ndarray, total.filled_var)
    frac = 1e-8 if o.regularization is None else float(o.regularization)
    floor = torch.as_tensor(frac * var, dtype=dtype, device=device)
    data = FAData(
        values=torch.empty((0, d), dtype=dtype, device=device), observed=None, patterns=total.patterns,
        pattern_of_row=torch.empty(0, dtype=torch.long, device=device),
        pattern_counts=torch.tensor([float(total.n)], dtype=dtype, device=device), count=total.count,
        sum_squares=total.sum_squares, col_mean=total.col_mean, col_cov=total.col_cov,
        n_rows=total.n,
    )
    mean = total.mean

    if cov is not None and o.use_moments:
        def estep(state: FAParams) -> EStats:
            return _estep_moments(state, data)[0]  # no pass over the data

        def covariance() -> np.ndarray:
            return cov  # type: ignore[return-value]
    else:
        def estep(state: FAParams) -> EStats:
            # the statistics are d × (q + 1)² numbers: added on the driver, with no addition tasks
            (A, B, loglik), _, _ = shards.estep(shard_estep, state.loadings, state.noise_variance, state.mean,
                                                n_sum=3, reduce="driver")
            t = lambda v: torch.as_tensor(v, dtype=dtype, device=device)  # noqa: E731  (a no-op in memory)
            return EStats(A=t(A), B=t(B), loglik=t(loglik))

        def covariance() -> np.ndarray:
            # the pca start of data with missing entries: the mean-imputed covariance, one more pass
            return cov if cov is not None else filled_covariance(shards, mean)

    def start_params(init: Any, gen: torch.Generator) -> FAParams:
        return initial_params_from_moments(mean, start_var, covariance, model.n_components, init=init,
                                           generator=gen, dtype=dtype, device=device)

    local = shards.local if shards.is_local else None
    return FAPrep(model, method, use_priors, data, estep, start_params, floor, var,
                  feature_names=local.feature_names if local else [f"x{j}" for j in range(d)],
                  sample_names=local.sample_names if local else None, n_samples=total.n,
                  n_observed=float(total.count.sum()), n_patterns=int(total.patterns.shape[0]), started=started,
                  rows=local.data if local else None, shards=None if local else shards.n_shards)


def _em_map(prep: FAPrep) -> Any:
    """One EM (ECM) step of ``prep``'s fit: the new parameters and the objective at the input parameters."""
    spec, variant = _mstep_spec(prep.model, prep.use_priors, prep.floor)

    def em_map(state: FAParams) -> tuple[FAParams, float]:
        try:
            stats = prep.estep(state)
        except torch.linalg.LinAlgError:
            raise DataError(
                "the model covariance became singular during EM (a noise variance collapsed to zero: a "
                "Heywood case); pass regularization=1e-3 to floor the noise variances, or fewer factors (n_components)."
            ) from None
        objective = stats.loglik + (fa_log_prior(prep.model, state) if prep.use_priors else 0.0)
        return fa_mstep(stats, prep.data, state, spec, variant), float(objective)

    return em_map


def _acceleration(name: str, value: Any) -> str:
    if value not in _ACCELERATIONS:
        raise DataError(f"{name} must be one of {sorted(_ACCELERATIONS)}; got {value!r}.")
    return str(value)


def _fa_init(name: str, value: Any) -> Any:
    if isinstance(value, dict) or value in ("pca", "random"):
        return value
    raise DataError(f"{name} must be 'pca', 'random' or a dict of parameters; got {value!r}.")


def _regularization(name: str, value: Any) -> Any:
    return None if value is None else float(check_positive(value, name))


def _n_starts(name: str, value: Any) -> int:
    return check_int(name, value, low=1, remedy=f"Pass a positive number of starts, e.g. {name}=5.")


class FactorAnalysisEM(EngineSpec):
    """Maximum-likelihood factor analysis by EM (``method="em"``), or maximum a posteriori factor analysis
    (``method="map"``: the same spec with the priors; below); NaN entries of ``X`` are missing (exact E-step).

    Priors declared on the model are ignored (use ``method="map"``); linear constraints on the
    loadings are honoured. With nothing missing the E-step works on the covariance matrix
    (``use_moments=False`` forces the per-row form, which gives the same iterates).

    ``method="map"`` is maximum a posteriori factor analysis (ECM) with the model's priors and loading
    constraints: the Gaussian prior on the loadings and the mean and the inverse-gamma prior on the noise
    variances enter the M-step (Gruber & Weiss 2006, structure prior of eq. 11 in its MAP form); the objective
    traced is log p(y_o | θ) + log p(θ), non-decreasing. Options as for ``"em"``.

    Parameters
    ----------
    model : FactorAnalysis
    X : array (n_samples, n_features); NaN means missing.
    seed : int, generator or None (used by the random starts: start r draws from the r-th generator spawned
        from the seed, so the starts do not depend on how many ran before).
    max_iter, tol : stop when the relative change of the log-likelihood is below ``tol``.
    init : "pca", "random" or dict(loadings=..., noise_variance=..., mean=...).
        ``"pca"`` takes the principal axes of the correlation matrix, rescaled to the columns (a
        scale-equivariant start, as the ML solution is).
    n_init : int, default 1
        Number of starts: ``init`` first, then random starts; the highest log-likelihood is kept
        (``diagnostics["restart_objectives"]``). One :class:`ConvergenceWarning` per fit, for the
        kept run. The default start reaches the better of the two optima of unscaled wine (q=3) that
        factor_analyzer and random starts find; raise ``n_init`` on hard problems.
    regularization : float, optional
        Floor on each noise variance as a fraction of its column's variance (default 1e-8); set it to
        fit data with a singular covariance.
    dtype, device : torch dtype (float64 default) and device.
    acceleration : "squarem" (default; each traced iteration is one safeguarded SQUAREM cycle of three
        EM steps) or "none" (plain EM, one step per iteration). Both trace a non-decreasing objective.

    Heywood cases (a noise variance below 0.5% of its column's variance: the solution sits on, or
    drifts to, the boundary) give a :class:`HeywoodWarning` naming the features and the remedies, and
    are listed in ``diagnostics["heywood_features"]``.

    ``X`` may be a ``dask.array.Array`` whose row chunks (dense, one column chunk) are the shards (needs
    ``pip install "latentfs[dask]"``; also for ``"map"``; :mod:`latentfs.inference.factor.data` is the data side,
    the same functions in memory, on one shard): with complete data its moments are one pass of shard tasks and EM
    then runs on the driver; with missing entries every EM step is one E-step task per shard, summed next to the
    shards. The result equals the in-memory fit for the same seed up to summation order (a dask array of one
    chunk gives the in-memory numbers exactly); no row is gathered, so it holds no
    ``factor_scores`` (:func:`latentfs.inference.factor.factor_scores` computes them lazily), per-row
    log-likelihood or ``sample`` coordinate.

    Returns
    -------
    Posterior with point sites ``loadings``, ``noise_variance``, ``mean``; extras ``factor_scores``
    (E[z|y_o]), ``factor_score_covariance``, ``communalities``; per-row log-likelihood; the
    log-likelihood trace.

    Examples
    --------
    >>> import latentfs
    >>> fa = FactorAnalysis(1)
    >>> X = fa.simulate(200, loadings=[[1.0], [0.9], [0.8]], noise_variance=0.2, mean=0.0, seed=0)["data"]
    >>> post = latentfs.fit(fa, X, method="em")
    >>> post.mean("loadings").shape, bool(np.all(np.diff(post.trace[0]) >= -1e-9))
    ((3, 1), True)
    >>> fa = FactorAnalysis(1, loading_scale=1.0, noise_shape=2.0, noise_scale=0.5)
    >>> X = fa.simulate(100, loadings=[[1.0], [0.9], [0.8]], noise_variance=0.2, mean=0.0, seed=0)["data"]
    >>> latentfs.fit(fa, X, method="map").diagnostics["log_prior"] < 0
    True
    """

    takes_dask = True  # fits a dask array shard by shard

    kind = "optimizer"
    remedies = "raise max_iter, loosen tol, or standardise the columns"
    options = {
        "seed": shared("seed"),
        "max_iter": shared("max_iter", 5000),
        "tol": shared("tol", 1e-9),
        "init": Option("pca", _fa_init, "str or dict",
                       "'pca' (principal axes of the correlation matrix), 'random', or starting parameters"),
        "regularization": Option(None, _regularization, "float > 0 or None",
                                 "floor on each noise variance as a fraction of its column's variance (1e-8)"),
        "dtype": shared("dtype"),
        "device": shared("device"),
        "progress": shared("progress"),
        "warn": shared("warn"),
        "callback": shared("callback", meaning="called as callback(iteration, parameters, objective)"),
        "use_moments": Option(True, lambda n, v: bool(check_flag(n, v)), "bool",
                              "with nothing missing, run the E-step on the covariance matrix"),
        "acceleration": Option("squarem", _acceleration, "str", "'squarem' (default) or 'none' (plain EM)"),
        "n_init": Option(1, _n_starts, "int ≥ 1", "starts: init first, then random; the best objective is kept"),
    }
    degenerate_warning = HeywoodWarning
    degenerate_key = "heywood_features"
    rank_degenerate = False  # a Heywood case may be the maximum likelihood itself

    def __init__(self, method: str, use_priors: bool) -> None:
        self.method, self.use_priors = method, use_priors
        self.desc = "FactorAnalysis"
        # Not declared affine-equivariant (check_engine would hold it to the same path for a·X + b): the converged
        # maximum-likelihood fit is (10·X + 3 gives the same fit to 7e-10), and plain EM's path is, but SQUAREM's
        # step length mixes the loadings' units with log noise variances, so the default path differs by ~1e-5;
        # the MAP's priors are on the data's own scale.

    def prepare(self, model: Any, data: Any, o: Options) -> FAPrep:
        started = time.perf_counter()
        if not isinstance(model, FactorAnalysis):
            raise DataError(f"model must be a FactorAnalysis; got {type(model).__name__}.")
        prep = _prepare(model, data, o, method=self.method, use_priors=self.use_priors, started=started)
        prep.step = _ACCELERATIONS[o.acceleration](_em_map(prep), prep.floor)
        return prep

    def n_starts(self, prep: FAPrep, o: Options) -> int:
        return 1 if isinstance(o.init, dict) else int(o.n_init)

    def start(self, prep: FAPrep, o: Options, gen: torch.Generator, index: int) -> FAParams:
        # the first start is ``init``; the others are random (small Gaussian loadings)
        first = _project(prep.start_params(o.init if index == 0 else "random", gen), prep.model.constraints)
        return FAParams(first.loadings, torch.maximum(first.noise_variance, prep.floor), first.mean)

    def step(self, prep: FAPrep, o: Options, state: FAParams) -> tuple[FAParams, float]:
        return prep.step(state)  # type: ignore[no-any-return]

    def degenerate(self, prep: FAPrep, o: Options, state: FAParams) -> list[Any]:
        return [prep.feature_names[j] for j in _heywood(prep, state)[0]]

    def degenerate_message(self, prep: FAPrep, o: Options, flags: list[Any]) -> str:
        return heywood_message(prep, prep.kept)

    def export(self, prep: FAPrep, o: Options, outcome: Any) -> Export:
        return _fa_export(prep, outcome.run)

    def finish(self, prep: FAPrep, o: Options, state: FAParams) -> FAParams:
        prep.kept = state  # the degeneracy message reads the state the flags were computed on
        return state




def _heywood(prep: FAPrep, state: FAParams) -> tuple[np.ndarray, np.ndarray]:
    """Features whose noise variance is within :data:`HEYWOOD_FRACTION` of zero (or at the floor), and every
    feature's noise variance over its column's variance."""
    psi = state.noise_variance.cpu().numpy()
    ratio = psi / np.maximum(prep.var, 1e-300)
    at_floor = psi <= 1.01 * prep.floor.cpu().numpy()
    return np.flatnonzero((ratio < HEYWOOD_FRACTION) | at_floor), ratio


def heywood_message(prep: FAPrep, state: FAParams) -> str:
    """The warning of a Heywood case: which features, how close to zero, the remedies."""
    bad, ratio = _heywood(prep, state)
    listed = ", ".join(f"{prep.feature_names[j]!r} ({ratio[j]:.2g} of its variance)" for j in bad)
    return (
        f"FactorAnalysis {prep.method}: Heywood case: the noise variance of {listed} is at or near zero, so "
        "that feature is explained entirely by the factors and the fit sits on the boundary of the "
        "parameter space (the likelihood can be flat or still rising there). Try fewer factors "
        "(n_components), more starts (n_init=10), a noise prior with method='map', or drop a feature that "
        "is almost a linear combination of others."
    )


def _fa_export(prep: FAPrep, run: Any) -> Export:
    """The FA result's sites, extras and diagnostics from the kept run (row-level extras only in memory)."""
    model, params = prep.model, run.state
    p = params.numpy()
    W, psi = p["loadings"], p["noise_variance"]
    common = (W**2).sum(1)
    q = model.n_components
    d = W.shape[0]
    n_free = d * q + 2 * d - q * (q - 1) // 2
    if model.constraints is not None:
        n_free = d * q + 2 * d - int(model.constraints.n_active().sum())
    coords: dict[str, list[str]] = {"feature": prep.feature_names, "factor": [f"f{k}" for k in range(q)]}
    extras: dict[str, Any] = {}
    log_likelihood = None
    if prep.rows is not None:
        V, Ez, ll_rows = factor_posterior(params, prep.rows)
        loglik = float(ll_rows.sum())
        log_likelihood = ll_rows.cpu().numpy()[None, None, :]
        extras.update(
            factor_scores=Ez.cpu().numpy(),
            factor_score_covariance=(V[prep.rows.pattern_of_row].cpu().numpy() if V.shape[0] > 1
                                     else V[0].cpu().numpy()),
        )
    else:
        loglik = float(prep.estep(params).loglik)
    extras["communalities"] = common / (common + psi)
    if prep.rows is not None:
        extras["pattern_of_row"] = prep.rows.pattern_of_row.cpu().numpy()
    if prep.sample_names is not None:
        coords["sample"] = prep.sample_names
    diagnostics = {
        "log_likelihood": loglik,
        "log_prior": float(fa_log_prior(model, params)) if prep.use_priors else 0.0,
        "n_parameters": int(n_free),
        "bic": float(-2 * loglik + n_free * math.log(prep.n_samples)),
        "missing_fraction": 1.0 - prep.n_observed / (prep.n_samples * d),
        "n_patterns": prep.n_patterns,
        "seconds": time.perf_counter() - prep.started,
        "observation_dim": "sample",
    }
    if prep.shards is not None:
        diagnostics["shards"] = prep.shards
    return Export(
        dims={"loadings": ("feature", "factor"), "noise_variance": ("feature",), "mean": ("feature",)},
        coords=coords, fitted={k: {"family": "point", "value": v} for k, v in p.items()},
        diagnostics=diagnostics, log_likelihood=log_likelihood, extras=extras,
    )


#: the two specs, callable as ``engine(model, X, **options)`` (the pipeline runs them), under their earlier names
em_factor_analysis = register_spec(FactorAnalysisEM("em", use_priors=False), FactorAnalysis)
map_factor_analysis = register_spec(FactorAnalysisEM("map", use_priors=True), FactorAnalysis)
