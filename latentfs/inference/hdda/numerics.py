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
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

import numpy as np
import scipy.linalg as sla
from scipy.special import logsumexp

from latentfs.core.data import DataError, check_float
from latentfs.core.options import check_moments

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

LOG_2PI = math.log(2.0 * math.pi)
NOISE_FLOOR = 1e-12  # relative floor on a variance (of tr W / p): keeps log b finite on degenerate data


# ---------------------------------------------------------------------------------------------------
# The family of models
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SubmodelSpec:
    """One member of the HDDA family.

    Attributes
    ----------
    name : str
        HDclassif-style name (``"AkjBkQkDk"`` = [a_ij b_i Q_i d_i]); classical models ``"FULL"`` (QDA),
        ``"COM_FULL"`` (LDA), ``"DIAG"``, ``"COM_DIAG"``, ``"SPHE"``, ``"COM_SPHE"``.
    number : int
        Position in the digest's table (1–14 as in HDclassif, 15–22 the rest of the subspace family,
        23–28 the classical models); 29 is the chapter's homothetic rule HDDAh (Prop. 5).
    label : str
        The bracket notation of Bouveyron et al. (2007).
    a, b, orientation, dims : str
        The constraint on each parameter block: a in {"aij", "ai", "aj", "a"}, b in {"bi", "b"} (HDDAh:
        "ai_ratio" / "bi_ratio", a_i = σ_i²/α and b_i = σ_i²/(1 − α) with one α),
        orientation in {"Qi", "Q"}, dims in {"di", "d"}; ``"classical"`` for models 23–28.
    exact : bool
        Whether the estimator is the closed-form maximum-likelihood one. Models 17–22 (common Q with
        class-specific variances) have no closed form (a common-principal-components problem, Flury 1984);
        they use Q from the eigenvectors of W and are flagged approximate.
    """

    name: str
    number: int
    label: str
    a: str
    b: str
    orientation: str
    dims: str
    exact: bool = True

    @property
    def is_subspace(self) -> bool:
        return self.a != "classical"


def _spec(number: int, name: str, label: str, a: str, b: str, q: str, d: str, exact: bool = True) -> SubmodelSpec:
    return SubmodelSpec(name, number, label, a, b, q, d, exact)


_FAMILY = [
    _spec(1, "AkjBkQkDk", "[a_ij b_i Q_i d_i]", "aij", "bi", "Qi", "di"),
    _spec(2, "AkBkQkDk", "[a_i b_i Q_i d_i]", "ai", "bi", "Qi", "di"),
    _spec(3, "ABkQkDk", "[a b_i Q_i d_i]", "a", "bi", "Qi", "di"),
    _spec(4, "AkjBQkDk", "[a_ij b Q_i d_i]", "aij", "b", "Qi", "di"),
    _spec(5, "AkBQkDk", "[a_i b Q_i d_i]", "ai", "b", "Qi", "di"),
    _spec(6, "ABQkDk", "[a b Q_i d_i]", "a", "b", "Qi", "di"),
    _spec(7, "AkjBkQkD", "[a_ij b_i Q_i d]", "aij", "bi", "Qi", "d"),
    _spec(8, "AkBkQkD", "[a_i b_i Q_i d]", "ai", "bi", "Qi", "d"),
    _spec(9, "ABkQkD", "[a b_i Q_i d]", "a", "bi", "Qi", "d"),
    _spec(10, "AkjBQkD", "[a_ij b Q_i d]", "aij", "b", "Qi", "d"),
    _spec(11, "AkBQkD", "[a_i b Q_i d]", "ai", "b", "Qi", "d"),
    _spec(12, "ABQkD", "[a b Q_i d]", "a", "b", "Qi", "d"),
    _spec(13, "AjBQD", "[a_j b Q d]", "aj", "b", "Q", "d"),
    _spec(14, "ABQD", "[a b Q d]", "a", "b", "Q", "d"),
    _spec(15, "AjBkQkD", "[a_j b_i Q_i d]", "aj", "bi", "Qi", "d"),
    _spec(16, "AjBQkD", "[a_j b Q_i d]", "aj", "b", "Qi", "d"),
    _spec(17, "AkjBkQD", "[a_ij b_i Q d]", "aij", "bi", "Q", "d", exact=False),
    _spec(18, "AjBkQD", "[a_j b_i Q d]", "aj", "bi", "Q", "d", exact=False),
    _spec(19, "AkjBQD", "[a_ij b Q d]", "aij", "b", "Q", "d", exact=False),
    _spec(20, "AkBkQD", "[a_i b_i Q d]", "ai", "bi", "Q", "d", exact=False),
    _spec(21, "ABkQD", "[a b_i Q d]", "a", "bi", "Q", "d", exact=False),
    _spec(22, "AkBQD", "[a_i b Q d]", "ai", "b", "Q", "d", exact=False),
    _spec(23, "FULL", "Full-GMM / QDA", "classical", "classical", "classical", "classical"),
    _spec(24, "COM_FULL", "Com-GMM / LDA", "classical", "classical", "classical", "classical"),
    _spec(25, "DIAG", "Diag-GMM", "classical", "classical", "classical", "classical"),
    _spec(26, "COM_DIAG", "Com-Diag-GMM", "classical", "classical", "classical", "classical"),
    _spec(27, "SPHE", "Sphe-GMM", "classical", "classical", "classical", "classical"),
    _spec(28, "COM_SPHE", "Com-Sphe-GMM", "classical", "classical", "classical", "classical"),
    # The chapter's homothetic rule HDDAh (Bouveyron et al. 2006, Prop. 5): a_i = σ_i²/α, b_i = σ_i²/(1 − α)
    # with one α for all classes (a common ratio a_i/b_i); not a member of the later family. With d_i free
    # the chapter adds d_i log((1 − α)/α) to K_i, which the general cost already contains.
    _spec(29, "HDDAH", "HDDAh: [a_i b_i Q_i d_i] with common a_i/b_i", "ai_ratio", "bi_ratio", "Qi", "di"),
]

