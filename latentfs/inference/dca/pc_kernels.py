"""Compiled kernels of the partially collapsed sampler (:mod:`.partially_collapsed`): a counter-based random
stream per document and the document sweep given Φ.

Randomness. Every document draws its uniforms from a stream of its own, a SplitMix64 sequence (Steele, Lea &
Flood 2014, "Fast splittable pseudorandom number generators", OOPSLA) whose starting state is a hash of
(chain key, sweep, global document index). A document's draws therefore depend on the seed, the chain, the sweep
and the document's row in the corpus, never on which block or worker holds it: any chunking of the rows and any
number of workers give the same draws.

Every kernel is plain Python compiled on first use by :func:`kernels` (numba imported lazily, machine code cached
on disk, the GIL released so that blocks swept by dask's threaded scheduler run side by side).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from latentfs.inference.dca.collapsed_kernels import _jit, import_numba

__all__ = ["kernels"]

_U64 = np.uint64


def _mix(x):  # pragma: no cover - compiled
    """SplitMix64's finaliser (a bijection of 64-bit words)."""
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def _stream_start(key, sweep, doc):  # pragma: no cover - compiled
    """The starting state of the stream of (chain key, sweep, global document index)."""
    return _MIX(_MIX(_MIX(_U64(key) + _U64(0x9E3779B97F4A7C15)) ^ _U64(sweep)) ^ _U64(doc))


def _next_uniform(state):  # pragma: no cover - compiled
    """(the next state, a uniform in [0, 1) with 53 random bits)."""
    state = state + _U64(0x9E3779B97F4A7C15)
    return state, float(_MIX(state) >> _U64(11)) * (1.0 / 9007199254740992.0)


def _init_block(indptr, words, doc0, key, n_components):  # pragma: no cover - compiled
    """Sweep 0: every token's component uniform over the K components, drawn from its document's stream."""
    n_docs = indptr.shape[0] - 1
    z = np.empty(words.shape[0], dtype=np.int32)
    ndk = np.zeros((n_docs, n_components), dtype=np.int32)
    for d in range(n_docs):
        state = _START(key, 0, doc0 + d)
        for t in range(indptr[d], indptr[d + 1]):
            state, u = _NEXT(state)
            k = min(int(u * n_components), n_components - 1)
            z[t] = k
            ndk[d, k] += 1
    return z, ndk


def _alias_tables(phi_t, alpha, prob, alias, mass):  # pragma: no cover - compiled
    """For every word w, Walker's alias table (Vose 1991) of the prior bucket q_k ∝ α_k Φ_kw (``prob``, ``alias``,
    rows of (J, K)) and its total mass A_w = Σ_k α_k Φ_kw (``mass``)."""
    J, K = phi_t.shape
    scaled = np.empty(K)
    small = np.empty(K, dtype=np.int64)
    large = np.empty(K, dtype=np.int64)
    for w in range(J):
        total = 0.0
        for k in range(K):
            scaled[k] = alpha[k] * phi_t[w, k]
            total += scaled[k]
        mass[w] = total
        ns = 0
        nl = 0
        for k in range(K):
            scaled[k] = scaled[k] * K / total if total > 0.0 else 1.0
            alias[w, k] = k
            if scaled[k] < 1.0:
                small[ns] = k
                ns += 1
            else:
                large[nl] = k
                nl += 1
        while ns > 0 and nl > 0:
            ns -= 1
            s_ = small[ns]
            g = large[nl - 1]
            prob[w, s_] = scaled[s_]
            alias[w, s_] = g
            scaled[g] = (scaled[g] + scaled[s_]) - 1.0
            if scaled[g] < 1.0:
                nl -= 1
                small[ns] = g
                ns += 1
        for i in range(nl):
            prob[w, large[i]] = 1.0
        for i in range(ns):  # rounding leftovers
            prob[w, small[i]] = 1.0


