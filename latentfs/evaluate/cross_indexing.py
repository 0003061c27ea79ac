"""Less biased measurement of what feature selection gains: cross-indexing (Reunanen 2006, LNCS 3940, pp. 198–209).

A search (e.g. sequential forward selection guided by cross-validation) proposes one subset per size.
Run it once per outer fold k on the data without fold k, train a classifier on that data with the best
subset of each size, and test it on fold k: that gives a K × D matrix x with x[k, i] the accuracy of
size i on fold k (:func:`nested_selection_scores`). Three estimates of the optimal size and of the
accuracy attainable at it read that matrix:

* **outer loop** (Algorithm 1, existing practice): d̂ = argmax_i x̄_i, x̂ = max_i x̄_i. Still optimistic,
  because the same folds choose the size and report its accuracy.
* **cross-indexing A** (Algorithm 2): for each k choose d̂^(−k) = argmax_i of the mean over the *other*
  folds and look its accuracy up on fold k: x̂_A = mean_k x[k, d̂^(−k)]. Proposition 1: x̂_A ≤ x̂ always.
* **cross-indexing B** (Algorithm 3): choose d̂^(k) = argmax_i x[k, i] on fold k alone and average its
  accuracy over the other folds: x̂_B = mean_k mean_{ℓ≠k} x[ℓ, d̂^(k)].

Ties go to the first maximum (the smallest subset). ``stat="median"`` replaces the means (Reunanen allows
it in steps 4.1, 5 and 6). The gain δ^(e) is each estimate minus the same estimator's accuracy of a
reference column (by default the last one, the full feature set). The functions work on any "choose the
best of D configurations" matrix, not only subset sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from latentfs.core.data import DataError, as_continuous, as_labels, as_rng

__all__ = [
    "Curve",
    "NestedScores",
    "SearchPath",
    "SizeEstimate",
    "cross_index_a",
    "cross_index_b",
    "learning_curve",
    "nearest_neighbour_accuracy",
    "nested_selection_scores",
    "outer_loop_estimate",
    "sequential_forward_selection",
    "stratified_folds",
]

STATISTICS: dict[str, Callable[..., Any]] = {"mean": np.mean, "median": np.median}
"""Location statistic used in place of the means of Reunanen's steps 4.1, 5 and 6."""




@dataclass(frozen=True)
class SizeEstimate:
    """What one estimator says about the best configuration.

    Attributes
    ----------
    method : str
        ``"outer_loop"``, ``"cross_index_a"`` or ``"cross_index_b"``.
    size : float
        d̂ (for A and B the statistic of the per-fold sizes, so possibly fractional).
    fold_sizes : (K,) array
        d̂^(−k) (A) or d̂^(k) (B); the single d̂ repeated for the outer loop.
    performance : float
        x̂, the estimated accuracy at the chosen size.
    fold_values : (K,) array
        x[k, d̂^(−k)] (A), mean_{ℓ≠k} x[ℓ, d̂^(k)] (B) or x[k, d̂] (outer loop).
    gain : float
        δ^(e): estimated accuracy at the chosen size minus that of the reference column.
    """

    method: str
    size: float
    fold_sizes: np.ndarray
    performance: float
    fold_values: np.ndarray
    gain: float


# --------------------------------------------------------------------------------------------------
# Math on (..., K, D) score arrays (vectorised over leading axes for Monte Carlo)
# --------------------------------------------------------------------------------------------------
def _leave_one_fold_out(scores: np.ndarray, stat: Callable[..., Any]) -> np.ndarray:
    """stat over the other folds, for each fold: (..., K, D)."""
    K = scores.shape[-2]
    if stat is np.mean:
        return (scores.sum(axis=-2, keepdims=True) - scores) / (K - 1)
    others = [np.delete(scores, k, axis=-2) for k in range(K)]
    return np.stack([stat(o, axis=-2) for o in others], axis=-2)


def outer_loop_values(scores: np.ndarray, stat: Callable[..., Any] = np.mean) -> tuple[np.ndarray, np.ndarray]:
    """(d̂ index, x̂) of Algorithm 1 for (..., K, D) scores."""
    curve = stat(scores, axis=-2)
    best = np.argmax(curve, axis=-1)
    return best, np.take_along_axis(curve, best[..., None], axis=-1)[..., 0]


