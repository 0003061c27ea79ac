"""Fast projective clustering (FPC): axis-parallel subspace clusters from densest intervals.

Savu-Krohn & Auer (2006), "A Simple Feature Extraction for High Dimensional Image Representations",
LNCS 3940, pp. 163–172 (Sections 2–3 and Appendix A, Algorithm 1).

One coordinate (Section 2.1). Sorted values x_1 ≤ … ≤ x_m with diameter r are modelled as uniform background
plus a uniform block on an unknown [a, b]; with ξ = |{x : a ≤ x ≤ b}| the profile log-likelihood is (eq. 3)

    LL(x | a, b) = (m − ξ) log((1 − ξ/m) / (r − (b − a))) + ξ log((ξ/m) / (b − a)),       0 · log 0 = 0,

maximised over the candidate bounds Φ = {midpoints of distinct neighbours} ∪ {min x, max x} (eq. 8) by a
coarse search over bounds s_min points apart (eqs. 9–10) and a fine search around the coarse optimum
(eqs. 11–12). Because LL is also maximised by the valley of a bimodal sample, the density score (eq. 13)

    F(a, b, r, m) = (|{x : a ≤ x ≤ b}| / m) · r / (b − a)

picks the densest of [min x, φ_i], [φ_i, φ_j], [φ_j, max x] (eq. 14). A split is valid when both sides hold at
least s_min points (eq. 7, s_min = √m motivated by agnostic sample bounds, eqs. 4–6); the interval is refined
on its own points until no valid split remains.

Many coordinates (Section 2.2, Algorithm 1). Every coordinate with a valid split is a candidate; the one with
the largest F measured against the diameter ρ_l of the *full* data (eq. 15) bounds the cluster, and the
search repeats on the points kept until no coordinate can be bounded. The cluster (a hyper-rectangle over the
bounded coordinates) is stored and the search restarts on all points not yet clustered; the last, unbounded
remainder is the final cluster. The output is a partition and is deterministic.

Reading of the appendix (digest ``book_part3.md`` §4.3): the printed ``C = C̄`` after storing a cluster is read
as "everything not yet clustered", i.e. the points split off on the way are put back.

Evaluation (Section 3.1): :func:`coverage` is the chapter's p = Σ_j |C_τ(j) ∩ Ĉ_j| / Σ_j |Ĉ_j| with
τ(j) = argmax_i |C_i ∩ Ĉ_j| (cluster purity). Image features (Section 3.2): :func:`bag_distance_features` is the
matrix D of the minimum distance between each cluster centre and the descriptors of a bag (image) that fall in
the cluster's box (∞ if none), and :func:`lpboost_stumps` the LPBoost learner (Demiriz, Bennett &
Shawe-Taylor 2002) over the threshold stumps "D_bj ≤ θ" of Opelt et al. (2004).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.metrics.cluster import contingency_matrix
from sklearn.metrics.pairwise import euclidean_distances

from latentfs.core.base import check_fitted, check_X, document_input_attributes
from latentfs.core.data import DataError
from latentfs.core.options import check_choice, check_float, check_int
from latentfs.core.weights import FeatureWeights
from latentfs.subspace.fpc_interval import (  # noqa: F401  (re-exported)
    _TIE,
    Interval,
    _best_pair,
    _candidates,
    _check_min_support,
    _coarse_indices,
    _refine,
    _s_min,
    _select,
    brute_force_bounds,
    densest_interval,
    density_score,
    interval_log_likelihood,
    optimal_bounds,
)

__all__ = [
    "FPC",
    "FPCCluster",
    "Interval",
    "bag_distance_features",
    "brute_force_bounds",
    "coverage",
    "densest_interval",
    "density_score",
    "interval_log_likelihood",
    "lpboost_stumps",
    "optimal_bounds",
]


# --------------------------------------------------------------------------------------------------
# Many coordinates: addBounds and fpc (Algorithm 1)
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FPCCluster:
    """One subspace cluster found by FPC.

    Attributes
    ----------
    indices : int array
        Rows of the training data in the cluster.
    bounds : dict int -> (float, float)
        Coordinate l -> (a_l, b_l), the box (unbounded coordinates are free).
    center : array (n_features,)
        Mean of the members.
    """

    indices: np.ndarray
    bounds: dict[int, tuple[float, float]]
    center: np.ndarray

    @property
    def dimension(self) -> int:
        """Number of bounded coordinates (the cluster's subspace dimension)."""
        return len(self.bounds)

    @property
    def size(self) -> int:
        return int(self.indices.size)


def _add_bounds(
    Xc: np.ndarray, s_min: int, rho: np.ndarray, adaptive: bool, search: str
) -> tuple[int, float, float] | None:
    """``addBounds``: the coordinate and bounds with the largest F against ρ (eq. 15), or None (Λ = ∅)."""
    m = Xc.shape[0]
    if m < 2:
        return None
    Xs = np.sort(Xc, axis=0)
    best: tuple[float, int, float, float] | None = None
    for l in range(Xc.shape[1]):
        xs = Xs[:, l]
        if xs[-1] == xs[0]:
            continue
        a, b, count, valid, _ = _refine(xs, s_min, adaptive, search, True)
        if not valid:
            continue
        f = float(density_score(count, b - a, m, float(rho[l]))) if b > a else np.inf
        if best is None or f > best[0]:
            best = (f, l, a, b)
    return None if best is None else (best[1], best[2], best[3])


def _unit_power_of_two(X: np.ndarray) -> float:
    """1, or the power of two that brings max |X| into [0.5, 1) when it lies beyond 2^±100 (dividing by it is exact)."""
    top = float(np.max(np.abs(X))) if X.size else 0.0
    if top == 0.0 or 2.0**-100 <= top <= 2.0**100:
        return 1.0
    return float(np.ldexp(1.0, int(np.frexp(top)[1])))


def _fpc(
    X: np.ndarray, s_min: int, adaptive: bool, search: str, max_clusters: int | None
) -> list[tuple[np.ndarray, dict[int, tuple[float, float]]]]:
    """Algorithm 1 on X: clusters as (row indices, bounds), in discovery order, partitioning the rows."""
    rho = X.max(axis=0) - X.min(axis=0)
    remaining = np.arange(X.shape[0])
    clusters: list[tuple[np.ndarray, dict[int, tuple[float, float]]]] = []
    while remaining.size:
        members = remaining
        bounds: dict[int, tuple[float, float]] = {}
        last = max_clusters is not None and len(clusters) == max_clusters - 1
        while not last:
            step = _add_bounds(X[members], s_min, rho, adaptive, search)
            if step is None:
                break
            l, a, b = step
            col = X[members, l]
            members = members[(col >= a) & (col <= b)]
            old = bounds.get(l, (-np.inf, np.inf))
            bounds[l] = (max(old[0], a), min(old[1], b))
        clusters.append((members, dict(sorted(bounds.items()))))
        if members.size == remaining.size:
            break
        remaining = np.setdiff1d(remaining, members, assume_unique=True)
    return clusters


@document_input_attributes
class FPC(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Fast projective clustering (Savu-Krohn & Auer 2006, Algorithm 1) as a feature extractor.

    ``fit`` partitions the rows into axis-parallel subspace clusters (boxes over a few coordinates, found one
    coordinate at a time by the densest-interval search of Section 2.1). ``transform`` maps a row x to one
    feature per cluster: the Euclidean distance from x to the cluster's centre when x lies in the cluster's
    box, ``fill_value`` (∞ by default, as in the chapter's matrix D) otherwise.

    Parameters
    ----------
    min_support : "sqrt" or int, default "sqrt"
        s_min, the fewest points a split may leave on either side (eq. 7); ``"sqrt"`` is ⌈√n⌉ for the n rows
        given to ``fit``.
    adaptive : bool, default False
        Use s_min = ⌈√m'⌉ for the m' points of each split instead of the fixed value (the literal reading of
        eq. 7; produces more, smaller clusters).
    search : {"coarse-to-fine", "exhaustive"}, default "coarse-to-fine"
        The chapter's O(m) two-phase search for the likelihood-maximising bounds, or the exact one (O(m²) time
        and memory per coordinate: a few thousand rows at most).
    max_clusters : int or None, default None
        Stop after this many clusters, the last one holding all rows not yet clustered (not in the chapter;
        None runs Algorithm 1 to the end).
    distance : {"full", "subspace"}, default "full"
        Distance used by ``transform``: over all coordinates (the chapter) or only the cluster's bounded ones.
    fill_value : float, default inf
        Feature value for a row outside a cluster's box.

    Attributes
    ----------
    clusters_ : list of FPCCluster
        In discovery order; the last one is the unbounded remainder when Algorithm 1 ends on one.
    labels_ : int array (n_samples,)
        Cluster of each training row.
    cluster_centers_ : (n_clusters, n_features) array
    lower_bounds_, upper_bounds_ : (n_clusters, n_features) arrays
        The boxes (−∞/+∞ on free coordinates).
    n_clusters_ : int
    min_support_ : int
        The s_min used.
    feature_weights_ : FeatureWeights
        For each coordinate, the fraction of training rows whose cluster is bounded along it (digest §4.7).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 1, (400, 3))
    >>> X[:200, 1] = rng.uniform(0.40, 0.45, 200)   # a cluster tight along coordinate 1
    >>> fpc = FPC().fit(X)
    >>> 1 in fpc.clusters_[0].bounds, fpc.n_clusters_ == fpc.transform(X).shape[1]
    (True, True)
    """

    def __init__(
        self, min_support: int | str = "sqrt", *, adaptive: bool = False, search: str = "coarse-to-fine",
        max_clusters: int | None = None, distance: str = "full", fill_value: float = np.inf,
    ) -> None:
        self.min_support = min_support
        self.adaptive = adaptive
        self.search = search
        self.max_clusters = max_clusters
        self.distance = distance
        self.fill_value = fill_value

    def fit(self, X: Any, y: Any = None) -> FPC:
        """Run Algorithm 1 on the rows of X; ``y`` is ignored."""
        Xv = np.asarray(check_X(self, X, reset=True), dtype=np.float64)
        n, d = Xv.shape
        s_min = _check_min_support(self.min_support, n)
        check_choice("adaptive", self.adaptive, [False, True])
        check_choice("search", self.search, ["coarse-to-fine", "exhaustive"])
        check_choice("distance", self.distance, ["full", "subspace"])
        check_float("fill_value", self.fill_value, 0, remedy="Pass a non-negative number or inf.")
        if self.max_clusters is not None:
            check_int("max_clusters", self.max_clusters, low=1, remedy="Pass a positive integer or None.")
        # Algorithm 1 is equivariant under a common rescaling of X (intervals, densities and likelihood
        # comparisons scale together), so data near the ends of the float range run on X / c with c a power of
        # two (exact): midpoints, diameters and means of values ~1e300 would overflow, ~1e-300 lose digits.
        unit = _unit_power_of_two(Xv)
        Xs = Xv / unit
        found = _fpc(Xs, s_min, bool(self.adaptive), self.search, self.max_clusters)
        found = [(idx, {l: (a * unit, b * unit) for l, (a, b) in bounds.items()}) for idx, bounds in found]
        self.clusters_ = [FPCCluster(idx, bounds, Xs[idx].mean(axis=0) * unit) for idx, bounds in found]
        k = len(self.clusters_)
        self.n_clusters_ = k
        self.min_support_ = s_min
        self.labels_ = np.empty(n, dtype=np.int64)
        self.lower_bounds_ = np.full((k, d), -np.inf)
        self.upper_bounds_ = np.full((k, d), np.inf)
        for j, c in enumerate(self.clusters_):
            self.labels_[c.indices] = j
            for l, (a, b) in c.bounds.items():
                self.lower_bounds_[j, l], self.upper_bounds_[j, l] = a, b
        self.cluster_centers_ = np.stack([c.center for c in self.clusters_])
        bounded = np.isfinite(self.lower_bounds_)
        sizes = np.array([c.size for c in self.clusters_], dtype=np.float64)
        scores = sizes @ bounded / n
        names = [str(s) for s in getattr(self, "feature_names_in_", [f"x{i}" for i in range(d)])]
        self.feature_weights_ = FeatureWeights(
            scores, "fpc.bound_frequency", names,
            info={"definition": "fraction of training rows whose FPC cluster is bounded along the feature",
                  "n_clusters": k, "min_support": s_min},
        )
        return self

    @property
    def _n_features_out(self) -> int:
        return int(self.n_clusters_)

    def _inside(self, Xv: np.ndarray) -> np.ndarray:
        """(n, k) booleans: row i lies in the box of cluster j."""
        out = np.empty((Xv.shape[0], self.n_clusters_), dtype=bool)
        for j in range(self.n_clusters_):
            out[:, j] = np.all((Xv >= self.lower_bounds_[j]) & (Xv <= self.upper_bounds_[j]), axis=1)
        return out

    def transform(self, X: Any) -> np.ndarray:
        """Distance of each row to each cluster centre, ``fill_value`` where the row is outside the box."""
        check_fitted(self, "clusters_", call="fit(X)")
        Xv = np.asarray(check_X(self, X, reset=False), dtype=np.float64)
        # distances in the units of the fit's rescaling (a power of two), so squares neither overflow nor underflow
        unit = _unit_power_of_two(np.vstack([Xv, self.cluster_centers_]))
        Xs, centers = Xv / unit, self.cluster_centers_ / unit
        if self.distance == "full":
            dist = euclidean_distances(Xs, centers)
        else:
            mask = np.isfinite(self.lower_bounds_).astype(np.float64)
            c = centers * mask
            sq = (Xs**2) @ mask.T - 2 * Xs @ c.T + np.sum(c * centers, axis=1)
            dist = np.sqrt(np.maximum(sq, 0.0))
        with np.errstate(over="ignore"):  # a distance beyond the float range is inf, as it is
            dist = dist * unit
        return np.where(self._inside(Xv), dist, float(self.fill_value))

    def predict(self, X: Any) -> np.ndarray:
        """The first cluster, in discovery order, whose box holds the row (reproduces ``labels_`` on the
        training rows); −1 when no box holds it (possible only when the last cluster is bounded)."""
        check_fitted(self, "clusters_", call="fit(X)")
        Xv = np.asarray(check_X(self, X, reset=False), dtype=np.float64)
        inside = self._inside(Xv)
        return np.where(inside.any(axis=1), np.argmax(inside, axis=1), -1).astype(np.int64)

    def coverage(self, y_true: Any, *, noise_label: Any = None) -> float:
        """:func:`coverage` of the training partition against true labels."""
        check_fitted(self, "clusters_", call="fit(X)")
        return coverage(y_true, self.labels_, noise_label=noise_label)


# --------------------------------------------------------------------------------------------------
# Evaluation (Section 3.1) and image features (Section 3.2)
# --------------------------------------------------------------------------------------------------
def coverage(y_true: Any, y_found: Any, *, noise_label: Any = None) -> float:
    """The chapter's coverage ``p = Σ_j |C_τ(j) ∩ Ĉ_j| / Σ_j |Ĉ_j|``, ``τ(j) = argmax_i |C_i ∩ Ĉ_j|`` (Section 3.1).

    Each found cluster is credited with its majority true cluster (purity). Rows whose true label equals
    ``noise_label`` belong to no true cluster: they count in ``Σ_j |Ĉ_j|`` but are never credited.

    Examples
    --------
    >>> coverage([0, 0, 1, 1], [5, 5, 5, 7])
    0.75
    >>> coverage([0, 0, -1, -1], [1, 1, 2, 2], noise_label=-1)
    0.5
    """
    t = np.asarray(y_true).ravel()
    f = np.asarray(y_found).ravel()
    if t.size != f.size:
        raise DataError(
            f"y_true and y_found must have the same length; got {t.size} and {f.size}. Pass one label per row."
        )
    if t.size == 0:
        raise DataError("y_true is empty: coverage needs at least one labelled row.")
    classes, t_idx = np.unique(t, return_inverse=True)
    _, f_idx = np.unique(f, return_inverse=True)
    table = contingency_matrix(t_idx, f_idx)
    if noise_label is not None:
        table = table[classes != noise_label]
    if table.shape[0] == 0:
        return 0.0
    return float(table.max(axis=0).sum() / t.size)


def bag_distance_features(model: FPC, X: Any, bags: Any) -> tuple[np.ndarray, np.ndarray]:
    """The chapter's matrix D (Section 3.2), transposed: D[b, j] is the smallest ``model.transform`` value over
    the descriptors of bag b (an image), i.e. the distance from cluster j's centre to the nearest descriptor of
    the bag inside the cluster's box, ``fill_value`` (∞) when no descriptor of the bag is inside.

    Returns
    -------
    D : (n_bags, n_clusters) array
    bag_ids : the sorted distinct values of ``bags`` (row order of D)
    """
    check_fitted(model, "clusters_", call="fit(X)")
    b = np.asarray(bags).ravel()
    T = model.transform(X)
    if b.size != T.shape[0]:
        raise DataError(
            f"bags must give one bag id per row of X; got {b.size} ids for {T.shape[0]} rows. "
            "Pass the image (bag) each descriptor came from."
        )
    ids, inv = np.unique(b, return_inverse=True)
    D = np.full((ids.size, T.shape[1]), np.inf)
    np.minimum.at(D, inv, T)
    return D, ids


@dataclass(frozen=True)
class StumpEnsemble:
    """LPBoost ensemble of stumps h(b) = +1 if D[b, j] ≤ θ else −1 (Opelt et al. 2004).

    Attributes
    ----------
    features, thresholds, weights : arrays
        Cluster index j, threshold θ and LP weight of each stump with non-zero weight.
    n_iter : int
        Column-generation rounds.
    """

    features: np.ndarray
    thresholds: np.ndarray
    weights: np.ndarray
    n_iter: int

    def decision_function(self, D: Any) -> np.ndarray:
        """Σ_t w_t h_t(b) for each row (bag) of D."""
        Dv = np.asarray(D, dtype=np.float64)
        h = np.where(Dv[:, self.features] <= self.thresholds, 1.0, -1.0)
        return np.asarray(h @ self.weights)


def _best_stump(D: np.ndarray, yu: np.ndarray) -> tuple[int, float, float]:
    """Stump maximising Σ_b u_b y_b h(b) over clusters j and thresholds θ between sorted distances."""
    total = yu.sum()
    best = (-np.inf, 0, -np.inf)
    for j in range(D.shape[1]):
        order = np.argsort(D[:, j], kind="stable")
        d = D[order, j]
        below = np.cumsum(yu[order])  # Σ over bags with D ≤ d_k
        gain = 2 * below - total      # Σ_below − Σ_above
        last = np.r_[d[1:] != d[:-1], True] & np.isfinite(d)  # cut after the last of tied (finite) values
        if not last.any():
            continue
        k = int(np.argmax(np.where(last, gain, -np.inf)))
        if gain[k] > best[0]:
            nxt = d[k + 1] if k + 1 < d.size else np.inf
            theta = float(0.5 * (d[k] + nxt)) if np.isfinite(nxt) else float(d[k])
            best = (float(gain[k]), j, theta)
    return best[1], best[2], best[0]


def lpboost_stumps(D: Any, y: Any, *, nu: float = 0.1, max_iter: int = 100, tol: float = 1e-6) -> StumpEnsemble:
    """LPBoost (Demiriz, Bennett & Shawe-Taylor 2002) over the stumps "D[b, j] ≤ θ" of the chapter.

    Column generation on the dual LP min β s.t. Σ_b u_b y_b h_t(b) ≤ β for the stumps so far, Σ u = 1,
    0 ≤ u_b ≤ 1/(ν n); the weak learner returns the stump maximising Σ_b u_b y_b h(b) and the loop stops when
    that edge is ≤ β + tol. Stump weights are the LP's multipliers. Solved with SciPy's HiGHS.

    Parameters
    ----------
    D : (n_bags, n_clusters) array, ∞ allowed (:func:`bag_distance_features`)
    y : labels in {−1, +1} or two classes (the larger is +1)
    nu : float in (0, 1]
        Soft-margin parameter (an upper bound on the fraction of margin errors).
    """
    from scipy.optimize import linprog

    Dv = np.asarray(D, dtype=np.float64)
    yv = np.asarray(y).ravel()
    classes = np.unique(yv)
    if Dv.ndim != 2 or Dv.shape[0] != yv.size:
        raise DataError(f"D must be (n_bags, n_clusters) with one row per label; got {Dv.shape} and {yv.size}.")
    if classes.size != 2:
        raise DataError(f"y must hold exactly two classes; got {classes.size}. LPBoost here is binary.")
    nu = check_float("nu", nu, 0, 1, low_open=True)
    max_iter = check_int("max_iter", max_iter, low=1)
    ys = np.where(yv == classes[1], 1.0, -1.0)
    n = ys.size
    u = np.full(n, 1.0 / n)
    beta = -np.inf
    H: list[np.ndarray] = []
    stumps: list[tuple[int, float]] = []
    weights = np.zeros(0)
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is reported)
        j, theta, edge = _best_stump(Dv, u * ys)
        if stumps and edge <= beta + tol:
            break
        stumps.append((j, theta))
        H.append(np.where(Dv[:, j] <= theta, 1.0, -1.0))
        A = np.stack(H) * ys  # (T, n): rows Σ_b u_b y_b h_t(b) − β ≤ 0
        c = np.r_[np.zeros(n), 1.0]
        A_ub = np.hstack([A, -np.ones((len(H), 1))])
        res = linprog(c, A_ub=A_ub, b_ub=np.zeros(len(H)), A_eq=np.r_[np.ones(n), 0.0][None, :], b_eq=[1.0],
                      bounds=[(0, 1 / (nu * n))] * n + [(None, None)], method="highs")
        if res.status != 0:
            break
        u, beta = res.x[:n], float(res.x[n])
        weights = -np.asarray(res.ineqlin.marginals)
    keep = weights > 1e-9
    feats = np.array([s[0] for s in stumps], dtype=np.int64)[: weights.size]
    ths = np.array([s[1] for s in stumps], dtype=np.float64)[: weights.size]
    w = weights / weights.sum() if weights.sum() > 0 else weights
    return StumpEnsemble(feats[keep], ths[keep], w[keep], n_iter)