#: Every model of the family by name (numbers 1–28 of the digest's table, 29 = the chapter's HDDAh).
SUBMODELS: dict[str, SubmodelSpec] = {s.name: s for s in _FAMILY}
_BY_NUMBER = {s.number: s for s in _FAMILY}


def resolve_submodel(model: Any, *, name: str = "model") -> SubmodelSpec:
    """The :class:`SubmodelSpec` of a model given by name (case-insensitive) or number 1–29.

    Examples
    --------
    >>> resolve_submodel(2).label, resolve_submodel("akjbkqkdk").number
    ('[a_i b_i Q_i d_i]', 1)
    """
    if isinstance(model, SubmodelSpec):
        return model
    if isinstance(model, (int, np.integer)) and not isinstance(model, bool):
        if int(model) in _BY_NUMBER:
            return _BY_NUMBER[int(model)]
        raise DataError(f"{name} must be a model number in 1..29 or a name; got {model}. See SUBMODELS.")
    if isinstance(model, str):
        key = {k.upper(): k for k in SUBMODELS}.get(model.upper())
        if key is not None:
            return SUBMODELS[key]
    raise DataError(
        f"{name} must be one of {list(SUBMODELS)} or a number 1..29; got {model!r}. "
        "Use 'AkjBkQkDk' (the most general subspace model) if unsure."
    )


def resolve_submodels(model: Any, *, name: str = "model") -> list[SubmodelSpec]:
    """One or several models: a name/number, a list of them, or ``"all"`` (models 1–16, the exact ones)."""
    if isinstance(model, str) and model.lower() == "all":
        return [s for s in _FAMILY if s.is_subspace and s.exact and s.number <= 16]
    if isinstance(model, (list, tuple)):
        if not model:
            raise DataError(f"{name} must name at least one model; got an empty list.")
        return [resolve_submodel(m, name=name) for m in model]
    return [resolve_submodel(model, name=name)]


# ---------------------------------------------------------------------------------------------------
# Parameter counts ν (for BIC)
# ---------------------------------------------------------------------------------------------------
def _orientation_count(kind: str, p: int, dims: np.ndarray) -> float:
    """Free parameters of the orientations: τ̄ = Σ_i d_i (p − (d_i + 1)/2), or k τ, or τ (common Q)."""
    tau = dims * (p - (dims + 1) / 2.0)
    return float(tau.sum()) if kind == "Qi" else float(tau[0])


