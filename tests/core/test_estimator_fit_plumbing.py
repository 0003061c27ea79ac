"""The estimators' fit plumbing, written once in LatentEstimator (_fit_rows, _take_posterior) and used by the HMM
estimators' fit with lengths= too: a fitted estimator keeps no training data in posterior_, and n_iter_ is the
same whether the estimator fitted the result or adopted it (Posterior.estimator). Exact tests, fixed seeds."""

from __future__ import annotations

import numpy as np
import pytest

import latentfs
from latentfs.models.hmm import GaussianHMM

QUIET = pytest.mark.filterwarnings("ignore::latentfs.core.driver.ConvergenceWarning")


@QUIET
def test_an_hmm_estimator_keeps_no_training_data_and_its_lengths_reach_the_engine():
    sim = GaussianHMM(2, mean_precision=0.02).simulate(3, 30, seed=1)
    est = latentfs.GaussianHMMEstimator(2, max_iter=20).fit(sim["data"], lengths=sim["lengths"])
    assert est.posterior_.observed is None
    direct = latentfs.fit(
        GaussianHMM(2), sim["data"], method="em", seed=0, max_iter=20, lengths=sim["lengths"], warn=False
    )
    np.testing.assert_array_equal(
        est.transmat_, direct.mean("transmat") / direct.mean("transmat").sum(-1, keepdims=True)
    )
    assert est.n_iter_ == max(1, int(direct.diagnostics["n_iter"]))


@QUIET
@pytest.mark.parametrize(
    "make, data",
    [
        (
            lambda: latentfs.GaussianMixtureClusterer(2, max_iter=30),
            lambda: latentfs.GaussianMixture(2).simulate(60, 2, seed=0)["data"],
        ),
        (
            lambda: latentfs.DCA(2, max_iter=20),
            lambda: latentfs.DirichletDCA(2).simulate(20, 8, doc_length=30, seed=0)["counts"],
        ),
    ],
    ids=["mixture", "dca"],
)
def test_fitted_and_adopted_estimators_agree_on_n_iter(make, data):
    X = data()
    est = make().fit(X)
    assert est.posterior_.observed is None
    adopted = est.posterior_.estimator()
    assert adopted.n_iter_ == est.n_iter_ >= 1
    np.testing.assert_array_equal(adopted.components_, est.components_)
