"""Reversible-jump MCMC for univariate Gaussian mixtures (Richardson & Green 1997); Titterington §1.9 oracle 10."""

from __future__ import annotations

import math

import numpy as np
import pyro
import pytest
import torch
from pyro import poutine
from scipy import stats

import latentfs
from latentfs.core.data import DataError
from latentfs.core.driver import InterruptedFitWarning
from latentfs.inference.mixture import reversible_jump as rj
from latentfs.models.mixture import UnivariateMixtureK


def _state(w, mu, s2, z, beta=0.7):
    return rj.RJState(np.asarray(w, float), np.asarray(mu, float), np.asarray(s2, float), np.asarray(z), beta,
                      np.random.default_rng(0))


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(3)
    y = np.concatenate([rng.normal(-2.0, 0.5, 6), rng.normal(1.5, 0.8, 5)])
    model = UnivariateMixtureK(max_components=6)
    return y, model, model.prior(y)


# ----------------------------------------------------------------------------- the model and the map
def test_log_joint_matches_the_pyro_model(small):
    y, model, prior = small
    st = _state([0.2, 0.5, 0.3], [-2.1, 0.3, 1.4], [0.3, 1.2, 0.6], np.arange(y.size) % 3, beta=0.9)
    values = {
        "beta": torch.tensor(st.beta), "weights": torch.tensor(st.w), "means": torch.tensor(st.mu),
        "precision": torch.tensor(1.0 / st.s2), "assignment": torch.tensor(st.z),
    }
    with pyro.poutine.block():
        tr = poutine.trace(poutine.condition(model.model, values)).get_trace(torch.tensor(y), n_components=3)
    expected = float(tr.log_prob_sum())
    assert rj.log_joint(st, y, prior) == pytest.approx(expected, rel=1e-12, abs=1e-9)


def test_split_map_keeps_three_moments_and_its_jacobian_matches_finite_differences():
    x0 = np.array([0.4, 1.3, 0.8, 0.3, 0.6, 0.45])  # w, μ, σ², u1, u2, u3
    w1, w2, m1, m2, v1, v2 = rj.split_parameters(*x0)
    w, mu, s2 = x0[:3]
    assert w1 + w2 == pytest.approx(w)
    assert w1 * m1 + w2 * m2 == pytest.approx(w * mu)
    assert w1 * (m1**2 + v1) + w2 * (m2**2 + v2) == pytest.approx(w * (mu**2 + s2))
    jac = np.empty((6, 6))
    h = 1e-6
    for i in range(6):
        e = np.zeros(6)
        e[i] = h
        jac[:, i] = (rj.split_parameters(*(x0 + e)) - rj.split_parameters(*(x0 - e))) / (2 * h)
    assert rj.split_jacobian(*x0) == pytest.approx(abs(np.linalg.det(jac)), rel=1e-6)


def _log_target_s2(st, y, prior):
    """log π(k, w, μ, σ², z, β | y) up to the constant log p(k): the Pyro model's joint in precisions, times
    k! for the ordering, times |dλ/dσ²| = σ⁻⁴ per component."""
    return rj.log_joint(st, y, prior) + math.lgamma(st.k + 1) - 2.0 * np.log(st.s2).sum()


