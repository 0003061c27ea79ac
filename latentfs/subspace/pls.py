"""Partial least squares: NIPALS (PLS1/PLS2 and Mode A), SIMPLS, kernel PLS, and VIP scores.

Rosipal & Krämer (2006), "Overview and Recent Advances in Partial Least Squares", LNCS 3940, pp. 34–51.
Both blocks are centred (the chapter never scales; ``scale=True`` autoscales as an option). With
X (n × N) and Y (n × M) centred, PLS finds weights w maximising cov(Xw, Yc)² (eq. 2) and decomposes
X = T Pᵀ + E, Y = U Qᵀ + F (eq. 1).

Variants, chosen by a dict of fitting functions (:data:`PLS_ALGORITHMS`):

* ``("nipals", "regression")``: PLS1 / PLS2. Deflation X ← X − t pᵀ, Y ← Y − t cᵀ with the
  unnormalised c = Yᵀt/(tᵀt). The deflation is carried out *implicitly* (the deflated matrices are never
  formed: X_a w = Xw − T(Pᵀw) and X_aᵀY = XᵀY − P Tᵀ Y), which gives the same W, T, P, C as the
  explicit scheme at two passes over X per component.
* ``("nipals", "canonical")``: PLS Mode A (Wold; Wegelin's PLS-W2A): X ← X − t pᵀ, Y ← Y − u qᵀ.
* ``("simpls", "regression")``: de Jong's SIMPLS, weights acting on the undeflated X (equals PLS1 for
  one response, differs from PLS2 for several).

The NIPALS inner loop (steps 1–6 of the chapter) is a power iteration whose fixed point is the dominant
singular pair of the deflated cross-product X_aᵀY_a (eq. 3). ``inner="svd"`` (default) computes that
fixed point directly from the small N × M matrix; ``inner="power"`` runs the iteration itself, starting
from the first non-zero column of Y as scikit-learn does.

Kernel PLS (:class:`KernelPLS`, Rosipal & Trejo 2001, Section 5 of the chapter) works on the centred
kernel matrix, with deflation K ← (I − ttᵀ)K(I − ttᵀ) and predictions Ŷ_t = K_t U (TᵀKU)⁻¹ TᵀY.

VIP (variable importance in projection; not in the chapter, the usual definition of Wold et al.):
VIP_j = sqrt(N Σ_a SS_a (w_ja/‖w_a‖)² / Σ_a SS_a) with SS_a = ‖c_a‖² t_aᵀt_a, so that Σ_j VIP_j² = N and
"VIP > 1" is the customary selection rule. VIP always uses W (for SIMPLS, the orthonormal basis of R that
NIPALS's W is), so one fitted model has one VIP whatever the algorithm.

**VIP > 1 is not a test.** Because Σ_j VIP_j² = N, some features exceed 1 whatever the data: on pure noise
(y independent of X; 60 × 50, two components) VIP > 1 keeps 33–35% of the features. The selector's default
rule therefore reads the bootstrap band: keep feature j when the lower end of its equal-tailed 90% band
(rows resampled, 100 refits) exceeds 1; on the same pure noise this keeps 0.8–1.0% of features
(20 data sets; test ``test_vip_band_rule_false_positive_rate_on_pure_noise``).
It is a heuristic band, not an exact level-α test; that measured rate is what is stated.

The number of components can be chosen by cross-validated Q² = 1 − PRESS/SS (:func:`cross_validated_q2`,
``PLS(n_components="q2")``): the smallest A within one standard error (over folds) of the best.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    MultiOutputMixin,
    RegressorMixin,
    TransformerMixin,
)

from latentfs.core.base import BaseSelector, check_fitted, check_X, require_y
from latentfs.core.data import DataError, as_continuous, as_rng, check_n_components
from latentfs.core.weights import FeatureWeights
from latentfs.subspace.kernel_features import kernel_matrix

__all__ = [
    "PLS",
    "KernelPLS",
    "PLSComponents",
    "PLSVIPSelector",
    "PLS_ALGORITHMS",
    "choose_n_components",
    "cross_validated_q2",
    "vip",
    "vip_scores",
]




def _check_choice(value: Any, name: str, choices: Any) -> Any:
    if value not in choices:
        raise DataError(f"{name} must be one of {sorted(choices)}; got {value!r}.")
    return value


# --------------------------------------------------------------------------------------------------
# State: the fitted components
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PLSComponents:
    """What a PLS fit extracts, in the chapter's symbols (all float64, in centred/scaled units).

    Attributes
    ----------
    x_weights : (N, A) array
        W, unit-norm weights acting on the deflated X (NIPALS). For SIMPLS, the Gram–Schmidt basis of R
        (see :func:`_orthonormal_weights`), which equals NIPALS's W when both fit the same model; VIP is
        always computed from W.
    x_loadings : (N, A) array
        P, p = Xᵀt/(tᵀt).
    y_weights : (M, A) array
        c of the inner loop (unit norm in Mode A; the unnormalised Yᵀt/(tᵀt) in regression mode, as in
        scikit-learn).
    y_loadings : (M, A) array
        C (regression: Y ≈ T Cᵀ, c = Yᵀt/(tᵀt)) or Q (Mode A: q = Yᵀu/(uᵀu)).
    x_scores, y_scores : (n, A) arrays
        T and U.
    x_rotations : (N, A) array
        W(PᵀW)⁻¹ (NIPALS) or R (SIMPLS): maps centred X to T.
    coef : (N, M) array
        B = W(PᵀW)⁻¹Cᵀ (Rosipal & Krämer, Section 2.4), for centred/scaled X and Y.
    n_iter : tuple of int
        Inner iterations per component (1 when computed by SVD).
    """

    x_weights: np.ndarray
    x_loadings: np.ndarray
    y_weights: np.ndarray
    y_loadings: np.ndarray
    x_scores: np.ndarray
    y_scores: np.ndarray
    x_rotations: np.ndarray
    coef: np.ndarray
    n_iter: tuple[int, ...]


# --------------------------------------------------------------------------------------------------
# Math: small functions named after the quantity they compute
# --------------------------------------------------------------------------------------------------
def _flip_sign(w: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic sign: the entry of w largest in magnitude is positive (scikit-learn's rule)."""
    s = np.sign(w[np.argmax(np.abs(w))]) or 1.0
    return w * s, c * s


