"""Sequences as the hidden Markov models of :mod:`latentfs.models.hmm` take them: the hmmlearn convention (rows
concatenated, with ``lengths``; or a list of arrays, one per sequence) validated and split into the container
the engines share (:class:`SequenceData`), padding to the longest sequence for the Pyro declaration
(:func:`pad_sequences`), and the checks of sequence lengths for fitting and simulating.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, as_array, check_n_components

__all__ = ["SequenceData", "pad_sequences", "split_input"]


@dataclass(frozen=True)
class SequenceData:
    """Validated sequences, concatenated row-wise (hmmlearn's convention).

    Attributes
    ----------
    values : ndarray
        (N, d) float64 observations (Gaussian; NaN = missing where the model allows it) or (N,) int64
        symbols 0..S−1 (categorical), N = Σ_s T_s.
    lengths : ndarray (n_sequences,) int64
        T_s, each ≥ 1.
    feature_names : tuple of str
    """

    values: np.ndarray
    lengths: np.ndarray
    feature_names: tuple[str, ...]

    @property
    def n_observations(self) -> int:
        return int(self.lengths.sum())

    @property
    def starts(self) -> np.ndarray:
        """Row index of the first observation of each sequence."""
        return np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)

    @property
    def is_start(self) -> np.ndarray:
        """(N,) bool: the row begins a sequence."""
        out = np.zeros(self.n_observations, dtype=bool)
        out[self.starts] = True
        return out


def _is_array_like(obj: Any) -> bool:
    return isinstance(obj, (np.ndarray, torch.Tensor)) or (hasattr(obj, "to_numpy") and hasattr(obj, "shape"))


def _to_numpy(obj: Any, name: str = "X") -> np.ndarray:
    """One sequence (or the concatenation) as a numpy array, through the container checks of
    :func:`~latentfs.core.data.as_array` for tensors (a ``meta`` tensor is refused). A masked array stays
    masked: :func:`~latentfs.core.data.as_continuous` decides later whether a masked entry is missing (NaN) or
    an error."""
    if isinstance(obj, torch.Tensor):
        return np.asarray(as_array(obj, name=name))
    if isinstance(obj, np.ma.MaskedArray):
        return obj
    if hasattr(obj, "to_numpy"):
        return np.asarray(obj.to_numpy())
    return np.asarray(obj)


def split_input(X: Any, lengths: Any = None, *, name: str = "X") -> tuple[Any, np.ndarray, Any]:
    """Concatenate a list of sequences, or check ``lengths`` against a concatenated array.

    Returns the concatenated container (a numpy array, or ``X`` itself when it is one array, to keep a
    DataFrame's column names), the lengths, and the original object for the feature names.
    """
    if isinstance(X, (list, tuple)) and len(X) > 0 and all(_is_array_like(s) for s in X):
        if lengths is not None:
            raise DataError(
                f"lengths must not be given when {name} is a list of sequences (the lengths are those of the "
                f"arrays); got lengths={lengths!r}. Pass either a list of arrays, or one concatenated array "
                "with lengths=."
            )
        seqs = [_to_numpy(s, f"{name}[{i}]") for i, s in enumerate(X)]
        for i, s in enumerate(seqs):
            if s.ndim == 0 or s.shape[0] == 0:
                raise DataError(
                    f"{name}[{i}] is an empty sequence (shape {s.shape}); every sequence needs at least one "
                    "observation. Drop the empty sequences."
                )
            if s.ndim > 2:
                raise DataError(
                    f"{name}[{i}] must be 1-D (T,) or 2-D (T, n_features); got shape {s.shape}. Reshape it."
                )
        dims = {1 if s.ndim == 1 else s.shape[1] for s in seqs}
        if len(dims) > 1:
            raise DataError(
                f"the sequences of {name} must all have the same number of features; got {sorted(dims)}. "
                "Give every sequence the same columns."
            )
        two_d = [s.reshape(s.shape[0], -1) for s in seqs]
        for i, s in enumerate(two_d):
            if s.dtype == object:
                raise DataError(
                    f"{name}[{i}] must be numeric; got dtype object. Convert it with np.asarray(..., float)."
                )
        lens = np.array([s.shape[0] for s in two_d], dtype=np.int64)
        join = np.ma.concatenate if any(isinstance(s, np.ma.MaskedArray) for s in two_d) else np.concatenate
        return join(two_d, axis=0), lens, seqs[0]
    if isinstance(X, (list, tuple)):
        if len(X) == 0:
            raise DataError(f"{name} is empty; pass at least one sequence.")
        try:
            arr = np.asarray(X, dtype=np.float64)
        except (ValueError, TypeError):
            raise DataError(
                f"{name} is ragged: its rows do not form a rectangular array, and lengths cannot be read from "
                "nested lists. Pass a list of numpy arrays (one per sequence), or the sequences concatenated "
                "into one (n_samples, n_features) array with lengths=[T_1, T_2, ...]."
            ) from None
        X = arr
    if _is_array_like(X) or isinstance(X, np.ndarray):
        shape = tuple(X.shape)
        if len(shape) == 3:
            raise DataError(
                f"{name} must be 2-D (n_samples, n_features) with lengths=, or a list of 2-D arrays; got a 3-D "
                f"array of shape {shape}. For equal-length sequences pass list({name}), or "
                f"{name}.reshape(-1, {shape[2]}) with lengths=[{shape[1]}] * {shape[0]}."
            )
        arr_np = _to_numpy(X, name)
        if arr_np.dtype == object:
            raise DataError(
                f"{name} is ragged (an object array); pass a list of numpy arrays (one per sequence), or one "
                "concatenated array with lengths=."
            )
        n = arr_np.shape[0] if arr_np.ndim >= 1 else 0
        if arr_np.ndim == 1:
            X = arr_np.reshape(-1, 1)
        lens = _check_lengths(lengths, n, name)
        return X, lens, X
    raise DataError(
        f"{name} must be an array (n_samples, n_features) or a list of arrays (one per sequence); got "
        f"{type(X).__name__}."
    )


def _check_lengths(lengths: Any, n: int, name: str) -> np.ndarray:
    if n == 0:
        raise DataError(f"{name} is empty (0 observations); pass at least one sequence.")
    if lengths is None:
        return np.array([n], dtype=np.int64)
    lens = np.asarray(lengths)
    if lens.ndim != 1 or lens.size == 0 or lens.dtype.kind not in "iu":
        if not (lens.ndim == 1 and lens.size and lens.dtype.kind == "f" and np.all(lens == np.round(lens))):
            raise DataError(
                f"lengths must be a 1-D list of positive integers (one per sequence); got {lengths!r}."
            )
    lens = lens.astype(np.int64)
    bad = np.flatnonzero(lens < 1)
    if bad.size:
        i = int(bad[0])
        raise DataError(
            f"lengths must be positive: sequence {i} has length {int(lens[i])}. Drop empty sequences from "
            "lengths (and their rows from the data)."
        )
    if int(lens.sum()) != n:
        raise DataError(
            f"lengths must sum to the number of rows of {name}: sum(lengths) = {int(lens.sum())} but {name} has "
            f"{n} rows. Give one length per concatenated sequence."
        )
    return lens


def pad_sequences(values: np.ndarray, lengths: Any, *, fill: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenated sequences → a padded (n_sequences, T_max, ...) tensor and the (n_sequences,) lengths,
    the layout :meth:`GaussianHMM.model` and :meth:`CategoricalHMM.model` take."""
    lens = np.asarray(lengths, dtype=np.int64)
    arr = np.asarray(values)
    out = np.full((lens.size, int(lens.max()), *arr.shape[1:]), fill, dtype=arr.dtype)
    start = 0
    for i, t in enumerate(lens):
        out[i, : int(t)] = arr[start : start + int(t)]
        start += int(t)
    return torch.as_tensor(out), torch.as_tensor(lens)


# The largest symbol a CategoricalHMM takes: the emission table has one column per category.
_MAX_SYMBOL = 2**31


def _check_lengths_arg(n_sequences: Any, length: Any) -> np.ndarray:
    """``simulate``'s (n_sequences, length(s)) → lengths."""
    if isinstance(n_sequences, bool) or not isinstance(n_sequences, (int, np.integer)) or n_sequences < 1:
        raise DataError(f"n_sequences must be a positive integer; got {n_sequences!r}.")
    lens = np.atleast_1d(np.asarray(length))
    if lens.dtype.kind not in "iu" or lens.ndim != 1 or (lens < 1).any():
        raise DataError(f"length must be a positive integer or a list of them (one per sequence); got {length!r}.")
    if lens.size == 1:
        lens = np.repeat(lens, int(n_sequences))
    if lens.size != int(n_sequences):
        raise DataError(
            f"length must be one integer or one per sequence: got {lens.size} lengths for n_sequences="
            f"{n_sequences}."
        )
    return lens.astype(np.int64)



def _as_floats(arr: Any) -> np.ndarray | None:
    """The values of a (validated-later) container as a float64 array with NaN where missing or masked, or
    None when they cannot be read as numbers (then :func:`~latentfs.core.data.as_continuous` says why)."""
    try:
        if isinstance(arr, np.ma.MaskedArray):
            return np.ma.filled(arr.astype(np.float64), np.nan)
        with np.errstate(invalid="ignore"):
            return np.asarray(_to_numpy(arr), dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):
        return None


def _check_fit_sizes(k: int, lens: np.ndarray, name: str) -> None:
    n = int(lens.sum())
    check_n_components(k, n, what=f"the number of observations in {name}, {n}")
    if int(lens.max()) < 2:
        raise DataError(
            f"every sequence of {name} has length 1 ({lens.size} sequences), so no transition is observed and the "
            "transition matrix cannot be estimated. Pass sequences of length ≥ 2, or fit a mixture model "
            "(latentfs.models.mixture) to independent observations."
        )
