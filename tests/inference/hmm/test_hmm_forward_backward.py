"""Forward–backward, Viterbi and FFBS against brute-force enumeration of every state path (exact tier), and
the scaled scan against the log-space recursion on long chains."""

import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from latentfs.inference.hmm.forward_backward import (
    ChainLayout,
    _compose_suffix,
    _sample_states_scan,
    forward_backward,
    forward_backward_log_sequential,
    log_joint_path,
    sample_states,
    viterbi_path,
)


def _random_hmm(k: int, n: int, seed: int, scale: float = 3.0):
    g = torch.Generator().manual_seed(seed)
    pi = torch.rand(k, generator=g, dtype=torch.float64) + 0.1
    a = torch.rand(k, k, generator=g, dtype=torch.float64) + 0.05
    log_em = scale * torch.randn(n, k, generator=g, dtype=torch.float64)
    return pi / pi.sum(), a / a.sum(1, keepdim=True), log_em


def _enumerate(pi, a, log_em):
    """All K^T paths of one sequence: log-likelihood, γ, Σξ and the log joint of each path."""
    t_len, k = log_em.shape
    paths = list(itertools.product(range(k), repeat=t_len))
    lp = torch.stack([
        torch.log(pi[p[0]]) + log_em[0, p[0]]
        + sum((torch.log(a[p[t - 1], p[t]]) + log_em[t, p[t]] for t in range(1, t_len)), torch.tensor(0.0))
        for p in paths
    ])
    ll = torch.logsumexp(lp, 0)
    w = torch.exp(lp - ll)
    gamma, xi = torch.zeros(t_len, k), torch.zeros(k, k)
    for p, wi in zip(paths, w, strict=True):
        for t in range(t_len):
            gamma[t, p[t]] += wi
        for t in range(1, t_len):
            xi[p[t - 1], p[t]] += wi
    return ll, gamma, xi, paths, lp


LENGTHS = [[5], [4, 1, 3], [2, 6, 1, 1]]


@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
@pytest.mark.parametrize("fb", [forward_backward, forward_backward_log_sequential], ids=["scan", "sequential"])
def test_forward_backward_equals_brute_force(lengths, fb):
    pi, a, log_em = _random_hmm(3, sum(lengths), seed=len(lengths))
    out = fb(pi, a, log_em, ChainLayout.from_lengths(lengths))
    start, xi_total = 0, torch.zeros(3, 3)
    for s, t_len in enumerate(lengths):
        ll, gamma, xi, _, _ = _enumerate(pi, a, log_em[start : start + t_len])
        assert float(out.log_likelihood[s]) == pytest.approx(float(ll), abs=1e-10)
        torch.testing.assert_close(out.gamma[start : start + t_len], gamma, atol=1e-10, rtol=0)
        xi_total += xi
        start += t_len
    torch.testing.assert_close(out.xi_sum, xi_total, atol=1e-10, rtol=0)


@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
def test_viterbi_equals_best_enumerated_path(lengths):
    pi, a, log_em = _random_hmm(3, sum(lengths), seed=10 + len(lengths))
    layout = ChainLayout.from_lengths(lengths)
    path = viterbi_path(pi, a, log_em, layout)
    start = 0
    for t_len in lengths:
        _, _, _, paths, lp = _enumerate(pi, a, log_em[start : start + t_len])
        assert tuple(path[start : start + t_len].tolist()) == paths[int(lp.argmax())]
        start += t_len
    best = log_joint_path(pi, a, log_em, layout, path)
    assert best.shape == (len(lengths),)


