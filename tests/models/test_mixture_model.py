"""Mixture models declared in Pyro: simulation, the engines' log-likelihood against the model with the
assignment enumerated (exact tier), and input validation."""

import numpy as np
import pytest
import torch
from pyro import poutine
from pyro.infer import TraceEnum_ELBO

from latentfs.core.data import DataError
from latentfs.inference.mixture.em import family_for, log_joint_components
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

PARAM_SITES = ("weights", "means", "precision", "item_probs")
COV_TYPES = ["full", "tied", "diag", "spherical", "tied_diag"]


def _param_values(sim: dict, model) -> dict:
    out = {k: v for k, v in sim.items() if k.startswith(PARAM_SITES)}
    if isinstance(model, LatentClass) and not model.binary:
        ip = out.pop("item_probs")
        for i, s in enumerate(model.levels(ip.shape[1])):
            out[f"item_probs_{i}"] = ip[:, i, :s]
    return out


def pyro_log_likelihood(model, X: np.ndarray, sim: dict) -> float:
    """Σ_n log Σ_z p(z) p(y_n | z, θ) from the Pyro model: TraceEnum_ELBO with an empty guide gives
    −log p(y, θ) with z enumerated; the prior log density of θ is then removed."""
    data = torch.as_tensor(X)
    cond = {k: torch.as_tensor(v) for k, v in _param_values(sim, model).items()}
    conditioned = poutine.condition(model.model, cond)
    loss = TraceEnum_ELBO(max_plate_nesting=2).loss(conditioned, lambda *a, **k: None, data)
    zeros = torch.zeros(X.shape[0], dtype=torch.long)
    tr = poutine.trace(poutine.condition(conditioned, {"assignment": zeros})).get_trace(data)
    prior = sum(
        float(s["fn"].log_prob(s["value"]).sum())
        for n, s in tr.nodes.items()
        if s["type"] == "sample" and n.startswith(PARAM_SITES)
    )
    return -loss - prior


def _gaussian_params(fam, sim, ct):
    prec = sim["precision"]
    cov = np.linalg.inv(prec) if ct in ("full", "tied") else 1.0 / prec
    return fam.import_({"weights": sim["weights"], "means": sim["means"], "covariance": cov}, 0.0)


@pytest.mark.parametrize("ct", COV_TYPES)
def test_gaussian_log_likelihood_equals_enumerated_pyro_model(ct):
    # Exact tier: the engines' E-step log-likelihood is the Pyro model's, z summed out.
    gm = GaussianMixture(3, covariance_type=ct, mean_precision=0.1)
    sim = gm.simulate(40, 3, seed=0)
    X = sim["data"].copy()
    if gm.allows_missing:
        X[0, 1] = X[5, 0] = X[7, 2] = np.nan
    fam = family_for(gm, X)
    ll = float(torch.logsumexp(log_joint_components(fam, _gaussian_params(fam, sim, ct)), 1).sum())
    assert ll == pytest.approx(pyro_log_likelihood(gm, X, sim), rel=1e-12)


@pytest.mark.parametrize("variant", ["gram", "cholesky"])
def test_full_e_step_variants_agree(variant):
    gm = GaussianMixture(2)
    sim = gm.simulate(30, 4, seed=1)
    fam = family_for(gm, sim["data"], e_step=variant)
    ll = float(torch.logsumexp(log_joint_components(fam, _gaussian_params(fam, sim, "full")), 1).sum())
    assert ll == pytest.approx(pyro_log_likelihood(gm, sim["data"], sim), rel=1e-12)


@pytest.mark.parametrize("model", [LatentClass(2), LatentClass(3, n_levels=[2, 3, 4])], ids=["binary", "categorical"])
def test_latent_class_log_likelihood_equals_enumerated_pyro_model(model):
    sim = model.simulate(30, 3, seed=0)
    X = sim["items"].copy()
    X[0, 1] = X[4, 2] = np.nan  # missing answers contribute nothing
    fam = family_for(model, X)
    params = fam.import_({"weights": sim["weights"], "item_probs": sim["item_probs"]})
    ll = float(torch.logsumexp(log_joint_components(fam, params), 1).sum())
    assert ll == pytest.approx(pyro_log_likelihood(model, X, sim), rel=1e-12)


