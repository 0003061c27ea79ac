"""Leverage-score feature selection for k-means (Boutsidis, Mahoney & Drineas, NIPS 2009).

The top-``k`` right singular vectors ``V_k`` (d × k) of the data ``A`` (n × d) give each feature a
leverage score ``‖(V_k)_(i)‖²``; normalised by ``k`` they are the sampling probabilities ``p_i`` of
Boutsidis, Mahoney & Drineas (2009), Algorithm 1. Sampling ``r`` features i.i.d. from ``p`` and
rescaling each draw by ``1/sqrt(r p_i)`` gives ``Ã = A S D`` with ``E[Ã Ãᵀ] = A Aᵀ``; k-means on ``Ã``
approximates k-means on ``A`` (their Theorem 1; see the digest for a gap in its proof, so this
module certifies results through the always-valid lower bound ``‖A − A_k‖²_F ≤ F_opt`` instead).

Besides the paper's i.i.d. scheme the module offers independent Bernoulli sampling (keep feature ``i``
with probability ``min(1, r p_i)``, weight ``1/sqrt(min(1, r p_i))``), and the deterministic top-``r``
rule (Jolliffe's B3). Singular vectors come from an exact SVD or a randomized range finder (Halko,
Martinsson & Tropp 2011), both of which work on ``scipy.sparse`` input without densifying it; centring
is applied implicitly (:mod:`latentfs.select.singular`, shared with :mod:`latentfs.select.bss` and
:mod:`latentfs.select.q_alpha`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from latentfs.core.base import BaseSelector, document_input_attributes, rescaled
from latentfs.core.data import DataError, check_n_components
from latentfs.core.weights import FeatureWeights
from latentfs.select.singular import _as_matrix, _factor, _rng, right_singular_vectors

__all__ = [
    "KMeansResult",
    "LeverageScoreSelector",
    "clustering_accuracy",
    "kmeans",
    "kmeans_feature_selection",
    "kmeans_objective",
    "leverage_scores",
    "leverage_scores_from_data",
    "bernoulli_inclusion",
    "merge_duplicates",
    "right_singular_vectors",
    "sample_features",
    "svd_lower_bound",
]



# ---------------------------------------------------------------------------------------------
# leverage scores and sampling
# ---------------------------------------------------------------------------------------------
def leverage_scores(V: np.ndarray) -> np.ndarray:
    """Sampling probabilities ``p_i = ‖V_(i)‖² / ‖V‖²_F`` (BMD 2009, Alg. 1 step 2; ``‖V‖²_F = k``).

    Examples
    --------
    >>> import numpy as np
    >>> leverage_scores(np.eye(3)[:, :2]).tolist()
    [0.5, 0.5, 0.0]
    """
    raw = np.einsum("ij,ij->i", V, V)
    return raw / raw.sum()


def leverage_scores_from_data(
    X: Any,
    n_components: int | None = None,
    *,
    method: str = "exact",
    center: bool = False,
    rtol: float | None = None,
    n_oversamples: int = 10,
    n_iter: int = 4,
    seed: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Leverage-score probabilities of the top right singular vectors of ``X``, without forming them.

    Equal to ``leverage_scores(right_singular_vectors(X, ...)[0])`` (same options, same rank rule and
    errors), computed from the small side: with ``A Aᵀ = U Σ² Uᵀ`` (n ≤ d), ``V = Aᵀ U Σ⁻¹`` and
    ``‖V_(j)‖² = ‖A_{:,j}ᵀ U Σ⁻¹‖²``, evaluated a block of columns at a time.

    Memory (``method="exact"``, n ≤ d): O(d + n² + n·block) — neither the d × k matrix V nor a dense copy
    of ``X`` is held. Sparse ``X``: the n × n Gram matrix of the (implicitly centred) rows, as
    :func:`right_singular_vectors` uses; dense ``X``: a streaming QR of ``Xᵀ`` (TSQR), which keeps the
    condition number unsquared. The scores of directions with small singular values carry an error of
    order ``eps · σ₁/σ_k``. ``method="randomized"`` and n > d still form V (d × (k + n_oversamples) for
    the range finder, d × rank for the d × d Gram), which is inherent to those methods.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix, shape (n_samples, n_features)
    n_components, method, center, rtol, n_oversamples, n_iter, seed
        As in :func:`right_singular_vectors`.

    Returns
    -------
    p : ndarray, shape (n_features,)
        ``‖V_(j)‖² / ‖V‖²_F`` (sums to 1).
    sigma : ndarray, shape (k,)
        The singular values used.

    Examples
    --------
    >>> import numpy as np
    >>> p, s = leverage_scores_from_data(np.diag([3.0, 2.0, 1.0]), 2)
    >>> np.round(p, 12).tolist(), np.round(s, 12).tolist()
    ([0.5, 0.5, 0.0], [3.0, 2.0])
    """
    A, _ = _as_matrix(X)
    fac = _factor(A, n_components, method=method, center=center, rtol=rtol, rng=_rng(seed),
                  n_oversamples=n_oversamples, n_iter=n_iter, scores_only=True)
    raw = fac.row_norms2()
    return raw / raw.sum(), fac.sigma


