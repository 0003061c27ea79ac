"""scikit-learn's own estimator checks over every public estimator of latentfs (issue 13, item 3).

Every public estimator runs every check of ``parametrize_with_checks`` with small, fast options: the
latent-model estimators on :class:`latentfs.core.estimator.LatentEstimator`, and the selectors, subspace
maps and family estimators on :mod:`latentfs.core.base`. Expected failures (at most two per estimator) are
listed in :data:`EXPECTED_FAILED` with their reason.

The count models (DCA, PLSA, DCAFeatures, DCAClassifier, PLSATransformer, TextScoreSelector) take integer
counts; scikit-learn's checks feed non-negative reals, so they are checked with ``non_integer="round"``
(the documented opt-in).
"""

from __future__ import annotations

import pytest
from sklearn.utils.estimator_checks import _get_check_estimator_ids, estimator_checks_generator

import latentfs
import latentfs.select
import latentfs.subspace
from latentfs.core.data import DataWarning
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
# collapses onto tied rows, a Heywood case and a Q-alpha run that stops before ‖Δα‖ < tol are warned about,
# correctly, and are not what these checks test. A calibrated selector (RF HT, the VIP band) keeps no feature of
# the checks' pure-noise data, which is right, and scikit-learn's SelectorMixin warns that nothing was selected.
pytestmark = [
    pytest.mark.filterwarnings(f"ignore::{w.__module__}.{w.__name__}")
    for w in (ConvergenceWarning, CollapsedComponentWarning, HeywoodWarning, DataWarning)
] + [pytest.mark.filterwarnings("ignore:No features were selected:UserWarning")]

_s, _sub = latentfs.select, latentfs.subspace

CONFORMING = [
    DCA(2, max_iter=30, non_integer="round"),
    DCA(2, model="gamma_poisson", max_iter=30, non_integer="round"),
    PLSAEstimator(2, max_iter=30, non_integer="round"),
    FactorAnalyzer(1, max_iter=200),
    GaussianMixtureClusterer(2, max_iter=50, n_init=1),
    LatentProfileClusterer(2, max_iter=50, n_init=1),
    latentfs.HDDA(),
    latentfs.HDDC(2, n_init=2, max_iter=20),  # one start on 10 uniform points can lose a cluster
    latentfs.DCAFeatures(latentfs.DirichletDCA(2), fit_options={"max_iter": 20}, non_integer="round"),
    latentfs.DCAClassifier(2, fit_options={"max_iter": 20}, non_integer="round"),
    latentfs.MixtureSeparationSelector(latentfs.GaussianMixture(2)),
    latentfs.PLSATransformer(2, max_iter=20, non_integer="round"),
    _s.ForestRelevanceSelector(10, n_null_draws=20),
    _s.KernelQAlpha(2, n_components=1),
    _s.LeverageScoreSelector(2),
    _s.QAlpha(2),
    _s.SVMFeatureSelector(2),
    _s.SupervisedQAlpha(2),
    _s.TextScoreSelector(non_integer="round"),
    _sub.PLS(2),
    _sub.KernelPLS(2),
    _sub.RandomProjection(2),
    _sub.KernelFeatureMap(5),
    _sub.PLSVIPSelector(2, n_bootstrap=10),
    _sub.RandomHyperplaneWeakLearner(0.1),
    latentfs.LatentTraitAnalyzer(1, n_bins=3, max_iter=50),
    _sub.InfoMaxProjection(max_iter=3, inner_steps=2),
    _sub.HyperbolicPCA(kernel="rbf"),
    _sub.HyperbolicPCA(kernel="linear"),
    _sub.FPC(),
    latentfs.GaussianHMMEstimator(2, max_iter=50, n_init=1),
    latentfs.MixtureOfFactorAnalyzersClusterer(2, max_iter=100, n_init=1),
    _s.TextSearchSelector(candidates=5, n_folds=2, non_integer="round"),
]

# Expected failures, at most two per estimator, with the reason.
_FIT_VS_FOLD_IN = (
    "fit_transform returns the fitted documents' own E[c] from the joint (20-iteration) fit, transform folds each "
    "document in again with Θ held at its posterior mean; they agree only at convergence (documented)"
)
EXPECTED_FAILED: dict[str, dict[str, str]] = {
    "DCAFeatures": {
        "check_transformer_general": _FIT_VS_FOLD_IN,
        "check_transformer_data_not_an_array": _FIT_VS_FOLD_IN,
    },
    "DCAClassifier": {
        "check_classifiers_train": (
            "a topic model of scikit-learn's shifted Gaussian blobs rounded to counts does not reach the check's "
            "0.83 training accuracy: the blobs are not word counts"
        ),
    },
}


def _expected_failed(estimator: object) -> dict[str, str]:
    return EXPECTED_FAILED.get(type(estimator).__name__, {})


def _check_name(check: object) -> str:
    return getattr(check, "func", check).__name__  # type: ignore[attr-defined]


# scikit-learn's array-API checks skip themselves unless SciPy's array-API mode is on; these estimators
# compute in torch/numpy and do not claim array-API support, so those checks are not collected at all
# (a skip in CI would hide nothing, but the rule here is that no test skips).
def _all_checks() -> list:
    out = []
    for estimator in CONFORMING:
        for item in estimator_checks_generator(
            estimator, expected_failed_checks=_expected_failed(estimator), mark="xfail"
        ):
            _, check = item.values if hasattr(item, "values") else item  # an expected failure is a pytest.param
            if "array_api" not in _check_name(check):
                out.append(item)
    return out


_CHECKS = _all_checks()


@pytest.mark.parametrize("estimator, check", _CHECKS, ids=_get_check_estimator_ids)
def test_sklearn_check(estimator, check):
    check(estimator)


def test_every_public_estimator_is_listed():
    """Every public class of latentfs with fit is checked."""
    modules = (latentfs, latentfs.select, latentfs.subspace)
    public = {
        name
        for mod in modules
        for name in getattr(mod, "__all__", [])
        if isinstance(getattr(mod, name), type) and hasattr(getattr(mod, name), "fit")
    }
    covered = {type(e).__name__ for e in CONFORMING} | {
        "LatentClassClusterer",  # items must be 0/1 codes: checked in test_estimators.py
        # one column of symbols 0..S-1: scikit-learn's real-valued multi-column data is not its input; the checks
        # that fit nothing and its own contract tests run in tests/inference/hmm/test_hmm_estimator.py
        "CategoricalHMMEstimator",
    }
    assert public <= covered, f"public estimators not checked: {sorted(public - covered)}"
    assert LatentClassClusterer is not None
