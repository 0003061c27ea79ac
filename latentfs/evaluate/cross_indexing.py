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
from latentfs.evaluate.feature_search import (  # noqa: F401  (the searches, re-exported)
    SEARCHES,
    Criterion,
    SearchPath,
    _cached,
    _check_folds,
    _check_search_size,
    _cv_criterion,
    exhaustive_search,
    floating_forward_search,
    forward_search,
    nearest_neighbour_accuracy,
    sequential_floating_forward_selection,
    sequential_forward_selection,
    stratified_folds,
)

__all__ = [
    "CrossIndexingReport",
    "Curve",
    "MethodReport",
    "NestedScores",
    "SearchPath",
    "SizeEstimate",
    "cross_index_a",
    "cross_index_b",
    "cross_indexing_report",
    "exhaustive_search",
    "floating_forward_search",
    "forward_search",
    "learning_curve",
    "nearest_neighbour_accuracy",
    "nested_selection_scores",
    "outer_loop_estimate",
    "sequential_floating_forward_selection",
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
    fold_gains : (K,) array or None
        The per-fold terms whose statistic is ``gain``: x[k, d̂] − x[k, ref] (outer loop),
        x[k, d̂^(−k)] − x[k, ref] (A), mean_{ℓ≠k} (x[ℓ, d̂^(k)] − x[ℓ, ref]) (B).
    """

    method: str
    size: float
    fold_sizes: np.ndarray
    performance: float
    fold_values: np.ndarray
    gain: float
    fold_gains: np.ndarray | None = None


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
        arr[:, best].copy(), float(value - curve[reference]), arr[:, best] - arr[:, reference],
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
        float(fn(values - arr[:, reference])), values - arr[:, reference],
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
        float(fn(values - ref)), values - ref,
    )


# --------------------------------------------------------------------------------------------------
# Producing the matrix: folds, a search, a classifier
# --------------------------------------------------------------------------------------------------
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


def _resolve_search(search: Any, evaluate: Callable[..., float], inner_folds: Any, seed: Any) -> Callable[..., Any]:
    if isinstance(search, str):
        if search not in SEARCHES:
            raise DataError(f"search must be one of {sorted(SEARCHES)} or a callable; got {search!r}.")
        fn = SEARCHES[search]
        return lambda Xt, yt: fn(Xt, yt, evaluate, n_folds=inner_folds, seed=seed)
    if not callable(search):
        raise DataError(f"search must be one of {sorted(SEARCHES)} or a callable; got {type(search).__name__}.")
    return search


def _as_path(out: Any) -> SearchPath:
    if isinstance(out, SearchPath):
        return out
    ranking = np.asarray(out)
    if ranking.ndim != 1 or ranking.size == 0 or ranking.dtype.kind not in "iu":
        raise DataError(
            "search must return a SearchPath or a 1-D integer ranking of feature indices; got "
            f"{type(out).__name__} with shape {getattr(ranking, 'shape', None)}."
        )
    return SearchPath(tuple(ranking[: i + 1] for i in range(ranking.size)))


def nested_selection_scores(
    X: Any,
    y: Any,
    search: Callable[..., Any] | str = sequential_forward_selection,
    evaluate: Callable[..., float] = nearest_neighbour_accuracy,
    *,
    n_folds: int = 5,
    inner_folds: int = 5,
    seed: Any = None,
) -> NestedScores:
    """Steps 1–3 of Reunanen's algorithms: the K × D matrix of outer-fold accuracies.

    Parameters
    ----------
    X, y : arrays
        Data and class labels.
    search : callable or {"sfs", "sffs"}
        ``search(X_train, y_train) -> SearchPath`` or a 1-D ranking of feature indices (best first; the
        subset of size i is its first i entries). The default is SFS with 5-fold inner CV and 1-NN. A name
        runs :func:`sequential_forward_selection` or :func:`sequential_floating_forward_selection` with
        ``evaluate``, ``inner_folds`` and ``seed``.
    evaluate : callable
        ``evaluate(X_train, y_train, X_test, y_test) -> accuracy``; default 1-NN.
    n_folds : int
        K, the number of outer folds (stratified).
    inner_folds : int
        Folds of the cross-validation guiding a named search.
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
    search = _resolve_search(search, evaluate, inner_folds, seed)
    rows, paths = [], []
    for f in range(k):
        tr, te = folds != f, folds == f
        out = _as_path(search(Xv[tr], codes[tr]))
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


# --------------------------------------------------------------------------------------------------
# The complete report of Reunanen's experiments: methods 0–3, final subsets, δ^(e), δ^(t), Δ
# --------------------------------------------------------------------------------------------------
METHOD_NAMES = ("inner_cv", "outer_loop", "cross_index_a", "cross_index_b")
"""Reunanen's methods 0 (the search's own inner-CV curve), 1 (Algorithm 1), 2 (A) and 3 (B)."""


@dataclass(frozen=True)
class MethodReport:
    """One row of Reunanen's Tables 2–5 for one run.

    Attributes
    ----------
    method : int
        0 (inner CV of the search on all search data), 1 (outer loop), 2 (cross-indexing A), 3 (B).
    name : str
    size : float
        d̂_i (for A and B the statistic of the per-fold sizes).
    eta : float
        η_i = 100 · d̂_i / D, D the number of features.
    final_subset : array
        Steps 7–8: the subset of size round(d̂_i) (the nearest size on the path, ties to the smaller) found by
        the search run once on all search data.
    delta_e : float
        δ_i^(e): estimated accuracy at the chosen size minus that of the reference (full) set.
    interval : (float, float)
        Percentile bootstrap interval for δ_i^(e), resampling the K outer folds (NaN for method 0, which has
        no folds). With K = 5 it is coarse: an indication of spread, not a calibrated interval.
    delta_t : float
        δ_i^(t): test accuracy of ``evaluate`` trained on all search data with ``final_subset`` minus the same
        with the reference set (NaN without a test set).
    bias : float
        Δ_i = δ_i^(e) − δ_i^(t) (NaN without a test set).
    """

    method: int
    name: str
    size: float
    eta: float
    final_subset: np.ndarray
    delta_e: float
    interval: tuple[float, float]
    delta_t: float
    bias: float


@dataclass(frozen=True)
class CrossIndexingReport:
    """Methods 0–3 of one run, with the K × D matrix and the search path on all search data."""

    methods: tuple[MethodReport, ...]
    nested: NestedScores
    final_path: SearchPath

    def table(self) -> str:
        """Markdown table: method, d̂, η (%), δ^(e) with its interval, δ^(t), Δ (accuracies in points)."""
        lines = ["| method | d̂ | η (%) | δ^(e) | interval | δ^(t) | Δ |", "|---|---|---|---|---|---|---|"]
        for m in self.methods:
            lines.append(
                f"| {m.method} {m.name} | {m.size:.2f} | {m.eta:.0f} | {100 * m.delta_e:.1f} | "
                f"[{100 * m.interval[0]:.1f}, {100 * m.interval[1]:.1f}] | {100 * m.delta_t:.1f} | "
                f"{100 * m.bias:.1f} |"
            )
        return "\n".join(lines)


def _fold_interval(gains: np.ndarray | None, fn: Callable[..., Any], n_boot: int, level: float,
                   rng: np.random.Generator) -> tuple[float, float]:
    if gains is None:
        return (float("nan"), float("nan"))
    idx = rng.integers(0, gains.size, size=(n_boot, gains.size))
    boot = fn(gains[idx], axis=1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return (float(lo), float(hi))


def cross_indexing_report(
    X: Any,
    y: Any,
    search: Callable[..., Any] | str = "sffs",
    evaluate: Callable[..., float] = nearest_neighbour_accuracy,
    *,
    X_test: Any = None,
    y_test: Any = None,
    n_folds: int = 5,
    inner_folds: int = 5,
    stat: str = "mean",
    n_boot: int = 2000,
    level: float = 0.9,
    seed: Any = None,
) -> CrossIndexingReport:
    """Reunanen's complete protocol on one search set (digest book_part3 §7.2–7.5).

    Steps 1–3 (:func:`nested_selection_scores`), the estimates of methods 1–3, method 0 from the search's own
    inner-CV curve on all data, steps 7–8 (run the search once on all of ``X`` and take the subset of each
    method's size) and, given a held-out ``X_test, y_test``, δ^(t) and the bias Δ = δ^(e) − δ^(t). The
    reference is the last size of the path: the full set when the search runs to all features.

    Parameters
    ----------
    X, y : arrays
        The search (training) set.
    search : {"sfs", "sffs"} or callable
        As in :func:`nested_selection_scores`. Method 0 needs a path with ``inner_scores``.
    evaluate : callable
        ``evaluate(X_train, y_train, X_test, y_test) -> accuracy``.
    X_test, y_test : arrays, optional
        Held-out test set for δ^(t) and Δ.
    n_folds, inner_folds : int
        Outer folds K and the folds of the CV that guides a named search.
    stat : {"mean", "median"}
    n_boot, level : int, float
        Bootstrap replicates over folds and coverage of the δ^(e) intervals.
    seed : int or Generator, optional

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 4)); y = (X[:, 0] > 0).astype(int)
    >>> Xt = rng.normal(size=(200, 4)); yt = (Xt[:, 0] > 0).astype(int)
    >>> rep = cross_indexing_report(X, y, "sfs", X_test=Xt, y_test=yt, n_folds=3, inner_folds=3, seed=0)
    >>> [m.name for m in rep.methods], rep.methods[2].final_subset.tolist()
    (['inner_cv', 'outer_loop', 'cross_index_a', 'cross_index_b'], [0])
    >>> rep.methods[2].delta_t > 0
    True
    """
    Xv = as_continuous(X, name="X").values
    codes, classes = as_labels(y, Xv.shape[0])
    if stat not in STATISTICS:
        raise DataError(f"stat must be one of {sorted(STATISTICS)}; got {stat!r}.")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise DataError(f"n_boot must be a positive integer; got {n_boot!r}.")
    if not isinstance(level, (float, int)) or isinstance(level, bool) or not 0 < level < 1:
        raise DataError(f"level must be a number in (0, 1); got {level!r}.")
    if (X_test is None) != (y_test is None):
        raise DataError("X_test and y_test must be given together (or neither); got only one of them.")
    test: tuple[np.ndarray, np.ndarray] | None = None
    if X_test is not None:
        Xt = as_continuous(X_test, name="X_test").values
        if Xt.shape[1] != Xv.shape[1]:
            raise DataError(f"X_test must have the {Xv.shape[1]} columns of X; got {Xt.shape[1]}.")
        yt = np.asarray(y_test)
        if yt.shape != (Xt.shape[0],):
            raise DataError(f"y_test must hold one label per row of X_test ({Xt.shape[0]}); got shape {yt.shape}.")
        pos = np.clip(np.searchsorted(classes, yt), 0, classes.size - 1)
        test = (Xt, np.where(classes[pos] == yt, pos, -1))  # a class unseen in y is never predicted
    rng = as_rng(seed)
    fn = STATISTICS[stat]
    nested = nested_selection_scores(Xv, codes, search, evaluate, n_folds=n_folds, inner_folds=inner_folds, seed=rng)
    final = _as_path(_resolve_search(search, evaluate, inner_folds, rng)(Xv, codes))  # step 7
    sizes = nested.sizes
    D = Xv.shape[1]

    def subset_of(size: float) -> np.ndarray:  # step 8
        return final.subsets[int(np.argmin(np.abs(sizes - np.round(size))))]

    def test_gain(subset: np.ndarray) -> float:
        if test is None:
            return float("nan")
        ref = final.subsets[-1]
        return (evaluate(Xv[:, subset], codes, test[0][:, subset], test[1])
                - evaluate(Xv[:, ref], codes, test[0][:, ref], test[1]))

    rows: list[tuple[int, float, float, np.ndarray | None]] = []
    if final.inner_scores is not None and len(final.inner_scores) == sizes.size:
        inner = np.asarray(final.inner_scores)
        i0 = int(np.argmax(inner))
        rows.append((0, float(sizes[i0]), float(inner[i0] - inner[-1]), None))
    for i, est_fn in enumerate((outer_loop_estimate, cross_index_a, cross_index_b), start=1):
        est = est_fn(nested.scores, sizes=sizes, stat=stat)
        rows.append((i, est.size, est.gain, est.fold_gains))
    methods = []
    for i, size, gain, gains in rows:
        subset = subset_of(size)
        dt = test_gain(subset)
        methods.append(MethodReport(
            i, METHOD_NAMES[i], size, 100.0 * size / D, subset, gain,
            _fold_interval(gains, fn, int(n_boot), float(level), rng), dt, gain - dt,
        ))
    return CrossIndexingReport(tuple(methods), nested, final)
