"""Convergence diagnostics of MCMC draws: rank-normalised split R-hat, bulk and tail ESS, MCSE of the mean.

The quantities are those of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2),
with the conventions of ArviZ 0.23 (``az.rhat(method="rank")``, ``az.ess(method="bulk" | "tail" | "mean")``,
``az.mcse(method="mean")``), so that a latentfs summary and an ArviZ summary print the same numbers. The
functions here import neither ArviZ nor ``scipy.stats`` (together over a second in a fresh process), and work
on every entry of a site at once instead of one entry at a time.

Every function takes draws shaped ``(chain, draw, *site_shape)`` and returns a float64 array shaped
``site_shape``. The steps, for each entry (S = chains × draws values):

* **split**: each chain is cut into its first and second halves, which count as separate chains; with an odd
  number of draws the middle draw belongs to neither;
* **rank-normalise**: the split values are ranked together (ties get their average rank ``r``) and mapped to
  ``z = Φ⁻¹((r − 3/8) / (S + 1/4))`` (Blom's offset; Vehtari et al. 2021, Section 4.1);
* **R-hat** of z-values is ``sqrt((B/W + n − 1) / n)`` with ``n`` draws per split chain, ``B`` ``n`` times the
  variance of the chain means and ``W`` the mean within-chain variance (Gelman et al., BDA3, Section 11.4);
  the reported R-hat is the larger of the bulk R-hat (z-values of the draws) and the tail R-hat (z-values of
  the draws folded about their median, ``|θ − median θ|``);
* **ESS** is ``S / τ``, with ``τ = −1 + 2 Σ ρ̂_t`` summed by Geyer's initial monotone sequence over
  autocorrelations ``ρ̂_t`` combined across chains (BDA3, Section 11.5; Stan Reference Manual, "Effective
  sample size"), and ``τ`` never below ``1 / log10 S``. Bulk ESS applies it to the z-values; tail ESS is the
  smaller of the ESS of the indicators ``θ ≤ q₀.₀₅`` and ``θ ≤ q₀.₉₅`` (quantiles of type 7, over all draws);
  ESS of the mean applies it to the draws themselves.

ArviZ conventions kept, some of them surprising:

* an entry holding NaN anywhere gives NaN for every quantity, and so do fewer than 4 draws per chain;
  R-hat also needs 2 chains (ESS accepts 1, since splitting makes two);
* an entry whose values are all equal has NaN R-hat but an ESS equal to the number of **split** draws
  (chains × 2 × ⌊draws / 2⌋, so 24 and not 28 for 4 chains of 7 draws);
* ESS can exceed the number of draws (antithetic chains), by at most a factor ``log10 S``;
* the larger of bulk and tail R-hat is taken as Python's ``max`` takes it: a NaN bulk R-hat wins, a NaN tail
  R-hat loses; tail ESS takes the smaller the same way round;
* with numba installed (a latentfs dependency), ArviZ computes variances with the one-pass formula
  ``(Σx²/n − (Σx/n)²) · n/(n − 1)`` summed in draw order. R-hat here does the same, bit for bit, because on
  chains that are each constant but differ from each other R-hat is a ratio of two rounding errors (huge,
  infinite or NaN): computed any other way, it would print another number. Elsewhere the inputs are z-values
  or indicators, where the formulas agree to rounding. The standard deviation in :func:`mcse_mean` is
  computed in two passes, as ArviZ does without numba: the one-pass formula loses ``(mean / sd)²``
  units in the last place and returns NaN for some constant entries.

Memory: entries are processed in blocks of about 2**20 values, so that peak memory beyond the input is tens
of megabytes whatever the site's size.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from latentfs.core.errors import DataError

__all__ = ["diagnostics", "ess_bulk", "ess_mean", "ess_tail", "mcse_mean", "rhat"]

# Values (chains × draws × entries) handled per block: small enough for the sort and FFT buffers to stay in
# cache-sized pieces and for peak memory to stay in tens of MB, large enough that per-call overhead vanishes.
_BLOCK_VALUES = 1 << 20
_MIN_DRAWS = 4
# Blom's fractional offset in the rank normalisation (Vehtari et al. 2021, Section 4.1).
_BLOM_OFFSET = 3 / 8
# Entries whose values span less than this are constant for ESS (numpy's float64 resolution, as in ArviZ).
_CONSTANT_SPAN = float(np.finfo(np.float64).resolution)
_TAIL_PROBS = (0.05, 0.95)

_BlockFn = Callable[[np.ndarray], tuple[np.ndarray, ...]]


# ---------------------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------------------


def rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat: the larger of bulk and tail R-hat (Vehtari et al. 2021).

    Equals ``az.rhat(..., method="rank")`` of ArviZ 0.23 entry by entry.

    Parameters
    ----------
    draws : array_like, shape (chain, draw, *site_shape)
        MCMC draws of one site. Integer and boolean draws are read as float64; float32 draws keep their
        precision where ArviZ keeps it (the fold about the median).

    Returns
    -------
    numpy.ndarray, shape site_shape
        R-hat of each entry; NaN where the entry holds NaN, has fewer than 2 chains or 4 draws per chain,
        or is constant.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> mixed = rng.normal(size=(4, 500))
    >>> apart = mixed + np.array([[0.0], [0.0], [3.0], [3.0]])  # two chains sit 3 sd away
    >>> bool(rhat(mixed) < 1.01), bool(rhat(apart) > 1.5)
    (True, True)
    >>> rhat(np.ones((4, 100, 2)))
    array([nan, nan])
    """
    x = _as_draws(draws)
    return _over_blocks(x, _rhat_block, min_chains=2, n_out=1)[0]


