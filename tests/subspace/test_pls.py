"""PLS: exact identities (Rosipal & Krämer 2006, digest §2.10), scikit-learn agreement, VIP, errors."""

import numpy as np
import pytest
from sklearn.cross_decomposition import PLSCanonical, PLSRegression

from latentfs.core.data import DataError
from latentfs.subspace.pls import PLS, KernelPLS, PLSVIPSelector, dominant_singular_pair, vip_scores, vip_values


@pytest.fixture
def data(rng):
    X = rng.normal(size=(40, 7)) @ rng.normal(size=(7, 7))
    Y = X[:, :3] @ rng.normal(size=(3, 3)) + 0.5 * rng.normal(size=(40, 3))
    return X, Y


def _centred(X, Y):
    return X - X.mean(0), Y - Y.mean(0)


# ---- exact: scikit-learn where the algorithms coincide ------------------------------------------
@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("multi", [False, True])
def test_nipals_regression_equals_sklearn_plsregression(data, scale, multi):
    X, Y = data
    y = Y if multi else Y[:, 0]
    ours = PLS(4, scale=scale).fit(X, y)
    # sklearn's power method iterated to machine precision (its default tol=1e-6 stops earlier)
    ref = PLSRegression(4, scale=scale, tol=1e-30, max_iter=100_000).fit(X, y)
    for a, b in [
        (ours.x_weights_, ref.x_weights_),
        (ours.x_loadings_, ref.x_loadings_),
        (ours.y_loadings_, ref.y_loadings_),
        (ours.x_scores_, ref.x_scores_),
        (ours.y_scores_, ref.y_scores_),
        (ours.x_rotations_, ref.x_rotations_),
        (ours.coef_.T, ref.coef_),
        (ours.predict(X), ref.predict(X)),
        (ours.transform(X[:5]), ref.transform(X[:5])),
    ]:
        np.testing.assert_allclose(a, b, atol=1e-10, rtol=1e-9)


def test_mode_a_equals_sklearn_plscanonical(data):
    X, Y = data
    ours = PLS(3, deflation="canonical").fit(X, Y)
    ref = PLSCanonical(3, scale=False, algorithm="svd").fit(X, Y)
    np.testing.assert_allclose(ours.x_weights_, ref.x_weights_, atol=1e-12)
    np.testing.assert_allclose(ours.y_loadings_, ref.y_loadings_, atol=1e-12)
    np.testing.assert_allclose(ours.coef_.T, ref.coef_, atol=1e-12)
    np.testing.assert_allclose(ours.x_rotations_, ref.x_rotations_, atol=1e-12)


def test_power_inner_loop_equals_svd(data):
    X, Y = data
    a = PLS(4, inner="power").fit(X, Y)
    b = PLS(4, inner="svd").fit(X, Y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-8)
    assert max(a.components_.n_iter) > 1  # the iteration really ran


# ---- exact: the chapter's identities ------------------------------------------------------------
def test_first_weights_pls1_and_pls2(data):
    X, Y = data
    Xc, Yc = _centred(X, Y)
    w1 = PLS(1).fit(X, Y[:, 0]).x_weights_[:, 0]
    z = Xc.T @ Yc[:, 0]
    np.testing.assert_allclose(w1, z / np.linalg.norm(z) * np.sign(z[np.argmax(abs(z))]), atol=1e-12)
    w2 = PLS(1).fit(X, Y).x_weights_[:, 0]
    u = np.linalg.svd(Xc.T @ Yc)[0][:, 0]
    assert abs(abs(w2 @ u) - 1) < 1e-12
    # converged w satisfies eq. (3): XᵀY YᵀX w = λ w
    v = Xc.T @ Yc @ Yc.T @ Xc @ w2
    np.testing.assert_allclose(v / (v @ w2), w2, atol=1e-10)


