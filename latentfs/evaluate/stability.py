"""Stability of feature selection across resamples: Jaccard, Kuncheva and Nogueira.

Kuncheva (2007), "A stability index for feature selection": for two subsets of equal size k out of n
features sharing r features, KI = (r n − k²)/(k (n − k)), which corrects the overlap r for the k²/n
features two random subsets share by chance (KI ∈ [−1, 1], 0 in expectation for random subsets).
Jaccard: |A ∩ B|/|A ∪ B|. :func:`selection_stability` averages either over all pairs of subsets
(e.g. the subsets chosen on the K outer folds of :mod:`latentfs.evaluate.cross_indexing`).

Nogueira, Sechidis & Brown (2018), "On the stability of feature selection algorithms", JMLR 18(174),
Definition 4: with M subsets of d features, p̂_f the fraction of subsets that contain feature f and k̄ the
mean subset size,

    Φ̂ = 1 − [(1/d) Σ_f s_f²] / [(k̄/d)(1 − k̄/d)],   s_f² = M/(M − 1) p̂_f (1 − p̂_f),

s_f² being the unbiased variance of feature f's selection indicator. It is not a mean over pairs: it
handles subsets of different sizes (Kuncheva's index cannot), is 1 when every subset is the same, and 0 in
expectation when each subset is drawn at random given its size. When every subset has the same size k it
equals the mean pairwise Kuncheva index exactly (expand Σ_f p̂_f² = (1/M²) Σ_{i,j} |S_i ∩ S_j|).
Its asymptotic variance (the paper's Theorem 8 / Corollary 9, as coded in the authors' reference
implementation, github.com/nogueirs/JMLR2018) is v̂ = (4/M²) Σ_i (φ_i − φ̄)² with

    φ_i = [ (1/d) Σ_f z_if p̂_f − k_i k̄/d² + (Φ̂/2)(2 k_i k̄/d² − k_i/d − k̄/d + 1) ] / [(k̄/d)(1 − k̄/d)],

z_if the selection indicator and k_i = |S_i|; the (1 − α) interval is Φ̂ ± z_{1−α/2} √v̂.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from scipy.stats import norm

from latentfs.core.data import DataError

__all__ = [
    "STABILITY_INDICES",
    "NogueiraStability",
    "jaccard_index",
    "kuncheva_index",
    "nogueira_stability",
    "selection_stability",
]


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
    """``|A ∩ B| / |A ∪ B|`` (1 for two empty subsets).

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


@dataclass(frozen=True)
class NogueiraStability:
    """Nogueira's stability estimate with its asymptotic variance and (1 − α) confidence interval.

    Attributes
    ----------
    estimate : float
        Φ̂ (Definition 4 of Nogueira et al. 2018); at most 1, and may be negative.
    variance : float
        The asymptotic variance estimate v̂ of Φ̂.
    lower, upper : float
        Φ̂ ∓ z_{1−α/2} √v̂ (Corollary 9).
    alpha : float
    n_subsets : int
        M.
    mean_size : float
        k̄.
    """

    estimate: float
    variance: float
    lower: float
    upper: float
    alpha: float
    n_subsets: int
    mean_size: float


def _indicator_matrix(subsets: Sequence[Any], n_features: Any) -> np.ndarray:
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 2:
        raise DataError(f"n_features must be an integer ≥ 2; got {n_features!r}.")
    rows = list(subsets)
    if len(rows) < 2:
        raise DataError(f"subsets must hold at least 2 selections to compare; got {len(rows)}.")
    Z = np.zeros((len(rows), int(n_features)))
    for i, s in enumerate(rows):
        idx = sorted(_as_index_set(s, int(n_features), f"subsets[{i}]"))
        Z[i, idx] = 1.0
    return Z


