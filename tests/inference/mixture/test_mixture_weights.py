"""Feature weights for mixtures: the between-component share of variance (exact identities, label
invariance), planted informative features ranked first (recovery), bands from Gibbs, VB and bootstrap."""

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.mixture.weights import (
    MixtureSeparationSelector,
    between_share,
    bootstrap_feature_weights,
    mixture_feature_weights,
)
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile


def test_two_symmetric_components_closed_form():
    # means ±a, unit variance, equal weights: B = a², W = 1, R² = a²/(a² + 1).
    a = 1.7
    r2 = between_share(
        np.array([0.5, 0.5]), means=np.array([[-a], [a]]), covariance=np.ones((2, 1)), covariance_type="diag"
    )
    assert r2[0] == pytest.approx(a**2 / (a**2 + 1))


@pytest.mark.parametrize(
    "ct,shape", [("full", (3, 2, 2)), ("tied", (2, 2)), ("diag", (3, 2)), ("spherical", (3,)), ("tied_diag", (2,))]
)
def test_covariance_shapes_agree_with_full(ct, shape):
    rng = np.random.default_rng(0)
    w, mu = rng.dirichlet(np.ones(3)), rng.normal(size=(3, 2))
    var = rng.uniform(0.5, 2, size=(3, 2))
    if ct == "tied" or ct == "tied_diag":
        var[:] = var[0]
    if ct == "spherical":
        var[:] = var[:, :1]
    full = np.stack([np.diag(v) for v in var])
    cov = {"full": full, "tied": full[0], "diag": var, "spherical": var[:, 0], "tied_diag": var[0]}[ct]
    assert cov.shape == shape
    np.testing.assert_allclose(
        between_share(w, means=mu, covariance=cov, covariance_type=ct),
        between_share(w, means=mu, covariance=full, covariance_type="full"),
    )


def test_law_of_total_variance_for_gaussian_mixture():
    # B + W equals the mixture's marginal variance of each feature (Monte Carlo on 200k draws, 1% tolerance).
    w, mu, var = np.array([0.2, 0.8]), np.array([[0.0, 1.0], [3.0, 1.5]]), np.array([[1.0, 2.0], [0.5, 1.0]])
    rng = np.random.default_rng(1)
    z = rng.choice(2, 200_000, p=w)
    x = mu[z] + np.sqrt(var[z]) * rng.normal(size=(200_000, 2))
    between = (w[:, None] * (mu - w @ mu) ** 2).sum(0)
    r2 = between_share(w, means=mu, covariance=var, covariance_type="diag")
    np.testing.assert_allclose(between / r2, x.var(0), rtol=0.01)


def test_item_score_is_gini_split():
    w = np.array([0.3, 0.7])
    theta = np.array([[[0.8, 0.2, 0.0], [0.5, 0.5, 0.0]], [[0.1, 0.3, 0.6], [0.5, 0.5, 0.0]]])
    r2 = between_share(w, item_probs=theta)
    pbar = (w[:, None, None] * theta).sum(0)
    between = (w[:, None, None] * (theta - pbar) ** 2).sum((0, 2))
    assert r2[0] == pytest.approx(between[0] / (1 - (pbar[0] ** 2).sum()))
    assert r2[1] == 0.0  # identical across classes → carries nothing about z
    binary = between_share(w, item_probs=np.array([[0.9, 0.5], [0.2, 0.5]]))
    assert binary[1] == 0.0 and 0 < binary[0] < 1


def test_label_permutation_invariance():
    rng = np.random.default_rng(2)
    w, mu, cov = rng.dirichlet(np.ones(4)), rng.normal(size=(4, 3)), rng.uniform(0.5, 2, size=(4, 3))
    p = rng.permutation(4)
    np.testing.assert_allclose(
        between_share(w, means=mu, covariance=cov, covariance_type="diag"),
        between_share(w[p], means=mu[p], covariance=cov[p], covariance_type="diag"),
    )


def _planted_profile(n=400, seed=0):
    means = np.array([[0.0, 0.0, 0.0, 0.0], [4.0, 1.5, 0.0, 0.0]])
    lp = LatentProfile(2)
    return lp, lp.simulate(n, 4, params={"means": means, "precision": [1.0] * 4, "weights": [0.5, 0.5]}, seed=seed)[
        "data"
    ]


def test_planted_features_rank_first_em_and_selector():
    lp, X = _planted_profile()
    fw = mixture_feature_weights(latentfs.fit(lp, X, method="em", seed=0))
    assert fw.ranking()[:2].tolist() == [0, 1]
    assert fw.scores[2] < 0.05 and fw.scores[0] > 0.7  # population values 0.80, 0.36, 0, 0
    sel = MixtureSeparationSelector(lp, n_features_to_select=2).fit(X)
    assert sel.get_support().tolist() == [True, True, False, False]
    assert sel.transform(X).shape == (400, 2)


def test_gibbs_band_covers_population_value():
    lp, X = _planted_profile(seed=1)
    res = latentfs.fit(lp, X, method="gibbs", num_chains=2, num_warmup=50, num_samples=100, seed=0, progress=False, warn=False)
    fw = mixture_feature_weights(res)
    lo, hi = fw.band(0.95)
    assert fw.draws.shape == (200, 4)
    assert lo[0] < 0.8 < hi[0]  # population R² = 16/20
    assert (hi - lo > 0).all()


def test_vb_draws_give_a_band():
    lc = LatentClass(2)
    X = lc.simulate(300, 4, params={"item_probs": [[0.9, 0.8, 0.5, 0.5], [0.1, 0.2, 0.5, 0.5]]}, seed=0)["items"]
    fw = mixture_feature_weights(latentfs.fit(lc, X, method="vb", seed=0), num_draws=50)
    assert fw.draws.shape == (50, 4)
    assert set(fw.top(2)) == {"x0", "x1"}


def test_bootstrap_band():
    gm = GaussianMixture(2, covariance_type="diag")
    X = gm.simulate(200, 3, params={"means": [[0, 0, 0], [5, 0, 0]], "precision": np.ones((2, 3))}, seed=0)["data"]
    fw = bootstrap_feature_weights(gm, X, n_bootstrap=5, seed=0)
    assert fw.draws.shape == (5, 3)
    assert fw.info["source"] == "em+bootstrap"
    assert fw.top(1) == ["x0"]


def test_errors():
    with pytest.raises(DataError, match="between_share needs means and covariance"):
        between_share(np.array([0.5, 0.5]))
    with pytest.raises(DataError, match="covariance_type must be one of"):
        between_share(np.array([1.0]), means=np.zeros((1, 2)), covariance=np.ones(2), covariance_type="iso")
    with pytest.raises(DataError, match="result must be a fitted mixture Posterior"):
        mixture_feature_weights(object())
    with pytest.raises(DataError, match="n_bootstrap must be an integer ≥ 2"):
        bootstrap_feature_weights(LatentProfile(2), np.zeros((5, 2)), n_bootstrap=1)


def test_bootstrap_gives_up(monkeypatch):
    import latentfs.core.registry

    lp, X = _planted_profile(n=50)
    real_fit = latentfs.core.registry.fit
    calls = {"n": 0}

    def failing_fit(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 1:
            raise DataError("refused")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(latentfs.core.registry, "fit", failing_fit)
    with pytest.raises(DataError, match="could not fit 20 resampled data sets"):
        bootstrap_feature_weights(lp, X, n_bootstrap=2, seed=0)
