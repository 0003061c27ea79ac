"""scikit-learn's GaussianMixture attributes on the mixture estimators (issue 34, item 4): ``means_``,
``covariances_``, ``weights_``, ``converged_``, ``n_iter_``, ``bic(X)``, ``aic(X)`` with scikit-learn's meanings.

The criteria are checked exactly against scikit-learn: a ``sklearn.mixture.GaussianMixture`` is given *our* fitted
parameters (weights, means, covariances and their precision Cholesky factors, as its own fit would set them) and
its ``bic``/``aic`` on new rows must equal ours.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.mixture import GaussianMixture as SkGaussianMixture
from sklearn.mixture._gaussian_mixture import _compute_precision_cholesky

import latentfs
from latentfs.core.driver import ConvergenceWarning
from latentfs.inference.mixture.estimator import (
    GaussianMixtureClusterer,
    LatentClassClusterer,
    LatentProfileClusterer,
)
from latentfs.models.mixture import GaussianMixture

X = GaussianMixture(3, mean_precision=0.02).simulate(200, 3, seed=1)["data"]
X_NEW = GaussianMixture(3, mean_precision=0.02).simulate(60, 3, seed=2)["data"]

SHAPES = {"full": (3, 3, 3), "diag": (3, 3), "spherical": (3,), "tied": (3, 3)}


def _sklearn_with(est: GaussianMixtureClusterer, covariance_type: str) -> SkGaussianMixture:
    sk = SkGaussianMixture(est.n_components, covariance_type=covariance_type)
    sk.weights_, sk.means_, sk.covariances_ = est.weights_, est.means_, est.covariances_
    sk.precisions_cholesky_ = _compute_precision_cholesky(est.covariances_, covariance_type)
    sk.converged_, sk.n_iter_, sk.lower_bound_ = True, 1, 0.0
    return sk


@pytest.mark.parametrize("covariance_type", sorted(SHAPES))
@pytest.mark.parametrize("method", ["em", "vb"])
def test_bic_aic_and_parameters_are_scikit_learns(covariance_type, method):
    est = GaussianMixtureClusterer(3, covariance_type=covariance_type, method=method).fit(X)
    assert est.means_.shape == (3, 3) and est.covariances_.shape == SHAPES[covariance_type]
    assert est.weights_.shape == (3,) and np.isclose(est.weights_.sum(), 1.0)
    assert est.converged_ is True and isinstance(est.n_iter_, int) and est.n_iter_ >= 1
    assert est.n_iter_ == est.posterior_.diagnostics["n_iter"]
    sk = _sklearn_with(est, covariance_type)
    np.testing.assert_allclose(sk.score_samples(X_NEW), est.score_samples(X_NEW), rtol=1e-10)
    np.testing.assert_allclose(est.bic(X_NEW), sk.bic(X_NEW), rtol=1e-10)
    np.testing.assert_allclose(est.aic(X_NEW), sk.aic(X_NEW), rtol=1e-10)
    assert est._n_parameters() == sk._n_parameters() == est.posterior_.diagnostics["n_parameters"]


def test_tied_diag_and_latent_profile_count_one_shared_diagonal():
    est = LatentProfileClusterer(3).fit(X)  # variance="shared": the tied_diag covariance
    assert est.covariances_.shape == (3,) and est.means_.shape == (3, 3)
    loglik = est.score_samples(X_NEW).sum()
    p = 2 + 3 * 3 + 3  # weights, means, one variance per feature
    assert est._n_parameters() == p
    np.testing.assert_allclose(est.bic(X_NEW), -2 * loglik + p * np.log(len(X_NEW)), rtol=1e-12)
    np.testing.assert_allclose(est.aic(X_NEW), -2 * loglik + 2 * p, rtol=1e-12)


def test_latent_class_has_criteria_and_no_gaussian_parameters():
    Y = latentfs.LatentClass(2).simulate(300, 6, seed=0)["items"]
    est = LatentClassClusterer(2).fit(Y)
    assert not hasattr(est, "means_") and not hasattr(est, "covariances_")
    p = 1 + 2 * 6  # Goodman (1974): (K-1) + K * sum_i (S_i - 1), binary items
    np.testing.assert_allclose(est.bic(Y), -2 * est.score_samples(Y).sum() + p * np.log(len(Y)), rtol=1e-12)
    assert est.converged_ is True


def test_converged_is_false_when_the_optimiser_stops_early():
    with pytest.warns(ConvergenceWarning):
        est = GaussianMixtureClusterer(3, max_iter=1, tol=1e-12).fit(X)
    assert est.converged_ is False and est.n_iter_ == 1


def test_gibbs_converged_follows_the_rhat_ess_rule():
    est = GaussianMixtureClusterer(3, method="gibbs", num_warmup=200, num_samples=400, seed=0).fit(X)
    assert est.n_iter_ == 600  # sweeps per chain, warm-up included
    assert est.converged_ is (est.posterior_._convergence_status()[0] == "converged")


def test_bic_chooses_the_planted_number_of_components():
    # three well-separated planted components: BIC is lowest at K = 3 (the fit is deterministic given the seed)
    bics = {k: GaussianMixtureClusterer(k).fit(X).bic(X) for k in (1, 2, 3, 4, 5)}
    assert min(bics, key=bics.get) == 3


def test_default_is_one_start_as_scikit_learn():
    est = GaussianMixtureClusterer(3)
    assert est.n_init == 1 and SkGaussianMixture().n_init == 1
    assert len(est.fit(X).posterior_.diagnostics.get("restart_objectives", [None])) == 1
    many = GaussianMixtureClusterer(3, n_init="auto").fit(X).posterior_.diagnostics
    assert len(many["restart_objectives"]) == 10  # latentfs.fit's rule at this size, still one argument away


def test_attributes_survive_save_and_load(tmp_path):
    est = GaussianMixtureClusterer(3).fit(X)
    back = GaussianMixtureClusterer.load(est.save(tmp_path / "gm"))
    for name in ("means_", "covariances_", "weights_"):
        np.testing.assert_array_equal(getattr(back, name), getattr(est, name))
    assert back.converged_ is est.converged_ and back.n_iter_ == est.n_iter_
    assert back.bic(X_NEW) == est.bic(X_NEW)
