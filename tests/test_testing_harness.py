"""The conformance harness :mod:`latentfs.testing`: each check passes on engines that keep the promise and
fails, with its message, on one that does not."""

from __future__ import annotations

import math

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch

import latentfs
from latentfs import testing


def _normal_model(x):
    mu = pyro.sample("mu", dist.Normal(0.0, 2.0))
    with pyro.plate("n", x.shape[0]):
        pyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def test_pyro_log_density_matches_the_closed_form():
    x = torch.tensor([0.5, -1.0, 2.0])
    mu = 0.3
    expected = -0.5 * (mu / 2.0) ** 2 - math.log(2.0 * math.sqrt(2 * math.pi))
    expected += sum(-0.5 * (float(v) - mu) ** 2 - 0.5 * math.log(2 * math.pi) for v in x)
    got = testing.pyro_log_density(_normal_model, {"mu": torch.tensor(mu)}, x)
    assert got == pytest.approx(expected, rel=1e-12)
    only_x = testing.pyro_log_density(_normal_model, {"mu": torch.tensor(mu)}, x, sites=["x"])
    assert only_x == pytest.approx(expected + 0.5 * (mu / 2.0) ** 2 + math.log(2.0 * math.sqrt(2 * math.pi)))


def test_pyro_log_density_refuses_an_unconditioned_latent():
    with pytest.raises(AssertionError, match="site 'mu' of the model was sampled"):
        testing.pyro_log_density(_normal_model, {}, torch.zeros(2))


def test_pyro_log_density_leaves_the_callers_random_state_alone():
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    testing.pyro_log_density(_normal_model, {"mu": torch.tensor(0.0)}, torch.zeros(2))
    assert np.array_equal(np.random.get_state()[1], before)


def test_the_dca_log_joint_is_checked_against_the_model():
    """The harness oracle on a real model: DirichletDCA's bag form at a point, against hand-written
    Dirichlet and multinomial densities."""
    from scipy import stats

    model = latentfs.DirichletDCA(2, alpha=0.5, gamma=0.3)
    X = np.array([[3, 0, 1], [0, 2, 2]])
    theta = np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]])
    m = np.array([[0.7, 0.3], [0.1, 0.9]])
    values = {"doc_topic": torch.as_tensor(m), "topic_word": torch.as_tensor(theta)}
    got = testing.pyro_log_density(model.model, values, torch.as_tensor(X, dtype=torch.float64))
    expected = sum(stats.dirichlet.logpdf(r, [0.5, 0.5]) for r in m)
    expected += sum(stats.dirichlet.logpdf(r, [0.3] * 3) for r in theta)
    expected += sum(stats.multinomial.logpmf(x, n=x.sum(), p=p) for x, p in zip(X, m @ theta, strict=True))
    assert got == pytest.approx(expected, rel=1e-10)


def test_z_test_rate_and_message():
    assert testing.false_alarm_rate(4.5) == pytest.approx(6.795e-6, rel=1e-3)
    testing.z_test(1.04, 1.0, 0.01)
    with pytest.raises(AssertionError, match=r"differs from 1 by 5 standard errors"):
        testing.z_test(1.05, 1.0, 0.01)


def test_chi2_test_accepts_exact_draws_and_rejects_biased_ones():
    rng = np.random.default_rng(0)
    p = np.array([0.5, 0.3, 0.15, 0.05])
    # correct draws: rejected with probability alpha = 1e-4 (fixed seed)
    testing.chi2_test(np.bincount(rng.choice(4, 4000, p=p), minlength=4), p)
    biased = np.bincount(rng.choice(4, 4000, p=[0.45, 0.35, 0.15, 0.05]), minlength=4)
    with pytest.raises(AssertionError, match="do not follow the exact distribution"):
        testing.chi2_test(biased, p)


@pytest.fixture(scope="module")
def counts():
    return latentfs.DirichletDCA(2).simulate(n_documents=30, n_features=10, doc_length=40, seed=0)["counts"]


def test_check_reproducible_passes_for_seeded_engines_and_catches_an_ignored_seed(counts):
    model = latentfs.DirichletDCA(2)
    testing.check_reproducible(lambda s: latentfs.fit(model, counts, method="vb", seed=s, warn=False))
    with pytest.raises(AssertionError, match="the seed is ignored"):
        testing.check_reproducible(lambda s: latentfs.fit(model, counts, method="vb", seed=0, warn=False))


@pytest.mark.parametrize("family", ["dca_vb", "mixture_em", "factor_em"])
def test_check_interruptible(counts, family):
    if family == "dca_vb":
        result = testing.check_interruptible(
            lambda cb: latentfs.fit(latentfs.DirichletDCA(2), counts, method="vb", seed=0, callback=cb)
        )
    else:
        rng = np.random.default_rng(0)
        z = rng.normal(size=(80, 1))
        Y = z * [1.0, 0.8, 0.6, 0.9] + 0.5 * rng.normal(size=(80, 4))
        model = latentfs.GaussianMixture(2) if family == "mixture_em" else latentfs.FactorAnalysis(1)
        result = testing.check_interruptible(lambda cb: latentfs.fit(model, Y, method="em", seed=0, callback=cb))
    testing.check_result_contract(result, save=False)


