"""New data as a dask array (issue 34, item 5): ``transform``, ``predict``, ``predict_proba``, ``score_samples`` and
``score`` of a fitted estimator, and of a Posterior, run block by block (:mod:`latentfs.core.blockwise`).

Each method returns a lazy dask array with the input's row chunks (columns in one chunk) whose blocks are the
in-memory method on those rows, so the result equals the in-memory call on the whole input:

* labels exactly; every float output to 1e-12 relative (1e-14 absolute): each row is computed alone, but the
  matrix kernels (BLAS triangular solves, torch's batched products and the HMM's padded sequences) may round a
  row differently in a batch of another size (measured: 0 to 4e-15 relative). The DCA and PLSA fold-ins are
  compared to 1e-6 absolute: a fold-in that stops when a whole batch has converged runs a document for as many
  steps as its batch's slowest (measured: 3e-8 for PLSA; 0 for DCA, whose fold-in stops per document);
* ``score`` (a mean) to 1e-12 relative: it is assembled from per-block sums, so only the summation order differs.
  The topic models' score draws each document's held-out half at random (seed 0) per block, so it equals the
  token-weighted mean of the blocks' in-memory scores (checked to 1e-12 with weights counted from the split
  itself) and lies within the split's sampling noise of the in-memory score (fixed seeds, no false alarms).

The main comparisons run on a distributed LocalCluster (two workers of one thread, in this process); one runs on
worker processes, so the estimator travels to them pickled.
"""

import math
import warnings

import dask
import dask.array as da
import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError

import latentfs
from latentfs.core.blockwise import sequence_chunks
from latentfs.core.data import DataError
from latentfs.core.shards import ShardError
from latentfs.evaluate.heldout import split_documents
from latentfs.models import GaussianHMM
from latentfs.models.dca import DirichletDCA
from latentfs.models.mixture import GaussianMixture, LatentClass

UNEVEN = (70, 13, 100, 1, 116)  # 300 rows in chunks of unequal sizes, one of a single row
METHODS = ("transform", "predict", "predict_proba", "score_samples")


@pytest.fixture(scope="module")
def cluster():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0", silence_logs=50
        ) as c,
        distributed.Client(c) as client,
    ):
        yield client


def _continuous():
    return GaussianMixture(3).simulate(300, 4, seed=0)["data"]


def _counts(n=300):
    return DirichletDCA(3, alpha=0.3).simulate(n_documents=n, n_features=30, doc_length=40, seed=1)["counts"]


def _fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short fits: convergence warnings are not what is tested
        return est.fit(X)


@pytest.fixture(scope="module")
def fa():
    return _fit(latentfs.FactorAnalyzer(2, seed=0), _continuous())


@pytest.fixture(scope="module")
def gmm():
    return _fit(latentfs.GaussianMixtureClusterer(3, seed=0), _continuous())


@pytest.fixture(scope="module")
def dca():
    return _fit(latentfs.DCA(3, seed=0, max_iter=30), _counts())


def _check_lazy_equal(est, X, Xd):
    """Every new-data method of ``est`` on ``Xd``: a dask array with Xd's row chunks, equal to the in-memory call."""
    for name in METHODS:
        if not hasattr(est, name):
            continue
        lazy = getattr(est, name)(Xd)
        want = getattr(est, name)(X)
        assert isinstance(lazy, da.Array), name
        assert lazy.chunks[0] == Xd.chunks[0], name
        assert lazy.shape == want.shape and lazy.dtype == want.dtype, name
        if lazy.ndim == 2:
            assert len(lazy.chunks[1]) == 1, name
        got = lazy.compute()
        assert got.dtype == want.dtype, name
        if got.dtype.kind in "iu":
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, err_msg=name)
    assert math.isclose(est.score(Xd), est.score(X), rel_tol=1e-12)


@pytest.mark.parametrize("which", ["fa", "gmm"])
def test_fa_and_gaussian_mixture_on_a_local_cluster_equal_in_memory(cluster, which, request):
    est = request.getfixturevalue(which)
    X = _continuous()
    _check_lazy_equal(est, X, da.from_array(X, chunks=(UNEVEN, -1)))


