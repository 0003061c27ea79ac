"""Exact tier for the DCA engines: identities that hold to rounding error (digest §1.10, oracles 1–5, 8).

Every hand-written formula is tied to the declared Pyro model (DESIGN.md contract 1) or to a direct
computation by enumeration over the latent counts V of tiny documents.
"""

import itertools
import math

import numpy as np
import pytest
import torch

from latentfs.inference.dca.common import doc_loglik, log_joint, prepare, resolve_model
from latentfs.inference.dca.gibbs import (
    GibbsState,
    check_count_invariants,
    count_assignments,
    gibbs_init,
    gibbs_step,
    sample_assignments,
    sample_doc_latent,
    token_index,
)
from latentfs.inference.dca.gibbs import _hyper as gibbs_hyper
from latentfs.inference.dca.vb import (
    _hyper,
    expected_log_doc,
    expected_log_theta,
    vb_doc_bound,
    vb_init,
    vb_step,
)
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA, MultinomialCounts
from latentfs.testing import pyro_log_density

TINY_X = np.array([[2, 1, 0], [0, 1, 3], [1, 1, 1]])  # J = 3, L ≤ 4: V is enumerable


def _rand_simplex(rng, *shape):
    x = rng.gamma(1.0, size=shape)
    return x / x.sum(-1, keepdims=True)


def _models():
    return [
        DirichletDCA(2, alpha=[0.7, 1.3], gamma=[0.5, 0.8, 1.1]),
        GammaPoissonDCA(2, alpha=[0.7, 1.3], beta=[0.4, 0.9], gamma=[0.5, 0.8, 1.1]),
    ]


@pytest.mark.parametrize("model", _models(), ids=["dm", "gap"])
def test_log_joint_equals_pyro_trace(model, rng):
    data = prepare(TINY_X)
    theta = torch.as_tensor(_rand_simplex(rng, 2, 3))
    if isinstance(model, DirichletDCA):
        latent = torch.as_tensor(_rand_simplex(rng, 3, 2))
    else:
        latent = torch.as_tensor(rng.gamma(2.0, size=(3, 2)))
    values = {"topic_word": theta, model.doc_site: latent}
    expected = pyro_log_density(model.model, values, torch.as_tensor(TINY_X, dtype=torch.float64))
    got = float(log_joint(model, data, theta, latent))
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-10)


def test_multinomial_counts_matches_torch_multinomial(rng):
    probs = torch.as_tensor(_rand_simplex(rng, 4))
    w = torch.tensor([2.0, 0.0, 3.0, 1.0])
    ours = MultinomialCounts(torch.tensor(6.0), probs).log_prob(w)
    ref = torch.distributions.Multinomial(6, probs).log_prob(w)
    assert torch.allclose(ours, ref, rtol=1e-12)
    assert MultinomialCounts(torch.tensor(5.0), probs).log_prob(w) == -math.inf


def _splits(w, K):
    """All ways to split a count w into K non-negative parts."""
    if K == 1:
        yield (w,)
        return
    for first in range(w + 1):
        for rest in _splits(w - first, K - 1):
            yield (first, *rest)


def _exact_log_marginal(model, theta, w):
    """log p(w | Θ) of one document by summing eq. (12) (DM) or eq. (7) (GaP) over every V."""
    K = theta.shape[0]
    alpha = model.alpha
    per_word = [list(_splits(int(wj), K)) for wj in w]
    total = -math.inf
    for V in itertools.product(*per_word):
        V = np.array(V, dtype=float)  # (J, K)
        c = V.sum(0)
        term = np.sum(V.T * np.log(theta)) - np.sum([math.lgamma(v + 1) for v in V.ravel()])
        term += sum(math.lgamma(ck + ak) - math.lgamma(ak) for ck, ak in zip(c, alpha, strict=True))
        if isinstance(model, DirichletDCA):
            L = w.sum()
            term += math.lgamma(L + 1) + math.lgamma(alpha.sum()) - math.lgamma(L + alpha.sum())
        else:
            b = model.beta
            term += np.sum(alpha * np.log(b) - (c + alpha) * np.log1p(b))
        total = np.logaddexp(total, term)
    return total


