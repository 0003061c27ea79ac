"""The one EM driver of the mixture-like families (issue 13, item 4): Gaussian mixture, mixture of factor
analysers and HDDC restart through :func:`latentfs.inference.mixture.em.mixture_em_restarts`, which runs the
starts with :func:`latentfs.core.driver.run_restarts`.

For each family: (a) ``n_init=3, max_iter=2`` gives exactly one ConvergenceWarning per fit (scikit-learn's
convention: one per fit, not one per restart); (b) under ``chain_method("parallel")`` the fit equals the
sequential one for the same seed, bit for bit (each restart draws its start from a generator of its own, so
the restarts do not depend on where or in which order they run; torch and BLAS run with one thread here, as
in ``tests/core/test_parallel_chains.py``, so each worker does too); (c) the same seed gives the same fit
twice. Nothing here is statistical: every comparison is exact or structural.
"""

import warnings

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

import latentfs
from latentfs.core.data import DataError
from latentfs.core.driver import ConvergenceWarning
from latentfs.inference.hdda.hddc import DegenerateClusterError, fit_hddc
from latentfs.inference.mixture.em import mixture_em_restarts
from latentfs.models.factor import MixtureOfFactorAnalyzers
from latentfs.models.hdda import HDDAModel
from latentfs.models.mixture import GaussianMixture


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


def _blobs(n=60, d=4, seed=0, shift=5.0):
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal(0.0, 1.0, (n, d)), rng.normal(shift, 1.0, (n, d)) @ np.diag(np.arange(1, d + 1))])


def _gm(**options):
    return latentfs.fit(GaussianMixture(2), _blobs(), method="em", **options)


def _mfa(**options):
    options.setdefault("tol", 1e-6)  # the default 1e-8 needs more than 2000 iterations here
    return latentfs.fit(MixtureOfFactorAnalyzers(2, 1), _blobs(), method="em", **options)


def _hddc_fit(**options):
    # overlapping clusters: EM needs more than two iterations (14 for seed 0)
    return latentfs.fit(HDDAModel(2, n_dims=1), _blobs(d=5, shift=1.0), method="em", **options)


def _hddc_estimator(**options):
    return latentfs.HDDC(2, "AkjBkQkDk", n_dims=1, **options).fit(_blobs(d=5, shift=1.0))


FITS = {"gaussian-mixture": _gm, "mfa": _mfa, "hddc-fit": _hddc_fit}


def _arrays(fitted):
    """Every fitted array of a Posterior or of an HDDC estimator, and the trace."""
    if isinstance(fitted, latentfs.HDDC):
        p = fitted.params_
        out = {"weights": p.weights, "means": p.means, "noise": np.asarray(p.noise), "resp": fitted.resp_,
               "trace": np.asarray(fitted.trace_)}
        out.update({f"orientation{i}": q for i, q in enumerate(p.orientations) if q is not None})
        return out
    out = {f"site:{s}": fitted.samples(s) for s in fitted.sites}
    out["trace"] = np.asarray(fitted.trace)
    for name, value in fitted.extras.items():
        if isinstance(value, np.ndarray) and value.dtype != object:
            out[f"extra:{name}"] = value
    out["restart_objectives"] = np.asarray(fitted.diagnostics["restart_objectives"])
    return out


def _assert_same(a, b):
    a, b = _arrays(a), _arrays(b)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)


def _convergence_warnings(fit_once):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = fit_once()
    return fitted, [w for w in caught if issubclass(w.category, ConvergenceWarning)]


def _gm_full_runs(**options):
    # every start run to convergence (no short runs), on overlapping clusters
    return latentfs.fit(GaussianMixture(2), _blobs(shift=1.0), method="em", short_iter=0, **options)


@pytest.mark.parametrize("name", [*FITS, "gaussian-mixture-full-runs", "hddc-estimator"])
def test_one_convergence_warning_per_fit_not_per_restart(name):
    # Before: MFA, HDDC and the Gaussian mixture with short_iter=0 warned once per restart (3 warnings here).
    make = {**FITS, "gaussian-mixture-full-runs": _gm_full_runs, "hddc-estimator": _hddc_estimator}[name]
    fitted, caught = _convergence_warnings(lambda: make(n_init=3, max_iter=2, seed=0))
    assert len(caught) == 1, [str(w.message) for w in caught]
    converged = fitted.converged_ if name == "hddc-estimator" else fitted.diagnostics["converged"]
    assert converged is False or converged == np.False_
    # and none when the fit is silenced or converges
    if name != "hddc-estimator":
        assert not _convergence_warnings(lambda: make(n_init=3, max_iter=2, seed=0, warn=False))[1]


@pytest.mark.parametrize("name", [*FITS, "hddc-estimator"])
def test_parallel_restarts_equal_the_sequential_fit(name):
    make = _hddc_estimator if name == "hddc-estimator" else FITS[name]
    seq = make(n_init=3, seed=4)
    with latentfs.chain_method("parallel"):
        par = make(n_init=3, seed=4)
    _assert_same(seq, par)
    if name != "hddc-estimator":
        assert len(seq.diagnostics["restart_objectives"]) == 3
        assert par.diagnostics["best_restart"] == seq.diagnostics["best_restart"]


