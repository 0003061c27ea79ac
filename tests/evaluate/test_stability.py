"""Nogueira, Sechidis & Brown (2018) stability Φ̂: definition, oracles, interval calibration, errors."""

from itertools import combinations

import numpy as np
import pytest

from latentfs.core.data import DataError
from latentfs.evaluate.stability import kuncheva_index, nogueira_stability, selection_stability


def _reference(Z: np.ndarray) -> tuple[float, float]:
    """Φ̂ and v̂ written out loop by loop from Definition 4 and Theorem 8 of the paper (one row per subset)."""
    M, d = Z.shape
    p = [sum(Z[i, f] for i in range(M)) / M for f in range(d)]
    s2 = [sum((Z[i, f] - p[f]) ** 2 for i in range(M)) / (M - 1) for f in range(d)]  # unbiased variance
    kbar = sum(p)
    denom = (kbar / d) * (1 - kbar / d)
    phi_hat = 1 - (sum(s2) / d) / denom
    phis = []
    for i in range(M):
        k_i = sum(Z[i])
        term = sum(Z[i, f] * p[f] for f in range(d)) / d - k_i * kbar / d**2
        term += phi_hat / 2 * (2 * k_i * kbar / d**2 - k_i / d - kbar / d + 1)
        phis.append(term / denom)
    mean_phi = sum(phis) / M
    return phi_hat, 4 / M**2 * sum((x - mean_phi) ** 2 for x in phis)


def test_hand_example_and_reference_loop():
    # p̂ = (1, 2/3, 1/3, 0, 0, 0), s_f² = (3/2) p̂(1 − p̂) → mean 1/9; k̄ = 2, (k̄/d)(1 − k̄/d) = 2/9; Φ̂ = 1/2.
    res = nogueira_stability([[0, 1], [0, 1], [0, 2]], n_features=6)
    assert np.isclose(res.estimate, 0.5)
    assert res.n_subsets == 3 and res.mean_size == 2.0
    rng = np.random.default_rng(3)
    for _ in range(5):
        Z = rng.random((7, 12)) < rng.uniform(0.1, 0.6, size=12)
        Z[:, 0] = True  # keep k̄ > 0
        ref_est, ref_var = _reference(Z.astype(float))
        got = nogueira_stability(Z, n_features=12)
        assert np.isclose(got.estimate, ref_est) and np.isclose(got.variance, ref_var)


def test_identical_subsets_score_one_with_zero_width_interval():
    res = nogueira_stability([[1, 4, 7]] * 5, n_features=20)
    assert np.isclose(res.estimate, 1.0)
    assert np.isclose(res.variance, 0.0) and np.isclose(res.lower, 1.0) and np.isclose(res.upper, 1.0)
    assert np.isclose(selection_stability([[1, 4, 7]] * 5, 20, measure="nogueira"), 1.0)


def test_equals_mean_pairwise_kuncheva_for_equal_sizes():
    # Σ_f p̂_f² = (1/M²) Σ_{i,j} |S_i ∩ S_j| makes Φ̂ the mean pairwise Kuncheva index when all |S_i| = k.
    rng = np.random.default_rng(0)
    for k in (1, 3, 9):
        subsets = [rng.choice(25, k, replace=False) for _ in range(6)]
        mean_ki = np.mean([kuncheva_index(a, b, 25) for a, b in combinations(subsets, 2)])
        assert np.isclose(nogueira_stability(subsets, 25).estimate, mean_ki)


def test_random_subsets_of_fixed_size_average_zero():
    # Exactly 0 in expectation (= mean Kuncheva index, itself unbiased at 0). 400 replicates: the mean lies
    # beyond 4 standard errors with probability ≈ 6e-5 (normal approximation) if the estimator is unbiased.
    rng = np.random.default_rng(11)
    est = np.array([
        nogueira_stability([rng.choice(50, 5, replace=False) for _ in range(8)], 50).estimate for _ in range(400)
    ])
    assert abs(est.mean()) < 4 * est.std(ddof=1) / np.sqrt(est.size)