def _direct_elbo(model, theta, w, a):
    """E_q[log p(latent, V, w | Θ)] + H(q), with q(V) = ∏_j Mult(w_j, n*_j(a)), enumerated over V."""
    hyper = {"alpha": torch.as_tensor(model.alpha)}
    if isinstance(model, GammaPoissonDCA):
        hyper["beta"] = torch.as_tensor(model.beta)
    a_t = torch.as_tensor(a)
    elog = expected_log_doc(model, a_t[None], hyper)[0].numpy()
    n = theta.T * np.exp(elog)[None, :]  # (J, K)
    n = n / n.sum(1, keepdims=True)
    alpha = model.alpha
    K = theta.shape[0]
    exp_v_log_fact = 0.0
    entropy_v = 0.0
    exp_c = np.zeros(K)
    exp_v_log_theta = 0.0
    for j, wj in enumerate(w):
        for split in _splits(int(wj), K):
            v = np.array(split, dtype=float)
            logq = math.lgamma(wj + 1) - sum(math.lgamma(x + 1) for x in v) + np.sum(v * np.log(n[j]))
            q = math.exp(logq)
            exp_v_log_fact += q * sum(math.lgamma(x + 1) for x in v)
            entropy_v -= q * logq
            exp_c += q * v
            exp_v_log_theta += q * np.sum(v * np.log(theta[:, j]))
    if isinstance(model, DirichletDCA):
        q_doc = torch.distributions.Dirichlet(a_t)
        prior = torch.distributions.Dirichlet(torch.as_tensor(alpha))
        e_log_prior = float(
            torch.lgamma(prior.concentration.sum()) - torch.lgamma(prior.concentration).sum()
            + ((prior.concentration - 1) * torch.as_tensor(elog)).sum()
        )
        # p(V | m, L) = L! / ∏ v! ∏ (m_k θ_jk)^v
        e_log_lik = math.lgamma(w.sum() + 1) - exp_v_log_fact + exp_v_log_theta + np.sum(exp_c * elog)
    else:
        b = 1 + model.beta
        q_doc = torch.distributions.Gamma(a_t, torch.as_tensor(b))
        beta = model.beta
        mean_l = a / b
        e_log_prior = float(np.sum(alpha * np.log(beta) - np.array([math.lgamma(x) for x in alpha])
                                   + (alpha - 1) * elog - beta * mean_l))
        # p(c, V | l) = ∏_k e^{-l_k} l_k^{c_k} ∏_j θ^v / v!
        e_log_lik = np.sum(exp_c * elog) - mean_l.sum() + exp_v_log_theta - exp_v_log_fact
    return e_log_prior + e_log_lik + float(q_doc.entropy().sum()) + entropy_v


@pytest.mark.parametrize("model", _models(), ids=["dm", "gap"])
def test_vb_bound_equals_direct_elbo_for_arbitrary_a_and_never_exceeds_log_marginal(model, rng):
    data = prepare(TINY_X)
    hyper = _hyper(model, data)
    theta = _rand_simplex(rng, 2, 3)
    a = rng.gamma(2.0, size=(3, 2)) + 0.1  # arbitrary, not a fixed point
    a_t = torch.as_tensor(a)
    elog = expected_log_doc(model, a_t, hyper)
    z = data.rates_at_nonzeros(torch.exp(elog), torch.as_tensor(theta))
    bounds = vb_doc_bound(model, data, a_t, elog, torch.log(z), hyper).numpy()
    for i, w in enumerate(TINY_X):
        direct = _direct_elbo(model, theta, w.astype(float), a[i])
        assert bounds[i] == pytest.approx(direct, rel=1e-10, abs=1e-10)
        assert bounds[i] <= _exact_log_marginal(model, theta, w.astype(float)) + 1e-12


