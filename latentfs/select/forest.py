"""Random-forest feature relevance with a test against irrelevance (Rogers & Gunn 2006, LNCS 3940, pp. 173–184).

A forest whose trees choose **one feature uniformly at random at every node** (Forest-RI with F = 1) and
optimise only the split value on it records, at every split, the information gain (bits) and the node
size n. An irrelevant feature induces a random ordering of the node's labels; Rogers & Gunn bound the
expected best-split gain of such a feature between (eq. 3, one minority example)

    1/n − ((n − 1)/n) log₂((n − 1)/n)

and (eq. 4, balanced node, an empirical fit) (n/2)^(−0.82), and use the **midpoint** as E[IG](n).
(The empirical upper fit undershoots the lower bound at n = 3, by 0.006; the two are ordered for every
other n ≥ 2.) With IG_diff = IG − E[IG](n) (eq. 5) collected over the n_f nodes that split on feature f:

* RF Thr: keep f iff mean(IG_diff) > 0;
* RF HT: keep f iff mean(IG_diff) > 0 and t_f = mean(IG_diff)·√n_f / S_f (eq. 9) exceeds the 1 − γ
  quantile of Student's t with n_f − 1 degrees of freedom (p-value < γ).

About F·γ irrelevant features pass HT by chance. Features used at fewer than two nodes get no test
(p-value 1). Bagged samples have their duplicate rows removed before growing a tree (the bound assumes
distinct points). The trees are scikit-learn's ``DecisionTreeClassifier(criterion="entropy",
max_features=1)`` (an optional dependency, imported when needed), fully grown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from latentfs.core.base import BaseSelector
from latentfs.core.data import DataError, as_continuous, as_labels, as_rng
from latentfs.core.weights import FeatureWeights

__all__ = [
    "ForestRecords",
    "ForestRelevanceSelector",
    "expected_irrelevant_gain",
    "forest_relevance",
    "grow_relevance_forest",
    "irrelevant_gain_bounds",
    "majority_vote_accuracy",
    "relevance_test",
]




# --------------------------------------------------------------------------------------------------
# The chapter's closed forms
# --------------------------------------------------------------------------------------------------
def irrelevant_gain_bounds(n: Any) -> tuple[np.ndarray, np.ndarray]:
    """Lower (eq. 3) and upper (eq. 4) bounds on the expected best-split IG (bits) of an irrelevant feature.

    Examples
    --------
    >>> lo, hi = irrelevant_gain_bounds([2, 10])
    >>> lo.round(4).tolist(), hi.round(4).tolist()
    ([1.0, 0.2368], [1.0, 0.2672])
    """
    n = np.asarray(n, dtype=np.float64)
    if np.any(n < 2):
        raise DataError(f"n (node size) must be at least 2; got {n[n < 2].ravel()[0]:g}.")
    frac = (n - 1) / n
    lower = 1 / n - frac * np.log2(frac)
    upper = (n / 2) ** -0.82
    return lower, upper


def expected_irrelevant_gain(n: Any) -> np.ndarray:
    """E[IG](n): the midpoint of the two bounds (Rogers & Gunn, Section 3)."""
    lower, upper = irrelevant_gain_bounds(n)
    return 0.5 * (lower + upper)


def majority_vote_accuracy(p: float, n_trees: int) -> float:
    """P[H(x) = y] = Σ_{i=⌈n/2⌉}^{n} C(n, i) pⁱ(1 − p)^{n−i} (Rogers & Gunn, eq. 2).

    Examples
    --------
    >>> round(majority_vote_accuracy(0.6, 11), 4)
    0.7535
    """
    if not 0 <= p <= 1:
        raise DataError(f"p must lie in [0, 1]; got {p!r}. It is a tree's probability of a correct vote.")
    return float(stats.binom.sf(int(np.ceil(n_trees / 2)) - 1, n_trees, p))


# --------------------------------------------------------------------------------------------------
# Growing the forest and collecting node records
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ForestRecords:
    """One record per split node of the forest.

    Attributes
    ----------
    feature : (R,) int array
        The feature the node split on.
    gain : (R,) array
        Information gain of the split in bits: H(parent) − (n_L/n)H(L) − (n_R/n)H(R).
    node_size : (R,) int array
        n, the number of (distinct) training rows at the node.
    tree_sizes : (n_trees,) int array
        Number of nodes of each tree.
    oob_error : float
        Out-of-bag majority-vote error of the forest (NaN if no row was ever out of bag).
    n_features : int
    """

    feature: np.ndarray
    gain: np.ndarray
    node_size: np.ndarray
    tree_sizes: np.ndarray
    oob_error: float
    n_features: int

    @property
    def expected_gain(self) -> np.ndarray:
        return expected_irrelevant_gain(self.node_size)


def _tree_class() -> Any:
    try:
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:  # pragma: no cover - scikit-learn is installed in CI
        raise DataError(
            "forest relevance needs scikit-learn's decision trees, which are not installed. "
            "Install them with `pip install scikit-learn` (or `pip install latentfs[sklearn]`)."
        ) from None
    return DecisionTreeClassifier


def grow_relevance_forest(
    X: np.ndarray, codes: np.ndarray, *, n_trees: int, dedup_bootstrap: bool, rng: np.random.Generator
) -> ForestRecords:
    """Grow ``n_trees`` fully grown trees with one random feature per node; record every split."""
    Tree = _tree_class()
    n, F = X.shape
    feats, gains, sizes, tree_sizes = [], [], [], []
    votes = np.zeros((n, 2))
    for _ in range(n_trees):
        idx = np.asarray(rng.integers(0, n, size=n))
        if dedup_bootstrap:
            idx = np.unique(idx)
        tree = Tree(criterion="entropy", max_features=1, random_state=int(rng.integers(2**31 - 1)))
        tree.fit(X[idx], codes[idx])
        t = tree.tree_
        inner = np.flatnonzero(t.children_left >= 0)
        left, right = t.children_left[inner], t.children_right[inner]
        n_node = t.n_node_samples[inner].astype(np.float64)
        gain = t.impurity[inner] - (
            t.n_node_samples[left] * t.impurity[left] + t.n_node_samples[right] * t.impurity[right]
        ) / n_node
        feats.append(t.feature[inner])
        gains.append(gain)
        sizes.append(t.n_node_samples[inner])
        tree_sizes.append(t.node_count)
        out = np.setdiff1d(np.arange(n), idx, assume_unique=False)
        if out.size:
            pred = tree.predict(X[out])
            votes[out, pred] += 1
    voted = votes.sum(axis=1) > 0
    oob = float(np.mean(votes[voted].argmax(axis=1) != codes[voted])) if voted.any() else float("nan")
    return ForestRecords(
        feature=np.concatenate(feats).astype(np.int64),
        gain=np.concatenate(gains),
        node_size=np.concatenate(sizes).astype(np.int64),
        tree_sizes=np.array(tree_sizes),
        oob_error=oob,
        n_features=F,
    )


@dataclass(frozen=True)
class RelevanceTest:
    """Per-feature statistics of IG_diff = IG − E[IG] (arrays of shape (F,))."""

    n_nodes: np.ndarray
    mean_gain: np.ndarray
    mean_expected_gain: np.ndarray
    mean_diff: np.ndarray
    sd_diff: np.ndarray
    t: np.ndarray
    p_value: np.ndarray


def relevance_test(records: ForestRecords) -> RelevanceTest:
    """Rogers & Gunn's one-sided t-test of H₀: E[IG_diff] ≤ 0 per feature (eqs. 6–9)."""
    F = records.n_features
    diff = records.gain - records.expected_gain
    n_f = np.bincount(records.feature, minlength=F).astype(np.float64)
    safe = np.maximum(n_f, 1)
    mean_gain = np.bincount(records.feature, records.gain, minlength=F) / safe
    mean_exp = np.bincount(records.feature, records.expected_gain, minlength=F) / safe
    mean_diff = np.bincount(records.feature, diff, minlength=F) / safe
    ss = np.bincount(records.feature, (diff - mean_diff[records.feature]) ** 2, minlength=F)
    sd = np.sqrt(np.divide(ss, n_f - 1, out=np.zeros(F), where=n_f > 1))
    testable = n_f >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(testable, mean_diff * np.sqrt(n_f) / sd, 0.0)
    t = np.nan_to_num(t, nan=0.0)  # sd = 0 and mean = 0: no evidence either way
    p = np.ones(F)
    p[testable] = stats.t.sf(t[testable], n_f[testable] - 1)
    return RelevanceTest(n_f.astype(np.int64), mean_gain, mean_exp, mean_diff, sd, t, p)


