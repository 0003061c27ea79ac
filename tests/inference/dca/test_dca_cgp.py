"""Conditional Gamma-Poisson (CGP): the Pyro model, the Table 3 Gibbs rule, the spike-and-slab VB, limits.

Digest §1.4 (eq. 3), §1.5 (eq. 8–9 and the corrected posterior mean), §1.6.4 (Table 3), §1.10 oracles 3 and 11.
"""

import math

import numpy as np
import pytest
import torch
from scipy import integrate

import latentfs
from latentfs.core.data import DataError
from latentfs.core.relabel import matching_permutation
from latentfs.inference.dca.cgp import CGPState, _cgp_hyper, cgp_vb_init, cgp_vb_step
from latentfs.inference.dca.common import (
    cgp_posterior_mean,
    cgp_zero_probability,
    log_joint,
    prepare,
    resolve_model,
)
from latentfs.inference.dca.gibbs import _hyper as gibbs_hyper
from latentfs.inference.dca.gibbs import gibbs_init, gibbs_step, token_index
from latentfs.inference.dca.vb import VBState, vb_step
from latentfs.inference.dca.vb import _hyper as vb_hyper
from latentfs.models import ConditionalGammaPoissonDCA
from latentfs.models.dca import GammaPoissonDCA
from latentfs.testing import pyro_log_density

TINY_X = np.array([[2, 1, 0], [0, 1, 3], [1, 1, 1], [0, 0, 1]])


def _cgp(**kw):
    base = {"alpha": [0.7, 1.3], "beta": [0.4, 0.9], "rho": [0.3, 0.6], "gamma": [0.5, 0.8, 1.1]}
    base.update(kw)
    return ConditionalGammaPoissonDCA(2, **base)


def test_log_joint_equals_pyro_trace_with_zero_scores(rng):
    model = _cgp()
    data = prepare(TINY_X)
    theta = torch.as_tensor(rng.dirichlet(np.ones(3), size=2))
    scores = torch.as_tensor(rng.gamma(2.0, size=(4, 2)))
    scores[1, 0] = 0.0  # a component switched off in document 1
    scores[3, 1] = 0.0
    values = {"topic_word": theta, "active": (scores > 0).double(), "doc_scores": scores}
    expected = pyro_log_density(model.model, values, torch.as_tensor(TINY_X, dtype=torch.float64))
    assert float(log_joint(model, data, theta, scores)) == pytest.approx(expected, rel=1e-12)


def _augmented_logp(model, active, score, V, theta):
    """log p(θ, active, l, c, V) of a one-document, one-component augmented model."""
    values = {"topic_word": torch.as_tensor(theta), "active": torch.tensor([[float(active)]]),
              "doc_scores": torch.tensor([[float(score)]])}
    return pyro_log_density(model.augmented_model, values, torch.as_tensor(V, dtype=torch.float64))


@pytest.mark.parametrize("c_split", [(0, 0), (2, 1)])
def test_augmented_model_integrates_to_eq9(c_split):
    """Σ_active ∫ p(θ, active, l, c, V) dl equals p(θ) · eq. (9) · ∏_j θ^v / v! (quadrature)."""
    alpha, beta, rho = 1.5, 0.7, 0.35
    model = ConditionalGammaPoissonDCA(1, alpha=alpha, beta=beta, rho=rho, gamma=[0.5, 0.5])
    theta = np.array([[0.3, 0.7]])
    V = np.array([[list(c_split)]], dtype=float)  # (I=1, K=1, J=2)
    c = V.sum()
    slab, _ = integrate.quad(lambda x: math.exp(_augmented_logp(model, 1, x, V, theta)), 0, np.inf)
    spike = math.exp(_augmented_logp(model, 0, 0.0, V, theta)) if c == 0 else 0.0
    log_theta_prior = float(torch.distributions.Dirichlet(torch.tensor([0.5, 0.5])).log_prob(torch.as_tensor(theta[0])))
    eq9 = (1 - rho) * math.exp(math.lgamma(c + alpha) - math.lgamma(alpha)) * beta**alpha / (1 + beta) ** (c + alpha)
    eq9 += rho * (c == 0)
    words = np.prod(theta[0] ** V[0, 0] / np.array([math.factorial(int(v)) for v in V[0, 0]]))
    assert slab + spike == pytest.approx(math.exp(log_theta_prior) * eq9 * words, rel=1e-7)


