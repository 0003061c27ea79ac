"""The factor-analysis Pyro models: simulation, integrated vs joint densities, validation messages."""

import numpy as np
import pytest
import torch
from pyro import poutine
from scipy.stats import multivariate_normal

from latentfs.core.data import DataError
from latentfs.models.factor import FactorAnalysis, LoadingConstraints, MixtureOfFactorAnalyzers


def _planted(rng, d=6, q=2):
    return rng.normal(size=(d, q)), rng.uniform(0.2, 1.0, size=d), rng.normal(size=d)


def _log_prob(fn, values, *args, **kwargs):
    tr = poutine.trace(poutine.condition(fn, values)).get_trace(*args, **kwargs)
    return float(tr.log_prob_sum())


def test_simulate_shapes_and_seed(rng):
    W, psi, mu = _planted(rng)
    fa = FactorAnalysis(2)
    a = fa.simulate(30, loadings=W, noise_variance=psi, mean=mu, seed=3)
    b = fa.simulate(30, loadings=W, noise_variance=psi, mean=mu, seed=3)
    c = fa.simulate(30, loadings=W, noise_variance=psi, mean=mu, seed=4)
    assert a["data"].shape == (30, 6) and a["factors"].shape == (30, 2)
    np.testing.assert_array_equal(a["data"], b["data"])
    assert not np.allclose(a["data"], c["data"])
    np.testing.assert_array_equal(a["loadings"], W)


def test_simulate_from_priors_matches_prior_moments():
    # 4000 draws of the loadings from N(0, 2²): the sample sd is within 5% of 2 (false-alarm ≈ 1e-9).
    fa = FactorAnalysis(2, loading_scale=2.0, noise_shape=3.0, noise_scale=2.0, mean_scale=1.0)
    sim = fa.simulate(5, 2000, seed=0)
    assert abs(sim["loadings"].std() - 2.0) < 0.1
    # InverseGamma(3, 2) has mean 1; 2000 draws, sd of the mean ≈ 0.022 (5 sd tolerance)
    assert abs(sim["noise_variance"].mean() - 1.0) < 0.11


def test_simulate_missing_fraction_keeps_rows_and_columns():
    fa = FactorAnalysis(1)
    X = fa.simulate(400, loadings=np.ones((5, 1)), noise_variance=1.0, mean=0.0, missing_fraction=0.3, seed=0)["data"]
    frac = np.isnan(X).mean()
    assert 0.2 < frac < 0.3
    assert not np.isnan(X).all(1).any() and not np.isnan(X).all(0).any()


def test_integrated_model_equals_multivariate_normal(rng):
    # exact: factors summed out, the model's log-density is the Gaussian N(μ, W Wᵗ + Λ)
    W, psi, mu = _planted(rng)
    X = rng.normal(size=(20, 6))
    fa = FactorAnalysis(2)
    values = {"loadings": torch.tensor(W), "noise_variance": torch.tensor(psi), "mean": torch.tensor(mu)}
    got = _log_prob(fa.model, values, torch.tensor(X), integrate_factors=True)
    want = multivariate_normal(mu, W @ W.T + np.diag(psi)).logpdf(X).sum()
    assert got == pytest.approx(want, rel=1e-12)


def test_integrated_model_with_missing_is_marginal_of_observed(rng):
    W, psi, mu = _planted(rng)
    X = rng.normal(size=(15, 6))
    X[rng.uniform(size=X.shape) < 0.3] = np.nan
    X[:, 0] = 0.3  # keep each row non-empty
    fa = FactorAnalysis(2)
    values = {"loadings": torch.tensor(W), "noise_variance": torch.tensor(psi), "mean": torch.tensor(mu)}
    got = _log_prob(fa.model, values, torch.tensor(X), integrate_factors=True)
    cov = W @ W.T + np.diag(psi)
    want = 0.0
    for row in X:
        o = ~np.isnan(row)
        want += multivariate_normal(mu[o], cov[np.ix_(o, o)]).logpdf(row[o])
    assert got == pytest.approx(want, rel=1e-12)


def test_joint_model_masks_missing_entries(rng):
    # exact: the value written into a missing entry never reaches the log joint
    W, psi, mu = _planted(rng)
    fa = FactorAnalysis(2)
    X = rng.normal(size=(10, 6))
    X[2, 3] = np.nan
    z = torch.tensor(rng.normal(size=(10, 1, 2)))
    values = {"loadings": torch.tensor(W), "noise_variance": torch.tensor(psi), "mean": torch.tensor(mu), "factors": z}
    full = X.copy()
    full[2, 3] = 0.0
    with_missing = _log_prob(fa.model, values, torch.tensor(X))
    complete = _log_prob(fa.model, values, torch.tensor(full))
    lost = -0.5 * np.log(2 * np.pi * psi[3]) - 0.5 * (0.0 - mu[3] - W[3] @ z[2, 0].numpy()) ** 2 / psi[3]
    assert with_missing == pytest.approx(complete - lost, rel=1e-12)


def test_flat_priors_contribute_nothing(rng):
    W, psi, mu = _planted(rng)
    X = rng.normal(size=(8, 6))
    values = {"loadings": torch.tensor(W), "noise_variance": torch.tensor(psi), "mean": torch.tensor(mu)}
    flat = _log_prob(FactorAnalysis(2).model, values, torch.tensor(X), integrate_factors=True)
    prior = FactorAnalysis(2, loading_scale=1.5, noise_shape=2.0, noise_scale=1.0, mean_scale=3.0)
    with_prior = _log_prob(prior.model, values, torch.tensor(X), integrate_factors=True)
    log_prior = (
        torch.distributions.Normal(0.0, 1.5).log_prob(torch.tensor(W)).sum()
        + torch.distributions.InverseGamma(2.0, 1.0).log_prob(torch.tensor(psi)).sum()
        + torch.distributions.Normal(0.0, 3.0).log_prob(torch.tensor(mu)).sum()
    )
    assert with_prior - flat == pytest.approx(float(log_prior), rel=1e-12)


