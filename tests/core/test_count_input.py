"""The count estimators' input rule, written once (latentfs.core.estimator): negative entries are refused with one
message naming the estimator, and ``non_integer="round"`` rounds a copy (a sparse matrix drops the entries that
round to 0). Exact tests: no randomness."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import latentfs
from latentfs.core.data import DataError
from latentfs.core.estimator import check_nonnegative, round_counts
from latentfs.inference.dca.estimator import DCA
from latentfs.inference.plsa.estimator import PLSAEstimator

COUNTS = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 1.0], [2.0, 1.0, 0.0], [1.0, 1.0, 1.0]])


def test_round_counts_rounds_a_copy_and_drops_sparse_zeros():
    X = np.array([[0.4, 1.6], [2.5, 0.0]])
    out = round_counts(X)
    np.testing.assert_array_equal(out, [[0.0, 2.0], [2.0, 0.0]])  # numpy rounds half to even
    assert X[0, 0] == 0.4  # the input is unchanged
    S = sp.csr_matrix(X)
    rounded = round_counts(S)
    assert sp.issparse(rounded) and rounded.nnz == 2  # 0.4 rounds to 0 and is dropped
    np.testing.assert_array_equal(rounded.toarray(), out)
    assert S.nnz == 3


@pytest.mark.parametrize("X", [np.array([[1.0, -2.5]]), sp.csr_matrix(np.array([[1.0, -2.5]]))])
def test_check_nonnegative_names_the_estimator_and_the_smallest_entry(X):
    with pytest.raises(
        DataError, match=r"passed to Mine: X must hold non-negative counts; its smallest entry is -2\.5"
    ):
        check_nonnegative(X, "Mine")
    check_nonnegative(np.zeros((0, 2)), "Mine")  # an empty matrix holds no negative entry


@pytest.mark.parametrize(
    "estimator",
    [
        DCA(2, max_iter=5),
        PLSAEstimator(2, max_iter=5),
        latentfs.PLSATransformer(2, max_iter=5),
        latentfs.DCAFeatures(latentfs.DirichletDCA(2), fit_options={"max_iter": 5, "warn": False}),
    ],
    ids=lambda e: type(e).__name__,
)
def test_every_count_estimator_gives_the_one_message(estimator):
    with pytest.raises(
        DataError,
        match=rf"^Negative values in data passed to {type(estimator).__name__}: X must hold "
        r"non-negative counts; its smallest entry is -1\. Pass raw counts",
    ):
        estimator.fit(COUNTS - 1)


@pytest.mark.parametrize(
    "make",
    [
        lambda: DCA(2, max_iter=5, tol=1.0, non_integer="round"),
        lambda: latentfs.PLSATransformer(2, max_iter=5, non_integer="round"),
        lambda: latentfs.DCAFeatures(
            latentfs.DirichletDCA(2), fit_options={"max_iter": 5, "warn": False}, non_integer="round"
        ),
    ],
)
def test_rounding_opt_in_equals_rounding_first(make):
    noisy = COUNTS + np.where(COUNTS > 0, np.array([0.3, -0.2, 0.1]), 0.2)  # every entry rounds back to COUNTS
    np.testing.assert_array_equal(make().fit(noisy).transform(noisy), make().fit(COUNTS).transform(COUNTS))
