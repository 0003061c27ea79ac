"""Mladenić's search strategies and her naive-Bayes evaluation of text feature selection.

Mladenić (2006), "Feature Selection for Dimensionality Reduction", LNCS 3940, pp. 84–102.

**Search strategies** (§2 of the chapter) over subsets of a candidate set of features, guided by a subset
criterion J(S) (larger is better; e.g. the cross-validated F₂ of naive Bayes, :func:`naive_bayes_criterion`):

* ``"forward"`` — forward selection: start empty, greedily add the feature whose addition gives the best J;
* ``"backward"`` — backward elimination: start with every candidate, greedily remove one feature at a time;
* ``"forward_stepwise"`` — start empty, greedily add *or* remove;
* ``"backward_stepwise"`` — start full, greedily add *or* remove;
* ``"random_mutation"`` — start from a random subset, add or remove one random feature, keep the change when
  J does not decrease; stop after ``max_iter`` proposals (Skalak's random mutation hill climbing).

Stopping rule (the chapter gives none): a move is taken when it raises J by more than ``tol``, or when it
*removes* a feature and lowers J by at most ``tol`` (at equal J the smaller subset is preferred). Every
taken move therefore raises J or shrinks the subset, so no search cycles. With ``n_features_to_select``,
forward selection and backward elimination instead go to exactly that size whatever J does (as
:class:`sklearn.feature_selection.SequentialFeatureSelector`). Ties go to the feature listed first in
``candidates`` (by default the lowest index; pass the candidates in filter-score order to break ties by the
filter), and between an addition and a removal of equal J to the removal.

Note for naive Bayes: multinomial NB on a *single* word has P(F|C) = 1 in every class and predicts the prior
only, so every one-word subset scores the same and the first forward step is decided by the tie rule.

**Naive-Bayes evaluation harness** (§4 of the chapter). The classifier is multinomial naive Bayes on the
selected words,

    P(C|Doc) = P(C) Π_{F∈Doc} P(F|C)^{TF(F,Doc)} / Σ_i P(C_i) Π_{F∈Doc} P(F|C_i)^{TF(F,Doc)}    (eq. 1),

with P(F|C) the Laplace estimate (1 + TF(F, C))/(|V| + Σ_F′ TF(F′, C)) over the |V| selected words and
P(C) the class frequency — scikit-learn's ``MultinomialNB(alpha=1.0)`` is this model, and is used. An
empty document (no selected word) goes to the more frequent class. The task is one class against the
rest (the chapter's hierarchy node vs the rest); performance is the precision, recall and
F_β = (1 + β²)PR/(β²P + R) of the positive class with β = 2 (the chapter's F2), by 5-fold
cross-validation, at a list of numbers of kept features — or of "vector sizes", the number kept divided by
the vocabulary size of the positive training documents (Fig. 5 of the chapter finds every measure but
random peaks near vector size 1). Features are scored on the training folds only. The chapter reports the
mean and standard error over folds at the best number of features (its Table 1); so does
:meth:`NaiveBayesCurve.best`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import accuracy_score, fbeta_score, make_scorer, precision_score, recall_score
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.naive_bayes import MultinomialNB

from latentfs.core.base import BaseSelector, require_y
from latentfs.core.data import DataError, as_labels, check_choice
from latentfs.core.options import as_rng
from latentfs.core.weights import FeatureWeights
from latentfs.select.scores import ProbabilityEstimator, _rounded, text_feature_scores

__all__ = [
    "STRATEGIES",
    "NaiveBayesCurve",
    "SearchResult",
    "SearchStep",
    "TextSearchSelector",
    "f_beta",
    "naive_bayes_criterion",
    "naive_bayes_curve",
    "subset_search",
]

STRATEGIES = ("forward", "backward", "forward_stepwise", "backward_stepwise", "random_mutation")
"""Mladenić's search strategies (module docstring)."""