def test_split_acceptance_ratio_equals_target_ratio_times_proposal_ratio_times_jacobian(small):
    """The closed form of R&G's eq. (11) against π(x')/π(x) from the Pyro-checked joint, the proposal
    probabilities of the merge and the split, and the Jacobian."""
    y, model, prior = small
    sam = rj._Sampler(y, prior, model.max_components, 1.0)
    z = np.where(y < 0, 0, 1)
    st = _state([0.55, 0.45], [-2.0, 1.4], [0.3, 0.7], z)
    j, u = 1, (0.35, 0.4, 0.55)
    new = rj.split_parameters(st.w[j], st.mu[j], st.s2[j], *u)
    members = np.flatnonzero(z == j)
    to2 = np.arange(members.size) % 2 == 1  # any allocation: its probability enters P_alloc
    lp1, lp2, ll = sam._pair_alloc(y[members], new)
    log_palloc = float(np.where(to2, lp2, lp1).sum())
    dll = float(np.where(to2, ll[1], ll[0]).sum() - sam._loglik_terms(y[members], st.mu[j], st.s2[j]).sum())
    l2 = int(to2.sum())
    log_a = sam._log_split_ratio(st.k, st.w[j], st.mu[j], st.s2[j], new, u, members.size - l2, l2, dll, log_palloc,
                                 st.beta)
    z2 = z.copy()
    z2[members[to2]] = j + 1
    st2 = _state(np.r_[st.w[:j], new[0:2]], np.r_[st.mu[:j], new[2:4]], np.r_[st.s2[:j], new[4:6]], z2, st.beta)
    k = st.k
    log_q_merge = math.log(sam.d(k + 1)) - math.log(k)  # choose merge, then one of k adjacent pairs
    log_q_split = (math.log(sam.b(k)) - math.log(k) + stats.beta(2, 2).logpdf(u[0]) + stats.beta(2, 2).logpdf(u[1])
                   + stats.beta(1, 1).logpdf(u[2]) + log_palloc)
    expected = (_log_target_s2(st2, y, prior) - _log_target_s2(st, y, prior) + log_q_merge - log_q_split
                + math.log(rj.split_jacobian(st.w[j], st.mu[j], st.s2[j], *u)))
    assert log_a == pytest.approx(expected, rel=1e-10, abs=1e-9)


def test_birth_acceptance_ratio_equals_target_ratio_times_proposal_ratio_times_jacobian(small):
    y, model, prior = small
    sam = rj._Sampler(y, prior, model.max_components, 1.0)
    z = np.where(y < 0, 0, 2)  # component 1 is empty
    st = _state([0.5, 0.1, 0.4], [-2.0, -0.5, 1.4], [0.3, 0.2, 0.7], z)
    wnew, mnew, s2new = 0.15, 0.6, 0.9
    k, k0 = st.k, 1
    log_a = sam._log_birth_ratio(k, wnew, k0 + 1)
    pos = int(np.searchsorted(st.mu, mnew))
    z2 = z.copy()
    z2[z2 >= pos] += 1
    st2 = _state(np.insert(st.w * (1 - wnew), pos, wnew), np.insert(st.mu, pos, mnew), np.insert(st.s2, pos, s2new),
                 z2, st.beta)
    # proposal density of the birth in (w, μ, σ²): Beta(1, k) × N(ξ, 1/κ) × [Gamma(α, β) of λ = 1/σ²] × σ⁻⁴
    log_q_birth = (math.log(sam.b(k)) + stats.beta(1, k).logpdf(wnew)
                   + stats.norm(prior["xi"], prior["kappa"] ** -0.5).logpdf(mnew)
                   + stats.gamma(prior["alpha"], scale=1 / st.beta).logpdf(1 / s2new) - 2 * math.log(s2new))
    log_q_death = math.log(sam.d(k + 1)) - math.log(k0 + 1)
    expected = (_log_target_s2(st2, y, prior) - _log_target_s2(st, y, prior) + log_q_death - log_q_birth
                + (k - 1) * math.log1p(-wnew))
    assert log_a == pytest.approx(expected, rel=1e-10, abs=1e-9)


# ----------------------------------------------------------------------------- the oracles
def test_prior_recovery_with_the_likelihood_switched_off():
    """With the likelihood of y off the chain must sample the prior: k ~ Uniform{1..4}. The χ² statistic is
    scaled by ESS/draws for the chains' autocorrelation; false-alarm rate 0.001 (3 degrees of freedom)."""
    import arviz as az

    y = np.random.default_rng(0).normal(0.0, 1.0, 8)
    kmax = 4
    post = latentfs.fit(UnivariateMixtureK(max_components=kmax), y, method="rjmcmc", num_chains=2, num_warmup=200,
                        num_samples=800, thin=8, prior_only=True, seed=1, warn=False, progress=False)
    k = post.samples("k")
    counts = np.bincount(k.ravel() - 1, minlength=kmax)
    ess = float(az.ess(k.astype(float)))
    chi2 = stats.chisquare(counts).statistic * min(1.0, ess / k.size)
    assert chi2 < stats.chi2(kmax - 1).ppf(0.999), (counts, ess)
    assert post.diagnostics["acceptance"]["split"] > 0.02 and post.diagnostics["acceptance"]["birth"] > 0.02


