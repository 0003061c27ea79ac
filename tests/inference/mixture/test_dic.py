"""DIC (Spiegelhalter et al. 2002) and DIC_3 (Celeux et al. 2006) of mixture posteriors; Titterington §1.9 oracle 9."""

from __future__ import annotations

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.mixture.dic import DICWarning, dic, dic_from_loglik, pointwise_log_likelihood
from latentfs.inference.mixture.model_selection import select_n_components
from latentfs.models.mixture import GaussianMixture, UnivariateMixtureK


def _normal_loglik(y, mu, sigma):
    mu = np.asarray(mu, dtype=float)[..., None]
    return -0.5 * np.log(2 * np.pi * sigma**2) - 0.5 * (y - mu) ** 2 / sigma**2


def test_normal_mean_known_sigma_flat_prior_has_p_d_one():
    """Closed form: μ | y ~ N(ȳ, σ²/n), so E[Δ] − Δ(ȳ) = n Var(μ)/σ² = 1. With S = 40 000 exact draws the
    estimate is χ²_S/S-distributed around 1 (sd √(2/S) ≈ 0.007); the tolerance 0.04 is > 5 sd (false alarm
    < 1e-7)."""
    rng = np.random.default_rng(11)
    sigma, n = 2.0, 30
    y = rng.normal(1.0, sigma, n)
    mu = y.mean() + rng.normal(0.0, sigma / np.sqrt(n), 40_000)
    out = dic_from_loglik(_normal_loglik(y, mu, sigma), _normal_loglik(y, mu.mean(), sigma))
    assert out["p_d"] == pytest.approx(1.0, abs=0.04)
    assert out["dic"] == pytest.approx(out["deviance_at_mean"] + 2 * out["p_d"])
    # DIC_3: f̂(y_i) = N(y_i; ȳ, σ²(1 + 1/n)), so p_D3 = 1 − n log(1 + 1/n) + Σ(y_i − ȳ)²/(σ²(n + 1)) exactly
    # (data-dependent; its expectation is ≈ 1). Monte Carlo error here ≈ 0.01; tolerance 0.05.
    out3 = dic_from_loglik(_normal_loglik(y, mu, sigma), variant="dic3")
    exact = 1 - n * np.log1p(1 / n) + ((y - y.mean()) ** 2).sum() / (sigma**2 * (n + 1))
    assert out3["p_d"] == pytest.approx(exact, abs=0.05)


@pytest.fixture(scope="module")
def one_component():
    rng = np.random.default_rng(5)
    X = rng.normal(3.0, 1.5, (500, 1))
    gm = GaussianMixture(1)
    gibbs = latentfs.fit(gm, X, method="gibbs", num_chains=2, num_warmup=100, num_samples=600, seed=0, warn=False)
    vb = latentfs.fit(gm, X, method="vb", seed=0)
    return X, gibbs, vb


@pytest.mark.parametrize("variant", ["dic1", "dic3"])
@pytest.mark.parametrize("engine", ["gibbs", "vb"])
def test_one_gaussian_has_p_d_two(one_component, engine, variant):
    """K = 1, d = 1: an unknown mean and variance with a weak prior, so p_D → 2 (Spiegelhalter et al. 2002,
    §4); for K = 1 the VB posterior is the exact Normal–Gamma posterior. The Monte Carlo sd of p_D is about
    √(2 p_D / ESS) ≈ 0.05 here; tolerance 0.3 (> 5 sd)."""
    X, gibbs, vb = one_component
    out = dic(gibbs if engine == "gibbs" else vb, X, variant, num_draws=1000)
    assert out["p_d"] == pytest.approx(2.0, abs=0.3)
    assert out["dic"] == pytest.approx(out["mean_deviance"] + out["p_d"])