Criterion = Callable[[tuple[int, ...]], float]
"""A subset criterion J(S) (larger is better) on a sorted tuple of column indices."""


def f_beta(precision: float, recall: float, beta: float = 2.0) -> float:
    """F_β = (1 + β²) P R / (β² P + R) (0 when P = R = 0).

    Examples
    --------
    >>> round(f_beta(0.87, 0.17), 2)   # the information-gain row of Mladenić's Table 1 (Ent.)
    0.2
    """
    den = beta**2 * precision + recall
    return 0.0 if den == 0 else float((1 + beta**2) * precision * recall / den)


# --------------------------------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SearchStep:
    """One taken move: ``action`` ("start", "add", "remove"), the feature moved (−1 for "start"), J after it."""

    action: str
    feature: int
    size: int
    score: float


@dataclass(frozen=True)
class SearchResult:
    """A search's outcome: the final subset (sorted column indices), its J, the moves taken, the J evaluations."""

    subset: np.ndarray
    score: float
    path: tuple[SearchStep, ...]
    n_evaluations: int
    strategy: str = ""

    @property
    def scores(self) -> np.ndarray:
        """J along the path (one value per taken move, the start included)."""
        return np.array([s.score for s in self.path])


class _Memo:
    """J on the *set* of columns, each distinct set evaluated once; J(∅) = −inf."""

    def __init__(self, criterion: Criterion) -> None:
        self.criterion = criterion
        self.memo: dict[frozenset[int], float] = {}

    def __call__(self, cols: frozenset[int]) -> float:
        if not cols:
            return -np.inf
        if cols not in self.memo:
            value = float(self.criterion(tuple(sorted(cols))))
            if np.isnan(value):
                raise DataError(f"the criterion returned NaN for the subset {sorted(cols)}; it must return a number.")
            self.memo[cols] = value
        return self.memo[cols]


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    ok = not isinstance(value, bool) and isinstance(value, (int, np.integer))
    if not ok or value < low or (high is not None and value > high):
        rng = f"[{low}, {high}]" if high is not None else f"≥ {low}"
        raise DataError(f"{name} must be an integer {rng}; got {value!r}.")
    return int(value)


def subset_search(
    criterion: Criterion,
    n_features: int,
    *,
    strategy: str = "forward",
    candidates: Sequence[int] | None = None,
    n_features_to_select: int | None = None,
    tol: float = 0.0,
    max_iter: int = 200,
    initial: Sequence[int] | None = None,
    seed: int | np.random.Generator | None = 0,
) -> SearchResult:
    """Search subsets of ``candidates`` (default: all ``n_features`` columns) with one of :data:`STRATEGIES`.

    Parameters
    ----------
    criterion : callable
        J(S) on a sorted tuple of column indices, larger is better; called once per distinct subset.
    n_features : int
        Number of columns.
    strategy : str
        One of :data:`STRATEGIES` (module docstring).
    candidates : sequence of int, optional
        The columns the search may use (e.g. the top 50 words by a filter score, best first); all by default.
        Their order breaks ties in J.
    n_features_to_select : int, optional
        ``"forward"``/``"backward"`` only: go to exactly this size instead of stopping when J stops improving.
    tol : float
        Minimum gain in J for a greedy move to be taken (a removal is also taken when it loses at most ``tol``);
        random mutation keeps any change that does not lower J.
    max_iter : int
        Maximum number of moves (for ``"random_mutation"``: of proposals); not applied when
        ``n_features_to_select`` fixes the path's length.
    initial : sequence of int, optional
        ``"random_mutation"`` only: the starting subset (default: each candidate with probability ½).
    seed : int or Generator, optional
        ``"random_mutation"`` only.

    Returns
    -------
    SearchResult

    Examples
    --------
    >>> weights = {0: 3.0, 1: -1.0, 2: 2.0, 3: 0.5}
    >>> J = lambda S: sum(weights[j] for j in S)
    >>> subset_search(J, 4, strategy="forward").subset.tolist()
    [0, 2, 3]
    >>> subset_search(J, 4, strategy="backward").subset.tolist()
    [0, 2, 3]
    """
    check_choice("strategy", strategy, STRATEGIES)
    D = _check_int("n_features", n_features, 1)
    pool = list(range(D)) if candidates is None else list(dict.fromkeys(int(c) for c in candidates))
    if not pool or min(pool) < 0 or max(pool) >= D:
        raise DataError(f"candidates must be a non-empty set of column indices in [0, {D - 1}]; got {candidates!r}.")
    max_iter = _check_int("max_iter", max_iter, 1)
    if not np.isfinite(tol) or tol < 0:
        raise DataError(f"tol must be a finite number ≥ 0; got {tol!r}.")
    k = None
    if n_features_to_select is not None:
        if strategy not in ("forward", "backward"):
            raise DataError(
                f"n_features_to_select applies to strategy='forward' or 'backward' only; got strategy={strategy!r}. "
                "The stepwise and random-mutation searches stop by themselves."
            )
        k = _check_int("n_features_to_select", n_features_to_select, 1, len(pool))
    if initial is not None and strategy != "random_mutation":
        raise DataError(f"initial applies to strategy='random_mutation' only; got strategy={strategy!r}.")
    J = _Memo(criterion)
    if strategy == "random_mutation":
        result = _random_mutation(J, pool, initial, max_iter, seed)
    else:
        result = _greedy(J, pool, strategy, k, tol, max_iter)
    subset, path = result
    return SearchResult(np.array(sorted(subset), dtype=np.int64), path[-1].score, tuple(path), len(J.memo), strategy)


