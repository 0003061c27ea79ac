"""Mladenić's search strategies and naive-Bayes evaluation harness (issue 17 item 5)."""

from itertools import combinations, pairwise

import numpy as np
import pytest
from sklearn.feature_selection import SequentialFeatureSelector
from sklearn.metrics import fbeta_score, make_scorer
from sklearn.model_selection import StratifiedKFold
from sklearn.naive_bayes import MultinomialNB

from latentfs.core.data import DataError
from latentfs.select.text_search import (
    STRATEGIES,
    TextSearchSelector,
    f_beta,
    naive_bayes_criterion,
    naive_bayes_curve,
    subset_search,
)


def planted_corpus(n_pos=30, n_neg=170, V=60, informative=(0, 1, 2), seed=0):
    """Zipf-like background words; the informative words are 6× likelier in positive documents."""
    rng = np.random.default_rng(seed)
    base = 1.0 / np.arange(1, V + 1)
    base = rng.permutation(base)
    pos = base.copy()
    pos[list(informative)] = 6 * base.max()
    X = np.vstack([
        rng.multinomial(40, pos / pos.sum(), size=n_pos),
        rng.multinomial(40, base / base.sum(), size=n_neg),
    ])
    y = np.r_[np.ones(n_pos, dtype=int), np.zeros(n_neg, dtype=int)]
    return X, y


# --- F-measure ---------------------------------------------------------------------------------------
def test_f_beta_oracles():
    assert np.isclose(f_beta(0.87, 0.17), 0.2, atol=0.005)  # Table 1, Ent., information gain
    assert np.isclose(f_beta(0.6, 0.3, beta=1.0), 2 * 0.6 * 0.3 / 0.9)  # F1 = harmonic mean
    assert np.isclose(f_beta(0.6, 0.3, beta=1e-6), 0.6) and np.isclose(f_beta(0.6, 0.3, beta=1e6), 0.3)
    assert f_beta(0.0, 0.0) == 0.0


# --- search --------------------------------------------------------------------------------------------
def _additive(weights):
    return lambda S: float(sum(weights[j] for j in S))


def test_greedy_searches_find_the_additive_optimum():
    # J additive: the best subset is the set of positive weights, which every greedy strategy must reach.
    w = {0: 2.0, 1: -1.0, 2: 0.5, 3: -0.2, 4: 3.0, 5: 0.1}
    for strategy in ("forward", "backward", "forward_stepwise", "backward_stepwise"):
        res = subset_search(_additive(w), 6, strategy=strategy)
        assert res.subset.tolist() == [0, 2, 4, 5], strategy
        assert np.isclose(res.score, 5.6)


def test_exhaustive_agreement_and_monotone_paths():
    # On a small non-additive criterion, compare with the brute-force optimum over all 2^D − 1 subsets and
    # check the stopping rule: each taken move raises J, or removes a feature without lowering J.
    rng = np.random.default_rng(4)
    D = 7
    a, B = rng.normal(size=D), rng.normal(scale=0.4, size=(D, D))

    def J(S):
        s = np.array(S)
        return float(a[s].sum() + B[np.ix_(s, s)].sum())

    optimum = max(J(S) for r in range(1, D + 1) for S in combinations(range(D), r))
    for strategy in STRATEGIES:
        res = subset_search(J, D, strategy=strategy, max_iter=300, seed=1)
        assert res.score <= optimum + 1e-12
        assert np.isclose(res.score, J(tuple(res.subset)))
        for prev, step in pairwise(res.path):
            assert step.score > prev.score or (step.action == "remove" and step.score >= prev.score) or (
                strategy == "random_mutation" and step.score >= prev.score)
    best = max(subset_search(J, D, strategy=s, max_iter=300, seed=1).score for s in STRATEGIES)
    assert best >= optimum - 0.5  # greedy searches need not be optimal, but here one comes close


def test_forward_with_size_matches_sklearn_sequential_selector():
    X, y = planted_corpus(n_pos=20, n_neg=40, V=8, seed=2)
    cv = StratifiedKFold(4, shuffle=True, random_state=0)
    scorer = make_scorer(fbeta_score, beta=2, zero_division=1.0)
    for direction in ("forward", "backward"):
        sk = SequentialFeatureSelector(MultinomialNB(alpha=1.0), n_features_to_select=3, direction=direction,
                                       scoring=scorer, cv=cv).fit(X, y)
        J = naive_bayes_criterion(X, y, positive_class=1, n_folds=4, seed=0)
        ours = subset_search(J, X.shape[1], strategy=direction, n_features_to_select=3)
        assert ours.subset.tolist() == np.flatnonzero(sk.get_support()).tolist(), direction