@pytest.mark.parametrize("algorithm", ["nipals", "simpls"])
def test_scores_orthogonal_and_coefficient_identities(data, algorithm):
    X, Y = data
    Xc, Yc = _centred(X, Y)
    m = PLS(4, algorithm=algorithm).fit(X, Y)
    T, U, W, P = m.x_scores_, m.y_scores_, m.x_weights_, m.x_loadings_
    G = T.T @ T
    np.testing.assert_allclose(G - np.diag(np.diag(G)), 0, atol=1e-9)
    Tn = T / np.linalg.norm(T, axis=0)
    np.testing.assert_allclose(Xc @ m.coef_, Tn @ Tn.T @ Yc, atol=1e-9)  # XB = TTᵀY
    if algorithm == "nipals":
        B_alt = Xc.T @ U @ np.linalg.solve(T.T @ Xc @ Xc.T @ U, T.T @ Yc)  # B = XᵀU(TᵀXXᵀU)⁻¹TᵀY
        np.testing.assert_allclose(m.coef_, B_alt, atol=1e-9)
        np.testing.assert_allclose(Xc @ W @ np.linalg.inv(P.T @ W), T, atol=1e-9)  # T = XW(PᵀW)⁻¹
        # invariance of B to rescaling t and u
        s = np.array([2.0, -3.0, 0.5, 7.0])
        B_s = Xc.T @ (U * s) @ np.linalg.solve((T * s[::-1]).T @ Xc @ Xc.T @ (U * s), (T * s[::-1]).T @ Yc)
        np.testing.assert_allclose(B_s, m.coef_, atol=1e-9)


def test_pls1_weights_orthonormal_and_krylov(data):
    X, Y = data
    Xc, Yc = _centred(X, Y)
    y = Yc[:, 0]
    m = PLS(3).fit(X, y)
    W = m.x_weights_
    np.testing.assert_allclose(W.T @ W, np.eye(3), atol=1e-12)
    A, z = Xc.T @ Xc, Xc.T @ y
    K = np.column_stack([z, A @ z, A @ A @ z])
    b_krylov = K @ np.linalg.lstsq(Xc @ K, y, rcond=None)[0]  # argmin ‖y − Xb‖ over the Krylov space
    np.testing.assert_allclose(m.coef_[:, 0], b_krylov, atol=1e-9)
    full = PLS(7).fit(X, y)  # p = rank(X) gives OLS
    np.testing.assert_allclose(full.coef_[:, 0], np.linalg.lstsq(Xc, y, rcond=None)[0], atol=1e-8)


def test_interlacing_of_deflated_cross_product(data):
    X, Y = data
    Xc, Yc = _centred(X, Y)
    m = PLS(3).fit(X, Y)
    Xa = Xc.copy()
    for a in range(2):
        s_now = np.linalg.svd(Xa.T @ Yc, compute_uv=False)
        t, p = m.x_scores_[:, a], m.x_loadings_[:, a]
        Xa = Xa - np.outer(t, p)
        s_next = np.linalg.svd(Xa.T @ Yc, compute_uv=False)
        assert s_next[0] >= s_now[1] - 1e-10


def test_simpls_equals_pls1_and_differs_from_pls2(data):
    X, Y = data
    np.testing.assert_allclose(
        PLS(4, algorithm="simpls").fit(X, Y[:, 0]).coef_, PLS(4).fit(X, Y[:, 0]).coef_, atol=1e-10
    )
    diff = np.abs(PLS(3, algorithm="simpls").fit(X, Y).coef_ - PLS(3).fit(X, Y).coef_).max()
    assert diff > 1e-4
    T = PLS(3, algorithm="simpls").fit(X, Y).x_scores_
    np.testing.assert_allclose(T.T @ T, np.eye(3), atol=1e-12)


def test_dominant_singular_pair_pls1_single_iteration(rng):
    S = rng.normal(size=(6, 1))
    w, c, it = dominant_singular_pair(S, inner="power")
    assert it == 1 and np.isclose(np.linalg.norm(w), 1.0)


