"""The latent trait Pyro model (issue 18 item 3): simulation, the engines' quadrature marginal against the
model's own log density integrated over z, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pyro import poutine

from latentfs.core.data import DataError
from latentfs.inference.latent_trait.quadrature import (
    TraitParams,
    gauss_hermite_grid,
    node_posterior,
    prepare_items,
)
from latentfs.models.latent_trait import LatentTrait

BINARY = dict(intercepts=[1.0, 0.0, -0.5, 0.5], discrimination=[[1.5], [1.0], [2.0], [0.8]])
ORDINAL = dict(intercepts=[[1.5, -0.5, 0.0], [2.0, 0.5, -1.0], [0.5, -1.0, 0.0]], discrimination=[[1.2], [0.8], [1.6]])
LEVELS = [3, 4, 3]
TWO = dict(intercepts=[0.5, -0.5, 0.0, 1.0, -1.0], discrimination=[[1.5, 0.0], [1.0, 0.5], [0.0, 1.2], [0.7, 0.7],
                                                                     [0.3, 1.0]])


def test_simulate_binary_and_ordinal():
    sim = LatentTrait(1).simulate(500, **BINARY, seed=0)
    assert sim["items"].shape == (500, 4) and set(np.unique(sim["items"])) == {0.0, 1.0}
    # the easiest item (largest intercept) is answered 1 most often
    assert sim["items"].mean(0).argmax() == 0
    sim = LatentTrait(1, n_levels=LEVELS).simulate(800, **ORDINAL, missing_fraction=0.1, seed=1)
    items = sim["items"]
    for j, s in enumerate(LEVELS):
        seen = np.unique(items[~np.isnan(items[:, j]), j])
        assert seen.tolist() == list(range(s))
    assert 0.05 < np.isnan(items).mean() < 0.15 and not np.isnan(items).all(1).any()
    again = LatentTrait(1, n_levels=LEVELS).simulate(800, **ORDINAL, missing_fraction=0.1, seed=1)
    np.testing.assert_array_equal(np.isnan(items), np.isnan(again["items"]))


def _pyro_log_density(model: LatentTrait, params: dict, X: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Σ_j log g_j(y_ij | z) from the Pyro model's own trace, per person and node: (n, G). Every person is
    repeated once per node in one trace (traits conditioned on the node)."""
    n, p = X.shape
    G = nodes.shape[0]
    data = torch.as_tensor(np.tile(X, (G, 1)))
    traits = torch.as_tensor(np.repeat(nodes, n, axis=0))
    c = np.asarray(params["intercepts"], dtype=np.float64)
    cond = {
        "intercepts": torch.as_tensor(c),
        "discrimination": torch.as_tensor(np.asarray(params["discrimination"], dtype=np.float64)),
        "traits": traits,
    }
    tr = poutine.trace(poutine.condition(model.model, cond)).get_trace(data)
    tr.compute_log_prob()
    total = torch.zeros(G * n, dtype=torch.float64)
    for name, site in tr.nodes.items():
        if site["type"] == "sample" and (name == "items" or name.startswith("item_")):
            lp = site["log_prob"]
            total = total + (lp.sum(-1) if lp.dim() == 2 else lp)
    return total.reshape(G, n).T.numpy()


@pytest.mark.parametrize(
    "model, params, n_nodes, ref_nodes",
    [
        (LatentTrait(1), BINARY, 21, 101),
        (LatentTrait(1, n_levels=LEVELS), ORDINAL, 21, 101),
        (LatentTrait(2), TWO, 15, 41),
    ],
)
def test_quadrature_marginal_matches_the_pyro_model_integrated_by_a_high_order_rule(model, params, n_nodes, ref_nodes):
    X = model.simulate(40, **params, missing_fraction=0.1, seed=2)["items"]
    q = model.n_components
    # The engine's marginal on its default grid …
    levels = model.levels(X.shape[1])
    c = np.asarray(params["intercepts"], dtype=np.float64)
    c = c[:, None] if c.ndim == 1 else c
    theta = TraitParams(torch.as_tensor(c), torch.as_tensor(np.asarray(params["discrimination"], dtype=np.float64)))
    data = prepare_items(X, levels, dtype=torch.float64, device="cpu")
    nodes, logw = gauss_hermite_grid(q, n_nodes)
    engine = node_posterior(theta, data, nodes, logw)[1].numpy()[data.inverse]
    # … against the Pyro model's log density integrated over z ~ N(0, I) by a much higher-order rule.
    ref_z, ref_logw = gauss_hermite_grid(q, ref_nodes)
    joint = _pyro_log_density(model, params, X, ref_z.numpy()) + ref_logw.numpy()
    reference = np.logaddexp.reduce(joint, axis=1)
    # The same high-order rule through the engine's code: agreement to rounding (item_log_probs = Pyro's
    # Bernoulli / OrderedLogistic).
    same = node_posterior(theta, data, ref_z, ref_logw)[1].numpy()[data.inverse]
    np.testing.assert_allclose(same, reference, rtol=1e-12)
    # Quadrature error of the default rule, measured here at most 2.7e-5 nats per person: the tolerance is 1e-4.
    np.testing.assert_allclose(engine, reference, atol=1e-4)


