"""Feature weights from HDDA class subspaces (latentfs.inference.hdda.weights).

Exact: the "signal" weight equals Σ_i π_i (diag Σ_i − b_i) computed from dense covariances; the
"discriminative" weight equals its definition. Recovery: planted signal / mean-shift features rank
first and their bootstrap bands separate from the rest. Bad input with match=.
"""

import numpy as np
import pytest

from latentfs.core.data import DataError
from latentfs.inference.hdda.estimators import HDDA
from latentfs.inference.hdda.weights import (
    MEASURES,
    HDDAWeights,
    hdda_feature_weights,
    subspace_weights,
)


def test_signal_weight_equals_dense_definition(rng):
    X = rng.normal(size=(120, 6)) @ rng.normal(size=(6, 6))
    y = np.repeat([0, 1, 2], 40)
    clf = HDDA("AkjBkQkDk", n_dims=2).fit(X, y)
    params = clf.params_
    dense = sum(w * (np.diag(params.covariance(i)) - params.noise[i]) for i, w in enumerate(params.weights))
    np.testing.assert_allclose(subspace_weights(clf).scores, dense, rtol=1e-10)
    centre = params.weights @ params.means
    fisher = sum(w * (params.means[i] - centre) ** 2 / np.diag(params.covariance(i))
                 for i, w in enumerate(params.weights))
    np.testing.assert_allclose(subspace_weights(clf, "discriminative").scores, fisher, rtol=1e-10)
    assert set(MEASURES) == {"signal", "discriminative"}


def test_planted_signal_features_rank_first_with_separated_bands():
    rng = np.random.default_rng(11)
    n, p = 200, 30
    X = rng.normal(size=(n, p))
    y = np.repeat([0, 1], n // 2)
    latent = rng.normal(size=(n, 1)) * 6
    X[:, [3, 7]] += latent  # a strong 1-D signal subspace spanned by features 3 and 7 in both classes
    fw = hdda_feature_weights(X, y, n_bootstrap=30, seed=0, model="AkjBkQkDk", n_dims=1)
    assert set(fw.top(2)) == {"x3", "x7"}
    lo, hi = fw.band(0.9)
    others = np.setdiff1d(np.arange(p), [3, 7])
    assert lo[[3, 7]].min() > hi[others].max()
    again = hdda_feature_weights(X, y, n_bootstrap=30, seed=0, model="AkjBkQkDk", n_dims=1)
    np.testing.assert_array_equal(fw.draws, again.draws)  # seeded


def test_discriminative_weight_finds_mean_shift_features_when_n_less_than_p():
    rng = np.random.default_rng(12)
    n, p = 40, 100
    X = rng.normal(size=(n, p))
    y = np.repeat([0, 1], n // 2)
    X[y == 1, 10] += 3.0
    X[y == 1, 20] -= 3.0
    fw = hdda_feature_weights(X, y, measure="discriminative", n_bootstrap=0, n_dims=2)
    assert set(fw.top(2)) == {"x10", "x20"} and fw.draws is None


def test_selector_keeps_top_features_and_transforms(rng):
    X = rng.normal(size=(80, 6))
    y = np.repeat([0, 1], 40)
    X[y == 1, 4] += 5
    sel = HDDAWeights(measure="discriminative", n_features_to_select=2, n_dims=1, n_bootstrap=3, seed=0).fit(X, y)
    assert sel.get_support()[4] and sel.transform(X).shape == (80, 2)
    assert sel.weights_.draws.shape == (3, 6)


def test_bad_input_messages(rng):
    X = rng.normal(size=(20, 3))
    y = np.repeat([0, 1], 10)
    with pytest.raises(DataError, match="measure must be one of"):
        hdda_feature_weights(X, y, measure="energy")
    with pytest.raises(DataError, match="n_bootstrap must be a non-negative integer"):
        hdda_feature_weights(X, y, n_bootstrap=-1)
    with pytest.raises(DataError, match="fitted must be a fitted HDDA or HDDC"):
        subspace_weights(HDDA())
    with pytest.raises(DataError, match="y must be given: HDDAWeights is supervised"):
        HDDAWeights().fit(X)
    X[0, 0] = np.nan
    with pytest.raises(DataError, match="must not contain NaN"):
        hdda_feature_weights(X, y)
