"""The simulation-based calibration harness :mod:`latentfs.testing.calibration` on a conjugate normal model, whose posterior is
known: θ ~ N(0, 1), y ~ N(θ, 1), so θ | y ~ N(y/2, 1/2).

Each sampler below draws from that posterior exactly at stationarity; one of them is an AR(1) chain, correct in
distribution but with correlated draws, which is what the harness's ESS thinning is for.
"""

from __future__ import annotations

import numpy as np
import pytest

from latentfs.core.errors import DataError
from latentfs.testing.calibration import rank_statistics, rank_uniformity, sbc, thin_by_ess

POST_SD = np.sqrt(0.5)


def simulate(n):
    rng = np.random.default_rng([7, n])
    theta = rng.normal()
    return {"theta": np.array(theta)}, rng.normal(theta)


def identity(params):
    return {"theta": params["theta"], "theta_squared": params["theta"] ** 2}


def exact(y, n, S):
    return {"theta": np.random.default_rng([8, n, S]).normal(y / 2, POST_SD, size=S)}


def ar1(rho, shift=0.0):
    """A chain started at stationarity whose every step keeps N(y/2 + shift, 1/2) invariant; lag-1 correlation
    ``rho``."""

    def sample(y, n, S):
        rng = np.random.default_rng([9, n, S])
        mean, x = y / 2 + shift, np.empty(S)
        x[0] = rng.normal(mean, POST_SD)
        for t in range(1, S):
            x[t] = mean + rho * (x[t - 1] - mean) + np.sqrt(1 - rho**2) * POST_SD * rng.normal()
        return {"theta": x}

    return sample


def test_exact_sampler_passes_and_the_result_is_reproducible():
    """False-alarm rate 1e-3 (Bonferroni over the 2 quantities), up to the χ² approximation."""
    a = sbc(simulate, exact, identity, n_simulations=200, n_draws=19, n_bins=10)
    b = sbc(simulate, exact, identity, n_simulations=200, n_draws=19, n_bins=10)
    assert a.names == ("theta", "theta_squared")
    assert a.ranks.shape == (200, 2) and a.ranks.min() >= 0 and a.ranks.max() <= 19
    assert a.histogram.sum(1).tolist() == [200, 200]
    assert a.rejected(1e-3) == [] and a.short == 0
    np.testing.assert_array_equal(a.ranks, b.ranks)
    a.check(1e-3)


def test_correlated_draws_fail_unthinned_and_pass_thinned_by_their_ess():
    """An AR(1) chain with lag-1 correlation 0.95 (integrated autocorrelation time 39) targets the posterior, but 19
    consecutive draws are nearly one: the truth falls outside them and the ranks pile at 0 and 19 (rejected at
    false-alarm rate 1e-3; measured p = 1e-49). Lengthened until its ESS is 2 × 19 and thinned, it passes
    (false-alarm rate 1e-3)."""
    unthinned = sbc(
        simulate, ar1(0.95), identity, n_simulations=200, n_draws=19, n_bins=10, ess_ratio=0, num_samples=19
    )
    assert "theta" in unthinned.rejected(1e-3)
    ends = unthinned.histogram[0, [0, -1]].sum()
    assert ends > 0.5 * 200, unthinned.report()  # a ∪, not a slope: uniform ranks put 20 % there
    thinned = sbc(simulate, ar1(0.95), identity, n_simulations=200, n_draws=19, n_bins=10, max_samples=19 * 256)
    assert thinned.short == 0 and thinned.lengths.min() > 19 * 10  # the chains were lengthened
    thinned.check(1e-3)


def test_a_biased_sampler_is_rejected():
    """A posterior shifted by one standard deviation: rejected at false-alarm rate 1e-3 (measured p = 2e-29)."""
    result = sbc(simulate, ar1(0.0, shift=POST_SD), identity, n_simulations=200, n_draws=19, n_bins=10)
    assert "theta" in result.rejected(1e-3)
    with pytest.raises(AssertionError, match=r"the ranks of \['theta'.*are not uniform at false-alarm rate 0.001"):
        result.check(1e-3)


