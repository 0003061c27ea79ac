"""Row shards of a dask array, for engines whose E-step is additive over documents (DESIGN contract 8).

A ``dask.array.Array`` given to an engine is fitted shard by shard: its row chunks are the shards (dense
numpy or scipy.sparse blocks, e.g. ``da.from_array(csr, chunks=(rows, -1), asarray=False)``); each shard
is validated *inside its task* and the E-step runs as one task per shard on whatever scheduler is active
(a ``dask.distributed.Client`` if one exists, else dask's default), through :func:`dask.compute` and
:func:`dask.persist`. Only the small additive statistics come back to the driver; no shard is ever
gathered into the driver process.

This module knows no model family: it finds the shards, imports dask lazily (with a :class:`DataError`
naming the ``latentfs[dask]`` extra when it is missing), and wraps dask's compute/persist. It also reads and
writes a corpus kept on disk as one file per row shard (:func:`open_shards`, :func:`save_shards`), so that a
corpus larger than memory can be fitted with ``persist=False`` while only the shards in flight are loaded.
"""

from __future__ import annotations

import os
import re
import zipfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from latentfs.core.data import DataError

__all__ = [
    "DASK_EXTRA",
    "ShardError",
    "compute",
    "delayed",
    "distributed_client",
    "is_dask_array",
    "open_shards",
    "persist",
    "require_dask",
    "row_shards",
    "save_shards",
    "shard_task",
    "tree_sum",
]

DASK_EXTRA = 'pip install "latentfs[dask]"'


class ShardError(DataError):
    """A :class:`DataError` raised inside one shard's task, with the shard's rows in its message."""


def require_dask() -> Any:
    """Import and return ``dask`` (with ``dask.array``), or raise a DataError naming the extra."""
    try:
        import dask
        import dask.array  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only where dask is absent
        raise DataError(
            f"X is a dask array but dask is not installed ({exc}); install the extra with {DASK_EXTRA}."
        ) from exc
    return dask


def is_dask_array(X: Any) -> bool:
    """True when ``X`` is a ``dask.array.Array`` (without importing dask: none can exist unless it was loaded)."""
    import sys

    da = sys.modules.get("dask.array")
    return da is not None and isinstance(X, da.Array)