# ---- kernel PLS ---------------------------------------------------------------------------------
def test_kernel_pls_linear_kernel_equals_linear_pls2(data, rng):
    X, Y = data
    lin = PLS(4).fit(X, Y)
    ker = KernelPLS(4, kernel="linear").fit(X, Y)
    Xt = rng.normal(size=(6, X.shape[1]))
    np.testing.assert_allclose(ker.predict(X), lin.predict(X), atol=1e-9)
    np.testing.assert_allclose(ker.predict(Xt), lin.predict(Xt), atol=1e-9)
    # scores agree up to sign once linear T is normalised
    Tl = lin.transform(Xt) / np.linalg.norm(lin.x_scores_, axis=0)
    np.testing.assert_allclose(np.abs(ker.transform(Xt)), np.abs(Tl), atol=1e-9)
    # a precomputed kernel gives the same predictions
    pre = KernelPLS(4, kernel="precomputed").fit(X @ X.T, Y)
    np.testing.assert_allclose(pre.predict(Xt @ X.T), lin.predict(Xt), atol=1e-8)


def test_kernel_pls_wahba_demo():
    rng = np.random.default_rng(7)
    x = np.linspace(0, 3.5, 100)[:, None]
    z = 4.26 * (np.exp(-x[:, 0]) - 4 * np.exp(-2 * x[:, 0]) + 3 * np.exp(-3 * x[:, 0]))
    y = z + 0.2 * rng.normal(size=100)
    mse = [np.mean((KernelPLS(p, kernel="rbf", kernel_params={"gamma": 1 / 1.8}).fit(x, y).predict(x) - y) ** 2)
           for p in (1, 2, 4, 8)]
    assert all(a >= b - 1e-12 for a, b in zip(mse[:-1], mse[1:], strict=True))  # training MSE non-increasing in p
    truth = [np.mean((KernelPLS(p, kernel_params={"gamma": 1 / 1.8}).fit(x, y).predict(x) - z) ** 2) for p in (1, 8)]
    assert truth[1] < truth[0] and truth[1] < 0.02
    # with a narrow kernel (numerically full rank) many components drive the fit towards interpolation
    fits = [KernelPLS(p, kernel_params={"gamma": 1 / 0.003}).fit(x, y).predict(x) for p in (10, 40)]
    assert np.abs(fits[1] - y).max() < 0.01 < np.abs(fits[0] - y).max()


# ---- VIP ----------------------------------------------------------------------------------------
def test_vip_sum_of_squares_and_hand_formula(data):
    X, Y = data
    m = PLS(3, scale=True).fit(X, Y)
    fw = m.vip()
    assert np.isclose(np.sum(fw.scores**2), X.shape[1])
    W, T, C = m.x_weights_, m.x_scores_, m.y_loadings_
    ss = np.array([np.sum(C[:, a] ** 2) * (T[:, a] @ T[:, a]) for a in range(3)])
    hand = [np.sqrt(7 * sum(ss[a] * (W[j, a] / np.linalg.norm(W[:, a])) ** 2 for a in range(3)) / ss.sum())
            for j in range(7)]
    np.testing.assert_allclose(fw.scores, hand, atol=1e-12)
    np.testing.assert_allclose(vip_values(W, T, C), hand, atol=1e-12)


def test_vip_bootstrap_band_recovers_planted_features():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(120, 10))
    y = X[:, 2] - X[:, 7] + 0.3 * rng.normal(size=120)
    fw = vip_scores(X, y, 2, n_bootstrap=50, seed=3)
    lo, hi = fw.band(0.9)
    assert set(fw.top(2)) == {"x2", "x7"}
    noise = [j for j in range(10) if j not in (2, 7)]
    assert lo[[2, 7]].min() > hi[noise].max()  # the bands separate planted from noise features
    assert lo[[2, 7]].min() > 1
    again = vip_scores(X, y, 2, n_bootstrap=50, seed=3)
    np.testing.assert_array_equal(fw.draws, again.draws)  # seeded


