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

from typing import Any

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    MultiOutputMixin,
    RegressorMixin,
    TransformerMixin,
)

from latentfs.core.base import BaseSelector, check_fitted, check_X, document_input_attributes, require_y
from latentfs.core.data import DataError, as_rng, check_n_components
from latentfs.core.weights import FeatureWeights
from latentfs.subspace.kernel_pls import (  # noqa: F401  (kernel PLS, re-exported)
    KernelPLS,
    _kernel_nipals,
    centre_kernel,
    centre_test_kernel,
)
from latentfs.subspace.pls_numerics import (  # noqa: F401  (the numerics, re-exported)
    PLS_ALGORITHMS,
    PLSComponents,
    _centre_scale,
    _check_choice,
    _check_left,
    _flip_sign,
    _nipals_canonical,
    _nipals_regression,
    _orthonormal_weights,
    _simpls,
    _validate_xy,
    dominant_singular_pair,
    vip_values,
)

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


# --------------------------------------------------------------------------------------------------
# User-facing estimators
# --------------------------------------------------------------------------------------------------
@document_input_attributes
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


@document_input_attributes
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
