"""Grouped (multivariate) Dirichlet DCA (Buntine & Jakulin Section 4.4) and the roll-call simulator (oracle 12)."""

import itertools
import math

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core.data import DataError
from latentfs.core.relabel import matching_permutation
from latentfs.datasets.rollcall import bloc_membership, simulate_rollcalls
from latentfs.inference.dca.common import doc_loglik, group_normalise, log_joint, prepare, resolve_model
from latentfs.inference.dca.gibbs import _hyper as gibbs_hyper
from latentfs.inference.dca.gibbs import check_count_invariants, gibbs_init, gibbs_step, token_index
from latentfs.inference.dca.vb import _hyper as vb_hyper
from latentfs.inference.dca.vb import expected_log_doc, vb_doc_bound, vb_init, vb_step
from latentfs.models.dca import DirichletDCA, GroupedMultinomialCounts
from latentfs.testing import pyro_log_density

GROUPS = np.array([0, 0, 1, 1, 1, 2, 2])
# document 1 has no tokens in group 1, document 2 none in groups 0 and 2 ("Not Voting")
X = np.array([[1, 1, 0, 2, 0, 1, 0], [0, 1, 0, 0, 0, 0, 1], [0, 0, 1, 0, 1, 0, 0]])


def _theta(rng, K=2):
    return group_normalise(torch.as_tensor(rng.gamma(1.0, size=(K, GROUPS.size))), torch.as_tensor(GROUPS))


def _group_sums(theta, groups=GROUPS):
    G = int(groups.max()) + 1
    out = np.zeros((theta.shape[0], G))
    np.add.at(out.T, groups, np.asarray(theta).T)
    return out


def test_grouped_log_joint_equals_pyro_trace(rng):
    model = DirichletDCA(2, alpha=[0.6, 1.4], gamma=0.7, groups=GROUPS)
    data = prepare(X)
    theta = _theta(rng)
    m = torch.as_tensor(rng.dirichlet([1.0, 1.0], size=3))
    values = {"topic_word": theta, "doc_topic": m}
    expected = pyro_log_density(model.model, values, torch.as_tensor(X, dtype=torch.float64))
    assert float(log_joint(model, data, theta, m)) == pytest.approx(expected, rel=1e-12)


def test_missing_groups_contribute_nothing(rng):
    """A document's log-likelihood equals the one computed with its missing groups' columns deleted."""
    model = DirichletDCA(2, alpha=0.5, groups=GROUPS)
    theta = _theta(rng)
    m = torch.as_tensor(rng.dirichlet([1.0, 1.0], size=3))
    full = doc_loglik(model, prepare(X), theta, m).numpy()
    for i, present in enumerate([[0, 1, 2], [0, 2], [1]]):
        cols = np.flatnonzero(np.isin(GROUPS, present))
        sub = DirichletDCA(2, alpha=0.5, groups=GROUPS[cols])
        reduced = doc_loglik(sub, prepare(X[i : i + 1, cols]), theta[:, cols], m[i : i + 1]).numpy()[0]
        assert full[i] == pytest.approx(reduced, rel=1e-12)
        # and each present group is one multinomial: the Pyro distribution agrees with torch's Multinomial
        probs = (m[i] @ theta).numpy()
        ref = sum(
            float(torch.distributions.Multinomial(int(X[i, GROUPS == g].sum()), torch.as_tensor(probs[GROUPS == g]))
                  .log_prob(torch.as_tensor(X[i, GROUPS == g], dtype=torch.float64)))
            for g in present
        )
        dist = GroupedMultinomialCounts(torch.as_tensor(_group_sums(X[i : i + 1])[0]), torch.as_tensor(probs),
                                        torch.as_tensor(GROUPS))
        assert float(dist.log_prob(torch.as_tensor(X[i], dtype=torch.float64))) == pytest.approx(ref, rel=1e-12)
        assert full[i] == pytest.approx(ref, rel=1e-12)


