"""Kernel Q-α (Wolf & Shashua 2005, Definition 14) with the corrected update and feature-space centring.

The linear Q-α of :mod:`latentfs.select.q_alpha` works on the preprocessed features ``m_i`` (rows of M).
Its kernel variant replaces the inner products ``m_iᵀ m_j`` by a feature kernel ``V_ij = k(m_i, m_j)``;
the basis Q is implicit (``Q = Φᵀ E`` for coefficients E, n × k). The printed update ``E ← E R⁻¹`` does
not keep ``Qᵀ Q = I``; the corrected one is ``E ← D V E R⁻¹`` (the digest, §2.6).

Kernels between features are scikit-learn's (:func:`sklearn.metrics.pairwise.pairwise_kernels`, one
parameterisation across latentfs): ``"linear"`` ⟨x, y⟩, ``"polynomial"`` (γ⟨x, y⟩ + coef0)^degree and
``"rbf"`` exp(−γ‖x − y‖²), plus the paper's ``"sections"`` kernel Σ_s (m_i^s · m_j^s)^degree over
consecutive blocks of samples (§5.1), or any callable M → V.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg as sla
from sklearn.metrics.pairwise import pairwise_kernels

from latentfs.core.base import BaseSelector, document_input_attributes
from latentfs.core.data import DataError, check_n_components
from latentfs.core.weights import FeatureWeights
from latentfs.select.q_alpha import (
    _SOLVERS,
    QAlphaResult,
    _alpha_step,
    _check_choice,
    _check_iter,
    _QAlphaSelectorMixin,
    _row_preprocess,
)
from latentfs.select.singular import _as_matrix, _rng

__all__ = ["KernelQAlpha", "feature_kernel", "kernel_q_alpha"]


class _KernelGram:
    """``G = V ∘ (P Pᵀ)`` with ``P = V E`` (Definition 14, step 1)."""

    def __init__(self, V: np.ndarray, P: np.ndarray) -> None:
        self.V, self.P, self.n = V, P, V.shape[0]

    def matvec(self, v: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", self.P, self.V @ (v[:, None] * self.P))

    def dense(self) -> np.ndarray:
        return self.V * (self.P @ self.P.T)


def _kernel_pairwise(name: str) -> Callable[[np.ndarray, dict[str, Any]], np.ndarray]:
    # scikit-learn's kernels between the rows of M: linear ⟨x, y⟩, polynomial (γ⟨x, y⟩ + coef0)^degree,
    # rbf exp(−γ‖x − y‖²)
    keys = {"linear": (), "polynomial": ("gamma", "coef0", "degree"), "rbf": ("gamma",)}[name]
    return lambda M, p: pairwise_kernels(M, metric=name, **{k: p[k] for k in keys})


def _kernel_sections(M: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    # Σ_s (m_i^s · m_j^s)^degree over consecutive sections of the samples (the "sessions" kernel, §5.1)
    s = p["section_size"]
    V = np.zeros((M.shape[0], M.shape[0]))
    for start in range(0, M.shape[1], s):
        B = M[:, start:start + s]
        V += (B @ B.T) ** p["degree"]
    return V


_KERNELS: dict[str, Callable[[np.ndarray, dict[str, Any]], np.ndarray]] = {
    "linear": _kernel_pairwise("linear"),
    "polynomial": _kernel_pairwise("polynomial"),
    "rbf": _kernel_pairwise("rbf"),
    "sections": _kernel_sections,
}


def _center_features(V: np.ndarray) -> np.ndarray:
    # feature-space centring across features: V ← H V H, H = I − 11ᵀ/n (digest §2.6, option b)
    r = V.mean(axis=1)
    return V - r[:, None] - r[None, :] + V.mean()


def _cosine_normalize(V: np.ndarray) -> np.ndarray:
    dg = np.sqrt(np.clip(np.diag(V), 1e-300, None))
    return V / dg[:, None] / dg[None, :]


def kernel_q_alpha(V: Any, n_components: int = 2, *, init: Any = "pca", max_iter: int = 100, tol: float = 1e-6,
                   solver: str = "auto", seed: Any = None) -> tuple[QAlphaResult, np.ndarray]:
    """Kernel Q-α on a feature kernel matrix ``V`` (n × n, ``v_ij = k(m_i, m_j)``).

    Wolf & Shashua (2005), Definition 14, with the corrected update (the printed ``E ← E R⁻¹`` does
    not keep ``Mᵀ E`` orthonormal)::

        G = V ∘ (V E Eᵀ V);  α = top eigenvector;  D = diag(α)
        Zᵀ Z = Eᵀ V D V D V E = Rᵀ R (Cholesky);  E ← D V E R⁻¹

    With the linear kernel and a matched start (``Q(0) = Mᵀ E(0)``) the α iterates equal those of
    linear Q-α. ``init="pca"`` takes ``E(0)`` from the top-k eigenvectors of V scaled by
    ``λ^{-1/2}`` (so ``Eᵀ V E = I``); an array is used as ``E(0)`` after V-orthonormalisation.

    Returns
    -------
    result : QAlphaResult (``Q`` is None; Q = Mᵀ E is implicit)
    E : ndarray, shape (n, k), the final coefficients

    Examples
    --------
    >>> import numpy as np
    >>> from latentfs.select.q_alpha import preprocess_features
    >>> M = preprocess_features(np.random.default_rng(0).normal(size=(30, 8)))
    >>> res, E = kernel_q_alpha(M @ M.T, 2)
    >>> np.allclose(E.T @ (M @ M.T) @ E, np.eye(2))
    True
    """
    Vm = np.asarray(V, dtype=np.float64)
    if not np.isfinite(Vm).all():
        raise DataError("V must be finite; it holds NaN or infinite values. Check the kernel and the data.")
    if Vm.ndim != 2 or Vm.shape[0] != Vm.shape[1] or not np.allclose(Vm, Vm.T, atol=1e-10 * max(1.0, np.abs(Vm).max())):
        raise DataError(f"V must be a symmetric square kernel matrix over features; got shape {Vm.shape}. "
                        "Pass k(m_i, m_j) for all feature pairs, e.g. from feature_kernel(X).")
    _check_iter(max_iter, tol)
    _check_choice(solver, ("auto", *_SOLVERS), "solver")
    n = Vm.shape[0]
    lam_all, U = np.linalg.eigh(Vm)
    rank = int(np.sum(lam_all > 1e-10 * max(lam_all[-1], 1e-300)))
    k = check_n_components(n_components, max(rank, 1), name="n_components",
                           what=f"the rank of the kernel matrix, {rank}")
    if isinstance(init, str) and init == "pca":
        E = U[:, ::-1][:, :k] / np.sqrt(lam_all[::-1][:k])
    else:
        if isinstance(init, str) and init != "random":
            raise DataError(f"init must be 'pca', 'random' or an array of shape ({n}, {k}); got {init!r}.")
        E0 = _rng(seed).standard_normal((n, k)) if isinstance(init, str) else np.asarray(init, dtype=np.float64)
        if E0.shape != (n, k):
            raise DataError(f"init must have shape (n_features, n_components) = ({n}, {k}); got {E0.shape}.")
        R0 = np.linalg.cholesky(E0.T @ Vm @ E0).T
        E = sla.solve_triangular(R0, E0.T, trans="T", lower=False).T
    hist: dict[str, list[float]] = {"objective": [], "delta": []}
    alpha: np.ndarray | None = None
    lam, converged, it = 0.0, False, 0
    for step in range(1, max_iter + 1):
        it = step
        P = Vm @ E  # p_i = Qᵀ φ(m_i)
        lam, new = _alpha_step(_KernelGram(Vm, P), solver, alpha)
        DP = new[:, None] * P  # D V E
        ZtZ = DP.T @ Vm @ DP
        R = np.linalg.cholesky(ZtZ + 1e-300 * np.eye(k)).T
        E = sla.solve_triangular(R, DP.T, trans="T", lower=False).T  # D V E R⁻¹
        delta = float(np.linalg.norm(new - alpha)) if alpha is not None else np.inf
        hist["objective"].append(lam)
        hist["delta"].append(delta)
        alpha = new
        if delta < tol:
            converged = True
            break
    assert alpha is not None
    return QAlphaResult(alpha, None, lam, it, converged, hist), E


def feature_kernel(X: Any, kernel: Any = "linear", *, degree: int = 2, gamma: float = 1.0, coef0: float = 1.0,
                   section_size: int = 8, center: bool = True, feature_center: bool = True,
                   normalize: bool = True) -> np.ndarray:
    """The feature kernel ``V`` for kernel Q-α: rows of the preprocessed ``M`` mapped by ``kernel``,
    then optionally centred in feature space (``V ← HVH``) and cosine-normalised.

    Examples
    --------
    >>> import numpy as np
    >>> V = feature_kernel(np.random.default_rng(0).normal(size=(16, 5)), "sections", section_size=8)
    >>> V.shape, bool(np.allclose(np.diag(V), 1.0))
    ((5, 5), True)
    """
    A, _ = _as_matrix(X)
    M = _row_preprocess(A, center, "X").dense().T
    if callable(kernel):
        V = np.asarray(kernel(M), dtype=np.float64)
    else:
        _check_choice(kernel, _KERNELS, "kernel")
        V = _KERNELS[kernel](M, {"degree": degree, "gamma": gamma, "coef0": coef0, "section_size": section_size})
    if feature_center:
        V = _center_features(V)
    if normalize:
        V = _cosine_normalize(V)
    return (V + V.T) / 2


# ---------------------------------------------------------------------------------------------
# selector
# ---------------------------------------------------------------------------------------------
@document_input_attributes
class KernelQAlpha(_QAlphaSelectorMixin, BaseSelector):
    """Kernel Q-α (Wolf & Shashua 2005, Definition 14, corrected update; feature-space centring).

    Parameters
    ----------
    n_features_to_select : int, "gap" or None, default "gap"
        As in :class:`~latentfs.select.q_alpha.QAlpha`: by default the features above the largest gap in
        the sorted α (the paper's "sharp break"); None keeps all.
    n_components : int
        ``k``, the number of columns of the implicit basis Q.
    kernel : {"linear", "polynomial", "rbf", "sections"} or callable
        Kernel between preprocessed features (rows of M); a callable maps M (n × q) to V (n × n).
    degree, gamma, coef0, section_size
        Kernel parameters, scikit-learn's: ``"rbf"`` exp(−gamma‖x − y‖²), ``"polynomial"``
        (gamma⟨x, y⟩ + coef0)^degree; ``"sections"``: ``Σ_s (m_i^s·m_j^s)^degree`` over consecutive blocks
        of ``section_size`` samples.
    center : bool
        Centre each feature over the samples before the kernel (default False: on the paper's
        "sessions" problem row centring cost 20–45 points of success; the centring that matters is
        the feature-space one below).
    feature_center : bool
        ``V ← H V H`` (needed: without it the common mean direction dominates and α does not
        discriminate).
    normalize : bool
        Cosine-normalise V.
    init, max_iter, tol
        As in :func:`kernel_q_alpha`.
    seed : int, Generator or None, default 0
        Only used by ``init="random"``.

    Attributes
    ----------
    weights_ : FeatureWeights
    support_ : ndarray of bool (n_features,)
    result_ : QAlphaResult
    coefficients_ : ndarray (n_features, n_components)
        E, the implicit basis ``Q = Φᵀ E``.
    n_iter_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 20)); X[:30, :3] += 3.0
    >>> KernelQAlpha(3, kernel="linear", feature_center=False).fit(X).get_support(indices=True).tolist()
    [0, 1, 2]
    """

    _min_samples = 2
    _min_features = 2  # one feature has no feature kernel to centre

    def __init__(self, n_features_to_select: int | str | None = "gap", *, n_components: int = 2,
                 kernel: Any = "polynomial", degree: int = 2, gamma: float = 1.0, coef0: float = 0.0,
                 section_size: int = 8, center: bool = False, feature_center: bool = True,
                 normalize: bool = True, init: Any = "pca", max_iter: int = 100, tol: float = 1e-6,
                 seed: Any = 0) -> None:
        self.n_features_to_select = n_features_to_select
        self.n_components = n_components
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.section_size = section_size
        self.center = center
        self.feature_center = feature_center
        self.normalize = normalize
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed

    def _fit(self, X: Any, y: Any = None) -> FeatureWeights:
        _, names = _as_matrix(X)
        V = feature_kernel(X, self.kernel, degree=self.degree, gamma=self.gamma, coef0=self.coef0,
                           section_size=self.section_size, center=self.center,
                           feature_center=self.feature_center, normalize=self.normalize)
        res, E = kernel_q_alpha(V, self.n_components, init=self.init, max_iter=self.max_iter, tol=self.tol,
                                seed=self.seed)
        self.result_, self.coefficients_, self.n_iter_ = res, E, res.n_iter
        kname = self.kernel if isinstance(self.kernel, str) else "callable"
        return FeatureWeights(res.alpha, f"q_alpha.kernel.{kname}", feature_names=names,
                              info={"n_components": self.n_components, "objective": res.objective,
                                    "n_iter": res.n_iter})