def _greedy(
    J: _Memo, pool: list[int], strategy: str, k: int | None, tol: float, max_iter: int
) -> tuple[set[int], list[SearchStep]]:
    current: set[int] = set() if strategy in ("forward", "forward_stepwise") else set(pool)
    can_add = strategy != "backward"
    can_remove = strategy != "forward"
    score = J(frozenset(current))
    path = [SearchStep("start", -1, len(current), score)]
    for _ in range(max_iter if k is None else len(pool)):
        if k is not None and len(current) == k:
            break
        moves: list[tuple[float, int, int, str]] = []  # (−J, rank in pool, feature, action)
        if can_add:
            moves += [(-J(frozenset(current | {f})), r, f, "add") for r, f in enumerate(pool) if f not in current]
        if can_remove and len(current) > 1:
            moves += [(-J(frozenset(current - {f})), r, f, "remove") for r, f in enumerate(pool) if f in current]
        if not moves:
            break
        neg, _, f, action = min(moves, key=lambda m: (m[0], m[3] == "add", m[1]))  # best J, removal, first
        new = -neg
        forced = k is not None
        if not (forced or new > score + tol or (action == "remove" and new >= score - tol)):
            break
        current = current | {f} if action == "add" else current - {f}
        score = new
        path.append(SearchStep(action, f, len(current), score))
    return current, path


def _random_mutation(
    J: _Memo, pool: list[int], initial: Sequence[int] | None, max_iter: int, seed: Any
) -> tuple[set[int], list[SearchStep]]:
    rng = as_rng(seed)
    if initial is None:
        current = {f for f in pool if rng.random() < 0.5} or {pool[int(rng.integers(len(pool)))]}
    else:
        current = {int(f) for f in initial}
        if not current or not current <= set(pool):
            raise DataError(f"initial must be a non-empty subset of the candidates; got {initial!r}.")
    score = J(frozenset(current))
    path = [SearchStep("start", -1, len(current), score)]
    for _ in range(max_iter):
        f = pool[int(rng.integers(len(pool)))]
        action = "remove" if f in current else "add"
        proposal = current - {f} if action == "remove" else current | {f}
        if not proposal:
            continue
        new = J(frozenset(proposal))
        if new >= score:  # J does not decrease: neutral moves are kept (they let the search cross plateaux)
            current, score = proposal, new
            path.append(SearchStep(action, f, len(current), score))
    return current, path


