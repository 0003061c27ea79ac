"""Stepwise EM's inputs found by the bad-input campaign (issue 31, item 11): a dask array of unknown chunk sizes
crashed with "cannot convert float NaN to integer", and a mini-batch × 1e300 in the middle of a stream raised a
DataError about a singular M-step that named neither the batch nor the cause. A collapsed component is flagged
(found by check_engine's planted collapse)."""

from __future__ import annotations

import dask.array as da
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.testing import tiny_data, tiny_model

X, _ = tiny_data(tiny_model(latentfs.GaussianMixture))


def test_a_dask_array_of_unknown_size_is_refused_with_the_remedy():
    d = da.from_array(X, chunks=(10, -1))
    with pytest.raises(DataError, match=r"unknown size \(nan, 4\).*Call X.compute_chunk_sizes\(\) first"):
        latentfs.fit(latentfs.GaussianMixture(2), d[d[:, 0] > -100], method="online_em")


@pytest.mark.parametrize("as_list", [False, True])
def test_a_bad_batch_in_a_stream_is_named(as_list):
    batches = [X[:20], X[20:40] * 1e300, X[40:]]
    with pytest.raises(DataError, match=r"mini-batch 1 \(0-based, 20 rows\): batch has values too large for float64"):
        latentfs.fit(latentfs.GaussianMixture(2), batches if as_list else iter(batches), method="online_em")


def test_a_first_batch_that_underflows_is_refused():
    with pytest.raises(DataError, match="mini-batch 0 .* too small for float64 arithmetic"):
        latentfs.fit(latentfs.GaussianMixture(2), iter([X[:30] * 1e-200, X[30:]]), method="online_em")


def test_progress_and_warn_are_options_as_for_every_optimiser():
    # online EM took neither (latentfs.fit(..., method="online_em", progress=False) was refused), so its
    # collapse warning could not be silenced
    from latentfs.testing import planted_collapse

    model, P, _ = planted_collapse(tiny_model(latentfs.GaussianMixture))
    with pytest.warns(latentfs.core.diagnostics.CollapsedComponentWarning):
        latentfs.fit(model, P, method="online_em", seed=3, progress=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = latentfs.fit(model, P, method="online_em", seed=3, progress=False, warn=False)
    assert r.diagnostics["collapsed"]
    with pytest.raises(DataError, match="warn"):
        latentfs.fit(model, P, method="online_em", warn="no")
