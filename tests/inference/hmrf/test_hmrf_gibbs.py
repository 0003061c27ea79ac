"""Gibbs sampling for the hidden Potts model: the single-site conditional and the label chain's stationary
law against brute-force enumeration of a 3×3 lattice (χ²), and the engine's result contract."""

import itertools

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.hmrf.family import prepare
from latentfs.models.hmrf import HiddenPotts, agreement, potts_sweep
from latentfs.testing import check_reproducible, check_result_contract, chi2_test

ETA = 0.8
MEANS = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
VAR = torch.tensor([[0.8], [0.5]], dtype=torch.float64)


def _small():
    model = HiddenPotts(2)
    sim = model.simulate((3, 3), params={"interaction": ETA, "means": MEANS.numpy(), "precision": 1 / VAR.numpy()},
                         seed=3)
    fam = prepare(model, sim["data"], for_fit=False)
    return fam, fam.log_emission(MEANS, VAR), torch.as_tensor(sim["labels"])


def _enumerate(log_g, k=2):
    """Every configuration of the 3×3 lattice and its exact posterior p(z | y, θ) ∝ exp(η A(z)) Π g."""
    configs = torch.tensor(list(itertools.product(range(k), repeat=9))).reshape(-1, 3, 3)
    logp = ETA * agreement(configs) + log_g.expand(configs.shape[0], 3, 3, k).gather(-1, configs[..., None])[
        ..., 0
    ].sum((-2, -1))
    return configs, torch.softmax(logp, 0)


def test_single_site_conditional_matches_enumeration():
    fam, log_g, labels = _small()
    configs, post = _enumerate(log_g)
    # Exact P(z_11 = k | the other 8 sites, y) from the joint table.
    others = torch.ones(3, 3, dtype=torch.bool)
    others[1, 1] = False
    same = (configs[:, others] == labels[others]).all(-1)
    exact = torch.stack([post[same & (configs[:, 1, 1] == k)].sum() for k in range(2)])
    exact = exact / exact.sum()
    # Site (1, 1) is black: it is drawn in the first half-sweep given the (original) white sites and is
    # not touched by the second half.
    batch = labels.expand(40_000, 3, 3).clone()
    gen = torch.Generator().manual_seed(0)
    drawn = potts_sweep(batch, log_g, ETA, 2, gen)[:, 1, 1]
    counts = torch.bincount(drawn, minlength=2).numpy()
    chi2_test(counts, exact.numpy(), alpha=1e-4, what="site (1,1) draws")  # false-alarm rate 1e-4


def test_label_chain_stationary_law_matches_enumeration():
    fam, log_g, _ = _small()
    configs, post = _enumerate(log_g)
    gen = torch.Generator().manual_seed(1)
    chains = torch.randint(0, 2, (30_000, 3, 3), generator=gen)
    for _ in range(40):  # independent chains, each run to (near) stationarity: the last states are i.i.d.
        chains = potts_sweep(chains, log_g, ETA, 2, gen)
    index = (chains.reshape(-1, 9) * (2 ** torch.arange(8, -1, -1))).sum(-1)
    counts = torch.bincount(index, minlength=512).numpy()
    chi2_test(counts, post.numpy(), alpha=1e-4, what="3×3 label configurations")  # false-alarm rate 1e-4


def test_gibbs_engine_result_is_aligned_and_checked():
    model = HiddenPotts(2)
    sim = model.simulate((24, 24), params={"interaction": 0.8, "means": [[0.0], [2.0]], "precision": [[2.0], [2.0]]},
                         seed=0)
    res = latentfs.fit(model, sim["data"], method="gibbs", num_chains=2, num_warmup=60, num_samples=120, seed=0,
                       warn=False)
    assert res.kind() == "draws"
    assert res.samples("means").shape == (2, 120, 2, 1)
    assert res.alignment is not None and res.alignment["site"] == "means"
    assert set(res.diagnostics["convergence"]) == {"interaction", "means", "variance"}
    # After alignment every chain puts the low mean first or every chain puts it second.
    order = np.sign(res.samples("means")[:, :, 1, 0].mean(1) - res.samples("means")[:, :, 0, 0].mean(1))
    assert abs(order.sum()) == 2
    assert 0.0 < res.diagnostics["interaction_acceptance"] < 1.0
    marg = res.extras["label_marginals"]
    np.testing.assert_allclose(marg.sum(-1), 1.0)
    lab = res.extras["labels"]
    acc = max((lab == sim["labels"]).mean(), (lab != sim["labels"]).mean())
    assert acc > 0.9
    # A pseudo-posterior for η that is centred near the truth on this well-separated field.
    assert abs(float(res.mean("interaction")) - 0.8) < 0.3


def test_gibbs_options_are_checked():
    data = np.random.default_rng(0).normal(size=(6, 6))
    with pytest.raises(DataError, match=r"num_samples must be an integer ≥ 1; got 0"):
        latentfs.fit(HiddenPotts(2), data, method="gibbs", num_samples=0)
    with pytest.raises(DataError, match=r"interaction_step must be a number > 0; got -0.1"):
        latentfs.fit(HiddenPotts(2), data, method="gibbs", interaction_step=-0.1)


def test_result_contract_and_reproducibility():
    sim = HiddenPotts(2).simulate((12, 12), params={"interaction": 0.8, "means": [[0.0], [2.0]],
                                                     "precision": [[2.0], [2.0]]}, seed=0)
    opts = {"num_chains": 2, "num_warmup": 10, "num_samples": 20, "warn": False}
    check_result_contract(latentfs.fit(HiddenPotts(2), sim["data"], method="gibbs", seed=0, **opts))
    check_reproducible(lambda s: latentfs.fit(HiddenPotts(2), sim["data"], method="gibbs", seed=s, **opts))
    for method in ("icm", "mean_field"):
        check_result_contract(latentfs.fit(HiddenPotts(2), sim["data"], method=method, seed=0))
