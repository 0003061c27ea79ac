"""Rows entirely missing in a Gaussian HMM (issue 31 item 3).

A step whose observation is missing still carries a transition: its emission factor is 1 (log g_k(y_t) = 0
for every k), it is not a row to drop. Exact tier: the forward pass with a missing step equals brute-force
enumeration over all K^T paths with that step's emission left out, and equals the complete-data likelihood
integrated over the missing value by quadrature (an independent route: the engine never sees a NaN there).
The engines (EM, VB, Gibbs), the decoders and the estimator accept such rows.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.hmm import sequence_log_likelihood, state_marginals, viterbi
from latentfs.inference.hmm.estimator import GaussianHMMEstimator
from latentfs.models.hmm import GaussianHMM

PI = np.array([0.6, 0.4])
A = np.array([[0.85, 0.15], [0.25, 0.75]])
MU = np.array([[-1.0, 0.5], [1.5, -0.5]])
SD = np.array([[0.8, 1.2], [1.1, 0.7]])


def _given(mu: np.ndarray = MU, sd: np.ndarray = SD) -> dict[str, np.ndarray]:
    return {"startprob": PI, "transmat": A, "means": mu, "covariance": sd**2}


class _Planted:
    """A stand-in for a fitted result carrying given parameters: the decoders read a result's model name,
    hyperparameters, sites and posterior means only."""

    model = "GaussianHMM"
    sites = ("startprob", "transmat", "means", "covariance")

    def __init__(self, mu: np.ndarray = MU, sd: np.ndarray = SD) -> None:
        self.hyperparameters = GaussianHMM(2).hyperparameters()
        self._given = _given(mu, sd)

    def mean(self, site: str) -> np.ndarray:
        return self._given[site]


def _brute_force(X: np.ndarray, mu: np.ndarray = MU, sd: np.ndarray = SD) -> tuple[float, np.ndarray]:
    """log p(y_observed) and P(z_t = k | y_observed) of one sequence by enumerating every path; a NaN entry
    contributes no factor (integrated out), so an all-NaN row contributes only its transition."""
    t_len, k = X.shape[0], 2
    log_g = np.zeros((t_len, k))
    for t in range(t_len):
        obs = ~np.isnan(X[t])
        for j in range(k):
            log_g[t, j] = stats.norm.logpdf(X[t, obs], mu[j, obs], sd[j, obs]).sum()
    paths = list(itertools.product(range(k), repeat=t_len))
    lps = np.array([
        np.log(PI[p[0]]) + log_g[0, p[0]] + sum(np.log(A[p[t - 1], p[t]]) + log_g[t, p[t]] for t in range(1, t_len))
        for p in paths
    ])
    ll = float(np.logaddexp.reduce(lps))
    w = np.exp(lps - ll)
    gamma = np.zeros((t_len, k))
    for p, wi in zip(paths, w, strict=True):
        gamma[np.arange(t_len), list(p)] += wi
    return ll, gamma


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, list[int]]:
    sim = GaussianHMM(2).simulate(1, 7, 2, params={"startprob": PI, "transmat": A, "means": MU,
                                                   "precision": 1 / SD**2}, seed=4)
    X = sim["data"].copy()
    X[3] = np.nan  # a whole step missing, mid-sequence
    X[5, 1] = np.nan  # one entry missing
    return X, [7]


def test_forward_pass_with_a_missing_step_equals_brute_force(data):
    X, lengths = data
    planted = _Planted()
    ll, gamma = _brute_force(X)
    assert sequence_log_likelihood(planted, X, lengths)[0] == pytest.approx(ll, rel=1e-12)
    np.testing.assert_allclose(state_marginals(planted, X, lengths), gamma, atol=1e-12)
    path = viterbi(planted, X, lengths)
    assert path.shape == (7,)


def test_missing_step_equals_the_complete_likelihood_integrated_over_it():
    """log ∫ p(y_1..y_T) dy_4, by the trapezoid rule over a grid of complete sequences (no NaN reaches the
    engine on that side), equals the forward pass with y_4 missing. One feature; the grid (±14 around the
    means, 4,001 points) leaves a quadrature error far below the tolerance."""
    mu, sd = MU[:, :1], SD[:, :1]
    planted = _Planted(mu, sd)
    y = np.array([[-0.7], [-1.4], [0.2], [0.0], [1.9], [1.2], [-0.3]])
    grid = np.linspace(-15.0, 15.0, 4001)
    batch = np.repeat(y[None], grid.size, axis=0)
    batch[:, 3, 0] = grid
    lls = sequence_log_likelihood(planted, batch.reshape(-1, 1), [7] * grid.size)
    top = lls.max()
    integral = top + np.log(np.trapezoid(np.exp(lls - top), grid))
    gap = y.copy()
    gap[3] = np.nan
    assert sequence_log_likelihood(planted, gap, [7])[0] == pytest.approx(integral, abs=1e-9)
    assert _brute_force(gap, mu, sd)[0] == pytest.approx(integral, abs=1e-9)


@pytest.mark.parametrize("method, options", [
    ("em", {}),
    ("vb", {}),
    ("gibbs", {"num_chains": 2, "num_warmup": 30, "num_samples": 30, "warn": False}),
])
def test_every_engine_accepts_rows_entirely_missing(method, options):
    sim = GaussianHMM(2, mean_precision=0.02).simulate(3, [40, 30, 25], 2, seed=1)
    X = sim["data"].copy()
    X[[0, 10, 11, 45, 94]] = np.nan  # a sequence's first row, two in a row, one mid-sequence, a last row
    res = latentfs.fit(GaussianHMM(2), X, lengths=sim["lengths"], method=method, seed=0, **options)
    for site in ("startprob", "transmat", "means"):
        assert np.isfinite(np.asarray(res.mean(site))).all()
    gamma = state_marginals(res, X, sim["lengths"])
    assert np.isfinite(gamma).all() and np.allclose(gamma.sum(1), 1.0)
    assert viterbi(res, X, sim["lengths"]).shape == (95,)
    if method == "em":
        assert np.isfinite(res.diagnostics["log_likelihood"])
        assert res.diagnostics["log_likelihood"] == pytest.approx(
            sequence_log_likelihood(res, X, sim["lengths"]).sum(), rel=1e-6)


def test_a_missing_row_at_the_ends_gets_the_chain_prior():
    """With every row of a one-step sequence missing its marginal is π; with the first row missing of a
    longer sequence it is the backward-smoothed π (brute force)."""
    sim = GaussianHMM(2).simulate(1, 5, 2, params={"startprob": PI, "transmat": A, "means": MU,
                                                   "precision": 1 / SD**2}, seed=2)
    X = np.vstack([sim["data"], np.full((1, 2), np.nan)])
    X[0] = np.nan
    planted = _Planted()
    gamma = state_marginals(planted, X, [5, 1])
    np.testing.assert_allclose(gamma[5], PI, atol=1e-14)
    np.testing.assert_allclose(gamma[:5], _brute_force(X[:5])[1], atol=1e-12)


def test_every_row_missing_is_refused():
    X = np.full((6, 2), np.nan)
    with pytest.raises(DataError, match="every row of X is entirely missing"):
        latentfs.fit(GaussianHMM(2), X, method="em")


def test_full_covariance_names_diag_as_the_remedy():
    X = np.random.default_rng(0).normal(size=(20, 2))
    X[4] = np.nan
    with pytest.raises(DataError, match="covariance_type='diag'"):
        latentfs.fit(GaussianHMM(2, covariance_type="full"), X, method="em")


def test_estimator_takes_missing_rows_with_the_default_covariance():
    sim = GaussianHMM(2, mean_precision=0.02).simulate(2, 40, 2, seed=3)
    X = sim["data"].copy()
    X[[5, 41]] = np.nan
    X[7, 0] = np.nan
    est = GaussianHMMEstimator(2).fit(X, lengths=sim["lengths"])
    proba = est.predict_proba(X, lengths=sim["lengths"])
    assert np.isfinite(proba).all() and np.allclose(proba.sum(1), 1.0)
    res = latentfs.fit(GaussianHMM(2), X, lengths=sim["lengths"], method="em", seed=0)
    np.testing.assert_allclose(proba, state_marginals(res, X, sim["lengths"]), atol=1e-8)
    # score_samples of a missing row is log 1 = 0 (its predictive density integrates to one)
    assert est.score_samples(X, lengths=sim["lengths"])[[5, 41]] == pytest.approx([0.0, 0.0], abs=1e-12)


def test_gaussian_hmm_and_its_estimator_share_one_covariance_default():
    import inspect

    default = inspect.signature(GaussianHMM).parameters["covariance_type"].default
    assert default == "diag"
    assert GaussianHMMEstimator().covariance_type == default
    assert GaussianHMMEstimator()._make_model().covariance_type == default


def test_score_docstring_says_it_is_a_mean_per_row_not_hmmlearns_total():
    doc = GaussianHMMEstimator.score.__doc__ or ""
    assert "hmmlearn" in doc and "total" in doc
