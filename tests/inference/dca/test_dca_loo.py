"""The DCA samplers' pointwise log-likelihood is what az.loo / az.waic assume: log p(w_(i) | Θ) with each
document's latent integrated out, checked draw by draw against exact enumeration (issue 30: it was
conditional on each document's own latent, so az.loo counted every document's proportions as parameters)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln

import latentfs
from latentfs.evaluate.heldout_estimators import exact_loglik
from latentfs.inference.dca.loo import marginal_doc_loglik

# Tolerances of the importance-sampling estimate at its defaults against enumeration on documents of at most 6
# tokens, in nats per document (measured over 16 draws × 12 documents: mean 0.030-0.039, max 0.14-0.19 for the
# collapsed, direct and MH samplers); the value conditional on each document's own latent is off by mean 0.55, max 2.3 there.
MEAN_TOL, TOL = 0.06, 0.3


def tiny_corpus(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = np.zeros((12, 4), dtype=np.int64)
    for i in range(12):
        words = rng.choice(4, size=rng.integers(2, 7), p=[0.4, 0.3, 0.2, 0.1] if i % 2 else [0.1, 0.2, 0.3, 0.4])
        np.add.at(X[i], words, 1)
    return X


def coefficient(X: np.ndarray) -> np.ndarray:
    """log L! − Σ_j log w_j!: the multinomial coefficient of each document's counts."""
    return gammaln(X.sum(1) + 1) - gammaln(X + 1).sum(1)


def enumerated(result: latentfs.Posterior, X: np.ndarray, c: int, d: int) -> np.ndarray:
    """log p(counts_(i) | Θ, α) by enumeration at draw (c, d), in the chain's own labels."""
    theta = result.samples("topic_word")[c, d]
    perms = result.relabel_permutations
    alpha = np.broadcast_to(np.asarray(result.hyperparameters["alpha"], dtype=np.float64), (theta.shape[0],))
    if perms is not None:  # Θ and α permuted together leave the marginal unchanged
        alpha = alpha[perms[c, d]] if alpha.ndim else alpha
    return exact_loglik(theta, X, alpha).per_document + coefficient(X)


CHAINS = {"num_chains": 2, "num_warmup": 30, "num_samples": 8}
OPTIONS = {"collapsed_gibbs": {**CHAINS, "learn_alpha": False, "learn_gamma": False}, "gibbs": CHAINS, "mh": CHAINS,
           "partially_collapsed": CHAINS, "nuts": {**CHAINS, "num_warmup": 20},
           "svi": {"num_steps": 50, "num_draws": 8}}


@pytest.mark.parametrize("method", sorted(OPTIONS))
def test_pointwise_log_likelihood_is_the_marginal_of_each_document(method):
    X = tiny_corpus()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = latentfs.fit(latentfs.DirichletDCA(2, alpha=0.5, gamma=0.3), X, method=method, seed=3,
                              **OPTIONS[method])
    ll = result.log_likelihood
    chains = OPTIONS[method].get("num_chains", 1)
    assert ll.shape == (chains, 8, 12)
    errors = np.abs(np.stack([ll[c, d] - enumerated(result, X, c, d) for c in range(chains) for d in range(8)]))
    assert errors.mean() < MEAN_TOL and errors.max() < TOL