# --------------------------------------------------------------------------------------------------
# Naive Bayes
# --------------------------------------------------------------------------------------------------
def _binary_target(y: Any, n: int, positive_class: Any) -> tuple[np.ndarray, Any]:
    codes, classes = as_labels(y, n)
    if classes.size < 2:
        raise DataError(f"y must hold at least two classes; got only {classes.tolist()}.")
    if positive_class is None:
        positive_class = classes[int(np.argmin(np.bincount(codes)))]
    elif positive_class not in set(classes.tolist()):
        raise DataError(f"positive_class must be one of the labels {classes.tolist()}; got {positive_class!r}.")
    pos = int(np.flatnonzero(classes == positive_class)[0])
    return (codes == pos).astype(np.int64), positive_class


def _scorer(scoring: str | float, zero_division: float) -> tuple[Callable[..., Any], float | None]:
    if isinstance(scoring, str):
        named = {"f1": 1.0, "f2": 2.0}
        if scoring in named:
            return make_scorer(fbeta_score, beta=named[scoring], zero_division=zero_division), named[scoring]
        check_choice("scoring", scoring, ("f1", "f2", "precision", "recall", "accuracy"))
        if scoring == "accuracy":
            return make_scorer(accuracy_score), None
        fn = precision_score if scoring == "precision" else recall_score
        return make_scorer(fn, zero_division=zero_division), None
    if isinstance(scoring, bool) or not isinstance(scoring, (int, float)) or not scoring > 0:
        raise DataError(f"scoring must be 'f1', 'f2', 'precision', 'recall', 'accuracy' or β > 0; got {scoring!r}.")
    return make_scorer(fbeta_score, beta=float(scoring), zero_division=zero_division), float(scoring)


def _as_csr(X: Any) -> sp.csr_matrix:
    M = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else sp.csr_matrix(np.asarray(X, dtype=np.float64))
    if M.ndim != 2 or M.shape[0] < 2 or M.shape[1] < 1:
        raise DataError(f"X must be a 2-D documents × words count matrix; got shape {M.shape}.")
    if M.nnz and not np.isfinite(M.data).all():
        raise DataError("X holds NaN or inf; X must hold finite non-negative counts. Pass raw word counts per "
                        "document.")
    if M.nnz and M.data.min() < 0:
        raise DataError("X holds negative entries; X must hold non-negative counts. Pass raw word counts per "
                        "document.")
    return M


def naive_bayes_criterion(
    X: Any,
    y: Any,
    *,
    positive_class: Any = None,
    scoring: str | float = "f2",
    n_folds: int = 5,
    alpha: float = 1.0,
    seed: int = 0,
    zero_division: float = 1.0,
) -> Criterion:
    """J(S) = mean over stratified folds of the positive class's F₂ (or ``scoring``) of ``MultinomialNB(alpha)``.

    The folds are fixed once (``StratifiedKFold(n_folds, shuffle=True, random_state=seed)``), so every subset
    is judged on the same splits (scikit-learn's ``cross_val_score``).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[3, 0, 1], [2, 0, 1], [4, 1, 0], [0, 3, 1], [0, 2, 0], [1, 4, 1]])
    >>> J = naive_bayes_criterion(X, [1, 1, 1, 0, 0, 0], positive_class=1, n_folds=3)
    >>> float(J((0, 1))), float(J((1, 2)))
    (1.0, 0.6666666666666666)
    >>> float(J((0,)))   # one word: P(F|C) = 1 in both classes, the prior alone decides (never the positive class)
    0.0
    """
    counts = _as_csr(X)
    target, _ = _binary_target(y, counts.shape[0], positive_class)
    n_folds = _check_int("n_folds", n_folds, 2, int(np.bincount(target).min()))
    scorer, _ = _scorer(scoring, zero_division)
    cv = StratifiedKFold(n_folds, shuffle=True, random_state=seed)
    model = MultinomialNB(alpha=alpha)

    def J(cols: tuple[int, ...]) -> float:
        return float(np.mean(cross_val_score(model, counts[:, list(cols)], target, cv=cv, scoring=scorer)))

    return J


