"""Convergence checks and summaries of a :class:`~latentfs.core.results.Posterior` (one R̂ and ESS per entry,
computed once by :mod:`latentfs.core.convergence`), apart from the result type itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from latentfs.core.count_draws import CountStateDraws
from latentfs.core.data import DataError
from latentfs.core.options import check_int

__all__ = ["CHAIN_GAP_SDS", "ESS_PER_CHAIN", "RHAT_MAX"]

# Convergence thresholds (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, "Rank-normalization,
# folding, and localization: an improved R̂", Bayesian Analysis 16): R̂ below 1.01 and bulk and tail ESS of
# at least 100 per chain before the draws are used.
RHAT_MAX = 1.01
ESS_PER_CHAIN = 100
# A chain whose mean log joint is this many within-chain sds below the best chain's sits in another mode.
CHAIN_GAP_SDS = 5.0
# A site of at most this many values (chains × draws × entries) is checked on every entry (latentfs.core.convergence
# takes ~0.07 µs a value: ~0.35 s at the bound). A larger site is checked on _CHECK_ENTRIES entries: the ones with
# the largest posterior means, which are the ones people read (topic words, loadings), plus a regular sample of
# the rest; ``entries_checked`` says so.
_FULL_CHECK_VALUES = 5_000_000
_CHECK_ENTRIES = 2000
# A chain whose two halves agree this well (R̂ of the chain split in two) is stationary: when chains are each
# stationary but disagree, they sit in different modes, and a longer warm-up does not help.
_STATIONARY_RHAT = 1.05


class ConvergenceMixin:
    """:meth:`check_convergence`, :meth:`rhat` and :meth:`summary`, mixed into
    :class:`~latentfs.core.results.Posterior`."""

    def check_convergence(self: Any, sites: Iterable[str] | str | None = None, *, warn: bool = True) -> dict[str, Any]:
        """Rank-normalised split-R̂ and bulk / tail ESS of the sampled sites, after relabelling: one number.

        Computed once per site by :mod:`latentfs.core.convergence` (ArviZ's ``az.rhat(method="rank")`` and
        ``az.ess(method="bulk" | "tail")``, entry for entry) and shared by the warning, ``diagnostics``,
        :meth:`summary` and :meth:`rhat`, so they print what ``az.summary(result.to_inference_data())`` prints.
        Stored in ``diagnostics["convergence"]`` as ``{site: {"r_hat_max", "r_hat_argmax", "ess_bulk_min",
        "ess_tail_min", "entries_checked", "n_entries"}}``. A site of at most 5 million values is checked on
        every entry; a larger one on the 2,000 entries with the largest posterior means plus a regular sample of
        the rest (``entries_checked`` says how many). With ``warn`` a
        :class:`~latentfs.core.driver.ConvergenceWarning` names each site whose R̂ exceeds 1.01 or whose ESS is
        below 100 per chain, with a remedy that fits: when each chain is stationary on its own (its two halves
        agree) but the chains disagree, they sit in different modes and the warning says so, since a longer
        warm-up rarely frees a chain from a mode.
        """
        import warnings

        out: dict[str, Any] = {}
        names = [s for s in self._site_list(sites, self._draws) if s in self._draws]
        for site in names:
            chains, n = self._draws[site].shape[:2]
            conv = self._site_convergence(site)
            idx, rhat = conv["entries"], conv["r_hat"]
            entry: dict[str, Any] = {"entries_checked": int(idx.size), "n_entries": int(conv["n_entries"])}
            finite = np.isfinite(rhat)
            if chains < 2 or not finite.any():
                entry.update(r_hat_max=float("nan"), r_hat_argmax=None, ess_bulk_min=float("nan"),
                             ess_tail_min=float("nan"))
                out[site] = entry
                continue
            worst = int(idx[np.flatnonzero(finite)[np.argmax(rhat[finite])]])
            bulk, tail = conv["ess_bulk"], conv["ess_tail"]
            entry.update(
                r_hat_max=float(np.nanmax(rhat)),
                r_hat_argmax=_entry_name(site, self._draws[site].shape[2:], self.dims.get(site, ()), self.coords,
                                         worst) if self._draws[site].ndim > 2 else site,
                ess_bulk_min=float(np.nanmin(bulk)) if np.isfinite(bulk).any() else float("nan"),
                ess_tail_min=float(np.nanmin(tail)) if np.isfinite(tail).any() else float("nan"),
            )
            out[site] = entry
            if warn:
                problems = []
                if entry["r_hat_max"] > RHAT_MAX:
                    problems.append(f"max R̂ {entry['r_hat_max']:.3f} > {RHAT_MAX} at {entry['r_hat_argmax']}")
                need = ESS_PER_CHAIN * chains
                for key, label in (("ess_bulk_min", "bulk"), ("ess_tail_min", "tail")):
                    if entry[key] < need:
                        problems.append(f"min {label} ESS {entry[key]:.0f} < {need}")
                if problems:
                    from latentfs.core.convergence_warning import ConvergenceWarning  # imports scikit-learn

                    checked = ("" if entry["entries_checked"] == entry["n_entries"] else
                               f"; {entry['entries_checked']} of its {entry['n_entries']} entries checked")
                    if entry["r_hat_max"] > RHAT_MAX and self._chains_stationary(site, idx, rhat):
                        remedy = (
                            "Each chain is stationary on its own (its two halves agree) but the chains disagree: "
                            "they sit in different modes, and a longer warm-up rarely moves a chain out of one. "
                            "Compare the chains (result.samples(site)[c] per chain c), run more chains and keep "
                            "the better ones, or start the sampler from a VB fit (init=...)."
                        )
                    else:
                        remedy = ("Its means and bands are unreliable: raise num_warmup and num_samples, or use more "
                                  "chains.")
                    warnings.warn(
                        f"{self.method} on {self.model}: site {site!r} has not converged ({'; '.join(problems)}, "
                        f"{chains} chains × {n} draws{checked}). {remedy}",
                        ConvergenceWarning,
                        stacklevel=2,
                    )
        modes = self._chain_modes()
        if modes is not None:
            self.diagnostics["chain_modes"] = modes
            if warn and modes["poorer_chains"]:
                from latentfs.core.convergence_warning import ConvergenceWarning  # imports scikit-learn

                pairs = zip(modes["poorer_chains"], modes["gaps"], strict=True)
                gaps = ", ".join(f"chain {c} by {g:.4g}" for c, g in pairs)
                warnings.warn(
                    f"{self.method} on {self.model}: some chains sit in poorer modes than the best chain (mean log "
                    f"joint below it: {gaps}; within-chain sd at most {modes['within_sd']:.3g}). In a latent model "
                    "this usually means a component lost or duplicated, and a longer warm-up rarely frees the chain; "
                    "means over chains mix the modes. Compare the chains (result.trace), run more chains, or refit "
                    "with another seed.",
                    ConvergenceWarning,
                    stacklevel=2,
                )
        self.diagnostics["convergence"] = out
        return out

    def _site_convergence(self: Any, site: str) -> dict[str, Any]:
        """R̂ and bulk / tail ESS of the checked entries of a sampled site, computed once (cached until the draws
        are relabelled): ``{"entries", "n_entries", "r_hat", "ess_bulk", "ess_tail"}``."""
        cached = self._convergence_cache.get(site)
        if cached is not None:
            return cached
        from latentfs.core import convergence

        x = self._draws[site]
        n_entries = int(np.prod(x.shape[2:]))
        if isinstance(x, CountStateDraws):  # count states: the draws made once, only at the checked entries
            idx = (np.arange(n_entries) if x.size <= _FULL_CHECK_VALUES
                   else _entries_to_check(np.abs(x.mean()).reshape(-1)))
            sub = x.entries(idx)
        else:
            flat = x.reshape(x.shape[0], x.shape[1], -1)
            if flat.size <= _FULL_CHECK_VALUES:
                idx = np.arange(n_entries)
                sub = flat
            else:
                idx = _entries_to_check(np.abs(flat.mean(axis=(0, 1))))
                sub = flat[:, :, idx]
        with np.errstate(all="ignore"):
            values = convergence.diagnostics(sub)
        result = {"entries": idx, "n_entries": n_entries, "values": sub, **values}
        self._convergence_cache[site] = result
        return result

    def _chains_stationary(self: Any, site: str, idx: np.ndarray, rhat: np.ndarray, n_worst: int = 50) -> bool:
        """Whether every chain, split into its two halves, agrees with itself (R̂ ≤ 1.05) on the ``n_worst``
        entries with the largest R̂: chains that are each stationary but disagree sit in different modes."""
        from latentfs.core import convergence

        values = self._site_convergence(site)["values"]  # (chain, draw, len(idx)): the checked entries' draws
        half = values.shape[1] // 2
        if half < 4:
            return False
        order = np.argsort(-np.where(np.isfinite(rhat), rhat, -np.inf), kind="stable")[:n_worst]
        cols = values[:, :, order]
        for chain in cols:
            halves = np.stack([chain[:half], chain[chain.shape[0] - half :]])  # (2, half, entries)
            with np.errstate(all="ignore"):
                own = convergence.rhat(halves)
            if np.isfinite(own).any() and float(np.nanmax(own)) > _STATIONARY_RHAT:
                return False
        return True

    def _chain_modes(self: Any) -> dict[str, Any] | None:
        """Chains stuck in separate modes, from the log joint of the kept draws (``sample_stats["lp"]``, or the
        driver's per-step trace after warm-up).

        A chain is "poorer" when its mean log joint is below the best chain's by more than
        ``CHAIN_GAP_SDS`` within-chain standard deviations (the largest over the two chains, and at least
        one nat): chains in one mode differ in mean by a fraction of an sd. Label-free, so it sees what
        relabelling cannot fix (a component lost in one chain and split in two in another). None when
        there is no log joint or fewer than two chains.
        """
        lp = self.sample_stats.get("lp")
        if lp is None:  # the per-step log joint of the driver's trace, after warm-up
            warmup = self.diagnostics.get("num_warmup")
            trace = np.asarray(self.trace, dtype=np.float64) if self.trace is not None else None
            if trace is None or trace.ndim != 2 or not isinstance(warmup, (int, np.integer)):
                return None
            lp = trace[:, int(warmup):]
        lp = np.asarray(lp, dtype=np.float64)
        if lp.ndim != 2 or lp.shape[0] < 2 or lp.shape[1] < 2 or not np.isfinite(lp).all():
            return None
        means, sds = lp.mean(1), lp.std(1, ddof=1)
        best = int(np.argmax(means))
        poorer, gaps = [], []
        for c in range(lp.shape[0]):
            gap = float(means[best] - means[c])
            if c != best and gap > max(CHAIN_GAP_SDS * max(sds[best], sds[c]), 1.0):
                poorer.append(c)
                gaps.append(gap)
        return {"mean_log_joint": means.tolist(), "within_sd": float(sds.max()), "best_chain": best,
                "poorer_chains": poorer, "gaps": gaps}

    # ------------------------------------------------------------------ summaries
    def rhat(self: Any, site: str) -> np.ndarray:
        """Rank-normalised split-R̂ of every entry of a sampled site, after relabelling, shaped as the site: the
        R̂ of :meth:`check_convergence`, :meth:`summary` and ``az.rhat(method="rank")``."""
        self._check_site(site)
        if site not in self._draws:
            raise DataError(f"rhat needs draws from a sampler; site {site!r} comes from {self.method!r}.")
        conv = self._site_convergence(site)
        shape = self._draws[site].shape[2:]
        if conv["entries"].size == conv["n_entries"]:
            return np.asarray(conv["r_hat"]).reshape(shape)
        from latentfs.core import convergence

        with np.errstate(all="ignore"):
            return convergence.rhat(self._draws[site])

    def summary(
        self: Any, sites: Iterable[str] | str | None = None, *, max_entries: int = 200, level: float = 0.9
    ) -> Any:
        """A pandas DataFrame: kind, mean, sd, equal-tailed interval and (for samplers) bulk / tail ESS and
        rank-normalised R̂ per entry, as ``az.summary`` computes them (sd with ddof = 1; the R̂ and ESS of
        :meth:`check_convergence`, computed once).

        A point estimate (``kind == "point"``) has no sd and no interval (NaN): it is not a distribution.

        Sites with more than ``max_entries`` entries are summarised by one row of aggregates (mean of
        the entries' means, min ESS, max R̂ over the entries :meth:`check_convergence` checks) instead of
        row by row.
        """
        import pandas as pd

        max_entries = check_int("max_entries", max_entries, low=1, remedy="Pass e.g. max_entries=200.")

        _check_level(level)
        rows = []
        for site in self._site_list(sites, self.sites):
            shape, (mean, sd, lo, hi) = _entry_moments(self, site, level)
            flat_shape = (shape[0], shape[1], int(np.prod(shape[2:])))
            nan = np.full(flat_shape[2], np.nan)
            rh, bulk, tail = nan, nan, nan
            sampled = site in self._draws
            if sampled:
                conv = self._site_convergence(site)
                if conv["entries"].size == flat_shape[2]:
                    rh, bulk, tail = conv["r_hat"], conv["ess_bulk"], conv["ess_tail"]
            kind = self.kind(site)
            if flat_shape[2] <= max_entries:
                names = _entry_names(site, shape[2:], self.dims.get(site, ()), self.coords)
                for i, name in enumerate(names):
                    rows.append((name, kind, mean[i], sd[i], lo[i], hi[i], bulk[i], tail[i], rh[i]))
            else:
                if sampled:
                    rh, bulk, tail = conv["r_hat"], conv["ess_bulk"], conv["ess_tail"]
                rows.append((f"{site}[{flat_shape[2]} entries]", kind, mean.mean(), sd.mean(), lo.mean(), hi.mean(),
                             _nan_reduce(np.nanmin, bulk), _nan_reduce(np.nanmin, tail), _nan_reduce(np.nanmax, rh)))
        lo_name, hi_name = f"q{(1 - level) / 2 * 100:g}", f"q{(1 + level) / 2 * 100:g}"
        columns = ["entry", "kind", "mean", "sd", lo_name, hi_name, "ess_bulk", "ess_tail", "r_hat"]
        return pd.DataFrame(rows, columns=columns).set_index("entry")


def _moments(flat: np.ndarray, level: float) -> tuple[np.ndarray, ...]:
    """Per entry of ``flat`` (chain, draw, entries): mean, sd (ddof = 1) and the equal-tailed interval; a point
    estimate (one draw) has no spread and no interval (NaN)."""
    mean = flat.mean(axis=(0, 1))
    if flat.shape[0] * flat.shape[1] < 2:
        sd = lo = hi = np.full(flat.shape[2], np.nan)
    else:
        lo, hi = np.quantile(flat, [(1 - level) / 2, (1 + level) / 2], axis=(0, 1))
        sd = flat.std(axis=(0, 1), ddof=1)
    return mean, sd, lo, hi


def _entry_moments(post: Any, site: str, level: float) -> tuple[tuple[int, ...], tuple[np.ndarray, ...]]:
    """(the draws' shape, (mean, sd, lower, upper) per flat entry) of a site for :meth:`ConvergenceMixin.summary`.

    A site kept as count states whose draws, made as values, would take more than an eighth of the memory
    available now is read in blocks of columns of at most that size (every draw made once per block, the block's
    columns kept; np.quantile's copy of a block makes the peak about a quarter of what is available): the same
    numbers per entry in bounded memory, at the price of making the draws again for every block."""
    x = post._draws.get(site)
    if isinstance(x, CountStateDraws):
        from latentfs.core import memory

        avail = memory.available_memory()
        limit = None if avail is None else avail / 8
        if limit is not None and x.values_bytes() > limit:
            c, d, k, j = x.shape
            width = max(1, int(limit // (c * d * k * 8)))  # as wide as allowed: each block makes every draw again
            parts = [np.empty((k, j)) for _ in range(4)]
            for j0 in range(0, j, width):
                cols = np.arange(j0, min(j, j0 + width))
                block = _moments(x.columns(cols).reshape(c, d, -1), level)
                for part, values in zip(parts, block, strict=True):
                    part[:, cols] = values.reshape(k, cols.size)
            return x.shape, tuple(p.reshape(-1) for p in parts)
    values = post.samples(site)
    return values.shape, _moments(values.reshape(values.shape[0], values.shape[1], -1), level)


def _check_level(level: Any) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0 < float(level) < 1:
        raise DataError(f"level must be a number strictly between 0 and 1; got {level!r}. Use e.g. 0.9.")
    return float(level)


def _nan_reduce(fn: Any, values: np.ndarray) -> float:
    """``fn`` (np.nanmin / np.nanmax) of the finite-or-NaN ``values``; NaN when none is finite."""
    return float(fn(values)) if np.isfinite(values).any() else float("nan")


def _largest(values: np.ndarray, h: int) -> np.ndarray:
    """``np.argsort(-values, kind="stable")[:h]`` (the h largest, ties in index order) without sorting them all: a
    partition finds the h-th largest value, and only the values above it are sorted (60M entries: 12 s → 1 s)."""
    if h <= 0:
        return np.empty(0, dtype=np.int64)
    if np.isnan(values).any():  # NaN sorts last in both orders: the full sort places it as before
        return np.argsort(-values, kind="stable")[:h]
    v = values[np.argpartition(values, values.size - h)[values.size - h]]  # the h-th largest value
    above = np.flatnonzero(values > v)
    tied = np.flatnonzero(values == v)
    return np.concatenate([above[np.argsort(-values[above], kind="stable")], tied[: h - above.size]]).astype(np.int64)


def _entries_to_check(means: np.ndarray) -> np.ndarray:
    """Indices of the entries of a sampled site that :meth:`Posterior.check_convergence` checks, from the
    entries' absolute posterior means: all of them when there are few, else the largest posterior means plus a
    regular sample."""
    n = means.size
    if n <= _CHECK_ENTRIES:
        return np.arange(n)
    top = _largest(means, _CHECK_ENTRIES // 2)
    regular = np.linspace(0, n - 1, _CHECK_ENTRIES - top.size).astype(np.int64)
    return np.unique(np.concatenate([top, regular]))


def _axis_labels(shape: tuple[int, ...], dims: tuple[str, ...], coords: dict[str, list[str]]) -> list[list[Any]]:
    """Each axis's labels: its coordinate names where the dimension has them, else the positions."""
    labels = []
    for d, n in zip(dims, shape, strict=False):
        labels.append(coords.get(d, [str(i) for i in range(n)])[:n])
    while len(labels) < len(shape):
        labels.append([str(i) for i in range(shape[len(labels)])])
    return labels


def _entry_name(site: str, shape: tuple[int, ...], dims: tuple[str, ...], coords: dict[str, list[str]],
                index: int) -> str:
    """``_entry_names(...)[index]`` without naming every entry (a K × J site at K = 1,000 and J = 60,000 has 60M)."""
    labels = _axis_labels(shape, dims, coords)
    return f"{site}[{', '.join(str(labels[a][i]) for a, i in enumerate(np.unravel_index(int(index), shape)))}]"


def _entry_names(site: str, shape: tuple[int, ...], dims: tuple[str, ...], coords: dict[str, list[str]]) -> list[str]:
    if not shape:
        return [site]
    labels = _axis_labels(shape, dims, coords)
    idx = np.indices(shape).reshape(len(shape), -1).T
    return [f"{site}[{', '.join(labels[a][i] for a, i in enumerate(row))}]" for row in idx]