def forest_relevance(
    X: Any,
    y: Any,
    *,
    n_trees: int = 100,
    gamma: float = 0.05,
    dedup_bootstrap: bool = True,
    seed: Any = None,
) -> FeatureWeights:
    """Rogers & Gunn relevance of each feature: scores are the t statistics t_f (eq. 9).

    ``info`` holds, per feature: ``n_nodes``, ``mean_gain`` (the importance: mean IG in bits),
    ``mean_expected_gain`` (the threshold), ``mean_diff``, ``p_value``, and the selections
    ``selected_thr`` (RF Thr) and ``selected_ht`` (RF HT at level ``gamma``), plus ``expected_false_positives``
    (F·γ), ``tree_sizes`` and ``oob_error``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 6)); y = (X[:, 0] + X[:, 1] > 1).astype(int)
    >>> fw = forest_relevance(X, y, n_trees=30, seed=0)
    >>> sorted(fw.top(2)), fw.info["selected_ht"][:2]
    (['x0', 'x1'], [True, True])
    """
    Xv = as_continuous(X, name="X", min_samples=2)
    codes, classes = as_labels(y, Xv.shape[0])
    if classes.size != 2:
        raise DataError(
            f"y must hold exactly 2 classes for the Rogers & Gunn test (its E[IG] is derived for two-class "
            f"nodes); got {classes.size}. Score one class against the rest."
        )
    if isinstance(n_trees, bool) or not isinstance(n_trees, (int, np.integer)) or n_trees < 1:
        raise DataError(f"n_trees must be a positive integer; got {n_trees!r}.")
    if not 0 < gamma < 1:
        raise DataError(f"gamma must lie in (0, 1); got {gamma!r}. It is the test's significance level.")
    records = grow_relevance_forest(
        Xv.values, codes, n_trees=int(n_trees), dedup_bootstrap=bool(dedup_bootstrap), rng=as_rng(seed)
    )
    test = relevance_test(records)
    thr = test.mean_diff > 0
    ht = thr & (test.p_value < gamma)
    info = {
        "n_nodes": test.n_nodes.tolist(),
        "mean_gain": test.mean_gain.tolist(),
        "mean_expected_gain": test.mean_expected_gain.tolist(),
        "mean_diff": test.mean_diff.tolist(),
        "p_value": test.p_value.tolist(),
        "selected_thr": thr.tolist(),
        "selected_ht": ht.tolist(),
        "gamma": float(gamma),
        "expected_false_positives": float(Xv.shape[1] * gamma),
        "tree_sizes": records.tree_sizes.tolist(),
        "oob_error": records.oob_error,
        "n_trees": int(n_trees),
    }
    scores = np.clip(test.t, -1e300, 1e300)  # a constant positive IG_diff gives t = +inf
    return FeatureWeights(scores, "forest.rogers_gunn", Xv.feature_names, info=info)


