"""Kernels to explicit features (Blum 2006, Section 4; Balcan, Blum & Vempala 2004) and the random-hyperplane
weak learner (Blum 2006, Algorithm 1).

Given a kernel K and landmarks S = {x_1, …, x_d} drawn from the data distribution, Blum's three maps are

* F1(x) = (K(x, x_1), …, K(x, x_d)) (Corollary 1; any similarity function, no margin guarantee);
* F2(x) = F1(x) U⁻¹ with M(S) = (K(x_i, x_j)) = UᵀU (Theorem 4): the orthogonal projection of φ(x) onto
  span φ(S) in an orthonormal basis, so F2(x)·F2(y) = K(x, S) M⁻¹ K(S, y) (the Nyström Gram). A singular
  M uses the pseudo-inverse (symmetric M^{+1/2}, which gives the same Gram);
* F3 = F̂ ∘ F2 with F̂ a Theorem-2 random projection to d₃ dimensions (Theorem 5).

Lemma 1 gives the number of landmarks d = ⌈(8/ε)(1/γ² + ln(1/δ))⌉ for margin γ (:func:`landmark_count`).
Landmark selection (a dict, :data:`LANDMARK_RULES`): uniform sampling (Blum), greedy pivoted Cholesky
(largest residual K(x, x) − ‖F2(x)‖², the "w_out" of Lemma 1's proof) and kernel k-means++ seeding with
the feature-space distance K(x, x) + K(y, y) − 2K(x, y) (the last two are not in the chapter; scikit-learn's
``kmeans_plusplus`` seeds with Euclidean distances in input space, a different rule for non-linear kernels,
so it is used for ``kernel="linear"`` only).

Kernels are scikit-learn's (:func:`sklearn.metrics.pairwise.pairwise_kernels`), with its RBF
parameterisation exp(−gamma‖x − y‖²) (:data:`KERNELS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d

from latentfs.core.base import check_fitted, check_X, check_y_finite, document_input_attributes
from latentfs.core.data import DataError, as_labels, as_rng, check_n_components
from latentfs.subspace.random_projection import random_projection_matrix

__all__ = [
    "KERNELS",
    "LANDMARK_RULES",
    "KernelFeatureMap",
    "RandomHyperplaneWeakLearner",
    "hyperplane_error",
    "kernel_diagonal",
    "kernel_matrix",
    "landmark_count",
    "normalize_kernel",
]


# --------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------
_KERNEL_PARAMS: dict[str, tuple[str, ...]] = {
    "linear": (),
    "rbf": ("gamma",),
    "polynomial": ("gamma", "degree", "coef0"),
}
# latentfs's defaults (scikit-learn's are gamma = 1/n_features and degree 3): the RBF exp(−‖x − y‖²) and
# the polynomial (⟨x, y⟩ + 1)²
_KERNEL_DEFAULTS: dict[str, Any] = {"gamma": 1.0, "degree": 2, "coef0": 1.0}

KERNELS: dict[str, tuple[str, ...]] = _KERNEL_PARAMS
"""Named kernels and the parameters each takes, computed by scikit-learn's
:func:`~sklearn.metrics.pairwise.pairwise_kernels`: ``"linear"`` ⟨x, y⟩, ``"rbf"`` exp(−gamma‖x − y‖²),
``"polynomial"`` (gamma⟨x, y⟩ + coef0)^degree (defaults gamma = 1, degree = 2, coef0 = 1). The
chapter's RBF width h (Rosipal & Krämer, Fig. 3: exp(−‖x − y‖²/h)) is gamma = 1/h."""


def _kernel_params(kernel: str, params: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(params) - set(_KERNEL_PARAMS[kernel]))
    if unknown:
        allowed = ", ".join(f"{k} takes {', '.join(v) or 'none'}" for k, v in _KERNEL_PARAMS.items())
        raise DataError(
            f"kernel_params {unknown} are not parameters of kernel {kernel!r}; {allowed} "
            "(scikit-learn's parameterisation: rbf is exp(−gamma‖x − y‖²))."
        )
    return {k: params.get(k, _KERNEL_DEFAULTS[k]) for k in _KERNEL_PARAMS[kernel]}


