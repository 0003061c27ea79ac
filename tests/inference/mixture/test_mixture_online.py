"""Stepwise (mini-batch) EM for the mixtures (Cappé & Moulines 2009; Liang & Klein 2009) and ``partial_fit``.

Planted models with fixed seeds: every figure below is deterministic. Tolerances are stated against what
was measured (a gap to batch EM of ≤ 0.002 nats per row); the false-alarm rate of these deterministic
checks is 0 on any machine whose float64 arithmetic agrees to ~1e-12.
"""

import dask.array as da
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.mixture import GaussianMixtureClusterer, LatentClassClusterer
from latentfs.inference.mixture.online import online_em_init, online_posterior, partial_fit_state
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

GAP = 0.01  # nats per row: the online fit's mean log-likelihood may trail batch EM's by at most this


def _planted_gaussian(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    means = np.array([[0.0, 0.0, 0.0], [4.0, 0.0, 1.0], [0.0, 4.0, -1.0]])
    weights = np.array([0.5, 0.3, 0.2])
    z = rng.choice(3, n, p=weights)
    cov = np.array([[1.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])
    return means[z] + rng.multivariate_normal(np.zeros(3), cov, n), means, weights


def _planted_classes(n=6000, seed=1):
    rng = np.random.default_rng(seed)
    probs = np.array([[0.9, 0.9, 0.8, 0.1, 0.2, 0.1], [0.1, 0.2, 0.1, 0.9, 0.8, 0.9], [0.8, 0.1, 0.9, 0.1, 0.9, 0.2]])
    weights = np.array([0.4, 0.35, 0.25])
    z = rng.choice(3, n, p=weights)
    return (rng.uniform(size=(n, 6)) < probs[z]).astype(float), probs, weights


def _matched_error(est, true):
    """Largest absolute error of the rows of ``est`` matched to ``true`` (label-invariant)."""
    cost = np.abs(est[:, None, :] - true[None, :, :]).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    return float(np.abs(est[rows] - true[cols]).max()), cols


def test_partial_fit_reaches_batch_em_gaussian():
    X, means, weights = _planted_gaussian()
    batch = GaussianMixtureClusterer(3).fit(X)
    online = GaussianMixtureClusterer(3)
    for _ in range(3):  # three passes over 12 chunks of 500 rows
        for chunk in np.array_split(X, 12):
            online.partial_fit(chunk)
    assert online.n_iter_ == 36 and online.n_features_in_ == 3
    assert online.score(X) > batch.score(X) - GAP  # measured gap: 1.3e-4 nats per row
    err, cols = _matched_error(online.components_, means)
    assert err < 0.1  # planted means recovered: measured 0.068, batch EM's own error 0.068
    assert np.abs(online.weights_ - weights[cols]).max() < 0.03


def test_online_em_latent_class_and_profile():
    Y, probs, _ = _planted_classes()
    model = LatentClass(3)
    ref = latentfs.fit(model, Y, method="em", seed=0, warn=False)
    got = latentfs.fit(model, Y, method="online_em", seed=0, batch_size=500, n_passes=3)
    n = Y.shape[0]
    gap = (ref.diagnostics["log_likelihood"] - got.diagnostics["log_likelihood"]) / n
    assert gap < GAP  # measured: 6e-4 nats per row
    assert _matched_error(got.mean("item_probs"), probs)[0] < 0.1  # measured 0.061 (batch EM: 0.033)
    X, _, _ = _planted_gaussian(seed=2)
    ref = latentfs.fit(LatentProfile(3), X, method="em", seed=0, warn=False)
    got = latentfs.fit(LatentProfile(3), X, method="online_em", seed=0, batch_size=500, n_passes=3)
    assert (ref.diagnostics["log_likelihood"] - got.diagnostics["log_likelihood"]) / n < GAP  # measured 4e-5
    assert got.method == "online_em" and got.kind() == "point" and got.trace.shape == (1, 36)


def test_streams_of_chunks_and_dask_rows_agree():
    """A matrix streamed in order equals the same rows given as a list or an iterator of chunks; a dask
    array is batched exactly as the matrix (same seeded row order)."""
    X, _, _ = _planted_gaussian(n=2000, seed=3)
    model = GaussianMixture(3, covariance_type="diag")
    opts = dict(method="online_em", seed=1, batch_size=400)
    ref = latentfs.fit(model, X, shuffle=False, **opts)
    chunks = [X[i : i + 400] for i in range(0, 2000, 400)]
    from_list = latentfs.fit(model, chunks, **opts)
    from_iter = latentfs.fit(model, iter(chunks), **opts)
    for got in (from_list, from_iter):
        assert np.allclose(got.mean("means"), ref.mean("means"), rtol=1e-12, atol=0)
        assert np.allclose(got.trace, ref.trace, rtol=1e-12, atol=0)
    shuffled = latentfs.fit(model, X, n_passes=2, **opts)
    lazy = latentfs.fit(model, da.from_array(X, chunks=(300, -1)), n_passes=2, **opts)
    assert np.allclose(lazy.mean("covariance"), shuffled.mean("covariance"), rtol=1e-12, atol=0)


def test_partial_fit_checks():
    X, _, _ = _planted_gaussian(n=600)
    gm = GaussianMixtureClusterer(3).partial_fit(X[:300])
    with pytest.raises(DataError, match="expecting 3 features"):
        gm.partial_fit(X[:10, :2])
    with pytest.raises(DataError, match="only at its first call"):
        gm.partial_fit(X[300:], kappa=0.9)
    with pytest.raises(DataError, match="kappa"):
        GaussianMixtureClusterer(3).partial_fit(X, kappa=0.3)
    with pytest.raises(DataError, match="first batch must have at least"):
        partial_fit_state(online_em_init(GaussianMixture(3), 3), X[:2])
    with pytest.raises(DataError, match="n_passes must be 1 when X is an iterator"):
        latentfs.fit(GaussianMixture(2), iter([X[:100]]), method="online_em", n_passes=2)
    lc = LatentClassClusterer(2).partial_fit(np.array([[0, 1], [1, 0], [1, 1], [0, 0.0]]))
    with pytest.raises(DataError, match="item codes"):
        lc.partial_fit(np.array([[0, 2.0]]))
    # fit() starts afresh: a later partial_fit begins a new stream
    gm.fit(X)
    assert gm.partial_fit(X[:300]).n_iter_ == 1


def test_online_em_is_a_spec_on_the_one_pipeline():
    """issue 30: fit_online_em is the spec MixtureOnlineEM (still importable and callable under its old name); the
    run is one step per mini-batch, has no stopping rule (converged None, no warning) and carries the pipeline's
    run diagnostics."""
    import warnings

    from latentfs.core import registry
    from latentfs.inference.mixture.online import MixtureOnlineEM, fit_online_em

    X, _, _ = _planted_gaussian(n=1000, seed=4)
    for cls in (GaussianMixture, LatentProfile, LatentClass):
        assert registry.engines()[(cls, "online_em")] is fit_online_em
    assert isinstance(fit_online_em, MixtureOnlineEM)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = fit_online_em(GaussianMixture(3), X, batch_size=300, n_passes=2, seed=2)
    d = res.diagnostics
    assert d["n_iter"] == 8 and d["converged"] is None and d["interrupted"] is False  # 2 passes of 4 batches
    assert d["seed"] == 2 and d["best_restart"] == 0 and len(d["restart_objectives"]) == 1
    assert res.trace.shape == (1, 8) and res.extras["n_updates"] == 8 and d["n_seen"] == 2000
    same = latentfs.fit(GaussianMixture(3), X, method="online_em", batch_size=300, n_passes=2, seed=2)
    np.testing.assert_array_equal(same.mean("means"), res.mean("means"))
    with pytest.raises(DataError, match="options \\['max_iter'\\] are not options of method 'online_em'"):
        latentfs.fit(GaussianMixture(3), X, method="online_em", max_iter=5)


def test_a_one_batch_iterator_runs_one_step():
    """An iterator of one mini-batch: the run reads it, meets the stream's end and stops after exactly one step,
    with the numbers of one partial_fit_state from the same start."""
    X, _, _ = _planted_gaussian(n=500, seed=5)
    res = latentfs.fit(GaussianMixture(3), iter([X]), method="online_em", seed=3)
    assert res.diagnostics["n_iter"] == 1 and res.trace.shape == (1, 1) and res.extras["n_updates"] == 1
    assert res.diagnostics["converged"] is None and res.diagnostics["n_seen"] == 500
    state = partial_fit_state(online_em_init(GaussianMixture(3), 3, seed=3), X)
    assert res.trace[0, 0] == state.trace[0]
    np.testing.assert_array_equal(res.mean("means"), online_posterior(state).mean("means"))