def test_random_mutation_is_seeded_and_respects_initial():
    w = {0: 2.0, 1: -1.0, 2: 0.5, 3: -0.2}
    a = subset_search(_additive(w), 4, strategy="random_mutation", seed=3, max_iter=50)
    b = subset_search(_additive(w), 4, strategy="random_mutation", seed=3, max_iter=50)
    assert a.subset.tolist() == b.subset.tolist() == [0, 2]
    start = subset_search(_additive(w), 4, strategy="random_mutation", initial=[1, 3], max_iter=1, seed=0)
    assert start.path[0].size == 2 and np.isclose(start.path[0].score, -1.2)


def test_candidates_restrict_and_order_breaks_ties():
    J = lambda S: float(len(S) == 1)  # noqa: E731 - every singleton ties
    res = subset_search(J, 5, strategy="forward", candidates=[3, 1, 4])
    assert res.subset.tolist() == [3]
    res = subset_search(lambda S: -float(sum(S)), 5, strategy="backward", candidates=[2, 4])
    assert set(res.subset.tolist()) <= {2, 4}


def test_search_errors():
    J = _additive({0: 1.0, 1: 1.0})
    with pytest.raises(DataError, match="strategy"):
        subset_search(J, 2, strategy="sideways")
    with pytest.raises(DataError, match="n_features_to_select applies to strategy='forward' or 'backward' only"):
        subset_search(J, 2, strategy="forward_stepwise", n_features_to_select=1)
    with pytest.raises(DataError, match=r"n_features_to_select must be an integer \[1, 2\]; got 3"):
        subset_search(J, 2, strategy="forward", n_features_to_select=3)
    with pytest.raises(DataError, match=r"candidates must be a non-empty set of column indices in \[0, 1\]"):
        subset_search(J, 2, candidates=[5])
    with pytest.raises(DataError, match="tol must be a finite number ≥ 0; got -1"):
        subset_search(J, 2, tol=-1)
    with pytest.raises(DataError, match="criterion returned NaN"):
        subset_search(lambda S: float("nan"), 2)
    with pytest.raises(DataError, match="initial must be a non-empty subset of the candidates"):
        subset_search(J, 2, strategy="random_mutation", initial=[7])


# --- naive Bayes harness --------------------------------------------------------------------------------
def test_naive_bayes_is_mladenic_eq1_with_laplace_estimates():
    # Eq. (1) with P(F|C) = (1 + TF(F, C))/(|V| + Σ TF(F′, C)) and P(C) = class frequency, by hand.
    X, y = planted_corpus(n_pos=10, n_neg=20, V=8, seed=5)
    nb = MultinomialNB(alpha=1.0).fit(X, y)
    log_post = []
    for c in (0, 1):
        tf = X[y == c].sum(axis=0)
        p = (1 + tf) / (X.shape[1] + tf.sum())
        log_post.append(np.log(np.mean(y == c)) + X @ np.log(p))
    L = np.column_stack(log_post)
    post = np.exp(L - L.max(axis=1, keepdims=True))
    post /= post.sum(axis=1, keepdims=True)
    assert np.allclose(nb.predict_proba(X), post)
    # An empty document goes to the majority class.
    assert nb.predict(np.zeros((1, 8)))[0] == 0


def test_curve_planted_words_beat_random():
    # 3 informative words among 60: odds ratio keeps them among its top 10; random mostly does not.
    # (Multinomial NB compares *relative* word frequencies, so the 3 planted words alone — boosted alike —
    # cannot separate the classes: it needs background words as reference. Hence k = 10, not 3.)
    X, y = planted_corpus(seed=1)
    grid = [10, np.inf]
    odds = naive_bayes_curve(X, y, "odds_ratio", n_features=grid, positive_class=1)
    rand = naive_bayes_curve(X, y, "random", n_features=grid, positive_class=1)
    assert odds.f_beta.shape == (5, 2) and (odds.n_kept[:, -1] == 60).all()
    assert odds.mean()[0] > rand.mean()[0] + 0.3
    assert np.allclose(odds.f_beta[:, -1], rand.f_beta[:, -1])  # all words: the same classifier
    row = odds.best()
    assert row["grid"] in (10.0, np.inf) and 0 <= row["f_beta_se"] <= row["f_beta"]