def cross_index_a_values(scores: np.ndarray, stat: Callable[..., Any] = np.mean) -> tuple[np.ndarray, np.ndarray]:
    """(d̂^(−k) indices (..., K), x[k, d̂^(−k)] (..., K)) of Algorithm 2."""
    chosen = np.argmax(_leave_one_fold_out(scores, stat), axis=-1)
    return chosen, np.take_along_axis(scores, chosen[..., None], axis=-1)[..., 0]


def cross_index_b_values(scores: np.ndarray, stat: Callable[..., Any] = np.mean) -> tuple[np.ndarray, np.ndarray]:
    """(d̂^(k) indices (..., K), mean_{ℓ≠k} x[ℓ, d̂^(k)] (..., K)) of Algorithm 3."""
    chosen = np.argmax(scores, axis=-1)
    others = _leave_one_fold_out(scores, stat)
    return chosen, np.take_along_axis(others, chosen[..., None], axis=-1)[..., 0]


# --------------------------------------------------------------------------------------------------
# Public estimators on one K × D matrix
# --------------------------------------------------------------------------------------------------
def _check_scores(scores: Any, sizes: Any, stat: str, reference: int) -> tuple[np.ndarray, np.ndarray, Callable]:
    arr = as_continuous(scores, name="scores").values
    if arr.shape[0] < 2:
        raise DataError(
            f"scores must have at least 2 rows (one per outer fold); got {arr.shape[0]}. Use K ≥ 2 folds."
        )
    if stat not in STATISTICS:
        raise DataError(f"stat must be one of {sorted(STATISTICS)}; got {stat!r}.")
    D = arr.shape[1]
    size_arr = np.arange(1, D + 1, dtype=np.float64) if sizes is None else np.asarray(sizes, dtype=np.float64)
    if size_arr.shape != (D,):
        raise DataError(
            f"sizes must give one size per column of scores ({D}); got shape {size_arr.shape}."
        )
    if isinstance(reference, bool) or not isinstance(reference, (int, np.integer)) or not -D <= reference < D:
        raise DataError(f"reference must be a column index in [-{D}, {D - 1}]; got {reference!r}.")
    return arr, size_arr, STATISTICS[stat]


def outer_loop_estimate(scores: Any, *, sizes: Any = None, stat: str = "mean", reference: int = -1) -> SizeEstimate:
    """Algorithm 1 (the outer loop of cross-validation): d̂ = argmax_i x̄_i, x̂ = max_i x̄_i.

    Examples
    --------
    >>> x = [[0.70, 0.80, 0.75], [0.72, 0.71, 0.78], [0.69, 0.79, 0.74]]
    >>> est = outer_loop_estimate(x)
    >>> est.size, round(est.performance, 6), round(est.gain, 3)
    (2.0, 0.766667, 0.01)
    """
    arr, size_arr, fn = _check_scores(scores, sizes, stat, reference)
    best, value = outer_loop_values(arr, fn)
    curve = fn(arr, axis=0)
    K = arr.shape[0]
    return SizeEstimate(
        "outer_loop", float(size_arr[best]), np.full(K, size_arr[best]), float(value),
        arr[:, best].copy(), float(value - curve[reference]),
    )


def cross_index_a(scores: Any, *, sizes: Any = None, stat: str = "mean", reference: int = -1) -> SizeEstimate:
    """Cross-indexing A (Reunanen 2006, Algorithm 2).

    Examples
    --------
    >>> x = [[0.70, 0.80, 0.75], [0.72, 0.71, 0.78], [0.69, 0.79, 0.74]]
    >>> est = cross_index_a(x)
    >>> est.fold_sizes.tolist(), round(est.size, 4), round(est.performance, 6), round(est.gain, 6)
    ([3.0, 2.0, 3.0], 2.6667, 0.733333, -0.023333)
    """
    arr, size_arr, fn = _check_scores(scores, sizes, stat, reference)
    chosen, values = cross_index_a_values(arr, fn)
    return SizeEstimate(
        "cross_index_a", float(fn(size_arr[chosen])), size_arr[chosen], float(fn(values)), values,
        float(fn(values - arr[:, reference])),
    )