def test_vb_bound_is_exact_for_one_component_and_below_the_marginal_for_two(rng):
    data = prepare(X)
    # K = 1: m = 1, so log p(w) = Σ_g log Mult(w_g | θ_g) and the bound is tight
    one = DirichletDCA(1, alpha=0.8, groups=GROUPS)
    theta1 = _theta(rng, K=1)
    hyper = vb_hyper(one, data)
    a = torch.full((3, 1), 0.8) + data.doc_lengths[:, None]
    elog = expected_log_doc(one, a, hyper)
    z = data.rates_at_nonzeros(torch.exp(elog), theta1)
    bound = vb_doc_bound(one, data, a, elog, torch.log(z), hyper)
    exact = doc_loglik(one, data, theta1, torch.ones(3, 1))
    assert torch.allclose(bound, exact, rtol=1e-12)
    # K = 2: the bound never exceeds log p(w | Θ), computed by enumerating the per-group splits
    two = DirichletDCA(2, alpha=[0.6, 1.4], groups=GROUPS)
    theta = _theta(rng).numpy()
    hyper = vb_hyper(two, data)
    a = torch.as_tensor(rng.gamma(2.0, size=(3, 2)) + 0.1)
    elog = expected_log_doc(two, a, hyper)
    z = data.rates_at_nonzeros(torch.exp(elog), torch.as_tensor(theta))
    bounds = vb_doc_bound(two, data, a, elog, torch.log(z), hyper).numpy()
    for i, w in enumerate(X):
        assert bounds[i] <= _exact_grouped_marginal(two.alpha, theta, w) + 1e-12


def _exact_grouped_marginal(alpha, theta, w):
    """log ∫ Dir(m | α) ∏_g Mult(w_g | L_g, Θ_g m) dm by summing over every V (token splits)."""
    K = theta.shape[0]
    tokens = [j for j, c in enumerate(w) for _ in range(int(c))]
    total = -math.inf
    for ks in itertools.product(range(K), repeat=len(tokens)):
        c = np.bincount(ks, minlength=K)
        term = sum(math.log(theta[k, j]) for k, j in zip(ks, tokens, strict=True))
        term += math.lgamma(alpha.sum()) - math.lgamma(len(tokens) + alpha.sum())
        term += sum(math.lgamma(ck + ak) - math.lgamma(ak) for ck, ak in zip(c, alpha, strict=True))
        total = np.logaddexp(total, term)
    # sequences -> per-group bags: the coefficient ∏_g L_g! / ∏_j w_j!
    coef = sum(math.lgamma(w[GROUPS == g].sum() + 1) for g in range(3)) - sum(math.lgamma(x + 1) for x in w)
    return total + coef


@pytest.mark.parametrize("theta_update", ["chapter", "map"])
def test_vb_keeps_theta_normalised_within_groups_and_objective_monotone(theta_update):
    rc = simulate_rollcalls(60, n_senators=12, n_blocs=3, seed=1)
    model = DirichletDCA(3, alpha=0.3, groups=rc.groups)
    data = prepare(rc.counts)
    hyper = vb_hyper(model, data)
    state = vb_init(model, data, torch.Generator().manual_seed(0), theta_update)
    assert np.allclose(_group_sums(state.topic_word, rc.groups), 1.0)
    previous = -math.inf
    for _ in range(30):
        state, objective, _ = vb_step(model, data, state, hyper, theta_update)
        assert np.allclose(_group_sums(state.topic_word, rc.groups), 1.0, atol=1e-12)
        assert objective >= previous - 1e-9 * abs(objective)
        previous = objective
    result = latentfs.fit(model, rc.counts, method="vb", seed=0, theta_update=theta_update, max_iter=50, warn=False)
    assert np.allclose(_group_sums(result.mean("topic_word"), rc.groups), 1.0, atol=1e-12)


def test_gibbs_draws_keep_theta_normalised_within_groups_and_counts_consistent():
    rc = simulate_rollcalls(50, n_senators=10, n_blocs=2, seed=2)
    model = resolve_model(DirichletDCA(2, alpha=0.3, groups=rc.groups), prepare(rc.counts))
    data = prepare(rc.counts)
    hyper = gibbs_hyper(model, data)
    tokens = token_index(data)
    gen = torch.Generator().manual_seed(0)
    state = gibbs_init(model, data, tokens, hyper, gen)
    for _ in range(10):
        state = gibbs_step(model, data, tokens, state, hyper, gen)
        check_count_invariants(state, data)
        assert np.allclose(_group_sums(state.topic_word, rc.groups), 1.0, atol=1e-12)
    result = latentfs.fit(model, rc.counts, method="gibbs", seed=0, num_warmup=5, num_samples=5, num_chains=2,
                          warn=False)
    draws = result.samples("topic_word").reshape(-1, 2, rc.groups.size)
    assert all(np.allclose(_group_sums(d, rc.groups), 1.0, atol=1e-12) for d in draws)


