"""Auxiliary variational InfoMax (Agakov & Barber 2006) against the oracles of digest book_part2 §3.9."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.datasets import load_digits

from latentfs.core.data import DataError
from latentfs.core.driver import ConvergenceWarning
from latentfs.subspace.infomax import (
    InfoMaxProjection,
    as_if_gaussian_mi,
    gaussian_channel_mi,
    infomax_bound,
    linear_gaussian_bound,
    linsker_projection,
    pca_components,
    subspace_overlap,
)
from latentfs.testing import z_test


def _random_cov(rng: np.random.Generator, D: int) -> np.ndarray:
    A = rng.normal(size=(D, D))
    return A @ A.T / D + 0.1 * np.eye(D)


def _random_orthonormal(rng: np.random.Generator, K: int, D: int) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(D, K)))
    return q.T


def _gaussian_entropy(C: np.ndarray) -> float:
    return 0.5 * (C.shape[0] * (1 + math.log(2 * math.pi)) + np.linalg.slogdet(C)[1])


def _digits_128() -> np.ndarray:
    d = load_digits()
    return np.vstack([d.data[d.target == k][:10] for k in (1, 2, 8)])


def _two_clusters(rng: np.random.Generator, n: int) -> tuple[np.ndarray, list[tuple[float, np.ndarray, np.ndarray]]]:
    """Two equally likely Gaussian clusters in 5-D, apart along x0, one wide and one narrow in the other axes."""
    m = np.array([2.5, 0.0, 0.0, 0.0, 0.0])
    comps = [(0.5, m, np.diag([0.5, 3.0, 3.0, 3.0, 3.0])), (0.5, -m, np.diag([0.5, 0.2, 0.2, 0.2, 0.2]))]
    k = rng.random(n) < 0.5
    X = np.where(
        k[:, None],
        rng.multivariate_normal(comps[0][1], comps[0][2], n),
        rng.multivariate_normal(comps[1][1], comps[1][2], n),
    )
    return X, comps


# ---------------------------------------------------------------------------------------------- oracle 1, 6
@pytest.mark.parametrize("channel", ["auxiliary", "hybrid"])
@pytest.mark.parametrize("cov", ["isotropic", "diag", "full"])
def test_bound_is_monotone_and_encoder_orthonormal(channel: str, cov: str) -> None:
    X = _digits_128()
    model = InfoMaxProjection(4, n_auxiliary=3, channel=channel, decoder_cov=cov, max_iter=8, inner_steps=4,
                              reg_covar=1e-3).fit(X)
    W = model.components_
    assert np.abs(W @ W.T - np.eye(4)).max() < 1e-10
    assert np.all(np.diff(model.bound_) >= -1e-9 * np.abs(model.bound_[1:])), np.diff(model.bound_)
    assert model.bound_[-1] > model.bound_[0] + 1.0  # it actually moves on this non-Gaussian source
    assert model.bound_.shape == (9,) and model.n_iter_ == 8


# ---------------------------------------------------------------------------------------------- oracle 2
def test_as_if_gaussian_identity_and_pca_maximum() -> None:
    rng = np.random.default_rng(1)
    D, K, s2 = 6, 2, 0.7
    C = _random_cov(rng, D)
    W = _random_orthonormal(rng, K, D)
    assert as_if_gaussian_mi(W, C, s2) == pytest.approx(gaussian_channel_mi(W, C, s2), abs=1e-10)
    lam, vecs = np.linalg.eigh(C)
    W_pca = vecs[:, ::-1][:, :K].T
    best = 0.5 * float(np.sum(np.log1p(lam[::-1][:K] / s2)))
    assert gaussian_channel_mi(W_pca, C, s2) == pytest.approx(best, abs=1e-10)
    for _ in range(20):
        assert gaussian_channel_mi(_random_orthonormal(rng, K, D), C, s2) < best - 1e-6


# ---------------------------------------------------------------------------------------------- oracle 3
def test_linear_gaussian_bound_is_tight_on_a_gaussian_source() -> None:
    rng = np.random.default_rng(2)
    for D, K in [(3, 1), (5, 2), (8, 4)]:
        C = _random_cov(rng, D)
        W = rng.normal(size=(K, D))  # tightness needs no orthonormality
        assert linear_gaussian_bound(W, C, 0.5) == pytest.approx(gaussian_channel_mi(W, C, 0.5), abs=1e-9)


def test_fitted_simple_bound_equals_the_gaussian_mi_of_the_sample() -> None:
    # |z| = 1, full decoder covariance, no ridge: H_Gauss(C) + bound = ½ log|I + W C Wᵀ/s²| exactly (digest §3.3),
    # and the IM algorithm stays at the PCA optimum ½ Σ_{k ≤ K} log(1 + λ_k/s²).
    rng = np.random.default_rng(3)
    C0 = np.diag([5.0, 3.0, 1.0, 0.5, 0.2])
    X = rng.multivariate_normal(np.zeros(5), C0, 400)
    model = InfoMaxProjection(2, n_auxiliary=1, decoder_cov="full", reg_covar=0.0, max_iter=3).fit(X)
    Xc = X - X.mean(axis=0)
    C = Xc.T @ Xc / X.shape[0]
    mi = gaussian_channel_mi(model.components_, C, 1.0)
    assert _gaussian_entropy(C) + model.bound_[-1] == pytest.approx(mi, abs=1e-9)
    lam = np.linalg.eigvalsh(C)[::-1]
    assert mi == pytest.approx(0.5 * np.sum(np.log1p(lam[:2])), abs=1e-9)


# ---------------------------------------------------------------------------------------------- oracle 4
def test_bounds_are_ordered_below_the_exact_mi_for_a_mixture_source() -> None:
    # x is a two-component Gaussian mixture in 5-D, y = w x + ε (1-D): I(x, y) = h(y) − ½ log(2πe s²) with h(y)
    # by quadrature (exact to ~1e-10). The fitted bounds are evaluated on a fresh sample of 40 000 points:
    # Ĩ = mean(−log p(x_i) + bound term_i), a Monte Carlo mean tested one-sided at z = 4.5 (false-alarm rate
    # 3.4e-6 per comparison).
    rng = np.random.default_rng(4)
    X, comps = _two_clusters(rng, 3000)
    fresh, _ = _two_clusters(np.random.default_rng(5), 40_000)
    log_px = np.logaddexp(*[math.log(pi) + stats.multivariate_normal(m, S).logpdf(fresh) for pi, m, S in comps])
    values = {}
    for J in (1, 2):
        model = InfoMaxProjection(1, n_auxiliary=J, decoder_cov="full", reg_covar=0.0, max_iter=20).fit(X)
        terms = -log_px + model.score_samples(fresh)
        values[J] = (float(terms.mean()), float(terms.std(ddof=1) / math.sqrt(terms.size)), model.components_[0])
    gaps = {}
    for J, (estimate, se, w) in values.items():
        ym = [float(w @ m) for _, m, _ in comps]
        ys = [math.sqrt(float(w @ S @ w) + 1.0) for _, _, S in comps]

        def py(t: float, ym: list[float] = ym, ys: list[float] = ys) -> float:
            return sum(pi * stats.norm.pdf(t, mu, sd) for (pi, _, _), mu, sd in zip(comps, ym, ys, strict=True))

        h_y = integrate.quad(lambda t: -py(t) * math.log(max(py(t), 1e-300)), -30, 30, limit=400)[0]
        exact = h_y - 0.5 * math.log(2 * math.pi * math.e)
        assert estimate <= exact + 4.5 * se, (J, estimate, exact, se)
        gaps[J] = exact - estimate
    # the linear decoder misses much of this source's information; two experts close part of the gap (measured
    # 1.88 and 1.13 nats). On a source whose clusters differ only in their means, the −KL(p(z|x) ‖ q(z)) penalty
    # (up to log |z|, q(z) not depending on y) can cancel the experts' gain and the gate collapses to |z| = 1.
    assert gaps[1] > 1.0 and gaps[2] < gaps[1] - 0.5, gaps


# ---------------------------------------------------------------------------------------------- oracle 5
def _params(model: InfoMaxProjection) -> dict:
    d = model.decoder_
    return {"W": model.components_, "V": model.aux_coef_, "b": model.aux_intercept_, "U": d["U"], "S": d["S"],
            "q": d["q"]}


def test_decoder_step_is_the_exact_maximiser() -> None:
    X = _digits_128()
    model = InfoMaxProjection(3, n_auxiliary=2, channel="auxiliary", decoder_cov="full", reg_covar=1e-2,
                              scale=True, max_iter=4, inner_steps=3).fit(X)
    Xs = (X - model.mean_) / model.scale_
    kw = {"decoder_cov": "full", "reg_covar": model.decoder_["ridge"], "channel": "auxiliary"}
    base = _params(model)
    f0 = infomax_bound(Xs, **base, **kw)
    assert f0 == pytest.approx(model.bound_[-1], rel=1e-10)
    rng = np.random.default_rng(6)
    # U_j zeroes the gradient: central differences along random directions are ~0 (the bound is quadratic in U)
    for _ in range(3):
        E = rng.normal(size=base["U"].shape)
        h = 1e-4
        up = infomax_bound(Xs, **{**base, "U": base["U"] + h * E}, **kw)
        down = infomax_bound(Xs, **{**base, "U": base["U"] - h * E}, **kw)
        assert abs(up - down) / (2 * h) < 1e-5 * abs(f0)
        assert up < f0 and down < f0
    # S_j: any other positive-definite matrix is worse; q(z): any other distribution is worse
    for _ in range(3):
        B = rng.normal(size=base["S"].shape) * 1e-2
        S_alt = base["S"] + np.einsum("jab,jcb->jac", B, B)
        assert infomax_bound(Xs, **{**base, "S": S_alt}, **kw) < f0
    q_alt = base["q"] + np.array([0.05, -0.05])
    assert infomax_bound(Xs, **{**base, "q": q_alt}, **kw) < f0
    p = model.aux_proba(X)
    assert base["q"] == pytest.approx(p.mean(axis=0), abs=1e-10)  # q(z) = mean responsibility


def test_decoder_covariance_is_the_weighted_average_of_distortions() -> None:
    # S_j* = C_j − U_j W C_j equals Σ_i p_ij (d_ij d_ijᵀ + s² U_j U_jᵀ) / r_j (digest §3.6)
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 4)) @ np.diag([3.0, 2.0, 1.0, 0.5])
    model = InfoMaxProjection(2, n_auxiliary=2, decoder_cov="full", reg_covar=0.0, channel_noise=0.5,
                              max_iter=2).fit(X)
    Xs = X - model.mean_
    p = model.aux_proba(X)
    W = model.components_
    for j in range(2):
        U = model.decoder_["U"][j]
        d = Xs - Xs @ W.T @ U.T
        S = (np.einsum("m,md,me->de", p[:, j], d, d) + p[:, j].sum() * 0.5 * U @ U.T) / p[:, j].sum()
        np.testing.assert_allclose(model.decoder_["S"][j], S, atol=1e-10)


# ---------------------------------------------------------------------------------------------- oracle 7
def test_one_auxiliary_state_is_the_simple_bound_and_both_channels_agree() -> None:
    X = _digits_128()
    aux = InfoMaxProjection(4, n_auxiliary=1, channel="auxiliary", max_iter=3).fit(X)
    hyb = InfoMaxProjection(4, n_auxiliary=1, channel="hybrid", max_iter=3).fit(X)
    np.testing.assert_allclose(aux.bound_, hyb.bound_, atol=1e-9)
    # the simple bound with an isotropic decoder is maximised by PCA: the IM algorithm does not leave W_pca
    assert np.allclose(subspace_overlap(aux.components_, pca_components(X, 4)), np.eye(4), atol=1e-8)


def test_linear_decoder_from_a_random_start_recovers_the_pca_subspace() -> None:
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 6)) @ np.diag([4.0, 3.0, 2.5, 1.0, 0.6, 0.3])  # eigen-gap after the third
    model = InfoMaxProjection(3, n_auxiliary=1, init="random", decoder_cov="full", max_iter=40,
                              inner_steps=20, seed=3).fit(X)
    W_pca = pca_components(X, 3)
    early = InfoMaxProjection(3, n_auxiliary=1, init="random", decoder_cov="full", max_iter=1, inner_steps=1,
                              seed=3).fit(X)
    assert np.abs(subspace_overlap(early.components_, W_pca) - np.eye(3)).max() > 0.05  # it starts elsewhere
    np.testing.assert_allclose(subspace_overlap(model.components_, W_pca), np.eye(3), atol=1e-4)


def test_linsker_projection_recovers_pca() -> None:
    rng = np.random.default_rng(9)
    X = rng.normal(size=(300, 8)) @ np.diag([5.0, 4.0, 1.0, 0.8, 0.6, 0.5, 0.4, 0.3])
    W, trace = linsker_projection(X, 2, 1.0, seed=1)
    assert np.abs(W @ W.T - np.eye(2)).max() < 1e-10
    assert np.all(np.diff(trace) >= -1e-12)
    W_pca = pca_components(X, 2)
    np.testing.assert_allclose(subspace_overlap(W, W_pca), np.eye(2), atol=1e-6)
    C = np.cov(X.T, bias=True)
    assert trace[-1] == pytest.approx(gaussian_channel_mi(W_pca, C), abs=1e-8)


# ---------------------------------------------------------------------------------------------- oracle 8
def test_expected_log_decoder_matches_monte_carlo() -> None:
    # eq. 11 averages log N(x; U_j y, S_j) over y ~ N(W x, s² I) in closed form; 4000 channel draws per row,
    # two-sided z-test at 4.5 (false-alarm rate 6.8e-6).
    X = _digits_128()
    model = InfoMaxProjection(3, n_auxiliary=2, channel="hybrid", reg_covar=0.0, channel_noise=4.0,
                              max_iter=3).fit(X)
    closed = model.score(X)
    Xs = X - model.mean_
    W, U, S = model.components_, model.decoder_["U"], model.decoder_["S"]
    p = model.aux_proba(X)
    rng = np.random.default_rng(10)
    R = 4000
    D = X.shape[1]
    draws = np.zeros(R)
    for r in range(R):
        Y = Xs @ W.T + 2.0 * rng.normal(size=(X.shape[0], 3))
        total = 0.0
        for j in range(2):
            resid = Xs - Y @ U[j].T
            logn = -0.5 * ((resid**2).sum(axis=1) / S[j] + D * math.log(2 * math.pi * S[j]))
            total += float(np.mean(p[:, j] * logn))
        draws[r] = total
    z_test(float(draws.mean()), closed, float(draws.std(ddof=1) / math.sqrt(R)), what="Monte Carlo eq. 11")


# ---------------------------------------------------------------------------------------------- oracle 9
def test_digits_auxiliary_bound_beats_pca_and_grows_with_the_auxiliary_states() -> None:
    X = _digits_128()
    finals = []
    for J in (1, 2, 3, 5):
        model = InfoMaxProjection(6, n_auxiliary=J, max_iter=10, inner_steps=5).fit(X)
        finals.append(model.bound_[-1])
        if J == 3:
            overlap = np.linalg.eigvalsh(subspace_overlap(model.components_, pca_components(X, 6)))
    assert all(b > a + 1.0 for a, b in zip(finals, finals[1:], strict=False)), finals
    assert overlap.min() < 0.95  # the Ĩ-optimal subspace is not the PCA subspace (Fig. 3b)


# ---------------------------------------------------------------------------------------------- the estimator
def test_feature_weights_from_the_encoder() -> None:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(200, 6)) * np.array([0.1, 0.1, 5.0, 0.1, 4.0, 0.1])
    model = InfoMaxProjection(2, n_auxiliary=2, max_iter=3).fit(X)
    fw = model.feature_weights()
    assert fw.scores.sum() == pytest.approx(2.0, abs=1e-10)
    assert np.all((fw.scores >= -1e-12) & (fw.scores <= 1 + 1e-12))
    assert sorted(fw.top(2)) == ["x2", "x4"]
    dec = model.feature_weights("decoder")
    assert sorted(dec.top(2)) == ["x2", "x4"] and dec.method == "infomax.decoder"


def test_hybrid_reconstruction_beats_pca_on_clustered_patterns() -> None:
    # the chapter's Fig. 4 in numbers: prototypes + noise (s_s² = 0.5), |z| = 3, reconstruction at U_z y compared
    # with the clean prototypes; |y| = 1 so that one principal direction cannot tell three prototypes apart
    rng = np.random.default_rng(12)
    protos = rng.normal(0, 3, (3, 10))
    labels = rng.integers(0, 3, 300)
    X = protos[labels] + math.sqrt(0.5) * rng.normal(size=(300, 10))
    model = InfoMaxProjection(1, n_auxiliary=3, channel="hybrid", max_iter=10).fit(X)
    Y, z = model.sample_code(X, seed=0)
    err_h = np.mean((model.reconstruct(Y, z) - protos[labels]) ** 2)
    pca = InfoMaxProjection(1, n_auxiliary=1, max_iter=1).fit(X)
    Yp, zp = pca.sample_code(X, seed=0)
    err_p = np.mean((pca.reconstruct(Yp, zp) - protos[labels]) ** 2)
    assert err_h < 0.5 * err_p, (err_h, err_p)  # measured 0.35 against 2.40
    assert model.reconstruct(Y).shape == X.shape  # without z: mixture over p(z | y)


def test_convergence_warning_when_tol_is_not_met() -> None:
    with pytest.warns(ConvergenceWarning, match="raise max_iter"):
        InfoMaxProjection(3, n_auxiliary=3, tol=1e-12, max_iter=1, inner_steps=1).fit(_digits_128())


@pytest.mark.parametrize(
    ("params", "X", "match"),
    [
        ({"n_components": 5}, np.ones((10, 4)) + np.eye(10, 4), r"n_components must be an integer in \[1, 4\]"),
        ({"n_auxiliary": 11}, np.eye(10, 4), r"n_auxiliary must be .*got 11.*10 rows"),
        ({"channel": "gaussian"}, np.eye(10, 4), r"channel must be one of \['auxiliary', 'hybrid'\]"),
        ({"decoder_cov": "full", "reg_covar": 0.0}, np.eye(10, 40), r"decoder_cov='full' with reg_covar=0 needs"),
        ({"channel_noise": 0.0}, np.eye(10, 4), r"channel_noise must be a number > 0; got 0"),
        ({"max_iter": 0}, np.eye(10, 4), r"max_iter must be an integer ≥ 1; got 0"),
        ({}, np.ones((10, 4)), r"X has zero variance: all 10 rows are identical"),
        ({}, np.where(np.eye(10, 4) > 0, np.nan, 1.0), r"NaN or infinite.*row 0 column 0"),
    ],
)
def test_bad_input_is_refused(params: dict, X: np.ndarray, match: str) -> None:
    with pytest.raises(DataError, match=match):
        InfoMaxProjection(**{"n_components": 2, **params}).fit(X)


def test_bad_arguments_of_helpers_are_refused() -> None:
    with pytest.raises(DataError, match=r"C must be the 3 × 3 covariance.*got shape \(2, 2\)"):
        gaussian_channel_mi(np.eye(1, 3), np.eye(2))
    with pytest.raises(DataError, match=r"C must be positive definite"):
        as_if_gaussian_mi(np.eye(1, 2), np.zeros((2, 2)))
    model = InfoMaxProjection(2, n_auxiliary=2, max_iter=1).fit(_digits_128())
    with pytest.raises(DataError, match=r"Y must be a finite \(n, 2\) array.*got shape \(3, 3\)"):
        model.reconstruct(np.zeros((3, 3)))
    with pytest.raises(DataError, match=r"z must hold one auxiliary state in 0..1"):
        model.reconstruct(np.zeros((3, 2)), z=np.array([0, 1, 2]))
    with pytest.raises(DataError, match=r"X has 5 features, but InfoMaxProjection is expecting 64"):
        model.transform(np.zeros((3, 5)))
