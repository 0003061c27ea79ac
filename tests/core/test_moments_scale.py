"""Continuous data at the ends of float64 (issue 31, item 11's campaign: factor analysis on data × 1e-200 crashed
with numpy's "LinAlgError: Eigenvalues did not converge"): a column whose squares underflow is refused with the
column and the remedy, as one whose squares overflow already was; data a few orders inside the limits still fit."""

from __future__ import annotations

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.core.options import check_moments
from latentfs.testing import tiny_data, tiny_model

X, _ = tiny_data(tiny_model(latentfs.FactorAnalysis))


@pytest.mark.parametrize("method", ["em", "map"])
def test_factor_analysis_of_underflowing_data_is_refused(method):
    with pytest.raises(DataError, match=r"too small for float64 arithmetic: its squares underflow \(column 0's "
                                        r"largest \|X\| is 3.45e-200, below 1e-150\)\. Rescale X"):
        latentfs.fit(latentfs.FactorAnalysis(1), X * 1e-200, method=method, progress=False)


def test_data_inside_the_limits_fit_as_the_scaled_fit():
    small = latentfs.fit(latentfs.FactorAnalysis(1), X * 1e-140, method="em", progress=False, warn=False)
    plain = latentfs.fit(latentfs.FactorAnalysis(1), X, method="em", progress=False, warn=False)
    np.testing.assert_allclose(np.abs(small.mean("loadings")) * 1e140, np.abs(plain.mean("loadings")), rtol=1e-6)


def test_one_tiny_column_among_others_and_missing_entries():
    Y = X.copy()
    Y[:, 2] *= 1e-180
    Y[3, 1] = np.nan
    with pytest.raises(DataError, match="column 2's largest"):
        check_moments(Y)
    check_moments(np.column_stack([X, np.zeros(len(X))]))  # a constant zero column is not an underflow
    Y[:, 2] = np.nan  # a column with nothing finite is not checked here
    check_moments(Y)