def _sweep_block(indptr, words, z, ndk, phi_t, log_phi_t, prob, alias, mass, alpha, doc0, key,
                 sweep):  # pragma: no cover - compiled
    """One sequential sweep of a block's documents given Φ (``phi_t`` is Φ transposed, (J, K)) with θ_d
    integrated out (Magnusson, Jonsson, Villani & Broman 2018, JCGS, Sec. 2.2 and 3):
    p(z_i = k | z_-i, Φ) ∝ (n_dk^{-i} + α_k) Φ_{k, w_i} = α_k Φ_{k, w_i} + n_dk^{-i} Φ_{k, w_i}.

    The first (prior) bucket does not depend on the document: it is drawn in O(1) from a per-word alias table
    (``prob``, ``alias``, ``mass``: :func:`_alias_tables` of Φ, built once per sweep and process by the caller); the
    second is summed over the components present in the document only (a list kept per
    document), so a token costs O(#components of its document), not O(K). One uniform u per token picks the
    bucket and the component within it; every token is drawn from the exact conditional. ``z`` and ``ndk`` are
    updated in place.

    Returns log p(w, z | Φ, α) of the block at the new z: Σ_i log Φ_{z_i w_i} + Σ_d log DirMult(n_d· | α)."""
    n_docs = indptr.shape[0] - 1
    J, K = phi_t.shape
    weights = np.empty(K)
    present = np.empty(K, dtype=np.int64)  # the document's components with n_dk > 0 ...
    where = np.full(K, -1, dtype=np.int64)  # ... and each one's slot in that list (-1: absent)
    alpha_sum = 0.0
    lg_alpha = 0.0
    for k in range(K):
        alpha_sum += alpha[k]
        lg_alpha += math.lgamma(alpha[k])
    lg_alpha_sum = math.lgamma(alpha_sum)
    total = 0.0
    for d in range(n_docs):
        state = _START(key, sweep, doc0 + d)
        n_present = 0
        for k in range(K):
            if ndk[d, k] > 0:
                present[n_present] = k
                where[k] = n_present
                n_present += 1
        for t in range(indptr[d], indptr[d + 1]):
            w = words[t]
            old = z[t]
            ndk[d, old] -= 1
            if ndk[d, old] == 0:  # drop it from the list: the last entry takes its slot
                slot = where[old]
                n_present -= 1
                last = present[n_present]
                present[slot] = last
                where[last] = slot
                where[old] = -1
            acc = 0.0
            for i in range(n_present):
                k = present[i]
                acc += ndk[d, k] * phi_t[w, k]
                weights[i] = acc
            state, u = _NEXT(state)
            target = u * (acc + mass[w])
            if target < acc:
                new = present[n_present - 1]
                for i in range(n_present):
                    if target < weights[i]:
                        new = present[i]
                        break
            else:  # the prior bucket; (target − acc) / A_w is uniform on [0, 1) given that it fell here
                v = (target - acc) / mass[w] * K
                slot = min(int(v), K - 1)
                new = slot if v - slot < prob[w, slot] else alias[w, slot]
            z[t] = new
            ndk[d, new] += 1
            if ndk[d, new] == 1:
                present[n_present] = new
                where[new] = n_present
                n_present += 1
            total += log_phi_t[w, new]
        for i in range(n_present):
            where[present[i]] = -1
        # log DirMult(n_d· | α) = log Γ(Σα) − log Γ(N_d + Σα) + Σ_k [log Γ(n_dk + α_k) − log Γ(α_k)]
        total += lg_alpha_sum - math.lgamma(indptr[d + 1] - indptr[d] + alpha_sum) - lg_alpha
        for k in range(K):
            total += math.lgamma(ndk[d, k] + alpha[k])
    return total


_MIX: Any = None
_START: Any = None
_NEXT: Any = None
_ALIAS: Any = None


@functools.cache
def kernels() -> dict[str, Any]:
    """Compile the kernels on first use (numba imported lazily; compiled code cached on disk)."""
    numba = import_numba("partially_collapsed")
    global _MIX, _START, _NEXT, _ALIAS
    # The kernels call these by their module-level names, bound here before anything is compiled.
    _MIX = _jit(numba, _mix, inline="always")
    _START = _jit(numba, _stream_start)
    _NEXT = _jit(numba, _next_uniform, inline="always")
    _ALIAS = _jit(numba, _alias_tables)
    return {"stream_start": _START, "next_uniform": _NEXT, "init_block": _jit(numba, _init_block),
            "alias_tables": _ALIAS, "sweep_block": _jit(numba, _sweep_block)}
