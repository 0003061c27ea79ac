"""Draws of a (component, feature) site kept as the sampler's count states, not as values.

A collapsed sampler's state is the component of every token; given it, a site whose rows are Dirichlet given counts
(θ_k ~ Dirichlet(prior + N_k), N_kj the tokens of feature j in component k) is a draw away. Keeping a K × J matrix of
floats per kept sweep costs chains × draws × K × J × 8 bytes (9.6 GB for 2 chains × 50 draws at K = 200 on a
60,000-word vocabulary); keeping the assignments costs one byte a token a draw for K ≤ 256 (two for K ≤ 65,536),
whatever K and J. :class:`CountStateDraws` holds, per chain and kept draw, the assignments in the smallest unsigned
type that fits K and the seed its site draw was taken with, and makes on demand:

* a draw: N rebuilt from the assignments (one pass over the tokens), θ ~ Dirichlet(prior + N) from the kept seed
  (:func:`latentfs.core.random.dirichlet_rows`): the same numbers a sampler that kept the draw would have kept;
* E[θ | N] = (prior + N) / row sums, the Rao-Blackwellised value of a draw (what relabelling matches on, read from
  the tokens without making it, and whose average over the draws is the site's posterior mean, :meth:`mean`);
* a subset of entries over all draws (what R̂ and ESS are checked on), one draw at a time.

Relabelling permutes nothing: each draw's permutation is kept and applied as a draw is made. ``np.asarray`` makes
every draw (chain, draw, K, J): the old, large array, for a caller that asked for all of it. Core code knows no family:
the class knows only tokens' features, assignments, a prior per chain and seeds.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["CountStateDraws", "assignment_dtype"]


def assignment_dtype(n_components: int) -> np.dtype:
    """The smallest unsigned integer type holding a component index below ``n_components``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if n_components - 1 <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.int64)


