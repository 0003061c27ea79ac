"""PLSA (Monay et al. 2006; Hofmann 2001): digest book part 2, §4.6 oracles."""

import numpy as np
import pyro
import pytest
import torch
from pyro.infer import TraceEnum_ELBO, config_enumerate

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.dca.common import prepare
from latentfs.inference.dca.em import PointState, plsi_step
from latentfs.inference.plsa.em import fold_in, plsa_loglik
from latentfs.inference.plsa.transformer import PLSATransformer
from latentfs.models.dca import DirichletDCA
from latentfs.models.plsa import PLSA, tokens_from_counts


@pytest.fixture(scope="module")
def sim():
    return PLSA(3).simulate(60, 30, doc_length=np.arange(60) % 9 + 25, seed=11)


@pytest.fixture(scope="module")
def X(sim):
    return sim["counts"]


def test_em_log_likelihood_never_decreases_and_matches_dca_plsi(X):
    result = latentfs.fit(PLSA(3), X, method="em", seed=0, max_iter=80, tol=0.0, warn=False)
    trace = result.trace[0]
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:]))
    assert trace[-1] > trace[0] + 10
    # Same iterates as DirichletDCA's PLSI engine; the objectives differ by constants only
    dca = latentfs.fit(DirichletDCA(3), X, method="plsi_em", seed=0, max_iter=80, tol=0.0, warn=False)
    np.testing.assert_allclose(result.mean("topic_word"), dca.mean("topic_word"), rtol=1e-10, atol=1e-14)
    diff = trace - dca.trace[0]
    np.testing.assert_allclose(diff, diff[0], rtol=1e-12)


