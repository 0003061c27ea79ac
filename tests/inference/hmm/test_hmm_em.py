"""Baum–Welch EM: monotone log-likelihood, agreement with hmmlearn from the same start (peer tier),
decoding functions, restarts and planted-state recovery."""

import numpy as np
import pytest
from hmmlearn import hmm as hmmlearn_hmm
from scipy.optimize import linear_sum_assignment

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.hmm import sequence_log_likelihood, state_marginals, viterbi
from latentfs.models.hmm import CategoricalHMM, GaussianHMM


def _gaussian_data(ct: str, seed: int = 3):
    sim = GaussianHMM(3, covariance_type=ct, mean_precision=0.05).simulate(4, [100, 60, 80, 120], 2, seed=seed)
    return sim["data"], sim["lengths"], sim


def _matched_accuracy(pred: np.ndarray, truth: np.ndarray, k: int) -> float:
    """Share of rows whose state matches the truth under the best relabelling (label-invariant)."""
    table = np.zeros((k, k))
    np.add.at(table, (pred, truth), 1)
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / truth.size)


@pytest.mark.parametrize("model", [GaussianHMM(3), GaussianHMM(3, covariance_type="full"), CategoricalHMM(3)],
                         ids=["diag", "full", "categorical"])
def test_em_log_likelihood_is_monotone(model):
    if isinstance(model, CategoricalHMM):
        sim = CategoricalHMM(3, 5).simulate(5, 60, seed=1)
        X, lens = sim["data"], sim["lengths"]
    else:
        X, lens, _ = _gaussian_data(model.covariance_type)
    res = latentfs.fit(model, X, lengths=lens, n_init=2, seed=0, max_iter=150, warn=False)
    trace = res.trace[0]
    assert trace.size > 3
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:]))


@pytest.mark.parametrize("ct", ["diag", "full"])
def test_gaussian_em_agrees_with_hmmlearn_from_the_same_start(ct):
    X, lens, _ = _gaussian_data(ct)
    first = latentfs.fit(GaussianHMM(3, covariance_type=ct), X, lengths=lens, n_init=1, max_iter=2, warn=False, seed=1)
    start = {k: first.mean(k) for k in ("startprob", "transmat", "means", "covariance")}
    ours = latentfs.fit(
        GaussianHMM(3, covariance_type=ct), X, lengths=lens, init=start, reg_covar=0.0, max_iter=25, tol=0.0, warn=False
    )
    # hmmlearn without its covariance prior and floor is plain maximum likelihood, as ours with reg_covar=0.
    peer = hmmlearn_hmm.GaussianHMM(
        3, covariance_type=ct, init_params="", n_iter=25, tol=-np.inf, covars_prior=0.0, min_covar=0.0
    )
    peer.startprob_, peer.transmat_, peer.means_ = start["startprob"], start["transmat"], start["means"]
    peer.covars_ = start["covariance"]
    peer.fit(X, lens)
    ll = ours.diagnostics["log_likelihood"]
    assert ll == pytest.approx(peer.score(X, lens), rel=1e-6)
    np.testing.assert_allclose(ours.mean("means"), peer.means_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.mean("transmat"), peer.transmat_, rtol=1e-5, atol=1e-6)


def test_categorical_em_agrees_with_hmmlearn_from_the_same_start():
    sim = CategoricalHMM(3, 4).simulate(4, [50, 70, 40, 60], seed=2)
    X, lens = sim["data"], sim["lengths"]
    rng = np.random.default_rng(0)
    start = {
        "startprob": np.full(3, 1 / 3),
        "transmat": rng.dirichlet(np.ones(3) * 5, size=3),
        "emission_probs": rng.dirichlet(np.ones(4) * 5, size=3),
    }
    ours = latentfs.fit(CategoricalHMM(3), X, lengths=lens, init=start, max_iter=30, tol=0.0, warn=False)
    peer = hmmlearn_hmm.CategoricalHMM(3, init_params="", n_iter=30, tol=-np.inf)
    peer.startprob_, peer.transmat_, peer.emissionprob_ = start["startprob"], start["transmat"], start["emission_probs"]
    peer.fit(X[:, None], lens)
    assert ours.diagnostics["log_likelihood"] == pytest.approx(peer.score(X[:, None], lens), rel=1e-6)
    np.testing.assert_allclose(ours.mean("emission_probs"), peer.emissionprob_, rtol=1e-5, atol=1e-7)