METRICS = ("precision", "recall", "f_beta", "accuracy")


@dataclass(frozen=True)
class NaiveBayesCurve:
    """Per-fold performance of naive Bayes against the number of kept features.

    Attributes
    ----------
    measure : str
    grid : (S,) array
        The requested numbers of features, or vector sizes when ``relative`` (``inf`` = every word).
    relative : bool
        Whether ``grid`` holds vector sizes (multiples of the positive training vocabulary).
    n_kept : (K, S) int array
        Words kept on each fold.
    precision, recall, f_beta, accuracy : (K, S) arrays
        Of the positive class on each test fold.
    beta : float
    positive_class : label
    """

    measure: str
    grid: np.ndarray
    relative: bool
    n_kept: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    f_beta: np.ndarray
    accuracy: np.ndarray
    beta: float
    positive_class: Any
    info: dict[str, Any] = field(default_factory=dict)

    def mean(self, metric: str = "f_beta") -> np.ndarray:
        """Mean over folds of one metric, per grid point."""
        check_choice("metric", metric, METRICS)
        return np.asarray(getattr(self, metric)).mean(axis=0)

    def std_error(self, metric: str = "f_beta") -> np.ndarray:
        """Standard error over folds (s.d. with ddof = 1 over √K)."""
        check_choice("metric", metric, METRICS)
        values = np.asarray(getattr(self, metric))
        return values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])

    def best(self, metric: str = "f_beta") -> dict[str, Any]:
        """The grid point with the best mean ``metric`` (first on ties): Mladenić's Table 1 row."""
        i = int(np.argmax(self.mean(metric)))
        row: dict[str, Any] = {"measure": self.measure, "grid": float(self.grid[i]),
                               "n_kept": float(self.n_kept[:, i].mean())}
        for m in METRICS:
            row[m] = float(self.mean(m)[i])
            row[m + "_se"] = float(self.std_error(m)[i])
        return row


