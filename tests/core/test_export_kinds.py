"""ArviZ export of what a result is (issue 30): a variational result as its parameters (draws only on request, so its
.nc stays near its .npz), a sampler's draws as the posterior."""

import arviz as az
import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError


@pytest.fixture(scope="module")
def vb_result():
    X = latentfs.DirichletDCA(3, alpha=0.3).simulate(60, 400, doc_length=80, seed=0)["counts"]
    return latentfs.fit(latentfs.DirichletDCA(3), X, method="vb", seed=0)


def test_a_vb_result_exports_its_variational_parameters_and_no_draws(vb_result, tmp_path):
    idata = vb_result.to_inference_data()
    assert idata.groups() == ["observed_data", "variational"]  # the data it was fitted to, and q; no draws
    lam = idata.variational["topic_word.concentration"]
    assert lam.dims == ("component", "feature") and lam.attrs["family"] == "dirichlet"
    np.testing.assert_array_equal(lam.to_numpy(), vb_result.fitted_params("topic_word")["concentration"])
    idata.to_netcdf(str(tmp_path / "vb.nc"))
    saved = vb_result.save(tmp_path / "vb.npz")
    assert (tmp_path / "vb.nc").stat().st_size <= 2 * saved.stat().st_size
    back = az.from_netcdf(str(tmp_path / "vb.nc"))
    np.testing.assert_array_equal(back.variational["topic_word.concentration"].to_numpy(), lam.to_numpy())


def test_draws_from_q_only_when_asked_for(vb_result):
    idata = vb_result.to_inference_data(num_draws=20, seed=1)
    assert set(idata.groups()) >= {"posterior", "variational", "log_likelihood"}
    assert idata.posterior["topic_word"].shape == (1, 20, 3, 400)
    assert az.summary(idata, var_names=["topic_word"]).shape[0] == 3 * 400
    with pytest.raises(DataError, match="num_draws"):
        vb_result.to_inference_data(num_draws=0)
