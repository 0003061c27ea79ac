"""HDDA / HDDC user-facing classes and the Pyro declaration (Bouveyron, Girard & Schmid 2006/2007).

Tiers: exact (full-dimension model == scikit-learn QDA, common full model == LDA, Pyro log density ==
HDDA class density), recovery (planted subspaces and dimensions; peers), bad input with ``match=``.
All data come from fixed seeds; the recovery thresholds hold with margin at these seeds.
"""

import numpy as np
import pyro
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import AutoDelta
from scipy.special import logsumexp
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis
from sklearn.metrics import adjusted_rand_score

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.hdda import numerics as num
from latentfs.inference.hdda.estimators import HDDA, HDDC
from latentfs.models.hdda import HDDAModel, polar_orthonormal

PLANTED = {
    "weights": np.full(3, 1 / 3),
    "noise_variance": np.ones(3),
    "signal_excess": np.array([[40.0, 30, 30, 30], [40, 35, 30, 30], [40, 35, 30, 25]]),
}


def planted(n_train, p, seed, n_test=300, mean_scale=0.15):
    """Three classes with planted subspaces of dimensions (2, 3, 4), a/b >= 26, near-equal means."""
    model = HDDAModel(3, n_dims=[2, 3, 4], mean_scale=mean_scale)
    sim = model.simulate(n_train + n_test, p, seed=seed, values=PLANTED)
    X, y = sim["X"], sim["labels"]
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:], sim


def gaussian_classes(rng, sizes=(40, 50, 60), p=5):
    X = np.vstack([rng.normal(size=(n, p)) @ rng.normal(size=(p, p)) + 3 * i for i, n in enumerate(sizes)])
    return X, np.repeat(np.arange(len(sizes)), sizes)


# ------------------------------------------------------------------------------------------ exact
def test_full_dimension_model_equals_qda(rng):
    # [a_ij b_i Q_i d_i] with d_i = p − 1 reproduces Σ̂_i exactly (the last eigenvalue is b_i): QDA.
    X, y = gaussian_classes(rng)
    Xt = rng.normal(size=(25, 5)) * 3
    qda = QuadraticDiscriminantAnalysis().fit(X, y)
    for model in ("AkjBkQkDk", "FULL"):
        clf = HDDA(model, n_dims=4).fit(X, y)
        np.testing.assert_allclose(clf.predict_proba(Xt), qda.predict_proba(Xt), atol=1e-10)
        np.testing.assert_array_equal(clf.predict(Xt), qda.predict(Xt))


def test_common_subspace_limit_equals_lda(rng):
    # [a_j b Q d] with d = p − 1 reproduces the pooled W exactly: LDA (ML pooled covariance).
    X, y = gaussian_classes(rng)
    Xt = rng.normal(size=(25, 5)) * 3
    lda = LinearDiscriminantAnalysis(solver="lsqr").fit(X, y)
    for model in ("AjBQD", "COM_FULL"):
        clf = HDDA(model, n_dims=4).fit(X, y)
        np.testing.assert_allclose(clf.predict_proba(Xt), lda.predict_proba(Xt), atol=1e-10)


def test_common_orientation_models_share_one_subspace(rng):
    X, y = gaussian_classes(rng, p=6)
    for model in ("AjBQD", "ABQD", "AkjBkQD", "AkBQD"):
        clf = HDDA(model, n_dims=2).fit(X, y)
        q = clf.orientations_
        assert all(np.allclose(qi, q[0]) for qi in q)
    # [a b Q d]: one a, one b for every class
    clf = HDDA("ABQD", n_dims=2).fit(X, y)
    assert np.allclose(np.concatenate(clf.signal_variances_), clf.signal_variances_[0][0])
    assert np.allclose(clf.noise_variances_, clf.noise_variances_[0])


def test_decision_function_is_the_cost_and_posteriors_follow(rng):
    X, y = gaussian_classes(rng)
    clf = HDDA("AkBkQkDk", n_dims=2).fit(X, y)
    K = clf.cost(X)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(proba.argmax(1), K.argmin(1))
    # dense MultivariateNormal: −½(K + p log 2π) = log π_i + log N(x; μ_i, Σ_i)
    i = 1
    mvn = torch.distributions.MultivariateNormal(
        torch.tensor(clf.means_[i]), covariance_matrix=torch.tensor(clf.params_.covariance(i))
    )
    ref = np.log(clf.weights_[i]) + mvn.log_prob(torch.tensor(X)).numpy()
    np.testing.assert_allclose(-0.5 * (K[:, i] + 5 * np.log(2 * np.pi)), ref, rtol=1e-10)


