"""The mixture VB bound recomputed from the Pyro model's trace (issue 12 item 10).

Binary latent class model (:class:`LatentClass`): the engine reports ℒ = Σ_n log Σ_k exp ρ_nk − KL(q(θ) ‖ p(θ))
(Bishop 2006, §10.2). Here the same quantity is estimated by ``pyro.infer.TraceEnum_ELBO`` of the declared
model under a closure guide over the fitted parameters: q(η) = Dirichlet (``fitted_params("weights")``),
q(θ_ki) = Beta from ``extras["item_concentration"]`` and q(z_n) = Categorical(``extras["responsibilities"]``),
with z enumerated in the guide (so only η and θ are sampled). The mean of B independent
``TraceEnum_ELBO(num_particles=P)`` estimates must match within 4 standard errors (false-alarm rate about
6e-5 for a normal mean).

Gaussian mixtures (``full``: Normal–Wishart q(μ_k, Λ_k); ``diag``: Normal–Gamma): the result stores q(θ)
itself — ``precision`` as a Wishart (``dof``, ``scale``) or Gamma (``concentration``, ``rate``) and
``means`` with ``kappa``, so that q(μ_k | Λ_k) = N(m_k, (κ_k Λ_k)⁻¹) — and the guide is rebuilt from the
result alone. B = 20 independent estimates of 10 particles, |mean − ℒ| < max(4 standard errors, 1e-5)
(false-alarm rate about 6e-5 for a normal mean). At the VB fixed point q(θ) ∝ exp E_q(z)[log p(y, z, θ)], so
log p − log q is constant in θ up to the fit's convergence error and the standard error is tiny (7e-7 for
``full``, 5e-9 for ``diag``, measured): the 1e-5 floor is for the stopping tolerance, as above. Any error in
the stored parameters (a wrong ν, W, κ or a swapped scale) moves the estimate by far more.
"""

import warnings

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import TraceEnum_ELBO

import latentfs
from latentfs.models.mixture import GaussianMixture, LatentClass

Z_MAX = 4.0


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _items() -> np.ndarray:
    rng = np.random.default_rng(0)
    probs = np.array([[0.9, 0.8, 0.2, 0.1, 0.7], [0.1, 0.3, 0.8, 0.9, 0.4]])
    z = rng.integers(0, 2, size=40)
    return (rng.random((40, 5)) < probs[z]).astype(float)


def _guide(weights_conc: torch.Tensor, beta1: torch.Tensor, beta0: torch.Tensor, resp: torch.Tensor):
    """Closure guide (no param store): q(η) q(θ) Π_n q(z_n), z enumerated."""
    k, p = beta1.shape
    n = resp.shape[0]

    def guide(items=None, **_):
        pyro.sample("weights", dist.Dirichlet(weights_conc))
        with pyro.plate("component", k, dim=-2), pyro.plate("item", p, dim=-1):
            pyro.sample("item_probs", dist.Beta(beta1, beta0))
        with pyro.plate("sample", n, dim=-2):
            pyro.sample("assignment", dist.Categorical(resp[:, None, :]), infer={"enumerate": "parallel"})

    return guide


def test_latent_class_vb_bound_equals_pyro_trace_enum_elbo():
    X = _items()
    lc = LatentClass(2)
    res = latentfs.fit(lc, X, method="vb", seed=0, tol=1e-12, max_iter=5000)
    assert res.diagnostics["converged"]
    weights_conc = torch.as_tensor(res.fitted_params("weights")["concentration"])
    assert weights_conc.min() > 5  # two occupied classes: not a degenerate one-class optimum
    conc = torch.as_tensor(res.extras["item_concentration"])  # (K, 2p): level 0 then level 1 of each item
    beta0, beta1 = conc[:, 0::2], conc[:, 1::2]
    # the reported point probabilities are the means of these Betas: checks the column layout
    assert np.allclose(res.fitted_params("item_probs")["value"], (beta1 / (beta0 + beta1)).numpy(), atol=1e-12)
    resp = torch.as_tensor(res.extras["responsibilities"])
    guide = _guide(weights_conc, beta1, beta0, resp)
    pyro.set_rng_seed(0)
    elbo = TraceEnum_ELBO(max_plate_nesting=2, num_particles=25)
    items = torch.as_tensor(X)
    vals = np.array([-elbo.loss(lc.model, guide, items) for _ in range(40)])
    mean, se = float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(vals.size))
    engine = res.diagnostics["bound"]
    assert engine == pytest.approx(float(res.trace[0, -1]), abs=1e-6)
    # At the VB fixed point the integrand is almost constant in (η, θ) (conjugate q), so se is tiny (3e-7
    # measured): allow 1e-5 for the convergence tolerance of the fit as well.
    assert abs(mean - engine) < max(Z_MAX * se, 1e-5), (mean, se, engine)


