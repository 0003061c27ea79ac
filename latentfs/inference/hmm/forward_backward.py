"""Forward–backward, Viterbi and forward-filtering backward-sampling for hidden Markov chains, in torch.

All sequences are handled as **one chain** over the N concatenated observations: at the first row of a
sequence the transition matrix A is replaced by the rank-one matrix 1 πᵀ (every row is π), which makes
the state there independent of the past. The chain's likelihood is then the product of the
sequences' likelihoods, and its posterior marginals are theirs (the "reset" rows carry no transition).

With M_t = A_t diag(b_t) (A_t = A, or 1 πᵀ at a reset; b_t the emission densities, Titterington 2006
§1.4 / Rabiner 1989) the forward vectors are α_t = α_1 M_2 ⋯ M_t and the backward vectors
β_t = M_{t+1} ⋯ M_N 1. Instead of a Python loop over time, the prefix and suffix products are computed by a
Hillis–Steele scan (⌈log₂ N⌉ batched matrix products, Hillis & Steele 1986; Särkkä & García-Fernández
2021 for its use in HMMs), in chunks so that memory stays bounded:

* **scaling**: emission log-densities are shifted by their maximum at each t before exponentiation, and
  every matrix product is divided by its largest entry, the logarithms of the factors being carried
  alongside (the scaled forward–backward of Rabiner 1989, eqs. 91–93, applied to products). A state whose
  density is below e^−745 times the best state's at some t is flushed to zero there, as in Rabiner's
  scaling; if that ever zeroes a whole normaliser the log-space sequential recursion
  (:func:`forward_backward_log_sequential`) is used instead.
* **Viterbi** uses the same scan in the (max, +) semiring, and its back-pointers are followed by pointer
  jumping (composition of maps {1..K} → {1..K} is associative);
* **FFBS** (forward filtering, backward sampling; Frühwirth-Schnatter 1994, Chib 1996) draws all
  uniforms first, so that the backward pass z_t = f_t(z_{t+1}) is again a composition of maps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = [
    "ChainLayout",
    "ForwardBackward",
    "forward_backward",
    "forward_backward_log_sequential",
    "forward_filter",
    "sample_states",
    "viterbi_path",
    "log_joint_path",
    "total_log_likelihood",
]

_TINY = 1e-300


@dataclass(frozen=True)
class ChainLayout:
    """Where the sequences start in the concatenated chain.

    Attributes
    ----------
    is_start : (N,) bool, True on the first row of each sequence.
    starts, ends : (n_sequences,) long, first and last row of each sequence.
    """

    is_start: torch.Tensor
    starts: torch.Tensor
    ends: torch.Tensor

    @classmethod
    def from_lengths(cls, lengths: torch.Tensor | list[int]) -> ChainLayout:
        lens = torch.as_tensor(lengths, dtype=torch.long)
        ends = torch.cumsum(lens, 0) - 1
        starts = ends - lens + 1
        is_start = torch.zeros(int(lens.sum()), dtype=torch.bool)
        is_start[starts] = True
        return cls(is_start, starts, ends)

    @property
    def n(self) -> int:
        return int(self.is_start.shape[0])

    def to(self, device: torch.device | str | None) -> ChainLayout:
        """The same layout with its tensors on ``device`` (None: unchanged)."""
        if device is None:
            return self
        return ChainLayout(self.is_start.to(device), self.starts.to(device), self.ends.to(device))


@dataclass
class ForwardBackward:
    """What :func:`forward_backward` returns.

    Attributes
    ----------
    log_likelihood : (n_sequences,) log f(y_s | θ) of each sequence.
    gamma : (N, K) posterior state marginals P(z_t = k | y) (γ_t in Rabiner 1989).
    xi_sum : (K, K) Σ_t P(z_{t−1} = k, z_t = l | y) over the transitions inside sequences (Σ ξ_t).
    filtered : (N, K) filtered P(z_t = k | y_1..y_t) (rows of α_t normalised).
    """

    log_likelihood: torch.Tensor
    gamma: torch.Tensor
    xi_sum: torch.Tensor
    filtered: torch.Tensor


# ----------------------------------------------------------------------------- scans
def _normalise(mats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Divide each (K, K) matrix by its largest entry, in place; return it and the log of that entry."""
    top = mats.reshape(mats.shape[0], -1).amax(1).clamp_min_(_TINY)
    return mats.div_(top[:, None, None]), top.log_()


