"""Numerics of high-dimensional discriminant analysis (HDDA) and clustering (HDDC).

Bouveyron, Girard & Schmid (2006, LNCS 3940 "Class-specific subspace discriminant analysis"; 2007
"High-dimensional discriminant analysis", Comm. Stat. 36(14); 2007 "High-dimensional data clustering",
CSDA 52(1)) model class i as a Gaussian N(μ_i, Σ_i) whose covariance, in the basis Q_i of its
eigenvectors, is

    Δ_i = Q_iᵗ Σ_i Q_i = diag(a_i1, …, a_id_i, b_i, …, b_i)        (a_ij > b_i, d_i < p)

so the class lives in a d_i-dimensional affine subspace (signal variances a_ij) plus isotropic noise b_i.
Constraining the a's, b's, Q's and d's gives the family of sub-models of :data:`SUBMODELS` (models 1–22,
numbered as in the digest, 1–14 as in HDclassif, Bergé et al. 2012) plus the six classical Gaussian
models (23–28: full / common full = QDA / LDA, diagonal, spherical), and the chapter's homothetic rule
HDDAh (29, Prop. 5 of the 2006 chapter). Every model is stored in one
representation (:class:`HDDAParams`: a p × d_i orthonormal Q̃_i, its d_i signal variances and one noise
variance per class), so the cost, the densities, the EM and the feature weights are written once.

Module map (STYLE.md items 1 and 4):

* statistics: :class:`Scatter` (weighted class scatter W_i, its eigen-decomposition, computed in the n × n
  Gram space when there are fewer rows than features — the "small-n trick" of HDclassif);
* intrinsic dimension: :func:`cattell_dimension` (scree test), :func:`bic_dimension`, chosen by the
  dict :data:`DIMENSION_RULES`;
* estimators: :data:`ESTIMATORS` maps each model name to its ML estimator (built from the orientation,
  a-part and b-part dicts below); :func:`n_parameters` gives ν for BIC;
* densities: :func:`cost` (K_i of Theorem 1), :func:`log_joint` (log π_i f_i(x));
* HDDC: :func:`hddc_em_step` and :func:`fit_hddc` (restarts through the shared driver).

Missing values: HDDA and HDDC do not model them; NaN in the input is an error (``as_continuous`` with
``missing="error"``) naming the row and column, with the remedy to impute or drop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from scipy.special import logsumexp

from latentfs.core.data import DataError
from latentfs.inference.hdda.dimensions import (  # noqa: F401  (scatters and dimensions, re-exported)
    DIMENSION_RULES,
    Scatter,
    _bic_rule,
    _dimension_limit,
    _scatter,
    bic_dimension,
    cattell_dimension,
    check_hdda_data,
    check_threshold,
    class_scatters,
    pooled_scatter,
    select_dimensions,
)
from latentfs.inference.hdda.submodels import (  # noqa: F401  (the sub-model family, re-exported)
    _A_COUNT,
    _B_COUNT,
    _BY_NUMBER,
    _CLASSICAL_COUNT,
    _D_COUNT,
    _FAMILY,
    LOG_2PI,
    NOISE_FLOOR,
    SUBMODELS,
    SubmodelSpec,
    _orientation_count,
    _spec,
    n_parameters,
    resolve_submodel,
    resolve_submodels,
)

__all__ = [
    "DIMENSION_RULES",
    "ESTIMATORS",
    "SUBMODELS",
    "HDDAParams",
    "Scatter",
    "SubmodelSpec",
    "bic_dimension",
    "cattell_dimension",
    "class_scatters",
    "cost",
    "criterion_value",
    "estimate",
    "fit_hdda_params",
    "log_joint",
    "n_parameters",
    "resolve_submodel",
    "select_dimensions",
]


# ---------------------------------------------------------------------------------------------------
# Parameters and their ML estimators
# ---------------------------------------------------------------------------------------------------
@dataclass
class HDDAParams:
    """Fitted parameters of any model of the family, in one representation.

    Attributes
    ----------
    model : str
        Model name (:data:`SUBMODELS`).
    weights : ndarray (k,)
        π_i, class proportions.
    means : ndarray (k, p)
        μ_i.
    orientations : list of (ndarray (p, d_i) or None)
        Q̃_i, the first d_i columns of Q_i (orthonormal); None means the identity (axis-aligned models).
    signal : list of ndarray (d_i,)
        a_ij, the variances along the columns of Q̃_i.
    noise : ndarray (k,)
        b_i, the variance in the p − d_i remaining directions (unused when d_i = p).
    dims : ndarray (k,) of int
        d_i.
    """

    model: str
    weights: np.ndarray
    means: np.ndarray
    orientations: list[np.ndarray | None]
    signal: list[np.ndarray]
    noise: np.ndarray
    dims: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.means.shape[1])

    @property
    def n_classes(self) -> int:
        return int(self.means.shape[0])

    def covariance(self, i: int) -> np.ndarray:
        """Σ_i = b_i I + Q̃_i diag(a_i − b_i) Q̃_iᵗ (dense p × p; for tests and small p)."""
        p = self.n_features
        q = self.orientations[i]
        if q is None:
            return np.diag(self.signal[i]) if self.dims[i] == p else self.noise[i] * np.eye(p)
        cov = self.noise[i] * np.eye(p) if self.dims[i] < p else np.zeros((p, p))
        return cov + (q * (self.signal[i] - (self.noise[i] if self.dims[i] < p else 0.0))) @ q.T


def _orient_free(scatters: Sequence[Scatter], pooled: Scatter, dims: np.ndarray) -> list[np.ndarray]:
    # Free Q_i: top d_i eigenvectors of W_i (Bouveyron et al. 2006, Prop. 3 (i)).
    return [s.leading(int(d))[1] for s, d in zip(scatters, dims, strict=True)]


def _orient_common(scatters: Sequence[Scatter], pooled: Scatter, dims: np.ndarray) -> list[np.ndarray]:
    # Common Q: top d eigenvectors of W = Σ π_i W_i (exact for models 13–14; an approximation for 17–22).
    q = pooled.leading(int(dims[0]))[1]
    return [q] * len(scatters)


#: Orientation estimators: block constraint -> f(scatters, pooled, dims) -> [Q̃_i].
_ORIENTATIONS: dict[str, Callable[[Sequence[Scatter], Scatter, np.ndarray], list[np.ndarray]]] = {
    "Qi": _orient_free,
    "Q": _orient_common,
}

# a-part: f(s, π, dims) -> [a_i], where s_ij = q_ijᵗ W_i q_ij (= λ_ij for free Q_i), π = n_i / n.
# Bouveyron et al. (2007) §3.1; the a and b forms below reduce to Props. 3–4 of the 2006 chapter.
_A_ESTIMATORS: dict[str, Callable[[list[np.ndarray], np.ndarray, np.ndarray], list[np.ndarray]]] = {
    "aij": lambda s, pi, d: [si.copy() for si in s],
    "ai": lambda s, pi, d: [np.full(di, si.mean()) for si, di in zip(s, d, strict=True)],
    "aj": lambda s, pi, d: [np.sum([w * si for w, si in zip(pi, s, strict=True)], axis=0)] * len(s),
    "a": lambda s, pi, d: [
        np.full(di, sum(w * si.sum() for w, si in zip(pi, s, strict=True)) / float(pi @ d)) for di in d
    ],
}


def _noise_free(s: list[np.ndarray], pi: np.ndarray, traces: np.ndarray, d: np.ndarray, p: int) -> np.ndarray:
    # b_i = (tr W_i − Σ_{j≤d_i} s_ij) / (p − d_i)
    return np.array([(t - si.sum()) / (p - di) for si, t, di in zip(s, traces, d, strict=True)])


def _noise_common(s: list[np.ndarray], pi: np.ndarray, traces: np.ndarray, d: np.ndarray, p: int) -> np.ndarray:
    # b = (tr W − Σ_i π_i Σ_{j≤d_i} s_ij) / (p − ξ), ξ = Σ_i π_i d_i
    xi = float(pi @ d)
    b = (float(pi @ traces) - sum(w * si.sum() for w, si in zip(pi, s, strict=True))) / (p - xi)
    return np.full(len(s), b)


_B_ESTIMATORS: dict[str, Callable[..., np.ndarray]] = {"bi": _noise_free, "b": _noise_common}


def _proportions(scatters: Sequence[Scatter]) -> tuple[np.ndarray, np.ndarray]:
    n = np.array([s.weight for s in scatters])
    return n / n.sum(), np.vstack([s.mean for s in scatters])


def _floor(values: np.ndarray, scale: float) -> np.ndarray:
    return np.maximum(values, NOISE_FLOOR * max(scale, 1e-300))


def _estimate_subspace(
    spec: SubmodelSpec, scatters: Sequence[Scatter], pooled: Scatter, dims: np.ndarray
) -> HDDAParams:
    pi, means = _proportions(scatters)
    p = scatters[0].n_features
    qs = _ORIENTATIONS[spec.orientation](scatters, pooled, dims)
    if spec.orientation == "Qi":
        s = [sc.leading(int(d))[0].copy() for sc, d in zip(scatters, dims, strict=True)]
    else:
        s = [sc.projected_variances(q) for sc, q in zip(scatters, qs, strict=True)]
    traces = np.array([sc.trace for sc in scatters])
    scale = float(pi @ traces) / p
    a = [_floor(ai, scale) for ai in _A_ESTIMATORS[spec.a](s, pi, dims)]
    b = _floor(_B_ESTIMATORS[spec.b](s, pi, traces, dims, p), scale)
    return HDDAParams(spec.name, pi, means, list(qs), a, b, dims.copy())


def _full_rank_check(scatter: Scatter, what: str) -> None:
    if scatter.rank < scatter.n_features:
        raise DataError(
            f"the {what} covariance is singular (rank {scatter.rank} < p = {scatter.n_features}: fewer "
            "samples than features or collinear features), so the full-covariance model cannot be fitted. "
            "Use a subspace model such as 'AkjBkQkDk', which is designed for n < p."
        )


def _estimate_full(spec: SubmodelSpec, scatters: Sequence[Scatter], pooled: Scatter, dims: np.ndarray) -> HDDAParams:
    pi, means = _proportions(scatters)
    for s in scatters:
        _full_rank_check(s, "class")
    return HDDAParams(spec.name, pi, means, [s.eigenvectors for s in scatters],
                      [s.eigenvalues.copy() for s in scatters], np.ones(len(scatters)), dims.copy())


def _estimate_com_full(
    spec: SubmodelSpec, scatters: Sequence[Scatter], pooled: Scatter, dims: np.ndarray
) -> HDDAParams:
    pi, means = _proportions(scatters)
    _full_rank_check(pooled, "pooled within-class")
    k = len(scatters)
    return HDDAParams(spec.name, pi, means, [pooled.eigenvectors] * k, [pooled.eigenvalues.copy()] * k,
                      np.ones(k), dims.copy())


def _estimate_diag(spec: SubmodelSpec, scatters: Sequence[Scatter], pooled: Scatter, dims: np.ndarray) -> HDDAParams:
    pi, means = _proportions(scatters)
    common = spec.name == "COM_DIAG"
    diag = [pooled.diagonal] * len(scatters) if common else [s.diagonal for s in scatters]
    scale = float(pooled.trace) / pooled.n_features
    return HDDAParams(spec.name, pi, means, [None] * len(scatters), [_floor(v, scale) for v in diag],
                      np.ones(len(scatters)), dims.copy())


def _estimate_sphe(spec: SubmodelSpec, scatters: Sequence[Scatter], pooled: Scatter, dims: np.ndarray) -> HDDAParams:
    pi, means = _proportions(scatters)
    p = pooled.n_features
    if spec.name == "COM_SPHE":
        b = np.full(len(scatters), pooled.trace / p)
    else:
        b = np.array([s.trace / p for s in scatters])
    return HDDAParams(spec.name, pi, means, [None] * len(scatters), [np.zeros(0)] * len(scatters),
                      _floor(b, pooled.trace / p), dims.copy())


def _estimate_common_ratio(
    spec: SubmodelSpec, scatters: Sequence[Scatter], pooled: Scatter, dims: np.ndarray,
    *, alpha0: float = 0.3, max_iter: int = 1000, tol: float = 1e-13,
) -> HDDAParams:
    """HDDAh (Bouveyron et al. 2006, Prop. 5): the fixed point of σ_i²(α) and α(σ).

    γ = Σ_i n_i d_i / (n p); Λ = (1/(n p)) Σ_i (n_i/σ_i²)(2 Σ_{l≤d_i} λ_il − tr W_i);
    α = ((Λ + 1) − sqrt((Λ + 1)² − 4Λγ)) / (2Λ) (the root of Λα² − (Λ + 1)α + γ in ]0, 1[; γ if Λ = 0);
    σ_i² = ((2α − 1) Σ_{l≤d_i} λ_il + (1 − α) tr W_i) / p; then a_i = σ_i²/α, b_i = σ_i²/(1 − α).
    """
    pi, means = _proportions(scatters)
    p = scatters[0].n_features
    qs = _ORIENTATIONS[spec.orientation](scatters, pooled, dims)
    top = np.array([sc.leading(int(d))[0].sum() for sc, d in zip(scatters, dims, strict=True)])
    traces = np.array([sc.trace for sc in scatters])
    gamma = float(pi @ dims) / p
    alpha = alpha0
    for _ in range(max_iter):
        sigma2 = ((2 * alpha - 1) * top + (1 - alpha) * traces) / p
        lam = float(pi @ ((2 * top - traces) / sigma2)) / p
        new = gamma if abs(lam) < 1e-300 else ((lam + 1) - math.sqrt((lam + 1) ** 2 - 4 * lam * gamma)) / (2 * lam)
        if abs(new - alpha) <= tol:
            alpha = new
            break
        alpha = new
    sigma2 = ((2 * alpha - 1) * top + (1 - alpha) * traces) / p
    scale = float(pi @ traces) / p
    a = [_floor(np.full(int(d), s2 / alpha), scale) for s2, d in zip(sigma2, dims, strict=True)]
    return HDDAParams(spec.name, pi, means, list(qs), a, _floor(sigma2 / (1 - alpha), scale), dims.copy())


_Estimator = Callable[[Sequence[Scatter], Scatter, np.ndarray], HDDAParams]

#: The ML estimator of every model: name -> f(scatters, pooled_scatter, dims) -> HDDAParams.
ESTIMATORS: dict[str, _Estimator] = {
    **{s.name: partial(_estimate_subspace, s) for s in _FAMILY if s.is_subspace and s.number <= 22},
    "HDDAH": partial(_estimate_common_ratio, SUBMODELS["HDDAH"]),
    "FULL": partial(_estimate_full, SUBMODELS["FULL"]),
    "COM_FULL": partial(_estimate_com_full, SUBMODELS["COM_FULL"]),
    "DIAG": partial(_estimate_diag, SUBMODELS["DIAG"]),
    "COM_DIAG": partial(_estimate_diag, SUBMODELS["COM_DIAG"]),
    "SPHE": partial(_estimate_sphe, SUBMODELS["SPHE"]),
    "COM_SPHE": partial(_estimate_sphe, SUBMODELS["COM_SPHE"]),
}


def estimate(model: Any, scatters: Sequence[Scatter], dims: np.ndarray) -> HDDAParams:
    """ML estimate of ``model`` from class scatters with dimensions ``dims`` (looked up in :data:`ESTIMATORS`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 5)); resp = np.eye(2)[np.arange(40) % 2]
    >>> params = estimate("AkBkQkDk", class_scatters(X, resp), np.array([2, 2]))
    >>> params.signal[0].shape, params.noise.shape
    ((2,), (2,))
    """
    spec = resolve_submodel(model)
    return ESTIMATORS[spec.name](scatters, pooled_scatter(scatters), np.asarray(dims, dtype=np.int64))


# ---------------------------------------------------------------------------------------------------
# Cost K_i and densities
# ---------------------------------------------------------------------------------------------------
def cost(X: np.ndarray, params: HDDAParams) -> np.ndarray:
    """K_i(x) = −2 log(π_i f_i(x)) − p log 2π, for every row and class (n, k).

    Bouveyron et al. (2007), general form of Theorem 1 of the 2006 chapter:
    K_i(x) = Σ_{j≤d_i} ⟨q_ij, x − μ_i⟩²/a_ij + ‖x − P_i(x)‖²/b_i + Σ_j log a_ij + (p − d_i) log b_i − 2 log π_i,
    computed from Q̃_i only (O(p d_i) per point): ‖x − P_i(x)‖² = ‖x − μ_i‖² − ‖Q̃_iᵗ(x − μ_i)‖².
    """
    n, p = X.shape
    out = np.empty((n, params.n_classes))
    for i in range(params.n_classes):
        centred = X - params.means[i]
        dist2 = np.einsum("ij,ij->i", centred, centred)
        q, a, b, d = params.orientations[i], params.signal[i], params.noise[i], int(params.dims[i])
        if d == 0:
            signal_part, proj2 = 0.0, 0.0
        elif q is None:  # axis-aligned (diagonal models): the signal directions are the coordinates
            signal_part, proj2 = (centred**2 / a).sum(1), dist2
        else:
            u = centred @ q
            signal_part = (u**2 / a).sum(1)
            proj2 = (u**2).sum(1)
        noise_part = np.maximum(dist2 - proj2, 0.0) / b if d < p else 0.0
        log_det = np.log(a).sum() + (p - d) * math.log(b)
        out[:, i] = signal_part + noise_part + log_det - 2.0 * math.log(params.weights[i])
    return out


def log_joint(X: np.ndarray, params: HDDAParams) -> np.ndarray:
    """log(π_i f_i(x)) = −½ (K_i(x) + p log 2π), shape (n, k)."""
    return -0.5 * (cost(X, params) + X.shape[1] * LOG_2PI)


def posterior_from_cost(K: np.ndarray) -> np.ndarray:
    """P(C_i | x) = 1 / Σ_l exp(½ (K_i − K_l)) = softmax(−K/2) (Bouveyron et al. 2006, §2)."""
    z = -0.5 * K
    return np.exp(z - logsumexp(z, axis=1, keepdims=True))


def criterion_value(criterion: str, log_lik: float, nu: float, n: int, entropy: float = 0.0) -> float:
    """BIC = −2 log L + ν log n, ICL = BIC + 2 Ent (both minimised; HDclassif reports their negatives)."""
    table = {"bic": 0.0, "icl": 2.0 * entropy}
    if criterion not in table:
        raise DataError(f"criterion must be one of {sorted(table)}; got {criterion!r}.")
    return -2.0 * log_lik + nu * math.log(n) + table[criterion]


# ---------------------------------------------------------------------------------------------------
# Supervised fit
# ---------------------------------------------------------------------------------------------------
def fit_hdda_params(
    X: np.ndarray,
    codes: np.ndarray,
    n_classes: int,
    model: Any,
    n_dims: Any = "cattell",
    *,
    threshold: float = 0.2,
    noise_ctrl: float = 1e-8,
    class_names: Sequence[Any] | None = None,
    total: Scatter | None = None,
) -> tuple[HDDAParams, float, float]:
    """Supervised ML fit: returns (params, complete-data log-likelihood, ν)."""
    spec = resolve_submodel(model)
    resp = np.zeros((X.shape[0], n_classes))
    resp[np.arange(X.shape[0]), codes] = 1.0
    scatters = class_scatters(X, resp)
    if total is None and spec.is_subspace and spec.dims == "d" and isinstance(n_dims, str):
        total = _scatter(X, np.ones(X.shape[0]))
    dims = select_dimensions(spec, scatters, total, n_dims, threshold=threshold, noise_ctrl=noise_ctrl,
                             class_names=class_names)
    params = ESTIMATORS[spec.name](scatters, pooled_scatter(scatters), dims)
    lj = log_joint(X, params)
    log_lik = float(lj[np.arange(X.shape[0]), codes].sum())
    return params, log_lik, n_parameters(spec, X.shape[1], n_classes, dims)
