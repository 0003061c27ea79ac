"""Variational Bayes for HMMs: the bound never decreases, the bound the engine reports equals
E_q[log p(y, z, θ)] − E_q[log q(z, θ)] computed with the declared Pyro model (statistical tier), the VB
forward–backward with sub-normalised parameters against enumeration (exact tier), and the fitted
distributions in the result."""

import itertools

import numpy as np
import pytest
import torch
from hmmlearn import vhmm
from pyro import poutine
from scipy import stats
from torch import distributions as td

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.hmm import state_marginals, viterbi
from latentfs.inference.hmm.family import prepare
from latentfs.inference.hmm.gibbs import chain_prior
from latentfs.inference.hmm.vb import initial_posterior, vb_step
from latentfs.models.hmm import CategoricalHMM, GaussianHMM, pad_sequences

PARAM_SITES = ("startprob", "transmat", "means", "precision", "emission_probs")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _model(kind: str, k: int = 3):
    if kind == "categorical":
        return CategoricalHMM(k, 4)
    return GaussianHMM(k, covariance_type=kind, mean_precision=0.1)


def _data(kind: str, lengths, seed: int, k: int = 3):
    model = _model(kind, k)
    if kind == "categorical":
        sim = model.simulate(len(lengths), lengths, seed=seed)
    else:
        sim = model.simulate(len(lengths), lengths, 2, seed=seed)
    return sim["data"], np.asarray(sim["lengths"]), sim


@pytest.mark.parametrize("kind", ["diag", "full", "categorical"])
def test_vb_bound_never_decreases(kind):
    X, lens, _ = _data(kind, [120, 45, 80, 2, 150], seed=4)
    res = latentfs.fit(_model(kind), X, method="vb", lengths=lens, n_init=1, seed=0, init="random",
                       max_iter=150, tol=1e-10, warn=False)
    trace = res.trace[0]
    assert trace.size > 5
    # coordinate ascent: non-decreasing up to rounding of a sum of ~400 terms
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:]))
    assert res.diagnostics["bound"] >= trace[-1] - 1e-10 * abs(trace[-1])


# ----------------------------------------------------------------------------- the bound against the Pyro model
def _q_theta(res, kind: str):
    """q(θ) rebuilt from the result as torch distributions (user coordinates)."""
    q = {
        "startprob": td.Dirichlet(torch.as_tensor(res.fitted_params("startprob")["concentration"])),
        "transmat": td.Dirichlet(torch.as_tensor(res.fitted_params("transmat")["concentration"])),
    }
    if kind == "categorical":
        q["emission_probs"] = td.Dirichlet(torch.as_tensor(res.fitted_params("emission_probs")["concentration"]))
        return q
    kappa = torch.as_tensor(res.extras["mean_precision"])
    loc = torch.as_tensor(res.fitted_params("means")["loc"])
    if kind == "full":
        w = torch.linalg.inv(torch.as_tensor(res.extras["precision_scale_inv"]))
        q["precision"] = td.Wishart(torch.as_tensor(res.extras["precision_dof"]), covariance_matrix=w)
        q["means"] = lambda lam: td.MultivariateNormal(loc, precision_matrix=kappa[:, None, None] * lam)
    else:
        gam = res.fitted_params("precision")
        q["precision"] = td.Gamma(torch.as_tensor(gam["concentration"]), torch.as_tensor(gam["rate"]))
        q["means"] = lambda lam: td.Normal(loc, (kappa * lam).rsqrt())
    return q


def _draw(q: dict, gen_seed: int):
    """θ ~ q(θ) and log q(θ)."""
    torch.manual_seed(gen_seed)
    theta, log_q = {}, torch.tensor(0.0, dtype=torch.float64)
    for site in ("startprob", "transmat", "emission_probs", "precision"):
        if site in q:
            if isinstance(q[site], td.Wishart):
                # scipy's Bartlett sampler (torch's Wishart.sample warns of singular draws at small ν)
                scale = q[site].covariance_matrix.numpy()
                draws = [stats.wishart(df=float(v), scale=w).rvs(random_state=gen_seed * 7 + i)
                         for i, (v, w) in enumerate(zip(q[site].df.numpy(), scale, strict=True))]
                theta[site] = torch.as_tensor(np.stack(draws))
            else:
                theta[site] = q[site].sample()
            log_q = log_q + q[site].log_prob(theta[site]).sum()
    if "means" in q:
        law = q["means"](theta["precision"])
        theta["means"] = law.sample()
        log_q = log_q + law.log_prob(theta["means"]).sum()
    return theta, log_q


