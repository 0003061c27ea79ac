"""Mixture EM on a dask array: one E-step task per row chunk, the statistics summed next to the shards (issues 16, 30).

The sharded fit must equal the in-memory fit with the same options (the same ``init_rows`` start sample
and seed): the shards change only the order of the sums, so every figure agrees to ~1e-12; the tests allow
1e-6 relative. A dask array of one chunk runs the in-memory fit's own per-shard E-step on the same rows, so its
fit is the in-memory fit bit for bit. Each family runs on dask's synchronous scheduler; one fit runs on a distributed LocalCluster
of two worker processes.
"""

import dask  # the latentfs[dask] extra: installed wherever the tests run (no skip)
import dask.array as da
import distributed
import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.mixture.em import default_init_rows
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

RTOL = 1e-6  # summation order only: observed differences are below 1e-11
OPTS = dict(method="em", seed=3, init_rows=300, n_init=3, tol=1e-9, max_iter=200, warn=False)


@pytest.fixture(scope="module", autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture(scope="module")
def gaussian_data():
    X = GaussianMixture(3, mean_precision=0.05).simulate(700, 4, seed=1)["data"]
    return np.asarray(X, dtype=np.float64)


@pytest.fixture(scope="module")
def class_data():
    Y = np.asarray(LatentClass(3, n_levels=3).simulate(650, 6, seed=4)["items"], dtype=np.float64)
    Y[3, 2] = np.nan
    Y[400, 0] = np.nan
    return Y


def _max_rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def _assert_same(got, ref, sites):
    assert got.trace.shape == ref.trace.shape
    assert _max_rel(got.trace, ref.trace) < RTOL
    for site in sites:
        assert _max_rel(got.mean(site), ref.mean(site)) < RTOL, site
    for key in ("log_likelihood", "entropy", "bic"):
        assert _max_rel(got.diagnostics[key], ref.diagnostics[key]) < RTOL, key
    assert got.diagnostics["restart_objectives"] == pytest.approx(
        ref.diagnostics["restart_objectives"], rel=RTOL
    )
    assert got.diagnostics["n_iter"] == ref.diagnostics["n_iter"]


@pytest.mark.parametrize(
    ("covariance_type", "e_step"),
    [("full", "auto"), ("full", "cholesky"), ("tied", "auto"), ("diag", "auto"), ("spherical", "auto"),
     ("tied_diag", "auto")],
)
def test_gaussian_dask_equals_memory(gaussian_data, covariance_type, e_step):
    model = GaussianMixture(3, covariance_type=covariance_type)
    ref = latentfs.fit(model, gaussian_data, e_step=e_step, **OPTS)
    got = latentfs.fit(model, da.from_array(gaussian_data, chunks=(160, -1)), e_step=e_step, **OPTS)
    _assert_same(got, ref, ("weights", "means", "covariance"))
    assert got.diagnostics["shards"] == 5


@pytest.mark.parametrize("case", ["full", "diag_missing", "latent_class"])
def test_one_chunk_is_the_in_memory_fit_bit_for_bit(gaussian_data, class_data, case):
    """Memory and dask run the same per-shard functions (E-step statistics, log-likelihood, entropy, per-row
    outputs, start sample): with one chunk there is nothing to add up, so every number is the same."""
    X = class_data if case == "latent_class" else gaussian_data.copy()
    if case == "diag_missing":
        X[5, 1] = X[333, 3] = np.nan
    model = {"full": GaussianMixture(3), "diag_missing": GaussianMixture(3, covariance_type="diag"),
             "latent_class": LatentClass(3, n_levels=3)}[case]
    ref = latentfs.fit(model, X, **OPTS)
    got = latentfs.fit(model, da.from_array(X, chunks=(X.shape[0], -1)), **OPTS)
    assert got.diagnostics["shards"] == 1
    for site in ref.sites:
        assert np.array_equal(got.mean(site), ref.mean(site)), site
    assert np.array_equal(got.trace, ref.trace)
    assert got.diagnostics["restart_objectives"] == ref.diagnostics["restart_objectives"]
    for key in ("log_likelihood", "entropy", "bic", "icl"):
        assert got.diagnostics[key] == ref.diagnostics[key], key
    assert np.array_equal(got.extras["responsibilities"].compute(), ref.extras["responsibilities"])
    assert np.array_equal(got.log_likelihood, ref.log_likelihood)


def test_latent_profile_dask_with_missing(gaussian_data):
    X = gaussian_data.copy()
    X[5, 1] = X[333, 3] = np.nan
    ref = latentfs.fit(LatentProfile(3), X, **OPTS)
    got = latentfs.fit(LatentProfile(3), da.from_array(X, chunks=(230, -1)), **OPTS)
    _assert_same(got, ref, ("weights", "means", "covariance"))


def test_latent_class_dask_equals_memory(class_data):
    model = LatentClass(3, n_levels=3)
    ref = latentfs.fit(model, class_data, **OPTS)
    got = latentfs.fit(model, da.from_array(class_data, chunks=(200, -1)), **OPTS)
    _assert_same(got, ref, ("weights", "item_probs"))


def test_default_start_and_per_row_outputs(gaussian_data):
    """With no init_rows a dask fit starts from 2·max(1000, 100 K) sampled rows (here: all 700 rows);
    the responsibilities stay a lazy dask array, one block per shard."""
    model = GaussianMixture(3)
    Xd = da.from_array(gaussian_data, chunks=(300, -1))
    got = latentfs.fit(model, Xd, method="em", seed=0, warn=False)
    ref = latentfs.fit(model, gaussian_data, method="em", seed=0, warn=False, init_rows=default_init_rows(3))
    _assert_same(got, ref, ("weights", "means", "covariance"))
    resp = got.extras["responsibilities"]
    assert isinstance(resp, da.Array) and resp.chunks[0] == Xd.chunks[0]
    assert np.allclose(resp.compute(), ref.extras["responsibilities"], rtol=RTOL, atol=1e-12)
    assert np.allclose(got.log_likelihood, ref.log_likelihood, rtol=RTOL, atol=0)


def test_given_parameters_start(gaussian_data):
    model = GaussianMixture(2, covariance_type="diag")
    init = {"weights": [0.5, 0.5], "means": gaussian_data[[0, 1]], "covariance": np.ones((2, 4))}
    opts = dict(method="em", init=init, tol=1e-9, warn=False)
    ref = latentfs.fit(model, gaussian_data, **opts)
    got = latentfs.fit(model, da.from_array(gaussian_data, chunks=(100, -1)), **opts)
    _assert_same(got, ref, ("weights", "means", "covariance"))


def test_bad_chunking_and_bad_shards(gaussian_data, class_data):
    model = GaussianMixture(2)
    with pytest.raises(DataError, match="one chunk"):
        latentfs.fit(model, da.from_array(gaussian_data, chunks=(100, 2)), method="em")
    with_nan = gaussian_data.copy()
    with_nan[250, 1] = np.nan
    with pytest.raises(DataError, match=r"row chunk 2 \(input rows 200–299.*row 50 column 1 is NaN"):
        latentfs.fit(model, da.from_array(with_nan, chunks=(100, -1)), method="em")
    constant = gaussian_data.copy()
    constant[:, 2] = 1.5
    with pytest.raises(DataError, match="'x2' is constant"):
        latentfs.fit(model, da.from_array(constant, chunks=(100, -1)), method="em")
    bad_codes = class_data.copy()
    bad_codes[610, 4] = 7
    with pytest.raises(DataError, match=r"row chunk 3 .*item codes.*row 10 column 4 holds 7"):
        latentfs.fit(LatentClass(3, n_levels=3), da.from_array(bad_codes, chunks=(200, -1)), method="em")
    with pytest.raises(DataError, match="responsibilities.*not available for a dask array"):
        latentfs.fit(model, da.from_array(gaussian_data, chunks=(100, -1)), method="em",
                     init={"responsibilities": np.full((700, 2), 0.5)})
    with pytest.raises(DataError, match="init_rows"):
        latentfs.fit(model, gaussian_data, method="em", init_rows=1)


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc:
        with distributed.Client(lc) as client:
            yield client


def test_local_cluster_equals_memory(cluster, gaussian_data):
    model = GaussianMixture(3, covariance_type="full")
    opts = {**OPTS, "n_init": 1, "tol": 1e-6}  # one start: each EM iteration is a round trip to the workers
    ref = latentfs.fit(model, gaussian_data, **opts)
    with dask.config.set(scheduler=cluster):  # the module's synchronous default is lifted here
        got = latentfs.fit(model, da.from_array(gaussian_data, chunks=(160, -1)), **opts)
        resp = got.extras["responsibilities"].compute()
    _assert_same(got, ref, ("weights", "means", "covariance"))
    assert np.allclose(resp, ref.extras["responsibilities"], rtol=RTOL, atol=1e-12)
