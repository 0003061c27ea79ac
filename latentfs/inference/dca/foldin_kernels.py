"""Compiled (numba) fold-in of new documents with Θ fixed: the fixed point of eq. (17) / eq. (14), per document.

With the component–word matrix Θ held, a document's variational shapes a solve (Buntine & Jakulin 2006,
eq. 17 for the Dirichlet, eq. 14 for GaP's gamma shapes)

    a_k = α_k + e_k Σ_j (w_j / Z_j) θ_jk,   Z_j = Σ_k e_k θ_jk,
    e_k = exp(ψ(a_k) − ψ(Σ_k a_k))            (DirichletDCA),
    e_k = exp(ψ(a_k) − log(1 + β_k))          (GammaPoissonDCA with rates β),

iterated from a = α + L/K (L the document's length) until no shape moves by more than ``tol`` (absolute)
or ``max_iter`` updates are spent. A word no component can emit (Z_j = 0, possible with maximum-likelihood
fits) gets no responsibility. A document without counts keeps a = α.

Documents are independent given Θ, so they run in parallel (numba ``prange``) and each document's updates are
computed by one thread from its own scratch arrays: the result does not depend on the number of threads or on
how documents are scheduled, and a document's result does not depend on which other documents are in the batch.
Each document stops at its own convergence. The K-term sums may be reordered to vectorise them (``fastmath`` with
reassociation and contraction only), which changes results in the last bits only and identically on every run.

The input is CSR (row pointers, columns, values); nothing is densified. Kernels are compiled on first use and
cached on disk.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

__all__ = ["fold_in_kernels", "fold_in_csr", "cvb0_csr", "digamma"]

#: documents per parallel task: small enough to balance threads, large enough that scratch allocation is free
CHUNK = 16


def digamma(x):  # pragma: no cover
    """ψ(x) for x > 0: the recurrence ψ(x) = ψ(x + 1) − 1/x up to x ≥ 6, then the asymptotic series through
    x^-14 (the first omitted term, 3617 / (8160 x^16), is below 2e-13 at x = 6)."""
    r = 0.0
    while x < 6.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132 - f * (
        691.0 / 32760 - f / 12.0))))))
    return r + math.log(x) - 0.5 / x - series


_DIGAMMA: Any = digamma  # rebound to the compiled function by fold_in_kernels()


def _expected(a, log_rate, dirichlet, out):  # pragma: no cover
    """e_k = exp E[log latent_k] into ``out``: exp(ψ(a_k) − ψ(Σa)) (DM) or exp(ψ(a_k) − log(1 + β_k)) (GaP)."""
    K = a.shape[0]
    if dirichlet:
        s = 0.0
        for k in range(K):
            s += a[k]
        shift = _DIGAMMA(s)
        for k in range(K):
            out[k] = math.exp(_DIGAMMA(a[k]) - shift)
    else:
        for k in range(K):
            out[k] = math.exp(_DIGAMMA(a[k]) - log_rate[k])


_EXPECTED: Any = _expected


def _word_pass(lo, hi, col, val, theta_t, e, acc):  # pragma: no cover
    """acc_k = Σ_t (w_t / Z_t) θ_{j_t k} over the non-zeros lo ≤ t < hi, with Z_t = Σ_k e_k θ_{j_t k}."""
    K = e.shape[0]
    for k in range(K):
        acc[k] = 0.0
    for t in range(lo, hi):
        j = col[t]
        z = 0.0
        for k in range(K):
            z += e[k] * theta_t[j, k]
        if z > 0.0:
            r = val[t] / z
            for k in range(K):
                acc[k] += r * theta_t[j, k]


_WORD_PASS: Any = _word_pass


def _fold_in_doc(i, crow, col, val, theta_t, alpha, log_rate, dirichlet, max_iter, tol, a, e, acc, shapes,
                 n_iter):  # pragma: no cover
    """Document i to its fixed point; writes shapes[i] and n_iter[i] (updates made)."""
    K = alpha.shape[0]
    lo, hi = crow[i], crow[i + 1]
    length = 0.0
    for t in range(lo, hi):
        length += val[t]
    for k in range(K):
        a[k] = alpha[k] + length / K
    done = 0
    for it in range(max_iter):
        _EXPECTED(a, log_rate, dirichlet, e)
        _WORD_PASS(lo, hi, col, val, theta_t, e, acc)
        change = 0.0
        for k in range(K):
            new = alpha[k] + e[k] * acc[k]
            moved = abs(new - a[k])
            if moved > change or moved != moved:  # a NaN counts as not converged
                change = moved if moved == moved else math.inf
            a[k] = new
        done = it + 1
        if change <= tol:
            break
    for k in range(K):
        shapes[i, k] = a[k]
    n_iter[i] = done


_FOLD_IN_DOC: Any = _fold_in_doc
_PRANGE: Any = range


def _fold_in_all(crow, col, val, theta_t, alpha, log_rate, dirichlet, max_iter, tol, shapes,
                 n_iter):  # pragma: no cover
    """Every document, in chunks of :data:`CHUNK` documents run in parallel; each chunk has its own scratch."""
    n_docs = crow.shape[0] - 1
    K = alpha.shape[0]
    n_chunks = (n_docs + CHUNK - 1) // CHUNK
    for c in _PRANGE(n_chunks):
        a = np.empty(K, dtype=shapes.dtype)
        e = np.empty(K, dtype=shapes.dtype)
        acc = np.empty(K, dtype=shapes.dtype)
        for i in range(c * CHUNK, min(n_docs, (c + 1) * CHUNK)):
            _FOLD_IN_DOC(i, crow, col, val, theta_t, alpha, log_rate, dirichlet, max_iter, tol, a, e, acc, shapes,
                         n_iter)


def _cvb0_doc(i, crow, col, val, theta_t, alpha, max_iter, tol, n, n_start, gamma, n_iter, mixture):  # pragma: no cover
    """Document i by CVB0 (Asuncion et al. 2009, eq. 6 with Φ fixed): writes mixture[i] = (n + α) / (L + Σα).

    Each distinct word j (count c_j) holds responsibilities γ_j (rows of ``gamma``, one per non-zero). A sweep
    visits the words in column order; for word j, one of its tokens is taken out of the component totals n,
    γ_jk ∝ (n_k + α_k) θ_jk, and the totals get c_j copies of the new γ_j. Starts from γ_j ∝ θ_j; stops when no
    total moved by more than ``tol`` over a sweep.
    """
    K = alpha.shape[0]
    lo, hi = crow[i], crow[i + 1]
    length = 0.0
    alpha_sum = 0.0
    for k in range(K):
        n[k] = 0.0
        alpha_sum += alpha[k]
    for t in range(lo, hi):
        j = col[t]
        z = 0.0
        for k in range(K):
            z += theta_t[j, k]
        inv = 0.0
        if z > 0.0:  # a word no component emits gets no responsibility and does not count in L
            inv = 1.0 / z
            length += val[t]
        for k in range(K):
            g = theta_t[j, k] * inv
            gamma[t - lo, k] = g
            n[k] += val[t] * g
    done = 0
    for it in range(max_iter):
        change = 0.0
        for k in range(K):
            n_start[k] = n[k]
        for t in range(lo, hi):
            j = col[t]
            c = val[t]
            z = 0.0
            for k in range(K):
                z += (n[k] - gamma[t - lo, k] + alpha[k]) * theta_t[j, k]
            if not z > 0.0:
                continue
            inv = 1.0 / z
            for k in range(K):
                old = gamma[t - lo, k]
                g = (n[k] - old + alpha[k]) * theta_t[j, k] * inv
                n[k] += c * (g - old)
                gamma[t - lo, k] = g
        for k in range(K):
            moved = abs(n[k] - n_start[k])
            if moved > change or moved != moved:  # a NaN counts as not converged
                change = moved if moved == moved else math.inf
        done = it + 1
        if change <= tol:
            break
    for k in range(K):
        mixture[i, k] = (max(n[k], 0.0) + alpha[k]) / (length + alpha_sum)
    n_iter[i] = done


_CVB0_DOC: Any = _cvb0_doc


def _cvb0_all(crow, col, val, theta_t, alpha, max_iter, tol, mixture, n_iter):  # pragma: no cover
    """Every document by CVB0, in chunks of :data:`CHUNK` documents run in parallel, each with its own scratch."""
    n_docs = crow.shape[0] - 1
    K = alpha.shape[0]
    n_chunks = (n_docs + CHUNK - 1) // CHUNK
    for c in _PRANGE(n_chunks):
        first, last = c * CHUNK, min(n_docs, (c + 1) * CHUNK)
        widest = 1
        for i in range(first, last):
            widest = max(widest, crow[i + 1] - crow[i])
        n = np.empty(K, dtype=mixture.dtype)
        n_start = np.empty(K, dtype=mixture.dtype)
        gamma = np.empty((widest, K), dtype=mixture.dtype)
        for i in range(first, last):
            _CVB0_DOC(i, crow, col, val, theta_t, alpha, max_iter, tol, n, n_start, gamma, n_iter, mixture)


@functools.cache
def fold_in_kernels() -> dict[str, Any]:
    """Compile the kernels on first use (numba imported lazily; compiled code cached on disk)."""
    import numba

    from latentfs.inference.dca.collapsed_kernels import _jit

    global _DIGAMMA, _EXPECTED, _WORD_PASS, _FOLD_IN_DOC, _CVB0_DOC, _PRANGE
    # the kernels call these by their module-level names, bound here before anything is compiled
    _DIGAMMA = _jit(numba, digamma)
    _EXPECTED = _jit(numba, _expected)
    _WORD_PASS = _jit(numba, _word_pass, fastmath={"reassoc", "contract"}, inline="always")
    _FOLD_IN_DOC = _jit(numba, _fold_in_doc, fastmath={"reassoc", "contract"})
    _CVB0_DOC = _jit(numba, _cvb0_doc, fastmath={"reassoc", "contract"})
    _PRANGE = numba.prange
    return {"digamma": _DIGAMMA, "all": _jit(numba, _fold_in_all, parallel=True),
            "cvb0": _jit(numba, _cvb0_all, parallel=True)}


def thread_limit() -> int:
    """The most threads numba may use in this process (``NUMBA_NUM_THREADS``)."""
    import numba

    return int(vars(numba.config).get("NUMBA_NUM_THREADS", 1))


def _run_csr(name: str, crow: np.ndarray, col: np.ndarray, val: np.ndarray, theta_t: np.ndarray, alpha: np.ndarray,
             model_args: tuple[Any, ...], max_iter: int, tol: float, n_threads: int) -> tuple[np.ndarray, np.ndarray]:
    """Run the fold-in kernel ``name`` over the CSR documents on ``n_threads`` numba threads (at most
    :func:`thread_limit`; the process's count is restored afterwards): returns (K values per document, updates
    made per document). ``model_args`` go between ``alpha`` and ``max_iter`` in the kernel's arguments."""
    import numba

    kernel = fold_in_kernels()[name]
    dtype = theta_t.dtype
    n_docs = crow.shape[0] - 1
    out = np.empty((n_docs, theta_t.shape[1]), dtype=dtype)
    n_iter = np.zeros(n_docs, dtype=np.int64)
    args = (np.ascontiguousarray(crow, dtype=np.int64), np.ascontiguousarray(col, dtype=np.int64),
            np.ascontiguousarray(val, dtype=dtype), np.ascontiguousarray(theta_t, dtype=dtype),
            np.ascontiguousarray(alpha, dtype=dtype), *model_args, int(max_iter), float(tol), out, n_iter)
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n_threads), thread_limit())))
    try:
        kernel(*args)
    finally:
        numba.set_num_threads(previous)
    return out, n_iter


