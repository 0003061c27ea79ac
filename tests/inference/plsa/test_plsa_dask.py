"""PLSA EM and tempered EM on a dask array: one task per row chunk, P(z|d) kept with its chunk (issue 16).

The sharded fit must equal the in-memory fit for the same seed (P(x|z) starts from the same draw, the
iterates are the same up to the order of sums; with one row chunk bit for bit: both run one per-shard step), with sparse and dense chunks, with early stopping and
tempered EM on in-memory validation documents, on dask's synchronous scheduler and on a distributed
LocalCluster of two worker processes.
"""

import dask  # the latentfs[dask] extra: installed wherever the tests run (no skip)
import dask.array as da
import distributed
import numpy as np
import pytest
import scipy.sparse as sp

import latentfs
from latentfs.core.data import DataError
from latentfs.models.plsa import PLSA

RTOL = 1e-6  # summation order only: observed differences are ~1e-13


@pytest.fixture(scope="module")
def simulated():
    return sp.csr_matrix(PLSA(3).simulate(190, 30, doc_length=40, seed=0)["counts"])


@pytest.fixture(scope="module")
def corpus(simulated):
    return simulated[:170]


@pytest.fixture(scope="module")
def valid(simulated):
    return simulated[170:]  # held-out documents of the same aspects


def _close(got, ref):
    got, ref = np.asarray(got, dtype=float), np.asarray(ref, dtype=float)
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=1e-12 * float(np.abs(ref).max()))


def _assert_same(got, ref):
    assert got.trace.shape == ref.trace.shape
    _close(got.trace, ref.trace)
    _close(got.mean("topic_word"), ref.mean("topic_word"))
    _close(got.mean("doc_topic"), ref.mean("doc_topic"))
    _close(got.log_likelihood, ref.log_likelihood)
    for key in ("log_likelihood", "conditional_log_likelihood", "train_perplexity", "restart_scores"):
        _close(got.diagnostics[key], ref.diagnostics[key])
    assert got.diagnostics["best_restart"] == ref.diagnostics["best_restart"]
    for key in ("doc_prior", "doc_lengths", "component_counts"):
        _close(got.extras[key], ref.extras[key])
    np.testing.assert_array_equal(got.extras["kept_documents"], ref.extras["kept_documents"])
    for key in ("validation_trace", "beta_trace"):
        assert (key in got.extras) == (key in ref.extras)
        if key in ref.extras:
            _close(got.extras[key], ref.extras[key])
    for key in ("best_iter", "stopped_early", "final_beta"):
        assert got.diagnostics.get(key) == ref.diagnostics.get(key)


@pytest.mark.parametrize(
    ("method", "validation", "sparse_chunks"),
    [
        ("em", False, True),
        ("em", False, False),
        ("em", True, True),  # early stopping on in-memory validation documents
        ("tem", True, False),  # tempered EM: β lowered on the driver, the shards' E-step tempered
    ],
)
def test_dask_synchronous_equals_in_memory(corpus, valid, method, validation, sparse_chunks):
    # tol=0: a fixed number of steps (the log-likelihood still changes by ≥ 1e-9 relative at step 40)
    opts = dict(method=method, seed=2, max_iter=40, tol=0.0, warn=False, n_init=2)
    if validation:
        opts.update(X_valid=valid, patience=3, early_stopping=True)
    ref = latentfs.fit(PLSA(3), corpus, **opts)
    source = corpus if sparse_chunks else corpus.toarray()
    X = da.from_array(source, chunks=(50, -1), asarray=False)  # 4 shards, the last one short
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(PLSA(3), X, **opts)
    assert got.diagnostics["shards"] == 4
    _assert_same(got, ref)
    if validation:
        # the kept iterate is an earlier one than the last: each shard's P(z|d) of that iterate was kept
        assert 0 < got.diagnostics["best_iter"] < got.trace.shape[1] - 1
    if method == "tem":
        assert got.diagnostics["final_beta"] < 1.0  # tempering did happen


@pytest.mark.parametrize(
    ("method", "dtype", "sparse_chunks"),
    [("em", "float64", True), ("em", "float32", False), ("tem", "float64", False)],
)
def test_dask_one_chunk_is_the_in_memory_fit_bit_for_bit(corpus, valid, method, dtype, sparse_chunks):
    # memory and dask run the same per-shard step: with one row chunk nothing is summed over shards, so every
    # number is the in-memory fit's own (float32 included, where a different summation would show at ~1e-8)
    opts = dict(method=method, seed=4, max_iter=25, tol=0.0, warn=False, n_init=2, dtype=dtype)
    if method == "tem":
        opts.update(X_valid=valid, patience=2)
    ref = latentfs.fit(PLSA(3), corpus, **opts)
    source = corpus if sparse_chunks else corpus.toarray()
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(PLSA(3), da.from_array(source, chunks=(-1, -1), asarray=False), **opts)
    assert got.diagnostics["shards"] == 1 and "shards" not in ref.diagnostics
    pairs = [(got.trace, ref.trace), (got.log_likelihood, ref.log_likelihood)]
    pairs += [(got.mean(site), ref.mean(site)) for site in ("topic_word", "doc_topic")]
    assert set(got.extras) == set(ref.extras)
    pairs += [(got.extras[key], ref.extras[key]) for key in ref.extras]
    for key, value in ref.diagnostics.items():
        if isinstance(value, (bool, int, float, list)):
            pairs.append((np.asarray(got.diagnostics[key]), np.asarray(value)))
    assert len(pairs) > 12
    for a, b in pairs:
        np.testing.assert_array_equal(a, b)
    if method == "tem":
        assert got.diagnostics["final_beta"] < 1.0  # the tempered E-step ran on the shard