def test_dca_on_a_local_cluster_with_sparse_chunks(cluster, dca):
    X = sp.csr_matrix(_counts(400)[300:])  # 100 new documents
    Xd = da.from_array(X, chunks=(37, -1), asarray=False)
    assert isinstance(Xd.blocks[0].compute(), sp.csr_matrix)  # the blocks are sparse
    lazy = dca.transform(Xd)
    assert isinstance(lazy, da.Array) and lazy.chunks == ((37, 37, 26), (3,))
    np.testing.assert_allclose(lazy.compute(), dca.transform(X), rtol=0, atol=1e-6)
    _check_dca_score(dca, X, Xd)


def _check_dca_score(est, X, Xd):
    """The dask score is the mean over held-out tokens of the blocks' in-memory scores; the weights are counted
    here from the split itself (seed 0, half of each non-empty document), not from the estimator."""
    values, weights = [], []
    for i in range(Xd.numblocks[0]):
        block = sp.csr_matrix(Xd.blocks[i].compute())
        kept = block[np.asarray(block.sum(1)).ravel() > 0]
        if kept.shape[0] == 0:
            continue
        held = split_documents(kept, 0.5, seed=0)[1]
        if held.sum() == 0:
            continue
        weights.append(float(held.sum()))
        values.append(est.score(block) * weights[-1])
    want = math.fsum(values) / math.fsum(weights)
    got = est.score(Xd)
    assert math.isclose(got, want, rel_tol=1e-12)
    # another random half per block: within sampling noise of the in-memory split (measured 0.01 nats/token here)
    assert abs(got - est.score(X)) < 0.05


def test_a_ten_row_slice_and_one_row_chunks(cluster, fa, gmm, dca):
    X = _continuous()
    Xd = da.from_array(X, chunks=(64, -1))[:10]
    for est in (fa, gmm):
        _check_lazy_equal(est, X[:10], Xd)
    ones = da.from_array(X[:5], chunks=(1, -1))
    _check_lazy_equal(gmm, X[:5], ones)
    C = _counts()[:10]
    np.testing.assert_allclose(dca.transform(da.from_array(C, chunks=(4, -1))).compute(), dca.transform(C), atol=1e-6)


def test_nothing_is_computed_until_asked(fa, gmm):
    computed = []

    def load(block):
        computed.append(block.shape[0])
        return block

    X = _continuous()
    Xd = da.from_array(X, chunks=(100, -1)).map_blocks(load, meta=np.empty((0, 4)))
    outs = [fa.transform(Xd), gmm.predict(Xd), gmm.predict_proba(Xd), gmm.score_samples(Xd)]
    assert computed == []
    with dask.config.set(scheduler="synchronous"):
        assert outs[1].compute().shape == (300,)
    assert computed == [100, 100, 100]  # each block once, block by block


