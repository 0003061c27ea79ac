"""Factor-analysis feature weights (communalities, loadings with bands) and rotations."""

import numpy as np
import pytest

from latentfs import fit
from latentfs.core.data import DataError
from latentfs.core.weights import FeatureWeights
from latentfs.inference.factor.weights import (
    bootstrap_draws,
    communalities,
    loading_weights,
    orthomax,
    promax,
    quartimax,
    rotate,
    varimax,
)
from latentfs.models.factor import FactorAnalysis

PRIORS = {"loading_scale": 2.0, "noise_shape": 2.0, "noise_scale": 0.5}


def _simple_structure(seed=0):
    rng = np.random.default_rng(seed)
    W = np.zeros((9, 3))
    for k in range(3):
        W[3 * k : 3 * k + 3, k] = rng.uniform(0.7, 1.1, 3)
    return W


def _turn(angle_seed=1, q=3):
    Q, _ = np.linalg.qr(np.random.default_rng(angle_seed).normal(size=(q, q)))
    return Q


def _match(A, B):
    """max |A − B| after the best signed column permutation of A."""
    from latentfs.inference.factor.gibbs import signed_permutation

    return np.abs(A @ signed_permutation(A, B) - B).max()


# ------------------------------------------------------------------ rotations
@pytest.mark.parametrize("method", ["varimax", "quartimax"])
def test_orthogonal_rotations_recover_simple_structure(method):
    W = _simple_structure()
    rotated, R = rotate(W @ _turn(), method)
    assert _match(rotated, W) < 1e-6
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(rotated @ rotated.T, W @ W.T, atol=1e-12)  # W Wᵗ is rotation-invariant


def test_varimax_increases_its_criterion():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(10, 3))

    def crit(L):
        Ln = L / np.linalg.norm(L, axis=1, keepdims=True)
        return ((Ln**4).sum(0) - ((Ln**2).sum(0)) ** 2 / L.shape[0]).sum()

    V = varimax(W)[0]
    assert crit(V) >= crit(W) - 1e-12
    # a local maximum: no small planar turn improves it
    for a, b in ((0, 1), (0, 2), (1, 2)):
        for eps in (1e-3, -1e-3):
            G = np.eye(3)
            G[[a, a, b, b], [a, b, a, b]] = [np.cos(eps), -np.sin(eps), np.sin(eps), np.cos(eps)]
            assert crit(V @ G) <= crit(V) + 1e-12
    assert quartimax(W)[0].shape == (10, 3)
    assert orthomax(W, 0.5)[0].shape == (10, 3)


def test_promax_pattern_and_factor_correlation():
    # planted oblique structure: simple pattern, correlated factors; promax recovers the pattern
    P0 = _simple_structure()
    Phi = np.array([[1.0, 0.4, 0.2], [0.4, 1.0, 0.3], [0.2, 0.3, 1.0]])
    W = P0 @ np.linalg.cholesky(Phi)  # an orthogonal-factor loading matrix with the same W Wᵗ
    P, T = promax(W)
    phi = np.linalg.inv(T.T @ T)
    np.testing.assert_allclose(np.diag(phi), 1.0, atol=1e-12)
    np.testing.assert_allclose(P @ phi @ P.T, W @ W.T, atol=1e-10)  # same implied covariance
    assert _match(P, P0) < 0.1
    assert np.abs(phi[np.triu_indices(3, 1)]).max() > 0.15  # and it finds the factors correlated


def test_single_factor_rotation_is_identity():
    W = np.array([[1.0], [0.5]])
    np.testing.assert_array_equal(varimax(W)[0], W)
    np.testing.assert_array_equal(promax(W)[0], W)


# ------------------------------------------------------------------ weights
def test_em_communalities_and_bootstrap_band():
    W = _simple_structure()
    W[8] = 0.15  # a weak feature
    psi = np.full(9, 0.3)
    X = FactorAnalysis(3).simulate(800, loadings=W, noise_variance=psi, mean=0.0, seed=0)["data"]
    res = fit(FactorAnalysis(3), X, method="em")
    fw = communalities(res)
    assert isinstance(fw, FeatureWeights) and fw.draws is None
    Wf, pf = res.mean("loadings"), res.mean("noise_variance")
    np.testing.assert_allclose(fw.scores, (Wf**2).sum(1) / ((Wf**2).sum(1) + pf), rtol=1e-12)
    assert fw.ranking()[-1] == 8
    truth = (W**2).sum(1) / ((W**2).sum(1) + psi)
    boot = bootstrap_draws(FactorAnalysis(3), X, res, n_boot=20, seed=1)
    band = communalities(res, bootstrap=boot)
    lo, hi = band.band(0.99)
    # 20 replicates, 99% band: most features' true communality inside (each miss ≈ 1-5%)
    assert ((lo <= truth) & (truth <= hi)).sum() >= 7
    assert band.info["source"] == "bootstrap"
    cv = communalities(res, kind="common_variance")
    np.testing.assert_allclose(cv.scores, (Wf**2).sum(1), rtol=1e-12)