def _gaussian_guide(res, covariance_type: str):
    """q(η) q(Λ) q(μ | Λ) Π_n q(z_n) rebuilt from the result's stored parameters only."""
    weights_conc = torch.as_tensor(res.fitted_params("weights")["concentration"])
    prec, means = res.fitted_params("precision"), res.fitted_params("means")
    loc, kappa = torch.as_tensor(means["loc"]), torch.as_tensor(means["kappa"])
    resp = torch.as_tensor(res.extras["responsibilities"])
    k, n = loc.shape[0], resp.shape[0]

    def guide(data=None, **_):
        pyro.sample("weights", dist.Dirichlet(weights_conc))
        if covariance_type == "full":
            with pyro.plate("component", k):
                lam = pyro.sample(
                    "precision", dist.Wishart(torch.as_tensor(prec["dof"]), covariance_matrix=torch.as_tensor(prec["scale"]))
                )
                pyro.sample("means", dist.MultivariateNormal(loc, precision_matrix=kappa[:, None, None] * lam))
        else:
            with pyro.plate("component", k, dim=-2), pyro.plate("feature", loc.shape[1], dim=-1):
                lam = pyro.sample(
                    "precision", dist.Gamma(torch.as_tensor(prec["concentration"]), torch.as_tensor(prec["rate"]))
                )
                pyro.sample("means", dist.Normal(loc, (kappa * lam).rsqrt()))
        with pyro.plate("sample", n, dim=-2):
            pyro.sample("assignment", dist.Categorical(resp[:, None, :]), infer={"enumerate": "parallel"})

    return guide


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_gaussian_vb_bound_equals_pyro_trace_enum_elbo(covariance_type):
    gm = GaussianMixture(2, covariance_type=covariance_type, mean_precision=0.05)
    X = gm.simulate(60, 2, seed=3)["data"]
    res = latentfs.fit(gm, X, method="vb", seed=0, tol=1e-12, max_iter=5000)
    assert res.diagnostics["converged"]
    assert res.kind("precision") == "distribution" and res.kind("means") == "distribution"
    assert res.fitted_params("weights")["concentration"].min() > 5  # both components occupied
    guide = _gaussian_guide(res, covariance_type)
    pyro.set_rng_seed(0)
    elbo = TraceEnum_ELBO(max_plate_nesting=2, num_particles=10)
    data = torch.as_tensor(X)
    with warnings.catch_warnings():
        # torch's Wishart.rsample flags valid draws as "Singular sample detected" (see models/mixture.py).
        warnings.filterwarnings("ignore", message="Singular sample detected")
        vals = np.array([-elbo.loss(gm.model, guide, data) for _ in range(20)])
    mean, se = float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(vals.size))
    engine = res.diagnostics["bound"]
    assert abs(mean - engine) < max(Z_MAX * se, 1e-5), (mean, se, engine)


def test_gaussian_vb_stores_the_wishart_and_draws_it_on_demand(tmp_path):
    gm = GaussianMixture(2, mean_precision=0.05)
    X = gm.simulate(200, 3, seed=1)["data"]
    res = latentfs.fit(gm, X, method="vb", seed=0)
    prec = res.fitted_params("precision")
    assert prec["family"] == "wishart" and prec["dof"].shape == (2,) and prec["scale"].shape == (2, 3, 3)
    draws = res.samples("precision", num_draws=4000, seed=1)
    assert draws.shape == (1, 4000, 2, 3, 3)
    # Monte Carlo mean of the draws against E[Λ] = ν W: each entry within 5 standard errors (false alarm
    # about 6e-7 per entry, 18 entries).
    se = draws[0].std(0) / np.sqrt(4000)
    assert np.all(np.abs(draws[0].mean(0) - res.mean("precision")) < 5 * se + 1e-12)
    np.testing.assert_allclose(res.mean("precision"), prec["dof"][:, None, None] * prec["scale"])
    back = latentfs.load(res.save(tmp_path / "vb"))
    np.testing.assert_array_equal(back.fitted_params("precision")["scale"], prec["scale"])
    np.testing.assert_array_equal(back.fitted_params("means")["kappa"], res.fitted_params("means")["kappa"])
