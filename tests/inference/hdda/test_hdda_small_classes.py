"""HDDA dimension rules when a class has fewer samples than features (n_i < p): the sample scatter has rank
n_i − 1, so the BIC must be computed on the eigenvalues that exist and d_i ≤ n_i − 2."""

import numpy as np
import pytest

from latentfs.inference.hdda import numerics as num
from latentfs.inference.hdda.estimators import HDDA
from latentfs.models.hdda import HDDAModel

DIMS = [2, 5, 8]
NOISE = np.array([1.0, 1.0, 1.0])


def _planted(n, p, seed):
    excess = np.tile(np.linspace(40.0, 20.0, max(DIMS)), (3, 1))
    model = HDDAModel(3, n_dims=DIMS, mean_scale=3.0)
    sim = model.simulate(n, p, seed=seed, values={"weights": np.full(3, 1 / 3), "noise_variance": NOISE,
                                                   "signal_excess": excess})
    return sim["X"], sim["labels"]


@pytest.mark.parametrize("seed", [0, 1])
def test_bic_dimensions_and_noise_when_classes_are_smaller_than_the_feature_count(seed):
    # ~40 samples per class, 100 features. Before: dims [39, 44, 31]-like (the largest admissible) and b̂ ≈ 1/100
    # of the truth. Fixed seeds; the tolerances (|d̂ − d| ≤ 2, b̂ within 2×) are far from the observed errors.
    X, y = _planted(120, 100, seed)
    assert np.bincount(y).max() < X.shape[1]
    with pytest.warns(UserWarning, match="n_dims='bic': a class has .* samples for 100 features.*scree test"):
        clf = HDDA("AkjBkQkDk", n_dims="bic").fit(X, y)
    assert np.all(np.abs(clf.dims_ - DIMS) <= 2), clf.dims_
    ratio = clf.noise_variances_ / NOISE
    assert np.all((ratio > 0.5) & (ratio < 2.0)), ratio


def test_bic_dimension_caps_at_rank_minus_one():
    # 10 samples in 50 features: rank 9, so d ≤ 8 whatever the eigenvalues say.
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(10, 50))
    Y -= Y.mean(0)
    ev = np.linalg.svd(Y, compute_uv=False) ** 2 / 10
    d = num.bic_dimension(ev, float(ev.sum()), 50, 10)
    assert 1 <= d <= 8
