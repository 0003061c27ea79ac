"""Hostile containers, dtypes and options at the boundary (issue 19 item 1; names: issue 14 item 2).

Each case either raises a DataError whose message names the argument, the rule, the value and a remedy
(checked with match=), or gives the right result.
"""

import tracemalloc

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

import latentfs
from latentfs.core.data import (
    ContinuousMatrix,
    CountMatrix,
    DataError,
    as_array,
    as_continuous,
    as_counts,
    as_rng,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_level,
    check_seed,
)

GOOD = np.array([[1, 0, 2], [0, 3, 1]])
VOCAB = ["cat", "hat", "bat"]


# --- containers and dtypes -------------------------------------------------------------------------------


def test_masked_array_is_refused_for_counts_not_fitted_as_its_data():
    X = np.ma.masked_array([[1, 99], [2, 3]], mask=[[False, True], [False, False]])
    with pytest.raises(DataError, match=r"X is a masked array with 1 masked entry \(first at index \(0, 1\)\); "
                                        r"latentfs does not drop a mask silently\. Fill .*X\.filled\(0\)"):
        as_counts(X)
    with pytest.raises(DataError, match=r"masked array .*missing='allow'"):
        as_continuous(X.astype(float))


def test_masked_array_becomes_missing_where_missing_values_are_allowed():
    X = np.ma.masked_array([[1.0, 99.0], [2.0, 3.0], [4.0, 5.0]], mask=[[0, 1], [0, 0], [0, 0]])
    values = as_continuous(X, missing="allow").values
    assert np.isnan(values[0, 1]) and values[2, 1] == 5.0


def test_masked_array_without_masked_entries_is_plain_data():
    X = np.ma.masked_array(GOOD, mask=np.zeros_like(GOOD, dtype=bool))
    assert as_counts(X).n_tokens == 7


@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([["2020-01-01", "2020-01-02"]], dtype="datetime64[D]"),
         r"X must hold numbers, not dates or durations; got dtype datetime64\[D\]\. Convert them"),
        (np.array([[1, 2]], dtype="timedelta64[s]"), r"not dates or durations; got dtype timedelta64\[s\]"),
        (pd.DataFrame({"when": pd.to_datetime(["2020-01-01", "2020-01-02"]), "n": [1, 2]}),
         r"not dates or durations; got dtype datetime64\[\w+\] in column 'when'\. .*drop the column"),
        (pd.DataFrame({"dt": pd.to_timedelta([1, 2], unit="s"), "n": [1, 2]}),
         r"not dates or durations; got dtype timedelta64\[\w+\] in column 'dt'"),
    ],
    ids=["datetime64", "timedelta64", "pandas-datetime", "pandas-timedelta"],
)
def test_dates_and_durations_are_refused(X, match):
    with pytest.raises(DataError, match=match):
        as_counts(X)
    with pytest.raises(DataError, match=match):
        as_continuous(X)


def test_ragged_list_is_refused_clearly():
    with pytest.raises(DataError, match=r"X must be a rectangular 2-D array; its rows have different lengths "
                                        r"\(row lengths include \[1, 2\]\).*Pad the short rows"):
        as_counts([[1, 2], [3]])


def test_meta_tensor_is_refused_clearly():
    with pytest.raises(DataError, match=r"X is a torch tensor on the 'meta' device, which holds no values "
                                        r"\(shape \(2, 3\)\)\. Create the tensor on 'cpu'"):
        as_counts(torch.empty(2, 3, device="meta"))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint16])
@pytest.mark.parametrize("fmt", ["coo", "csc", "csr"])
def test_sparse_small_integer_duplicates_are_summed_without_overflow(dtype, fmt):
    # uint8: 200 + 100 read as 44 before; int8: 100 + 100 read as -56 (and a message about negative counts)
    a, b = (100, 100) if np.dtype(dtype).kind == "i" and np.dtype(dtype).itemsize == 1 else (200, 100)
    data, rows, cols = np.array([a, b, 1], dtype=dtype), np.array([0, 0, 1]), np.array([1, 1, 0])
    if fmt == "csr":  # CSR built directly with a repeated column index in row 0
        X = sp.csr_matrix((data, cols, np.array([0, 2, 3])), shape=(2, 2))
    elif fmt == "csc":  # CSC with a repeated row index in column 1
        X = sp.csc_matrix((data[[2, 0, 1]], np.array([1, 0, 0]), np.array([0, 1, 3])), shape=(2, 2))
    else:
        X = sp.coo_matrix((data, (rows, cols)), shape=(2, 2))
    counts = as_counts(X)
    assert counts.csr.toarray().tolist() == [[0.0, float(a + b)], [1.0, 0.0]]


