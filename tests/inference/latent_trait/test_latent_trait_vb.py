"""Variational EM (Jaakkola–Jordan bound) for binary latent trait items (issue 18 item 3): the bound never
falls, stays below the marginal log-likelihood (Titterington §1.9, oracles 1 and 2), q(z) is returned as a
distribution, and the fit agrees in direction with the quadrature EM."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.latent_trait.quadrature import TraitParams, gauss_hermite_grid, node_posterior
from latentfs.inference.latent_trait.vb import VBState, _moments, _update_q, elbo, jj_lambda
from latentfs.models.latent_trait import LatentTrait

BINARY = dict(intercepts=[1.0, 0.0, -0.5, 0.5, 1.5], discrimination=[[1.5], [1.0], [2.0], [0.8], [1.2]])
TWO = dict(intercepts=np.zeros(6), discrimination=[[1.5, 0], [1.2, 0.3], [1, 0], [0, 1.5], [0.2, 1.3], [0, 1.0]])


@pytest.mark.parametrize("model, params", [(LatentTrait(1), BINARY), (LatentTrait(2), TWO)])
def test_bound_never_falls_and_stays_below_the_log_likelihood(model, params):
    X = model.simulate(400, **params, missing_fraction=0.05, seed=0)["items"]
    post = latentfs.fit(model, X, method="vb", tol=1e-12, max_iter=500, warn=False)
    trace = post.trace[0]
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:]))
    assert post.diagnostics["elbo"] <= post.diagnostics["log_likelihood"]
    assert post.diagnostics["bound_gap"] > 0
    assert post.kind("traits") == "distribution" and post.kind("discrimination") == "point"
    assert post.samples("traits", 10).shape == (1, 10, 400, model.n_components)


def test_jaakkola_jordan_bound_is_a_lower_bound_tight_at_xi():
    x = torch.linspace(-6, 6, 101, dtype=torch.float64)
    for xi in (0.0, 0.5, 2.0, 5.0):
        xi_t = torch.full_like(x, xi)
        bound = torch.nn.functional.logsigmoid(xi_t) + (x - xi_t) / 2 - jj_lambda(xi_t) * (x**2 - xi_t**2)
        assert torch.all(bound <= torch.nn.functional.logsigmoid(x) + 1e-12)
        at = torch.tensor([xi, -xi], dtype=torch.float64)
        lam = jj_lambda(at.abs())
        tight = torch.nn.functional.logsigmoid(at.abs()) + (at - at.abs()) / 2 - lam * (at**2 - at.abs() ** 2)
        torch.testing.assert_close(tight, torch.nn.functional.logsigmoid(at))


def test_elbo_is_below_the_quadrature_marginal_for_any_q():
    # Oracle 2 of Titterington §1.9: L(q, θ) ≤ log f(y | θ) for any q and ξ, at fixed θ.
    model = LatentTrait(1)
    X = model.simulate(60, **BINARY, seed=1)["items"]
    from latentfs.inference.latent_trait.quadrature import prepare_items

    data = prepare_items(X, model.levels(5), dtype=torch.float64, device="cpu")
    theta = TraitParams(torch.tensor(BINARY["intercepts"], dtype=torch.float64)[:, None],
                        torch.tensor(BINARY["discrimination"], dtype=torch.float64))
    y, observed, counts = data.onehot[..., 1], data.onehot.sum(-1), data.counts
    nodes, logw = gauss_hermite_grid(1, 61)
    exact = float((counts * node_posterior(theta, data, nodes, logw)[1]).sum())
    gen = torch.Generator().manual_seed(0)
    n_pat = y.shape[0]
    for _ in range(5):
        state = VBState(theta, torch.rand(n_pat, 5, generator=gen, dtype=torch.float64) * 3,
                        torch.randn(n_pat, 1, generator=gen, dtype=torch.float64),
                        torch.rand(n_pat, 1, 1, generator=gen, dtype=torch.float64) + 0.1)
        assert elbo(state, y, observed, counts) <= exact
    # the optimal q and ξ at θ: the bound is closer but still below
    state = VBState(theta, torch.ones(n_pat, 5, dtype=torch.float64), torch.zeros(n_pat, 1, dtype=torch.float64),
                    torch.ones(n_pat, 1, 1, dtype=torch.float64))
    for _ in range(50):
        mean, cov = _update_q(theta, state.xi, y, observed)
        state = VBState(theta, state.xi, mean, cov)
        state.xi = torch.sqrt(_moments(state)[1])
    best = elbo(state, y, observed, counts)
    assert best <= exact and exact - best < 0.1 * n_pat * 5  # within 0.1 nats per answer


def test_vb_agrees_in_direction_with_em():
    model = LatentTrait(1)
    X = model.simulate(3000, **BINARY, seed=2)["items"]
    vb = latentfs.fit(model, X, method="vb")
    em = latentfs.fit(model, X, method="em")
    # The JJ bound shrinks the slopes, unevenly (reported in the tutorial): the most and the least
    # discriminating items and the person scores agree with EM.
    a_vb, a_em = vb.mean("discrimination")[:, 0], em.mean("discrimination")[:, 0]
    assert a_vb.argmax() == a_em.argmax() == 2 and a_vb.argmin() == a_em.argmin() == 3
    assert np.all(a_vb < a_em)
    r = np.corrcoef(vb.mean("traits")[:, 0], em.extras["trait_scores"][:, 0])[0, 1]
    assert r > 0.99


def test_vb_refuses_ordinal_items():
    model = LatentTrait(1, n_levels=3)
    X = np.array([[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 0, 1]], dtype=float)
    with pytest.raises(DataError, match="method='vb' .* takes binary items"):
        latentfs.fit(model, X, method="vb")


@pytest.mark.parametrize("options, match", [({"max_iter": -1}, "max_iter must be"), ({"seed": "a"}, "seed must")])
def test_vb_bad_options(options, match):
    X = LatentTrait(1).simulate(50, **BINARY, seed=0)["items"]
    with pytest.raises(DataError, match=match):
        latentfs.fit(LatentTrait(1), X, method="vb", **options)
