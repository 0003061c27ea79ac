"""The EM objective a fitted mixture of factor analysers reports, recomputed from the Pyro model's trace
(issue 12 item 10).

Already covered elsewhere (not repeated): FA's reported ``log_likelihood`` against the Pyro model with
factors integrated (``test_factor_em.py::test_engine_trace_non_decreasing``), the MFA E-step function
against the Pyro model (``test_mfa_estep_matches_pyro_and_is_monotone``) and the mixture E-step against
the enumerated Pyro model (``tests/models/test_mixture_model.py``). Missing until now: the value the MFA
*result* reports, at the parameters the result returns.
"""

import numpy as np
import pytest
import torch
from pyro import poutine

from latentfs import fit
from latentfs.models.factor import MixtureOfFactorAnalyzers


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_mfa_reported_log_likelihood_equals_pyro_trace_with_latents_integrated():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(2, 6, 1))
    mu = np.stack([np.zeros(6), np.full(6, 6.0)])
    model = MixtureOfFactorAnalyzers(2, 1)
    sim = model.simulate(300, loadings=W, mean=mu, noise_variance=0.2, weights=[0.4, 0.6], seed=0)
    post = fit(model, sim["data"], method="em", seed=0, n_init=2, tol=1e-10, max_iter=3000)
    values = {s: torch.as_tensor(post.mean(s)) for s in ("weights", "mean", "loadings", "noise_variance")}
    tr = poutine.trace(poutine.condition(model.model, values)).get_trace(
        torch.as_tensor(sim["data"]), integrate_latents=True
    )
    # the parameter sites' prior terms are not part of the EM log-likelihood
    ll = sum(float(site["fn"].log_prob(site["value"]).sum()) for name, site in tr.nodes.items()
             if site["type"] == "sample" and site["is_observed"] and name not in values)
    assert post.diagnostics["log_likelihood"] == pytest.approx(ll, rel=1e-10)
    assert float(post.trace[0, -1]) <= post.diagnostics["log_likelihood"] + 1e-8 * abs(ll)
