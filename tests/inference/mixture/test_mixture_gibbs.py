"""Gibbs with data augmentation: conjugate blocks tied to the Pyro model (exact), conjugate posterior
moments and exact enumeration (statistical), label switching and planted recovery."""

import itertools

import numpy as np
import pytest
import torch
from scipy.special import betaln, gammaln

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.mixture.em import family_for, log_joint_components, responsibilities
from latentfs.inference.mixture.gibbs import conjugate_posterior, prior_tensors, sample_parameters, sample_wishart
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile
from latentfs.testing import pyro_log_density

COV_TYPES = ["full", "tied", "diag", "spherical", "tied_diag"]


def _onehot(z, k):
    return torch.nn.functional.one_hot(torch.as_tensor(z), k).to(torch.float64)


def _site_values(fam, params):
    """Engine parameters → values of the Pyro model's sites (uncentred)."""
    out = {"weights": params["weights"], "means": params["means"] + fam.shift if "means" in params else None}
    if fam.kind == "categorical":
        ip = torch.as_tensor(fam.to_item_probs(params["probs"]))
        if fam.model.binary:
            return {"weights": params["weights"], "item_probs": ip}
        return {"weights": params["weights"], **{f"item_probs_{i}": ip[:, i, :s] for i, s in enumerate(fam.levels)}}
    prec = params["precision"]
    shape = {
        "full": prec.shape,
        "tied": prec.shape[-2:],
        "diag": prec.shape,
        "spherical": (fam.k, 1),
        "tied_diag": (fam.d,),
    }[fam.covariance_type]
    out["precision"] = prec.reshape(shape)
    return out


def _log_post(fam, post, params):
    """log density of θ under the conjugate posterior (torch distributions)."""
    D = torch.distributions
    lp = D.Dirichlet(post["alpha"]).log_prob(params["weights"])
    if fam.kind == "categorical":
        start = 0
        for s in fam.levels:
            blk = slice(start, start + int(s))
            lp = lp + D.Dirichlet(post["item_concentration"][:, blk]).log_prob(params["probs"][:, blk]).sum()
            start += int(s)
        return lp
    if fam.kind == "wishart":
        prec = params["precision"]
        lp = lp + D.Wishart(post["dof"], precision_matrix=post["scale_inv"]).log_prob(prec).sum()
        lp = (
            lp
            + D.MultivariateNormal(post["mean"], precision_matrix=post["kappa"][:, None, None] * prec)
            .log_prob(params["means"])
            .sum()
        )
        return lp
    lam = params["precision"]
    lp = lp + D.Gamma(post["shape"].expand_as(post["rate"]), post["rate"]).log_prob(lam).sum()
    return lp + D.Normal(post["mean"], (post["kappa"] * lam).rsqrt()).log_prob(params["means"]).sum()


def _log_joint_trace(model, X, z, values):
    zz = torch.as_tensor(z)
    if not (isinstance(model, LatentClass) and not model.binary):
        zz = zz[:, None]
    cond = {**values, "assignment": zz}
    return pyro_log_density(model.model, cond, torch.as_tensor(X))


MODELS = [GaussianMixture(3, covariance_type=ct, mean_precision=0.1) for ct in COV_TYPES] + [
    LatentClass(2),
    LatentClass(3, n_levels=[2, 3, 4]),
]


@pytest.mark.parametrize("model", MODELS, ids=[*COV_TYPES, "lc-binary", "lc-categorical"])
def test_conjugate_block_log_ratio_equals_pyro_log_joint_ratio(model):
    # Exact tier: p(θ | z, y) ∝ p(y, z, θ), so log ratios at two θ agree with the Pyro trace's.
    if isinstance(model, LatentClass):
        X = model.simulate(25, 3, seed=0)["items"].copy()
        X[1, 0] = np.nan
    else:
        X = model.simulate(25, 3, seed=0)["data"].copy()
        if model.allows_missing:
            X[1, 0] = X[3, 2] = np.nan
    fam = family_for(model, X)
    z = np.random.default_rng(0).integers(0, model.n_components, X.shape[0])
    pr = prior_tensors(fam)
    post = conjugate_posterior(fam, fam.statistics(_onehot(z, model.n_components)), pr)
    gen = torch.Generator().manual_seed(0)
    th1, th2 = sample_parameters(fam, post, gen), sample_parameters(fam, post, gen)
    lhs = float(_log_post(fam, post, th1) - _log_post(fam, post, th2))
    rhs = _log_joint_trace(model, X, z, _site_values(fam, th1)) - _log_joint_trace(model, X, z, _site_values(fam, th2))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-8)


