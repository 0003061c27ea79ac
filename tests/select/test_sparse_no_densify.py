"""Leverage scores and BSS on wide sparse input without the d × rank matrix V or a dense copy (issue 15, item 5).

The scores come from the small side: ``A Aᵀ = U Σ² Uᵀ`` and ``‖V_(j)‖² = ‖A_{:,j}ᵀ U Σ⁻¹‖²``, a block of
columns at a time. Equality is checked against the path that forms V (``right_singular_vectors``) and an
independent numpy SVD; memory through the shapes of the intermediate products and tracemalloc's count of
the numpy buffers allocated (deterministic: buffer sizes follow from the shapes, not from timing or RSS).
"""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import latentfs.select.leverage as lev
import latentfs.select.singular as singular
from latentfs.select.bss import SVMFeatureSelector, approx_bss_select, gram_deviation
from latentfs.select.leverage import (
    LeverageScoreSelector,
    leverage_scores,
    leverage_scores_from_data,
    right_singular_vectors,
    svd_lower_bound,
)


def sparse_wide(rng, n, d, density=0.02):
    return sp.random(n, d, density=density, random_state=np.random.RandomState(int(rng.integers(1 << 30))),
                     format="csr", data_rvs=lambda k: rng.uniform(0.5, 2.0, size=k))


def rank_deficient(rng, n_base=12, d=400):
    """Sparse 3·n_base × d of rank n_base: each base row appears three times (once doubled, once negated)."""
    B = sparse_wide(rng, n_base, d, density=0.05)
    return sp.vstack([B, 2.0 * B, -B]).tocsr()


def reference_scores(A, k, center):
    """Leverage scores from numpy's SVD of the densified, centred matrix (the textbook definition)."""
    M = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=float)
    if center:
        M = M - M.mean(axis=0)
    _, s, vt = np.linalg.svd(M, full_matrices=False)
    rank = int(np.sum(s > max(M.shape) * np.finfo(float).eps * s[0]))
    V = vt[: rank if k is None else k].T
    return leverage_scores(V), s[: V.shape[1]]


# --- exact tier: the same numbers as the path that forms V -----------------------------------------
# tolerance: 1e-10 of the largest score (tiny scores of near-empty columns are compared absolutely)
@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("k", [None, 4])
@pytest.mark.parametrize("deficient", [False, True])
def test_streamed_scores_equal_the_v_path(rng, sparse, center, k, deficient):
    A = rank_deficient(rng) if deficient else sparse_wide(rng, 30, 400, density=0.05)
    X = A if sparse else A.toarray()
    p, s = leverage_scores_from_data(X, k, center=center)
    V, s_old = right_singular_vectors(X, k, center=center)
    p_old = leverage_scores(V)
    p_ref, s_ref = reference_scores(A, k, center)
    if deficient:  # rank 12 (11 or 12 after centring), well below the 36 rows
        assert s.size == (k or s_ref.size) and s_ref.size <= 12
    np.testing.assert_allclose(s, s_old, rtol=1e-10)
    np.testing.assert_allclose(s, s_ref, rtol=1e-10)
    np.testing.assert_allclose(p, p_old, rtol=0, atol=1e-10 * p_old.max())
    np.testing.assert_allclose(p, p_ref, rtol=0, atol=1e-10 * p_ref.max())
    assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_streamed_scores_span_several_blocks_and_keep_errors(rng, monkeypatch):
    monkeypatch.setattr(singular, "_BLOCK", 64)  # 400 features = 7 blocks, the last one partial
    A = sparse_wide(rng, 20, 400, density=0.05)
    for X in (A, A.toarray()):
        p, _ = leverage_scores_from_data(X, 5, center=True)
        p_ref, _ = reference_scores(A, 5, True)
        np.testing.assert_allclose(p, p_ref, rtol=0, atol=1e-10 * p_ref.max())
    with pytest.raises(lev.DataError, match="numerical rank"):
        leverage_scores_from_data(rank_deficient(rng), 20)
    with pytest.raises(lev.DataError, match="method must be one of"):
        leverage_scores_from_data(A, 2, method="lanczos")


def test_selectors_give_the_same_selection_as_the_v_path(rng):
    A = sparse_wide(rng, 40, 600, density=0.05)
    y = np.where(np.asarray(A[:, :30].sum(axis=1)).ravel() > np.median(np.asarray(A[:, :30].sum(axis=1))), 1, -1)
    # supervised leverage: scores of the support vectors' V, the same i.i.d. draws from the same seed
    sel = SVMFeatureSelector(50, method="leverage", mode="supervised", seed=3).fit(A, y)
    V, _ = right_singular_vectors(A[sel.support_vector_indices_])
    p_old = leverage_scores(V)
    np.testing.assert_allclose(sel.weights_.scores, p_old, rtol=0, atol=1e-10 * p_old.max())
    idx_old, w_old = lev._sample_iid(p_old, 50, np.random.default_rng(3))
    np.testing.assert_array_equal(sel.sample_indices_, idx_old)
    np.testing.assert_allclose(sel.sample_weights_, w_old, rtol=1e-10)
    assert sel.gram_deviation_ == pytest.approx(gram_deviation(V, idx_old, w_old), rel=1e-10)
    # k-means leverage selector (exact SVD, centred): same probabilities and the same top-r set
    km = LeverageScoreSelector(40, n_components=3, scheme="top", center=True).fit(A)
    p_ref, s_ref = reference_scores(A, 3, True)
    np.testing.assert_allclose(km.weights_.scores, p_ref, rtol=0, atol=1e-10 * p_ref.max())
    np.testing.assert_allclose(km.singular_values_, s_ref, rtol=1e-10)
    assert svd_lower_bound(A, 3) == pytest.approx(svd_lower_bound(A.toarray(), 3), rel=1e-10)