@pytest.mark.parametrize("model", _models(), ids=["dm", "gap"])
def test_bound_is_tight_when_components_have_disjoint_supports(model):
    data = prepare(TINY_X)
    hyper = _hyper(model, data)
    theta = np.array([[0.6, 0.4, 0.0], [0.0, 0.0, 1.0]]) + 0.0
    theta_t = torch.as_tensor(np.where(theta > 0, theta, 1e-300))
    a = torch.full((3, 2), 0.5)
    for _ in range(300):  # iterate the document updates to their fixed point, Θ fixed
        elog = expected_log_doc(model, a, hyper)
        z = data.rates_at_nonzeros(torch.exp(elog), theta_t)
        a = hyper["alpha"] + torch.exp(elog) * (data.csr(data.values / z) @ theta_t.T)
    elog = expected_log_doc(model, a, hyper)
    z = data.rates_at_nonzeros(torch.exp(elog), theta_t)
    bounds = vb_doc_bound(model, data, a, elog, torch.log(z), hyper).numpy()
    # With disjoint supports q(V) is exact, but q(latent) still differs from the true posterior
    # unless it is conjugate given c: then the bound equals log p(w) exactly.
    for i, w in enumerate(TINY_X):
        assert bounds[i] == pytest.approx(_exact_log_marginal(model, np.where(theta > 0, theta, 1e-300), w.astype(float)), abs=1e-8)


@pytest.mark.parametrize("theta_update", ["chapter", "map", "full"])
@pytest.mark.parametrize("model", _models(), ids=["dm", "gap"])
def test_vb_step_invariants_and_monotone_objective(model, theta_update):
    X = DirichletDCA(2, alpha=0.5).simulate(30, 12, doc_length=25, seed=4)["counts"]
    data = prepare(X)
    model = resolve_model(model if model.gamma.ndim == 0 else type(model)(2, alpha=model.alpha, **_beta(model)), data)
    hyper = _hyper(model, data)
    state = vb_init(model, data, torch.Generator().manual_seed(0), theta_update)
    previous = -math.inf
    for _ in range(40):
        new, objective, _ = vb_step(model, data, state, hyper, theta_update)
        # Σ_k a_k = Σα + L after each update (digest §1.6.1)
        assert torch.allclose(new.doc_shape.sum(1), hyper["alpha"].sum() + data.doc_lengths, rtol=1e-12)
        assert objective >= previous - 1e-9 * abs(objective)
        previous, state = objective, new


def _beta(model):
    return {"beta": model.beta} if isinstance(model, GammaPoissonDCA) else {}


def test_gap_and_dm_vb_iterates_identical_with_common_beta():
    X = DirichletDCA(3, alpha=0.3).simulate(25, 15, doc_length=30, seed=2)["counts"]
    data = prepare(X)
    dm = DirichletDCA(3, alpha=[0.2, 0.5, 0.9], gamma=0.3)
    gap = GammaPoissonDCA(3, alpha=[0.2, 0.5, 0.9], beta=0.7, gamma=0.3)
    h_dm, h_gap = _hyper(dm, data), _hyper(gap, data)
    init = vb_init(gap, data, torch.Generator().manual_seed(1), "chapter")
    s_dm = s_gap = init
    for _ in range(15):
        s_dm, _, _ = vb_step(dm, data, s_dm, h_dm, "chapter")
        s_gap, _, _ = vb_step(gap, data, s_gap, h_gap, "chapter")
        assert torch.allclose(s_dm.doc_shape, s_gap.doc_shape, rtol=1e-10)
        assert torch.allclose(s_dm.topic_word, s_gap.topic_word, rtol=1e-10)


def test_lemma1_gap_marginal_is_dm_times_negative_binomial_length():
    alpha, beta = np.array([0.6, 1.4]), 0.8
    theta = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    dm = DirichletDCA(2, alpha=alpha)
    gap = GammaPoissonDCA(2, alpha=alpha, beta=beta)
    for w in TINY_X.astype(float):
        L = w.sum()
        nb = torch.distributions.NegativeBinomial(total_count=alpha.sum(), probs=1 / (1 + beta)).log_prob(torch.tensor(L))
        assert _exact_log_marginal(gap, theta, w) == pytest.approx(_exact_log_marginal(dm, theta, w) + float(nb), rel=1e-12)