def test_mfa_integrated_model_is_mixture_density(rng):
    K, d, q = 2, 4, 1
    W = rng.normal(size=(K, d, q))
    mu = rng.normal(size=(K, d)) * 3
    psi = rng.uniform(0.3, 1.0, size=d)
    pi = np.array([0.3, 0.7])
    X = rng.normal(size=(12, d))
    mfa = MixtureOfFactorAnalyzers(K, q)
    values = {"weights": torch.tensor(pi), "mean": torch.tensor(mu), "loadings": torch.tensor(W),
              "noise_variance": torch.tensor(psi)}
    got = _log_prob(mfa.model, values, torch.tensor(X), integrate_latents=True)
    dens = sum(pi[k] * multivariate_normal(mu[k], W[k] @ W[k].T + np.diag(psi)).pdf(X) for k in range(K))
    assert got == pytest.approx(np.log(dens).sum(), rel=1e-12)


def test_mfa_simulate_assignments_follow_weights():
    mfa = MixtureOfFactorAnalyzers(2, 1)
    W = np.zeros((2, 3, 1))
    sim = mfa.simulate(2000, loadings=W, mean=[[0, 0, 0], [9, 9, 9]], noise_variance=0.1, weights=[0.2, 0.8], seed=0)
    # binomial sd of the share ≈ 0.009; 5 sd tolerance
    assert abs(sim["assignment"].mean() - 0.8) < 0.045
    assert np.allclose(sim["data"][sim["assignment"] == 1].mean(0), 9, atol=0.1)


def test_loading_constraints_fixed_pattern():
    pattern = np.array([[np.nan, 0.0, 0.0], [0.5, np.nan, np.nan]])
    c = LoadingConstraints.fixed(pattern)
    assert c.n_active().tolist() == [2, 1]
    assert c.violation(np.array([[3.0, 0.0, 0.0], [0.5, 1.0, 2.0]])) == 0.0
    assert c.violation(np.array([[3.0, 0.1, 0.0], [0.5, 1.0, 2.0]])) == pytest.approx(0.1)


# ------------------------------------------------------------------ bad input
def test_errors_constraints():
    with pytest.raises(DataError, match="constraints must be a finite matrix of shape"):
        LoadingConstraints(np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(DataError, match="all-zero matrix row but target"):
        LoadingConstraints(np.zeros((1, 1, 2)), np.ones((1, 1)))
    with pytest.raises(DataError, match="linearly dependent"):
        LoadingConstraints(np.array([[[1.0, 0, 0], [2.0, 0, 0]]]), np.zeros((1, 2)))
    with pytest.raises(DataError, match="fix all 2 loadings of the row"):
        LoadingConstraints.fixed([[0.0, 0.0], [np.nan, 1.0]])
    with pytest.raises(DataError, match="pattern must be 2-D"):
        LoadingConstraints.fixed([0.0, 1.0])
    with pytest.raises(DataError, match="constraints must be a LoadingConstraints"):
        FactorAnalysis(2, constraints=np.zeros((3, 1, 2)))
    with pytest.raises(DataError, match=r"constraints must have n_components=3 columns \(one per factor\); got 2"):
        FactorAnalysis(3, constraints=LoadingConstraints.fixed([[0.0, np.nan]]))


def test_errors_hyperparameters_and_simulate():
    with pytest.raises(DataError, match="noise_shape and noise_scale must be given together"):
        FactorAnalysis(1, noise_shape=2.0)
    with pytest.raises(DataError, match="loading_scale must be finite and positive"):
        FactorAnalysis(1, loading_scale=-1.0)
    with pytest.raises(DataError, match="n_components must be at least 1"):
        FactorAnalysis(0)
    fa = FactorAnalysis(2)
    with pytest.raises(DataError, match="simulate needs loadings: its prior is flat"):
        fa.simulate(5, 3, noise_variance=1.0, mean=0.0)
    with pytest.raises(DataError, match=r"loadings must have shape \(n_features, 2\)"):
        fa.simulate(5, loadings=np.ones((3, 1)), noise_variance=1.0, mean=0.0)
    with pytest.raises(DataError, match="simulate needs n_features"):
        FactorAnalysis(1, loading_scale=1.0, noise_shape=1.0, noise_scale=1.0, mean_scale=1.0).simulate(5)
    with pytest.raises(DataError, match="missing_fraction must lie in"):
        fa.simulate(5, loadings=np.ones((3, 2)), noise_variance=1.0, mean=0.0, missing_fraction=1.0)
    with pytest.raises(DataError, match="noise_variance must be finite and positive"):
        fa.simulate(5, loadings=np.ones((3, 2)), noise_variance=-1.0, mean=0.0)
    with pytest.raises(DataError, match="model needs data, or n_samples and n_features"):
        fa.model()


def test_errors_mfa_model():
    mfa = MixtureOfFactorAnalyzers(2, 1)
    with pytest.raises(DataError, match=r"loadings must have shape \(2, n_features, 1\)"):
        mfa.simulate(5, loadings=np.ones((3, 1)), mean=0.0, noise_variance=1.0)
    with pytest.raises(DataError, match="must not contain NaN for MixtureOfFactorAnalyzers"):
        mfa.model(torch.tensor([[np.nan, 1.0]]))
    with pytest.raises(DataError, match="model needs data, or n_samples and n_features"):
        mfa.model()
