"""Label switching: one relabelling mechanism for every component-indexed output.

Mixture-like models are invariant to permuting their components, so a sampler's draws carry arbitrary
labels: chains settle on different labelings, and a chain may switch labels between draws. Every summary,
band and diagnostic of a component-indexed site is only meaningful after the draws are relabelled.

:func:`relabel_draws` relabels **each draw** (across and within chains) by Stephens' (2000) relabelling algorithm with a
squared-error loss: starting from a pivot (one draw of the first chain), each draw's components are matched to the pivot
by a minimum-cost assignment (:class:`~latentfs.core.assignment.Assignment`, shortest augmenting paths, started from
each draw's previous matching), the pivot becomes the mean of the relabelled draws, and the two steps repeat until no
permutation changes. (Stephens, "Dealing with label switching in mixture models", JRSS B 62, 2000, Algorithm 2; the ECR
algorithms of Papastamoulis & Iliopoulos 2010 use the same per-draw matching to a pivot.) Memory is O(K² + K·M) per
draw, never K²·M. The permutations are returned so that results record them (DESIGN.md, contract 3);
:func:`apply_draw_permutations` applies them to every site sharing the component dimension.

Chain-level outputs (running means over a chain's draws) cannot be relabelled draw by draw; they take each
chain's modal permutation (:func:`modal_permutations`), and the share of draws that disagree with it is
reported so that a result can warn when such outputs mix labels.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "apply_draw_permutations",
    "component_labels",
    "apply_permutations",
    "matching_permutation",
    "modal_permutations",
    "relabel_draws",
    "relabel_memory",
]


def matching_permutation(reference: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, float]:
    """Permutation ``p`` minimising Σ_k ‖reference[k] − other[p[k]]‖₁ (rows are components).

    Returns ``p`` (so that ``other[p]`` is aligned with ``reference``) and the mean L1 distance per
    component after alignment. Memory is O(K² + K·M): the cost matrix is built one component at a time.

    Examples
    --------
    >>> ref = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> matching_permutation(ref, ref[::-1])[0].tolist()
    [1, 0]
    """
    from scipy.optimize import linear_sum_assignment  # here: scipy.optimize takes ~0.8 s to import

    ref = np.asarray(reference, dtype=np.float64).reshape(reference.shape[0], -1)
    oth = np.asarray(other, dtype=np.float64).reshape(other.shape[0], -1)
    cost = np.empty((ref.shape[0], oth.shape[0]))
    for k in range(ref.shape[0]):
        cost[k] = np.abs(ref[k][None, :] - oth).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(ref.shape[0], dtype=np.int64)
    perm[rows] = cols
    return perm, float(cost[rows, cols].mean())


#: Working memory of one block of draws (their float64 copy and cost matrices): large enough that many small
#: draws share one batched product, small enough that a large draw is handled on its own.
BLOCK_BYTES = 8 * 2**20


def relabel_memory(n_components: int, n_entries: int, n_draws: int = 0, *, block: int = 1, cache: bool = True) -> int:
    """Bytes :func:`relabel_draws` allocates beyond its input.

    The pivot and the sum of its moved rows (2 K·M floats); a block of ``block`` draws in float64 with their
    cost matrices (K·M + K² per draw); and for each of ``n_draws`` draws its squared row norms (K), its matching
    and duals kept for a warm start (4 K) and, with ``cache``, its cross products with the pivot (K²), which let
    later iterations recompute only the pivot rows that moved. O(K² + K·M) per draw, never K²·M.
    """
    k, m, n = int(n_components), int(n_entries), int(n_draws)
    return 8 * (2 * k * m + int(block) * (k * m + k * k) + n * (5 * k + (k * k if cache else 0)))


def _plan(n_components: int, n_entries: int, n_draws: int, budget: float | None) -> tuple[bool, int]:
    """Whether the cross-product cache fits ``budget``, and the block size; a DataError when not even one
    draw at a time fits."""
    from latentfs.core.data import DataError
    from latentfs.core.driver import available_memory

    k, m, n = n_components, n_entries, n_draws
    per_draw = 8 * (k * m + k * k)
    block = max(1, min(n, BLOCK_BYTES // per_draw))
    if budget is None:
        avail = available_memory()
        budget = None if avail is None else avail / 2
    if budget is None:
        return True, block
    need = relabel_memory(k, m, n, cache=False)
    if need > budget:
        raise DataError(
            f"relabelling draws of {k} components × {m} entries needs {need / 2**30:.2f} GiB "
            "(3 K·M + K² floats, and 5 K per draw), over the memory budget of "
            f"{budget / 2**30:.2f} GiB. Align fewer entries (a smaller site, or fewer components), free memory, "
            "pass a larger memory_budget (bytes), or fit with align=False and relabel a subset of the draws yourself."
        )
    cache = relabel_memory(k, m, n) <= budget
    room = budget - relabel_memory(k, m, n, block=0, cache=cache)
    return cache, max(1, min(block, int(room // per_draw)))


def relabel_draws(
    draws: np.ndarray,
    component_axis: int = 0,
    *,
    max_iter: int = 20,
    memory_budget: float | None = None,
) -> tuple[np.ndarray, int]:
    """Per-draw permutations relabelling ``draws`` (chain, draw, *shape) to one labelling.

    ``component_axis`` indexes the component axis within the site shape. Returns ``perms`` of shape
    (chain, draw, K), with ``draws[c, d]`` taken at ``perms[c, d]`` along the component axis being the
    relabelled draw, and the number of pivot iterations used.

    The cost of matching pivot row k to a draw's row j is ‖pivot_k − draw_j‖² = ‖pivot_k‖² + ‖draw_j‖² − 2 pivot_k ·
    draw_j. Each draw's cross products with the pivot (K × K) are kept between iterations, and only the pivot rows that
    moved (a row moves when some draw's match for it changed) are multiplied again: after the first two iterations
    usually a few rows, so a later iteration costs a few rows' products per draw rather than a K × K × M product per
    draw. Each draw's matching and its dual variables are kept too, and a later iteration re-matches only the moved rows
    (:class:`~latentfs.core.assignment.Assignment`; the result is the optimal matching of the new costs, not an
    approximation, at O(moved rows × K²) rather than O(K³)). The permutations are those of recomputing every cost (up to
    the rounding of the products). Draws are taken in blocks of at most :data:`BLOCK_BYTES` (one batched product for
    many small draws; one draw at a time when a draw is large).

    A draw whose rows each have a different cheapest pivot row takes that matching without a solve (it is the
    optimum). The iterations stop when no match changes, or when the matched costs summed over the draws (the
    objective the iterations lower) fell by less than 1e-9 of itself: the matches that still change then trade
    rows no draw tells apart (empty or near-empty components) back and forth.

    Draws kept as count states (:class:`~latentfs.core.count_draws.CountStateDraws`) are matched on each draw's
    E[θ | counts] = (prior + N) / T, never made as a K × M array: its products with the pivot rows, its row norms
    and the pivot's new rows come from the draw's tokens, read word by word (O(non-zero counts × rows) a draw;
    at K = 1,000 that replaces a K × K × M product per draw). The Dirichlet noise of a draw carries no label
    information. Where components are ambiguous (many more components than the data support), the rounding of
    these products can lead the iterations to another labelling of equal quality than the dense products would.

    Working memory beyond the input is :func:`relabel_memory`, checked against ``memory_budget`` (bytes;
    default half the available memory) before anything is allocated: without room for the cache every
    iteration recomputes all products, the blocks shrink to fit, and a :class:`~latentfs.core.data.DataError`
    names the remedy when not even one draw at a time fits.

    Examples
    --------
    >>> a = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> x = np.stack([a, a[::-1], a])[None]        # one chain whose 2nd draw switched labels
    >>> relabel_draws(x)[0][0].tolist()
    [[0, 1], [1, 0], [0, 1]]
    """
    from latentfs.core.assignment import Assignment

    if hasattr(draws, "matching_rows"):  # count states: each draw's E[θ | counts], made block by block
        if component_axis != 0:
            raise ValueError("count-state draws have their components on the site's first axis")
        c, d, k = draws.shape[:3]
        flat = draws.matching_rows()
    else:
        x = np.moveaxis(np.asarray(draws), component_axis + 2, 2)
        c, d, k = x.shape[:3]
        flat = x.reshape(c * d, k, -1)  # a view when the component axis leads the site shape
    n, m = c * d, flat.shape[2]
    cache, block = _plan(k, m, n, memory_budget)
    # count states: products, norms and row sums come from the tokens, no K × J draw
    tokens = hasattr(flat, "products_and_norms")
    cross = np.empty((n, k, k)) if cache else None
    b2 = np.empty((n, k))
    perms = np.tile(np.arange(k), (n, 1))
    solvers = [Assignment(k) for _ in range(n)]  # each draw's matching and duals: a warm start next iteration
    pivot = np.array(flat[d - 1], dtype=np.float64)  # the last draw of chain 0: a labelling the sampler visited
    p2 = np.einsum("km,km->k", pivot, pivot)
    moved = np.arange(k)  # pivot rows that changed since the cross products were computed: all, at first
    spans = [(lo, min(n, lo + block)) for lo in range(0, n, block)]
    it = 0
    previous = np.inf
    for it in range(1, max_iter + 1):
        new = np.empty_like(perms)
        objective = 0.0  # Σ over draws of the matched costs: what the iterations lower (Stephens 2000)
        part = pivot[moved] if moved.size < k and cross is not None else None
        warm = it > 1 and cross is not None
        prepared = flat.prepare(pivot if part is None else part) if tokens else None
        for lo, hi in spans:
            if tokens:
                prod, norms = flat.products_and_norms(pivot if part is None else part, lo, hi, prepared)
                if it == 1:
                    b2[lo:hi] = norms
                if cross is not None:
                    if part is None:
                        cross[lo:hi] = prod
                    else:
                        cross[lo:hi, moved] = prod
                    prod = cross[lo:hi]
            else:
                chunk = np.asarray(flat[lo:hi], dtype=np.float64)
                t_chunk = chunk.transpose(0, 2, 1)
                if it == 1:
                    b2[lo:hi] = np.einsum("nkm,nkm->nk", chunk, chunk)
                if cross is None:
                    prod = np.matmul(pivot, t_chunk)
                else:
                    if part is None:
                        np.matmul(pivot, t_chunk, out=cross[lo:hi])
                    else:
                        cross[lo:hi, moved] = np.matmul(part, t_chunk)
                    prod = cross[lo:hi]
            costs = p2[None, :, None] + b2[lo:hi, None, :] - 2.0 * prod
            for i, cost in enumerate(costs):
                best = cost.argmin(axis=1)
                if np.unique(best).size == k:  # every row's cheapest column differs: that is the optimum
                    new[lo + i] = best
                    solvers[lo + i].set_from_row_minima(cost, best)
                else:
                    # only the moved pivot rows' costs differ from the last iteration's when the products are kept
                    new[lo + i] = solvers[lo + i].solve(cost, changed=moved if warm else None)
                objective += float(cost[np.arange(k), new[lo + i]].sum())
        changed = new != perms
        moved = np.arange(k) if it == 1 else np.flatnonzero(changed.any(axis=0))
        perms = new
        if moved.size == 0 and it > 1:
            break
        if previous - objective <= 1e-9 * abs(objective):
            # the matches still change but no longer lower the objective: they trade rows no draw tells apart
            # (empty or near-empty components), back and forth
            break
        previous = objective
        # The pivot's moved rows are the mean of the rows now matched to them; the others are unchanged.
        if tokens:  # no per-draw memory: one call over every draw
            total = flat.row_sums(perms[:, moved], 0, n)
        else:
            total = np.zeros((moved.size, m))
            for lo, hi in spans:
                total += flat[lo:hi][np.arange(hi - lo)[:, None], perms[lo:hi][:, moved]].sum(0, dtype=np.float64)
        pivot[moved] = total / n
        p2[moved] = np.einsum("km,km->k", pivot[moved], pivot[moved])
    return perms.reshape(c, d, k), it


def apply_draw_permutations(
    site_draws: np.ndarray, perms: np.ndarray, component_axis: int, *, in_place: bool = False
) -> np.ndarray:
    """Permute the component axis (within the site shape) of each draw: ``perms`` is (chain, draw, K).

    Draws whose permutation is the identity are not touched and the others are permuted one draw at a time,
    into one copy (the input is left unchanged) or, with ``in_place`` and a C-contiguous writable array, into
    the input itself. A gather with broadcast index arrays took four to five times the draws' memory (915 MiB
    peak for 190 MiB of Θ draws).
    """
    arr = np.asarray(site_draws)
    c, d, k = perms.shape
    flat_perms = perms.reshape(c * d, k)
    moved = np.flatnonzero((flat_perms != np.arange(k)).any(axis=1))
    if moved.size == 0:
        return arr
    own = in_place and arr.flags.writeable and arr.flags.c_contiguous
    out = arr if own else np.array(arr, copy=True, order="C")
    src = arr.reshape(c * d, *arr.shape[2:])
    dst = out.reshape(c * d, *arr.shape[2:])
    for i in moved:
        dst[i] = np.take(src[i], flat_perms[i], axis=component_axis)
    return out


def modal_permutations(perms: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Each chain's most frequent permutation and the share of its draws that use another one."""
    modes, off = [], []
    for chain in perms:
        uniq, counts = np.unique(chain, axis=0, return_counts=True)
        modes.append(uniq[int(np.argmax(counts))])
        off.append(1.0 - counts.max() / chain.shape[0])
    return modes, np.asarray(off)


def apply_permutations(site_draws: np.ndarray, perms: list[np.ndarray], component_axis: int) -> np.ndarray:
    """Permute the component axis (within the site shape) of each chain by one permutation per chain."""
    out = np.empty_like(site_draws)
    axis = component_axis + 1  # within one chain's (draw, *shape) array
    for c, p in enumerate(perms):
        out[c] = np.take(site_draws[c], p, axis=axis)
    return out


def component_labels(n_components: int) -> list[str]:
    """The one label convention of component-indexed coordinates: ``c0, c1, …`` (every family)."""
    return [f"c{k}" for k in range(int(n_components))]