class CountStateDraws:
    """A sampled (component, feature) site kept as count states: ``shape`` (chain, draw, K, J), float64 on demand.

    Parameters
    ----------
    features : int (S,), the feature (word) of every token, in the order of the assignments.
    assignments : (chain, draw, S), each kept draw's component of every token (:func:`assignment_dtype`).
    seeds : int64 (chain, draw), the seed of each draw's θ ~ Dirichlet(prior + N) (``np.random.default_rng``).
    prior : float64 (chain, J), the Dirichlet prior added to every row's counts (a chain's learned γ).
    n_components : K.
    permutations : int64 (chain, draw, K) or None; a draw's row k is the raw draw's row ``permutations[c, d, k]``.
    """

    dtype = np.dtype(np.float64)
    ndim = 4

    def __init__(self, features: np.ndarray, assignments: np.ndarray, seeds: np.ndarray, prior: np.ndarray,
                 n_components: int, permutations: np.ndarray | None = None) -> None:
        self.features = np.ascontiguousarray(features)  # the sampler's own integer type (int32): not copied
        self.assignments = np.asarray(assignments)
        if self.features.dtype.kind not in "iu":
            raise ValueError(f"features must be integers; got {self.features.dtype}")
        self.seeds = np.asarray(seeds, dtype=np.int64)
        self.prior = np.asarray(prior, dtype=np.float64)
        self.n_components = int(n_components)
        if self.assignments.ndim != 3 or self.assignments.dtype.kind not in "iu" or self.prior.ndim != 2:
            raise ValueError(f"assignments must be integers shaped (chain, draw, tokens) and the prior (chain, "
                             f"features); got {self.assignments.dtype} {self.assignments.shape} and {self.prior.shape}")
        c, d, s = self.assignments.shape
        j = self.prior.shape[1]
        if self.seeds.shape != (c, d) or self.prior.shape[0] != c or self.features.shape != (s,):
            raise ValueError(f"count states disagree: assignments {self.assignments.shape}, seeds {self.seeds.shape}, "
                             f"prior {self.prior.shape}, features {self.features.shape}")
        if s and int(self.features.max()) >= j:
            raise ValueError(f"a token's feature {int(self.features.max())} is outside the prior's {j} features")
        if self.assignments.size and (int(self.assignments.max()) >= self.n_components
                                      or int(self.assignments.min()) < 0):
            raise ValueError(f"an assignment is outside the {self.n_components} components")
        self.permutations = None if permutations is None else np.asarray(permutations, dtype=np.int64)
        self.shape = (c, d, self.n_components, j)

    # ------------------------------------------------------------------ sizes
    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        """Bytes held (the assignments, seeds, prior, features and permutations), not the bytes of the values."""
        perms = 0 if self.permutations is None else self.permutations.nbytes
        return int(self.assignments.nbytes + self.seeds.nbytes + self.prior.nbytes + self.features.nbytes + perms)

    def __len__(self) -> int:
        return self.shape[0]

    # ------------------------------------------------------------------ one draw
    def counts(self, c: int, d: int) -> np.ndarray:
        """N (K, J) of chain c's draw d, in the draw's raw labels (int64)."""
        k, j = self.shape[2:]
        flat = self.assignments[c, d].astype(np.int64) * j + self.features
        return np.bincount(flat, minlength=k * j).reshape(k, j)

    def _concentration(self, c: int, d: int, perm: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """prior + N (K, J) of chain c's draw d with its rows in the order ``perm`` (None: raw), and its row sums:
        one compiled pass over the tokens onto the prior (no K × J integer array, no second float array)."""
        k, j = self.shape[2:]
        inverse = np.arange(k) if perm is None else np.argsort(perm)
        out, totals = np.empty((k, j)), np.zeros(k)
        _kernel()(out, self.prior[c], self.assignments[c, d], self.features, inverse, totals)
        return out, totals + self.prior[c].sum()

    def _perm(self, c: int, d: int) -> np.ndarray | None:
        if self.permutations is None:
            return None
        p = self.permutations[c, d]
        return None if (p == np.arange(p.size)).all() else p

    def draw(self, c: int, d: int, *, relabelled: bool = True) -> np.ndarray:
        """θ (K, J) of chain c's draw d: Dirichlet(prior + N) rows from the kept seed; in the relabelled labels
        unless ``relabelled=False``."""
        from latentfs.core.random import dirichlet_rows

        conc = self._concentration(c, d, None)[0]  # raw labels: the rows in the order the seed's draw had them
        theta = dirichlet_rows(conc, np.random.default_rng(int(self.seeds[c, d])))
        p = self._perm(c, d) if relabelled else None
        return theta if p is None else theta[p]

    def conditional_mean(self, c: int, d: int) -> np.ndarray:
        """E[θ | N] (K, J) of chain c's draw d, relabelled: (prior + N) / row sums."""
        conc, totals = self._concentration(c, d, self._perm(c, d))
        conc /= totals[:, None]
        return conc

    def _pairs(self) -> Iterator[tuple[int, int]]:
        c, d = self.shape[:2]
        for i in range(c):
            for t in range(d):
                yield i, t

    # ------------------------------------------------------------------ over draws
    def values_bytes(self) -> int:
        """Bytes of every draw made as float64 values."""
        return int(np.prod(self.shape)) * 8

    def check_values_memory(self, what: str) -> None:
        """A DataError when every draw made as values would take more than half the memory available now
        (:func:`latentfs.core.memory.available_memory`): the caller would otherwise be killed by the operating
        system, losing the fit, rather than told."""
        from latentfs.core import memory
        from latentfs.core.data import DataError

        need = self.values_bytes()
        avail = memory.available_memory()
        if avail is None or need <= avail / 2:
            return
        c, d, k, j = self.shape
        raise DataError(
            f"{what}: making {c * d} draws of this ({k} × {j}) site as float64 values needs {memory._gib(need)} "
            f"({c * d} draws × {k} × {j} × 8 bytes), over half the memory available now ({memory._gib(avail)}); the "
            f"fit keeps them as count states in {memory._gib(self.nbytes)}. Read the draws a block at a time "
            "(result.draw_blocks(site)), or use result.mean(site) (the Rao-Blackwellised mean), result.summary() or "
            "the feature weights, which read them in blocks; or refit with fewer num_samples."
        )

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self.check_values_memory("every draw at once (np.asarray, result.samples, the ArviZ export)")
        out = np.empty(self.shape)
        for c, d in self._pairs():
            out[c, d] = self.draw(c, d)
        return out if dtype is None else out.astype(dtype, copy=False)

    def flat_draws(self, lo: int, hi: int) -> np.ndarray:
        """The draws lo … hi − 1 of the flattened (chain · draw) axis, (hi − lo, K, J), relabelled."""
        d = self.shape[1]
        out = np.empty((max(0, hi - lo), *self.shape[2:]))
        for i, s in enumerate(range(lo, hi)):
            out[i] = self.draw(s // d, s % d)
        return out

    def columns(self, cols: np.ndarray) -> np.ndarray:
        """Every draw's values at the columns ``cols``: (chain, draw, K, len(cols)), one draw made at a time."""
        cols = np.asarray(cols, dtype=np.int64)
        out = np.empty((*self.shape[:3], cols.size))
        for c, d in self._pairs():
            out[c, d] = self.draw(c, d)[:, cols]
        return out

    def mean(self, axis: Any = (0, 1)) -> np.ndarray:
        """The site's posterior mean over chains and draws, Rao-Blackwellised: the average of E[θ | N] over the kept
        count states (an unbiased estimate of E[θ | data] with less variance than the draws' average)."""
        if tuple(np.atleast_1d(axis)) != (0, 1):
            raise ValueError("count-state draws average over (chain, draw) only")
        total = np.zeros(self.shape[2:])
        for c, d in self._pairs():
            total += self.conditional_mean(c, d)
        return total / max(1, self.shape[0] * self.shape[1])

    def entries(self, idx: np.ndarray) -> np.ndarray:
        """The draws' values at the flat entries ``idx`` of the site: (chain, draw, len(idx)), one draw at a time."""
        rows, cols = np.divmod(np.asarray(idx, dtype=np.int64), self.shape[3])
        out = np.empty((*self.shape[:2], rows.size))
        for c, d in self._pairs():
            p = self._perm(c, d)  # relabelled row k is the raw draw's row p[k]: read there, no permuted copy
            out[c, d] = self.draw(c, d, relabelled=False)[rows if p is None else p[rows], cols]
        return out

    def matching_rows(self) -> _MatchingRows:
        """The draws' E[θ | N] as a (chain·draw, K, J) source read in blocks: what relabelling matches."""
        return _MatchingRows(self)

    def permute(self, perms: np.ndarray) -> None:
        """Relabel: draw (c, d)'s row k becomes its current row ``perms[c, d, k]`` (composed with earlier ones)."""
        perms = np.asarray(perms, dtype=np.int64)
        if perms.shape != (*self.shape[:2], self.n_components):
            raise ValueError(f"permutations must be shaped {(*self.shape[:2], self.n_components)}; got {perms.shape}")
        if self.permutations is None:
            self.permutations = perms.copy()
        else:
            self.permutations = np.take_along_axis(self.permutations, perms, axis=-1)

    # ------------------------------------------------------------------ files
    def parts(self) -> dict[str, np.ndarray]:
        """The arrays that make the draws again (:meth:`from_parts`): what a result file keeps."""
        out = {"features": self.features, "assignments": self.assignments, "seeds": self.seeds, "prior": self.prior,
               "n_components": np.asarray(self.n_components, dtype=np.int64)}
        if self.permutations is not None:
            out["permutations"] = self.permutations
        return out

    @classmethod
    def from_parts(cls, parts: dict[str, np.ndarray]) -> CountStateDraws:
        return cls(parts["features"], parts["assignments"], parts["seeds"], parts["prior"],
                   int(parts["n_components"]), parts.get("permutations"))


def _fill(out, prior, assignment, features, inverse, totals):  # pragma: no cover - compiled
    """out[k, j] = prior[j] + the tokens of feature j whose component is relabelled k (row ``inverse[z]``);
    ``totals[k]`` += row k's tokens."""
    n_rows, n_cols = out.shape
    out[:] = 0.0
    for t in range(assignment.size):
        k = inverse[assignment[t]]
        out[k, features[t]] += 1.0
        totals[k] += 1.0
    for k in range(n_rows):  # the prior added once to the whole count: the rounding of prior + N, as numpy's
        for j in range(n_cols):
            out[k, j] += prior[j]


def _pair_counts(acc, part_t, sums, prior, z_sorted, f_sorted, row_of, scratch, touched):  # pragma: no cover
    """For every non-zero count N_rw of one draw (r: the component's relabelled row ``row_of[z]``): acc[r, m] +=
    N_rw · part_t[w, m] (the pivot rows ``part_t`` (J, M) dotted with N; M may be 0), sums[r, 0] += N_rw² and
    sums[r, 1] += prior_w · N_rw. The tokens come word by word (``z_sorted``, ``f_sorted``), so each word's tokens
    are counted per component first (``scratch``: K zeros on entry and on exit; ``touched``: room for K indices)
    and each non-zero N_rw costs M products, whatever its count. Compiled."""
    n_rows = part_t.shape[1]
    i = 0
    n = f_sorted.size
    while i < n:
        w = f_sorted[i]
        n_touched = 0
        while i < n and f_sorted[i] == w:
            r = row_of[z_sorted[i]]
            if scratch[r] == 0:
                touched[n_touched] = r
                n_touched += 1
            scratch[r] += 1
            i += 1
        for a in range(n_touched):
            r = touched[a]
            c = float(scratch[r])
            scratch[r] = 0
            sums[r, 0] += c * c
            sums[r, 1] += prior[w] * c
            for m in range(n_rows):
                acc[r, m] += c * part_t[w, m]


def _row_sums(total, assignment, features, target, inv_totals):  # pragma: no cover - compiled
    """total[target[z_t], w_t] += inv_totals[z_t] for every token whose raw component has a target row (≥ 0)."""
    for t in range(assignment.size):
        k = assignment[t]
        m = target[k]
        if m >= 0:
            total[m, features[t]] += inv_totals[k]


@functools.cache
def _kernels() -> dict[str, Any]:
    import numba

    from latentfs.core.compiled import jit

    return {"fill": jit(numba, _fill), "pair_counts": jit(numba, _pair_counts), "row_sums": jit(numba, _row_sums)}


def _kernel() -> Any:
    return _kernels()["fill"]


class _MatchingRows:
    """A (chain·draw, K, J) view of E[θ | N] per draw, made block by block (:func:`latentfs.core.relabel.
    relabel_draws` reads it like an array: ``rows[i]`` and ``rows[lo:hi]``)."""

    def __init__(self, source: CountStateDraws) -> None:
        self.source = source
        c, d, k, j = source.shape
        self.shape = (c * d, k, j)

    def _one(self, i: int) -> np.ndarray:
        d = self.source.shape[1]
        return self.source.conditional_mean(i // d, i % d)

    # ---------------------------------------------------------------- the matching from the tokens
    # relabel_draws needs, of each draw's E[θ | N] = (prior + N) / T (rows k, T_k = Σ prior + N_k·), only its
    # products with pivot rows, its squared row norms, and sums of chosen rows; each is a pass over the tokens,
    # O(tokens + non-zero counts × rows), with no K × J array: pivot_m · E_k = (pivot_m · prior + Σ_j N_kj pivot_mj)
    # / T_k.
    @functools.cached_property
    def _sorted_features(self) -> tuple[np.ndarray, np.ndarray]:
        """(the tokens' order word by word (stable), their words in that order): a draw's components are read in
        that order, so each word's pivot values are read once per draw."""
        order = np.argsort(self.source.features, kind="stable")
        return order, self.source.features[order]

    def _draw(self, i: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """(chain, assignments, T per raw component, relabelled row of each raw component) of flat draw i."""
        src = self.source
        c, d = divmod(i, src.shape[1])
        z = src.assignments[c, d]
        totals = np.bincount(z, minlength=src.n_components).astype(np.float64) + src.prior[c].sum()
        p = src._perm(c, d)  # relabelled row r is raw row p[r]
        row_of = np.arange(src.n_components) if p is None else np.argsort(p)
        return c, z, totals, row_of

    def prepare(self, part: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """What :meth:`products_and_norms` needs of ``part`` (M, J) for every draw: its transpose (contiguous) and
        its products with each chain's prior. Made once for many calls: at K = 1,000 and J = 60,000 each is a
        K × J pass that used to be repeated for every draw."""
        return np.ascontiguousarray(part.T), [part @ prior for prior in self.source.prior]

    def products_and_norms(
        self, part: np.ndarray, lo: int, hi: int, prepared: tuple[np.ndarray, list[np.ndarray]] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """((hi − lo, M, K): the rows ``part`` (M, J) dotted with each draw's E[θ | N] rows, and (hi − lo, K): the
        squared norms Σ_j E[θ_kj | N]² of those rows; relabelled order), from one pass over each draw's tokens.
        ``prepared``: :meth:`prepare` of ``part``, when the caller made it once for several calls."""
        src = self.source
        order, f_sorted = self._sorted_features
        part_t, part_prior = self.prepare(part) if prepared is None else prepared
        k = src.n_components
        scratch, touched = np.zeros(k, dtype=np.int64), np.empty(k, dtype=np.int64)
        out, norms = np.empty((hi - lo, part.shape[0], k)), np.empty((hi - lo, k))
        for i in range(lo, hi):
            c, z, totals, row_of = self._draw(i)
            acc, sums = np.zeros((k, part.shape[0])), np.zeros((k, 2))
            _kernels()["pair_counts"](acc, part_t, sums, src.prior[c], z[order], f_sorted, row_of, scratch, touched)
            row_totals = totals[np.argsort(row_of)]  # T of each relabelled row
            acc += part_prior[c][None, :]
            out[i - lo] = (acc / row_totals[:, None]).T
            norms[i - lo] = (float(src.prior[c] @ src.prior[c]) + 2.0 * sums[:, 1] + sums[:, 0]) / row_totals**2
        return out, norms

    def products(self, part: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """(hi − lo, M, K): the rows ``part`` (M, J) dotted with each draw's E[θ | N] rows (relabelled order)."""
        return self.products_and_norms(part, lo, hi)[0]

    def sq_norms(self, lo: int, hi: int) -> np.ndarray:
        """(hi − lo, K): Σ_j E[θ_kj | N]² of each draw's rows (relabelled order)."""
        return self.products_and_norms(np.empty((0, self.source.shape[3])), lo, hi)[1]

    def row_sums(self, rows: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """Σ over the draws lo … hi − 1 of E[θ | N] at each draw's rows ``rows[i − lo]`` (relabelled; M distinct rows
        each): (M, J)."""
        src = self.source
        m = rows.shape[1]
        total = np.zeros((m, src.shape[3]))
        weights = np.zeros((src.shape[0], m))  # Σ over a chain's draws of 1 / T of each chosen row: its prior's share
        for i in range(lo, hi):
            c, z, totals, row_of = self._draw(i)
            target = np.full(src.n_components, -1, dtype=np.int64)
            raw = np.argsort(row_of)[rows[i - lo]]  # the raw component of each chosen row
            target[raw] = np.arange(m)
            inv = 1.0 / totals
            _kernels()["row_sums"](total, z, src.features, target, inv)
            weights[c] += inv[raw]
        for c, w in enumerate(weights):  # one M × J pass per chain, not per draw
            if w.any():
                total += w[:, None] * src.prior[c][None, :]
        return total

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            return self._one(int(key) % self.shape[0])
        if isinstance(key, slice):
            ids = range(*key.indices(self.shape[0]))
            return np.stack([self._one(i) for i in ids]) if len(ids) else np.empty((0, *self.shape[1:]))
        raise TypeError(f"rows are read by index or slice; got {type(key).__name__}")