def test_curve_matches_an_independent_fold_loop():
    X, y = planted_corpus(seed=7)
    curve = naive_bayes_curve(X, y, "chi2", estimator="bernoulli", n_features=[5], positive_class=1, seed=3)
    from latentfs.select.scores import text_feature_scores

    f2 = []
    for train, test in StratifiedKFold(5, shuffle=True, random_state=3).split(X, y):
        top = text_feature_scores(X[train], y[train], "chi2", estimator="bernoulli").ranking()[:5]
        pred = MultinomialNB().fit(X[train][:, top], y[train]).predict(X[test][:, top])
        f2.append(fbeta_score(y[test], pred, beta=2, zero_division=1.0))
    assert np.allclose(curve.f_beta[:, 0], f2)


def test_vector_sizes_are_relative_to_the_positive_vocabulary():
    X, y = planted_corpus(seed=3)
    X[:, 50:] *= (y == 0)[:, None]  # words 50..59 never occur in positive documents
    X[y == 1, :50] += 1  # and words 0..49 occur in every one: the positive vocabulary is 50 words
    curve = naive_bayes_curve(X, y, "term_freq", vector_sizes=[0.5, 1.0, np.inf], positive_class=1)
    assert curve.relative
    assert (curve.n_kept[:, 1] == 50).all() and (curve.n_kept[:, 0] == 25).all() and (curve.n_kept[:, 2] == 60).all()


def test_threshold_trades_recall_for_precision():
    X, y = planted_corpus(seed=8)
    lo = naive_bayes_curve(X, y, "odds_ratio", n_features=[10], positive_class=1, threshold=0.05)
    hi = naive_bayes_curve(X, y, "odds_ratio", n_features=[10], positive_class=1, threshold=0.95)
    assert lo.mean("recall")[0] >= hi.mean("recall")[0]


def test_harness_errors():
    X, y = planted_corpus()
    with pytest.raises(DataError, match="exactly one of n_features or vector_sizes"):
        naive_bayes_curve(X, y, "odds_ratio")
    with pytest.raises(DataError, match="positive numbers"):
        naive_bayes_curve(X, y, "odds_ratio", n_features=[0])
    with pytest.raises(DataError, match=r"positive_class must be one of the labels \[0, 1\]; got 'x'"):
        naive_bayes_curve(X, y, "odds_ratio", n_features=[3], positive_class="x")
    with pytest.raises(DataError, match="non-negative counts"):
        naive_bayes_curve(-X, y, "odds_ratio", n_features=[3])
    with pytest.raises(DataError, match="threshold must lie in"):
        naive_bayes_curve(X, y, "odds_ratio", n_features=[3], threshold=1.0)
    with pytest.raises(DataError, match="scoring"):
        naive_bayes_criterion(X, y, scoring="auc")


# --- selector --------------------------------------------------------------------------------------------
def test_selector_finds_a_small_sufficient_subset_of_planted_words():
    # Multinomial NB separates this planted corpus with one planted word plus one reference word, so the
    # wrappers stop at the smallest subsets that reach the criterion's maximum (inner-CV F2 = 1).
    X, y = planted_corpus(V=40, seed=6)
    for strategy in ("forward", "forward_stepwise", "backward"):
        sel = TextSearchSelector(strategy, candidates=15, n_folds=4).fit(X, y)
        kept = set(sel.get_support(indices=True).tolist())
        assert kept & {0, 1, 2} and len(kept) <= 3, strategy
        assert np.isclose(sel.search_.score, 1.0)
        assert set(sel.search_.subset.tolist()) <= set(sel.weights_.ranking()[:15].tolist())
        assert sel.search_.strategy == strategy and sel.transform(X).shape[1] == len(kept)
    back = TextSearchSelector("backward", candidates=10, n_features_to_select=3, n_folds=4).fit(X, y)
    assert back.get_support().sum() == 3
    assert (back.search_.scores[1:] >= back.search_.scores[0]).all()  # no removal made it worse than all 10
    with pytest.raises(DataError, match="requires y"):
        TextSearchSelector().fit(X)
