"""Leverage-score selection for k-means (Boutsidis, Mahoney & Drineas 2009): oracles of digest A4."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from latentfs.core.data import DataError
from latentfs.select.leverage import (
    LeverageScoreSelector,
    clustering_accuracy,
    kmeans,
    kmeans_feature_selection,
    kmeans_objective,
    leverage_scores,
    leverage_scores_from_data,
    merge_duplicates,
    right_singular_vectors,
    sample_features,
    svd_lower_bound,
)


def indicator(labels, k):
    """Cluster indicator matrix X (n × k): X_ij = 1/sqrt(s_j) when point i is in cluster j."""
    X = np.zeros((len(labels), k))
    for j in range(k):
        members = labels == j
        X[members, j] = 1 / np.sqrt(members.sum())
    return X


def mixture(rng, n=30, d=200, g=10, k=3, shift=4.0):
    lab = np.arange(n) % k
    A = rng.normal(size=(n, d))
    centres = rng.normal(scale=shift, size=(k, g))
    A[:, :g] += centres[lab]
    return A, lab


def brute_force_kmeans(A, k):
    best = np.inf
    n = A.shape[0]
    for assign in itertools.product(range(k), repeat=n - 1):
        lab = np.array((0, *assign))
        if len(set(lab)) == k:
            best = min(best, kmeans_objective(A, lab))
    return best


# --- exact tier ----------------------------------------------------------------------------------
def test_leverage_scores_are_a_distribution(rng):
    A = rng.normal(size=(20, 50))
    V, _ = right_singular_vectors(A, 4)
    p = leverage_scores(V)
    assert np.all(p >= 0) and p.sum() == pytest.approx(1.0)
    assert np.sum(V**2) == pytest.approx(4.0)
    np.testing.assert_allclose(V.T @ V, np.eye(4), atol=1e-12)


def test_objective_equals_indicator_form_and_pythagoras_and_lower_bound(rng):
    A = rng.normal(size=(15, 40))
    k = 3
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    Ak = U[:, :k] * s[:k] @ Vt[:k]
    for _ in range(10):
        lab = rng.permutation(np.arange(15) % k)
        X = indicator(lab, k)
        np.testing.assert_allclose(X.T @ X, np.eye(k), atol=1e-12)
        F = np.linalg.norm(A - X @ X.T @ A) ** 2
        assert kmeans_objective(A, lab) == pytest.approx(F, rel=1e-12)
        P = np.eye(15) - X @ X.T
        # eq. (14): ‖A − XXᵀA‖² = ‖(I − XXᵀ)A_k‖² + ‖(I − XXᵀ)A_{ρ−k}‖²
        assert F == pytest.approx(np.linalg.norm(P @ Ak) ** 2 + np.linalg.norm(P @ (A - Ak)) ** 2, rel=1e-10)
        # eq. (5): ‖A − A_k‖² ≤ F for every partition
        assert svd_lower_bound(A, k) <= F + 1e-10
        # translation invariance
        assert kmeans_objective(A + rng.normal(size=40), lab) == pytest.approx(F, rel=1e-10)


def test_lemma1_theta1_is_zero_and_sampling_identity(rng):
    A = rng.normal(size=(20, 80))
    k = 3
    V, _ = right_singular_vectors(A, k)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    Ak = U[:, :k] * s[:k] @ Vt[:k]
    idx, w = sample_features(leverage_scores(V), 30, seed=1)
    SD = np.zeros((80, 30))
    SD[idx, np.arange(30)] = w
    VSD = V.T @ SD
    assert np.linalg.matrix_rank(VSD) == k
    # θ1 = ‖A_k − A_k SD (V_kᵀSD)⁺ V_kᵀ‖ = 0
    np.testing.assert_allclose(Ak @ SD @ np.linalg.pinv(VSD) @ V.T, Ak, atol=1e-9)
    # V_kᵀ S D² Sᵀ V_k = (1/r) Σ_t y_t y_tᵀ with y = V_(i)/sqrt(p_i)
    p = leverage_scores(V)
    Y = V[idx] / np.sqrt(p[idx])[:, None]
    np.testing.assert_allclose(VSD @ VSD.T, Y.T @ Y / 30, atol=1e-12)


def test_duplicate_merging_preserves_the_gram_matrix(rng):
    A = rng.normal(size=(10, 12))
    idx = np.array([3, 5, 3, 3, 0])
    w = rng.uniform(0.5, 2, size=5)
    uniq, mw = merge_duplicates(idx, w)
    full = (A[:, idx] * w) @ (A[:, idx] * w).T
    np.testing.assert_allclose((A[:, uniq] * mw) @ (A[:, uniq] * mw).T, full, atol=1e-12)


def test_sparse_dense_and_randomized_svd_agree(rng):
    A = rng.normal(size=(40, 5)) @ rng.normal(size=(5, 120))  # rank 5
    Asp = sp.csr_matrix(np.where(rng.random(A.shape) < 0.3, A, 0.0))
    for center in (False, True):
        Vd, sd = right_singular_vectors(Asp.toarray(), 3, center=center)
        Vs, ss = right_singular_vectors(Asp, 3, center=center)
        np.testing.assert_allclose(ss, sd, rtol=1e-8)
        np.testing.assert_allclose(leverage_scores(Vs), leverage_scores(Vd), atol=1e-8)
    tall = sp.csr_matrix(Asp.T)  # n > d: the d × d Gram path
    Vt, st = right_singular_vectors(tall, 3, center=True)
    Vtd, std = right_singular_vectors(tall.toarray(), 3, center=True)
    np.testing.assert_allclose(st, std, rtol=1e-8)
    np.testing.assert_allclose(leverage_scores(Vt), leverage_scores(Vtd), atol=1e-8)
    Vr, sr = right_singular_vectors(A, 5, method="randomized", seed=0)
    Ve, se = right_singular_vectors(A, 5)
    np.testing.assert_allclose(sr, se, rtol=1e-8)
    np.testing.assert_allclose(leverage_scores(Vr), leverage_scores(Ve), atol=1e-10)


def test_sparse_randomized_svd_on_the_gram_side_matches_exact(rng, monkeypatch):
    # A wide sparse matrix of rank 5 (60 mixtures of 5 sparse rows): n² ≤ d·m, so the randomized range finder
    # iterates on the 60 × 60 Gram matrix; with k + oversampling ≥ rank it must recover the exact subspace.
    R = sp.random(5, 2000, density=0.02, random_state=np.random.RandomState(3), format="csr")
    A = sp.csr_matrix(rng.normal(size=(60, 5)) @ R)
    from latentfs.select import singular

    calls, original = [], singular._randomized_gram_left
    monkeypatch.setattr(singular, "_randomized_gram_left", lambda *a, **k: calls.append(1) or original(*a, **k))
    for center in (False, True):
        Ve, se = right_singular_vectors(A, 4, center=center)
        Vr, sr = right_singular_vectors(A, 4, method="randomized", center=center, seed=0)
        np.testing.assert_allclose(sr, se, rtol=1e-9)
        np.testing.assert_allclose(np.abs(Vr.T @ Ve), np.eye(4), atol=1e-8)  # same directions, up to sign
        p_exact, _ = leverage_scores_from_data(A, 4, center=center)
        p_rand, s_rand = leverage_scores_from_data(A, 4, method="randomized", center=center, seed=0)
        np.testing.assert_allclose(p_rand, p_exact, atol=1e-10)
        np.testing.assert_allclose(s_rand, se, rtol=1e-9)
    assert len(calls) == 4  # every randomized call took the Gram side
    with pytest.raises(DataError, match="numerical rank of X \\(5\\)"):
        leverage_scores_from_data(A, 6, method="randomized", seed=0)


def test_kmeans_and_accuracy():
    A = np.array([[0.0, 0], [0.1, 0], [5, 5], [5.1, 5], [10, 0], [10, 0.2]])
    res = kmeans(A, 3, seed=0)
    assert clustering_accuracy(res.labels, [0, 0, 1, 1, 2, 2]) == 1.0
    assert res.objective == pytest.approx(kmeans_objective(A, res.labels))


def test_kmeans_agrees_with_scikit_learn(rng):
    from sklearn.cluster import KMeans

    A, _ = mixture(rng, n=60, d=20, g=5)
    ours = kmeans(A, 3, n_init=10, seed=0).objective
    theirs = KMeans(3, n_init=10, random_state=0).fit(A).inertia_
    assert ours == pytest.approx(theirs, rel=1e-6)


# --- statistical tier ----------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["iid", "bernoulli"])
def test_sampling_is_unbiased(rng, scheme):
    # E[S D² Sᵀ] = I_d: the average of Σ_t w_t² e_{i_t} e_{i_t}ᵀ over 4000 draws. Each diagonal entry
    # has relative sd ≤ 1/sqrt(4000 · r p_min) here; a 6-sd tolerance bounds the false alarm < 1e-6.
    p = rng.dirichlet(np.ones(15) * 5)
    acc = np.zeros(15)
    n_draws, r = 4000, 10
    for _ in range(n_draws):
        idx, w = sample_features(p, r, scheme=scheme, seed=rng)
        np.add.at(acc, idx, w**2)
    acc /= n_draws
    sd = np.sqrt(1 / (n_draws * np.minimum(1, r * p))) * np.sqrt(1 / np.minimum(1, r * p))
    assert np.all(np.abs(acc - 1) < 6 * sd + 0.02)


def test_concentration_shrinks_with_r(rng):
    V = np.linalg.qr(rng.normal(size=(1000, 10)))[0]
    p = leverage_scores(V)
    means = []
    for r in (20, 80, 320):
        devs = []
        for _ in range(40):
            idx, w = sample_features(p, r, seed=rng)
            devs.append(np.linalg.norm((V[idx] * w[:, None] ** 2).T @ V[idx] - np.eye(10), 2))
        means.append(np.mean(devs))
    # digest: ≈ 1.30, 0.61, 0.30 at r = 20, 80, 320
    assert means[0] > means[1] > means[2]
    assert means[2] < 0.45


@pytest.mark.slow
def test_kmeans_ratio_on_brute_force_instances(rng):
    # Theorem 1 (γ = 1): F(X̃)/F_opt ≤ 2 + ε with probability ≥ 0.5; the proof has a gap (digest A3),
    # but the ratio observed is ≈ 1.06. We ask ≤ 3 in ≥ 6 of 8 instances (the digest saw 30/30 ≤ 1.15).
    # Also SVD feature extraction is a deterministic 2-approximation (DFKVV 1999, eq. 7).
    ok = 0
    for _ in range(8):
        A = rng.normal(size=(11, 80))
        A[:5, :8] += 3
        Fopt = brute_force_kmeans(A, 2)
        sel = LeverageScoreSelector(20, n_components=2, seed=rng).fit(A)
        At = sel.transform(A)
        lab_t = min(itertools.product(range(2), repeat=10),
                    key=lambda a: kmeans_objective(At, np.array((0, *a))) if len(set((0, *a))) == 2 else np.inf)
        ok += kmeans_objective(A, np.array((0, *lab_t))) <= 3 * Fopt
        U, s, _ = np.linalg.svd(A, full_matrices=False)
        Ahat = U[:, :2] * s[:2]
        lab_h = min(itertools.product(range(2), repeat=10),
                    key=lambda a: kmeans_objective(Ahat, np.array((0, *a))) if len(set((0, *a))) == 2 else np.inf)
        assert kmeans_objective(A, np.array((0, *lab_h))) <= 2 * Fopt + 1e-9
    assert ok >= 6


# --- recovery tier -------------------------------------------------------------------------------
def test_top_leverage_features_are_the_informative_ones(rng):
    A, lab = mixture(rng, n=45, d=300, g=10, k=3, shift=5.0)
    sel = LeverageScoreSelector(10, n_components=3, scheme="top", center=True).fit(A)
    assert len(set(sel.get_support(indices=True)) & set(range(10))) >= 8
    res = kmeans_feature_selection(A, 3, 30, n_repeats=3, seed=0)
    assert clustering_accuracy(res.labels, lab) == 1.0
    assert res.certified_ratio >= 1.0
    full = kmeans(A, 3, seed=0)
    assert res.objective <= full.objective * 1.05


def test_sparse_input_selector(rng):
    A = sp.random(60, 400, density=0.05, random_state=3, format="lil")
    A[:30, :5] = 5.0
    A = A.tocsr()
    sel = LeverageScoreSelector(n_components=2, svd="randomized", seed=0).fit(A)
    assert sp.issparse(sel.transform(A))
    assert sel.transform(A).shape[1] == sel.get_support().sum()
    assert sel.weights_.scores.sum() == pytest.approx(1.0)
    assert set(sel.weights_.ranking()[:5]) == set(range(5))
    assert len(set(range(5)) & set(sel.get_support(indices=True))) >= 3


# --- bad input -----------------------------------------------------------------------------------
def test_bad_input(rng):
    A = rng.normal(size=(10, 3)) @ rng.normal(size=(3, 30))  # rank 3
    with pytest.raises(DataError, match="n_components must not exceed the numerical rank of X \\(3\\)"):
        right_singular_vectors(A, 5)
    with pytest.raises(DataError, match="n_components must not exceed the numerical rank"):
        LeverageScoreSelector(n_components=4).fit(A)
    with pytest.raises(DataError, match="n_features_to_select must be at most the number of features \\(n_features = 30\\)"):
        LeverageScoreSelector(31, n_components=2, scheme="top").fit(A)
    with pytest.raises(DataError, match="r must be at most the number of features"):
        sample_features(np.ones(4) / 4, 5, scheme="bernoulli")
    with pytest.raises(DataError, match="n_features_to_select must be a positive integer"):
        LeverageScoreSelector(0).fit(A)
    An = A.copy()
    An[2, 3] = np.nan
    with pytest.raises(DataError, match="must not contain NaN"):
        LeverageScoreSelector(n_components=2).fit(An)
    with pytest.raises(DataError, match="must not contain NaN or infinite values; row 2 column 3"):
        LeverageScoreSelector(n_components=2).fit(sp.csr_matrix(An))
    with pytest.raises(DataError, match="scheme must be one of"):
        LeverageScoreSelector(scheme="uniform").fit(A)
    with pytest.raises(DataError, match="method must be one of"):
        right_singular_vectors(A, 2, method="lanczos")
    with pytest.raises(DataError, match="p must be a 1-D probability vector"):
        sample_features([0.5, 0.6], 1)
    with pytest.raises(DataError, match="seed must be an int"):
        LeverageScoreSelector(seed="x").fit(A)
    with pytest.raises(DataError, match="is empty"):
        LeverageScoreSelector().fit(sp.csr_matrix((0, 3)))
    with pytest.raises(DataError, match="n_components must be at most 10"):
        kmeans(A, 11)