def test_a_chain_that_never_reaches_its_ess_is_counted_short():
    def drifting(y, n, S):  # a chain still on its way: its ESS stays near 1 however long it runs
        return {"theta": y / 2 + np.linspace(-1.0, 1.0, S)}

    result = sbc(simulate, drifting, identity, n_simulations=50, n_draws=9, n_bins=5, max_samples=200)
    assert result.short == 50 and result.lengths.max() == 200
    assert "50 short of the ESS" in result.report()


def test_ties_get_uniform_ranks(rng):
    """All L draws equal to the truth: the rank is uniform on 0 … L (χ², false-alarm rate 1e-4)."""
    ranks = np.stack([rank_statistics([1.0], np.ones((9, 1)), rng) for _ in range(2000)])
    p, hist = rank_uniformity(ranks, n_draws=9, n_bins=10)
    assert p[0] > 1e-4, hist
    assert rank_statistics([2.0, 0.0], np.array([[1.0, 1.0], [3.0, 1.0]]), rng).tolist() == [1, 0]


def test_thin_by_ess_keeps_equally_spaced_draws_ending_at_the_last():
    values = np.random.default_rng(3).normal(size=(95, 1))
    assert thin_by_ess(values, 9).tolist() == list(range(94 - 10 * 8, 95, 10))
    assert thin_by_ess(values[:5], 9) is None  # fewer draws than asked for


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"n_draws": 19, "n_bins": 7},
            r"n_bins must divide n_draws \+ 1 .* got n_bins=7 with n_draws=19\. Pass e\.g\. "
            r"n_draws=20",
        ),
        ({"n_simulations": 20, "n_bins": 5}, r"n_simulations ≥ 5·n_bins = 25; got 20\. Run more simulations"),
        ({"n_draws": 0}, r"n_draws must be an integer ≥ 1; got 0"),
        ({"num_samples": 5}, r"num_samples must be an integer ≥ 19; got 5\. The chain must hold at least n_draws=19"),
        ({"num_samples": 100, "max_samples": 50}, r"max_samples must be an integer ≥ 100; got 50"),
        ({"ess_ratio": -1.0}, r"ess_ratio must be a number ≥ 0; got -1\. Pass e\.g\. ess_ratio=2\.0"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(DataError, match=match):
        sbc(simulate, exact, identity, **{"n_simulations": 100, **kwargs})


def test_bad_quantities_are_refused():
    with pytest.raises(
        DataError,
        match=r"quantities must return one value per parameter set, \(n,\) arrays; got "
        r"lengths \[1\] for \['mean'\] at n=190 parameter sets",
    ):
        sbc(simulate, exact, lambda p: {"mean": np.atleast_1d(p["theta"].mean())}, n_simulations=25, n_bins=5)
    with pytest.raises(DataError, match=r"got lengths \[1, 2\] for \['a', 'b'\] at n=1 parameter sets"):
        sbc(simulate, exact, lambda p: {"a": p["theta"], "b": np.zeros(2)}, n_simulations=25, n_bins=5)
    with pytest.raises(DataError, match=r"quantities must be finite; got a NaN or an infinity among \['log'\]"):
        sbc(simulate, exact, lambda p: {"log": np.full(p["theta"].shape, -np.inf)}, n_simulations=25, n_bins=5)
    renamed = iter(range(10**6))
    with pytest.raises(
        DataError,
        match=r"quantities must return the same names for every call; got \('q0',\) for "
        r"the truth and \('q1',\) for the draws of replication 0",
    ):
        sbc(simulate, exact, lambda p: {f"q{next(renamed)}": p["theta"]}, n_simulations=25, n_bins=5)
    with pytest.raises(
        DataError,
        match=r"rank_statistics needs truth shaped \(Q,\) and draws shaped \(L, Q\); got "
        r"\(2,\) and \(5, 3\)",
    ):
        rank_statistics(np.zeros(2), np.zeros((5, 3)), np.random.default_rng(0))
    with pytest.raises(
        DataError,
        match=r"ranks must be an \(N, Q\) array of integers in 0 … n_draws=9; got shape "
        r"\(50, 1\) with values 0 … 10",
    ):
        rank_uniformity(np.append(np.zeros(49, int), 10)[:, None], n_draws=9, n_bins=5)
