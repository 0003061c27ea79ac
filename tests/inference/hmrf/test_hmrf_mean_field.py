"""Mean-field EM for the hidden Potts model: the returned q solves the mean-field equations at the returned θ,
the free energy is a lower bound on the exact log Σ_z exp(η A(z)) Π g (3×3 enumeration), and the restored
field beats the pixel-wise mixture."""

import itertools

import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.hmrf.family import prepare
from latentfs.inference.hmrf.mean_field import _solve, fixed_point_residual, mean_field_free_energy
from latentfs.models.hmrf import HiddenPotts, agreement


def test_fixed_point_holds_at_returned_parameters():
    sim = HiddenPotts(3).simulate((20, 20), params={"interaction": 0.9, "means": [[0.0], [1.0], [2.0]],
                                                     "precision": [[3.0], [3.0], [3.0]]}, seed=1)
    res = latentfs.fit(HiddenPotts(3), sim["data"], method="mean_field", seed=0)
    fam = prepare(HiddenPotts(3), sim["data"])
    log_g = fam.log_emission(torch.as_tensor(res.mean("means")), torch.as_tensor(res.mean("variance")))
    q = torch.as_tensor(res.extras["label_probabilities"])
    assert fixed_point_residual(q, log_g, float(res.mean("interaction"))) < 1e-8
    np.testing.assert_allclose(q.sum(-1).numpy(), 1.0, atol=1e-12)


@pytest.mark.parametrize("eta", [0.3, 1.0])
def test_free_energy_is_a_lower_bound_on_enumerated_log_partition(eta):
    sim = HiddenPotts(2).simulate((3, 3), params={"interaction": eta, "means": [[0.0], [1.0]],
                                                   "precision": [[2.0], [2.0]]}, seed=0)
    fam = prepare(HiddenPotts(2), sim["data"], for_fit=False)
    log_g = fam.log_emission(torch.tensor([[0.0], [1.0]]), torch.tensor([[0.5], [0.5]]))
    configs = torch.tensor(list(itertools.product(range(2), repeat=9))).reshape(-1, 3, 3)
    logp = eta * agreement(configs) + log_g.expand(512, 3, 3, 2).gather(-1, configs[..., None])[..., 0].sum((-2, -1))
    exact = float(torch.logsumexp(logp, 0))
    q = _solve(fam, torch.full((3, 3, 2), 0.5, dtype=torch.float64) + 0.01 * fam.onehot(torch.as_tensor(sim["labels"])),
               log_g, eta, 500, tol=1e-13)
    bound = mean_field_free_energy(q, log_g, eta)
    assert bound <= exact + 1e-10
    assert bound > exact - 2.0  # not a vacuous bound on 9 sites


def test_mean_field_denoises_better_than_pixelwise_mixture():
    sim = HiddenPotts(2).simulate((64, 64), params={"interaction": 0.6, "means": [[0.0], [1.0]],
                                                     "precision": [[8.0], [8.0]]}, seed=0)
    res = latentfs.fit(HiddenPotts(2), sim["data"], method="mean_field", seed=0)
    x = sim["data"].reshape(-1, 1)
    baseline = GaussianMixture(2, random_state=0).fit(x).predict(x).reshape(64, 64)

    def acc(lab):
        return max((lab == sim["labels"]).mean(), (lab != sim["labels"]).mean())

    assert acc(res.extras["labels"]) > acc(baseline) + 0.005
    assert res.kind() == "point"


def test_mean_field_options_are_checked():
    data = np.random.default_rng(0).normal(size=(6, 6))
    with pytest.raises(DataError, match=r"inner_iters must be an integer ≥ 1; got 0"):
        latentfs.fit(HiddenPotts(2), data, method="mean_field", inner_iters=0)
    with pytest.raises(DataError, match=r"tol must be a number ≥ 0; got nan"):
        latentfs.fit(HiddenPotts(2), data, method="mean_field", tol=float("nan"))
    with pytest.raises(DataError, match=r"n_components must be at most 36"):
        latentfs.fit(HiddenPotts(40), data, method="mean_field")