def _condition_values(params):
    return {
        "weights": torch.tensor(params.weights),
        "means": torch.tensor(params.means),
        "noise_variance": torch.tensor(params.noise),
        "signal_excess": torch.tensor(np.stack([a - b for a, b in zip(params.signal, params.noise, strict=True)])),
        "orientation_raw": torch.tensor(np.stack(params.orientations)),
    }


def test_pyro_log_density_equals_hdda_class_density(rng):
    X, y = gaussian_classes(rng)
    params = HDDA("AkjBkQkDk", n_dims=2).fit(X, y).params_
    model = HDDAModel(3, n_dims=2)
    Xt = torch.tensor(rng.normal(size=(20, 5)) * 3)
    z = torch.arange(20) % 3
    values = _condition_values(params)
    lj = num.log_joint(Xt.numpy(), params)
    # labelled form: the trace's log joint of (z, x) equals log π_z f_z(x) summed
    trace = poutine.trace(poutine.condition(model.model, values)).get_trace(Xt, labels=z)
    trace.compute_log_prob()
    data_lp = trace.nodes["X"]["log_prob_sum"] + trace.nodes["labels"]["log_prob_sum"]
    np.testing.assert_allclose(data_lp.item(), lj[np.arange(20), z.numpy()].sum(), rtol=1e-12)
    # collapsed form (what HDDC maximises): log Σ_i π_i f_i(x) per row
    trace = poutine.trace(poutine.condition(model.model, values)).get_trace(Xt)
    np.testing.assert_allclose(trace.nodes["X"]["fn"].log_prob(Xt).numpy(), logsumexp(lj, axis=1), rtol=1e-12)


def test_polar_factor_keeps_orthonormal_input_and_orthonormalises():
    q, _ = np.linalg.qr(np.random.default_rng(3).normal(size=(7, 3)))
    np.testing.assert_allclose(polar_orthonormal(torch.tensor(q)).numpy(), q, atol=1e-12)
    out = polar_orthonormal(torch.tensor(np.random.default_rng(4).normal(size=(7, 3)))).numpy()
    np.testing.assert_allclose(out.T @ out, np.eye(3), atol=1e-12)


def test_simulate_is_seeded_and_scoped():
    model = HDDAModel(2, n_dims=[1, 2])
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = model.simulate(30, 5, seed=7)
    after = torch.rand(1)
    b = model.simulate(30, 5, seed=7)
    assert before.item() == after.item()  # global RNG untouched
    np.testing.assert_array_equal(a["X"], b["X"])
    assert a["signal_variance"].shape == (2, 2) and a["signal_variance"][0, 1] == 0.0
    assert (a["signal_variance"][0, :1] > a["noise_variance"][0]).all()


def test_engine_log_likelihood_equals_pyro_model():
    model = HDDAModel(2, n_dims=1)
    X = model.simulate(80, 4, seed=2)["X"]
    post = latentfs.fit(model, X, method="em", seed=0, n_init=2)
    values = {
        "weights": torch.tensor(post.mean("weights")),
        "means": torch.tensor(post.mean("means")),
        "noise_variance": torch.tensor(post.mean("noise_variance")),
        "signal_excess": torch.tensor(post.mean("signal_variance") - post.mean("noise_variance")[:, None]),
        "orientation_raw": torch.tensor(post.mean("orientation")),
    }
    trace = poutine.trace(poutine.condition(model.model, values)).get_trace(torch.tensor(X))
    lp = trace.nodes["X"]["fn"].log_prob(torch.tensor(X)).numpy()
    np.testing.assert_allclose(post.log_likelihood[0, 0], lp, rtol=1e-10)
    assert post.diagnostics["dims"] == [1, 1]
    assert post.samples("means").shape == (1, 1, 2, 4)  # an EM point is one draw, not 200 copies