def test_gamma_poisson_marginal_is_the_probability_of_the_counts():
    """GaP with a common rate β: p(counts) = p(L) · L!/Π w_j! · p(w | L), where L ~ NegBin(Σα, β/(1+β)) and
    p(w | L) is DirichletDCA's sequence probability with the same α (Lemma 1)."""
    X = tiny_corpus(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = latentfs.fit(latentfs.GammaPoissonDCA(2, alpha=0.7, beta=0.5), X, method="collapsed_gibbs", seed=1,
                              num_chains=2, num_warmup=30, num_samples=5)
    theta = result.samples("topic_word")[1, 4]
    L, A, b = X.sum(1), 1.4, 0.5
    log_p_length = gammaln(L + A) - gammaln(A) - gammaln(L + 1) + A * np.log(b / (1 + b)) - L * np.log(1 + b)
    oracle = exact_loglik(theta, X, 0.7).per_document + coefficient(X) + log_p_length
    np.testing.assert_allclose(result.log_likelihood[1, 4], oracle, atol=TOL)


def test_the_value_does_not_depend_on_relabelling_or_on_storing_theta():
    X = tiny_corpus(2)
    kw = dict(method="collapsed_gibbs", seed=5, num_chains=2, num_warmup=20, num_samples=6, warn=False)
    aligned = latentfs.fit(latentfs.DirichletDCA(2), X, store=("topic_word", "doc_topic"), **kw)
    raw = latentfs.fit(latentfs.DirichletDCA(2), X, store=("topic_word", "doc_topic"), align=False, **kw)
    eager = latentfs.fit(latentfs.DirichletDCA(2), X, store=("doc_topic",), align=False, **kw)
    np.testing.assert_allclose(aligned.log_likelihood, raw.log_likelihood, rtol=1e-12)
    np.testing.assert_allclose(eager.log_likelihood, raw.log_likelihood, rtol=1e-12)


def test_vb_draws_score_the_marginal_too():
    X = tiny_corpus(3)
    result = latentfs.fit(latentfs.DirichletDCA(2, alpha=0.5), X, num_ll_draws=4, warn=False)
    idata = result.to_inference_data(num_draws=4)
    ll = idata.log_likelihood["counts"].values
    theta = result.samples("topic_word", 4, seed=1)[0]
    oracle = exact_loglik(theta[2], X, 0.5).per_document + coefficient(X)
    np.testing.assert_allclose(ll[0, 2], oracle, atol=TOL)


def test_cgp_has_no_pointwise_log_likelihood_and_says_why():
    X = tiny_corpus(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = latentfs.fit(latentfs.ConditionalGammaPoissonDCA(2), X, method="gibbs", seed=0, num_chains=2,
                              num_warmup=20, num_samples=5)
    assert result.log_likelihood is None
    assert "az.loo" in result.diagnostics["no_pointwise_log_likelihood"]
    assert "log_likelihood" not in result.to_inference_data().groups()


def test_az_loo_counts_the_global_parameters_not_every_documents_proportions():
    """On 120 simulated documents (K = 3, J = 40: 117 free parameters in Θ), p_loo stays below the number of
    global parameters; the value conditional on each document's own proportions added K − 1 per document."""
    import arviz as az

    X = latentfs.DirichletDCA(3).simulate(n_documents=120, n_features=40, doc_length=60, seed=0)["counts"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = latentfs.fit(latentfs.DirichletDCA(3), X, method="collapsed_gibbs", seed=0, num_chains=2,
                              num_warmup=100, num_samples=60)
        loo = az.loo(result.to_inference_data())
    assert 3 * 39 > loo.p_loo > 0


def test_marginal_estimator_is_unbiased_enough_at_its_default_on_a_sparse_matrix():
    """The estimator itself, on a CSR matrix with an empty row (probability 1 of no tokens for DM)."""
    X = tiny_corpus(5)
    X[3] = 0
    theta = np.array([[0.5, 0.3, 0.1, 0.1], [0.05, 0.15, 0.3, 0.5]])
    est = marginal_doc_loglik(theta, sp.csr_matrix(X), np.array([0.4, 0.6]))
    keep = X.sum(1) > 0
    oracle = exact_loglik(theta, X[keep], np.array([0.4, 0.6])).per_document
    np.testing.assert_allclose(est[keep], oracle, atol=TOL)
    assert est[3] == 0.0


def test_a_dask_fit_of_the_partially_collapsed_sampler_says_why_it_has_none():
    import dask.array as da

    X = tiny_corpus(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = latentfs.fit(latentfs.DirichletDCA(2), da.from_array(X, chunks=(6, -1)),
                              method="partially_collapsed", seed=0, num_warmup=5, num_samples=4)
    assert result.log_likelihood is None
    assert "dask array" in result.diagnostics["no_pointwise_log_likelihood"]
