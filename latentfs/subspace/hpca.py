"""Hyperbolic PCA: subspace selection from equivalence constraints (Maurer 2006; LNCS 3940, pp. 185–200).

A metric representation is learned from *equivalence constraints* (x, x′, r): r = +1 when x and x′ carry the
same label, r = −1 otherwise. Points are embedded by a kernel map ψ into a Hilbert space H with
‖ψ(x) − ψ(x′)‖ ≤ 1, and a d-dimensional orthogonal projection P is chosen so that same-label pairs come
close and different-label pairs stay apart: x′ is declared "of the type of x" when ‖P(ψ(x) − ψ(x′))‖ < c.

**The bound (Theorem 1).** With f_γ the margin function (1 for t ≤ 0, 1 − t/γ on (0, γ), 0 for t ≥ γ) and
the empirical margin risk R̂_γ(P, c, S) = (1/m) Σ_i f_γ(r_i (c² − ‖P(x_i − x′_i)‖²)), with probability
> 1 − δ over m i.i.d. constraints, for every d-dimensional projection P,

    R(P, ρ) ≤ inf_{c ∈ (0, 1)} R̂_γ(P, c, S) + (1/√m) (2(√d + 1)/γ + √(ln(1/δ)/2)).

Theorem 3 replaces √d and 1 by ‖𝒯‖_HS and ‖𝒯‖_∞ for a class 𝒯 of positive Hilbert–Schmidt operators
(:func:`operator_bound`); :func:`generalization_bound` is Theorem 1.

**The algorithm (Section 6).** For c ∈ (0, 1) and γ > 0 let η₋₁ = min{1/(1 − c²), 1/γ} and
η₁ = −min{1/c², 1/γ} (:func:`eta_from_threshold`) and T̂ = (1/m) Σ_i η_{r_i} Q_{x_i − x′_i}, where
Q_v w = ⟨w, v⟩ v. Then R̂_γ(P, c, S) ≤ 1 + (c²/m) Σ_i η_{r_i} − ⟨T̂, P⟩_HS, and the right-hand side is
minimised over projections of rank d by the projection onto the top-d eigenvectors of T̂. T̂ is not positive
(positive pairs enter with a negative weight), so its quadratic form has hyperboloids as level sets: hence
*hyperbolic* PCA. With negative constraints only it is PCA.

Kernel forms: for independent pairs the eigenvectors are w = Σ_i α_i (ψ(x_i) − ψ(x′_i)) with
Γ D Γ α = λ Γ α, Γ the Gram matrix of the differences, D = diag(η_{r_i}) (eq. 4); for *all* pairs of a
labelled sample, w = Σ_k γ_k ψ(x_k) with G A G γ = λ G γ, G the Gram matrix and
A_ij = (2/m²)(δ_ij Σ_n η_{r_in} − η_{r_ij}), a weighted graph Laplacian (end of Section 6). Both are solved
here by :func:`hpca_dual` through the symmetric r × r problem on the range of the Gram matrix.

Conventions of this module (the chapter's experiments, Section 7): rows are scaled to unit length
(``normalize=True``) and the kernel is κ(x, y) = ½ exp(−C‖x − y‖²), whose embedding has
‖ψ(x) − ψ(x′)‖² = 1 − exp(−C‖x − x′‖²) ≤ 1 as the bounds require; ``kernel="linear"`` is ⟨x, y⟩.
The weights are given as ``eta_neg`` = η₋₁ > 0 and ``eta_pos`` = |η₁| ≥ 0 (the chapter reports η₋₁ "with
η₁ = 1"); ``balanced=True`` weights the mean over negative pairs against the mean over positive pairs,
T̂ = η₋₁ · mean_neg Q − |η₁| · mean_pos Q, the chapter's balanced risk ρ̄ (Section 2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial.distance import pdist
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.preprocessing import normalize as _unit_rows

from latentfs.core.base import ParamsAsDataError, check_fitted, check_X, document_input_attributes, require_y
from latentfs.core.data import DataError, as_labels
from latentfs.core.options import check_choice, check_float, check_int, check_n_components
from latentfs.core.weights import FeatureWeights
from latentfs.subspace.hpca_numerics import (  # noqa: F401  (re-exported)
    _as_pair_labels,
    _check_delta,
    _check_margin,
    _check_sq_r,
    _dual_spectrum,
    _risk_curve,
    _sign_flip,
    _weights,
    best_threshold,
    eta_from_threshold,
    generalization_bound,
    hpca_dual,
    margin_loss,
    margin_risk,
    one_shot_nn_error,
    operator_bound,
    pair_weight_matrix,
)

__all__ = [
    "HPCA_KERNELS",
    "HyperbolicPCA",
    "best_threshold",
    "eta_from_threshold",
    "generalization_bound",
    "hpca_dual",
    "margin_loss",
    "margin_risk",
    "one_shot_nn_error",
    "operator_bound",
    "pair_weight_matrix",
    "select_hpca",
]

HPCA_KERNELS = ("rbf", "linear")
"""Kernels of :class:`HyperbolicPCA`: ``"rbf"`` is ½ exp(−C‖x − y‖²) (Maurer, Section 7), ``"linear"`` ⟨x, y⟩."""


# --------------------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------------------
@document_input_attributes
class HyperbolicPCA(ParamsAsDataError, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Hyperbolic PCA (Maurer 2006): the projection onto the top eigenvectors of the constraint operator T̂.

    ``fit(X, y)`` uses every pair of the labelled sample (the chapter's all-pairs variant, solved as
    G A G γ = λ G γ); :meth:`fit_pairs` takes explicit constraints (x_i, x′_i, r_i) (eq. 4).
    :meth:`transform` gives the coordinates ⟨w_k, ψ(x)⟩ in the chosen subspace, so Euclidean distances of the
    output are the projected distances ‖P(ψ(x) − ψ(x′))‖.

    Parameters
    ----------
    n_components : int, default 2
        d, the rank of the projection.
    kernel : {"rbf", "linear"}, default "rbf"
        ``"rbf"``: κ(x, y) = ½ exp(−C‖x − y‖²) (Section 7; embedding diameter ≤ 1). ``"linear"``: ⟨x, y⟩.
    C : float, default 8.0
        Width of the RBF kernel (the chapter uses 16 for handwritten digits and 8 elsewhere).
    eta_neg : float, default 0.1
        η₋₁ > 0, the weight of negative (different-label) pairs.
    eta_pos : float, default 1.0
        ``|η₁|`` ≥ 0, the weight of positive (same-label) pairs (0 gives PCA of the pair differences).
    balanced : bool, default True
        Weight the *mean* over negative pairs against the mean over positive pairs (the chapter's ρ̄).
    normalize : bool, default True
        Scale every row to unit Euclidean length first (Section 7; zero rows stay zero).

    Attributes
    ----------
    eigenvalues_ : (d,) array
        The top-d eigenvalues of T̂ (decreasing; they may be negative).
    components_ : (d, n_features) array
        The orthonormal directions w_k (``kernel="linear"`` only: the RBF directions live in the RKHS and
        are given by ``dual_coef_`` on ``X_fit_``).
    mean_ : (n_features,) array
        Mean of the (normalised) training points (``kernel="linear"``).
    X_fit_ : (n_support, n_features) array
        The (normalised) training points that carry the RBF directions.
    dual_coef_ : (n_support, d) array
        w_k = Σ_l dual_coef_[l, k] ψ(X_fit_[l]).
    offset_ : (d,) array
        Subtracted so that the training points have mean coordinates zero.
    n_components_ : int
    n_constraints_ : int
        Number of training constraints (ordered pairs i ≠ j for ``fit``, pairs for ``fit_pairs``).
    n_independent_ : int
        The m of the bounds: ``fit_pairs``'s number of pairs, or for ``fit`` the number of points (the
        chapter's worst case for the dependent all-pairs sample).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 5)); y = np.repeat([0, 1, 2], 20); X[:, 0] += 3 * y
    >>> hp = HyperbolicPCA(1, kernel="linear", normalize=False).fit(X, y)
    >>> bool(abs(hp.components_[0, 0]) > 0.95)
    True
    """

    def __init__(
        self, n_components: int = 2, *, kernel: str = "rbf", C: float = 8.0, eta_neg: float = 0.1,
        eta_pos: float = 1.0, balanced: bool = True, normalize: bool = True,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.C = C
        self.eta_neg = eta_neg
        self.eta_pos = eta_pos
        self.balanced = balanced
        self.normalize = normalize

    # ------------------------------------------------------------------ helpers
    def _check_params(self) -> None:
        check_choice("kernel", self.kernel, HPCA_KERNELS)
        check_float("C", self.C, 0.0, low_open=True, remedy="It is the RBF width, e.g. C=8 (Maurer, Section 7).")
        check_float("eta_neg", self.eta_neg, 0.0, low_open=True,
                    remedy="It is the weight η₋₁ > 0 of negative pairs, e.g. eta_neg=0.1.")
        check_float("eta_pos", self.eta_pos, 0.0, remedy="It is the weight |η₁| ≥ 0 of positive pairs, e.g. 1.0.")
        for name in ("balanced", "normalize"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise DataError(f"{name} must be True or False; got {getattr(self, name)!r}.")
        check_n_components(self.n_components, 10**12)

    def _prep(self, Xv: np.ndarray) -> np.ndarray:
        return _unit_rows(Xv) if self.normalize else Xv

    def _gram(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        if self.kernel == "linear":
            return A @ B.T
        return 0.5 * np.exp(-float(self.C) * euclidean_distances(A, B, squared=True))

    def _check_spread(self, Xv: np.ndarray, Z: np.ndarray) -> None:
        """Refuse data without variation: identical rows (after normalising, when asked), or, for the RBF kernel,
        rows whose embeddings cannot be told apart in floating point (the centred Gram matrix would be rounding
        noise, and its eigenvectors arbitrary)."""
        n = Xv.shape[0]
        if (np.ptp(Z, axis=0) == 0).all():
            after = " after scaling every row to unit length (normalize=True)" if self.normalize else ""
            raise DataError(
                f"X has zero variance: all {n} rows of its {Xv.shape[1]} feature(s) are identical{after}, so no "
                "direction separates the labels. "
                "Pass rows that differ" + (" in direction, or normalize=False." if self.normalize else ".")
            )
        if self.kernel == "rbf":
            spread = float(-np.expm1(-float(self.C) * euclidean_distances(Z, Z, squared=True).max()))
            if spread <= 1e-12:  # ‖ψ(x) − ψ(x′)‖² = 1 − exp(−C‖x − x′‖²), at most 1
                raise DataError(
                    f"X has no spread in the RBF feature space: the largest ‖ψ(x) − ψ(x′)‖² is {spread:.3g} "
                    f"(rule: > 1e-12) with C={self.C!r}, so every pair of rows is the same point to float precision. "
                    "Standardise X (recentre and rescale its columns) or raise C."
                )

    def _rank_error(self, rank: int, n: int, p: int) -> DataError:
        return DataError(
            f"n_components must be at most {rank}, the rank of the pair differences in feature space "
            f"(n_samples = {n}, n_features = {p}); got {self.n_components}. Choose fewer components or pass "
            "more (distinct) data."
        )

    def _solve(self, G: np.ndarray, A: np.ndarray, n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
        lam, coef = _dual_spectrum(G, A)
        if self.n_components > lam.size:
            raise self._rank_error(int(lam.size), n, p)
        d = int(self.n_components)
        return lam[:d], coef[:, :d]

    def _finish_linear(self, Z: np.ndarray, lam: np.ndarray, W: np.ndarray) -> None:
        W = W * _sign_flip(W)
        self.components_ = W.T
        self.mean_ = Z.mean(axis=0)
        self._support = Z
        self.eigenvalues_ = lam
        self.n_components_ = int(W.shape[1])

    def _finish_kernel(self, Z: np.ndarray, lam: np.ndarray, coef: np.ndarray) -> None:
        coef = coef * _sign_flip(coef)
        self.X_fit_ = Z
        self.dual_coef_ = coef
        self.offset_ = np.zeros(coef.shape[1])
        self.offset_ = self._features(Z).mean(axis=0)
        self.eigenvalues_ = lam
        self.n_components_ = int(coef.shape[1])

    def _features(self, Zn: np.ndarray) -> np.ndarray:
        if self.kernel == "linear":
            return (Zn - self.mean_) @ self.components_.T
        return self._gram(Zn, self.X_fit_) @ self.dual_coef_ - self.offset_

    def _linear_top(self, T: np.ndarray, n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
        lam, V = np.linalg.eigh((T + T.T) / 2)
        order = np.argsort(-lam, kind="stable")[: int(self.n_components)]
        return lam[order], V[:, order]

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any = None) -> HyperbolicPCA:
        """Fit on all pairs (i ≠ j) of a labelled sample: r_ij = +1 when y_i = y_j, −1 otherwise.

        Needs at least two classes (negative pairs); a sample whose labels are all distinct has no positive
        pair, and HPCA is then PCA of the (normalised) data.
        """
        require_y(self, y, "HyperbolicPCA learns from the equivalence constraints given by the labels y")
        self._check_params()
        Xv = check_X(self, X, reset=True)
        n, p = Xv.shape
        if n < 2:
            raise DataError(f"X needs at least 2 samples to form a pair; got n_samples = {n} (1 sample). "
                            "Pass more samples.")
        codes, _ = as_labels(y, n, min_classes=2)
        Z = self._prep(Xv)
        self._check_spread(Xv, Z)
        A = pair_weight_matrix(codes, self.eta_neg, self.eta_pos, balanced=bool(self.balanced))
        if self.kernel == "linear":
            rank = int(np.linalg.matrix_rank(Z - Z.mean(axis=0)))
            if self.n_components > rank:
                raise self._rank_error(rank, n, p)
            lam, W = self._linear_top(Z.T @ A @ Z, n, p)
            self._finish_linear(Z, lam, W)
        else:
            H = np.eye(n) - 1.0 / n
            G = H @ self._gram(Z, Z) @ H  # differences span the centred embedding; A 1 = 0 so T̂ is unchanged
            lam, coef = self._solve(G, A, n, p)
            self._finish_kernel(Z, lam, H @ coef)
        self._train: tuple[Any, ...] = ("labels", self._features(Z), codes)
        self.n_constraints_ = int(n * (n - 1))
        self.n_independent_ = int(n)
        return self

    def fit_pairs(self, X1: Any, X2: Any, r: Any) -> HyperbolicPCA:
        """Fit on explicit equivalence constraints (X1[i], X2[i], r[i]), r = +1 (same) or −1 (different)
        (eq. 4: Γ D Γ α = λ Γ α with Γ the Gram matrix of the differences ψ(x_i) − ψ(x′_i))."""
        self._check_params()
        X1v = check_X(self, X1, reset=True)
        X2v = check_X(self, X2, reset=False)
        m, p = X1v.shape
        if X2v.shape[0] != m:
            raise DataError(f"X2 must have one row per row of X1 ({m}); got {X2v.shape[0]}. Pass paired rows.")
        rr = _as_pair_labels(r, m)
        if not (rr == -1).any():
            raise DataError("r holds no negative pair (−1): HPCA needs pairs of different labels to spread. "
                            "Add pairs of points with different labels.")
        n_neg, n_pos = int(np.sum(rr == -1)), int(np.sum(rr == 1))
        en, ep = float(self.eta_neg), float(self.eta_pos)
        if self.balanced:
            dw = np.where(rr == -1, en / n_neg, -ep / max(n_pos, 1))
        else:
            dw = np.where(rr == -1, en, -ep) / m
        Z1, Z2 = self._prep(X1v), self._prep(X2v)
        if self.kernel == "linear":
            Delta = Z1 - Z2
            rank = int(np.linalg.matrix_rank(Delta))
            if self.n_components > rank:
                raise self._rank_error(rank, m, p)
            lam, W = self._linear_top(Delta.T @ (dw[:, None] * Delta), m, p)
            self._finish_linear(np.vstack([Z1, Z2]), lam, W)
        else:
            Gamma = self._gram(Z1, Z1) - self._gram(Z1, Z2) - self._gram(Z2, Z1) + self._gram(Z2, Z2)
            lam, alpha = self._solve(Gamma, np.diag(dw), m, p)
            self._finish_kernel(np.vstack([Z1, Z2]), lam, np.vstack([alpha, -alpha]))
        self._train = ("pairs", self._features(Z1), self._features(Z2), rr)
        self.n_constraints_ = int(m)
        self.n_independent_ = int(m)
        return self

    @property
    def _n_features_out(self) -> int:
        return int(self.n_components_)

    # ------------------------------------------------------------------ use
    def transform(self, X: Any) -> np.ndarray:
        """Coordinates ⟨w_k, ψ(x)⟩ (centred on the training points) of the rows of X."""
        check_fitted(self, "eigenvalues_", call="fit(X, y) or fit_pairs(X1, X2, r)")
        Xv = check_X(self, X, reset=False)
        return self._features(self._prep(Xv))

    def pair_distance(self, X1: Any, X2: Any) -> np.ndarray:
        """‖P(ψ(x_i) − ψ(x′_i))‖ for paired rows of X1 and X2."""
        Z1, Z2 = self.transform(X1), self.transform(X2)
        if Z1.shape[0] != Z2.shape[0]:
            raise DataError(f"X2 must have one row per row of X1 ({Z1.shape[0]}); got {Z2.shape[0]}.")
        return np.sqrt(np.sum((Z1 - Z2) ** 2, axis=1))

    def _constraints(self, X: Any = None, y: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Squared projected distances and ±1 labels: of all pairs i < j of (X, y), or of the training set."""
        check_fitted(self, "eigenvalues_", call="fit(X, y) or fit_pairs(X1, X2, r)")
        if X is None:
            if y is not None:
                raise DataError("y was given without X; pass both (X, y) or neither (the training constraints).")
            if self._train[0] == "pairs":
                _, E1, E2, rr = self._train
                return np.sum((E1 - E2) ** 2, axis=1), rr
            _, E, codes = self._train
        else:
            require_y(self, y, "the constraints of a new sample come from its labels y")
            E = self.transform(X)
            codes, _ = as_labels(y, E.shape[0], min_classes=2)
        same = pdist(codes[:, None].astype(np.float64), "cityblock") == 0
        return pdist(E, "sqeuclidean"), np.where(same, 1, -1)

    def empirical_margin_risk(
        self, c: float, margin: float = 0.01, X: Any = None, y: Any = None, *, balanced: bool | None = None
    ) -> float:
        """R̂_γ(P, c, S) on the training constraints, or on all pairs of (X, y) (:func:`margin_risk`).
        ``balanced`` defaults to the estimator's setting."""
        D, rr = self._constraints(X, y)
        return margin_risk(D, rr, c, margin, balanced=self.balanced if balanced is None else bool(balanced))

    def best_threshold(
        self, X: Any = None, y: Any = None, *, margin: float = 0.0, balanced: bool | None = None
    ) -> tuple[float, float]:
        """(c*, R*): the threshold minimising the (balanced) margin risk on the training constraints or on
        all pairs of (X, y); with ``margin=0`` R* is the error rate of the one-example threshold classifier
        (Section 7's "R* balanced" and "c*")."""
        D, rr = self._constraints(X, y)
        c_max = 1.0 if self.kernel == "rbf" else np.inf
        return best_threshold(D, rr, margin, balanced=self.balanced if balanced is None else bool(balanced),
                              c_max=c_max)

    def generalization_bound(self, delta: float = 0.05, margin: float = 0.01) -> float:
        """Theorem 1 evaluated at the fitted projection: inf_c R̂_γ on the training constraints (uniform
        weights, as the theorem's sample) plus the estimation error with m = ``n_independent_``.

        Needs an embedding of diameter ≤ 1, which the RBF kernel guarantees; for ``kernel="linear"`` it is
        checked on the training points."""
        check_fitted(self, "eigenvalues_", call="fit(X, y) or fit_pairs(X1, X2, r)")
        if self.kernel == "linear":
            Z = self._support
            diam = float(np.sqrt(pdist(Z, "sqeuclidean").max())) if Z.shape[0] > 1 else 0.0
            if diam > 1.0 + 1e-12:
                raise DataError(
                    f"the bound needs ‖x − x′‖ ≤ 1 in feature space (Maurer, Section 2); the training points "
                    f"reach {diam:.3g} with kernel='linear'. Use kernel='rbf' or scale X by 1/{diam:.3g}."
                )
        g = _check_margin(margin)
        D, rr = self._constraints()
        _, risk = best_threshold(D, rr, g, balanced=False)
        return generalization_bound(self.n_independent_, self.n_components_, margin=g, delta=delta,
                                    empirical_risk=min(risk, 1.0))

    def feature_weights(self, max_points: int = 200) -> FeatureWeights:
        """How much each input feature moves the projected point: the mean diagonal of JᵀJ, J the Jacobian of
        x ↦ (⟨w_k, ψ(x)⟩)_k with respect to the (normalised) input, over at most ``max_points`` training
        points. For ``kernel="linear"`` J = W and the score is diag(P) = Σ_k w_kf² (digest §6.6)."""
        check_fitted(self, "eigenvalues_", call="fit(X, y) or fit_pairs(X1, X2, r)")
        k = check_int("max_points", max_points, low=1)
        names = getattr(self, "feature_names_in_", None)
        if self.kernel == "linear":
            scores = np.sum(self.components_**2, axis=0)
            info: dict[str, Any] = {"definition": "diagonal of the projector P = Σ_k w_k w_kᵀ (sums to n_components)"}
        else:
            Z = self.X_fit_
            pts = Z[np.linspace(0, Z.shape[0] - 1, min(k, Z.shape[0])).astype(np.int64)]
            K = self._gram(pts, Z)  # (b, s)
            C = float(self.C)
            scores = np.zeros(Z.shape[1])
            for b in range(pts.shape[0]):
                Wb = self.dual_coef_ * K[b][:, None]  # (s, d)
                J = -2.0 * C * (np.outer(Wb.sum(axis=0), pts[b]) - Wb.T @ Z)  # (d, p)
                scores += np.sum(J**2, axis=0)
            scores /= pts.shape[0]
            info = {"definition": "mean over training points of diag(JᵀJ), J = Jacobian of the projection",
                    "n_points": int(pts.shape[0])}
        return FeatureWeights(scores, method="hpca.metric_diagonal",
                              feature_names=None if names is None else list(names), info=info)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


# --------------------------------------------------------------------------------------------------
# Model selection (Section 7): grid over (d, η₋₁), scored by the balanced empirical margin risk
# --------------------------------------------------------------------------------------------------
def select_hpca(
    X: Any, y: Any, n_components: Any = (8, 16, 24), eta_neg: Any = (0.01, 0.03, 0.1, 0.3), *,
    margin: float = 0.01, **params: Any,
) -> tuple[HyperbolicPCA, list[dict[str, float]]]:
    """Fit HPCA on every (d, η₋₁) of the grid and keep the one with the smallest balanced empirical risk
    inf_c R̂_γ(P, c, S⁽²⁾) on the training pairs (Maurer, Section 7, γ = 0.01).

    The eigenproblem is solved once per η₋₁ and truncated for each d. ``params`` go to
    :class:`HyperbolicPCA` (kernel, C, eta_pos, normalize; ``balanced`` is True as in the chapter).

    Returns
    -------
    best : HyperbolicPCA, fitted
    table : list of dict with keys ``n_components``, ``eta_neg``, ``c``, ``risk``
    """
    g = _check_margin(margin)
    ds = sorted({check_n_components(d, 10**12) for d in np.atleast_1d(n_components).tolist()})
    etas = [check_float("eta_neg", e, 0.0, low_open=True) for e in np.atleast_1d(eta_neg).tolist()]
    if not etas:
        raise DataError("eta_neg must hold at least one value; got an empty grid.")
    if params.get("balanced", True) is not True:
        raise DataError("select_hpca scores by the balanced risk; leave balanced=True.")
    table: list[dict[str, float]] = []
    best: tuple[float, int, float] | None = None
    for e in etas:
        est = HyperbolicPCA(max(ds), eta_neg=e, **params).fit(X, y)
        _, E, codes = est._train
        same = pdist(codes[:, None].astype(np.float64), "cityblock") == 0
        rr = np.where(same, 1, -1)
        for d in ds:
            c, risk = best_threshold(pdist(E[:, :d], "sqeuclidean"), rr, g,
                                     c_max=1.0 if est.kernel == "rbf" else np.inf)
            table.append({"n_components": d, "eta_neg": e, "c": c, "risk": risk})
            if best is None or risk < best[0] - 1e-12:
                best = (risk, d, e)
    assert best is not None
    return HyperbolicPCA(best[1], eta_neg=best[2], **params).fit(X, y), table
