"""The classifiers' ``y`` rule, written once (latentfs.core.estimator.class_labels) and used by HDDA and
DCAClassifier: a missing ``y``, a continuous target and NaN are refused with messages naming the estimator; a
column vector is flattened with scikit-learn's warning. Exact tests: no randomness."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import DataConversionWarning

import latentfs
from latentfs.core.data import DataError
from latentfs.core.estimator import class_labels

X = np.array([[3.0, 0.0, 1.0], [2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 2.0, 2.0], [4.0, 1.0, 0.0], [0.0, 2.0, 3.0]])
CLASSIFIERS = [latentfs.HDDA(), latentfs.DCAClassifier(2, fit_options={"max_iter": 5, "warn": False})]


@pytest.mark.parametrize("clf", CLASSIFIERS, ids=lambda e: type(e).__name__)
def test_missing_y_names_the_classifier(clf):
    name = type(clf).__name__
    with pytest.raises(DataError, match=rf"^{name} needs class labels: call fit\(X, y\) with y \({name} requires y"):
        clf.fit(X, None)


@pytest.mark.parametrize("clf", CLASSIFIERS, ids=lambda e: type(e).__name__)
def test_continuous_target_is_refused_in_scikit_learns_words(clf):
    with pytest.raises(
        DataError, match=rf"Unknown label type: continuous\. y must hold class labels for {type(clf).__name__}"
    ):
        clf.fit(X, np.linspace(0.1, 0.9, X.shape[0]))


def test_hdda_adds_its_remedy_and_nan_is_refused():
    with pytest.raises(DataError, match=r"class labels for HDDA \(a classifier\); use HDDC for clusters"):
        latentfs.HDDA().fit(X, np.linspace(0.1, 0.9, X.shape[0]))
    with pytest.raises(DataError, match="y must hold finite values"):
        class_labels(latentfs.HDDA(), np.array([0.0, np.nan, 1.0]))


def test_a_column_vector_is_flattened_with_a_warning():
    with pytest.warns(DataConversionWarning):
        out = class_labels(latentfs.HDDA(), np.array([["a"], ["b"], ["a"]]))
    assert out.tolist() == ["a", "b", "a"]
    assert class_labels(latentfs.HDDA(), [0, 1, 1]).tolist() == [0, 1, 1]
