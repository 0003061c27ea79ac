"""Simulation-based calibration (SBC) of a posterior sampler (Talts, Betancourt, Simpson, Vehtari & Gelman 2018).

Part of the conformance harness (:mod:`latentfs.testing`, which exports :func:`sbc`): a check with a stated
false-alarm rate that a sampler draws from the posterior of the model it is given, over data sets drawn from that
model's prior.

The identity it tests (Talts et al. 2018, "Validating Bayesian inference algorithms with simulation-based
calibration", arXiv:1804.06788, Theorem 1): draw parameters θ̃ ~ p(θ) and data ỹ ~ p(y | θ̃), then L draws
θ_1 … θ_L from p(θ | ỹ), independent given ỹ. For any scalar test quantity f, the rank

    r = #{l : f(θ_l) < f(θ̃)}

is uniform on {0, 1, …, L}, because θ̃ and θ_1 … θ_L are then L + 1 exchangeable draws from p(θ | ỹ). A sampler
that draws from another distribution (a bug, a wrong prior, a chain not yet at its target) leaves a shape in the
histogram of r over N replications: a ∪ (too narrow), a ∩ (too wide), a slope (biased). The ranks here break ties
at random, so quantities with atoms keep the uniform law.

**Independent draws.** MCMC draws are correlated, which alone makes the ranks pile at 0 and L. Talts et al.
(Section 5.1) thin each chain to L draws according to its effective sample size: :func:`sbc` lengthens the chain
(doubling ``num_samples``) until the smallest ESS over the test quantities, bulk and tail (Vehtari et al. 2021, as
:mod:`latentfs.core.convergence` computes them), is at least ``ess_ratio`` × L, then keeps L equally spaced draws
from the end of the chain.

**The uniformity test** is Pearson's χ² on B equal bins of the L + 1 ranks (B divides L + 1), B − 1 degrees of
freedom, one p-value per test quantity. :meth:`SBCResult.check` rejects when any p-value is below
``false_alarm / Q`` (Bonferroni over the Q quantities), so a correct sampler fails it with probability at most
``false_alarm`` (up to the χ² approximation, good when every bin expects at least 5 ranks: N ≥ 5B is required).

**What SBC cannot see.** A "sampler" that ignores the data and returns prior draws passes SBC exactly (its ranks
are uniform too). SBC complements tests against an exact posterior on fixed data (enumeration, conjugate cases);
it does not replace them. Test quantities should depend on the data through the posterior, and be sensitive to
the errors one fears; their power is checked by running the same harness on a sampler known to be wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from latentfs.core.errors import DataError

__all__ = ["SBCResult", "rank_statistics", "rank_uniformity", "sbc", "thin_by_ess"]

#: Expected ranks per bin below which the χ² approximation of the uniformity test is not trusted.
MIN_PER_BIN = 5


# ---------------------------------------------------------------------------------------------- building blocks
def rank_statistics(truth: Any, draws: Any, generator: np.random.Generator) -> np.ndarray:
    """The rank of each true value among its draws: ``#{l : draws[l, q] < truth[q]}`` plus, for ties, a uniform
    share of the tied draws (so a quantity with atoms keeps a uniform rank; Talts et al. 2018, Section 4).

    Parameters
    ----------
    truth : array (Q,)
        The test quantities at the parameters that generated the data.
    draws : array (L, Q)
        The same quantities at L posterior draws.
    generator : numpy.random.Generator
        Breaks ties.

    Returns
    -------
    numpy.ndarray of int, shape (Q,), values in 0 … L.

    Examples
    --------
    >>> rank_statistics([0.5, 2.0], [[0.1, 3.0], [0.7, 1.0], [0.2, 5.0]], np.random.default_rng(0)).tolist()
    [2, 1]
    """
    truth = np.asarray(truth, dtype=np.float64)
    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim != 2 or truth.shape != draws.shape[1:]:
        raise DataError(
            f"rank_statistics needs truth shaped (Q,) and draws shaped (L, Q); got {truth.shape} and {draws.shape}. "
            "Pass one row of draws per kept draw, one column per test quantity."
        )
    below = (draws < truth).sum(0)
    tied = (draws == truth).sum(0)
    return below + generator.integers(0, tied + 1)


def rank_uniformity(ranks: Any, n_draws: int, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Pearson's χ² test that ranks are uniform on {0, …, ``n_draws``}, on ``n_bins`` equal bins.

    Parameters
    ----------
    ranks : int array (N, Q)
        N replications of Q test quantities.
    n_draws : int
        L, the draws each rank was taken among.
    n_bins : int
        B, dividing L + 1; each bin holds (L + 1)/B consecutive ranks.

    Returns
    -------
    (p_values, histogram) : arrays (Q,) and (Q, B)
        The p-value of each quantity (B − 1 degrees of freedom) and its bin counts.

    Examples
    --------
    >>> ranks = np.repeat(np.arange(20), 5)[:, None]  # exactly uniform on 0 … 19
    >>> p, hist = rank_uniformity(ranks, n_draws=19, n_bins=5)
    >>> float(p[0]), hist.tolist()
    (1.0, [[20, 20, 20, 20, 20]])
    """
    from scipy import stats

    ranks = np.asarray(ranks)
    _check_bins(n_draws, n_bins, ranks.shape[0] if ranks.ndim == 2 else 0)
    if ranks.ndim != 2 or ranks.min() < 0 or ranks.max() > n_draws:
        raise DataError(
            f"ranks must be an (N, Q) array of integers in 0 … n_draws={n_draws}; got shape {ranks.shape} with "
            f"values {ranks.min()} … {ranks.max()}. Pass the ranks rank_statistics returned."
        )
    per_bin = (n_draws + 1) // n_bins
    histogram = np.stack([np.bincount(ranks[:, q] // per_bin, minlength=n_bins) for q in range(ranks.shape[1])])
    expected = ranks.shape[0] / n_bins
    chi2 = ((histogram - expected) ** 2 / expected).sum(1)
    return stats.chi2.sf(chi2, n_bins - 1), histogram


def thin_by_ess(values: Any, n_draws: int, ess_ratio: float = 2.0) -> np.ndarray | None:
    """The indices of ``n_draws`` equally spaced draws ending at the last one, or None when the chain is too
    short: when the smallest ESS (bulk or tail, over the quantities) is below ``ess_ratio`` × ``n_draws``.

    Parameters
    ----------
    values : array (S, Q)
        The test quantities along one chain.

    Returns
    -------
    int array (n_draws,) or None

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> thin_by_ess(rng.normal(size=(200, 2)), 19).tolist()[:3]
    [19, 29, 39]
    >>> walk = np.cumsum(rng.normal(size=(200, 1)), axis=0)  # a random walk: ESS far below 38
    >>> thin_by_ess(walk, 19) is None
    True
    """
    from latentfs.core.convergence import ess_bulk, ess_tail

    values = np.asarray(values, dtype=np.float64)
    S = values.shape[0]
    if S < n_draws:
        return None
    ess = min(float(np.min(ess_bulk(values[None]))), float(np.min(ess_tail(values[None]))))
    if not ess >= ess_ratio * n_draws:
        return None
    step = S // n_draws
    return np.asarray(S - 1 - step * np.arange(n_draws)[::-1], dtype=np.int64)


def _check_bins(n_draws: Any, n_bins: Any, n_simulations: int) -> None:
    from latentfs.core.options import check_int

    n_draws = check_int("n_draws", n_draws, low=1, remedy="Pass e.g. n_draws=19.")
    n_bins = check_int("n_bins", n_bins, low=2, remedy="Pass e.g. n_bins=5.")
    if (n_draws + 1) % n_bins:
        raise DataError(
            f"n_bins must divide n_draws + 1 (the number of possible ranks) so that every bin holds as many ranks; "
            f"got n_bins={n_bins} with n_draws={n_draws}. Pass e.g. "
            f"n_draws={n_bins * ((n_draws + 1) // n_bins + 1) - 1}."
        )
    if n_simulations < MIN_PER_BIN * n_bins:
        raise DataError(
            f"the χ² uniformity test needs at least {MIN_PER_BIN} ranks expected per bin, so n_simulations ≥ "
            f"{MIN_PER_BIN}·n_bins = {MIN_PER_BIN * n_bins}; got {n_simulations}. Run more simulations or use "
            "fewer bins."
        )


# ---------------------------------------------------------------------------------------------- the harness
@dataclass(frozen=True)
class SBCResult:
    """What :func:`sbc` measured.

    Attributes
    ----------
    names : tuple of str
        The Q test quantities, in column order.
    ranks : int array (N, Q)
        The rank of each replication's true value among its L thinned draws.
    n_draws, n_bins : int
        L and B.
    p_values : array (Q,)
        χ² p-value of the uniformity of each quantity's ranks (:func:`rank_uniformity`).
    histogram : int array (Q, B)
        Each quantity's ranks in B bins.
    lengths : int array (N,)
        The kept chain length (``num_samples``) each replication needed.
    short : int
        Replications whose chain reached ``max_samples`` with its ESS still below ``ess_ratio`` × L (their draws are
        then thinned to L all the same, and may make the ranks pile at the ends).
    """

    names: tuple[str, ...]
    ranks: np.ndarray
    n_draws: int
    n_bins: int
    p_values: np.ndarray
    histogram: np.ndarray
    lengths: np.ndarray
    short: int

    def rejected(self, false_alarm: float = 1e-3) -> list[str]:
        """The quantities whose p-value is below ``false_alarm / Q`` (Bonferroni): empty for a correct sampler
        with probability at least 1 − ``false_alarm``."""
        level = false_alarm / len(self.names)
        return [n for n, p in zip(self.names, self.p_values, strict=True) if p < level]

    def report(self) -> str:
        """One line per quantity: its p-value and rank histogram."""
        lines = [
            f"SBC: {self.ranks.shape[0]} simulations, L={self.n_draws} draws, {self.n_bins} bins, "
            f"kept chain lengths {self.lengths.min()}…{self.lengths.max()}, {self.short} short of the ESS"
        ]
        width = max(len(n) for n in self.names)
        for name, p, hist in zip(self.names, self.p_values, self.histogram, strict=True):
            lines.append(f"  {name:<{width}}  p = {p:.3g}  bins {hist.tolist()}")
        return "\n".join(lines)

    def check(self, false_alarm: float = 1e-3) -> None:
        """Raise ``AssertionError`` when :meth:`rejected` is not empty (false-alarm rate ``false_alarm``)."""
        bad = self.rejected(false_alarm)
        if bad:
            raise AssertionError(
                f"the ranks of {bad} are not uniform at false-alarm rate {false_alarm:g} (Bonferroni over "
                f"{len(self.names)} quantities: p < {false_alarm / len(self.names):.2g}): the sampler does not draw "
                f"from the posterior of the model that generated the data.\n{self.report()}"
            )


def sbc(
    simulate: Callable[[int], tuple[Mapping[str, Any], Any]],
    sample: Callable[[Any, int, int], Mapping[str, Any]],
    quantities: Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]],
    *,
    n_simulations: int = 100,
    n_draws: int = 19,
    n_bins: int = 5,
    num_samples: int | None = None,
    max_samples: int | None = None,
    ess_ratio: float = 2.0,
    seed: int = 0,
) -> SBCResult:
    """Simulation-based calibration of a sampler over ``n_simulations`` data sets drawn from its model.

    For replication n = 0 … N − 1: ``simulate(n)`` gives the true parameters and the data drawn from them;
    ``sample(data, n, S)`` gives S posterior draws of each parameter from one chain (after its own warm-up);
    ``quantities`` maps parameters to the test quantities; the chain is lengthened (S doubled, from
    ``num_samples`` up to ``max_samples``) until :func:`thin_by_ess` accepts it, thinned to L = ``n_draws``
    draws, and the rank of the truth among them recorded (:func:`rank_statistics`). The ranks' uniformity is
    tested per quantity (:func:`rank_uniformity`).

    Parameters
    ----------
    simulate : callable ``simulate(n) -> (truth, data)``
        ``truth`` maps each parameter's name to its value; ``data`` is passed to ``sample`` as it is.
        Draw both from the model's own generative program, seeded by ``n``.
    sample : callable ``sample(data, n, num_samples) -> draws``
        ``draws`` maps each parameter's name to an array ``(num_samples, *shape)``: one chain's kept draws.
    quantities : callable ``quantities(params) -> {name: array (n,)}``
        ``params`` maps each parameter's name to an array with a leading axis of n draws (n = 1 for the truth).
        Scalar test quantities, each invariant to whatever the sampler cannot identify (component labels).
    n_simulations, n_draws, n_bins : int
        N, L and B (B divides L + 1; N ≥ 5B).
    num_samples, max_samples : int, optional
        The first and the longest chain tried; default 10·L and 64·L.
    ess_ratio : float
        The chain must reach an ESS of ``ess_ratio`` × L on every quantity (bulk and tail).
    seed : int
        Seeds the tie-breaking of ranks.

    Returns
    -------
    SBCResult

    Examples
    --------
    A conjugate normal model, θ ~ N(0, 1) and y ~ N(θ, 1), whose posterior N(y/2, 1/2) is drawn exactly:

    >>> def simulate(n):
    ...     rng = np.random.default_rng(n)
    ...     theta = rng.normal()
    ...     return {"theta": np.array(theta)}, rng.normal(theta)
    >>> def sample(y, n, S):
    ...     return {"theta": np.random.default_rng(10_000 + n).normal(y / 2, np.sqrt(0.5), size=S)}
    >>> result = sbc(simulate, sample, lambda p: {"theta": p["theta"]}, n_simulations=100)
    >>> result.rejected()
    []
    """
    from latentfs.core.options import check_float, check_int

    n_simulations = check_int("n_simulations", n_simulations, low=1, remedy="Pass e.g. n_simulations=100.")
    _check_bins(n_draws, n_bins, n_simulations)
    ess_ratio = check_float("ess_ratio", ess_ratio, 0.0, remedy="Pass e.g. ess_ratio=2.0.")
    first = check_int(
        "num_samples",
        10 * n_draws if num_samples is None else num_samples,
        low=n_draws,
        remedy=f"The chain must hold at least n_draws={n_draws} draws.",
    )
    longest = check_int(
        "max_samples",
        max(64 * n_draws, first) if max_samples is None else max_samples,
        low=first,
        remedy=f"Pass max_samples ≥ num_samples={first}.",
    )
    generator = np.random.default_rng(seed)
    names: tuple[str, ...] | None = None
    ranks, lengths, short = [], [], 0
    for n in range(n_simulations):
        truth, data = simulate(n)
        true_names, true_q = _quantity_table(quantities, {k: np.asarray(v)[None] for k, v in truth.items()}, 1)
        names = true_names if names is None else names
        S = first
        while True:
            draws = sample(data, n, S)
            draw_names, table = _quantity_table(quantities, {k: np.asarray(v) for k, v in draws.items()}, S)
            if true_names != names or draw_names != names:
                raise DataError(
                    f"quantities must return the same names for every call; got {true_names} for the truth and "
                    f"{draw_names} for the draws of replication {n} (first: {names}). Return a dict with fixed keys."
                )
            keep = thin_by_ess(table, n_draws, ess_ratio) if ess_ratio > 0 else _spaced(table, n_draws)
            if keep is not None or S >= longest:
                break
            S = min(2 * S, longest)
        if keep is None:
            short += 1
            keep = _spaced(table, n_draws)
        ranks.append(rank_statistics(true_q[0], table[keep], generator))
        lengths.append(S)
    assert names is not None
    rank_array = np.stack(ranks)
    p_values, histogram = rank_uniformity(rank_array, n_draws, n_bins)
    return SBCResult(names, rank_array, int(n_draws), int(n_bins), p_values, histogram, np.asarray(lengths), short)


def _spaced(values: np.ndarray, n_draws: int) -> np.ndarray:
    step = max(values.shape[0] // n_draws, 1)
    return np.asarray(values.shape[0] - 1 - step * np.arange(n_draws)[::-1], dtype=np.int64)


def _quantity_table(
    quantities: Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]],
    params: Mapping[str, np.ndarray],
    n: int,
) -> tuple[tuple[str, ...], np.ndarray]:
    """The names and the (n, Q) table of the test quantities at ``params`` (n parameter sets)."""
    out = quantities(params)
    names = tuple(out)
    columns = [np.asarray(out[k], dtype=np.float64).reshape(-1) for k in names]
    lengths = [c.shape[0] for c in columns]
    if not names or any(length != n for length in lengths):
        raise DataError(
            f"quantities must return one value per parameter set, (n,) arrays; got lengths {lengths} for "
            f"{list(names)} at n={n} parameter sets. Compute each quantity along the leading axis of the parameters."
        )
    if not all(math.isfinite(float(c.sum())) for c in columns):
        raise DataError(
            f"quantities must be finite; got a NaN or an infinity among {list(names)}. Guard logarithms of zeros "
            "(scipy.special.xlogy) and divisions."
        )
    return names, np.stack(columns, axis=1)