def nogueira_stability(subsets: Sequence[Any], n_features: int, *, alpha: float = 0.05) -> NogueiraStability:
    """Nogueira, Sechidis & Brown's (2018) stability Φ̂ of M selected subsets, with its confidence interval.

    Parameters
    ----------
    subsets : sequence of index arrays or boolean masks (or an (M, d) boolean matrix)
        The M ≥ 2 selections (e.g. one per bootstrap sample or outer fold); sizes may differ.
    n_features : int
        d, the number of features selection chose from.
    alpha : float
        1 − the confidence level of the interval.

    Returns
    -------
    NogueiraStability

    Raises
    ------
    DataError
        When every subset is empty or every subset holds all d features on average (k̄ ∈ {0, d}: the
        denominator (k̄/d)(1 − k̄/d) is zero and Φ̂ is undefined).

    Examples
    --------
    >>> round(nogueira_stability([[0, 1], [0, 1], [0, 2]], n_features=6).estimate, 4)
    0.5
    >>> nogueira_stability([[0, 1, 2], [0, 1]], n_features=5).estimate > 0
    True
    """
    if not isinstance(alpha, (float, int)) or isinstance(alpha, bool) or not 0 < alpha < 1:
        raise DataError(f"alpha must be a number in (0, 1), e.g. 0.05 for a 95% interval; got {alpha!r}.")
    Z = _indicator_matrix(subsets, n_features)
    M, d = Z.shape
    p = Z.mean(axis=0)
    k = Z.sum(axis=1)
    kbar = float(k.mean())
    denom = (kbar / d) * (1 - kbar / d)
    if denom <= 0:
        raise DataError(
            f"nogueira_stability is undefined when the mean subset size is {kbar:g} of n_features={d} "
            "(every subset empty, or every subset holding all features); compare non-trivial selections."
        )
    estimate = 1 - (M / (M - 1)) * float(np.mean(p * (1 - p))) / denom
    phi = ((Z @ p) / d - k * kbar / d**2 + estimate / 2 * (2 * k * kbar / d**2 - k / d - kbar / d + 1)) / denom
    variance = float(4 / M**2 * np.sum((phi - phi.mean()) ** 2))
    half = float(norm.ppf(1 - alpha / 2)) * np.sqrt(variance)
    return NogueiraStability(estimate, variance, float(estimate - half), float(estimate + half), float(alpha), M, kbar)


STABILITY_INDICES: dict[str, Callable[..., float]] = {
    "jaccard": lambda a, b, n: jaccard_index(a, b, n),
    "kuncheva": kuncheva_index,
}


MEASURES = (*STABILITY_INDICES, "nogueira")
"""Measures :func:`selection_stability` accepts: the pairwise indices, and Nogueira's Φ̂ (not pairwise)."""


def selection_stability(subsets: Sequence[Any], n_features: int, *, measure: str = "kuncheva") -> float:
    """Stability of several selected subsets: the mean pairwise index, or Nogueira's Φ̂.

    ``measure="jaccard"`` or ``"kuncheva"`` averages the index over all pairs of subsets;
    ``measure="nogueira"`` returns :func:`nogueira_stability`'s estimate (subsets may differ in size).

    Examples
    --------
    >>> selection_stability([[0, 1], [0, 1], [0, 2]], n_features=6, measure="jaccard")
    0.5555555555555555
    >>> round(selection_stability([[0, 1], [0, 1], [0, 2]], n_features=6, measure="nogueira"), 4)
    0.5
    """
    if measure not in MEASURES:
        raise DataError(f"measure must be one of {sorted(MEASURES)}; got {measure!r}.")
    if measure == "nogueira":
        return nogueira_stability(subsets, n_features).estimate
    subsets = list(subsets)
    if len(subsets) < 2:
        raise DataError(f"subsets must hold at least 2 selections to compare; got {len(subsets)}.")
    fn = STABILITY_INDICES[measure]
    return float(np.mean([fn(a, b, n_features) for a, b in combinations(subsets, 2)]))