def dominant_singular_pair(
    cross: np.ndarray, *, inner: str = "svd", tol: float = 1e-20, max_iter: int = 500
) -> tuple[np.ndarray, np.ndarray, int]:
    """Dominant left/right singular vectors (w, c) of a cross-product matrix X_aᵀY_a (eq. 3).

    ``inner="power"`` is the NIPALS loop: c ← Sᵀw, w ← Sc/‖Sc‖ until ‖Δw‖² < tol, started from the first
    non-zero column of S (i.e. u = the first non-zero column of Y); ``inner="svd"`` computes the fixed
    point directly. Both return w with unit norm and c = Sᵀw/‖Sᵀw‖.
    """
    if cross.shape[1] == 1:  # PLS1: one iteration (Section 2.1)
        w = cross[:, 0] / np.linalg.norm(cross[:, 0])
        return w, np.ones(1), 1
    if inner == "svd":
        u, _, vt = np.linalg.svd(cross, full_matrices=False)
        return u[:, 0], vt[0], 1
    norms = np.linalg.norm(cross, axis=0)
    start = int(np.flatnonzero(norms > 0)[0])
    w = cross[:, start] / norms[start]
    it = 0
    while it < max_iter:
        it += 1
        c = cross.T @ w
        w_new = cross @ c
        w_new /= np.linalg.norm(w_new)
        done = float(np.sum((w_new - w) ** 2)) < tol
        w = w_new
        if done:
            break
    c = cross.T @ w
    return w, c / np.linalg.norm(c), it


def _check_left(cross: np.ndarray, start_norm: float, a: int) -> None:
    if start_norm <= 1e-300:
        raise DataError(
            "Y: XᵀY is zero after centring (Y is constant, or every column of X is uncorrelated with Y), so "
            "PLS has no direction to extract. Check that Y varies and belongs to these samples."
        )
    if np.linalg.norm(cross) <= 1e-12 * start_norm:
        raise DataError(
            f"n_components: X and Y have no covariance left after {a} component(s) (the deflated XᵀY "
            f"is zero), so component {a + 1} is undefined. Use n_components={a} or fewer."
        )


def _nipals_regression(
    X: np.ndarray, Y: np.ndarray, n_components: int, inner: str, tol: float, max_iter: int
) -> PLSComponents:
    """PLS1/PLS2 with implicit deflation X ← X − t pᵀ, Y ← Y − t cᵀ (Rosipal & Krämer, Section 2.2)."""
    n, N = X.shape
    M = Y.shape[1]
    W = np.zeros((N, n_components))
    P = np.zeros((N, n_components))
    C = np.zeros((M, n_components))
    T = np.zeros((n, n_components))
    U = np.zeros((n, n_components))
    cross = X.T @ Y  # X_aᵀY_a, deflated by a rank-one update each step
    start_norm = float(np.linalg.norm(cross))
    iters = []
    for a in range(n_components):
        _check_left(cross, start_norm, a)
        w, _, it = dominant_singular_pair(cross, inner=inner, tol=tol, max_iter=max_iter)
        w, _ = _flip_sign(w, w[:1])
        iters.append(it)
        Ta, Pa, Ca = T[:, :a], P[:, :a], C[:, :a]
        t = X @ w - Ta @ (Pa.T @ w)  # t = X_a w
        tt = float(t @ t)
        Tt = Ta.T @ t  # ≈ 0; kept so that p and c equal the explicitly deflated X_aᵀt, Y_aᵀt
        p = (X.T @ t - Pa @ Tt) / tt
        c = (Y.T @ t - Ca @ Tt) / tt
        cc = float(c @ c)
        u = (Y @ c - Ta @ (Ca.T @ c)) / cc if cc > 0 else np.zeros(n)  # u = Y_a c/(cᵀc)
        W[:, a], P[:, a], C[:, a], T[:, a], U[:, a] = w, p, c, t, u
        cross = cross - np.outer(p, c) * tt  # X_{a+1}ᵀY_{a+1} = X_aᵀY_a − p (tᵀY_a)
    rotations = W @ np.linalg.pinv(P.T @ W)
    return PLSComponents(W, P, C.copy(), C, T, U, rotations, rotations @ C.T, tuple(iters))