# ----------------------------------------------------------------------------------- Gibbs blocks


def _augmented_trace_logp(model, theta, latent, V):
    """log p(Θ, latent, c, V) from the declared augmented model, V of shape (I, K, J)."""
    values = {"topic_word": torch.as_tensor(theta), "doc_topic" if isinstance(model, DirichletDCA) else "doc_scores":
              torch.as_tensor(latent if isinstance(model, GammaPoissonDCA) else latent[:, None, :])}
    return pyro_log_density(model.augmented_model, values, torch.as_tensor(V, dtype=torch.float64))


@pytest.mark.parametrize("model", _models(), ids=["dm", "gap"])
def test_gibbs_assignment_conditional_matches_augmented_model(model, rng):
    """V | latent, Θ, w: the sampler's frequencies match the augmented model's normalised joint."""
    X = np.array([[2, 1, 0]])
    data = prepare(X)
    tokens = token_index(data)
    theta = _rand_simplex(rng, 2, 3)
    latent = _rand_simplex(rng, 1, 2) if isinstance(model, DirichletDCA) else rng.gamma(2.0, size=(1, 2))
    # Exact conditional: enumerate V with row sums w, normalise the augmented joint.
    configs, logps = [], []
    for V in itertools.product(*[list(_splits(int(w), 2)) for w in X[0]]):
        Vk = np.array(V, dtype=float).T[None]  # (1, K, J)
        configs.append(tuple(Vk.ravel()))
        logps.append(_augmented_trace_logp(model, theta, latent, Vk))
    probs = np.exp(np.array(logps) - np.logaddexp.reduce(logps))
    # Sampler frequencies
    gen = torch.Generator().manual_seed(5)
    n = 40000
    seen: dict = {}
    theta_t, latent_t = torch.as_tensor(theta), torch.as_tensor(latent)
    for _ in range(n // 2000):
        for _ in range(2000):
            k = sample_assignments(data, tokens, theta_t, latent_t, gen)
            V = torch.zeros(2, 3)
            V.index_put_((k, tokens.word), torch.ones_like(k, dtype=V.dtype), accumulate=True)
            key = tuple(V.numpy().ravel())
            seen[key] = seen.get(key, 0) + 1
    observed = np.array([seen.get(c, 0) for c in configs])
    assert observed.sum() == n  # no impossible configuration was drawn
    expected = probs * n
    chi2 = ((observed - expected) ** 2 / expected).sum()
    # χ² with len(configs)-1 = 5 dof; 20.5 is the 0.999 quantile: false-alarm rate 1e-3.
    assert chi2 < 20.5


@pytest.mark.parametrize("model", _models(), ids=["dm", "gap"])
def test_gibbs_latent_conditional_matches_augmented_model(model, rng):
    """latent | c: log ratios of the declared joint equal those of Table 3's conditional, and draws match its mean."""
    theta = _rand_simplex(rng, 2, 3)
    V = np.array([[[2.0, 0.0, 1.0], [0.0, 1.0, 0.0]]])  # (I=1, K, J)
    c = V.sum(-1)
    alpha = model.alpha
    draws_a = _rand_simplex(rng, 2, 1, 2) if isinstance(model, DirichletDCA) else rng.gamma(2.0, size=(2, 1, 2))
    lp = [_augmented_trace_logp(model, theta, d, V) for d in draws_a]
    if isinstance(model, DirichletDCA):
        cond = torch.distributions.Dirichlet(torch.as_tensor(c[0] + alpha))
        ref = [float(cond.log_prob(torch.as_tensor(d[0]))) for d in draws_a]
    else:
        cond = torch.distributions.Gamma(torch.as_tensor(c[0] + alpha), torch.as_tensor(1 + model.beta))
        ref = [float(cond.log_prob(torch.as_tensor(d[0])).sum()) for d in draws_a]
    assert lp[0] - lp[1] == pytest.approx(ref[0] - ref[1], rel=1e-10)
    data = prepare(np.array([[2, 1, 1]]))
    hyper = gibbs_hyper(resolve_model(model, data), data)
    gen = torch.Generator().manual_seed(3)
    counts = torch.as_tensor(c).expand(20000, 2)
    samples = sample_doc_latent(model, counts, hyper, gen).numpy()
    mean, sd = float(cond.mean[0]), float(cond.stddev[0])
    # z-test of the sample mean; |z| < 4 has false-alarm rate 6e-5.
    assert abs(samples[:, 0].mean() - mean) < 4 * sd / math.sqrt(20000)


@pytest.mark.parametrize("model", _models(), ids=["dm", "gap"])
def test_gibbs_sweeps_keep_count_invariants(model):
    X = DirichletDCA(3, alpha=0.3).simulate(20, 10, doc_length=[5 + i for i in range(20)], seed=0)["counts"]
    data = prepare(X)
    model = resolve_model(model if model.gamma.ndim == 0 else type(model)(3, alpha=0.4, **({"beta": 0.3} if isinstance(model, GammaPoissonDCA) else {})), data)
    hyper = gibbs_hyper(model, data)
    tokens = token_index(data)
    gen = torch.Generator().manual_seed(0)
    state = gibbs_init(model, data, tokens, hyper, gen)
    for _ in range(25):
        state = gibbs_step(model, data, tokens, state, hyper, gen)
        check_count_invariants(state, data)
        assert torch.allclose(state.topic_word.sum(1), torch.ones(3))


def test_invariant_checker_catches_a_broken_state():
    X = np.array([[1, 2], [3, 0]])
    data = prepare(X)
    model = DirichletDCA(2)
    tokens = token_index(data)
    assignment = torch.zeros(tokens.doc.numel(), dtype=torch.long)
    c, N = count_assignments(assignment, tokens, 2, 2, 2, torch.float64)
    good = GibbsState(torch.full((2, 2), 0.5), torch.full((2, 2), 0.5), c, N, assignment)
    check_count_invariants(good, data)
    broken = GibbsState(good.topic_word, good.doc_latent, c + torch.tensor([[1.0, 0.0], [0.0, 0.0]]), N, assignment)
    with pytest.raises(RuntimeError, match="document totals"):
        check_count_invariants(broken, data)
    assert model.n_components == 2


def test_constant_beta_gap_and_dm_gibbs_chains_identical():
    """With a common β, GaP's l is proportional to DM's m, so the same random stream gives the same V."""
    X = DirichletDCA(3, alpha=0.3).simulate(15, 12, doc_length=20, seed=7)["counts"]
    data = prepare(X)
    dm, gap = DirichletDCA(3, alpha=0.4), GammaPoissonDCA(3, alpha=0.4, beta=0.2)
    tokens = token_index(data)
    states = []
    for model in (dm, gap):
        hyper = gibbs_hyper(model, data)
        gen = torch.Generator().manual_seed(11)
        s = gibbs_init(model, data, tokens, hyper, gen)
        for _ in range(10):
            s = gibbs_step(model, data, tokens, s, hyper, gen)
        states.append(s)
    assert torch.equal(states[0].assignment, states[1].assignment)
    assert torch.allclose(states[0].topic_word, states[1].topic_word)


def test_doc_loglik_of_dm_sums_to_one_over_all_documents_of_a_length():
    """Σ_w p(w | m, Θ) over every count vector of length 3 equals 1 (coefficient included)."""
    model = DirichletDCA(2)
    theta = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    m = torch.tensor([[0.3, 0.7]])
    total = 0.0
    for w in itertools.product(range(4), repeat=3):
        if sum(w) != 3:
            continue
        data = prepare(np.array([w]))
        total += float(torch.exp(doc_loglik(model, data, theta, m)))
    assert total == pytest.approx(1.0, rel=1e-12)


def test_expected_log_theta_full_matches_dirichlet_mean_log():
    lam = torch.tensor([[1.0, 2.0, 3.0]])
    e = expected_log_theta(lam, "full")
    ref = torch.distributions.Dirichlet(lam[0]).sample((200000,)).log().mean(0)
    assert torch.allclose(e[0], ref, atol=0.02)


@pytest.mark.parametrize("model", _models(), ids=["dm", "gap"])
def test_gibbs_trace_is_the_loglik_at_the_values_the_v_step_used(model):
    from latentfs.inference.dca.gibbs import gibbs_step_with_loglik

    X = np.array([[2, 1, 0], [0, 1, 3], [1, 1, 1]])
    data = prepare(X)
    model = resolve_model(model, data)
    hyper = gibbs_hyper(model, data)
    tokens = token_index(data)
    gen = torch.Generator().manual_seed(0)
    state = gibbs_init(model, data, tokens, hyper, gen)
    replay = torch.Generator().manual_seed(9)
    replay.set_state(gen.get_state())
    new, loglik = gibbs_step_with_loglik(model, data, tokens, state, hyper, gen)
    latent = sample_doc_latent(model, state.doc_counts, hyper, replay)  # the same draw the step made
    assert torch.allclose(latent, new.doc_latent)
    assert loglik == pytest.approx(float(doc_loglik(model, data, state.topic_word, latent).sum()), rel=1e-12)


@pytest.mark.parametrize("model", _models(), ids=["dm", "gap"])
def test_compiled_v_step_matches_augmented_model(model, rng):
    """The compiled V step draws from the same conditional as the torch one: χ² against enumeration."""
    from latentfs.inference.dca.gibbs import _compiled_vstep

    X = np.array([[2, 1, 0]])
    data = prepare(X)
    csr = data.counts.csr
    theta = _rand_simplex(rng, 2, 3)
    latent = _rand_simplex(rng, 1, 2) if isinstance(model, DirichletDCA) else rng.gamma(2.0, size=(1, 2))
    configs, logps = [], []
    for V in itertools.product(*[list(_splits(int(w), 2)) for w in X[0]]):
        Vk = np.array(V, dtype=float).T[None]
        configs.append(tuple(Vk.ravel()))
        logps.append(_augmented_trace_logp(model, theta, latent, Vk))
    probs = np.exp(np.array(logps) - np.logaddexp.reduce(logps))
    kernel = _compiled_vstep()
    n, seen = 20000, {}
    theta_t = np.ascontiguousarray(theta.T)
    for s in range(n):
        z = np.empty(3, dtype=np.int64)
        ndk = np.zeros((1, 2), dtype=np.int64)
        nwk = np.zeros((2, 3), dtype=np.int64)
        kernel(csr.indptr, csr.indices, csr.data, np.ascontiguousarray(latent), theta_t, s, z, ndk, nwk)
        key = tuple(nwk.astype(float).ravel())
        seen[key] = seen.get(key, 0) + 1
    observed = np.array([seen.get(c, 0) for c in configs])
    assert observed.sum() == n
    expected = probs * n
    # χ² with 5 dof; 20.5 is the 0.999 quantile: false-alarm rate 1e-3.
    assert ((observed - expected) ** 2 / expected).sum() < 20.5


def test_vstep_option_is_checked():
    import latentfs
    from latentfs.core.data import DataError

    with pytest.raises(DataError, match=r"vstep must be one of \('auto', 'compiled', 'torch'\); got 'gpu'"):
        latentfs.fit(DirichletDCA(2), TINY_X, method="gibbs", vstep="gpu")
    result = latentfs.fit(DirichletDCA(2), TINY_X, method="gibbs", vstep="torch", num_warmup=5, num_samples=5, seed=0,
                          warn=False)
    assert result.samples("topic_word").shape == (2, 5, 2, 3)