def test_loading_weights_pick_the_planted_block():
    W = _simple_structure()
    X = FactorAnalysis(3).simulate(800, loadings=W @ _turn(), noise_variance=0.3, mean=0.0, seed=2)["data"]
    res = fit(FactorAnalysis(3), X, method="em")
    blocks = {tuple(sorted(loading_weights(res, k).top(3))) for k in range(3)}
    assert blocks == {("x0", "x1", "x2"), ("x3", "x4", "x5"), ("x6", "x7", "x8")}
    fw = loading_weights(res, "f0", rotation="promax", absolute=False)
    assert fw.info["rotation"] == "promax" and (fw.scores < 0).sum() + (fw.scores >= 0).sum() == 9


@pytest.mark.slow
def test_gibbs_bands_for_communalities_and_loadings():
    W = _simple_structure()
    psi = np.full(9, 0.4)
    model = FactorAnalysis(3, **PRIORS)
    X = model.simulate(500, loadings=W, noise_variance=psi, mean=0.0, missing_fraction=0.1, seed=3)["data"]
    post = fit(model, X, method="gibbs", num_chains=2, num_warmup=150, num_samples=200, seed=0, progress=False, warn=False)
    fw = communalities(post)
    assert fw.draws.shape == (400, 9) and fw.info["source"] == "gibbs"
    truth = (W**2).sum(1) / ((W**2).sum(1) + psi)
    lo, hi = fw.band(0.99)
    assert ((lo <= truth) & (truth <= hi)).sum() >= 8  # 99% bands, 9 features
    lw = loading_weights(post, 0)
    assert lw.draws.shape == (400, 9)
    assert tuple(sorted(lw.top(3))) in {("x0", "x1", "x2"), ("x3", "x4", "x5"), ("x6", "x7", "x8")}
    # signed loadings: each draw is rotated and matched to the rotated posterior mean, so the point
    # estimate sits inside the band (|·| of near-zero loadings would bias the band upwards)
    signed = loading_weights(post, 0, absolute=False)
    lo, hi = signed.band(0.95)
    assert ((lo <= signed.scores) & (signed.scores <= hi)).all()
    assert (hi - lo).max() < 0.5


def test_errors():
    W = _simple_structure()
    X = FactorAnalysis(3).simulate(200, loadings=W, noise_variance=0.3, mean=0.0, seed=0)["data"]
    res = fit(FactorAnalysis(3), X, method="em")
    with pytest.raises(DataError, match="rotation must be one of"):
        rotate(W, "oblimin")
    with pytest.raises(DataError, match="loadings must be 2-D"):
        varimax(np.ones(3))
    with pytest.raises(DataError, match="power must be greater than 1 for promax"):
        promax(W, power=1.0)
    with pytest.raises(DataError, match="kind must be one of"):
        communalities(res, kind="uniqueness")
    with pytest.raises(DataError, match=r"factor must be one of \['f0', 'f1', 'f2'\]"):
        loading_weights(res, "g1")
    with pytest.raises(DataError, match=r"factor must be an index in \[0, 3\)"):
        loading_weights(res, 3)
    with pytest.raises(DataError, match="n_boot must be an integer ≥ 2"):
        bootstrap_draws(FactorAnalysis(3), X, res, n_boot=1)
    model = FactorAnalysis(1, **PRIORS)
    Xs = model.simulate(40, loadings=np.ones((3, 1)), noise_variance=0.3, mean=0.0, seed=0)["data"]
    post = fit(model, Xs, method="gibbs", num_chains=1, num_warmup=5, num_samples=5, progress=False)
    with pytest.raises(DataError, match="bootstrap_draws is for point fits"):
        bootstrap_draws(model, Xs, post, n_boot=2)
