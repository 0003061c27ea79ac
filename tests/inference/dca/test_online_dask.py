"""DirichletDCA online VB on a dask array (issue 32, item 2): each mini-batch's document updates as one task per
row-chunk piece, the λ step in the driver (:mod:`latentfs.inference.dca.online_dask`).

Exact tier: the sharded fit equals the in-memory fit on the same rows and mini-batches (same seed) for any
chunking, on dask's synchronous scheduler, on an in-process ``LocalCluster`` of 1 and 2 workers, and on 2 worker
processes one of which is killed mid-fit. The only freedom is the order of floating-point sums (observed ~1e-15);
1e-10 is the bound asked of it. With one chunk the arithmetic is the in-memory update's, to the bit.
"""

import os
import signal

import dask  # the latentfs[dask] extra: installed wherever the tests run (no skip)
import dask.array as da
import distributed
import distributed.diagnostics.plugin
import numpy as np
import pytest
import scipy.sparse as sp

import latentfs
from latentfs.core.data import DataError
from latentfs.core.streams import row_batches
from latentfs.models.dca import DirichletDCA

RTOL = 1e-10
OPTS = dict(method="online_vb", batch_size=50, n_passes=2, seed=3)


@pytest.fixture(scope="module")
def corpus():
    return sp.csr_matrix(
        DirichletDCA(4, alpha=0.3).simulate(n_documents=230, n_features=40, doc_length=30, seed=1)["counts"]
    )


def _lam(post):
    return post.fitted_params("topic_word")["concentration"]


def _assert_close(got, ref, rtol=RTOL):
    np.testing.assert_allclose(_lam(got), _lam(ref), rtol=rtol, atol=0)
    np.testing.assert_allclose(got.trace, ref.trace, rtol=rtol, atol=0)
    assert got.diagnostics["n_iter"] == ref.diagnostics["n_iter"] == 10  # 2 passes of 5 batches (230 / 50)


def _sync_fit(X, **opts):
    with dask.config.set(scheduler="synchronous"):
        return latentfs.fit(DirichletDCA(4), X, **{**OPTS, **opts})


@pytest.mark.parametrize("theta_update", ["full", "chapter"])
def test_any_chunking_equals_in_memory(corpus, theta_update):
    """1, 4 and 14 row chunks, CSR and dense: the in-memory fit's λ and bound trace; one chunk to the bit."""
    ref = latentfs.fit(DirichletDCA(4), corpus, theta_update=theta_update, **OPTS)
    one = _sync_fit(da.from_array(corpus, chunks=(230, -1), asarray=False), theta_update=theta_update)
    assert one.diagnostics["shards"] == 1
    assert np.array_equal(_lam(one), _lam(ref)) and np.array_equal(one.trace, ref.trace)
    for source, rows in ((corpus, 60), (corpus.toarray(), 17)):
        got = _sync_fit(da.from_array(source, chunks=(rows, -1), asarray=False), theta_update=theta_update)
        assert got.diagnostics["shards"] == -(-230 // rows)
        _assert_close(got, ref)
        assert "doc_topic" not in got.sites  # a dask array's fit holds q(Θ) only (documented)
    # the seed decides the batches and λ's start: another seed is another fit
    other = _sync_fit(da.from_array(corpus, chunks=(60, -1), asarray=False), theta_update=theta_update, seed=4)
    assert np.max(np.abs(_lam(other) - _lam(ref)) / _lam(ref)) > 1e-3


def test_in_process_clusters_of_one_and_two_workers_agree_to_the_bit(corpus):
    """The pieces' statistics are added in chunk order, so the number of workers changes nothing at all."""
    ref = latentfs.fit(DirichletDCA(4), corpus, **OPTS)
    X = da.from_array(corpus, chunks=(40, -1), asarray=False)
    got = {}
    for workers in (1, 2):
        with (
            distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=False, dashboard_address=":0"
            ) as cluster,
            distributed.Client(cluster),
            distributed.get_task_stream() as stream,
        ):
            got[workers] = latentfs.fit(DirichletDCA(4), X, **OPTS)
        _assert_close(got[workers], ref)
        # the pieces ran on the workers, on every one of them (the chunks are spread over them)
        ran = {t["worker"] for t in stream.data if str(t["key"]).startswith("shard_task") and t["typename"] == "tuple"}
        assert len(ran) == workers
    assert np.array_equal(_lam(got[1]), _lam(got[2])) and np.array_equal(got[1].trace, got[2].trace)


