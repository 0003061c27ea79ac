"""Document completion in each model's own terms: grouped DCA, GaP rates, CGP, and tokens of probability 0."""

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError, DataWarning
from latentfs.datasets.rollcall import simulate_rollcalls
from latentfs.evaluate.heldout import (
    completion_loglik,
    completion_score,
    document_completion,
    fold_in,
    scoring_terms,
    split_documents,
)


@pytest.fixture(scope="module")
def rollcalls():
    rc = simulate_rollcalls(200, n_senators=30, n_blocs=3, seed=0)
    model = latentfs.DirichletDCA(3, alpha=0.1, groups=rc.groups)
    result = latentfs.fit(model, rc.counts[:160], method="vb", seed=0, warn=False, num_ll_draws=0)
    return rc, result


def test_grouped_completion_is_on_the_scale_of_binary_votes(rollcalls):
    rc, result = rollcalls
    observed, held = split_documents(rc.counts[160:], 0.5, seed=0)
    # the oracle: planted Θ and planted bloc proportions of the test roll calls, exact per-token value
    oracle = completion_loglik(rc.topic_word, rc.doc_topic[160:], held, groups=rc.groups)
    fitted = document_completion(result, None, 0.1, split=(observed, held))  # groups come from the Posterior
    # measured: oracle perplexity 1.398, fitted 1.434; normalising over the whole vocabulary gave 31 × that
    assert 1.2 < np.exp(-oracle) < 1.6
    assert np.exp(-fitted) < 2.0  # a binary vote: a coin scores 2
    assert abs(fitted - oracle) < 0.1
    # an explicit groups= gives the same number as the Posterior's own
    explicit = document_completion(result.mean("topic_word"), None, 0.1, split=(observed, held), groups=rc.groups)
    assert explicit == pytest.approx(fitted, rel=1e-10)


def test_grouped_theta_without_groups_is_flagged(rollcalls):
    rc, _ = rollcalls
    with pytest.warns(DataWarning, match="sums to 31, as a Θ normalised within 31 groups"):
        scoring_terms(rc.topic_word)


def test_grouped_normalisation_and_group_checks():
    theta = np.array([[0.3, 0.3, 2.0, 2.0], [1.0, 3.0, 1.0, 1.0]])
    terms = scoring_terms(theta, groups=[5, 5, 7, 7])  # any integer codes
    assert np.allclose(terms.topic_word, [[0.5, 0.5, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5]])
    with pytest.raises(DataError, match="groups must have one entry per feature"):
        scoring_terms(theta, groups=[0, 1])
    with pytest.raises(DataError, match="no mass in group 1"):
        scoring_terms(np.array([[1.0, 1.0, 0.0, 0.0]]), groups=[0, 0, 1, 1])


def test_gap_completion_uses_its_own_rates():
    rng = np.random.default_rng(3)
    theta = rng.dirichlet(np.full(6, 0.5), size=3)
    X = rng.multinomial(12, [1 / 6] * 6, size=8)
    alpha = np.array([0.3, 0.6, 1.2])
    # a common rate: the GaP fold-in is the DM fold-in (Lemma 1)
    assert np.allclose(fold_in(theta, X, alpha, beta=2.5), fold_in(theta, X, alpha), atol=1e-8)
    # unequal rates: the fixed point of a = α + Σ_j w_j n_jk with E[log l_k] = ψ(a_k) − log(1 + β_k), and
    # the mixture E[l] / Σ E[l]
    from scipy.special import digamma

    beta = np.array([0.1, 1.0, 8.0])
    m = fold_in(theta, X, alpha, beta=beta, tol=1e-12, max_iter=5000)
    from latentfs.evaluate.heldout import fold_in_shapes

    a = fold_in_shapes(theta, X, alpha, beta=beta, tol=1e-12, max_iter=5000)
    weights = np.exp(digamma(a) - np.log1p(beta))[:, :, None] * theta[None]  # (doc, k, word)
    resp = weights / weights.sum(1, keepdims=True)
    assert np.allclose(a, alpha + (resp * X[:, None, :]).sum(-1), atol=1e-9)
    expected = a / (1 + beta)
    assert np.allclose(m, expected / expected.sum(1, keepdims=True))
    assert not np.allclose(m, fold_in(theta, X, alpha), atol=1e-3)


def test_cgp_completion_folds_in_with_the_spike():
    model = latentfs.DirichletDCA(3, alpha=0.3)
    X = model.simulate(60, 15, doc_length=40, seed=0)["counts"]
    cgp = latentfs.fit(latentfs.ConditionalGammaPoissonDCA(3, alpha=0.3, rho=0.5), X[:45], method="vb", seed=0,
                       max_iter=50, warn=False)
    value = document_completion(cgp, X[45:], 0.3, seed=0)
    assert np.isfinite(value) and -np.log(15) < value < 0  # better than uniform over 15 words


def test_zero_probability_tokens_are_counted_not_clamped():
    theta = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    mix = np.array([[1.0, 0.0], [0.5, 0.5]])
    held = np.array([[2, 1, 1], [1, 1, 1]])  # the first document's word 2 has probability 0
    out = completion_score(theta, mix, held)
    assert out["n_zero_probability"] == 1 and out["n_tokens"] == 7
    assert out["per_token"] == -np.inf
    assert out["per_token_scored"] == pytest.approx((3 * np.log(0.5) + np.log(0.25) + np.log(0.5) + np.log(0.25)) / 6)
    with pytest.warns(DataWarning, match="1 of 7 held-out tokens have probability 0"):
        assert completion_loglik(theta, mix, held) == -np.inf
