"""The latent-model estimators (issue 13, item 3): clone, Pipeline + GridSearchCV, named columns, and scores
that agree with the engines' own log-likelihoods."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import latentfs
from latentfs.core.data import DataError
from latentfs.core.driver import ConvergenceWarning
from latentfs.inference.dca.estimator import DCA
from latentfs.inference.factor.estimator import FactorAnalyzer
from latentfs.inference.mixture.estimator import (
    GaussianMixtureClusterer,
    LatentClassClusterer,
    LatentProfileClusterer,
)
from latentfs.inference.plsa.estimator import PLSAEstimator

pytestmark = pytest.mark.filterwarnings(f"ignore::{ConvergenceWarning.__module__}.{ConvergenceWarning.__name__}")

ESTIMATORS = [
    DCA(3, alpha=0.5, max_iter=40),
    DCA(2, model="gamma_poisson", max_iter=40),
    PLSAEstimator(2, max_iter=40),
    FactorAnalyzer(1),
    GaussianMixtureClusterer(2, covariance_type="diag"),
    LatentProfileClusterer(2),
    LatentClassClusterer(2),
]


@pytest.fixture(scope="module")
def counts() -> pd.DataFrame:
    X = latentfs.DirichletDCA(3, alpha=0.3).simulate(n_documents=60, n_features=15, doc_length=40, seed=3)["counts"]
    return pd.DataFrame(X, columns=[f"w{j}" for j in range(X.shape[1])])


@pytest.fixture(scope="module")
def blobs() -> np.ndarray:
    return latentfs.GaussianMixture(2, mean_precision=0.02).simulate(120, 3, seed=1)["data"]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_clone_keeps_parameters(estimator):
    copy = clone(estimator)
    assert copy is not estimator
    assert copy.get_params() == estimator.get_params()


def _data_for(estimator, counts, blobs):
    if isinstance(estimator, (DCA, PLSAEstimator)):
        return counts
    if isinstance(estimator, LatentClassClusterer):
        return pd.DataFrame((blobs > np.median(blobs, axis=0)).astype(float), columns=["a", "b", "c"])
    return pd.DataFrame(blobs, columns=["a", "b", "c"])


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_named_columns(estimator, counts, blobs):
    X = _data_for(estimator, counts, blobs)
    est = clone(estimator).fit(X)
    assert list(est.feature_names_in_) == list(X.columns)
    reversed_cols = X[X.columns[::-1]]
    # Reordered columns are matched by name: the same representation, to rounding.
    np.testing.assert_allclose(est.transform(reversed_cols), est.transform(X), rtol=1e-10, atol=1e-12)
    assert est.score(reversed_cols) == pytest.approx(est.score(X), rel=1e-10)
    with pytest.raises(DataError, match=r"missing \['" + X.columns[1] + r"'\]"):
        est.transform(X.drop(columns=X.columns[1]))
    with pytest.raises(DataError, match=r"extra \['zz'\]"):
        est.transform(X.assign(zz=1.0))
    names = est.get_feature_names_out()
    assert len(names) == est.transform(X).shape[1]


def test_set_output_pandas(counts):
    est = DCA(3, max_iter=40).set_output(transform="pandas").fit(counts)
    out = est.transform(counts)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["dca0", "dca1", "dca2"]
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-12)


def test_dca_grid_search_over_n_components(counts):
    # score is the held-out per-token log-likelihood: GridSearchCV picks K by it.
    search = GridSearchCV(Pipeline([("dca", DCA(max_iter=40))]), {"dca__n_components": [1, 3]}, cv=2)
    search.fit(counts)
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all()
    # The corpus has 3 planted components: K=3 predicts held-out tokens better than one word distribution.
    assert search.best_params_ == {"dca__n_components": 3}


def test_gaussian_mixture_grid_search_over_n_components(blobs):
    pipe = Pipeline([("scale", StandardScaler()), ("gm", GaussianMixtureClusterer(covariance_type="diag"))])
    search = GridSearchCV(pipe, {"gm__n_components": [1, 2]}, cv=3).fit(blobs)
    assert search.best_params_ == {"gm__n_components": 2}
    assert search.predict(blobs).shape == (120,)


def test_mixture_scores_match_engine(blobs):
    gm = GaussianMixtureClusterer(2).fit(blobs)
    post = gm.posterior_
    assert gm.score(blobs) == pytest.approx(post.diagnostics["log_likelihood"] / len(blobs), rel=1e-10)
    np.testing.assert_allclose(gm.predict_proba(blobs), post.extras["responsibilities"], atol=1e-10)
    np.testing.assert_array_equal(gm.fit_predict(blobs), gm.labels_)


def test_factor_analyzer_score_matches_engine():
    fa_model = latentfs.FactorAnalysis(1)
    X = fa_model.simulate(150, loadings=[[1.0], [0.9], [0.8], [0.2]], noise_variance=0.3, mean=1.0, seed=2)["data"]
    fa = FactorAnalyzer(1).fit(X)
    rows = fa.posterior_.pointwise_log_likelihood()[0, 0]
    np.testing.assert_allclose(fa.score_samples(X), rows, rtol=1e-9)
    np.testing.assert_allclose(fa.transform(X), fa.posterior_.extras["factor_scores"], rtol=1e-8, atol=1e-10)


def test_dca_transform_is_the_library_fold_in(counts):
    from latentfs.evaluate.heldout import fold_in

    dca = DCA(3, max_iter=40).fit(counts)
    alpha = dca.posterior_.hyperparameters["alpha"]
    np.testing.assert_allclose(dca.transform(counts), fold_in(dca.posterior_, counts.to_numpy(), alpha), rtol=1e-12)


def test_count_estimators_refuse_non_integers(counts):
    with pytest.raises(DataError, match="integer counts"):
        DCA(2, max_iter=5).fit(counts + 0.5)
    with pytest.raises(DataError, match="Negative values"):
        DCA(2, max_iter=5).fit(counts - 1)


# A masked array is no longer a bad container for FactorAnalyzer: its masked entries are missing values
# (issue 31 item 10); estimators that take no missing values refuse it (tests/core/test_issue31_data.py).
@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda: np.array([["2020-01-01"] * 3] * 30, dtype="datetime64[D]"), r"not dates or durations"),
        (lambda: np.zeros(30), r"(?s)X cannot be used by FactorAnalyzer: Expected 2D array.*Pass a 2-D array"),
        (lambda: np.zeros((0, 3)), r"X cannot be used by FactorAnalyzer: Found array with 0 sample"),
    ],
)
def test_estimators_refuse_bad_containers_with_a_data_error(bad, message):
    from latentfs.core.data import DataError

    with pytest.raises(DataError, match=message):
        latentfs.FactorAnalyzer(1).fit(bad())


@pytest.mark.parametrize("which", ["mixture", "factor", "plsa_transformer"])
def test_a_saved_estimator_whose_arrays_disagree_with_its_posterior_is_refused(tmp_path, which):
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(80, 1)) * [1.0, 0.8, 0.6, 0.9] + 0.5 * rng.normal(size=(80, 4))
    if which == "plsa_transformer":
        Y = latentfs.PLSA(2).simulate(40, 12, doc_length=50, seed=1)["counts"]
        est = latentfs.PLSATransformer(2, max_iter=100).fit(Y)
    else:
        est = (latentfs.GaussianMixtureClusterer(2) if which == "mixture" else latentfs.FactorAnalyzer(1)).fit(Y)
    path = est.save(tmp_path / "est")
    np.testing.assert_array_equal(type(est).load(path).transform(Y), est.transform(Y))
    with np.load(path, allow_pickle=False) as f:
        members = {k: f[k] for k in f.files}
    key = next(k for k in members if k.startswith("attr/") and members[k].ndim >= 1)
    members[key] = np.concatenate([members[key], members[key][:1]])  # one extra row
    np.savez(path, **members)
    with pytest.raises(DataError, match=r"is inconsistent: .* is not what its fitted result gives"):
        type(est).load(path)