def test_torch_sparse_small_integer_duplicates_are_summed_without_overflow():
    t = torch.sparse_coo_tensor(torch.tensor([[0, 0, 1], [1, 1, 0]]), torch.tensor([200, 100, 1], dtype=torch.uint8),
                                (2, 2))
    assert as_counts(t).csr.toarray().tolist() == [[0.0, 300.0], [1.0, 0.0]]


def test_half_precision_torch_input_is_read():
    assert as_counts(torch.tensor(GOOD, dtype=torch.bfloat16)).n_tokens == 7


def test_pandas_nullable_missing_values_are_reported_as_missing():
    df = pd.DataFrame({"a": pd.array([1, None], dtype="Int64"), "b": [1, 2]})
    with pytest.raises(DataError, match=r"X must hold finite counts; row 1 column 0 holds nan"):
        as_counts(df)


def test_non_numeric_dataframe_columns_are_named():
    df = pd.DataFrame({"a": [1, 2], "label": ["x", "y"]})
    with pytest.raises(DataError, match=r"must hold numbers only; the DataFrame has non-numeric columns \['label'\]"):
        as_counts(df)


def test_as_array_is_the_public_container_layer():
    m = sp.coo_matrix((np.array([200, 100], dtype=np.uint8), ([0, 0], [0, 0])), shape=(1, 1))
    assert as_array(m)[0, 0] == 300.0
    with pytest.raises(DataError, match=r"masked must be one of \['error', 'nan'\]; got 'drop'"):
        as_array(GOOD, masked="drop")


# --- names for any input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [np.asarray, sp.csr_matrix, sp.coo_matrix, torch.as_tensor, lambda x: torch.as_tensor(x).to_sparse(),
     lambda x: pd.DataFrame.sparse.from_spmatrix(sp.csr_matrix(x))],
    ids=["numpy", "csr", "coo", "torch", "torch-sparse", "pandas-sparse"],
)
def test_feature_and_document_names_work_with_every_container(make):
    counts = as_counts(make(GOOD), feature_names=VOCAB, document_names=["d1", "d2"])
    assert counts.feature_names == tuple(VOCAB) and counts.document_names == ("d1", "d2")
    cont = as_continuous(make(GOOD), feature_names=VOCAB, sample_names=["s1", "s2"])
    assert cont.feature_names == tuple(VOCAB) and cont.sample_names == ("s1", "s2")


def test_names_survive_a_second_pass_and_empty_row_dropping():
    X = np.array([[1, 0, 2], [0, 0, 0], [0, 3, 1]])
    first = as_counts(X, feature_names=VOCAB, document_names=["a", "b", "c"], empty_documents="keep")
    assert isinstance(first, CountMatrix)
    with pytest.warns(latentfs.core.data.DataWarning, match=r"dropped 1 empty document"):
        again = as_counts(first, empty_documents="drop")
    assert again.feature_names == tuple(VOCAB) and again.document_names == ("a", "c")
    assert again.kept_documents.tolist() == [0, 2]
    assert again.csr.toarray().tolist() == [[1, 0, 2], [0, 3, 1]]
    cont = as_continuous(X + 0.5, feature_names=VOCAB)
    assert isinstance(cont, ContinuousMatrix) and as_continuous(cont).feature_names == tuple(VOCAB)


def test_a_validated_count_matrix_carries_its_vocabulary_into_a_fit():
    X = latentfs.DirichletDCA(2, alpha=0.5).simulate(20, 6, doc_length=30, seed=0)["counts"]
    vocab = [f"word{j}" for j in range(6)]
    counts = as_counts(sp.csr_matrix(X), feature_names=vocab)
    for method in ("vb", "plsi_em"):
        post = latentfs.fit(latentfs.DirichletDCA(2), counts, method=method, seed=0, max_iter=5, warn=False)
        assert list(post.coords["feature"]) == vocab


