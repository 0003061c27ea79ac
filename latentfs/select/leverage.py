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

from latentfs.core.base import BaseSelector, rescaled
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


def _sample_bernoulli(p: np.ndarray, r: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    # keep i with probability p̃_i = min(1, r p_i), weight 1/sqrt(p̃_i) (digest, B3 scheme (b))
    pt = np.minimum(1.0, r * p)
    idx = np.flatnonzero(rng.random(p.size) < pt)
    return idx, 1.0 / np.sqrt(pt[idx])


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
class LeverageScoreSelector(BaseSelector):
    """Leverage-score feature selection for k-means (Boutsidis, Mahoney & Drineas 2009, Algorithm 1).

    ``weights_`` holds the probabilities ``p_i = ‖(V_k)_(i)‖²/k`` from the top-``k`` right singular
    vectors; the support is the set of sampled features (duplicates merged), and ``scale_`` the merged
    rescaling weights ``sqrt(c_i / (r p_i))``, which :meth:`transform` applies (``rescale=True``).

    Parameters
    ----------
    n_features_to_select : int, optional
        ``r``: number of i.i.d. draws (``"iid"``), expected number kept (``"bernoulli"``) or number
        kept (``"top"``). Default ``10 k``, the paper's practical choice.
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
        The raw draws before merging duplicates.
    singular_values_ : ndarray (k,)
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` in ``fit`` had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 30)); X[:20, :3] += 6.0
    >>> sel = LeverageScoreSelector(3, n_components=1, scheme="top").fit(X)
    >>> sel.get_support(indices=True).tolist()
    [0, 1, 2]
    """

    _support_from_weights = False
    _accept_sparse = True

    def __init__(self, n_features_to_select: int | None = None, *, n_components: int = 2,
                 scheme: str = "iid", svd: str = "exact", center: bool = False, rescale: bool = True,
                 seed: Any = 0) -> None:
        self.n_features_to_select = n_features_to_select
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
        k = check_n_components(self.n_components, min(A.shape), name="n_components",
                               what="min(n_samples, n_features)")
        r = 10 * k if self.n_features_to_select is None else self.n_features_to_select
        r = _check_r(r, A.shape[1], self.scheme)
        rng = _rng(self.seed)
        # scores straight from the small side (no d × k matrix V for the exact SVD of a wide X)
        fac = _factor(A, k, method=self.svd, center=self.center, rtol=None, rng=rng, scores_only=True)
        raw = fac.row_norms2()
        p, sigma = raw / raw.sum(), fac.sigma
        idx, w = _SCHEMES[self.scheme](p, r, rng)
        self.sample_indices_, self.sample_weights_ = idx, w
        uniq, merged = merge_duplicates(idx, w)
        self.support_ = np.zeros(A.shape[1], dtype=bool)
        self.support_[uniq] = True
        self.scale_ = merged
        self.singular_values_ = sigma
        return FeatureWeights(p, "leverage_kmeans", feature_names=names,
                              info={"n_components": k, "r": r, "scheme": self.scheme, "svd": self.svd,
                                    "definition": "p_i = ||(V_k)_(i)||^2 / k (BMD 2009, Alg. 1)"})

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

    ``certified_ratio`` is ``F / ‖A − A_k‖²_F``, an upper bound on ``F / F_opt`` that needs no optimum.

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
        sel = LeverageScoreSelector(r, n_components=n_clusters, scheme=scheme, svd=svd, seed=rng).fit(A)
        At = sel.transform(A)
        km = kmeans(At, n_clusters, n_init=n_init, seed=rng)
        F = kmeans_objective(A, km.labels)
        if best is None or F < best.objective:
            ratio = F / lower if lower > 0 else float("inf")
            best = KMeansSelectionResult(km.labels, F, sel.support_.copy(), sel.scale_.copy(), ratio)
    assert best is not None
    return best