@pytest.mark.slow
def test_generic_pyro_map_agrees_with_closed_form():
    # SVI with a point-mass guide on labelled data: MAP ≈ ML with n = 400 (weak priors); tolerance 10%.
    pyro.clear_param_store()
    model = HDDAModel(2, n_dims=1, mean_scale=10.0)
    sim = model.simulate(400, 3, seed=5, values={"noise_variance": [1.0, 2.0], "signal_excess": [[20.0], [10.0]]})
    X, z = torch.tensor(sim["X"]), torch.tensor(sim["labels"])
    ml = HDDA("AkjBkQkDk", n_dims=1).fit(sim["X"], sim["labels"]).params_

    def init(site):
        if site["name"] == "orientation_raw":
            return torch.tensor(np.stack(ml.orientations)) + 0.1
        if site["name"] == "means":
            return torch.tensor(ml.means) + 0.5
        return pyro.infer.autoguide.initialization.init_to_median(site)

    guide = AutoDelta(model.model, init_loc_fn=init)
    svi = SVI(model.model, guide, pyro.optim.Adam({"lr": 0.05}), Trace_ELBO())
    for _ in range(600):
        svi.step(X, labels=z)
    est = guide.median(X, labels=z)
    np.testing.assert_allclose(est["means"].detach().numpy(), ml.means, atol=0.15)
    np.testing.assert_allclose(est["noise_variance"].detach().numpy(), ml.noise, rtol=0.1)
    pyro.clear_param_store()


# ------------------------------------------------------------------------------------------ recovery
def test_planted_dimensions_and_subspaces_are_recovered():
    X, y, _, _, sim = planted(1800, 20, seed=0, n_test=0)
    clf = HDDA("AkjBkQkDk", n_dims="cattell").fit(X, y)
    assert clf.dims_.tolist() == [2, 3, 4]
    clf_bic = HDDA("AkjBkQkDk", n_dims="bic").fit(X, y)
    assert clf_bic.dims_.tolist() == [2, 3, 4]
    for i, d in enumerate([2, 3, 4]):
        truth = sim["orientation"][i][:, :d]
        cosines = np.linalg.svd(truth.T @ clf.orientations_[i], compute_uv=False)
        assert np.arccos(np.clip(cosines.min(), -1, 1)) < 0.1  # largest principal angle, radians


def test_accuracy_matches_qda_and_beats_lda_when_n_much_larger_than_p():
    X, y, Xt, yt, _ = planted(900, 20, seed=1)
    acc = HDDA().fit(X, y).score(Xt, yt)
    acc_qda = QuadraticDiscriminantAnalysis().fit(X, y).score(Xt, yt)
    acc_lda = LinearDiscriminantAnalysis().fit(X, y).score(Xt, yt)
    assert acc >= acc_qda - 0.02
    assert acc > acc_lda + 0.2


def test_n_smaller_than_p_fits_and_beats_peers():
    X, y, Xt, yt, _ = planted(90, 200, seed=2)  # about 30 samples per class, p = 200
    clf = HDDA().fit(X, y)
    acc = clf.score(Xt, yt)
    with pytest.raises(np.linalg.LinAlgError):
        QuadraticDiscriminantAnalysis().fit(X, y)
    acc_lda = LinearDiscriminantAnalysis().fit(X, y).score(Xt, yt)
    assert acc >= 0.9 and acc > acc_lda + 0.2
    assert (clf.dims_ < np.bincount(y) - 1).all()


def test_model_all_picks_lowest_bic_and_reports_every_model(rng):
    X, y, _, _, _ = planted(600, 12, seed=3, n_test=0)
    clf = HDDA("all").fit(X, y)
    assert len(clf.criteria_) == 16
    assert clf.model_ == min(clf.criteria_, key=clf.criteria_.get)
    assert clf.bic() == clf.criteria_[clf.model_]


def test_hddc_recovers_planted_clusters_and_bic_prefers_generating_family():
    model = HDDAModel(3, n_dims=2, mean_scale=5.0)
    sim = model.simulate(450, 15, seed=4, values={"weights": np.full(3, 1 / 3), "noise_variance": [1.0, 2.0, 0.5],
                                                  "signal_excess": [[40.0, 25.0], [30.0, 20.0], [50.0, 10.0]]})
    hc = HDDC(3, ["AkjBkQkD", "ABQD"], n_dims=2, seed=0, n_init=3).fit(sim["X"])
    assert adjusted_rand_score(sim["labels"], hc.labels_) > 0.95
    assert hc.criteria_[("AkjBkQkD", 3)] < hc.criteria_[("ABQD", 3)]
    assert hc.model_ == "AkjBkQkD"
    Xs, ls = hc.sample(50, seed=0)
    assert Xs.shape == (50, 15) and set(np.unique(ls)) <= {0, 1, 2}


def test_hddc_chooses_number_of_components_by_icl():
    model = HDDAModel(2, n_dims=1, mean_scale=8.0)
    X = model.simulate(200, 6, seed=6, values={"weights": [0.5, 0.5]})["X"]
    hc = HDDC([1, 2, 3], "AkBkQkD", n_dims=1, criterion="icl", seed=0, n_init=2).fit(X)
    assert hc.n_components_ == 2
    assert set(hc.criteria_) == {("AkBkQkD", 1), ("AkBkQkD", 2), ("AkBkQkD", 3)}
    assert hc.icl_ >= hc.bic_ - 1e-9