def test_three_well_separated_components_give_posterior_mode_three():
    rng = np.random.default_rng(7)
    y = np.concatenate([rng.normal(m, 1.0, 200) for m in (-8.0, 0.0, 8.0)])  # N = 600
    post = latentfs.fit(UnivariateMixtureK(max_components=10), y, method="rjmcmc", num_chains=2, num_warmup=300,
                        num_samples=700, seed=0, warn=False, progress=False)
    kp = post.extras["k_posterior"]
    assert int(np.argmax(kp)) + 1 == 3 and kp[2] > 0.5
    at3 = post.samples("k") == 3
    means = post.samples("means")[at3][:, :3]
    assert np.allclose(np.median(means, axis=0), [-8.0, 0.0, 8.0], atol=0.4)
    assert np.all(np.isnan(post.samples("means")[at3][:, 3:]))


def test_result_shape_chains_and_rhat_on_k():
    y = np.random.default_rng(2).normal(0.0, 1.0, 30)
    post = latentfs.fit(UnivariateMixtureK(max_components=5), y, method="rjmcmc", num_chains=3, num_warmup=20,
                        num_samples=50, seed=0, warn=False, progress=False)
    assert post.samples("k").shape == (3, 50) and post.samples("weights").shape == (3, 50, 5)
    assert post.extras["k_posterior"].sum() == pytest.approx(1.0)
    conv = post.diagnostics["convergence"]["k"]
    assert set(conv) >= {"r_hat_max", "ess_bulk_min"}
    w = post.samples("weights")
    assert np.allclose(np.nansum(w, -1), 1.0)
    mu = post.samples("means")
    filled = ~np.isnan(mu)
    assert np.all(filled.sum(-1) == post.samples("k"))
    for row, k in zip(mu.reshape(-1, 5), post.samples("k").ravel(), strict=True):
        assert np.all(np.diff(row[:k]) > 0)  # R&G's ordering of the means
    dens = rj.predictive_density(post, np.linspace(-8, 8, 1601))
    assert dens.sum() * 0.01 == pytest.approx(1.0, abs=1e-3)


def test_ctrl_c_keeps_the_draws_made_so_far(monkeypatch):
    y = np.random.default_rng(2).normal(0.0, 1.0, 30)
    calls = {"n": 0}
    original = rj._Sampler.sweep

    def sweep(self, st):
        calls["n"] += 1
        if calls["n"] == 75:  # during the second chain
            raise KeyboardInterrupt
        return original(self, st)

    monkeypatch.setattr(rj._Sampler, "sweep", sweep)
    with pytest.warns(InterruptedFitWarning, match="interrupted"):
        post = latentfs.fit(UnivariateMixtureK(max_components=5), y, method="rjmcmc", num_chains=2, num_warmup=10,
                            num_samples=50, seed=0, warn=False, progress=False)
    assert post.diagnostics["interrupted"] is True
    assert post.samples("k").shape == (2, 4)  # truncated to the shorter chain: 74 − 60 sweeps − 10 warm-up


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("data", "options", "match"),
    [
        (np.ones((10, 2)), {}, "univariate"),
        (np.r_[1.0, np.nan, 2.0, 3.0], {}, "NaN"),
        (np.full(10, 3.0), {}, "constant"),
        (np.arange(10.0), {"prior_only": "yes"}, "prior_only must be True or False"),
        (np.arange(10.0), {"init_k": 9}, "init_k"),
        (np.arange(10.0), {"num_chains": 0}, "num_chains"),
    ],
)
def test_bad_input_is_a_data_error(data, options, match):
    with pytest.raises(DataError, match=match):
        latentfs.fit(UnivariateMixtureK(max_components=5), data, method="rjmcmc", num_samples=5, **options)


def test_bad_model_options_are_data_errors():
    with pytest.raises(DataError, match="max_components"):
        UnivariateMixtureK(max_components=0)
    with pytest.raises(DataError, match="n_components"):
        UnivariateMixtureK(4, max_components=3)
    with pytest.raises(DataError, match="precision_shape"):
        UnivariateMixtureK(precision_shape=-1.0)
    with pytest.raises(DataError, match="result must come from"):
        rj.predictive_density(object(), [0.0])