def test_without_persist_and_with_empty_rows_equals_the_same_batches_in_memory(corpus):
    """Empty rows are dropped from each mini-batch, as from an in-memory list of the same batches; without persist
    each piece reads and validates its chunk again (same numbers)."""
    dense = corpus.toarray()
    dense[[5, 6, 130]] = 0
    batches = list(row_batches(230, 50, 1, True, 3, lambda rows: dense[rows]))
    ref = latentfs.fit(DirichletDCA(4), batches, method="online_vb", total_documents=230, seed=3)
    for persist in (True, False):
        got = _sync_fit(da.from_array(dense, chunks=(60, -1)), n_passes=1, persist=persist)
        np.testing.assert_allclose(_lam(got), _lam(ref), rtol=RTOL, atol=0)
        np.testing.assert_allclose(got.trace, ref.trace, rtol=RTOL, atol=0)


def test_bad_input_is_refused_with_a_remedy(corpus):
    dense = corpus.toarray().astype(float)
    dense[70, 3] = -1.0
    with pytest.raises(DataError, match=r"row chunk 1 \(input rows 60–119.*non-negative integer counts; row 10"):
        _sync_fit(da.from_array(dense, chunks=(60, -1)))
    empty = corpus.toarray()
    empty[:50] = 0
    with pytest.raises(
        DataError,
        match=r"batch holds no counts at all .*rows 0, 1, 2, 3, 4 … of X are all empty.*"
        r"Drop X's empty rows",
    ):
        _sync_fit(da.from_array(empty, chunks=(60, -1)), shuffle=False)
    with pytest.raises(DataError, match=r"persist must be True or False; got 'yes'"):
        _sync_fit(da.from_array(corpus, chunks=(60, -1), asarray=False), persist="yes")
    with pytest.raises(DataError, match=r"one chunk; got 2 column chunks.*rechunk"):
        _sync_fit(da.from_array(corpus.toarray(), chunks=(60, 20)))


class _KillAfter(distributed.diagnostics.plugin.SchedulerPlugin):
    """A scheduler plugin that kills (SIGKILL) the worker process that finished the n-th piece of a mini-batch."""

    def __init__(self, scheduler, n):
        super().__init__()
        self.scheduler, self.n, self.seen, self.killed = scheduler, n, 0, None

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "memory" and str(key).startswith("shard_task") and kwargs.get("worker"):
            self.seen += 1
            if self.seen == self.n and self.killed is None:
                ws = self.scheduler.workers[kwargs["worker"]]
                self.killed = ws.pid
                os.kill(ws.pid, signal.SIGKILL)


@pytest.mark.slow
def test_worker_process_killed_mid_fit_changes_nothing(corpus):
    """Two worker processes; the one that finishes the 20th task (the chunks' validation and the first batches'
    pieces) is killed. Dask recomputes its chunks and pieces from their lineage and the fit still equals the
    in-memory fit (worker processes are started, so this takes ~15 s)."""
    ref = latentfs.fit(DirichletDCA(4), corpus, **OPTS)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
        ) as cluster,
        distributed.Client(cluster),
    ):
        plugin = _KillAfter(cluster.scheduler, 20)
        cluster.scheduler.add_plugin(plugin, name="kill-after")
        got = latentfs.fit(DirichletDCA(4), da.from_array(corpus, chunks=(40, -1), asarray=False), **OPTS)
    assert plugin.killed is not None and plugin.seen > 20
    _assert_close(got, ref)