@pytest.mark.parametrize("alpha, beta, rho", [(1.0, 0.5, 0.4), (2.5, 0.05, 0.9), (1.2, 3.0, 0.1)])
def test_table3_zero_probability_equals_quadrature(alpha, beta, rho):
    """P(l = 0 | c = 0) = ρ / [ρ + (1−ρ) ∫ Gamma(l; α, β) e^{−l} dl]."""
    slab, _ = integrate.quad(
        lambda x: math.exp(alpha * math.log(beta) - math.lgamma(alpha) + (alpha - 1) * math.log(max(x, 1e-300))
                           - beta * x - x), 0, np.inf)
    expected = rho / (rho + (1 - rho) * slab)
    got = float(cgp_zero_probability(torch.tensor(alpha), torch.tensor(beta), torch.tensor(rho)))
    assert got == pytest.approx(expected, rel=1e-8)


def test_corrected_posterior_mean_equals_quadrature():
    """E[l | c] of digest §1.5 (not the chapter's (1−ρ)(c+α)/(1+β)), by quadrature of eq. (8)."""
    alpha, beta, rho = 1.4, 0.6, 0.45

    def joint(x, c):  # p(l, c) for l > 0, slab part: (1−ρ) Gamma(l) Poisson(c | l)
        return (1 - rho) * math.exp(alpha * math.log(beta) - math.lgamma(alpha) + (alpha - 1) * math.log(max(x, 1e-300))
                                    - beta * x - x + c * math.log(max(x, 1e-300)) - math.lgamma(c + 1))

    for c in (0, 3):
        num, _ = integrate.quad(lambda x, c=c: x * joint(x, c), 0, np.inf)
        den, _ = integrate.quad(lambda x, c=c: joint(x, c), 0, np.inf)
        den += rho * (c == 0)
        got = cgp_posterior_mean(np.array([[float(c)]]), alpha, beta, rho)[0, 0]
        assert got == pytest.approx(num / den, rel=1e-7)
    chapter = (1 - rho) * (0 + alpha) / (1 + beta)  # the chapter's formula, wrong at c = 0
    assert abs(cgp_posterior_mean(np.array([[0.0]]), alpha, beta, rho)[0, 0] - chapter) > 0.05


def _chain(model, data, n_sweeps=8, seed=4):
    hyper = gibbs_hyper(model, data)
    tokens = token_index(data)
    gen = torch.Generator().manual_seed(seed)
    state = gibbs_init(model, data, tokens, hyper, gen)
    states = [state]
    for _ in range(n_sweeps):
        state = gibbs_step(model, data, tokens, state, hyper, gen)
        states.append(state)
    return states


def test_rho_zero_gibbs_chain_equals_gap_draw_for_draw():
    X = latentfs.DirichletDCA(3, alpha=0.3).simulate(15, 12, doc_length=20, seed=7)["counts"]
    data = prepare(X)
    gap = GammaPoissonDCA(3, alpha=[0.4, 0.6, 0.8], beta=0.2)
    cgp = ConditionalGammaPoissonDCA(3, alpha=[0.4, 0.6, 0.8], beta=0.2, rho=0.0)
    for s_gap, s_cgp in zip(_chain(gap, data), _chain(cgp, data), strict=True):
        assert torch.equal(s_gap.doc_latent, s_cgp.doc_latent)
        assert torch.equal(s_gap.assignment, s_cgp.assignment)
        assert torch.equal(s_gap.topic_word, s_cgp.topic_word)
    # and through fit(): the same draws
    opts = {"num_warmup": 3, "num_samples": 4, "num_chains": 1, "store": ("topic_word", "doc_scores"), "warn": False}
    a = latentfs.fit(gap, X, method="gibbs", seed=3, **opts)
    b = latentfs.fit(cgp, X, method="gibbs", seed=3, **opts)
    assert np.array_equal(a.samples("doc_scores"), b.samples("doc_scores"))


