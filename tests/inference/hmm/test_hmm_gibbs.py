"""Block Gibbs (FFBS) for HMMs: the conjugate θ | z draws against their closed-form moments (statistical
tier), and a small run whose chains are relabelled on both axes of the transition matrix."""

import numpy as np
import torch

import latentfs
from latentfs.inference.hmm.family import prepare
from latentfs.inference.hmm.gibbs import chain_prior, gibbs_parameters
from latentfs.models.hmm import CategoricalHMM, GaussianHMM


def test_parameter_draws_match_the_dirichlet_posterior_given_states():
    # With z fixed, rows of A ~ Dirichlet(α_A + n_k·) and π ~ Dirichlet(α_π + start counts). The sample mean
    # of 4000 draws must lie within 5 standard errors of the exact mean for every entry (false-alarm rate
    # below 1e-5 over the 12 entries, fixed seed).
    sim = CategoricalHMM(3, 4).simulate(3, [30, 20, 25], seed=0)
    model = CategoricalHMM(3, transition_concentration=0.5)
    fam = prepare(model, sim["data"], sim["lengths"])
    states = torch.as_tensor(sim["states"])
    prior = chain_prior(fam)
    gen = torch.Generator().manual_seed(0)
    draws = [gibbs_parameters(fam, states, prior, gen) for _ in range(4000)]
    trans = torch.stack([d["transmat"] for d in draws]).numpy()
    start = torch.stack([d["startprob"] for d in draws]).numpy()
    counts = np.zeros((3, 3))
    for s, e in zip(np.cumsum(sim["lengths"]) - sim["lengths"], np.cumsum(sim["lengths"]), strict=True):
        np.add.at(counts, (sim["states"][s : e - 1], sim["states"][s + 1 : e]), 1)
    conc = 0.5 + counts
    exact = conc / conc.sum(1, keepdims=True)
    sd = np.sqrt(exact * (1 - exact) / (conc.sum(1, keepdims=True) + 1))
    assert np.all(np.abs(trans.mean(0) - exact) < 5 * sd / np.sqrt(4000))
    conc_pi = 1.0 + np.bincount(sim["states"][np.cumsum(sim["lengths"]) - sim["lengths"]], minlength=3)
    exact_pi = conc_pi / conc_pi.sum()
    sd_pi = np.sqrt(exact_pi * (1 - exact_pi) / (conc_pi.sum() + 1))
    assert np.all(np.abs(start.mean(0) - exact_pi) < 5 * sd_pi / np.sqrt(4000))


def test_gibbs_chains_are_aligned_and_checked():
    truth = {
        "startprob": np.array([0.5, 0.5]),
        "transmat": np.array([[0.9, 0.1], [0.3, 0.7]]),
        "means": np.array([[-3.0], [3.0]]),
        "precision": np.array([[1.0], [1.0]]),
    }
    sim = GaussianHMM(2).simulate(3, 100, params=truth, seed=1)
    res = latentfs.fit(
        GaussianHMM(2), sim["data"], method="gibbs", lengths=sim["lengths"],
        num_chains=2, num_warmup=60, num_samples=80, seed=0, warn=False,
    )
    assert res.samples("transmat").shape == (2, 80, 2, 2)
    assert res.alignment is not None and "convergence" in res.diagnostics
    # label-invariant read-out: order the states by their posterior mean, then compare with the truth
    order = np.argsort(res.mean("means")[:, 0])
    np.testing.assert_allclose(res.mean("means")[order, 0], [-3.0, 3.0], atol=0.4)
    # both axes of A follow the relabelling, so its rows and columns line up with the means
    np.testing.assert_allclose(res.mean("transmat")[np.ix_(order, order)], truth["transmat"], atol=0.12)
    rows = res.samples("transmat").sum(-1)
    np.testing.assert_allclose(rows, 1.0, atol=1e-12)
