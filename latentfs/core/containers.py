"""Containers a user hands in, turned into arrays: torch tensors, pandas DataFrames and xarray DataArrays (their
labels read as names), and the names themselves (generated ones, unique ones). Used by :mod:`latentfs.core.data`,
which validates what comes out."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.sparse as sp

from latentfs.core.errors import DataError

__all__: list[str] = []


def _is_dataframe(obj: Any) -> bool:
    return hasattr(obj, "columns") and hasattr(obj, "index") and hasattr(obj, "iloc")


def _is_dataarray(obj: Any) -> bool:
    # an xarray DataArray, recognised without importing xarray (not a dependency)
    return type(obj).__module__.startswith("xarray") and hasattr(obj, "dims") and hasattr(obj, "coords")


def dataarray_as_frame(X: Any) -> Any:
    """A 2-D xarray DataArray as the pandas DataFrame it is (its first dimension's coordinate the index, its
    second's the columns), so that scikit-learn's validation reads its labels as feature names; anything else as
    given (a DataArray of another dimension is left to the validation, which refuses it)."""
    if _is_dataarray(X) and len(X.dims) == 2:
        return X.to_pandas()
    return X


def _dataarray_labels(obj: Any, axis: int) -> tuple[str, ...] | None:
    """The labels of a 2-D DataArray's dimension ``axis`` (rows: its first dimension, documents or samples;
    columns: its second, features), or None when that dimension has no coordinate."""
    dim = obj.dims[axis]
    return tuple(str(v) for v in obj.indexes[dim]) if dim in obj.indexes else None


def _check_unique(names: tuple[str, ...], what: str, where: str, remedy: str) -> None:
    if len(set(names)) == len(names):
        return
    seen: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        seen.setdefault(n, []).append(i)
    dup, pos = next((n, p) for n, p in seen.items() if len(p) > 1)
    n_dup = sum(1 for p in seen.values() if len(p) > 1)
    shown = ", ".join(str(i) for i in pos[:5]) + (" …" if len(pos) > 5 else "")
    raise DataError(
        f"{what} must be unique; {dup!r} appears {len(pos)} times ({where} {shown})"
        f"{f' and {n_dup - 1} other name(s) repeat' if n_dup > 1 else ''}. {remedy}"
    )


@functools.lru_cache(maxsize=16)
def _generated_names(prefix: str, n: int) -> tuple[str, ...]:
    """``prefix0 … prefix{n-1}``, built once per (prefix, n): a fit validates its data several times."""
    return tuple(f"{prefix}{i}" for i in range(n))


_TIME_KINDS = "mM"


def _time_error(name: str, dtype: Any, where: str = "") -> DataError:
    return DataError(
        f"{name} must hold numbers, not dates or durations; got dtype {dtype}{where}. Convert them to numbers "
        "with an explicit unit first (e.g. (dates - dates.min()) / np.timedelta64(1, 'D') for days), or drop "
        "the column."
    )


def _masked_error(name: str, mask: np.ndarray) -> DataError:
    idx = np.argwhere(mask)
    where = f" (first at index {tuple(int(i) for i in idx[0])})" if idx.size else ""
    return DataError(
        f"{name} is a masked array with {int(mask.sum())} masked entr{'y' if mask.sum() == 1 else 'ies'}{where}; "
        "latentfs does not drop a mask silently. Fill the masked entries yourself: X.filled(0) if masked "
        "means 'zero count', or X.filled(np.nan) with a model that handles missing values (missing='allow')."
    )


def _from_torch(X: Any, name: str) -> np.ndarray | sp.csr_matrix:
    import torch

    if X.device.type == "meta":
        raise DataError(
            f"{name} is a torch tensor on the 'meta' device, which holds no values (shape {tuple(X.shape)}). "
            "Create the tensor on 'cpu' or 'cuda' with its data."
        )
    X = X.detach()
    if X.is_complex():
        raise DataError(f"{name} must be real-valued; got complex dtype {X.dtype}. Pass the real part.")
    if X.layout == torch.sparse_coo:
        if X.dim() != 2:
            raise DataError(f"{name} must be 2-D (rows × features); got a {X.dim()}-D sparse tensor.")
        # upcast before coalescing: summing duplicate entries in int8/uint8 overflows
        X = X.to(torch.float64).coalesce().cpu()
        idx = X.indices().numpy()
        return sp.csr_matrix((X.values().numpy(), (idx[0], idx[1])), shape=tuple(X.shape))
    if X.layout == torch.sparse_csr:
        X = X.to(torch.float64).cpu()
        return sp.csr_matrix(
            (X.values().numpy(), X.col_indices().numpy(), X.crow_indices().numpy()), shape=tuple(X.shape)
        )
    if X.layout != torch.strided:
        X = X.to_dense()
    if X.dtype in (torch.bfloat16, torch.float16):  # numpy has no bfloat16
        X = X.to(torch.float32)
    return X.cpu().numpy()


def _from_dataframe(X: Any, name: str) -> np.ndarray | sp.csr_matrix:
    import pandas as pd

    for col, dtype in X.dtypes.items():
        is_time = pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype)
        if is_time or getattr(dtype, "kind", "O") in _TIME_KINDS:
            raise _time_error(name, dtype, f" in column {col!r}")
    sparse_cols = [isinstance(dtype, pd.SparseDtype) for dtype in X.dtypes]
    if sparse_cols and all(sparse_cols):
        fills = {str(dtype.fill_value) for dtype in X.dtypes}
        if all(float(dtype.fill_value) == 0 for dtype in X.dtypes if dtype.kind in "biuf"):
            # keep it sparse: the dense copy of a typical corpus is hundreds of times larger
            coo = X.sparse.to_coo()
            return sp.csr_matrix(coo.astype(np.float64))
        raise DataError(
            f"{name} is a sparse DataFrame whose fill value is not 0 ({sorted(fills)}); latentfs reads sparse "
            "data as 'absent = 0'. Convert it with df.sparse.to_dense() or rebuild it with fill_value=0."
        )
    try:
        return X.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        bad = [str(c) for c, dtype in X.dtypes.items() if getattr(dtype, "kind", "O") not in "biuf"]
        raise DataError(
            f"{name} must hold numbers only; the DataFrame has non-numeric columns "
            f"{bad[:5]} ({exc}). Drop or encode the non-numeric columns first."
        ) from None