def test_column_chunks_are_joined_row_chunks_kept(fa):
    X = _continuous()
    Xd = da.from_array(X, chunks=(90, 2))
    with dask.config.set(scheduler="synchronous"):
        out = fa.transform(Xd)
        assert out.chunks == ((90, 90, 90, 30), (2,))
        np.testing.assert_allclose(out.compute(), fa.transform(X), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("make, data", [
    (lambda: latentfs.LatentProfileClusterer(2, seed=0), _continuous),
    (lambda: latentfs.LatentClassClusterer(2, n_levels=3, seed=0),
     lambda: LatentClass(2, n_levels=3).simulate(200, 5, seed=0)["items"]),
    (lambda: latentfs.MixtureOfFactorAnalyzersClusterer(2, n_factors=1, seed=0), _continuous),
    (lambda: latentfs.LatentTraitAnalyzer(1, seed=0),
     lambda: (LatentClass(2, n_levels=3).simulate(200, 5, seed=0)["items"] > 0).astype(float)),
], ids=["latent-profile", "latent-class", "mfa", "latent-trait"])
def test_other_families_equal_in_memory(make, data):
    X = data()
    est = _fit(make(), X)
    with dask.config.set(scheduler="synchronous"):
        _check_lazy_equal(est, X, da.from_array(X, chunks=(37, -1)))


def test_plsa_fold_in_and_token_weighted_score():
    X = _counts()
    est = _fit(latentfs.PLSAEstimator(3, seed=0, max_iter=30), X[:200])
    Xd = da.from_array(X[200:], chunks=(33, -1))
    with dask.config.set(scheduler="synchronous"):
        # PLSA's fold-in EM stops when every document of its batch moved less than 1e-8 (or after fold_in_iter
        # steps): a batch's slowest document sets its steps (measured difference 3e-8 here)
        np.testing.assert_allclose(est.transform(Xd).compute(), est.transform(X[200:]), rtol=0, atol=1e-6)
        _check_dca_score(est, X[200:], Xd)


def test_empty_documents_are_dropped_as_in_memory(dca):
    X = _counts(400)[300:].astype(np.float64)
    X[:25] = 0  # the first block holds only empty documents
    X[[40, 90]] = 0
    X[60] = 0
    X[60, 3] = 1  # one token: nothing held out, nothing scored
    Xd = da.from_array(X, chunks=(25, -1))
    with dask.config.set(scheduler="synchronous"):
        assert dca._score_weight(X[:25]) == 0
        rest = da.from_array(X[25:], chunks=(25, -1))
        assert dca.score(Xd) == dca.score(rest)  # the empty block adds nothing
        _check_dca_score(dca, X, Xd)
        # nothing to score at all: the in-memory error, raised the same way
        with pytest.raises(DataError, match="X is empty: shape"):
            dca.score(np.zeros((50, 30)))
        with pytest.raises(DataError, match="X is empty: shape"):
            dca.score(da.zeros((50, 30), chunks=(20, -1)))
        ones = np.zeros((50, 30))
        ones[:, 0] = 1
        with pytest.raises(DataError, match="held_out holds no tokens"):
            dca.score(da.from_array(ones, chunks=(20, -1)))


def _hmm():
    X = GaussianHMM(2).simulate(6, 50, seed=0)["data"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return latentfs.GaussianHMMEstimator(2, seed=0).fit(X, lengths=[50] * 6), X


def test_hmm_blocks_of_whole_sequences_equal_in_memory():
    est, X = _hmm()
    lengths = [30, 70, 50, 50, 40, 60]
    Xd = da.from_array(X, chunks=((100, 140, 60), -1))
    with dask.config.set(scheduler="synchronous"):
        for name in ("transform", "predict", "predict_proba", "score_samples"):
            got = getattr(est, name)(Xd, lengths=lengths)
            assert isinstance(got, da.Array) and got.chunks[0] == (100, 140, 60)
            np.testing.assert_allclose(got.compute(), getattr(est, name)(X, lengths=lengths), rtol=1e-12, atol=1e-14)
        assert math.isclose(est.score(Xd, lengths=lengths), est.score(X, lengths=lengths), rel_tol=1e-12)
        one = da.from_array(X, chunks=(-1, -1))  # one chunk: lengths=None (one sequence) as in memory
        np.testing.assert_array_equal(est.predict(one).compute(), est.predict(X))


def test_hmm_refuses_chunks_that_cut_a_sequence():
    est, X = _hmm()
    Xd = da.from_array(X, chunks=(100, -1))
    with pytest.raises(DataError, match=r"lengths=None makes X one sequence, which predict cannot split into X's 3 row "
                                        r"chunks \(100, 100, 100\).*X.rechunk\(\{0: -1\}\)"):
        est.predict(Xd)
    lengths = [50, 60, 40, 50, 50, 50]
    with pytest.raises(DataError, match=r"chunk boundary at row 100 falls inside a sequence.*sequence_chunks"):
        est.transform(Xd, lengths=lengths)
    with pytest.raises(DataError, match=r"lengths must be positive integers summing to the 300 rows of X; got 2"):
        est.score(Xd, lengths=[100, 100])
    aligned = Xd.rechunk({0: sequence_chunks(lengths, 100)})
    assert aligned.chunks[0] == (50, 100, 100, 50)
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_allclose(est.transform(aligned, lengths=lengths).compute(), est.transform(X, lengths=lengths),
                                   rtol=1e-12, atol=1e-14)


def test_posterior_methods_take_a_dask_array(cluster):
    X = _continuous()
    result = latentfs.fit(GaussianMixture(3), X, method="em", seed=0, warn=False)
    Xd = da.from_array(X, chunks=(UNEVEN, -1))
    for name in ("transform", "predict", "predict_proba"):
        lazy = getattr(result, name)(Xd)
        assert isinstance(lazy, da.Array) and lazy.chunks[0] == UNEVEN
        np.testing.assert_allclose(lazy.compute(), getattr(result, name)(X), rtol=1e-12, atol=1e-14)
    assert math.isclose(result.score(Xd), result.score(X), rel_tol=1e-12)
    dca = latentfs.fit(DirichletDCA(3), _counts(), method="vb", seed=0, max_iter=20, warn=False)
    C = _counts()[:50]
    np.testing.assert_allclose(dca.transform(da.from_array(C, chunks=(20, -1))).compute(), dca.transform(C), atol=1e-6)


def test_worker_processes_receive_the_estimator(gmm):
    X = _continuous()
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
        ) as c,
        distributed.Client(c),
    ):
        Xd = da.from_array(X, chunks=(UNEVEN, -1))
        np.testing.assert_allclose(gmm.predict_proba(Xd).compute(), gmm.predict_proba(X), rtol=1e-12, atol=1e-14)
        assert math.isclose(gmm.score(Xd), gmm.score(X), rel_tol=1e-12)


