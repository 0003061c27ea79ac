"""Blum's kernel-to-feature maps and random-hyperplane weak learner (Blum 2006; digest §3.6)."""

import numpy as np
import pytest
from sklearn.kernel_approximation import Nystroem

from latentfs.core.data import DataError
from latentfs.subspace.kernel_features import (
    KernelFeatureMap,
    RandomHyperplaneWeakLearner,
    hyperplane_error,
    kernel_diagonal,
    kernel_matrix,
    landmark_count,
)

RBF = {"kernel": "rbf", "kernel_params": {"gamma": 0.5}}


@pytest.fixture
def X(rng):
    return rng.normal(size=(120, 4))


def test_f2_whitened_geometry(X, rng):
    fmap = KernelFeatureMap(25, mapping="F2", seed=0, **RBF).fit(X)
    S = fmap.landmarks_
    F_S = fmap.transform(S)
    np.testing.assert_allclose(F_S @ F_S.T, kernel_matrix(S, S, "rbf", gamma=0.5), atol=1e-8)  # F2·F2 = K on S
    Y = rng.normal(size=(30, 4))
    F = fmap.transform(Y)
    assert np.all(np.sum(F**2, axis=1) <= 1.0 + 1e-10)  # ‖F2(x)‖² ≤ K(x, x) = 1: projection shrinks
    K_YS = kernel_matrix(Y, S, "rbf", gamma=0.5)
    nystrom_gram = K_YS @ np.linalg.solve(fmap.kernel_landmarks_, K_YS.T)
    np.testing.assert_allclose(F @ F.T, nystrom_gram, atol=1e-8)  # K(x, S) M⁻¹ K(S, y)
    sym = KernelFeatureMap(mapping="F2", landmarks=fmap.landmark_indices_, whitening="symmetric", **RBF).fit(X)
    G = sym.transform(Y)
    np.testing.assert_allclose(G @ G.T, F @ F.T, atol=1e-8)  # Cholesky vs M^{-1/2}: same Gram


def test_f2_matches_sklearn_nystroem_gram(X):
    ny = Nystroem(kernel="rbf", gamma=0.5, n_components=20, random_state=0).fit(X)
    fmap = KernelFeatureMap(mapping="F2", landmarks=ny.component_indices_, **RBF).fit(X)
    A, B = ny.transform(X[:40]), fmap.transform(X[:40])
    np.testing.assert_allclose(A @ A.T, B @ B.T, atol=1e-8)


def test_singular_landmark_matrix_uses_pseudo_inverse(X):
    idx = np.array([0, 1, 2, 2, 3])  # a duplicated landmark makes M singular
    fmap = KernelFeatureMap(mapping="F2", landmarks=idx, **RBF).fit(X)
    assert fmap.whitening_used_ == "symmetric"
    F = fmap.transform(X[idx])
    np.testing.assert_allclose(F @ F.T, kernel_matrix(X[idx], X[idx], "rbf", gamma=0.5), atol=1e-8)


def test_f1_and_f2_span_the_same_space_and_f3_preserves_gram(X):
    f1 = KernelFeatureMap(30, mapping="F1", seed=1, **RBF).fit(X)
    f2 = KernelFeatureMap(mapping="F2", landmarks=f1.landmark_indices_, **RBF).fit(X)
    A, B = f1.transform(X), f2.transform(X)
    coef = np.linalg.lstsq(B, A, rcond=None)[0]
    np.testing.assert_allclose(B @ coef, A, atol=1e-7)  # F1 = F2 U: same span, same linear separability
    # F3 = random projection of F2: with d3 = 2000 the Gram distortion is small (JL, Theorem 5)
    f3 = KernelFeatureMap(mapping="F3", landmarks=f1.landmark_indices_, n_components=2000, seed=2, **RBF).fit(X)
    C = f3.transform(X[:30])
    G2, G3 = B[:30] @ B[:30].T, C @ C.T
    assert np.abs(G3 - G2).max() < 0.15


def test_landmark_rules(X):
    def residual(idx):
        S = X[idx]
        K = kernel_matrix(X, S, "rbf", gamma=0.5)
        M = kernel_matrix(S, S, "rbf", gamma=0.5)
        return float(np.max(1.0 - np.sum(K * np.linalg.solve(M, K.T).T, axis=1)))

    piv = KernelFeatureMap(15, landmarks="pivoted_cholesky", **RBF).fit(X).landmark_indices_
    rnd = KernelFeatureMap(15, landmarks="random", seed=0, **RBF).fit(X).landmark_indices_
    kpp = KernelFeatureMap(15, landmarks="kmeans++", seed=0, **RBF).fit(X).landmark_indices_
    assert len(set(piv)) == len(set(kpp)) == len(set(rnd)) == 15
    assert residual(piv) < residual(rnd)  # the greedy rule shrinks the largest residual K(x,x) − ‖F2(x)‖²
    assert landmark_count(0.1, 0.05, 0.25) == 1520
    auto = KernelFeatureMap(mapping="F1", eps=0.5, delta=0.5, margin=0.9, seed=0, **RBF).fit(X)
    assert auto.landmark_indices_.size == min(landmark_count(0.5, 0.5, 0.9), 120)