def test_hddc_n_smaller_than_p_runs(rng):
    X, y, _, _, _ = planted(60, 150, seed=7, n_test=0, mean_scale=3.0)
    hc = HDDC(3, "AkBkQkD", n_dims=2, seed=0, n_init=2).fit(X)
    assert np.isfinite(hc.log_likelihood_)
    assert adjusted_rand_score(y, hc.labels_) > 0.8


def test_get_set_params_roundtrip():
    clf = HDDA()
    assert clf.set_params(threshold=0.1).get_params()["threshold"] == 0.1
    assert "HDDA(" in repr(clf)


# ------------------------------------------------------------------------------------------ bad input
def test_class_with_one_sample_is_rejected(rng):
    X = rng.normal(size=(11, 3))
    y = np.array([0] * 10 + [1])
    with pytest.raises(DataError, match="at least 2 samples per class"):
        HDDA().fit(X, y)


def test_dimension_at_least_class_size_is_rejected(rng):
    X = rng.normal(size=(20, 30))
    y = np.repeat([0, 1], 10)
    with pytest.raises(DataError, match=r"n_dims for class 0 must lie in 1\.\.8"):
        HDDA(n_dims=10).fit(X, y)


def test_nan_is_an_error(rng):
    X = rng.normal(size=(20, 3))
    X[4, 1] = np.nan
    with pytest.raises(DataError, match="must not contain NaN for this method; row 4 column 1 is NaN"):
        HDDA().fit(X, np.repeat([0, 1], 10))
    clf = HDDA(n_dims=1).fit(rng.normal(size=(20, 3)), np.repeat([0, 1], 10))
    with pytest.raises(DataError, match="must not contain NaN"):
        clf.predict(X)
    with pytest.raises(DataError, match="must not contain NaN"):
        HDDC(2).fit(X)


def test_labels_unseen_in_prediction_are_rejected(rng):
    X = rng.normal(size=(20, 3))
    clf = HDDA(n_dims=1).fit(X, np.repeat(["a", "b"], 10))
    with pytest.raises(DataError, match=r"labels not seen in fit: \['c'\]"):
        clf.score(X, np.repeat(["a", "c"], 10))
    with pytest.raises(DataError, match="one label per row"):
        clf.score(X, np.repeat(["a", "b"], 5))


def test_other_input_errors(rng):
    X = rng.normal(size=(20, 3))
    y = np.repeat([0, 1], 10)
    clf = HDDA(n_dims=1).fit(X, y)
    with pytest.raises(DataError, match="the 3 features seen in fit"):
        clf.predict(X[:, :2])
    with pytest.raises(DataError, match="not fitted yet"):
        HDDA().predict(X)
    with pytest.raises(DataError, match="has no parameter 'alpha'"):
        HDDA().set_params(alpha=1)
    with pytest.raises(DataError, match="threshold must be finite and positive"):
        HDDA(threshold=-1).fit(X, y)
    with pytest.raises(DataError, match="criterion must be 'bic' or 'icl'"):
        HDDC(2, criterion="aic").fit(X)
    with pytest.raises(DataError, match="n_components must be at most 10"):
        HDDC(11).fit(X)
    with pytest.raises(DataError, match="n_init must be a positive integer"):
        HDDC(2, n_init=0.5).fit(X)


def test_full_model_with_fewer_samples_than_features_says_what_to_use(rng):
    X = rng.normal(size=(20, 30))
    with pytest.raises(DataError, match="singular.*Use a subspace model"):
        HDDA("FULL").fit(X, np.repeat([0, 1], 10))
    with pytest.raises(DataError, match="pooled within-class covariance is singular"):
        HDDA("COM_FULL").fit(X, np.repeat([0, 1], 10))


def test_pyro_model_errors():
    with pytest.raises(DataError, match="n_dims must be positive integers"):
        HDDAModel(2, n_dims=[0, 1])
    with pytest.raises(DataError, match="n_dims must be set"):
        HDDAModel(2).simulate(10, 3)
    with pytest.raises(DataError, match="n_dims must be below the number of features"):
        HDDAModel(2, n_dims=3).simulate(10, 3)
    with pytest.raises(DataError, match="model needs X, or n_samples and n_features"):
        HDDAModel(2, n_dims=1).model()
    with pytest.raises(DataError, match="submodel must be one of"):
        HDDAModel(2, submodel="nope")