def _enumerated_q_z(res, lens):
    """Every state path of every sequence with its probability under q(z) (the chain with the engine's
    sub-normalised parameters, normalised here by enumeration), and the entropy of q(z)."""
    log_pi = torch.log(torch.as_tensor(res.extras["startprob_subnormalised"]))
    log_a = torch.log(torch.as_tensor(res.extras["transmat_subnormalised"]))
    log_b = torch.as_tensor(res.extras["expected_log_emission"])
    k = log_pi.shape[0]
    rows, weights, entropy, start = [], [], 0.0, 0
    for s, t_len in enumerate(lens):
        paths = torch.tensor(list(itertools.product(range(k), repeat=int(t_len))))
        t = torch.arange(int(t_len))
        lp = log_pi[paths[:, 0]] + log_b[start + t, paths].sum(1) + log_a[paths[:, :-1], paths[:, 1:]].sum(1)
        logq = lp - torch.logsumexp(lp, 0)
        entropy -= float((logq.exp() * logq).sum())
        rows += [(s, p) for p in paths]
        weights.append(logq.exp())
        start += int(t_len)
    return rows, torch.cat(weights), entropy


def _bound_by_monte_carlo(model, res, X, lens, kind, n_draws: int):
    """Per draw θ_j ~ q(θ): f_j = Σ_z q(z) log p(y, z | θ_j) + log p(θ_j) − log q(θ_j), with log p from the
    Pyro model's trace (every enumerated path a row of the sequence plate); ℒ = mean_j f_j + H(q(z))."""
    rows, weights, entropy = _enumerated_q_z(res, lens)
    seqs, _ = pad_sequences(X, lens, fill=0 if kind == "categorical" else 0.0)
    t_max = int(max(lens))
    data = seqs[[s for s, _ in rows]]
    row_lens = torch.as_tensor([int(lens[s]) for s, _ in rows])
    states = torch.stack([torch.cat([p, p[-1:].expand(t_max - p.shape[0])]) for _, p in rows])
    cond_states = {f"state_{t}": states[:, t] for t in range(t_max)}
    q = _q_theta(res, kind)
    values = []
    for j in range(n_draws):
        theta, log_q = _draw(q, j)
        tr = poutine.trace(poutine.condition(model.model, {**theta, **cond_states})).get_trace(data, row_lens)
        tr.compute_log_prob()
        per_row = sum(tr.nodes[f"{site}_{t}"]["log_prob"] for t in range(t_max) for site in ("state", "data"))
        log_prior = sum(tr.nodes[s]["log_prob"].sum() for s in PARAM_SITES if s in tr.nodes)
        values.append(float((weights * per_row).sum() + log_prior - log_q))
    vals = np.asarray(values)
    return vals.mean() + entropy, vals.std(ddof=1) / np.sqrt(vals.size)


@pytest.mark.parametrize("kind", ["diag", "full", "categorical"])
def test_vb_bound_equals_monte_carlo_expectation_under_the_pyro_model(kind):
    # Statistical tier: the engine's ℒ = Σ log Z̃ − KL(q(θ) ‖ p(θ)) must equal the Monte Carlo estimate of
    # E_q[log p(y, z, θ)] − E_q[log q(θ)] + H(q(z)) within 4 standard errors (normal mean: false-alarm rate
    # 6e-5; fixed seeds, so deterministic here). Two states, three short sequences (K^T paths enumerated).
    # The fit is stopped after two sweeps: at the fixed point q(θ) ∝ exp E_q(z)[log p(y, z, θ)] and the
    # integrand is constant in θ (the check would be exact but blind to the θ-expectations); here it is not.
    X, lens, _ = _data(kind, [4, 3, 6], seed=1, k=2)
    model = _model(kind, 2)
    if kind != "categorical":
        # a prior that does not depend on the data: the Pyro model below sees every sequence many times
        model = GaussianHMM(2, covariance_type=kind, mean_precision=0.1, mean_prior=X.mean(0),
                            covariance_prior=X.var(0))
    res = latentfs.fit(model, X, method="vb", lengths=lens, seed=0, init="random", max_iter=2, warn=False)
    engine = res.diagnostics["bound"]
    assert engine > res.trace[0, -1]  # the reported bound is that of the returned q(θ), one step later
    estimate, se = _bound_by_monte_carlo(model, res, X, lens, kind, n_draws=200)
    assert abs(estimate - engine) < 4 * se, (estimate, se, engine)
    assert se < 0.15  # the check has power: a wrong term of ℒ of half a nat would show