def naive_bayes_curve(
    X: Any,
    y: Any,
    measure: str,
    *,
    estimator: str | ProbabilityEstimator = "multinomial",
    n_features: Sequence[float] | None = None,
    vector_sizes: Sequence[float] | None = None,
    positive_class: Any = None,
    n_folds: int = 5,
    beta: float = 2.0,
    alpha: float = 1.0,
    threshold: float | None = None,
    seed: int = 0,
    zero_division: float = 1.0,
) -> NaiveBayesCurve:
    """Mladenić's evaluation: score words on the training folds, keep the top k, test multinomial naive Bayes.

    Parameters
    ----------
    X : array-like or sparse, (n_documents, n_words)
        Word counts.
    y : array-like
        Labels; the task is ``positive_class`` against every other class.
    measure : str
        A measure of :func:`latentfs.select.scores.text_feature_scores` (or ``"random"``).
    estimator : str or ProbabilityEstimator
        How the measure estimates probabilities (see :mod:`latentfs.select.scores`).
    n_features, vector_sizes : sequence of float
        Exactly one: the numbers of words to keep, or multiples of the positive training documents'
        vocabulary size (the chapter's "vector size"); ``inf`` keeps every word.
    positive_class : label, optional
        Default: the smallest class.
    n_folds : int
        Stratified folds (the chapter: 5).
    beta : float
        β of F_β (the chapter: 2).
    alpha : float
        Additive smoothing of naive Bayes (1 = Laplace, as the chapter).
    threshold : float, optional
        Assign the positive class when P(pos|Doc) ≥ threshold; default: the more probable class.
    seed : int
        Folds and the ``"random"`` measure.
    zero_division : float
        Precision when nothing is assigned to the positive class (1: no wrong claim was made, which is how the
        chapter's random rows read: precision 0.99, recall 0.001).

    Returns
    -------
    NaiveBayesCurve
    """
    if (n_features is None) == (vector_sizes is None):
        raise DataError("naive_bayes_curve needs exactly one of n_features or vector_sizes; "
                        f"got n_features={n_features!r}, vector_sizes={vector_sizes!r}.")
    relative = vector_sizes is not None
    grid = np.asarray(vector_sizes if relative else n_features, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or np.isnan(grid).any() or (grid <= 0).any():
        raise DataError(f"the grid of sizes must be a non-empty list of positive numbers (inf = all); got {grid}.")
    if not np.isfinite(beta) or beta <= 0:
        raise DataError(f"beta must be a positive number; got {beta!r}.")
    if threshold is not None and not 0 < threshold < 1:
        raise DataError(f"threshold must lie in (0, 1) or be None; got {threshold!r}.")
    counts = _as_csr(X)
    target, pos_label = _binary_target(y, counts.shape[0], positive_class)
    n_folds = _check_int("n_folds", n_folds, 2, int(np.bincount(target).min()))
    V = counts.shape[1]
    folds = list(StratifiedKFold(n_folds, shuffle=True, random_state=seed).split(np.zeros(target.size), target))
    shape = (n_folds, grid.size)
    out = {m: np.zeros(shape) for m in METRICS}
    n_kept = np.zeros(shape, dtype=np.int64)
    for i, (train, test) in enumerate(folds):
        Xtr, ytr = counts[train], target[train]
        weights = text_feature_scores(Xtr, ytr, measure, estimator=estimator, positive_class=1, seed=seed + i)
        order = weights.ranking()
        vocab = int((np.asarray(Xtr[ytr == 1].sum(axis=0)).ravel() > 0).sum())
        for j, g in enumerate(grid):
            k = V if not np.isfinite(g) else int(round(g * vocab)) if relative else int(g)
            k = min(max(k, 1), V)
            cols = order[:k]
            model = MultinomialNB(alpha=alpha).fit(Xtr[:, cols], ytr)
            Xte = counts[test][:, cols]
            pred = model.predict(Xte) if threshold is None else (model.predict_proba(Xte)[:, 1] >= threshold)
            pred = np.asarray(pred, dtype=np.int64)
            n_kept[i, j] = k
            out["precision"][i, j] = precision_score(target[test], pred, zero_division=zero_division)
            out["recall"][i, j] = recall_score(target[test], pred, zero_division=zero_division)
            out["f_beta"][i, j] = fbeta_score(target[test], pred, beta=beta, zero_division=zero_division)
            out["accuracy"][i, j] = accuracy_score(target[test], pred)
    info = {"estimator": estimator if isinstance(estimator, str) else repr(estimator), "n_folds": n_folds,
            "alpha": alpha, "threshold": threshold, "seed": seed}
    return NaiveBayesCurve(measure, grid, relative, n_kept, out["precision"], out["recall"], out["f_beta"],
                           out["accuracy"], float(beta), pos_label, info)


# --------------------------------------------------------------------------------------------------
# Selector
# --------------------------------------------------------------------------------------------------
class TextSearchSelector(BaseSelector):
    """Wrapper selection of words by one of Mladenić's search strategies, judged by naive Bayes.

    The search runs over the ``candidates`` best words by the filter ``prefilter`` (a text measure), with J =
    the cross-validated F₂ of ``MultinomialNB(alpha=1)`` on the positive class (:func:`naive_bayes_criterion`).

    Parameters
    ----------
    strategy : str
        One of :data:`STRATEGIES`.
    prefilter : str
        Text measure that ranks the words; the search sees only the top ``candidates``.
    estimator : str or ProbabilityEstimator
        Probability estimator of ``prefilter``.
    candidates : int
        Size of the candidate pool (wrapper search over all words of a corpus is out of reach).
    n_features_to_select : int, optional
        For ``"forward"``/``"backward"``: go to exactly this size.
    scoring : str or float
        The criterion's metric (``"f2"`` by default; see :func:`naive_bayes_criterion`).
    n_folds : int
        Inner cross-validation folds.
    positive_class : label, optional
        Default: the smallest class.
    tol, max_iter
        See :func:`subset_search`.
    seed : int
        Inner folds and random mutation.
    non_integer : {"error", "round"}
        Non-integer entries are refused (default) or rounded to the nearest count, as in
        :class:`~latentfs.select.TextScoreSelector`.

    Attributes
    ----------
    weights_ : FeatureWeights
        The prefilter's scores.
    support_ : ndarray of bool
    search_ : SearchResult
        In column indices of ``X``.
    n_iter_ : int
        Moves the search took after its start.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([1, 0], 20)
    >>> X = rng.poisson(1.0, size=(40, 8))
    >>> X[:20, 0] += 3
    >>> sel = TextSearchSelector("forward", candidates=8, n_folds=4).fit(X, y)
    >>> 0 in sel.get_support(indices=True)
    True
    """

    _accept_sparse = True
    _positive_only = True
    _requires_y = True
    _min_samples = 4
    _support_from_weights = False

    search_: SearchResult

    def __init__(
        self,
        strategy: str = "forward",
        *,
        prefilter: str = "odds_ratio",
        estimator: str | ProbabilityEstimator = "multinomial",
        candidates: int = 50,
        n_features_to_select: int | None = None,
        scoring: str | float = "f2",
        n_folds: int = 5,
        positive_class: Any = None,
        tol: float = 0.0,
        max_iter: int = 200,
        seed: int = 0,
        non_integer: str = "error",
    ) -> None:
        self.non_integer = non_integer
        self.strategy = strategy
        self.prefilter = prefilter
        self.estimator = estimator
        self.candidates = candidates
        self.n_features_to_select = n_features_to_select
        self.scoring = scoring
        self.n_folds = n_folds
        self.positive_class = positive_class
        self.tol = tol
        self.max_iter = max_iter
        self.seed = seed

    def _fit(self, X: Any, y: Any) -> FeatureWeights:
        require_y(self, y, "TextSearchSelector needs class labels: call fit(X, y) with y")
        check_choice("strategy", self.strategy, STRATEGIES)
        check_choice("non_integer", self.non_integer, ("error", "round"))
        if self.non_integer == "round":
            X = _rounded(X)
        counts = _as_csr(X.to_numpy() if hasattr(X, "iloc") else X)
        target, pos = _binary_target(y, counts.shape[0], self.positive_class)
        m = _check_int("candidates", self.candidates, 1)
        weights = text_feature_scores(counts, target, self.prefilter, estimator=self.estimator, positive_class=1,
                                      seed=self.seed)
        pool = weights.ranking()[: min(m, counts.shape[1])]
        J = naive_bayes_criterion(counts, target, positive_class=1, scoring=self.scoring, n_folds=self.n_folds,
                                  seed=self.seed)
        self.search_ = subset_search(
            J, counts.shape[1], strategy=self.strategy, candidates=pool.tolist(),
            n_features_to_select=self.n_features_to_select, tol=self.tol, max_iter=self.max_iter, seed=self.seed,
        )
        self.n_iter_ = len(self.search_.path) - 1  # moves taken after the start
        support = np.zeros(counts.shape[1], dtype=bool)
        support[self.search_.subset] = True
        self.support_ = support
        names = list(X.columns.astype(str)) if hasattr(X, "columns") else None
        return FeatureWeights(weights.scores, f"text_search.{self.strategy}", names,
                              info={"prefilter": self.prefilter, "positive_class": pos, "candidates": pool.tolist()})

