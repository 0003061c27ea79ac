"""The hidden Potts model declared in Pyro: its log density (up to the Potts normaliser) against the engines'
conditionals, simulation, and input validation."""

import itertools

import numpy as np
import pytest
import torch

from latentfs.core.data import DataError
from latentfs.inference.hmrf.family import conditional_logits, prepare
from latentfs.inference.hmrf.icm import icm_objective
from latentfs.models.hmrf import HiddenPotts, agreement
from latentfs.testing import pyro_log_density

PARAMS = {
    "interaction": 0.7,
    "means": [[-1.0, 0.5], [0.0, 0.0], [1.5, -0.5]],
    "precision": [[2.0, 1.0], [1.0, 3.0], [0.5, 2.0]],
}


def _case():
    model = HiddenPotts(3)
    sim = model.simulate((3, 3), 2, params=PARAMS, seed=1)
    return model, sim


def _density(model, sim, labels):
    values = {k: torch.as_tensor(np.asarray(sim[k], dtype=np.float64)) for k in ("interaction", "means", "precision")}
    values["labels"] = torch.as_tensor(labels)
    return pyro_log_density(model.model, values, torch.as_tensor(sim["data"]))


def test_agreement_counts_neighbour_pairs():
    z = torch.tensor([[0, 0, 1], [0, 1, 1]])
    # vertical pairs: (0,0) (0,1) (1,1) -> 2 agree; horizontal: 0-0, 0-1, 0-1, 1-1 -> 2 agree
    assert float(agreement(z)) == 4.0


def test_conditional_log_odds_match_pyro_density_differences():
    model, sim = _case()
    fam = prepare(model, sim["data"], for_fit=False)
    var = 1.0 / torch.as_tensor(sim["precision"])
    log_g = fam.log_emission(torch.as_tensor(sim["means"]), var)
    labels = torch.as_tensor(sim["labels"])
    logits = conditional_logits(fam.onehot(labels), log_g, PARAMS["interaction"])
    base = _density(model, sim, labels)
    for i, j in itertools.product(range(3), range(3)):
        for k in range(3):
            other = labels.clone()
            other[i, j] = k
            pyro_diff = _density(model, sim, other) - base
            engine_diff = float(logits[i, j, k] - logits[i, j, labels[i, j]])
            assert pyro_diff == pytest.approx(engine_diff, abs=1e-10)


def test_joint_up_to_constant_matches_engine_objective():
    # log p(θ, z, y) in Pyro = U(z, θ) + const(θ) for every z: differences between arbitrary configurations agree.
    model, sim = _case()
    fam = prepare(model, sim["data"], for_fit=False)
    log_g = fam.log_emission(torch.as_tensor(sim["means"]), 1.0 / torch.as_tensor(sim["precision"]))
    rng = np.random.default_rng(0)
    configs = [torch.as_tensor(rng.integers(0, 3, (3, 3))) for _ in range(5)]
    pyro_vals = np.array([_density(model, sim, z) for z in configs])
    engine_vals = np.array([icm_objective(fam, z, log_g, PARAMS["interaction"]) for z in configs])
    np.testing.assert_allclose(pyro_vals - pyro_vals[0], engine_vals - engine_vals[0], atol=1e-10)


def test_simulate_shapes_seed_and_scoped_rng():
    model = HiddenPotts(2)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = model.simulate((8, 5), 3, seed=4)
    after = torch.rand(1)
    assert torch.equal(before, after)  # the caller's random state is untouched
    b = model.simulate((8, 5), 3, seed=4)
    assert a["labels"].shape == (8, 5) and a["data"].shape == (8, 5, 3) and a["means"].shape == (2, 3)
    np.testing.assert_array_equal(a["data"], b["data"])
    c = model.simulate((8, 5), 3, seed=5)
    assert not np.array_equal(a["data"], c["data"])


def test_simulated_field_is_smoother_with_larger_interaction():
    model = HiddenPotts(2)
    fixed = {"means": [[0.0], [1.0]], "precision": [[1.0], [1.0]]}
    weak = model.simulate((32, 32), params={"interaction": 0.1, **fixed}, seed=0)["labels"]
    strong = model.simulate((32, 32), params={"interaction": 1.2, **fixed}, seed=0)["labels"]
    # 1984 neighbour pairs: near 1/2 agreeing at η = 0.1 and most agreeing above the critical η_c ≈ 0.881.
    assert float(agreement(torch.as_tensor(weak))) < 0.65 * 1984 < float(agreement(torch.as_tensor(strong)))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (np.arange(10.0), r"X must be a 2-D lattice.*1-D array is a sequence"),
        (np.zeros((2, 3, 4, 5)), r"X must be a 2-D lattice.*4-D"),
        (np.random.default_rng(0).normal(size=(3, 28, 28)), r"stack of images, not lattice × features"),
        (np.random.default_rng(0).normal(size=(1, 30)), r"at least 2 rows and 2 columns"),
    ],
)
def test_bad_lattice_shapes(data, match):
    with pytest.raises(DataError, match=match):
        HiddenPotts(2).check_data(data)


def test_k_larger_than_pixels_and_nan_are_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(DataError, match=r"n_components must be at most 4 \(the number of pixels of X, 2×2 = 4\)"):
        HiddenPotts(5).check_data(rng.normal(size=(2, 2)))
    bad = rng.normal(size=(4, 4))
    bad[1, 2] = np.nan
    with pytest.raises(DataError, match=r"X .*NaN"):
        HiddenPotts(2).check_data(bad)


def test_bad_simulate_arguments():
    with pytest.raises(DataError, match=r"shape must be \(height, width\)"):
        HiddenPotts(2).simulate(16)
    with pytest.raises(DataError, match=r"params may fix 'interaction', 'means' and 'precision'"):
        HiddenPotts(2).simulate((4, 4), params={"eta": 0.3})
    with pytest.raises(DataError, match=r"interaction_max must be a number > 0"):
        HiddenPotts(2, interaction_max=0.0)