def test_gibbs_pointwise_matches_a_recomputation_from_the_draws(one_component):
    X, gibbs, _ = one_component
    stored = pointwise_log_likelihood(gibbs, X)
    gibbs_copy = latentfs.fit(GaussianMixture(1), X, method="gibbs", num_chains=1, num_warmup=5, num_samples=20,
                              seed=1, warn=False, pointwise_loglik=False)
    recomputed = pointwise_log_likelihood(gibbs_copy, X)
    assert stored.shape == (1200, 500) and recomputed.shape == (20, 500)
    mu, var = gibbs_copy.samples("means")[0, :, 0, 0], gibbs_copy.samples("covariance")[0, :, 0, 0, 0]
    direct = -0.5 * np.log(2 * np.pi * var)[:, None] - 0.5 * (X[:, 0] - mu[:, None]) ** 2 / var[:, None]
    assert np.allclose(recomputed, direct, rtol=1e-10, atol=1e-10)


def test_dic_chooses_three_well_separated_components():
    rng = np.random.default_rng(2)
    X = np.concatenate([rng.normal(m, 1.0, 100) for m in (-7.0, 0.0, 7.0)])[:, None]
    with pytest.warns(DICWarning, match=r"p_D < 0 at K = \[4\]"):
        sel = select_n_components(GaussianMixture(1), X, [1, 2, 3, 4], criteria=["bic", "dic", "dic3"], n_init=2,
                                  dic_options={"num_samples": 300, "num_warmup": 100})
    assert sel.best["dic3"] == 3 and sel.best["bic"] == 3
    # DIC_1's known failure (Celeux et al. 2006): at K = 4 one component is split between two labels that
    # switch, θ̄ averages them and p_D < 0, so DIC_1 "prefers" K = 4; among K with p_D ≥ 0 it picks 3.
    table = sel.table
    assert table.loc[4, "p_d"] < 0 and int(table.loc[table["p_d"] >= 0, "dic"].idxmin()) == 3
    assert set(sel.table.columns) >= {"dic", "p_d", "dic3", "p_d3"}
    assert sorted(sel.bayes_fits) == [1, 2, 3, 4]
    # about 3K − 1 effective parameters at the true K (weights, means, variances)
    assert sel.table.loc[3, "p_d3"] == pytest.approx(8.0, abs=1.5)


def test_rjmcmc_result_has_dic3_only():
    y = np.random.default_rng(0).normal(0.0, 1.0, 60)
    post = latentfs.fit(UnivariateMixtureK(max_components=4), y, method="rjmcmc", num_warmup=50, num_samples=200,
                        seed=0, warn=False, progress=False)
    out = dic(post, y, "dic3")
    assert np.isfinite(out["dic"]) and 0.5 < out["p_d"] < 6
    with pytest.raises(DataError, match="not defined for a reversible-jump result"):
        dic(post, y, "dic1")


def test_bad_input_is_a_data_error(one_component):
    X, gibbs, _ = one_component
    with pytest.raises(DataError, match="variant must be one of"):
        dic(gibbs, X, "dic2")
    with pytest.raises(DataError, match="X must be the data the result was fitted to"):
        dic(gibbs, X[:100])
    em = latentfs.fit(GaussianMixture(1), X, method="em", seed=0)
    with pytest.raises(DataError, match="DIC needs posterior draws"):
        dic(em, X)
    with pytest.raises(DataError, match="loglik_at_mean is needed"):
        dic_from_loglik(np.zeros((4, 3)))
    with pytest.raises(DataError, match="at least 2 draws"):
        dic_from_loglik(np.zeros((1, 3)), 0.0)
    with pytest.raises(DataError, match="criteria must be names among"):
        select_n_components(GaussianMixture(1), X, [1], criteria=["waic"])


def test_unaligned_draws_refuse_dic1_but_not_dic3():
    rng = np.random.default_rng(4)
    X = np.concatenate([rng.normal(m, 1.0, 60) for m in (-4.0, 4.0)])[:, None]
    post = latentfs.fit(GaussianMixture(2), X, method="gibbs", num_chains=2, num_warmup=50, num_samples=100,
                        seed=0, warn=False)
    aligned = dic(post, X)
    post.alignment = None
    with pytest.raises(DataError, match="not aligned"):
        dic(post, X)
    assert np.isfinite(dic(post, X, "dic3")["dic"]) and np.isfinite(aligned["dic"])
