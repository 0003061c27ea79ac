"""Singular vectors of wide and sparse data without densifying it: the linear algebra shared by the
selectors of :mod:`latentfs.select` (leverage scores, BSS, Q-α).

``A`` (n × d) is seen through :class:`_Affine` (implicit centring and scaling of dense or CSR input). Its top
right singular vectors come from an exact SVD (dense LAPACK, or the n × n Gram matrix for sparse input, or a
streaming TSQR for scores of dense input) or a randomized range finder (Halko, Martinsson & Tropp 2011), as a
factor that either holds V (d × k) or streams its rows from the n side (:class:`_StreamedFactor`), so that
leverage scores of a 1,000 × 50,000 sparse matrix never hold a d × k array.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from latentfs.core.data import DataError, _generated_names, as_continuous, check_n_components
from latentfs.core.options import as_rng

__all__ = ["right_singular_vectors"]


# ---------------------------------------------------------------------------------------------
# input and randomness
# ---------------------------------------------------------------------------------------------
def _rng(seed: Any) -> np.random.Generator:
    """A numpy Generator from the seed, by the library's one bridge (:func:`latentfs.core.options.as_rng`)."""
    return as_rng(seed)


def _as_matrix(X: Any, name: str = "X") -> tuple[np.ndarray | sp.csr_matrix, tuple[str, ...]]:
    """Validate a real matrix, keeping scipy.sparse input sparse (CSR, float64, finite)."""
    if sp.issparse(X):
        if X.dtype.kind not in "biuf":
            raise DataError(
                f"{name} must be numeric; got a sparse matrix of dtype {X.dtype}. Convert it with "
                "X.astype(float)."
            )
        csr = sp.csr_matrix(X, dtype=np.float64)
        if csr.shape[0] == 0 or csr.shape[1] == 0:
            raise DataError(f"{name} is empty: shape {csr.shape}. Pass at least one row and one feature.")
        bad = ~np.isfinite(csr.data)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            row = int(np.searchsorted(csr.indptr, i, side="right") - 1)
            raise DataError(
                f"{name} must not contain NaN or infinite values; row {row} column "
                f"{int(csr.indices[i])} holds {csr.data[i]}. Impute or drop the missing values first."
            )
        csr.sum_duplicates()
        return csr, _generated_names("x", csr.shape[1])
    cm = as_continuous(X, name=name, missing="error")
    return cm.values, cm.feature_names


