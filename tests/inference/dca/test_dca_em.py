"""ML / MAP paths for DCA: KL-NMF ≡ GaP-ML ≡ PLSI ≡ MAP-DM(α=γ=1) (digest §1.10 oracles 6 and 7)."""

import warnings

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.dca.common import prepare, resolve_model
from latentfs.inference.dca.em import (
    PointState,
    _hyper,
    expected_counts,
    kl_divergence,
    map_dm_step,
    map_gap_step,
    map_log_posterior,
    nmf_step,
    plsi_step,
)
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA
from latentfs.testing import pyro_log_density


@pytest.fixture(scope="module")
def corpus():
    return DirichletDCA(3, alpha=0.5, gamma=0.5).simulate(40, 25, doc_length=np.arange(40) % 7 + 20, seed=3)["counts"]


def _start(X, K, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.ones(X.shape[1]), size=K)
    m = rng.dirichlet(np.ones(K), size=X.shape[0])
    return m, theta


def test_nmf_em_equals_plsi_equals_map_dm_iterates(corpus):
    data = prepare(corpus)
    m0, theta0 = (torch.as_tensor(a) for a in _start(corpus, 3))
    L = data.doc_lengths[:, None]
    nmf, plsi, mapd = PointState(m0 * L, theta0), PointState(m0, theta0), PointState(m0, theta0)
    hyper = {"alpha": torch.ones(3), "gamma": torch.ones(data.n_features)}
    for _ in range(15):
        nmf, _ = nmf_step(data, nmf, "em")
        plsi, _ = plsi_step(data, plsi)
        mapd, _ = map_dm_step(data, mapd, hyper)
        # l / L = m and the same Θ, exactly (up to rounding)
        torch.testing.assert_close(nmf.doc_latent / L, plsi.doc_latent, rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(nmf.topic_word, plsi.topic_word, rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(mapd.doc_latent, plsi.doc_latent, rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(mapd.topic_word, plsi.topic_word, rtol=1e-12, atol=1e-13)


def test_fit_engines_agree_from_the_same_start(corpus):
    m0, theta0 = _start(corpus, 3, seed=1)
    L = corpus.sum(1, keepdims=True)
    kw = {"max_iter": 8, "tol": 0.0, "warn": False}
    nmf = latentfs.fit(GammaPoissonDCA(3), corpus, method="nmf_kl", init=(m0 * L, theta0), **kw)
    plsi = latentfs.fit(DirichletDCA(3), corpus, method="plsi_em", init=(m0, theta0), **kw)
    mapd = latentfs.fit(DirichletDCA(3, alpha=1.0, gamma=1.0), corpus, method="map", init=(m0, theta0), **kw)
    np.testing.assert_allclose(nmf.mean("doc_scores") / L, plsi.mean("doc_topic"), rtol=1e-10)
    np.testing.assert_allclose(mapd.mean("topic_word"), plsi.mean("topic_word"), rtol=1e-10)
    # MAP objective with uniform priors = PLSI log-likelihood + the constant log Dirichlet(1) densities
    const = corpus.shape[0] * np.log(2.0) + 3 * np.sum(np.log(np.arange(1, corpus.shape[1])))
    np.testing.assert_allclose(mapd.trace[0], plsi.trace[0] + const, rtol=1e-12)


def test_sum_of_scores_equals_length_after_l_update(corpus):
    data = prepare(corpus)
    _, theta0 = _start(corpus, 4, seed=2)
    state = PointState(torch.rand(corpus.shape[0], 4, generator=torch.Generator().manual_seed(0)) * 9,
                       torch.as_tensor(theta0))
    for _ in range(3):
        state, _ = nmf_step(data, state, "em")
        torch.testing.assert_close(state.doc_latent.sum(1), data.doc_lengths, rtol=1e-12, atol=0)


@pytest.mark.parametrize("schedule", ["em", "alternating"])
def test_kl_nmf_objective_never_increases(corpus, schedule):
    data = prepare(corpus)
    m0, theta0 = _start(corpus, 3, seed=4)
    state = PointState(torch.as_tensor(m0) * 30, torch.as_tensor(theta0))
    kls = []
    for _ in range(60):
        kls.append(kl_divergence(data, state.doc_latent, state.topic_word))
        state, loglik = nmf_step(data, state, schedule)
    assert np.all(np.diff(kls) <= 1e-9 * np.abs(kls[:-1]))
    assert kls[-1] < kls[0] - 1.0  # it does move
    result = latentfs.fit(GammaPoissonDCA(3), corpus, method="nmf_kl", schedule=schedule, seed=0, max_iter=40,
                          warn=False)
    assert np.all(np.diff(result.trace[0]) >= -1e-9 * np.abs(result.trace[0, 1:]))


def test_kl_nmf_matches_scikit_learn_mu_solver(corpus):
    from sklearn.decomposition import NMF
    from sklearn.exceptions import ConvergenceWarning

    K, n = 3, 25
    rng = np.random.default_rng(7)
    W0, H0 = rng.uniform(0.5, 2, size=(corpus.shape[0], K)), rng.uniform(0.1, 1, size=(K, corpus.shape[1]))
    sk = NMF(K, beta_loss="kullback-leibler", solver="mu", init="custom", max_iter=n, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        W = sk.fit_transform(corpus.astype(float), W=W0.copy(), H=H0.copy())
    ours = latentfs.fit(GammaPoissonDCA(K), corpus, method="nmf_kl", schedule="alternating", init=(W0, H0),
                        max_iter=n, tol=0.0, warn=False)
    np.testing.assert_allclose(ours.mean("doc_scores") @ ours.mean("topic_word"), W @ sk.components_, rtol=1e-8)
    # scikit-learn reports sqrt(2 D) for the KL loss
    np.testing.assert_allclose(np.sqrt(2 * ours.diagnostics["kl_divergence"]), sk.reconstruction_err_, rtol=1e-8)


def test_raw_lee_seung_normalised_at_the_end_has_scores_summing_to_length(corpus):
    from sklearn.decomposition import NMF

    sk = NMF(2, beta_loss="kullback-leibler", solver="mu", init="nndsvda", max_iter=3000, tol=1e-10)
    W = sk.fit_transform(corpus.astype(float))
    scale = sk.components_.sum(1)
    np.testing.assert_allclose((W * scale).sum(1), corpus.sum(1), rtol=1e-4)


def _pyro_log_joint(model, counts, site_values):
    return pyro_log_density(model.model, site_values, torch.as_tensor(counts))


@pytest.mark.parametrize("family", ["dm", "gap"])
def test_map_objective_equals_pyro_log_joint(corpus, family):
    m0, theta0 = _start(corpus, 3, seed=5)
    if family == "dm":
        model, site, doc = DirichletDCA(3, alpha=1.3, gamma=1.2), "doc_topic", m0
    else:
        model, site, doc = GammaPoissonDCA(3, alpha=1.5, beta=0.1, gamma=1.1), "doc_scores", m0 * 20
    data = prepare(corpus)
    model = resolve_model(model, data)
    state = PointState(torch.as_tensor(doc), torch.as_tensor(theta0))
    ours = float(map_log_posterior(model, data, state, _hyper(model, data)))
    ref = _pyro_log_joint(model, corpus, {site: state.doc_latent, "topic_word": state.topic_word})
    assert ours == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("model", [DirichletDCA(3, alpha=1.5, gamma=1.1),
                                   GammaPoissonDCA(3, alpha=2.0, beta=0.05, gamma=1.0)])
def test_map_log_posterior_never_decreases(corpus, model):
    result = latentfs.fit(model, corpus, method="map", seed=0, max_iter=60, warn=False)
    trace = result.trace[0]
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
    assert trace[-1] > trace[0] + 1.0


def test_map_gap_reduces_to_nmf_with_alpha_one_beta_zero(corpus):
    data = prepare(corpus)
    m0, theta0 = _start(corpus, 3, seed=6)
    state = PointState(torch.as_tensor(m0) * 25, torch.as_tensor(theta0))
    hyper = {"alpha": torch.ones(3), "beta": torch.zeros(3), "gamma": torch.ones(data.n_features)}
    a, _ = map_gap_step(data, state, hyper)
    b, _ = nmf_step(data, state, "em")
    torch.testing.assert_close(a.doc_latent, b.doc_latent, rtol=1e-12, atol=0)
    torch.testing.assert_close(a.topic_word, b.topic_word, rtol=1e-12, atol=0)


def test_map_with_small_priors_clips_to_the_simplex(corpus):
    result = latentfs.fit(DirichletDCA(3, alpha=0.3, gamma=0.5), corpus, method="map", seed=0, max_iter=50,
                          warn=False)
    m, theta = result.mean("doc_topic"), result.mean("topic_word")
    np.testing.assert_allclose(m.sum(1), 1.0)
    np.testing.assert_allclose(theta.sum(1), 1.0)
    assert (theta == 0).any() and result.diagnostics["clipped_priors"]
    assert np.isfinite(result.trace).all()


def test_expected_counts_preserve_word_and_document_totals(corpus):
    data = prepare(corpus)
    m0, theta0 = (torch.as_tensor(a) for a in _start(corpus, 3, seed=8))
    rates = data.rates_at_nonzeros(m0, theta0)
    doc_counts, word_counts = expected_counts(data, m0, theta0, data.values / rates)
    torch.testing.assert_close(doc_counts.sum(1), data.doc_lengths)
    torch.testing.assert_close(word_counts.sum(0), torch.as_tensor(corpus.sum(0), dtype=torch.float64))


def test_posterior_round_trip(corpus, tmp_path):
    result = latentfs.fit(GammaPoissonDCA(2), corpus, method="nmf_kl", seed=0, max_iter=20, warn=False)
    assert result.samples("topic_word", 3).shape == (1, 1, 2, corpus.shape[1])  # a point comes back once
    assert result.log_likelihood.shape == (1, 1, corpus.shape[0])
    # the pointwise log-likelihood is at the final state, one (improving) step after the last trace entry
    assert result.trace[0, -1] <= result.log_likelihood.sum() <= result.trace[0, -1] + 0.01 * abs(result.trace[0, -1])
    back = latentfs.load(result.save(tmp_path / "nmf"))
    np.testing.assert_array_equal(back.mean("doc_scores"), result.mean("doc_scores"))


@pytest.mark.parametrize(
    ("method", "model", "options", "match"),
    [
        ("nmf_kl", GammaPoissonDCA(2), {"schedule": "fast"}, "schedule must be one of"),
        ("plsi_em", DirichletDCA(2), {"tempering": 1.5}, r"tempering must be a number in \(0, 1\]"),
        ("plsi_em", DirichletDCA(2), {"tempering": 0}, r"tempering must be a number in \(0, 1\]"),
        ("map", DirichletDCA(2), {"n_init": 0}, "n_init must be an integer"),
        ("map", GammaPoissonDCA(2), {"max_iter": 2.5}, "max_iter must be an integer"),
        ("nmf_kl", GammaPoissonDCA(2), {"tol": -1}, "tol must be a number ≥ 0"),
        ("nmf_kl", GammaPoissonDCA(2), {"init": "random"}, "init must be a PointState or a pair"),
        ("plsi_em", DirichletDCA(2), {"init": (np.ones((3, 2)), np.ones((2, 25)))},
         "init must hold doc_latent of shape"),
        ("map", DirichletDCA(2), {"init": (np.ones((40, 2)), -np.ones((2, 25)))}, "init must hold finite non-negative"),
        ("nmf_kl", GammaPoissonDCA(2), {"init": (np.ones((40, 2)), np.zeros((2, 25)))}, "init topic_word has a row"),
    ],
)
def test_bad_options(corpus, method, model, options, match):
    with pytest.raises(DataError, match=match):
        latentfs.fit(model, corpus, method=method, max_iter=options.pop("max_iter", 3), warn=False, **options)


GROUPS = np.repeat(np.arange(5), 5)  # 25 words in 5 groups of 5 (Buntine & Jakulin §4.4)


def _group_sums(theta):
    return np.stack([theta[:, GROUPS == g].sum(1) for g in range(5)], 1)


def test_grouped_plsi_equals_grouped_map_and_normalises_within_groups(corpus):
    m0, theta0 = _start(corpus, 3, seed=9)
    kw = {"max_iter": 10, "tol": 0.0, "warn": False, "init": (m0, theta0)}
    plsi = latentfs.fit(DirichletDCA(3, groups=GROUPS), corpus, method="plsi_em", **kw)
    mapd = latentfs.fit(DirichletDCA(3, alpha=1.0, gamma=1.0, groups=GROUPS), corpus, method="map", **kw)
    np.testing.assert_allclose(_group_sums(plsi.mean("topic_word")), 1.0, rtol=1e-12)
    np.testing.assert_allclose(mapd.mean("topic_word"), plsi.mean("topic_word"), rtol=1e-10)
    np.testing.assert_allclose(mapd.mean("doc_topic"), plsi.mean("doc_topic"), rtol=1e-10)
    assert np.all(np.diff(plsi.trace[0]) >= -1e-9 * np.abs(plsi.trace[0, 1:]))


def test_grouped_map_objective_equals_pyro_log_joint_and_never_decreases(corpus):
    model = DirichletDCA(3, alpha=1.2, gamma=1.3, groups=GROUPS)
    data = prepare(corpus)
    m0, theta0 = _start(corpus, 3, seed=10)
    theta0 = theta0 / _group_sums(theta0)[:, GROUPS]
    state = PointState(torch.as_tensor(m0), torch.as_tensor(theta0))
    ours = float(map_log_posterior(model, data, state, _hyper(model, data)))
    ref = _pyro_log_joint(model, corpus, {"doc_topic": state.doc_latent, "topic_word": state.topic_word})
    assert ours == pytest.approx(ref, rel=1e-12)
    result = latentfs.fit(model, corpus, method="map", seed=0, max_iter=40, warn=False)
    assert np.all(np.diff(result.trace[0]) >= -1e-9 * np.abs(result.trace[0, 1:]))
    np.testing.assert_allclose(_group_sums(result.mean("topic_word")), 1.0, rtol=1e-12)