_A_COUNT: dict[str, Callable[[int, np.ndarray], float]] = {
    "aij": lambda k, d: float(d.sum()),
    "ai": lambda k, d: float(k),
    "aj": lambda k, d: float(d[0]),
    "a": lambda k, d: 1.0,
    "ai_ratio": lambda k, d: float(k),  # HDDAh: the σ_i
}
_B_COUNT: dict[str, Callable[[int], float]] = {
    "bi": lambda k: float(k),
    "b": lambda k: 1.0,
    "bi_ratio": lambda k: 1.0,  # HDDAh: the common α
}
_D_COUNT: dict[str, Callable[[int], float]] = {"di": lambda k: float(k), "d": lambda k: 1.0}
_CLASSICAL_COUNT: dict[str, Callable[[int, int], float]] = {
    "FULL": lambda k, p: k * p * (p + 1) / 2.0,
    "COM_FULL": lambda k, p: p * (p + 1) / 2.0,
    "DIAG": lambda k, p: float(k * p),
    "COM_DIAG": lambda k, p: float(p),
    "SPHE": lambda k, p: float(k),
    "COM_SPHE": lambda k, p: 1.0,
}


def n_parameters(model: Any, n_features: int, n_classes: int, dims: Any = None) -> float:
    """Number of free parameters ν of a model (Bouveyron et al. 2007, Table 1; Bergé et al. 2012).

    ν = ρ + (orientation) + (a's) + (b's) + (d's) with ρ = k p + k − 1 (means and proportions), the
    orientation term τ̄ = Σ_i d_i (p − (d_i + 1)/2) (free Q_i, d_i), k τ (free Q_i, common d) or τ (common Q),
    τ = d (p − (d + 1)/2), and one parameter per free a, b and d. Half-integers are possible (τ).

    Examples
    --------
    >>> n_parameters("AkBkQkDk", 100, 4, [10] * 4), n_parameters("FULL", 100, 4)
    (4195.0, 20603.0)
    """
    spec = resolve_submodel(model)
    p, k = int(n_features), int(n_classes)
    rho = k * p + k - 1.0
    if not spec.is_subspace:
        return rho + _CLASSICAL_COUNT[spec.name](k, p)
    d = np.broadcast_to(np.asarray(dims, dtype=np.float64), (k,))
    return (
        rho
        + _orientation_count(spec.orientation, p, d)
        + _A_COUNT[spec.a](k, d)
        + _B_COUNT[spec.b](k)
        + _D_COUNT[spec.dims](k)
    )


