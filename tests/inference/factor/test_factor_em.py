"""EM / MAP for factor analysis and EM for mixtures of factor analysers.

Tiers: exact (E-step and log-likelihood against the Pyro model; monotone objective at every step;
missing-data EM with nothing missing equals plain EM), recovery (planted loadings up to rotation),
peer (scikit-learn FactorAnalysis), and every error message.
"""

import numpy as np
import pytest
import torch
from pyro import poutine

import latentfs.inference.factor.em as fem
import latentfs.inference.factor.mfa as mfa_em
from latentfs import fit
from latentfs.core.data import DataError
from latentfs.inference.factor.gibbs import procrustes_rotation
from latentfs.models.factor import FactorAnalysis, LoadingConstraints, MixtureOfFactorAnalyzers


def _planted(seed=0, d=8, q=2):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(d, q)), rng.uniform(0.2, 0.8, size=d), rng.normal(size=d)


def _data(n=300, seed=0, d=8, q=2, missing=0.0):
    W, psi, mu = _planted(seed, d, q)
    X = FactorAnalysis(q).simulate(n, loadings=W, noise_variance=psi, mean=mu, missing_fraction=missing, seed=seed)
    return X["data"], W, psi, mu


def _params(W, psi, mu):
    return fem.FAParams(torch.tensor(W), torch.tensor(psi), torch.tensor(mu))


def _pyro_log_prob(model, X, params, **kw):
    values = {"loadings": params.loadings, "noise_variance": params.noise_variance, "mean": params.mean}
    tr = poutine.trace(poutine.condition(model.model, values)).get_trace(torch.tensor(X), **kw)
    return float(tr.log_prob_sum())


def _em_trace(model, X, *, use_priors=False, n_steps=60, use_moments=True, variant=None):
    """Run plain EM steps by hand, recording the objective and the parameters at every step."""
    data = fem.prepare_fa_data(X, dtype=torch.float64, device="cpu", use_moments=use_moments)
    floor = torch.full((X.shape[1],), 1e-10)
    spec, var = fem._mstep_spec(model, use_priors, floor)
    p = fem.fa_initial_params(X, model.n_components, init="random", generator=torch.Generator().manual_seed(1),
                              dtype=torch.float64, device="cpu")
    p = fem._project(p, model.constraints)
    objective, states = [], []
    for _ in range(n_steps):
        stats = fem.fa_estep(p, data, use_moments=use_moments)
        objective.append(float(stats.loglik + (fem.fa_log_prior(model, p) if use_priors else 0.0)))
        states.append(p)
        p = fem.fa_mstep(stats, data, p, spec, variant or var)
    return np.array(objective), states


# ------------------------------------------------------------------ exact tier
@pytest.mark.parametrize("missing", [0.0, 0.25])
def test_estep_loglik_equals_pyro_marginal(missing):
    X, W, psi, mu = _data(n=40, missing=missing)
    p = _params(W * 0.7, psi * 1.3, mu + 0.1)
    data = fem.prepare_fa_data(X, dtype=torch.float64, device="cpu")
    stats = fem.fa_estep(p, data)
    want = _pyro_log_prob(FactorAnalysis(2), X, p, integrate_factors=True)
    assert float(stats.loglik) == pytest.approx(want, rel=1e-12)


def test_estep_posterior_moments_match_pyro_joint():
    # exact identity log p(y_o) = log p(y_o, z) − log N(z; E[z|y_o], V_o) at any z, row by row: ties the
    # E-step's posterior mean and covariance to the Pyro joint (factors as a sample site).
    X, W, psi, mu = _data(n=25, missing=0.3)
    p = _params(W, psi, mu)
    data = fem.prepare_fa_data(X, dtype=torch.float64, device="cpu")
    V, Ez, ll_rows = fem.factor_posterior(p, data)
    z = torch.tensor(np.random.default_rng(5).normal(size=(25, 2)))
    values = {"loadings": p.loadings, "noise_variance": p.noise_variance, "mean": p.mean, "factors": z[:, None, :]}
    tr = poutine.trace(poutine.condition(FactorAnalysis(2).model, values)).get_trace(torch.tensor(X))
    joint = float(tr.log_prob_sum())
    Vrow = V[data.pattern_of_row]
    log_post = torch.distributions.MultivariateNormal(Ez, covariance_matrix=Vrow).log_prob(z).sum()
    assert float(ll_rows.sum()) == pytest.approx(joint - float(log_post), rel=1e-12)