def _prefix_products(mats: torch.Tensor, logs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inclusive prefix products P_j = M_0 ⋯ M_j, each scaled to a largest entry of one, with log scales.

    Short chains use the Hillis–Steele scan (fewest Python-level operations), long ones the blocked scan
    (least work); the switch point was measured on one CPU core.
    """
    if mats.shape[0] <= _HILLIS_STEELE_MAX:
        return _prefix_hillis_steele(mats, logs)
    return _prefix_blocked(mats, logs)


_HILLIS_STEELE_MAX = 2048


def _prefix_hillis_steele(mats: torch.Tensor, logs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hillis & Steele (1986): after the pass with offset d, P_j covers M_{j−2d+1..j}; ⌈log₂ n⌉ passes."""
    n, d = mats.shape[0], 1
    while d < n:
        prod, scale = _normalise(torch.matmul(mats[:-d], mats[d:]))
        mats = torch.cat([mats[:d], prod])
        logs = torch.cat([logs[:d], logs[:-d] + logs[d:] + scale])
        d *= 2
    return mats, logs


def _prefix_blocked(mats: torch.Tensor, logs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Blocked two-level scan: the n matrices are cut into B ≈ √n blocks of L; the products within every
    block are accumulated step by step for all blocks at once (L batched products), the block totals are
    chained (B small products), and one batched product joins the two. That is O(n K³) work in O(√n)
    Python-level operations (a Hillis–Steele scan would need O(n log n K³)).
    """
    n, k = mats.shape[0], mats.shape[-1]
    if n <= 2:
        out, out_logs = mats.clone(), logs.clone()
        if n == 2:
            out[1], s = _normalise(out[0:1] @ out[1:2])
            out_logs[1] = logs[0] + logs[1] + s[0]
        return out, out_logs
    length = max(2, int(math.ceil(math.sqrt(n))))
    blocks = -(-n // length)
    pad = blocks * length - n
    if pad:
        eye = torch.eye(k, dtype=mats.dtype, device=mats.device).expand(pad, k, k)
        mats = torch.cat([mats, eye])
        logs = torch.cat([logs, logs.new_zeros(pad)])
    # Time-major layout (L, B, K, K) so that each step writes one contiguous slab.
    m = mats.reshape(blocks, length, k, k).transpose(0, 1).contiguous()
    lg = logs.reshape(blocks, length).T.contiguous()
    local = torch.empty_like(m)
    local[0] = m[0]
    for j in range(1, length):
        torch.matmul(local[j - 1], m[j], out=local[j])
        _, s = _normalise(local[j])
        lg[j].add_(lg[j - 1]).add_(s)
    local = local.transpose(0, 1)
    local_logs = lg.T
    # Exclusive products of the block totals: E_b = T_0 ⋯ T_{b−1}.
    before = mats.new_empty(blocks, k, k)
    before_logs = mats.new_zeros(blocks)
    before[0] = torch.eye(k, dtype=mats.dtype, device=mats.device)
    for b in range(1, blocks):
        cur, s = _normalise(torch.matmul(before[b - 1], local[b - 1, -1])[None])
        before[b] = cur[0]
        before_logs[b] = before_logs[b - 1] + local_logs[b - 1, -1] + s[0]
    full, s = _normalise(torch.matmul(before[:, None], local).reshape(-1, k, k))
    full_logs = (before_logs[:, None] + local_logs).reshape(-1) + s
    return full[:n], full_logs[:n]


def _suffix_products(mats: torch.Tensor, logs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inclusive suffix products Q_j = M_j ⋯ M_{n−1}, scaled, with log scales: Q_jᵀ is a prefix product of
    the reversed, transposed sequence."""
    rev, rev_logs = _prefix_products(mats.flip(0).transpose(-1, -2), logs.flip(0))
    return rev.flip(0).transpose(-1, -2), rev_logs.flip(0)


def _maxplus(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """(L ⊗ R)_ij = max_m L_im + R_mj, batched; looped over m to keep memory at (n, K, K)."""
    out = left[:, :, :1] + right[:, :1, :]
    for m in range(1, left.shape[-1]):
        torch.maximum(out, left[:, :, m : m + 1] + right[:, m : m + 1, :], out=out)
    return out


def _maxplus_prefix(mats: torch.Tensor) -> torch.Tensor:
    """Inclusive (max, +) prefix products, each shifted so its largest entry is 0 (argmaxes unchanged)."""
    n, d = mats.shape[0], 1
    while d < n:
        prod = _maxplus(mats[:-d], mats[d:])
        top = prod.amax(dim=(-2, -1), keepdim=True)
        prod = prod - torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        mats = torch.cat([mats[:d], prod])
        d *= 2
    return mats


def _compose_suffix(maps: torch.Tensor) -> torch.Tensor:
    """G_j = f_j ∘ f_{j+1} ∘ ⋯ ∘ f_{n−1} for maps f_j given as (n, K) long tables (pointer jumping)."""
    n, d = maps.shape[0], 1
    while d < n:
        maps = torch.cat([torch.gather(maps[:-d], 1, maps[d:]), maps[-d:]])
        d *= 2
    return maps


def _chunk_size(k: int, budget: int = 1 << 21) -> int:
    """Rows per chunk so that a (rows, K, K) float64 buffer stays near ``budget`` entries."""
    return max(256, budget // max(k * k, 1))


# ----------------------------------------------------------------------------- building blocks
def _scaled_emissions(log_emission: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """b_t = exp(log g(y_t) − m_t) with m_t = max_k log g_k(y_t); returns (b, m)."""
    m = log_emission.amax(1)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return torch.exp(log_emission - m[:, None]), m


def _transfer(
    startprob: torch.Tensor, transmat: torch.Tensor, b: torch.Tensor, reset: torch.Tensor
) -> torch.Tensor:
    """M_t = A_t diag(b_t) for rows 1..N−1 of a chunk: A_t = A, or 1 πᵀ where a sequence starts."""
    mats = transmat.expand(b.shape[0], -1, -1).clone()
    if bool(reset.any()):
        mats[reset] = startprob.expand(mats.shape[-1], -1)
    return mats.mul_(b[:, None, :])


def forward_filter(
    startprob: torch.Tensor, transmat: torch.Tensor, log_emission: torch.Tensor, layout: ChainLayout
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Filtered state probabilities and cumulative log normalisers.

    Returns ``filtered`` (N, K) (rows of α_t normalised), ``log_norm`` (N,) = log Σ_k α_t(k) (the log
    likelihood of the chain's first t+1 rows), and the scaled emissions ``b`` (N, K).
    """
    n, k = log_emission.shape
    b, shift = _scaled_emissions(log_emission)
    filtered = b.new_empty(n, k)
    log_norm = b.new_empty(n)
    a0 = startprob * b[0]
    s0 = a0.sum()
    filtered[0] = a0 / s0 if float(s0) > 0 else a0
    log_norm[0] = torch.log(s0)
    carry, carry_log = filtered[0], log_norm[0]
    size = _chunk_size(k)
    for lo in range(1, n, size):
        hi = min(n, lo + size)
        mats, logs = _normalise(_transfer(startprob, transmat, b[lo:hi], layout.is_start[lo:hi]))
        mats, logs = _prefix_products(mats, logs)
        alpha = torch.einsum("k,tkl->tl", carry, mats)
        tot = alpha.sum(1)
        filtered[lo:hi] = alpha / tot.clamp_min(_TINY)[:, None]
        log_norm[lo:hi] = carry_log + logs + torch.log(tot)
        carry, carry_log = filtered[hi - 1], log_norm[hi - 1]
    return filtered, log_norm + torch.cumsum(shift, 0), b


def _sequence_log_likelihood(log_norm: torch.Tensor, layout: ChainLayout) -> torch.Tensor:
    """log f(y_s) = c_{end_s} − c_{end_{s−1}}: the chain's log normalisers differ by one sequence each."""
    at_end = log_norm[layout.ends]
    return torch.diff(at_end, prepend=at_end.new_zeros(1))


def _backward(transmat: torch.Tensor, startprob: torch.Tensor, b: torch.Tensor, layout: ChainLayout) -> torch.Tensor:
    """β_t up to a positive factor per t (rows scaled to sum one): β_t = M_{t+1} ⋯ M_N 1."""
    n, k = b.shape
    beta = b.new_empty(n, k)
    beta[n - 1] = 1.0 / k
    carry = beta[n - 1]
    size = _chunk_size(k)
    hi = n
    while hi > 1:
        lo = max(1, hi - size)
        mats, logs = _normalise(_transfer(startprob, transmat, b[lo:hi], layout.is_start[lo:hi]))
        mats, _ = _suffix_products(mats, logs)
        vec = mats @ carry  # β_{t} for t = lo−1 .. hi−2
        beta[lo - 1 : hi - 1] = vec / vec.sum(1, keepdim=True).clamp_min(_TINY)
        carry = beta[lo - 1]
        hi = lo
    return beta


def forward_backward(
    startprob: torch.Tensor, transmat: torch.Tensor, log_emission: torch.Tensor, layout: ChainLayout
) -> ForwardBackward:
    """Posterior marginals γ_t, summed pair marginals Σ ξ_t and per-sequence log-likelihoods.

    Parameters
    ----------
    startprob : (K,) π; transmat : (K, K) A; log_emission : (N, K) log g_k(y_t); layout : sequence starts.

    Notes
    -----
    On the CPU in float64 the compiled sequential recursion of :mod:`.compiled` computes the same quantities
    (O(N K²), no per-step overhead); elsewhere the scans below.
    γ_t(k) ∝ α_t(k) β_t(k) and ξ_t(k, l) ∝ α_{t−1}(k) A_kl b_t(l) β_t(l) (Rabiner 1989, eqs. 27 and 37),
    each normalised per t, so any per-t scaling of α and β cancels. Σ_t ξ_t is one GEMM:
    A ⊙ (Uᵀ W) with U_t = α_{t−1}, W_t = b_t ⊙ β_t / (U_tᵀ A (b_t ⊙ β_t)).
    """
    if log_emission.device.type == "cpu" and log_emission.dtype == torch.float64 and log_emission.shape[0] > 0:
        from latentfs.inference.hmm.compiled import compiled_forward_backward

        out = compiled_forward_backward(log_emission.numpy(), startprob.detach().numpy(),
                                        transmat.detach().numpy(), layout.is_start.numpy())
        if out is not None:
            filtered_np, gamma_np, xi_np, loglik_np = out
            return ForwardBackward(torch.from_numpy(loglik_np), torch.from_numpy(gamma_np), torch.from_numpy(xi_np),
                                   torch.from_numpy(filtered_np))
    filtered, log_norm, b = forward_filter(startprob, transmat, log_emission, layout)
    beta = _backward(transmat, startprob, b, layout)
    prod = filtered * beta
    z = prod.sum(1, keepdim=True)
    if not bool(torch.isfinite(log_norm[-1])) or not bool((z > 0).all()):
        return forward_backward_log_sequential(startprob, transmat, log_emission, layout)
    gamma = prod / z
    u = filtered[:-1]
    w = b[1:] * beta[1:]
    norm = ((u @ transmat) * w).sum(1)
    inside = ~layout.is_start[1:]
    if not bool((norm[inside] > 0).all()):
        return forward_backward_log_sequential(startprob, transmat, log_emission, layout)
    w = w * (inside / norm.clamp_min(_TINY))[:, None]
    xi_sum = transmat * (u.T @ w)
    return ForwardBackward(_sequence_log_likelihood(log_norm, layout), gamma, xi_sum, filtered)


def forward_backward_log_sequential(
    startprob: torch.Tensor, transmat: torch.Tensor, log_emission: torch.Tensor, layout: ChainLayout
) -> ForwardBackward:
    """The same quantities by the textbook log-space recursions, one time step at a time (slow; the fallback
    when scaling underflows, and a second implementation for tests)."""
    n, k = log_emission.shape
    log_pi = torch.log(startprob.clamp_min(0.0))
    log_a = torch.log(transmat.clamp_min(0.0))
    la = log_emission.new_empty(n, k)
    la[0] = log_pi + log_emission[0]
    for t in range(1, n):
        if bool(layout.is_start[t]):
            la[t] = torch.logsumexp(la[t - 1], 0) + log_pi + log_emission[t]
        else:
            la[t] = torch.logsumexp(la[t - 1][:, None] + log_a, 0) + log_emission[t]
    lb = log_emission.new_zeros(n, k)
    for t in range(n - 2, -1, -1):
        nxt = log_emission[t + 1] + lb[t + 1]
        if bool(layout.is_start[t + 1]):
            lb[t] = torch.logsumexp(log_pi + nxt, 0).expand(k)
        else:
            lb[t] = torch.logsumexp(log_a + nxt[None, :], 1)
    log_norm = torch.logsumexp(la, 1)
    gamma = torch.softmax(la + lb, 1)
    pair = la[:-1, :, None] + log_a[None] + (log_emission[1:] + lb[1:])[:, None, :]
    pair = pair - torch.logsumexp(pair.reshape(n - 1, -1), 1)[:, None, None]
    inside = ~layout.is_start[1:]
    xi_sum = torch.exp(pair[inside]).sum(0) if n > 1 else log_emission.new_zeros(k, k)
    filtered = torch.softmax(la, 1)
    return ForwardBackward(_sequence_log_likelihood(log_norm, layout), gamma, xi_sum, filtered)


# ----------------------------------------------------------------------------- Viterbi
def viterbi_path(
    startprob: torch.Tensor, transmat: torch.Tensor, log_emission: torch.Tensor, layout: ChainLayout
) -> torch.Tensor:
    """The most probable state path argmax_z p(z | y) (Viterbi 1967), (N,) long, per sequence.

    δ_t = δ_1 ⊗ L_2 ⊗ ⋯ ⊗ L_t in the (max, +) semiring with L_t = log A_t + log b_t; back-pointers
    ψ_t(l) = argmax_k δ_{t−1}(k) + L_t(k, l) are then composed by pointer jumping.
    """
    n, k = log_emission.shape
    log_pi = torch.log(startprob.clamp_min(0.0))
    log_a = torch.log(transmat.clamp_min(0.0))
    size = _chunk_size(k, budget=1 << 20)
    delta = log_emission.new_empty(n, k)
    delta[0] = log_pi + log_emission[0]
    carry = delta[0] - delta[0].max()
    pointers = torch.empty(max(n - 1, 0), k, dtype=torch.long, device=log_emission.device)
    for lo in range(1, n, size):
        hi = min(n, lo + size)
        mats = log_a.expand(hi - lo, -1, -1).clone()
        reset = layout.is_start[lo:hi]
        if bool(reset.any()):
            mats[reset] = log_pi.expand(k, -1)
        mats = mats + log_emission[lo:hi, None, :]
        prev = torch.cat([carry[None], mats.new_empty(hi - lo - 1, k)]) if hi - lo > 1 else carry[None]
        prefix = _maxplus_prefix(mats.clone())
        here = (carry[:, None] + prefix).amax(1)
        if hi - lo > 1:
            prev[1:] = here[:-1]
        pointers[lo - 1 : hi - 1] = (prev[:, :, None] + mats).argmax(1)
        delta[lo:hi] = here
        carry = here[-1] - here[-1].max()
    last = delta[n - 1].argmax()
    if n == 1:
        return last.reshape(1)
    maps = _compose_suffix(pointers)
    path = torch.empty(n, dtype=torch.long, device=log_emission.device)
    path[n - 1] = last
    path[:-1] = maps[:, last]
    return path


def log_joint_path(
    startprob: torch.Tensor,
    transmat: torch.Tensor,
    log_emission: torch.Tensor,
    layout: ChainLayout,
    path: torch.Tensor,
) -> torch.Tensor:
    """log p(y, z = path | θ) per sequence: log π_{z_1} + Σ log A_{z_{t−1} z_t} + Σ log g_{z_t}(y_t)."""
    n = path.shape[0]
    terms = log_emission[torch.arange(n, device=path.device), path].clone()
    log_pi = torch.log(startprob.clamp_min(0.0))
    log_a = torch.log(transmat.clamp_min(0.0))
    trans = torch.where(layout.is_start[1:], log_pi[path[1:]], log_a[path[:-1], path[1:]])
    terms[1:] += trans
    terms[0] += log_pi[path[0]]
    seq = torch.cumsum(layout.is_start.long(), 0) - 1
    return terms.new_zeros(layout.starts.shape[0]).index_add_(0, seq, terms)


# ----------------------------------------------------------------------------- FFBS
def sample_states(
    startprob: torch.Tensor,
    transmat: torch.Tensor,
    log_emission: torch.Tensor,
    layout: ChainLayout,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One draw z ~ p(z | y, θ) by forward filtering, backward sampling; also the per-sequence log-likelihoods.

    z_N ~ α_N; z_t | z_{t+1} = l ~ α_t(k) A_{t+1}(k, l) (normalised over k). All uniforms are drawn first,
    so the backward pass is a composition of maps f_t(l) = F_{t,l}⁻¹(u_t) (pointer jumping). On the CPU in
    float64 the compiled sequential recursion of :mod:`.compiled` draws the same way from the same uniforms
    (the filtered probabilities differ from the scan's in the last bits only).
    """
    n = log_emission.shape[0]
    if log_emission.device.type == "cpu" and log_emission.dtype == torch.float64 and n > 0:
        from latentfs.inference.hmm.compiled import compiled_sample_states

        u64 = torch.rand(n, generator=generator, dtype=torch.float64)
        out = compiled_sample_states(log_emission.numpy(), startprob.detach().numpy(), transmat.detach().numpy(),
                                     layout.is_start.numpy(), u64.numpy())
        if out is not None:
            return torch.from_numpy(out[0]), torch.from_numpy(out[1])
        return _sample_states_scan(startprob, transmat, log_emission, layout, u64)
    return _sample_states_scan(startprob, transmat, log_emission, layout, None, generator)


def _sample_states_scan(
    startprob: torch.Tensor,
    transmat: torch.Tensor,
    log_emission: torch.Tensor,
    layout: ChainLayout,
    u: torch.Tensor | None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`sample_states` by the torch scans, with the uniforms ``u`` (drawn from ``generator`` if None)."""
    filtered, log_norm, _ = forward_filter(startprob, transmat, log_emission, layout)
    n, k = filtered.shape
    if u is None:
        u = torch.rand(n, generator=generator, dtype=filtered.dtype)
    last = torch.searchsorted(torch.cumsum(filtered[n - 1], 0), u[n - 1:]).clamp_max(k - 1)
    path = torch.empty(n, dtype=torch.long)
    path[n - 1] = last[0]
    if n > 1:
        maps = torch.empty(n - 1, k, dtype=torch.long)
        size = _chunk_size(k)
        for lo in range(0, n - 1, size):
            hi = min(n - 1, lo + size)
            # weights[t, l, k] = α_t(k) A_{t+1}(k, l); at a reset A_{t+1}(k, l) = π_l, which cancels.
            trans = transmat.T.expand(hi - lo, -1, -1).clone()
            reset = layout.is_start[lo + 1 : hi + 1]
            if bool(reset.any()):
                trans[reset] = 1.0
            weights = trans * filtered[lo:hi, None, :]
            cdf = torch.cumsum(weights, 2)
            cdf = cdf / cdf[:, :, -1:].clamp_min(_TINY)
            maps[lo:hi] = (cdf < u[lo:hi, None, None]).sum(2).clamp_max(k - 1)
        comp = _compose_suffix(maps)
        path[:-1] = comp[:, path[n - 1]]
    return path, _sequence_log_likelihood(log_norm, layout)


def total_log_likelihood(fb: ForwardBackward) -> float:
    """Σ_s log f(y_s | θ)."""
    return float(fb.log_likelihood.sum())

