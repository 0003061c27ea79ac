"""New data given as a dask array: the estimators' new-data methods run block by block (DESIGN contract 8).

A fitted estimator's ``transform``, ``predict``, ``predict_proba``, ``predict_log_proba``, ``score_samples`` and
``score`` take a ``dask.array.Array`` as they take an in-memory array. Each row chunk (a dense numpy block or a
scipy.sparse one, e.g. ``da.from_array(csr, chunks=(rows, -1), asarray=False)``) is handed, in its own task, to
the very method that scores an in-memory array, so a block gives exactly what that method gives for those rows,
with the same validation and errors (a :class:`~latentfs.core.shards.ShardError` names the chunk and its rows).
Nothing is computed when the method is called:

* ``transform``, ``predict_proba``, ``predict_log_proba`` return a lazy dask array of shape (n_rows, width) with
  the input's row chunks and the columns in one chunk; ``predict`` and ``score_samples`` return one of shape
  (n_rows,). Blocks come back as numpy arrays; the data are never gathered into the driver.
* ``score`` is a mean, so it is computed from one pair (weighted block score, weight) per block: the blocks'
  scores are averaged with each block's weight in the family's own mean. That weight is
  ``estimator._score_weight(block)``: its rows for a per-row score, and for count data (documents × words, scored
  per held-out token by document completion) the held-out tokens, ⌊L_d / 2⌋ of each document of L_d tokens. A
  block of weight 0 (only empty or one-token documents) adds nothing and is not scored, as the in-memory score
  drops such documents; when every block weighs 0 the estimator's own score of the first block raises its own
  error.

Where a method's arithmetic treats each row alone, a dask array gives the in-memory result row for row. Where it
does not, the block is the unit: a fold-in that stops when every document of its input has converged stops per
block (within its tolerance of the in-memory values), and a score that draws a random split per document draws it
per block (from the same seed), so the mean differs from the in-memory one by the split's sampling noise.

A dask DataFrame is taken as a pandas DataFrame is: its columns are matched to the names seen in ``fit`` (from its
column names alone, before any row is read; missing or extra columns raise the in-memory error) and put in the
fitted order, and its partitions are the blocks. Their lengths are not counted (that would read the data), so the
result has unknown row chunk sizes (``compute_chunk_sizes()`` finds them), as does a dask array selected by a
boolean mask; ``score`` needs none.

``fit_predict`` on a dask array fits it (shard by shard, where the engine can) and returns the lazy ``predict`` of
its rows: the training labels, which a sharded fit does not keep (``labels_``).

Arguments that group rows (``lengths=``, the lengths of consecutive sequences) are split with the rows: every row
chunk must hold whole sequences (:func:`sequence_chunks` gives chunks that do), and ``lengths=None`` (one sequence)
takes a single row chunk. This module names no family: it reads the method's signature and the estimator's
declared output width (``_n_features_out``).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from latentfs.core.data import DataError
from latentfs.core.shards import ShardError, require_dask, shard_task, wrap

__all__ = [
    "BLOCKWISE_METHODS",
    "BlockwiseNewData",
    "blockwise_method",
    "fit_predict_method",
    "is_dask_collection",
    "sequence_chunks",
]

#: method name -> what each row gives: ``"columns"`` a row of ``_n_features_out`` floats, ``"label"`` one label,
#: ``"value"`` one float, ``"score"`` the mean of the whole input (a float).
BLOCKWISE_METHODS: dict[str, str] = {
    "transform": "columns",
    "predict_proba": "columns",
    "predict_log_proba": "columns",
    "predict": "label",
    "score_samples": "value",
    "score": "score",
}

#: the keyword argument that groups consecutive rows into sequences (split with the row chunks)
_GROUPING = "lengths"


def is_dask_collection(X: Any) -> bool:
    """True for a dask array or a dask DataFrame (without importing dask: none can exist unless it was loaded)."""
    import sys

    da = sys.modules.get("dask.array")
    if da is not None and isinstance(X, da.Array):
        return True
    dd = sys.modules.get("dask.dataframe")
    return dd is not None and isinstance(X, (dd.DataFrame, dd.Series))


def sequence_chunks(lengths: Sequence[int], rows_per_chunk: int) -> tuple[int, ...]:
    """Row chunks that hold whole sequences: consecutive sequences of ``lengths`` grouped into chunks of about
    ``rows_per_chunk`` rows (a longer sequence gets a chunk of its own). Use as ``X.rechunk({0: chunks})``.

    Examples
    --------
    >>> sequence_chunks([3, 4, 2, 5, 1], 6)
    (3, 6, 6)
    """
    if rows_per_chunk < 1:
        raise DataError(f"rows_per_chunk must be a positive integer; got {rows_per_chunk}.")
    chunks: list[int] = []
    current = 0
    for n in (int(v) for v in lengths):
        if current and current + n > rows_per_chunk:
            chunks.append(current)
            current = 0
        current += n
    if current:
        chunks.append(current)
    return tuple(chunks)


def blockwise_method(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (the estimator method ``name``) taking a dask array as well: an in-memory ``X`` goes to ``fn``
    unchanged; a dask array runs ``fn`` on each row chunk (module docstring)."""
    kind = BLOCKWISE_METHODS[name]
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def method(self: Any, X: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_dask_collection(X):
            return fn(self, X, *args, **kwargs)
        bound = signature.bind(self, X, *args, **kwargs)
        options = {k: v for k, v in list(bound.arguments.items())[2:]}
        if _GROUPING in signature.parameters:  # left out, it means one sequence: checked against the chunks
            options.setdefault(_GROUPING, signature.parameters[_GROUPING].default)
        return _on_blocks(self, name, kind, X, options)

    method._blockwise = True  # type: ignore[attr-defined]
    return method


def fit_predict_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (an estimator's ``fit_predict``) taking a dask array as well: ``fit`` on it (which fits it shard by
    shard, or refuses it), then the lazy ``predict`` of its rows, which in memory are the training labels
    (``labels_``, the most probable component of each row at the fitted parameters)."""

    @functools.wraps(fn)
    def method(self: Any, X: Any, y: Any = None, **kwargs: Any) -> Any:
        if not is_dask_collection(X):
            return fn(self, X, y, **kwargs)
        return self.fit(X, y, **kwargs).predict(X, **kwargs)

    method._blockwise = True  # type: ignore[attr-defined]
    return method


class BlockwiseNewData:
    """Mixin: the new-data methods (:data:`BLOCKWISE_METHODS`) that a subclass defines take a dask array and run
    block by block (module docstring). A subclass declares its output width as ``_n_features_out``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # before scikit-learn's set_output wraps transform (in super().__init_subclass__), so that its wrapper sees
        # the dask result and each block runs the method itself
        for name in BLOCKWISE_METHODS:
            fn = cls.__dict__.get(name)
            if callable(fn) and not getattr(fn, "_blockwise", False):
                setattr(cls, name, blockwise_method(name, fn))
        fn = cls.__dict__.get("fit_predict")
        if callable(fn) and not getattr(fn, "_blockwise", False):
            setattr(cls, "fit_predict", fit_predict_method(fn))  # noqa: B010 - a class attribute, by name
        super().__init_subclass__(**kwargs)

    def _score_weight(self, X: Any, **options: Any) -> float:
        """The weight of the in-memory rows ``X`` in this estimator's ``score``, a mean: the number of rows."""
        return float(X.shape[0])


# ------------------------------------------------------------------ the graph


def _on_blocks(est: Any, name: str, kind: str, X: Any, options: dict[str, Any]) -> Any:
    if hasattr(est, "_check_fitted"):
        est._check_fitted()
    else:
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(est)
    # a DataFrame's blocks go to the method as DataFrames with the fitted names, as in memory
    columns = _fitted_names(est) if hasattr(X, "columns") and getattr(X, "ndim", 2) == 2 else None
    X = _as_dask_array(est, X)
    if kind == "columns" and name == "transform":
        _refuse_container_output(est)
    if options.get("y") is not None:
        raise DataError(
            f"y must be None when X is a dask array: {name} runs on X's row chunks and does not split y with them "
            f"(got a {type(options['y']).__name__}). For an accuracy, compare lazily: (est.predict(X) == y).mean() "
            "with y a dask array chunked like X's rows."
        )
    for key, value in options.items():
        if key != _GROUPING and is_dask_collection(value):
            raise DataError(
                f"{key} is a dask collection; with a dask X, {name} takes in-memory values for its other arguments. "
                f"Pass {key}=None (it is ignored by this estimator) or compute it first."
            )
    per_block = _split_grouping(name, X, options)
    held = wrap(est)  # one key holding the estimator, shared by every task
    if kind == "score":
        return _score(est, name, X, held, per_block, columns)
    if kind == "columns":
        width = int(est._n_features_out)
        meta = np.empty((0, width), dtype=np.float64)
        return X.map_blocks(
            _block, held, name, per_block, kind, width, meta.dtype, _starts(X), columns,
            chunks=(X.chunks[0], (width,)), dtype=meta.dtype, meta=meta,
        )
    dtype = np.dtype(np.float64) if kind == "value" else _label_dtype(est)
    meta = np.empty((0,), dtype=dtype)
    return X.map_blocks(
        _block, held, name, per_block, kind, 0, dtype, _starts(X), columns,
        drop_axis=1, chunks=(X.chunks[0],), dtype=dtype, meta=meta,
    )


def _label_dtype(est: Any) -> np.dtype:
    classes = getattr(est, "classes_", None)
    return np.asarray(classes).dtype if classes is not None else np.dtype(np.int64)


def _as_dask_array(est: Any, X: Any) -> Any:
    """``X`` as a 2-D dask array with known row chunks and its columns in one chunk, checked against fit."""
    require_dask()
    import dask.array as da

    if not isinstance(X, da.Array):  # a dask DataFrame: columns matched by name, as a pandas DataFrame's
        X = _frame_as_array(est, X)
    if X.ndim != 2:
        raise DataError(
            f"X must be a 2-D dask array (rows × features); got {X.ndim} dimension(s) of shape {X.shape}. "
            "Reshape it, e.g. X.reshape(-1, 1) for one feature."
        )
    width = getattr(est, "n_features_in_", None)
    if isinstance(width, (int, np.integer)) and X.shape[1] == X.shape[1] and int(X.shape[1]) != int(width):
        raise DataError(
            f"X has {X.shape[1]} features, but {type(est).__name__} was fitted on {int(width)}. Pass the columns "
            "seen in fit."
        )
    if len(X.chunks[1]) > 1:  # whole rows in each block; rows are never gathered
        X = X.rechunk({1: -1})
    return X


def _frame_as_array(est: Any, X: Any) -> Any:
    """A dask DataFrame's columns, matched to the fitted names as :func:`~latentfs.core.estimator.match_columns`
    matches a pandas DataFrame's (the check reads the column names only), as a dask array; its row chunks are the
    partitions, of unknown lengths (no pass over the data to count them)."""
    import pandas as pd

    from latentfs.core.estimator import match_columns

    if getattr(X, "ndim", 2) != 2:  # a dask Series
        raise DataError(
            f"X is a dask {type(X).__name__}; pass a 2-D dask DataFrame or array (rows × features), e.g. "
            "X.to_frame() for one feature."
        )
    columns = list(X.columns)
    match_columns(est, pd.DataFrame(columns=pd.Index(columns, dtype=object)))
    names = _fitted_names(est)
    if names is not None:
        by_name = {str(c): c for c in columns}
        X = X[[by_name[n] for n in names]]
    return X.to_dask_array()


def _fitted_names(est: Any) -> list[str] | None:
    names = getattr(est, "feature_names_in_", None)
    return None if names is None else [str(n) for n in names]


def _refuse_container_output(est: Any) -> None:
    try:
        from sklearn.utils._set_output import _get_output_config

        dense = _get_output_config("transform", est)["dense"]
    except Exception:  # scikit-learn without set_output: nothing configured
        return
    if dense != "default":
        raise DataError(
            f"{type(est).__name__}.set_output(transform={dense!r}) makes transform return an in-memory table, "
            "which a dask X would gather. Call set_output(transform='default') and label the dask result: "
            "out.to_dask_dataframe(columns=est.get_feature_names_out())."
        )


def _starts(X: Any) -> list[int] | None:
    """The first row of each row chunk, and the row count last; None when the chunk sizes are unknown."""
    if any(c != c for c in X.chunks[0]):  # NaN: a DataFrame's partitions, or a boolean selection
        return None
    starts = [0]
    for size in X.chunks[0]:
        starts.append(starts[-1] + int(size))
    return starts


def _run(
    fn: Callable[..., Any],
    index: int,
    starts: list[int] | None,
    block: Any,
    options: dict[str, Any],
    columns: list[str] | None = None,
) -> Any:
    """``fn(block, **options)``, the block as a DataFrame with ``columns`` when given; a DataError it raises names
    the chunk (and its rows when they are known)."""
    if columns is not None:
        import pandas as pd

        block = pd.DataFrame(block, columns=columns, copy=False)
    if starts is not None:
        return shard_task(fn, index, starts[index], starts[index + 1], block, **options)
    try:
        return fn(block, **options)
    except ShardError:
        raise
    except DataError as exc:
        raise ShardError(f"in row chunk {index} (rows of unknown position): {exc}") from exc


def _split_grouping(name: str, X: Any, options: dict[str, Any]) -> list[dict[str, Any]]:
    """The keyword arguments of each row chunk: ``lengths`` cut at the chunk boundaries, the others as given."""
    n_blocks = len(X.chunks[0])
    if _GROUPING not in options:
        return [dict(options)] * n_blocks
    lengths = options[_GROUPING]
    rows = _starts(X)
    if rows is None:
        raise DataError(
            "lengths= needs X's row chunk sizes, to cut the sequences at the chunk boundaries; X has unknown ones "
            "(NaN). Call X.compute_chunk_sizes() first, or pass X.to_dask_array(lengths=True) for a DataFrame."
        )
    if lengths is None:
        if n_blocks > 1:
            raise DataError(
                f"lengths=None makes X one sequence, which {name} cannot split into X's {n_blocks} row chunks "
                f"{_short(X.chunks[0])}. Pass lengths= (the length of each sequence) with chunks that hold whole "
                "sequences, X.rechunk({0: latentfs.core.blockwise.sequence_chunks(lengths, rows_per_chunk)}), or "
                "one row chunk, X.rechunk({0: -1})."
            )
        return [dict(options)]
    if is_dask_collection(lengths):
        raise DataError("lengths must be an in-memory sequence of integers with a dask X; compute it first.")
    values = np.asarray(lengths).ravel()
    if values.dtype.kind not in "iu" or (values <= 0).any() or int(values.sum()) != rows[-1]:
        raise DataError(
            f"lengths must be positive integers summing to the {rows[-1]} rows of X; got {values.size} values "
            f"summing to {values.sum() if values.dtype.kind in 'iuf' else '?'}. Pass the length of each sequence."
        )
    ends = np.cumsum(values)
    bounds = set(ends.tolist()) | {0}
    cut = [r for r in rows if r not in bounds]
    if cut:
        suggested = sequence_chunks(values.tolist(), max(int(max(X.chunks[0])), 1))
        raise DataError(
            f"lengths splits X into sequences that its row chunks {_short(X.chunks[0])} cut (a chunk boundary at row "
            f"{cut[0]} falls inside a sequence); every chunk must hold whole sequences. Rechunk on sequence "
            f"boundaries: X.rechunk({{0: latentfs.core.blockwise.sequence_chunks(lengths, rows_per_chunk)}}), "
            f"here e.g. {_short(suggested)}."
        )
    out = []
    for i in range(n_blocks):
        inside = values[(ends > rows[i]) & (ends <= rows[i + 1])]
        out.append({**options, _GROUPING: inside.tolist()})
    return out


def _short(values: Sequence[Any], n: int = 6) -> str:
    shown = ", ".join(str(v) for v in list(values)[:n])
    return f"({shown}{', …' if len(values) > n else ''})"


def _block(
    block: Any,
    est: Any,
    name: str,
    per_block: list[dict[str, Any]],
    kind: str,
    width: int,
    dtype: np.dtype,
    starts: list[int] | None,
    columns: list[str] | None,
    block_info: Any = None,
) -> np.ndarray:
    """One row chunk's output: the estimator's method ``name`` on the block (in memory, so the method itself runs),
    checked against the declared shape and dtype."""
    i = int(block_info[0]["chunk-location"][0]) if block_info else 0
    out = np.asarray(_run(getattr(est, name), i, starts, block, per_block[i], columns))
    rows = int(block.shape[0])
    want = (rows, width) if kind == "columns" else (rows,)
    if out.shape != want or out.dtype != dtype:
        raise DataError(  # a defect of the estimator, not of the data: the declared output was wrong
            f"{type(est).__name__}.{name} gave an array of shape {out.shape} and dtype {out.dtype} for row "
            f"chunk {i}; the dask result declared {want} and {dtype}. Please report this; meanwhile compute X "
            "block by block: X.map_blocks(...) with the shape it gives."
        )
    return out


def _score_block(
    block: Any,
    est: Any,
    name: str,
    options: dict[str, Any],
    index: int,
    starts: list[int] | None,
    columns: list[str] | None,
) -> np.ndarray:
    """(weight × score, weight) of one row chunk; (0, 0) for a chunk the score drops entirely."""
    weight = float(_run(est._score_weight, index, starts, block, options, columns))
    if weight <= 0:
        return np.zeros(2)
    value = float(_run(getattr(est, name), index, starts, block, options, columns))
    return np.array([value * weight, weight])


def _score(
    est: Any, name: str, X: Any, held: Any, per_block: list[dict[str, Any]], columns: list[str] | None
) -> float:
    from latentfs.core.shards import compute, delayed

    starts = _starts(X)
    blocks = X.to_delayed()[:, 0]
    task = delayed(_score_block, pure=True)
    parts = [task(b, held, name, per_block[i], i, starts, columns) for i, b in enumerate(blocks)]
    values = compute(*parts)
    total = math.fsum(float(p[1]) for p in values)
    if total <= 0:
        # every block dropped: the in-memory score of the first block raises the estimator's own error
        first = blocks[0].compute()
        if columns is not None:
            import pandas as pd

            first = pd.DataFrame(first, columns=columns, copy=False)
        return float(getattr(est, name)(first, **per_block[0]))
    numerator = [float(p[0]) for p in values if p[1] > 0]
    if any(math.isinf(v) or math.isnan(v) for v in numerator):
        return float(sum(numerator) / total)
    return math.fsum(numerator) / total
