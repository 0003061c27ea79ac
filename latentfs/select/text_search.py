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

from latentfs.core.base import BaseSelector, document_input_attributes, require_y
from latentfs.core.data import DataError, as_labels, check_choice
from latentfs.core.weights import FeatureWeights
from latentfs.select.scores import ProbabilityEstimator, _rounded, text_feature_scores
from latentfs.select.subset_strategies import (  # noqa: F401  (the search, re-exported)
    STRATEGIES,
    Criterion,
    SearchResult,
    SearchStep,
    _check_int,
    _greedy,
    _Memo,
    _random_mutation,
    subset_search,
)

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
@document_input_attributes
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

