"""Random projections with Johnson–Lindenstrauss guarantees (Blum 2006, Section 3; LNCS 3940, pp. 52–68).

Points are rows; a projection maps x ↦ s · x A with A an N × d random matrix. Blum's Theorem 2
(Arriaga & Vempala): for A with i.i.d. N(0, 1) or ±1 entries and s = 1/√d,

    Pr[(1 − γ)‖u − v‖² ≤ ‖u′ − v′‖² ≤ (1 + γ)‖u − v‖²] ≥ 1 − 2 exp(−(γ² − γ³) d / 4).

Matrix kinds (a dict of samplers, :data:`PROJECTION_KINDS`): ``"gaussian"``, ``"rademacher"`` (±1),
``"achlioptas"`` (the sparse √3·{+1 w.p. 1/6, 0 w.p. 2/3, −1 w.p. 1/6}; stored as a scipy sparse
matrix), all three drawn by scikit-learn's random projections, and ``"orthogonal"`` (d orthonormal columns;
unbiased only with s = √(N/d)). What latentfs adds is Blum's bound (:func:`jl_min_dim` with its forms,
:func:`jl_failure_bound`), the maps to more dimensions than features, and the distance-keeping score.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin

from latentfs.core.base import check_fitted, check_X, document_input_attributes
from latentfs.core.data import DataError, as_continuous, as_rng, check_n_components

__all__ = [
    "PROJECTION_KINDS",
    "RandomProjection",
    "jl_failure_bound",
    "jl_min_dim",
    "random_projection_matrix",
    "squared_distance_ratios",
]




def _sklearn_matrix(kind: str, rng: np.random.Generator, n: int, d: int) -> Any:
    """The scaled N × d matrix from scikit-learn's random projections (its matrices are d × N, already scaled by
    1/√d): Gaussian N(0, 1/d) entries, or the sparse ±√(1/density)/√d entries of Li, Hastie & Church (2006),
    which are Achlioptas's √3·{±1 w.p. 1/6, 0 w.p. 2/3} at density 1/3 and Rademacher ±1 at density 1."""
    import warnings

    from sklearn.exceptions import DataDimensionalityWarning
    from sklearn.random_projection import GaussianRandomProjection, SparseRandomProjection

    state = int(rng.integers(2**31 - 1))
    if kind == "gaussian":
        proj: Any = GaussianRandomProjection(d, random_state=state)
    else:
        proj = SparseRandomProjection(d, density=1 / 3 if kind == "achlioptas" else 1.0, random_state=state)
    with warnings.catch_warnings():  # Blum's maps may go to more dimensions than there are features
        warnings.simplefilter("ignore", DataDimensionalityWarning)
        proj.fit(sp.csr_matrix((1, n)))
    A = proj.components_.T
    if kind == "achlioptas":
        return sp.csr_matrix(A)
    return A.toarray() if sp.issparse(A) else np.asarray(A)


