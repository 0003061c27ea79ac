"""Mladenić's text feature scores on hand-worked contingency tables (digest book_part2 §2.3, §2.7)."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import ndtri
from scipy.stats import chi2_contingency
from sklearn.metrics import mutual_info_score

from latentfs.core.data import DataError
from latentfs.select.scores import (
    MEASURES,
    ProbabilityEstimator,
    TextScoreSelector,
    text_feature_scores,
)


@pytest.fixture
def table():
    """10 documents: 4 pos (3 contain F), 6 neg (1 contains F). Word G occurs in every document once;
    F occurs twice where present. Document 9 is empty apart from G."""
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    f = np.array([2, 2, 2, 0, 2, 0, 0, 0, 0, 0])
    X = np.column_stack([f, np.ones(10, dtype=int)])
    return X, y, (f > 0).astype(int)


def score(X, y, m, est="bernoulli", **kw):
    return text_feature_scores(X, y, m, estimator=est, **kw).scores


def test_two_class_measures_by_hand(table):
    X, y, occ = table
    p1, p0 = 3 / 4, 1 / 6
    assert np.isclose(score(X, y, "odds_ratio")[0], np.log(15.0))
    assert np.isclose(score(X, y, "bns")[0], abs(ndtri(p1) - ndtri(p0)))
    assert np.isclose(score(X, y, "fisher_index")[0], (p1 - p0) ** 2 / (p1 * (1 - p1) + p0 * (1 - p0)))
    assert np.isclose(score(X, y, "chi2")[0], 10 * (3 * 5 - 1 * 1) ** 2 / (4 * 6 * 4 * 6))
    cont = np.array([[3, 1], [1, 5]])
    assert np.isclose(score(X, y, "chi2")[0], chi2_contingency(cont, correction=False)[0])
    phi = np.corrcoef(occ, y)[0, 1]
    assert np.isclose(score(X, y, "chi2")[0], 10 * phi**2)
    # a word in every document carries nothing
    for m in ("odds_ratio", "bns", "fisher_index", "chi2", "info_gain", "cross_entropy_txt", "weight_of_evidence"):
        assert abs(score(X, y, m)[1]) < 1e-12, m


def test_information_measures_by_hand(table):
    X, y, occ = table
    pF, pC = 0.4, np.array([0.6, 0.4])  # classes sorted: 0 (neg), 1 (pos)
    pC_F = np.array([1 / 4, 3 / 4])
    pC_notF = np.array([5 / 6, 1 / 6])
    ce = pF * np.sum(pC_F * np.log(pC_F / pC))
    ce_bar = (1 - pF) * np.sum(pC_notF * np.log(pC_notF / pC))
    assert np.isclose(score(X, y, "cross_entropy_txt")[0], ce)
    assert np.isclose(score(X, y, "info_gain")[0], ce + ce_bar)  # InfGain = CE(F) + CE(F̄)
    assert np.isclose(score(X, y, "info_gain")[0], mutual_info_score(y, occ))  # = I(C; F) in nats
    pF_C = np.array([1 / 6, 3 / 4])
    assert np.isclose(score(X, y, "mutual_info_txt")[0], np.sum(pC * np.log(pF_C / pF)))
    woe = np.sum(pC * pF * np.abs(np.log(pC_F * (1 - pC) / (pC * (1 - pC_F)))))
    assert np.isclose(score(X, y, "weight_of_evidence")[0], woe)
    assert score(X, y, "doc_freq").tolist() == [4.0, 10.0]
    assert score(X, y, "term_freq").tolist() == [8.0, 10.0]


def test_multinomial_estimator_by_hand(table):
    X, y, _ = table
    # tokens: pos class 6 F + 4 G = 10, neg 2 F + 6 G = 8; add-one over V = 2 words
    pF_C = np.array([(2 + 1) / (8 + 2), (6 + 1) / (10 + 2)])
    pF = (8 + 1) / (18 + 2)
    pC = np.array([0.6, 0.4])
    assert np.isclose(score(X, y, "mutual_info_txt", "multinomial")[0], np.sum(pC * np.log(pF_C / pF)))
    est = ProbabilityEstimator("multinomial", smoothing=0.0)
    assert np.isclose(score(X, y, "odds_ratio", est)[0],
                      np.log((6 / 10) * (1 - 2 / 8) / ((1 - 6 / 10) * (2 / 8))))


def test_mutual_info_txt_pitfall_and_sign_properties(rng):
    X = rng.poisson(0.3, size=(200, 40))
    y = rng.integers(0, 3, size=200)
    X[y == 1, 0] += 3  # an informative word
    mi_b = score(X, y, "mutual_info_txt", "bernoulli")
    assert np.all(mi_b <= 1e-12)  # Jensen: ≤ 0 under one consistent Bernoulli joint …
    assert mi_b[0] < np.median(mi_b)  # … so it ranks the informative word low
    mi_m = score(X, y, "mutual_info_txt", "multinomial")
    assert mi_m.max() > 0  # separately estimated P(F|C), P(F) break the identity
    assert np.all(score(X, y, "cross_entropy_txt") >= -1e-15)
    ig = score(X, y, "info_gain")
    assert np.all(ig >= -1e-15) and ig.argmax() == 0
    np.testing.assert_allclose(ig, [mutual_info_score(y, X[:, j] > 0) for j in range(40)], atol=1e-12)


def test_class_swap_symmetries(rng):
    X = rng.poisson(0.5, size=(60, 15))
    y = rng.integers(0, 2, size=60)
    # Mladenić's odds ratio is one-sided by definition: swapping the classes negates it
    np.testing.assert_allclose(score(X, y, "odds_ratio", positive_class=1),
                               -score(X, y, "odds_ratio", positive_class=0), atol=1e-12)
    for m in ("bns", "fisher_index", "chi2", "info_gain", "weight_of_evidence"):
        np.testing.assert_allclose(score(X, y, m), score(X, 1 - y, m), atol=1e-12)


def test_multiclass_one_vs_rest_combination(rng):
    X = rng.poisson(0.5, size=(90, 10))
    y = rng.integers(0, 3, size=90)
    per = np.stack([score(X, y, "chi2", positive_class=c) for c in range(3)])
    prior = np.bincount(y) / 90
    np.testing.assert_allclose(score(X, y, "chi2"), prior @ per)
    np.testing.assert_allclose(score(X, y, "chi2", multiclass="max"), per.max(0))
    np.testing.assert_allclose(score(X, y, "chi2", multiclass="mean"), per.mean(0))
    np.testing.assert_allclose(per[0], [score(X, (y == 0).astype(int), "chi2")[j] for j in range(10)])


def test_planted_words_on_synthetic_corpus_and_sparse_input():
    # class-conditional multinomials over a Zipfian vocabulary; 5 class-indicative words, 10% positives
    rng = np.random.default_rng(8)
    V, n = 300, 400
    base = 1.0 / np.arange(1, V + 1)
    y = (rng.random(n) < 0.1).astype(int)
    planted = np.array([50, 80, 120, 200, 250])
    X = np.zeros((n, V), dtype=int)
    for i in range(n):
        p = base.copy()
        if y[i]:
            p[planted] *= 40
        X[i] = rng.multinomial(60, p / p.sum())
    for m in ("info_gain", "odds_ratio", "chi2", "bns"):
        fw = text_feature_scores(sp.csr_matrix(X), y, m, estimator="laplace")
        assert set(fw.ranking()[:5]) == set(planted), m
        np.testing.assert_allclose(fw.scores, score(X, y, m, "laplace"))
    sel = TextScoreSelector("info_gain", n_features_to_select=5).fit(sp.csr_matrix(X), y)
    assert set(sel.get_support(indices=True)) == set(planted)
    assert sel.transform(sp.csr_matrix(X)).shape == (n, 5)
    r = text_feature_scores(X, y, "random", estimator="bernoulli", seed=1)
    np.testing.assert_array_equal(r.scores, text_feature_scores(X, y, "random", estimator="bernoulli", seed=1).scores)


def test_every_measure_runs_and_is_finite_with_smoothing(rng):
    X = rng.poisson(0.2, size=(30, 12))
    y = rng.integers(0, 2, size=30)
    for m in MEASURES:
        assert np.all(np.isfinite(score(X, y, m, "laplace"))), m


def test_errors(table):
    X, y, _ = table
    with pytest.raises(DataError, match="estimator must be one of \\['bernoulli', 'laplace', 'multinomial'\\]"):
        text_feature_scores(X, y, "chi2", estimator="gaussian")
    with pytest.raises(DataError, match="estimator must be one of"):
        text_feature_scores(X, y, "chi2", estimator=3)
    with pytest.raises(DataError, match="estimator.event_model must be 'bernoulli' or 'multinomial'"):
        text_feature_scores(X, y, "chi2", estimator=ProbabilityEstimator("poisson"))
    with pytest.raises(DataError, match="estimator.smoothing must be finite and ≥ 0"):
        text_feature_scores(X, y, "chi2", estimator=ProbabilityEstimator(smoothing=-1.0))
    with pytest.raises(DataError, match=r"estimator.clip must lie in \[0, 0.5\)"):
        text_feature_scores(X, y, "chi2", estimator=ProbabilityEstimator(clip=0.7))
    with pytest.raises(DataError, match="measure must be one of"):
        text_feature_scores(X, y, "gini", estimator="bernoulli")
    with pytest.raises(DataError, match="multiclass must be one of"):
        text_feature_scores(X, y, "chi2", estimator="bernoulli", multiclass="min")
    with pytest.raises(DataError, match="positive_class must be one of the labels \\[0, 1\\]; got 7"):
        text_feature_scores(X, y, "odds_ratio", estimator="bernoulli", positive_class=7)
    with pytest.raises(DataError, match="X must hold non-negative integer counts"):
        text_feature_scores(X * 0.5, y, "chi2", estimator="bernoulli")
    with pytest.raises(DataError, match="y must have one label per sample: got 9 labels for 10 samples"):
        text_feature_scores(X, y[:-1], "chi2", estimator="bernoulli")
    with pytest.raises(DataError, match="y must hold at least 2 classes"):
        text_feature_scores(X, np.zeros(10), "chi2", estimator="bernoulli")
    with pytest.raises(DataError, match="TextScoreSelector needs class labels"):
        TextScoreSelector().fit(X)
    with pytest.raises(DataError, match="seed must be an int"):
        text_feature_scores(X, y, "random", estimator="bernoulli", seed="x")


def test_bns_is_forman_absolute_and_symmetric_in_class_swap(rng):
    # Forman (2003): BNS = |F⁻¹(tpr) − F⁻¹(fpr)|; a word only in negative documents is as informative as
    # one only in positive documents, and both outrank a word spread evenly over the classes.
    y = np.array([1] * 10 + [0] * 10)
    only_pos = np.r_[np.ones(10), np.zeros(10)]
    only_neg = 1 - only_pos
    even = np.tile([1, 0], 10)
    X = np.column_stack([only_pos, only_neg, even]).astype(int)
    b = score(X, y, "bns")
    assert np.isclose(b[0], b[1]) and b[1] > b[2] >= 0
    np.testing.assert_allclose(score(X, y, "bns", positive_class=1), score(X, y, "bns", positive_class=0))
    Xr = rng.poisson(0.5, size=(60, 15))
    yr = rng.integers(0, 2, size=60)
    np.testing.assert_allclose(score(Xr, yr, "bns"), score(Xr, 1 - yr, "bns"), atol=1e-12)


def test_mutual_info_txt_finite_with_zero_cells_under_default_estimator():
    # a word absent from one class: P(F|C) = 0 under the plug-in (selector default) estimator
    X = np.array([[1, 1], [1, 0], [0, 1], [0, 0]])
    y = np.array([1, 1, 0, 0])
    est = TextScoreSelector().estimator
    mi = score(X, y, "mutual_info_txt", est)
    assert np.all(np.isfinite(mi))
    sel = TextScoreSelector("mutual_info_txt").fit(X, y)
    assert np.all(np.isfinite(sel.weights_.scores))


def test_default_selector_keeps_the_positive_vocabulary_not_everything():
    # Mladenić (Fig. 5): every measure peaks near "vector size 1", the vocabulary of the positive
    # (minority) class documents; the default k is that size, not all words.
    rng = np.random.default_rng(3)
    n, V = 200, 400
    y = (np.arange(n) < 20).astype(int)
    X = np.zeros((n, V), dtype=int)
    X[y == 1, :50] = rng.poisson(0.5, size=(20, 50))
    X[y == 0] = rng.poisson(0.02, size=(180, V))
    sel = TextScoreSelector().fit(X, y)
    k = int(sel.get_support().sum())
    assert k == int(np.count_nonzero(X[y == 1].sum(axis=0)))
    assert 0 < k < V
    assert sel.get_support()[:50].mean() > 0.9  # the positive-class words are kept
    # explicit k or threshold still win
    assert TextScoreSelector(n_features_to_select=7).fit(X, y).get_support().sum() == 7
    assert TextScoreSelector(n_features_to_select=None).fit(X, y).get_support().all()