def _nipals_canonical(
    X: np.ndarray, Y: np.ndarray, n_components: int, inner: str, tol: float, max_iter: int
) -> PLSComponents:
    """PLS Mode A: X ← X − t pᵀ and Y ← Y − u qᵀ with unit-norm w and c (Section 2.2)."""
    n, N = X.shape
    M = Y.shape[1]
    Xa, Ya = X.copy(), Y.copy()
    W, P = np.zeros((N, n_components)), np.zeros((N, n_components))
    Cw, Q = np.zeros((M, n_components)), np.zeros((M, n_components))
    T, U = np.zeros((n, n_components)), np.zeros((n, n_components))
    start_norm = float(np.linalg.norm(X.T @ Y))
    iters = []
    for a in range(n_components):
        cross = Xa.T @ Ya
        _check_left(cross, start_norm, a)
        w, c, it = dominant_singular_pair(cross, inner=inner, tol=tol, max_iter=max_iter)
        w, c = _flip_sign(w, c)
        iters.append(it)
        t, u = Xa @ w, Ya @ c
        p = Xa.T @ t / (t @ t)
        q = Ya.T @ u / (u @ u)
        Xa -= np.outer(t, p)
        Ya -= np.outer(u, q)
        W[:, a], P[:, a], Cw[:, a], Q[:, a], T[:, a], U[:, a] = w, p, c, q, t, u
    rotations = W @ np.linalg.pinv(P.T @ W)
    return PLSComponents(W, P, Cw, Q, T, U, rotations, rotations @ Q.T, tuple(iters))


def _simpls(
    X: np.ndarray, Y: np.ndarray, n_components: int, inner: str, tol: float, max_iter: int
) -> PLSComponents:
    """SIMPLS (de Jong 1993; the digest's [EXT] algorithm): orthonormal T, B = R Qᵀ."""
    n, N = X.shape
    M = Y.shape[1]
    R, P, V = np.zeros((N, n_components)), np.zeros((N, n_components)), np.zeros((N, n_components))
    Q, Cw = np.zeros((M, n_components)), np.zeros((M, n_components))
    T, U = np.zeros((n, n_components)), np.zeros((n, n_components))
    cross = X.T @ Y
    start_norm = float(np.linalg.norm(cross))
    iters = []
    for a in range(n_components):
        _check_left(cross, start_norm, a)
        r, c, it = dominant_singular_pair(cross, inner=inner, tol=tol, max_iter=max_iter)
        r, c = _flip_sign(r, c)
        iters.append(it)
        t = X @ r
        norm_t = float(np.linalg.norm(t))
        t, r = t / norm_t, r / norm_t
        p, q = X.T @ t, Y.T @ t
        v = p - V[:, :a] @ (V[:, :a].T @ p)
        v /= np.linalg.norm(v)
        cross = cross - np.outer(v, v @ cross)
        R[:, a], P[:, a], V[:, a], Q[:, a], Cw[:, a], T[:, a], U[:, a] = r, p, v, q, c, t, Y @ q
    W = _orthonormal_weights(R)
    return PLSComponents(W, P, Cw, Q, T, U, R, R @ Q.T, tuple(iters))


def _orthonormal_weights(R: np.ndarray) -> np.ndarray:
    """W from SIMPLS's R: the Gram–Schmidt basis of R's columns, each signed to agree with its r_a.

    In NIPALS, W is orthonormal and PᵀW is upper triangular, so R = W(PᵀW)⁻¹ has span(r_1..r_a) =
    span(w_1..w_a) for every a and W is the Gram–Schmidt basis of R. Defining SIMPLS's W the same way
    makes W (and hence VIP) identical to NIPALS's whenever both fit the same model (one response: both
    span the Krylov space of XᵀX and Xᵀy; de Jong 1993).
    """
    Qm, Rm = np.linalg.qr(R)
    signs = np.sign(np.diag(Rm))
    signs[signs == 0] = 1.0
    return Qm * signs


PLS_ALGORITHMS: dict[tuple[str, str], Callable[..., PLSComponents]] = {
    ("nipals", "regression"): _nipals_regression,
    ("nipals", "canonical"): _nipals_canonical,
    ("simpls", "regression"): _simpls,
}
"""Fitting function per (algorithm, deflation)."""


def vip_values(weights: np.ndarray, scores: np.ndarray, y_loadings: np.ndarray) -> np.ndarray:
    """VIP_j = sqrt(N Σ_a SS_a (w_ja/‖w_a‖)² / Σ_a SS_a), SS_a = ‖c_a‖² t_aᵀt_a (Wold et al.)."""
    ss = np.sum(y_loadings**2, axis=0) * np.sum(scores**2, axis=0)
    wn2 = (weights / np.linalg.norm(weights, axis=0)) ** 2
    return np.sqrt(weights.shape[0] * (wn2 @ ss) / ss.sum())


