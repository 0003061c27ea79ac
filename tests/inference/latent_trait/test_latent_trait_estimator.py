"""LatentTraitAnalyzer (issue 18 item 3): scikit-learn's own estimator checks (all of them, none skipped),
agreement with the engine, coding of the data, and the item-discrimination weights."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils.estimator_checks import _get_check_estimator_ids, estimator_checks_generator

import latentfs
from latentfs.core.data import DataError
from latentfs.core.driver import ConvergenceWarning
from latentfs.datasets import load_rdataset
from latentfs.inference.latent_trait import LatentTraitAnalyzer, discrimination_weights, item_characteristic_curves
from latentfs.models.latent_trait import LatentTrait

# scikit-learn feeds continuous data: n_bins=3 cuts each column at its training terciles (the documented
# opt-in). Few iterations on its tiny random data: stopping early is warned about, correctly, and is not
# what these checks test.
CHECKED = LatentTraitAnalyzer(1, n_bins=3, max_iter=50)


def _check_name(check: object) -> str:
    return getattr(check, "func", check).__name__  # type: ignore[attr-defined]


# The array-API checks skip themselves unless SciPy's array-API mode is on; this estimator computes in
# torch/numpy and does not claim array-API support, so they are not collected (no test skips).
_CHECKS = [
    (est, check)
    for est, check in estimator_checks_generator(CHECKED, mark="xfail")
    if "array_api" not in _check_name(check)
]


@pytest.mark.filterwarnings(f"ignore::{ConvergenceWarning.__module__}.{ConvergenceWarning.__name__}")
@pytest.mark.parametrize("estimator, check", _CHECKS, ids=_get_check_estimator_ids)
def test_sklearn_check(estimator, check):
    check(estimator)


def test_every_check_is_collected():
    assert len(_CHECKS) >= 40


@pytest.fixture(scope="module")
def lsat():
    return load_rdataset("psych", "lsat6")[["Q1", "Q2", "Q3", "Q4", "Q5"]]


def test_estimator_agrees_with_the_engine(lsat):
    lta = LatentTraitAnalyzer(1).fit(lsat)
    post = latentfs.fit(LatentTrait(1), lsat, method="em")
    np.testing.assert_allclose(lta.components_.T, post.mean("discrimination"), rtol=1e-10)
    np.testing.assert_allclose(lta.transform(lsat), post.extras["trait_scores"], atol=1e-10)
    np.testing.assert_allclose(lta.transform_sd(lsat), post.extras["trait_sd"], atol=1e-10)
    # score is the mean marginal log-likelihood per person
    assert lta.score(lsat) == pytest.approx(post.diagnostics["log_likelihood"] / 1000, rel=1e-10)
    assert lta.n_levels_.tolist() == [2] * 5 and lta.get_feature_names_out().tolist() == ["latenttraitanalyzer0"]
    assert list(lta.feature_names_in_) == ["Q1", "Q2", "Q3", "Q4", "Q5"]


def test_ordinal_levels_are_read_from_the_codes_and_missing_answers_are_kept():
    model = LatentTrait(1, n_levels=[3, 4, 3, 2])
    X = model.simulate(300, intercepts=[[1.5, -0.5, 0], [2.0, 0.5, -1.0], [0.5, -1.0, 0], [1.0, 0, 0]],
                       discrimination=[[1.2], [0.8], [1.6], [1.0]], missing_fraction=0.1, seed=0)["items"]
    lta = LatentTraitAnalyzer(1).fit(X)
    assert lta.n_levels_.tolist() == [3, 4, 3, 2]
    assert lta.intercepts_.shape == (4, 3)
    scores = lta.transform(X)
    assert scores.shape == (300, 1) and np.isfinite(scores).all()
    assert np.isfinite(lta.score(X))


def test_vb_method_through_the_estimator(lsat):
    lta = LatentTraitAnalyzer(1, method="vb").fit(lsat)
    assert lta.posterior_.kind("traits") == "distribution"
    assert lta.score(lsat) <= LatentTraitAnalyzer(1).fit(lsat).score(lsat) + 1e-9  # ML is the maximum


@pytest.mark.parametrize(
    "estimator, X, match",
    [
        (LatentTraitAnalyzer(), [[0, 1.5, 1], [1, 0, 1], [0, 1, 0]], "X must hold item codes 0, 1"),
        (LatentTraitAnalyzer(), [[0, 1, 1], [0, 0, 1], [0, 1, 0]], "has one category"),
        (LatentTraitAnalyzer(n_bins=1), [[0, 1, 1], [1, 0, 1], [0, 1, 0]], "n_bins must be an integer ≥ 2"),
        (LatentTraitAnalyzer(method="gibbs"), [[0, 1, 1], [1, 0, 1], [0, 1, 0]], "method must be one of"),
        (LatentTraitAnalyzer(2), [[0, 1, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0]],
         r"n_components=2 \(latent traits\) is more than 3 items can identify"),
        (LatentTraitAnalyzer(n_levels=[3, 3, 3], method="vb"), [[0, 1, 2], [1, 2, 0], [2, 0, 1]],
         "method='vb' .* takes binary items"),
    ],
)
def test_bad_input_is_refused(estimator, X, match):
    with pytest.raises(DataError, match=match):
        estimator.fit(np.asarray(X, dtype=np.float64))


def test_transform_refuses_an_unseen_category():
    X = LatentTrait(1).simulate(100, intercepts=[0, 0, 0], discrimination=[[1.0], [1.0], [1.0]], seed=0)["items"]
    lta = LatentTraitAnalyzer().fit(X)
    with pytest.raises(DataError, match="a category item 1 did not have in fit"):
        lta.transform([[0, 2, 1]])


def test_discrimination_weights_points_and_bootstrap(lsat):
    lta = LatentTraitAnalyzer(1).fit(lsat)
    points = discrimination_weights(lta)
    np.testing.assert_allclose(points.scores, np.abs(lta.components_[0]))
    assert points.draws is None and points.info["band"].startswith("none")
    assert points.top(1) == ["Q3"]  # ltm's largest discrimination (0.89) is item 3
    boot = discrimination_weights(lta, lsat, n_bootstrap=4, seed=0)
    assert boot.draws.shape == (4, 5)
    low, high = boot.band(0.9)
    assert np.all(low <= high)


def test_item_characteristic_curves(lsat):
    post = latentfs.fit(LatentTrait(1), lsat)
    z = np.linspace(-3, 3, 7)
    curves = item_characteristic_curves(post, z)
    assert curves.shape == (7, 5, 2)
    np.testing.assert_allclose(curves.sum(-1), 1.0)
    a, c = post.mean("discrimination")[:, 0], post.mean("intercepts")
    np.testing.assert_allclose(curves[:, :, 1], 1 / (1 + np.exp(-(c[None, :] + z[:, None] * a[None, :]))), rtol=1e-12)
    with pytest.raises(DataError, match=r"z must have shape \(n_points,\) or \(n_points, 1\)"):
        item_characteristic_curves(post, np.zeros((3, 2)))
