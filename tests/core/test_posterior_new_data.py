"""``Posterior.transform/predict/predict_proba/score`` on new data (issue 13, item 3): the result of
``latentfs.fit`` answers like the family's fitted estimator, with columns matched by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import latentfs
from latentfs.core.data import DataError


@pytest.fixture(scope="module")
def counts() -> np.ndarray:
    return np.asarray(latentfs.DirichletDCA(3).simulate(n_documents=40, n_features=12, doc_length=50, seed=0)["counts"])


@pytest.fixture(scope="module")
def continuous() -> np.ndarray:
    rng = np.random.default_rng(0)
    z = rng.normal(size=(80, 1))
    return np.concatenate([z * [1.0, 0.8, 0.6, 0.9] + 0.5 * rng.normal(size=(80, 4))])


def _estimators(counts, continuous):
    binary = (continuous > 0).astype(float)
    return [
        (latentfs.DCA(3, seed=0), counts),
        (latentfs.DCA(3, model="gamma_poisson", seed=0), counts),
        (latentfs.PLSAEstimator(3, seed=0), counts),
        (latentfs.FactorAnalyzer(1), continuous),
        (latentfs.GaussianMixtureClusterer(2), continuous),
        (latentfs.GaussianMixtureClusterer(2, covariance_type="diag", method="vb"), continuous),
        (latentfs.LatentProfileClusterer(2, variance="free"), continuous),
        (latentfs.LatentClassClusterer(2), binary),
        (latentfs.LatentTraitAnalyzer(1), binary),
    ]


@pytest.mark.parametrize("index", range(9))
def test_posterior_answers_like_its_fitted_estimator(counts, continuous, index):
    est, X = _estimators(counts, continuous)[index]
    est.fit(X)
    post = est.posterior_
    np.testing.assert_allclose(post.transform(X[:7]), est.transform(X[:7]), rtol=1e-10, atol=1e-12)
    assert post.score(X) == pytest.approx(est.score(X), rel=1e-10)
    if hasattr(est, "predict"):
        np.testing.assert_array_equal(post.predict(X), est.predict(X))
        np.testing.assert_allclose(post.predict_proba(X), est.predict_proba(X), rtol=1e-10, atol=1e-12)
    else:
        with pytest.raises(DataError, match=r"predict needs a model with labels"):
            post.predict(X)


def test_a_plain_fit_folds_new_documents_in(counts):
    result = latentfs.fit(latentfs.DirichletDCA(3), counts[:30], method="vb", seed=0, warn=False)
    new = result.transform(counts[30:])
    assert new.shape == (10, 3)
    np.testing.assert_allclose(new.sum(1), 1.0, rtol=1e-10)
    assert np.isfinite(result.score(counts[30:]))


def test_columns_are_matched_by_name(counts):
    vocab = [f"word{j}" for j in range(12)]
    frame = pd.DataFrame(counts, columns=vocab)
    result = latentfs.fit(latentfs.DirichletDCA(3), frame.iloc[:30], method="vb", seed=0, warn=False)
    test = frame.iloc[30:]
    reversed_cols = test[vocab[::-1]]
    # before: a DataFrame with reversed columns was accepted and gave proportions off by up to 0.79
    np.testing.assert_allclose(result.transform(reversed_cols), result.transform(test), rtol=1e-12)
    with pytest.raises(DataError, match=r"missing \['word11'\]"):
        result.transform(test[vocab[:-1]])
    with pytest.raises(DataError, match=r"extra \['extra'\]"):
        result.transform(test.assign(extra=1))


def test_generated_names_are_not_names(counts):
    """A fit on a plain array has no names to match: a DataFrame of the right width is taken in order."""
    result = latentfs.fit(latentfs.DirichletDCA(3), counts[:30], method="vb", seed=0, warn=False)
    frame = pd.DataFrame(counts[30:], columns=[f"c{j}" for j in range(12)])
    np.testing.assert_allclose(result.transform(frame), result.transform(counts[30:]), rtol=1e-12)


def test_results_without_an_estimator_say_so():
    model = latentfs.HiddenPotts(2)
    image = np.random.default_rng(0).normal(size=(6, 6))
    result = latentfs.fit(model, image, seed=0)
    with pytest.raises(DataError, match=r"transform, predict and score are not available for HiddenPotts"):
        result.transform(image)
