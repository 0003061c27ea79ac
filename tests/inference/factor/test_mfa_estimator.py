"""MixtureOfFactorAnalyzersClusterer (issue 13 item 3): scikit-learn's own estimator checks, agreement with
``latentfs.fit``, Pipeline / GridSearchCV over n_components, clone, save/load, ``Posterior.transform`` and
bad input."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.factor.estimator import MixtureOfFactorAnalyzersClusterer
from latentfs.models.factor import MixtureOfFactorAnalyzers

# scikit-learn's checks run in tests/core/test_check_estimator.py (the central list).


@pytest.fixture(scope="module")
def blobs():
    W = np.array([[[1.0], [1.0], [0.0], [0.5]], [[0.0], [1.0], [1.0], [-0.5]]])
    sim = MixtureOfFactorAnalyzers(2, 1).simulate(
        240, loadings=W, mean=[[0, 0, 0, 0], [6, 6, 6, 6]], noise_variance=0.2, seed=0
    )
    return sim["data"], sim["assignment"]


def test_agrees_with_fit(blobs):
    X, truth = blobs
    est = MixtureOfFactorAnalyzersClusterer(2, n_factors=1, n_init=2).fit(X)
    post = latentfs.fit(MixtureOfFactorAnalyzers(2, 1), X, method="em", seed=0, n_init=2)
    np.testing.assert_allclose(est.weights_, post.mean("weights"), rtol=1e-10)
    np.testing.assert_allclose(est.components_, post.mean("mean"), rtol=1e-10)
    np.testing.assert_allclose(est.loadings_, post.mean("loadings"), rtol=1e-10)
    np.testing.assert_allclose(est.noise_variance_, post.mean("noise_variance"), rtol=1e-10)
    np.testing.assert_allclose(est.predict_proba(X), post.extras["responsibilities"], atol=1e-10)
    np.testing.assert_allclose(est.transform(X), est.predict_proba(X))
    assert est.score(X) == pytest.approx(post.diagnostics["log_likelihood"] / X.shape[0], rel=1e-10)
    np.testing.assert_array_equal(est.labels_, est.predict(X))
    assert adjusted_rand_score(truth, est.labels_) > 0.95  # label-invariant recovery of the two analysers
    assert est.get_feature_names_out().tolist() == ["mixtureoffactoranalyzersclusterer0", "mixtureoffactoranalyzersclusterer1"]


def test_pipeline_and_grid_search(blobs):
    """GridSearchCV over n_components by held-out log-likelihood per row: two well-separated simulated
    analysers make K=2 win over K=1 (deterministic: fixed seeds)."""
    X, _ = blobs
    pipe = Pipeline([("scale", StandardScaler()), ("mfa", MixtureOfFactorAnalyzersClusterer(n_init=1))])
    grid = GridSearchCV(pipe, {"mfa__n_components": [1, 2]}, cv=KFold(3, shuffle=True, random_state=0)).fit(X)
    assert grid.best_params_ == {"mfa__n_components": 2}
    assert grid.best_estimator_.predict(X).shape == (X.shape[0],)


def test_clone_and_save_load(blobs, tmp_path):
    X, _ = blobs
    est = MixtureOfFactorAnalyzersClusterer(2, n_factors=2, seed=3, n_init=1).fit(X)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "posterior_")
    np.testing.assert_allclose(twin.fit(X).components_, est.components_)
    again = MixtureOfFactorAnalyzersClusterer.load(est.save(tmp_path / "mfa"))
    np.testing.assert_array_equal(again.predict_proba(X), est.predict_proba(X))


def test_posterior_methods_for_mfa_results(blobs):
    X, _ = blobs
    post = latentfs.fit(MixtureOfFactorAnalyzers(2, 1), X, method="em", seed=0, n_init=1)
    est = post.estimator()
    assert isinstance(est, MixtureOfFactorAnalyzersClusterer) and est.n_factors == 1
    np.testing.assert_allclose(post.transform(X[:10]), post.extras["responsibilities"][:10], atol=1e-10)
    np.testing.assert_array_equal(post.predict(X[:10]), post.extras["responsibilities"][:10].argmax(1))
    assert post.score(X) == pytest.approx(post.diagnostics["log_likelihood"] / X.shape[0], rel=1e-10)


def test_bad_input_is_data_error(blobs):
    X, _ = blobs
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        MixtureOfFactorAnalyzersClusterer(2).fit(bad)
    est = MixtureOfFactorAnalyzersClusterer(2, n_init=1).fit(X)
    with pytest.raises(DataError, match="NaN"):
        est.predict(bad)
    with pytest.raises(DataError, match="features"):
        est.predict(X[:, :3])
    with pytest.raises(DataError, match="n_factors"):
        MixtureOfFactorAnalyzersClusterer(2, n_factors=4).fit(X)