def test_rollcall_encoding():
    rc = simulate_rollcalls(40, n_senators=20, n_blocs=4, absence=0.2, seed=3)
    per_group = rc.counts.reshape(40, 21, 2).sum(-1)
    assert set(np.unique(per_group)) <= {0.0, 1.0}
    assert (per_group[:, -1] == 1).all()  # the outcome is always recorded
    assert 0.1 < 1 - per_group[:, :-1].mean() < 0.3  # 'Not Voting' at about the absence rate
    assert np.allclose(_group_sums(rc.topic_word, rc.groups), 1.0)
    assert np.bincount(rc.senator_bloc).tolist() == [5, 5, 5, 5]


@pytest.mark.parametrize("method, options", [
    ("vb", {"max_iter": 500, "tol": 1e-7, "n_init": 2}),
    ("gibbs", {"num_warmup": 150, "num_samples": 50, "num_chains": 1, "log_likelihood": False, "warn": False}),
])
def test_planted_blocs_are_recovered(method, options):
    rc = simulate_rollcalls(300, n_senators=30, n_blocs=3, seed=0)
    model = DirichletDCA(3, alpha=0.1, groups=rc.groups)
    result = latentfs.fit(model, rc.counts, method=method, seed=0, **options)
    theta = result.mean("topic_word")
    perm, _ = matching_permutation(rc.topic_word, theta)
    yea_error = np.abs(rc.topic_word[:, 0::2] - theta[perm][:, 0::2]).mean()
    assert yea_error < 0.06  # mean absolute error of every senator's Yea probability per bloc
    doc_topic = result.mean("doc_topic") if "doc_topic" in result.sites else result.extras["doc_topic_mean"]
    membership = bloc_membership(theta, doc_topic, rc.counts, rc.groups)
    assert membership.shape == (31, 3) and np.allclose(membership.sum(1), 1.0)


def test_bad_groups_and_options_are_rejected():
    with pytest.raises(DataError, match="groups must be a 1-D array"):
        DirichletDCA(2, groups=[[0, 1]])
    with pytest.raises(DataError, match="groups must hold integer ids; feature 1"):
        DirichletDCA(2, groups=[0, 0.5, 1])
    with pytest.raises(DataError, match="groups must hold integer ids; got dtype"):
        DirichletDCA(2, groups=["a", "b"])
    with pytest.raises(DataError, match=r"groups must have one entry per feature \(7\)"):
        latentfs.fit(DirichletDCA(2, groups=[0, 0, 1]), X, method="vb")
    with pytest.raises(DataError, match="theta_update='full' is not available for a grouped model"):
        latentfs.fit(DirichletDCA(2, groups=GROUPS), X, method="vb", theta_update="full")
    with pytest.raises(DataError, match="augmented_model is declared for ungrouped models only"):
        DirichletDCA(2, groups=GROUPS).augmented_model(torch.zeros(1, 2, 7))
    with pytest.raises(DataError, match="doc_length must broadcast to"):
        DirichletDCA(2, groups=GROUPS).simulate(4, 7, doc_length=[1, 2])
    with pytest.raises(DataError, match="doc_length must hold non-negative integer group lengths"):
        DirichletDCA(2, groups=GROUPS).simulate(4, 7, doc_length=[1, -1, 0])
    with pytest.raises(DataError, match=r"absence must lie in \[0, 1\)"):
        simulate_rollcalls(5, n_senators=4, n_blocs=2, absence=1.0)
    with pytest.raises(DataError, match="loyalty must exceed 0.5"):
        simulate_rollcalls(5, n_senators=4, n_blocs=2, loyalty=0.4)
    with pytest.raises(DataError, match="n_blocs must be at most 4"):
        simulate_rollcalls(5, n_senators=4, n_blocs=5)
    with pytest.raises(DataError, match=r"groups must have one entry per feature \(4\)"):
        bloc_membership(np.full((2, 4), 0.5), np.full((1, 2), 0.5), np.array([[1, 0, 0, 1]]), [0, 1])


def test_generic_pyro_engines_refuse_grouped_models_clearly():
    model = latentfs.DirichletDCA(2, groups=[0, 0, 1, 1])
    X = np.array([[1, 0, 2, 1], [0, 3, 1, 1]])
    with pytest.raises(DataError, match=r"nuts, svi\) do not support grouped models"):
        latentfs.fit(model, X, method="nuts")