def _centre_scale(A: np.ndarray, scale: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = A.mean(axis=0)
    A = A - mean
    if scale:
        std = A.std(axis=0, ddof=1)
        std[std == 0] = 1.0
        A /= std
    else:
        std = np.ones(A.shape[1])
    return A, mean, std


def _validate_xy(X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], bool]:
    xm = as_continuous(X, name="X", min_samples=2)
    if not hasattr(Y, "iloc"):
        Y = np.asarray(Y)
        if Y.dtype == object:  # numbers stored as objects: read them as numbers
            try:
                Y = Y.astype(np.float64)
            except (TypeError, ValueError):
                pass
    one_d = Y.ndim == 1
    ym = as_continuous(np.asarray(Y).reshape(-1, 1) if one_d else Y, name="Y")
    if ym.shape[0] != xm.shape[0]:
        raise DataError(
            f"Y must have one row per row of X: got {ym.shape[0]} rows of Y for {xm.shape[0]} of X. "
            "Pass the responses of the same samples."
        )
    return xm.values, ym.values, xm.feature_names, one_d


# --------------------------------------------------------------------------------------------------
# User-facing estimators
# --------------------------------------------------------------------------------------------------
class PLS(ClassNamePrefixFeaturesOutMixin, TransformerMixin, RegressorMixin, MultiOutputMixin, BaseEstimator):
    """Linear partial least squares (Rosipal & Krämer 2006): PLS1/PLS2, Mode A, SIMPLS.

    Parameters
    ----------
    n_components : int or "q2"
        Number of latent components A (at most min(n − 1, N); Mode A also at most M). ``"q2"``: the A in
        1..``max_components`` chosen from 5-fold cross-validation by the one-standard-error rule
        (:func:`choose_n_components`); the chosen A is ``n_components_`` and the Q² curve ``q2_``.
    algorithm : {"nipals", "simpls"}
        NIPALS with deflation, or SIMPLS (regression deflation only).
    deflation : {"regression", "canonical"}
        PLS1/PLS2 (Y deflated by t) or Mode A (Y deflated by u).
    scale : bool
        Divide centred columns by their standard deviation (ddof=1). The chapter only centres.
    inner : {"svd", "power"}
        How the NIPALS inner loop is solved (see the module docstring).
    tol, max_iter : float, int
        Tolerance on ‖Δw‖² and iteration cap of ``inner="power"``.
    max_components : int
        Largest A tried when ``n_components="q2"``.

    Attributes
    ----------
    components_ : PLSComponents
        W, P, C/Q, T, U, rotations and B in centred/scaled units.
    coef_ : (N, M) array
        Coefficients in the input units: ``ŷ = intercept_ + x @ coef_`` (note: scikit-learn stores the
        transpose).
    intercept_ : (M,) array
        ``ȳ − x̄ @ coef_``.
    n_components_ : int
        The number of components used (chosen by Q² when ``n_components="q2"``).
    n_iter_ : int
        The most inner iterations of any component (1 with ``inner="svd"``).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` in ``fit`` had string column names.

    :meth:`score` is scikit-learn's regression score, the R² of :meth:`predict` (uniform average over
    responses), so ``GridSearchCV`` over ``n_components`` picks the best-predicting model.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 5)); y = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.normal(size=30)
    >>> model = PLS(2).fit(X, y)
    >>> model.predict(X[:2]).round(2).tolist()
    [-0.05, -2.58]
    >>> bool(np.allclose(model.x_scores_.T @ model.x_scores_, np.diag(np.diag(model.x_scores_.T @ model.x_scores_))))
    True
    """

    def __init__(
        self,
        n_components: int | str = 2,
        *,
        algorithm: str = "nipals",
        deflation: str = "regression",
        scale: bool = False,
        inner: str = "svd",
        tol: float = 1e-20,
        max_iter: int = 500,
        max_components: int = 10,
    ) -> None:
        self.n_components = n_components
        self.max_components = max_components
        self.algorithm = algorithm
        self.deflation = deflation
        self.scale = scale
        self.inner = inner
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, X: Any, Y: Any) -> PLS:
        """Fit on X (n × N) and Y (n,) or (n × M)."""
        _check_choice(self.algorithm, "algorithm", {"nipals", "simpls"})
        _check_choice(self.deflation, "deflation", {"regression", "canonical"})
        _check_choice(self.inner, "inner", {"svd", "power"})
        key = (self.algorithm, self.deflation)
        if key not in PLS_ALGORITHMS:
            raise DataError(
                f"algorithm='simpls' supports only deflation='regression'; got deflation="
                f"{self.deflation!r}. Use algorithm='nipals' for Mode A."
            )
        require_y(self, Y, "PLS needs responses: call fit(X, Y) with Y")
        Xc = check_X(self, X, reset=True, ensure_all_finite=False, ensure_min_samples=2)
        Xv, Yv, names, one_d = _validate_xy(X if hasattr(X, "iloc") else Xc, Y)
        n, N = Xv.shape
        limit = min(n - 1, N) if self.deflation == "regression" else min(n - 1, N, Yv.shape[1])
        what = "min(n_samples − 1, n_features" + (")" if self.deflation == "regression" else ", n_targets)")
        if isinstance(self.n_components, str):
            if self.n_components != "q2":
                raise DataError(
                    f"n_components must be a positive int or 'q2'; got {self.n_components!r}. "
                    "Use 'q2' to choose it by cross-validated Q²."
                )
            if self.deflation != "regression":
                raise DataError("n_components='q2' needs deflation='regression' (Q² scores predictions of Y).")
            top = check_n_components(self.max_components, 10**9, what="max_components")
            press, ss, sizes = _cv_press(
                Xv, Yv, min(top, max(1, (4 * n) // 5 - 1), N), self.algorithm, self.scale, 5, 0
            )
            self.q2_ = 1.0 - press.sum(axis=0) / ss.sum()
            A = choose_n_components(press, sizes)
        else:
            A = check_n_components(self.n_components, limit, what=what)
        self.n_components_ = A
        Xc, self.x_mean_, self.x_std_ = _centre_scale(Xv, self.scale)
        Yc, self.y_mean_, self.y_std_ = _centre_scale(Yv, self.scale)
        comps = PLS_ALGORITHMS[key](Xc, Yc, A, self.inner, float(self.tol), int(self.max_iter))
        self.components_ = comps
        self.n_iter_ = max(comps.n_iter)
        self.coef_ = comps.coef * self.y_std_[None, :] / self.x_std_[:, None]
        self.intercept_ = self.y_mean_ - self.x_mean_ @ self.coef_
        self._feature_names = names
        self._one_d = one_d
        return self

    @property
    def _n_features_out(self) -> int:
        return int(self.n_components_)

    # convenient views of the components, with scikit-learn's names
    @property
    def x_weights_(self) -> np.ndarray:
        return self.components_.x_weights

    @property
    def x_loadings_(self) -> np.ndarray:
        return self.components_.x_loadings

    @property
    def y_loadings_(self) -> np.ndarray:
        return self.components_.y_loadings

    @property
    def x_scores_(self) -> np.ndarray:
        return self.components_.x_scores

    @property
    def y_scores_(self) -> np.ndarray:
        return self.components_.y_scores

    @property
    def x_rotations_(self) -> np.ndarray:
        return self.components_.x_rotations

    def _check_X(self, X: Any) -> np.ndarray:
        check_fitted(self, "components_", call="fit(X, Y)")
        return check_X(self, X, reset=False)

    def transform(self, X: Any) -> np.ndarray:
        """X scores T = ((X − x̄)/s) W(PᵀW)⁻¹."""
        Xv = self._check_X(X)
        return ((Xv - self.x_mean_) / self.x_std_) @ self.components_.x_rotations

    def predict(self, X: Any) -> np.ndarray:
        """ŷ = ȳ + (x − x̄)B (Section 2.4); 1-D when Y was 1-D at fit."""
        Xv = self._check_X(X)
        out = Xv @ self.coef_ + self.intercept_
        return out[:, 0] if self._one_d else out

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Coefficient of determination R² of the predictions (averaged uniformly over responses)."""
        from sklearn.metrics import r2_score

        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))

    def vip(self) -> FeatureWeights:
        """VIP scores of the fitted model (no band; see :func:`vip_scores` for bootstrap bands)."""
        check_fitted(self, "components_", call="fit(X, Y)")
        return vip(self)


def _cv_press(
    Xv: np.ndarray, Yv: np.ndarray, max_components: int, algorithm: str, scale: bool, n_splits: int, seed: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-fold PRESS (K, A), per-fold SS (K,) and fold sizes (K,) of K-fold cross-validated PLS."""
    from sklearn.model_selection import KFold

    n, N = Xv.shape
    if isinstance(n_splits, bool) or not isinstance(n_splits, (int, np.integer)) or not 2 <= n_splits <= n:
        raise DataError(f"n_splits must be an integer in [2, n_samples={n}]; got {n_splits!r}.")
    folds = list(KFold(int(n_splits), shuffle=True, random_state=int(as_rng(seed).integers(2**31))).split(Xv))
    smallest_train = min(len(tr) for tr, _ in folds)
    A_max = check_n_components(max_components, min(smallest_train - 1, N), what="min(train size − 1, n_features)")
    press = np.zeros((len(folds), A_max))
    ss = np.zeros(len(folds))
    for f, (train, test) in enumerate(folds):
        Xc, xm, xs = _centre_scale(Xv[train], scale)
        Yc, ym, ys = _centre_scale(Yv[train], scale)
        comps = PLS_ALGORITHMS[(algorithm, "regression")](Xc, Yc, A_max, "svd", 1e-12, 500)
        Xt = (Xv[test] - xm) / xs
        ss[f] = float(np.sum((Yv[test] - ym) ** 2))
        for a in range(1, A_max + 1):
            W, P, C = comps.x_weights[:, :a], comps.x_loadings[:, :a], comps.y_loadings[:, :a]
            rot = comps.x_rotations[:, :a] if algorithm == "simpls" else W @ np.linalg.pinv(P.T @ W)
            pred = (Xt @ rot @ C.T) * ys + ym
            press[f, a - 1] = float(np.sum((Yv[test] - pred) ** 2))
    return press, ss, np.array([len(te) for _, te in folds], dtype=float)


def cross_validated_q2(
    X: Any,
    Y: Any,
    *,
    max_components: int = 10,
    algorithm: str = "nipals",
    scale: bool = False,
    n_splits: int = 5,
    seed: Any = 0,
) -> np.ndarray:
    """Q²(A) = 1 − PRESS(A)/SS for A = 1..max_components, by K-fold cross-validation (Wold 1978).

    PRESS(A) = Σ over held-out rows of ‖y − ŷ_A‖² with the model refitted without them; SS = Σ ‖y − ȳ‖²
    with ȳ the training mean of each fold. Folds are shuffled by ``seed``. Q² near 1 is good prediction;
    Q² ≤ 0 is no better than the mean.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 6)); y = X[:, 0] + 0.1 * rng.normal(size=50)
    >>> q2 = cross_validated_q2(X, y, max_components=3)
    >>> bool(q2[0] > 0.8 and q2[1] > 0.95)
    True
    """
    Xv, Yv, _, _ = _validate_xy(X, Y)
    press, ss, _ = _cv_press(Xv, Yv, max_components, algorithm, scale, n_splits, seed)
    return np.asarray(1.0 - press.sum(axis=0) / ss.sum())


def choose_n_components(press: np.ndarray, sizes: np.ndarray) -> int:
    """The one-standard-error rule (Hastie, Tibshirani & Friedman 2009, §7.10): the smallest A whose mean
    per-fold error PRESS_f(A)/n_f is within one standard error (over folds) of the best A."""
    mse = press / sizes[:, None]
    mean = mse.mean(axis=0)
    best = int(np.argmin(mean))
    se = mse[:, best].std(ddof=1) / np.sqrt(mse.shape[0])
    return int(np.flatnonzero(mean <= mean[best] + se)[0]) + 1


def vip(model: PLS) -> FeatureWeights:
    """VIP scores of a fitted :class:`PLS` as :class:`FeatureWeights` (method ``"pls.vip"``).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(40, 4)); y = X[:, 2] + 0.1 * rng.normal(size=40)
    >>> vip(PLS(2).fit(X, y)).top(1)
    ['x2']
    """
    c = model.components_
    scores = vip_values(c.x_weights, c.x_scores, c.y_loadings)
    return FeatureWeights(
        scores,
        "pls.vip",
        feature_names=model._feature_names,
        info={
            "n_components": int(c.x_weights.shape[1]),
            "algorithm": model.algorithm,
            "scale": bool(model.scale),
            "rule": "VIP > 1 (sum of squared VIP equals the number of features)",
        },
    )


def vip_scores(
    X: Any,
    Y: Any,
    n_components: int = 2,
    *,
    algorithm: str = "nipals",
    scale: bool = True,
    n_bootstrap: int = 100,
    seed: Any = None,
) -> FeatureWeights:
    """VIP scores of a PLS regression with a bootstrap band (rows resampled with replacement).

    Features are autoscaled by default (``scale=True``) because VIP compares features with each other.
    The draws are the VIP scores refitted on ``n_bootstrap`` resamples; ``FeatureWeights.band`` reads
    percentile intervals from them. VIP is invariant to the sign of each component, so no alignment of
    components across resamples is needed.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(2)
    >>> X = rng.normal(size=(50, 6)); y = X[:, 0] + 0.5 * X[:, 3] + 0.2 * rng.normal(size=50)
    >>> fw = vip_scores(X, y, 2, n_bootstrap=20, seed=0)
    >>> fw.top(2), fw.draws.shape
    (['x0', 'x3'], (20, 6))
    """
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)) or n_bootstrap < 0:
        raise DataError(f"n_bootstrap must be a non-negative integer; got {n_bootstrap!r}.")
    model = PLS(n_components, algorithm=algorithm, scale=scale).fit(X, Y)
    point = vip(model)
    if n_bootstrap == 0:
        return point
    rng = as_rng(seed)
    Xv, Yv, _, _ = _validate_xy(X, Y)
    n = Xv.shape[0]
    draws = np.empty((int(n_bootstrap), Xv.shape[1]))
    for b in range(int(n_bootstrap)):
        idx = rng.integers(0, n, size=n)
        for _ in range(100):  # a resample with constant Y has no covariance to extract: draw it again
            if np.ptp(Yv[idx], axis=0).max() > 0:
                break
            idx = rng.integers(0, n, size=n)
        Xb, _, _ = _centre_scale(Xv[idx], scale)
        Yb, _, _ = _centre_scale(Yv[idx], scale)
        comps = PLS_ALGORITHMS[(algorithm, "regression")](Xb, Yb, point.info["n_components"], "svd", 1e-12, 500)
        draws[b] = vip_values(comps.x_weights, comps.x_scores, comps.y_loadings)
    info = dict(point.info, n_bootstrap=int(n_bootstrap), band="bootstrap over rows")
    return FeatureWeights(point.scores, "pls.vip", point.feature_names, draws=draws, info=info)