@pytest.mark.parametrize("n_iter", [1, 2, 7])
def test_word_and_document_totals_preserved_after_every_m_step(X, n_iter):
    result = latentfs.fit(PLSA(3), X, method="em", seed=1, max_iter=n_iter, tol=0.0, warn=False)
    m, theta = result.mean("doc_topic"), result.mean("topic_word")
    n_d = X.sum(1)
    expected = n_d[:, None] * (m @ theta)  # n̂(d, x) = n(d) Σ_k P(z|d) P(x|z)
    np.testing.assert_allclose(expected.sum(0), X.sum(0), rtol=1e-10)
    np.testing.assert_allclose(expected.sum(1), n_d, rtol=1e-12)
    np.testing.assert_allclose(m.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(theta.sum(1), 1.0, rtol=1e-12)
    assert (m >= 0).all() and (theta >= 0).all()


def test_conditional_likelihood_below_saturated_bound(X):
    result = latentfs.fit(PLSA(3), X, method="em", seed=0, max_iter=50, warn=False)
    rows = X / X.sum(1, keepdims=True)
    saturated = np.sum(X[X > 0] * np.log(rows[X > 0]))
    assert result.diagnostics["conditional_log_likelihood"] <= saturated


def test_one_aspect_is_the_unigram_model_after_one_iteration(X):
    result = latentfs.fit(PLSA(1), X, method="em", seed=0, max_iter=1, warn=False)
    np.testing.assert_allclose(result.mean("topic_word")[0], X.sum(0) / X.sum(), rtol=1e-12)


def test_tempered_e_step_is_the_normalised_power(X):
    data = prepare(X)
    rng = np.random.default_rng(0)
    m, theta = rng.dirichlet(np.ones(3), size=X.shape[0]), rng.dirichlet(np.ones(X.shape[1]), size=3)
    new, _ = plsi_step(data, PointState(torch.as_tensor(m), torch.as_tensor(theta)), tempering=0.7)
    joint = (m[:, :, None] * theta[None]) ** 0.7  # (I, K, J)
    resp = joint / joint.sum(1, keepdims=True)
    counts = X[:, None, :] * resp
    np.testing.assert_allclose(new.doc_latent.numpy(), counts.sum(2) / X.sum(1, keepdims=True), rtol=1e-12)
    word = counts.sum(0)
    np.testing.assert_allclose(new.topic_word.numpy(), word / word.sum(1, keepdims=True), rtol=1e-12)


def test_fold_in_is_a_fixed_point_and_scale_free(X):
    result = latentfs.fit(PLSA(3), X, method="em", seed=0, max_iter=3000, tol=1e-13, warn=False)
    m = result.mean("doc_topic")
    theta_before = result.mean("topic_word").copy()
    # one fold-in iteration from the fitted P(z|d) is exactly the m-part of one more EM step ...
    one = fold_in(result, X, init=m, max_iter=1, tol=0.0)
    em, _ = plsi_step(prepare(X), PointState(torch.as_tensor(m), torch.as_tensor(theta_before)))
    np.testing.assert_allclose(one, em.doc_latent.numpy(), rtol=1e-10, atol=1e-15)
    # ... so at EM's fixed point fold-in stays put (EM's slow tail leaves ~1e-6 of movement here)
    again = fold_in(result, X, init=m, max_iter=10, tol=0.0)
    np.testing.assert_allclose(again, m, atol=1e-5)
    assert np.abs(fold_in(result, X, max_iter=3000, tol=1e-12) - m).max() < 1e-3  # from uniform: same point
    np.testing.assert_array_equal(result.mean("topic_word"), theta_before)  # fold-in never changes P(x|z)
    once, doubled = fold_in(result, X[:5], max_iter=200), fold_in(result, 2 * X[:5], max_iter=200)
    np.testing.assert_allclose(once, doubled, rtol=1e-12, atol=1e-15)
    empty = fold_in(result, np.zeros((1, X.shape[1])))
    np.testing.assert_allclose(empty, 1 / 3)


def test_early_stopping_keeps_the_best_validation_iterate_without_leakage(sim):
    X = sim["counts"]
    train, valid = X[:45], X[45:]
    result = latentfs.fit(PLSA(3), train, method="em", seed=4, early_stopping=True, X_valid=valid, patience=3,
                          max_iter=400)
    scores = result.extras["validation_trace"]
    best = result.diagnostics["best_iter"]
    assert result.diagnostics["stopped_early"]
    assert best == int(np.argmax(scores)) and scores.size == best + 1 + 3
    # P(x|z) is the plain-EM iterate on the training documents alone: validation did not leak in
    plain = latentfs.fit(PLSA(3), train, method="em", seed=4, max_iter=best + 1, tol=0.0, warn=False)
    np.testing.assert_allclose(result.mean("topic_word"), plain.mean("topic_word"), rtol=1e-12)


def test_tempered_em_lowers_beta_geometrically_and_keeps_the_best(sim):
    X = sim["counts"]
    result = latentfs.fit(PLSA(3), X, method="tem", seed=2, validation_fraction=0.25, patience=2,
                          beta_decay=0.8, beta_min=0.3, max_iter=400)
    betas = result.extras["beta_trace"]
    assert np.all(np.diff(betas) <= 0) and betas[0] == 1.0
    exponents = np.log(betas) / np.log(0.8)
    np.testing.assert_allclose(exponents, np.round(exponents), atol=1e-9)
    assert betas.min() >= 0.3 and result.method == "tem" and result.diagnostics["tempered"]
    assert result.diagnostics["best_validation_score"] == pytest.approx(result.extras["validation_trace"].max())
    assert result.mean("doc_topic").shape == (45, 3)  # 15 of 60 documents went to validation


def test_pyro_model_likelihood_equals_engine(X):
    small = X[:6, :10] + 1
    data = prepare(small)
    rng = np.random.default_rng(3)
    m = torch.as_tensor(rng.dirichlet(np.ones(3), size=6))
    theta = torch.as_tensor(rng.dirichlet(np.ones(10), size=3))
    doc, word = tokens_from_counts(small)
    prior = data.doc_lengths / data.doc_lengths.sum()
    elbo = TraceEnum_ELBO(max_plate_nesting=1)
    pyro.clear_param_store()
    loss = elbo.loss(config_enumerate(PLSA(3).model), lambda *a, **k: None, doc, word, doc_prior=prior,
                     doc_topic=m, topic_word=theta)
    assert -loss == pytest.approx(plsa_loglik(data, PointState(m, theta))[0], rel=1e-12)


def test_planted_aspects_recovered(sim):
    from latentfs.core.relabel import matching_permutation

    big = PLSA(3).simulate(300, 30, doc_length=200, word_concentration=0.1, seed=5)
    result = latentfs.fit(PLSA(3), big["counts"], method="em", seed=0, n_init=3, max_iter=500, warn=False)
    _, dist = matching_permutation(big["topic_word"], result.mean("topic_word"))
    assert dist < 0.15  # mean L1 per aspect after Hungarian matching


def test_transformer_in_a_pipeline(sim):
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    X = sim["counts"]
    y = sim["doc_topic"].argmax(1)
    pipe = make_pipeline(PLSATransformer(3, seed=0, max_iter=200), LogisticRegression(max_iter=500))
    pipe.fit(X[:45], y[:45])
    assert pipe.predict(X[45:]).shape == (15,)
    feats = pipe[0].transform(X[45:])
    np.testing.assert_allclose(feats.sum(1), 1.0)
    assert clone(pipe[0]).get_params()["n_components"] == 3
    assert np.isfinite(pipe[0].score(X[45:])) and pipe[0].perplexity(X[45:]) > 1


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"validation_score": "oracle"}, "validation_score must be one of"),
        ({"patience": 0}, "patience must be an integer"),
        ({"fold_in_iter": 1.5}, "fold_in_iter must be an integer"),
        ({"beta_decay": 1.0}, r"beta_decay must be a number in \(0, 1\)"),
        ({"beta_min": 0}, r"beta_min must be a number in \(0, 1\]"),
        ({"early_stopping": True}, "need validation documents"),
        ({"early_stopping": True, "validation_fraction": 0.001}, "leaves 0 validation documents"),
        ({"validation_fraction": 1.5}, r"validation_fraction must be a number in \(0, 1\)"),
        ({"validation_fraction": 0.2, "X_valid": np.ones((2, 30))}, "either X_valid or validation_fraction"),
        ({"early_stopping": True, "X_valid": np.ones((2, 7))}, "X_valid must have 30 features"),
        ({"init": "uniform"}, "init must be a pair"),
        ({"n_init": 0}, "n_init must be an integer"),
        ({"max_iter": 0}, "max_iter must be an integer"),
        ({"early_stopping": True, "X_valid": np.eye(30)}, "X_valid documents need at least 2 tokens"),
        ({"init": (np.ones((2, 3)), np.ones((3, 30)))}, "init must hold non-negative doc_topic"),
    ],
)
def test_bad_fit_options(X, options, match):
    with pytest.raises(DataError, match=match):
        latentfs.fit(PLSA(3), X, method="em", **{"max_iter": 3, "warn": False, **options})


