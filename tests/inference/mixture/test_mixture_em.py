"""EM for mixtures: monotone log-likelihood (every step), closed forms, scikit-learn from the same start,
planted recovery, restarts, and every error message."""

import numpy as np
import pytest
import torch
from scipy.optimize import linear_sum_assignment

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.mixture.em import em_step, family_for, log_joint_components
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

COV_TYPES = ["full", "tied", "diag", "spherical", "tied_diag"]


def _planted_gaussian(ct, n=300, d=3, k=3, seed=0):
    gm = GaussianMixture(k, covariance_type=ct, mean_precision=0.02)
    return gm, gm.simulate(n, d, seed=seed)


@pytest.mark.parametrize("ct", COV_TYPES)
def test_log_likelihood_non_decreasing_every_step(ct):
    gm, sim = _planted_gaussian(ct, seed=1)
    X = sim["data"].copy()
    if gm.allows_missing:
        X[np.random.default_rng(0).uniform(size=X.shape) < 0.1] = np.nan
    # random responsibilities: a poor start, so EM takes many steps
    res = latentfs.fit(gm, X, method="em", init="random", n_init=1, seed=3, tol=1e-12, max_iter=3000)
    trace = res.trace[0]
    assert trace.size > 5
    steps = np.diff(trace)
    assert (steps >= -1e-10 * np.abs(trace[1:])).all(), steps.min()
    assert res.diagnostics["log_likelihood"] >= trace[-1] - 1e-9


@pytest.mark.parametrize(
    "model", [LatentClass(3), LatentClass(2, n_levels=[2, 3, 4, 3])], ids=["binary", "categorical"]
)
def test_latent_class_log_likelihood_non_decreasing(model):
    X = model.simulate(400, 4, seed=2)["items"].copy()
    X[np.random.default_rng(1).uniform(size=X.shape) < 0.1] = np.nan
    X[np.isnan(X).all(1), 0] = 0.0
    res = latentfs.fit(model, X, method="em", init="random", n_init=1, seed=0, tol=1e-10, max_iter=5000)
    steps = np.diff(res.trace[0])
    assert res.trace.shape[1] > 5
    assert (steps >= -1e-10 * np.abs(res.trace[0][1:])).all()


def test_trace_values_are_the_log_likelihood_at_each_iterate():
    gm, sim = _planted_gaussian("full", seed=4)
    fam = family_for(gm, sim["data"])
    seen = []
    latentfs.fit(
        gm, sim["data"], method="em", n_init=1, seed=0, callback=lambda it, state, value: seen.append((state, value))
    )
    # Each iteration is an M-step then an E-step: the value reported with a state is ℓ at that state's
    # parameters (so the kept parameters come with their own log-likelihood, nothing recomputed).
    assert len(seen) > 3
    for state, value in seen:
        ll = float(torch.logsumexp(log_joint_components(fam, state), 1).sum())
        assert ll == pytest.approx(value, rel=1e-12)


