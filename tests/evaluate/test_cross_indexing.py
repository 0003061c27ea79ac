"""Cross-indexing (Reunanen 2006; digest book_part3 §7.8) and selection stability."""

import numpy as np
import pytest

from latentfs.core.data import DataError
from latentfs.evaluate.cross_indexing import (
    SearchPath,
    _cv_criterion,
    cross_index_a,
    cross_index_a_values,
    cross_index_b,
    cross_index_b_values,
    cross_indexing_report,
    exhaustive_search,
    floating_forward_search,
    forward_search,
    learning_curve,
    nearest_neighbour_accuracy,
    nested_selection_scores,
    outer_loop_estimate,
    outer_loop_values,
    sequential_floating_forward_selection,
    sequential_forward_selection,
    stratified_folds,
)
from latentfs.evaluate.stability import jaccard_index, kuncheva_index, selection_stability

HAND = np.array([[0.70, 0.80, 0.75], [0.72, 0.71, 0.78], [0.69, 0.79, 0.74]])


def test_hand_example():
    one = outer_loop_estimate(HAND)
    assert one.size == 2 and np.isclose(one.performance, 0.766667, atol=1e-6) and np.isclose(one.gain, 0.010)
    a = cross_index_a(HAND)
    assert a.fold_sizes.tolist() == [3, 2, 3]
    assert np.isclose(a.size, 2.6667, atol=1e-4) and np.isclose(a.performance, 0.733333, atol=1e-6)
    assert np.isclose(a.gain, -0.023333, atol=1e-6)
    b = cross_index_b(HAND)
    assert b.fold_sizes.tolist() == [2, 3, 2]
    assert np.isclose(b.size, 2.3333, atol=1e-4) and np.isclose(b.performance, 0.75)
    assert np.isclose(b.gain, -0.006667, atol=1e-6)


def test_median_statistic_and_custom_sizes():
    a = cross_index_a(HAND, sizes=[5, 10, 20], stat="median")
    assert a.fold_sizes.tolist() == [20, 10, 20] and a.size == 20
    assert np.isclose(a.performance, np.median([0.75, 0.71, 0.74]))
    # K = 2: the "other folds" are one fold
    two = HAND[:2]
    assert cross_index_a(two).fold_sizes.tolist() == [3.0, 2.0]
    assert np.isclose(cross_index_b(two).performance, np.mean([two[1, 1], two[0, 2]]))


def test_ties_go_to_the_smallest_size():
    x = np.array([[0.8, 0.8, 0.7], [0.8, 0.8, 0.7]])
    assert outer_loop_estimate(x).size == 1
    assert cross_index_a(x).fold_sizes.tolist() == [1, 1]
    assert cross_index_b(x).fold_sizes.tolist() == [1, 1]


def test_proposition_1_random_matrices():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        K, D = rng.integers(2, 11), rng.integers(1, 51)
        x = rng.random((K, D))
        assert cross_index_a(x).performance <= outer_loop_estimate(x).performance + 1e-12
    x = np.tile(rng.random(6), (4, 1))  # all folds agree: equality
    assert np.isclose(cross_index_a(x).performance, outer_loop_estimate(x).performance)


def test_cross_indexing_unbiased_and_outer_loop_biased_under_the_null():
    # Rows i.i.d. with equal column means ψ = 0.7 (no size is better): E[x̂_A] = E[x̂_B] = ψ exactly, while
    # E[x̂] > ψ. 10⁵ matrices (K = 5, D = 10, sd 0.05). Tolerance 3.5 standard errors for A and B
    # (two-sided false-alarm rate 5e-4 each); the outer loop must exceed ψ by more than 10 s.e.
    rng = np.random.default_rng(20261122)
    x = 0.7 + 0.05 * rng.standard_normal((100_000, 5, 10))
    _, outer = outer_loop_values(x)
    _, a = cross_index_a_values(x)
    _, b = cross_index_b_values(x)
    a, b = a.mean(axis=-1), b.mean(axis=-1)
    for est in (a, b):
        assert abs(est.mean() - 0.7) < 3.5 * est.std() / np.sqrt(est.size)
    assert outer.mean() - 0.7 > 10 * outer.std() / np.sqrt(outer.size)
    assert outer.mean() - 0.7 > 0.02  # digest: +0.0344
    assert np.all(a <= outer + 1e-12)  # Proposition 1 on every draw