def _orthogonal(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    if d > n:
        raise DataError(
            f"n_components must be at most n_features ({n}) for kind='orthogonal'; got {d}. "
            "Use an i.i.d. kind (gaussian, rademacher, achlioptas) to map to more dimensions."
        )
    q, r = np.linalg.qr(rng.standard_normal((n, d)))
    return q * np.sign(np.diag(r)) * np.sqrt(n / d)  # Haar-distributed orthonormal columns, scaled to be unbiased


PROJECTION_KINDS: dict[str, Callable[[np.random.Generator, int, int], Any]] = {
    "gaussian": lambda rng, n, d: _sklearn_matrix("gaussian", rng, n, d),
    "rademacher": lambda rng, n, d: _sklearn_matrix("rademacher", rng, n, d),
    "achlioptas": lambda rng, n, d: _sklearn_matrix("achlioptas", rng, n, d),
    "orthogonal": _orthogonal,
}
"""kind → sampler of the scaled N × d matrix s·A with E‖u′ − v′‖² = ‖u − v‖² (s = 1/√d for the i.i.d. kinds, drawn
by scikit-learn's ``GaussianRandomProjection`` / ``SparseRandomProjection``; s = √(N/d) for orthonormal columns)."""


def random_projection_matrix(n_features: int, n_components: int, kind: str = "gaussian", *, seed: Any = None) -> Any:
    """The scaled projection matrix s·A (N × d; sparse CSR for ``kind="achlioptas"``).

    Examples
    --------
    >>> A = random_projection_matrix(50, 10, "orthogonal", seed=0)
    >>> bool(np.allclose(A.T @ A, (50 / 10) * np.eye(10)))
    True
    """
    if kind not in PROJECTION_KINDS:
        raise DataError(f"kind must be one of {sorted(PROJECTION_KINDS)}; got {kind!r}.")
    n = check_n_components(n_features, 10**12, name="n_features")
    d = check_n_components(n_components, 10**12, name="n_components")
    return PROJECTION_KINDS[kind](as_rng(seed), n, d)


def jl_failure_bound(eps: float, n_components: int) -> float:
    """Blum's Theorem 2: one pair fails the (1 ± ε) squared-distance condition w.p. ≤ 2 exp(−(ε² − ε³)d/4).

    Examples
    --------
    >>> round(jl_failure_bound(0.3, 200), 3)
    0.086
    """
    _check_eps(eps)
    return float(min(1.0, 2 * np.exp(-(eps**2 - eps**3) * n_components / 4)))


def _check_eps(eps: float) -> float:
    if not isinstance(eps, (int, float, np.floating)) or not 0 < eps < 1:
        raise DataError(f"eps must lie in (0, 1); got {eps!r}. It is the allowed relative distortion.")
    return float(eps)


def jl_min_dim(n_points: int, eps: float, delta: float = 0.05, *, form: str = "blum_thm2") -> int:
    """Smallest d keeping all pairwise squared distances of ``n_points`` points within 1 ± ε.

    ``form="blum_thm2"``: union bound of Theorem 2 over the n(n − 1)/2 pairs, d ≥ 4 ln(n(n − 1)/δ)/(ε² − ε³),
    succeeding with probability ≥ 1 − δ. ``form="dasgupta_gupta"``: 4 ln n/(ε²/2 − ε³/3), the constant
    scikit-learn uses (no δ).

    Examples
    --------
    >>> jl_min_dim(1000, 0.3), jl_min_dim(1000, 0.3, form="dasgupta_gupta")
    (1068, 768)
    """
    eps = _check_eps(eps)
    n = check_n_components(n_points, 10**15, name="n_points")
    if not 0 < delta < 1:
        raise DataError(f"delta must lie in (0, 1); got {delta!r}. It is the allowed failure probability.")
    forms = {
        "blum_thm2": lambda: 4 * np.log(max(n * (n - 1), 2) / delta) / (eps**2 - eps**3),
        "dasgupta_gupta": lambda: 4 * np.log(n) / (eps**2 / 2 - eps**3 / 3),
    }
    if form not in forms:
        raise DataError(f"form must be one of {sorted(forms)}; got {form!r}.")
    return int(np.ceil(forms[form]()))


def squared_distance_ratios(X: Any, Z: Any) -> np.ndarray:
    """‖z_i − z_j‖²/‖x_i − x_j‖² for all pairs i < j (pairs with zero original distance dropped)."""
    def sq(A: np.ndarray) -> np.ndarray:
        g = np.sum(A * A, axis=1)
        return g[:, None] + g[None, :] - 2 * A @ A.T

    Xd = np.asarray(X.toarray() if sp.issparse(X) else X)
    Zd = np.asarray(Z.toarray() if sp.issparse(Z) else Z)
    iu = np.triu_indices(Xd.shape[0], 1)
    a, b = sq(Xd)[iu], sq(Zd)[iu]
    keep = a > 1e-12 * max(a.max(), 1e-300)
    return b[keep] / a[keep]


def _validate_maybe_sparse(X: Any, name: str = "X") -> Any:
    if sp.issparse(X):
        if X.dtype.kind not in "biuf":
            raise DataError(f"{name} must be numeric; got a sparse matrix of dtype {X.dtype}.")
        X = sp.csr_matrix(X, dtype=np.float64)
        if not np.all(np.isfinite(X.data)):
            raise DataError(f"{name} must be finite; the sparse matrix holds NaN or inf. Replace them.")
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise DataError(f"{name} is empty: shape {X.shape}. Pass at least one row and one feature.")
        return X
    return as_continuous(X, name=name).values


@document_input_attributes
class RandomProjection(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Johnson–Lindenstrauss random projection x ↦ s · x A (Blum 2006, Theorem 2).

    Parameters
    ----------
    n_components : int or "auto"
        Target dimension d; ``"auto"`` uses :func:`jl_min_dim` with ``eps`` and ``delta`` on the number of
        rows seen in ``fit``, and raises :class:`DataError` when that dimension is not below the number of
        features (the bound is then no reduction: e.g. 915 ≥ 64 on digits at eps = 0.3).
    kind : {"gaussian", "rademacher", "achlioptas", "orthogonal"}
    eps, delta : float
        Distortion and failure probability for ``n_components="auto"``.
    seed : int, numpy or torch Generator, or None, default 0

    Attributes
    ----------
    components_ : (n_features, d) array or sparse matrix
        The scaled matrix s·A.
    n_components_ : int

    :meth:`score` measures how well squared distances are kept (0 is perfect), so ``GridSearchCV`` can
    compare kinds at a fixed ``n_components`` (more components always score higher).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 500))
    >>> Z = RandomProjection(300, kind="achlioptas", seed=1).fit_transform(X)
    >>> r = squared_distance_ratios(X, Z)
    >>> bool((abs(r - 1) < 0.35).all())
    True
    """

    def __init__(
        self, n_components: int | str = "auto", *, kind: str = "gaussian", eps: float = 0.3,
        delta: float = 0.05, seed: Any = 0,
    ) -> None:
        self.n_components = n_components
        self.kind = kind
        self.eps = eps
        self.delta = delta
        self.seed = seed

    def fit(self, X: Any, y: Any = None) -> RandomProjection:
        """Draw the matrix for X's number of features (and rows, for ``"auto"``); ``y`` is ignored."""
        Xc = check_X(self, X, reset=True, accept_sparse="csr", ensure_all_finite=False)
        Xv = _validate_maybe_sparse(X if hasattr(X, "iloc") else Xc)
        n, N = Xv.shape
        d: Any = jl_min_dim(n, self.eps, self.delta) if self.n_components == "auto" else self.n_components
        if self.n_components == "auto" and d >= N:
            raise DataError(
                f"n_components='auto' needs {d} dimensions (Johnson–Lindenstrauss bound for {n} points, "
                f"eps={self.eps}, delta={self.delta}) but X has only {N} features, so the projection would "
                "expand the data, not reduce it. Pass an integer n_components < n_features, a larger eps, "
                "or skip the projection."
            )
        self.components_ = random_projection_matrix(N, d, self.kind, seed=self.seed)
        self.n_components_ = int(self.components_.shape[1])
        return self

    @property
    def _n_features_out(self) -> int:
        return int(self.n_components_)

    def transform(self, X: Any) -> np.ndarray:
        """Project rows of X (dense or scipy.sparse) to d dimensions; returns a dense array."""
        check_fitted(self, "components_", call="fit(X)")
        Xv = check_X(self, X, reset=False, accept_sparse="csr")
        out = Xv @ self.components_
        return np.asarray(out.toarray() if sp.issparse(out) else out)

    def score(self, X: Any, y: Any = None) -> float:
        """``−mean |‖z_i − z_j‖²/‖x_i − x_j‖² − 1|`` over the pairs of rows of ``X`` (0 when every squared distance
        is kept; Theorem 2 bounds each term by ε with high probability). At most 500 evenly spaced rows are
        used; ``y`` is ignored."""
        check_fitted(self, "components_", call="fit(X)")
        Xv = check_X(self, X, reset=False, accept_sparse="csr")
        if Xv.shape[0] > 500:
            Xv = Xv[np.linspace(0, Xv.shape[0] - 1, 500).astype(np.int64)]
        ratios = squared_distance_ratios(Xv, self.transform(Xv))
        return -float(np.mean(np.abs(ratios - 1.0))) if ratios.size else 0.0

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
