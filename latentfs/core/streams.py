"""Mini-batch streams for the online engines (DCA online VB, mixtures' stepwise EM): one way to read an iterator
or list of chunks, and one way to cut a matrix or a dask array into mini-batches pass after pass.

This module knows no model family: the engines validate each batch themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from latentfs.core.errors import DataError
from latentfs.core.options import as_rng

__all__ = ["chunk_stream", "is_batch_stream", "row_batches"]


def is_batch_stream(X: Any) -> bool:
    """An iterator, or a list/tuple of 2-D matrices (rather than one matrix given as nested lists)."""
    if isinstance(X, Iterator):
        return True
    if isinstance(X, (list, tuple)) and X:
        first = X[0]
        return hasattr(first, "shape") and len(getattr(first, "shape", ())) == 2
    return False


def chunk_stream(X: Any, n_passes: int, *, what: str = "chunks") -> tuple[Any, Iterable[Any]]:
    """``(first chunk, every chunk in order)`` of an iterator (read once: ``n_passes`` must be 1) or of a
    list of chunks repeated ``n_passes`` times. An empty iterator is refused."""
    if isinstance(X, Iterator):
        if n_passes != 1:
            raise DataError(
                f"n_passes must be 1 when X is an iterator (it can be read once); got {n_passes}. Pass a list of "
                f"{what}, or the matrix, to make several passes."
            )
        first = next(X, None)
        if first is None:
            raise DataError(f"X is an empty iterator of {what}; pass at least one.")
        return first, _chain_first(first, X)
    chunks = list(X)
    return chunks[0], [b for _ in range(n_passes) for b in chunks]


def _chain_first(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def row_batches(
    n_rows: int, batch_size: int, n_passes: int, shuffle: bool, seed: Any, take: Callable[[np.ndarray], Any]
) -> Iterator[Any]:
    """``take(rows)`` for consecutive mini-batches of ``batch_size`` row numbers (sorted within a batch), over
    ``n_passes`` passes, in a new random order each pass when ``shuffle`` (drawn from ``seed``)."""
    rng = as_rng(seed)
    for _ in range(n_passes):
        order = rng.permutation(n_rows) if shuffle else np.arange(n_rows)
        for lo in range(0, n_rows, batch_size):
            yield take(np.sort(order[lo: lo + batch_size]))