def test_quadrature_marginal_matches_monte_carlo():
    # Monte Carlo over z with 200,000 draws: the per-person standard error is below 0.005 nats here, so a
    # 0.02 tolerance is 4 standard errors (a false alarm well under 1e-4 per person at this fixed seed).
    model = LatentTrait(1)
    X = model.simulate(10, **BINARY, seed=3)["items"]
    rng = np.random.default_rng(0)
    z = rng.standard_normal(200_000)
    A = np.asarray(BINARY["discrimination"])[:, 0]
    c = np.asarray(BINARY["intercepts"])
    logits = c[None, :] + z[:, None] * A[None, :]
    loglik = X @ (-np.logaddexp(0, -logits)).T + (1 - X) @ (-np.logaddexp(0, logits)).T  # (n, draws)
    mc = np.logaddexp.reduce(loglik, axis=1) - np.log(z.size)
    data = prepare_items(X, model.levels(4), dtype=torch.float64, device="cpu")
    nodes, logw = gauss_hermite_grid(1, 21)
    theta = TraitParams(torch.as_tensor(c[:, None]), torch.as_tensor(A[:, None]))
    engine = node_posterior(theta, data, nodes, logw)[1].numpy()[data.inverse]
    np.testing.assert_allclose(engine, mc, atol=0.02)


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "X, model, match",
    [
        ([[0, 1, 0], [0, 0, 1], [0, 1, 1]], LatentTrait(1), r"column 0 \('x0'\) has one category"),
        ([[0, 1, 2], [1, 0, 1], [0, 1, 0]], LatentTrait(1), "must hold binary items coded 0/1.*row 0 column 2 holds 2"),
        ([[0, 1, 0.5], [1, 0, 1], [0, 1, 0]], LatentTrait(1), "binary items coded 0/1"),
        ([[0, 1, 1], [1, 0, 1], [2, 1, 0], [1, 3, 0]], LatentTrait(1, n_levels=3), "category that was not declared"),
        ([[0, 1, 1], [1, 0, 1], [2, 1, 0], [1, 2, 0]], LatentTrait(1, n_levels=[3, 3, 3]), r"never uses category \[2\]"),
        ([[0, 1, 1], [1, 0, 1], [-1, 1, 0]], LatentTrait(1, n_levels=3), "ordinal item codes 0, 1"),
        ([[0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 0, 0]], LatentTrait(2),
         r"n_components=2 \(latent traits\) is more than 3 items can identify: the model has 8 free parameters but .* only 7"),
        ([[0, 1], [1, 0], [1, 1]], LatentTrait(1), r"n_components=1 \(latent traits\) is more than 2 items can identify"),
        ([[0, 1, 1]], LatentTrait(1), "needs at least 2 rows"),
        ([[np.nan, 1, 1], [np.nan, 0, 1], [np.nan, 1, 0]], LatentTrait(1), "entirely missing"),
    ],
)
def test_bad_data_is_refused(X, model, match):
    with pytest.raises(DataError, match=match):
        model.check_data(np.asarray(X, dtype=np.float64))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_components": 0}, "n_components must be an integer ≥ 1"),
        ({"n_components": 1.0}, r"n_components must be an integer ≥ 1; got 1.0 \(float\). Write 1 instead"),
        ({"n_levels": 1}, "n_levels must be an integer ≥ 2"),
        ({"n_levels": [2, 1.5]}, "n_levels must be an integer ≥ 2"),
    ],
)
def test_bad_model_options_are_refused(kwargs, match):
    with pytest.raises(DataError, match=match):
        LatentTrait(**kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"seed": -1}, "seed must be an int ≥ 0"),
        ({"seed": 1.5}, "seed must be an int ≥ 0"),
        ({"intercepts": [0.0, 0.0]}, r"intercepts must have shape \(4,\)"),
        ({"discrimination": [[1.0, 0.0]] * 4}, r"discrimination must be a finite array of shape \(n_items, 1\)"),
        ({"missing_fraction": 1.0}, r"missing_fraction must lie in \[0, 1\)"),
    ],
)
def test_bad_simulate_arguments_are_refused(kwargs, match):
    args = {**BINARY, **kwargs}
    with pytest.raises(DataError, match=match):
        LatentTrait(1).simulate(10, **args)


def test_ordinal_intercepts_must_decrease():
    with pytest.raises(DataError, match="intercepts of item 0 must be finite and strictly decreasing"):
        LatentTrait(1, n_levels=3).simulate(10, intercepts=[[0.0, 1.0], [1.0, 0.0]], discrimination=[[1.0], [1.0]])