# ----------------------------------------------------------------------------- peer: hmmlearn's variational HMMs
def _run_sweeps(fam, q, pr, n):
    trace = []
    for _ in range(n):
        q, bound = vb_step(fam, q, pr)
        trace.append(bound)
    return q, np.asarray(trace)


def test_categorical_vb_bound_agrees_with_hmmlearn_from_the_same_start():
    # Peer tier: hmmlearn.vhmm.VariationalCategoricalHMM (Beal 2003) from the same q(θ) and priors gives the
    # same bound at every sweep and the same Dirichlet posteriors.
    sim = CategoricalHMM(3, 4).simulate(4, [50, 70, 40, 60], seed=2)
    X, lens = sim["data"], sim["lengths"]
    rng = np.random.default_rng(0)
    q0 = {"start": 1 + 5 * rng.random(3), "trans": 1 + 20 * rng.random((3, 3)), "emission": 1 + 20 * rng.random((3, 4))}
    peer = vhmm.VariationalCategoricalHMM(3, n_features=4, n_iter=12, tol=-np.inf, init_params="")
    peer.startprob_prior_, peer.transmat_prior_, peer.emissionprob_prior_ = np.ones(3), np.ones((3, 3)), np.ones((3, 4))
    peer.startprob_posterior_, peer.transmat_posterior_ = q0["start"].copy(), q0["trans"].copy()
    peer.emissionprob_posterior_ = q0["emission"].copy()
    peer.fit(X[:, None], lens)
    fam = prepare(CategoricalHMM(3), X, lens)
    pr = chain_prior(fam)
    q = {"start": torch.as_tensor(q0["start"]), "trans": torch.as_tensor(q0["trans"]),
         "emission": {"item_concentration": torch.as_tensor(q0["emission"]), "alpha": pr["emission"]["alpha"]}}
    q, trace = _run_sweeps(fam, q, pr, 12)
    np.testing.assert_allclose(trace, peer.monitor_.history, rtol=1e-10)
    np.testing.assert_allclose(q["trans"].numpy(), peer.transmat_posterior_, rtol=1e-10)
    np.testing.assert_allclose(q["emission"]["item_concentration"].numpy(), peer.emissionprob_posterior_, rtol=1e-10)


def test_full_gaussian_vb_bound_agrees_with_hmmlearn_from_the_same_start():
    # Peer tier: hmmlearn.vhmm.VariationalGaussianHMM (full, Normal–Wishart) with our priors and start. Its
    # bound leaves out the constant −N d/2 log 2π of the Gaussian densities (hmmlearn's comment in
    # _compute_subnorm_log_likelihood); with it added back the bounds agree at every sweep.
    X, lens, _ = _data("full", [100, 60, 80, 120], seed=3)
    model = GaussianHMM(3, covariance_type="full")
    fam = prepare(model, X, lens)
    pr = chain_prior(fam)
    q0 = initial_posterior(fam, "kmeans", torch.Generator().manual_seed(0), pr)
    shift, pe, e = fam.emission.shift.numpy(), pr["emission"], q0["emission"]
    peer = vhmm.VariationalGaussianHMM(3, covariance_type="full", n_iter=10, tol=-np.inf, init_params="")
    peer.n_features = 2
    peer.startprob_prior_, peer.transmat_prior_ = pr["start"].numpy(), pr["trans"].numpy()
    peer.means_prior_, peer.beta_prior_ = np.tile(pe["mean"].numpy() + shift, (3, 1)), np.full(3, float(pe["kappa"]))
    peer.dof_prior_, peer.scale_prior_ = np.full(3, float(pe["dof"])), np.tile(pe["scale_inv"].numpy(), (3, 1, 1))
    peer.startprob_posterior_, peer.transmat_posterior_ = q0["start"].numpy().copy(), q0["trans"].numpy().copy()
    peer.means_posterior_, peer.beta_posterior_ = e["mean"].numpy() + shift, e["kappa"].numpy().copy()
    peer.dof_posterior_, peer.scale_posterior_ = e["dof"].numpy().copy(), e["scale_inv"].numpy().copy()
    peer.fit(X, lens)
    q, trace = _run_sweeps(fam, q0, pr, 10)
    constant = -X.size / 2 * np.log(2 * np.pi)
    np.testing.assert_allclose(trace, np.asarray(peer.monitor_.history) + constant, rtol=1e-10)
    np.testing.assert_allclose(q["emission"]["mean"].numpy() + shift, peer.means_posterior_, rtol=1e-8, atol=1e-10)


