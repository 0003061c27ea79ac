"""ArviZ export has an ``observed_data`` group: the data the fit was given (issue 30, item 3: "ArviZ export with
``posterior``, ``sample_stats``, ``observed_data``"; before, no result had one). It is kept by ``save`` and comes
back with ``load``; data that never sat in memory (a dask array) and a fitted estimator's ``posterior_`` have none,
and the export says why."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import latentfs
from latentfs.core import posterior_io

QUIET = {"progress": False, "warn": False}


@pytest.fixture(scope="module")
def rows():
    return latentfs.GaussianMixture(2).simulate(60, 3, seed=0)["data"]


@pytest.fixture(scope="module")
def counts():
    return latentfs.DirichletDCA(3).simulate(25, 40, seed=1)["counts"]


def test_a_sampler_exports_its_rows_on_the_log_likelihoods_dim(rows, tmp_path):
    frame = pd.DataFrame(rows, columns=["height", "weight", "age"])
    r = latentfs.fit(latentfs.GaussianMixture(2), frame, method="gibbs", num_samples=20, num_warmup=20, **QUIET)
    idata = r.to_inference_data()
    assert {"posterior", "sample_stats", "log_likelihood", "observed_data"} <= set(idata.groups())
    obs = idata.observed_data["data"]
    np.testing.assert_array_equal(obs.values, rows)
    assert obs.dims == idata.log_likelihood["data"].dims[-1:] + ("feature",)
    assert list(obs["feature"].values) == ["height", "weight", "age"]
    back = latentfs.Posterior.load(r.save(tmp_path / "r"))
    assert back.to_inference_data().observed_data.equals(idata.observed_data)


def test_sparse_counts_are_kept_sparse_and_exported_dense(counts, tmp_path):
    X = sp.csr_matrix(counts)
    r = latentfs.fit(latentfs.DirichletDCA(3), X, method="collapsed_gibbs", num_samples=10, num_warmup=10, **QUIET)
    assert sp.issparse(r.observed) and (r.observed != X).nnz == 0
    obs = r.to_inference_data().observed_data["counts"]
    assert obs.dims == ("document", "feature")
    np.testing.assert_array_equal(obs.values, counts)
    back = latentfs.Posterior.load(r.save(tmp_path / "c"))
    assert sp.issparse(back.observed) and (back.observed != X).nnz == 0


def test_a_large_sparse_matrix_is_not_written_dense(counts, monkeypatch):
    r = latentfs.fit(latentfs.DirichletDCA(3), sp.csr_matrix(counts), method="vb", **QUIET)
    monkeypatch.setattr(posterior_io, "OBSERVED_DENSE_MAX", counts.size - 1)
    idata = r.to_inference_data()
    assert "observed_data" not in idata.groups()
    assert "would take" in idata.variational.attrs["latentfs_observed_data"]


def test_dask_input_and_a_fitted_estimators_posterior_keep_no_data(rows):
    import dask.array as da
    r = latentfs.fit(latentfs.GaussianMixture(2), da.from_array(rows, chunks=(20, 3)), method="em", **QUIET)
    assert r.observed is None
    idata = r.to_inference_data()
    assert "observed_data" not in idata.groups()
    assert "does not hold the data" in idata.posterior.attrs["latentfs_observed_data"]
    est = latentfs.GaussianMixtureClusterer(2).fit(rows)
    assert est.posterior_.observed is None


def test_a_corrupted_saved_matrix_is_refused(counts, tmp_path):
    r = latentfs.fit(latentfs.DirichletDCA(3), sp.csr_matrix(counts), method="vb", **QUIET)
    path = r.save(tmp_path / "v")
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["observed_csr/indices"] = arrays["observed_csr/indices"] + 1000
    np.savez_compressed(path, **arrays)
    with pytest.raises(latentfs.DataError, match="observed data are not a valid CSR matrix"):
        latentfs.Posterior.load(path)


@pytest.mark.parametrize(
    "data, kept",
    [
        (np.ma.masked_array([[1.0, 2.0], [3.0, 4.0]], mask=[[0, 1], [0, 0]]), [[1.0, np.nan], [3.0, 4.0]]),
        (pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}), None),  # not a numeric table
        ([[1.0, 2.0]], None),
    ],
)
def test_what_is_kept_of_the_data(data, kept):
    got = posterior_io.observed_array(data)
    if kept is None:
        assert got is None
    else:
        np.testing.assert_array_equal(got, np.asarray(kept))


def test_check_observed_can_fail(rows):
    from latentfs.testing import check_observed

    r = latentfs.fit(latentfs.GaussianMixture(2), rows, method="em", **QUIET)
    check_observed(r, rows)
    r.observed = rows[::-1]
    with pytest.raises(AssertionError, match="not the data the fit was given"):
        check_observed(r, rows)