# ---------------------------------------------------------------------------------------------------
# Scatter matrices and their eigen-decomposition (with the n < p Gram trick)
# ---------------------------------------------------------------------------------------------------
@dataclass
class Scatter:
    """The weighted scatter W = Yᵗ Y of one class (or of pooled data), kept as its factor Y.

    Attributes
    ----------
    weight : float
        n_i = Σ_x t_i(x), the (soft) class size.
    mean : ndarray (p,)
        μ̂_i = Σ_x t_i(x) x / n_i.
    factor : ndarray (m, p)
        Y_i with rows sqrt(t_i(x)/n_i)(x − μ̂_i) (rows with zero weight dropped), so W_i = Y_iᵗ Y_i is the
        ML covariance (divisor n_i; Bouveyron et al. 2006, §3.2).
    """

    weight: float
    mean: np.ndarray
    factor: np.ndarray
    rank_tol: float = 1e-10

    @property
    def n_features(self) -> int:
        return int(self.factor.shape[1])

    @cached_property
    def trace(self) -> float:
        """tr W = ‖Y‖_F²."""
        return float(np.einsum("ij,ij->", self.factor, self.factor))

    @cached_property
    def diagonal(self) -> np.ndarray:
        """diag W (p,)."""
        return np.einsum("ij,ij->j", self.factor, self.factor)

    @property
    def _small(self) -> bool:
        return self.factor.shape[0] < self.n_features

    @cached_property
    def _cross(self) -> np.ndarray:
        """W = Yᵗ Y (p × p), formed once; used only when m ≥ p."""
        return self.factor.T @ self.factor

    @cached_property
    def _eig(self) -> tuple[np.ndarray, np.ndarray]:
        Y = self.factor
        if self._small:
            # Small-n trick (HDclassif): eigen-decompose the m × m Gram matrix Y Yᵗ; its non-zero
            # eigenvalues are those of W and q = Yᵗ v / ‖Yᵗ v‖, with ‖Yᵗ v‖ = sqrt(λ). Cost O(m² p).
            vals, vecs = sla.eigh(Y @ Y.T)
            vals, vecs = vals[::-1], vecs[:, ::-1]
            keep = vals > self.rank_tol * max(vals[0], 0.0) if vals.size else np.zeros(0, bool)
            keep &= vals > 0
            vals, vecs = vals[keep], vecs[:, keep]
            q = (Y.T @ vecs) / np.sqrt(vals)
            return vals, q
        vals, vecs = sla.eigh(self._cross)
        return np.clip(vals[::-1], 0.0, None), vecs[:, ::-1]

    @cached_property
    def _values(self) -> np.ndarray:
        # Eigenvalues alone are ~3× cheaper than the full decomposition when m ≥ p (the scree test
        # needs all of them, the estimators only the top d_i vectors).
        if self._small or "_eig" in self.__dict__:
            return self._eig[0]
        return np.clip(sla.eigh(self._cross, eigvals_only=True)[::-1], 0.0, None)

    @property
    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues λ_1 ≥ λ_2 ≥ … of W (only the numerically non-zero ones when m < p)."""
        return self._values

    @property
    def eigenvectors(self) -> np.ndarray:
        """Matching orthonormal eigenvectors, columns of a p × r matrix (all of them)."""
        return self._eig[1]

    def leading(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """The r largest eigenvalues and their eigenvectors. With m ≥ p rows and no full decomposition
        cached, only those r pairs are computed (LAPACK ``evr`` subset)."""
        if r == 0:
            return np.zeros(0), np.zeros((self.n_features, 0))
        if self._small or "_eig" in self.__dict__:
            return self._eig[0][:r], self._eig[1][:, :r]
        p = self.n_features
        vals, vecs = sla.eigh(self._cross, subset_by_index=[p - r, p - 1])
        return np.clip(vals[::-1], 0.0, None), vecs[:, ::-1]

    @property
    def rank_bound(self) -> int:
        """min(m − 1, p): the rank W can have with m centred rows (no decomposition needed)."""
        return min(self.factor.shape[0] - 1, self.n_features)

    @property
    def rank(self) -> int:
        """Numerical rank of W (eigenvalues above ``rank_tol`` × the largest)."""
        v = self.eigenvalues
        return int((v > self.rank_tol * v[0]).sum()) if v.size and v[0] > 0 else 0

    def projected_variances(self, basis: np.ndarray) -> np.ndarray:
        """qᵗ W q for each column q of ``basis`` (p × d): ‖Y q‖²."""
        proj = self.factor @ basis
        return np.einsum("ij,ij->j", proj, proj)


def _scatter(X: np.ndarray, weights: np.ndarray) -> Scatter:
    total = float(weights.sum())
    mean = weights @ X / total
    rows = weights > 0
    factor = np.sqrt(weights[rows] / total)[:, None] * (X[rows] - mean)
    return Scatter(total, mean, factor)


def class_scatters(X: np.ndarray, resp: np.ndarray) -> list[Scatter]:
    """One :class:`Scatter` per column of the responsibilities ``resp`` (n × k; one-hot when supervised)."""
    return [_scatter(X, resp[:, i]) for i in range(resp.shape[1])]


def pooled_scatter(scatters: Sequence[Scatter]) -> Scatter:
    """W = Σ_i π̂_i W_i (the within-class scatter), π̂_i = n_i / n."""
    n = sum(s.weight for s in scatters)
    factor = np.vstack([math.sqrt(s.weight / n) * s.factor for s in scatters])
    mean = np.sum([s.weight * s.mean for s in scatters], axis=0) / n
    return Scatter(n, mean, factor)


# ---------------------------------------------------------------------------------------------------
# Intrinsic dimension
# ---------------------------------------------------------------------------------------------------
def check_hdda_data(X: np.ndarray, *, name: str = "X") -> None:
    """HDDA needs at least two features (a class subspace below the full space) that are not all constant,
    and values whose squares fit in float64."""
    if X.ndim != 2 or X.shape[1] < 2:
        raise DataError(
            f"{name} must have at least 2 features for HDDA (each class lives in a subspace of lower dimension than "
            f"the data); got {X.shape[1] if X.ndim == 2 else X.ndim}. Use a Gaussian mixture for one feature."
        )
    check_moments(X, name=name)
    spread = np.ptp(X, axis=0)
    if not (spread > 0).any():
        raise DataError(
            f"{name} is constant (every column holds one value): HDDA has no variance to model and its likelihood "
            "is unbounded. Check the data."
        )


def check_threshold(threshold: Any, *, name: str = "threshold") -> float:
    """Cattell's scree-test threshold t: a number in (0, 1] (a gap counts when it is at least t × the largest gap)."""
    return check_float(name, threshold, 0.0, 1.0, low_open=True,
                       remedy=f"{name} is a fraction of the largest eigenvalue gap; HDclassif's default is 0.2.")


