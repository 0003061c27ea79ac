"""Compiled (numba) kernels of the Metropolis–Hastings DCA sampler; the math and the driver are in :mod:`.mh`.

Every kernel is plain Python compiled on first use by :func:`kernels` (numba imported lazily, compiled code
cached on disk through :func:`latentfs.inference.dca.collapsed_kernels._jit`). The sweep draws its uniforms from
a xoshiro256+ generator of its own (a local state seeded by the ``seed`` argument, itself drawn from the chain's
torch generator), so a chain is a deterministic function of its seed and touches no global random state.

Alias tables (Walker 1977; Vose 1991, "A linear algorithm for generating random numbers with a given
distribution"): n weights become n thresholds ``prob`` in [0, 1] and n ``alias`` slots; a draw takes one uniform
u, slot ⌊u n⌋, and keeps the slot when the fractional part of u n is below its threshold, else takes its alias.
Building costs O(n), a draw O(1).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from latentfs.inference.dca.collapsed_kernels import _jit, import_numba

__all__ = ["kernels"]


# ----------------------------------------------------------------------------- random numbers
_U64 = np.uint64


def _rng_seed(state, seed):  # pragma: no cover
    """xoshiro256+ state from one integer by splitmix64 (Blackman & Vigna 2018, "Scrambled linear pseudorandom
    number generators"; the seeding they recommend)."""
    x = _U64(seed)
    for i in range(4):
        x = x + _U64(0x9E3779B97F4A7C15)
        y = x
        y = (y ^ (y >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        y = (y ^ (y >> _U64(27))) * _U64(0x94D049BB133111EB)
        state[i] = y ^ (y >> _U64(31))


def _uniform(state):  # pragma: no cover
    """One uniform in [0, 1) with 53 random bits from xoshiro256+ (the top bits; ~1 ns against numba's
    Mersenne Twister's ~6 ns, which was a fifth of an MH step here)."""
    s0 = state[0]
    s1 = state[1]
    s2 = state[2]
    s3 = state[3]
    result = s0 + s3
    t = s1 << _U64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = (s3 << _U64(45)) | (s3 >> _U64(19))
    state[0] = s0
    state[1] = s1
    state[2] = s2
    state[3] = s3
    return (result >> _U64(11)) * (1.0 / 9007199254740992.0)


# ----------------------------------------------------------------------------- alias tables
#: Word tables pack a slot's component and its alias's component in one float64: (topic << TOPIC_BITS) | alias.
TOPIC_BITS = 26
_TOPIC_MASK = (1 << TOPIC_BITS) - 1


def _alias_build(weights, n, prob, alias, small, large):  # pragma: no cover
    """Vose's alias table of ``weights[0:n]`` into ``prob[0:n]`` and ``alias[0:n]`` (slots 0..n-1). Returns
    Σ weights (0 when n = 0 or the weights sum to 0: no table)."""
    total = 0.0
    for i in range(n):
        total += weights[i]
    if n == 0 or not total > 0.0:
        return 0.0
    scale = n / total
    ns = 0
    nl = 0
    for i in range(n):
        p = weights[i] * scale
        prob[i] = p
        alias[i] = i
        if p < 1.0:
            small[ns] = i
            ns += 1
        else:
            large[nl] = i
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        g = large[nl - 1]
        alias[s] = g
        prob[g] = (prob[g] + prob[s]) - 1.0
        if prob[g] < 1.0:
            nl -= 1
            small[ns] = g
            ns += 1
    for i in range(nl):  # leftovers are 1 up to rounding
        prob[large[i]] = 1.0
    for i in range(ns):
        prob[small[i]] = 1.0
    return total


def _alias_probabilities(prob, alias, n):  # pragma: no cover
    """The distribution an alias table draws from (for tests): (prob[i] + Σ_{j: alias[j]=i} (1 − prob[j])) / n."""
    out = np.zeros(n)
    for i in range(n):
        out[i] += prob[i]
        out[alias[i]] += 1.0 - prob[i]
    return out / n


# ----------------------------------------------------------------------------- word proposal tables
# Columns of the per-component array ``topic`` (K, 4) of the sweep: what a proposal of k reads, on one cache line.
_INV_N = 0  # 1 / (N_k + Σγ), kept current
_INV_Q = 1  # 1 / (λ H_k + Σγ), the word proposals' denominators (fixed during a phase)
_ALPHA = 2  # α_k


def _rebuild_word_tables(fixed, z, pair_counts, half_totals, by_word_ptr, by_word, word_scale, half_scale, gamma_sum,
                         table, meta, topic, dense):  # pragma: no cover
    """The word proposals q_w while half ``fixed`` of the tokens stays put: returns D = Σ_k inv_q[k].

    H_wk = tokens of word w in half ``fixed`` with assignment k (written to ``pair_counts[:, :, 1]``, the entries
    of the previous tables cleared first), H_k = Σ_w H_wk, and

        q_w(k) ∝ (λ_w H_wk + γ_w) · inv_q[k],    inv_q[k] = 1 / (λ H_k + Σγ)  (``topic[k, 1]``),

    with λ_w = ``word_scale[w]`` (word w's tokens / its tokens in the fixed half) and λ = ``half_scale``: H scaled
    up to estimate the whole corpus's N_wk and N_k. Word w's table holds its components with H_wk > 0 and weights
    λ_w H_wk inv_q[k]; ``meta[w]`` = (first row in ``table``, entries, Σ weights, λ_w). One dense table over all K
    components holds inv_q (``dense``: threshold, alias). A draw from q_w picks the word's table with
    probability Σ weights / (Σ weights + γ_w D), else the dense one. Cost O(tokens of the fixed half + J + K).
    """
    J = pair_counts.shape[0]
    K = pair_counts.shape[1]
    weights = np.empty(K)
    topics = np.empty(K, np.int64)
    prob = np.empty(K)
    alias = np.empty(K, np.int64)
    small = np.empty(K, np.int64)
    large = np.empty(K, np.int64)
    for k in range(K):
        half_totals[k] = 0
    for w in range(J):
        base = int(meta[w, 0])
        for p in range(int(meta[w, 1])):
            pair_counts[w, int(table[base + p, 1]) >> TOPIC_BITS, 1] = 0
        n = 0
        for q in range(by_word_ptr[fixed, w], by_word_ptr[fixed, w + 1]):
            k = z[by_word[q]]
            if pair_counts[w, k, 1] == 0:
                topics[n] = k
                n += 1
            pair_counts[w, k, 1] += 1
            half_totals[k] += 1
        meta[w, 1] = n
        meta[w, 3] = word_scale[w]
        for p in range(n):  # park (count, component) where the table goes: the second pass reads them in order
            table[base + p, 0] = pair_counts[w, topics[p], 1]
            table[base + p, 1] = topics[p]
    for k in range(K):
        weights[k] = 1.0 / (half_scale * half_totals[k] + gamma_sum)
        topic[k, _INV_Q] = weights[k]
    dense_mass = _ALIAS_BUILD(weights, K, prob, alias, small, large)
    for k in range(K):
        dense[k, 0] = prob[k]
        dense[k, 1] = alias[k]
    for w in range(J):
        base = int(meta[w, 0])
        n = int(meta[w, 1])
        lam = meta[w, 3]
        for p in range(n):
            k = int(table[base + p, 1])
            topics[p] = k
            weights[p] = lam * table[base + p, 0] * topic[k, _INV_Q]
        meta[w, 2] = _ALIAS_BUILD(weights, n, prob, alias, small, large)
        for p in range(n):
            table[base + p, 0] = prob[p]
            table[base + p, 1] = (topics[p] << TOPIC_BITS) | topics[alias[p]]
    return dense_mass


# ----------------------------------------------------------------------------- the sweep
def _move_token(d, w, s, k, doc_counts, pair_counts, comp_counts, topic, gamma_sum):  # pragma: no cover
    """An accepted move of a token of word ``w`` in document ``d`` from component ``s`` to ``k``: its counts
    (c_dk, N_wk of the moving half, N_k) and the kept 1 / (N_k + Σγ) of both components."""
    doc_counts[d, s] -= 1
    doc_counts[d, k] += 1
    pair_counts[w, s, 0] -= 1
    pair_counts[w, k, 0] += 1
    comp_counts[s] -= 1
    comp_counts[k] += 1
    topic[s, _INV_N] = 1.0 / (comp_counts[s] + gamma_sum)
    topic[k, _INV_N] = 1.0 / (comp_counts[k] + gamma_sum)


_MOVE: Any = _move_token  # rebound to the compiled function by kernels()


def _mh_sweep(doc_ptr, doc_mid, words, z, doc_counts, pair_counts, comp_counts, half_totals, by_word_ptr, by_word,
              by_word_doc, word_scale, half_scale, table, meta, alpha, alpha_sum, alpha_table, gamma, gamma_sum,
              mh_steps, word_major, seed, stats):  # pragma: no cover
    """One sweep of the cycling MH sampler (:mod:`.mh`): half 0 of the tokens against tables built from half 1,
    then half 1 against tables from half 0, visiting each half document by document or, with ``word_major``,
    word by word (``by_word`` and the document of each entry, ``by_word_doc``). Updates ``z``, ``doc_counts``,
    ``pair_counts[:, :, 0]`` and ``comp_counts`` in place; adds (word proposals, accepted, document proposals,
    accepted) to ``stats``.

    Per token, with every count excluding the token (c_k of its document, N_wk of its word w, N_k):
    target p(k) ∝ (c_k + α_k)(N_wk + γ_w)/(N_k + Σγ); ``mh_steps`` cycles of

    * word proposal k' ~ q_w, accepted with min(1, p(k') q_w(s) / (p(s) q_w(k'))), q_w evaluated from the same
      counts its tables were built from;
    * document proposal: with probability L/(L + Σα) the current assignment of a uniformly chosen token of the
      document (this token included, at its current value s), else k' ~ α/Σα (``alpha_table``: threshold,
      alias). Its probability is (c_k' + 1[k' = s] + α_k')/(L + Σα), so the ratio cancels the document factor
      of p and the acceptance is min(1, [(N_wk' + γ_w)/(N_k' + Σγ)] / [(N_ws + γ_w)/(N_s + Σγ)]).

    The counts always hold every token where it is: the terms of the current component s exclude the token (the
    − 1s below), a proposed k ≠ s never holds it, and an accepted move updates the counts at once. Every step
    conditions on the current values of all other tokens, so the order of the visits does not change the
    stationary distribution. The uniforms come from xoshiro256+ seeded with ``seed`` (splitmix64).
    """
    rng = np.empty(4, np.uint64)
    _RNG_SEED(rng, seed)
    J = pair_counts.shape[0]
    K = comp_counts.shape[0]
    gamma_sym = True
    for j in range(gamma.shape[0]):
        if gamma[j] != gamma[0]:
            gamma_sym = False
            break
    topic = np.zeros((K, 4))  # inv_n, inv_q, α_k (columns _INV_N, _INV_Q, _ALPHA)
    for k in range(K):
        topic[k, _INV_N] = 1.0 / (comp_counts[k] + gamma_sum)
        topic[k, _ALPHA] = alpha[k]
    dense = np.empty((K, 2))
    alpha_scale = K / alpha_sum
    word_acc = 0
    doc_acc = 0
    for phase in range(2):
        fixed = 1 - phase
        dense_mass = _REBUILD(fixed, z, pair_counts, half_totals, by_word_ptr, by_word, word_scale[fixed],
                              half_scale[fixed], gamma_sum, table, meta, topic, dense)
        # Two cursors over the moving half: (word w, entry q of by_word) or (document d, position t).
        w = 0
        d = 0
        t = doc_ptr[0] if phase == 0 else doc_mid[0]
        for q in range(by_word_ptr[phase, 0], by_word_ptr[phase, J]):
            if word_major:
                while q >= by_word_ptr[phase, w + 1]:
                    w += 1
                t = by_word[q]
                d = by_word_doc[q]
            else:
                while t >= (doc_mid[d] if phase == 0 else doc_ptr[d + 1]):
                    d += 1
                    t = doc_ptr[d] if phase == 0 else doc_mid[d]
                w = words[t]
            lo = doc_ptr[d]
            length = doc_ptr[d + 1] - lo
            s = z[t]
            gw = gamma[0] if gamma_sym else gamma[w]
            base = int(meta[w, 0])
            n_w = int(meta[w, 1])
            mass = meta[w, 2]
            lam = meta[w, 3]
            dense_w = gw * dense_mass
            word_total = mass + dense_w
            to_word_slot = n_w / mass if mass > 0.0 else 0.0  # r ∈ [0, mass) -> x ∈ [0, n_w)
            to_dense_slot = K / dense_w  # r − mass ∈ [0, γ_w D) -> x ∈ [0, K)
            doc_total = length + alpha_sum
            ws = (pair_counts[w, s, 0] - 1 + gw) / (comp_counts[s] - 1 + gamma_sum)  # word factor of p at s
            ps = (doc_counts[d, s] - 1 + topic[s, _ALPHA]) * ws  # p(s), unnormalised
            qs = (lam * pair_counts[w, s, 1] + gw) * topic[s, _INV_Q]  # q_w(s), unnormalised
            for _ in range(mh_steps):
                # -- word proposal
                r = _UNIFORM(rng) * word_total
                if r < mass:
                    x = r * to_word_slot
                    slot = min(int(x), n_w - 1)
                    packed = int(table[base + slot, 1])
                    k = (packed >> TOPIC_BITS) if x - slot < table[base + slot, 0] else (packed & _TOPIC_MASK)
                else:
                    x = (r - mass) * to_dense_slot
                    slot = min(int(x), K - 1)
                    k = slot if x - slot < dense[slot, 0] else int(dense[slot, 1])
                if k == s:  # accepted: nothing moves
                    word_acc += 1
                else:
                    wk = (pair_counts[w, k, 0] + gw) * topic[k, _INV_N]
                    pk = (doc_counts[d, k] + topic[k, _ALPHA]) * wk
                    qk = (lam * pair_counts[w, k, 1] + gw) * topic[k, _INV_Q]
                    if _UNIFORM(rng) * ps * qk < pk * qs:
                        word_acc += 1
                        _MOVE(d, w, s, k, doc_counts, pair_counts, comp_counts, topic, gamma_sum)
                        z[t] = k
                        s = k
                        ws = wk
                        ps = pk
                        qs = qk
                # -- document proposal
                r = _UNIFORM(rng) * doc_total
                if r < length:
                    k = z[lo + min(int(r), length - 1)]
                else:
                    x = (r - length) * alpha_scale
                    slot = min(int(x), K - 1)
                    k = slot if x - slot < alpha_table[slot, 0] else int(alpha_table[slot, 1])
                if k == s:
                    doc_acc += 1
                else:
                    wk = (pair_counts[w, k, 0] + gw) * topic[k, _INV_N]
                    if _UNIFORM(rng) * ws < wk:
                        doc_acc += 1
                        _MOVE(d, w, s, k, doc_counts, pair_counts, comp_counts, topic, gamma_sum)
                        z[t] = k
                        s = k
                        ws = wk
                        ps = (doc_counts[d, k] - 1 + topic[k, _ALPHA]) * wk
                        qs = (lam * pair_counts[w, k, 1] + gw) * topic[k, _INV_Q]
            t += 1
    n = mh_steps * words.shape[0]
    stats[0] += n
    stats[1] += word_acc
    stats[2] += n
    stats[3] += doc_acc


# ----------------------------------------------------------------------------- the collapsed log joint in O(tokens)
def _count_lgamma_tokens(doc_ptr, z, doc_counts, pair_counts, by_word_ptr, by_word, alpha, gamma, max_doc,
                         max_word):  # pragma: no cover
    """Σ_{i,k: c_ik>0} log Γ(c_ik + α_k)/Γ(α_k) and Σ_{j,k: N_jk>0} log Γ(γ_j + N_jk)/Γ(γ_j), visiting the
    non-zero cells through the tokens (O(tokens), not O((I + J) K)); symmetric α or γ by table look-up."""
    I = doc_ptr.shape[0] - 1
    J = pair_counts.shape[0]
    K = alpha.shape[0]
    alpha_sym = True
    for k in range(K):
        if alpha[k] != alpha[0]:
            alpha_sym = False
            break
    gamma_sym = True
    for j in range(J):
        if gamma[j] != gamma[0]:
            gamma_sym = False
            break
    doc_table = np.empty(max_doc + 1 if alpha_sym else 1)
    if alpha_sym:
        lg = math.lgamma(alpha[0])
        for n in range(max_doc + 1):
            doc_table[n] = math.lgamma(n + alpha[0]) - lg
    word_table = np.empty(max_word + 1 if gamma_sym else 1)
    if gamma_sym:
        lg = math.lgamma(gamma[0])
        for n in range(max_word + 1):
            word_table[n] = math.lgamma(n + gamma[0]) - lg
    seen = np.full(K, -1, np.int64)
    doc = 0.0
    for i in range(I):
        for t in range(doc_ptr[i], doc_ptr[i + 1]):
            k = z[t]
            if seen[k] != i:
                seen[k] = i
                c = doc_counts[i, k]
                doc += doc_table[c] if alpha_sym else math.lgamma(c + alpha[k]) - math.lgamma(alpha[k])
    for k in range(K):
        seen[k] = -1
    word = 0.0
    for j in range(J):
        for h in range(2):
            for q in range(by_word_ptr[h, j], by_word_ptr[h, j + 1]):
                k = z[by_word[q]]
                if seen[k] != j:
                    seen[k] = j
                    n = pair_counts[j, k, 0]
                    word += word_table[n] if gamma_sym else math.lgamma(n + gamma[j]) - math.lgamma(gamma[j])
    return doc, word


_ALIAS_BUILD: Any = _alias_build  # rebound to the compiled kernels by kernels()
_REBUILD: Any = _rebuild_word_tables
_RNG_SEED: Any = _rng_seed
_UNIFORM: Any = _uniform


@functools.cache
def kernels() -> dict[str, Any]:
    """Compile the kernels on first use (numba imported lazily; compiled code cached on disk)."""
    numba = import_numba("mh")
    global _ALIAS_BUILD, _REBUILD, _RNG_SEED, _UNIFORM, _MOVE
    # The sweep calls these by their module-level names, bound here before anything is compiled.
    _ALIAS_BUILD = _jit(numba, _alias_build)
    _REBUILD = _jit(numba, _rebuild_word_tables)
    _RNG_SEED = _jit(numba, _rng_seed)
    _UNIFORM = _jit(numba, _uniform, inline="always")
    _MOVE = _jit(numba, _move_token, inline="always")
    return {
        "alias_build": _ALIAS_BUILD,
        "alias_probabilities": _jit(numba, _alias_probabilities),
        "rng_seed": _RNG_SEED,
        "uniform": _UNIFORM,
        "rebuild": _REBUILD,
        "sweep": _jit(numba, _mh_sweep),
        "count_lgamma": _jit(numba, _count_lgamma_tokens),
    }
