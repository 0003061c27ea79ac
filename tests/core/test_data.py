"""Input validation (latentfs.core.data): every error message is tested with match=."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

import latentfs
from latentfs.core.data import (
    DataError,
    DataWarning,
    as_continuous,
    as_counts,
    as_labels,
    check_n_components,
    check_positive,
)

GOOD = np.array([[1, 0, 2], [0, 3, 1]])


@pytest.mark.parametrize(
    "make",
    [np.asarray, sp.csr_matrix, sp.coo_matrix, torch.as_tensor, lambda x: pd.DataFrame(x, columns=["a", "b", "c"])],
    ids=["numpy", "csr", "coo", "torch", "pandas"],
)
def test_counts_accepts_every_container_with_the_same_result(make):
    counts = as_counts(make(GOOD))
    assert counts.shape == (2, 3)
    assert counts.csr.toarray().tolist() == GOOD.astype(float).tolist()
    assert counts.n_tokens == 7


def test_counts_keeps_dataframe_names():
    df = pd.DataFrame(GOOD, columns=["cat", "hat", "bat"], index=["d1", "d2"])
    counts = as_counts(df)
    assert counts.feature_names == ("cat", "hat", "bat")
    assert counts.document_names == ("d1", "d2")


def test_torch_sparse_input_is_accepted():
    counts = as_counts(torch.as_tensor(GOOD, dtype=torch.float64).to_sparse_csr())
    assert counts.n_tokens == 7


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.array([[1, -2]]), r"non-negative integer counts; row 0 column 1 holds -2"),
        (np.array([[1.5, 0]]), r"row 0 column 0 holds 1.5\. Pass raw counts \(not tf-idf"),
        (np.array([[1, np.nan]]), r"finite counts; row 0 column 1 holds nan"),
        (np.array([[1, np.inf]]), r"finite counts; row 0 column 1 holds inf"),
        (sp.csr_matrix(np.array([[0, 0], [0, -1.0]])), r"row 1 column 1 holds -1"),
        (np.array([1, 2, 3]), r"must be 2-D \(rows × features\); got 1-D"),
        (np.zeros((0, 3)), r"X is empty: shape \(0, 3\)"),
        (np.zeros((2, 3)), r"holds no counts at all"),
        (np.array([["a", "b"]], dtype=object), r"must be numeric; got an array of dtype object"),
        ("counts.csv", r"must be a 2-D array .* got str"),
        (pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}), r"must hold numbers only"),
    ],
)
def test_counts_rejects_bad_input_with_a_clear_message(bad, match):
    with pytest.raises(DataError, match=match):
        as_counts(bad)


def test_empty_documents_error_by_default_and_drop_on_request():
    X = np.array([[1, 0], [0, 0], [2, 1]])
    with pytest.raises(DataError, match=r"1 document\(s\) with no counts \(rows 1\).*empty_documents='drop'.*'keep'"):
        as_counts(X)
    with pytest.warns(DataWarning, match=r"dropped 1 empty document\(s\) of X \(rows 1\)"):
        counts = as_counts(X, empty_documents="drop")
    assert counts.kept_documents.tolist() == [0, 2]
    assert counts.document_names == ("doc0", "doc2")
    assert as_counts(X, empty_documents="keep").n_documents == 3
    with pytest.raises(DataError, match=r"empty_documents must be one of \['error', 'drop', 'keep'\]; got 'skip'"):
        as_counts(X, empty_documents="skip")


def test_empty_features_are_kept():
    counts = as_counts(np.array([[1, 0, 2], [3, 0, 1]]))
    assert counts.n_features == 3


def test_names_must_match_the_shape():
    with pytest.raises(DataError, match=r"feature_names must have one name per column: got 2 names for 3"):
        as_counts(GOOD, feature_names=["a", "b"])


@pytest.mark.parametrize(
    "k, match",
    [
        (0, r"n_components must be at least 1; got 0"),
        (2.5, r"n_components must be a positive integer; got 2.5"),
        (True, r"n_components must be a positive integer; got True"),
        (10, r"n_components must be at most 3 \(the number of features.*got 10\. Choose fewer"),
    ],
)
def test_n_components_is_checked_against_the_data(k, match):
    with pytest.raises(DataError, match=match):
        if isinstance(k, int) and not isinstance(k, bool) and k > 3:
            latentfs.fit(latentfs.DirichletDCA(k), GOOD, method="vb")
        else:
            check_n_components(k, 3)


def test_model_hyperparameters_are_validated():
    with pytest.raises(DataError, match=r"alpha must be finite and positive; got -1"):
        latentfs.DirichletDCA(2, alpha=-1.0)
    with pytest.raises(DataError, match=r"alpha must be a scalar or have shape \(2,\); got shape \(3,\)"):
        latentfs.DirichletDCA(2, alpha=[1.0, 1.0, 1.0])
    with pytest.raises(DataError, match=r"gamma must have one entry per feature \(3\); got 2"):
        latentfs.fit(latentfs.DirichletDCA(2, gamma=[0.5, 0.5]), GOOD, method="vb")
    with pytest.raises(DataError, match=r"beta must be finite and positive; got 0"):
        latentfs.GammaPoissonDCA(2, beta=0.0)
    with pytest.raises(DataError, match=r"must be a positive number or array; got 'x'"):
        check_positive("x", "alpha")


def test_continuous_missing_rules():
    X = np.array([[1.0, np.nan], [2.0, 3.0], [4.0, 1.0]])
    with pytest.raises(DataError, match=r"must not contain NaN for this method; row 0 column 1 is NaN\. Impute"):
        as_continuous(X)
    assert np.isnan(as_continuous(X, missing="allow").values[0, 1])
    with pytest.raises(DataError, match=r"rows that are entirely missing \(rows \[0\]\)"):
        as_continuous(np.array([[np.nan, np.nan], [1.0, 2.0]]), missing="allow")
    with pytest.raises(DataError, match=r"columns that are entirely missing \(columns \[1\]\)"):
        as_continuous(np.array([[1.0, np.nan], [1.0, np.nan]]), missing="allow")
    with pytest.raises(DataError, match=r"must be finite; row 0 column 0 holds inf"):
        as_continuous(np.array([[np.inf, 1.0]]))
    with pytest.raises(DataError, match=r"1 constant \(zero-variance\) column\(s\) \(columns \[0\]\)"):
        as_continuous(np.array([[1.0, 2.0], [1.0, 3.0]]), allow_constant=False)
    with pytest.raises(DataError, match=r"needs at least 3 rows for this method; got 2"):
        as_continuous(np.ones((2, 2)), min_samples=3)


def test_labels_rules():
    codes, classes = as_labels(["b", "a", "b"], 3)
    assert codes.tolist() == [1, 0, 1] and classes.tolist() == ["a", "b"]
    with pytest.raises(DataError, match=r"at least 2 classes for a supervised method; got 1"):
        as_labels([1, 1, 1], 3)
    with pytest.raises(DataError, match=r"one label per sample: got 2 labels for 3 samples"):
        as_labels([1, 2], 3)
    with pytest.raises(DataError, match=r"y must not contain NaN; sample 1 is NaN"):
        as_labels([1.0, np.nan, 2.0], 3)


def test_counts_beyond_exact_float_integers_are_refused():
    import numpy as np
    import pytest

    from latentfs.core.data import DataError, as_counts

    X = np.ones((2, 3))
    X[1, 2] = 1e300
    with pytest.raises(DataError, match=r"counts below 2\*\*53.*row 1 column 2 holds 1e\+300"):
        as_counts(X)
    big = np.array([[np.iinfo(np.int64).max, 1]], dtype=np.int64)
    with pytest.raises(DataError, match=r"counts below 2\*\*53"):
        as_counts(big)