def test_single_component_mle_is_sample_mean_and_covariance():
    # Titterington oracle 7: K = 1 gives the sample mean and the (biased) sample covariance.
    X = np.random.default_rng(0).normal(size=(50, 3)) @ np.array([[1, 0.3, 0], [0, 1, 0.5], [0, 0, 2.0]])
    res = latentfs.fit(GaussianMixture(1), X, method="em", reg_covar=0.0, seed=0)
    np.testing.assert_allclose(res.mean("means")[0], X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(res.mean("covariance")[0], np.cov(X.T, bias=True), rtol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("ct", ["full", "tied", "diag", "spherical"])
def test_matches_scikit_learn_from_the_same_start(ct):
    from sklearn.mixture import GaussianMixture as SkGM

    gm, sim = _planted_gaussian(ct, n=400, d=3, k=3, seed=5)
    # Standardised columns: latentfs's floor is reg_covar × each column's variance, scikit-learn's is
    # reg_covar itself; with unit variances the two are the same.
    X = (sim["data"] - sim["data"].mean(0)) / sim["data"].std(0)
    rng = np.random.default_rng(0)
    resp = rng.dirichlet(np.ones(3), size=X.shape[0])
    fam = family_for(gm, X)
    start = fam.export(fam.m_step(torch.as_tensor(resp), 1e-6))
    res = latentfs.fit(gm, X, method="em", init={"responsibilities": resp}, tol=1e-15, max_iter=5000, warn=False,
                       reg_covar=1e-6)
    sk = SkGM(
        3,
        covariance_type=ct,
        tol=1e-14,
        max_iter=5000,
        reg_covar=1e-6,
        weights_init=start["weights"],
        means_init=start["means"],
        precisions_init=start["precision"],
    ).fit(X)
    ours = res.diagnostics["log_likelihood"]
    assert ours == pytest.approx(sk.score(X) * X.shape[0], rel=1e-6)
    order = linear_sum_assignment(np.abs(res.mean("means")[:, None] - sk.means_[None]).sum(-1))[1]
    np.testing.assert_allclose(res.mean("means"), sk.means_[order], rtol=1e-4, atol=1e-6)


def test_recovers_planted_gaussian_mixture():
    means = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    gm = GaussianMixture(3, covariance_type="full")
    sim = gm.simulate(
        1500, 2, params={"means": means, "weights": [0.3, 0.3, 0.4], "precision": np.eye(2)[None].repeat(3, 0)}, seed=0
    )
    res = latentfs.fit(gm, sim["data"], method="em", seed=0)
    est = res.mean("means")
    rows, cols = linear_sum_assignment(np.abs(means[:, None] - est[None]).sum(-1))
    # sd of a component mean ≈ 1/sqrt(450) ≈ 0.05; 0.25 is 5 sd
    np.testing.assert_allclose(est[cols], means, atol=0.25)
    np.testing.assert_allclose(np.sort(res.mean("weights")), [0.3, 0.3, 0.4], atol=0.05)


def test_recovers_planted_latent_class_with_missing_answers():
    probs = np.array([[0.9, 0.9, 0.8, 0.2, 0.5], [0.1, 0.2, 0.2, 0.9, 0.5]])
    lc = LatentClass(2)
    X = lc.simulate(3000, 5, params={"weights": [0.4, 0.6], "item_probs": probs}, seed=0)["items"].copy()
    X[np.random.default_rng(2).uniform(size=X.shape) < 0.2] = np.nan
    X = X[~np.isnan(X).all(1)]
    res = latentfs.fit(lc, X, method="em", seed=0)
    est = res.mean("item_probs")
    if est[0, 0] < est[1, 0]:
        est = est[::-1]
    np.testing.assert_allclose(est, probs, atol=0.05)  # sd ≈ 0.01


def test_categorical_latent_class_recovery():
    lc = LatentClass(2, n_levels=[3, 3, 2, 4])
    probs = np.zeros((2, 4, 4))
    probs[0, :, :2] = [0.85, 0.15]
    probs[1, :, :2] = [0.1, 0.9]
    probs[:, 0, :3] = [[0.8, 0.1, 0.1], [0.1, 0.1, 0.8]]
    probs[:, 3, :4] = [[0.7, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.7]]
    probs[:, 1, :3] = [[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]]
    probs[:, 2, 2:] = 0
    sim = lc.simulate(3000, 4, params={"weights": [0.5, 0.5], "item_probs": probs}, seed=1)
    res = latentfs.fit(lc, sim["items"], method="em", seed=0)
    est = res.mean("item_probs")
    if est[0, 0, 0] < est[1, 0, 0]:
        est = est[::-1]
    np.testing.assert_allclose(est, probs, atol=0.05)


def test_restarts_keep_the_best_run():
    gm, sim = _planted_gaussian("diag", seed=6)
    res = latentfs.fit(gm, sim["data"], method="em", init="random", n_init=4, seed=0)
    restarts = res.diagnostics["restart_objectives"]
    assert len(restarts) == 4
    assert res.trace[0][-1] == pytest.approx(max(restarts))


def test_same_seed_same_result():
    gm, sim = _planted_gaussian("full", seed=7)
    a = latentfs.fit(gm, sim["data"], method="em", seed=11)
    b = latentfs.fit(gm, sim["data"], method="em", seed=11)
    np.testing.assert_array_equal(a.mean("means"), b.mean("means"))


def test_latent_profile_missing_entry_is_ignored_exactly():
    # A row whose only observed entries are kept gives the same log-likelihood as dropping the missing cells.
    lp = LatentProfile(2)
    sim = lp.simulate(50, 3, seed=0)
    X = sim["data"].copy()
    X[0, 2] = np.nan
    fam = family_for(lp, X)
    p = fam.import_({"weights": sim["weights"], "means": sim["means"], "covariance": 1 / sim["precision"]}, 0.0)
    row0 = torch.logsumexp(log_joint_components(fam, p), 1)[0]
    from scipy.stats import norm

    manual = np.logaddexp(
        *[
            np.log(sim["weights"][k])
            + norm.logpdf(X[0, :2], sim["means"][k, :2], 1 / np.sqrt(sim["precision"][:2])).sum()
            for k in range(2)
        ]
    )
    assert float(row0) == pytest.approx(manual, rel=1e-12)


def test_posterior_outputs():
    gm, sim = _planted_gaussian("tied", seed=8)
    res = latentfs.fit(gm, sim["data"], method="em", seed=0)
    assert res.samples("covariance").shape == (1, 1, 3, 3)  # an EM point is one draw, not 200 copies
    assert res.extras["responsibilities"].shape == (300, 3)
    np.testing.assert_allclose(res.extras["responsibilities"].sum(1), 1.0)
    assert res.log_likelihood.shape == (1, 1, 300)
    assert res.log_likelihood.sum() == pytest.approx(res.diagnostics["log_likelihood"])


# --------------------------------------------------------------------------- bad input
def test_singular_covariance_suggests_reg_covar():
    X = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [5.0, 1.0], [6.0, 3.0], [7.0, 2.0]])
    resp = np.array([[1.0, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1]])
    with pytest.raises(DataError, match="reg_covar"):
        latentfs.fit(GaussianMixture(2), X, method="em", reg_covar=0.0, init={"responsibilities": resp})


