"""Topic coherence (UMass, NPMI) on hand-worked examples, and alignment of components across runs."""

import numpy as np
import pytest
import scipy.sparse as sp

import latentfs
from latentfs.core.data import DataError
from latentfs.evaluate.coherence import align_components, npmi, top_word_indices, topic_coherence, umass
from latentfs.inference.dca.weights import top_words
from latentfs.models.dca import DirichletDCA

# 5 documents × 4 words; word presence:
#        w0 w1 w2 w3
# d0      1  1  0  0
# d1      1  1  1  0
# d2      1  0  0  1
# d3      0  0  1  1
# d4      1  1  0  0
R = np.array([[2, 1, 0, 0], [1, 1, 3, 0], [1, 0, 0, 1], [0, 0, 2, 2], [4, 1, 0, 0]])


def test_umass_by_hand():
    # D(w0)=4, D(w1)=3, D(w2)=2; D(w0,w1)=3, D(w0,w2)=1, D(w1,w2)=1 (Mimno et al.'s sum with +1)
    expected = np.log((3 + 1) / 4) + np.log((1 + 1) / 4) + np.log((1 + 1) / 3)
    assert umass(np.array([0, 1, 2]), sp.csr_matrix(R), convention="mimno") == pytest.approx(expected, rel=1e-12)
    # the order matters: the denominator is the earlier (more probable) word's frequency
    # order (w2, w0, w1): log((1+1)/2) + log((1+1)/2) + log((3+1)/4) = 0
    assert umass(np.array([2, 0, 1]), sp.csr_matrix(R), convention="mimno") == pytest.approx(0.0, abs=1e-15)
    # gensim's default: the mean of log((D(v_m, v_l)/N + 1e-12) / (D(v_l)/N)) over the same pairs
    gensim = np.mean([np.log((3 / 5 + 1e-12) / (4 / 5)), np.log((1 / 5 + 1e-12) / (4 / 5)),
                      np.log((1 / 5 + 1e-12) / (3 / 5))])
    assert umass(np.array([0, 1, 2]), sp.csr_matrix(R)) == pytest.approx(gensim, rel=1e-12)


def test_npmi_by_hand_with_limits():
    ref = sp.csr_matrix(R)
    # w0, w1: P = 3/5, P0 = 4/5, P1 = 3/5 -> log(1.25) / log(5/3)
    assert npmi(np.array([0, 1]), ref) == pytest.approx(np.log(1.25) / np.log(5 / 3), rel=1e-12)
    # w1, w3 never co-occur: -1
    assert npmi(np.array([1, 3]), ref) == -1.0
    # mean over the three pairs of (w0, w2, w3)
    p = lambda d: d / 5  # noqa: E731
    pairs = [np.log(p(1) / (p(4) * p(2))) / -np.log(p(1)),  # w0, w2
             np.log(p(1) / (p(4) * p(2))) / -np.log(p(1)),  # w0, w3
             np.log(p(1) / (p(2) * p(2))) / -np.log(p(1))]  # w2, w3
    assert npmi(np.array([0, 2, 3]), ref) == pytest.approx(np.mean(pairs), rel=1e-12)
    # words present in every document: the limit 1
    assert npmi(np.array([0, 1]), sp.csr_matrix(np.ones((3, 2)))) == 1.0


def test_topic_coherence_uses_each_components_top_words():
    theta = np.array([[0.5, 0.3, 0.15, 0.05], [0.05, 0.1, 0.35, 0.5]])
    assert top_word_indices(theta, 3).tolist() == [[0, 1, 2], [3, 2, 1]]
    got = topic_coherence(theta, R, measure="umass", n_top=3)
    np.testing.assert_allclose(got, [umass(np.array([0, 1, 2]), sp.csr_matrix(R)),
                                     umass(np.array([3, 2, 1]), sp.csr_matrix(R))])
    lists = topic_coherence([[0, 1], [1, 3]], R, measure="npmi")
    np.testing.assert_allclose(lists, [np.log(1.25) / np.log(5 / 3), -1.0])


