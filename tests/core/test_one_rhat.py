"""One R̂ (issue 30): the warning, ``diagnostics``, ``summary()`` and ArviZ on ``to_inference_data()`` print the same
rank-normalised R̂ and ESS for the same fit, and the warning's remedy fits the failure."""

import re
import warnings

import arviz as az
import numpy as np
import pytest

import latentfs
from latentfs.core.driver import ConvergenceWarning
from latentfs.core.results import Posterior


def _fit_with_warnings(*args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = latentfs.fit(*args, **kwargs)
    return post, [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]


def test_collapsed_gibbs_reports_one_rhat_everywhere():
    # Before: the warning said max R̂ 2.217 (ArviZ on a subset), diagnostics["rhat_max_topic_word"] and summary() 11.50
    # (classic split-R̂ on every entry), az.summary 2.41. Short chains on purpose, so R̂ is far from 1.
    X = latentfs.DirichletDCA(4, alpha=0.2, gamma=0.05).simulate(80, 60, doc_length=40, seed=0)["counts"]
    post, messages = _fit_with_warnings(latentfs.DirichletDCA(4), X, method="collapsed_gibbs", seed=0, num_chains=2,
                                        num_warmup=5, num_samples=30)
    conv = post.diagnostics["convergence"]["topic_word"]
    assert conv["entries_checked"] == conv["n_entries"] == 4 * 60
    assert "rhat_max_topic_word" not in post.diagnostics
    said = [m for m in messages if "site 'topic_word' has not converged" in m]
    assert len(said) == 1
    warned = float(re.search(r"max R̂ ([0-9.]+) > 1.01", said[0]).group(1))
    table = post.summary("topic_word", max_entries=1000)
    arviz = az.summary(post.to_inference_data(), var_names=["topic_word"], round_to="none")
    assert conv["r_hat_max"] > 1.01
    assert warned == pytest.approx(conv["r_hat_max"], abs=5e-4)  # the message rounds to 3 decimals
    np.testing.assert_allclose(table["r_hat"].max(), conv["r_hat_max"], rtol=1e-12)
    np.testing.assert_allclose(np.sort(table["r_hat"].to_numpy()), np.sort(arviz["r_hat"].to_numpy()), rtol=1e-12)
    np.testing.assert_allclose(np.sort(table["ess_bulk"].to_numpy()), np.sort(arviz["ess_bulk"].to_numpy()), rtol=1e-10)
    np.testing.assert_allclose(post.rhat("topic_word").max(), conv["r_hat_max"], rtol=1e-12)


def test_gaussian_mixture_gibbs_summary_is_arvizs_entry_by_entry():
    # Before: summary() R̂ 0.997 where az.summary gave 1.18, and the sd used ddof = 0 where ArviZ uses 1.
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-2, 1, size=(60, 2)), rng.normal(2, 1, size=(60, 2))])
    post = latentfs.fit(latentfs.GaussianMixture(2), X, method="gibbs", seed=0, num_chains=2, num_warmup=50,
                        num_samples=100, warn=False)
    ours = post.summary("means")
    arviz = az.summary(post.to_inference_data(), var_names=["means"], round_to="none")
    for column in ("mean", "sd", "ess_bulk", "ess_tail", "r_hat"):
        np.testing.assert_allclose(ours[column].to_numpy(), arviz[column].to_numpy(), rtol=1e-10, err_msg=column)


def test_chains_stationary_in_different_modes_get_the_remedy_that_fits():
    # Two chains, each stationary on its own, in two modes: a longer warm-up cannot help, and the warning says so;
    # a chain still drifting gets the warm-up remedy.
    rng = np.random.default_rng(1)
    modes = np.stack([rng.normal(0.0, 1.0, size=(400, 3)), rng.normal(4.0, 1.0, size=(400, 3))])
    drifting = modes.copy()
    drifting[1] = np.linspace(0.0, 8.0, 400)[:, None] + rng.normal(0.0, 1.0, size=(400, 3))
    for draws, expected, absent in ((modes, "they sit in different modes", "raise num_warmup"),
                                    (drifting, "raise num_warmup", "different modes")):
        post = Posterior(model="m", method="gibbs", dims={"x": ("feature",)}, coords={}, trace=np.zeros((2, 400)),
                         draws={"x": draws})
        with pytest.warns(ConvergenceWarning, match=expected) as record:
            post.check_convergence()
        assert all(absent not in str(w.message) for w in record)