def _sample_iid(p: np.ndarray, r: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    # r i.i.d. trials (with replacement), draw t rescaled by 1/sqrt(r p_{i_t}) (BMD 2009, Alg. 1)
    idx = rng.choice(p.size, size=r, replace=True, p=p)
    return idx, 1.0 / np.sqrt(r * p[idx])


def bernoulli_inclusion(p: np.ndarray, r: float) -> np.ndarray:
    """Inclusion probabilities p̃_i = min(1, c p_i) with c chosen so that Σ p̃_i = r (r ≤ #{p_i > 0}).

    ``min(1, r p_i)`` (c = r) sums to less than r as soon as some r p_i > 1; the capped features are kept
    surely and c is raised so that the others make up the rest.

    Examples
    --------
    >>> bernoulli_inclusion(np.array([0.7, 0.2, 0.1]), 2).round(6).tolist()
    [1.0, 0.666667, 0.333333]
    """
    p = np.asarray(p, dtype=np.float64)
    order = np.argsort(-p, kind="stable")
    ps = p[order]
    tail = np.cumsum(ps[::-1])[::-1]  # Σ_{i ≥ j} of the sorted p
    for j in range(ps.size):  # the j largest are capped at 1; the rest get c p_i with c (tail_j) = r − j
        if ps[j] <= 0:
            break
        c = (r - j) / tail[j]
        if c * ps[j] <= 1.0:
            break
    pt = np.minimum(1.0, c * p)
    pt[order[:j]] = 1.0
    return pt


def _sample_bernoulli(p: np.ndarray, r: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    # keep i with probability p̃_i = min(1, c p_i), Σ p̃_i = r, weight 1/sqrt(p̃_i) (digest, B3 scheme (b))
    pt = bernoulli_inclusion(p, r)
    idx = np.flatnonzero(rng.random(p.size) < pt)
    return idx, 1.0 / np.sqrt(pt[idx])


def _sample_until_distinct(p: np.ndarray, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """I.i.d. draws from p until m distinct features have been drawn: (the m features, their counts, r draws).

    Drawn without simulating the sequence: the order in which features first appear in an i.i.d. sequence is
    successive sampling without replacement ∝ p, drawn at once with the keys log(u_i)/p_i (Efraimidis &
    Spirakis 2006); after the j-th new feature the draws of already-seen features before the next new one
    are geometric with success probability the unseen mass, and each lands on a seen feature ∝ p, which is
    apportioned backwards by binomial thinning. O(d log d + m).
    """
    support = np.flatnonzero(p > 0)
    keys = np.log(rng.random(support.size)) / p[support]
    order = support[np.argsort(-keys, kind="stable")]
    ps = p[order]
    unseen = np.cumsum(ps[::-1])[::-1]  # mass not yet drawn before each first appearance (small terms first)
    q = unseen[1:m]  # after the j-th new feature (j = 1..m−1)
    if q.size and float(q.min()) < 1e-12:
        raise DataError(
            f"n_features_to_select={m} needs features whose leverage mass is {float(q.min()):.1e}: i.i.d. "
            "sampling would take about 1e12 or more draws to reach them. Ask for fewer features, or use "
            "scheme='top' or scheme='bernoulli'."
        )
    repeats = rng.geometric(q) - 1  # draws of already-seen features between the j-th and (j+1)-th new one
    seen = np.cumsum(ps[:m])
    counts = np.ones(m, dtype=np.int64)
    carry = 0
    for j in range(m - 2, -1, -1):  # repeats at stage j fall on features 0..j ∝ p
        carry += int(repeats[j])
        k = int(rng.binomial(carry, min(ps[j] / seen[j], 1.0))) if j > 0 else carry
        counts[j] += k
        carry -= k
    return order[:m], counts, int(counts.sum())


def _sample_top(p: np.ndarray, r: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    # deterministic: the r highest scores, unweighted (Jolliffe's B3)
    idx = np.argsort(-p, kind="stable")[:r]
    return idx, np.ones(r)


_SCHEMES: dict[str, Callable[[np.ndarray, int, np.random.Generator], tuple[np.ndarray, np.ndarray]]] = {
    "iid": _sample_iid,
    "bernoulli": _sample_bernoulli,
    "top": _sample_top,
}


def _check_r(r: Any, d: int, scheme: str, name: str = "n_features_to_select") -> int:
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise DataError(f"{name} must be a positive integer; got {r!r}.")
    if scheme != "iid" and r > d:
        raise DataError(
            f"{name} must be at most the number of features ({d}) for scheme {scheme!r}; got {r} "
            f"(n_features = {d}). "
            "Choose fewer features (or scheme='iid', which samples with replacement)."
        )
    return int(r)


def sample_features(p: Any, r: int, *, scheme: str = "iid", seed: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Draw features from probabilities ``p``: returns (indices, rescaling weights), one per draw.

    ``scheme="iid"``: ``r`` i.i.d. draws with weight ``1/sqrt(r p_i)`` (BMD 2009, Alg. 1);
    ``"bernoulli"``: independent keeps with probability ``min(1, r p_i)``, weight ``1/sqrt(min(1, r p_i))``;
    ``"top"``: the ``r`` largest ``p_i``, weight 1. The random schemes are unbiased:
    ``E[S D² Sᵀ] = I``.

    Examples
    --------
    >>> idx, w = sample_features([0.5, 0.25, 0.25], 2, scheme="top")
    >>> idx.tolist(), w.tolist()
    ([0, 1], [1.0, 1.0])
    """
    p = np.asarray(p, dtype=np.float64)
    if scheme not in _SCHEMES:
        raise DataError(f"scheme must be one of {sorted(_SCHEMES)}; got {scheme!r}.")
    if p.ndim != 1 or np.any(p < 0) or not np.isfinite(p).all() or abs(p.sum() - 1) > 1e-8:
        raise DataError("p must be a 1-D probability vector (non-negative, summing to 1); "
                        f"got sum {p.sum() if p.size else 0:g}. Normalise it with p / p.sum().")
    r = _check_r(r, p.size, scheme, name="r")
    return _SCHEMES[scheme](p, r, _rng(seed))


def merge_duplicates(indices: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge repeated draws: feature drawn c times with weight w gets one column of weight sqrt(c) w.

    ``Ã Ãᵀ`` (and therefore every k-means or SVM computed from it) is unchanged.

    Examples
    --------
    >>> merge_duplicates(np.array([2, 0, 2]), np.array([1.0, 1.0, 1.0]))[1].tolist()
    [1.0, 1.4142135623730951]
    """
    uniq, inv = np.unique(indices, return_inverse=True)
    sq = np.zeros(uniq.size)
    np.add.at(sq, inv, np.asarray(weights, dtype=np.float64) ** 2)
    return uniq, np.sqrt(sq)


# ---------------------------------------------------------------------------------------------
# k-means
# ---------------------------------------------------------------------------------------------
def kmeans_objective(X: Any, labels: Any) -> float:
    """``‖A − X Xᵀ A‖²_F``: the sum of squared distances to cluster centroids (BMD 2009, Def. 1).

    Examples
    --------
    >>> kmeans_objective(np.array([[0.0], [2.0], [10.0]]), [0, 0, 1])
    2.0
    """
    A = X if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels)
    total = float(A.multiply(A).sum()) if sp.issparse(A) else float(np.sum(A * A))
    for g in np.unique(labels):
        rows = np.flatnonzero(labels == g)
        s = np.asarray(A[rows].sum(axis=0)).ravel()
        total -= float(s @ s) / rows.size
    return max(total, 0.0)


def svd_lower_bound(X: Any, n_components: int) -> float:
    """``‖A − A_k‖²_F``, a lower bound on the optimal k-means objective (BMD 2009, eq. 5).

    Examples
    --------
    >>> round(svd_lower_bound(np.diag([3.0, 2.0, 1.0]), 2), 12)
    1.0
    """
    k = n_components
    A, _ = _as_matrix(X)
    total = float(A.multiply(A).sum()) if sp.issparse(A) else float(np.sum(A * A))
    s = _factor(A, None, method="exact", center=False, rtol=0.0, rng=np.random.default_rng(0),
                scores_only=True).sigma  # singular values only: no V
    return max(total - float(np.sum(s[:k] ** 2)), 0.0)


@dataclass(frozen=True)
class KMeansResult:
    """Output of :func:`kmeans`: ``labels`` (n,), ``centers`` (k, d), ``objective`` (sum of squared
    distances to the centres), ``n_iter`` of the best restart."""

    labels: np.ndarray
    centers: np.ndarray
    objective: float
    n_iter: int


def kmeans(X: Any, n_components: int, *, n_init: int = 10, max_iter: int = 100, seed: Any = None) -> KMeansResult:
    """Lloyd's algorithm from ``n_init`` k-means++ starts; the lowest objective wins.

    scikit-learn's :class:`~sklearn.cluster.KMeans` (k-means++ seeding, Arthur & Vassilvitskii 2007) with its
    ``random_state`` drawn from ``seed``; the result is returned in this module's :class:`KMeansResult`.

    Examples
    --------
    >>> res = kmeans(np.array([[0.0], [0.1], [5.0], [5.1]]), 2, seed=0)
    >>> sorted(np.bincount(res.labels).tolist()), round(res.objective, 6)
    ([2, 2], 0.01)
    """
    k = n_components
    from sklearn.cluster import KMeans

    A = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    k = check_n_components(k, A.shape[0], name="n_components", what="the number of samples")
    rng = _rng(seed)
    km = KMeans(k, init="k-means++", n_init=int(n_init), max_iter=int(max_iter),
                random_state=int(rng.integers(2**31 - 1))).fit(A)
    labels = np.asarray(km.labels_)
    return KMeansResult(labels, np.asarray(km.cluster_centers_), kmeans_objective(A, labels), int(km.n_iter_))


def clustering_accuracy(labels: Any, y: Any) -> float:
    """Fraction of samples whose cluster maps to their class under the best one-to-one matching
    (Hungarian algorithm); the "P" of BMD 2009, Table 1.

    Examples
    --------
    >>> clustering_accuracy([1, 1, 0, 0], ["a", "a", "b", "a"])
    0.75
    """
    from scipy.optimize import linear_sum_assignment

    _, lab = np.unique(np.asarray(labels), return_inverse=True)
    _, cls = np.unique(np.asarray(y), return_inverse=True)
    table = np.zeros((lab.max() + 1, cls.max() + 1))
    np.add.at(table, (lab, cls), 1)
    r, c = linear_sum_assignment(-table)
    return float(table[r, c].sum() / lab.size)


# ---------------------------------------------------------------------------------------------
# selector
# ---------------------------------------------------------------------------------------------
@document_input_attributes
class LeverageScoreSelector(BaseSelector):
    """Leverage-score feature selection for k-means (Boutsidis, Mahoney & Drineas 2009, Algorithm 1).

    ``weights_`` holds the probabilities ``p_i = ‖(V_k)_(i)‖²/k`` from the top-``k`` right singular
    vectors; the support is the set of sampled features (duplicates merged), and ``scale_`` the merged
    rescaling weights ``sqrt(c_i / (r p_i))`` (c_i the draws of feature i out of r), which :meth:`transform`
    applies (``rescale=True``).

    Parameters
    ----------
    n_features_to_select : int, optional
        The number of features kept. ``"iid"``: i.i.d. draws from p until that many distinct features have
        been drawn (the paper's scheme, with r the number of draws this took, recorded in
        ``weights_.info["n_draws"]``); ``"top"``: the largest p_i; ``"bernoulli"``: the **expected**
        number kept (the count itself is random). Default ``min(10 k, n_features)``, the paper's practical
        choice of 10 k.
    n_draws : int, optional
        ``scheme="iid"`` only, instead of ``n_features_to_select``: the paper's r, a fixed number of i.i.d.
        draws; repeats are merged, so fewer than r features are kept.
    n_components : int
        ``k``, the number of clusters (the rank of ``V_k``); at most the numerical rank of ``X``.
    scheme : {"iid", "bernoulli", "top"}
    svd : {"exact", "randomized"}
    center : bool
        Centre the columns before the SVD (the paper does not; k-means is translation invariant).
    rescale : bool
        Apply ``scale_`` in :meth:`transform` (the guarantees assume it).
    seed : int, Generator or None, default 0
        Randomness of the sampling (and of ``svd="randomized"``); a fixed default, so that one call gives
        one selection (``None`` draws fresh entropy).

    Attributes
    ----------
    weights_ : FeatureWeights
    support_ : ndarray of bool (n_features,)
    scale_ : ndarray (n_selected,)
    sample_indices_, sample_weights_ : ndarray
        The raw draws before merging duplicates (``n_draws``, ``"bernoulli"``, ``"top"``); with
        ``n_features_to_select`` and ``"iid"`` the kept features and their merged weights.
    singular_values_ : ndarray (k,)

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 30)); X[:20, :3] += 6.0
    >>> LeverageScoreSelector(3, n_components=1, scheme="top").fit(X).get_support(indices=True).tolist()
    [0, 1, 2]
    >>> int(LeverageScoreSelector(12, n_components=1).fit(X).get_support().sum())
    12
    """

    _support_from_weights = False
    _accept_sparse = True

    def __init__(self, n_features_to_select: int | None = None, *, n_draws: int | None = None,
                 n_components: int = 2, scheme: str = "iid", svd: str = "exact", center: bool = False,
                 rescale: bool = True, seed: Any = 0) -> None:
        self.n_features_to_select = n_features_to_select
        self.n_draws = n_draws
        self.n_components = n_components
        self.scheme = scheme
        self.svd = svd
        self.center = center
        self.rescale = rescale
        self.seed = seed

    def _fit(self, X: Any, y: Any = None) -> FeatureWeights:
        A, names = _as_matrix(X)
        if self.scheme not in _SCHEMES:
            raise DataError(f"scheme must be one of {sorted(_SCHEMES)}; got {self.scheme!r}.")
        if self.n_draws is not None:
            if self.n_features_to_select is not None:
                raise DataError(
                    f"pass n_features_to_select or n_draws, not both; got n_features_to_select="
                    f"{self.n_features_to_select!r} and n_draws={self.n_draws!r}. n_features_to_select is the "
                    "number kept; n_draws the paper's number of i.i.d. draws (repeats merged)."
                )
            if self.scheme != "iid":
                raise DataError(
                    f"n_draws applies to scheme='iid' only (a number of i.i.d. draws); got scheme={self.scheme!r}. "
                    "Pass n_features_to_select instead."
                )
            _check_r(self.n_draws, A.shape[1], "iid", name="n_draws")
        d = A.shape[1]
        k = check_n_components(self.n_components, min(A.shape), name="n_components",
                               what="min(n_samples, n_features)")
        rng = _rng(self.seed)
        # scores straight from the small side (no d × k matrix V for the exact SVD of a wide X)
        fac = _factor(A, k, method=self.svd, center=self.center, rtol=None, rng=rng, scores_only=True)
        raw = fac.row_norms2()
        p, sigma = raw / raw.sum(), fac.sigma
        n_positive = int(np.count_nonzero(p > 0))
        info: dict[str, Any] = {"n_components": k, "scheme": self.scheme, "svd": self.svd,
                                "definition": "p_i = ||(V_k)_(i)||^2 / k (BMD 2009, Alg. 1)"}
        if self.n_draws is not None:
            r = int(self.n_draws)
            idx, w = _sample_iid(p, r, rng)
            info.update(r=r, n_draws=r)
        else:
            m = min(10 * k, d) if self.n_features_to_select is None else self.n_features_to_select
            m = _check_r(m, d, "iid", name="n_features_to_select")
            if m > d:  # a number kept: at most d for every scheme
                raise DataError(
                    f"n_features_to_select must be at most the number of features (n_features = {d}); got {m}. It is "
                    "the number "
                    f"of features kept; for the paper's r i.i.d. draws (repeats merged) pass n_draws={m} instead."
                )
            if self.scheme != "top" and m > n_positive:
                raise DataError(
                    f"n_features_to_select must be at most the number of features with non-zero leverage "
                    f"({n_positive} of {d}) for scheme {self.scheme!r}; got {m}. Ask for fewer, or use scheme='top'."
                )
            if self.scheme == "iid":
                idx, counts, r = _sample_until_distinct(p, m, rng)
                w = np.sqrt(counts / (r * p[idx]))  # the merged sqrt(c_i / (r p_i)) of BMD's rescaling
                info.update(r=r, n_draws=r)
            else:
                idx, w = _SCHEMES[self.scheme](p, m, rng)
                info.update(r=m)
                if self.scheme == "bernoulli":
                    info["expected_kept"] = float(bernoulli_inclusion(p, m).sum())
        self.sample_indices_, self.sample_weights_ = idx, w
        uniq, merged = merge_duplicates(idx, w)
        self.support_ = np.zeros(A.shape[1], dtype=bool)
        self.support_[uniq] = True
        self.scale_ = merged
        self.singular_values_ = sigma
        return FeatureWeights(p, "leverage_kmeans", feature_names=names, info=info)

    def _transform(self, X: Any) -> Any:
        out = super()._transform(X)
        return rescaled(out, self.scale_) if self.rescale else out


@dataclass(frozen=True)
class KMeansSelectionResult:
    """Output of :func:`kmeans_feature_selection`: the partition of the full data found on the
    selected features, its objective ``F`` on the full data, and the selection used."""

    labels: np.ndarray
    objective: float
    support: np.ndarray
    scale: np.ndarray
    certified_ratio: float


def kmeans_feature_selection(X: Any, n_components: int, r: int | None = None, *, n_repeats: int = 1,
                             scheme: str = "iid", svd: str = "exact", n_init: int = 10,
                             seed: Any = None) -> KMeansSelectionResult:
    """Algorithm 1 of BMD 2009 followed by k-means on ``Ã``, repeated ``n_repeats`` times ("boosting"):
    the partition with the smallest objective on the **full** ``X`` is kept.

    ``r`` is the paper's r: the number of i.i.d. draws for ``scheme="iid"`` (repeats merged, so at most r
    features are kept), the number kept for ``"top"`` and its expectation for ``"bernoulli"``; by default
    10 k features are kept (see :class:`LeverageScoreSelector`). ``certified_ratio`` is
    ``F / ‖A − A_k‖²_F``, an upper bound on ``F / F_opt`` that needs no optimum.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(30, 50)); X[:15, :5] += 5.0
    >>> res = kmeans_feature_selection(X, 2, 20, seed=0)
    >>> clustering_accuracy(res.labels, [0] * 15 + [1] * 15)
    1.0
    """
    n_clusters = n_components
    A, _ = _as_matrix(X)
    rng = _rng(seed)
    best: KMeansSelectionResult | None = None
    lower = svd_lower_bound(A, n_clusters)
    for _ in range(n_repeats):
        count = {"n_draws": r} if scheme == "iid" and r is not None else {"n_features_to_select": r}
        sel = LeverageScoreSelector(**count, n_components=n_clusters, scheme=scheme, svd=svd, seed=rng).fit(A)
        At = sel.transform(A)
        km = kmeans(At, n_clusters, n_init=n_init, seed=rng)
        F = kmeans_objective(A, km.labels)
        if best is None or F < best.objective:
            ratio = F / lower if lower > 0 else float("inf")
            best = KMeansSelectionResult(km.labels, F, sel.support_.copy(), sel.scale_.copy(), ratio)
    assert best is not None
    return best
