"""The log_likelihood group of an HMM Gibbs result means what ``az.loo`` assumes (issue 30): each sequence's
log f(y_s | θ) at the kept draw's θ, the states summed out; checked against brute-force enumeration of every
state path on tiny sequences. Before, the result had no such group and ``az.loo`` raised a TypeError."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
from scipy.special import logsumexp
from scipy.stats import norm

import latentfs
from latentfs.models.hmm import GaussianHMM


def _enumerated(y, startprob, transmat, means, variances):
    """log Σ_z π_z0 N(y_0 | μ_z0, σ²_z0) Π_t A_{z_{t-1} z_t} N(y_t | μ_zt, σ²_zt) over every path z."""
    k = startprob.size
    terms = []
    for path in itertools.product(range(k), repeat=y.size):
        lp = np.log(startprob[path[0]]) + norm.logpdf(y[0], means[path[0]], np.sqrt(variances[path[0]]))
        for t in range(1, y.size):
            lp += np.log(transmat[path[t - 1], path[t]]) + norm.logpdf(y[t], means[path[t]], np.sqrt(variances[path[t]]))
        terms.append(lp)
    return float(logsumexp(terms))


def test_gibbs_pointwise_log_likelihood_is_each_sequences_marginal_at_the_kept_draw():
    sim = GaussianHMM(2, mean_precision=0.02).simulate(3, 6, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = latentfs.fit(GaussianHMM(2), sim["data"], method="gibbs", lengths=sim["lengths"], seed=0,
                           num_chains=2, num_warmup=5, num_samples=4)
    ll = res.log_likelihood
    assert ll.shape == (2, 4, 3) and res.diagnostics["observation_dim"] == "sequence"
    y = np.asarray(sim["data"])[:, 0]
    bounds = np.concatenate([[0], np.cumsum(sim["lengths"])])
    draws = {s: res.samples(s) for s in ("startprob", "transmat", "means", "covariance")}
    for c in range(2):
        for d in range(4):
            for s in range(3):
                expected = _enumerated(y[bounds[s]:bounds[s + 1]], draws["startprob"][c, d], draws["transmat"][c, d],
                                       draws["means"][c, d, :, 0], draws["covariance"][c, d, :, 0])
                np.testing.assert_allclose(ll[c, d, s], expected, rtol=1e-10)


def test_az_loo_reads_an_hmm_gibbs_result_and_a_mixture_names_its_observed_site():
    import arviz as az

    sim = GaussianHMM(2, mean_precision=0.02).simulate(6, 40, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = latentfs.fit(GaussianHMM(2), sim["data"], method="gibbs", lengths=sim["lengths"], seed=0,
                           num_chains=2, num_warmup=50, num_samples=60)
        idata = res.to_inference_data()
        loo = az.loo(idata)
    assert list(idata.log_likelihood.data_vars) == ["data"]  # the model's observed site, not "counts"
    assert idata.log_likelihood["data"].dims == ("chain", "draw", "sequence")
    assert np.isfinite(float(loo.elpd_loo))
