"""Issue 31 item 6: every family with ``n_components`` can be copied with another K, and factor analysis
chooses its number of factors by BIC and by cross-validated log-likelihood."""

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.mixture.model_selection import select_n_components
from latentfs.models.dca import ConditionalGammaPoissonDCA, DirichletDCA, GammaPoissonDCA
from latentfs.models.factor import FactorAnalysis, LoadingConstraints, MixtureOfFactorAnalyzers
from latentfs.models.hdda import HDDAModel
from latentfs.models.latent_trait import LatentTrait
from latentfs.models.plsa import PLSA


def _fa_data(seed=0, n=400):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(8, 2)) * 1.2
    return FactorAnalysis(2).simulate(n, loadings=W, noise_variance=0.3, mean=0.0, seed=seed)["data"]


def test_factor_analysis_number_of_factors_by_bic_and_cross_validation():
    # was: AttributeError: 'FactorAnalysis' object has no attribute 'with_n_components'
    X = _fa_data()
    sel = select_n_components(FactorAnalysis(2), X, range(1, 6), n_init=1, tol=1e-6)
    assert sel.best["bic"] == 2 and sel.best["cv"] == 2
    assert list(sel.table.index) == [1, 2, 3, 4, 5]
    t = sel.table
    # BIC = −2ℓ + ν log N with ν = d q + 2d − q(q − 1)/2 (FA's free parameters), AIC = −2ℓ + 2ν
    d, n = X.shape[1], X.shape[0]
    for q in t.index:
        nu = d * q + 2 * d - q * (q - 1) // 2
        assert t.loc[q, "n_parameters"] == nu
        assert t.loc[q, "bic"] == pytest.approx(-2 * t.loc[q, "log_likelihood"] + nu * np.log(n), rel=1e-12)
        assert t.loc[q, "aic"] == pytest.approx(-2 * t.loc[q, "log_likelihood"] + 2 * nu, rel=1e-12)
    assert t["icl"].isna().all() and "icl" not in sel.best  # no classes, no classification likelihood
    # the cross-validated column is the mean held-out log-likelihood per row (higher is better): fold by fold
    # it is Posterior.score on the held-out rows of a fit on the others
    assert (t["cv_log_likelihood"] < 0).all() and t["cv_log_likelihood"].idxmax() == 2
    assert t.loc[2, "log_likelihood"] > t.loc[1, "log_likelihood"]


def test_cross_validated_log_likelihood_by_hand():
    X = _fa_data(1, n=120)
    sel = select_n_components(FactorAnalysis(1), X, [1], n_init=1, cv=3, seed=5)
    order = np.random.default_rng(5).permutation(len(X))
    folds = np.array_split(order, 3)
    total = 0.0
    for test in folds:
        train = np.setdiff1d(np.arange(len(X)), test)
        fit = latentfs.fit(FactorAnalysis(1), X[train], method="em", seed=5, n_init=1)
        total += fit.score(X[test]) * len(test)
    assert sel.table.loc[1, "cv_log_likelihood"] == pytest.approx(total / len(X), rel=1e-10)


def test_mixtures_keep_their_table_and_can_ask_for_cross_validation():
    gm = latentfs.GaussianMixture(2, covariance_type="diag", mean_precision=0.01)
    X = gm.simulate(200, 2, seed=1)["data"]
    plain = select_n_components(gm, X, [1, 2, 3], seed=0)
    assert "cv_log_likelihood" not in plain.table and plain.best["bic"] == 2 and "icl" in plain.best
    cv = select_n_components(gm, X, [1, 2, 3], seed=0, cv=4)
    assert cv.best["cv"] == 2 and cv.best["bic"] == 2


def test_select_n_components_errors():
    X = _fa_data(n=60)
    with pytest.raises(DataError, match=r"cv must be 0, None or an integer ≥ 2; got 1"):
        select_n_components(FactorAnalysis(1), X, [1], cv=1)
    with pytest.raises(DataError, match=r"model must be a latentfs model with n_components and with_n_components"):
        select_n_components(object(), X, [1])


# ---- with_n_components on every family that has n_components ------------------------------------------------
def test_with_n_components_on_every_family():
    fa = FactorAnalysis(2, loading_scale=1.5, noise_shape=2.0, noise_scale=1.0)
    fa3 = fa.with_n_components(3)
    assert fa3.n_components == 3 and fa3.hyperparameters() == {**fa.hyperparameters(), "n_components": 3}
    assert fa.n_components == 2  # a copy

    mfa = MixtureOfFactorAnalyzers(2, 3).with_n_components(4)
    assert (mfa.n_components, mfa.n_factors) == (4, 3)
    assert PLSA(3).with_n_components(5).n_components == 5
    lt = LatentTrait(1, n_levels=4).with_n_components(2)
    assert (lt.n_components, lt.n_levels) == (2, 4)
    hd = HDDAModel(2, n_dims=3, submodel="AkBkQkD").with_n_components(4)
    assert (hd.n_components, hd.n_dims, hd.submodel) == (4, (3, 3, 3, 3), "AkBkQkD")
    assert HDDAModel(2).with_n_components(3).n_dims is None

    # DCA: α and γ at their default 1/K become 1/k; a symmetric α is kept per component
    d = DirichletDCA(4).with_n_components(2)
    np.testing.assert_allclose(d.alpha, [0.5, 0.5])
    assert float(d.gamma) == 0.5
    d = DirichletDCA(4, alpha=0.1, gamma=0.01).with_n_components(6)
    np.testing.assert_allclose(d.alpha, np.full(6, 0.1))
    assert float(d.gamma) == 0.01
    g = GammaPoissonDCA(3, alpha=1.0, beta=0.05).with_n_components(5)
    np.testing.assert_allclose(g.beta, np.full(5, 0.05))
    c = ConditionalGammaPoissonDCA(3, rho=0.6).with_n_components(2)
    np.testing.assert_allclose(c.rho, [0.6, 0.6])
    assert c.hyperparameters()["n_components"] == 2


def test_with_n_components_refuses_what_cannot_be_carried():
    with pytest.raises(DataError, match=r"alpha differs between the 3 components \(\[0.1, 0.2, 0.3\]\)"):
        DirichletDCA(3, alpha=[0.1, 0.2, 0.3]).with_n_components(4)
    with pytest.raises(DataError, match=r"n_dims differs between the 2 components \(\[1, 2\]\)"):
        HDDAModel(2, n_dims=[1, 2]).with_n_components(3)
    pattern = np.array([[np.nan, 0.0], [np.nan, np.nan], [0.0, np.nan]])
    fa = FactorAnalysis(2, constraints=LoadingConstraints.fixed(pattern))
    with pytest.raises(DataError, match=r"loading constraints are written for n_components=2"):
        fa.with_n_components(3)
    assert fa.with_n_components(2).constraints is fa.constraints
    with pytest.raises(DataError, match="n_components"):
        PLSA(2).with_n_components(0)