def test_bad_model_and_fold_in_inputs(X):
    with pytest.raises(DataError, match="n_components must be a positive integer"):
        PLSA(2.5)
    with pytest.raises(DataError, match="n_components must be at most"):
        latentfs.fit(PLSA(31), X, method="em", max_iter=2, warn=False)
    with pytest.raises(DataError, match="method='tem' is tempered EM"):
        latentfs.fit(PLSA(2), X, method="tem", tempered=False)
    with pytest.raises(DataError, match="doc_length must hold positive integers"):
        PLSA(2).simulate(3, 5, doc_length=0)
    with pytest.raises(DataError, match="word_concentration must be finite and positive"):
        PLSA(2).simulate(3, 5, word_concentration=-1.0)
    theta = np.full((2, 30), 1 / 30)
    with pytest.raises(DataError, match="n_tokens to simulate"):
        PLSA(2).model(doc_prior=torch.ones(2) / 2, doc_topic=torch.ones(2, 2) / 2, topic_word=torch.as_tensor(theta))
    with pytest.raises(DataError, match="must have 2 aspects"):
        PLSA(2).model(doc_prior=torch.ones(2) / 2, doc_topic=torch.ones(2, 3) / 3, topic_word=torch.as_tensor(theta),
                      n_tokens=4)
    with pytest.raises(DataError, match="topic_word must be a fitted result"):
        fold_in(-theta, X)
    with pytest.raises(DataError, match="X must have 30 features"):
        fold_in(theta, X[:, :5])
    with pytest.raises(DataError, match="init must be a non-negative array of shape"):
        fold_in(theta, X, init=np.ones((2, 2)))
    with pytest.raises(DataError, match="max_iter must be an integer"):
        fold_in(theta, X, max_iter=0)
    with pytest.raises(DataError, match="not fitted yet"):
        PLSATransformer(2).transform(X)
    with pytest.raises(DataError, match="unknown parameter 'k'"):
        PLSATransformer(2).set_params(k=3)