def test_rho_zero_vb_iterates_equal_gap(monkeypatch):
    # CGP's updates are sparse torch products; GaP's run in the compiled CPU kernel unless told otherwise, and
    # that kernel equals the torch formulation only up to the order of sums (test_vb_kernels.py): compare
    # like with like, bit for bit
    from latentfs.inference.dca import vb_updates

    monkeypatch.setattr(vb_updates, "compiled_updates", lambda data: False)
    X = latentfs.DirichletDCA(3, alpha=0.3).simulate(25, 15, doc_length=30, seed=2)["counts"]
    data = prepare(X)
    gap = GammaPoissonDCA(3, alpha=[0.2, 0.5, 0.9], beta=[0.3, 0.5, 0.7], gamma=0.3)
    cgp = ConditionalGammaPoissonDCA(3, alpha=[0.2, 0.5, 0.9], beta=[0.3, 0.5, 0.7], rho=0.0, gamma=0.3)
    start = cgp_vb_init(cgp, data, torch.Generator().manual_seed(1))
    s_gap = VBState(start.doc_shape, start.topic_word)
    s_cgp = start
    h_gap, h_cgp = vb_hyper(gap, data), _cgp_hyper(cgp, data)
    for _ in range(12):
        s_gap, obj_gap, _ = vb_step(gap, data, s_gap, h_gap, "chapter", 1, "input")
        s_cgp, obj_cgp, _ = cgp_vb_step(cgp, data, s_cgp, h_cgp, 1)
        assert torch.equal(s_gap.doc_shape, s_cgp.doc_shape)
        assert torch.equal(s_gap.topic_word, s_cgp.topic_word)
        assert obj_cgp == pytest.approx(obj_gap, rel=1e-12)
    assert bool(s_cgp.active.all())


def test_rho_near_one_component_is_never_used():
    X = latentfs.DirichletDCA(3, alpha=0.3).simulate(30, 12, doc_length=25, seed=5)["counts"]
    data = prepare(X)
    model = resolve_model(ConditionalGammaPoissonDCA(3, alpha=0.5, rho=[0.2, 0.2, 1 - 1e-12]), data)
    # VB: every document switches the component off
    result = latentfs.fit(model, X, method="vb", seed=0, max_iter=300, tol=1e-9)
    assert np.all(result.extras["active_prob"][:, 2] < 1e-9)
    assert np.all(result.extras["component_counts"][:, 2] == 0)
    # Gibbs: started with the component empty, it is never given a token
    hyper = gibbs_hyper(model, data)
    tokens = token_index(data)
    gen = torch.Generator().manual_seed(0)
    state = gibbs_init(model, data, tokens, hyper, gen)
    assignment = state.assignment % 2  # move every token off component 2
    from latentfs.inference.dca.gibbs import GibbsState, count_assignments, sample_doc_latent

    c, N = count_assignments(assignment, tokens, data.n_documents, data.n_features, 3, data.dtype)
    state = GibbsState(state.topic_word, sample_doc_latent(model, c, hyper, gen), c, N, assignment)
    for _ in range(30):
        state = gibbs_step(model, data, tokens, state, hyper, gen)
        assert float(state.doc_counts[:, 2].sum()) == 0.0


def test_vb_objective_never_decreases_and_sparsity_is_found():
    model = ConditionalGammaPoissonDCA(3, alpha=0.8, beta=0.04, rho=0.5, gamma=0.2)
    sim = model.simulate(150, 30, seed=1)
    keep = sim["counts"].sum(1) > 0
    data = prepare(sim["counts"][keep])
    hyper = _cgp_hyper(model, data)
    state = cgp_vb_init(model, data, torch.Generator().manual_seed(0))
    previous = -math.inf
    for _ in range(100):
        state, objective, _ = cgp_vb_step(model, data, state, hyper)
        assert objective >= previous - 1e-9 * abs(objective)
        previous = objective
    perm, _ = matching_permutation(sim["topic_word"], state.topic_word.numpy())
    truly_zero = sim["doc_scores"][keep] == 0
    on = state.active.numpy()[:, perm]
    # switched-off entries are far more often truly zero than switched-on ones (measured 0.70 vs 0.10)
    assert truly_zero[~on].mean() > truly_zero[on].mean() + 0.4


def test_vb_result_exposes_corrected_means_and_learns_rho():
    model = ConditionalGammaPoissonDCA(3, alpha=0.8, beta=0.04, rho=0.3, gamma=0.2)
    X = model.simulate(80, 30, seed=2)["counts"]
    X = X[X.sum(1) > 0]
    result = latentfs.fit(model, X, method="vb", seed=0, learn_rho=True, max_iter=400, tol=1e-8)
    ex = result.extras
    off = ex["active_prob"] < 1
    hp = result.hyperparameters
    expected_off = cgp_posterior_mean(np.zeros((1, 3)), hp["alpha"], hp["beta"], hp["rho"])
    assert np.allclose(ex["doc_scores_mean"][off], np.broadcast_to(expected_off, off.shape)[off], rtol=1e-10)
    on_mean = (ex["component_counts"] + hp["alpha"]) / (1 + np.array(hp["beta"]))
    assert np.allclose(ex["doc_scores_mean"][~off], on_mean[~off])
    assert hp["learned"] == ["rho"] and ex["rho_trace"].shape == (result.diagnostics["n_iter"], 3)
    assert np.allclose(hp["rho"], ex["rho_trace"][-1])
    assert result.samples("doc_scores").shape == (1, 200, X.shape[0], 3)


