"""Compiled (numba) document updates of DCA mean-field VB on the CPU; the math is in :mod:`.vb`.

One kernel, :func:`_doc_updates`, runs a block of documents through their shape updates (eq. 14 / 17 of
Buntine & Jakulin 2006) with Θ fixed, one document at a time: for each document the rates Z_j at its
non-zeros, the ratios w_j / Z_j, the new shapes and, on request, its bound's Σ_j w_j log Z_j and its share
of the Θ statistics S_jk = θ_jk Σ_i (w_ij / Z_ij) exp E[log latent_ik]. The torch formulation in
:mod:`.vb` makes three sparse passes per update (a sampled matmul for Z, a sparse matmul for the shapes and
one for S); here each non-zero's row of exp E[log θ] is read once per update and reused while it is in
cache, and a document can stop as soon as its own shapes have converged (``tol``), as scikit-learn's and
gensim's E-steps do, instead of iterating every document until the slowest one has.

The result equals the torch formulation up to the order of floating-point sums (the kernels may reorder
the K-term sums to vectorise them: ``fastmath`` with reassociation and contraction only, so NaN and
infinity still propagate to the driver's divergence check). Documents are independent given Θ, so the
threaded form (``n_threads`` blocks of documents of about equal non-zero counts, each with its own S,
summed in block order afterwards) makes no approximation.

Kernels are compiled on first use and cached on disk (:func:`~.collapsed_kernels._jit`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from latentfs.inference.dca.collapsed_kernels import _digamma, _jit

__all__ = ["doc_updates", "vb_kernels"]

#: ``bound_at`` / ``stats_at`` codes of :func:`_doc_updates`
NONE, FIRST, LAST, FINAL = -1, 0, 1, 2

_DG: Any = _digamma  # rebound to the compiled ψ by vb_kernels()


def _expected_doc(a, log_rate, dirichlet, out):  # pragma: no cover
    """exp E[log latent_k]: exp(ψ(a_k) − ψ(Σa)) (DM) or exp(ψ(a_k) − log b_k) (GaP), into ``out``."""
    K = a.shape[0]
    if dirichlet:
        s = 0.0
        for k in range(K):
            s += a[k]
        shift = _DG(s)
        for k in range(K):
            out[k] = math.exp(_DG(a[k]) - shift)
    else:
        for k in range(K):
            out[k] = math.exp(_DG(a[k]) - log_rate[k])


_EXPECTED: Any = _expected_doc  # rebound to the compiled function by vb_kernels()


def _nonzeros_pass(start, stop, col, val, exp_theta_t, ed, acc, want_acc, want_bound, want_stats,
                   stats):  # pragma: no cover
    """One pass over the non-zeros ``start`` ≤ t < ``stop`` of a document whose exp E[log latent] is ``ed``:
    the rate Z_j = Σ_k ed_k θ_jk at each, then (as asked) acc_k += (w_j / Z_j) θ_jk, stats_jk += (w_j / Z_j)
    ed_k; returns Σ_j w_j log Z_j when ``want_bound`` (else 0)."""
    K = ed.shape[0]
    wl = 0.0
    for t in range(start, stop):
        j = col[t]
        z = 0.0
        for k in range(K):
            z += ed[k] * exp_theta_t[j, k]
        r = val[t] / z
        if want_bound:
            wl += val[t] * math.log(z)
        if want_acc:
            for k in range(K):
                acc[k] += r * exp_theta_t[j, k]
        if want_stats:
            for k in range(K):
                stats[j, k] += r * ed[k]
    return wl


_PASS: Any = _nonzeros_pass  # rebound to the compiled function by vb_kernels()


def _doc_updates(lo, hi, crow, col, val, exp_theta_t, alpha, log_rate, dirichlet, a_in, max_updates, tol,
                 bound_at, stats_at, a_out, a_bound, words, stats, n_updates):  # pragma: no cover
    """Documents ``lo`` ≤ i < ``hi``: up to ``max_updates`` shape updates each, with Θ fixed.

    ``exp_theta_t`` (J, K) is exp E[log θ] transposed (row j is word j's K values). A document stops early
    when ``tol`` > 0 and no shape moved by more than ``tol`` relative in its last update. ``bound_at``:
    FIRST / LAST record Σ_j w_j log Z_j at the input of the first / last of a fixed number of updates (and
    the shapes it was computed at, in ``a_bound``), FINAL at the final shapes (an extra pass), NONE not at
    all. ``stats_at``: LAST adds the last update's responsibilities to ``stats`` (J, K; times θ by the
    caller), FINAL those at the final shapes, NONE nothing.
    """
    K = a_in.shape[1]
    ed = np.empty(K, dtype=a_in.dtype)
    acc = np.empty(K, dtype=a_in.dtype)
    a = np.empty(K, dtype=a_in.dtype)
    for i in range(lo, hi):
        for k in range(K):
            a[k] = a_in[i, k]
        done = 0
        for it in range(max_updates):
            _EXPECTED(a, log_rate, dirichlet, ed)
            last = tol <= 0 and it == max_updates - 1
            want_bound = (bound_at == FIRST and it == 0) or (bound_at == LAST and last)
            want_stats = stats_at == LAST and last
            for k in range(K):
                acc[k] = 0.0
            wl = _PASS(crow[i], crow[i + 1], col, val, exp_theta_t, ed, acc, True, want_bound, want_stats, stats)
            if want_bound:
                words[i] = wl
                for k in range(K):
                    a_bound[i, k] = a[k]
            change = 0.0
            for k in range(K):
                new = alpha[k] + ed[k] * acc[k]
                moved = abs(new - a[k]) / new
                if moved > change or moved != moved:  # a NaN counts as not converged
                    change = moved if moved == moved else math.inf
                a[k] = new
            done = it + 1
            if tol > 0 and change <= tol:
                break
        if bound_at == FINAL or stats_at == FINAL:
            _EXPECTED(a, log_rate, dirichlet, ed)
            wl = _PASS(crow[i], crow[i + 1], col, val, exp_theta_t, ed, acc, False, True, stats_at == FINAL, stats)
            if bound_at == FINAL:
                words[i] = wl
                for k in range(K):
                    a_bound[i, k] = a[k]
        for k in range(K):
            a_out[i, k] = a[k]
        n_updates[i] = done


_DOC_UPDATES: Any = _doc_updates  # rebound to the compiled kernel by vb_kernels()
_PRANGE: Any = range


def _doc_updates_blocks(bounds, crow, col, val, exp_theta_t, alpha, log_rate, dirichlet, a_in, max_updates, tol,
                        bound_at, stats_at, a_out, a_bound, words, stats_blocks, n_updates):  # pragma: no cover
    """:func:`_doc_updates` on the blocks [bounds[b], bounds[b+1]) in parallel, block b adding into
    ``stats_blocks[b]``."""
    for b in _PRANGE(bounds.shape[0] - 1):
        _DOC_UPDATES(bounds[b], bounds[b + 1], crow, col, val, exp_theta_t, alpha, log_rate, dirichlet, a_in,
                     max_updates, tol, bound_at, stats_at, a_out, a_bound, words, stats_blocks[b], n_updates)


@functools.cache
def vb_kernels() -> dict[str, Any]:
    """Compile the kernels on first use (cached on disk)."""
    import numba

    global _DG, _EXPECTED, _PASS, _DOC_UPDATES, _PRANGE
    # the kernels call these by their module-level names, bound here before anything is compiled
    _DG = _jit(numba, _digamma)
    _EXPECTED = _jit(numba, _expected_doc)
    _PASS = _jit(numba, _nonzeros_pass, fastmath={"reassoc", "contract"}, inline="always")
    _DOC_UPDATES = _jit(numba, _doc_updates, fastmath={"reassoc", "contract"})
    _PRANGE = numba.prange
    return {
        "serial": _DOC_UPDATES,
        "blocks": _jit(numba, _doc_updates_blocks, parallel=True),
    }


def doc_block_bounds(crow: np.ndarray, n_blocks: int) -> np.ndarray:
    """Document boundaries of ``n_blocks`` contiguous blocks of about equal non-zero counts."""
    n_docs = crow.shape[0] - 1
    targets = np.linspace(0, crow[-1], n_blocks + 1)[1:-1]
    inner = np.searchsorted(crow, targets).clip(0, n_docs)
    return np.unique(np.concatenate([[0], inner, [n_docs]])).astype(np.int64)


def doc_updates(
    crow: np.ndarray,
    col: np.ndarray,
    val: np.ndarray,
    exp_theta_t: np.ndarray,
    alpha: np.ndarray,
    log_rate: np.ndarray | None,
    a_in: np.ndarray,
    *,
    max_updates: int,
    tol: float = 0.0,
    bound_at: int = NONE,
    stats_at: int = NONE,
    n_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Run :func:`_doc_updates` over all documents; returns (a, a at the bound, words, S (J, K) or None,
    updates per document). ``log_rate`` None means DirichletDCA."""
    k = vb_kernels()
    I, K = a_in.shape
    J = exp_theta_t.shape[0]
    dtype = a_in.dtype
    a_out = np.empty((I, K), dtype=dtype)
    a_bound = np.empty((I, K), dtype=dtype) if bound_at != NONE else a_out
    words = np.zeros(I, dtype=dtype)
    n_updates = np.zeros(I, dtype=np.int64)
    dirichlet = log_rate is None
    rate = np.zeros(K, dtype=dtype) if log_rate is None else log_rate
    args = (crow, col, val, exp_theta_t, alpha, rate, dirichlet, a_in, int(max_updates), float(tol),
            int(bound_at), int(stats_at), a_out, a_bound, words)
    bounds = doc_block_bounds(crow, n_threads) if n_threads > 1 else None
    if bounds is None or bounds.shape[0] <= 2:
        stats = np.zeros((J, K) if stats_at != NONE else (1, K), dtype=dtype)
        k["serial"](0, I, *args, stats, n_updates)
    else:
        import numba

        blocks = np.zeros((bounds.shape[0] - 1, J, K) if stats_at != NONE else (bounds.shape[0] - 1, 1, K),
                          dtype=dtype)
        previous = numba.get_num_threads()
        limit = int(vars(numba.config).get("NUMBA_NUM_THREADS", 1))  # threads numba may start in this process
        numba.set_num_threads(max(1, min(n_threads, limit)))
        try:
            k["blocks"](bounds, *args, blocks, n_updates)
        finally:
            numba.set_num_threads(previous)
        stats = blocks[0]
        for b in range(1, blocks.shape[0]):
            stats += blocks[b]
    return a_out, a_bound, words, (stats if stats_at != NONE else None), n_updates