def test_dask_threads_without_persist_equals_in_memory(corpus):
    opts = dict(method="em", seed=1, max_iter=20, tol=0.0, warn=False)
    ref = latentfs.fit(PLSA(3), corpus, **opts)
    X = da.from_array(corpus, chunks=(100, -1), asarray=False)
    with dask.config.set(scheduler="threads", num_workers=1):
        got = latentfs.fit(PLSA(3), X, persist=False, **opts)
    _assert_same(got, ref)


def test_dask_bad_input_and_unsupported_options_raise_data_error(corpus, valid):
    negative = corpus.toarray().astype(float)
    negative[57, 3] = -1.0
    empty = corpus.toarray()
    empty[120] = 0
    X = da.from_array(corpus, chunks=(50, -1), asarray=False)
    opts = dict(max_iter=3, warn=False)
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(DataError, match=r"row chunk 1 \(input rows 50–99.*non-negative integer counts; row 7"):
            latentfs.fit(PLSA(3), da.from_array(negative, chunks=(50, -1)), **opts)
        with pytest.raises(DataError, match=r"row chunk 2 \(input rows 100–149.*empty"):
            latentfs.fit(PLSA(3), da.from_array(empty, chunks=(50, -1)), **opts)
        with pytest.raises(DataError, match=r"one chunk; got 2 column chunks.*rechunk"):
            latentfs.fit(PLSA(3), da.from_array(corpus.toarray(), chunks=(50, 15)), **opts)
        with pytest.raises(DataError, match=r"validation_fraction is not available for a dask array X.*X_valid="):
            latentfs.fit(PLSA(3), X, method="tem", validation_fraction=0.2, **opts)
        with pytest.raises(DataError, match=r"X_valid must be an in-memory count matrix.*compute"):
            latentfs.fit(PLSA(3), X, early_stopping=True, X_valid=da.from_array(valid, chunks=(10, -1)), **opts)
        with pytest.raises(DataError, match=r"init is not available for a dask array X"):
            latentfs.fit(PLSA(3), X, init=(np.full((170, 3), 1 / 3), np.full((3, 30), 1 / 30)), **opts)
        with pytest.raises(DataError, match=r"persist must be True or False; got 'yes'"):
            latentfs.fit(PLSA(3), X, persist="yes", **opts)
        with pytest.raises(DataError, match=r"need validation documents; pass X_valid"):
            latentfs.fit(PLSA(3), X, method="tem", **opts)
        with pytest.raises(DataError, match=r"n_components must be at most 30"):
            latentfs.fit(PLSA(31), X, **opts)


def test_dask_fit_never_gathers_the_array(monkeypatch, corpus):
    # np.asarray(X) on a dask array computes every chunk into the driver, as validating X in memory did before
    # the sharded engine: it must never happen (the tasks see only their own chunk)
    def refuse(self, *args, **kwargs):
        raise AssertionError("the whole dask array was gathered into the driver")

    opts = dict(method="em", seed=0, max_iter=6, tol=0.0, warn=False)
    ref = latentfs.fit(PLSA(3), corpus, **opts)
    X = da.from_array(corpus, chunks=(60, -1), asarray=False)
    monkeypatch.setattr(da.Array, "__array__", refuse)
    with pytest.raises(AssertionError, match="gathered"):
        np.asarray(X)
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(PLSA(3), X, **opts)
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


def test_dask_local_cluster_processes_equals_in_memory(corpus, valid, client):
    opts = dict(method="tem", seed=3, max_iter=30, tol=0.0, warn=False, X_valid=valid, patience=3)
    ref = latentfs.fit(PLSA(3), corpus, **opts)
    got = latentfs.fit(PLSA(3), da.from_array(corpus, chunks=(50, -1), asarray=False), **opts)
    _assert_same(got, ref)


def test_dask_score_weighs_blocks_by_the_tokens_score_averages_over():
    """PLSA's score leaves out held-out tokens of words unseen in training; a dask array's score must weigh its
    blocks by the tokens each block's score averaged over (before: every held-out token, unseen words included)."""
    import dask
    import dask.array as da

    from latentfs.evaluate.heldout import split_documents

    rng = np.random.default_rng(0)
    X = rng.poisson(2.0, size=(150, 30))
    train = X[:100].copy()
    train[:, :6] = 0  # six words never seen in training
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short fit: its convergence is not what this test is about
        est = latentfs.PLSAEstimator(3, seed=0, max_iter=30).fit(train)
    new = X[100:].copy()
    new[:20, :6] *= 8  # the first block holds most of the unseen words' tokens
    blocks = [new[:25], new[25:]]
    scores = [est.score(b) for b in blocks]
    weights = [float(split_documents(b, 0.5, seed=0)[1][:, 6:].sum()) for b in blocks]
    expected = sum(s * w for s, w in zip(scores, weights, strict=True)) / sum(weights)
    with dask.config.set(scheduler="synchronous"):
        got = est.score(da.from_array(new, chunks=(25, -1)))
    assert abs(got - expected) < 1e-12
