"""Online VB for DirichletDCA (Hoffman, Blei & Bach 2010): held-out quality against batch VB, the stream API
and option checks."""

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.evaluate import document_completion
from latentfs.inference.dca.online import online_posterior, online_vb_init, partial_fit_state
from latentfs.models.dca import DirichletDCA

K = 4


@pytest.fixture(scope="module")
def planted():
    X = DirichletDCA(K, alpha=0.2, gamma=0.1).simulate(n_documents=900, n_features=150, doc_length=60, seed=5)[
        "counts"
    ]
    return X[:700], X[700:]


def test_online_vb_reaches_batch_held_out_quality(planted):
    train, test = planted
    batch = latentfs.fit(DirichletDCA(K, alpha=0.2), train, method="vb", theta_update="full", seed=0, max_iter=300,
                         warn=False, num_ll_draws=0)
    # τ0 = 1: with 7 batches a pass the first steps must be large (ρ_0 = 1); the default τ0 = 4, chosen on corpora
    # of 20-80 batches a pass, ends in a worse optimum here in 7 of 8 seeds (−3.71 at seed 0)
    online = latentfs.fit(DirichletDCA(K, alpha=0.2), train, method="online_vb", batch_size=100, n_passes=4,
                          seed=0, tau0=1.0)
    split_score = lambda post: document_completion(post, test, 0.2, seed=0)  # noqa: E731
    # fixed seeds, deterministic (no false alarms): measured −3.540 (batch) vs −3.539 (online, 4 passes of 7
    # batches) nats/token; one pass scores −3.580, two −3.550. 0.02 nats/token is the margin allowed. Other
    # online seeds can land in a worse local optimum (seed 3: −3.707), as batch VB restarts can.
    assert split_score(online) >= split_score(batch) - 0.02
    assert online.diagnostics["n_iter"] == 4 * 7
    assert online.fitted_params("doc_topic")["concentration"].shape == (700, K)


def test_partial_fit_state_over_a_stream_equals_fit_on_the_same_batches(planted):
    train, _ = planted
    batches = [train[i: i + 175] for i in range(0, 700, 175)]
    state = online_vb_init(DirichletDCA(K, alpha=0.2), train.shape[1], total_documents=700, seed=1)
    assert np.isclose(state.step_size(), 4.0 ** -0.7)  # ρ_0 = (τ0 + 0)^−κ with the default τ0 = 4
    for b in batches:
        state = partial_fit_state(state, b)
    post = online_posterior(state)
    fitted = latentfs.fit(DirichletDCA(K, alpha=0.2), iter(batches), method="online_vb", total_documents=700,
                          seed=1)
    np.testing.assert_allclose(post.mean("topic_word"), fitted.mean("topic_word"), rtol=1e-12)
    assert state.n_updates == 4 and len(state.trace) == 4
    assert np.isclose(state.step_size(), 8.0 ** -0.7)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"kappa": 0.5}, r"kappa must be a number in \(0.5, 1\]; got 0.5"),
        ({"kappa": 1.2}, r"kappa must be a number in \(0.5, 1\]; got 1.2"),
        ({"tau0": -1.0}, r"tau0 must be a number ≥ 0; got -1"),
        ({"batch_size": 0}, r"batch_size must be an integer ≥ 1; got 0"),
        ({"theta_update": "map"}, r"theta_update must be one of"),
    ],
)
def test_online_vb_bad_options_raise(planted, options, match):
    with pytest.raises(DataError, match=match):
        latentfs.fit(DirichletDCA(K), planted[0], method="online_vb", **options)


def test_online_vb_stream_errors(planted):
    train, _ = planted
    with pytest.raises(DataError, match="total_documents is required when X is an iterator"):
        latentfs.fit(DirichletDCA(K), iter([train[:100]]), method="online_vb")
    state = online_vb_init(DirichletDCA(K), train.shape[1], total_documents=700)
    with pytest.raises(DataError, match=r"batch must have the vocabulary the fit started with: 150 features; got 149"):
        partial_fit_state(state, train[:50, :149])
    with pytest.raises(DataError, match=r"method must be one of .* for GammaPoissonDCA; got .online_vb."):
        latentfs.fit(latentfs.GammaPoissonDCA(K), train, method="online_vb")


def test_estimator_partial_fit_is_online_vb_over_the_same_batches(planted):
    train, test = planted
    batches = [train[i: i + 100] for i in range(0, 700, 100)]
    est = latentfs.DCA(K, alpha=0.2, seed=1).partial_fit(batches[0], total_documents=700)
    for b in batches[1:]:
        est = est.partial_fit(b)
    ref = latentfs.fit(DirichletDCA(K, alpha=0.2), iter(batches), method="online_vb", total_documents=700, seed=1)
    np.testing.assert_allclose(est.components_, ref.mean("topic_word"), rtol=1e-12)
    assert est.n_iter_ == 7 and est.transform(test[:3]).shape == (3, K)
    # a second pass keeps improving toward the batch optimum (deterministic: fixed seeds, no false alarms)
    first = est.score(test)
    for b in batches:
        est = est.partial_fit(b)
    assert est.score(test) >= first - 1e-9


def test_estimator_partial_fit_without_a_corpus_size_takes_the_documents_seen(planted):
    train, _ = planted
    est = latentfs.DCA(K, seed=0).partial_fit(train[:100]).partial_fit(train[100:300])
    assert est._online_state.total_documents == 300
    assert est.posterior_.diagnostics["n_iter"] == 2


def test_estimator_partial_fit_refuses_what_it_cannot_do(planted):
    train, _ = planted
    est = latentfs.DCA(K, seed=0).partial_fit(train[:100], kappa=0.9)
    with pytest.raises(DataError, match=r"X has 149 features, but DCA is expecting 150 features"):
        est.partial_fit(train[:50, :149])
    with pytest.raises(DataError, match=r"online options only at its first call; got \['kappa'\] later"):
        est.partial_fit(train[100:200], kappa=0.8)
    assert not hasattr(latentfs.DCA(K, model="gamma_poisson"), "partial_fit")  # online VB has no GaP form
    refit = est.fit(train[:200])  # fit() ends the stream: the next partial_fit starts afresh
    assert refit.partial_fit(train[:100]).n_iter_ == 1


def test_online_vb_reports_every_batch_and_ctrl_c_keeps_the_batches_seen(planted):
    from latentfs.core.driver import InterruptedFitWarning
    from latentfs.inference.dca.online import OnlineVBState

    train, _ = planted
    seen = []

    def callback(it, state, bound):
        seen.append((it, type(state), bound))
        if it == 3:
            raise KeyboardInterrupt

    with pytest.warns(InterruptedFitWarning):
        post = latentfs.fit(DirichletDCA(K, alpha=0.2), train, method="online_vb", batch_size=100, seed=0,
                            callback=callback)
    assert [s[0] for s in seen] == [0, 1, 2, 3] and all(s[1] is OnlineVBState for s in seen)
    assert post.diagnostics["interrupted"] and post.diagnostics["n_iter"] == 4  # the fourth batch was done
    assert np.isfinite(post.mean("topic_word")).all()
    full = latentfs.fit(DirichletDCA(K, alpha=0.2), train, method="online_vb", batch_size=100, seed=0)
    # the same first batches' bounds, then stopped
    np.testing.assert_array_equal(np.asarray(post.trace)[..., :4], np.asarray(full.trace)[..., :4])
    assert np.asarray(post.trace).shape[-1] == 4