def test_vip_selector_in_a_sklearn_pipeline():
    from sklearn.base import clone
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import Pipeline

    rng = np.random.default_rng(13)
    X = rng.normal(size=(60, 6))
    y = X[:, 3] + 0.1 * rng.normal(size=60)
    pipe = Pipeline([("select", PLSVIPSelector(2, threshold=1.0)), ("fit", LinearRegression())]).fit(X, y)
    assert pipe.named_steps["select"].get_support(indices=True).tolist() == [3]
    assert pipe.score(X, y) > 0.95
    assert clone(PLSVIPSelector(3, threshold=0.5)).get_params()["threshold"] == 0.5


def test_vip_selector_threshold_rule():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(80, 6))
    y = 2 * X[:, 0] + X[:, 4] + 0.2 * rng.normal(size=80)
    sel = PLSVIPSelector(2, rule="point").fit(X, y)
    assert sel.get_support(indices=True).tolist() == [0, 4]
    assert sel.transform(X).shape == (80, 2)


# ---- errors -------------------------------------------------------------------------------------
def test_errors(data):
    X, Y = data
    with pytest.raises(DataError, match=r"n_components must be at most 7 \(min\(n_samples − 1, n_features\)\)"):
        PLS(8).fit(X, Y)
    with pytest.raises(DataError, match="n_components must be at most 3"):
        PLS(4, deflation="canonical").fit(X, Y)
    with pytest.raises(DataError, match="Y must have one row per row of X: got 39 rows"):
        PLS(2).fit(X, Y[:-1])
    with pytest.raises(DataError, match="algorithm must be one of"):
        PLS(2, algorithm="svd").fit(X, Y)
    with pytest.raises(DataError, match="deflation must be one of"):
        PLS(2, deflation="sb").fit(X, Y)
    with pytest.raises(DataError, match="inner must be one of"):
        PLS(2, inner="lanczos").fit(X, Y)
    with pytest.raises(DataError, match="algorithm='simpls' supports only deflation='regression'"):
        PLS(2, algorithm="simpls", deflation="canonical").fit(X, Y)
    with pytest.raises(DataError, match="PLS is not fitted yet"):
        PLS(2).predict(X)
    with pytest.raises(DataError, match="PLS is not fitted yet"):
        PLS(2).vip()
    with pytest.raises(DataError, match="X must have 7 features"):
        PLS(2).fit(X, Y).predict(X[:, :3])
    with pytest.raises(DataError, match="n_bootstrap must be a non-negative integer"):
        vip_scores(X, Y, 2, n_bootstrap=-1)
    with pytest.raises(DataError, match="seed must be an int"):
        vip_scores(X, Y, 2, n_bootstrap=2, seed="abc")
    with pytest.raises(DataError, match="PLSVIPSelector needs responses"):
        PLSVIPSelector(2).fit(X)
    with pytest.raises(DataError, match="X must be the square n × n training kernel"):
        KernelPLS(2, kernel="precomputed").fit(X, Y)
    with pytest.raises(DataError, match="KernelPLS is not fitted yet"):
        KernelPLS(2).predict(X)
    with pytest.raises(DataError, match="X must be the test × train kernel with 40 columns"):
        KernelPLS(2, kernel="precomputed").fit(X @ X.T, Y).predict(X)
    with pytest.raises(DataError, match="X must have 7 features"):
        KernelPLS(2).fit(X, Y).predict(X[:, :2])


def test_no_covariance_left_is_an_error():
    X = np.eye(6)[:, :3] * np.array([3.0, 2.0, 1.0])
    X = np.vstack([X, -X])  # orthogonal centred columns
    y = X[:, 0]
    with pytest.raises(DataError, match="no covariance left after 1 component"):
        PLS(2).fit(X, y)
    with pytest.raises(DataError, match="no covariance left after 1 component"):
        KernelPLS(2, kernel="linear").fit(X, y)
    with pytest.raises(DataError, match="Y: XᵀY is zero after centring"):
        PLS(1).fit(X, np.ones(12))
    with pytest.raises(DataError, match="Y: YᵀKY is zero after centring"):
        KernelPLS(1).fit(X, np.ones(12))