def test_zero_variance_component_suggests_reg_covar():
    X = np.array([[0.0], [0.0], [3.0], [4.0], [5.0]])
    resp = np.array([[1.0, 0], [1, 0], [0, 1], [0, 1], [0, 1]])
    with pytest.raises(DataError, match="non-positive\\) variance .*reg_covar"):
        latentfs.fit(
            GaussianMixture(2, covariance_type="diag"), X, method="em", reg_covar=0.0, init={"responsibilities": resp}
        )


def test_more_components_than_rows():
    with pytest.raises(DataError, match="n_components must be at most 3"):
        latentfs.fit(GaussianMixture(5), np.random.default_rng(0).normal(size=(3, 2)), method="em")


def test_constant_column():
    X = np.random.default_rng(0).normal(size=(20, 3))
    X[:, 1] = 4.0
    with pytest.raises(DataError, match="constant"):
        latentfs.fit(GaussianMixture(2), X, method="em")
    items = (np.random.default_rng(0).uniform(size=(20, 3)) < 0.5).astype(float)
    items[:, 2] = 1.0
    with pytest.raises(DataError, match="constant"):
        latentfs.fit(LatentClass(2), items, method="em")


def test_all_missing_row_and_column():
    X = np.random.default_rng(0).normal(size=(20, 3))
    X[4] = np.nan
    with pytest.raises(DataError, match="rows that are entirely missing"):
        latentfs.fit(LatentProfile(2), X, method="em")
    X = np.random.default_rng(0).normal(size=(20, 3))
    X[:, 0] = np.nan
    with pytest.raises(DataError, match="columns that are entirely missing"):
        latentfs.fit(GaussianMixture(2, covariance_type="diag"), X, method="em")


def test_missing_values_need_a_diagonal_model():
    X = np.random.default_rng(0).normal(size=(20, 3))
    X[2, 1] = np.nan
    with pytest.raises(DataError, match="must not contain NaN"):
        latentfs.fit(GaussianMixture(2, covariance_type="full"), X, method="em")


def test_latent_class_unseen_levels():
    items = np.array([[0, 1, 2], [1, 0, 1], [2, 1, 0], [0, 0, 3], [1, 1, 1]], dtype=float)
    with pytest.raises(DataError, match="level that was not declared: row 3 column 2 holds 3"):
        latentfs.fit(LatentClass(2, n_levels=3), items, method="em")
    with pytest.raises(DataError, match="binary items must be coded 0/1"):
        latentfs.fit(LatentClass(2), items, method="em")


def test_latent_class_non_integer_codes():
    items = np.array([[0, 1], [1, 0.5], [1, 1], [0, 0]])
    with pytest.raises(DataError, match="item codes 0, 1"):
        latentfs.fit(LatentClass(2), items, method="em")


def test_bad_options():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(DataError, match="init must be one of"):
        latentfs.fit(GaussianMixture(2), X, method="em", init="kmedoids")
    with pytest.raises(DataError, match="n_init must be an integer ≥ 1; got 0"):
        latentfs.fit(GaussianMixture(2), X, method="em", n_init=0)
    with pytest.raises(DataError, match="reg_covar must be a number ≥ 0; got -1"):
        latentfs.fit(GaussianMixture(2), X, method="em", reg_covar=-1.0)
    with pytest.raises(DataError, match="e_step must be one of"):
        latentfs.fit(GaussianMixture(2), X, method="em", e_step="fast")
    with pytest.raises(DataError, match="init\\['responsibilities'\\] must have shape"):
        latentfs.fit(GaussianMixture(2), X, method="em", init={"responsibilities": np.ones((3, 2))})
    with pytest.raises(DataError, match="init must give weights"):
        latentfs.fit(GaussianMixture(2), X, method="em", init={"means": np.zeros((2, 2))})
    with pytest.raises(DataError, match="init must give weights \\(K,\\) and item_probs"):
        latentfs.fit(LatentClass(2), (X > 0).astype(float), method="em", init={"weights": [0.5, 0.5]})


def test_family_for_rejects_other_models():
    with pytest.raises(DataError, match="model must be a GaussianMixture"):
        family_for(object(), np.zeros((3, 2)))


def test_em_step_returns_input_log_likelihood():
    gm, sim = _planted_gaussian("spherical", seed=9)
    fam = family_for(gm, sim["data"])
    p = fam.m_step(torch.full((300, 3), 1 / 3) + torch.rand(300, 3, generator=torch.Generator().manual_seed(0)), 1e-6)
    _, ll = em_step(fam, p, 1e-6)
    assert ll == pytest.approx(float(torch.logsumexp(log_joint_components(fam, p), 1).sum()), rel=1e-14)


def test_save_and_load_round_trip(tmp_path):
    lc = LatentClass(2, n_levels=[2, 3])
    X = lc.simulate(60, 2, seed=0)["items"]
    res = latentfs.fit(lc, X, method="em", seed=0, warn=False)
    back = latentfs.load(res.save(tmp_path / "lc"))
    np.testing.assert_array_equal(back.mean("item_probs"), res.mean("item_probs"))
    assert back.diagnostics["bic"] == res.diagnostics["bic"]