def test_vectorised_values_match_public_functions(rng):
    x = rng.random((7, 4, 6))
    for k in range(7):
        assert np.isclose(cross_index_a_values(x)[1][k].mean(), cross_index_a(x[k]).performance)
        assert np.isclose(cross_index_b_values(x)[1][k].mean(), cross_index_b(x[k]).performance)
        assert np.isclose(outer_loop_values(x)[1][k], outer_loop_estimate(x[k]).performance)


def test_end_to_end_null_simulation_sfs_1nn():
    # Random labels, 8 noise features, SFS + 1-NN with 5-fold inner CV, 5 outer folds, 12 repeats.
    # Method 0 (the search's own inner-CV curve) is optimistic; cross-indexing A is not: its mean gain over
    # the full set lies within 2.5 standard errors of 0 (false-alarm rate ≈ 1%), method 0's exceeds 0.05.
    rng = np.random.default_rng(5)
    gains0, gains_a, gains_b = [], [], []
    for r in range(12):
        X = rng.normal(size=(50, 8))
        y = rng.integers(0, 2, size=50)
        path = sequential_forward_selection(X, y, seed=r)
        gains0.append(path.inner_scores.max() - path.inner_scores[-1])
        res = nested_selection_scores(X, y, lambda a, b, r=r: sequential_forward_selection(a, b, seed=r), seed=r)
        gains_a.append(cross_index_a(res.scores).gain)
        gains_b.append(cross_index_b(res.scores).gain)
    gains0, gains_a = np.array(gains0), np.array(gains_a)
    assert gains0.mean() > 0.05
    assert abs(gains_a.mean()) < 2.5 * gains_a.std(ddof=1) / np.sqrt(gains_a.size)
    assert gains0.mean() > np.mean(gains_b)


def test_nested_scores_with_a_ranking_and_learning_curve():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(90, 6))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)

    def ranking(Xt, yt):
        return np.argsort(-np.abs(np.corrcoef(Xt.T, yt)[-1, :-1]), kind="stable")

    res = nested_selection_scores(X, y, ranking, n_folds=3, seed=1)
    assert res.scores.shape == (3, 6) and res.sizes.tolist() == [1, 2, 3, 4, 5, 6]
    assert np.bincount(res.folds).tolist() == [30, 30, 30]
    curve = learning_curve(res.scores)
    np.testing.assert_allclose(curve.mean, res.scores.mean(0))
    assert curve.mean[1] > curve.mean[-1]  # two relevant features beat all six with 1-NN
    assert set(res.paths[0].subsets[1]) == {0, 1}
    # stratification: each fold holds the same class counts ± 1
    counts = np.array([np.bincount(y[res.folds == f], minlength=2) for f in range(3)])
    assert np.ptp(counts, axis=0).max() <= 1


def test_sfs_and_1nn_small_cases():
    X = np.array([[0.0, 5.0], [1.0, 5.0], [10.0, 0.0], [11.0, 0.0]])
    y = np.array([0, 0, 1, 1])
    assert nearest_neighbour_accuracy(X[[0, 2]], y[[0, 2]], X[[1, 3]], y[[1, 3]]) == 1.0
    path = sequential_forward_selection(np.repeat(X, 3, axis=0), np.repeat(y, 3), n_folds=3, seed=0)
    assert isinstance(path, SearchPath) and len(path.subsets) == 2 and path.inner_scores[0] == 1.0
    folds = stratified_folds(np.array([0, 0, 0, 1, 1, 1]), 3, np.random.default_rng(0))
    assert sorted(folds.tolist()) == [0, 0, 1, 1, 2, 2]