def test_approx_bss_without_the_sketch_matches_the_sketch_svd(rng):
    A = sparse_wide(rng, 50, 500, density=0.05)
    res, Vh = approx_bss_select(A, 40, sketch_size=16, seed=0)
    G = np.random.default_rng(0).standard_normal((16, 50))
    V_old, _ = right_singular_vectors(G @ A.toarray())  # the sketch's singular vectors, as before
    # same subspace (column signs are arbitrary) and orthonormal columns
    np.testing.assert_allclose(np.abs(V_old.T @ Vh), np.eye(16), atol=1e-10)
    np.testing.assert_allclose(Vh.T @ Vh, np.eye(16), atol=1e-12)
    res_dense, _ = approx_bss_select(A.toarray(), 40, sketch_size=16, seed=0)
    np.testing.assert_array_equal(res.indices, res_dense.indices)
    np.testing.assert_allclose(res.weights, res_dense.weights, rtol=1e-10)


# --- memory tier: no d × rank array, no densified input --------------------------------------------
def test_no_feature_block_larger_than_the_block_size(rng, monkeypatch):
    # every product with Aᵀ made while computing scores has at most _BLOCK rows (features); the old path
    # made one d × rank product
    A = sparse_wide(rng, 30, 3 * singular._BLOCK + 5, density=0.01)
    seen = []
    orig = singular._Affine.rmatmat_rows

    def spy(self, C, rows):
        out = orig(self, C, rows)
        seen.append(out.shape)
        return out

    monkeypatch.setattr(singular._Affine, "rmatmat_rows", spy)
    leverage_scores_from_data(A, None)
    LeverageScoreSelector(20, n_components=3).fit(A)
    SVMFeatureSelector(20, method="leverage").fit(A)
    assert len(seen) >= 3 * 4
    assert max(s[0] for s in seen) <= singular._BLOCK


def _peak_bytes(fn):
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    if started:
        tracemalloc.stop()
    return peak, out


def test_peak_memory_is_far_below_one_d_by_rank_matrix(rng):
    # what remains is O(d) (a few d-vectors, the validated feature names: ~150 bytes per feature) and one
    # block of _BLOCK × rank; V alone is 8·rank = 960 bytes per feature, and the old path held it twice
    n, d = 120, 40_000
    A = sparse_wide(rng, n, d, density=0.002)
    y = np.repeat([1, -1], n // 2)
    one_v = d * n * 8  # bytes of the d × rank V (rank = n = 120 here): 38.4 MB
    peak, (p, s) = _peak_bytes(lambda: leverage_scores_from_data(A))
    assert s.size == n
    assert peak < one_v / 3, (peak, one_v)
    peak, sel = _peak_bytes(lambda: SVMFeatureSelector(400, method="leverage", mode="supervised").fit(A, y))
    assert sel.rank_used_ >= 100  # V would have had ≥ 100 columns (32 MB)
    assert peak < one_v / 3, (peak, one_v)
    # approximate BSS: V̂ (d × t) is the one large array (the old path held the sketch, its copy and Vᵀ)
    t = 64
    peak, (res, Vh) = _peak_bytes(lambda: approx_bss_select(A, 200, sketch_size=t, seed=0))
    assert Vh.shape == (d, t)
    assert peak < 1.6 * Vh.nbytes, (peak, Vh.nbytes)


@pytest.fixture
def no_densify(monkeypatch):
    """Make toarray/todense of any scipy.sparse object with a dimension of size ``d`` raise.

    Patching the classes (not a subclass of the input) also catches copies made by the validation layer.
    """
    state = {"d": None}

    def guard(orig):
        def wrapped(self, *args, **kwargs):
            if state["d"] is not None and state["d"] in self.shape:
                raise AssertionError(f"a sparse matrix of shape {self.shape} was densified")
            return orig(self, *args, **kwargs)
        return wrapped

    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.lil_matrix, sp.csr_array, sp.csc_array):
        for base in cls.__mro__:
            for name in ("toarray", "todense"):
                if name in vars(base):
                    monkeypatch.setattr(base, name, guard(vars(base)[name]))
    return state


def test_the_guard_catches_densification(no_densify, rng):
    A = sparse_wide(rng, 10, 500)
    no_densify["d"] = 500
    with pytest.raises(AssertionError, match="densified"):
        A.toarray()
    with pytest.raises(AssertionError, match="densified"):
        A.T.tocsc().todense()


def test_sparse_input_is_never_densified(no_densify, rng):
    n, d = 40, 3000
    A = sparse_wide(rng, n, d, density=0.01)
    y = np.repeat([1, -1], n // 2)
    no_densify["d"] = d
    leverage_scores_from_data(A, 5, center=True)
    for svd in ("exact", "randomized"):
        LeverageScoreSelector(30, n_components=3, svd=svd, center=True).fit(A)
    for method in ("leverage", "bss", "approx_bss"):
        for mode in ("unsupervised", "supervised"):
            SVMFeatureSelector(60, method=method, mode=mode, sketch_size=16).fit(A, y)
    approx_bss_select(A, 30, sketch_size=8, seed=0)
