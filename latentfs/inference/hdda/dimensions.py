"""Class scatter matrices and the choice of each class's intrinsic dimension (Cattell's scree test, BIC) for
:mod:`latentfs.inference.hdda.numerics`, which re-exports everything here.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import scipy.linalg as sla

from latentfs.core.data import DataError, check_float
from latentfs.core.options import check_moments
from latentfs.inference.hdda.submodels import (
    NOISE_FLOOR,
    SubmodelSpec,
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
