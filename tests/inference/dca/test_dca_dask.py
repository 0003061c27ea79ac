"""DCA VB on a dask array: one E-step task per row chunk, statistics reduced on the driver (DESIGN contract 8).

The sharded fit must equal the in-memory fit for the same seed (Θ's start depends on J and the token total
only; the shards change nothing but the order of two sums), on dask's synchronous scheduler and on a
distributed LocalCluster of two worker processes.
"""

import sys

import dask  # the latentfs[dask] extra: installed wherever the tests run (no skip)
import dask.array as da
import distributed
import numpy as np
import pytest
import scipy.sparse as sp

import latentfs
from latentfs.core.data import DataError, DataWarning
from latentfs.core.shards import require_dask
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

RTOL = 1e-6  # summation order only: observed differences are ~1e-13
OPTS = dict(method="vb", seed=3, max_iter=25, tol=0.0, warn=False, num_ll_draws=0)


@pytest.fixture(scope="module")
def corpus():
    return sp.csr_matrix(DirichletDCA(4, alpha=0.3).simulate(n_documents=230, n_features=40, doc_length=30, seed=1)[
        "counts"
    ])


def _concentration(post):
    spec = post.fitted_params("topic_word")
    return spec.get("concentration", spec.get("value"))


def _max_rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def _assert_same(got, ref):
    assert _max_rel(_concentration(got), _concentration(ref)) < RTOL
    # γ is learned from cycle 20 on by default (OPTS runs 25), in the driver for dask input
    assert got.hyperparameters.get("learned") == ref.hyperparameters.get("learned")
    assert _max_rel(got.hyperparameters["gamma"], ref.hyperparameters["gamma"]) < RTOL
    if "gamma_trace" in ref.extras:
        assert _max_rel(got.extras["gamma_trace"], ref.extras["gamma_trace"]) < RTOL
    assert got.trace.shape == ref.trace.shape
    assert _max_rel(got.trace, ref.trace) < RTOL
    assert _max_rel(got.extras["bound_trace"], ref.extras["bound_trace"]) < RTOL
    site = "doc_topic" if "doc_topic" in ref.sites else "doc_scores"
    assert _max_rel(got.fitted_params(site)["concentration"], ref.fitted_params(site)["concentration"]) < RTOL


@pytest.mark.parametrize(
    ("model", "theta_update", "doc_restart", "sparse_chunks"),
    [
        (DirichletDCA(4), "chapter", True, True),
        (DirichletDCA(4), "full", True, False),
        (DirichletDCA(4), "map", False, True),
        (GammaPoissonDCA(4), "chapter", False, True),
    ],
)
def test_dask_synchronous_equals_in_memory(corpus, model, theta_update, doc_restart, sparse_chunks):
    ref = latentfs.fit(model, corpus, theta_update=theta_update, doc_restart=doc_restart, **OPTS)
    source = corpus if sparse_chunks else corpus.toarray()
    X = da.from_array(source, chunks=(60, -1), asarray=False)  # 4 shards, the last one short
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(model, X, theta_update=theta_update, doc_restart=doc_restart, **OPTS)
    assert got.diagnostics["shards"] == 4
    _assert_same(got, ref)


@pytest.mark.parametrize(
    ("model", "options"),
    [
        (DirichletDCA(4), {}),
        (GammaPoissonDCA(3), {"doc_restart": False}),
        (DirichletDCA(3), {"theta_update": "full", "learn_gamma": True, "gamma_starts": (0.05, 0.5)}),
    ],
)
def test_dask_one_chunk_is_the_in_memory_fit_bit_for_bit(corpus, model, options):
    """One row chunk is one shard: the dask fit runs the in-memory fit's per-shard E-step on the same documents, so
    every number of the result is identical (only the objective's sum differs in float32: host floats on dask)."""
    ref = latentfs.fit(model, corpus, **options, **OPTS)
    X = da.from_array(corpus, chunks=(corpus.shape[0], -1), asarray=False)
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(model, X, **options, **OPTS)
    assert got.diagnostics["shards"] == 1
    np.testing.assert_array_equal(got.trace, ref.trace)
    np.testing.assert_array_equal(got.extras["bound_trace"], ref.extras["bound_trace"])
    for site in ref.sites:
        for key, value in ref.fitted_params(site).items():
            if key != "family":
                np.testing.assert_array_equal(got.fitted_params(site)[key], value)
    assert got.hyperparameters["gamma"] == ref.hyperparameters["gamma"]
    for name in ("gamma_trace", "component_counts"):
        if name in ref.extras:
            np.testing.assert_array_equal(got.extras[name], ref.extras[name])


def test_dask_threads_without_persist_equals_in_memory(corpus):
    ref = latentfs.fit(DirichletDCA(3), corpus, **OPTS)
    X = da.from_array(corpus, chunks=(100, -1), asarray=False)
    with dask.config.set(scheduler="threads", num_workers=1):
        got = latentfs.fit(DirichletDCA(3), X, persist=False, **OPTS)
    _assert_same(got, ref)


def test_dask_local_cluster_processes_equals_in_memory(corpus):
    ref = latentfs.fit(DirichletDCA(4), corpus, **OPTS)
    X = da.from_array(corpus, chunks=(60, -1), asarray=False)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
        ) as cluster,
        distributed.Client(cluster),
    ):
        got = latentfs.fit(DirichletDCA(4), X, **OPTS)
    _assert_same(got, ref)


def test_dask_drops_empty_documents_like_in_memory(corpus):
    dense = corpus.toarray()
    dense[[5, 130]] = 0
    with pytest.warns(DataWarning, match="dropped 2 empty"):
        ref = latentfs.fit(DirichletDCA(3), dense, empty_documents="drop", **OPTS)
    X = da.from_array(dense, chunks=(60, -1))
    with dask.config.set(scheduler="synchronous"), pytest.warns(DataWarning, match=r"dropped 2 empty.*rows 5, 130"):
        got = latentfs.fit(DirichletDCA(3), X, empty_documents="drop", **OPTS)
    np.testing.assert_array_equal(got.extras["kept_documents"], ref.extras["kept_documents"])
    assert got.coords["document"] == ref.coords["document"]
    _assert_same(got, ref)


def test_dask_bad_input_raises_data_error(corpus):
    dense = corpus.toarray().astype(float)
    dense[70, 3] = -1.0
    X = da.from_array(dense, chunks=(60, -1))
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(DataError, match=r"row chunk 1 \(input rows 60–119.*non-negative integer counts; row 10"):
            latentfs.fit(DirichletDCA(3), X, **OPTS)
        with pytest.raises(DataError, match=r"one chunk; got 2 column chunks.*rechunk"):
            latentfs.fit(DirichletDCA(3), da.from_array(corpus.toarray(), chunks=(60, 20)), **OPTS)
        with pytest.raises(DataError, match="learn_alpha/learn_beta are not available for a dask array"):
            latentfs.fit(DirichletDCA(3), da.from_array(corpus, chunks=(60, -1), asarray=False), learn_alpha=True,
                         **OPTS)


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(DataError, match=r'pip install "latentfs\[dask\]"'):
        require_dask()