@pytest.mark.parametrize("name", [*FITS, "hddc-estimator"])
def test_the_same_seed_gives_the_same_fit(name):
    make = _hddc_estimator if name == "hddc-estimator" else FITS[name]
    _assert_same(make(n_init=3, seed=7), make(n_init=3, seed=7))


@pytest.mark.parametrize("name", list(FITS))
def test_every_family_reports_the_restart_diagnostics(name):
    post = FITS[name](n_init=3, seed=2)
    d = post.diagnostics
    lls = np.asarray(d["restart_objectives"])
    assert lls.shape == (3,) and isinstance(d["best_restart"], int) and 0 <= d["best_restart"] < 3
    assert isinstance(d["converged"], bool) and d["converged"]
    assert d["n_iter"] == len(post.trace[0]) >= 1
    # the kept start is the best one up to the near-tie tolerance (its run may have continued past it)
    assert lls[d["best_restart"]] >= lls.max() - 1e-9 * max(abs(lls.max()), 1.0)


def test_each_restart_depends_only_on_its_index():
    # Restart r's start depends on the seed and r only (not on the other restarts, nor on n_init): a toy family
    # whose start is one draw from the restart's generator and whose step does nothing.
    def start(gen):
        return float(torch.rand((), generator=gen, dtype=torch.float64))

    def step(x):
        return x, -abs(x - 0.5)

    a = mixture_em_restarts(start, step, n_init=3, seed=11, max_iter=5, tol=1e-12, warn=False, progress=False)
    b = mixture_em_restarts(start, step, n_init=5, seed=11, max_iter=5, tol=1e-12, warn=False, progress=False)
    first = [r.state for r in a.runs]
    assert first == [r.state for r in b.runs[:3]] and len(set(first)) == 3
    assert a.best_index == int(np.argmax([-abs(x - 0.5) for x in first]))


def test_near_ties_go_to_the_earliest_start():
    # Three starts with the same objective up to 1e-12 relative: the first is kept (a sharded fit, whose sums
    # round differently, then keeps the same start as the in-memory one).
    # A start better by 1e-6 relative is a better optimum and is kept.
    for values, expected in (([-100.0, -100.0 * (1 - 1e-12), -100.0 * (1 - 2e-12)], 0),
                             ([-100.0, -100.0 * (1 - 1e-12), -100.0 * (1 - 1e-6)], 2)):
        seen = iter(range(3))

        def step(r, values=values):
            return r, values[r]

        fit = mixture_em_restarts(lambda gen, seen=seen: next(seen), step, n_init=3, seed=0, max_iter=3, tol=0.0,
                                  warn=False, progress=False)
        assert fit.best_index == expected


def test_hddc_drops_restarts_that_lose_a_cluster_and_refuses_when_all_do():
    X = _blobs(d=5)
    fit = fit_hddc(X, 2, "AkjBkQkDk", 1, n_init=3, seed=0, min_size=2.0)
    assert len(fit.restart_log_likelihoods) == 3 and np.isfinite(fit.restart_log_likelihoods).all()
    with pytest.raises(DataError, match=r"every HDDC run lost a cluster") as info:
        fit_hddc(X, 2, "AkjBkQkDk", 1, n_init=3, seed=0, min_size=float(X.shape[0]))
    assert not isinstance(info.value, DegenerateClusterError)
    with latentfs.chain_method("parallel"), pytest.raises(DataError, match=r"every HDDC run lost a cluster"):
        fit_hddc(X, 2, "AkjBkQkDk", 1, n_init=3, seed=0, min_size=float(X.shape[0]))


def test_hddc_dropped_restarts_are_dropped_alike_in_parallel():
    # scikit-learn's 10 × 3 uniform check data with K = 2: for seed 2 three of four restarts lose a cluster
    # (a cluster below min_size = 2 points); the dropped restarts are caught inside the worker, rank last and
    # show as −inf, and the parallel fit keeps the same restart as the sequential one.
    X = np.random.RandomState(0).uniform(size=(10, 3))
    options = dict(n_init=4, max_iter=20, seed=2, warn=False)
    seq = fit_hddc(X, 2, "AkjBkQkDk", "cattell", **options)
    with latentfs.chain_method("parallel"):
        par = fit_hddc(X, 2, "AkjBkQkDk", "cattell", **options)
    lls = np.asarray(seq.restart_log_likelihoods)
    assert np.isinf(lls).any() and np.isfinite(lls[seq.best_restart])
    assert len(seq.run_objectives) == int(np.isfinite(lls).sum())
    np.testing.assert_array_equal(np.asarray(par.restart_log_likelihoods), lls)
    assert par.best_restart == seq.best_restart
    np.testing.assert_array_equal(par.trace, seq.trace)
    np.testing.assert_array_equal(par.resp, seq.resp)
