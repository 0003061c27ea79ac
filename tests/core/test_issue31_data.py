"""Issue 31, items 7 and 10 (data): new data matched by name, streams that keep their width, factor analysis
with missing values end to end, names on ``posterior_``, a warm start from a result, small-integer sparse
input, masked arrays, dtype spellings, wrong ``init=`` and a fit too large for memory — each refused with a
clear message or handled exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import scipy.stats
import torch

import latentfs
from latentfs.core.data import DataError
from latentfs.core.options import check_dtype, check_options

COLUMNS = list("abcdef")
# short fits: the estimators below stop before converging on purpose
SHORT = pytest.mark.filterwarnings("ignore::latentfs.core.convergence_warning.ConvergenceWarning")


@pytest.fixture(scope="module")
def continuous() -> np.ndarray:
    rng = np.random.default_rng(0)
    z = rng.normal(size=(200, 2))
    loadings = rng.normal(size=(2, 6)) * 2.0
    return z @ loadings + 0.5 * rng.normal(size=(200, 6)) + np.arange(6) * 3.0


@pytest.fixture(scope="module")
def counts() -> np.ndarray:
    return np.asarray(latentfs.DirichletDCA(3).simulate(n_documents=40, n_features=12, doc_length=50, seed=0)["counts"])


# ------------------------------------------------------------------------------------------ item 7: names


def test_a_frame_with_integer_column_names_is_refused_after_a_named_fit(continuous):
    fa = latentfs.FactorAnalyzer(2).fit(pd.DataFrame(continuous, columns=COLUMNS))
    reversed_by_position = pd.DataFrame(continuous[:, ::-1])  # columns 0..5: names that cannot be matched
    for call in (fa.transform, fa.score, fa.score_samples):
        with pytest.raises(DataError, match=r"column names are not strings .*fitted on named columns \['a', 'b'"):
            call(reversed_by_position)


def test_a_result_refuses_integer_column_names_too(continuous):
    post = latentfs.fit(latentfs.FactorAnalysis(2), pd.DataFrame(continuous, columns=COLUMNS), method="em", seed=0)
    with pytest.raises(DataError, match="column names are not strings"):
        post.score(pd.DataFrame(continuous[:, ::-1]))
    # the same columns under their names, in another order, are matched by name
    named = pd.DataFrame(continuous, columns=COLUMNS)
    assert post.score(named[COLUMNS[::-1]]) == pytest.approx(post.score(named), rel=1e-12)


def test_a_frame_whose_string_names_equal_the_fitted_ones_as_text_is_matched(continuous):
    named = pd.DataFrame(continuous, columns=[str(j) for j in range(6)])
    fa = latentfs.FactorAnalyzer(2).fit(named)
    by_int = pd.DataFrame(continuous[:, ::-1], columns=list(range(6))[::-1])  # 5, 4, …, 0: same names as text
    np.testing.assert_allclose(fa.transform(by_int), fa.transform(named), rtol=1e-12)


@SHORT
def test_posterior_of_an_estimator_names_the_frames_columns(continuous, counts):
    fa = latentfs.FactorAnalyzer(2).fit(pd.DataFrame(continuous, columns=COLUMNS))
    assert fa.posterior_.coords["feature"] == COLUMNS
    vocab = [f"w_{j}" for j in range(counts.shape[1])]
    dca = latentfs.DCA(3, max_iter=20).fit(pd.DataFrame(counts, columns=vocab))
    assert dca.posterior_.coords["feature"] == vocab
    gm = latentfs.GaussianMixtureClusterer(2).fit(pd.DataFrame(continuous, columns=COLUMNS))
    assert gm.posterior_.coords["feature"] == COLUMNS
    # a plain array keeps the generated names
    assert latentfs.FactorAnalyzer(2).fit(continuous).posterior_.coords["feature"] == [f"x{j}" for j in range(6)]


# ------------------------------------------------------------------------------------------ item 7: streams


@SHORT
def test_partial_fit_after_fit_refuses_another_column_count(counts, continuous):
    dca = latentfs.DCA(3, max_iter=10).fit(counts)
    with pytest.raises(DataError, match="X has 11 features, but DCA is expecting 12 features"):
        dca.partial_fit(counts[:, :11])
    gm = latentfs.GaussianMixtureClusterer(2).fit(continuous)
    with pytest.raises(DataError, match="X has 5 features, but GaussianMixtureClusterer is expecting 6 features"):
        gm.partial_fit(continuous[:, :5])
    # the same width starts the stream as documented
    assert latentfs.DCA(3, max_iter=10).fit(counts).partial_fit(counts[:20]).n_iter_ == 1


# ------------------------------------------------------------------------------------------ item 7: missing values


def _marginal_logpdf(fa: latentfs.FactorAnalyzer, row: np.ndarray) -> float:
    obs = ~np.isnan(row)
    W = fa.components_.T[obs]
    cov = W @ W.T + np.diag(fa.noise_variance_[obs])
    return float(scipy.stats.multivariate_normal(fa.mean_[obs], cov).logpdf(row[obs]))


def _factor_posterior_mean(fa: latentfs.FactorAnalyzer, row: np.ndarray) -> np.ndarray:
    obs = ~np.isnan(row)
    W = fa.components_.T[obs]
    scaled = W / fa.noise_variance_[obs, None]
    return np.linalg.solve(np.eye(W.shape[1]) + W.T @ scaled, scaled.T @ (row[obs] - fa.mean_[obs]))


def test_factor_analyzer_scores_a_new_respondent_with_a_missing_answer(continuous):
    fa = latentfs.FactorAnalyzer(2).fit(continuous)
    new = continuous[:3].copy()
    new[0, 1] = np.nan
    new[2, [0, 4]] = np.nan
    scores = fa.score_samples(new)
    want = [_marginal_logpdf(fa, row) for row in new]  # the observed entries' Gaussian marginal, exactly
    np.testing.assert_allclose(scores, want, rtol=1e-10)
    np.testing.assert_allclose(fa.transform(new), [_factor_posterior_mean(fa, row) for row in new], rtol=1e-9)
    # one row alone (a column entirely missing in this batch is fine: it is observed in the fit)
    assert fa.score(new[:1]) == pytest.approx(want[0], rel=1e-10)
    # complete rows score as before
    np.testing.assert_allclose(fa.score_samples(continuous[1:2]), [_marginal_logpdf(fa, continuous[1])], rtol=1e-10)


def test_factor_analyzer_fits_data_with_missing_values_as_the_engine_does(continuous):
    X = continuous.copy()
    X[np.random.default_rng(1).random(X.shape) < 0.05] = np.nan
    fa = latentfs.FactorAnalyzer(2, max_iter=300).fit(X)
    ref = latentfs.fit(latentfs.FactorAnalysis(2), X, method="em", seed=0, max_iter=300)
    np.testing.assert_allclose(fa.components_, ref.mean("loadings").T, rtol=1e-10)
    assert np.isfinite(fa.score(X))


def test_factor_analyzer_refuses_a_row_with_nothing_observed(continuous):
    fa = latentfs.FactorAnalyzer(2).fit(continuous)
    rows = continuous[:2].copy()
    rows[1] = np.nan
    with pytest.raises(DataError, match=r"rows that are entirely missing \(rows \[1\]\)"):
        fa.score(rows)


def test_none_is_not_read_as_a_missing_value(continuous):
    X = continuous.astype(object)
    X[0, 3] = None
    with pytest.raises(DataError, match=r"X holds None at index \(0, 3\); None is not a number. Write np.nan"):
        latentfs.FactorAnalyzer(2).fit(X)


def test_masked_entries_are_missing_for_factor_analysis(continuous):
    mask = np.zeros(continuous.shape, dtype=bool)
    mask[0, 1] = mask[5, 3] = True
    masked = np.ma.masked_array(np.where(mask, 1e6, continuous), mask=mask)  # the hidden values are absurd
    nan = np.where(mask, np.nan, continuous)
    fa = latentfs.FactorAnalyzer(2).fit(masked)
    np.testing.assert_allclose(fa.components_, latentfs.FactorAnalyzer(2).fit(nan).components_, rtol=1e-12)
    np.testing.assert_allclose(fa.score_samples(masked[:6]), fa.score_samples(nan[:6]), rtol=1e-12)
    # an estimator whose engine cannot take missing values refuses the mask, saying so
    with pytest.raises(DataError, match="masked array with 2 masked entries"):
        latentfs.GaussianMixtureClusterer(2).fit(masked)


# ------------------------------------------------------------------------------------------ item 7: warm start


def test_dca_vb_starts_from_the_result_of_a_vb_fit(counts):
    model = latentfs.DirichletDCA(3)
    first = latentfs.fit(model, counts, method="vb", seed=0, max_iter=30, warn=False, num_ll_draws=0)
    again = latentfs.fit(model, counts, method="vb", init=first, max_iter=1, warn=False, num_ll_draws=0,
                         doc_restart=False)
    # one more cycle from the first fit's end point stays at (or above) the bound it reached
    assert again.trace[0, 0] >= first.trace[0, -1] - 1e-6 * abs(first.trace[0, -1])
    full = latentfs.fit(model, counts, method="vb", theta_update="full", seed=0, max_iter=30, warn=False,
                        num_ll_draws=0)
    latentfs.fit(model, counts, method="vb", theta_update="full", init=full, max_iter=2, warn=False, num_ll_draws=0)


def test_dca_vb_init_from_a_result_of_another_shape_is_refused(counts):
    model = latentfs.DirichletDCA(3)
    other = latentfs.fit(model, counts[:30], method="vb", seed=0, max_iter=5, warn=False, num_ll_draws=0)
    with pytest.raises(DataError, match=r"init holds doc_shape \(30, 3\) and topic_word \(3, 12\); this fit needs "
                                        r"\(40, 3\) and \(3, 12\)"):
        latentfs.fit(model, counts, method="vb", init=other, max_iter=5, warn=False)
    two = latentfs.fit(latentfs.DirichletDCA(2), counts, method="vb", seed=0, max_iter=5, warn=False, num_ll_draws=0)
    with pytest.raises(DataError, match=r"init holds doc_shape \(40, 2\)"):
        latentfs.fit(model, counts, method="vb", init=two, max_iter=5, warn=False)


def test_dca_vb_init_of_the_wrong_kind_is_refused(counts):
    model = latentfs.DirichletDCA(3)
    for bad in (np.ones((3, 3)), {"topic_word": np.ones((3, 12))}, "previous"):
        with pytest.raises(DataError, match="init must be a VBState or the Posterior of a DCA VB fit"):
            latentfs.fit(model, counts, method="vb", init=bad, max_iter=5, warn=False)
    sampled = latentfs.fit(model, counts, method="collapsed_gibbs", seed=0, num_chains=1, num_warmup=5,
                           num_samples=5, warn=False)
    with pytest.raises(DataError, match="init is a Posterior of method 'collapsed_gibbs'"):
        latentfs.fit(model, counts, method="vb", init=sampled, max_iter=5, warn=False)
    gap = latentfs.fit(latentfs.GammaPoissonDCA(3), counts, method="vb", seed=0, max_iter=5, warn=False,
                       num_ll_draws=0)
    with pytest.raises(DataError, match="init is a Posterior of a GammaPoissonDCA fit; this fit is DirichletDCA"):
        latentfs.fit(model, counts, method="vb", init=gap, max_iter=5, warn=False)
    chapter = latentfs.fit(model, counts, method="vb", theta_update="map", seed=0, max_iter=5, warn=False,
                           num_ll_draws=0)
    with pytest.raises(DataError, match="theta_update='full' needs the Dirichlet parameters of q"):
        latentfs.fit(model, counts, method="vb", theta_update="full", init=chapter, max_iter=5, warn=False)


# ------------------------------------------------------------------------------------------ item 10


def _duplicates_that_overflow(X: np.ndarray, dtype: type) -> sp.coo_matrix:
    rows, cols = np.nonzero(X)
    extra = [100, 100] if dtype == np.int8 else [200, 100]
    return sp.coo_matrix(
        (np.concatenate([X[rows, cols].astype(dtype), np.array(extra, dtype=dtype)]),
         (np.concatenate([rows, [0, 0]]), np.concatenate([cols, [0, 0]]))),
        shape=X.shape,
    )


@SHORT
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("make", [lambda: latentfs.DCA(3, max_iter=10), lambda: latentfs.PLSAEstimator(3, max_iter=10)],
                         ids=["DCA", "PLSA"])
def test_estimators_sum_small_integer_duplicates_without_wrapping(counts, dtype, make):
    M = _duplicates_that_overflow(counts, dtype)
    wide = M.astype(np.float64).tocsr()  # the duplicates summed in float64: 200 + 100 = 300, 100 + 100 = 200
    assert wide[0, 0] == counts[0, 0] + (300 if dtype == np.uint8 else 200)
    est, ref = make().fit(M), make().fit(wide)
    np.testing.assert_array_equal(est.components_, ref.components_)
    assert est.score(M) == ref.score(wide)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_compressed_matrices_with_stored_small_integer_duplicates_are_summed_wide(counts, fmt):
    # a compressed matrix built from its arrays keeps duplicate entries until they are summed
    # (indices [0, 0, 1], indptr [0, 2, 3]) is [[200 + 100, 0], [0, 7]] in either orientation
    M = (sp.csr_matrix if fmt == "csr" else sp.csc_matrix)(
        (np.array([200, 100, 7], dtype=np.uint8), np.array([0, 0, 1]), np.array([0, 2, 3])), shape=(2, 2)
    )
    assert not M.has_canonical_format and M.dtype == np.uint8
    assert latentfs.core.data.as_counts(M).csr[0, 0] == 300
    est = latentfs.PLSAEstimator(1, max_iter=5).fit(M)
    np.testing.assert_allclose(est.components_, [[300 / 307, 7 / 307]], rtol=1e-9)


def test_dtype_strings_mean_what_numpy_and_torch_users_write():
    assert check_dtype("float64") is torch.float64 and check_dtype("torch.float32") is torch.float32
    assert check_dtype("f8") is torch.float64 and check_dtype(np.dtype("<f4")) is torch.float32
    assert check_dtype("double") is torch.float64
    # "float" is float64 to numpy and float32 to torch: refused rather than guessed
    with pytest.raises(DataError, match=r"dtype 'float' is ambiguous: numpy reads it as float64, torch as float32"):
        check_dtype("float")
    with pytest.raises(DataError, match="dtype must be torch.float64 or torch.float32; got 'float16'"):
        check_dtype("float16")


def test_a_dtype_string_gives_the_result_of_the_torch_dtype(counts):
    a = latentfs.fit(latentfs.DirichletDCA(3), counts, method="vb", seed=0, max_iter=10, warn=False, dtype="float32",
                     num_ll_draws=0)
    b = latentfs.fit(latentfs.DirichletDCA(3), counts, method="vb", seed=0, max_iter=10, warn=False,
                     dtype=torch.float32, num_ll_draws=0)
    np.testing.assert_array_equal(a.mean("topic_word"), b.mean("topic_word"))


def test_num_ll_draws_zero_skips_the_pointwise_log_likelihood_as_documented(counts):
    assert "``num_ll_draws=0`` skips the pointwise log-likelihood" in check_options.__doc__
    post = latentfs.fit(latentfs.DirichletDCA(3), counts, method="vb", seed=0, max_iter=10, warn=False, num_ll_draws=0)
    assert post.log_likelihood is None
    assert "log_likelihood" not in post.to_inference_data(num_draws=5).groups()
    with pytest.raises(DataError, match="num_ll_draws must be an integer ≥ 0; got -1"):
        latentfs.fit(latentfs.DirichletDCA(3), counts, method="vb", num_ll_draws=-1)


@pytest.mark.parametrize("method", ["vb", "map", "gibbs", "collapsed_gibbs", "online_vb"])
def test_a_fit_whose_parameters_cannot_fit_in_memory_is_refused_with_the_estimate(method):
    n_features = 2_000_000
    rng = np.random.default_rng(0)
    X = sp.csr_matrix((np.ones(600), (np.repeat(np.arange(30), 20), rng.integers(0, n_features, 600))),
                      shape=(30, n_features))
    with pytest.raises(DataError, match=r"n_components=1000000 × 2000000 features needs about [\d.]+ TiB .*"
                                        r"available.*Choose fewer components"):
        latentfs.fit(latentfs.DirichletDCA(10**6), X, method=method, seed=0)