@pytest.mark.parametrize("k", [3, 6])
def test_scaled_scan_matches_log_recursion_on_long_chains(k):
    # 3000 rows take the blocked scan (> 2048); emissions spread over ±40 nats stress the scaling.
    lengths = [1200, 1, 1799]
    pi, a, log_em = _random_hmm(k, sum(lengths), seed=k, scale=12.0)
    layout = ChainLayout.from_lengths(lengths)
    fast = forward_backward(pi, a, log_em, layout)
    slow = forward_backward_log_sequential(pi, a, log_em, layout)
    torch.testing.assert_close(fast.log_likelihood, slow.log_likelihood, rtol=1e-12, atol=0)
    torch.testing.assert_close(fast.gamma, slow.gamma, atol=1e-10, rtol=0)
    torch.testing.assert_close(fast.xi_sum, slow.xi_sum, rtol=1e-9, atol=1e-9)


def test_viterbi_on_long_chain_scores_at_least_a_greedy_path():
    pi, a, log_em = _random_hmm(4, 3000, seed=5)
    layout = ChainLayout.from_lengths([3000])
    best = viterbi_path(pi, a, log_em, layout)
    greedy = log_em.argmax(1)
    marg = forward_backward(pi, a, log_em, layout).gamma.argmax(1)
    score = log_joint_path(pi, a, log_em, layout, best)
    assert float(score) >= float(log_joint_path(pi, a, log_em, layout, greedy))
    assert float(score) >= float(log_joint_path(pi, a, log_em, layout, marg))


def test_pointer_jumping_composes_maps_in_order():
    g = torch.Generator().manual_seed(0)
    maps = torch.randint(0, 4, (37, 4), generator=g)
    comp = _compose_suffix(maps)
    for j in (0, 5, 36):
        for x in range(4):
            y = x
            for t in range(36, j - 1, -1):
                y = int(maps[t, y])
            assert int(comp[j, x]) == y


def test_ffbs_draws_follow_the_exact_path_posterior():
    # One sequence of T = 4, K = 2 (16 paths) copied 6000 times: every copy is an independent FFBS draw,
    # which also exercises the resets between sequences. χ² goodness of fit, 15 df; the test fails by
    # chance with probability 1e-3 (fixed seed, so it is deterministic here).
    pi, a, log_em = _random_hmm(2, 4, seed=3, scale=1.0)
    _, _, _, paths, lp = _enumerate(pi, a, log_em)
    probs = torch.exp(lp - torch.logsumexp(lp, 0)).numpy()
    copies = 6000
    layout = ChainLayout.from_lengths([4] * copies)
    z, seq_ll = sample_states(pi, a, log_em.repeat(copies, 1), layout, torch.Generator().manual_seed(1))
    index = {p: i for i, p in enumerate(paths)}
    counts = np.bincount([index[tuple(r)] for r in z.reshape(copies, 4).tolist()], minlength=len(paths))
    chi2 = float(((counts - copies * probs) ** 2 / (copies * probs)).sum())
    assert chi2 < stats.chi2.ppf(1 - 1e-3, len(paths) - 1)
    # per-sequence values are differences of a cumulative sum over 24000 rows: rounding ~ 1e-16 × 1e4
    torch.testing.assert_close(seq_ll, torch.logsumexp(lp, 0).expand(copies), rtol=0, atol=1e-9)


@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
def test_forward_backward_with_subnormalised_parameters_equals_enumeration(lengths):
    # The VB E-step runs forward–backward with π̃ = exp E[log π] and Ã = exp E[log A], whose rows sum to
    # less than one (MacKay 1997; Beal 2003 §3.3): its normaliser Z̃ and marginals must still be those of
    # the enumerated unnormalised path weights.
    pi, a, log_em = _random_hmm(3, sum(lengths), seed=20 + len(lengths))
    g = torch.Generator().manual_seed(1)
    pi = pi * 0.7
    a = a * (0.5 + 0.4 * torch.rand(3, 1, generator=g, dtype=torch.float64))
    out = forward_backward(pi, a, log_em, ChainLayout.from_lengths(lengths))
    start, xi_total = 0, torch.zeros(3, 3)
    for s, t_len in enumerate(lengths):
        ll, gamma, xi, _, _ = _enumerate(pi, a, log_em[start : start + t_len])
        assert float(out.log_likelihood[s]) == pytest.approx(float(ll), abs=1e-10)
        torch.testing.assert_close(out.gamma[start : start + t_len], gamma, atol=1e-10, rtol=0)
        xi_total += xi
        start += t_len
    torch.testing.assert_close(out.xi_sum, xi_total, atol=1e-10, rtol=0)