def cattell_dimension(
    eigenvalues: np.ndarray, n_samples: float, *, threshold: float = 0.2, noise_ctrl: float = 1e-8
) -> int:
    """Intrinsic dimension by Cattell's scree test (Bouveyron et al. 2006 §3.3; HDclassif's rule).

    With λ descending (those below ``noise_ctrl`` × λ_1 discarded), gaps g_j = λ_j − λ_{j+1} for the first
    N_max = max(min(n − 2, p − 2), 2) gaps: d = the largest j with g_j ≥ t · max_l g_l.

    Examples
    --------
    >>> cattell_dimension(np.array([10.0, 6.0, 1.0, 1.0, 1.0]), n_samples=100)
    2
    """
    ev = np.sort(np.asarray(eigenvalues, dtype=np.float64))[::-1]
    p = ev.size
    if p <= 2:
        return 1
    ev = ev[ev > noise_ctrl * max(ev[0], 0.0)] if ev[0] > 0 else ev[:1]
    gaps = np.abs(np.diff(ev))
    n_max = max(min(int(math.floor(n_samples)) - 2, p - 2), 2)
    gaps = gaps[:n_max]
    if gaps.size == 0 or gaps.max() <= 0:
        return 1
    return int(np.flatnonzero(gaps >= threshold * gaps.max())[-1] + 1)


def bic_dimension(
    eigenvalues: np.ndarray, trace: float, n_features: int, n_samples: float, *, max_dim: int | None = None
) -> int:
    """Intrinsic dimension maximising a per-class BIC (HDclassif's "BIC" rule; digest §2.5).

    For each d: â = mean of the d largest eigenvalues, b̂ = (tr W − Σ_{j≤d} λ_j)/(p' − d),
    −2ℓ(d) = n (d log â + (p' − d) log b̂) + const and ν(d) = p' + d (p' − (d + 1)/2) + 1; returns the d that
    minimises −2ℓ(d) + ν(d) log n. With a full-rank scatter p' = p and d ranges over 1 … p − 1.

    When the scatter is rank deficient (fewer samples than features: rank r ≤ n − 1 < p), the p − r missing
    eigenvalues are zero because no sample spans those directions, not because the variance is zero there;
    with p' = p the likelihood would reward every extra dimension (b̂ → 0) and the largest admissible d would
    win. The criterion is then computed in the r-dimensional span of the data (p' = r, the eigenvalues that
    exist) and d ranges over 1 … r − 1 (d ≤ n − 2). The noise variance b_i itself is still estimated over all
    p − d directions by the estimators.

    Examples
    --------
    >>> ev = np.array([30.0, 20.0] + [1.0] * 8)
    >>> bic_dimension(ev, ev.sum(), 10, 500)
    2
    """
    ev = np.sort(np.asarray(eigenvalues, dtype=np.float64))[::-1]
    p = int(n_features)
    rank = int((ev > 1e-10 * ev[0]).sum()) if ev.size and ev[0] > 0 else 0
    rank = min(rank, p, max(int(math.floor(n_samples)) - 1, 0))
    p_eff = rank if rank < p else p
    top = p_eff - 1
    if max_dim is not None:
        top = min(top, int(max_dim))
    if top < 1:
        return 1
    ev = ev[:p_eff]
    span_trace = float(ev.sum()) if p_eff < p else float(trace)
    d = np.arange(1, top + 1)
    cum = np.cumsum(ev[:top])
    a = cum / d
    b = np.maximum((span_trace - cum) / (p_eff - d), NOISE_FLOOR * span_trace / p_eff)
    m2ll = n_samples * (d * np.log(a) + (p_eff - d) * np.log(b))
    nu = p_eff + d * (p_eff - (d + 1) / 2.0) + 1
    return int(d[np.argmin(m2ll + nu * math.log(n_samples))])


#: Dimension rules: name -> f(scatter, n_samples, threshold, noise_ctrl) -> d.
DIMENSION_RULES: dict[str, Callable[[Scatter, float, float, float], int]] = {
    "cattell": lambda s, n, t, nc: cattell_dimension(s.eigenvalues, n, threshold=t, noise_ctrl=nc),
    "bic": lambda s, n, t, nc: _bic_rule(s, n, t, nc),
}