def _mahalanobis(delta, cov):
    """J(S) = δ_S' Σ_SS⁻¹ δ_S, the population Mahalanobis separation of two Gaussian classes on S."""
    return lambda S: float(delta[list(S)] @ np.linalg.solve(cov[np.ix_(S, S)], delta[list(S)]))


def _planted_mahalanobis():
    # Feature 0 is the best single feature (J = 1); the pairs (1, 2) and (3, 4) are weak alone but, being
    # correlated 0.9 with opposite mean shifts, strong together (J = 5.0 and 3.2); 5..9 are weak and independent.
    cov = np.eye(10)
    for a, b in ((1, 2), (3, 4)):
        cov[a, b] = cov[b, a] = 0.9
    delta = np.array([1.0, 0.5, -0.5, 0.4, -0.4, 0.3, 0.25, 0.2, 0.15, 0.1])
    return _mahalanobis(delta, cov)


def test_sffs_matches_exhaustive_search_on_planted_problems():
    J = _planted_mahalanobis()
    sfs, sffs, full = forward_search(J, 10), floating_forward_search(J, 10), exhaustive_search(J, 10)
    np.testing.assert_allclose(sffs.inner_scores, full.inner_scores, rtol=1e-12)
    assert sorted(sffs.subsets[1].tolist()) == [1, 2] and sorted(full.subsets[1].tolist()) == [1, 2]
    assert sfs.subsets[1].tolist() == [0, 1] and sfs.inner_scores[1] < full.inner_scores[1] - 3  # SFS is trapped
    assert np.all(sffs.inner_scores >= sfs.inner_scores - 1e-12)
    # the same trap on data, with the criterion of Reunanen's experiments (5-fold CV accuracy of 1-NN):
    # y = [x1·x2 > 0] (an XOR, invisible to each of x1, x2 alone); x0 is informative alone.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(150, 6))
    y = (X[:, 1] * X[:, 2] > 0).astype(int)
    X[:, 0] = 0.8 * y + rng.normal(size=150)
    Jcv, D = _cv_criterion(X, y, nearest_neighbour_accuracy, 5, 0)
    sfs, sffs, full = forward_search(Jcv, D), floating_forward_search(Jcv, D), exhaustive_search(Jcv, D)
    np.testing.assert_allclose(sffs.inner_scores, full.inner_scores)
    assert sorted(sffs.subsets[1].tolist()) == [1, 2] and 0 in sfs.subsets[1]
    assert np.all(sffs.inner_scores >= sfs.inner_scores)
    path = sequential_floating_forward_selection(X, y, seed=0)  # the public CV-guided wrapper: same search
    np.testing.assert_allclose(path.inner_scores, sffs.inner_scores)


def test_sffs_against_sfs_and_exhaustive_on_random_problems():
    # 300 random 8-feature Mahalanobis problems (fixed seed; deterministic searches, so no false alarms).
    # SFFS is a heuristic: it is not guaranteed to dominate SFS at every size. On these problems it falls below
    # SFS at some size in 2 of 300 (below by at most 6.2%), reaches the exhaustive optimum at every size in
    # 268 (SFS: 125), and is never below SFS at size 1 or 2 nor at the full set.
    rng = np.random.default_rng(0)
    worse = optimal_sffs = optimal_sfs = 0
    for _ in range(300):
        A = rng.normal(size=(8, 8))
        J = _mahalanobis(rng.normal(size=8), A @ A.T / 8 + 0.1 * np.eye(8))
        a, b, e = (f(J, 8).inner_scores for f in (forward_search, floating_forward_search, exhaustive_search))
        assert np.all(b[:2] >= a[:2] - 1e-12) and np.isclose(b[-1], a[-1]) and np.all(b <= e + 1e-9)
        assert np.all(b >= a * (1 - 0.07))
        worse += bool(np.any(b < a - 1e-10))
        optimal_sffs += bool(np.all(b >= e - 1e-10))
        optimal_sfs += bool(np.all(a >= e - 1e-10))
    assert worse <= 3 and optimal_sffs >= 260 and optimal_sfs <= 140


