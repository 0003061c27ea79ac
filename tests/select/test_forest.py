"""Rogers & Gunn random-forest relevance (digest book_part3 §5.5)."""

import numpy as np
import pytest
from scipy import stats
from sklearn.datasets import make_friedman1
from sklearn.metrics import mutual_info_score
from sklearn.tree import DecisionTreeClassifier

from latentfs.core.data import DataError
from latentfs.select.forest import (
    ForestRelevanceSelector,
    expected_irrelevant_gain,
    forest_relevance,
    grow_relevance_forest,
    irrelevant_gain_bounds,
    majority_vote_accuracy,
    relevance_test,
)


def _entropy_bits(labels):
    p = np.bincount(labels, minlength=2) / labels.size
    p = p[p > 0]
    return -np.sum(p * np.log2(p))


def _best_split_gain(labels):
    n, h = labels.size, _entropy_bits(labels)
    return max(h - (k * _entropy_bits(labels[:k]) + (n - k) * _entropy_bits(labels[k:])) / n for k in range(1, n))


def test_bounds_closed_forms():
    n = np.arange(2, 1001)
    lo, hi = irrelevant_gain_bounds(n)
    assert lo[0] == hi[0] == 1.0 and expected_irrelevant_gain(2) == 1.0
    # ordered for every n ≥ 4; at n = 3 the chapter's empirical upper fit (eq. 4) sits 0.006 below eq. 3
    assert np.all(lo[2:] <= hi[2:]) and 0 < lo[1] - hi[1] < 0.007
    assert np.isclose(lo[8], 0.1 - 0.9 * np.log2(0.9))  # n = 10


def test_lower_bound_matches_simulation_with_one_minority_example():
    # 2000 random label orders with one minority example; the mean best-split IG for n = 20 is within 3% of
    # eq. 3 (digest: 0.1233 simulated vs 0.1203). Monte Carlo s.e. ≈ 0.0017, so the tolerance is ≈ 2 s.e.
    # on top of the 2.5% systematic gap: false-alarm rate ≈ 2%.  Fixed seed.
    rng = np.random.default_rng(0)
    n = 20
    sims = []
    for _ in range(2000):
        labels = np.zeros(n, dtype=int)
        labels[rng.integers(n)] = 1
        sims.append(_best_split_gain(labels))
    lo, _ = irrelevant_gain_bounds(n)
    assert abs(np.mean(sims) - lo) / lo < 0.05


def test_majority_vote_formula():
    from math import comb

    p, n = 0.6, 7
    direct = sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(4, 8))
    assert np.isclose(majority_vote_accuracy(p, n), direct)
    acc = [majority_vote_accuracy(0.6, k) for k in (1, 11, 51, 101)]
    assert all(a < b for a, b in zip(acc[:-1], acc[1:], strict=True))


def test_sklearn_entropy_is_in_bits():
    X = np.arange(8.0)[:, None]
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    tree = DecisionTreeClassifier(criterion="entropy").fit(X, y)
    assert np.isclose(tree.tree_.impurity[0], 1.0)
    records = grow_relevance_forest(X, y, n_trees=1, dedup_bootstrap=True, rng=np.random.default_rng(0))
    assert np.all(records.gain <= 1.0 + 1e-12) and np.all(records.gain > 0)


def test_xor_relevance_found_where_univariate_filter_fails():
    rng = np.random.default_rng(3)
    X = rng.integers(0, 2, size=(400, 10)).astype(float)
    y = X[:, 0].astype(int) ^ X[:, 1].astype(int)
    fw = forest_relevance(X, y, n_trees=300, seed=1)
    assert set(fw.ranking()[:2]) == {0, 1}
    assert fw.info["selected_ht"][:2] == [True, True] and not any(fw.info["selected_ht"][2:])
    mi = np.array([mutual_info_score(y, X[:, j]) for j in range(10)])
    assert set(np.argsort(-mi)[:2]) != {0, 1}