@pytest.mark.parametrize(
    "kwargs, X, match",
    [
        ({"feature_names": ["a", "b", "a"]}, GOOD,
         r"feature_names must be unique; 'a' appears 2 times \(columns 0, 2\)\. Rename the duplicates"),
        ({"document_names": ["d", "d"]}, GOOD, r"document_names must be unique; 'd' appears 2 times \(rows 0, 1\)"),
        ({}, pd.DataFrame(GOOD, columns=["a", "b", "a"]),
         r"the DataFrame's column names must be unique; 'a' appears 2 times .*df\.T\.groupby\(level=0\)\.sum\(\)\.T"),
        ({}, pd.DataFrame(GOOD, index=["x", "x"]),
         r"the DataFrame's index labels must be unique; 'x' appears 2 times .*reset_index\(drop=True\)"),
        ({"feature_names": "abc"}, GOOD, r"feature_names must be a sequence of names, one per column; got the single"),
    ],
    ids=["features", "documents", "df-columns", "df-index", "string"],
)
def test_duplicate_or_malformed_names_are_refused_with_the_remedy(kwargs, X, match):
    with pytest.raises(DataError, match=match):
        as_counts(X, **kwargs)


def test_pandas_sparse_dataframe_stays_sparse():
    # 300 × 20,000 at 0.1% density: the dense float64 copy the old code made is 48 MB; the sparse path
    # needs well under 2 MB beyond the input
    csr = sp.random(300, 20_000, density=0.001, format="csr", random_state=0, data_rvs=lambda n: np.ones(n))
    df = pd.DataFrame.sparse.from_spmatrix(csr, columns=[f"w{j}" for j in range(20_000)])
    tracemalloc.start()
    try:
        counts = as_counts(df, empty_documents="keep")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16e6, peak
    assert counts.n_tokens == int(csr.sum()) and counts.feature_names[-1] == "w19999"


def test_sparse_dataframe_with_nonzero_fill_value_is_refused():
    df = pd.DataFrame({"a": pd.arrays.SparseArray([1, 1, 2], fill_value=1)})
    with pytest.raises(DataError, match=r"sparse DataFrame whose fill value is not 0 .*fill_value=0"):
        as_counts(df)


# --- options ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, match",
    [
        (0, r"max_iter must be an integer ≥ 1; got 0\. Pass a value in that range, e.g\. max_iter=1\."),
        (-5, r"max_iter must be an integer ≥ 1; got -5"),
        (1e3, r"max_iter must be an integer ≥ 1; got 1000\.0 \(float\)\. Write 1000 instead\."),
        (True, r"max_iter must be an integer ≥ 1; got True \(bool\)"),
        ("10", r"max_iter must be an integer ≥ 1; got '10' \(str\)"),
    ],
)
def test_check_int(value, match):
    with pytest.raises(DataError, match=match):
        check_int("max_iter", value, low=1)


def test_check_int_accepts_numpy_integers_and_upper_bounds():
    assert check_int("n", np.int32(4), low=1) == 4
    with pytest.raises(DataError, match=r"n must be an integer in \[1, 3\]; got 4"):
        check_int("n", 4, low=1, high=3)


@pytest.mark.parametrize(
    "value, kwargs, match",
    [
        (float("nan"), {}, r"tol must be a number ≥ 0; got nan\. Pass a finite number"),
        (-1e-3, {}, r"tol must be a number ≥ 0; got -0\.001"),
        ("small", {}, r"tol must be a number ≥ 0; got 'small' \(str\)"),
        (0.0, {"low_open": True}, r"tol must be a number > 0; got 0"),
    ],
)
def test_check_float(value, kwargs, match):
    with pytest.raises(DataError, match=match):
        check_float("tol", value, 0, **kwargs)


def test_check_float_accepts_in_range_and_nan_on_request():
    assert check_float("tol", 1e-6, 0) == 1e-6
    assert np.isnan(check_float("x", float("nan"), allow_nan=True))
    with pytest.raises(DataError, match=r"x must be a number; got inf"):
        check_float("x", float("inf"))
    with pytest.raises(DataError, match=r"p must be a number in \[0, 1\]; got 1\.5"):
        check_float("p", 1.5, 0, 1)


