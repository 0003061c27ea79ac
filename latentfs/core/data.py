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
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

__all__ = [
    "CountMatrix",
    "ContinuousMatrix",
    "DataError",
    "DataWarning",
    "as_counts",
    "as_continuous",
    "as_labels",
    "as_rng",
    "check_n_components",
    "check_positive",
]


class DataError(ValueError):
    """Input that latentfs cannot use; the message says which argument, why, and what to do."""


class DataWarning(UserWarning):
    """Input that latentfs changed on the way in (for example, empty documents dropped)."""


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


def _names_from(obj: Any, axis: int, n: int, prefix: str, given: Sequence[str] | None) -> tuple:
    if given is not None:
        given = tuple(str(g) for g in given)
        if len(given) != n:
            what = "feature_names" if axis == 1 else "document_names"
            raise DataError(
                f"{what} must have one name per {'column' if axis else 'row'}: got {len(given)} "
                f"names for {n} {'columns' if axis else 'rows'}. Pass exactly {n} names."
            )
        return given
    if hasattr(obj, "columns") and hasattr(obj, "index") and hasattr(obj, "iloc"):  # DataFrame
        return tuple(str(v) for v in (obj.columns if axis == 1 else obj.index))
    return tuple(f"{prefix}{i}" for i in range(n))


def _to_array_or_sparse(X: Any, name: str) -> np.ndarray | sp.csr_matrix:
    """Turn any supported container into a 2-D numpy array or CSR matrix (no validation of values)."""
    if sp.issparse(X):
        return sp.csr_matrix(X)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a runtime dependency
        torch = None  # type: ignore[assignment]
    if torch is not None and isinstance(X, torch.Tensor):
        if X.layout != torch.strided:
            X = X.to_dense()
        return X.detach().cpu().numpy()
    if hasattr(X, "to_numpy") and hasattr(X, "columns"):  # pandas DataFrame
        try:
            return X.to_numpy(dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataError(
                f"{name} must hold numbers only; the DataFrame has non-numeric columns "
                f"({exc}). Drop or encode the non-numeric columns first."
            ) from None
    if isinstance(X, (str, bytes)) or X is None:
        raise DataError(
            f"{name} must be a 2-D array (numpy, scipy.sparse, torch or pandas); got "
            f"{type(X).__name__}. Load the data into an array first."
        )
    arr = np.asarray(X)
    return arr


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
    X : array-like, scipy.sparse matrix, torch.Tensor or pandas.DataFrame, shape (n_documents, n_features)
        Non-negative integer counts.
    name : str
        The argument's name, used in error messages.
    empty_documents : {"error", "drop", "keep"}
        What to do with rows that hold no counts: raise (default), drop them with a
        :class:`DataWarning` (``CountMatrix.kept_documents`` says which rows remain), or keep them
        (in GammaPoissonDCA an empty document is evidence of small scores; in DirichletDCA it only
        gets its prior).
    document_names, feature_names : sequence of str, optional
        Labels; by default taken from a DataFrame's index/columns or generated.

    Examples
    --------
    >>> import numpy as np
    >>> counts = as_counts(np.array([[1, 0, 2], [0, 3, 0]]))
    >>> counts.shape, counts.n_tokens
    ((2, 3), 6)
    >>> as_counts(np.array([[1.5, 0.0]]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latentfs.core.data.DataError: X must hold non-negative integer counts; row 0 column 0 holds 1.5. ...
    """
    if empty_documents not in ("error", "drop", "keep"):
        raise DataError(f"empty_documents must be 'error', 'drop' or 'keep'; got {empty_documents!r}.")
    raw = _to_array_or_sparse(X, name)
    if sp.issparse(raw):
        csr = raw.astype(np.float64) if raw.dtype.kind in "biuf" else None
        if csr is None:
            raise DataError(
                f"{name} must be numeric; got a sparse matrix of dtype {raw.dtype}. "
                "Convert it with X.astype(float)."
            )
        csr = sp.csr_matrix(csr)
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
    kept = np.arange(csr.shape[0])
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
        kept = np.flatnonzero(lengths > 0)
        csr = csr[kept]
        doc_names = tuple(doc_names[i] for i in kept)
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
) -> ContinuousMatrix:
    """Validate a samples × features real matrix (dense float64 copy).

    ``missing="error"`` rejects NaN; ``missing="allow"`` keeps NaN as 'missing' but rejects rows or
    columns that are entirely missing. Infinite values are always an error. Sparse input is densified
    (use the selectors' sparse paths to avoid that). ``allow_constant=False`` rejects zero-variance
    columns, naming them.

    Examples
    --------
    >>> as_continuous([[1.0, 2.0], [3.0, 5.0]]).shape
    (2, 2)
    """
    if missing not in ("error", "allow"):
        raise DataError(f"missing must be 'error' or 'allow'; got {missing!r}.")
    raw = _to_array_or_sparse(X, name)
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
        cols = np.flatnonzero(nan.all(axis=0))
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
        sample_names=_names_from(X, 0, arr.shape[0], "s", sample_names),
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


def check_n_components(n_components: Any, max_allowed: int, *, name: str = "n_components", what: str = "") -> int:
    """``n_components`` must be an integer in [1, max_allowed]; ``what`` explains the upper limit."""
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
        raise DataError(f"{name} must be a positive integer; got {n_components!r}.")
    if n_components < 1:
        raise DataError(f"{name} must be at least 1; got {n_components}. Pass a positive number of components.")
    if n_components > max_allowed:
        raise DataError(
            f"{name} must be at most {max_allowed}{' (' + what + ')' if what else ''}; got "
            f"{n_components}. Choose fewer components."
        )
    return int(n_components)


def check_positive(
    value: Any, name: str, *, shape: tuple[int, ...] | None = None, allow_zero: bool = False
) -> np.ndarray:
    """A positive scalar or array hyperparameter, broadcast to ``shape``; returns float64 array."""
    arr = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else None
    if arr is None:
        raise DataError(f"{name} must be a positive number or array; got {value!r}.")
    if shape is not None:
        try:
            arr = np.broadcast_to(arr, shape).copy()
        except ValueError:
            raise DataError(f"{name} must be a scalar or have shape {shape}; got shape {arr.shape}.") from None
    bad = ~np.isfinite(arr) | ((arr < 0) if allow_zero else (arr <= 0))
    if bad.any():
        rule = "non-negative" if allow_zero else "positive"
        raise DataError(f"{name} must be finite and {rule}; got {arr.ravel()[np.flatnonzero(bad.ravel())[0]]}.")
    return arr


def as_rng(seed: Any) -> np.random.Generator:
    """A numpy Generator from ``seed``: an int, None (fresh entropy), a numpy Generator (returned as is) or a
    torch.Generator (one draw from it seeds the numpy generator). Public functions accept any of these.

    Examples
    --------
    >>> int(as_rng(3).integers(10)) == int(as_rng(3).integers(10))
    True
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and type(seed).__name__ == "Generator" and hasattr(seed, "initial_seed"):
        import torch

        return np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=seed)))
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise DataError(f"seed must be an int, a numpy Generator or a torch.Generator; got {seed!r}.")
    return np.random.default_rng(seed)