def test_moment_and_pattern_estep_agree():
    X, W, psi, mu = _data(n=60)
    p = _params(W, psi, mu + 0.3)
    data = fem.prepare_fa_data(X, dtype=torch.float64, device="cpu")
    a = fem.fa_estep(p, data, use_moments=True)
    b = fem.fa_estep(p, data, use_moments=False)
    torch.testing.assert_close(a.A, b.A, rtol=1e-11, atol=1e-9)
    torch.testing.assert_close(a.B, b.B, rtol=1e-11, atol=1e-9)
    assert float(a.loglik) == pytest.approx(float(b.loglik), rel=1e-12)


@pytest.mark.parametrize(
    "kind", ["complete", "missing", "map", "constrained", "map_constrained_missing"]
)
def test_objective_non_decreasing_every_step(kind):
    # exact: EM/ECM never lowers its objective; checked step by step (tolerance for round-off only)
    missing = 0.2 if "missing" in kind else 0.0
    X, W, psi, mu = _data(n=150, missing=missing)
    pattern = np.full((8, 2), np.nan)
    pattern[0, 1] = 0.0
    pattern[5, 0] = 0.0
    cons = LoadingConstraints.fixed(pattern) if "constrained" in kind else None
    priors = {"loading_scale": 0.7, "noise_shape": 2.0, "noise_scale": 0.5, "mean_scale": 2.0} if "map" in kind else {}
    model = FactorAnalysis(2, constraints=cons, **priors)
    obj, states = _em_trace(model, X, use_priors="map" in kind)
    steps = np.diff(obj)
    assert (steps >= -1e-10 * np.abs(obj[1:])).all(), steps.min()
    assert steps[:5].min() > 0  # and it actually climbs
    if cons is not None:
        assert cons.violation(states[-1].loadings.numpy()) < 1e-10
    if "map" in kind:  # the traced objective is the Pyro log joint with factors integrated
        assert obj[-1] == pytest.approx(_pyro_log_prob(model, X, states[-1], integrate_factors=True), rel=1e-12)


@pytest.mark.parametrize("acceleration", ["none", "squarem"])
def test_engine_trace_non_decreasing(acceleration):
    X, *_ = _data(n=200, missing=0.15)
    post = fit(FactorAnalysis(2), X, method="em", acceleration=acceleration, tol=1e-10, max_iter=3000)
    tr = post.trace[0]
    assert (np.diff(tr) >= -1e-10 * np.abs(tr[1:])).all()
    assert post.diagnostics["converged"]
    ll = _pyro_log_prob(FactorAnalysis(2), X, _params(*(post.mean(s) for s in ("loadings", "noise_variance", "mean"))),
                        integrate_factors=True)
    assert post.diagnostics["log_likelihood"] == pytest.approx(ll, rel=1e-12)
    assert post.log_likelihood.sum() == pytest.approx(ll, rel=1e-12)