@pytest.mark.parametrize(
    "seed, match",
    [
        (1.5, r"seed must be an int ≥ 0, None, a numpy Generator/SeedSequence or a torch\.Generator; got 1\.5 "
              r"\(float\)\. Pass an integer such as seed=0"),
        (-1, r"seed must be an int ≥ 0, .*; got -1\. Pass a non-negative integer, e\.g\. seed=1\."),
        ("abc", r"seed must be an int ≥ 0, .*; got 'abc' \(str\)"),
        (True, r"seed must be an int ≥ 0, .*; got True \(bool\)"),
    ],
)
def test_check_seed_refuses(seed, match):
    with pytest.raises(DataError, match=match):
        check_seed(seed)
    with pytest.raises(DataError, match=match):
        as_rng(seed)


@pytest.mark.parametrize(
    "seed",
    [None, 0, 7, np.int64(3), np.random.default_rng(0), np.random.SeedSequence(1), torch.Generator().manual_seed(2)],
    ids=["None", "0", "7", "np.int64", "Generator", "SeedSequence", "torch.Generator"],
)
def test_check_seed_accepts(seed):
    assert check_seed(seed) is seed or check_seed(seed) == seed
    assert isinstance(as_rng(seed), np.random.Generator)


def test_seed_sequence_gives_a_reproducible_generator():
    assert as_rng(np.random.SeedSequence(5)).integers(1000) == as_rng(np.random.SeedSequence(5)).integers(1000)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float16, torch.bfloat16, torch.complex64, "int32", "half", 3])
def test_check_dtype_refuses(dtype):
    with pytest.raises(DataError, match=r"dtype must be torch\.float64 or torch\.float32; got .*Pass "
                                        r"dtype=torch\.float64 \(the default"):
        check_dtype(dtype)


@pytest.mark.parametrize(
    "dtype, expected",
    [(torch.float32, torch.float32), ("float32", torch.float32), ("torch.float64", torch.float64),
     (np.float64, torch.float64), (np.dtype("float32"), torch.float32)],
)
def test_check_dtype_accepts(dtype, expected):
    assert check_dtype(dtype) is expected


@pytest.mark.parametrize(
    "device, match",
    [
        ("meta", r"device must be a device that holds data; got 'meta' \(shapes only, no values\)\. "
                 r"Pass device='cpu'"),
        ("gpu0", r"device must be a torch device name such as 'cpu', 'cuda' or 'cuda:0'; got 'gpu0'\. "
                 r"Write 'cuda:0'"),
        (0.5, r"device must be a device name such as 'cpu' or 'cuda:0', or a torch\.device; got 0\.5 \(float\)"),
    ],
)
def test_check_device_refuses(device, match):
    with pytest.raises(DataError, match=match):
        check_device(device)


def test_check_device_refuses_cuda_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DataError, match=r"device is 'cuda' but CUDA is not available here .*Pass device='cpu'"):
        check_device("cuda")
    with pytest.raises(DataError, match=r"device is 'cuda:1' but CUDA is not available"):
        check_device(torch.device("cuda:1"))


def test_check_device_accepts_cpu():
    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("cpu")).type == "cpu"


@pytest.mark.parametrize("level", [0, 1, 1.5, 90, -0.1, float("nan"), "0.9", None])
def test_check_level_refuses(level):
    with pytest.raises(DataError, match=r"level must be a number in \(0, 1\); got .*Use e\.g\. 0\.9 for a 90% band"):
        check_level(level)


def test_check_level_accepts():
    assert check_level(0.9) == 0.9 and check_level(np.float32(0.5)) == 0.5


def test_check_choice_is_not_fooled_by_strings_or_arrays():
    assert check_choice("store", "vb", ("vb", "gibbs")) == "vb"
    with pytest.raises(DataError, match=r"store must be one of \['topic_word', 'doc_topic'\]; got 'topic_wrd'\. "
                                        r"Did you mean 'topic_word'\?"):
        check_choice("store", "topic_wrd", ("topic_word", "doc_topic"))
    with pytest.raises(DataError, match=r"method must be one of \['a'\]; got array"):
        check_choice("method", np.array(["a", "a"]), ("a",))
