"""Every public estimator in scikit-learn's machinery: ``clone``, ``Pipeline`` + ``GridSearchCV`` per kind of
estimator, ``AdaBoostClassifier`` over the weak learner, and DataFrame columns matched by name (issue 13).

Data are small and grids have two points, so each search is a few fits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import AdaBoostClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

import latentfs
import latentfs.select
import latentfs.subspace
from latentfs.core.data import DataError, DataWarning
from latentfs.core.driver import ConvergenceWarning

s, sub = latentfs.select, latentfs.subspace

pytestmark = [
    pytest.mark.filterwarnings(f"ignore::{w.__module__}.{w.__name__}") for w in (ConvergenceWarning, DataWarning)
]


def _estimators() -> list:
    return [
        latentfs.HDDA(n_dims=1),
        latentfs.HDDC(2, n_init=1, max_iter=20),
        latentfs.DCAFeatures(latentfs.DirichletDCA(2), fit_options={"max_iter": 30}),
        latentfs.DCAClassifier(2, fit_options={"max_iter": 30}),
        latentfs.MixtureSeparationSelector(latentfs.GaussianMixture(2), n_features_to_select=2),
        latentfs.PLSATransformer(2, max_iter=30),
        s.ForestRelevanceSelector(10, n_null_draws=20),
        s.KernelQAlpha(2, n_components=1),
        s.LeverageScoreSelector(2),
        s.QAlpha(2),
        s.SVMFeatureSelector(4),
        s.SupervisedQAlpha(2),
        s.TextScoreSelector(n_features_to_select=2),
        sub.PLS(2),
        sub.KernelPLS(2),
        sub.RandomProjection(2),
        sub.KernelFeatureMap(5),
        sub.PLSVIPSelector(2, n_bootstrap=10),
        sub.RandomHyperplaneWeakLearner(0.1),
    ]


@pytest.mark.parametrize("estimator", _estimators(), ids=lambda e: type(e).__name__)
def test_clone_keeps_the_parameters(estimator):
    copy = clone(estimator)
    assert type(copy) is type(estimator) and copy is not estimator
    assert copy.get_params().keys() == estimator.get_params().keys()
    for name, value in estimator.get_params(deep=False).items():
        if isinstance(value, (int, float, str, bool, type(None))):
            assert copy.get_params(deep=False)[name] == value


def test_dcafeatures_clone_copies_its_model():
    # issue 13: DCAFeatures could not be cloned (no get_params)
    feats = latentfs.DCAFeatures(latentfs.DirichletDCA(3, alpha=0.3), kind="proportions")
    copy = clone(feats)
    assert copy.model is not feats.model and copy.model.n_components == 3 and copy.kind == "proportions"


# --- data --------------------------------------------------------------------------------------------------
def _classes(n=60, p=6, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = rng.normal(size=(n, p))
    X[:, :2] += 2.5 * y[:, None]
    return X, y


def _counts(n=60, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    probs = np.where(y[:, None] == 0, [0.3, 0.3, 0.1, 0.1, 0.1, 0.1], [0.1, 0.1, 0.3, 0.3, 0.1, 0.1])
    X = np.vstack([rng.multinomial(30, p) for p in probs]).astype(float)
    return X, y


# --- Pipeline + GridSearchCV, one per kind ---------------------------------------------------------------
SELECTORS = [
    (s.QAlpha(), _classes),
    (s.KernelQAlpha(n_components=1), _classes),
    (s.LeverageScoreSelector(scheme="top", n_components=1), _classes),
    (s.SVMFeatureSelector(method="leverage"), _classes),
    (s.SupervisedQAlpha(), _classes),
    (latentfs.MixtureSeparationSelector(latentfs.GaussianMixture(2)), _classes),
    (sub.PLSVIPSelector(2, n_bootstrap=10), _classes),
    (s.TextScoreSelector("chi2"), _counts),
]


@pytest.mark.parametrize("selector, data", SELECTORS, ids=lambda e: type(e).__name__ if hasattr(e, "fit") else "")
def test_selector_in_a_grid_searched_pipeline(selector, data):
    X, y = data()
    pipe = Pipeline([("select", selector), ("clf", LogisticRegression())])
    search = GridSearchCV(pipe, {"select__n_features_to_select": [2, 3]}, cv=2).fit(X, y)
    assert search.best_params_["select__n_features_to_select"] in (2, 3)
    kept = search.best_estimator_[0].get_support()
    assert kept.sum() == search.best_params_["select__n_features_to_select"]
    assert search.best_estimator_[:-1].get_feature_names_out().size == kept.sum()
    assert search.score(X, y) > 0.75  # the two planted features separate the classes


@pytest.mark.parametrize("model, grid", [
    (sub.PLS(), {"n_components": [1, 2]}),
    (sub.KernelPLS(kernel="rbf"), {"kernel_params": [{"gamma": 0.05}, {"gamma": 0.5}], "n_components": [2]}),
], ids=["PLS", "KernelPLS"])
def test_pls_grid_search_by_r2(model, grid):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 5))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=60)
    search = GridSearchCV(model, grid, cv=3).fit(X, y)
    assert search.best_score_ > 0.8  # R² of a nearly linear response


def test_random_projection_and_kernel_map_grid_search():
    X, y = _classes(80, 10)
    rp = GridSearchCV(Pipeline([("rp", sub.RandomProjection(5)), ("clf", LogisticRegression())]),
                      {"rp__kind": ["gaussian", "orthogonal"]}, cv=2).fit(X, y)
    assert rp.score(X, y) > 0.75
    # RandomProjection.score: −mean |distance ratio − 1|; more dimensions keep distances better
    alone = GridSearchCV(sub.RandomProjection(), {"n_components": [2, 9]}, cv=2).fit(X)
    assert alone.best_params_ == {"n_components": 9}
    # KernelFeatureMap.score: −relative Nyström error; more landmarks approximate the kernel better
    fmap = GridSearchCV(sub.KernelFeatureMap(kernel_params={"gamma": 0.1}), {"n_landmarks": [3, 30]}, cv=2).fit(X)
    assert fmap.best_params_ == {"n_landmarks": 30}
    pipe = Pipeline([("map", sub.KernelFeatureMap(20, kernel_params={"gamma": 0.1})), ("clf", LogisticRegression())])
    assert GridSearchCV(pipe, {"map__mapping": ["F1", "F2"]}, cv=2).fit(X, y).score(X, y) > 0.75


def test_weak_learner_in_adaboost_with_sample_weight():
    # issue 13: the weak learner had no sample_weight, so AdaBoost refused it
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    boost = AdaBoostClassifier(sub.RandomHyperplaneWeakLearner(0.1), n_estimators=30, random_state=0)
    search = GridSearchCV(boost, {"n_estimators": [5, 30]}, cv=2).fit(X, y)
    # each learner only needs error ≤ 1/2 − γ/6 (first acceptable random hyperplane); 30 of them reach ~0.8
    assert search.score(X, y) > 0.7
    w = np.where(y == 1, 3.0, 1.0)
    learner = sub.RandomHyperplaneWeakLearner(0.1, seed=0).fit(X, y, sample_weight=w)
    err = np.average(learner.predict(X) != y, weights=w)
    assert err == pytest.approx(learner.training_error_) and err <= 0.5 - 0.1 / 6


def test_forest_selector_grid_over_its_rule():
    X, y = _classes(80, 6)
    pipe = Pipeline([("select", s.ForestRelevanceSelector(20, n_null_draws=20)), ("clf", LogisticRegression())])
    search = GridSearchCV(pipe, {"select__mode": ["thr", "ht"]}, cv=2).fit(X, y)
    assert search.best_estimator_[0].get_support()[:2].all()  # both planted features kept
    assert search.score(X, y) > 0.75


def test_family_estimators_in_grid_searched_pipelines():
    X, y = _classes(60, 6)
    hdda = GridSearchCV(latentfs.HDDA(), {"n_dims": [1, 2]}, cv=2).fit(X, y)
    assert hdda.score(X, y) > 0.85
    labels = Pipeline([("hddc", latentfs.HDDC(2, n_init=1))]).fit_predict(X)
    assert labels.shape == (60,)
    C, yc = _counts(60)
    feats = Pipeline([("dca", latentfs.DCAFeatures(latentfs.DirichletDCA(2), kind="proportions",
                                                   fit_options={"warn": False})),
                      ("clf", LogisticRegression())])
    assert GridSearchCV(feats, {"dca__threshold": [0.01, 0.1]}, cv=2).fit(C, yc).score(C, yc) > 0.8
    clf = GridSearchCV(latentfs.DCAClassifier(2, fit_options={"warn": False}), {"class_tokens": [1, 3]}, cv=2)
    assert clf.fit(C, yc).score(C, yc) > 0.8
    plsa = Pipeline([("plsa", latentfs.PLSATransformer(seed=0, max_iter=100)), ("clf", LogisticRegression())])
    assert GridSearchCV(plsa, {"plsa__n_components": [2, 3]}, cv=2).fit(C, yc).score(C, yc) > 0.8


# --- DataFrame columns matched by name ---------------------------------------------------------------------
def _frame(X, prefix="w"):
    return pd.DataFrame(X, columns=[f"{prefix}{j}" for j in range(X.shape[1])])


TRANSFORMERS = [
    (s.QAlpha(2), _classes),
    (s.LeverageScoreSelector(2, scheme="top", n_components=1), _classes),
    (s.TextScoreSelector("chi2", n_features_to_select=2), _counts),
    (sub.PLS(2), _classes),
    (sub.KernelPLS(2), _classes),
    (sub.RandomProjection(3), _classes),
    (sub.KernelFeatureMap(5), _classes),
    (latentfs.PLSATransformer(2, max_iter=50), _counts),
    (latentfs.DCAFeatures(latentfs.DirichletDCA(2), fit_options={"warn": False}), _counts),
]


@pytest.mark.parametrize("transformer, data", TRANSFORMERS, ids=lambda e: type(e).__name__ if hasattr(e, "fit") else "")
def test_transform_matches_columns_by_name(transformer, data):
    X, y = data()
    frame = _frame(X)
    fitted = clone(transformer).fit(frame, y)
    assert list(fitted.feature_names_in_) == list(frame.columns)
    expected = np.asarray(fitted.transform(frame))
    reordered = frame[frame.columns[::-1]]
    np.testing.assert_allclose(np.asarray(fitted.transform(reordered)), expected, rtol=1e-10, atol=1e-12)
    with pytest.raises(DataError, match=r"missing \['w0'\]"):
        fitted.transform(frame.drop(columns=["w0"]))
    with pytest.raises(DataError, match=r"extra \['surplus'\]"):
        fitted.transform(frame.assign(surplus=1.0))
    names = fitted.get_feature_names_out()
    assert len(names) == expected.shape[1]


def test_selector_set_output_pandas_keeps_the_selected_names():
    X, y = _classes()
    sel = s.QAlpha(2).set_output(transform="pandas").fit(_frame(X), y)
    out = sel.transform(_frame(X))
    assert isinstance(out, pd.DataFrame) and list(out.columns) == list(sel.get_feature_names_out())