def test_random_subsets_of_varying_size_match_exact_conditional_mean():
    # Given the sizes k_i (q_i = k_i/d), Z_if ~ Bernoulli(q_i) independently over i, so
    # E[s_f²] = q̄(1 − q̄) + Σ(q_i − q̄)²/(M(M − 1)) and E[Φ̂ | sizes] = −Σ(q_i − q̄)²/(M(M − 1) q̄(1 − q̄)):
    # ≈ 0 (−0.011 here), a small negative bias only when the sizes differ. 1,000 replicates, 4 s.e. band:
    # false-alarm probability ≈ 6e-5 if the formula is right.
    d, sizes = 40, np.array([2, 4, 6, 8, 10, 12, 14, 16, 18, 19])
    M, q = sizes.size, sizes / 40
    expected = -np.sum((q - q.mean()) ** 2) / (M * (M - 1) * q.mean() * (1 - q.mean()))
    rng = np.random.default_rng(5)
    est = np.array([
        nogueira_stability([rng.choice(d, k, replace=False) for k in sizes], d).estimate for _ in range(1000)
    ])
    assert abs(est.mean() - expected) < 4 * est.std(ddof=1) / np.sqrt(est.size)
    assert abs(expected) < 0.02


def test_varying_sizes_are_handled_where_kuncheva_refuses():
    subsets = [[0, 1, 2], [0, 1], [0, 1, 2, 3]]
    with pytest.raises(DataError, match="same size"):
        selection_stability(subsets, 10, measure="kuncheva")
    value = selection_stability(subsets, 10, measure="nogueira")
    assert 0 < value < 1


def test_interval_is_calibrated_on_a_known_selection_process():
    # Features chosen independently: 5 with probability 0.9, 35 with 0.1 (d = 40, M = 30). Population
    # stability Φ = 1 − mean p(1 − p)/((k/d)(1 − k/d)) = 0.4375. Over 400 replicates the mean √v̂ must match
    # the empirical s.d. of Φ̂ within 20% (observed ratio 0.96) and the 95% interval must cover Φ in ≥ 90%
    # of replicates (observed 93.5%; binomial s.d. 1.2 points, so a false alarm needs a 3-s.d. shortfall).
    p = np.r_[np.full(5, 0.9), np.full(35, 0.1)]
    kbar, d = p.sum(), p.size
    population = 1 - np.mean(p * (1 - p)) / ((kbar / d) * (1 - kbar / d))
    rng = np.random.default_rng(2)
    res = [nogueira_stability(rng.random((30, d)) < p, d) for _ in range(400)]
    est = np.array([r.estimate for r in res])
    sd_hat = np.mean([np.sqrt(r.variance) for r in res])
    assert 0.8 < sd_hat / est.std(ddof=1) < 1.2
    assert abs(est.mean() - population) < 4 * est.std(ddof=1) / np.sqrt(est.size)
    assert np.mean([r.lower <= population <= r.upper for r in res]) >= 0.90
    narrow = nogueira_stability(rng.random((30, d)) < p, d, alpha=0.5)
    assert narrow.lower < narrow.estimate < narrow.upper


def test_errors_name_argument_rule_and_value():
    with pytest.raises(DataError, match="undefined when the mean subset size is 0"):
        nogueira_stability([[], []], 5)
    with pytest.raises(DataError, match="undefined when the mean subset size is 3 of n_features=3"):
        nogueira_stability([[0, 1, 2], [0, 1, 2]], 3)
    with pytest.raises(DataError, match="at least 2 selections"):
        nogueira_stability([[0]], 5)
    with pytest.raises(DataError, match=r"alpha must be a number in \(0, 1\).*got 1.5"):
        nogueira_stability([[0], [1]], 5, alpha=1.5)
    with pytest.raises(DataError, match=r"subsets\[1\] holds indices outside \[0, 4\]"):
        nogueira_stability([[0], [7]], 5)
    with pytest.raises(DataError, match="n_features must be an integer ≥ 2; got 1"):
        nogueira_stability([[0], [0]], 1)
    with pytest.raises(DataError, match="measure must be one of .*'nogueira'"):
        selection_stability([[0], [1]], 5, measure="nogeira")