class ForestRelevanceSelector(BaseSelector):
    """Select features by Rogers & Gunn's RF Thr (``mode="thr"``) or RF HT (``mode="ht"``, level ``gamma``).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> X = rng.random((200, 5)); y = (X[:, 3] > 0.5).astype(int)
    >>> ForestRelevanceSelector(30, gamma=1e-3, seed=0).fit(X, y).get_support(indices=True).tolist()
    [3]
    """

    _support_from_weights = False

    def __init__(
        self, n_trees: int = 100, *, mode: str = "ht", gamma: float = 0.05, dedup_bootstrap: bool = True,
        seed: Any = None,
    ) -> None:
        self.n_trees = n_trees
        self.mode = mode
        self.gamma = gamma
        self.dedup_bootstrap = dedup_bootstrap
        self.seed = seed

    def _fit(self, X: Any, y: Any) -> FeatureWeights:
        if self.mode not in ("thr", "ht"):
            raise DataError(f"mode must be 'thr' or 'ht'; got {self.mode!r}.")
        if y is None:
            raise DataError("ForestRelevanceSelector needs class labels: call fit(X, y) with y.")
        fw = forest_relevance(
            X, y, n_trees=self.n_trees, gamma=self.gamma, dedup_bootstrap=self.dedup_bootstrap, seed=self.seed
        )
        self.support_ = np.array(fw.info["selected_" + self.mode], dtype=bool)
        return fw
