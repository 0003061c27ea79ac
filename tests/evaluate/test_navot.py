"""Navot et al.'s two-Gaussian analysis (digest book_part3 §1.6)."""

import numpy as np
import pytest
from scipy.special import ndtr

from latentfs.core.data import DataError
from latentfs.evaluate.navot import (
    approximate_error,
    expected_error_mc,
    linear_rule_error,
    make_two_gaussians,
    navot_criterion,
    optimal_num_features,
    optimal_num_features_curve,
)

J = np.arange(1, 2001)
FAMILIES = {"geometric": 2.0 ** (-J / 2), "harmonic": 1 / J, "sqrt": 1 / np.sqrt(J)}


@pytest.mark.parametrize(
    "family, m, n_opt, err",
    [
        ("geometric", 16, 4, 0.1948), ("geometric", 100, 6, 0.1677), ("geometric", 225, 7, 0.1633),
        ("geometric", 1000, 9, 0.1600), ("harmonic", 16, 4, 0.1356), ("harmonic", 100, 10, 0.1138),
        ("harmonic", 225, 15, 0.1091), ("harmonic", 1000, 32, 0.1042), ("sqrt", 16, 31, 0.0496),
        ("sqrt", 100, 154, 0.0179), ("sqrt", 225, 327, 0.0114), ("sqrt", 1000, 1345, 0.0050),
    ],
)
def test_optimum_table(family, m, n_opt, err):
    opt = optimal_num_features(FAMILIES[family], m)
    assert opt.n_features == n_opt and round(opt.error, 4) == err


def test_optimum_curve_grows_with_m():
    ms = [16, 100, 225, 1000]
    n_opt, err = optimal_num_features_curve(FAMILIES["harmonic"], ms)
    assert n_opt.tolist() == [4, 10, 15, 32]
    assert np.all(np.diff(err) < 0)
    # Example 2: n_opt ≈ √m for μ_j = 1/j; Example 3: n_opt ≈ m for 1/√j (within a factor 2 at m = 1000)
    assert 0.5 < optimal_num_features(FAMILIES["harmonic"], 1000).n_features / np.sqrt(1000) < 2
    assert 0.5 < optimal_num_features(FAMILIES["sqrt"], 1000).n_features / 1000 < 2


def test_closed_forms_and_monotonicity():
    e = approximate_error(FAMILIES["geometric"], 16)
    assert round(e[0], 4) == 0.2525 and round(e[999], 4) == 0.4501
    assert round(approximate_error(FAMILIES["harmonic"], 16)[999], 4) == 0.4187
    # Example 3 with n = m: Φ(−H_m/√(1 + H_m)): 4.67% at m = 20, 0.995% at m = 300
    for m, target in ((20, 0.0467), (300, 0.00995)):
        f = navot_criterion(1 / np.sqrt(np.arange(1, m + 1)), m)[-1]
        H = np.sum(1 / np.arange(1, m + 1))
        assert np.isclose(f, H / np.sqrt(1 + H)) and abs(ndtr(-f) - target) < 5e-5
    # a zero-mean feature strictly lowers f; equal features make f increasing
    f = navot_criterion(np.array([1.0, 0.5, 0.0]), 10)
    assert f[2] < f[1]
    assert np.all(np.diff(navot_criterion(np.full(50, 0.3), 10)) > 0)
    # summable μ²: f → 0 (error → ½) as n grows
    assert navot_criterion(FAMILIES["geometric"], 16)[-1] < 0.15


@pytest.mark.parametrize("family, tol_n", [("geometric", 0), ("harmonic", 0), ("sqrt", 2)])
def test_optimum_against_monte_carlo(family, tol_n):
    # m = 16, 2000 draws of μ̂, N = 200 (digest: |MC − Φ(−f)| ≤ 0.011 and the same argmin). The sqrt family's
    # optimum is flat (error changes < 1e-3 across n = 28..34), so its MC argmin may move by a couple.
    mu = FAMILIES[family][:200]
    mean, se = expected_error_mc(mu, 16, n_repeats=2000, seed=0)
    approx = approximate_error(mu, 16)
    assert np.abs(mean - approx).max() < 0.02
    assert abs((np.argmin(mean) + 1) - optimal_num_features(mu, 16).n_features) <= tol_n
    assert se.max() < 0.005


def test_mu_hat_distribution_and_linear_rule():
    mu = np.array([1.0, 0.5, 0.25])
    rng = np.random.default_rng(3)
    hats = []
    for _ in range(3000):
        X, y = make_two_gaussians(mu, 16, seed=rng)
        hats.append((y[:, None] * X).mean(axis=0))
    hats = np.array(hats)
    # μ̂ ~ N(μ, I/m): mean within 4 s.e. (s.e. = 0.25/√3000) and variance within 10% of 1/16
    assert np.all(np.abs(hats.mean(0) - mu) < 4 * 0.25 / np.sqrt(3000))
    assert np.all(np.abs(hats.var(0) * 16 - 1) < 0.1)
    # linear-rule error reduces to eq. 3 for b = 0, and matches simulation with an intercept
    w = np.array([0.9, 0.6, 0.0])
    assert np.isclose(linear_rule_error(w, 0.0, mu), ndtr(-(w @ mu) / np.linalg.norm(w)))
    X, y = make_two_gaussians(mu, 200_000, seed=4)
    empirical = np.mean(np.sign(X @ w + 0.3) != y)
    assert abs(empirical - linear_rule_error(w, 0.3, mu)) < 0.005  # s.e. ≈ 0.001


def test_svm_with_tiny_c_is_the_ml_rule():
    from sklearn.svm import SVC

    mu = 1 / np.sqrt(np.arange(1, 41))
    rng = np.random.default_rng(5)
    y = np.repeat([-1, 1], 8)
    X = y[:, None] * mu + rng.standard_normal((16, 40))
    w = SVC(kernel="linear", C=1e-4).fit(X, y).coef_[0]
    mu_hat = (y[:, None] * X).mean(0)
    assert w @ mu_hat / (np.linalg.norm(w) * np.linalg.norm(mu_hat)) > 0.99


def test_errors():
    with pytest.raises(DataError, match="mu must be sorted by decreasing \\|mu_j\\|"):
        navot_criterion([0.1, 0.5], 10)
    with pytest.raises(DataError, match="mu must be a non-empty 1-D array"):
        navot_criterion([[1.0]], 10)
    with pytest.raises(DataError, match="mu must be finite"):
        navot_criterion([np.inf, 1.0], 10)
    with pytest.raises(DataError, match="mu must have a non-zero first coordinate"):
        optimal_num_features([0.0, 0.0], 10)
    with pytest.raises(DataError, match=r"m \(training-set size\) must be a positive integer; got 0"):
        navot_criterion([1.0], 0)
    with pytest.raises(DataError, match="n_repeats must be an integer ≥ 2"):
        expected_error_mc([1.0], 5, n_repeats=1)
    with pytest.raises(DataError, match="w and mu must be 1-D of the same length"):
        linear_rule_error([1.0], 0.0, [1.0, 2.0])
    with pytest.raises(DataError, match="w must be non-zero"):
        linear_rule_error([0.0, 0.0], 0.0, [1.0, 2.0])
    with pytest.raises(DataError, match="mu must be a non-empty 1-D array"):
        make_two_gaussians([], 5)
    with pytest.raises(DataError, match="seed must be an int"):
        make_two_gaussians([1.0], 5, seed="s")
    with pytest.raises(DataError, match="ms must be a non-empty 1-D array of positive integers"):
        optimal_num_features_curve([1.0], [1.5])