def test_gibbs_rao_blackwell_mean_and_learned_rho():
    model = ConditionalGammaPoissonDCA(3, alpha=0.8, beta=0.04, rho=0.5, gamma=0.2)
    sim = model.simulate(200, 30, seed=3)
    X = sim["counts"]
    result = latentfs.fit(ConditionalGammaPoissonDCA(3, alpha=0.8, beta=0.04, rho=0.2, gamma=0.2), X, method="gibbs",
                          seed=0, num_warmup=150, num_samples=30, num_chains=1, learn_rho=True, log_likelihood=False,
                          empty_documents="keep")
    assert result.extras["doc_scores_mean"].shape == (200, 3)
    assert result.extras["rho_trace"].shape == (1, 180, 3)
    # the learned ρ lies near the simulated fraction of zero scores (0.5 in the model)
    assert abs(np.mean(result.hyperparameters["rho"]) - (sim["doc_scores"] == 0).mean()) < 0.15


def test_bad_options_are_rejected():
    with pytest.raises(DataError, match=r"rho must lie in \[0, 1\)"):
        ConditionalGammaPoissonDCA(2, rho=1.0)
    with pytest.raises(DataError, match="rho must be a scalar or have shape"):
        ConditionalGammaPoissonDCA(2, rho=[0.1, 0.2, 0.3])
    with pytest.raises(DataError, match="rho must be a probability"):
        ConditionalGammaPoissonDCA(2, rho="high")
    with pytest.raises(DataError, match="beta is not set"):
        ConditionalGammaPoissonDCA(2).simulate(3, 4)
    with pytest.raises(DataError, match="learn_alpha and learn_beta are not available"):
        latentfs.fit(_cgp(), TINY_X, method="vb", learn_alpha=True)
    with pytest.raises(DataError, match="learn_rho=True needs a model with a rho"):
        latentfs.fit(GammaPoissonDCA(2, beta=0.5), TINY_X, method="gibbs", learn_rho=True)
    with pytest.raises(DataError, match="inner_iters must be an integer ≥ 1"):
        latentfs.fit(_cgp(), TINY_X, method="vb", inner_iters=0)
    with pytest.raises(DataError, match="init must hold doc_shape"):
        latentfs.fit(_cgp(), TINY_X, method="vb", init=CGPState(torch.ones(2, 2), torch.ones(2, 2, dtype=torch.bool),
                                                                   torch.ones(2, 3)))
    with pytest.raises(DataError, match="augmented_model needs latent_counts"):
        _cgp().augmented_model()


def test_table3_zero_probability_equals_the_declared_models_conditional():
    """P(l = 0 | c = 0) from the augmented Pyro model (quadrature over the slab) equals the sampler's rule."""
    alpha, beta, rho = 1.3, 0.8, 0.55
    model = ConditionalGammaPoissonDCA(1, alpha=alpha, beta=beta, rho=rho, gamma=[0.5, 0.5])
    theta = np.array([[0.4, 0.6]])
    V = np.zeros((1, 1, 2))
    spike = math.exp(_augmented_logp(model, 0, 0.0, V, theta))
    slab, _ = integrate.quad(lambda x: math.exp(_augmented_logp(model, 1, x, V, theta)), 0, np.inf)
    rule = float(cgp_zero_probability(torch.tensor(alpha), torch.tensor(beta), torch.tensor(rho)))
    assert spike / (spike + slab) == pytest.approx(rule, rel=1e-7)
    # and the sampler draws zeros at that rate (|z| < 4: false-alarm rate 6e-5)
    from latentfs.inference.dca.gibbs import sample_cgp_scores

    hyper = {"alpha": torch.tensor([alpha]), "beta": torch.tensor([beta]), "zero_prob": torch.tensor([rule])}
    draws = sample_cgp_scores(torch.zeros(40000, 1), hyper, torch.Generator().manual_seed(0))
    frac = float((draws == 0).double().mean())
    assert abs(frac - rule) < 4 * math.sqrt(rule * (1 - rule) / 40000)
    # the non-zero draws follow Gamma(α, 1 + β): compare the mean (|z| < 4)
    slab_draws = draws[draws > 0]
    assert abs(float(slab_draws.mean()) - alpha / (1 + beta)) < 4 * math.sqrt(alpha) / (1 + beta) / math.sqrt(
        slab_draws.numel())
