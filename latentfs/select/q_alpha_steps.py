"""The pieces of the Q-α iteration of :mod:`latentfs.select.q_alpha` (Wolf & Shashua 2005): the result type, the
preprocessing of the features, the α-step (the leading eigenvector of the Hadamard-product or Laplacian Gram
matrix, dense or by Lanczos) and the Q-steps of each variant. The algorithm, its variants and the notation are in
the module docstring of :mod:`latentfs.select.q_alpha`, which re-exports everything here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh

from latentfs.core.data import DataError, check_positive
from latentfs.select.singular import _Affine, _as_matrix, _column_moments


# ---------------------------------------------------------------------------------------------
# results and preprocessing
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QAlphaResult:
    """Output of the Q-α iterations.

    Attributes
    ----------
    alpha : ndarray, shape (n_features,)
        Unit-norm weights α with Σα ≥ 0 (the paper's α).
    Q : ndarray, shape (n_samples, k), or None
        Orthonormal basis of the final iterate (None for the supervised variant, which has one per
        block, and the kernel variant, whose Q is implicit: ``Q = Mᵀ E``).
    objective : float
        ``αᵀ G α`` at the last α-step (for standard Q-α, ``trace(Qᵀ A_α² Q)``).
    n_iter : int
    converged : bool
        Whether the stopping rule held before ``max_iter`` (by default ``‖α^(r) − α^(r−1)‖ < tol``).
    history : dict
        Per iteration: ``"objective"``, ``"delta"`` (‖Δα‖) and ``"rel_change"``
        (|λ^(r) − λ^(r−1)| / |λ^(r)|) of the kept run.
    restart_objectives : tuple of float
        The final objective of each start (``n_init`` of :func:`q_alpha`); the result is the first best.
    """

    alpha: np.ndarray
    Q: np.ndarray | None
    objective: float
    n_iter: int
    converged: bool
    history: dict[str, list[float]] = field(default_factory=dict)
    restart_objectives: tuple[float, ...] = ()


def _row_preprocess(X: np.ndarray | sp.csr_matrix, center: bool, name: str) -> _Affine:
    """``M`` as an implicit map: columns of X centred (optional) and scaled to unit norm."""
    mean, ss = _column_moments(X)
    if center:
        norm = np.sqrt(ss)
    else:
        sq = np.asarray(X.multiply(X).sum(axis=0)).ravel() if sp.issparse(X) else np.sum(X * X, axis=0)
        norm = np.sqrt(sq)
        mean = np.zeros_like(mean)
    scale_ref = np.sqrt(np.sum(mean**2) + 1.0)
    const = np.flatnonzero(norm <= 1e-12 * scale_ref * np.sqrt(X.shape[0]))
    if const.size:
        raise DataError(
            f"{name} has {const.size} constant (zero-variance) column(s) (columns {const[:5].tolist()}); "
            "Q-alpha scales every feature to unit norm and cannot scale them. Drop them first, e.g. "
            "X[:, X.std(axis=0) > 0]."
        )
    return _Affine(X, mean, norm)


def preprocess_features(X: Any, *, center: bool = True) -> np.ndarray:
    """The paper's ``M`` (n_features × n_samples): each feature centred (optional) and of unit norm.

    Wolf & Shashua (2005), §2.1. Dense output; the estimators use an implicit form instead.

    Examples
    --------
    >>> import numpy as np
    >>> M = preprocess_features(np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 1.0]]))
    >>> np.round(M @ np.ones(3), 12).tolist(), np.round((M**2).sum(axis=1), 12).tolist()
    ([0.0, 0.0], [1.0, 1.0])
    """
    A, _ = _as_matrix(X)
    return _row_preprocess(A, center, "X").dense().T


def _qr_pos(Z: np.ndarray) -> np.ndarray:
    """Orthonormal factor of Z with the sign convention diag(R) > 0 (deterministic iterates)."""
    Qz, R = np.linalg.qr(Z)
    s = np.sign(np.diag(R))
    s[s == 0] = 1.0
    return Qz * s


def _fix_sign(alpha: np.ndarray) -> np.ndarray:
    return -alpha if alpha.sum() < 0 else alpha


# ---------------------------------------------------------------------------------------------
# design matrices G (the α-step) as operators
# ---------------------------------------------------------------------------------------------
class _HadamardGram:
    """``G = Σ_b c_b (M_b M_bᵀ) ∘ (P_b P_bᵀ)``: standard (one term) and supervised (c² blocks) Q-α.

    Each term is ``W_b W_bᵀ`` with rows ``m_i ⊗ p_i``; ``matvec`` costs O(n q k) per term.
    """

    def __init__(self, terms: list[tuple[float, _Affine, np.ndarray]]) -> None:
        self.terms = terms
        self.n = terms[0][2].shape[0]

    def matvec(self, v: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n)
        for c, op, P in self.terms:
            Y = op.matmat(v[:, None] * P)  # = A_v Q (q_b × k): Wᵀ v reshaped
            out += c * np.einsum("ij,ij->i", op.rmatmat(Y), P)
        return out

    def dense(self) -> np.ndarray:
        G = np.zeros((self.n, self.n))
        for c, op, P in self.terms:
            Mb = op.dense().T  # n × q_b
            G += c * (Mb @ Mb.T) * (P @ P.T)
        return G


class _LaplacianGram:
    """``F_ij = ⟨L_i Q, L_j Q⟩`` with ``L_i = m_i m_iᵀ − diag(m_i m_iᵀ 1) + d I`` (Definition 5).

    ``F = Y Yᵀ`` with ``Y_i = vec(m_i p_iᵀ − σ_i diag(m_i) Q + d Q)``, ``σ_i = m_iᵀ 1``.
    """

    def __init__(self, op: _Affine, Q: np.ndarray, P: np.ndarray, sigma: np.ndarray, d: float) -> None:
        self.op, self.Q, self.P, self.sigma, self.d = op, Q, P, sigma, d
        self.n = P.shape[0]

    def apply_transpose(self, v: np.ndarray) -> np.ndarray:
        """``Yᵀ v`` reshaped: ``L_v Q`` (q × k)."""
        op, Q = self.op, self.Q
        deg = op.matmat((v * self.sigma)[:, None])[:, 0]
        return op.matmat(v[:, None] * self.P) - deg[:, None] * Q + self.d * v.sum() * Q

    def matvec(self, v: np.ndarray) -> np.ndarray:
        T = self.apply_transpose(v)
        r = np.sum(self.Q * T, axis=1)
        return (np.einsum("ij,ij->i", self.op.rmatmat(T), self.P) - self.sigma * self.op.rmatmat(r[:, None])[:, 0]
                + self.d * float(np.sum(self.Q * T)))

    def dense(self) -> np.ndarray:
        M = self.op.dense().T
        Y = (M[:, :, None] * self.P[:, None, :] - self.sigma[:, None, None] * M[:, :, None] * self.Q[None]
             + self.d * self.Q[None]).reshape(self.n, -1)
        return Y @ Y.T


def _top_dense(G: Any, v0: np.ndarray | None) -> tuple[float, np.ndarray]:
    Gd = G.dense()
    lam, vec = sla.eigh(Gd, subset_by_index=[G.n - 1, G.n - 1])
    return float(lam[0]), vec[:, 0]


def _top_lanczos(G: Any, v0: np.ndarray | None) -> tuple[float, np.ndarray]:
    if G.n <= 3:
        return _top_dense(G, v0)
    op = LinearOperator((G.n, G.n), matvec=G.matvec, dtype=np.float64)
    start = np.ones(G.n) / np.sqrt(G.n) if v0 is None else v0
    # a short Krylov basis (ncv=8) halves the time per α-step against ARPACK's default of 20
    lam, vec = eigsh(op, k=1, which="LA", v0=start, tol=1e-10, ncv=min(G.n - 1, 8),
                     maxiter=max(1000, 10 * G.n))
    return float(lam[0]), vec[:, 0]


_SOLVERS: dict[str, Callable[[Any, np.ndarray | None], tuple[float, np.ndarray]]] = {
    "dense": _top_dense,
    "lanczos": _top_lanczos,
}

_DENSE_MAX = 300  # "auto" forms G explicitly up to this many features


def _alpha_step(G: Any, solver: str, prev: np.ndarray | None) -> tuple[float, np.ndarray]:
    name = solver if solver != "auto" else ("dense" if G.n <= _DENSE_MAX else "lanczos")
    lam, a = _SOLVERS[name](G, prev)
    return lam, _fix_sign(a / np.linalg.norm(a))


def design_matrix(X: Any, Q: Any, *, center: bool = True) -> np.ndarray:
    """The paper's ``G_ij = (m_iᵀ m_j)(m_iᵀ Q Qᵀ m_j)`` for preprocessed X (dense, n × n).

    Wolf & Shashua (2005), Definition 2 step 1 (equivalently eq. 2). For tests and small problems.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(6, 4))
    >>> G = design_matrix(X, np.linalg.qr(np.ones((6, 2)) + np.eye(6)[:, :2])[0])
    >>> G.shape, bool(np.linalg.eigvalsh(G).min() > -1e-12)
    ((4, 4), True)
    """
    A, _ = _as_matrix(X)
    op = _row_preprocess(A, center, "X")
    Qa = np.asarray(Q, dtype=np.float64)
    return _HadamardGram([(1.0, op, op.rmatmat(Qa))]).dense()


# ---------------------------------------------------------------------------------------------
# Q-steps (variants)
# ---------------------------------------------------------------------------------------------
@dataclass
class _State:
    """What the next cycle needs: the current basis ``Q`` (q × k), ``P = M Q`` (n × k), α, shift d."""

    Q: np.ndarray
    P: np.ndarray
    alpha: np.ndarray | None = None
    shift: float = 0.0


def _standard_design(op: _Affine, st: _State, sigma: np.ndarray) -> Any:
    return _HadamardGram([(1.0, op, st.P)])


def _laplacian_design(op: _Affine, st: _State, sigma: np.ndarray) -> Any:
    return _LaplacianGram(op, st.Q, st.P, sigma, st.shift)


def _power_q_step(op: _Affine, st: _State, alpha: np.ndarray, ctx: dict[str, Any]) -> None:
    # Definition 2, steps 3–5: Z = A_α Q, Z = Q R
    st.Q = _qr_pos(op.matmat(alpha[:, None] * st.P))
    st.P = op.rmatmat(st.Q)


def _basic_q_step(op: _Affine, st: _State, alpha: np.ndarray, ctx: dict[str, Any]) -> None:
    # §3: Q = top-k eigenvectors of A_α (exact)
    k = st.Q.shape[1]
    A = op.weighted_outer(alpha)
    _, vec = sla.eigh(A, subset_by_index=[A.shape[0] - k, A.shape[0] - 1])
    st.Q = _qr_pos(vec[:, ::-1])
    st.P = op.rmatmat(st.Q)


def _laplacian_shift(op: _Affine, alpha: np.ndarray, sigma: np.ndarray, rule: Any) -> float:
    # Definition 5 step 3: d = max diag(A_α) / Σα ("max_diag"); §2.2: max degree of D_α ("max_degree")
    total = alpha.sum()
    if not isinstance(rule, str):
        return float(rule)
    if abs(total) < 1e-300:
        return 0.0
    if rule == "max_diag":
        return float(np.max(op.weighted_diag(alpha)) / total)
    return float(np.max(np.abs(op.matmat((alpha * sigma)[:, None])[:, 0])) / total)


def _laplacian_q_step(op: _Affine, st: _State, alpha: np.ndarray, ctx: dict[str, Any]) -> None:
    # Definition 5 steps 3–7: new shift d(α), Z = L_α Q, Z = Q R
    sigma = ctx["sigma"]
    st.shift = _laplacian_shift(op, alpha, sigma, ctx["shift_rule"])
    LQ = _LaplacianGram(op, st.Q, st.P, sigma, st.shift).apply_transpose(alpha)
    st.Q = _qr_pos(LQ)
    st.P = op.rmatmat(st.Q)


_VARIANTS: dict[str, tuple[Callable[..., Any], Callable[..., None]]] = {
    "power": (_standard_design, _power_q_step),
    "basic": (_standard_design, _basic_q_step),
    "laplacian": (_laplacian_design, _laplacian_q_step),
}


def _initial_basis(op: _Affine, k: int, init: Any, rng: np.random.Generator, q: int) -> np.ndarray:
    if isinstance(init, str) and init == "pca":
        A1 = op.weighted_outer(np.ones(op.shape[1]))
        lam, vec = sla.eigh(A1, subset_by_index=[q - k, q - 1])
        if lam[0] <= 1e-10 * max(lam[-1], 1e-300):
            rank = int(np.sum(np.linalg.eigvalsh(A1) > 1e-10 * lam[-1]))
            raise DataError(
                f"n_components must not exceed the rank of the preprocessed data ({rank}); got "
                f"{k}. Choose n_components ≤ {rank}."
            )
        return _qr_pos(vec[:, ::-1])
    if isinstance(init, str) and init == "random":
        return _qr_pos(rng.standard_normal((q, k)))
    if isinstance(init, str):
        raise DataError(f"init must be 'pca', 'random' or an array of shape ({q}, {k}); got {init!r}.")
    Q0 = np.asarray(init, dtype=np.float64)
    if Q0.shape != (q, k):
        raise DataError(f"init must have shape (n_samples, n_components) = ({q}, {k}); got {Q0.shape}.")
    return _qr_pos(Q0)


def _check_choice(value: Any, options: Any, name: str) -> None:
    if not isinstance(value, str) or value not in options:
        raise DataError(f"{name} must be one of {sorted(options)}; got {value!r}.")


def _check_iter(max_iter: Any, tol: Any) -> None:
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise DataError(f"max_iter must be a positive integer; got {max_iter!r}.")
    check_positive(tol, "tol")