def ess_bulk(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size: the ESS of the rank-normalised split draws (Vehtari et al. 2021).

    Equals ``az.ess(..., method="bulk")`` of ArviZ 0.23 entry by entry.

    Parameters
    ----------
    draws : array_like, shape (chain, draw, *site_shape)
        MCMC draws of one site.

    Returns
    -------
    numpy.ndarray, shape site_shape
        Bulk ESS of each entry; NaN where the entry holds NaN or has fewer than 4 draws per chain; the
        number of split draws where the entry is constant.

    Examples
    --------
    >>> ess_bulk(np.ones((4, 7)))  # constant: 4 chains x 2 halves x 3 draws
    array(24.)
    >>> rng = np.random.default_rng(0)
    >>> walk = np.cumsum(rng.normal(size=(4, 1000)), axis=1)  # a random walk mixes slowly
    >>> bool(ess_bulk(walk) < 100 < ess_bulk(rng.normal(size=(4, 1000))))
    True
    """
    x = _as_draws(draws)
    return _over_blocks(x, _ess_bulk_block, min_chains=1, n_out=1)[0]


def ess_tail(draws: np.ndarray) -> np.ndarray:
    """Tail effective sample size: the smaller ESS of the 5% and 95% quantile indicators (Vehtari et al. 2021).

    Equals ``az.ess(..., method="tail")`` of ArviZ 0.23 entry by entry.

    Parameters
    ----------
    draws : array_like, shape (chain, draw, *site_shape)
        MCMC draws of one site.

    Returns
    -------
    numpy.ndarray, shape site_shape
        Tail ESS of each entry; NaN where the entry holds NaN or has fewer than 4 draws per chain.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> tail = ess_tail(rng.normal(size=(4, 1000, 3)))
    >>> tail.shape, bool(np.all((tail > 1000) & (tail < 8000)))
    ((3,), True)
    """
    x = _as_draws(draws)
    return _over_blocks(x, _ess_tail_block, min_chains=1, n_out=1)[0]


def ess_mean(draws: np.ndarray) -> np.ndarray:
    """Effective sample size of the mean: the ESS of the split draws themselves.

    Equals ``az.ess(..., method="mean")`` of ArviZ 0.23 entry by entry (see the module notes on offsets).

    Parameters
    ----------
    draws : array_like, shape (chain, draw, *site_shape)
        MCMC draws of one site.

    Returns
    -------
    numpy.ndarray, shape site_shape
        ESS of the mean of each entry; NaN where the entry holds NaN or has fewer than 4 draws per chain; the
        number of split draws where the entry is constant.

    Examples
    --------
    >>> ess_mean(np.zeros((2, 10, 3)))
    array([20., 20., 20.])
    """
    x = _as_draws(draws)
    return _over_blocks(x, _ess_mean_block, min_chains=1, n_out=1)[0]


def mcse_mean(draws: np.ndarray) -> np.ndarray:
    """Monte Carlo standard error of the posterior mean: ``sd / sqrt(ess_mean)``.

    Equals ``az.mcse(..., method="mean")`` of ArviZ 0.23 entry by entry, with the standard deviation (ddof 1,
    over all chains and draws) computed in two passes and in float64: ArviZ with numba computes it in one pass
    (NaN for some constant entries), without numba in the draws' dtype (float32 draws: about 1e-7 apart).

    Parameters
    ----------
    draws : array_like, shape (chain, draw, *site_shape)
        MCMC draws of one site.

    Returns
    -------
    numpy.ndarray, shape site_shape
        MCSE of the mean of each entry; NaN where the entry holds NaN or has fewer than 4 draws per chain.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> se = mcse_mean(rng.normal(size=(4, 1000)))  # independent draws: about 1 / sqrt(4000)
    >>> bool(0.012 < se < 0.020)
    True
    """
    x = _as_draws(draws)
    return _over_blocks(x, _mcse_mean_block, min_chains=1, n_out=1)[0]


def diagnostics(draws: np.ndarray) -> dict[str, np.ndarray]:
    """R-hat, bulk ESS and tail ESS together, sorting each entry's draws once for all three.

    Parameters
    ----------
    draws : array_like, shape (chain, draw, *site_shape)
        MCMC draws of one site.

    Returns
    -------
    dict of str to numpy.ndarray, each shaped site_shape
        ``"r_hat"``, ``"ess_bulk"`` and ``"ess_tail"`` (the names of ArviZ's summary columns), equal to
        :func:`rhat`, :func:`ess_bulk` and :func:`ess_tail`.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> out = diagnostics(rng.normal(size=(4, 200, 5)))
    >>> sorted(out), out["r_hat"].shape
    (['ess_bulk', 'ess_tail', 'r_hat'], (5,))
    """
    x = _as_draws(draws)
    r_hat, bulk, tail = _over_blocks(x, _diagnostics_block, min_chains=1, n_out=3)
    if x.shape[0] < 2:  # R-hat needs two chains; ESS splits one into two
        r_hat[...] = np.nan
    return {"r_hat": r_hat, "ess_bulk": bulk, "ess_tail": tail}


# ---------------------------------------------------------------------------------------------------------
# Input and blocks
# ---------------------------------------------------------------------------------------------------------


def _as_draws(draws: np.ndarray) -> np.ndarray:
    """Draws as an array of real numbers, unconverted (blocks convert); the one place input is checked."""
    x = np.asarray(draws)
    if x.ndim < 2:
        raise DataError(
            f"draws must have shape (chain, draw, *site_shape); got shape {x.shape}. "
            "For a single chain pass draws[np.newaxis]."
        )
    if x.dtype.kind not in "biuf":
        raise DataError(
            f"draws must hold real numbers; got dtype {x.dtype}. Convert them, for example with draws.real "
            "or draws.astype(float)."
        )
    return x


def _over_blocks(x: np.ndarray, block_fn: _BlockFn, *, min_chains: int, n_out: int) -> tuple[np.ndarray, ...]:
    """Apply ``block_fn`` to blocks of entries laid out (entry, chain, draw); NaN where ArviZ gives up.

    Blocks are float32 for float32 draws (ArviZ folds those about their median in float32) and float64
    otherwise; converting block by block keeps integer or float16 draws from being copied whole.
    """
    n_chain, n_draw = x.shape[:2]
    site_shape = x.shape[2:]
    n_entry = int(np.prod(site_shape, dtype=np.int64))
    outs = tuple(np.full(n_entry, np.nan) for _ in range(n_out))
    if n_chain < min_chains or n_draw < _MIN_DRAWS or n_entry == 0:
        return tuple(out.reshape(site_shape) for out in outs)
    flat = x.reshape(n_chain, n_draw, n_entry)
    step = max(1, _BLOCK_VALUES // (n_chain * n_draw))
    dtype = np.float32 if x.dtype == np.float32 else np.float64
    with np.errstate(all="ignore"):  # NaN and inf results are ArviZ's answers, not accidents
        for start in range(0, n_entry, step):
            block = np.ascontiguousarray(flat[:, :, start : start + step].transpose(2, 0, 1), dtype=dtype)
            has_nan = np.isnan(block).any(axis=(1, 2))
            if has_nan.any():
                block[has_nan] = 0.0  # any finite stand-in: these entries are NaN in the end
            for out, value in zip(outs, block_fn(block), strict=True):
                value[has_nan] = np.nan
                out[start : start + step] = value
    return tuple(out.reshape(site_shape) for out in outs)


def _split_chains(block: np.ndarray) -> np.ndarray:
    """(entry, chain, draw) → (entry, 2·chain, draw // 2): first halves of all chains, then second halves."""
    half = block.shape[2] // 2
    return np.concatenate((block[:, :, :half], block[:, :, block.shape[2] - half :]), axis=1)


# ---------------------------------------------------------------------------------------------------------
# Block functions: (entry, chain, draw) block → per-entry results
# ---------------------------------------------------------------------------------------------------------


def _rhat_block(block: np.ndarray) -> tuple[np.ndarray]:
    split = _split_chains(block)
    z, sorted_split, positions = _bulk_z(split)
    return (_larger_rhat(_rhat_split_z(z), _rhat_folded(sorted_split, positions, split.shape)),)


def _ess_bulk_block(block: np.ndarray) -> tuple[np.ndarray]:
    split = _split_chains(block)
    z, sorted_split, _ = _bulk_z(split)
    return (_ess_of_z(z, sorted_split),)


def _ess_tail_block(block: np.ndarray) -> tuple[np.ndarray]:
    n_entry = block.shape[0]
    sorted_all = np.sort(block.reshape(n_entry, -1), axis=1)
    return (_ess_tail_sorted(block, sorted_all),)


def _ess_mean_block(block: np.ndarray) -> tuple[np.ndarray]:
    split = _split_chains(block).astype(np.float64, copy=False)
    constant = _span(split) < _CONSTANT_SPAN
    # ESS is shift-invariant; centring first keeps the variance of the chain means accurate for draws far
    # from zero (the one-pass formula would lose (mean / sd)² units in the last place).
    centred = split - split.mean(axis=(1, 2), keepdims=True)
    ess = _ess_split(centred)
    ess[constant] = split.shape[1] * split.shape[2]
    return (ess,)


def _mcse_mean_block(block: np.ndarray) -> tuple[np.ndarray]:
    (ess,) = _ess_mean_block(block)
    sd = np.std(block.astype(np.float64, copy=False), axis=(1, 2), ddof=1)
    return (sd / np.sqrt(ess),)


def _diagnostics_block(block: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    split = _split_chains(block)
    z, sorted_split, positions = _bulk_z(split)
    r_hat = _larger_rhat(_rhat_split_z(z), _rhat_folded(sorted_split, positions, split.shape))
    bulk = _ess_of_z(z, sorted_split)
    if split.shape[1] * split.shape[2] == block.shape[1] * block.shape[2]:
        sorted_all = sorted_split  # an even number of draws: the split draws are all the draws
    else:
        sorted_all = np.sort(block.reshape(block.shape[0], -1), axis=1)
    return r_hat, bulk, _ess_tail_sorted(block, sorted_all)


# ---------------------------------------------------------------------------------------------------------
# The quantities
# ---------------------------------------------------------------------------------------------------------


def _rank_normalise(
    values: np.ndarray, positions: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """z-values of each row of ``values`` (entry, value), ranked per row with average ranks for ties.

    ``positions`` gives the flat draw-order position of each value when ``values`` is a permutation of the
    draws (None: ``values`` is in draw order). Returns the z-values in draw order (flat), each row's sorted
    values, and the flat draw-order positions of the sorted values.
    """
    n_entry, n_value = values.shape
    # flat positions of each row's values in ascending order (one gather and one scatter use them)
    ascending = np.argsort(values, axis=1)
    ascending += np.arange(0, n_entry * n_value, n_value)[:, None]
    ascending = ascending.reshape(-1)
    sorted_values = values.reshape(-1)[ascending].reshape(n_entry, n_value)
    # A value at sorted positions first..last (0-based, ties included) has average rank (first + last)/2 + 1,
    # so z depends on first + last only: the 2·n_value − 1 possible z-values are computed once.
    z_of_sum = _z_table(n_value)
    z_sorted = np.empty((n_entry, n_value))
    z_sorted[:] = z_of_sum[::2]  # untied values: first = last = position
    _tie_groups(z_sorted, sorted_values, z_of_sum)
    target = ascending if positions is None else positions[ascending]
    z = np.empty(n_entry * n_value)
    z[target] = z_sorted.reshape(-1)
    return z, sorted_values, target


def _z_table(n_value: int) -> np.ndarray:
    """Φ⁻¹((r − 3/8) / (S − 2·3/8 + 1)) for the average ranks r = 1, 1.5, …, S, indexed by 2r − 2."""
    from scipy.special import ndtri  # scipy.special imports in ~0.1 s; scipy.stats would take ~0.5 s

    rank = 0.5 * (np.arange(2 * n_value - 1) + 2)
    return ndtri((rank - _BLOM_OFFSET) / (n_value - 2 * _BLOM_OFFSET + 1))


def _tie_groups(z_sorted: np.ndarray, sorted_values: np.ndarray, z_of_sum: np.ndarray) -> None:
    """Give every run of equal sorted values the z-value of its average rank (in place, work ∝ ties)."""
    row, pair = np.nonzero(sorted_values[:, 1:] == sorted_values[:, :-1])  # values pair, pair+1 are equal
    if row.size == 0:
        return
    # consecutive equal pairs of one row form one run: values first..last with last = final pair + 1
    starts = np.ones(row.size, dtype=bool)
    starts[1:] = (row[1:] != row[:-1]) | (pair[1:] != pair[:-1] + 1)
    run = np.cumsum(starts) - 1
    ends = np.ones(row.size, dtype=bool)
    ends[:-1] = starts[1:]
    z_run = z_of_sum[pair[starts] + pair[ends] + 1][run]
    z_sorted[row, pair] = z_run
    z_sorted[row, pair + 1] = z_run


def _bulk_z(split: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """z-values of split draws (entry, chain, draw), their sorted values and the draw positions of those."""
    z, sorted_split, positions = _rank_normalise(split.reshape(split.shape[0], -1))
    return z.reshape(split.shape), sorted_split, positions


def _rhat_folded(sorted_split: np.ndarray, positions: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Tail R-hat: R-hat of the z-values of the split draws folded about their median, ``|θ − median θ|``.

    Folding the sorted draws gives a sequence that falls then rises, which sorts faster than the folded
    draws in draw order; ``positions`` carries the ranks back to draw order.
    """
    mid = sorted_split.shape[1] // 2  # chains × 2 × half: always even
    median = (sorted_split[:, mid - 1] + sorted_split[:, mid]) / 2  # in the draws' dtype, as np.median
    folded = np.abs(sorted_split - median[:, None])
    z, _, _ = _rank_normalise(folded, positions)
    tail = _rhat_split_z(z.reshape(shape))
    # an infinite median folds some draws to inf − inf = NaN, and ArviZ then reports a NaN tail R-hat
    tail[~np.isfinite(median)] = np.nan
    return tail


def _rhat_split_z(z: np.ndarray) -> np.ndarray:
    """R-hat of z-values laid out (entry, split chain, draw): sqrt((B/W + n − 1) / n) (BDA3, Section 11.4)."""
    n = z.shape[2]
    chain_mean = z.mean(axis=2)
    # One-pass variances summed in draw order, as ArviZ computes them with numba: W is a difference of two
    # rounding errors when every chain is constant, and only this order reproduces ArviZ's value then.
    in_draw_order = np.ascontiguousarray(np.moveaxis(z, 2, 0))
    total = in_draw_order.sum(axis=0)  # a reduction over the outer axis adds in order
    total_sq = np.square(in_draw_order, out=in_draw_order).sum(axis=0)
    chain_var = _one_pass_variance(total, total_sq, n)
    between = n * _one_pass_variance_rows(chain_mean)  # B
    within = chain_var.mean(axis=1)  # W
    return np.sqrt((between / within + n - 1) / n)


def _one_pass_variance(total: np.ndarray, total_sq: np.ndarray, n: int) -> np.ndarray:
    """(Σx²/n − (Σx/n)²) · n/(n − 1): the unbiased variance in the one-pass form ArviZ uses."""
    return (total_sq / n - (total / n) ** 2) * (n / (n - 1))


def _one_pass_variance_rows(values: np.ndarray) -> np.ndarray:
    """Unbiased one-pass variance of each row of a (row, k) array, summed left to right."""
    columns = np.ascontiguousarray(values.T)
    return _one_pass_variance(columns.sum(axis=0), np.square(columns).sum(axis=0), values.shape[1])


def _larger_rhat(bulk: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """max(bulk, tail) with Python's NaN rule: the tail replaces the bulk only when it compares larger."""
    return np.where(tail > bulk, tail, bulk)


def _ess_of_z(z: np.ndarray, sorted_split: np.ndarray) -> np.ndarray:
    """Bulk ESS from z-values; an entry whose split draws are all tied has ESS = number of split draws."""
    ess = _ess_split(z)
    ess[sorted_split[:, 0] == sorted_split[:, -1]] = z.shape[1] * z.shape[2]
    return ess


def _ess_tail_sorted(block: np.ndarray, sorted_all: np.ndarray) -> np.ndarray:
    """Tail ESS given each entry's sorted draws (entry, chain·draw)."""
    ess = []
    for prob in _TAIL_PROBS:
        quantile = _type7_quantile(sorted_all, prob)
        below = _split_chains(block <= quantile[:, None, None]).astype(np.float64)
        below_count = below.sum(axis=(1, 2))
        constant = (below_count == 0) | (below_count == below.shape[1] * below.shape[2])
        one = _ess_split(below)
        one[constant] = below.shape[1] * below.shape[2]
        ess.append(one)
    low, high = ess
    return np.where(high < low, high, low)  # min(low, high) with Python's NaN rule


def _type7_quantile(sorted_values: np.ndarray, prob: float) -> np.ndarray:
    """Quantile of type 7 (R's default) of each sorted row, with the arithmetic of ``mquantiles(a, p, 1, 1)``.

    The indicator ``draw <= q`` depends on the last bit of ``q`` when q falls on a draw, so the interpolation
    is done in exactly the same floating-point steps as in SciPy.
    """
    n = sorted_values.shape[1]
    offset = 1.0 + prob * (1.0 - 1.0 - 1.0)  # m = alphap + p·(1 − alphap − betap) with alphap = betap = 1
    position = n * prob + offset
    k = int(np.floor(min(max(position, 1), n - 1)))
    gamma = min(max(position - k, 0.0), 1.0)
    low = sorted_values[:, k - 1].astype(np.float64)
    high = sorted_values[:, k].astype(np.float64)
    return (1.0 - gamma) * low + gamma * high


def _ess_split(split: np.ndarray) -> np.ndarray:
    """ESS of split draws (entry, chain, draw), Geyer's initial monotone sequence, vectorised over entries.

    With ρ̂_t the autocorrelation combined across chains (BDA3, Section 11.5), the pair sums
    P_k = ρ̂_2k + ρ̂_2k+1 (ρ̂_0 = 1) are summed while positive and made non-increasing (Geyer 1992); the
    stopping rules below reproduce ArviZ's loop exactly, including its treatment of the last pair.
    """
    n_chain, n = split.shape[1], split.shape[2]
    n_total = n_chain * n
    split = split.astype(np.float64, copy=False)
    chain_mean = split.mean(axis=2)
    # autocovariance of every chain by FFT, zero-padded to a 5-smooth length ≥ 2n, averaged over chains
    # before the inverse transform (linear, so the same as averaging the autocovariances)
    n_fft = _next_regular(2 * n)
    spectrum = np.fft.rfft(split - chain_mean[:, :, None], n=n_fft, axis=2)
    parts = spectrum.view(np.float64)  # real and imaginary parts side by side
    np.square(parts, out=parts)
    summed = parts.sum(axis=1)  # over chains first: the sum of squares over the size-2 axis is slow
    power = (summed[:, ::2] + summed[:, 1::2]) / n_chain  # |F|², averaged over chains
    n_lag = max(2, 2 * _pair_limit(n) + 2)
    acov = np.fft.irfft(power, n=n_fft, axis=1)[:, :n_lag] / n
    mean_var = acov[:, 0] * n / (n - 1.0)  # W: mean within-chain variance
    var_plus = mean_var * (n - 1.0) / n + _one_pass_variance_rows(chain_mean)  # var⁺ (BDA3 eq. 11.3)
    rho = 1.0 - (mean_var[:, None] - acov) / var_plus[:, None]
    rho[:, 0] = 1.0
    tau = _geyer_tau(rho, _pair_limit(n))
    floor = 1 / np.log10(n_total)
    tau = np.where(floor > tau, floor, tau)  # max(tau, floor) with Python's NaN rule
    return n_total / tau


def _pair_limit(n: int) -> int:
    """Pairs of lags the sequence may look at beyond the first: ArviZ stops at lag t with t ≥ n − 3."""
    return max(0, (n - 3) // 2)


def _geyer_tau(rho: np.ndarray, n_pair: int) -> np.ndarray:
    """τ = −1 + 2 Σ_{k<J} P'_k + ρ̂_2J from autocorrelations (entry, lag), ρ̂_0 = 1.

    J counts the leading positive pair sums among P_0 … P_{n_pair−1}; P' is their running minimum
    (the monotone sequence); the even lag 2J after the last pair counts once, when it is positive or its
    pair sum is not negative.
    """
    pair = rho[:, 0 : 2 * n_pair + 1 : 2] + rho[:, 1 : 2 * n_pair + 2 : 2]  # P_0 … P_n_pair
    # J: the index of the first pair sum that is not positive (NaN included), or n_pair
    stops = np.concatenate((~(pair[:, :n_pair] > 0), np.ones((pair.shape[0], 1), dtype=bool)), axis=1)
    n_run = np.argmax(stops, axis=1)
    monotone = np.minimum.accumulate(pair, axis=1)
    kept = np.arange(pair.shape[1]) < n_run[:, None]
    pair_sum = np.where(kept, monotone, 0.0).sum(axis=1)
    rows = np.arange(rho.shape[0])
    last_even = rho[rows, 2 * n_run]
    last_pair = pair[rows, n_run]
    last = np.where((last_even > 0) | (last_pair >= 0), last_even, 0.0)
    tau = -1.0 + 2.0 * pair_sum + last
    tau[np.isnan(rho[:, 1])] = np.nan
    return tau


def _next_regular(target: int) -> int:
    """Smallest 2^a·3^b·5^c ≥ target (the FFT length ArviZ pads to; SciPy's fftpack.next_fast_len)."""
    best = 1 << max(0, target - 1).bit_length()
    power5 = 1
    while power5 < best:
        power35 = power5
        while power35 < best:
            # smallest power of two lifting power35 to the target
            quotient = -(-target // power35)
            candidate = power35 << max(0, quotient - 1).bit_length()
            best = min(best, candidate)
            power35 *= 3
        power5 *= 5
    return best


def _span(split: np.ndarray) -> np.ndarray:
    """max − min of each entry of an (entry, chain, draw) array."""
    return split.max(axis=(1, 2)) - split.min(axis=(1, 2))
