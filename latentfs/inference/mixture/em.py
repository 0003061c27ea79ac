"""EM for finite mixtures (Gaussian, latent profile, latent class); Titterington (2006) §1.4.

E-step: τ_nk = η_k g_k(y_n) / Σ_l η_l g_l(y_n); M-step: η_k = N_k / N with N_k = Σ_n τ_nk and the
component parameters from τ-weighted sufficient statistics (Dempster, Laird & Rubin 1977). The
observed-data log-likelihood ℓ = Σ_n log Σ_k η_k g_k(y_n) never decreases from one step to the next.

This module is the driver: restarts, short runs, stopping, collapsed-component checks and the
:class:`~latentfs.core.results.Posterior`. Its restart driver, :func:`mixture_em_restarts`, is the one EM
driver of every mixture-like family (these mixtures, the mixture of factor analysers, HDDC). The numerics
live in :mod:`~latentfs.inference.mixture.families` (component families, E/M steps) and the starting points
in :mod:`~latentfs.inference.mixture.starts`; their public names are re-exported here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, check_float, check_int, check_seed
from latentfs.core.diagnostics import CollapsedComponentWarning
from latentfs.core.options import check_choice
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, Starts, run_starts, shared
from latentfs.core.registry import register_spec
from latentfs.core.relabel import component_labels
from latentfs.inference.mixture.data import (
    EMData,
    entropy_of,
    lazy_rows,
    local_data,
    prepare_data,
    rows_of_shards,
    shard_entropy,
    shard_estep,
    shard_responsibilities,
    shard_row_loglik,
)
from latentfs.inference.mixture.families import (
    COVARIANCE_M_STEPS,
    FULL_E_STEPS,
    CategoricalFamily,
    GaussianFamily,
    add_eps,
    family_for,
    gram_rows,
    log_joint_components,
    responsibilities,
    scaled_reg,
)
from latentfs.inference.mixture.starts import (
    INITIALISATIONS,
    SUBSAMPLE_MIN,
    SUBSAMPLE_PER_COMPONENT,
    _sklearn_seed,
    initial_params,
    initial_responsibilities,
)
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

__all__ = [
    "COVARIANCE_M_STEPS",
    "CollapsedComponentWarning",
    "DEFAULT_REG_COVAR",
    "EMRestarts",
    "FULL_E_STEPS",
    "INITIALISATIONS",
    "CategoricalFamily",
    "GaussianFamily",
    "auto_n_init",
    "collapsed_components",
    "em_step",
    "entropy_of",
    "family_for",
    "fit_em",
    "gram_rows",
    "initial_responsibilities",
    "log_joint_components",
    "mixture_em_restarts",
    "responsibilities",
    "sample_start",
    "scaled_reg",
]

#: ``reg_covar`` default: the floor added to each variance, relative to that column's variance (:func:`scaled_reg`).
DEFAULT_REG_COVAR = 1e-7


def em_step(fam: Any, params: dict[str, torch.Tensor], reg: Any) -> tuple[dict[str, torch.Tensor], float]:
    """One EM iteration; returns the new parameters and ℓ at the *input* parameters."""
    resp, row_ll = fam.e_step(params)
    return fam.m_step(resp, reg), float(row_ll.sum())


#: A component direction whose variance (before the floor, relative to the column variances) is below
#: this, or below 10 × reg_covar, counts as collapsed.
COLLAPSE_RATIO = 1e-6


def collapsed_components(fam: Any, params: dict[str, torch.Tensor], reg: Any, reg_covar: float) -> list[dict[str, Any]]:
    """Components whose covariance, less the floor ``reg``, is (numerically) singular.

    Such a component sits on rows that tie in some feature (iris: 29 setosa rows sharing petal width
    0.2) or that are collinear; its likelihood grows without bound as the floor shrinks, so it is a
    spurious maximiser (McLachlan & Peel 2000, §3.10), not a better fit. Each entry gives ``component``,
    ``feature`` (the feature that dominates the collapsed direction), ``relative_variance`` (the
    direction's variance over the column variance) and ``weight``. Latent class models: always empty.
    """
    if not isinstance(fam, GaussianFamily):
        return []
    var = fam.column_variance
    sd = var.sqrt()
    cov = params["covariance"]
    limit = max(10.0 * float(reg_covar), COLLAPSE_RATIO)
    reg_t = torch.as_tensor(reg, dtype=cov.dtype).expand(fam.d)
    out: list[dict[str, Any]] = []
    weights = params["weights"]
    if fam.kind == "wishart":
        empirical = (cov - torch.diag_embed(reg_t)) / (sd[:, None] * sd[None, :])
        vals, vecs = torch.linalg.eigh(empirical)
        for k in range(vals.shape[0]):
            if float(vals[k, 0]) <= limit:
                j = int(vecs[k, :, 0].abs().argmax())
                out.append({"component": k if vals.shape[0] > 1 else "all", "feature": fam.feature_names[j],
                            "relative_variance": max(float(vals[k, 0]), 0.0),
                            "weight": float(weights[k]) if vals.shape[0] > 1 else 1.0})
        return out
    c = cov.expand(cov.shape[0], fam.d) if fam.covariance_type != "spherical" else cov.expand(cov.shape[0], fam.d)
    floor = reg_t if fam.covariance_type != "spherical" else reg_t.mean().expand(fam.d)
    ratio = (c - floor) / var
    for k in range(ratio.shape[0]):
        j = int(ratio[k].argmin())
        if float(ratio[k, j]) <= limit:
            out.append({"component": k if ratio.shape[0] > 1 else "all", "feature": fam.feature_names[j],
                        "relative_variance": max(float(ratio[k, j]), 0.0),
                        "weight": float(weights[k]) if ratio.shape[0] > 1 else 1.0})
    return out


def collapse_message(collapsed: list[dict[str, Any]], reg_covar: float) -> str:
    """The warning text for :func:`collapsed_components` output: which component, which feature, remedy."""
    parts = "; ".join(
        f"component {c['component']} (weight {c['weight']:.3f}) has variance {c['relative_variance']:.2g} × the "
        f"column variance along feature {c['feature']!r}" for c in collapsed
    )
    return (
        f"EM kept a fit with collapsed component(s): {parts}. Such a component sits on rows that tie in that "
        f"feature (or are collinear) and its likelihood is limited only by reg_covar={reg_covar:g}: it is a "
        "degenerate maximiser, not a better fit, and information criteria must not reward it. Use fewer "
        "components, a constrained covariance_type ('diag', 'tied', 'spherical'), a larger reg_covar, add "
        "jitter to discretised features, or method='vb'/'gibbs' with a proper prior."
    )


#: Starts of Gaussian-mixture EM when ``n_init="auto"`` (the default): as many as fit in this much work,
#: counted as rows × components × features per row-component (:func:`auto_n_init`), between 1 and
#: :data:`MAX_AUTO_STARTS`. Chosen by measurement (``benchmarks/continuous_mixture.py`` and
#: ``tests/inference/mixture/test_mixture_em_optima.py``): wine, iris and Old Faithful need several starts to
#: reach scikit-learn's best optimum and get 10 (each start costs well under a millisecond there); on
#: 20000 × 20 with K = 10 one k-means start already reaches scikit-learn's optimum and every extra start
#: would cost as much as scikit-learn's whole fit, so it gets 1, as scikit-learn's default.
AUTO_WORK = 2e7
MAX_AUTO_STARTS = 10

#: Iterations of each short EM run when several starts compete (Biernacki, Celeux & Govaert 2003,
#: "short runs of EM"); the winner is then run to convergence.
SHORT_RUN_ITER = 20
SHORT_RUN_TOL = 1e-4


def auto_n_init(fam: Any, n: int | None = None) -> int:
    """Number of starts for ``n_init="auto"``: ⌊AUTO_WORK / (n K w)⌋ clipped to [1, MAX_AUTO_STARTS], w the
    features per row-component one EM iteration touches (the product features of a full covariance,
    d for diagonal types, the one-hot levels of a latent class model); ``n`` the rows (default: the family's)."""
    work = (fam.n if n is None else n) * fam.k * fam.width
    return int(min(MAX_AUTO_STARTS, max(1, AUTO_WORK // max(work, 1))))


def _check_n_init(fam: Any, n_init: Any, n: int | None = None) -> int:
    if isinstance(n_init, str) and n_init == "auto":
        return auto_n_init(fam, n)
    if isinstance(n_init, str):
        raise DataError(f"n_init must be 'auto' or a positive integer; got {n_init!r}. Pass n_init='auto' or e.g. 5.")
    return check_int("n_init", n_init, low=1, remedy="Pass n_init='auto' or a positive number of starts, e.g. 5.")


def check_em_options(max_iter: Any, tol: Any, seed: Any) -> tuple[int, float, Any]:
    """The shared iteration options of the mixture optimisers, checked (:mod:`latentfs.core.data`)."""
    max_iter = check_int("max_iter", max_iter, low=1, remedy="Pass a positive number of iterations, e.g. 1000.")
    tol = check_float("tol", tol, 0.0, remedy="Pass a small non-negative relative tolerance, e.g. tol=1e-6.")
    return max_iter, tol, check_seed(seed)


def default_init_rows(k: int) -> int:
    """``init_rows`` of a dask fit when none is given: 2 · max(1000, 100 K) rows, so that the one-start
    k-means on the sample is the best of several full k-means runs (``starts._kmeans``)."""
    return 2 * max(SUBSAMPLE_MIN, SUBSAMPLE_PER_COMPONENT * int(k))


def check_init_rows(fam: Any, init_rows: Any) -> int | None:
    """``init_rows`` checked: None or an integer ≥ max(2, K)."""
    if init_rows is None:
        return None
    return check_int(
        "init_rows", init_rows, low=max(2, fam.k),
        remedy=f"Pass at least n_components = {fam.k} rows (e.g. init_rows={default_init_rows(fam.k)}), or None.",
    )


def em_estep(data: EMData, params: dict[str, Any]) -> dict[str, Any]:
    """The state at ``params``: one :func:`~latentfs.inference.mixture.data.shard_estep` per shard, its statistics
    (``stats``, ``eps=0``) and log-likelihood (``ll``) summed; in memory also the rows' responsibilities and
    log-likelihoods (``rows``; a dask fit leaves them with their shards)."""
    ss = data.shards
    # the statistics are K × d(d + 1) numbers: added on the driver, with no addition tasks
    (stats, ll), kept, _ = ss.estep(shard_estep, params, ss.is_local, n_sum=2, keep=ss.is_local, reduce="driver")
    return {"params": params, "stats": stats, "ll": float(ll), "rows": kept[0] if kept is not None else None}


def sample_start(
    data: EMData, init: Any, gen: torch.Generator, reg: Any, init_rows: int, *, single: bool
) -> dict[str, Any]:
    """Starting parameters computed from a seeded sample of rows (the start of a dask fit; the same in memory).

    An integer is drawn from ``gen`` and seeds ``numpy.random.default_rng``, which draws
    ``min(init_rows, n)`` distinct row numbers of the whole data (sorted); those rows, centred and scaled as
    the whole data, get the starting responsibilities of ``init`` (:func:`initial_responsibilities`: k-means
    — the best of 5 k-means runs when the fit has one start —, k-means++ or random, drawn from ``gen``), and
    one M-step on the sample gives the parameters. Only the sample's rows are ever gathered, each shard giving
    its own (:func:`~latentfs.inference.mixture.data.rows_of_shards`).
    """
    fam, n = data.fam, data.n
    m = min(int(init_rows), n)
    rows = np.sort(np.random.default_rng(_sklearn_seed(gen)).choice(n, m, replace=False))
    raw = rows_of_shards(data.shards, rows)
    if isinstance(fam, CategoricalFamily):
        sub: Any = CategoricalFamily.from_rows(fam.model, raw, fam.feature_names, device=fam.device)
    else:
        sub = GaussianFamily.from_rows(fam.model, raw, fam.shift.cpu().numpy(), fam.column_variance.cpu().numpy(),
                                       fam.e_step_variant, fam.feature_names, device=fam.device)
    return em_estep(data, sub.m_step(initial_responsibilities(sub, init, gen, single=single), reg))


def _complete(data: EMData, state: dict[str, Any], reg: Any) -> dict[str, Any]:
    """A state with parameters, statistics and log-likelihood (a run stopped before its first step holds only
    the statistics of its starting responsibilities)."""
    if "params" in state:
        return state
    return em_iteration(data, reg, state)[0]


#: The restart driver of every mixture-like family is the pipeline's (:func:`latentfs.core.pipeline.run_starts`);
#: the names these families imported from here before it moved to ``core``.
mixture_em_restarts = run_starts
EMRestarts = Starts


def em_start(
    data: EMData, init: Any, gen: torch.Generator, reg: Any, init_rows: int | None, *, single: bool
) -> dict[str, Any]:
    """One start of mixture EM: the parameters of ``init`` when it is a dict, :func:`sample_start` on ``init_rows``
    rows when given, else the statistics of the starting responsibilities of ``init``
    (:func:`initial_responsibilities`; in memory only: a dask fit always starts from a sample)."""
    fam = data.fam
    if isinstance(init, dict):
        return em_estep(data, initial_params(fam, init, gen, reg))
    if init_rows is not None:
        return sample_start(data, init, gen, reg, init_rows, single=single)
    return {"stats": fam.statistics(initial_responsibilities(fam, init, gen, single=single), eps=0.0)}


def em_iteration(data: EMData, reg: Any, state: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """An M-step from the state's statistics (with the count offset added once,
    :func:`~latentfs.inference.emissions.add_eps`: in memory exactly ``fam.m_step`` of the responsibilities), then
    the E-step at the new parameters: the state always holds parameters with their own statistics and
    log-likelihood; returns ℓ at the new parameters."""
    new = em_estep(data, data.fam.params_from_statistics(add_eps(state["stats"]), reg))
    return new, new["ll"]


_EM_REMEDY = ("The data may hold extreme values or near-duplicate rows: rescale the columns, raise reg_covar, or use "
              "fewer components.")


def fit_em(
    fam: Any,
    *,
    n_init: Any = "auto",
    init: Any = None,
    reg_covar: float = DEFAULT_REG_COVAR,
    max_iter: int = 1000,
    tol: float = 1e-6,
    seed: Any = None,
    warn: bool = True,
    progress: bool | None = None,
    callback: Any = None,
    short_iter: int = SHORT_RUN_ITER,
    init_rows: int | None = None,
) -> dict[str, Any]:
    """EM with restarts on a prepared family (the start of stepwise EM on its first batch); returns the best run's
    parameters and diagnostics. The same starts, iterations and restarts as ``latentfs.fit(model, X,
    method="em")`` (:class:`MixtureEM`), without a result around them.
    """
    max_iter, tol, seed = check_em_options(max_iter, tol, seed)
    short_iter = check_int("short_iter", short_iter, low=0)
    data = local_data(fam)
    init_rows = check_init_rows(fam, init_rows)
    reg = scaled_reg(fam, reg_covar)
    n_starts = 1 if isinstance(init, dict) else _check_n_init(fam, n_init)
    report = None if callback is None else (lambda it, state, value: callback(it, state["params"], value))
    try:
        out = run_starts(
            lambda gen: em_start(data, init, gen, reg, init_rows, single=n_starts == 1),
            lambda state: em_iteration(data, reg, state),
            n_init=n_starts, seed=seed, max_iter=max_iter, tol=tol, short_iter=short_iter,
            short_tol=SHORT_RUN_TOL, finish=lambda state: _complete(data, state, reg),
            degenerate=lambda state: bool(collapsed_components(fam, state["params"], reg, reg_covar)),
            warn=warn, desc=f"EM {type(fam.model).__name__}", progress=progress, callback=report,
        )
    except FloatingPointError as exc:
        raise DataError(f"{exc} {_EM_REMEDY}") from None
    state = out.run.state
    return {"params": state["params"], "run": out.run, "runs": out.runs, "best_index": out.best_index,
            "restarts": out, "resp": state["rows"][0], "row_loglik": state["rows"][1], "reg": reg,
            "collapsed": collapsed_components(fam, state["params"], reg, reg_covar)}


def criteria(loglik: float, n_params: int, n: int, entropy: float) -> dict[str, float]:
    """AIC = −2ℓ + 2ν, BIC = −2ℓ + ν log N, ICL = BIC + 2·entropy (all minimised)."""
    bic = -2 * loglik + n_params * math.log(n)
    return {"aic": -2 * loglik + 2 * n_params, "bic": bic, "icl": bic + 2 * entropy}


def _coords(fam: Any) -> dict[str, list[str]]:
    names = list(fam.feature_names)
    out = {"component": component_labels(fam.k), "feature": names, "item": names, "feature_bis": names}
    if isinstance(fam, CategoricalFamily):
        out["level"] = [str(s) for s in range(int(fam.levels.max()))]
    return out


def _init_option(name: str, value: Any) -> Any:
    if value is None or isinstance(value, dict):
        return value
    return check_choice(name, value, sorted(INITIALISATIONS))


def _e_step_option(name: str, value: Any) -> Any:
    return check_choice(name, value, ("auto", *sorted(FULL_E_STEPS)))


def _reg_covar(name: str, value: Any) -> float:
    return check_float(name, value, 0.0, remedy="Pass a small non-negative multiple of the column variances, e.g. "
                                                 f"{name}=1e-7.")


class MixtureEM(EngineSpec):
    """Maximum likelihood by EM with restarts (:func:`latentfs.fit` with ``method="em"``).

    Parameters
    ----------
    n_init : "auto" or int
        Starts. With more than one, each gets a short EM run (``short_iter`` iterations) and the best is
        run to convergence (:func:`fit_em`); a start whose fit has a collapsed component
        (:func:`collapsed_components`) is only kept when every start collapses. ``"auto"`` (default) gives
        as many starts as fit in a fixed amount of work (:func:`auto_n_init`): 10 on small data such as
        wine, iris or Old Faithful, where EM then reaches scikit-learn's best optimum over 50 starts, and
        1 on large data (as scikit-learn's default), where extra starts would dominate the cost.
    init : {"kmeans", "kmeans++", "random"} or dict, optional
        scikit-learn's ``KMeans`` (k-means++ seeding and Lloyd iterations; the default for Gaussian models,
        as scikit-learn's ``GaussianMixture`` starts), k-means++ seeding alone with hard assignment,
        uniform random responsibilities (default for latent class models), or starting values
        (``{"responsibilities": (n, K)}``, or the parameters ``weights``, ``means``, ``covariance``/
        ``precision`` — ``weights``, ``item_probs`` for latent class — in the model's site shapes).
    reg_covar : float
        Added to each variance after the M-step, as a multiple of that column's variance
        (:func:`scaled_reg`), so that the fit does not depend on the data's units.
    max_iter, tol : stopping rule of :func:`run_optimizer` (relative change of ℓ).
    e_step : {"auto", "gram", "cholesky"}
        Full/tied E-step variant (:data:`FULL_E_STEPS`).
    short_iter : int
        Iterations of each short run; 0 runs every start to convergence.
    init_rows : int, optional
        Compute every start on a seeded sample of this many rows (:func:`sample_start`: the rows are drawn
        from the seed, ``init`` is applied to them, one M-step on them gives the starting parameters).
        None (default): on all rows in memory; ``2 · max(1000, 100 K)`` rows for a dask array.
    device : str or torch.device
        Where the E- and M-steps run (``"cpu"``, ``"cuda"``, ``"cuda:1"``), in float64. The starts are drawn
        on the host (:mod:`~latentfs.inference.mixture.starts`) and moved there, so a fit on a GPU starts
        where the CPU fit starts; results come back as NumPy arrays. In-memory data only.

    Notes
    -----
    ``X`` may be a ``dask.array.Array`` whose row chunks are the shards (dense blocks, one column chunk;
    needs ``pip install "latentfs[dask]"``). Each E-step is then one task per shard on the active scheduler
    (a ``dask.distributed.Client`` if one exists) returning the shard's additive statistics and log-likelihood;
    they are summed next to the shards and the driver runs the M-step (:mod:`latentfs.inference.mixture.data`:
    the same per-shard E-step as an in-memory fit's, whose data are one shard).
    The start is :func:`sample_start` on ``init_rows`` rows (default ``2 · max(1000, 100 K)``): the
    in-memory fit with the same ``init_rows`` (and the other options) starts from the same parameters and
    returns the same result up to summation order (≤ 1e-6 relative in the tests). Not with dask input:
    ``init={"responsibilities": …}``. ``extras["responsibilities"]`` is then a lazy dask array (one block
    per shard, computed only when asked for), and the pointwise log-likelihood is computed per shard on
    first use.

    Warns
    -----
    CollapsedComponentWarning
        When the kept fit has a component whose covariance sits at the floor (it collapsed onto tied or
        collinear rows); ``diagnostics["collapsed"]`` lists them.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.mixture import GaussianMixture
    >>> gm = GaussianMixture(2, mean_precision=0.02)
    >>> X = gm.simulate(200, 2, seed=0)["data"]
    >>> res = latentfs.fit(gm, X, method="em", seed=0)
    >>> res.mean("means").shape, bool(res.diagnostics["converged"])
    ((2, 2), True)
    """

    affine_equivariant = True  # checked by check_engine: the fit of a·X + b is the fit of X transformed

    takes_dask = True  # fits a dask array shard by shard

    method = "em"
    kind = "optimizer"
    desc = "EM"
    options = {
        "n_init": shared("n_init", "auto", "starts; with several, short runs and the best continued ('auto': as "
                                           "many as fit in a fixed amount of work)"),
        "init": Option(None, _init_option, "str or dict",
                       "'kmeans' (Gaussian default), 'kmeans++', 'random' (latent class default), or starting values"),
        "reg_covar": Option(DEFAULT_REG_COVAR, _reg_covar, "float ≥ 0",
                            "added to each variance, as a multiple of that column's variance"),
        "max_iter": shared("max_iter", 1000),
        "tol": shared("tol", 1e-6),
        "seed": shared("seed"),
        "warn": shared("warn"),
        "progress": shared("progress"),
        "e_step": Option("auto", _e_step_option, "str", "the full/tied E-step variant: 'auto', 'gram', 'cholesky'"),
        "callback": shared("callback", meaning="called as callback(iteration, parameters, log_likelihood)"),
        "short_iter": Option(SHORT_RUN_ITER, lambda n, v: check_int(n, v, low=0), "int ≥ 0",
                             "iterations of each short run; 0 runs every start to convergence"),
        "init_rows": Option(None, None, "int or None", "compute every start on a seeded sample of this many rows"),
        "device": shared("device"),
    }
    degenerate_warning = CollapsedComponentWarning
    errors = {FloatingPointError: _EM_REMEDY}

    def prepare(self, model: Any, data: Any, o: Options) -> Any:
        from types import SimpleNamespace

        from latentfs.core.shards import is_dask_array

        init, init_rows = o.init, o.init_rows
        sharded = is_dask_array(data)
        if sharded and o.device.type != "cpu":
            raise DataError(
                f"device={str(o.device)!r} applies to data in memory; the shards of a dask array X are fitted on the "
                "CPU by their workers. Pass device='cpu', or X.compute() to fit it in memory on the device."
            )
        if sharded and isinstance(init, dict) and "responsibilities" in init:
            raise DataError(
                "init['responsibilities'] is not available for a dask array X (per-row values stay with their "
                "shards); pass starting parameters, an init string, or fit in memory."
            )
        em_data = prepare_data(model, data, e_step=o.e_step, device=None if sharded else o.device)
        fam = em_data.fam
        if sharded and init_rows is None:
            init_rows = default_init_rows(fam.k)
        init_rows = check_init_rows(fam, init_rows)
        n_starts = 1 if isinstance(init, dict) else _check_n_init(fam, o.n_init, em_data.n)
        return SimpleNamespace(model=model, data=em_data, fam=fam, sharded=sharded, init_rows=init_rows,
                               n_starts=n_starts, reg=scaled_reg(fam, o.reg_covar))

    def n_starts(self, prep: Any, o: Options) -> int:
        return int(prep.n_starts)

    def short_iter(self, prep: Any, o: Options) -> int:
        return int(o.short_iter)

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> Any:
        return em_start(prep.data, o.init, gen, prep.reg, prep.init_rows, single=prep.n_starts == 1)

    def step(self, prep: Any, o: Options, state: Any) -> tuple[Any, float]:
        return em_iteration(prep.data, prep.reg, state)

    def finish(self, prep: Any, o: Options, state: Any) -> Any:
        return _complete(prep.data, state, prep.reg)

    def report(self, o: Options) -> Any:
        callback = o.callback
        return None if callback is None else (lambda it, state, value: callback(it, state["params"], value))

    def degenerate(self, prep: Any, o: Options, state: Any) -> list[dict[str, Any]]:
        return collapsed_components(prep.fam, state["params"], prep.reg, o.reg_covar)

    def degenerate_message(self, prep: Any, o: Options, flags: list[dict[str, Any]]) -> str:
        return collapse_message(flags, o.reg_covar)

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        fam, model, ss, n = prep.fam, prep.model, prep.data.shards, prep.data.n
        state = outcome.run.state
        params, ll = state["params"], state["ll"]
        if ss.is_local:
            resp, row_ll = state["rows"]
            entropy = entropy_of(resp)
        else:
            entropy = float(ss.estep(shard_entropy, params, reduce="driver")[0][0])
        n_params = model.n_parameters(fam.d)
        diag: dict[str, Any] = {
            "log_likelihood": ll,
            "n_parameters": n_params,
            "n_observations": n,
            "entropy": entropy,
            "observation_dim": "sample",
            "reg_covar": float(o.reg_covar),
        }
        diag.update(criteria(ll, n_params, n, diag["entropy"]))
        ex = Export(dims=fam.dims(), coords=_coords(fam), diagnostics=diag,
                    fitted={k: {"family": "point", "value": v} for k, v in fam.export(params).items()})
        if ss.is_local:
            ex.extras["responsibilities"] = np.ascontiguousarray(resp.cpu().numpy())
            ex.log_likelihood = row_ll.cpu().numpy()[None, None]
        else:
            diag["shards"] = ss.n_shards
            diag["init_rows"] = int(prep.init_rows) if prep.init_rows is not None else None
            # Posterior makes numpy arrays of its extras: the lazy array is set after construction
            ex.lazy_extras["responsibilities"] = lazy_rows(ss, shard_responsibilities, params, fam.k)
            lazy_ll = lazy_rows(ss, shard_row_loglik, params, None)
            ex.log_likelihood = lambda: np.asarray(lazy_ll.compute())[None, None]  # computed on first use
        return ex


register_spec(MixtureEM(), GaussianMixture, LatentProfile, LatentClass)