def _block_corpus():
    """Two aspects on disjoint words (0–3, 4–7); EM started from a block P(x | z) keeps its exact zeros."""
    rng = np.random.default_rng(0)
    train = np.zeros((40, 8))
    train[:20, :4] = rng.multinomial(30, [0.25] * 4, size=20)
    train[20:, 4:] = rng.multinomial(30, [0.25] * 4, size=20)
    block = np.kron(np.eye(2), np.full((1, 4), 0.25)) + 0.0
    init = (np.full((40, 2), 0.5), block)
    # test documents: mostly aspect-0 words, with one or two tokens of aspect-1 words
    test = np.zeros((12, 8))
    test[:, :4] = rng.multinomial(10, [0.25] * 4, size=12)
    test[:, 5] = 1 + np.arange(12) % 2
    return train, init, test


def test_heldout_tokens_of_probability_zero_are_counted_and_warned():
    from latentfs.core.data import DataWarning
    from latentfs.evaluate.heldout import split_documents

    train, init, test = _block_corpus()
    result = latentfs.fit(PLSA(2), train, method="em", init=init, max_iter=30, warn=False)
    tw = result.mean("topic_word")
    assert (tw[0, 4:] == 0).all() and (tw[1, :4] == 0).all()
    plsa = PLSATransformer(2, seed=0).fit(train)
    plsa.components_ = tw  # the block fit (a random start only makes these entries tiny)
    # independent count: a held-out token of word 5 scores 0 exactly when its document's observed part has
    # no aspect-1 word (the fold-in then puts P(z = 1 | d) at exactly 0)
    observed, held = split_documents(test, 0.5, seed=0)
    expected = int(sum(held[i, 5] for i in range(12) if observed[i, 4:].sum() == 0))
    assert expected > 0
    details = plsa.score_details(test, seed=0)
    assert details["n_zero_probability"] == expected and details["per_token"] == -np.inf
    assert np.isfinite(details["per_token_scored"]) and details["per_token_scored"] > np.log(1 / 8)
    with pytest.warns(DataWarning, match=f"{expected} of {details['n_tokens']} held-out tokens have probability 0"):
        assert plsa.score(test, seed=0) == -np.inf  # before: clamped at 1e-300, a finite perplexity of ~1e9
    # early stopping charges such tokens log(1e-300) to rank iterates, and reports how many there were
    fit = latentfs.fit(PLSA(2), train, method="em", init=init, early_stopping=True, X_valid=test, max_iter=10,
                       patience=3, warn=False)
    assert fit.diagnostics["zero_probability_validation_tokens"] > 0


def test_restarts_go_through_the_one_restart_loop_with_one_warning_per_fit():
    # issue 13 item 4: PLSA had its own restart loop and warned once per restart
    import warnings as _warnings

    from latentfs.core.driver import ConvergenceWarning

    X = np.random.default_rng(0).poisson(1.0, size=(30, 12))
    X[X.sum(1) == 0, 0] = 1
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        result = latentfs.fit(PLSA(2), X, method="em", n_init=3, max_iter=2, seed=0)
    assert sum(issubclass(w.category, ConvergenceWarning) for w in caught) == 1
    scores = result.diagnostics["restart_scores"]
    assert len(scores) == 3 and scores[result.diagnostics["best_restart"]] == max(scores)
