"""Stability of feature selection across resamples: Jaccard and Kuncheva indices.

Kuncheva (2007), "A stability index for feature selection": for two subsets of equal size k out of n
features sharing r features, KI = (r n − k²)/(k (n − k)), which corrects the overlap r for the k²/n
features two random subsets share by chance (KI ∈ [−1, 1], 0 in expectation for random subsets).
Jaccard: |A ∩ B|/|A ∪ B|. :func:`selection_stability` averages either over all pairs of subsets
(e.g. the subsets chosen on the K outer folds of :mod:`latentfs.evaluate.cross_indexing`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from latentfs.core.data import DataError

__all__ = ["STABILITY_INDICES", "jaccard_index", "kuncheva_index", "selection_stability"]


def _as_index_set(subset: Any, n_features: int | None, name: str) -> set[int]:
    arr = np.asarray(subset)
    if arr.dtype == bool:
        if n_features is not None and arr.size != n_features:
            raise DataError(f"{name} as a boolean mask must have n_features={n_features} entries; got {arr.size}.")
        return set(np.flatnonzero(arr).tolist())
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise DataError(f"{name} must be a 1-D array of feature indices or a boolean mask; got {subset!r}.")
    if n_features is not None and arr.size and (arr.min() < 0 or arr.max() >= n_features):
        raise DataError(f"{name} holds indices outside [0, {n_features - 1}]: {arr.tolist()}.")
    return set(arr.tolist())


def jaccard_index(a: Any, b: Any, n_features: int | None = None) -> float:
    """|A ∩ B|/|A ∪ B| (1 for two empty subsets).

    Examples
    --------
    >>> jaccard_index([0, 1, 2], [1, 2, 3])
    0.5
    """
    A, B = _as_index_set(a, n_features, "a"), _as_index_set(b, n_features, "b")
    union = A | B
    return 1.0 if not union else len(A & B) / len(union)


def kuncheva_index(a: Any, b: Any, n_features: int) -> float:
    """KI = (r n − k²)/(k (n − k)) for two subsets of the same size k (Kuncheva 2007).

    Examples
    --------
    >>> kuncheva_index([0, 1, 2], [1, 2, 3], n_features=10)
    0.5238095238095238
    """
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 2:
        raise DataError(f"n_features must be an integer ≥ 2; got {n_features!r}.")
    A, B = _as_index_set(a, n_features, "a"), _as_index_set(b, n_features, "b")
    k = len(A)
    if len(B) != k:
        raise DataError(
            f"kuncheva_index needs subsets of the same size; got {len(A)} and {len(B)}. "
            "Compare top-k selections with one k, or use jaccard_index."
        )
    if not 0 < k < n_features:
        raise DataError(
            f"kuncheva_index is undefined for subsets of size {k} out of {n_features} (needs 0 < k < n_features)."
        )
    r = len(A & B)
    return (r * n_features - k * k) / (k * (n_features - k))


STABILITY_INDICES: dict[str, Callable[..., float]] = {
    "jaccard": lambda a, b, n: jaccard_index(a, b, n),
    "kuncheva": kuncheva_index,
}


def selection_stability(subsets: Sequence[Any], n_features: int, *, measure: str = "kuncheva") -> float:
    """Mean pairwise stability index of several selected subsets.

    Examples
    --------
    >>> selection_stability([[0, 1], [0, 1], [0, 2]], n_features=6, measure="jaccard")
    0.5555555555555555
    """
    if measure not in STABILITY_INDICES:
        raise DataError(f"measure must be one of {sorted(STABILITY_INDICES)}; got {measure!r}.")
    subsets = list(subsets)
    if len(subsets) < 2:
        raise DataError(f"subsets must hold at least 2 selections to compare; got {len(subsets)}.")
    fn = STABILITY_INDICES[measure]
    return float(np.mean([fn(a, b, n_features) for a, b in combinations(subsets, 2)]))
