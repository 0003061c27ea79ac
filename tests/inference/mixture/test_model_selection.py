"""Number of components: parameter counts, AIC/BIC/ICL (exact), BIC/ICL recovery on planted mixtures,
bootstrap likelihood-ratio test (power on a planted 2-component mixture; calibration under the null)."""

import math

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.mixture.model_selection import (
    bootstrap_lrt,
    information_criteria,
    n_parameters,
    select_n_components,
)
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile


def test_parameter_counts_by_model():
    d = 4
    assert n_parameters(GaussianMixture(3, covariance_type="full"), d) == 2 + 12 + 3 * 10
    assert n_parameters(GaussianMixture(3, covariance_type="tied"), d) == 2 + 12 + 10
    assert n_parameters(GaussianMixture(3, covariance_type="diag"), d) == 2 + 12 + 12
    assert n_parameters(GaussianMixture(3, covariance_type="spherical"), d) == 2 + 12 + 3
    assert n_parameters(LatentProfile(3), d) == 2 + 12 + 4
    assert n_parameters(LatentProfile(3, variance="free"), d) == 2 + 12 + 12
    assert n_parameters(LatentClass(3), d) == 2 + 3 * 4
    assert n_parameters(LatentClass(3, n_levels=[2, 3, 5, 2]), d) == 2 + 3 * (1 + 2 + 4 + 1)


def test_criteria_formulas():
    gm = GaussianMixture(2, covariance_type="diag", mean_precision=0.02)
    X = gm.simulate(120, 3, seed=0)["data"]
    res = latentfs.fit(gm, X, method="em", seed=0)
    ic = information_criteria(res)
    ll, nu = ic["log_likelihood"], ic["n_parameters"]
    tau = res.extras["responsibilities"]
    entropy = -(tau * np.log(np.clip(tau, 1e-300, None))).sum()
    assert ic["aic"] == pytest.approx(-2 * ll + 2 * nu)
    assert ic["bic"] == pytest.approx(-2 * ll + nu * math.log(120))
    assert ic["icl"] == pytest.approx(ic["bic"] + 2 * entropy)
    assert ic["icl"] >= ic["bic"]


def test_bic_and_icl_recover_planted_gaussian_k():
    means = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    gm = GaussianMixture(3, covariance_type="full")
    X = gm.simulate(600, 2, params={"means": means, "precision": np.stack([np.eye(2)] * 3)}, seed=0)["data"]
    sel = select_n_components(gm, X, [1, 2, 3, 4, 5], seed=0)
    assert sel.best["bic"] == 3
    assert sel.best["icl"] == 3
    assert sel.best["aic"] >= 3  # AIC never under-selects here; it may over-select
    assert list(sel.table.index) == [1, 2, 3, 4, 5]


def test_bic_recovers_planted_latent_class_k():
    probs = np.array([[0.9, 0.9, 0.9, 0.1, 0.1, 0.8], [0.1, 0.1, 0.2, 0.9, 0.9, 0.2]])
    lc = LatentClass(2)
    X = lc.simulate(800, 6, params={"item_probs": probs, "weights": [0.5, 0.5]}, seed=0)["items"]
    sel = select_n_components(lc, X, [1, 2, 3], seed=0, warn=False)
    assert sel.best["bic"] == 2


@pytest.mark.slow
def test_bootstrap_lrt_detects_a_second_component_and_not_a_spurious_one():
    # Power: well-separated K = 2 data, H0 K0 = 1 → λ_obs far in the tail, p = 1/(B+1).
    # Calibration: on K = 1 data the p-value is Uniform under H0; with this fixed seed we check p > 0.05
    # (false alarm 5% for a random seed; fixed here).
    gm = GaussianMixture(1, covariance_type="spherical")
    X2 = gm.with_n_components(2).simulate(
        150, 2, params={"means": [[0.0, 0.0], [5.0, 5.0]], "precision": [[1.0], [1.0]]}, seed=0
    )["data"]
    out = bootstrap_lrt(gm, X2, 1, n_bootstrap=19, seed=0, n_init=2)
    assert out.p_value == pytest.approx(1 / 20)
    assert out.statistic > out.null_statistics.max()
    X1 = gm.simulate(150, 2, params={"means": [[0.0, 0.0]], "precision": [[1.0]]}, seed=1)["data"]
    null = bootstrap_lrt(gm, X1, 1, n_bootstrap=19, seed=0, n_init=2)
    assert null.p_value > 0.05
    assert (null.null_statistics >= 0).all()


def test_bootstrap_lrt_for_latent_class():
    lc = LatentClass(1)
    X = lc.with_n_components(2).simulate(200, 4, params={"item_probs": [[0.9] * 4, [0.1] * 4]}, seed=0)["items"]
    out = bootstrap_lrt(lc, X, 1, n_bootstrap=5, seed=0, n_init=1)
    assert out.p_value == pytest.approx(1 / 6)


def test_errors():
    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(DataError, match="n_components must hold at least one K"):
        select_n_components(GaussianMixture(2), X, [])
    with pytest.raises(DataError, match="n_bootstrap must be a positive integer"):
        bootstrap_lrt(GaussianMixture(1), X, 1, n_bootstrap=0)
    with pytest.raises(DataError, match="model must be a latentfs mixture model"):
        n_parameters(object(), 3)
    gibbs = latentfs.fit(
        GaussianMixture(1, covariance_type="diag"),
        X,
        method="gibbs",
        num_chains=1,
        num_warmup=1,
        num_samples=2,
        progress=False,
    )
    with pytest.raises(DataError, match="result must be a maximum-likelihood fit"):
        information_criteria(gibbs)


def test_bootstrap_lrt_gives_up_on_invalid_replicates(monkeypatch):
    # Replicates that the model refuses (here: forced constant columns) are redrawn, then it stops.
    from latentfs.inference.mixture.em import GaussianFamily

    monkeypatch.setattr(GaussianFamily, "sample_data", lambda self, params, n, rng: np.ones((n, self.d)))
    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(DataError, match="could not draw valid replicates"):
        bootstrap_lrt(GaussianMixture(1), X, 1, n_bootstrap=2, seed=0, n_init=1)
