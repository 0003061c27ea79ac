"""Kernel PLS (:mod:`latentfs.subspace.pls`): NIPALS on a centred kernel matrix (Rosipal & Trejo 2001), with the
centring of the training and test kernels; :mod:`latentfs.subspace.pls` re-exports :class:`KernelPLS`.
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

from latentfs.core.base import check_fitted, check_X, document_input_attributes, require_y
from latentfs.core.data import DataError, check_n_components
from latentfs.subspace.kernel_features import kernel_matrix
from latentfs.subspace.pls_numerics import _validate_xy


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


@document_input_attributes
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
