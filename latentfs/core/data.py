"""Input conversion and validation: data enters latentfs here, once.

Every public ``fit`` converts its input with one of the functions below. They accept dense numpy arrays,
``scipy.sparse`` matrices, torch tensors and pandas DataFrames (keeping the row and column names), and
raise :class:`DataError` with a message that names the argument, the rule, the offending value and a
remedy.

Count input (:func:`as_counts`) must be non-negative integers with no NaN. Documents (rows) with no
counts are an error by default; ``empty_documents="drop"`` drops them with a :class:`DataWarning`
and records which rows were dropped. Features (columns) that never occur are kept: in the DCA models
they only receive prior mass, and keeping them keeps the vocabulary aligned with the caller's.

Continuous input (:func:`as_continuous`) says what NaN means: an error (``missing="error"``) or a missing
value (``missing="allow"``), for models that handle missing data.

Containers are checked before their values (:func:`as_array`): masked arrays are refused unless NaN means
"missing" for the caller (then the mask becomes NaN), ``datetime64``/``timedelta64`` data, ragged nested
lists and torch ``meta`` tensors are refused, and sparse matrices of small integer dtypes are upcast before
duplicate entries are summed (a ``uint8`` 200 + 100 is 300, not 44). A pandas DataFrame of sparse columns
stays sparse.

Names: ``feature_names=`` and ``document_names=`` (``sample_names=``) work with every container and
override a DataFrame's labels; names must be unique. A :class:`CountMatrix` or :class:`ContinuousMatrix`
passed back in keeps its names, so ``latentfs.fit(model, as_counts(X, feature_names=vocab))`` carries a
vocabulary into any engine that validates with :func:`as_counts`.

Options are checked by one set of functions with one style of message, in :mod:`latentfs.core.options`
(re-exported here): :func:`check_int`, :func:`check_float`, :func:`check_seed`, :func:`check_dtype`,
:func:`check_device`, :func:`check_level` and :func:`check_choice`. :class:`DataError` and
:class:`DataWarning` live in :mod:`latentfs.core.errors` (re-exported here).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from latentfs.core.containers import (  # noqa: F401
    _TIME_KINDS,
    _check_unique,
    _dataarray_labels,
    _from_dataframe,
    _from_torch,
    _generated_names,
    _is_dataarray,
    _is_dataframe,
    _masked_error,
    _time_error,
)
from latentfs.core.errors import DataError, DataWarning
from latentfs.core.options import (
    as_rng,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_level,
    check_n_components,
    check_positive,
    check_seed,
)

__all__ = [
    "CountMatrix",
    "ContinuousMatrix",
    "DataError",
    "DataWarning",
    "as_array",
    "as_counts",
    "as_continuous",
    "as_labels",
    "as_rng",
    "check_choice",
    "check_device",
    "check_dtype",
    "check_float",
    "check_int",
    "check_level",
    "check_n_components",
    "check_positive",
    "check_seed",
]


@dataclass(frozen=True)
class CountMatrix:
    """A validated documents × features count matrix.

    Attributes
    ----------
    csr : scipy.sparse.csr_matrix of float64, shape (n_documents, n_features)
        The counts (integer-valued), rows are documents, with sorted indices and no explicit zeros.
    document_names, feature_names : tuple of str
        Row and column labels, taken from a DataFrame or generated as ``"doc0"…``, ``"w0"…``.
    kept_documents : ndarray of int
        For each row of ``csr``, its row index in the caller's input (differs when rows were dropped).
    """

    csr: sp.csr_matrix
    document_names: tuple[str, ...]
    feature_names: tuple[str, ...]
    kept_documents: np.ndarray = field(repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        return self.csr.shape  # type: ignore[return-value]

    @property
    def n_documents(self) -> int:
        return int(self.csr.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.csr.shape[1])

    @property
    def n_tokens(self) -> int:
        return int(self.csr.sum())

    @property
    def doc_lengths(self) -> np.ndarray:
        return np.asarray(self.csr.sum(axis=1)).ravel()

    def coo_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(document index, feature index, count) of each non-zero, row-major."""
        coo = self.csr.tocoo()
        return coo.row.astype(np.int64), coo.col.astype(np.int64), coo.data


