"""The pipeline's data back-end (latentfs.core.backends): one E-step function, in memory or over dask shards."""

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from latentfs.core.backends import shard_data
from latentfs.core.data import DataError
from latentfs.core.shards import ShardError


def _prepare(block, scale):
    arr = block.toarray() if sp.issparse(block) else np.asarray(block, dtype=np.float64)
    if (arr < 0).any():
        raise DataError("X must be non-negative; row 0 is not.")
    return torch.as_tensor(arr * scale)


def _estep(x, carried, w):
    w = torch.as_tensor(w, dtype=x.dtype)
    carried = torch.zeros(x.shape[0], dtype=x.dtype) if carried is None else carried
    rows = x @ w + carried
    return x.T @ x, float(rows.sum()), rows, rows.numpy().copy()


@pytest.fixture(scope="module", autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _data():
    return np.random.default_rng(0).poisson(2.0, size=(23, 4)).astype(np.float64)


def test_in_memory_is_one_shard_called_directly():
    X = _data()
    s = shard_data(X, _prepare, 2.0)
    assert s.is_local and s.n_shards == 1 and s.starts == [0] and s.stops == [23]
    w = torch.arange(4, dtype=torch.float64)
    (gram, total), kept, gathered = s.estep(_estep, w, state=[None], n_sum=2, keep=True, gather=True)
    x = torch.as_tensor(X * 2.0)
    assert torch.equal(gram, x.T @ x)  # one shard: its output as it is, nothing added
    assert total == float((x @ w).sum())
    assert torch.equal(kept[0], x @ w)
    np.testing.assert_array_equal(gathered[0], (x @ w).numpy())


@pytest.mark.parametrize("chunks", [23, 5, 7])
@pytest.mark.parametrize("sparse", [False, True])
def test_dask_shards_equal_memory(chunks, sparse):
    X = _data()
    src = sp.csr_matrix(X) if sparse else X
    dX = da.from_array(src, chunks=(chunks, -1), asarray=False)
    local, shards = shard_data(X, _prepare, 2.0), shard_data(dX, _prepare, 2.0)
    assert not shards.is_local and shards.n_shards == len(dX.chunks[0])
    assert shards.starts[1:] == shards.stops[:-1] and shards.stops[-1] == 23
    w = torch.arange(4, dtype=torch.float64)
    state_l, state_d = [None], [None] * shards.n_shards
    for _ in range(2):  # the kept per-shard state is passed back for a second pass
        (g_l, t_l), state_l, got_l = local.estep(_estep, w, state=state_l, n_sum=2, keep=True, gather=True)
        (g_d, t_d), state_d, got_d = shards.estep(_estep, w, state=state_d, n_sum=2, keep=True, gather=True)
        np.testing.assert_allclose(np.asarray(g_d), g_l.numpy(), rtol=1e-14)
        assert t_d == pytest.approx(t_l, rel=1e-14)
        np.testing.assert_array_equal(np.concatenate(got_d), got_l[0])
    rows = shards.summaries(lambda x: x.shape[0])
    assert sum(rows) == 23 and len(rows) == shards.n_shards
    assert len(shards.summaries(lambda x, s: s.shape[0], state=state_d)) == shards.n_shards


def test_sums_only_and_start():
    dX = da.from_array(_data(), chunks=(6, -1))
    s = shard_data(dX, _prepare, 1.0, persist=False)
    starts = s.start(lambda x, v: torch.full((x.shape[0],), v, dtype=x.dtype), 1.5)
    (gram, total), kept, gathered = s.estep(_estep, np.ones(4), state=starts, n_sum=2)
    assert kept is None and gathered is None
    x = torch.as_tensor(_data())
    assert total == pytest.approx(float((x @ torch.ones(4, dtype=x.dtype) + 1.5).sum()), rel=1e-14)


def test_shard_error_names_rows():
    X = _data()
    X[13, 2] = -1.0
    dX = da.from_array(X, chunks=(5, -1))
    with pytest.raises(ShardError, match=r"row chunk 2 \(input rows 10–14"):
        s = shard_data(dX, _prepare, 1.0)
        s.summaries(lambda x: x.shape[0])
    with pytest.raises(DataError, match="X must be non-negative"):  # in memory: the engine's message as it is
        shard_data(X, _prepare, 1.0)


def _named(x):
    return {"s": x.sum(0), "q": (x * x).sum(0)}, x.sum(1)


def test_named_statistics_add_key_by_key_and_lazy_parts():
    X = _data()
    dX = da.from_array(X, chunks=(4, -1))
    (named,), _, _ = shard_data(dX, _prepare, 1.0).estep(lambda x: (_named(x)[0],), n_sum=1)
    np.testing.assert_allclose(np.asarray(named["s"]), X.sum(0), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(named["q"]), (X * X).sum(0), rtol=1e-14)
    parts = shard_data(dX, _prepare, 1.0).lazy(lambda x: _named(x)[1])
    assert len(parts) == 6 and all(hasattr(p, "compute") for p in parts)  # uncomputed on dask
    np.testing.assert_array_equal(np.concatenate(dask.compute(*parts)), X.sum(1))
    (local,) = shard_data(X, _prepare, 1.0).lazy(lambda x: _named(x)[1])
    np.testing.assert_array_equal(np.asarray(local), X.sum(1))  # in memory: computed


def test_driver_reduction_adds_in_shard_order():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 3)) * 10.0 ** rng.integers(-8, 8, size=(40, 1))  # sums that depend on their order
    dX = da.from_array(X, chunks=(5, -1))
    parts = [torch.as_tensor(X[lo:lo + 5]).sum(0) for lo in range(0, 40, 5)]
    in_order = parts[0]
    for part in parts[1:]:
        in_order = in_order + part
    as_tensor = lambda block: torch.as_tensor(np.asarray(block))  # noqa: E731
    (total,), _, _ = shard_data(dX, as_tensor).estep(lambda x: (x.sum(0),), reduce="driver")
    assert torch.equal(torch.as_tensor(total), in_order)  # bit for bit: ((p0 + p1) + p2) + …
    with pytest.raises(ValueError, match="reduce must be 'tree' or 'driver'"):
        shard_data(dX, as_tensor).estep(lambda x: (x.sum(0),), reduce="workers")


def test_update_prepares_the_shards_further_where_they_are():
    X = _data()
    for data in (X, da.from_array(X, chunks=(6, -1))):
        s = shard_data(data, _prepare, 1.0)
        s.update(lambda x, c: x - c, 1.0)
        (total,), _, _ = s.estep(lambda x: (float(x.sum()),))
        assert total == pytest.approx(float((X - 1.0).sum()), rel=1e-14)


def test_prepared_shards_tell_dask_their_size():
    # dask's sizeof falls back to sys.getsizeof; a shard that held arrays in an object would read as a few bytes and
    # the scheduler would move it to its parameters rather than the parameters to it
    import sys

    from dask.sizeof import sizeof

    from latentfs.core.backends import _Sized

    class Holder:
        def __init__(self):
            self.values = np.zeros((1000, 10))
            self.index = torch.zeros(500, dtype=torch.int64)
            self.names = [f"x{j}" for j in range(100)]

    sized = _Sized(Holder())
    assert sized.nbytes == 1000 * 10 * 8 + 500 * 8
    assert sizeof(sized) >= sized.nbytes and sys.getsizeof(Holder()) < 1000
