"""Gibbs sampler for Bayesian factor analysis.

Exact: each conditional's log ratio at two values equals the Pyro log joint's. Statistical: the
conditional samplers against their closed-form (conjugate) moments, with stated false-alarm rates.
Recovery: the chain's posterior near the ML fit; alignment recovers planted rotations.
"""

import numpy as np
import pytest
import torch
from pyro import poutine

import latentfs.inference.factor.em as fem
import latentfs.inference.factor.gibbs as fg
from latentfs import fit
from latentfs.core.data import DataError
from latentfs.core.driver import ConvergenceWarning
from latentfs.core.results import split_rhat
from latentfs.models.factor import FactorAnalysis, LoadingConstraints

PRIORS = {"loading_scale": 1.5, "noise_shape": 2.0, "noise_scale": 0.5, "mean_scale": 3.0}


def _setup(n=40, d=5, q=2, missing=0.2, seed=0):
    rng = np.random.default_rng(seed)
    model = FactorAnalysis(q, **PRIORS)
    W, psi, mu = rng.normal(size=(d, q)), rng.uniform(0.3, 1.0, d), rng.normal(size=d)
    X = model.simulate(n, loadings=W, noise_variance=psi, mean=mu, missing_fraction=missing, seed=seed)["data"]
    data = fem.prepare_fa_data(X, dtype=torch.float64, device="cpu", use_moments=False)
    z = torch.tensor(rng.normal(size=(n, q)))
    return model, X, data, fem.FAParams(torch.tensor(W), torch.tensor(psi), torch.tensor(mu)), z, rng


def _log_joint(model, X, params, z):
    values = {"loadings": params.loadings, "noise_variance": params.noise_variance, "mean": params.mean,
              "factors": z[:, None, :]}
    tr = poutine.trace(poutine.condition(model.model, values)).get_trace(torch.tensor(X))
    return float(tr.log_prob_sum())


def _prior_precision(model):
    q = model.n_components
    return torch.tensor([1 / model.loading_scale**2] * q + [1 / model.mean_scale**2])


# ------------------------------------------------------------------ exact: conditionals vs the Pyro joint
def test_row_conditional_log_ratio_matches_pyro():
    model, X, data, p, z, rng = _setup()
    _, mean, H = fg.sample_rows(z, p.noise_variance, data, _prior_precision(model), torch.Generator().manual_seed(0))
    cond = torch.distributions.MultivariateNormal(mean, precision_matrix=H)
    a = torch.cat([p.loadings, p.mean[:, None]], 1)
    b = a + torch.tensor(rng.normal(size=a.shape)) * 0.3
    pa = fem.FAParams(a[:, :-1], p.noise_variance, a[:, -1])
    pb = fem.FAParams(b[:, :-1], p.noise_variance, b[:, -1])
    want = _log_joint(model, X, pa, z) - _log_joint(model, X, pb, z)
    got = float(cond.log_prob(a).sum() - cond.log_prob(b).sum())
    assert got == pytest.approx(want, rel=1e-10)


def test_noise_conditional_log_ratio_matches_pyro():
    model, X, data, p, z, rng = _setup()
    rows = torch.cat([p.loadings, p.mean[:, None]], 1)
    _, shape, scale = fg.sample_noise_variance(rows, z, data, 2.0, 0.5, torch.Generator().manual_seed(0))
    cond = torch.distributions.InverseGamma(shape, scale)
    psi_b = p.noise_variance * torch.tensor(rng.uniform(0.5, 2.0, size=5))
    pb = fem.FAParams(p.loadings, psi_b, p.mean)
    want = _log_joint(model, X, p, z) - _log_joint(model, X, pb, z)
    got = float(cond.log_prob(p.noise_variance).sum() - cond.log_prob(psi_b).sum())
    assert got == pytest.approx(want, rel=1e-10)