@pytest.mark.parametrize("method", ["vb", "collapsed_gibbs", "plsi_em"])
def test_check_result_contract(counts, method):
    options = {"num_warmup": 20, "num_samples": 20} if method == "collapsed_gibbs" else {}
    result = latentfs.fit(latentfs.DirichletDCA(2), counts, method=method, seed=0, warn=False, **options)
    testing.check_result_contract(result)


def test_check_estimator_runs_sklearns_checks():
    records = testing.check_estimator(latentfs.FactorAnalyzer(1, max_iter=200))
    assert any(r["check_name"] == "check_fit_idempotent" and r["status"] == "passed" for r in records)
    with pytest.raises(AssertionError, match="at most two expected failures"):
        testing.check_estimator(latentfs.FactorAnalyzer(1), expected_failed={"a": "x", "b": "y", "c": "z"})


def test_pyro_log_density_honours_masks_as_pyro_does():
    # found while moving the mixture tests onto the harness: the oracle summed log_prob over masked-out
    # (missing) entries; Pyro's ELBOs and Trace.log_prob_sum leave them out
    x = torch.tensor([0.5, 100.0, -0.5])
    keep = torch.tensor([True, False, True])

    def model(x):
        mu = pyro.sample("mu", dist.Normal(0.0, 1.0))
        with pyro.plate("n", 3), pyro.poutine.mask(mask=keep):
            pyro.sample("x", dist.Normal(mu, 1.0), obs=x)

    mu = torch.tensor(0.2)
    expected = float(dist.Normal(0.0, 1.0).log_prob(mu) + dist.Normal(mu, 1.0).log_prob(x[keep]).sum())
    assert testing.pyro_log_density(model, {"mu": mu}, x) == pytest.approx(expected, rel=1e-12)


def test_every_test_has_exactly_one_tier():
    # issue 30 item 6: exact / statistical / recovery markers (conftest.py), so a contributor can run a fast stage
    import subprocess
    import sys

    files = ["tests/inference/hmrf/test_hmrf_gibbs.py", "tests/inference/dca/test_dca_recovery.py",
             "tests/core/test_one_rhat.py"]

    def count(expr):
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                              "-m", expr, *files], capture_output=True, text=True, timeout=300).stdout
        line = [ln for ln in out.splitlines() if "collected" in ln][-1]  # "16/22 tests collected (6 deselected)"
        if line.startswith("no tests"):
            return 0
        return int(line.split("/")[0]) if "/" in line else int(line.split()[0])

    total = count("not docs")
    tiers = [count(t) for t in ("exact", "statistical", "recovery")]
    assert sum(tiers) == total and all(n > 0 for n in tiers), (tiers, total)


def test_the_planted_switch_check_catches_a_relabelling_that_misses_a_site(monkeypatch):
    # issue 30 item 4: check_engine plants a label switch in chain 0 and needs every component-indexed site
    # (transition matrices on both axes included) relabelled back; here it passes on an HMM Gibbs fit, and fails
    # when the relabelling does nothing or forgets the transition matrix's destination axis
    import latentfs
    from latentfs.core.posterior_align import AlignMixin
    from latentfs.testing import check_planted_switch, tiny_data

    model = latentfs.CategoricalHMM(2)
    data, needed = tiny_data(model)
    post = latentfs.fit(model, data, method="gibbs", seed=0, num_chains=2, num_warmup=30, num_samples=30,
                        warn=False, **needed)
    assert post.alignment is not None and post.alignment["also"]  # the transition matrix's destination axis
    check_planted_switch(post)
    original = AlignMixin.align
    monkeypatch.setattr(AlignMixin, "align", lambda self, *a, **k: self)
    with pytest.raises(AssertionError, match="planted in chain 0 is not undone"):
        check_planted_switch(post)
    monkeypatch.setattr(AlignMixin, "align", lambda self, site, dim, also=(), **k: original(self, site, dim))
    with pytest.raises(AssertionError, match="not undone on site '(transmat|emission_probs|start_probs)'"):
        check_planted_switch(post)


def test_the_affine_check_tells_an_equivariant_path_from_one_that_is_not():
    # issue 30 item 4: check_engine holds engines that declare affine_equivariant to the same path for a·X + b.
    # Gaussian-mixture EM is on it; FA EM's default SQUAREM step mixes the loadings' units with log variances, so
    # its path (not its converged fit) moves with the scale, and plain EM's does not
    import latentfs
    from latentfs.testing import check_affine, tiny_data, tiny_model

    gmm = tiny_model(latentfs.GaussianMixture)
    X, needed = tiny_data(gmm)
    check_affine(lambda D: latentfs.fit(gmm, D, method="em", seed=3, max_iter=3, tol=0.0, warn=False, **needed), X)
    fa = tiny_model(latentfs.FactorAnalysis)
    Y, needed = tiny_data(fa)
    with pytest.raises(AssertionError, match="leaves the path"):
        check_affine(lambda D: latentfs.fit(fa, D, method="em", seed=3, max_iter=5, tol=0.0, warn=False, **needed), Y)
    check_affine(lambda D: latentfs.fit(fa, D, method="em", seed=3, max_iter=5, tol=0.0, warn=False,
                                        acceleration="none", **needed), Y)
