"""The scaled forward–backward recursion compiled with numba, the CPU fast path of
:func:`latentfs.inference.hmm.forward_backward.forward_backward`.

The torch scan of :mod:`.forward_backward` keeps Python-level work to O(√N) batched matrix products so that it
runs on any device; on one CPU core the per-product overhead (~60 µs) dominates at small K, where a compiled
sequential recursion costs O(N K²) arithmetic and nothing else. Same chain convention (all sequences as one
chain, the transition replaced by 1 πᵀ at a sequence start), same scaling (Rabiner 1989, eqs. 91–93: emission
densities shifted by their maximum at each t, forward vectors normalised to sum one, backward vectors too),
same outputs. A zero normaliser (every state's density flushed at some t) returns ``ok = False`` and the caller
falls back to the log-space recursion.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from latentfs.core.compiled import jit

__all__ = ["compiled_forward_backward", "compiled_sample_states"]


def _forward(log_em, startprob, transmat, is_start, seq_id, alpha, b, loglik):  # pragma: no cover - compiled
    """The scaled forward pass: fills ``alpha`` (the filtered probabilities), ``b`` (each row's emission densities
    divided by their maximum) and adds each row's log normaliser to its sequence's entry of ``loglik``; False at
    a zero normaliser (every density flushed, or none reachable). ``b`` may be ``alpha`` itself when the densities
    are not wanted: each ``b[t, j]`` is read once, right after it is written, to form ``alpha[t, j]``."""
    n, k = log_em.shape
    for t in range(n):
        top = log_em[t, 0]
        for j in range(1, k):
            if log_em[t, j] > top:
                top = log_em[t, j]
        if not math.isfinite(top):
            return False
        s = 0.0
        for j in range(k):
            b[t, j] = math.exp(log_em[t, j] - top)
            if is_start[t]:
                a = startprob[j]
            else:
                a = 0.0
                for i in range(k):
                    a += alpha[t - 1, i] * transmat[i, j]
            alpha[t, j] = a * b[t, j]
            s += alpha[t, j]
        if not s > 0.0:
            return False
        for j in range(k):
            alpha[t, j] /= s
        loglik[seq_id[t]] += math.log(s) + top
    return True


_FORWARD: Any = _forward  # rebound to the compiled pass by _kernel() before a recursion that calls it is compiled


def _forward_backward(log_em, startprob, transmat, is_start, seq_id, n_seq):  # pragma: no cover - compiled
    n, k = log_em.shape
    alpha = np.empty((n, k))
    beta = np.empty((n, k))
    b = np.empty((n, k))
    gamma = np.empty((n, k))
    xi = np.zeros((k, k))
    loglik = np.zeros(n_seq)
    if not _FORWARD(log_em, startprob, transmat, is_start, seq_id, alpha, b, loglik):
        return alpha, gamma, xi, loglik, False
    for j in range(k):
        beta[n - 1, j] = 1.0 / k
    for t in range(n - 2, -1, -1):
        s = 0.0
        if is_start[t + 1]:  # the next row starts a new sequence: β_t is flat
            for j in range(k):
                beta[t, j] = 1.0
            s = float(k)
        else:
            for i in range(k):
                v = 0.0
                for j in range(k):
                    v += transmat[i, j] * b[t + 1, j] * beta[t + 1, j]
                beta[t, i] = v
                s += v
        if not s > 0.0:
            return alpha, gamma, xi, loglik, False
        for i in range(k):
            beta[t, i] /= s
    w = np.empty(k)
    for t in range(n):
        z = 0.0
        for j in range(k):
            gamma[t, j] = alpha[t, j] * beta[t, j]
            z += gamma[t, j]
        if not z > 0.0:
            return alpha, gamma, xi, loglik, False
        for j in range(k):
            gamma[t, j] /= z
        if t == 0 or is_start[t]:
            continue
        norm = 0.0
        for j in range(k):
            w[j] = b[t, j] * beta[t, j]
        for i in range(k):
            for j in range(k):
                norm += alpha[t - 1, i] * transmat[i, j] * w[j]
        if not norm > 0.0:
            return alpha, gamma, xi, loglik, False
        for i in range(k):
            for j in range(k):
                xi[i, j] += alpha[t - 1, i] * transmat[i, j] * w[j] / norm
    return alpha, gamma, xi, loglik, True


def _ffbs(log_em, startprob, transmat, is_start, seq_id, n_seq, u):  # pragma: no cover - compiled
    n, k = log_em.shape
    alpha = np.empty((n, k))
    loglik = np.zeros(n_seq)
    path = np.zeros(n, dtype=np.int64)
    if not _FORWARD(log_em, startprob, transmat, is_start, seq_id, alpha, alpha, loglik):  # densities not kept
        return path, loglik, False
    # z_N ~ α_N, then z_t | z_{t+1} = l ~ α_t(k) A(k, l) (A replaced by 1 before a sequence start): the state
    # is the number of cumulative weights below u_t, as in the torch scan.
    c = 0.0
    z = 0
    for j in range(k):
        c += alpha[n - 1, j]
        if c < u[n - 1]:
            z += 1
    path[n - 1] = min(z, k - 1)
    w = np.empty(k)
    for t in range(n - 2, -1, -1):
        nxt = path[t + 1]
        total = 0.0
        for i in range(k):
            w[i] = alpha[t, i] if is_start[t + 1] else alpha[t, i] * transmat[i, nxt]
            total += w[i]
        total = max(total, _TINY)
        c = 0.0
        z = 0
        for i in range(k):
            c += w[i]
            if c / total < u[t]:
                z += 1
        path[t] = min(z, k - 1)
    return path, loglik, True


_TINY = np.finfo(np.float64).tiny
_SOURCES = {"forward_backward": _forward_backward, "ffbs": _ffbs}


@functools.cache
def _kernel(name: str = "forward_backward") -> Any:
    """A compiled recursion (numba imported lazily; cached on disk when a cache location is writable), or
    None when numba is not installed."""
    try:
        import numba
    except ImportError:
        return None
    global _FORWARD
    # the recursions call the forward pass by its module-level name, bound here before they are compiled
    if not hasattr(_FORWARD, "py_func"):
        _FORWARD = jit(numba, _forward, inline="always")
    return jit(numba, _SOURCES[name])


def compiled_forward_backward(
    log_em: np.ndarray, startprob: np.ndarray, transmat: np.ndarray, is_start: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(filtered, gamma, xi_sum, per-sequence log-likelihoods), or None when numba is missing or the scaled
    recursion met a zero normaliser (the caller then uses the log-space recursion)."""
    kernel = _kernel()
    if kernel is None:
        return None
    is_start = np.ascontiguousarray(is_start, dtype=np.bool_)
    seq_id = np.cumsum(is_start) - 1
    n_seq = int(seq_id[-1]) + 1 if seq_id.size else 0
    alpha, gamma, xi, loglik, ok = kernel(
        np.ascontiguousarray(log_em, dtype=np.float64), np.ascontiguousarray(startprob, dtype=np.float64),
        np.ascontiguousarray(transmat, dtype=np.float64), is_start, seq_id.astype(np.int64), n_seq,
    )
    if not ok:
        return None
    return alpha, gamma, xi, loglik


def compiled_sample_states(
    log_em: np.ndarray, startprob: np.ndarray, transmat: np.ndarray, is_start: np.ndarray, u: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(states, per-sequence log-likelihoods) by forward filtering, backward sampling with the uniforms ``u``
    (one per row), the CPU fast path of :func:`latentfs.inference.hmm.forward_backward.sample_states`; None
    when numba is missing or the scaled recursion met a zero normaliser."""
    kernel = _kernel("ffbs")
    if kernel is None:
        return None
    is_start = np.ascontiguousarray(is_start, dtype=np.bool_)
    seq_id = np.cumsum(is_start) - 1
    n_seq = int(seq_id[-1]) + 1 if seq_id.size else 0
    path, loglik, ok = kernel(
        np.ascontiguousarray(log_em, dtype=np.float64), np.ascontiguousarray(startprob, dtype=np.float64),
        np.ascontiguousarray(transmat, dtype=np.float64), is_start, seq_id.astype(np.int64), n_seq,
        np.ascontiguousarray(u, dtype=np.float64),
    )
    return (path, loglik) if ok else None