def test_compiled_recursion_equals_the_log_space_recursion_on_ragged_sequences():
    # the CPU fast path (numba, sequential, scaled) against the textbook log-space recursion: sequences of
    # lengths 7, 1, 12 and 3 (a length-1 sequence has no transition), log densities spread over ±9 nats
    from latentfs.inference.hmm import forward_backward as fbm
    from latentfs.inference.hmm.compiled import compiled_forward_backward

    rng = np.random.default_rng(0)
    k, lengths = 4, [7, 1, 12, 3]
    n = sum(lengths)
    is_start = np.zeros(n, dtype=bool)
    is_start[np.cumsum([0, *lengths[:-1]])] = True
    log_em = torch.tensor(rng.normal(size=(n, k)) * 3)
    pi = torch.tensor(rng.dirichlet(np.ones(k)))
    A = torch.tensor(rng.dirichlet(np.ones(k), size=k))
    starts = torch.tensor(np.flatnonzero(is_start))
    ends = torch.tensor(np.r_[np.flatnonzero(is_start)[1:] - 1, n - 1])
    layout = fbm.ChainLayout(torch.tensor(is_start), starts, ends)
    ref = fbm.forward_backward_log_sequential(pi, A, log_em, layout)
    filtered, gamma, xi, loglik = compiled_forward_backward(log_em.numpy(), pi.numpy(), A.numpy(), is_start)
    np.testing.assert_allclose(loglik, ref.log_likelihood.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gamma, ref.gamma.numpy(), atol=1e-12)
    np.testing.assert_allclose(xi, ref.xi_sum.numpy(), atol=1e-12)
    np.testing.assert_allclose(filtered, ref.filtered.numpy(), atol=1e-12)
    # a state sequence the transition matrix forbids makes every forward entry zero: no answer, and the
    # public function falls back to the log-space recursion (-inf log-likelihood, not NaN)
    A0 = torch.eye(k, dtype=torch.float64)
    log_em0 = torch.full((3, k), -1e6, dtype=torch.float64)
    log_em0[0, 0] = log_em0[1, 1] = log_em0[2, 2] = 0.0
    one = fbm.ChainLayout(torch.tensor([True, False, False]), torch.tensor([0]), torch.tensor([2]))
    assert compiled_forward_backward(log_em0.numpy(), pi.numpy(), A0.numpy(), np.array([True, False, False])) is None
    assert not bool(torch.isnan(fbm.forward_backward(pi, A0, log_em0, one).log_likelihood).any())


def test_compiled_ffbs_draws_the_scan_path_from_the_same_uniforms():
    # The CPU float64 path (compiled recursion) and the torch scan use the same uniforms and the same
    # inverse-CDF rule; their filtered probabilities differ in the last bits only, so for a fixed seed the
    # paths agree state for state (a flip needs a uniform within ~1e-15 of a cumulative weight) and the
    # per-sequence log-likelihoods to rounding. The scan path is what the CPU used before the compiled one.
    pi, a, log_em = _random_hmm(4, 3000, seed=7)
    layout = ChainLayout.from_lengths([1000, 1, 1500, 499])
    fast, fast_ll = sample_states(pi, a, log_em, layout, torch.Generator().manual_seed(3))
    u = torch.rand(3000, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    scan, scan_ll = _sample_states_scan(pi, a, log_em, layout, u)
    assert fast.dtype == scan.dtype == torch.long and int((fast != scan).sum()) == 0
    assert len(set(fast.tolist())) == 4  # every state visited: the comparison is not vacuous
    torch.testing.assert_close(fast_ll, scan_ll, rtol=1e-10, atol=1e-8)
