"""Compiled (numba) sweeps of the collapsed DCA sampler; the math is in :mod:`.collapsed` and :mod:`.collapsed_state`.

Every kernel is plain Python compiled on first use by :func:`_kernels` (numba is imported lazily, so the
package imports without it). Compiled code is cached on disk (``cache=True``) so a new process loads it
instead of compiling (~3 s per process otherwise); when no cache location is writable (a read-only install
and no writable ``NUMBA_CACHE_DIR``) the kernels are compiled without caching, silently.

numba's ``np.random`` inside a jitted function uses numba's own generator state (one per thread),
separate from numpy's; every sweep re-seeds it with ``np.random.seed(s)`` *inside* the kernel, where
``s`` is drawn from the chain's torch generator, so a chain is a deterministic function of its seed.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from latentfs.core.compiled import jit as _jit  # also imported from here by the other DCA kernel modules
from latentfs.core.data import DataError

__all__ = ["kernels"]


# ----------------------------------------------------------------------------- sweeps
def _sweep_reference(doc_ptr, words, z, ndk, nwk, nk, alpha, gamma, gamma_sum, scale, seed, first):  # pragma: no cover
    """One sequential sweep, O(K) per token: cumulative Table 4 weights and one uniform.

    ``first``: the tokens carry no assignment yet (counts all zero); each is drawn given the tokens
    before it and then added (the sequential initialisation).
    """
    np.random.seed(seed)
    K = nk.shape[0]
    cum = np.empty(K)
    for i in range(doc_ptr.shape[0] - 1):
        for t in range(doc_ptr[i], doc_ptr[i + 1]):
            j = words[t]
            if not first:
                k = z[t]
                ndk[i, k] -= 1
                nwk[j, k] -= 1
                nk[k] -= 1
            total = 0.0
            for kk in range(K):
                total += (gamma[j] + nwk[j, kk]) / (gamma_sum + nk[kk]) * (ndk[i, kk] + alpha[kk]) * scale[kk]
                cum[kk] = total
            u = np.random.random() * total
            k = 0
            while k < K - 1 and cum[k] <= u:
                k += 1
            z[t] = k
            ndk[i, k] += 1
            nwk[j, k] += 1
            nk[k] += 1


def _sweep_grouped(doc_ptr, words, z, ndk, nwk, nk, ngk, word_group, alpha, gamma, group_gamma_sum, seed,
                   first):  # pragma: no cover
    """One sequential sweep of the grouped DM model (Section 4.4), O(K) per token.

    Each θ_{·,k} is one Dirichlet per group, so integrating Θ out turns Table 4's word factor into
    (γ_j + N_jk) / (Σ_{j'∈g} γ_j' + N_gk) with g the group of word j and N_gk the tokens of group g in
    component k; the document factor (c_k + α_k) is unchanged (the document's m is shared by its groups).
    """
    np.random.seed(seed)
    K = nk.shape[0]
    cum = np.empty(K)
    for i in range(doc_ptr.shape[0] - 1):
        for t in range(doc_ptr[i], doc_ptr[i + 1]):
            j = words[t]
            g = word_group[j]
            if not first:
                k = z[t]
                ndk[i, k] -= 1
                nwk[j, k] -= 1
                nk[k] -= 1
                ngk[g, k] -= 1
            total = 0.0
            for kk in range(K):
                total += (gamma[j] + nwk[j, kk]) / (group_gamma_sum[g] + ngk[g, kk]) * (ndk[i, kk] + alpha[kk])
                cum[kk] = total
            u = np.random.random() * total
            k = 0
            while k < K - 1 and cum[k] <= u:
                k += 1
            z[t] = k
            ndk[i, k] += 1
            nwk[j, k] += 1
            nk[k] += 1
            ngk[g, k] += 1


def _sparse_docs(doc_lo, doc_hi, doc_ptr, words, z, ndk, nk, wptr, wlist, alpha, gamma, gamma_sum, scale,
                 first):  # pragma: no cover
    """SparseLDA sweep over documents ``doc_lo .. doc_hi - 1`` (module docstring), using numba's generator as seeded.

    Word j's segment starts at ``b = 2 wptr[j]``: ``wlist[b]`` holds the number n of its non-zero counts,
    followed by n (component, N_jk) pairs from ``wlist[b + 2]`` on. One token thus touches one short
    contiguous run of memory instead of a row of the J × K matrix. Updates ``z``, the rows of ``ndk``,
    ``nk`` and ``wlist`` in place (not the dense N_jk). A symmetric γ is read once (``gamma[0]``).
    """
    gamma_sym = True
    for j in range(gamma.shape[0]):
        if gamma[j] != gamma[0]:
            gamma_sym = False
            break
    K = nk.shape[0]
    d = np.empty(K)  # s_k / (Σγ + N_k)
    qcoef = np.empty(K)  # (c_k + α_k) d_k for the current document
    qbuf = np.empty(K)
    dlist = np.empty(K, np.int64)  # components present in the current document
    dslot = np.full(K, -1, np.int64)
    for k in range(K):
        d[k] = scale[k] / (gamma_sum + nk[k])  # recomputed exactly whenever N_k changes
    for i in range(doc_lo, doc_hi):
        lo = doc_ptr[i]
        hi = doc_ptr[i + 1]
        if hi == lo:
            continue
        # Bucket totals recomputed per document, so rounding from the O(1) updates cannot accumulate.
        s_sum = 0.0
        r_sum = 0.0
        ndl = 0
        for k in range(K):
            s_sum += alpha[k] * d[k]
            c = ndk[i, k]
            qcoef[k] = (c + alpha[k]) * d[k]
            if c > 0:
                r_sum += c * d[k]
                dlist[ndl] = k
                dslot[k] = ndl
                ndl += 1
            else:
                dslot[k] = -1
        for t in range(lo, hi):
            j = words[t]
            head = 2 * wptr[j]
            base = head + 2
            n_w = wlist[head]
            if not first:
                k = z[t]
                # -- remove the token: counts, bucket totals, lists
                d_old = d[k]
                c_old = ndk[i, k]
                nk[k] -= 1
                ndk[i, k] = c_old - 1
                d_new = scale[k] / (gamma_sum + nk[k])
                d[k] = d_new
                s_sum += alpha[k] * (d_new - d_old)
                r_sum += (c_old - 1) * d_new - c_old * d_old
                qcoef[k] = (c_old - 1 + alpha[k]) * d_new
                if c_old == 1:
                    pos = dslot[k]
                    last = dlist[ndl - 1]
                    dlist[pos] = last
                    dslot[last] = pos
                    dslot[k] = -1
                    ndl -= 1
                for p in range(n_w):
                    if wlist[base + 2 * p] == k:
                        cnt = wlist[base + 2 * p + 1] - 1
                        if cnt == 0:
                            n_w -= 1
                            wlist[base + 2 * p] = wlist[base + 2 * n_w]
                            wlist[base + 2 * p + 1] = wlist[base + 2 * n_w + 1]
                        else:
                            wlist[base + 2 * p + 1] = cnt
                        break
            # -- the word bucket over the components word j has
            q_sum = 0.0
            for p in range(n_w):
                q_sum += wlist[base + 2 * p + 1] * qcoef[wlist[base + 2 * p]]
                qbuf[p] = q_sum
            gj = gamma[0] if gamma_sym else gamma[j]
            u = np.random.random() * (q_sum + gj * (s_sum + r_sum))
            slot = -1
            if u < q_sum:
                slot = 0
                while slot < n_w - 1 and qbuf[slot] <= u:
                    slot += 1
                k = wlist[base + 2 * slot]
            else:
                u = (u - q_sum) / gj
                if u < r_sum and ndl > 0:
                    acc = 0.0
                    p = 0
                    while True:
                        k = dlist[p]
                        acc += ndk[i, k] * d[k]
                        if acc > u or p == ndl - 1:
                            break
                        p += 1
                else:
                    u -= r_sum
                    acc = 0.0
                    k = 0
                    while True:
                        acc += alpha[k] * d[k]
                        if acc > u or k == K - 1:
                            break
                        k += 1
                for p in range(n_w):
                    if wlist[base + 2 * p] == k:
                        slot = p
                        break
            # -- add the token back under its new component
            z[t] = k
            d_old = d[k]
            c_old = ndk[i, k]
            nk[k] += 1
            ndk[i, k] = c_old + 1
            d_new = scale[k] / (gamma_sum + nk[k])
            d[k] = d_new
            s_sum += alpha[k] * (d_new - d_old)
            r_sum += (c_old + 1) * d_new - c_old * d_old
            qcoef[k] = (c_old + 1 + alpha[k]) * d_new
            if c_old == 0:
                dlist[ndl] = k
                dslot[k] = ndl
                ndl += 1
            if slot >= 0:
                wlist[base + 2 * slot + 1] += 1
            else:
                wlist[base + 2 * n_w] = k
                wlist[base + 2 * n_w + 1] = 1
                n_w += 1
            wlist[head] = n_w
        for p in range(ndl):
            dslot[dlist[p]] = -1


def _sweep_sparse(doc_ptr, words, z, ndk, nwk, nk, wptr, wlist, alpha, gamma, gamma_sum, scale, seed,
                  first):  # pragma: no cover
    """One sequential sweep with SparseLDA buckets (module docstring); same conditional as the reference.

    The dense ``nwk`` is rewritten from the word lists at the end of the sweep.
    """
    np.random.seed(seed)
    _SPARSE_DOCS(0, doc_ptr.shape[0] - 1, doc_ptr, words, z, ndk, nk, wptr, wlist, alpha, gamma, gamma_sum, scale,
                 first)
    K = nk.shape[0]
    for j in range(nwk.shape[0]):  # the dense counts, from the lists
        for k in range(K):
            nwk[j, k] = 0
        base = 2 * wptr[j] + 2
        for p in range(wlist[base - 2]):
            nwk[j, wlist[base + 2 * p]] = wlist[base + 2 * p + 1]


def _sweep_sparse_blocks(block_ptr, seeds, doc_ptr, words, z, ndk, nwk, nk, wptr, wlist, alpha, gamma, gamma_sum,
                         scale):  # pragma: no cover
    """One document-partitioned sweep (AD-LDA, Newman et al. 2009): block b = documents block_ptr[b] .. [b + 1] - 1.

    Every block runs the sequential sparse sweep on its own copy of the word lists and of N_k taken at the
    start of the sweep (``prange``: one block per thread), seeding numba's generator of the thread that runs
    it with ``seeds[b]`` first, so the result depends on the seeds and the number of blocks only, not on how
    many threads actually run. Afterwards the counts are merged exactly,
    N_jk ← Σ_b N^b_jk − (B − 1) N_jk (the start counts plus every block's changes), and the shared lists are
    rebuilt from them. A document's counts c and its assignments belong to one block, so they need no merge.
    """
    B = block_ptr.shape[0] - 1
    J, K = nwk.shape
    lists = np.empty((B, wlist.shape[0]), wlist.dtype)
    nks = np.empty((B, K), nk.dtype)
    for b in _PRANGE(B):
        own_list = wlist.copy()  # contiguous 1-D copies: the sweep compiles to the same code as the serial one
        own_nk = nk.copy()
        np.random.seed(seeds[b])
        _SPARSE_DOCS(block_ptr[b], block_ptr[b + 1], doc_ptr, words, z, ndk, own_nk, wptr, own_list, alpha, gamma,
                     gamma_sum, scale, False)
        lists[b, :] = own_list
        nks[b, :] = own_nk
    for j in _PRANGE(J):
        base = 2 * wptr[j] + 2
        for k in range(K):
            nwk[j, k] = (1 - B) * nwk[j, k]
        for b in range(B):
            for p in range(lists[b, base - 2]):
                nwk[j, lists[b, base + 2 * p]] += lists[b, base + 2 * p + 1]
        n = 0
        for k in range(K):
            if nwk[j, k] > 0:
                wlist[base + 2 * n] = k
                wlist[base + 2 * n + 1] = nwk[j, k]
                n += 1
        wlist[base - 2] = n
    for k in range(K):
        total = (1 - B) * nk[k]
        for b in range(B):
            total += nks[b, k]
        nk[k] = total


def _dense_to_lists(nwk, wptr, wlist):  # pragma: no cover
    for j in range(nwk.shape[0]):
        n = 0
        base = 2 * wptr[j] + 2
        for k in range(nwk.shape[1]):
            if nwk[j, k] > 0:
                wlist[base + 2 * n] = k
                wlist[base + 2 * n + 1] = nwk[j, k]
                n += 1
        wlist[base - 2] = n


def _count_lgamma(ndk, nwk, alpha, gamma):  # pragma: no cover
    """Σ_{i,k: c>0} log Γ(c + α_k)/Γ(α_k) and Σ_{j,k: N>0} log Γ(γ_j + N_jk)/Γ(γ_j)."""
    doc = 0.0
    for i in range(ndk.shape[0]):
        for k in range(ndk.shape[1]):
            c = ndk[i, k]
            if c > 0:
                doc += math.lgamma(c + alpha[k]) - math.lgamma(alpha[k])
    word = 0.0
    for j in range(nwk.shape[0]):
        lg = math.lgamma(gamma[j])
        for k in range(nwk.shape[1]):
            n = nwk[j, k]
            if n > 0:
                word += math.lgamma(gamma[j] + n) - lg
    return doc, word



def _lgamma_tables(alpha, gamma0, max_doc, max_word):  # pragma: no cover
    """log Γ(n + α_k) − log Γ(α_k) for n ≤ max_doc (rows n, columns k) and log Γ(n + γ) − log Γ(γ) for n ≤ max_word."""
    K = alpha.shape[0]
    doc = np.empty((max_doc + 1, K))
    for k in range(K):
        base = math.lgamma(alpha[k])
        for n in range(max_doc + 1):
            doc[n, k] = math.lgamma(n + alpha[k]) - base
    word = np.empty(max_word + 1)
    base = math.lgamma(gamma0)
    for n in range(max_word + 1):
        word[n] = math.lgamma(n + gamma0) - base
    return doc, word


def _count_lgamma_sym(ndk, wptr, wlist, alpha, gamma0, max_doc, max_word):  # pragma: no cover
    """:func:`_count_lgamma` for a symmetric γ from the sparse word lists, by table look-up.

    The word part runs over the non-zero N_jk only (the lists), and both parts read log Γ differences from
    tables of the counts that occur, so the per-sweep trace costs O(I·K + nnz(N)) look-ups, not lgamma calls.
    """
    doc_t, word_t = _LGAMMA_TABLES(alpha, gamma0, max_doc, max_word)
    doc = 0.0
    for i in range(ndk.shape[0]):
        for k in range(ndk.shape[1]):
            c = ndk[i, k]
            if c > 0:
                doc += doc_t[c, k]
    word = 0.0
    for j in range(wptr.shape[0] - 1):
        base = 2 * wptr[j] + 2
        for p in range(wlist[base - 2]):
            word += word_t[wlist[base + 2 * p + 1]]
    return doc, word


def _word_digamma_stats(wptr, wlist, gamma0):  # pragma: no cover
    """Σ_{j,k: N_jk > 0} [ψ(N_jk + γ) − ψ(γ)] from the sparse lists (Minka's fixed point for a symmetric γ)."""
    total = 0.0
    for j in range(wptr.shape[0] - 1):
        base = 2 * wptr[j] + 2
        for p in range(wlist[base - 2]):
            n = wlist[base + 2 * p + 1]
            # ψ(n + γ) − ψ(γ) = Σ_{m=0}^{n-1} 1 / (m + γ) for integer n (exact; n is small for most entries)
            if n < 64:
                s = 0.0
                for m in range(n):
                    s += 1.0 / (m + gamma0)
                total += s
            else:
                total += _DIGAMMA(n + gamma0) - _DIGAMMA(gamma0)
    return total


def _digamma(x):  # pragma: no cover
    """ψ(x) for x > 0: recurrence up to x ≥ 6, then the asymptotic series (error < 1e-12)."""
    r = 0.0
    while x < 6.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return r + math.log(x) - 0.5 / x - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))))