def row_shards(X: Any, *, name: str = "X") -> tuple[list[Any], list[int]]:
    """The row chunks of a 2-D dask array as delayed blocks, with each chunk's first row.

    The columns must lie in one chunk (each shard holds whole documents); otherwise a DataError says how
    to rechunk.
    """
    require_dask()
    if X.ndim != 2:
        raise DataError(
            f"{name} must be a 2-D dask array (documents × features); got {X.ndim} dimension(s). Reshape it "
            "so that rows are documents."
        )
    if any(c != c for c in X.chunks[0]) or any(c != c for c in X.chunks[1]):  # NaN chunk sizes
        raise DataError(
            f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first (every shard's rows must "
            "be known to place its documents)."
        )
    if len(X.chunks[1]) != 1:
        raise DataError(
            f"{name} must hold every feature of a document in one chunk; got {len(X.chunks[1])} column chunks "
            f"{X.chunks[1]}. Rechunk by rows only: {name}.rechunk({{1: -1}}), or build it with chunks=(rows, -1)."
        )
    blocks = X.to_delayed()
    starts: list[int] = []
    at = 0
    for size in X.chunks[0]:
        starts.append(at)
        at += int(size)
    return [blocks[i, 0] for i in range(blocks.shape[0])], starts


def shard_task(fn: Callable[..., Any], index: int, start: int, stop: int, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(*args, **kwargs)``; a DataError it raises names the shard and its rows (input row numbers in
    the message are relative to the shard's first row, ``start``)."""
    try:
        return fn(*args, **kwargs)
    except ShardError:
        raise
    except DataError as exc:
        raise ShardError(
            f"in row chunk {index} (input rows {start}–{stop - 1}; row numbers below count from {start}): {exc}"
        ) from exc


def delayed(fn: Callable[..., Any], *, nout: int | None = None, pure: bool = False) -> Callable[..., Any]:
    """``dask.delayed(fn)`` (imported lazily)."""
    dask = require_dask()
    return dask.delayed(fn, nout=nout, pure=pure)  # type: ignore[no-any-return]


def wrap(value: Any) -> Any:
    """One dask key holding ``value``, so that every task that takes it shares one copy (not one per task)."""
    dask = require_dask()
    return dask.delayed(value, pure=False)


def compute(*objs: Any) -> tuple[Any, ...]:
    """``dask.compute`` on the active scheduler (a distributed Client when one exists)."""
    dask = require_dask()
    return tuple(dask.compute(*objs))


def persist(objs: Sequence[Any]) -> list[Any]:
    """``dask.persist``: each result stays where it was computed (on a worker under a distributed Client)."""
    dask = require_dask()
    return list(dask.persist(*objs))


def _add(a: Any, b: Any) -> Any:
    """``a + b``; dicts (named statistics) are added key by key, tuples item by item."""
    if isinstance(a, dict):
        return {key: _add(value, b[key]) for key, value in a.items()}
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b, strict=True))
    return a + b


def tree_sum(parts: Sequence[Any]) -> Any:
    """The sum of delayed ``parts`` as a binary tree of tasks: on a cluster the additions run on the
    workers, next to the parts, and only the total travels to the driver (not one copy per shard)."""
    add = delayed(_add, pure=True)
    level = list(parts)
    while len(level) > 1:
        level = [add(level[i], level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return level[0]


def distributed_client() -> Any:
    """The active ``dask.distributed`` Client, or None (also when distributed is not installed)."""
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:
        return None


# ------------------------------------------------------------------ a corpus on disk, one file per row shard

SHARD_FORMATS = ("npz", "npy")
_ZARR_MARKERS = (".zarray", ".zgroup", "zarr.json")
_SPARSE_FORMATS = ("csr", "csc", "coo", "bsr", "dia")  # what scipy.sparse.load_npz reads


def _natural_key(name: str) -> list[Any]:
    """Sort key that reads runs of ASCII digits as numbers: ``part-2`` before ``part-10``."""
    return [int(t) if i % 2 else t for i, t in enumerate(re.split(r"([0-9]+)", name))]


def _array_header(f: Any, where: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the header of an open ``.npy`` stream, reading the header only."""
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npy.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = npy.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except (ValueError, OSError, EOFError) as exc:
        raise DataError(
            f"{where} is not a readable .npy array ({exc}). Rewrite it with numpy.save or save_shards, or move "
            "it out of the directory."
        ) from exc
    return tuple(int(s) for s in shape), np.dtype(dtype)


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype, str]:
    with open(path, "rb") as f:
        shape, dtype = _array_header(f, f"shard file {path.name!r}")
    return shape, dtype, "npy"


def _npz_header(path: Path) -> tuple[tuple[int, ...], np.dtype, str]:
    """Shape, dtype and sparse format of a ``scipy.sparse.save_npz`` file: its ``shape`` and ``format``
    entries and the header of its ``data`` entry (the stored values are not read)."""
    where = f"shard file {path.name!r}"
    remedy = "Write each shard with scipy.sparse.save_npz (or save_shards), or move the file out of the directory."
    try:
        with np.load(path, allow_pickle=False) as z:
            names = set(z.files)
            if not {"format", "shape", "data"} <= names:
                raise DataError(
                    f"{where} is not a scipy.sparse.save_npz file: it holds the arrays {sorted(names)}, without "
                    f"'format', 'shape' and 'data'. {remedy}"
                )
            shape = tuple(int(s) for s in z["shape"])
            fmt = z["format"].item()
        with zipfile.ZipFile(path) as zf, zf.open("data.npy") as f:
            _, dtype = _array_header(f, f"the 'data' entry of {where}")
    except (OSError, ValueError, zipfile.BadZipFile, KeyError) as exc:
        raise DataError(f"{where} is not a readable .npz file ({exc}). {remedy}") from exc
    fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
    if fmt not in _SPARSE_FORMATS:
        raise DataError(
            f"{where} holds an unknown sparse format {fmt!r} (scipy reads {list(_SPARSE_FORMATS)}). {remedy}"
        )
    return shape, dtype, "npz"


def _load_shard(path: str, fmt: str, shape: tuple[int, int], dtype: np.dtype) -> Any:
    """One shard's rows, read when its task runs: a dense array (``.npy``) or a CSR matrix (``.npz``)."""
    import scipy.sparse as sp

    try:
        block: Any = np.load(path, allow_pickle=False) if fmt == "npy" else sp.csr_matrix(sp.load_npz(path))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as exc:
        # the header was read by open_shards; the values are read only now (a file cut short, or damaged after)
        raise DataError(
            f"shard file {Path(path).name!r} cannot be read ({exc}). Rewrite it (numpy.save, "
            "scipy.sparse.save_npz or save_shards) and call open_shards again."
        ) from exc
    if tuple(block.shape) != tuple(shape):
        raise DataError(
            f"shard file {Path(path).name!r} changed after open_shards read it: its shape is now "
            f"{tuple(block.shape)}, not {tuple(shape)}. Call open_shards again on the rewritten directory."
        )
    return block.astype(dtype, copy=False)


def open_shards(path: str | os.PathLike[str]) -> Any:
    """A matrix kept on disk as one file per row shard, as a lazy ``dask.array.Array`` (one chunk per file).

    ``path`` is a directory of ``.npz`` files written by :func:`scipy.sparse.save_npz` (chunks are CSR
    matrices) or of ``.npy`` files (dense chunks), stacked by rows in the order of their names, with runs of
    digits compared as numbers (``part-2`` before ``part-10``; :func:`save_shards` pads them anyway). Only
    the files' headers are read here, so the chunk sizes are known up front; each file is read by its own
    task when a computation needs it, so a fit with ``persist=False`` holds only the shards in flight.
    Hidden files and files of other types are ignored; files with no rows are skipped. A zarr store (a
    directory holding ``.zarray``, ``.zgroup`` or ``zarr.json``) is opened with :func:`dask.array.from_zarr`
    and rechunked to whole rows, if ``zarr`` is installed.

    Parameters
    ----------
    path : str or os.PathLike
        The directory.

    Returns
    -------
    dask.array.Array
        Shape (total rows, columns), one row chunk per file and one column chunk, dtype the common type of
        the files. Pass it to :func:`latentfs.fit` like an in-memory matrix (needs ``latentfs[dask]``).

    Raises
    ------
    DataError
        If the directory is missing, holds no shard files, mixes ``.npz`` and ``.npy``, or its files disagree
        on the number of columns, are not 2-D, are not numeric or cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> import scipy.sparse as sp
    >>> corpus = sp.random(10, 4, density=0.5, format="csr", random_state=0)
    >>> folder = tempfile.TemporaryDirectory()
    >>> [p.name for p in save_shards(corpus, folder.name, rows_per_shard=4)]
    ['shard-000000.npz', 'shard-000001.npz', 'shard-000002.npz']
    >>> X = open_shards(folder.name)
    >>> X.shape, X.chunks
    ((10, 4), ((4, 4, 2), (4,)))
    >>> bool((X.compute(scheduler="synchronous") != corpus).nnz == 0)
    True
    >>> folder.cleanup()
    """
    require_dask()
    import dask
    import dask.array as da
    import scipy.sparse as sp

    root = Path(path)
    remedy = "Pass a directory of .npz files (scipy.sparse.save_npz) or .npy files, e.g. one written by save_shards."
    if not root.exists():
        raise DataError(f"path {str(root)!r} does not exist. {remedy}")
    if not root.is_dir():
        raise DataError(
            f"path {str(root)!r} is a file, not a directory of shards. {remedy} A single file can be read "
            "with numpy.load or scipy.sparse.load_npz."
        )
    if any((root / m).exists() for m in _ZARR_MARKERS):
        return _open_zarr(root)
    files = sorted(
        (p for p in root.iterdir() if p.is_file() and not p.name.startswith(".")),
        key=lambda p: _natural_key(p.name),
    )
    found = {ext: [p for p in files if p.suffix.lower() == f".{ext}"] for ext in SHARD_FORMATS}
    if found["npz"] and found["npy"]:
        raise DataError(
            f"path {str(root)!r} mixes shard formats: {len(found['npz'])} .npz file(s) (e.g. "
            f"{found['npz'][0].name!r}) and {len(found['npy'])} .npy file(s) (e.g. {found['npy'][0].name!r}). "
            "Keep one format per directory: move the others out, or rewrite the corpus with save_shards."
        )
    fmt = "npz" if found["npz"] else "npy"
    shard_files = found[fmt]
    if not shard_files:
        others = ", ".join(repr(p.name) for p in files[:3]) + (" …" if len(files) > 3 else "")
        raise DataError(
            f"path {str(root)!r} holds no .npz or .npy shard files"
            f"{f' (it holds {others})' if files else ' (it is empty)'}. {remedy}"
        )
    reader = _npz_header if fmt == "npz" else _npy_header
    headers = [(p, *reader(p)) for p in shard_files]
    for p, shape, dtype, _ in headers:
        if len(shape) != 2:
            raise DataError(
                f"shard file {p.name!r} holds a {len(shape)}-D array of shape {shape}; every shard must be 2-D "
                "(rows × columns). Reshape it to (rows, columns) and save it again."
            )
        if dtype.kind not in "biuf":
            raise DataError(
                f"shard file {p.name!r} holds values of dtype {dtype}; shards must be numeric (bool, integer or "
                "float). Convert it with X.astype(float) and save it again."
            )
    first = headers[0]
    for p, shape, _, _ in headers[1:]:
        if shape[1] != first[1][1]:
            raise DataError(
                f"the shard files of {str(root)!r} disagree on the number of columns: {first[0].name!r} has "
                f"{first[1][1]} (shape {first[1]}) and {p.name!r} has {shape[1]} (shape {shape}). Every shard "
                "must hold the same columns in the same order; rewrite the odd one(s)."
            )
    dtype = np.result_type(*[h[2] for h in headers])
    n_cols = first[1][1]
    meta = sp.csr_matrix((0, n_cols), dtype=dtype) if fmt == "npz" else np.empty((0, n_cols), dtype=dtype)
    load = dask.delayed(_load_shard, pure=True)
    parts = []
    for p, shape, _, _ in headers:
        if shape[0] == 0:
            continue
        stat = p.stat()
        token = dask.base.tokenize(str(p.resolve()), stat.st_size, stat.st_mtime_ns, dtype)
        block = load(str(p), fmt, shape, dtype, dask_key_name=f"load-shard-{token}")
        parts.append(da.from_delayed(block, shape=shape, dtype=dtype, meta=meta, name=f"shard-{token}"))
    if not parts:
        raise DataError(f"path {str(root)!r} holds {len(headers)} shard file(s), all with no rows. {remedy}")
    return parts[0] if len(parts) == 1 else da.concatenate(parts, axis=0)


def _open_zarr(root: Path) -> Any:
    """A zarr store as a dask array with whole rows in each chunk (only if ``zarr`` is installed)."""
    try:
        import zarr  # noqa: F401
    except ImportError as exc:
        raise DataError(
            f"path {str(root)!r} is a zarr store but zarr is not installed ({exc}); install it with "
            '"pip install zarr", or write the matrix as .npz/.npy shards with save_shards.'
        ) from exc
    import dask.array as da  # pragma: no cover - zarr is not in the test extra

    X = da.from_zarr(str(root))  # pragma: no cover
    if X.ndim != 2:  # pragma: no cover
        raise DataError(f"the zarr array at {str(root)!r} is {X.ndim}-D; a corpus must be 2-D (rows × columns).")
    return X.rechunk({1: -1})  # pragma: no cover


def save_shards(
    X: Any,
    path: str | os.PathLike[str],
    rows_per_shard: int | None = None,
    *,
    format: str | None = None,
    overwrite: bool = False,
) -> list[Path]:
    """Write a matrix as one file per row shard, for :func:`open_shards`.

    Parameters
    ----------
    X : array-like, scipy.sparse matrix or dask.array.Array, shape (n_rows, n_columns)
        The matrix. A dask array is written one chunk at a time (at most one shard in memory), each chunk
        computed on the active scheduler; its row chunks are the shards unless ``rows_per_shard`` is given.
    path : str or os.PathLike
        The directory; created if missing. It must not already hold shard files unless ``overwrite``.
    rows_per_shard : int, optional
        Rows per file (the last one may be shorter). Required unless ``X`` is a dask array.
    format : {"npz", "npy"}, optional
        ``"npz"``: CSR matrices through :func:`scipy.sparse.save_npz` (compressed); ``"npy"``: dense arrays.
        By default ``"npz"`` for sparse input (or a dask array with sparse chunks) and ``"npy"`` otherwise.
    overwrite : bool
        Delete the ``.npz``/``.npy`` files already in ``path`` first (other files are left alone).

    Returns
    -------
    list of pathlib.Path
        The files written, in row order (``shard-000000.npz``, …).

    Raises
    ------
    DataError
        If ``X`` is not 2-D, ``rows_per_shard`` or ``format`` is invalid, or ``path`` holds shard files
        and ``overwrite`` is False.
    """
    import scipy.sparse as sp

    from latentfs.core.options import check_choice, check_int

    if format is not None:
        check_choice("format", format, SHARD_FORMATS)
    if not isinstance(overwrite, bool):
        raise DataError(f"overwrite must be True or False; got {overwrite!r}.")
    if rows_per_shard is not None:
        rows_per_shard = check_int("rows_per_shard", rows_per_shard, low=1)
    lazy = is_dask_array(X)
    if not lazy and not sp.issparse(X):
        X = np.asarray(X)
    if X.ndim != 2:
        raise DataError(
            f"X must be 2-D (rows × columns) to be written as row shards; got shape {tuple(X.shape)}. Reshape it."
        )
    if lazy:
        if any(c != c for c in X.chunks[0]):
            raise DataError("X has unknown chunk sizes; call X.compute_chunk_sizes() before save_shards.")
        X = X.rechunk({0: rows_per_shard, 1: -1}) if rows_per_shard is not None else X.rechunk({1: -1})
        sparse = sp.issparse(getattr(X, "_meta", None))
        stops = list(np.cumsum(X.chunks[0]))
    else:
        if rows_per_shard is None:
            raise DataError(
                "rows_per_shard is required for an in-memory X (only a dask array brings its own row chunks); "
                "pass e.g. rows_per_shard=10000."
            )
        sparse = sp.issparse(X)
        stops = list(range(rows_per_shard, X.shape[0], rows_per_shard)) + [X.shape[0]]
    fmt = format or ("npz" if sparse else "npy")
    root = Path(path)
    if root.exists() and not root.is_dir():
        raise DataError(f"path {str(root)!r} is a file; save_shards writes a directory. Pass a new directory.")
    root.mkdir(parents=True, exist_ok=True)
    old = [p for p in root.iterdir() if p.is_file() and p.suffix.lower() in (".npz", ".npy")]
    if old and not overwrite:
        raise DataError(
            f"path {str(root)!r} already holds {len(old)} shard file(s) (e.g. {old[0].name!r}); pass "
            "overwrite=True to replace them, or choose an empty directory."
        )
    for p in old:
        p.unlink()
    width = max(6, len(str(len(stops) - 1)))
    blocks = X.to_delayed().ravel() if lazy else None
    written: list[Path] = []
    start = 0
    for i, stop in enumerate(stops):
        block = blocks[i].compute() if blocks is not None else X[start:stop]
        target = root / f"shard-{i:0{width}d}.{fmt}"
        if fmt == "npz":
            sp.save_npz(target, sp.csr_matrix(block))
        else:
            np.save(target, block.toarray() if sp.issparse(block) else np.asarray(block))
        written.append(target)
        start = stop
    return written