def test_factor_conditional_log_ratio_matches_pyro():
    model, X, data, p, z, rng = _setup()
    _, Ez, row_ll = fg.sample_factors(p, data, torch.Generator().manual_seed(0))
    V = torch.linalg.inv(fem.posterior_precision(p.loadings, p.noise_variance, data.patterns))[data.pattern_of_row]
    cond = torch.distributions.MultivariateNormal(Ez, covariance_matrix=V)
    z_b = z + torch.tensor(rng.normal(size=z.shape))
    want = _log_joint(model, X, p, z) - _log_joint(model, X, p, z_b)
    got = float(cond.log_prob(z).sum() - cond.log_prob(z_b).sum())
    assert got == pytest.approx(want, rel=1e-10)
    # and the per-row log-likelihood it reports is the marginal of the observed entries
    ll = fem.factor_posterior(p, data)[2]
    torch.testing.assert_close(row_ll, ll, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ statistical: draws vs closed forms
def test_row_draws_match_conjugate_posterior():
    # 4000 draws of each of 15 coordinates: |z| of the mean above 4.5 has probability ≈ 7e-6 per
    # coordinate, ≈ 1e-4 for the test; the variance ratio within 15% (sd ≈ 2.2%, 6.7 sd) likewise.
    model, X, data, p, z, _ = _setup()
    gen = torch.Generator().manual_seed(11)
    prior = _prior_precision(model)
    draws, mean, H = zip(*(fg.sample_rows(z, p.noise_variance, data, prior, gen) for _ in range(4000)), strict=True)
    draws = torch.stack(draws).numpy()
    mean, cov = mean[0].numpy(), torch.linalg.inv(H[0]).numpy()
    sd = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))
    zscore = (draws.mean(0) - mean) / (sd / np.sqrt(4000))
    assert np.abs(zscore).max() < 4.5
    np.testing.assert_allclose(draws.var(0), sd**2, rtol=0.15)


def test_noise_draws_match_inverse_gamma_posterior():
    # posterior shape a + n_j/2 ≥ 18 here, so the inverse gamma has finite variance; 4000 draws per
    # feature, |z| < 4.5 on 5 means (false alarm ≈ 3e-5).
    model, X, data, p, z, _ = _setup()
    rows = torch.cat([p.loadings, p.mean[:, None]], 1)
    gen = torch.Generator().manual_seed(12)
    out = [fg.sample_noise_variance(rows, z, data, 2.0, 0.5, gen) for _ in range(4000)]
    draws = torch.stack([o[0] for o in out]).numpy()
    a, b = out[0][1].numpy(), out[0][2].numpy()
    mean, var = b / (a - 1), b**2 / ((a - 1) ** 2 * (a - 2))
    assert np.abs((draws.mean(0) - mean) / np.sqrt(var / 4000)).max() < 4.5


def test_constrained_row_draws_stay_on_constraints_and_match_conditioned_mean():
    model, X, data, p, z, _ = _setup(q=3)
    pattern = np.full((5, 3), np.nan)
    pattern[0, 1:] = 0.0
    pattern[2, 0] = 0.5
    c = LoadingConstraints.fixed(pattern)
    mat = torch.tensor(np.concatenate([c.matrix, np.zeros(c.matrix.shape[:2] + (1,))], axis=2))
    cons = (mat, torch.tensor(c.target), torch.tensor((~c.active).astype(float)))
    prior = torch.tensor([1 / 1.5**2] * 3 + [1 / 9.0])
    gen = torch.Generator().manual_seed(3)
    draws = [fg.sample_rows(z, p.noise_variance, data, prior, gen, cons) for _ in range(3000)]
    W = torch.stack([d[0] for d in draws]).numpy()
    assert max(c.violation(w[:, :3]) for w in W[:50]) < 1e-12
    # the conditioned mean is the KKT solution of the constrained quadratic (exact)
    H, g_mean = draws[0][2].numpy(), draws[0][1].numpy()
    Hj = H[2]
    g = Hj @ _unconstrained_mean(z, p, data, prior)[2]  # H m = g for the unconstrained mean
    C = mat.numpy()[2][:1]
    K = np.block([[Hj, C.T], [C, np.zeros((1, 1))]])
    sol = np.linalg.solve(K, np.concatenate([g, [0.5]]))[:4]
    np.testing.assert_allclose(g_mean[2], sol, rtol=1e-9, atol=1e-12)
    # 3000 draws; sd of each mean ≤ 0.02 here; 0.1 is > 5 sd (false alarm < 1e-6)
    np.testing.assert_allclose(W.mean(0), g_mean, atol=0.1)


def _unconstrained_mean(z, p, data, prior):
    return fg.sample_rows(z, p.noise_variance, data, prior, torch.Generator().manual_seed(0))[1].numpy()


# ------------------------------------------------------------------ alignment
def test_procrustes_and_signed_permutation_recover_planted_transforms():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(7, 3))
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    np.testing.assert_allclose((W @ Q) @ fg.procrustes_rotation(W @ Q, W), W, atol=1e-12)
    P = np.eye(3)[[2, 0, 1]] * np.array([1, -1, -1])
    np.testing.assert_allclose((W @ P) @ fg.signed_permutation(W @ P, W), W, atol=1e-12)


def test_align_loadings_removes_rotational_disagreement_between_chains():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(6, 2))
    base = W + 0.05 * rng.normal(size=(4, 100, 6, 2))
    rotated = np.stack([base[c] @ np.linalg.qr(rng.normal(size=(2, 2)))[0] for c in range(4)])
    assert np.nanmax(split_rhat(rotated)) > 2
    aligned, T, ref = fg.align_loadings(rotated, W)
    assert np.nanmax(split_rhat(aligned)) < 1.05
    np.testing.assert_allclose(np.einsum("csij,cskj->csik", T, T)[0, 0], np.eye(2), atol=1e-12)


