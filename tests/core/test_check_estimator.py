"""scikit-learn's own estimator checks over every public estimator of latentfs (issue 13, item 3).

The latent-model estimators on :class:`latentfs.core.estimator.LatentEstimator` run every check of
``parametrize_with_checks`` with small, fast options. The estimators written before that base are listed
in :data:`NOT_YET_CONFORMING` with the check at which scikit-learn stops; the test over that list fails as
soon as one of them passes, so that it is moved into :data:`CONFORMING` and checked in full.

The count models (DCA, PLSA) take integer counts; scikit-learn's checks feed non-negative reals, so they
are checked with ``non_integer="round"`` (the documented opt-in).
"""

from __future__ import annotations

import warnings

import pytest
from sklearn.utils.estimator_checks import _get_check_estimator_ids, check_estimator, estimator_checks_generator

import latentfs
import latentfs.select
import latentfs.subspace
from latentfs.core.driver import ConvergenceWarning
from latentfs.inference.dca.estimator import DCA
from latentfs.inference.factor.em import HeywoodWarning
from latentfs.inference.factor.estimator import FactorAnalyzer
from latentfs.inference.mixture.em import CollapsedComponentWarning
from latentfs.inference.mixture.estimator import (
    GaussianMixtureClusterer,
    LatentClassClusterer,
    LatentProfileClusterer,
)
from latentfs.inference.plsa.estimator import PLSAEstimator

# Few iterations on scikit-learn's tiny random data: a fit that stops early, a mixture component that
# collapses onto tied rows and a Heywood case are warned about, correctly, and are not what these checks test.
pytestmark = [
    pytest.mark.filterwarnings(f"ignore::{w.__module__}.{w.__name__}")
    for w in (ConvergenceWarning, CollapsedComponentWarning, HeywoodWarning)
]

CONFORMING = [
    DCA(2, max_iter=30, non_integer="round"),
    DCA(2, model="gamma_poisson", max_iter=30, non_integer="round"),
    PLSAEstimator(2, max_iter=30, non_integer="round"),
    FactorAnalyzer(1, max_iter=200),
    GaussianMixtureClusterer(2, max_iter=50, n_init=1),
    LatentProfileClusterer(2, max_iter=50, n_init=1),
]

# Expected failures, at most two per estimator, with the reason.
EXPECTED_FAILED: dict[str, dict[str, str]] = {}


def _expected_failed(estimator: object) -> dict[str, str]:
    return EXPECTED_FAILED.get(type(estimator).__name__, {})


def _check_name(check: object) -> str:
    return getattr(check, "func", check).__name__  # type: ignore[attr-defined]


# scikit-learn's array-API checks skip themselves unless SciPy's array-API mode is on; these estimators
# compute in torch/numpy and do not claim array-API support, so those checks are not collected at all
# (a skip in CI would hide nothing, but the rule here is that no test skips).
_CHECKS = [
    (estimator, check)
    for estimator in CONFORMING
    for estimator, check in estimator_checks_generator(
        estimator, expected_failed_checks=_expected_failed(estimator), mark="xfail"
    )
    if "array_api" not in _check_name(check)
]


@pytest.mark.parametrize("estimator, check", _CHECKS, ids=_get_check_estimator_ids)
def test_sklearn_check(estimator, check):
    check(estimator)


def _not_yet_conforming() -> dict[str, object]:
    s, sub = latentfs.select, latentfs.subspace
    return {
        "HDDA": latentfs.HDDA(),
        "HDDC": latentfs.HDDC(2, n_init=1, max_iter=20),
        "DCAFeatures": latentfs.DCAFeatures(latentfs.DirichletDCA(2), fit_options={"max_iter": 20}),
        "DCAClassifier": latentfs.DCAClassifier(2, fit_options={"max_iter": 20}),
        "MixtureSeparationSelector": latentfs.MixtureSeparationSelector(latentfs.GaussianMixture(2)),
        "PLSATransformer": latentfs.PLSATransformer(2, max_iter=20),
        "ForestRelevanceSelector": s.ForestRelevanceSelector(10, n_null_draws=20, seed=0),
        "KernelQAlpha": s.KernelQAlpha(2, seed=0),
        "LeverageScoreSelector": s.LeverageScoreSelector(2, seed=0),
        "QAlpha": s.QAlpha(2, seed=0),
        "SVMFeatureSelector": s.SVMFeatureSelector(2, seed=0),
        "SupervisedQAlpha": s.SupervisedQAlpha(2),
        "TextScoreSelector": s.TextScoreSelector(),
        "PLS": sub.PLS(2),
        "KernelPLS": sub.KernelPLS(2),
        "RandomProjection": sub.RandomProjection(2, seed=0),
        "KernelFeatureMap": sub.KernelFeatureMap(5, seed=0),
        "PLSVIPSelector": sub.PLSVIPSelector(2, n_bootstrap=10, seed=0),
        "RandomHyperplaneWeakLearner": sub.RandomHyperplaneWeakLearner(0.1, seed=0),
    }


# The estimators that predate the shared base, with the first check scikit-learn fails (measured with
# scikit-learn 1.9.1). Each needs BaseEstimator (for __sklearn_tags__) before any other check runs.
NOT_YET_CONFORMING: dict[str, str] = {
    name: "no __sklearn_tags__ (not a sklearn.base.BaseEstimator): every check aborts"
    for name in _not_yet_conforming()
}


def _first_failure(estimator: object) -> str | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            results = check_estimator(estimator, on_fail=None)
        except Exception as exc:  # scikit-learn cannot even list the checks
            return f"{type(exc).__name__}: {exc}"
    failed = [r for r in results if r["status"] == "failed"]
    return f"{failed[0]['check_name']}: {failed[0]['exception']}" if failed else None


@pytest.mark.parametrize("name", sorted(NOT_YET_CONFORMING))
def test_not_yet_conforming_list_is_current(name):
    estimator = _not_yet_conforming()[name]
    assert name == type(estimator).__name__
    failure = _first_failure(estimator)
    assert failure is not None, f"{name} now passes scikit-learn's checks: move it into CONFORMING."


def test_every_public_estimator_is_listed():
    """Every public class of latentfs with fit is either checked or listed as not yet conforming."""
    modules = (latentfs, latentfs.select, latentfs.subspace)
    public = {
        name
        for mod in modules
        for name in getattr(mod, "__all__", [])
        if isinstance(getattr(mod, name), type) and hasattr(getattr(mod, name), "fit")
    }
    covered = {type(e).__name__ for e in CONFORMING} | set(NOT_YET_CONFORMING) | {
        "LatentClassClusterer",  # items must be 0/1 codes: checked in test_estimators.py
    }
    assert public <= covered, f"public estimators not checked: {sorted(public - covered)}"
    assert LatentClassClusterer is not None
