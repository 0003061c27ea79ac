"""Text feature scores (Mladenić 2006, "Feature Selection for Dimensionality Reduction", LNCS 3940, pp. 84–102).

Each word F is scored alone from a documents × words count matrix and class labels (the "simple filtering
approach"). F means "F occurs in the document", F̄ "F does not occur". The chapter's measures:

    InfGain(F)         = P(F) Σ_i P(C_i|F) log[P(C_i|F)/P(C_i)] + P(F̄) Σ_i P(C_i|F̄) log[P(C_i|F̄)/P(C_i)]
    CrossEntropyTxt(F) = P(F) Σ_i P(C_i|F) log[P(C_i|F)/P(C_i)]
    MutualInfoTxt(F)   = Σ_i P(C_i) log[P(F|C_i)/P(F)]
    Freq(F)            = TF(F)
    OddsRatio(F)       = log[P(F|pos)(1 − P(F|neg)) / ((1 − P(F|pos)) P(F|neg))]
    BNS(F)             = |Φ⁻¹(P(F|pos)) − Φ⁻¹(P(F|neg))|   (Forman 2003; the chapter omits |·|)
    FisherIndexTxt(F)  = (P(F|pos) − P(F|neg))² / Σ_{C ∈ {pos, neg}} (1/|C|) Σ_{d ∈ C} (n(F, d) − P(F|C))²

plus three the chapter does not define: document frequency (class-blind), χ² (Yang & Pedersen 1997:
N(AD − CB)²/[(A + C)(B + D)(A + B)(C + D)] from the 2 × 2 document table) and weight of evidence
(Mladenić & Grobelnik 1999: Σ_i P(C_i) P(F) |log[P(C_i|F)(1 − P(C_i)) / (P(C_i)(1 − P(C_i|F)))]|).
Logarithms are natural (nats).

**The probability estimator is an explicit argument.** With one consistent plug-in joint of document
occurrences (``estimator="bernoulli"``), MutualInfoTxt is ≤ 0 for every word by Jensen's inequality (zero
only for class-independent words), so ranking by it favours *uninformative* words. The chapter's usage
(Yang & Pedersen) estimates P(F|C) and P(F) separately, e.g. at the token level
(``estimator="multinomial"``, the probability that a random token of class C is F), which breaks that
identity. Everything else about the estimator is stated in :class:`ProbabilityEstimator`.

Measures defined only for two classes (odds ratio, BNS, Fisher index, χ²) are computed one-vs-rest per
class on multiclass data and combined by ``multiclass`` ("weighted" by P(C), "max", "mean").
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import ndtri, xlogy

from latentfs.core.base import BaseSelector, document_input_attributes, require_y
from latentfs.core.data import DataError, DataWarning, as_counts, as_labels, as_rng, check_choice
from latentfs.core.weights import FeatureWeights

__all__ = [
    "ESTIMATORS",
    "MEASURES",
    "ProbabilityEstimator",
    "TextProbabilities",
    "TextScoreSelector",
    "TextStatistics",
    "class_statistics",
    "estimate_probabilities",
    "text_feature_scores",
]




# --------------------------------------------------------------------------------------------------
# State types
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProbabilityEstimator:
    """How P(C), P(F|C) and P(F) are estimated from counts.

    Parameters
    ----------
    event_model : {"bernoulli", "multinomial"}
        ``"bernoulli"``: F is the event "the document contains the word";
        P(F|C) = (#docs of C containing F + α)/(|C| + 2α), P(F) = (#docs containing F + α)/(N + 2α).
        ``"multinomial"``: F is the event "a random token is the word";
        P(F|C) = (TF(F, C) + α)/(Σ_F′ TF(F′, C) + αV), P(F) = (TF(F) + α)/(Σ TF + αV).
        P(C) is always the fraction of documents in C.
    smoothing : float
        α ≥ 0 (0 = plug-in; with α = 0 the Bernoulli estimates form one consistent joint).
    clip : float
        Probabilities entering log-odds (odds ratio, weight of evidence) and Φ⁻¹ (BNS) are clipped to
        [clip, 1 − clip]; 0.0005 is Forman's choice for BNS.
    """

    event_model: str = "bernoulli"
    smoothing: float = 0.0
    clip: float = 0.0005


ESTIMATORS: dict[str, ProbabilityEstimator] = {
    "bernoulli": ProbabilityEstimator("bernoulli", 0.0),
    "laplace": ProbabilityEstimator("bernoulli", 1.0),
    "multinomial": ProbabilityEstimator("multinomial", 1.0),
}
"""Named estimators: plug-in document frequencies, add-one document frequencies, add-one token frequencies."""


@dataclass(frozen=True)
class TextStatistics:
    """Counts per class (C classes, V words).

    Attributes
    ----------
    doc_freq : (C, V) array
        Number of documents of class c that contain word f.
    term_freq : (C, V) array
        Number of tokens of word f in documents of class c (TF(F, C)).
    n_docs : (C,) array
        |C|, documents per class (empty documents included).
    """

    doc_freq: np.ndarray
    term_freq: np.ndarray
    n_docs: np.ndarray

    def one_vs_rest(self, c: int) -> TextStatistics:
        """Two-class statistics with row 0 = all other classes and row 1 = class c."""
        def pair(a: np.ndarray) -> np.ndarray:
            return np.stack([a.sum(axis=0) - a[c], a[c]])

        return TextStatistics(pair(self.doc_freq), pair(self.term_freq), pair(self.n_docs))


@dataclass(frozen=True)
class TextProbabilities:
    """P(C) (C,), P(F) (V,), P(F|C) (C, V), and by Bayes P(C|F), P(C|F̄) (C, V), each column normalised."""

    p_class: np.ndarray
    p_feature: np.ndarray
    p_feature_given_class: np.ndarray
    p_class_given_feature: np.ndarray
    p_class_given_absent: np.ndarray


def class_statistics(counts: sp.csr_matrix, codes: np.ndarray, n_classes: int) -> TextStatistics:
    """Aggregate a documents × words count matrix into per-class document and term frequencies."""
    n = counts.shape[0]
    member = sp.csr_matrix((np.ones(n), (codes, np.arange(n))), shape=(n_classes, n))
    present = counts.copy()
    present.data = np.ones_like(present.data)
    return TextStatistics(
        doc_freq=np.asarray((member @ present).todense()),
        term_freq=np.asarray((member @ counts).todense()),
        n_docs=np.bincount(codes, minlength=n_classes).astype(np.float64),
    )


def _normalise_columns(a: np.ndarray) -> np.ndarray:
    total = a.sum(axis=0, keepdims=True)
    return np.divide(a, total, out=np.zeros_like(a), where=total > 0)


def estimate_probabilities(stats: TextStatistics, estimator: ProbabilityEstimator) -> TextProbabilities:
    """P(C), P(F), P(F|C) by the estimator; P(C|F) ∝ P(F|C)P(C) and P(C|F̄) ∝ (1 − P(F|C))P(C)."""
    alpha = estimator.smoothing
    V = stats.doc_freq.shape[1]
    p_class = stats.n_docs / stats.n_docs.sum()
    if estimator.event_model == "bernoulli":
        p_fc = (stats.doc_freq + alpha) / (stats.n_docs[:, None] + 2 * alpha)
        p_f = (stats.doc_freq.sum(axis=0) + alpha) / (stats.n_docs.sum() + 2 * alpha)
    else:
        tokens = stats.term_freq.sum(axis=1)
        p_fc = (stats.term_freq + alpha) / (tokens[:, None] + alpha * V)
        p_f = (stats.term_freq.sum(axis=0) + alpha) / (tokens.sum() + alpha * V)
    joint_present = p_fc * p_class[:, None]
    joint_absent = (1 - p_fc) * p_class[:, None]
    return TextProbabilities(p_class, p_f, p_fc, _normalise_columns(joint_present), _normalise_columns(joint_absent))


# --------------------------------------------------------------------------------------------------
# Measures: each a function of (statistics, probabilities, estimator) → (V,) scores
# --------------------------------------------------------------------------------------------------
def _clipped(p: np.ndarray, est: ProbabilityEstimator) -> np.ndarray:
    return np.clip(p, est.clip, 1 - est.clip)


def _kl_to_prior(p_cond: np.ndarray, p_class: np.ndarray) -> np.ndarray:
    """Σ_i P(C_i|·) log[P(C_i|·)/P(C_i)] with 0 log 0 = 0."""
    return np.sum(xlogy(p_cond, p_cond) - xlogy(p_cond, p_class[:, None]), axis=0)


def cross_entropy_txt(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """CrossEntropyTxt(F) = P(F) Σ_i P(C_i|F) log[P(C_i|F)/P(C_i)] (Koller & Sahami 1997)."""
    return pr.p_feature * _kl_to_prior(pr.p_class_given_feature, pr.p_class)


def info_gain(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """InfGain(F) = CrossEntropyTxt(F) + CrossEntropyTxt(F̄); the mutual information I(C; F) under Bernoulli."""
    absent = (1 - pr.p_feature) * _kl_to_prior(pr.p_class_given_absent, pr.p_class)
    return cross_entropy_txt(stats, pr, est) + absent


def mutual_info_txt(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """MutualInfoTxt(F) = Σ_i P(C_i) log[P(F|C_i)/P(F)]; 0 for words with P(F) = 0.

    P(F|C_i) and P(F) are clipped to [clip, 1 − clip] inside the logarithm (as for the odds ratio and BNS),
    so a word absent from one class (P(F|C_i) = 0 under the plug-in estimator) scores a finite, very
    negative value instead of −inf.
    """
    seen = pr.p_feature > 0
    logs = np.log(_clipped(pr.p_feature_given_class[:, seen], est)) - np.log(_clipped(pr.p_feature[seen], est))
    out = np.zeros(pr.p_feature.size)
    out[seen] = pr.p_class @ logs
    return out


def term_freq(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """Freq(F) = TF(F), the number of times F occurs."""
    return stats.term_freq.sum(axis=0)


def doc_freq(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """Document frequency: the number of documents containing F (class-blind)."""
    return stats.doc_freq.sum(axis=0)


def odds_ratio(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """OddsRatio(F) = log[P(F|pos)(1 − P(F|neg)) / ((1 − P(F|pos))P(F|neg))]; row 1 is pos.

    One-sided by definition (Mladenić & Grobelnik 1999): it ranks words that mark the *positive* class
    first, which is what makes it the best measure for naive Bayes on imbalanced node-vs-rest problems;
    swapping the classes negates it. Use ``bns`` or ``chi2`` for a class-symmetric two-class score.
    """
    p1, p0 = _clipped(pr.p_feature_given_class[1], est), _clipped(pr.p_feature_given_class[0], est)
    return np.log(p1) + np.log1p(-p0) - np.log1p(-p1) - np.log(p0)


def bns(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """Bi-normal separation |Φ⁻¹(P(F|pos)) − Φ⁻¹(P(F|neg))| (Forman 2003, JMLR 3:1289, Table 1).

    Forman's definition takes the absolute value: a word that marks the negative class is as useful as one
    that marks the positive class, so BNS is symmetric in a class swap (the chapter prints it without |·|,
    which would rank a negative-class word below a useless one).
    """
    p1, p0 = _clipped(pr.p_feature_given_class[1], est), _clipped(pr.p_feature_given_class[0], est)
    return np.abs(ndtri(p1) - ndtri(p0))


def fisher_index(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """FisherIndexTxt(F) = (P(F|pos) − P(F|neg))² / Σ_C mean_{d∈C} (n(F, d) − P(F|C))² (Chakrabarti et al. 1998).

    n(F, d) ∈ {0, 1}, so mean_{d∈C}(n − p)² = b_C − 2 p b_C + p² with b_C the fraction of C's documents
    containing F. A word with zero spread in both classes scores 0.
    """
    p = pr.p_feature_given_class
    b = stats.doc_freq / np.maximum(stats.n_docs[:, None], 1)
    spread = np.sum(b - 2 * p * b + p**2, axis=0)
    num = (p[1] - p[0]) ** 2
    return np.divide(num, spread, out=np.zeros_like(num), where=spread > 1e-300)


def chi2(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """χ²(F, pos) = N(AD − CB)²/[(A + C)(B + D)(A + B)(C + D)] on document counts (Yang & Pedersen 1997).

    A = #(F, pos), B = #(F, neg), C = #(F̄, pos), D = #(F̄, neg). Words absent from (or present in) every
    document score 0. Independent of the estimator.
    """
    A, B = stats.doc_freq[1], stats.doc_freq[0]
    C, D = stats.n_docs[1] - A, stats.n_docs[0] - B
    N = stats.n_docs.sum()
    den = (A + C) * (B + D) * (A + B) * (C + D)
    num = N * (A * D - C * B) ** 2
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def weight_of_evidence(stats: TextStatistics, pr: TextProbabilities, est: ProbabilityEstimator) -> np.ndarray:
    """Σ_i P(C_i) P(F) |log[P(C_i|F)(1 − P(C_i)) / (P(C_i)(1 − P(C_i|F)))]| (Mladenić & Grobelnik 1999)."""
    q = _clipped(pr.p_class_given_feature, est)
    pc = pr.p_class[:, None]
    log_odds = np.log(q) - np.log1p(-q) - np.log(pc) + np.log1p(-pc)
    return pr.p_feature * np.sum(pc * np.abs(log_odds), axis=0)


MEASURES: dict[str, tuple[Callable[..., np.ndarray], bool]] = {
    "info_gain": (info_gain, False),
    "cross_entropy_txt": (cross_entropy_txt, False),
    "mutual_info_txt": (mutual_info_txt, False),
    "term_freq": (term_freq, False),
    "doc_freq": (doc_freq, False),
    "weight_of_evidence": (weight_of_evidence, False),
    "odds_ratio": (odds_ratio, True),
    "bns": (bns, True),
    "fisher_index": (fisher_index, True),
    "chi2": (chi2, True),
}
"""measure → (function, whether it is defined for two classes only: computed one-vs-rest otherwise)."""

MULTICLASS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "weighted": lambda per_class, p_class: p_class @ per_class,
    "max": lambda per_class, p_class: per_class.max(axis=0),
    "mean": lambda per_class, p_class: per_class.mean(axis=0),
}
"""How one-vs-rest scores (C, V) of a two-class measure are combined."""


# --------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------
def _resolve_estimator(estimator: Any) -> ProbabilityEstimator:
    if isinstance(estimator, str):
        if estimator not in ESTIMATORS:
            raise DataError(
                f"estimator must be one of {sorted(ESTIMATORS)} or a ProbabilityEstimator; got {estimator!r}."
            )
        return ESTIMATORS[estimator]
    if not isinstance(estimator, ProbabilityEstimator):
        raise DataError(
            f"estimator must be one of {sorted(ESTIMATORS)} or a ProbabilityEstimator; got {estimator!r}."
        )
    if estimator.event_model not in ("bernoulli", "multinomial"):
        raise DataError(
            f"estimator.event_model must be 'bernoulli' or 'multinomial'; got {estimator.event_model!r}."
        )
    if not np.isfinite(estimator.smoothing) or estimator.smoothing < 0:
        raise DataError(f"estimator.smoothing must be finite and ≥ 0; got {estimator.smoothing!r}.")
    if not 0 <= estimator.clip < 0.5:
        raise DataError(f"estimator.clip must lie in [0, 0.5); got {estimator.clip!r}.")
    return estimator


def text_feature_scores(
    X: Any,
    y: Any,
    measure: str,
    *,
    estimator: str | ProbabilityEstimator,
    positive_class: Any = None,
    multiclass: str = "weighted",
    feature_names: Any = None,
    seed: Any = None,
) -> FeatureWeights:
    """Score every word with one of Mladenić's measures (or ``"random"``, a seeded baseline).

    Parameters
    ----------
    X : array-like or scipy.sparse matrix, shape (n_documents, n_words)
        Non-negative integer counts. Empty documents are allowed (they contribute to F̄).
    y : array-like, shape (n_documents,)
        Class labels (two or more classes).
    measure : str
        One of :data:`MEASURES` or ``"random"``.
    estimator : str or ProbabilityEstimator
        Required: ``"bernoulli"``, ``"laplace"``, ``"multinomial"`` or a :class:`ProbabilityEstimator`.
    positive_class : label, optional
        For two-class measures on two-class data: the class playing "pos" (default: the larger label).
        On multiclass data, scores are one-vs-rest and ``positive_class`` picks one class instead of
        combining all.
    multiclass : {"weighted", "max", "mean"}
        How one-vs-rest scores of two-class measures are combined on multiclass data.
    feature_names : sequence of str, optional
    seed : int or Generator, optional
        Only for ``measure="random"``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[2, 0, 1], [1, 0, 0], [0, 3, 1], [0, 1, 0]])
    >>> y = np.array(["sport", "sport", "news", "news"])
    >>> fw = text_feature_scores(X, y, "info_gain", estimator="bernoulli", feature_names=["goal", "vote", "the"])
    >>> fw.scores.round(4).tolist()
    [0.6931, 0.6931, 0.0]
    >>> bool(text_feature_scores(X, y, "mutual_info_txt", estimator="bernoulli").scores.max() <= 0)
    True
    """
    est = _resolve_estimator(estimator)
    if measure != "random" and measure not in MEASURES:
        raise DataError(f"measure must be one of {sorted(MEASURES) + ['random']}; got {measure!r}.")
    if multiclass not in MULTICLASS:
        raise DataError(f"multiclass must be one of {sorted(MULTICLASS)}; got {multiclass!r}.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # empty documents are legitimate here: kept below
        counts = as_counts(X, empty_documents="drop", feature_names=feature_names)
    n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
    codes, classes = as_labels(y, n_rows)
    stats = class_statistics(counts.csr, codes[counts.kept_documents], classes.size)
    stats = TextStatistics(stats.doc_freq, stats.term_freq, np.bincount(codes, minlength=classes.size).astype(float))
    info: dict[str, Any] = {
        "measure": measure,
        "estimator": asdict(est),
        "classes": [c.item() if hasattr(c, "item") else c for c in classes],
    }
    if measure == "random":
        scores = as_rng(seed).random(counts.n_features)
        return FeatureWeights(scores, "text.random", counts.feature_names, info=info)
    fn, two_class = MEASURES[measure]
    if positive_class is not None and positive_class not in set(classes.tolist()):
        raise DataError(
            f"positive_class must be one of the labels {classes.tolist()}; got {positive_class!r}."
        )
    if not two_class:
        scores = fn(stats, estimate_probabilities(stats, est), est)
    else:
        targets = list(range(classes.size)) if classes.size > 2 else [1]
        if positive_class is not None:
            targets = [int(np.flatnonzero(classes == positive_class)[0])]
        per_class = np.stack([
            fn(s, estimate_probabilities(s, est), est)
            for s in (stats.one_vs_rest(c) for c in targets)
        ])
        if len(targets) == 1:
            scores = per_class[0]
            info["positive_class"] = info["classes"][targets[0]]
        else:
            scores = MULTICLASS[multiclass](per_class, stats.n_docs / stats.n_docs.sum())
            info["multiclass"] = multiclass
    return FeatureWeights(scores, f"text.{measure}", counts.feature_names, info=info)


@document_input_attributes
class TextScoreSelector(BaseSelector):
    """Keep the top ``n_features_to_select`` words (or those scoring ≥ ``threshold``) by one text measure.

    Parameters
    ----------
    measure : str
        One of :data:`MEASURES` or ``"random"``.
    estimator : str or ProbabilityEstimator
        See :func:`text_feature_scores`.
    n_features_to_select : int, "auto" or None
        ``"auto"`` (default): k = the vocabulary size of the positive class (``positive_class`` if given,
        else the class with the fewest documents), i.e. the number of distinct words occurring in its
        documents. Mladenić (2006, Fig. 5) finds that every measure except random peaks at this "vector
        size 1". ``None`` with ``threshold=None`` keeps every word.
    threshold : float, optional
        Keep words scoring ≥ threshold (used when ``n_features_to_select`` is None).
    positive_class, multiclass
        See :func:`text_feature_scores`.
    seed : int, Generator or None, default 0
        Only for ``measure="random"``.
    non_integer : {"error", "round"}
        What to do with non-integer entries of ``X``: raise (the measures are for counts), or round them to
        the nearest integer first (as :class:`latentfs.DCA` does).

    Attributes
    ----------
    weights_ : FeatureWeights
    support_ : ndarray of bool (n_features,)
    k_ : int
        The k of ``n_features_to_select="auto"``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[2, 0, 1], [1, 0, 1], [0, 3, 1], [0, 1, 1]])
    >>> sel = TextScoreSelector("chi2", estimator="bernoulli", n_features_to_select=2).fit(X, [1, 1, 0, 0])
    >>> sel.get_support(indices=True).tolist()
    [0, 1]
    """

    _accept_sparse = True
    _positive_only = True
    _requires_y = True
    _min_samples = 2  # two classes need two documents

    def __init__(
        self,
        measure: str = "info_gain",
        *,
        estimator: str | ProbabilityEstimator = "bernoulli",
        n_features_to_select: int | str | None = "auto",
        threshold: float | None = None,
        positive_class: Any = None,
        multiclass: str = "weighted",
        seed: Any = 0,
        non_integer: str = "error",
    ) -> None:
        self.measure = measure
        self.estimator = estimator
        self.n_features_to_select = n_features_to_select
        self.threshold = threshold
        self.positive_class = positive_class
        self.multiclass = multiclass
        self.seed = seed
        self.non_integer = non_integer

    def _fit(self, X: Any, y: Any) -> FeatureWeights:
        require_y(self, y, "TextScoreSelector needs class labels: call fit(X, y) with y")
        check_choice("non_integer", self.non_integer, ("error", "round"))
        k = self.n_features_to_select
        if isinstance(k, str) and k != "auto":
            raise DataError(
                f"n_features_to_select must be a positive int, 'auto' or None; got {k!r}. "
                "Use 'auto' for the positive-class vocabulary size."
            )
        if self.non_integer == "round":
            X = _rounded(X)
        fw = text_feature_scores(
            X, y, self.measure, estimator=self.estimator, positive_class=self.positive_class,
            multiclass=self.multiclass, seed=self.seed,
        )
        if k == "auto":
            self.k_ = self._auto_k(X, y)
        return fw

    k_: int

    def _auto_k(self, X: Any, y: Any) -> int:
        counts = sp.csr_matrix(X) if sp.issparse(X) else sp.csr_matrix(np.asarray(X))
        labels = np.asarray(y)
        classes, sizes = np.unique(labels, return_counts=True)
        pos = self.positive_class if self.positive_class is not None else classes[np.argmin(sizes)]
        in_pos = np.asarray(counts[labels == pos].sum(axis=0)).ravel() > 0
        return max(1, int(in_pos.sum()))

    def _support_from(self, weights: FeatureWeights) -> np.ndarray:
        if self.n_features_to_select == "auto":
            return weights.support(min(self.k_, weights.n_features))
        return super()._support_from(weights)


def _rounded(X: Any) -> Any:
    """``X`` with every entry rounded to the nearest integer (sparse kept sparse, a DataFrame kept a frame)."""
    if sp.issparse(X):
        out = sp.csr_matrix(X, dtype=np.float64, copy=True)
        out.data = np.round(out.data)
        out.eliminate_zeros()
        return out
    if hasattr(X, "iloc"):
        return X.round()
    return np.round(np.asarray(X, dtype=np.float64))