def test_missing_data_em_with_nothing_missing_equals_plain_em():
    # exact: the per-pattern (zero-precision) E-step on complete data gives the iterates of plain EM
    X, *_ = _data(n=120)
    model = FactorAnalysis(2)
    obj_a, st_a = _em_trace(model, X, use_moments=True)
    obj_b, st_b = _em_trace(model, X, use_moments=False)
    np.testing.assert_allclose(obj_a, obj_b, rtol=1e-12)
    np.testing.assert_allclose(st_a[-1].loadings.numpy(), st_b[-1].loadings.numpy(), rtol=1e-9, atol=1e-11)
    # and plain Rubin–Thayer EM on centred data (μ fixed at ȳ) from the same start
    Xc = X - X.mean(0)
    W, psi = st_a[0].loadings.numpy(), st_a[0].noise_variance.numpy()
    np.testing.assert_allclose(st_a[0].mean.numpy(), X.mean(0), rtol=1e-12)
    S = Xc.T @ Xc / X.shape[0]
    for _ in range(len(st_a) - 1):
        beta = W.T @ np.linalg.inv(W @ W.T + np.diag(psi))
        Ezz = np.eye(2) - beta @ W + beta @ S @ beta.T
        W_new = S @ beta.T @ np.linalg.inv(Ezz)
        psi = np.diag(S - W_new @ beta @ S).copy()
        W = W_new
    np.testing.assert_allclose(st_a[-1].loadings.numpy(), W, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(st_a[-1].noise_variance.numpy(), psi, rtol=1e-8)
    # the engines agree too
    a = fit(model, X, method="em", use_moments=True, acceleration="none", max_iter=300, warn=False)
    b = fit(model, X, method="em", use_moments=False, acceleration="none", max_iter=300, warn=False)
    np.testing.assert_allclose(a.trace, b.trace, rtol=1e-11)


def test_missing_value_content_is_ignored():
    X, *_ = _data(n=80, missing=0.2)
    nan = np.isnan(X)
    data = fem.prepare_fa_data(X, dtype=torch.float64, device="cpu")
    p = _params(*_planted())
    a = fem.fa_estep(p, data)
    data.values[torch.as_tensor(nan)] = 123.0  # garbage written into missing entries of the prepared data
    data.values.mul_(torch.as_tensor(~nan, dtype=torch.float64))  # the engine's contract: zeros there
    b = fem.fa_estep(p, data)
    assert float(a.loglik) == float(b.loglik)


def test_map_limits():
    X, *_ = _data(n=200)
    ml = fit(FactorAnalysis(2), X, method="em", tol=1e-11, max_iter=5000)
    weak = fit(FactorAnalysis(2, loading_scale=1e4), X, method="map", tol=1e-11, max_iter=5000)
    # a very wide prior gives back the ML fit (prior oracle λ → 0); compare rotation-invariant W Wᵗ
    WW = lambda p: p.mean("loadings") @ p.mean("loadings").T  # noqa: E731
    np.testing.assert_allclose(WW(weak), WW(ml), atol=1e-4)
    strong = fit(FactorAnalysis(2, loading_scale=1e-4), X, method="map", tol=1e-10, max_iter=2000, warn=False)
    assert np.abs(strong.mean("loadings")).max() < 1e-3  # λ → ∞ pulls W to the prior mean 0
    np.testing.assert_allclose(strong.mean("noise_variance"), X.var(0), rtol=1e-3)


def test_constrained_fit_recovers_confirmatory_structure():
    rng = np.random.default_rng(3)
    W = np.zeros((8, 2))
    W[:4, 0] = rng.uniform(0.7, 1.2, 4)
    W[4:, 1] = rng.uniform(0.7, 1.2, 4)
    X = FactorAnalysis(2).simulate(2000, loadings=W, noise_variance=0.3, mean=0.0, seed=1)["data"]
    pattern = np.where(W == 0, 0.0, np.nan)
    post = fit(FactorAnalysis(2, constraints=LoadingConstraints.fixed(pattern)), X, method="em", tol=1e-10)
    est = post.mean("loadings") * np.sign(post.mean("loadings").sum(0))
    np.testing.assert_allclose(est, W, atol=0.08)
    assert np.abs(est[W == 0]).max() < 1e-12


# ------------------------------------------------------------------ recovery and peer tiers
@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_recovers_planted_loadings_up_to_rotation(missing):
    X, W, psi, mu = _data(n=4000, seed=2, d=10, q=3, missing=missing)
    post = fit(FactorAnalysis(3), X, method="em", tol=1e-10)
    est = post.mean("loadings")
    aligned = est @ procrustes_rotation(est, W)
    # sampling error of loadings at n = 4000 is ≈ 0.02; 0.12 leaves room for 30% missing
    np.testing.assert_allclose(aligned, W, atol=0.12)
    # λ_j's sampling error grows with the column's variance (up to 8.4 here): compare on that scale
    total = (W**2).sum(1) + psi
    assert (np.abs(post.mean("noise_variance") - psi) < 0.04 * total).all()
    np.testing.assert_allclose(post.mean("mean"), mu, atol=0.1)
    scores = post.extras["factor_scores"]
    assert scores.shape == (4000, 3) and post.extras["communalities"].shape == (10,)


def test_loglik_equals_scikit_learn_at_convergence():
    from sklearn.decomposition import FactorAnalysis as SkFA

    X, *_ = _data(n=500, seed=4, d=12, q=3)
    start = np.ones(12)  # scikit-learn's default start for the noise variances
    sk = SkFA(3, tol=1e-12, max_iter=20000, svd_method="lapack", noise_variance_init=start).fit(X)
    ours = fit(FactorAnalysis(3), X, method="em", tol=1e-13, max_iter=20000,
               init={"loadings": sk.components_.T * 0 + 0.1, "noise_variance": start})
    sk_ll = sk.score(X) * X.shape[0]
    assert ours.diagnostics["log_likelihood"] == pytest.approx(sk_ll, rel=1e-9)
    np.testing.assert_allclose(ours.mean("noise_variance"), sk.noise_variance_, rtol=1e-4)
    np.testing.assert_allclose(ours.mean("loadings") @ ours.mean("loadings").T,
                               sk.components_.T @ sk.components_, atol=1e-4)


# ------------------------------------------------------------------ mixtures of factor analysers
def _mfa_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(2, 6, 1))
    mu = np.stack([np.zeros(6), np.full(6, 6.0)])
    mfa = MixtureOfFactorAnalyzers(2, 1)
    sim = mfa.simulate(n, loadings=W, mean=mu, noise_variance=0.2, weights=[0.4, 0.6], seed=seed)
    return sim, W, mu