def test_sffs_inside_cross_indexing_and_the_complete_report():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(90, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    Xt = rng.normal(size=(300, 5))
    yt = (Xt[:, 0] + 0.5 * Xt[:, 1] > 0).astype(int)
    res = nested_selection_scores(X, y, "sffs", n_folds=3, inner_folds=3, seed=1)
    assert res.scores.shape == (3, 5) and res.sizes.tolist() == [1, 2, 3, 4, 5]
    assert all(len(p.subsets[i]) == i + 1 for p in res.paths for i in range(5))
    rep = cross_indexing_report(X, y, "sffs", X_test=Xt, y_test=yt, n_folds=3, inner_folds=3, seed=1)
    assert [m.method for m in rep.methods] == [0, 1, 2, 3]
    by = {m.name: m for m in rep.methods}
    # the estimates re-derive from the matrix (A and B via the public functions, method 0 from the final path)
    a = cross_index_a(rep.nested.scores)
    assert np.isclose(by["cross_index_a"].delta_e, a.gain) and np.isclose(by["cross_index_a"].size, a.size)
    assert np.isclose(by["cross_index_b"].delta_e, cross_index_b(rep.nested.scores).gain)
    inner = rep.final_path.inner_scores
    assert np.isclose(by["inner_cv"].delta_e, inner.max() - inner[-1])
    for m in rep.methods:
        assert len(m.final_subset) == int(np.round(m.size)) and np.isclose(m.eta, 100 * m.size / 5)
        assert np.isclose(m.bias, m.delta_e - m.delta_t)
        if m.method:
            assert m.interval[0] <= m.interval[1]
        else:
            assert np.isnan(m.interval[0])
    # the relevant features are found and beat the full set on the test set
    assert 0 in by["cross_index_a"].final_subset and by["cross_index_a"].delta_t > 0
    assert "| 2 cross_index_a |" in rep.table()
    no_test = cross_indexing_report(X, y, "sfs", n_folds=3, inner_folds=3, seed=1)
    assert all(np.isnan(m.delta_t) and np.isnan(m.bias) for m in no_test.methods)


def test_fold_gains_are_the_terms_of_the_gain():
    for est in (outer_loop_estimate(HAND), cross_index_a(HAND), cross_index_b(HAND)):
        assert np.isclose(est.fold_gains.mean(), est.gain)
    assert np.isclose(np.median(cross_index_a(HAND, stat="median").fold_gains), cross_index_a(HAND, stat="median").gain)


def test_stability_indices():
    assert jaccard_index([0, 1, 2], [1, 2, 3]) == 0.5
    assert jaccard_index(np.array([True, False, True]), np.array([True, False, False]), 3) == 0.5
    assert np.isclose(kuncheva_index([0, 1, 2], [1, 2, 3], 10), (2 * 10 - 9) / (3 * 7))
    assert kuncheva_index([0, 1], [0, 1], 10) == 1.0
    # random subsets: Kuncheva's index is 0 in expectation (Monte Carlo: 4000 pairs, |mean| < 4 s.e.)
    rng = np.random.default_rng(1)
    vals = [kuncheva_index(rng.choice(30, 5, replace=False), rng.choice(30, 5, replace=False), 30)
            for _ in range(4000)]
    assert abs(np.mean(vals)) < 4 * np.std(vals) / np.sqrt(4000)
    assert np.isclose(selection_stability([[0, 1], [0, 1], [0, 2]], 6, measure="jaccard"), (1 + 1 / 3 + 1 / 3) / 3)


def test_errors():
    with pytest.raises(DataError, match="scores must have at least 2 rows"):
        cross_index_a([[0.5, 0.6]])
    with pytest.raises(DataError, match="stat must be one of"):
        cross_index_b(HAND, stat="mode")
    with pytest.raises(DataError, match=r"sizes must give one size per column of scores \(3\)"):
        outer_loop_estimate(HAND, sizes=[1, 2])
    with pytest.raises(DataError, match=r"reference must be a column index in \[-3, 2\]; got 3"):
        cross_index_a(HAND, reference=3)
    with pytest.raises(DataError, match="scores must not contain NaN"):
        cross_index_a([[0.5, np.nan], [0.4, 0.3]])
    X, y = np.zeros((10, 3)), np.arange(10) % 2
    with pytest.raises(DataError, match=r"n_folds must be an integer in \[2, n_samples=10\]; got 1"):
        nested_selection_scores(X, y, lambda a, b: np.arange(3), n_folds=1)
    with pytest.raises(DataError, match="search must return a SearchPath or a 1-D integer ranking"):
        nested_selection_scores(X, y, lambda a, b: "abc", n_folds=2)
    with pytest.raises(DataError, match="search must return paths of the same length on every outer fold"):
        calls = iter([np.arange(3), np.arange(2)])
        nested_selection_scores(X, y, lambda a, b: next(calls), n_folds=2)
    with pytest.raises(DataError, match=r"max_features must lie in \[1, 3\]"):
        sequential_forward_selection(X, y, max_features=5)
    with pytest.raises(DataError, match=r"max_features must lie in \[1, 4\]; got 0"):
        floating_forward_search(lambda S: 0.0, 4, max_features=0)
    with pytest.raises(DataError, match="n_features must be a positive integer; got 0"):
        exhaustive_search(lambda S: 0.0, 0)
    with pytest.raises(DataError, match=r"search must be one of \['sffs', 'sfs'\] or a callable; got 'sbs'"):
        nested_selection_scores(X, y, "sbs", n_folds=2)
    with pytest.raises(DataError, match="X_test and y_test must be given together"):
        cross_indexing_report(X, y, X_test=X)
    with pytest.raises(DataError, match="level must be a number in \\(0, 1\\); got 1.5"):
        cross_indexing_report(X, y, level=1.5)
    with pytest.raises(DataError, match="X_test must have the 3 columns of X; got 2"):
        cross_indexing_report(X, y, X_test=X[:, :2], y_test=y)
    with pytest.raises(DataError, match="kuncheva_index needs subsets of the same size"):
        kuncheva_index([0, 1], [0], 5)
    with pytest.raises(DataError, match="kuncheva_index is undefined for subsets of size 5 out of 5"):
        kuncheva_index(np.arange(5), np.arange(5), 5)
    with pytest.raises(DataError, match="n_features must be an integer ≥ 2"):
        kuncheva_index([0], [1], 1)
    with pytest.raises(DataError, match=r"a holds indices outside \[0, 4\]"):
        jaccard_index([7], [1], 5)
    with pytest.raises(DataError, match="b must be a 1-D array of feature indices or a boolean mask"):
        jaccard_index([1], [[1, 2]])
    with pytest.raises(DataError, match="a as a boolean mask must have n_features=4 entries"):
        jaccard_index(np.array([True, False]), [1], 4)
    with pytest.raises(DataError, match="measure must be one of"):
        selection_stability([[0], [1]], 4, measure="dice")
    with pytest.raises(DataError, match="subsets must hold at least 2 selections"):
        selection_stability([[0]], 4)
    with pytest.raises(DataError, match="seed must be an int"):
        nested_selection_scores(X, y, lambda a, b: np.arange(3), n_folds=2, seed=0.5)


def test_one_nearest_neighbour_and_folds_agree_with_scikit_learn():
    from sklearn.neighbors import KNeighborsClassifier

    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(120, 4)), rng.integers(0, 3, 120)
    knn = KNeighborsClassifier(n_neighbors=1, algorithm="brute").fit(X[:90], y[:90])
    assert nearest_neighbour_accuracy(X[:90], y[:90], X[90:], y[90:]) == knn.score(X[90:], y[90:])
    folds = stratified_folds(y, 4, np.random.default_rng(0))
    for c in range(3):  # every class spread over the folds as evenly as possible
        per_fold = np.bincount(folds[y == c], minlength=4)
        assert per_fold.max() - per_fold.min() <= 1
