"""Hidden Potts fits at degenerate points and under hostile scales (issue 31 item 4).

* mean-field EM with η estimated runs η to ``interaction_max`` at low signal-to-noise: the fit warns
  (:class:`InteractionAtBoundWarning`) and lists it in ``diagnostics["at_bound"]``;
* Gibbs label marginals are counted on relabelled draws: with labels switching within every chain they match
  the exact marginals of the identified posterior (labels ordered by their means), enumerated on a 3×3 lattice
  with the emission parameters integrated out analytically (statistical tier);
* with one label η is not identified: it is fixed at 0 and not reported as an estimate;
* the fits are equivariant to the image's scale: × 1e-30 and × 1e300 give the labels and η of the original.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

import latentfs
from latentfs.core.convergence_warning import ConvergenceWarning
from latentfs.core.data import DataWarning
from latentfs.core.diagnostics import DIAGNOSTICS
from latentfs.inference.hmrf.family import InteractionAtBoundWarning
from latentfs.inference.hmrf.gibbs import relabelled_marginals
from latentfs.models.hmrf import HiddenPotts, agreement

GIBBS = {"num_chains": 2, "num_warmup": 30, "num_samples": 60}


def _field(precision: float, shape: tuple[int, int] = (48, 48), seed: int = 0) -> dict[str, np.ndarray]:
    return HiddenPotts(2).simulate(shape, params={"interaction": 0.6, "means": [[0.0], [1.0]],
                                                  "precision": [[precision], [precision]]}, seed=seed)


# ----------------------------------------------------------------------------- η at its bound
def test_mean_field_interaction_at_its_bound_warns_and_is_recorded():
    """Noise sd 1 against a mean gap of 1: mean-field's η runs to interaction_max = 3 (the pseudo-likelihood of
    the smoothed q feeds on its own smoothing)."""
    sim = _field(precision=1.0)
    with pytest.warns(InteractionAtBoundWarning, match=r"sits at its upper bound .*interaction_max=3"):
        res = latentfs.fit(HiddenPotts(2), sim["data"], method="mean_field", seed=0)
    assert float(res.mean("interaction")) == pytest.approx(3.0)
    assert res.diagnostics["at_bound"] == ["interaction"]
    assert "at_bound" in DIAGNOSTICS
    # warn=False records it without the warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", InteractionAtBoundWarning)
        quiet = latentfs.fit(HiddenPotts(2), sim["data"], method="mean_field", seed=0, warn=False)
    assert quiet.diagnostics["at_bound"] == ["interaction"]
    # a fixed η at the bound is the user's choice, not a degenerate estimate
    fixed = latentfs.fit(HiddenPotts(2), sim["data"], method="mean_field", interaction=3.0, seed=0)
    assert fixed.diagnostics["at_bound"] == []


@pytest.mark.parametrize("method, options", [("icm", {}), ("mean_field", {}), ("gibbs", GIBBS)])
def test_an_interior_interaction_is_not_flagged(method, options):
    sim = _field(precision=8.0, shape=(24, 24))
    with warnings.catch_warnings():
        warnings.simplefilter("error", InteractionAtBoundWarning)
        res = latentfs.fit(HiddenPotts(2), sim["data"], method=method, seed=0, warn=False, **options)
    assert res.diagnostics["at_bound"] == []
    assert 0.0 < float(res.mean("interaction")) < 2.0


def test_gibbs_draws_piled_at_the_bound_are_flagged():
    """A low cap (0.2, below this field's η of 0.6) keeps every draw near it."""
    sim = _field(precision=8.0, shape=(24, 24))
    with pytest.warns(InteractionAtBoundWarning, match="the median of its draws"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # short chains; not what this test is about
        res = latentfs.fit(HiddenPotts(2, interaction_max=0.2), sim["data"], method="gibbs", seed=0,
                           **{**GIBBS, "warn": True, "num_samples": 200})
    assert res.diagnostics["at_bound"] == ["interaction"]


# ----------------------------------------------------------------------------- Gibbs label marginals
def _t_order(df0: float, loc0: float, sc0: float, df1: float, loc1: float, sc1: float) -> float:
    """P(μ_0 < μ_1) for independent Student-t posteriors of the two means."""
    val, _ = integrate.quad(lambda x: stats.t.pdf(x, df1, loc1, sc1) * stats.t.cdf(x, df0, loc0, sc0),
                            -np.inf, np.inf, epsabs=1e-12, epsrel=1e-10, limit=200)
    return val


def _ordered_marginals(y2d: np.ndarray, eta: float, kappa0: float = 0.01, nu0: float = 3.0) -> np.ndarray:
    """P(z_s = 1 | y, μ_0 < μ_1) of the hidden Potts model with η fixed and the Normal–Gamma emission prior the
    Gibbs engine uses (m0 and σ0² the data's mean and variance): p(z | y) ∝ exp(η A(z)) Π_k p(y_k | z) with the
    Normal–Gamma marginal likelihoods, over all 2^9 labellings, each weighted by P(μ_0 < μ_1 | z, y) (the
    identified posterior: labels ordered by their means)."""
    h, w = y2d.shape
    y = y2d.ravel()
    m0, s0 = y.mean(), y.var()
    a0, b0 = nu0 / 2, nu0 * s0 / 2
    configs = np.array(list(itertools.product(range(2), repeat=y.size)))
    agree = agreement(torch.as_tensor(configs.reshape(-1, h, w))).numpy()

    def posterior(mask: np.ndarray) -> tuple[np.ndarray, ...]:
        nk = mask.sum(1)
        ybar = (mask * y).sum(1) / np.maximum(nk, 1)
        ss = np.maximum((mask * y * y).sum(1) - nk * ybar**2, 0.0)
        kn, an = kappa0 + nk, a0 + nk / 2
        mn = (kappa0 * m0 + nk * ybar) / kn
        bn = b0 + ss / 2 + kappa0 * nk * (ybar - m0) ** 2 / (2 * kn)
        log_ml = special.gammaln(an) - special.gammaln(a0) + a0 * np.log(b0) - an * np.log(bn) + 0.5 * np.log(kappa0 / kn)
        return log_ml, 2 * an, mn, np.sqrt(bn / (an * kn))

    l0, *t0 = posterior(configs == 0)
    l1, *t1 = posterior(configs == 1)
    log_p = eta * agree + l0 + l1
    p = np.exp(log_p - log_p.max())
    order = np.array([_t_order(t0[0][i], t0[1][i], t0[2][i], t1[0][i], t1[1][i], t1[2][i]) for i in range(p.size)])
    weight = p * order
    return (weight[:, None] * (configs == 1)).sum(0) / weight.sum()


def test_relabelled_marginals_rename_each_draw_by_its_permutation():
    labels = np.array([[[[0, 1]], [[1, 0]], [[1, 0]]]])  # one chain, three draws of a 1×2 lattice
    perms = np.array([[[0, 1], [1, 0], [1, 0]]])  # draws 2 and 3 are in the swapped labelling
    out = relabelled_marginals(labels, perms, 2)
    np.testing.assert_allclose(out[0, 0], [[1.0, 0.0], [0.0, 1.0]])


def test_gibbs_label_marginals_match_the_identified_posterior_when_labels_switch():
    """A 3×3 lattice: every chain spends about half its draws in each labelling (asserted), so marginals of the
    raw labels are ≈ 0.5 everywhere (they were, before the fix). Calibration: over 8 sampler seeds the largest
    deviation of the 9 relabelled marginals from the exact ones was 0.006–0.020 (mean 0.014, sd 0.005); the
    bound 0.05 lies 7 sd above that mean, a false-alarm rate far below 1e-4. Part of the deviation is the
    relabelling itself (matching to a pivot, not a hard ordering of the means), included in that calibration."""
    eta = 0.5
    sim = HiddenPotts(2).simulate((3, 3), params={"interaction": eta, "means": [[0.0], [2.0]],
                                                   "precision": [[1 / 0.36], [1 / 0.36]]}, seed=1)
    exact = _ordered_marginals(sim["data"][..., 0], eta)
    assert exact.min() < 0.3 and exact.max() > 0.7  # far from the symmetric 0.5
    res = latentfs.fit(HiddenPotts(2), sim["data"], method="gibbs", interaction=eta, num_chains=4, num_warmup=100,
                       num_samples=1000, seed=0, warn=False)
    assert min(res.alignment["switch_share"]) > 0.3  # labels switch within every chain
    marg = res.extras["label_marginals"]
    np.testing.assert_allclose(marg.sum(-1), 1.0)
    mu = res.samples("means")[..., 0]
    high = int(mu[:, :, 1].mean() > mu[:, :, 0].mean())  # the aligned label with the larger mean
    estimate = marg.mean(0)[..., high].ravel()
    assert np.abs(estimate - exact).max() < 0.05
    np.testing.assert_array_equal(res.extras["labels"], marg.mean(0).argmax(-1))


# ----------------------------------------------------------------------------- one label
@pytest.mark.parametrize("method, options", [("icm", {}), ("mean_field", {}), ("gibbs", GIBBS)])
def test_one_label_does_not_report_an_interaction(method, options):
    sim = _field(precision=4.0, shape=(12, 12))
    res = latentfs.fit(HiddenPotts(1), sim["data"], method=method, seed=0, warn=False, **options)
    assert float(res.mean("interaction")) == 0.0
    assert res.diagnostics["interaction_estimated"] is False
    assert res.diagnostics["at_bound"] == []
    if method == "gibbs":
        assert np.all(res.samples("interaction") == 0.0)
        assert "interaction" not in res.diagnostics["convergence"]


# ----------------------------------------------------------------------------- scale
@pytest.mark.parametrize("method, options", [("icm", {}), ("mean_field", {}), ("gibbs", GIBBS)])
@pytest.mark.parametrize("factor", [1e-30, 1e300])
def test_fits_are_equivariant_to_the_image_scale(method, options, factor):
    sim = _field(precision=4.0, shape=(20, 20), seed=3)
    base = latentfs.fit(HiddenPotts(2), sim["data"], method=method, seed=0, warn=False, **options)
    with warnings.catch_warnings():
        # × 1e300: the variances (~1e600) are beyond float64 and come back as inf, with a DataWarning
        warnings.simplefilter("ignore", DataWarning)
        scaled = latentfs.fit(HiddenPotts(2), sim["data"] * factor, method=method, seed=0, warn=False, **options)
    np.testing.assert_array_equal(scaled.extras["labels"], base.extras["labels"])
    np.testing.assert_allclose(scaled.samples("interaction"), base.samples("interaction"), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(scaled.samples("means") / factor, base.samples("means"), rtol=1e-8, atol=1e-10)
    if factor < 1:
        np.testing.assert_allclose(scaled.samples("variance") / factor**2, base.samples("variance"), rtol=1e-8)
    if method == "gibbs":
        np.testing.assert_allclose(scaled.extras["label_marginals"], base.extras["label_marginals"])


def test_variances_beyond_float64_are_reported_with_a_warning():
    sim = _field(precision=4.0, shape=(12, 12), seed=3)
    with pytest.warns(DataWarning, match=r"exceed the float64 range .* reported as inf"):
        res = latentfs.fit(HiddenPotts(2), sim["data"] * 1e300, method="icm", seed=0)
    assert np.isinf(res.mean("variance")).all() and np.isfinite(res.mean("means")).all()


def test_gibbs_draws_are_checked_before_they_are_mapped_to_the_data_units():
    """The pipeline aligns the draws and checks R̂/ESS in standardised coordinates; the engine maps them to the
    data's units afterwards (PottsGibbs.after_align): × 1e300 gives the variances' R̂ of the original, finite,
    though the variances themselves are beyond float64."""
    sim = _field(precision=4.0, shape=(16, 16), seed=3)
    base = latentfs.fit(HiddenPotts(2), sim["data"], method="gibbs", seed=0, warn=False, **GIBBS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        scaled = latentfs.fit(HiddenPotts(2), sim["data"] * 1e300, method="gibbs", seed=0, warn=False, **GIBBS)
    assert np.isinf(scaled.samples("variance")).all()
    assert np.isfinite(scaled.diagnostics["convergence"]["variance"]["r_hat_max"])
    assert scaled.diagnostics["convergence"] == base.diagnostics["convergence"]
    assert scaled.alignment == base.alignment