def test_kernel_diagonal_closed_forms(X):
    for kernel, params in (("linear", {}), ("rbf", {"gamma": 1 / 3.0}), ("polynomial", {"degree": 3, "coef0": 0.5})):
        np.testing.assert_allclose(kernel_diagonal(X, kernel, **params), np.diag(kernel_matrix(X, X, kernel, **params)))
    np.testing.assert_allclose(kernel_diagonal(X[:5], lambda a, b: (a @ b.T) ** 2), np.sum(X[:5] ** 2, 1) ** 2)


def test_kernel_normalisation_unit_diagonal(X):
    fmap = KernelFeatureMap(mapping="F1", landmarks=np.arange(10), kernel="polynomial",
                            kernel_params={"degree": 2}, normalize=True).fit(X)
    np.testing.assert_allclose(np.diag(fmap.transform(X[:10])), 1.0, atol=1e-12)


def test_random_hyperplane_angle_probability():
    # Pr(h·x ≤ 0 | h·w ≥ 0) = angle(x, w)/π. Monte Carlo with 40,000 h; binomial s.e. ≤ 0.0035 for the
    # conditional, tolerance 0.015 (> 4 s.e.; false-alarm rate < 1e-4).
    rng = np.random.default_rng(5)
    w = np.array([1.0, 0.0, 0.0])
    x = np.array([np.cos(1.0), np.sin(1.0), 0.0])
    H = rng.normal(size=(40_000, 3))
    cond = H[H @ w >= 0]
    assert abs(np.mean(cond @ x <= 0) - 1.0 / np.pi) < 0.015


def test_weak_learner_on_margin_data():
    rng = np.random.default_rng(6)
    w = np.zeros(50)
    w[0] = 1.0
    X = rng.normal(size=(4000, 50))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X = X[np.abs(X @ w) >= 0.1][:500]
    y = np.sign(X @ w)
    H = rng.normal(size=(50, 2000))
    frac = np.mean(hyperplane_error(H / np.linalg.norm(H, axis=0), X, y) <= 0.5 - 0.1 / 4)
    assert frac > 0.1  # Ω(γ); the digest measured ≈ 0.38 in this setting
    learner = RandomHyperplaneWeakLearner(0.1, seed=0).fit(X, y)
    assert learner.training_error_ <= 0.5 - 0.1 / 6
    assert learner.n_tries_ < 100
    assert np.isclose(np.mean(learner.predict(X) == y), 1 - learner.training_error_)


def test_errors(X):
    with pytest.raises(DataError, match="kernel must be one of"):
        kernel_matrix(X, X, "laplace")
    with pytest.raises(DataError, match="kernel_params \\['width'\\] are not parameters of kernel 'rbf'"):
        kernel_matrix(X, X, "rbf", width=1.0)
    with pytest.raises(DataError, match="kernel must return a \\(120, 120\\) block"):
        kernel_matrix(X, X, lambda a, b: np.ones((2, 2)))
    with pytest.raises(DataError, match="mapping must be one of"):
        KernelFeatureMap(5, mapping="F4").fit(X)
    with pytest.raises(DataError, match="whitening must be 'cholesky' or 'symmetric'"):
        KernelFeatureMap(5, whitening="qr").fit(X)
    with pytest.raises(DataError, match="landmarks must be one of"):
        KernelFeatureMap(5, landmarks="farthest").fit(X)
    with pytest.raises(DataError, match="landmarks given as indices must be"):
        KernelFeatureMap(landmarks=np.array([0, 500])).fit(X)
    with pytest.raises(DataError, match="n_landmarks must be at most 120"):
        KernelFeatureMap(500).fit(X)
    with pytest.raises(DataError, match="n_components \\(d₃\\) is required for mapping='F3'"):
        KernelFeatureMap(5, mapping="F3").fit(X)
    with pytest.raises(DataError, match="KernelFeatureMap is not fitted yet"):
        KernelFeatureMap(5).transform(X)
    with pytest.raises(DataError, match="X must have 4 features"):
        KernelFeatureMap(5, seed=0).fit(X).transform(X[:, :2])
    with pytest.raises(DataError, match="numerical rank 1 < 3"):
        KernelFeatureMap(3, landmarks="pivoted_cholesky", kernel="linear").fit(np.ones((6, 2)))
    with pytest.raises(DataError, match="normalize=True needs K\\(x, x\\) > 0"):
        KernelFeatureMap(mapping="F1", landmarks=np.array([0]), kernel="linear", normalize=True).fit(np.zeros((3, 2)))
    with pytest.raises(DataError, match=r"eps must lie in \(0, 1\)"):
        landmark_count(2.0, 0.1, 0.1)
    with pytest.raises(DataError, match=r"margin must lie in \(0, 1\)"):
        RandomHyperplaneWeakLearner(0.0).fit(X, np.sign(X[:, 0]))
    with pytest.raises(DataError, match="y must hold exactly 2 classes"):
        RandomHyperplaneWeakLearner(0.1).fit(X, np.arange(120) % 3)
    with pytest.raises(DataError, match="no random hyperplane reached training error"):
        RandomHyperplaneWeakLearner(0.9, max_tries=10, seed=0).fit(X, (np.arange(120) % 2))
    with pytest.raises(DataError, match="RandomHyperplaneWeakLearner is not fitted yet"):
        RandomHyperplaneWeakLearner(0.1).predict(X)