def test_bad_dask_input_is_refused_clearly(fa, gmm):
    X = _continuous()
    with pytest.raises(DataError, match=r"X has 3 features, but FactorAnalyzer was fitted on 4\. Pass the columns"):
        fa.transform(da.from_array(X[:, :3], chunks=(50, -1)))
    with pytest.raises(DataError, match=r"X must be a 2-D dask array \(rows × features\); got 1 dimension"):
        gmm.predict(da.from_array(X[:, 0], chunks=50))
    with pytest.raises(NotFittedError):
        latentfs.FactorAnalyzer(2).transform(da.from_array(X, chunks=(50, -1)))
    bad = X.copy()
    bad[123, 1] = np.inf
    with (
        dask.config.set(scheduler="synchronous"),
        pytest.raises(ShardError, match=r"in row chunk 2 \(input rows 100–149; row numbers below count from 100\)"),
    ):
        gmm.predict(da.from_array(bad, chunks=(50, -1))).compute()
    named = latentfs.FactorAnalyzer(2, seed=0).set_output(transform="pandas")
    _fit(named, X)
    with pytest.raises(DataError, match=r"set_output\(transform='pandas'\) makes transform return an in-memory table"):
        named.transform(da.from_array(X, chunks=(50, -1)))


def test_unknown_row_chunks_a_boolean_selection(gmm):
    X = _continuous()
    Xd = da.from_array(X, chunks=(50, -1))
    keep = X[:, 0] > 0
    chosen = Xd[Xd[:, 0] > 0]  # row chunk sizes unknown (NaN) until computed
    assert any(c != c for c in chosen.chunks[0])
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_array_equal(gmm.predict(chosen).compute(), gmm.predict(X[keep]))
        assert math.isclose(gmm.score(chosen), gmm.score(X[keep]), rel_tol=1e-12)
        est, S = _hmm()
        unknown = da.from_array(S, chunks=(100, -1))
        unknown = unknown[unknown[:, 0] == unknown[:, 0]]
        with pytest.raises(DataError, match=r"lengths= needs X's row chunk sizes.*X.compute_chunk_sizes\(\)"):
            est.predict(unknown, lengths=[50] * 6)