def kernel_matrix(A: np.ndarray, B: np.ndarray, kernel: Any = "rbf", **params: Any) -> np.ndarray:
    """The Gram block K(A, B) for a named kernel or a callable ``k(A, B)``.

    Examples
    --------
    >>> kernel_matrix(np.zeros((1, 2)), np.ones((1, 2)), "rbf", gamma=0.5).round(4).tolist()
    [[0.3679]]
    """
    if callable(kernel):
        K = np.asarray(kernel(A, B), dtype=np.float64)
    elif isinstance(kernel, str) and kernel in KERNELS:
        K = pairwise_kernels(A, B, metric=kernel, **_kernel_params(kernel, params))
    else:
        raise DataError(
            f"kernel must be one of {sorted(KERNELS)} or a callable k(A, B); got {kernel!r}."
        )
    if K.shape != (A.shape[0], B.shape[0]):
        raise DataError(
            f"kernel must return a ({A.shape[0]}, {B.shape[0]}) block; got shape {K.shape}."
        )
    return K


def kernel_diagonal(A: np.ndarray, kernel: Any = "rbf", **params: Any) -> np.ndarray:
    """K(x, x) for each row of A (closed forms for the named kernels, row by row for a callable)."""
    sq = np.sum(A * A, axis=1)
    if isinstance(kernel, str) and kernel in KERNELS:
        p = _kernel_params(kernel, params)
        closed = {
            "linear": lambda: sq,
            "rbf": lambda: np.ones(A.shape[0]),
            "polynomial": lambda: (p.get("gamma", 1.0) * sq + p.get("coef0", 1.0)) ** p.get("degree", 2),
        }
        return closed[kernel]()
    return np.array([kernel_matrix(a[None], a[None], kernel, **params)[0, 0] for a in A])


def normalize_kernel(K: np.ndarray, diag_rows: np.ndarray, diag_cols: np.ndarray) -> np.ndarray:
    """K̂(x, x′) = K(x, x′)/√(K(x, x) K(x′, x′)) (Blum 2006, Section 4.5)."""
    return K / np.sqrt(np.outer(diag_rows, diag_cols))


def landmark_count(eps: float, delta: float, margin: float) -> int:
    """d = ⌈(8/ε)(1/γ² + ln(1/δ))⌉ landmarks (Blum 2006, Lemma 1 / Corollary 1 / Theorem 4); γ is ``margin``.

    Examples
    --------
    >>> landmark_count(0.1, 0.05, 0.25)
    1520
    """
    for name, v in (("eps", eps), ("delta", delta), ("margin", margin)):
        if not 0 < v < 1:
            raise DataError(f"{name} must lie in (0, 1); got {v!r}.")
    return int(np.ceil((8 / eps) * (1 / margin**2 + np.log(1 / delta))))


# --------------------------------------------------------------------------------------------------
# Landmark rules
# --------------------------------------------------------------------------------------------------
def _landmarks_random(kern: Callable, X: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(X.shape[0], size=d, replace=False))