def test_state_marginals_and_viterbi_recover_planted_states():
    X, lens, sim = _gaussian_data("diag", seed=7)
    res = latentfs.fit(GaussianHMM(3), X, lengths=lens, seed=0)
    gamma = state_marginals(res, X, lens)
    np.testing.assert_allclose(gamma, res.extras["state_marginals"], atol=1e-12)
    np.testing.assert_allclose(gamma.sum(1), 1.0, atol=1e-12)
    path = viterbi(res, X, lens)
    assert _matched_accuracy(path, sim["states"], 3) > 0.9
    # decoding a list of sequences gives the same as the concatenated array
    parts = np.split(X, np.cumsum(lens)[:-1])
    np.testing.assert_array_equal(viterbi(res, parts), path)
    ll = sequence_log_likelihood(res, X, lens)
    assert ll.shape == (4,) and ll.sum() == pytest.approx(res.diagnostics["log_likelihood"], rel=1e-10)
    _, lp = viterbi(res, X, lens, return_log_prob=True)
    assert np.all(lp <= ll + 1e-9)  # one path never outweighs the sum over all paths


def test_restarts_keep_the_best_run():
    X, lens, _ = _gaussian_data("diag", seed=11)
    res = latentfs.fit(GaussianHMM(4), X, lengths=lens, n_init=4, seed=3, init="random", warn=False)
    lls = res.diagnostics["restart_objectives"]
    assert len(lls) == 4
    assert res.trace[0][-1] == pytest.approx(max(lls), rel=1e-12)


def test_missing_entries_are_handled_by_diagonal_em():
    X, lens, _ = _gaussian_data("diag")
    X = X.copy()
    X[[3, 50, 200], [0, 1, 0]] = np.nan
    res = latentfs.fit(GaussianHMM(3), X, lengths=lens, seed=0)
    assert np.isfinite(res.diagnostics["log_likelihood"])
    assert np.all(np.diff(res.trace[0]) >= -1e-10 * np.abs(res.trace[0][1:]))


def test_em_option_errors():
    X, lens, _ = _gaussian_data("diag")
    with pytest.raises(DataError, match=r"n_init must be an integer ≥ 1; got 0\. Pass n_init=1 or more restarts"):
        latentfs.fit(GaussianHMM(3), X, lengths=lens, n_init=0)
    with pytest.raises(DataError, match=r"max_iter must be an integer ≥ 1; got 0"):
        latentfs.fit(GaussianHMM(3), X, lengths=lens, max_iter=0)
    with pytest.raises(DataError, match=r"tol must be a number ≥ 0; got nan"):
        latentfs.fit(GaussianHMM(3), X, lengths=lens, tol=float("nan"))
    with pytest.raises(DataError, match=r"reg_covar must be a number ≥ 0; got -1\. Pass a small non-negative"):
        latentfs.fit(GaussianHMM(3), X, lengths=lens, reg_covar=-1.0)
    with pytest.raises(DataError, match=r"seed must be an int ≥ 0, .* got 1.5 \(float\)"):
        latentfs.fit(GaussianHMM(3), X, lengths=lens, seed=1.5)
    with pytest.raises(DataError, match=r"init must be one of \['kmeans', 'random'\]"):
        latentfs.fit(GaussianHMM(3), X, lengths=lens, init="kmeans++")
    with pytest.raises(DataError, match=r"init\['transmat'\] must hold probabilities"):
        latentfs.fit(GaussianHMM(3), X, lengths=lens, init={"startprob": np.ones(3) / 3, "transmat": np.ones((3, 3)),
                                                             "means": np.zeros((3, 2)), "covariance": np.ones((3, 2))})
    res = latentfs.fit(GaussianHMM(3), X, lengths=lens, seed=0)
    with pytest.raises(DataError, match=r"X must have the 2 features the model was fitted on; got 1"):
        viterbi(res, X[:, :1], lens)


def test_decoding_accepts_a_single_row_and_constant_columns():
    # found by the estimator work: decoding new data ran the fit-time spread check, so one row (every column
    # constant) was refused as "outside what float64 moments can hold"
    sim = latentfs.GaussianHMM(2).simulate(2, 50, 2, seed=0)
    result = latentfs.fit(latentfs.GaussianHMM(2), sim["data"], lengths=sim["lengths"], seed=0, warn=False)
    one = sim["data"][:1]
    assert latentfs.viterbi(result, one).shape == (1,)
    np.testing.assert_allclose(latentfs.state_marginals(result, one).sum(1), 1.0)
    with pytest.raises(latentfs.DataError, match=r"constant \(zero-variance\) column"):
        latentfs.fit(latentfs.GaussianHMM(2), np.ones((20, 2)), seed=0)  # fitting a constant column still refused
