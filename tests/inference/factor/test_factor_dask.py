"""Factor analysis EM / MAP on a dask array: one task per row chunk, statistics reduced on the driver (issue 16).

Complete data: the moments are one additive pass, then EM runs on the driver; missing data: one E-step task per
shard per EM step. Either way the sharded fit must equal the in-memory fit for the same seed (the same start,
the same iterates; only the order of sums differs), on dask's synchronous scheduler and on a distributed
LocalCluster of two worker processes.
"""

import dask  # the latentfs[dask] extra: installed wherever the tests run (no skip)
import dask.array as da
import distributed
import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.factor import factor_scores
from latentfs.models.factor import FactorAnalysis

RTOL = 1e-6  # summation order only: observed differences are ~1e-10 or smaller (loadings after 30 SQUAREM steps)
LOADINGS = np.array([[0.9, 0.0], [0.8, 0.3], [0.7, -0.4], [0.0, 0.9], [0.3, 0.8], [-0.5, 0.6]])


@pytest.fixture(scope="module")
def complete():
    X = FactorAnalysis(2).simulate(230, loadings=LOADINGS, noise_variance=0.3, mean=1.0, seed=0)["data"]
    return X * np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0])  # unequal column scales


@pytest.fixture(scope="module")
def with_missing(complete):
    X = complete.copy()
    rng = np.random.default_rng(1)
    X[rng.random(X.shape) < 0.15] = np.nan
    X[60:120, 2] = np.nan  # column 2 is missing throughout the second shard (allowed: not in every shard)
    X[np.isnan(X).all(1), 0] = 1.0  # no row entirely missing
    return X


def _close(got, ref):
    got, ref = np.asarray(got, dtype=float), np.asarray(ref, dtype=float)
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=1e-9 * float(np.abs(ref).max()))


def _assert_same(got, ref):
    assert got.trace.shape == ref.trace.shape
    _close(got.trace, ref.trace)  # trace[0] is the log-likelihood at the start: the starts agree too
    for site in ("loadings", "noise_variance", "mean"):
        _close(got.mean(site), ref.mean(site))
    for key in ("log_likelihood", "bic", "missing_fraction", "log_prior"):
        _close(got.diagnostics[key], ref.diagnostics[key])
    _close(got.diagnostics["restart_objectives"], ref.diagnostics["restart_objectives"])
    assert got.diagnostics["best_restart"] == ref.diagnostics["best_restart"]
    assert got.diagnostics["n_patterns"] == ref.diagnostics["n_patterns"]
    assert got.diagnostics["heywood_features"] == ref.diagnostics["heywood_features"]
    _close(got.extras["communalities"], ref.extras["communalities"])


@pytest.mark.parametrize(
    ("data", "method", "options"),
    [
        ("complete", "em", dict(n_init=2, max_iter=4)),  # moments: one pass, then EM on the driver
        ("complete", "em", dict(use_moments=False, acceleration="none", max_iter=30)),  # a pass per step
        ("with_missing", "em", dict(n_init=2, max_iter=8)),  # a pass per step, shards with different patterns
        ("with_missing", "map", dict(init="random", max_iter=7)),
    ],
)
def test_dask_synchronous_equals_in_memory(request, data, method, options):
    X = request.getfixturevalue(data)
    model = FactorAnalysis(2, loading_scale=2.0, noise_shape=2.0, noise_scale=0.5) if method == "map" else \
        FactorAnalysis(2)
    # tol=0 and max_iter short of the point where SQUAREM's objective stops changing in float64 (relative
    # changes ≥ 1e-10 at the last step): both fits run the same number of steps whatever the rounding
    opts = dict(method=method, seed=4, tol=0.0, warn=False, **options)
    ref = latentfs.fit(model, X, **opts)
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(model, da.from_array(X, chunks=(60, -1)), **opts)  # 4 shards, the last one short
    assert got.diagnostics["shards"] == 4
    assert got.kind() == "point"
    _assert_same(got, ref)
    assert "factor_scores" not in got.extras  # row-level outputs are not gathered


def test_dask_rows_of_one_shard_complete_others_missing(complete):
    # the first shard has no missing entry (its B is shared by all features), the others do
    X = complete.copy()
    X[100:, 1] = np.nan
    ref = latentfs.fit(FactorAnalysis(2), X, method="em", seed=0, max_iter=6, tol=0.0, warn=False)
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(FactorAnalysis(2), da.from_array(X, chunks=(100, -1)), method="em", seed=0, max_iter=6,
                           tol=0.0, warn=False)
    _assert_same(got, ref)


def test_factor_scores_are_lazy_and_equal_in_memory(with_missing):
    ref = latentfs.fit(FactorAnalysis(2), with_missing, method="em", seed=0, max_iter=20, warn=False)
    X = da.from_array(with_missing, chunks=(60, -1))
    scores = factor_scores(ref, X)
    assert isinstance(scores, da.Array)
    assert scores.chunks == (X.chunks[0], (2,))
    with dask.config.set(scheduler="synchronous"):
        _close(scores.compute(), ref.extras["factor_scores"])
    _close(factor_scores(ref, with_missing), ref.extras["factor_scores"])
    with pytest.raises(DataError, match="X must have 6 features"):
        factor_scores(ref, with_missing[:, :5])


