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
  quantile of Student's t with n_f − 1 degrees of freedom (p-value ≤ γ; γ is the ``significance`` argument).

**Calibration.** The chapter's test is anti-conservative: on pure noise (5 data sets of 160 × 30, balanced
labels, 80 trees) RF HT at γ = 0.05 keeps 13% of the features (the issue's runs: 8.0%). Two causes:
the midpoint E[IG](n) ignores the node's class balance, and — the larger one — the t-test treats the node
records of a feature as independent although every tree reuses one sample, so a feature's chance
association with y is shared by all its records. ``null="permutation"`` fixes the first: the exact null
mean E[IG | class counts] (an irrelevant continuous feature orders the node's labels as a random
permutation; simulated per distinct count vector, seeded by the counts, cached); it still keeps 13%.
``null="shadow"`` (default) fixes both: permuted copies of the columns grow in the same forest and the
real t statistics are referred to the shadows' null sample (see :func:`_shadow_calibrated`). The p-value
is the permutation one, (1 + #{shadows with t_s ≥ t_f}) / (m + 1), which is exact whatever the shape of the
null (issue 31: the earlier version standardised t_f by the shadows' mean and sd and read N(0, 1), which kept
up to 6.8% at γ = 0.05 and 2.2% at γ = 0.01 on pure noise, n ∈ {100, 300, 1000} × p ∈ {20, 50, 200}, because
the moments came from as few as 20 shadows and the null's tails are not normal); beyond the largest shadow
it is extrapolated by the predictive Student tail. Enough shadows are grown for the permutation p-value to
decide the test at γ on its own down to γ = 0.01 (m ≥ 1/γ − 1, at least 20, at most 99). Over 30–300
pure-noise data sets per shape the rates at γ = 0.05 are now 3.4–6.6%, each within about 2 standard errors
of 5% (the counts are overdispersed: the features of one data set share its shadows). The price is power:
moderately relevant features get smaller z than the chapter's t, a feature must beat the shadows, and the
forest is (1 + copies)× larger. Both new nulls handle any number of classes (multi-class information gain,
bits) and assume continuous features (n − 1 distinct cut points); for binary or heavily tied features use
``null="midpoint"``, the chapter's closed form (two classes only).
``correction="bh"`` applies Benjamini–Hochberg to the p-values (false-discovery rate γ).

About F·γ irrelevant features pass HT by chance (without correction). Features used at fewer than two
nodes get no test (p-value 1). Bagged samples have their duplicate rows removed before growing a tree (the bound assumes
distinct points). The trees are scikit-learn's ``DecisionTreeClassifier(criterion="entropy",
max_features=1)`` (an optional dependency, imported when needed), fully grown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special, stats

from latentfs.core.base import BaseSelector, document_input_attributes, require_y
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
    "null_expected_gain",
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
    class_counts: np.ndarray | None = None

    @property
    def expected_gain(self) -> np.ndarray:
        return expected_irrelevant_gain(self.node_size)

    def permutation_expected_gain(self, n_draws: int = 250) -> np.ndarray:
        """E[IG | class counts] of an irrelevant feature at every node (see :func:`null_expected_gain`)."""
        if self.class_counts is None:
            raise DataError("class_counts are needed for the permutation null; grow the forest with "
                            "grow_relevance_forest, which records them.")
        keys, inverse = np.unique(self.class_counts, axis=0, return_inverse=True)
        means = np.array([null_expected_gain(tuple(int(c) for c in row), n_draws) for row in keys])
        return means[np.asarray(inverse).ravel()]


_NULL_CACHE: dict[tuple[tuple[int, ...], int], float] = {}


def _entropy_bits(p: np.ndarray) -> np.ndarray:
    """−Σ_c p_c log₂ p_c along the last axis, 0 log 0 = 0."""
    return np.asarray(special.entr(p).sum(axis=-1) / np.log(2.0))


def null_expected_gain(class_counts: tuple[int, ...], n_draws: int = 250) -> float:
    """E[best-split IG (bits)] of an irrelevant continuous feature at a node with these class counts.

    Such a feature orders the node's labels as a uniformly random permutation; the best split is the best
    of the n − 1 cut points. Simulated from a generator seeded by the counts (deterministic and
    order-independent) and cached; nodes larger than 32 use ``n_draws``·32/n permutations (at least 100),
    since the spread of the best gain shrinks with n. 250 draws put the Monte Carlo error of the mean
    below a tenth of the t-test's standard error in typical forests.

    Examples
    --------
    >>> round(null_expected_gain((1, 1)), 6)   # two points, two classes: always a perfect split
    1.0
    >>> null_expected_gain((5, 0))
    0.0
    """
    counts = tuple(sorted(int(c) for c in class_counts if c > 0))
    key = (counts, int(n_draws))
    if key in _NULL_CACHE:
        return _NULL_CACHE[key]
    n = sum(counts)
    if len(counts) < 2:
        _NULL_CACHE[key] = 0.0
        return 0.0
    rng = np.random.default_rng(list(counts))
    labels = np.repeat(np.arange(len(counts)), counts)
    draws = max(100, int(np.ceil(n_draws * 32 / max(n, 32))))
    perms = rng.permuted(np.tile(labels, (draws, 1)), axis=1)
    onehot = perms[:, :, None] == np.arange(len(counts))
    left = np.cumsum(onehot, axis=1)[:, :-1, :].astype(np.float64)  # (R, n − 1, C)
    m = np.arange(1, n, dtype=np.float64)[None, :, None]
    total = np.asarray(counts, dtype=np.float64)
    h_parent = float(_entropy_bits(total / n))
    h_children = (m[..., 0] * _entropy_bits(left / m) + (n - m[..., 0]) * _entropy_bits((total - left) / (n - m))) / n
    value = float(np.mean(h_parent - h_children.min(axis=1)))
    _NULL_CACHE[key] = value
    return value


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
    feats, gains, sizes, tree_sizes, counts = [], [], [], [], []
    n_classes = int(codes.max()) + 1
    votes = np.zeros((n, n_classes))
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
        frac = np.zeros((inner.size, n_classes))
        frac[:, tree.classes_] = t.value[inner, 0, :]  # class fractions of the node (weighted_n = n here)
        counts.append(np.rint(frac * n_node[:, None]).astype(np.int64))
        tree_sizes.append(t.node_count)
        out = np.setdiff1d(np.arange(n), idx, assume_unique=False)
        if out.size:
            pred = tree.predict(X[out])
            votes[out, pred] += 1  # predict returns codes (the trees are fitted on codes)
    voted = votes.sum(axis=1) > 0
    oob = float(np.mean(votes[voted].argmax(axis=1) != codes[voted])) if voted.any() else float("nan")
    return ForestRecords(
        feature=np.concatenate(feats).astype(np.int64),
        gain=np.concatenate(gains),
        node_size=np.concatenate(sizes).astype(np.int64),
        tree_sizes=np.array(tree_sizes),
        oob_error=oob,
        n_features=F,
        class_counts=np.concatenate(counts),
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


def relevance_test(records: ForestRecords, *, null: str = "midpoint", n_null_draws: int = 250) -> RelevanceTest:
    """Rogers & Gunn's one-sided t-test of H₀: E[IG_diff] ≤ 0 per feature (eqs. 6–9).

    ``null="midpoint"``: E[IG](n) is the chapter's midpoint of eqs. 3–4; ``null="permutation"``: the exact
    null mean given the node's class counts (:func:`null_expected_gain`).
    """
    F = records.n_features
    if null not in ("midpoint", "permutation"):
        raise DataError(f"null must be 'midpoint' or 'permutation'; got {null!r}.")
    expected = records.expected_gain if null == "midpoint" else records.permutation_expected_gain(n_null_draws)
    diff = records.gain - expected
    n_f = np.bincount(records.feature, minlength=F).astype(np.float64)
    safe = np.maximum(n_f, 1)
    mean_gain = np.bincount(records.feature, records.gain, minlength=F) / safe
    mean_exp = np.bincount(records.feature, expected, minlength=F) / safe
    mean_diff = np.bincount(records.feature, diff, minlength=F) / safe
    ss = np.bincount(records.feature, (diff - mean_diff[records.feature]) ** 2, minlength=F)
    sd = np.sqrt(np.divide(ss, n_f - 1, out=np.zeros(F), where=n_f > 1))
    testable = n_f >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(testable, mean_diff * np.sqrt(n_f) / sd, 0.0)
    # sd = 0 and mean = 0: no evidence either way (t = 0). sd = 0 and mean ≠ 0 (identical IG_diff at every node,
    # e.g. perfect splits of nodes with the same class counts): t = ±inf, the limit, so p = 0 or 1; it used to
    # become ±1.8e308, which overflowed the shadow null's moments (NaN p-values on NCI60)
    t = np.where(np.isnan(t), 0.0, t)
    p = np.ones(F)
    p[testable] = stats.t.sf(t[testable], n_f[testable] - 1)
    return RelevanceTest(n_f.astype(np.int64), mean_gain, mean_exp, mean_diff, sd, t, p)


def _min_shadows(significance: float) -> int:
    """Shadows grown for level γ: enough for the permutation p-value to decide the test on its own
    (1/(m + 1) ≤ γ) down to γ = 0.01, and at least 20 for the null's moments."""
    return int(min(99, max(20, np.ceil(1.0 / significance) - 1)))


def _shadow_calibrated(test: RelevanceTest, F: int, significance: float = 0.05) -> RelevanceTest:
    """Refer the t statistics of the first F (real) features to the null sample of the shadow features.

    The chapter's t-test treats node records as independent, but every tree reuses one sample, so a
    feature's chance association with y in that sample is shared by all its records and the test is
    anti-conservative however E[IG] is centred. Shadows (each column permuted over rows) carry the same
    kind of chance association and are exchangeable with an irrelevant feature, so their t statistics are
    a sample from the null. The score is Efron's empirical-null z (Efron 2004, JASA 99:96): t_f standardised by
    the shadows' mean and standard deviation, z_f = (t_f − t̄_s) / s_s.

    The p-value is the permutation one where the shadows resolve it, p_f = (1 + #{s : t_s ≥ t_f}) / (m + 1) over
    m testable shadows, which is valid for an irrelevant feature whatever the null's shape: P(p_f ≤ γ) =
    ⌊γ(m + 1)⌋ / (m + 1) ≤ γ. So that this equals γ (``significance``) rather than falling short of it by up to
    1/(m + 1) (3.9% at γ = 0.05 with 50 shadows), m is the largest count not above the testable shadows with
    γ(m + 1) a whole number when γ allows it (the first such shadows; 19 of 20 or 39 of 50 at γ = 0.05). Above
    every counted shadow the p-value is extrapolated by the predictive Student tail, capped at 1/(m + 1): for
    n draws from a normal null a new draw satisfies (t_f − t̄_s) / (s_s √(1 + 1/n)) ~ t_{n−1} (the moments use
    every finite shadow).
    Before, z_f was referred to N(0, 1) everywhere, which ignored both that t̄_s and s_s come from as few as
    20 shadows and that the null's tails are not normal (heavier with 20–50 features, lighter with 200); see
    the module docstring for the rates.
    """
    testable = test.n_nodes >= 2  # as in relevance_test
    null = test.t[F:][testable[F:]]  # the null sample (±inf kept for the counts)
    finite = null[np.isfinite(null)]  # its moments from the finite t only
    m, m_finite = int(null.size), int(finite.size)
    centre = float(np.mean(finite)) if m_finite >= 2 else 0.0
    spread = float(np.std(finite, ddof=1)) if m_finite >= 2 else 1.0
    z = (test.t[:F] - centre) / max(spread, 1e-12)
    # fewer than two finite shadows: no estimate of the null's spread; the chapter's t as it is, against N(0, 1)
    tail = stats.t.sf(z / np.sqrt(1.0 + 1.0 / m_finite), m_finite - 1) if m_finite >= 2 else stats.norm.sf(z)
    if m:
        whole = int(np.floor(significance * (m + 1) + 1e-9))  # ⌊γ(m + 1)⌋
        if whole >= 1:  # the most shadows with γ(m + 1) whole (up to rounding of γ): the level is then γ itself
            m = min(m, int(np.ceil(whole / significance - 1e-9)) - 1)
        counted = np.sort(null[:m])
        exceed = m - np.searchsorted(counted, test.t[:F], side="left")  # #{t_s ≥ t_f}
        tail = np.where(exceed > 0, (1.0 + exceed) / (m + 1.0), np.minimum(tail, 1.0 / (m + 1.0)))
    p = np.where(testable[:F], tail, 1.0)
    return RelevanceTest(
        test.n_nodes[:F], test.mean_gain[:F], test.mean_expected_gain[:F], test.mean_diff[:F], test.sd_diff[:F],
        z, p,
    )


def forest_relevance(
    X: Any,
    y: Any,
    *,
    n_trees: int = 100,
    significance: float = 0.05,
    null: str = "shadow",
    correction: str | None = None,
    n_null_draws: int = 250,
    dedup_bootstrap: bool = True,
    seed: Any = None,
) -> FeatureWeights:
    """Rogers & Gunn relevance of each feature: scores are the t statistics t_f (eq. 9).

    Parameters
    ----------
    X : array-like, shape (n_samples, n_features)
    y : array-like, shape (n_samples,)
        Class labels; two classes for ``null="midpoint"``, any number for ``null="permutation"``.
    n_trees : int
    significance : float, default 0.05
        The chapter's γ: the per-feature level of RF HT, or the false-discovery rate with
        ``correction="bh"``.
    null : {"shadow", "permutation", "midpoint"}
        How the null is obtained (see the module docstring). ``"shadow"`` (default, calibrated): IG_diff
        centred by the exact permutation mean, and each t_f referred to the empirical null of the t
        statistics of shadow features (permuted copies of the columns grown in the same forest): a
        permutation p-value, exact at level ``significance``. The forest then grows ``n_trees``·(1 + copies)
        trees (copies = ⌈m/F⌉ sets of shadows, m = max(20, min(99, ⌈1/γ⌉ − 1)), so 20 at γ = 0.05 and 99 at
        γ = 0.01) so each real feature is split on as often as without shadows; the cost grows accordingly.
        ``"permutation"``: the exact mean given the node's class counts with the chapter's t-test.
        ``"midpoint"``: the chapter's test as printed (two classes).
    correction : {None, "bh"}
        ``"bh"``: Benjamini–Hochberg adjusted p-values (``info["q_value"]``) are compared with ``significance``.
    n_null_draws : int
        Permutations per distinct class-count vector for ``null="permutation"``.
    dedup_bootstrap : bool
    seed : int or Generator, optional

    ``info`` holds, per feature: ``n_nodes``, ``mean_gain`` (the importance: mean IG in bits),
    ``mean_expected_gain`` (the threshold), ``mean_diff``, ``p_value``, ``q_value`` (BH-adjusted), and the
    selections ``selected_thr`` (RF Thr) and ``selected_ht`` (RF HT at level ``significance``), plus
    ``expected_false_positives`` (F·``significance`` without correction), ``tree_sizes`` and ``oob_error``.

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
    if null not in ("shadow", "midpoint", "permutation"):
        raise DataError(f"null must be 'shadow', 'permutation' or 'midpoint'; got {null!r}.")
    if null == "midpoint" and classes.size != 2:
        raise DataError(
            f"y must hold exactly 2 classes for null='midpoint' (the chapter's E[IG] is derived for two-class "
            f"nodes); got {classes.size}. Use null='permutation' (multi-class information gain)."
        )
    if correction not in (None, "bh"):
        raise DataError(f"correction must be None or 'bh'; got {correction!r}.")
    if isinstance(n_trees, bool) or not isinstance(n_trees, (int, np.integer)) or n_trees < 1:
        raise DataError(f"n_trees must be a positive integer; got {n_trees!r}.")
    if isinstance(n_null_draws, bool) or not isinstance(n_null_draws, (int, np.integer)) or n_null_draws < 10:
        raise DataError(f"n_null_draws must be an integer ≥ 10; got {n_null_draws!r}.")
    if isinstance(significance, bool) or not isinstance(significance, (int, float, np.number)) \
            or not 0 < significance < 1:
        raise DataError(
            f"significance must lie in (0, 1); got {significance!r}. It is the test's level (per feature, or the "
            "false-discovery rate with correction='bh'); pass for example significance=0.05."
        )
    rng = as_rng(seed)
    values, F = Xv.values, Xv.shape[1]
    n_copies = 0
    if null == "shadow":
        n_copies = int(np.ceil(_min_shadows(float(significance)) / F))
        shadows = [rng.permuted(values, axis=0) for _ in range(n_copies)]
        values = np.hstack([values, *shadows])
    # with shadows, grow (1 + copies)× the trees so each real feature keeps the records it would have had
    records = grow_relevance_forest(
        values, codes, n_trees=int(n_trees) * (1 + n_copies), dedup_bootstrap=bool(dedup_bootstrap), rng=rng
    )
    test = relevance_test(records, null="midpoint" if null == "midpoint" else "permutation",
                          n_null_draws=int(n_null_draws))
    if null == "shadow":
        test = _shadow_calibrated(test, F, float(significance))
    q = stats.false_discovery_control(test.p_value, method="bh")
    thr = test.mean_diff > 0
    ht = thr & ((q if correction == "bh" else test.p_value) <= significance)  # p ≤ γ: a permutation p-value
    info = {
        "n_nodes": test.n_nodes.tolist(),
        "mean_gain": test.mean_gain.tolist(),
        "mean_expected_gain": test.mean_expected_gain.tolist(),
        "mean_diff": test.mean_diff.tolist(),
        "p_value": test.p_value.tolist(),
        "q_value": q.tolist(),
        "selected_thr": thr.tolist(),
        "selected_ht": ht.tolist(),
        "significance": float(significance),
        "null": null,
        "correction": correction,
        "expected_false_positives": float(Xv.shape[1] * significance),
        "tree_sizes": records.tree_sizes.tolist(),
        "oob_error": records.oob_error,
        "n_trees": int(n_trees),
    }
    scores = np.clip(test.t, -1e300, 1e300)  # a constant positive IG_diff gives t = +inf
    return FeatureWeights(scores, "forest.rogers_gunn", Xv.feature_names, info=info)


@document_input_attributes
class ForestRelevanceSelector(BaseSelector):
    """Select features by Rogers & Gunn's RF Thr (``mode="thr"``) or RF HT (``mode="ht"``, level
    ``significance``).

    Parameters
    ----------
    n_trees : int
    mode : {"thr", "ht"}
        RF Thr (mean IG_diff > 0) or RF HT (also the test at level ``significance``).
    significance, null, correction, n_null_draws, dedup_bootstrap
        As in :func:`forest_relevance` (``significance`` is the test's level, the chapter's γ); the default shadow
        null is calibrated and works for any number of classes.
    seed : int, Generator or None, default 0
        Randomness of the bootstrap, the trees and the shadow columns.

    Attributes
    ----------
    weights_ : FeatureWeights
        The t statistics, with the per-feature test in ``info``.
    support_ : ndarray of bool (n_features,)

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> X = rng.random((200, 5)); y = (X[:, 3] > 0.5).astype(int)
    >>> ForestRelevanceSelector(30, significance=1e-3, seed=0).fit(X, y).get_support(indices=True).tolist()
    [3]
    """

    _support_from_weights = False
    _requires_y = True
    _min_samples = 2

    def __init__(
        self, n_trees: int = 100, *, mode: str = "ht", significance: float = 0.05, null: str = "shadow",
        correction: str | None = None, n_null_draws: int = 250, dedup_bootstrap: bool = True, seed: Any = 0,
    ) -> None:
        self.n_trees = n_trees
        self.mode = mode
        self.significance = significance
        self.null = null
        self.correction = correction
        self.n_null_draws = n_null_draws
        self.dedup_bootstrap = dedup_bootstrap
        self.seed = seed

    def _fit(self, X: Any, y: Any) -> FeatureWeights:
        if self.mode not in ("thr", "ht"):
            raise DataError(f"mode must be 'thr' or 'ht'; got {self.mode!r}.")
        require_y(self, y, "ForestRelevanceSelector needs class labels: call fit(X, y) with y")
        fw = forest_relevance(
            X, y, n_trees=self.n_trees, significance=self.significance, null=self.null, correction=self.correction,
            n_null_draws=self.n_null_draws, dedup_bootstrap=self.dedup_bootstrap, seed=self.seed,
        )
        self.support_ = np.array(fw.info["selected_" + self.mode], dtype=bool)
        return fw