def _landmarks_pivoted_cholesky(kern: Callable, X: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    """Greedy: next landmark = the point with the largest residual K(x, x) − ‖F2(x)‖²."""
    n = X.shape[0]
    resid = np.array([kern(X[i : i + 1], X[i : i + 1])[0, 0] for i in range(n)])  # K(x, x), any kernel
    L = np.zeros((n, d))
    chosen: list[int] = []
    for j in range(d):
        i = int(np.argmax(resid))
        if resid[i] <= 1e-12:
            raise DataError(
                f"n_landmarks: the kernel matrix of X has numerical rank {j} < {d}; pivoted Cholesky "
                f"cannot pick more landmarks. Use n_landmarks={j} or fewer."
            )
        col = kern(X, X[i : i + 1])[:, 0] - L[:, :j] @ L[i, :j]
        L[:, j] = col / np.sqrt(resid[i])
        resid = np.maximum(resid - L[:, j] ** 2, 0.0)
        resid[i] = 0.0
        chosen.append(i)
    return np.array(chosen)


def _landmarks_kmeanspp(kern: Callable, X: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding (Arthur & Vassilvitskii 2007) with the kernel distance K(x, x) + K(y, y) − 2K(x, y).

    For the linear kernel that distance is Euclidean and scikit-learn's ``kmeans_plusplus`` does the work.
    """
    n = X.shape[0]
    if getattr(kern, "linear", False):
        from sklearn.cluster import kmeans_plusplus

        _, idx = kmeans_plusplus(X, d, random_state=int(rng.integers(2**31 - 1)))
        return np.asarray(idx)
    diag = np.array([kern(X[i : i + 1], X[i : i + 1])[0, 0] for i in range(n)])
    chosen = [int(rng.integers(n))]
    dist = np.maximum(diag + diag[chosen[0]] - 2 * kern(X, X[chosen[0] : chosen[0] + 1])[:, 0], 0.0)
    for _ in range(1, d):
        total = dist.sum()
        i = int(rng.choice(n, p=dist / total)) if total > 0 else int(rng.integers(n))
        chosen.append(i)
        dist = np.minimum(dist, np.maximum(diag + diag[i] - 2 * kern(X, X[i : i + 1])[:, 0], 0.0))
    return np.array(chosen)


LANDMARK_RULES: dict[str, Callable[..., np.ndarray]] = {
    "random": _landmarks_random,
    "pivoted_cholesky": _landmarks_pivoted_cholesky,
    "kmeans++": _landmarks_kmeanspp,
}
"""Landmark selection rule → function(kernel, X, d, rng) returning row indices of X."""


# --------------------------------------------------------------------------------------------------
# Whitening of F1 (mapping F2)
# --------------------------------------------------------------------------------------------------
def _whitening_cholesky(M: np.ndarray, rcond: float) -> np.ndarray | None:
    """U⁻¹ with M = UᵀU (U upper triangular), or None if M is not safely positive definite."""
    try:
        L = np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        return None
    if np.min(np.diag(L)) ** 2 <= rcond * np.max(np.diag(M)):
        return None
    return np.linalg.inv(L.T)


def _whitening_symmetric(M: np.ndarray, rcond: float) -> np.ndarray:
    """M^{+1/2}: the pseudo-inverse square root (same Gram as Cholesky when M is invertible)."""
    vals, vecs = np.linalg.eigh(M)
    keep = vals > rcond * max(vals.max(), 0.0)
    return (vecs[:, keep] / np.sqrt(vals[keep])) @ vecs[:, keep].T


@document_input_attributes
class KernelFeatureMap(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Blum's kernel-to-feature maps F1, F2 and F3 over landmarks (Blum 2006, Section 4).

    Parameters
    ----------
    n_landmarks : int, optional
        d. If None, :func:`landmark_count` of (``eps``, ``delta``, ``margin``), capped at the number of rows.
    mapping : {"F1", "F2", "F3"}
    kernel : str or callable
        See :func:`kernel_matrix`.
    kernel_params : dict, optional
        ``gamma`` (rbf, polynomial), ``degree``, ``coef0`` (polynomial): scikit-learn's parameterisation.
    landmarks : {"random", "pivoted_cholesky", "kmeans++"} or array of row indices
    n_components : int, optional
        d₃ of F3 (required for F3).
    normalize : bool
        Use K̂ = K/√(K(x, x)K(y, y)) (Section 4.5).
    whitening : {"cholesky", "symmetric"}
        F2's U⁻¹ (falls back to the symmetric pseudo-inverse root when M is singular) or M^{+1/2}.
    rcond : float
        Relative eigenvalue cut-off for the pseudo-inverse.
    eps, delta, margin : float
        Lemma 1's ε, δ and margin γ, used only when ``n_landmarks`` is None.
    seed : int, numpy or torch Generator, or None, default 0

    Attributes
    ----------
    landmark_indices_ : (d,) array
        Rows of the fitted X used as landmarks.
    landmarks_ : (d, n_features) array
    kernel_landmarks_ : (d, d) array
        M(S).
    whitening_ : (d, d) array
        U⁻¹ (or M^{+1/2}); ``F2 = F1 @ whitening_`` (computed for every mapping: :meth:`score` uses it).
    whitening_used_ : str
        ``"cholesky"`` or ``"symmetric"`` (after a fallback).
    projection_ : (d, d₃) array
        The scaled F3 projection (F3 only).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 3))
    >>> fmap = KernelFeatureMap(20, mapping="F2", kernel="rbf", kernel_params={"gamma": 0.25}, seed=0).fit(X)
    >>> F = fmap.transform(X[fmap.landmark_indices_])
    >>> K = kernel_matrix(X[fmap.landmark_indices_], X[fmap.landmark_indices_], "rbf", gamma=0.25)
    >>> bool(np.allclose(F @ F.T, K))
    True
    """

    def __init__(
        self,
        n_landmarks: int | None = None,
        *,
        mapping: str = "F2",
        kernel: Any = "rbf",
        kernel_params: dict | None = None,
        landmarks: Any = "random",
        n_components: int | None = None,
        normalize: bool = False,
        whitening: str = "cholesky",
        rcond: float = 1e-10,
        eps: float = 0.1,
        delta: float = 0.05,
        margin: float = 0.25,
        seed: Any = 0,
    ) -> None:
        self.n_landmarks = n_landmarks
        self.mapping = mapping
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.landmarks = landmarks
        self.n_components = n_components
        self.normalize = normalize
        self.whitening = whitening
        self.rcond = rcond
        self.eps = eps
        self.delta = delta
        self.margin = margin
        self.seed = seed

    def _k(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        params = self.kernel_params or {}
        K = kernel_matrix(A, B, self.kernel, **params)
        if self.normalize:
            da, db = kernel_diagonal(A, self.kernel, **params), kernel_diagonal(B, self.kernel, **params)
            if np.any(da <= 0) or np.any(db <= 0):
                raise DataError("normalize=True needs K(x, x) > 0 for every point; the kernel gives 0 or less.")
            K = normalize_kernel(K, da, db)
        return K

    def _kernel_fn(self) -> Callable:
        def kern(A: np.ndarray, B: np.ndarray) -> np.ndarray:
            return self._k(A, B)

        kern.linear = self.kernel == "linear" and not self.normalize  # type: ignore[attr-defined]
        return kern

    def fit(self, X: Any, y: Any = None) -> KernelFeatureMap:
        """Choose landmarks among the rows of X (unlabelled draws from D) and build the map; ``y`` is ignored."""
        if self.mapping not in ("F1", "F2", "F3"):
            raise DataError(f"mapping must be one of ['F1', 'F2', 'F3']; got {self.mapping!r}.")
        if self.whitening not in ("cholesky", "symmetric"):
            raise DataError(f"whitening must be 'cholesky' or 'symmetric'; got {self.whitening!r}.")
        Xv = check_X(self, X, reset=True)
        n = Xv.shape[0]
        rng = as_rng(self.seed)
        if isinstance(self.landmarks, str):
            if self.landmarks not in LANDMARK_RULES:
                raise DataError(
                    f"landmarks must be one of {sorted(LANDMARK_RULES)} or an array of row indices; "
                    f"got {self.landmarks!r}."
                )
            d = self.n_landmarks
            if d is None:
                d = min(landmark_count(self.eps, self.delta, self.margin), n)
            d = check_n_components(d, n, name="n_landmarks", what=f"the number of rows of X, n_samples = {n}")
            idx = LANDMARK_RULES[self.landmarks](self._kernel_fn(), Xv, d, rng)
        else:
            idx = np.asarray(self.landmarks)
            if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu" or idx.min() < 0 or idx.max() >= n:
                raise DataError(
                    f"landmarks given as indices must be a non-empty 1-D integer array with values in "
                    f"[0, {n - 1}]; got {self.landmarks!r}."
                )
        self.landmark_indices_ = idx
        self.landmarks_ = Xv[idx]
        M = self._k(self.landmarks_, self.landmarks_)
        self.kernel_landmarks_ = M
        self.whitening_used_ = self.whitening
        W = _whitening_cholesky(M, self.rcond) if self.whitening == "cholesky" else None
        if W is None:
            W = _whitening_symmetric(M, self.rcond)
            self.whitening_used_ = "symmetric"
        self.whitening_ = W
        if self.mapping == "F3":
            if self.n_components is None:
                raise DataError("n_components (d₃) is required for mapping='F3'; pass e.g. n_components=50.")
            self.projection_ = random_projection_matrix(idx.size, self.n_components, "gaussian", seed=rng)
        return self

    @property
    def _n_features_out(self) -> int:
        if self.mapping == "F3":
            return int(self.projection_.shape[1])
        return int(self.landmark_indices_.size)

    def _map(self, Xv: np.ndarray, mapping: str) -> np.ndarray:
        F = self._k(Xv, self.landmarks_)
        if mapping == "F1":
            return F
        F = F @ self.whitening_
        return F if mapping == "F2" else F @ self.projection_

    def transform(self, X: Any) -> np.ndarray:
        """F1, F2 or F3 of the rows of X."""
        check_fitted(self, "landmarks_", call="fit(X)")
        return self._map(check_X(self, X, reset=False), self.mapping)

    def score(self, X: Any, y: Any = None) -> float:
        """How well the landmarks reproduce the kernel on ``X``: −‖K − F Fᵀ‖_F / ‖K‖_F (higher is better, 0 exact).

        K is the (normalised, if ``normalize``) kernel matrix of the rows of ``X`` and F their F2 features
        (F3 for ``mapping="F3"``, whose Gram approximates K in expectation; F1's Gram is not an approximation
        of K, so F1 is scored by the F2 of the same landmarks). F2's Gram is the Nyström approximation
        K(X, S) M⁺ K(S, X). At most 2000 evenly spaced rows of ``X`` are used (the cost is quadratic in
        rows). ``y`` is ignored. This is the score :class:`~sklearn.model_selection.GridSearchCV` maximises
        over ``n_landmarks``, ``landmarks`` or ``whitening``; comparing kernels by it compares different
        K's.
        """
        check_fitted(self, "landmarks_", call="fit(X)")
        Xv = check_X(self, X, reset=False)
        if Xv.shape[0] > 2000:
            Xv = Xv[np.linspace(0, Xv.shape[0] - 1, 2000).astype(np.int64)]
        K = self._k(Xv, Xv)
        F = self._map(Xv, "F3" if self.mapping == "F3" else "F2")
        norm = float(np.linalg.norm(K))
        return -float(np.linalg.norm(K - F @ F.T)) / (norm if norm > 0 else 1.0)


# --------------------------------------------------------------------------------------------------
# Algorithm 1: random-hyperplane weak learner
# --------------------------------------------------------------------------------------------------
def hyperplane_error(
    h: np.ndarray, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None
) -> np.ndarray:
    """Training error of sign(h·x) (h·x ≥ 0 ↦ +1) for each column of h, labels y ∈ {−1, +1}; weighted by
    ``sample_weight`` (normalised to sum 1) when given."""
    pred = np.where(X @ h >= 0, 1.0, -1.0)
    wrong = pred != y[:, None]
    if sample_weight is None:
        return np.mean(wrong, axis=0)
    return (sample_weight / sample_weight.sum()) @ wrong


@document_input_attributes
class RandomHyperplaneWeakLearner(ClassifierMixin, BaseEstimator):
    """Blum's Algorithm 1 with the empirical threshold of footnote 2: draw unit h until error ≤ 1/2 − γ/6.

    Theorem 1: on data with margin γ, a random h has error ≤ 1/2 − γ/4 with probability Ω(γ), so O(1/γ)
    draws are expected. With ``sample_weight`` the error is the weighted one (a boosting round's
    distribution), so the learner drops into :class:`sklearn.ensemble.AdaBoostClassifier`.

    Parameters
    ----------
    margin : float
        The margin γ in (0, 1).
    max_tries : int
        Give up after this many hyperplanes.
    seed : int, numpy or torch Generator, or None, default 0

    Attributes
    ----------
    coef_ : (N,) array
        The accepted unit normal h.
    n_tries_ : int
        How many hyperplanes were drawn (including the accepted one).
    training_error_ : float
        The (weighted) training error of h.
    classes_ : (2,) array
        The labels mapped to −1 and +1.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5)); y = np.sign(X[:, 0] + 1e-9)
    >>> learner = RandomHyperplaneWeakLearner(0.1, seed=0).fit(X, y)
    >>> bool(learner.training_error_ <= 0.5 - 0.1 / 6)
    True
    """

    def __init__(self, margin: float = 0.1, *, max_tries: int = 10_000, seed: Any = 0) -> None:
        self.margin = margin
        self.max_tries = max_tries
        self.seed = seed

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> RandomHyperplaneWeakLearner:
        """Draw hyperplanes until one has (weighted) training error ≤ 1/2 − margin/6."""
        if isinstance(self.margin, bool) or not isinstance(self.margin, (int, float, np.floating)) or not (
            0 < self.margin < 1
        ):
            raise DataError(f"margin must lie in (0, 1); got {self.margin!r}. It is the assumed margin γ.")
        Xv = check_X(self, X, reset=True)
        if y is None:
            raise DataError(
                "RandomHyperplaneWeakLearner needs class labels: call fit(X, y) with y "
                "(RandomHyperplaneWeakLearner requires y to be passed, but the target y is None)."
            )
        y = np.asarray(y)
        check_y_finite(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)
        kind = type_of_target(y, input_name="y")
        if kind not in ("binary", "multiclass"):
            raise DataError(
                f"Unknown label type: {kind}. y must hold class labels (a continuous target is not a class); "
                "pass the two labels of a binary problem."
            )
        n_classes = np.unique(y).size
        if n_classes != 2:
            raise DataError(
                f"y must hold exactly 2 classes for the random-hyperplane learner; got {n_classes} "
                f"({'one class' if n_classes == 1 else 'Only binary classification is supported.'}). "
                "Use one-vs-rest for more classes."
            )
        codes, classes = as_labels(y, Xv.shape[0])
        w = _sample_weights(sample_weight, Xv.shape[0])
        signs = np.where(codes == 1, 1.0, -1.0)
        rng = as_rng(self.seed)
        target = 0.5 - self.margin / 6
        tried = 0
        while tried < self.max_tries:
            batch = min(256, self.max_tries - tried)
            H = rng.standard_normal((Xv.shape[1], batch))
            H /= np.linalg.norm(H, axis=0)
            err = hyperplane_error(H, Xv, signs, w)
            ok = np.flatnonzero(err <= target)
            if ok.size:
                j = int(ok[0])
                self.coef_, self.training_error_ = H[:, j], float(err[j])
                self.n_tries_, self.classes_ = tried + j + 1, classes
                return self
            tried += batch
        raise DataError(
            f"no random hyperplane reached training error ≤ 1/2 − margin/6 = {target:.4f} in max_tries="
            f"{self.max_tries} draws; the data may have no margin {self.margin}. Lower margin or raise max_tries."
        )

    def decision_function(self, X: Any) -> np.ndarray:
        """h·x for each row (positive: ``classes_[1]``)."""
        check_fitted(self, "coef_", call="fit(X, y)")
        return check_X(self, X, reset=False) @ self.coef_

    def predict(self, X: Any) -> np.ndarray:
        """``classes_[1]`` where h·x ≥ 0, else ``classes_[0]``."""
        positive = self.decision_function(X) >= 0
        return self.classes_[positive.astype(int)]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


def _sample_weights(sample_weight: Any, n: int) -> np.ndarray:
    """Normalised non-negative weights (uniform when None)."""
    if sample_weight is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
    if w.shape == (n,) and np.isfinite(w).all() and (w >= 0).all() and w.sum() <= 0:
        raise DataError("sample_weight must not be all zero (every weight is 0); pass positive weights or None.")
    if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise DataError(
            f"sample_weight must hold {n} finite non-negative weights (one per row of X) with a positive sum; "
            f"got shape {w.shape}. Pass None for equal weights."
        )
    return w / w.sum()