_SPARSE_DOCS: Any = _sparse_docs  # rebound to the compiled kernel by kernels()
_PRANGE: Any = range  # rebound to numba.prange by kernels()
_LGAMMA_TABLES: Any = _lgamma_tables
_DIGAMMA: Any = _digamma


def import_numba(method: str) -> Any:
    """The numba module, imported on first use; without it, a :class:`DataError` naming ``method`` and a remedy."""
    try:
        import numba
    except ImportError as exc:
        raise DataError(
            f"method={method!r} needs numba for its compiled sweeps; got ImportError "
            f"({exc}). Install it with `pip install numba`, or use method='gibbs'."
        ) from exc
    return numba


@functools.cache
def kernels() -> dict[str, Any]:
    """Compile the kernels on first use (numba is imported lazily; compiled code is cached on disk)."""
    numba = import_numba("collapsed_gibbs")
    global _SPARSE_DOCS, _PRANGE, _LGAMMA_TABLES, _DIGAMMA
    # The sweeps call these by their module-level names, bound here before anything is compiled.
    _SPARSE_DOCS = _jit(numba, _sparse_docs)
    _LGAMMA_TABLES = _jit(numba, _lgamma_tables)
    _DIGAMMA = _jit(numba, _digamma)
    _PRANGE = numba.prange
    return {
        "reference": _jit(numba, _sweep_reference),
        "grouped": _jit(numba, _sweep_grouped),
        "sparse": _jit(numba, _sweep_sparse),
        "sparse_blocks": _jit(numba, _sweep_sparse_blocks, parallel=True),
        "dense_to_lists": _jit(numba, _dense_to_lists),
        "count_lgamma": _jit(numba, _count_lgamma),
        "count_lgamma_sym": _jit(numba, _count_lgamma_sym),
        "word_digamma": _jit(numba, _word_digamma_stats),
    }
