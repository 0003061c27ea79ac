"""GaussianHMMEstimator and CategoricalHMMEstimator (issue 13 item 3): scikit-learn's own estimator checks,
agreement with ``latentfs.fit`` + ``viterbi``/``state_marginals``, several sequences through ``lengths``,
Pipeline / GridSearchCV, clone, save/load, ``Posterior.transform/predict/score`` and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, TimeSeriesSplit
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import _get_check_estimator_ids, estimator_checks_generator

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.hmm import sequence_log_likelihood, state_marginals, viterbi
from latentfs.inference.hmm.estimator import CategoricalHMMEstimator, GaussianHMMEstimator
from latentfs.models.hmm import CategoricalHMM, GaussianHMM

# Few iterations on scikit-learn's tiny random data: stopping early is warned about, correctly, and is
# not what these checks test.



def _check_name(check: object) -> str:
    return getattr(check, "func", check).__name__  # type: ignore[attr-defined]


# GaussianHMMEstimator runs scikit-learn's checks in tests/core/test_check_estimator.py (the central list).

# CategoricalHMMEstimator takes one column of symbols 0..S−1; scikit-learn's checks feed several real
# columns, so only its checks that do not fit data run here (the contract on symbol data is tested below).
_DATA_FREE = {
    "check_estimator_cloneable",
    "check_estimator_repr",
    "check_no_attributes_set_in_init",
    "check_parameters_default_constructible",
    "check_get_params_invariance",
    "check_set_params",
    "check_estimator_tags_renamed",
    "check_valid_tag_types",
    "check_mixin_order",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_estimators_unfitted",
}
_CAT_CHECKS = [
    (est, check)
    for est, check in estimator_checks_generator(CategoricalHMMEstimator(2), mark="xfail")
    if _check_name(check) in _DATA_FREE
]


@pytest.mark.parametrize("estimator, check", _CAT_CHECKS, ids=_get_check_estimator_ids)
def test_sklearn_data_free_check_categorical(estimator, check):
    check(estimator)


def test_every_check_is_collected():
    assert {_check_name(c) for _, c in _CAT_CHECKS} == _DATA_FREE


# ----------------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def gaussian():
    params = {
        "means": np.array([[-5.0, 0.0], [0.0, 3.0], [5.0, 0.0]]),
        "precision": np.ones((3, 2)),
        "transmat": np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]),
    }
    sim = GaussianHMM(3).simulate(4, [60, 45, 30, 25], 2, params=params, seed=3)
    return sim["data"], sim["lengths"], sim["states"]


@pytest.fixture(scope="module")
def symbols():
    sim = CategoricalHMM(2, 4).simulate(3, 50, seed=2)
    return sim["data"].reshape(-1, 1), sim["lengths"]


def test_gaussian_agrees_with_fit_and_decoders(gaussian):
    X, lengths, _ = gaussian
    est = GaussianHMMEstimator(3, covariance_type="diag").fit(X, lengths=lengths)
    post = latentfs.fit(GaussianHMM(3, covariance_type="diag"), X, method="em", lengths=lengths, seed=0)
    np.testing.assert_allclose(est.transmat_, post.mean("transmat"), rtol=1e-10)
    np.testing.assert_allclose(est.components_, post.mean("means"), rtol=1e-10)
    np.testing.assert_allclose(est.covars_, post.mean("covariance"), rtol=1e-10)
    np.testing.assert_array_equal(est.predict(X, lengths), viterbi(post, X, lengths))
    np.testing.assert_allclose(est.predict_proba(X, lengths), state_marginals(post, X, lengths), atol=1e-10)
    np.testing.assert_allclose(est.transform(X, lengths), est.predict_proba(X, lengths))
    total = sequence_log_likelihood(post, X, lengths).sum()
    assert est.score(X, lengths=lengths) == pytest.approx(total / X.shape[0], rel=1e-10)
    assert est.score(X, lengths=lengths) == pytest.approx(post.diagnostics["log_likelihood"] / X.shape[0], rel=1e-8)
    assert est.get_feature_names_out().tolist() == ["gaussianhmmestimator0", "gaussianhmmestimator1", "gaussianhmmestimator2"]
    assert est.startprob_.shape == (3,) and np.allclose(est.transmat_.sum(1), 1.0)


def test_gaussian_recovers_the_states(gaussian):
    """Label-invariant: the Viterbi path matches the simulated states up to relabelling."""
    from sklearn.metrics import adjusted_rand_score

    X, lengths, states = gaussian
    est = GaussianHMMEstimator(3).fit(X, lengths=lengths)
    assert adjusted_rand_score(states, est.predict(X, lengths)) > 0.9


def test_score_samples_sum_to_sequence_log_likelihoods(gaussian):
    X, lengths, _ = gaussian
    est = GaussianHMMEstimator(3).fit(X, lengths=lengths)
    per_row = est.score_samples(X, lengths)
    ends = np.cumsum(lengths)
    sums = [per_row[e - n : e].sum() for e, n in zip(ends, lengths, strict=True)]
    np.testing.assert_allclose(sums, sequence_log_likelihood(est.posterior_, X, lengths), rtol=1e-10)
    assert est.score(X, lengths=lengths) == pytest.approx(per_row.mean(), rel=1e-10)


def test_lengths_split_the_sequences(gaussian):
    """Decoding with lengths is decoding each sequence on its own; without lengths, one long sequence."""
    X, lengths, _ = gaussian
    est = GaussianHMMEstimator(3).fit(X, lengths=lengths)
    parts = np.split(X, np.cumsum(lengths)[:-1])
    np.testing.assert_array_equal(est.predict(X, lengths), np.concatenate([est.predict(p) for p in parts]))
    np.testing.assert_allclose(
        est.predict_proba(X, lengths), np.concatenate([est.predict_proba(p) for p in parts]), atol=1e-12
    )
    joined = est.score(X)  # one sequence: the boundaries become transitions
    assert joined != pytest.approx(est.score(X, lengths=lengths), rel=1e-9)
    # a single row decodes (its column is constant; the engines' data preparation would refuse it)
    assert est.predict_proba(X[:1]).shape == (1, 3)


def test_fit_transform_and_fit_predict_take_lengths(gaussian):
    X, lengths, _ = gaussian
    est = GaussianHMMEstimator(3)
    np.testing.assert_allclose(est.fit_transform(X, lengths=lengths), est.transform(X, lengths))
    np.testing.assert_array_equal(clone(est).fit_predict(X, lengths=lengths), est.predict(X, lengths))


def test_vb_engine_through_method(gaussian):
    X, lengths, _ = gaussian
    est = GaussianHMMEstimator(3, covariance_type="diag", method="vb", max_iter=200).fit(X, lengths=lengths)
    post = latentfs.fit(GaussianHMM(3, covariance_type="diag"), X, method="vb", lengths=lengths, seed=0,
                        max_iter=200)
    np.testing.assert_allclose(est.predict_proba(X, lengths), state_marginals(post, X, lengths), atol=1e-8)
    assert est.posterior_.method == "vb"


def test_pipeline_and_grid_search(gaussian):
    """GridSearchCV over n_components with the held-out log-likelihood per observation: with three
    well-separated simulated states, one state scores far worse (deterministic: fixed seeds)."""
    X, lengths, _ = gaussian
    pipe = Pipeline([("scale", StandardScaler()), ("hmm", GaussianHMMEstimator(2))])
    pipe.fit(X, hmm__lengths=lengths)
    assert pipe.transform(X).shape == (X.shape[0], 2)
    assert np.isfinite(pipe.score(X))
    grid = GridSearchCV(pipe, {"hmm__n_components": [1, 3]}, cv=TimeSeriesSplit(3)).fit(X)
    assert grid.best_params_ == {"hmm__n_components": 3}


def test_clone_keeps_parameters_and_drops_the_fit(gaussian):
    X, lengths, _ = gaussian
    est = GaussianHMMEstimator(3, covariance_type="diag", seed=4).fit(X, lengths=lengths)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "posterior_")
    np.testing.assert_allclose(twin.fit(X, lengths=lengths).transmat_, est.transmat_)


def test_save_load_round_trip(gaussian, tmp_path):
    X, lengths, _ = gaussian
    est = GaussianHMMEstimator(3).fit(X, lengths=lengths)
    again = GaussianHMMEstimator.load(est.save(tmp_path / "hmm"))
    np.testing.assert_array_equal(again.predict_proba(X, lengths), est.predict_proba(X, lengths))


def test_posterior_methods_for_hmm_results(gaussian, symbols):
    X, lengths, _ = gaussian
    post = latentfs.fit(GaussianHMM(3), X, lengths=lengths, seed=0)
    est = post.estimator()
    assert isinstance(est, GaussianHMMEstimator) and est.covariance_type == "diag"
    first = X[: lengths[0]]
    np.testing.assert_allclose(post.transform(first), state_marginals(post, first), atol=1e-10)
    np.testing.assert_array_equal(post.predict(first), viterbi(post, first))
    assert post.score(first) == pytest.approx(sequence_log_likelihood(post, first)[0] / len(first), rel=1e-10)
    # several sequences through the Posterior: lengths= goes to the estimator
    np.testing.assert_array_equal(post.predict(X, lengths=lengths), viterbi(post, X, lengths))
    np.testing.assert_allclose(post.predict_proba(X, lengths=lengths), state_marginals(post, X, lengths), atol=1e-10)
    assert post.score(X, lengths=lengths) == pytest.approx(sequence_log_likelihood(post, X, lengths).sum() / len(X),
                                                           rel=1e-10)
    S, slen = symbols
    cpost = latentfs.fit(CategoricalHMM(2), S, lengths=slen, seed=0)
    np.testing.assert_allclose(cpost.transform(S[:50]), state_marginals(cpost, S[:50]), atol=1e-10)


def test_categorical_agrees_with_fit_and_decoders(symbols):
    S, lengths = symbols
    est = CategoricalHMMEstimator(2).fit(S, lengths=lengths)
    post = latentfs.fit(CategoricalHMM(2), S, method="em", lengths=lengths, seed=0)
    np.testing.assert_allclose(est.components_, post.mean("emission_probs"), rtol=1e-10)
    np.testing.assert_array_equal(est.predict(S, lengths), viterbi(post, S, lengths))
    np.testing.assert_allclose(est.predict_proba(S, lengths), state_marginals(post, S, lengths), atol=1e-10)
    total = sequence_log_likelihood(post, S, lengths).sum()
    assert est.score(S, lengths=lengths) == pytest.approx(total / S.shape[0], rel=1e-10)
    assert est.n_categories_ == 4 and est.n_features_in_ == 1
    # a 1-D symbol array is one column
    np.testing.assert_array_equal(est.predict(S.ravel(), lengths), est.predict(S, lengths))


# ----------------------------------------------------------------------------- bad input
def test_unfitted_estimator_refuses_to_decode(gaussian):
    X, _, _ = gaussian
    with pytest.raises(NotFittedError):
        GaussianHMMEstimator().predict(X)


@pytest.mark.parametrize("method", ["fit", "predict", "predict_proba", "score"])
def test_bad_lengths_are_data_errors(gaussian, method):
    X, lengths, _ = gaussian
    est = GaussianHMMEstimator(3).fit(X, lengths=lengths) if method != "fit" else GaussianHMMEstimator(3)
    call = getattr(est, method)
    kw = "lengths"
    with pytest.raises(DataError, match=r"lengths must sum to the number of rows of X.*sum\(lengths\) = 159"):
        call(X, **{kw: [60, 45, 30, 24]})
    with pytest.raises(DataError, match="lengths must be positive: sequence 1 has length 0"):
        call(X, **{kw: [60, 0, 45, 55]})


def test_nan_and_wrong_width_are_data_errors(gaussian):
    X, lengths, _ = gaussian
    bad = X.copy()
    bad[5, 0] = np.nan
    # NaN is a missing value for diagonal covariances (the default; tests/inference/hmm/test_hmm_missing_rows.py)
    # and an error for full ones, which cannot integrate it out
    with pytest.raises(DataError, match="NaN"):
        GaussianHMMEstimator(3, covariance_type="full").fit(bad, lengths=lengths)
    est = GaussianHMMEstimator(3, covariance_type="full").fit(X, lengths=lengths)
    with pytest.raises(DataError, match="NaN"):
        est.predict(bad, lengths)
    with pytest.raises(DataError, match="features"):
        est.predict(np.hstack([X, X]), lengths)


def test_categorical_bad_symbols_are_data_errors(symbols):
    S, lengths = symbols
    est = CategoricalHMMEstimator(2).fit(S, lengths=lengths)
    with pytest.raises(DataError, match=r"symbols 0, 1, …, 3 the model was fitted on; row 2 holds 7"):
        est.predict(np.array([[0], [1], [7]]))
    with pytest.raises(DataError, match=r"one symbol per row .* got 2 columns"):
        CategoricalHMMEstimator(2).fit(np.hstack([S, S]), lengths=lengths)
    with pytest.raises(DataError, match="symbols coded 0, 1"):
        CategoricalHMMEstimator(2).fit(S + 0.5, lengths=lengths)