def test_dask_bad_input_raises_data_error(complete, with_missing):
    bad = complete.copy()
    bad[63, 4] = np.inf
    constant = complete.copy()
    constant[:, 3] = 2.5
    gone = with_missing.copy()
    gone[:, 5] = np.nan
    opts = dict(method="em", max_iter=5, warn=False)
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(DataError, match=r"row chunk 1 \(input rows 60–119.*must be finite; row 3 column 4"):
            latentfs.fit(FactorAnalysis(2), da.from_array(bad, chunks=(60, -1)), **opts)
        with pytest.raises(DataError, match=r"one chunk; got 2 column chunks.*rechunk"):
            latentfs.fit(FactorAnalysis(2), da.from_array(complete, chunks=(60, 3)), **opts)
        with pytest.raises(DataError, match=r"1 constant \(zero-variance\) column\(s\) \(columns \[3\]\)"):
            latentfs.fit(FactorAnalysis(2), da.from_array(constant, chunks=(60, -1)), **opts)
        with pytest.raises(DataError, match=r"columns that are entirely missing \(columns \[5\]\)"):
            latentfs.fit(FactorAnalysis(2), da.from_array(gone, chunks=(60, -1)), **opts)
        with pytest.raises(DataError, match=r"n_components must be"):
            latentfs.fit(FactorAnalysis(6), da.from_array(complete, chunks=(60, -1)), **opts)
        with pytest.raises(DataError, match=r"singular covariance matrix.*regularization"):
            latentfs.fit(FactorAnalysis(1), da.from_array(complete[:, [0, 1, 1]], chunks=(60, -1)), **opts)


def test_dask_fit_never_gathers_the_array(monkeypatch, with_missing):
    # np.asarray(X) on a dask array computes every chunk into the driver, as validating X in memory did before
    # the sharded engine: it must never happen (the tasks see only their own chunk)
    def refuse(self, *args, **kwargs):
        raise AssertionError("the whole dask array was gathered into the driver")

    opts = dict(method="em", seed=0, max_iter=6, tol=0.0, warn=False)
    ref = latentfs.fit(FactorAnalysis(2), with_missing, **opts)
    X = da.from_array(with_missing, chunks=(60, -1))
    monkeypatch.setattr(da.Array, "__array__", refuse)
    with pytest.raises(AssertionError, match="gathered"):
        np.asarray(X)
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(FactorAnalysis(2), X, **opts)
    _assert_same(got, ref)

@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, silence_logs=50,
            dashboard_address=":0",  # any free port: None still tries 8787, and warns when another cluster holds it
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def test_dask_local_cluster_processes_equals_in_memory(with_missing, client):
    opts = dict(method="em", seed=4, max_iter=6, tol=0.0, warn=False)
    ref = latentfs.fit(FactorAnalysis(2), with_missing, **opts)
    got = latentfs.fit(FactorAnalysis(2), da.from_array(with_missing, chunks=(60, -1)), **opts)
    _assert_same(got, ref)


@pytest.mark.parametrize(
    ("data", "options"),
    [
        ("complete", dict(n_init=2)),  # the E-step on the moments: one summary of the one shard, unpooled
        ("complete", dict(use_moments=False, acceleration="none")),  # the per-shard E-step every step
        ("with_missing", dict(n_init=2)),  # the per-shard E-step, and the pca start's mean-imputed covariance pass
    ],
)
def test_dask_of_one_chunk_is_the_in_memory_fit_exactly(request, data, options):
    # memory and dask run the same shard functions (prepare, summarise, E-step); a dask array of one chunk is one
    # shard, whose summary and statistics are used as they are, so the fits agree to the last bit
    X = request.getfixturevalue(data)
    opts = dict(method="em", seed=2, max_iter=6, tol=0.0, warn=False, **options)
    ref = latentfs.fit(FactorAnalysis(2), X, **opts)
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(FactorAnalysis(2), da.from_array(X, chunks=(X.shape[0], -1)), **opts)
    assert got.diagnostics["shards"] == 1
    np.testing.assert_array_equal(got.trace, ref.trace)
    for site in ("loadings", "noise_variance", "mean"):
        np.testing.assert_array_equal(got.mean(site), ref.mean(site))
    for key in ("restart_objectives", "n_patterns", "missing_fraction"):
        np.testing.assert_array_equal(got.diagnostics[key], ref.diagnostics[key])
    # the final log-likelihood in memory is the sum of the per-row values it also reports (a row-level output)
    np.testing.assert_allclose(got.diagnostics["log_likelihood"], ref.diagnostics["log_likelihood"], rtol=1e-14)


def test_pooled_summaries_equal_the_summary_of_the_whole(complete, with_missing):
    import torch

    from latentfs.inference.factor.data import pool, prepare_shard, summarise

    for X in (complete, with_missing, np.vstack([complete[:100], with_missing[100:]])):
        whole = summarise(prepare_shard(X, None, torch.float64, "cpu", True))
        assert pool([whole]) is whole  # one shard's summary is used as it is
        parts = [summarise(prepare_shard(X[lo:lo + 60], None, torch.float64, "cpu", True)) for lo in (0, 60, 120, 180)]
        total = pool(parts)
        assert total.n == whole.n
        np.testing.assert_array_equal(total.count.numpy(), whole.count.numpy())
        np.testing.assert_array_equal(total.patterns.numpy(), whole.patterns.numpy())
        complete = not np.isnan(X).any()
        keys = ["sum_squares", "mean", "obs_var", "low", "high"] + (["col_mean", "col_cov"] if complete else ["filled_var"])
        for key in keys:
            np.testing.assert_allclose(np.asarray(getattr(total, key)), np.asarray(getattr(whole, key)), rtol=1e-12,
                                       atol=1e-12, err_msg=key)
        assert complete or (total.col_cov is None and whole.col_cov is None)  # moments only of complete data