def cross_index_b(scores: Any, *, sizes: Any = None, stat: str = "mean", reference: int = -1) -> SizeEstimate:
    """Cross-indexing B (Reunanen 2006, Algorithm 3).

    Examples
    --------
    >>> x = [[0.70, 0.80, 0.75], [0.72, 0.71, 0.78], [0.69, 0.79, 0.74]]
    >>> est = cross_index_b(x)
    >>> est.fold_sizes.tolist(), round(est.size, 4), round(est.performance, 6), round(est.gain, 6)
    ([2.0, 3.0, 2.0], 2.3333, 0.75, -0.006667)
    """
    arr, size_arr, fn = _check_scores(scores, sizes, stat, reference)
    chosen, values = cross_index_b_values(arr, fn)
    ref = _leave_one_fold_out(arr, fn)[:, reference]
    return SizeEstimate(
        "cross_index_b", float(fn(size_arr[chosen])), size_arr[chosen], float(fn(values)), values,
        float(fn(values - ref)),
    )


# --------------------------------------------------------------------------------------------------
# Producing the matrix: folds, a search, a classifier
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SearchPath:
    """A search's output: one feature subset per size, and (optionally) the inner-CV score of each."""

    subsets: tuple[np.ndarray, ...]
    inner_scores: np.ndarray | None = None


@dataclass(frozen=True)
class NestedScores:
    """The K × D matrix of outer-fold accuracies, with what produced it.

    Attributes
    ----------
    scores : (K, D) array
        x[k, i]: accuracy on fold k of the classifier trained without fold k on the best subset of size
        ``sizes[i]`` found by the search run without fold k.
    sizes : (D,) array
    folds : (n,) int array
        The outer fold of each sample.
    paths : tuple of SearchPath
        The search's path on each outer training set.
    """

    scores: np.ndarray
    sizes: np.ndarray
    folds: np.ndarray
    paths: tuple[SearchPath, ...]


@dataclass(frozen=True)
class Curve:
    """Accuracy against the number of features: mean and standard error over folds."""

    sizes: np.ndarray
    mean: np.ndarray
    std_error: np.ndarray