def _bic_rule(scatter: Scatter, n_samples: float, threshold: float, noise_ctrl: float) -> int:
    """The BIC rule, or Cattell's scree test with a warning when the class has fewer samples than features.

    With n_i ≤ p the BIC has only n_i − 1 eigenvalues to work with; on planted problems (p = 100, n_i ≈ 30–50)
    even the in-span BIC of :func:`bic_dimension` under-selects the smallest classes (d = 2 for a planted 8),
    whereas the scree test recovers the planted dimensions.
    """
    if scatter.rank_bound < scatter.n_features:
        warnings.warn(
            f"n_dims='bic': a class has {n_samples:g} samples for {scatter.n_features} features, so its scatter "
            f"has rank ≤ {scatter.rank_bound} and the BIC is unreliable; using Cattell's scree test (threshold "
            f"{threshold}) for it. Pass n_dims='cattell' or explicit n_dims to silence this.",
            UserWarning,
            stacklevel=4,
        )
        return cattell_dimension(scatter.eigenvalues, n_samples, threshold=threshold, noise_ctrl=noise_ctrl)
    return bic_dimension(scatter.eigenvalues, scatter.trace, scatter.n_features, n_samples)


def _dimension_limit(scatter: Scatter) -> int:
    """Largest d whose noise variance b stays estimable: d < min(n_i − 1, p), the rank W can reach."""
    return max(scatter.rank_bound - 1, 0)


def select_dimensions(
    spec: SubmodelSpec,
    scatters: Sequence[Scatter],
    total: Scatter | None,
    n_dims: Any,
    *,
    threshold: float = 0.2,
    noise_ctrl: float = 1e-8,
    class_names: Sequence[Any] | None = None,
) -> np.ndarray:
    """The intrinsic dimensions d_i (k,) of a model.

    ``n_dims`` is a rule name (``"cattell"``, ``"bic"``: per class for models with free d_i, on the total
    covariance of the data for common-d models, as HDclassif does), an int (common d) or a sequence (one
    per class; only for free-d_i models). Classical models have no d (full and diagonal: p, spherical: 0).
    Raises :class:`DataError` when a given d_i leaves no room for the noise variance (d_i ≥ rank W_i).
    """
    k, p = len(scatters), scatters[0].n_features
    names = list(class_names) if class_names is not None else list(range(k))
    if not spec.is_subspace:
        return np.full(k, 0 if spec.name in ("SPHE", "COM_SPHE") else p, dtype=np.int64)
    common = spec.dims == "d"
    if isinstance(n_dims, str):
        rule = DIMENSION_RULES.get(n_dims)
        if rule is None:
            raise DataError(
                f"n_dims must be one of {sorted(DIMENSION_RULES)}, an int or one int per class; got {n_dims!r}."
            )
        if common:
            ref = total if total is not None else pooled_scatter(scatters)
            d = rule(ref, ref.weight, threshold, noise_ctrl)
            d = min(d, min(_dimension_limit(s) for s in scatters))
            dims = np.full(k, max(d, 1), dtype=np.int64)
        else:
            dims = np.array(
                [max(min(rule(s, s.weight, threshold, noise_ctrl), _dimension_limit(s)), 1) for s in scatters],
                dtype=np.int64,
            )
        if spec.orientation == "Q":
            dims = np.minimum(dims, _dimension_limit(pooled_scatter(scatters)))
        return dims
    arr = np.asarray(n_dims)
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
        raise DataError(f"n_dims must be 'cattell', 'bic', an int or a sequence of ints; got {n_dims!r}.")
    arr = arr.astype(np.int64)
    if arr.ndim == 0:
        arr = np.full(k, int(arr))
    if arr.shape != (k,):
        raise DataError(f"n_dims must be one int or one per class ({k}); got shape {arr.shape}.")
    if common and np.unique(arr).size > 1:
        raise DataError(
            f"n_dims must be a single common dimension for model {spec.name} {spec.label}; got "
            f"{arr.tolist()}. Pass one int, or a model with free d_i (ending in 'Dk')."
        )
    for i, (d, s) in enumerate(zip(arr, scatters, strict=True)):
        limit = _dimension_limit(s)
        if d < 1 or d > limit:
            raise DataError(
                f"n_dims for class {names[i]!r} must lie in 1..{limit}, below min(n_i − 1, p) = {limit + 1} "
                f"(n_i = {s.weight:g} samples, p = {s.n_features}), so that the noise variance b_i can be "
                f"estimated; got {int(d)}. Choose a smaller n_dims or n_dims='cattell'."
            )
    # rank(W) ≥ max_i rank(W_i), so the class limits also keep the common-orientation models estimable.
    return arr


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