def test_mfa_estep_matches_pyro_and_is_monotone():
    sim, W, mu = _mfa_data()
    X = torch.tensor(sim["data"])
    params = mfa_em.MFAParams(torch.tensor([0.5, 0.5]), torch.tensor(mu + 0.5), torch.tensor(W * 0.5),
                           torch.full((6,), 0.5))
    _, _, ll = mfa_em.mfa_estep(params, X)
    values = {"weights": params.weights, "mean": params.means, "loadings": params.loadings,
              "noise_variance": params.noise_variance}
    conditioned = poutine.condition(MixtureOfFactorAnalyzers(2, 1).model, values)
    tr = poutine.trace(conditioned).get_trace(X, integrate_latents=True)
    assert float(ll) == pytest.approx(float(tr.log_prob_sum()), rel=1e-12)
    lls = []
    for _ in range(40):
        stats, _, ll = mfa_em.mfa_estep(params, X)
        lls.append(float(ll))
        params = mfa_em.mfa_mstep(stats, (X * X).sum(0), X.shape[0], torch.full((6,), 1e-10))
    steps = np.diff(lls)
    assert (steps >= -1e-10 * np.abs(lls[1:])).all()


def test_mfa_recovers_planted_mixture_with_restarts():
    sim, W, mu = _mfa_data(n=1500)
    post = fit(MixtureOfFactorAnalyzers(2, 1), sim["data"], method="em", seed=0, n_init=3)
    order = np.argsort(post.mean("mean")[:, 0])
    np.testing.assert_allclose(post.mean("weights")[order], [0.4, 0.6], atol=0.04)
    np.testing.assert_allclose(post.mean("mean")[order], mu, atol=0.15)
    for k, j in enumerate(order):
        Wk = post.mean("loadings")[j]
        np.testing.assert_allclose(Wk @ Wk.T, W[k] @ W[k].T, atol=0.25)
    tr = post.trace[0]
    assert (np.diff(tr) >= -1e-10 * np.abs(tr[1:])).all()
    lls = post.diagnostics["restart_objectives"]
    assert len(lls) == 3 and post.diagnostics["log_likelihood"] >= max(lls) - 1e-6 * abs(max(lls))
    resp = post.extras["responsibilities"]
    agree = (resp.argmax(1) == order[sim["assignment"]]).mean()
    assert agree > 0.99


def test_mfa_with_one_component_is_factor_analysis():
    X, *_ = _data(n=300)
    fa = fit(FactorAnalysis(2), X, method="em", tol=1e-12, max_iter=20000)
    mfa = fit(MixtureOfFactorAnalyzers(1, 2), X, method="em", n_init=1, tol=1e-12, max_iter=20000)
    assert mfa.diagnostics["log_likelihood"] == pytest.approx(fa.diagnostics["log_likelihood"], rel=1e-7)


# ------------------------------------------------------------------ bad input
def test_error_singular_covariance_suggests_regularisation():
    X, *_ = _data(n=100)
    X = np.column_stack([X, X[:, 0] + X[:, 1]])
    with pytest.raises(DataError, match="singular covariance matrix.*linear combinations.*regularization=1e-3"):
        fit(FactorAnalysis(2), X, method="em")
    post = fit(FactorAnalysis(2), X, method="em", regularization=1e-3, max_iter=200, warn=False)
    assert np.isfinite(post.diagnostics["log_likelihood"])
    with pytest.raises(DataError, match=r"singular covariance matrix.*fewer rows \(5\) than columns"):
        fit(FactorAnalysis(2), np.random.default_rng(0).normal(size=(5, 8)), method="em")