def test_planted_topics_are_more_coherent_than_shuffled_ones():
    sim = DirichletDCA(3, alpha=0.1, gamma=0.05).simulate(150, 40, doc_length=40, seed=0)
    rng = np.random.default_rng(0)
    occurring = np.flatnonzero(sim["counts"].sum(0) > 0)
    planted_top = [list(t) for t in top_word_indices(sim["topic_word"], 5)]
    random_top = [list(rng.choice(occurring, 5, replace=False)) for _ in range(3)]
    for measure in ("umass", "npmi"):
        planted = topic_coherence(planted_top, sim["counts"], measure=measure).mean()
        random = topic_coherence(random_top, sim["counts"], measure=measure).mean()
        assert planted > random


def test_align_components_across_runs_and_top_words():
    X = DirichletDCA(3, alpha=0.2, gamma=0.1).simulate(120, 30, doc_length=80, seed=2)["counts"]
    runs = [latentfs.fit(DirichletDCA(3, alpha=0.2), X, method="vb", seed=s, max_iter=200, warn=False,
                         num_ll_draws=0) for s in (0, 1)]
    al = align_components(runs[0], runs[1])
    assert sorted(al.permutation.tolist()) == [0, 1, 2]
    assert al.mean_distance < 0.2 and al.distances.shape == (3,)
    aligned = runs[1].mean("topic_word")[al.permutation]
    # aligned components share their most probable word (top_words gives the names)
    names = runs[0].coords["feature"]
    assert top_words(runs[0], 3).xs("word", axis=1, level="field").loc[1].tolist() == [names[int(np.argmax(row))] for row in aligned]
    theta = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.4, 0.3]])
    perm = np.array([2, 0, 1])
    al = align_components(theta, theta[perm])
    np.testing.assert_array_equal(theta[perm][al.permutation], theta)
    assert al.mean_distance == 0.0


def test_bad_inputs():
    theta = np.array([[0.5, 0.3, 0.15, 0.05], [0.05, 0.1, 0.35, 0.5]])
    with pytest.raises(DataError, match="measure must be one of"):
        topic_coherence(theta, R, measure="cv")
    with pytest.raises(DataError, match=r"n_top must be an integer in \[2, 4\]"):
        topic_coherence(theta, R, n_top=1)
    with pytest.raises(DataError, match="reference must have 4 features"):
        topic_coherence(theta, R[:, :3])
    with pytest.raises(DataError, match="at least 2 distinct word indices"):
        topic_coherence([[0, 0]], R)
    with pytest.raises(DataError, match="reference must contain every top word for UMass"):
        topic_coherence([[0, 1]], np.array([[0, 1], [0, 2]]))
    with pytest.raises(DataError, match="topic_word must be a fitted result or a 2-D"):
        topic_coherence(-theta, R)
    with pytest.raises(DataError, match="reference must hold non-negative integer counts"):
        topic_coherence(theta, R - 3)
    with pytest.raises(DataError, match="must have the same shape"):
        align_components(theta, theta[:1])
    with pytest.raises(DataError, match="topic_word_b must be a fitted result"):
        align_components(theta, np.ones(3))
    with pytest.raises(DataError, match="positive total weight"):
        align_components(theta, np.zeros_like(theta))


def test_top_words_is_a_table_labelled_by_rank_and_component():
    """issue 34: top_words returned unlabelled lists; it returns rank × (component, word/weight)."""
    X = DirichletDCA(3, alpha=0.2, gamma=0.1).simulate(120, 30, doc_length=80, seed=2)["counts"]
    result = latentfs.fit(DirichletDCA(3, alpha=0.2), X, method="vb", seed=0, max_iter=100, warn=False,
                          num_ll_draws=0)
    table = top_words(result, 4)
    theta = result.mean("topic_word")
    names = result.coords["feature"]
    assert table.index.name == "rank" and table.index.tolist() == [1, 2, 3, 4]
    assert table.columns.names == ["component", "field"]
    assert table.columns.unique("component").tolist() == [0, 1, 2]
    for k in range(3):
        best = np.argsort(-theta[k], kind="stable")[:4]
        assert table[k]["word"].tolist() == [names[j] for j in best]
        assert np.array_equal(table[k]["weight"].to_numpy(), theta[k][best])
        assert table[k]["weight"].is_monotonic_decreasing
    with pytest.raises(DataError, match=r"n must be an integer in \[1, 30\]; got 0"):
        top_words(result, 0)