# ---- issue 17: VIP on W, band rule, score and Q² -----------------------------------------------
@pytest.mark.parametrize("scale", [False, True])
def test_vip_equal_for_nipals_and_simpls_on_the_same_model(data, scale):
    # PLS1: SIMPLS and NIPALS fit the same model (same coefficients); VIP is defined on the NIPALS weights W
    # (orthonormal, R = W(PᵀW)⁻¹), so both algorithms must give the same VIP (before: up to 0.045 apart).
    X, Y = data
    a = PLS(4, algorithm="nipals", scale=scale).fit(X, Y[:, 0])
    b = PLS(4, algorithm="simpls", scale=scale).fit(X, Y[:, 0])
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)
    np.testing.assert_allclose(a.vip().scores, b.vip().scores, atol=1e-10)
    np.testing.assert_allclose(np.abs(a.x_weights_), np.abs(b.x_weights_), atol=1e-10)
    Wb = b.x_weights_
    np.testing.assert_allclose(Wb.T @ Wb, np.eye(4), atol=1e-12)


def test_vip_band_rule_false_positive_rate_on_pure_noise():
    # Pure noise: y independent of every feature. The point rule "VIP > 1" keeps about a third of the
    # features (Σ VIP² = N forces some above 1); the band rule "lower end of the 90% bootstrap band > 1"
    # keeps about 1% (measured 0.8% over 20 data sets of 60 × 50). Bound: ≤ 3% of 500 null features;
    # with the measured rate 0.8% the false-alarm probability is below 1e-3 even allowing for
    # within-data-set dependence (fixed seeds make the test deterministic).
    point, band = [], []
    for s in range(10):
        rng = np.random.default_rng(100 + s)
        X, y = rng.normal(size=(60, 50)), rng.normal(size=60)
        band.append(PLSVIPSelector(2, seed=s).fit(X, y).get_support())
        point.append(PLSVIPSelector(2, rule="point").fit(X, y).get_support())
    assert np.mean(band) <= 0.03
    assert np.mean(point) > 0.25
    sel = PLSVIPSelector(2, seed=0).fit(X, y)
    assert sel.rule == "band" and sel.weights_.draws.shape == (100, 50)


def test_vip_band_rule_keeps_planted_features():
    rng = np.random.default_rng(21)
    X = rng.normal(size=(80, 30))
    y = X[:, 3] - X[:, 11] + 0.7 * X[:, 20] + 0.5 * rng.normal(size=80)
    sel = PLSVIPSelector(2, seed=1).fit(X, y)
    assert set(sel.get_support(indices=True)) == {3, 11, 20}
    with pytest.raises(DataError, match="rule='band' needs n_bootstrap ≥ 10"):
        PLSVIPSelector(2, n_bootstrap=0).fit(X, y)
    with pytest.raises(DataError, match="rule must be one of"):
        PLSVIPSelector(2, rule="vip").fit(X, y)


def test_pls_score_is_r2_and_q2_chooses_components():
    from sklearn.metrics import r2_score

    from latentfs.subspace.pls import cross_validated_q2

    rng = np.random.default_rng(5)
    Z = rng.normal(size=(80, 2))
    X = Z @ rng.normal(size=(2, 12)) + 0.3 * rng.normal(size=(80, 12))
    y = Z[:, 0] - Z[:, 1] + 0.2 * rng.normal(size=80)
    m = PLS(2).fit(X, y)
    assert np.isclose(m.score(X, y), r2_score(y, m.predict(X)))
    q2 = cross_validated_q2(X, y, max_components=6, n_splits=5, seed=0)
    assert q2.shape == (6,) and q2[1] > 0.8 and q2[1] > q2[0]
    auto = PLS("q2", max_iter=500).fit(X, y)
    assert auto.n_components_ == 2 and auto.q2_.shape[0] >= 2
    assert np.isclose(auto.score(X, y), PLS(2).fit(X, y).score(X, y))