def test_a_dask_dataframe_matches_columns_by_name(cluster):
    X = _continuous()
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    est = _fit(latentfs.FactorAnalyzer(2, seed=0), frame)
    shuffled = dd.from_pandas(frame[["c", "a", "d", "b"]], npartitions=3)
    lazy = est.transform(shuffled)
    assert isinstance(lazy, da.Array) and len(lazy.chunks[0]) == 3
    np.testing.assert_allclose(lazy.compute(), est.transform(frame), rtol=1e-12, atol=1e-14)
    assert math.isclose(est.score(shuffled), est.score(frame), rel_tol=1e-12)
    message = r"X must have the columns seen in fit \(4 named columns\); it has missing \['d'\] \(1\)"
    with pytest.raises(DataError, match=message):
        est.transform(frame[["a", "b", "c"]])
    with pytest.raises(DataError, match=message):
        est.transform(dd.from_pandas(frame[["a", "b", "c"]], npartitions=2))  # the same error, before any row is read
    result = latentfs.fit(GaussianMixture(3), frame, method="em", seed=0, warn=False)
    named = dd.from_pandas(frame[["d", "c", "b", "a"]], npartitions=2)
    np.testing.assert_allclose(result.predict_proba(named).compute(), result.predict_proba(frame), rtol=1e-12,
                               atol=1e-14)
    with pytest.raises(DataError, match=r"X is a dask Series; pass a 2-D dask DataFrame or array"):
        est.transform(shuffled["a"])


def test_sequence_chunks_groups_whole_sequences():
    assert sequence_chunks([3, 4, 2, 5, 1], 6) == (3, 6, 6)
    assert sequence_chunks([10, 1], 4) == (10, 1)
    assert sum(sequence_chunks([7] * 13, 20)) == 91
    with pytest.raises(DataError, match="rows_per_chunk must be a positive integer; got 0"):
        sequence_chunks([1], 0)


def test_hdd_estimators_predict_block_by_block():
    out = GaussianMixture(3).simulate(300, 4, seed=0)
    X = out["data"]
    y = np.array(["a", "b", "c"])[out["assignment"]]
    Xd = da.from_array(X, chunks=(UNEVEN, -1))
    hddc = _fit(latentfs.HDDC(3, seed=0), X)
    hdda = latentfs.HDDA().fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        for est in (hddc, hdda):
            for name in ("predict", "predict_proba", "predict_log_proba"):
                lazy, want = getattr(est, name)(Xd), getattr(est, name)(X)
                assert lazy.chunks[0] == UNEVEN and lazy.dtype == want.dtype, name
                if want.dtype.kind == "f":
                    np.testing.assert_allclose(lazy.compute(), want, rtol=1e-12, atol=1e-14, err_msg=name)
                else:  # labels: HDDC's integers, HDDA's class names
                    np.testing.assert_array_equal(lazy.compute(), want, err_msg=name)
    with pytest.raises(DataError, match=r"y must be None when X is a dask array: score runs on X's row chunks"):
        hdda.score(Xd, y)


def test_fit_predict_on_a_dask_array_gives_the_lazy_labels():
    X = _continuous()
    Xd = da.from_array(X, chunks=(UNEVEN, -1))
    with dask.config.set(scheduler="synchronous"):
        est = latentfs.GaussianMixtureClusterer(3, seed=0)
        labels = est.fit_predict(Xd)  # a sharded fit keeps no labels_: they come lazily, block by block
        assert isinstance(labels, da.Array) and labels.chunks[0] == UNEVEN
        np.testing.assert_array_equal(labels.compute(), est.predict(X))
        again = latentfs.GaussianMixtureClusterer(3, seed=0).fit(Xd)
        np.testing.assert_array_equal(again.predict(X), est.predict(X))  # the same fit
    np.testing.assert_array_equal(latentfs.GaussianMixtureClusterer(3, seed=0).fit_predict(X),
                                  latentfs.GaussianMixtureClusterer(3, seed=0).fit(X).labels_)