def stratified_folds(codes: np.ndarray, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold labels 0..K−1 with every class spread as evenly as possible over the folds."""
    folds = np.empty(codes.size, dtype=np.int64)
    offset = 0
    for c in np.unique(codes):
        idx = rng.permutation(np.flatnonzero(codes == c))
        folds[idx] = (np.arange(idx.size) + offset) % n_folds
        offset += idx.size
    return folds


def nearest_neighbour_accuracy(
    X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray
) -> float:
    """Accuracy of the 1-nearest-neighbour rule (Euclidean; ties to the first training row)."""
    d = np.sum(X_test**2, axis=1)[:, None] + np.sum(X_train**2, axis=1)[None, :] - 2 * X_test @ X_train.T
    return float(np.mean(y_train[np.argmin(d, axis=1)] == y_test))


def _check_folds(n_folds: Any, n: int, name: str = "n_folds") -> int:
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or not 2 <= n_folds <= n:
        raise DataError(f"{name} must be an integer in [2, n_samples={n}]; got {n_folds!r}.")
    return int(n_folds)


def sequential_forward_selection(
    X: np.ndarray,
    y: np.ndarray,
    evaluate: Callable[..., float] = nearest_neighbour_accuracy,
    *,
    n_folds: int = 5,
    max_features: int | None = None,
    seed: Any = None,
) -> SearchPath:
    """SFS guided by ``n_folds``-fold cross-validated accuracy (the search of Reunanen's experiments).

    Each step adds the feature whose addition gives the highest inner-CV accuracy (ties: lowest index).
    Returns the nested subsets of sizes 1..max_features and their inner-CV accuracies ("method 0").
    """
    Xv = as_continuous(X, name="X").values
    codes, _ = as_labels(y, Xv.shape[0])
    n, D = Xv.shape
    k = _check_folds(n_folds, n)
    m = D if max_features is None else int(max_features)
    if not 1 <= m <= D:
        raise DataError(f"max_features must lie in [1, {D}]; got {max_features!r}.")
    folds = stratified_folds(codes, k, as_rng(seed))

    def cv(cols: list[int]) -> float:
        return float(np.mean([
            evaluate(Xv[folds != f][:, cols], codes[folds != f], Xv[folds == f][:, cols], codes[folds == f])
            for f in range(k)
        ]))

    chosen: list[int] = []
    subsets, inner = [], []
    for _ in range(m):
        rest = [j for j in range(D) if j not in chosen]
        vals = [cv(chosen + [j]) for j in rest]
        best = int(np.argmax(vals))
        chosen.append(rest[best])
        subsets.append(np.array(chosen))
        inner.append(vals[best])
    return SearchPath(tuple(subsets), np.array(inner))


def nested_selection_scores(
    X: Any,
    y: Any,
    search: Callable[..., Any] = sequential_forward_selection,
    evaluate: Callable[..., float] = nearest_neighbour_accuracy,
    *,
    n_folds: int = 5,
    seed: Any = None,
) -> NestedScores:
    """Steps 1–3 of Reunanen's algorithms: the K × D matrix of outer-fold accuracies.

    Parameters
    ----------
    X, y : arrays
        Data and class labels.
    search : callable
        ``search(X_train, y_train) -> SearchPath`` or a 1-D ranking of feature indices (best first; the
        subset of size i is its first i entries). The default is SFS with 5-fold inner CV and 1-NN.
    evaluate : callable
        ``evaluate(X_train, y_train, X_test, y_test) -> accuracy``; default 1-NN.
    n_folds : int
        K, the number of outer folds (stratified).
    seed : int or Generator, optional
        Fold assignment.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 4)); y = (X[:, 0] > 0).astype(int)
    >>> ranking = lambda Xt, yt: np.argsort(-np.abs(np.corrcoef(Xt.T, yt)[-1, :-1]))
    >>> res = nested_selection_scores(X, y, ranking, n_folds=3, seed=0)
    >>> res.scores.shape, cross_index_a(res.scores).fold_sizes.tolist()
    ((3, 4), [1.0, 1.0, 1.0])
    """
    Xv = as_continuous(X, name="X").values
    codes, _ = as_labels(y, Xv.shape[0])
    k = _check_folds(n_folds, Xv.shape[0])
    folds = stratified_folds(codes, k, as_rng(seed))
    rows, paths = [], []
    for f in range(k):
        tr, te = folds != f, folds == f
        out = search(Xv[tr], codes[tr])
        if not isinstance(out, SearchPath):
            ranking = np.asarray(out)
            if ranking.ndim != 1 or ranking.size == 0 or ranking.dtype.kind not in "iu":
                raise DataError(
                    "search must return a SearchPath or a 1-D integer ranking of feature indices; got "
                    f"{type(out).__name__} with shape {getattr(ranking, 'shape', None)}."
                )
            out = SearchPath(tuple(ranking[: i + 1] for i in range(ranking.size)))
        paths.append(out)
        rows.append([evaluate(Xv[tr][:, s], codes[tr], Xv[te][:, s], codes[te]) for s in out.subsets])
    lengths = {len(r) for r in rows}
    if len(lengths) != 1:
        raise DataError(
            f"search must return paths of the same length on every outer fold; got lengths {sorted(lengths)}."
        )
    sizes = np.array([len(s) for s in paths[0].subsets], dtype=np.float64)
    return NestedScores(np.array(rows), sizes, folds, tuple(paths))


def learning_curve(scores: Any, *, sizes: Any = None) -> Curve:
    """Accuracy against the number of features from a K × D matrix: mean ± standard error over folds.

    Examples
    --------
    >>> c = learning_curve([[0.6, 0.8], [0.7, 0.9]])
    >>> c.mean.round(2).tolist(), c.std_error.round(3).tolist()
    ([0.65, 0.85], [0.05, 0.05])
    """
    arr, size_arr, _ = _check_scores(scores, sizes, "mean", -1)
    return Curve(size_arr, arr.mean(axis=0), arr.std(axis=0, ddof=1) / np.sqrt(arr.shape[0]))
