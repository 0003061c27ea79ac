"""Output feature names in one style (issue 34, item 4): every estimator that makes new features names them
scikit-learn's way, ``<class name, lower-cased><k>`` (as ``PCA`` gives ``pca0``); selectors keep the input names.

Before: the latent-model estimators named a concept (``component0``, ``factor0``, ``aspect0``, ``state0``,
``trait0``) while the transformers beside them (``DCAFeatures``, ``PLS``, ``RandomProjection``, …) used the
class name.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_selection import SelectorMixin

sys.path.insert(0, str(Path(__file__).parent))
from test_check_estimator import CONFORMING  # noqa: E402

rng = np.random.default_rng(0)
X = rng.poisson(3, size=(40, 8)).astype(float)
Y = np.array([0, 1] * 20)


def _fitted(est):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and selection notices on random data are not tested here
        try:
            return est.fit(X, Y)
        except (TypeError, ValueError):
            return est.fit(X)


WITH_NAMES = [e for e in CONFORMING if hasattr(e, "get_feature_names_out")]


@pytest.mark.parametrize("est", WITH_NAMES, ids=[type(e).__name__ for e in WITH_NAMES])
def test_one_style_of_output_names(est):
    est = _fitted(est)
    names = est.get_feature_names_out().tolist()
    if isinstance(est, SelectorMixin) or type(est).__name__ in ("MixtureSeparationSelector", "TextSearchSelector"):
        assert set(names) <= {f"x{j}" for j in range(X.shape[1])}  # a selector keeps the input's names
        return
    prefix = type(est).__name__.lower()
    assert names and all(re.fullmatch(rf"{prefix}\d+", n) for n in names), names
    assert names == [f"{prefix}{k}" for k in range(len(names))]


def test_every_latent_estimator_is_covered():
    from latentfs.core.estimator import LatentEstimator

    latent = {type(e).__name__ for e in WITH_NAMES if isinstance(e, LatentEstimator)}
    assert {"DCA", "PLSAEstimator", "FactorAnalyzer", "GaussianMixtureClusterer", "LatentProfileClusterer",
            "LatentTraitAnalyzer", "GaussianHMMEstimator", "MixtureOfFactorAnalyzersClusterer"} <= latent