class PLSVIPSelector(BaseSelector):
    """Select features by PLS VIP scores: by the bootstrap band (default), the point VIP, or the top k.

    Parameters
    ----------
    n_components : int
        PLS components.
    rule : {"band", "point"}
        ``"band"`` (default): keep j when the lower end of its equal-tailed ``level`` bootstrap band exceeds
        ``threshold``. On pure noise this keeps 0.8–1.0% of features at level 0.9, threshold 1 (measured,
        60 × 50, two components, 100 resamples), where ``"point"`` (VIP ≥ threshold) keeps 33–35%.
        ``"point"``: the customary VIP ≥ threshold.
    n_features_to_select : int, optional
        Keep the top k by point VIP instead (overrides ``rule``).
    threshold : float
        The VIP cut-off (1 by convention: Σ VIP² = N).
    level : float
        Coverage of the equal-tailed bootstrap band used by ``rule="band"``.
    algorithm, scale : see :class:`PLS`.
    n_bootstrap : int
        Resamples for the band (≥ 10 with ``rule="band"``; 100 by default).
    seed : int, Generator or None, default 0
        Randomness of the bootstrap.

    Attributes
    ----------
    weights_ : FeatureWeights
        Point VIP with the bootstrap draws.
    support_ : ndarray of bool (n_features,)
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` in ``fit`` had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(3)
    >>> X = rng.normal(size=(60, 8)); y = X[:, 1] - X[:, 5] + 0.1 * rng.normal(size=60)
    >>> PLSVIPSelector(2, n_features_to_select=2).fit(X, y).get_support(indices=True).tolist()
    [1, 5]
    >>> PLSVIPSelector(2, seed=0).fit(X, y).get_support(indices=True).tolist()
    [1, 5]
    """

    _requires_y = True
    _min_samples = 3  # two components and a bootstrap need a few rows

    def __init__(
        self,
        n_components: int = 2,
        *,
        rule: str = "band",
        n_features_to_select: int | None = None,
        threshold: float | None = 1.0,
        level: float = 0.9,
        algorithm: str = "nipals",
        scale: bool = True,
        n_bootstrap: int = 100,
        seed: Any = 0,
    ) -> None:
        self.n_components = n_components
        self.rule = rule
        self.n_features_to_select = n_features_to_select
        self.threshold = threshold
        self.level = level
        self.algorithm = algorithm
        self.scale = scale
        self.n_bootstrap = n_bootstrap
        self.seed = seed

    def _fit(self, X: Any, y: Any) -> FeatureWeights:
        require_y(self, y, "PLSVIPSelector needs responses: call fit(X, y) with y")
        _check_choice(self.rule, "rule", {"band", "point"})
        uses_band = self.rule == "band" and self.n_features_to_select is None
        if uses_band and (not isinstance(self.n_bootstrap, (int, np.integer)) or self.n_bootstrap < 10):
            raise DataError(
                f"rule='band' needs n_bootstrap ≥ 10 resamples to read a band; got n_bootstrap={self.n_bootstrap!r}. "
                "Raise n_bootstrap or use rule='point'."
            )
        if uses_band and not 0 < self.level < 1:
            raise DataError(f"level must lie in (0, 1); got {self.level!r}.")
        return vip_scores(
            X, y, self.n_components, algorithm=self.algorithm, scale=self.scale,
            n_bootstrap=self.n_bootstrap if (uses_band or self.rule == "band") else 0, seed=self.seed,
        )

    def _support_from(self, weights: FeatureWeights) -> np.ndarray:
        if self.n_features_to_select is not None or self.rule == "point":
            return super()._support_from(weights)
        lower, _ = weights.band(self.level)
        return lower > (1.0 if self.threshold is None else float(self.threshold))


