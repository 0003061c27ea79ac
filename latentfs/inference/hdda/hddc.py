"""HDDC: clustering by EM over the HDDA family (Bouveyron, Girard & Schmid 2007, CSDA; digest §2.7).

Each restart starts from ``init`` (:data:`INITIALISATIONS`), alternates the E-step (costs of
:mod:`latentfs.inference.hdda.numerics`) and the M-step (the family's estimators on weighted scatters), and the
restarts go through the pipeline's restart driver (:func:`latentfs.core.pipeline.run_starts`).
:mod:`latentfs.inference.hdda.em` registers the engine, a spec built from :func:`hddc_setup` and
:func:`hddc_fit_from`, with :func:`latentfs.fit`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import logsumexp
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

from latentfs.core.data import DataError, as_rng, check_choice, check_float
from latentfs.core.options import check_options
from latentfs.core.pipeline import run_starts
from latentfs.inference.hdda.numerics import (
    ESTIMATORS,
    HDDAParams,
    Scatter,
    SubmodelSpec,
    _scatter,
    check_hdda_data,
    check_threshold,
    class_scatters,
    criterion_value,
    log_joint,
    n_parameters,
    pooled_scatter,
    resolve_submodel,
    select_dimensions,
)

if TYPE_CHECKING:
    import torch

__all__ = [
    "INITIALISATIONS",
    "DegenerateClusterError",
    "HDDCFit",
    "HDDCSetup",
    "HDDCState",
    "fit_hddc",
    "hddc_em_step",
    "hddc_fit_from",
    "hddc_setup",
]


class DegenerateClusterError(DataError):
    """A cluster lost its support during EM (fewer than ``min_size`` points); the run is dropped."""


@dataclass
class HDDCState:
    """State of one HDDC EM run.

    Attributes
    ----------
    params : HDDAParams
        Parameters estimated from ``resp`` (the M-step's output).
    resp : ndarray (n, k)
        t_i(x), the responsibilities the parameters were estimated from.
    """

    params: HDDAParams
    resp: np.ndarray


@dataclass
class HDDCFit:
    """Result of :func:`fit_hddc` (the best of the restarts).

    ``run_objectives`` holds the final log-likelihood of each restart that was not dropped;
    ``restart_log_likelihoods`` that of every restart in order (−inf for a dropped one) and ``best_restart``
    the index of the kept one in it.
    """

    params: HDDAParams
    resp: np.ndarray
    log_likelihood: float
    n_parameters: float
    bic: float
    icl: float
    trace: np.ndarray
    converged: bool
    n_iter: int
    row_log_likelihood: np.ndarray
    run_objectives: list[float] = field(default_factory=list)
    restart_log_likelihoods: list[float] = field(default_factory=list)
    best_restart: int = 0
    interrupted: bool = False


def _m_step(
    X: np.ndarray, resp: np.ndarray, spec: SubmodelSpec, n_dims: Any, threshold: float, noise_ctrl: float,
    total: Scatter | None, min_size: float,
) -> HDDAParams:
    sizes = resp.sum(0)
    if (sizes < min_size).any():
        raise DegenerateClusterError(
            f"cluster {int(np.argmin(sizes))} holds {sizes.min():.3g} points (< {min_size}); run dropped."
        )
    scatters = class_scatters(X, resp)
    dims = select_dimensions(spec, scatters, total, n_dims, threshold=threshold, noise_ctrl=noise_ctrl)
    return ESTIMATORS[spec.name](scatters, pooled_scatter(scatters), dims)


def _hard(resp: np.ndarray) -> np.ndarray:
    out = np.zeros_like(resp)
    out[np.arange(resp.shape[0]), resp.argmax(1)] = 1.0
    return out


#: How the E-step's posteriors become the next M-step's weights: EM (soft) or classification EM (hard).
_ASSIGNMENTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"em": lambda r: r, "cem": _hard}


def hddc_em_step(
    state: HDDCState,
    X: np.ndarray,
    m_step: Callable[[np.ndarray], HDDAParams],
    assign: Callable[[np.ndarray], np.ndarray],
) -> tuple[HDDCState, float]:
    """One EM iteration: E-step at ``state.params`` (returns its observed log-likelihood), then M-step.

    ℓ = Σ_x log Σ_i π_i f_i(x); t_i(x) = softmax_i(−K_i(x)/2) (Bergé et al. 2012, §2.2).
    """
    lj = log_joint(X, state.params)
    row = logsumexp(lj, axis=1)
    resp = np.exp(lj - row[:, None])
    new_resp = assign(resp)
    return HDDCState(m_step(new_resp), new_resp), float(row.sum())


def _sklearn_seed(rng: np.random.Generator) -> int:
    """A scikit-learn ``random_state`` drawn from the fit's generator (one seed drives both)."""
    return int(rng.integers(0, 2**31 - 1))


def _kmeans_resp(X: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """One scikit-learn ``KMeans`` run (k-means++ seeding, then Lloyd iterations; the HDclassif default
    init); returns one-hot assignments. The same start as the mixtures' ``init="kmeans"``
    (:mod:`latentfs.inference.mixture.starts`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SklearnConvergenceWarning)  # fewer distinct rows than k: EM decides
        labels = KMeans(k, n_init=1, random_state=_sklearn_seed(rng)).fit(X).labels_
    return np.eye(k)[labels]


def _kmeans_plus_plus_resp(X: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding alone (Arthur & Vassilvitskii 2007; scikit-learn's ``kmeans_plusplus``): each row
    goes to its nearest seed, as the mixtures' ``init="kmeans++"``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SklearnConvergenceWarning)
        centres, _ = kmeans_plusplus(X, k, random_state=_sklearn_seed(rng))
    dist2 = (X * X).sum(1)[:, None] - 2 * X @ centres.T + (centres * centres).sum(1)
    return np.eye(k)[dist2.argmin(1)]


def _random_resp(X: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """A random partition: each row to a uniformly drawn cluster (hard labels, as HDclassif's random init)."""
    return np.eye(k)[rng.integers(k, size=X.shape[0])]


#: Initialisations: name -> f(X, k, rng) -> responsibilities (n, k); the same names and meanings as the
#: mixtures' (:data:`latentfs.inference.mixture.starts.INITIALISATIONS`), except that ``"random"`` is a
#: random hard partition here (the mixtures draw soft responsibilities).
INITIALISATIONS: dict[str, Callable[[np.ndarray, int, np.random.Generator], np.ndarray]] = {
    "kmeans": _kmeans_resp,
    "kmeans++": _kmeans_plus_plus_resp,
    "random": _random_resp,
}


def fit_hddc(
    X: np.ndarray,
    n_components: int,
    model: Any = "AkjBkQkDk",
    n_dims: Any = "cattell",
    *,
    threshold: float = 0.2,
    noise_ctrl: float = 1e-8,
    init: str | np.ndarray = "kmeans",
    n_init: int = 4,
    max_iter: int = 200,
    tol: float = 1e-6,
    algorithm: str = "em",
    min_size: float = 2.0,
    seed: int | np.random.Generator | None = None,
    warn: bool = True,
    progress: bool | None = None,
) -> HDDCFit:
    """HDDC by EM with restarts (Bouveyron, Girard & Schmid 2007, CSDA; digest §2.7).

    Each restart starts from ``init`` (``"kmeans"``, ``"kmeans++"``, ``"random"`` or a label vector; see
    :data:`INITIALISATIONS`), drawn from a generator of its own spawned from ``seed``, and iterates
    :func:`hddc_em_step`; the restarts go through the pipeline's restart driver
    (:func:`latentfs.core.pipeline.run_starts`: the run with the highest log-likelihood wins,
    near-ties to the earliest, at most one ``ConvergenceWarning`` per fit, and the restarts may run in
    parallel, ``latentfs.chain_method("parallel")``, with the same result). Runs in which a cluster falls
    below ``min_size`` points are dropped; a DataError when every run is. With Cattell's rule inside EM the
    d_i may change between iterations, so the likelihood need not increase monotonically; pass an int
    ``n_dims`` for monotone EM.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 1, (40, 6)), rng.normal(6, 1, (40, 6))])
    >>> fit = fit_hddc(X, 2, "AkBkQkDk", 2, seed=0, n_init=2)
    >>> sorted(np.bincount(fit.resp.argmax(1)).tolist())
    [40, 40]
    """
    n_init, max_iter, tol, seed = check_options(n_init=n_init, max_iter=max_iter, tol=tol, seed=seed)
    setup = hddc_setup(X, n_components, model, n_dims, threshold=threshold, noise_ctrl=noise_ctrl, init=init,
                       algorithm=algorithm, min_size=min_size)
    # The pipeline's restart driver: start r drawn from the r-th generator spawned from ``seed`` (so the restarts
    # may run in parallel), every start run to convergence, a start that loses a cluster dropped, the best kept,
    # one ConvergenceWarning per fit.
    restarts = run_starts(
        setup.start, setup.step, n_init=setup.n_starts(n_init), seed=seed, max_iter=max_iter, tol=tol,
        drop=(DegenerateClusterError,), warn=warn, desc=f"HDDC {setup.spec.name}", remedies=HDDC_REMEDIES,
        progress=progress,
    )
    return hddc_fit_from(setup, restarts)


HDDC_REMEDIES = "raise max_iter, loosen tol, fix n_dims to an int, or raise n_init"


@dataclass
class HDDCSetup:
    """One HDDC problem, checked and ready for the restart driver: the data, the submodel, a start from a
    generator, one EM step, the number of starts ``init`` allows and the smallest cluster size."""

    X: np.ndarray
    n_components: int
    spec: Any
    start: Callable[[torch.Generator], HDDCState]
    step: Callable[[HDDCState], tuple[HDDCState, float]]
    given: bool
    min_size: float

    def n_starts(self, n_init: int) -> int:
        return 1 if self.given else int(n_init)


def hddc_setup(
    X: np.ndarray, n_components: int, model: Any, n_dims: Any, *, threshold: float, noise_ctrl: float, init: Any,
    algorithm: str, min_size: float,
) -> HDDCSetup:
    """The checks and pieces of :func:`fit_hddc` (and of the ``"em"`` spec of :mod:`latentfs.inference.hdda.em`)
    before any restart runs."""
    spec = resolve_submodel(model)
    check_choice("algorithm", algorithm, sorted(_ASSIGNMENTS))
    threshold = check_threshold(threshold)
    noise_ctrl = check_float("noise_ctrl", noise_ctrl, 0.0, 1.0, high_open=True,
                             remedy="noise_ctrl is a fraction of the largest eigenvalue; try 1e-8.")
    check_hdda_data(X)
    n = X.shape[0]
    total = _scatter(X, np.ones(n)) if spec.is_subspace and spec.dims == "d" and isinstance(n_dims, str) else None
    m_step = partial(_m_step, X, spec=spec, n_dims=n_dims, threshold=threshold, noise_ctrl=noise_ctrl,
                     total=total, min_size=min_size)
    assign = _ASSIGNMENTS[algorithm]
    given = not isinstance(init, str)
    if not given and init not in INITIALISATIONS:
        raise DataError(f"init must be one of {sorted(INITIALISATIONS)} or a label vector; got {init!r}.")
    if given:
        init = np.asarray(init)
        if init.shape != (n,) or init.dtype.kind not in "iu" or init.min() < 0 or init.max() >= n_components:
            raise DataError(
                f"init labels must be {n} integers in 0..{n_components - 1} (one per row); got shape "
                f"{init.shape}, dtype {init.dtype}. Pass integer cluster codes or init='kmeans'."
            )

    def start(gen: torch.Generator) -> HDDCState:
        resp0 = np.eye(n_components)[np.asarray(init)] if given else INITIALISATIONS[str(init)](X, n_components,
                                                                                                 as_rng(gen))
        return HDDCState(m_step(resp0), resp0)

    return HDDCSetup(X, n_components, spec, start, partial(hddc_em_step, X=X, m_step=m_step, assign=assign), given,
                     min_size)


def hddc_fit_from(setup: HDDCSetup, restarts: Any) -> HDDCFit:
    """The :class:`HDDCFit` of the run the restart driver kept (a DataError when every start lost a cluster)."""
    X, n_components, spec = setup.X, setup.n_components, setup.spec
    if restarts.all_dropped:
        raise DataError(
            f"n_components={n_components}: every HDDC run lost a cluster (fewer than {setup.min_size} points; "
            f"last: {restarts.dropped[-1]}). Use fewer components, more restarts (n_init), or another init."
        )
    n = X.shape[0]
    best = restarts.run
    params = best.state.params
    lj = log_joint(X, params)
    row = logsumexp(lj, axis=1)
    resp = np.exp(lj - row[:, None])
    log_lik = float(row.sum())
    nu = n_parameters(spec, X.shape[1], n_components, params.dims)
    entropy = float(-(resp * np.log(np.clip(resp, 1e-300, None))).sum())
    return HDDCFit(
        params=params, resp=resp, log_likelihood=log_lik, n_parameters=nu,
        bic=criterion_value("bic", log_lik, nu, n), icl=criterion_value("icl", log_lik, nu, n, entropy),
        trace=best.trace, converged=best.converged, n_iter=best.n_iter, row_log_likelihood=row,
        run_objectives=[r.objective for r in restarts.runs if "dropped" not in r.info],
        restart_log_likelihoods=restarts.restart_objectives, best_restart=restarts.best_index,
        interrupted=restarts.interrupted,
    )