@dataclass(frozen=True)
class ContinuousMatrix:
    """A validated samples × features float64 matrix; NaN marks a missing value where allowed."""

    values: np.ndarray
    sample_names: tuple[str, ...]
    feature_names: tuple[str, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape  # type: ignore[return-value]

    @property
    def missing(self) -> np.ndarray:
        return np.isnan(self.values)


def _names_from(
    obj: Any, axis: int, n: int, prefix: str, given: Sequence[str] | None, what: str | None = None
) -> tuple:
    """Row (axis 0) or column (axis 1) names: ``given``, else a DataFrame's / validated matrix's labels, else
    generated ``prefix0, prefix1, …``. Names are strings and must be unique."""
    unit = "column" if axis else "row"
    if what is None:
        what = "feature_names" if axis == 1 else "document_names"
    if given is not None:
        if isinstance(given, (str, bytes)):
            raise DataError(
                f"{what} must be a sequence of names, one per {unit}; got the single string {given!r}. "
                f"Pass a list, e.g. {what}=['a', 'b', …]."
            )
        given = tuple(str(g) for g in given)
        if len(given) != n:
            raise DataError(
                f"{what} must have one name per {unit}: got {len(given)} "
                f"names for {n} {unit}s. Pass exactly {n} names."
            )
        _check_unique(given, what, f"{unit}s", "Rename the duplicates (e.g. append a suffix) or merge those "
                      f"{unit}s before fitting.")
        return given
    if isinstance(obj, (CountMatrix, ContinuousMatrix)):
        if axis == 1:
            return obj.feature_names
        return obj.document_names if isinstance(obj, CountMatrix) else obj.sample_names
    if _is_dataarray(obj) and obj.ndim == 2 and (labels := _dataarray_labels(obj, axis)) is not None:
        _check_unique(labels, f"the DataArray's {obj.dims[axis]!r} coordinate", f"{unit}s",
                      "Make the coordinate's labels unique, or pass plain values (X.values) with names.")
        return labels
    if _is_dataframe(obj):
        labels = tuple(str(v) for v in (obj.columns if axis == 1 else obj.index))
        remedy = (
            "Rename the duplicate columns, or merge them first: df.T.groupby(level=0).sum().T adds columns of "
            "the same name." if axis == 1 else "Make the index unique, e.g. df.reset_index(drop=True)."
        )
        _check_unique(labels, f"the DataFrame's {'column names' if axis == 1 else 'index labels'}",
                      f"{unit}s", remedy)
        return labels
    return _generated_names(prefix, n)


def _is_dask(X: Any) -> bool:
    from latentfs.core.shards import is_dask_array

    return is_dask_array(X)


def _to_array_or_sparse(X: Any, name: str, *, masked: str = "error") -> np.ndarray | sp.csr_matrix:
    """Turn any supported container into a 2-D numpy array or float64 CSR matrix (no validation of values).

    ``masked="nan"`` turns masked entries into NaN (for callers where NaN means missing); otherwise a masked
    array with any masked entry is refused."""
    if isinstance(X, CountMatrix):
        return X.csr
    if isinstance(X, ContinuousMatrix):
        return X.values
    if _is_dask(X):
        from latentfs.core.registry import dask_engines  # the engines declare it (EngineSpec.takes_dask)

        raise DataError(
            f"{name} is a dask array, but this call works in memory and would gather every chunk into this "
            f"process. The engines that fit a dask array shard by shard are {dask_engines()}; with another "
            f"method pass {name}.compute() if it fits in memory, and for new data apply the fitted estimator "
            f"chunk by chunk ({name}.map_blocks(...))."
        )
    if sp.issparse(X):
        if X.dtype.kind in _TIME_KINDS:
            raise _time_error(name, X.dtype)
        if X.dtype.kind in "biuf":
            # upcast before any format change: converting COO with duplicates to CSR sums them in the
            # matrix's own dtype, and uint8 200 + 100 wraps to 44
            X = X.astype(np.float64)
        return sp.csr_matrix(X)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a runtime dependency
        torch = None  # type: ignore[assignment]
    if torch is not None and isinstance(X, torch.Tensor):
        return _from_torch(X, name)
    if _is_dataframe(X) and hasattr(X, "to_numpy"):  # pandas DataFrame
        return _from_dataframe(X, name)
    if _is_dataarray(X):  # xarray DataArray: its values; its coordinates name rows and columns (_names_from)
        if X.ndim != 2:
            raise DataError(f"{name} must be a 2-D DataArray (documents or samples × features); got dims {X.dims}. "
                            f"Select or stack dimensions first, e.g. {name}.stack(feature=[...]).")
        X = X.values
    if isinstance(X, (str, bytes)) or X is None:
        raise DataError(
            f"{name} must be a 2-D array (numpy, scipy.sparse, torch or pandas); got "
            f"{type(X).__name__}. Load the data into an array first."
        )
    if isinstance(X, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(X)
        if mask.any():
            if masked != "nan":
                raise _masked_error(name, mask)
            return np.ma.filled(X.astype(np.float64), np.nan)
        return np.asarray(X.data)
    try:
        arr = np.asarray(X)
    except (ValueError, TypeError):
        lengths = _row_lengths(X)
        detail = f" (row lengths include {lengths})" if lengths else ""
        raise DataError(
            f"{name} must be a rectangular 2-D array; its rows have different lengths{detail}. "
            "Pad the short rows (e.g. with 0) or build a scipy.sparse matrix."
        ) from None
    if arr.dtype.kind in _TIME_KINDS:
        raise _time_error(name, arr.dtype)
    return arr


def _row_lengths(X: Any) -> list[int]:
    try:
        return sorted({len(row) for row in X})[:4]
    except TypeError:
        return []


def as_array(X: Any, *, name: str = "X", masked: Literal["error", "nan"] = "error") -> np.ndarray | sp.csr_matrix:
    """Convert any supported container to a numpy array or a float64 CSR matrix, checking the container.

    This is the container layer of :func:`as_counts` and :func:`as_continuous`, public for entry points
    that validate values themselves. It refuses masked arrays with masked entries (``masked="nan"`` turns
    them into NaN instead), ``datetime64``/``timedelta64`` data, ragged nested lists and torch ``meta``
    tensors; sparse input of any integer dtype is upcast to float64 before duplicates are summed; a pandas
    DataFrame of sparse columns stays sparse.

    Parameters
    ----------
    X : array-like, scipy.sparse matrix, torch.Tensor, pandas.DataFrame, CountMatrix or ContinuousMatrix
    name : str
        The argument's name, used in error messages.
    masked : {"error", "nan"}
        What a masked entry becomes: an error (default) or NaN.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> m = sp.coo_matrix((np.array([200, 100], dtype=np.uint8), ([0, 0], [0, 0])), shape=(1, 1))
    >>> float(as_array(m)[0, 0])
    300.0
    >>> as_array(np.array(["2020-01-01"], dtype="datetime64[D]"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latentfs.core.data.DataError: X must hold numbers, not dates or durations; got dtype datetime64[D]. ...
    """
    check_choice("masked", masked, ("error", "nan"))
    return _to_array_or_sparse(X, name, masked=masked)


def _check_numeric_array(arr: np.ndarray, name: str) -> np.ndarray:
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise DataError(
            f"{name} must be numeric; got an array of dtype {arr.dtype}. Convert it with "
            f"np.asarray({name}, dtype=float) after removing non-numeric entries."
        )
    if arr.dtype.kind == "c":
        raise DataError(f"{name} must be real-valued; got complex dtype {arr.dtype}. Pass the real part.")
    if arr.ndim != 2:
        raise DataError(
            f"{name} must be 2-D (rows × features); got {arr.ndim}-D with shape {arr.shape}. "
            "Reshape it, e.g. X.reshape(1, -1) for a single row."
        )
    return arr.astype(np.float64, copy=False)


# Counts are stored as float64: beyond 2**53 integers are no longer exact (and token expansion is absurd).
_MAX_EXACT_COUNT = 2.0**53


def _first_bad(mask_rows: np.ndarray, mask_cols: np.ndarray, values: np.ndarray) -> str:
    return f"row {int(mask_rows[0])} column {int(mask_cols[0])} holds {float(values[0]):g}"


def as_counts(
    X: Any,
    *,
    name: str = "X",
    empty_documents: Literal["error", "drop", "keep"] = "error",
    document_names: Sequence[str] | None = None,
    feature_names: Sequence[str] | None = None,
) -> CountMatrix:
    """Validate a documents × features count matrix.

    Parameters
    ----------
    X : array-like, scipy.sparse matrix, torch.Tensor, pandas.DataFrame or CountMatrix, shape (n_documents, n_features)
        Non-negative integer counts. A DataFrame of sparse columns stays sparse; a :class:`CountMatrix` keeps
        its names (and its ``kept_documents`` map) unless new names are given. Containers are checked as in
        :func:`as_array` (masked arrays, dates, ragged lists and meta tensors are refused).
    name : str
        The argument's name, used in error messages.
    empty_documents : {"error", "drop", "keep"}
        What to do with rows that hold no counts: raise (default), drop them with a
        :class:`DataWarning` (``CountMatrix.kept_documents`` says which rows remain), or keep them
        (in GammaPoissonDCA an empty document is evidence of small scores; in DirichletDCA it only
        gets its prior).
    document_names, feature_names : sequence of str, optional
        Labels, with any container; by default taken from a DataFrame's index/columns (or a CountMatrix)
        or generated (``doc0…``, ``w0…``). Names must be unique.

    Examples
    --------
    >>> import numpy as np
    >>> counts = as_counts(np.array([[1, 0, 2], [0, 3, 0]]))
    >>> counts.shape, counts.n_tokens
    ((2, 3), 6)
    >>> import scipy.sparse as sp
    >>> as_counts(sp.csr_matrix([[1, 0, 2]]), feature_names=["cat", "hat", "bat"]).feature_names
    ('cat', 'hat', 'bat')
    >>> as_counts(np.array([[1.5, 0.0]]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latentfs.core.data.DataError: X must hold non-negative integer counts; row 0 column 0 holds 1.5. ...
    """
    check_choice("empty_documents", empty_documents, ("error", "drop", "keep"))
    raw = _to_array_or_sparse(X, name)
    if sp.issparse(raw):
        csr = raw.astype(np.float64) if raw.dtype.kind in "biuf" else None
        if csr is None:
            raise DataError(
                f"{name} must be numeric; got a sparse matrix of dtype {raw.dtype}. "
                "Convert it with X.astype(float)."
            )
        csr = sp.csr_matrix(csr, copy=isinstance(X, CountMatrix))
        csr.sum_duplicates()
        vals = csr.data
        coo_rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
        coo_cols = csr.indices
    else:
        arr = _check_numeric_array(raw, name)
        csr = None
        vals = arr.ravel()
        coo_rows = coo_cols = None  # type: ignore[assignment]
    shape = csr.shape if csr is not None else raw.shape
    if shape[0] == 0 or shape[1] == 0:
        raise DataError(
            f"{name} is empty: shape {tuple(shape)}. Pass at least one document and one feature."
        )

    def locate(bad: np.ndarray) -> str:
        idx = np.flatnonzero(bad)
        if csr is not None:
            return _first_bad(coo_rows[idx], coo_cols[idx], vals[idx])
        r, c = np.unravel_index(idx[0], shape)
        return f"row {int(r)} column {int(c)} holds {float(vals[idx[0]]):g}"

    bad = ~np.isfinite(vals)
    if bad.any():
        raise DataError(
            f"{name} must hold finite counts; {locate(bad)}. Count models do not accept missing "
            "values: replace NaN/inf with 0 if the cell means 'not observed', or drop that row."
        )
    bad = vals < 0
    if bad.any():
        raise DataError(
            f"{name} must hold non-negative integer counts; {locate(bad)}. Pass raw counts, "
            "not centred or log-transformed values."
        )
    bad = vals != np.round(vals)
    if bad.any():
        raise DataError(
            f"{name} must hold non-negative integer counts; {locate(bad)}. Pass raw counts "
            "(not tf-idf or normalised frequencies), or round them."
        )
    bad = vals >= _MAX_EXACT_COUNT
    if bad.any():
        raise DataError(
            f"{name} must hold counts below 2**53 (the largest integers float64 holds exactly); {locate(bad)}. "
            "Such a count is not a token count: check the file, or rescale and round the rows if they are weights."
        )
    if csr is None:
        csr = sp.csr_matrix(raw.astype(np.float64))
    csr.eliminate_zeros()
    csr.sort_indices()
    if csr.nnz == 0 and empty_documents != "keep":
        raise DataError(f"{name} holds no counts at all (every entry is 0). Pass a non-empty corpus.")

    doc_names = _names_from(X, 0, csr.shape[0], "doc", document_names)
    feat_names = _names_from(X, 1, csr.shape[1], "w", feature_names)
    lengths = np.diff(csr.indptr)
    empty = np.flatnonzero(lengths == 0)
    kept = X.kept_documents if isinstance(X, CountMatrix) else np.arange(csr.shape[0])
    if empty.size and empty_documents != "keep":
        shown = ", ".join(str(i) for i in empty[:5]) + (" …" if empty.size > 5 else "")
        if empty_documents == "error":
            raise DataError(
                f"{name} has {empty.size} document(s) with no counts (rows {shown}). Remove them, pass "
                "empty_documents='drop' to drop them with a warning, or 'keep' to model them."
            )
        warnings.warn(
            f"dropped {empty.size} empty document(s) of {name} (rows {shown}); "
            "CountMatrix.kept_documents maps the remaining rows to the input.",
            DataWarning,
            stacklevel=2,
        )
        rows = np.flatnonzero(lengths > 0)
        csr = csr[rows]
        doc_names = tuple(doc_names[i] for i in rows)
        kept = kept[rows]
    return CountMatrix(csr=csr, document_names=doc_names, feature_names=feat_names, kept_documents=kept)


def as_continuous(
    X: Any,
    *,
    name: str = "X",
    missing: Literal["error", "allow"] = "error",
    sample_names: Sequence[str] | None = None,
    feature_names: Sequence[str] | None = None,
    min_samples: int = 1,
    allow_constant: bool = True,
    row_shard: bool = False,
) -> ContinuousMatrix:
    """Validate a samples × features real matrix (dense float64 copy).

    ``missing="error"`` rejects NaN; ``missing="allow"`` keeps NaN as 'missing' but rejects rows or
    columns that are entirely missing. Infinite values are always an error. Sparse input is densified
    (use the selectors' sparse paths to avoid that). ``allow_constant=False`` rejects zero-variance
    columns, naming them. A masked array is refused when ``missing="error"``; with ``missing="allow"`` its
    masked entries become NaN (missing). ``sample_names``/``feature_names`` work with any container and
    must be unique; a :class:`ContinuousMatrix` passed in keeps its names. ``row_shard=True`` validates one
    row shard of a larger matrix (a dask chunk, a mini-batch): the column that is entirely missing here may
    be observed in another shard, so that check is left to the caller, who sees every shard.

    Examples
    --------
    >>> as_continuous([[1.0, 2.0], [3.0, 5.0]]).shape
    (2, 2)
    """
    check_choice("missing", missing, ("error", "allow"))
    raw = _to_array_or_sparse(X, name, masked="nan" if missing == "allow" else "error")
    if sp.issparse(raw):
        raw = raw.toarray()  # type: ignore[union-attr]  # issparse does not narrow the type
    arr = np.array(_check_numeric_array(np.asarray(raw), name), dtype=np.float64, copy=True)
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DataError(f"{name} is empty: shape {arr.shape}. Pass at least one row and one feature.")
    if arr.shape[0] < min_samples:
        raise DataError(
            f"{name} needs at least {min_samples} rows for this method; got {arr.shape[0]}. "
            "Pass more samples."
        )
    inf = np.isinf(arr)
    if inf.any():
        r, c = np.argwhere(inf)[0]
        raise DataError(
            f"{name} must be finite; row {r} column {c} holds {arr[r, c]}. Replace infinite values."
        )
    nan = np.isnan(arr)
    if nan.any():
        if missing == "error":
            r, c = np.argwhere(nan)[0]
            raise DataError(
                f"{name} must not contain NaN for this method; row {r} column {c} is NaN. "
                "Impute or drop the missing values, or use a model that handles missing data."
            )
        rows = np.flatnonzero(nan.all(axis=1))
        if rows.size:
            raise DataError(
                f"{name} has rows that are entirely missing (rows {rows[:5].tolist()}). "
                "Drop them: they carry no information."
            )
        cols = np.flatnonzero(nan.all(axis=0)) if not row_shard else np.zeros(0, dtype=np.int64)
        if cols.size:
            raise DataError(
                f"{name} has columns that are entirely missing (columns {cols[:5].tolist()}). "
                "Drop them: they carry no information."
            )
    if not allow_constant and arr.shape[0] > 1:
        spread = np.nanmax(arr, axis=0) - np.nanmin(arr, axis=0)
        const = np.flatnonzero(spread == 0)
        if const.size:
            raise DataError(
                f"{name} has {const.size} constant (zero-variance) column(s) (columns "
                f"{const[:5].tolist()}). Drop them before fitting, e.g. X[:, X.std(axis=0) > 0]."
            )
    return ContinuousMatrix(
        values=arr,
        sample_names=_names_from(X, 0, arr.shape[0], "s", sample_names, "sample_names"),
        feature_names=_names_from(X, 1, arr.shape[1], "x", feature_names),
    )


def as_labels(y: Any, n_samples: int, *, name: str = "y", min_classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Validate class labels: returns (codes 0..C-1, classes). Needs ``min_classes`` distinct labels."""
    arr = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    if arr.ndim != 1:
        raise DataError(f"{name} must be 1-D (one label per sample); got shape {arr.shape}. Flatten it.")
    if arr.shape[0] != n_samples:
        raise DataError(
            f"{name} must have one label per sample: got {arr.shape[0]} labels for {n_samples} samples."
        )
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise DataError(f"{name} must not contain NaN; sample {int(np.flatnonzero(np.isnan(arr))[0])} is NaN.")
    classes, codes = np.unique(arr, return_inverse=True)
    if classes.size < min_classes:
        raise DataError(
            f"{name} must hold at least {min_classes} classes for a supervised method; got "
            f"{classes.size} ({classes.tolist()}). Check the labels."
        )
    return codes.astype(np.int64), classes