def test_assignment_conditional_matches_trace():
    # z_n | θ: log τ_n1 − log τ_n0 equals the trace's log joint ratio when only z_n changes.
    gm = GaussianMixture(2, covariance_type="diag", mean_precision=0.1)
    X = gm.simulate(8, 2, seed=1)["data"]
    fam = family_for(gm, X)
    th = sample_parameters(
        fam,
        conjugate_posterior(fam, fam.statistics(_onehot(np.arange(8) % 2, 2)), prior_tensors(fam)),
        torch.Generator().manual_seed(1),
    )
    resp, _ = responsibilities(log_joint_components(fam, th))
    z0 = np.zeros(8, dtype=np.int64)
    z1 = z0.copy()
    z1[3] = 1
    vals = _site_values(fam, th)
    ratio = _log_joint_trace(gm, X, z1, vals) - _log_joint_trace(gm, X, z0, vals)
    assert float(torch.log(resp[3, 1] / resp[3, 0])) == pytest.approx(ratio, rel=1e-10)


def test_wishart_sampler_moments():
    # Statistical: E[Λ] = ν W; 20000 draws, |z| < 4.5 per entry (false alarm < 1e-4 over 4 entries).
    scale_inv = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    dof = torch.tensor([5.0])
    gen = torch.Generator().manual_seed(0)
    draws = sample_wishart(dof.expand(20000), scale_inv.expand(20000, 2, 2), gen)
    expected = 5.0 * torch.linalg.inv(scale_inv)
    se = draws.std(0) / np.sqrt(20000)
    assert ((draws.mean(0) - expected).abs() / se).max() < 4.5


@pytest.mark.slow
@pytest.mark.parametrize("ct", ["full", "diag", "spherical"])
def test_single_component_gibbs_matches_conjugate_posterior(ct):
    # K = 1: z is trivial, the draws are iid from the Normal–Wishart / Normal–Gamma posterior.
    # |z| < 4.5 per entry over ≤ 12 entries: false alarm ≈ 1e-4.
    gm = GaussianMixture(1, covariance_type=ct)
    X = np.random.default_rng(0).normal(size=(40, 3)) * np.array([1.0, 2.0, 0.5]) + 1.0
    res = latentfs.fit(gm, X, method="gibbs", num_chains=2, num_warmup=0, num_samples=1000, seed=0, progress=False)
    n, d = X.shape
    xbar = X.mean(0)
    prior = gm.prior(X, d)
    kappa = 1.0 + n
    m = (prior["mean"] + n * xbar) / kappa
    prec = res.samples("precision").reshape(2000, -1)
    means = res.samples("means").reshape(2000, -1)
    if ct == "full":
        s = (X - xbar).T @ (X - xbar)
        dev = (xbar - prior["mean"])[:, None]
        w_inv = prior["dof"] * prior["covariance"] + s + n / kappa * dev @ dev.T
        expected_prec = (prior["dof"] + n) * np.linalg.inv(w_inv)
    elif ct == "diag":
        ss = ((X - xbar) ** 2).sum(0) + n / kappa * (xbar - prior["mean"]) ** 2
        expected_prec = (prior["dof"] / 2 + n / 2) / (prior["dof"] * prior["covariance"] / 2 + ss / 2)
    else:
        ss = (((X - xbar) ** 2).sum(0) + n / kappa * (xbar - prior["mean"]) ** 2).sum()
        expected_prec = (prior["dof"] / 2 + n * d / 2) / (prior["dof"] * prior["covariance"].mean() / 2 + ss / 2)
    z_prec = (prec.mean(0) - np.ravel(expected_prec)) / (prec.std(0) / np.sqrt(2000))
    z_mean = (means.mean(0) - m) / (means.std(0) / np.sqrt(2000))
    assert np.abs(z_prec).max() < 4.5
    assert np.abs(z_mean).max() < 4.5