def test_friedman_ranking():
    X, yr = make_friedman1(1000, n_features=10, noise=1.0, random_state=0)
    y = (yr > 14).astype(int)
    fw = forest_relevance(X, y, n_trees=100, seed=2)
    s = fw.scores
    assert min(s[[0, 1, 3]]) > max(s[5:])
    assert np.sum(s[2] > s[5:]) >= 4 and np.sum(s[4] > s[5:]) >= 4
    assert fw.info["oob_error"] < 0.25
    p = np.array(fw.info["p_value"])
    counts = [np.sum((p[5:] < g) & (np.array(fw.info["mean_diff"])[5:] > 0)) for g in (0.5, 0.05, 1e-3, 1e-6)]
    assert all(a >= b for a, b in zip(counts[:-1], counts[1:], strict=True))


def test_noise_features_grow_bigger_trees_and_determinism():
    rng = np.random.default_rng(4)
    X = rng.random((300, 3))
    y = (X[:, 0] ** 2 + 2 * X[:, 1] > 1.2).astype(int)
    Xn = np.hstack([X, rng.random((300, 30))])
    small = forest_relevance(X, y, n_trees=40, seed=5)
    big = forest_relevance(Xn, y, n_trees=40, seed=5)
    assert np.mean(big.info["tree_sizes"]) > np.mean(small.info["tree_sizes"])
    again = forest_relevance(Xn, y, n_trees=40, seed=5)
    np.testing.assert_array_equal(big.scores, again.scores)


def test_relevance_test_by_hand():
    from latentfs.select.forest import ForestRecords

    rec = ForestRecords(
        feature=np.array([0, 0, 0, 1, 2, 2]),
        gain=np.array([0.5, 0.6, 0.7, 0.2, 0.05, 0.06]),
        node_size=np.array([10, 20, 40, 10, 50, 50]),
        tree_sizes=np.array([7]),
        oob_error=0.0,
        n_features=4,
    )
    res = relevance_test(rec)
    d0 = np.array([0.5, 0.6, 0.7]) - expected_irrelevant_gain([10, 20, 40])
    t0 = d0.mean() * np.sqrt(3) / d0.std(ddof=1)
    assert np.isclose(res.t[0], t0) and np.isclose(res.p_value[0], stats.t.sf(t0, 2))
    assert res.n_nodes.tolist() == [3, 1, 2, 0]
    assert res.p_value[1] == 1.0 and res.p_value[3] == 1.0  # fewer than two nodes: no test


def test_selector_modes():
    rng = np.random.default_rng(6)
    X = rng.random((250, 8))
    y = (X[:, 2] + 0.5 * X[:, 5] > 0.75).astype(int)
    ht = ForestRelevanceSelector(60, mode="ht", gamma=1e-4, seed=0).fit(X, y)
    thr = ForestRelevanceSelector(60, mode="thr", seed=0).fit(X, y)
    assert {2, 5} <= set(ht.get_support(indices=True))
    assert set(ht.get_support(indices=True)) <= set(thr.get_support(indices=True))
    assert ht.transform(X).shape[1] == ht.get_support().sum()


def test_errors():
    X = np.random.default_rng(0).random((20, 3))
    y = np.arange(20) % 2
    with pytest.raises(DataError, match="y must hold exactly 2 classes for the Rogers & Gunn test"):
        forest_relevance(X, np.arange(20) % 3)
    with pytest.raises(DataError, match="n_trees must be a positive integer; got 0"):
        forest_relevance(X, y, n_trees=0)
    with pytest.raises(DataError, match=r"gamma must lie in \(0, 1\); got 1.5"):
        forest_relevance(X, y, gamma=1.5)
    with pytest.raises(DataError, match="seed must be an int"):
        forest_relevance(X, y, seed="zero")
    with pytest.raises(DataError, match=r"n \(node size\) must be at least 2; got 1"):
        irrelevant_gain_bounds([1, 5])
    with pytest.raises(DataError, match=r"p must lie in \[0, 1\]"):
        majority_vote_accuracy(1.2, 5)
    with pytest.raises(DataError, match="mode must be 'thr' or 'ht'"):
        ForestRelevanceSelector(5, mode="both").fit(X, y)
    with pytest.raises(DataError, match="ForestRelevanceSelector needs class labels"):
        ForestRelevanceSelector(5).fit(X)