def fold_in_csr(
    crow: np.ndarray,
    col: np.ndarray,
    val: np.ndarray,
    theta_t: np.ndarray,
    alpha: np.ndarray,
    log_rate: np.ndarray | None,
    *,
    max_iter: int,
    tol: float,
    n_threads: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Fold the CSR documents (``crow``, ``col``, ``val``) in with ``theta_t`` (J, K: Θ transposed, row j is word
    j's K values) fixed; returns (shapes a (n_documents, K), updates made per document).

    ``log_rate`` None means DirichletDCA; else log(1 + β) (K,) of GammaPoissonDCA. ``n_threads`` threads
    (at most :func:`thread_limit`) run the documents; the result is the same for any number.
    """
    dtype = theta_t.dtype
    dirichlet = log_rate is None
    rate = np.zeros(theta_t.shape[1], dtype=dtype) if log_rate is None else np.ascontiguousarray(log_rate, dtype=dtype)
    return _run_csr("all", crow, col, val, theta_t, alpha, (rate, dirichlet), max_iter, tol, n_threads)


def cvb0_csr(
    crow: np.ndarray,
    col: np.ndarray,
    val: np.ndarray,
    theta_t: np.ndarray,
    alpha: np.ndarray,
    *,
    max_iter: int,
    tol: float,
    n_threads: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Mixtures (n + α) / (L + Σα) by CVB0 fold-in (:func:`_cvb0_doc`) of the CSR documents with ``theta_t`` fixed;
    returns (mixtures (n_documents, K), sweeps made per document). Scratch per thread: (widest document's
    non-zeros) × K values. The result is the same for any ``n_threads``."""
    return _run_csr("cvb0", crow, col, val, theta_t, alpha, (), max_iter, tol, n_threads)
