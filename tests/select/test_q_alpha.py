"""Q-alpha (Wolf & Shashua 2005): exact identities, statistical properties, recovery, bad input.

Oracles from the digest `seeds/digests/q_alpha.md` §3.5.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from latentfs.core.data import DataError, DataWarning
from latentfs.core.weights import FeatureWeights
from latentfs.datasets.synthetic import multiclass, sessions, weston_linear, weston_nonlinear
from latentfs.select import q_alpha as qa
from latentfs.select.q_alpha import (
    QAlpha,
    SupervisedQAlpha,
    design_matrix,
    preprocess_features,
    q_alpha,
    select_by_gap,
    supervised_q_alpha,
)
from latentfs.select.q_alpha_kernel import KernelQAlpha, feature_kernel, kernel_q_alpha

# --- generators (the paper's synthetic problems, digest §4) ------------------------------------




def planted(rng, q=60, n=30, n_rel=4, shift=3.0):
    X = rng.normal(size=(q, n))
    X[: q // 2, :n_rel] += shift
    return X


# --- exact tier ----------------------------------------------------------------------------------
def test_preprocessing_centres_and_normalises(rng):
    M = preprocess_features(rng.normal(size=(12, 7)) * 5 + 3)
    np.testing.assert_allclose(M.sum(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose((M**2).sum(axis=1), 1, atol=1e-12)


def test_design_matrix_is_psd_and_equals_khatri_rao_gram(rng):
    X = rng.normal(size=(15, 25))
    Q = np.linalg.qr(rng.normal(size=(15, 3)))[0]
    G = design_matrix(X, Q)
    M = preprocess_features(X)
    P = M @ Q
    W = (M[:, :, None] * P[:, None, :]).reshape(25, -1)  # rows m_i ⊗ Qᵀm_i
    np.testing.assert_allclose(G, W @ W.T, atol=1e-12)
    np.testing.assert_allclose(G, G.T, atol=1e-14)
    assert np.linalg.eigvalsh(G).min() > -1e-12
    v = rng.normal(size=25)
    op = qa._row_preprocess(X, True, "X")
    np.testing.assert_allclose(qa._HadamardGram([(1.0, op, op.rmatmat(Q))]).matvec(v), G @ v, atol=1e-12)


def test_objective_identity_and_trace_identity(rng):
    X = rng.normal(size=(20, 12))
    Q = np.linalg.qr(rng.normal(size=(20, 2)))[0]
    G = design_matrix(X, Q)
    lam, vec = np.linalg.eigh(G)
    a = vec[:, -1]
    M = preprocess_features(X)
    A = M.T @ np.diag(a) @ M
    # αᵀGα = λ_max(G) = trace(Qᵀ A_α² Q) = ‖A_α Q‖²_F
    assert a @ G @ a == pytest.approx(lam[-1], rel=1e-12)
    assert np.trace(Q.T @ A @ A @ Q) == pytest.approx(lam[-1], rel=1e-10)
    assert np.linalg.norm(A @ Q) ** 2 == pytest.approx(lam[-1], rel=1e-10)
    # trace(A_α) = Σα for unit-norm rows, any α
    b = rng.normal(size=12)
    assert np.trace(M.T @ np.diag(b) @ M) == pytest.approx(b.sum(), rel=1e-12)


def test_alpha_is_unit_norm_sign_fixed_and_solvers_and_sparse_agree(rng):
    X = planted(rng)
    dense = q_alpha(X, 2, solver="dense")
    lanczos = q_alpha(X, 2, solver="lanczos")
    sparse = q_alpha(sp.csr_matrix(X), 2)
    assert np.linalg.norm(dense.alpha) == pytest.approx(1.0, abs=1e-12)
    assert dense.alpha.sum() >= 0
    np.testing.assert_allclose(lanczos.alpha, dense.alpha, atol=1e-8)
    np.testing.assert_allclose(sparse.alpha, dense.alpha, atol=1e-10)


def test_kernel_with_linear_kernel_reproduces_linear_q_alpha_iterates(rng):
    X = rng.normal(size=(25, 18))
    M = preprocess_features(X)
    V = M @ M.T
    lam, U = np.linalg.eigh(V)
    E0 = U[:, ::-1][:, :3] / np.sqrt(lam[::-1][:3])  # Q(0) = Mᵀ E(0) orthonormal
    lin = q_alpha(X, 3, init=M.T @ E0, max_iter=15, tol=1e-300)
    ker, E = kernel_q_alpha(V, 3, init=E0, max_iter=15, tol=1e-300)
    np.testing.assert_allclose(ker.alpha, lin.alpha, atol=1e-10)
    np.testing.assert_allclose(ker.history["objective"], lin.history["objective"], rtol=1e-10)
    # the corrected update keeps Q = Mᵀ E orthonormal: Eᵀ V E = I
    np.testing.assert_allclose(E.T @ V @ E, np.eye(3), atol=1e-10)


def test_printed_kernel_update_loses_orthonormality(rng):
    # Definition 14 step 5 as printed (E ← E R⁻¹) breaks Eᵀ V E = I: the reason for the correction
    M = preprocess_features(rng.normal(size=(25, 18)))
    V = M @ M.T
    lam, U = np.linalg.eigh(V)
    E = U[:, ::-1][:, :2] / np.sqrt(lam[::-1][:2])
    a = np.linalg.eigh(V * (V @ E @ E.T @ V))[1][:, -1]
    DP = a[:, None] * (V @ E)
    R = np.linalg.cholesky(DP.T @ V @ DP).T
    printed = E @ np.linalg.inv(R)
    corrected = DP @ np.linalg.inv(R)
    assert np.abs(printed.T @ V @ printed - np.eye(2)).max() > 1e-3
    np.testing.assert_allclose(corrected.T @ V @ corrected, np.eye(2), atol=1e-10)


@pytest.mark.parametrize("k", [1, 3])
def test_objective_is_monotone_over_iterations(rng, k):
    # Proposition 3 (proved for k = 1; held empirically for k > 1 in 18,000 half-steps, digest §3.1)
    for _ in range(5):
        X = rng.normal(size=(int(rng.integers(8, 30)), int(rng.integers(5, 40))))
        res = q_alpha(X, k, init="random", seed=int(rng.integers(1 << 30)), max_iter=25, tol=1e-300)
        h = np.array(res.history["objective"])
        assert np.all(np.diff(h) >= -1e-9 * h[1:])


def test_basic_converges_to_a_stationary_point(rng):
    X = planted(rng)
    res = q_alpha(X, 2, variant="basic", tol=1e-12, max_iter=200)
    M = preprocess_features(X)
    A = M.T @ np.diag(res.alpha) @ M
    Q = res.Q
    assert np.linalg.norm(A @ Q - Q @ (Q.T @ A @ Q)) < 1e-8  # Q spans an invariant subspace of A_α
    G = design_matrix(X, Q)
    assert np.linalg.norm(G @ res.alpha - (res.alpha @ G @ res.alpha) * res.alpha) < 1e-6


def test_variants_reach_the_same_weights_on_a_clear_problem(rng):
    X = planted(rng)
    ref = q_alpha(X, 2, variant="basic", tol=1e-10, max_iter=300).alpha
    np.testing.assert_allclose(q_alpha(X, 2, variant="power", tol=1e-10, max_iter=300).alpha, ref, atol=1e-5)


def test_ritz_rotation_cannot_change_alpha_so_the_variant_is_refused(rng):
    # G = (MMᵀ)∘(MQQᵀMᵀ) depends on Q only through QQᵀ: any rotation Q → QU inside span(Q) (Definition 4's
    # Rayleigh–Ritz step) leaves G, hence α, unchanged; so "ritz" is the power iteration shifted one sweep
    X = planted(rng)
    Q = np.linalg.qr(rng.normal(size=(60, 2)))[0]
    U = np.linalg.qr(rng.normal(size=(2, 2)))[0]
    np.testing.assert_allclose(design_matrix(X, Q), design_matrix(X, Q @ U), atol=1e-10)
    with pytest.raises(DataError, match="variant='ritz' is not offered: .* Use variant='power'"):
        q_alpha(X, 2, variant="ritz")


def test_supervised_default_beats_unsupervised_on_weston_linear():
    # Weston linear protocol: 50 training points, top-2 features, linear SVM, 500 test points, 6 sets.
    # Measured test error: supervised default (indicator) 0.137 = ANOVA F 0.137 < unsupervised Q-α 0.26;
    # the paper's literal Definition 6 0.49 (chance). Margins are ≥ 0.08 above 6-set standard errors.
    from sklearn.feature_selection import f_classif
    from sklearn.svm import SVC

    rng = np.random.default_rng(17)
    Xt, yt = weston_linear(500, rng)
    err = {"default": [], "unsupervised": [], "anova": []}
    for _ in range(6):
        X, y = weston_linear(50, rng)
        chosen = {
            "default": SupervisedQAlpha(2).fit(X, y).get_support(indices=True),
            "unsupervised": QAlpha(2, max_iter=1000).fit(X).get_support(indices=True),
            "anova": np.argsort(-f_classif(X, y)[0])[:2],
        }
        for key, idx in chosen.items():
            clf = SVC(kernel="linear").fit(X[:, idx], y)
            err[key].append(np.mean(clf.predict(Xt[:, idx]) != yt))
    mean = {k: float(np.mean(v)) for k, v in err.items()}
    assert SupervisedQAlpha().variant == "indicator"
    assert mean["default"] < mean["unsupervised"] - 0.05
    assert mean["default"] <= mean["anova"] + 0.03 and mean["default"] < 0.2


def test_laplacian_variant_operator_matches_dense_and_reduces_for_centred_rows(rng):
    X = np.abs(rng.normal(size=(12, 9)))
    op = qa._row_preprocess(X, False, "X")
    Q = np.linalg.qr(rng.normal(size=(12, 2)))[0]
    sigma = op.rmatmat(np.ones((12, 1)))[:, 0]
    F = qa._LaplacianGram(op, Q, op.rmatmat(Q), sigma, 0.7)
    v = rng.normal(size=9)
    Fd = F.dense()
    np.testing.assert_allclose(F.matvec(v), Fd @ v, atol=1e-12)
    # F_ij = trace(Qᵀ L_iᵀ L_j Q) with L_i = m_i m_iᵀ − diag(m_i m_iᵀ 1) + d I  (Definition 5)
    M = op.dense().T
    L = [np.outer(m, m) - np.diag(m * m.sum()) + 0.7 * np.eye(12) for m in M]
    assert Fd[2, 5] == pytest.approx(np.trace(Q.T @ L[2].T @ L[5] @ Q), rel=1e-12)
    # with centred rows D_i = 0: L_α Q = A_α Q + d Σα Q
    opc = qa._row_preprocess(X, True, "X")
    Fc = qa._LaplacianGram(opc, Q, opc.rmatmat(Q), opc.rmatmat(np.ones((12, 1)))[:, 0], 0.7)
    Mc = opc.dense().T
    np.testing.assert_allclose(Fc.apply_transpose(v), Mc.T @ np.diag(v) @ Mc @ Q + 0.7 * v.sum() * Q, atol=1e-12)
    res = q_alpha(X, 2, variant="laplacian", center=False)
    assert res.converged and np.linalg.norm(res.alpha) == pytest.approx(1.0)


def test_invariances(rng):
    X = planted(rng)
    base = q_alpha(X, 2, tol=1e-10, max_iter=300).alpha
    perm = rng.permutation(X.shape[1])
    np.testing.assert_allclose(q_alpha(X[:, perm], 2, tol=1e-10, max_iter=300).alpha, base[perm], atol=1e-6)
    scaled = X * rng.uniform(0.1, 10, size=X.shape[1]) + rng.normal(size=X.shape[1])
    np.testing.assert_allclose(q_alpha(scaled, 2, tol=1e-10, max_iter=300).alpha, base, atol=1e-6)
    rows = rng.permutation(X.shape[0])
    np.testing.assert_allclose(q_alpha(X[rows], 2, tol=1e-10, max_iter=300).alpha, base, atol=1e-6)


def test_decorrelated_features_give_a_single_feature(rng):
    # MMᵀ = I ⇒ G = diag(‖Qᵀm_i‖²) ⇒ α is a basis vector (digest §3.5 oracle 7)
    Z = rng.normal(size=(30, 6))
    Z -= Z.mean(axis=0)
    X = np.linalg.qr(Z)[0]
    res = q_alpha(X, 2)
    assert np.sort(np.abs(res.alpha))[-1] == pytest.approx(1.0, abs=1e-10)


def test_lemma13_bound_holds_for_any_subset(rng):
    X = rng.normal(size=(20, 30))
    Q = np.linalg.qr(rng.normal(size=(20, 2)))[0]
    G = design_matrix(X, Q)
    lam, vec = np.linalg.eigh(G)
    a = vec[:, -1] * np.sign(vec[:, -1].sum())
    M = preprocess_features(X)
    for _ in range(20):
        S = rng.choice(30, size=int(rng.integers(1, 30)), replace=False)
        assert a[S].sum() <= np.linalg.norm(M[S] @ M[S].T) / np.sqrt(lam[-1]) + 1e-12
        assert lam[-1] >= G[np.ix_(S, S)].sum() / S.size - 1e-12


def test_triple_product_lower_bound_proposition7():
    # the explicit minimiser: coplanar unit vectors at 0°, +60°, −60° give f = −1/8
    ang = np.deg2rad([0, 60, -60])
    a, b, c = (np.array([np.cos(t), np.sin(t)]) for t in ang)
    assert (a @ b) * (a @ c) * (b @ c) == pytest.approx(-1 / 8)
    rng = np.random.default_rng(7)
    V = rng.normal(size=(3, 20000, 4))
    V /= np.linalg.norm(V, axis=2, keepdims=True)
    f = np.einsum("ij,ij->i", V[0], V[1]) * np.einsum("ij,ij->i", V[0], V[2]) * np.einsum("ij,ij->i", V[1], V[2])
    assert f.min() >= -1 / 8 - 1e-12


def test_gap_selection():
    assert select_by_gap([0.6, 0.05, 0.58, 0.04, 0.03]).tolist() == [True, False, True, False, False]
    assert select_by_gap([0.9, 0.1, 0.05], max_features=1).tolist() == [True, False, False]


# --- statistical tier ----------------------------------------------------------------------------
def test_alpha_positive_on_random_data(rng):
    # digest §3.5: all α > 0 in 100% of 30 trials at each of these sizes; we ask ≥ 7/8 per size
    # (false-alarm rate for a true rate ≥ 0.99: P(≤ 6 of 8) < 0.3%).
    for q, n in [(30, 20), (30, 50), (100, 30)]:
        pos = sum(bool(np.all(q_alpha(rng.normal(size=(q, n)), 2, max_iter=300).alpha > 0)) for _ in range(8))
        assert pos >= 7, (q, n, pos)


def test_probabilistic_perron_frobenius_theorem10(rng):
    # Theorem 10 with μ = 1/6, σ = √2/6: P(positive leading eigenvector) ≈ 1.00 at n = 30 (digest
    # table); ≥ 0.9 over 200 trials has a false-alarm rate < 1e-6 if the true rate is 0.99.
    n, hits = 30, 0
    for _ in range(200):
        g = rng.normal(1 / 6, np.sqrt(2) / 6, size=(n, n))
        G = np.triu(g) + np.triu(g, 1).T
        v = np.linalg.eigh(G)[1][:, -1]
        hits += bool(np.all(v > 0) or np.all(v < 0))
    assert hits >= 180


# --- recovery tier -------------------------------------------------------------------------------
def test_planted_features_recovered_by_selector_and_gap(rng):
    X = planted(rng, q=80, n=200, n_rel=5, shift=2.5)
    sel = QAlpha(5, n_components=2).fit(X)
    assert isinstance(sel.weights_, FeatureWeights)
    assert sel.get_support(indices=True).tolist() == [0, 1, 2, 3, 4]
    gap = QAlpha("gap", n_components=2).fit(X)
    assert gap.get_support(indices=True).tolist() == [0, 1, 2, 3, 4]
    assert gap.transform(X).shape == (80, 5)


@pytest.mark.slow
def test_multiclass_sparsity_gap(rng):
    # §4.2: paper "gap about 5–10 up to 6 classes"; digest median 26 for n_c = 3. Ask median > 5.
    gaps = []
    for _ in range(5):
        X, _ = multiclass(3, rng)
        a = q_alpha(X, 3, max_iter=300).alpha
        gaps.append(a[:5].mean() / a[5:].mean())
    assert np.median(gaps) > 5


@pytest.mark.slow
def test_kernel_q_alpha_recovers_hidden_session_features(rng):
    # §4.4 at λ = 0.001: kernel Q-α with feature-space centring succeeds (≥ 10 of 12 relevant in the
    # top 12) in ~100% of runs (digest: 15/15; we measured 20/20); linear Q-α on raw data in 0%.
    ker = lin = 0
    for _ in range(8):
        X = sessions(0.001, rng)
        a = KernelQAlpha(12, kernel="sections", n_components=3, section_size=8).fit(X).weights_.scores
        ker += np.sum(np.argsort(-a)[:12] < 12) >= 10
        b = q_alpha(X, 3).alpha
        lin += np.sum(np.argsort(-b)[:12] < 12) >= 10
    assert ker >= 6
    assert lin <= 1


def test_kernel_without_feature_centring_fails_on_sessions(rng):
    # digest §2.6: without centring in feature space the mean direction dominates (0% success)
    fails = 0
    for _ in range(3):
        X = sessions(0.001, rng)
        a = KernelQAlpha(kernel="sections", n_components=3, feature_center=False).fit(X).weights_.scores
        fails += np.sum(np.argsort(-a)[:12] < 12) < 10
    assert fails == 3


def test_supervised_indicator_recovers_weston_linear(rng):
    # Weston linear, 50 training points: the indicator variant puts ≈ 2 relevant features in the top 2
    # (measured mean 2.0 over 10 sets); unsupervised Q-α gets ≈ 1.5.
    hits = []
    for _ in range(5):
        X, y = weston_linear(50, rng)
        a = SupervisedQAlpha(2, variant="indicator").fit(X, y).weights_.scores
        hits.append(np.sum(np.argsort(-a)[:2] < 6))
    assert np.mean(hits) >= 1.6


def test_supervised_literal_finds_within_class_structure_that_indicator_misses(rng):
    # Weston nonlinear, 50 points: literal Definition 6 keeps ≈ 1.75 of 2 relevant features in its top 2
    # (measured over 8 sets), the indicator variant ≈ 0.1 (class means are zero)
    lit, ind = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        for _ in range(5):
            X, y = weston_nonlinear(50, rng)
            lit.append(np.sum(np.argsort(-supervised_q_alpha(X, y, variant="literal").alpha)[:2] < 2))
            ind.append(np.sum(np.argsort(-supervised_q_alpha(X, y, variant="indicator").alpha)[:2] < 2))
    assert np.mean(lit) >= 1.2
    assert np.mean(ind) <= 0.8


def test_supervised_literal_works_on_mean_shift_but_its_criterion_prefers_noise_on_weston(rng):
    # easy problem: three features shifted by class → the literal Definition 6 with γ = 0 (within-class
    # blocks only) finds them (10/10 seeds measured; with the paper's γ = 0.5 only 6/10)
    y = np.repeat([0, 1], 20)
    X = rng.normal(size=(40, 15))
    X[:, :3] += 4 * y[:, None]
    a = supervised_q_alpha(X, y, variant="literal", between_weight=0.0).alpha
    assert sorted(np.argsort(-a)[:3].tolist()) == [0, 1, 2]
    # Weston linear: the literal objective is *larger* at the noise-dominated α it finds than at α
    # spread over the 6 relevant features, so the failure is the criterion, not the optimiser
    Xw, yw = weston_linear(50, np.random.default_rng(1))
    with warnings.catch_warnings():  # its G is indefinite: a negative-weight warning may come
        warnings.simplefilter("ignore", DataWarning)
        res = supervised_q_alpha(Xw, yw, variant="literal")
    op = qa._row_preprocess(Xw, True, "X")
    ops = qa._block_ops(op, (yw > 0).astype(int), "global")

    def objective(alpha):
        alpha = alpha / np.linalg.norm(alpha)
        G = qa._supervised_design(ops, qa._block_bases(ops, alpha, 2, 1), 0.5)
        return alpha @ G.matvec(alpha)

    relevant = np.r_[np.ones(6), np.zeros(196)]
    assert objective(res.alpha) > objective(relevant)
    assert np.sum(np.argsort(-res.alpha)[:6] < 6) <= 2


# --- bad input -----------------------------------------------------------------------------------
def test_bad_input_messages(rng):
    X = rng.normal(size=(10, 6))
    with pytest.raises(DataError, match="n_components must be at most 6"):
        q_alpha(rng.normal(size=(20, 6)), 7)
    with pytest.raises(DataError, match="n_components must be at most 9"):
        q_alpha(rng.normal(size=(10, 20)), 10)
    with pytest.raises(DataError, match="n_components must not exceed the rank of the preprocessed data"):
        q_alpha(np.repeat(X[:, :1], 6, axis=1) + np.arange(6) + rng.normal(size=(10, 1)) * [0, 0, 0, 0, 0, 1], 3)
    Xc = X.copy()
    Xc[:, 2] = 4.0
    with pytest.raises(DataError, match="constant"):
        QAlpha(2).fit(Xc)
    with pytest.raises(DataError, match="constant"):
        q_alpha(sp.csr_matrix(np.c_[X, np.zeros(10)]), 2)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(DataError, match="must not contain NaN"):
        QAlpha(2).fit(Xn)
    with pytest.raises(DataError, match="must not contain NaN or infinite"):
        q_alpha(sp.csr_matrix(Xn), 2)
    with pytest.raises(DataError, match="at least 2 classes"):
        SupervisedQAlpha(2).fit(X, np.zeros(10))
    with pytest.raises(DataError, match="y is required"):
        SupervisedQAlpha(2).fit(X)
    with pytest.raises(DataError, match="variant must be one of"):
        q_alpha(X, 2, variant="fast")
    with pytest.raises(DataError, match="variant must be one of"):
        supervised_q_alpha(X, np.arange(10) % 2, variant="paper")
    with pytest.raises(DataError, match="init must have shape"):
        q_alpha(X, 2, init=np.ones((3, 2)))
    with pytest.raises(DataError, match="init must be 'pca', 'random'"):
        q_alpha(X, 2, init="svd")
    with pytest.raises(DataError, match="max_iter must be a positive integer"):
        q_alpha(X, 2, max_iter=0)
    with pytest.raises(DataError, match="tol must be finite and positive"):
        q_alpha(X, 2, tol=-1.0)
    with pytest.raises(DataError, match="solver must be one of"):
        q_alpha(X, 2, solver="gpu")
    with pytest.raises(DataError, match="laplacian_shift must be one of"):
        q_alpha(X, 2, variant="laplacian", laplacian_shift="max")
    with pytest.raises(DataError, match="X needs at least 2 samples"):
        q_alpha(X[:1], 1)
    with pytest.raises(DataError, match="n_features_to_select must be an int, 'gap' or None"):
        QAlpha("all").fit(X)
    with pytest.raises(DataError, match="alpha must be 1-D with at least 2 weights"):
        select_by_gap([1.0])
    with pytest.raises(DataError, match="normalize must be one of"):
        supervised_q_alpha(X, np.arange(10) % 2, normalize="none")
    with pytest.raises(DataError, match="between_weight must be finite and non-negative"):
        supervised_q_alpha(X, np.arange(10) % 2, between_weight=-1)


def test_kernel_bad_input(rng):
    V = rng.normal(size=(5, 5))
    with pytest.raises(DataError, match="V must be a symmetric square kernel matrix"):
        kernel_q_alpha(V)
    with pytest.raises(DataError, match="V must be finite"):
        kernel_q_alpha(np.full((3, 3), np.nan))
    low = np.ones((4, 4))
    with pytest.raises(DataError, match="n_components must be at most 1"):
        kernel_q_alpha(low, 2)
    with pytest.raises(DataError, match="kernel must be one of"):
        feature_kernel(rng.normal(size=(10, 4)), "cubic")
    W = rng.normal(size=(10, 4))
    M = preprocess_features(W)
    with pytest.raises(DataError, match="init must have shape"):
        kernel_q_alpha(M @ M.T, 2, init=np.ones((3, 2)))


def test_nonconvergence_warns(rng):
    with pytest.warns(DataWarning, match="did not converge"):
        QAlpha(2, max_iter=1).fit(rng.normal(size=(20, 10)))


# --- stopping rule and restarts (issue 17; digest §2 "Stopping" and §5.2 "Robustness") ---------------
def test_stopping_rules_stop_at_the_first_cycle_below_tol():
    # The paper gives no rule; the digest names two: ‖α^(r) − α^(r−1)‖ < tol, or the relative change of the
    # objective < tol. Each run must stop at the first cycle where its rule holds, and not before.
    X, _ = weston_linear(50, np.random.default_rng(0))[:2]
    runs = {stop: q_alpha(X, 2, max_iter=500, tol=1e-6, stop=stop) for stop in ("alpha", "objective")}
    for stop, key in (("alpha", "delta"), ("objective", "rel_change")):
        res = runs[stop]
        h = np.asarray(res.history[key])
        assert res.converged and h.size == res.n_iter
        assert h[-1] < 1e-6 and np.all(h[:-1] >= 1e-6)
        obj = np.asarray(res.history["objective"])
        np.testing.assert_allclose(res.history["rel_change"][1:], np.abs(np.diff(obj)) / np.abs(obj[1:]))
        assert np.all(np.diff(obj) >= -1e-10)  # Proposition 3: the objective never decreases
    # the objective settles long before α on this flat maximum (measured: 30 vs 70 cycles), to the same α
    assert runs["objective"].n_iter < runs["alpha"].n_iter / 1.5
    assert np.linalg.norm(runs["objective"].alpha - runs["alpha"].alpha) < 0.02
    capped = q_alpha(X, 2, max_iter=5, stop="objective")
    assert not capped.converged and capped.n_iter == 5


def test_restarts_never_lower_the_objective_and_find_better_maxima():
    # Q-α reaches local maxima only: on Weston's linear problem (50 points) random starts end at objectives
    # from 1.55 to 2.20. n_init keeps the best, and its first start is the single-start run, so the result is
    # never worse than one start (deterministic given the seeds: no false alarms).
    gains = []
    for s in range(3):
        X, _ = weston_linear(50, np.random.default_rng(s))[:2]
        for init in ("pca", "random"):
            one = q_alpha(X, 2, init=init, seed=s, max_iter=300, stop="objective")
            many = q_alpha(X, 2, init=init, seed=s, max_iter=300, stop="objective", n_init=4)
            assert len(many.restart_objectives) == 4 and np.isclose(many.restart_objectives[0], one.objective)
            assert many.objective == max(many.restart_objectives) >= one.objective
            gains.append(many.objective - one.objective)
    # data set 2: the PCA start ends at 1.79, a restart at 2.13
    assert max(gains) > 0.2
    sel = QAlpha(3, n_init=3, stop="objective", max_iter=300).fit(X)
    assert len(sel.result_.restart_objectives) == 3 and sel.weights_.info["restart_objectives"]


def test_stop_and_restart_bad_input(rng):
    X = rng.normal(size=(20, 8))
    with pytest.raises(DataError, match=r"stop must be one of \['alpha', 'objective'\]; got 'delta'"):
        q_alpha(X, 2, stop="delta")
    with pytest.raises(DataError, match="n_init must be a positive integer .* got 0"):
        q_alpha(X, 2, n_init=0)