def test_per_row_component_terms_equal_trace_with_z_fixed():
    # log η_k + log g_k(y_n) (the Gibbs z-conditional before normalising) equals the trace's log joint
    # difference when every z is set to k.
    lp = LatentProfile(2, mean_precision=0.1)
    sim = lp.simulate(10, 3, seed=2)
    X = sim["data"].copy()
    X[3, 1] = np.nan
    fam = family_for(lp, X)
    terms = log_joint_components(fam, _gaussian_params(fam, sim, "tied_diag")).sum(0)
    cond = {k: torch.as_tensor(v) for k, v in _param_values(sim, lp).items()}
    lps = []
    for k in range(2):
        z = torch.full((10, 1), k, dtype=torch.long)
        tr = poutine.trace(poutine.condition(lp.model, {**cond, "assignment": z})).get_trace(torch.as_tensor(X))
        lps.append(
            sum(
                float(
                    tr.nodes[s]["fn"]
                    .log_prob(tr.nodes[s]["value"])
                    .mul(tr.nodes[s]["mask"] if tr.nodes[s]["mask"] is not None else 1.0)
                    .sum()
                )
                for s in ("assignment", "data")
            )
        )
    assert float(terms[1] - terms[0]) == pytest.approx(lps[1] - lps[0], rel=1e-12)


def test_simulate_is_reproducible_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = GaussianMixture(2).simulate(20, 2, seed=5)
    after = torch.rand(1)
    b = GaussianMixture(2).simulate(20, 2, seed=5)
    np.testing.assert_array_equal(a["data"], b["data"])
    assert torch.equal(before, after)
    assert set(a) == {"weights", "means", "precision", "assignment", "data"}


def test_simulate_with_planted_parameters():
    lc = LatentClass(2, n_levels=3)
    probs = np.array([[[0.8, 0.1, 0.1]] * 3, [[0.1, 0.1, 0.8]] * 3])
    sim = lc.simulate(4000, 3, params={"weights": [0.5, 0.5], "item_probs": probs}, seed=0)
    np.testing.assert_allclose(sim["item_probs"], probs)
    z = sim["assignment"]
    freq = np.mean(sim["items"][z == 0, 0] == 0)
    assert abs(freq - 0.8) < 0.03  # binomial sd ≈ 0.009; false alarm < 1e-3


def test_parameter_counts():
    assert GaussianMixture(3, covariance_type="full").n_parameters(2) == 2 + 6 + 9
    assert GaussianMixture(3, covariance_type="tied").n_parameters(2) == 2 + 6 + 3
    assert GaussianMixture(3, covariance_type="diag").n_parameters(2) == 2 + 6 + 6
    assert GaussianMixture(3, covariance_type="spherical").n_parameters(2) == 2 + 6 + 3
    assert LatentProfile(3).n_parameters(2) == 2 + 6 + 2
    assert LatentClass(2, n_levels=[2, 3, 4]).n_parameters(3) == 1 + 2 * (1 + 2 + 3)


def test_with_n_components_copies():
    gm = GaussianMixture(2, covariance_type="diag")
    g5 = gm.with_n_components(5)
    assert (g5.n_components, gm.n_components, g5.covariance_type) == (5, 2, "diag")


# --------------------------------------------------------------------------- bad input
def test_bad_covariance_type():
    with pytest.raises(DataError, match="covariance_type must be one of"):
        GaussianMixture(2, covariance_type="banana")


def test_bad_variance():
    with pytest.raises(DataError, match="variance must be 'shared' or 'free'"):
        LatentProfile(2, variance="both")


def test_bad_n_levels():
    with pytest.raises(DataError, match="n_levels must be an integer ≥ 2"):
        LatentClass(2, n_levels=[2, 1])


def test_n_levels_length_mismatch():
    with pytest.raises(DataError, match="one number per item"):
        family_for(LatentClass(2, n_levels=[2, 3]), np.array([[0, 1, 0], [1, 0, 1], [0, 0, 1]]))


def test_small_degrees_of_freedom():
    with pytest.raises(DataError, match="degrees_of_freedom must exceed"):
        GaussianMixture(2, degrees_of_freedom=1.0).prior(None, 3)


def test_bad_covariance_prior_shape():
    with pytest.raises(DataError, match="covariance_prior must be 2×2"):
        GaussianMixture(2, covariance_prior=np.eye(3)).prior(None, 2)


def test_model_without_data_or_sizes():
    with pytest.raises(DataError, match="model needs data"):
        GaussianMixture(2).model()
    with pytest.raises(DataError, match="model needs items"):
        LatentClass(2).model()


def test_full_covariance_model_rejects_missing_values():
    X = torch.tensor([[0.0, 1.0], [float("nan"), 2.0], [1.0, 0.0]])
    with pytest.raises(DataError, match="data must not contain NaN for covariance_type='full'"):
        GaussianMixture(2).model(X)