def _column_moments(X: np.ndarray | sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Column means and column sums of squares about the mean (sparse-safe)."""
    n = X.shape[0]
    if sp.issparse(X):
        mean = np.asarray(X.mean(axis=0)).ravel()
        sq = np.asarray(X.multiply(X).sum(axis=0)).ravel()
        ss = np.maximum(sq - n * mean**2, 0.0)
    else:
        mean = X.mean(axis=0)
        ss = ((X - mean) ** 2).sum(axis=0)
    return mean, ss


_BLOCK = 2048  # features (columns of X) handled at a time by the streaming computations


class _Affine:
    """The matrix ``(X − 1 μᵀ) diag(1/s)`` (n × d) without forming it; X dense or CSR.

    ``matmat(B)`` returns it times ``B`` (d × m → n × m), ``rmatmat(C)`` its transpose times ``C``
    (n × m → d × m). Columns with ``s = inf`` are zero.
    """

    def __init__(self, X: np.ndarray | sp.csr_matrix, mean: np.ndarray | None = None,
                 scale: np.ndarray | None = None) -> None:
        self.X = X
        d = X.shape[1]
        self.mean = np.zeros(d) if mean is None else np.asarray(mean, dtype=np.float64)
        self.inv = np.ones(d) if scale is None else 1.0 / np.asarray(scale, dtype=np.float64)
        self.shape = X.shape
        self._XT = X.T.tocsr() if sp.issparse(X) else None

    def matmat(self, B: np.ndarray) -> np.ndarray:
        Bs = B * self.inv[:, None] if np.any(self.inv != 1.0) else B  # no d × m copy when unscaled
        out = np.asarray(self.X @ Bs)
        return out - (self.mean @ Bs)[None, :]

    def rmatmat(self, C: np.ndarray) -> np.ndarray:
        return self.rmatmat_rows(C, None)

    def rmatmat_rows(self, C: np.ndarray, rows: slice | np.ndarray | None) -> np.ndarray:
        """Rows ``rows`` (features: a slice or index array; None for all) of ``rmatmat(C)``.

        The product is the only array of its size allocated: centring and scaling are applied in place
        (centring in blocks of ``_BLOCK`` rows), so ``rmatmat(C)`` costs one d × m array, not three.
        """
        XT = self._XT if self._XT is not None else self.X.T
        mean, inv = self.mean, self.inv
        if rows is not None:
            XT, mean, inv = XT[rows], mean[rows], inv[rows]
        out = np.asarray(XT @ C)
        if out.dtype != np.float64 or not out.flags.writeable:
            out = np.array(out, dtype=np.float64)
        if np.any(mean):
            csum = C.sum(axis=0)
            for start in range(0, out.shape[0], _BLOCK):
                out[start:start + _BLOCK] -= np.outer(mean[start:start + _BLOCK], csum)
        if np.any(inv != 1.0):
            out *= inv[:, None]
        return out

    def dense(self) -> np.ndarray:
        Xd = self.X.toarray() if sp.issparse(self.X) else self.X
        return (Xd - self.mean) * self.inv

    def weighted_outer(self, w: np.ndarray, other: _Affine | None = None) -> np.ndarray:
        """``(X − 1μᵀ) diag(w / s²) (Y − 1μᵀ)ᵀ`` with Y the rows of ``other`` (same columns)."""
        o = self if other is None else other
        ww = w * self.inv * o.inv
        if sp.issparse(self.X):
            left = self.X if np.all(ww == 1.0) else self.X.multiply(ww[None, :])  # no copy for the plain Gram
            core = np.asarray((left @ o.X.T).todense())
            b1 = np.asarray(self.X @ (ww * o.mean)).ravel()
            b2 = np.asarray(o.X @ (ww * self.mean)).ravel()
        else:
            core = (self.X * ww) @ o.X.T
            b1 = self.X @ (ww * o.mean)
            b2 = o.X @ (ww * self.mean)
        c = float(np.sum(ww * self.mean * o.mean))
        return core - b1[:, None] - b2[None, :] + c

    def weighted_diag(self, w: np.ndarray) -> np.ndarray:
        """Diagonal of ``weighted_outer(w)`` (length n)."""
        ww = w * self.inv**2
        if sp.issparse(self.X):
            sq = np.asarray(self.X.multiply(self.X) @ ww).ravel()
            lin = np.asarray(self.X @ (ww * self.mean)).ravel()
        else:
            sq = (self.X**2) @ ww
            lin = self.X @ (ww * self.mean)
        return sq - 2 * lin + float(np.sum(ww * self.mean**2))

    def rows(self, idx: np.ndarray, mean: np.ndarray | None = None,
             scale: np.ndarray | None = None) -> _Affine:
        """The same map restricted to the rows ``idx`` (optionally with new centring/scaling)."""
        sub = _Affine(self.X[idx], self.mean if mean is None else mean, None)
        sub.inv = self.inv if scale is None else 1.0 / scale
        return sub


# ---------------------------------------------------------------------------------------------
# singular vectors
# ---------------------------------------------------------------------------------------------
def _numerical_rank(sigma: np.ndarray, shape: tuple[int, int], rtol: float | None) -> int:
    if sigma.size == 0 or sigma[0] <= 0:
        return 0
    tol = (max(shape) * np.finfo(float).eps if rtol is None else rtol) * sigma[0]
    return int(np.sum(sigma > tol))


def _svd_exact(op: _Affine, k: int | None, rng: np.random.Generator, **_: Any) -> tuple[np.ndarray, np.ndarray]:
    n, d = op.shape
    if not sp.issparse(op.X):
        _u, s, vt = np.linalg.svd(op.dense(), full_matrices=False)
        return vt.T, s
    # sparse: eigen-decompose the Gram matrix on the smaller side (squares the condition number, so
    # directions below ~1e-7 of the top singular value are dropped as numerically zero)
    if n <= d:
        U, s = _gram_left(op, k)
        return op.rmatmat(U) / s, s
    # d × d Gram of the centred, scaled columns without densifying X: XᵀX − n μμᵀ, scaled
    XtX = np.asarray((op.X.T @ op.X).todense())
    gram = (XtX - n * np.outer(op.mean, op.mean)) * np.outer(op.inv, op.inv)
    lam, V = np.linalg.eigh(gram)
    lam, V = lam[::-1], V[:, ::-1]
    keep = lam > max(lam[0], 0) * 1e-14
    return V[:, keep], np.sqrt(lam[keep])


def _svd_randomized(op: _Affine, k: int | None, rng: np.random.Generator, *, n_oversamples: int = 10,
                    n_iter: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Randomized range finder with power iterations (Halko, Martinsson & Tropp 2011, Alg. 4.4/5.1)."""
    n, d = op.shape
    m = _sketch_width(op, k, n_oversamples)  # (wide sparse input goes to _randomized_gram_left in _factor)
    Y = op.matmat(rng.standard_normal((d, m)))
    Qm = _orthonormal_columns(Y)
    for _ in range(n_iter):
        Z = _orthonormal_columns(op.rmatmat(Qm))
        Qm = _orthonormal_columns(op.matmat(Z))
    Bt = op.rmatmat(Qm)  # d × m, = Bᵀ
    # SVD of the small side: B Bᵀ = U Λ Uᵀ, V = Bᵀ U Λ^{-1/2} (a GEMM instead of a wide LAPACK SVD)
    lam, U = np.linalg.eigh(Bt.T @ Bt)
    lam, U = np.maximum(lam[::-1], 0.0), U[:, ::-1]
    s = np.sqrt(lam)
    keep = s > s[0] * 1e-7 if s[0] > 0 else np.zeros(s.size, dtype=bool)
    V = Bt @ U[:, keep]
    del Bt
    V /= s[keep]  # in place: one d × m array at a time besides the orthonormalisation
    return _orthonormal_columns(V), s[keep]


def _sketch_width(op: _Affine, k: int | None, n_oversamples: int) -> int:
    n, d = op.shape
    return min(n, d, (min(n, d) if k is None else k) + n_oversamples)


def _gram_side(op: _Affine, m: int) -> bool:
    """Whether the randomized range finder runs on the n × n Gram matrix (:func:`_randomized_gram_left`):
    sparse input with the Gram matrix no larger than one d × m block of the d-side iteration. There, each
    power step costs n²m instead of a sparse product plus a d × m orthonormalisation (on 1,000 × 50,000
    with k = 50 this took the whole top-r leverage selection from 0.49 s to 0.09–0.11 s)."""
    n, d = op.shape
    return sp.issparse(op.X) and n * n <= d * m


def _randomized_gram_left(op: _Affine, m: int, rng: np.random.Generator, n_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """Left singular vectors and values of ``op`` from a randomized subspace iteration on ``G = A Aᵀ``.

    The range finder of Halko, Martinsson & Tropp (2011, Alg. 4.4) applied to G with an n × m Gaussian
    start: ``Q = orth(G Ω)``, then ``n_iter`` steps ``Q = orth(G Q)``, then the Rayleigh–Ritz step
    ``Qᵀ G Q = W Λ Wᵀ``, ``U = Q W``, ``σ = √λ``. ``G Ω = A (Aᵀ Ω)`` is the d-side scheme's start with the
    test matrix ``Aᵀ Ω`` in the row space of A (one more power step). Working on G squares the condition
    number, so directions below 1e-7 σ₁ are dropped, as in the d-side scheme and the exact Gram route.
    """
    gram = op.weighted_outer(np.ones(op.shape[1]))
    Q = _orthonormal_columns(gram @ rng.standard_normal((op.shape[0], m)))
    for _ in range(n_iter):
        Q = _orthonormal_columns(gram @ Q)
    lam, W = np.linalg.eigh(Q.T @ gram @ Q)
    lam, W = np.maximum(lam[::-1], 0.0), W[:, ::-1]
    s = np.sqrt(lam)
    keep = s > s[0] * 1e-7 if s[0] > 0 else np.zeros(s.size, dtype=bool)
    return Q @ W[:, keep], s[keep]


def _orthonormal_columns(Z: np.ndarray) -> np.ndarray:
    """Orthonormal basis of a tall matrix's columns: Cholesky QR (BLAS-3, several times faster than
    Householder for d ≫ m), with a Householder fallback when ZᵀZ is not numerically positive definite."""
    try:
        L = np.linalg.cholesky(Z.T @ Z)
        Qz = sla.solve_triangular(L, Z.T, lower=True).T
        if np.abs(Qz.T @ Qz - np.eye(Z.shape[1])).max() < 1e-8:
            return Qz
    except np.linalg.LinAlgError:
        pass
    return np.linalg.qr(Z)[0]


class _ExplicitFactor:
    """Right singular vectors held as the d × k matrix itself (randomized and n > d paths, dense BSS)."""

    def __init__(self, V: np.ndarray, sigma: np.ndarray) -> None:
        self.V, self.sigma = V, sigma
        self.shape = V.shape

    def truncate(self, k: int) -> _ExplicitFactor:
        return _ExplicitFactor(self.V[:, :k], self.sigma[:k])

    def rows(self, idx: np.ndarray) -> np.ndarray:
        return self.V[idx]

    def row_norms2(self) -> np.ndarray:
        return np.einsum("ij,ij->i", self.V, self.V)

    def dense(self) -> np.ndarray:
        return self.V


class _StreamedFactor:
    """Right singular vectors ``V = Aᵀ U Σ⁻¹`` (d × k) of ``A = op`` (n × d) held as ``U`` (n × k) and ``Σ``.

    Any row block of ``V`` is ``A[:, block]ᵀ U Σ⁻¹``, so the leverage scores ``‖V_(j)‖²`` and the rows at
    a few indices are computed ``_BLOCK`` features at a time: memory O(d + n·k + _BLOCK·k), never d × k
    and never a dense copy of a sparse ``A``. :meth:`dense` forms V (one d × k array) for callers that
    need it whole (BSS).
    """

    def __init__(self, op: _Affine, U: np.ndarray, sigma: np.ndarray) -> None:
        self.op, self.U, self.sigma = op, np.ascontiguousarray(U), sigma
        self.shape = (op.shape[1], sigma.size)
        self._norms2: np.ndarray | None = None

    def truncate(self, k: int) -> _StreamedFactor:
        return _StreamedFactor(self.op, self.U[:, :k], self.sigma[:k])

    def rows(self, idx: slice | np.ndarray | None) -> np.ndarray:
        out = self.op.rmatmat_rows(self.U, idx)
        out /= self.sigma
        return out

    def row_norms2(self) -> np.ndarray:
        """‖V_(j)‖² for every feature (read-only; computed once per factor, since a selector needs it both
        to pick and to report the scores)."""
        if self._norms2 is None:
            d = self.shape[0]
            raw = np.empty(d)
            for start in range(0, d, _BLOCK):
                B = self.rows(slice(start, min(start + _BLOCK, d)))
                raw[start:start + B.shape[0]] = np.einsum("ij,ij->i", B, B)
                del B  # one block alive at a time
            raw.flags.writeable = False
            self._norms2 = raw
        return self._norms2

    def dense(self) -> np.ndarray:
        return self.rows(None)


_Factor = _ExplicitFactor | _StreamedFactor


def _gram_left(op: _Affine, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Left singular vectors and values of a sparse ``op`` with n ≤ d from its n × n Gram matrix.

    Directions with λ ≤ 1e-14 λ₁ (σ below 1e-7 σ₁) are numerically zero and dropped. With ``k`` well below n
    only the top k eigenpairs are computed (LAPACK's ``syevr`` on a subset: the same pairs to rounding, 0.12 s
    instead of 0.28 s for k = 50 of n = 1,000); the rank rule is unchanged, since the k-th largest eigenvalue
    is above the cut-off exactly when the rank is at least k.
    """
    gram = op.weighted_outer(np.ones(op.shape[1]))
    n = gram.shape[0]
    if k is not None and k <= n // 4:
        lam, U = sla.eigh(gram, subset_by_index=[n - k, n - 1], driver="evr", overwrite_a=True, check_finite=False)
    else:
        lam, U = np.linalg.eigh(gram)
    lam, U = lam[::-1], U[:, ::-1]
    keep = lam > max(lam[0], 0) * 1e-14
    return U[:, keep], np.sqrt(lam[keep])


def _tsqr_left(n: int, d: int, transposed_rows: Callable[[slice], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Left singular vectors and values of an n × d matrix A (n ≤ d) given a block of Aᵀ's rows at a time.

    ``transposed_rows(block)`` returns ``A[:, block]ᵀ`` (features × n). Streaming (TSQR) factorisation
    ``Aᵀ = Q R``: R (n × n) is updated by a QR of ``[R; A[:, block]ᵀ]`` for each block, Q is never formed; then
    ``A = Rᵀ Qᵀ`` and the SVD ``Rᵀ = U Σ Wᵀ`` gives the left factors of A (backward stable like a direct SVD:
    the condition number is not squared, unlike the Gram route). Memory O(n·(n + block)).
    """
    step = max(_BLOCK, 2 * n)
    R = np.zeros((0, n))
    for start in range(0, d, step):
        B = transposed_rows(slice(start, min(start + step, d)))
        R = cast(np.ndarray, np.linalg.qr(np.vstack([R, B]), mode="r"))  # R only (numpy returns no Q)
    U, s, _ = np.linalg.svd(R.T, full_matrices=False)
    return U, s


def _factor(A: np.ndarray | sp.csr_matrix, k: int | None, *, method: str, center: bool, rtol: float | None,
            rng: np.random.Generator, n_oversamples: int = 10, n_iter: int = 4,
            scores_only: bool) -> _Factor:
    """The top-``k`` (all numerically non-zero for None) right singular vectors of ``A`` as a factor.

    Same rank rule and errors as :func:`right_singular_vectors`. Exact, n ≤ d: sparse input goes through
    the n × n Gram matrix (as before), dense input through the SVD (``scores_only=False``, V orthonormal to
    rounding) or the streaming TSQR (``scores_only=True``, no d × k array). Randomized and n > d: explicit V.
    """
    if method not in _SVD_METHODS:
        raise DataError(f"method must be one of {sorted(_SVD_METHODS)}; got {method!r}.")
    if k is not None:
        k = check_n_components(k, min(A.shape), name="n_components", what="min(n_samples, n_features)")
    op = _Affine(A, _column_moments(A)[0] if center else None)
    fac: _Factor
    if method == "exact" and A.shape[0] <= A.shape[1] and (sp.issparse(A) or scores_only):
        U, s = _gram_left(op, k) if sp.issparse(A) else _tsqr_left(
            A.shape[0], A.shape[1], lambda b: (op.X[:, b].T - op.mean[b, None]) * op.inv[b, None])
        fac = _StreamedFactor(op, U, s)
    elif method == "randomized" and _gram_side(op, m := _sketch_width(op, k, n_oversamples)):
        fac = _StreamedFactor(op, *_randomized_gram_left(op, m, rng, n_iter))
    else:
        V, s = _SVD_METHODS[method](op, k, rng, n_oversamples=n_oversamples, n_iter=n_iter)
        fac = _ExplicitFactor(V, s)
    rank = _numerical_rank(fac.sigma, A.shape, rtol)
    if k is None:
        return fac.truncate(rank)
    if k > rank:
        raise DataError(
            f"n_components must not exceed the numerical rank of X ({rank}); got {k}. The extra singular "
            "directions would be arbitrary: choose n_components ≤ rank or add samples/features."
        )
    return fac.truncate(k)


_SVD_METHODS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "exact": _svd_exact,
    "randomized": _svd_randomized,
}


def right_singular_vectors(
    X: Any,
    n_components: int | None = None,
    *,
    method: str = "exact",
    center: bool = False,
    rtol: float | None = None,
    n_oversamples: int = 10,
    n_iter: int = 4,
    seed: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top right singular vectors ``V`` (d × k) and singular values of ``X`` (dense or sparse).

    Parameters
    ----------
    X : array-like or scipy.sparse matrix, shape (n_samples, n_features)
    n_components : int, optional
        How many (k); ``None`` returns all numerically non-zero ones (the rank). k larger than the
        numerical rank is an error: the extra directions would be arbitrary.
    method : {"exact", "randomized"}
        Exact SVD (dense LAPACK, or the smaller Gram matrix for sparse input), or a randomized range
        finder with ``n_oversamples`` extra columns and ``n_iter`` power iterations.
    center : bool
        Centre the columns first (implicitly, so sparse input stays sparse).
    rtol : float, optional
        Relative threshold on singular values for the numerical rank (default ``max(n, d)·eps``).
    seed : int or Generator, optional
        Randomness of the randomized method.

    Returns
    -------
    V : ndarray, shape (n_features, k)
    sigma : ndarray, shape (k,)

    Examples
    --------
    >>> import numpy as np
    >>> V, s = right_singular_vectors(np.diag([3.0, 2.0, 1.0]), 2)
    >>> np.round(np.abs(V), 6).tolist(), s.tolist()
    ([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], [3.0, 2.0])
    """
    A, _ = _as_matrix(X)
    fac = _factor(A, n_components, method=method, center=center, rtol=rtol, rng=_rng(seed),
                  n_oversamples=n_oversamples, n_iter=n_iter, scores_only=False)
    return fac.dense(), fac.sigma