# ----------------------------------------------------------------------------- the result
def test_vb_result_holds_the_variational_distributions():
    X, lens, sim = _data("diag", [150, 90, 120], seed=7)
    res = latentfs.fit(GaussianHMM(3), X, method="vb", lengths=lens, seed=0)
    assert res.kind() == "distribution" and res.method == "vb"
    assert res.diagnostics["converged"] and res.diagnostics["n_sequences"] == 3
    # Dirichlet rows of A: every draw is a stochastic matrix; the mean is the normalised concentration
    draws = res.samples("transmat", 50)
    np.testing.assert_allclose(draws.sum(-1), 1.0, atol=1e-12)
    conc = res.fitted_params("transmat")["concentration"]
    np.testing.assert_allclose(res.mean("transmat"), conc / conc.sum(1, keepdims=True))
    # q(z)'s marginals are a distribution per row, and decoding with the plug-in means finds the states
    gamma = res.extras["state_marginals"]
    np.testing.assert_allclose(gamma.sum(1), 1.0, atol=1e-12)
    path = viterbi(res, X, lens)
    table = np.zeros((3, 3))
    np.add.at(table, (path, sim["states"]), 1)
    assert table.max(0).sum() / path.size > 0.9  # each true state mostly decoded as one state
    assert state_marginals(res, X, lens).shape == (X.shape[0], 3)
    cat = latentfs.fit(CategoricalHMM(2), *_data("categorical", [40, 30], seed=0, k=2)[:1], method="vb",
                       lengths=[40, 30], seed=0)
    assert cat.kind() == "distribution"
    # full covariances: q(Λ) is stored as the Wishart itself; its mean is ν W
    full = latentfs.fit(GaussianHMM(2, covariance_type="full"), X, method="vb", lengths=lens, seed=0)
    assert full.kind() == "distribution"
    nu, w_inv = full.extras["precision_dof"], full.extras["precision_scale_inv"]
    np.testing.assert_allclose(full.mean("precision"), nu[:, None, None] * np.linalg.inv(w_inv), rtol=1e-8)
    assert full.samples("precision", 3).shape == (1, 3, 2, 2, 2)


def test_vb_posterior_means_approach_the_mle_on_long_chains():
    # Titterington oracle 13 (consistency): with N = 1200 the VB means of A and of the emission means are
    # close to the maximum-likelihood estimate that EM reaches from VB's plug-in point (same labelling).
    X, lens, _ = _data("diag", [600, 600], seed=5)
    vb = latentfs.fit(GaussianHMM(3), X, method="vb", lengths=lens, seed=0, n_init=1, tol=1e-7)
    start = {s: vb.mean(s) for s in ("startprob", "transmat", "means")}
    start["covariance"] = 1.0 / vb.mean("precision")
    em = latentfs.fit(GaussianHMM(3), X, method="em", lengths=lens, init=start)
    assert em.diagnostics["log_likelihood"] >= em.trace[0, 0]
    # within one posterior standard deviation of q (the VB means differ from the MLE by O(1/N))
    sd = vb.fitted_params("means")["scale"]
    assert np.all(np.abs(vb.mean("means") - em.mean("means")) < sd), np.abs(vb.mean("means") - em.mean("means")) / sd
    sd_a = np.sqrt(vb.samples("transmat", 2000, seed=0).var(axis=(0, 1)))
    assert np.all(np.abs(vb.mean("transmat") - em.mean("transmat")) < sd_a)


VB_OPTION_ERRORS = [
    ({"n_init": 0}, r"n_init must be an integer ≥ 1; got 0"),
    ({"max_iter": 10.0}, r"max_iter must be an integer ≥ 1; got 10.0 \(float\)\. Write 10 instead"),
    ({"tol": -1e-3}, r"tol must be a number ≥ 0; got -0.001"),
    ({"seed": -2}, r"seed must be an int ≥ 0"),
    ({"init": "kmeans++"}, r"init must be one of \['kmeans', 'random'\]; got 'kmeans\+\+'\. Did you mean 'kmeans'"),
    ({"init": {"startprob": [0.5, 0.5]}}, r"init must be one of \['kmeans', 'random'\] for VB; got dict"),
]


@pytest.mark.parametrize("opts,match", VB_OPTION_ERRORS, ids=[str(o) for o, _ in VB_OPTION_ERRORS])
def test_vb_option_errors(opts, match):
    X, lens, _ = _data("diag", [30, 20], seed=0, k=2)
    with pytest.raises(DataError, match=match):
        latentfs.fit(GaussianHMM(2), X, method="vb", lengths=lens, **opts)