def test_error_too_many_factors_or_components():
    X, *_ = _data(n=50)
    with pytest.raises(DataError, match="n_components must be at most 7 .one less than the number of features"):
        fit(FactorAnalysis(8), X, method="em")
    with pytest.raises(DataError, match="n_components must be at most 3 .the number of samples, 3"):
        fit(FactorAnalysis(4), X[:3], method="em", regularization=1e-3)
    with pytest.raises(DataError, match="n_components must be at most 3 .the number of samples, 3"):
        fit(MixtureOfFactorAnalyzers(4, 1), X[:3], method="em")
    with pytest.raises(DataError, match="n_factors must be at most 7"):
        fit(MixtureOfFactorAnalyzers(2, 8), X, method="em")


def test_error_constant_columns_and_missing_rows_columns():
    X, *_ = _data(n=50)
    Xc = X.copy()
    Xc[:, 2] = 1.0
    with pytest.raises(DataError, match="constant .zero-variance. column"):
        fit(FactorAnalysis(2), Xc, method="em")
    with pytest.raises(DataError, match="constant .zero-variance. column"):
        fit(MixtureOfFactorAnalyzers(2, 1), Xc, method="em")
    Xr = X.copy()
    Xr[4] = np.nan
    with pytest.raises(DataError, match=r"rows that are entirely missing \(rows \[4\]\)"):
        fit(FactorAnalysis(2), Xr, method="em")
    Xk = X.copy()
    Xk[:, 6] = np.nan
    with pytest.raises(DataError, match=r"columns that are entirely missing \(columns \[6\]\)"):
        fit(FactorAnalysis(2), Xk, method="em")
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(DataError, match="must not contain NaN for this method"):
        fit(MixtureOfFactorAnalyzers(2, 1), Xn, method="em")
    with pytest.raises(DataError, match="at least 2 features"):
        fit(FactorAnalysis(1), X[:, :1], method="em")


def test_error_options():
    X, *_ = _data(n=50)
    fa = FactorAnalysis(2)
    with pytest.raises(DataError, match="init must be 'pca', 'random' or a dict"):
        fit(fa, X, method="em", init="svd")
    with pytest.raises(DataError, match=r"init must hold 'loadings' and 'noise_variance'; missing \['noise_var"):
        fit(fa, X, method="em", init={"loadings": np.ones((8, 2))})
    with pytest.raises(DataError, match=r"init\['loadings'\] must have shape \(8, 2\)"):
        fit(fa, X, method="em", init={"loadings": np.ones((8, 1)), "noise_variance": 1.0})
    with pytest.raises(DataError, match="acceleration must be one of"):
        fit(fa, X, method="em", acceleration="anderson")
    with pytest.raises(DataError, match="regularization must be finite and positive"):
        fit(fa, X, method="em", regularization=-1.0)
    with pytest.raises(DataError, match="constraints must have one block per feature .8.; got 3"):
        fit(FactorAnalysis(2, constraints=LoadingConstraints.fixed(np.full((3, 2), np.nan))), X, method="em")
    with pytest.raises(DataError, match="model must be a FactorAnalysis"):
        fem.em_factor_analysis(MixtureOfFactorAnalyzers(1, 1), X)
    with pytest.raises(DataError, match="model must be a MixtureOfFactorAnalyzers"):
        mfa_em.em_mixture_of_factor_analyzers(fa, X)
    with pytest.raises(DataError, match=r"n_init must be an integer ≥ 1; got 0"):
        fit(MixtureOfFactorAnalyzers(2, 1), X, method="em", n_init=0)
    with pytest.raises(DataError, match="became singular during EM .* Heywood case.*regularization=1e-3"):
        fit(fa, X, method="em", init={"loadings": np.full((8, 2), 1e300), "noise_variance": 1.0})


def test_posterior_roundtrip(tmp_path):
    X, *_ = _data(n=60, missing=0.1)
    post = fit(FactorAnalysis(2), X, method="em")
    back = type(post).load(post.save(tmp_path / "fa"))
    np.testing.assert_array_equal(back.mean("loadings"), post.mean("loadings"))
    np.testing.assert_array_equal(back.extras["factor_scores"], post.extras["factor_scores"])
    assert back.samples("loadings").shape == (1, 1, 8, 2)  # a point estimate is one draw, not 200 copies


def test_trace_has_one_entry_per_iteration():
    # the engine's trace is the driver's: one entry per iteration, the last is the converged objective
    X, *_ = _data(n=60)
    post = fit(FactorAnalysis(2), X, method="em", acceleration="none", tol=1e-12, max_iter=4000)
    assert post.trace.shape == (1, post.diagnostics["n_iter"])
    assert post.diagnostics["log_likelihood"] >= post.trace[0, -1]