def _exact_latent_class(X, alpha=1.0, c=1.0):
    """p(z | y) by enumerating all 2^n assignments (θ and η integrated out) for K = 2 binary items."""
    n, p = X.shape
    configs = np.array(list(itertools.product([0, 1], repeat=n)))
    logp = []
    for z in configs:
        nk = np.bincount(z, minlength=2)
        lp = gammaln(2 * alpha) - gammaln(2 * alpha + n) + (gammaln(alpha + nk) - gammaln(alpha)).sum()
        for k in range(2):
            ones = X[z == k].sum(0)
            lp += (betaln(c + ones, c + nk[k] - ones) - betaln(c, c)).sum()
        logp.append(lp)
    logp = np.array(logp)
    post = np.exp(logp - logp.max())
    post /= post.sum()
    co01 = post[configs[:, 0] == configs[:, 1]].sum()
    nk = np.stack([(configs == 0).sum(1), (configs == 1).sum(1)], 1)
    a = alpha + nk
    sum_sq_weights = (a * (a + 1)).sum(1) / ((2 * alpha + n) * (2 * alpha + n + 1))
    return co01, float(post @ sum_sq_weights)


@pytest.mark.slow
def test_small_latent_class_against_exact_enumeration():
    # Label-invariant posterior quantities: P(z_0 = z_1 | y) (Rao-Blackwellised from each θ draw) and
    # E[Σ_k η_k² | y]. MC sd ≈ 0.006 with 4 × 3000 correlated draws; tolerance 0.03 (≈ 5 sd, false alarm < 1e-4).
    X = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 0], [0, 1, 0], [1, 1, 1], [0, 0, 1]], dtype=float)
    co_exact, sq_exact = _exact_latent_class(X)
    lc = LatentClass(2)
    res = latentfs.fit(lc, X, method="gibbs", num_chains=4, num_warmup=200, num_samples=3000, seed=0, progress=False)
    fam = family_for(lc, X)
    w = res.samples("weights").reshape(-1, 2)
    ip = res.samples("item_probs").reshape(-1, 2, 3)
    probs = torch.as_tensor(np.stack([1 - ip, ip], -1).reshape(-1, 2, 6))
    lj = torch.log(torch.as_tensor(w))[:, None, :] + torch.einsum("nl,skl->snk", fam.onehot, torch.log(probs))
    tau = torch.softmax(lj, -1).numpy()
    co_gibbs = (tau[:, 0] * tau[:, 1]).sum(-1).mean()
    assert co_gibbs == pytest.approx(co_exact, abs=0.03)
    assert (w**2).sum(-1).mean() == pytest.approx(sq_exact, abs=0.03)


@pytest.mark.slow
def test_planted_mixture_recovered_and_chains_aligned():
    means = np.array([[0.0, 0.0], [5.0, 5.0], [-5.0, 5.0]])
    lp = LatentProfile(3)
    X = lp.simulate(300, 2, params={"means": means, "weights": [0.3, 0.3, 0.4], "precision": [1.0, 1.0]}, seed=0)[
        "data"
    ]
    res = latentfs.fit(lp, X, method="gibbs", num_chains=4, num_warmup=50, num_samples=150, seed=0, progress=False,
                       warn=False)
    assert res.alignment is not None and len(res.alignment["permutations"]) == 4
    # chains settled on different labelings, so the alignment mattered
    assert any(p != [0, 1, 2] for p in res.alignment["permutations"])
    assert res.diagnostics["convergence"]["means"]["r_hat_max"] < 1.05
    est = res.mean("means")
    order = np.argsort(est[:, 0] + 10 * est[:, 1])
    np.testing.assert_allclose(est[order], means[np.argsort(means[:, 0] + 10 * means[:, 1])], atol=0.4)
    assert res.log_likelihood.shape == (4, 150, 300)
    assert res.to_inference_data().posterior["means"].shape == (4, 150, 3, 2)


def test_results_are_reproducible_and_have_sample_stats():
    lc = LatentClass(2, n_levels=3)
    X = lc.simulate(60, 4, seed=0)["items"]
    a = latentfs.fit(lc, X, method="gibbs", num_chains=2, num_warmup=5, num_samples=10, seed=3, progress=False, warn=False)
    b = latentfs.fit(lc, X, method="gibbs", num_chains=2, num_warmup=5, num_samples=10, seed=3, progress=False, warn=False)
    np.testing.assert_array_equal(a.samples("item_probs"), b.samples("item_probs"))
    assert a.sample_stats["total_log_likelihood"].shape == (2, 10)
    assert a.samples("item_probs").shape == (2, 10, 2, 4, 3)


def test_bad_init():
    with pytest.raises(DataError, match="init must be one of"):
        latentfs.fit(LatentClass(2), np.array([[0, 1], [1, 0], [1, 1.0]]), method="gibbs", init="em")