# ------------------------------------------------------------------ the engine
@pytest.mark.slow
def test_gibbs_posterior_near_ml_and_chains_agree():
    rng = np.random.default_rng(4)
    # a well-conditioned planted structure (no near-Heywood feature, where Gibbs mixes slowly)
    W = np.zeros((8, 2))
    W[:4, 0], W[4:, 1] = rng.uniform(0.6, 1.0, 4), rng.uniform(0.6, 1.0, 4)
    W += 0.2 * rng.normal(size=W.shape)
    psi = rng.uniform(0.3, 0.8, 8)
    model = FactorAnalysis(2, loading_scale=3.0, noise_shape=1.0, noise_scale=0.1)
    X = model.simulate(600, loadings=W, noise_variance=psi, mean=0.0, missing_fraction=0.1, seed=4)["data"]
    # FA Gibbs mixes slowly even after Procrustes alignment: at 4 × 300 draws the rank-normalised R̂ of
    # loadings and noise variances is above 1.01 and the fit says so (the chains agree to split-R̂ < 1.1).
    with pytest.warns(ConvergenceWarning, match="has not converged"):
        post = fit(model, X, method="gibbs", num_chains=4, num_warmup=200, num_samples=300, seed=0, progress=False)
    assert post.samples("loadings").shape == (4, 300, 8, 2)
    assert post.alignment["rule"] == "procrustes" and post.extras["alignment_transforms"].shape == (4, 300, 2, 2)
    for site in ("loadings", "noise_variance", "communalities"):
        assert post.diagnostics["convergence"][site]["r_hat_max"] < 1.1, (site, post.diagnostics["convergence"])
    ml = fit(FactorAnalysis(2), X, method="em")
    cov = lambda Wm, p: Wm @ Wm.T + np.diag(p)  # noqa: E731
    draws = post.samples("loadings")
    post_cov = np.einsum("csik,csjk->ij", draws, draws) / (4 * 300) + np.diag(post.mean("noise_variance"))
    # weak priors and n = 600: posterior mean of the implied covariance within 0.15 of the MLE's
    np.testing.assert_allclose(post_cov, cov(ml.mean("loadings"), ml.mean("noise_variance")), atol=0.15)
    assert post.log_likelihood.shape == (4, 300, 600)
    assert np.isfinite(post.log_likelihood).all()
    assert post.extras["factor_scores"].shape == (600, 2)


def test_gibbs_with_zero_constraints_uses_signed_permutation():
    pattern = np.full((5, 2), np.nan)
    pattern[0, 1] = 0.0
    model = FactorAnalysis(2, constraints=LoadingConstraints.fixed(pattern), **PRIORS)
    X = model.simulate(80, loadings=np.ones((5, 2)) * [1, 0.5], noise_variance=0.3, mean=0.0, seed=0)["data"]
    post = fit(model, X, method="gibbs", num_chains=2, num_warmup=20, num_samples=30, progress=False, warn=False)
    assert post.alignment["rule"] == "signed_permutation"
    assert np.abs(post.samples("loadings")[..., 0, 1]).max() < 1e-12


def test_gibbs_errors():
    X = np.random.default_rng(0).normal(size=(30, 4))
    with pytest.raises(DataError, match="gibbs needs proper priors on the loadings and the noise variances"):
        fit(FactorAnalysis(1), X, method="gibbs")
    with pytest.raises(DataError, match="align must be one of"):
        fit(FactorAnalysis(1, **PRIORS), X, method="gibbs", align="varimax")
    with pytest.raises(DataError, match="align must be one of"):
        fg.align_loadings(np.zeros((1, 2, 4, 1)), np.zeros((4, 1)), rule="oblimin")
    with pytest.raises(DataError, match="model must be a FactorAnalysis"):
        fg.gibbs_factor_analysis(object(), X)
    with pytest.raises(DataError, match="num_samples must be an integer"):
        fit(FactorAnalysis(1, **PRIORS), X, method="gibbs", num_samples=0)


def test_gibbs_runs_with_fewer_rows_than_columns():
    # the priors keep the posterior proper where ML would need regularisation
    model = FactorAnalysis(1, **PRIORS)
    X = model.simulate(6, loadings=np.ones((10, 1)), noise_variance=0.5, mean=0.0, seed=0)["data"]
    with pytest.raises(DataError, match="singular covariance"):
        fit(FactorAnalysis(1), X, method="em")
    post = fit(model, X, method="gibbs", num_chains=2, num_warmup=10, num_samples=10, progress=False, warn=False)
    assert np.isfinite(post.samples("loadings")).all()