# --------------------------------------------------------------------------------------------------
# Kernel PLS
# --------------------------------------------------------------------------------------------------
def centre_kernel(K: np.ndarray) -> np.ndarray:
    """(I − 𝟙𝟙ᵀ/n) K (I − 𝟙𝟙ᵀ/n) (Rosipal & Trejo 2001)."""
    col = K.mean(axis=0)
    return K - col[None, :] - K.mean(axis=1)[:, None] + col.mean()


def centre_test_kernel(K_test: np.ndarray, K_train: np.ndarray) -> np.ndarray:
    """(K_t − 𝟙_t𝟙ᵀK/n)(I − 𝟙𝟙ᵀ/n), K_train uncentred (Rosipal & Trejo 2001)."""
    col = K_train.mean(axis=0)
    return K_test - col[None, :] - K_test.mean(axis=1)[:, None] + col.mean()


def _kernel_nipals(K: np.ndarray, Y: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """Kernel NIPALS (chapter Section 5): t = Ku, u = Yc with unit t and u; returns T, U."""
    n = K.shape[0]
    Ka, Ya = K.copy(), Y.copy()
    T, U = np.zeros((n, n_components)), np.zeros((n, n_components))
    start = float(np.linalg.norm(Y.T @ K @ Y))
    if start <= 1e-12 * max(float(np.linalg.norm(K)) * float(np.sum(Y * Y)), 1e-300):
        raise DataError(
            "Y: YᵀKY is zero after centring (Y is constant, or the centred kernel is zero), so kernel PLS "
            "has no direction to extract. Check that Y varies."
        )
    for a in range(n_components):
        inner = Ya.T @ Ka @ Ya  # the NIPALS fixed point: c is its dominant eigenvector
        if np.linalg.norm(inner) <= 1e-12 * max(start, 1e-300):
            raise DataError(
                f"n_components: the centred kernel and Y have no covariance left after {a} component(s). "
                f"Use n_components={a} or fewer."
            )
        vals, vecs = np.linalg.eigh(inner)
        c = vecs[:, -1]
        u = Ya @ c
        u /= np.linalg.norm(u)
        t = Ka @ u
        t /= np.linalg.norm(t)
        Kt = Ka @ t
        Ka = Ka - np.outer(t, Kt) - np.outer(Kt, t) + np.outer(t, t) * float(t @ Kt)
        Ya = Ya - np.outer(t, t @ Ya)
        T[:, a], U[:, a] = t, u
    return T, U


class KernelPLS(ClassNamePrefixFeaturesOutMixin, TransformerMixin, RegressorMixin, MultiOutputMixin, BaseEstimator):
    """Kernel PLS regression with centring (Rosipal & Trejo 2001; Rosipal & Krämer 2006, Section 5).

    Parameters
    ----------
    n_components : int
        Number of score vectors.
    kernel : str or callable
        ``"linear"``, ``"rbf"`` (scikit-learn's exp(−gamma‖x − y‖²); the chapter's width h is gamma = 1/h),
        ``"polynomial"``, ``"precomputed"`` or a function ``k(A, B) -> (len(A), len(B))`` array; see
        :func:`latentfs.subspace.kernel_features.kernel_matrix`.
    kernel_params : dict, optional
        Parameters of the kernel (``gamma``; ``degree``, ``coef0``), scikit-learn's parameterisation.

    Attributes
    ----------
    dual_coef_ : (n, M) array
        U (TᵀKU)⁻¹ TᵀY: ``ŷ = ȳ + K_t,c dual_coef_``.
    x_scores_, y_scores_ : (n, A) arrays
        T and U.
    X_fit_ : (n, N) array
    K_fit_ : (n, n) array
        The uncentred training kernel.
    y_mean_ : (M,) array
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` in ``fit`` had string column names.

    :meth:`score` is scikit-learn's regression score, the R² of :meth:`predict`, so ``GridSearchCV`` over
    ``n_components`` or ``kernel_params`` picks the best-predicting model.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(0, 3.5, 100)[:, None]
    >>> z = 4.26 * (np.exp(-x[:, 0]) - 4 * np.exp(-2 * x[:, 0]) + 3 * np.exp(-3 * x[:, 0]))
    >>> model = KernelPLS(8, kernel="rbf", kernel_params={"gamma": 1 / 1.8}).fit(x, z)
    >>> float(np.mean((model.predict(x) - z) ** 2)) < 1e-3
    True
    """

    def __init__(self, n_components: int = 2, *, kernel: Any = "rbf", kernel_params: dict | None = None) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.kernel_params = kernel_params

    def _kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return kernel_matrix(A, B, self.kernel, **(self.kernel_params or {}))

    def fit(self, X: Any, Y: Any) -> KernelPLS:
        """Fit on X (n × N; for ``kernel="precomputed"`` the n × n kernel) and Y (n,) or (n × M)."""
        require_y(self, Y, "KernelPLS needs responses: call fit(X, Y) with Y")
        Xc = check_X(self, X, reset=True, ensure_all_finite=False, ensure_min_samples=2)
        Xv, Yv, _, one_d = _validate_xy(X if hasattr(X, "iloc") else Xc, Y)
        n = Xv.shape[0]
        if self.kernel == "precomputed" and Xv.shape[1] != n:
            raise DataError(
                f"X must be the square n × n training kernel when kernel='precomputed'; got shape {Xv.shape}."
            )
        A = check_n_components(self.n_components, n - 1, what="n_samples − 1")
        K = Xv if self.kernel == "precomputed" else self._kernel(Xv, Xv)
        Kc = centre_kernel(K)
        self.y_mean_ = Yv.mean(axis=0)
        Yc = Yv - self.y_mean_
        T, U = _kernel_nipals(Kc, Yc, A)
        # Ŷ_t = K_t U (TᵀKU)⁻¹ TᵀY with K the undeflated centred kernel
        self.dual_coef_ = U @ np.linalg.solve(T.T @ Kc @ U, T.T @ Yc)
        self.x_scores_, self.y_scores_ = T, U
        self.X_fit_, self.K_fit_ = Xv, K
        self._one_d = one_d
        return self

    @property
    def _n_features_out(self) -> int:
        return int(self.x_scores_.shape[1])

    def _test_kernel(self, X: Any) -> np.ndarray:
        check_fitted(self, "dual_coef_", call="fit(X, Y)")
        given = getattr(X, "shape", (0, None))[-1]
        if self.kernel == "precomputed" and given != self.K_fit_.shape[0]:
            raise DataError(
                f"X must be the test × train kernel with {self.K_fit_.shape[0]} columns; got shape "
                f"{getattr(X, 'shape', None)} (X has {given} features, but KernelPLS is expecting "
                f"{self.K_fit_.shape[0]} features as input)."
            )
        Xv = check_X(self, X, reset=False)
        Kt = Xv if self.kernel == "precomputed" else self._kernel(Xv, self.X_fit_)
        return centre_test_kernel(Kt, self.K_fit_)

    def predict(self, X: Any) -> np.ndarray:
        """ŷ = ȳ + K_t,c U (TᵀKU)⁻¹ TᵀY."""
        out = self._test_kernel(X) @ self.dual_coef_ + self.y_mean_
        return out[:, 0] if self._one_d else out

    def transform(self, X: Any) -> np.ndarray:
        """Test scores T_t = K_t,c U (TᵀKU)⁻¹ (chapter Section 2.4 with XXᵀ → K)."""
        Kt = self._test_kernel(X)
        Kc = centre_kernel(self.K_fit_)
        T, U = self.x_scores_, self.y_scores_
        return Kt @ U @ np.linalg.inv(T.T @ Kc @ U)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags
