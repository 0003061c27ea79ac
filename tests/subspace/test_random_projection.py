"""Random projections: Blum (2006) Theorem 2 rates, unbiasedness, sparse input, errors."""

import numpy as np
import pytest
import scipy.sparse as sp

from latentfs.core.data import DataError
from latentfs.subspace.random_projection import (
    RandomProjection,
    jl_failure_bound,
    jl_min_dim,
    random_projection_matrix,
    squared_distance_ratios,
)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher", "achlioptas"])
def test_jl_failure_rate_within_theorem2_bound(kind):
    # Statistical: 300 points (44,850 pairs), d = 200, γ = 0.3. The bound per pair is 0.086; the expected
    # failure rate for Gaussian A is ≈ 0.001 (digest §3.6). Asserting rate ≤ bound fails only if the
    # empirical rate of correlated pairs exceeds 86x its expectation: false-alarm rate negligible (< 1e-6).
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 1000))
    Z = RandomProjection(200, kind=kind, seed=2).fit_transform(X)
    r = squared_distance_ratios(X, Z)
    failure = np.mean((r < 1 - 0.3) | (r > 1 + 0.3))
    assert failure <= jl_failure_bound(0.3, 200)
    assert np.isclose(jl_failure_bound(0.3, 200), 2 * np.exp(-(0.09 - 0.027) * 50))


@pytest.mark.parametrize("kind", ["gaussian", "rademacher", "achlioptas", "orthogonal"])
def test_projection_is_unbiased_for_squared_distances(kind):
    # E‖u'−v'‖² = ‖u−v‖²: mean over 400 independent matrices within 4 standard errors
    # (false-alarm rate ≈ 6e-5 per kind under a normal approximation).
    rng = np.random.default_rng(3)
    u = rng.normal(size=40)
    ratios = []
    for s in range(400):
        A = random_projection_matrix(40, 10, kind, seed=s)
        ratios.append(float(np.sum(np.asarray(u @ A) ** 2) / np.sum(u**2)))
    ratios = np.array(ratios)
    assert abs(ratios.mean() - 1) < 4 * ratios.std(ddof=1) / np.sqrt(ratios.size)


def test_orthogonal_columns_and_sparse_input_agree_with_dense():
    A = random_projection_matrix(30, 6, "orthogonal", seed=0)
    np.testing.assert_allclose(A.T @ A, 5 * np.eye(6), atol=1e-12)
    rng = np.random.default_rng(4)
    X = sp.random(20, 50, density=0.2, random_state=5, format="csr")
    rp = RandomProjection(12, kind="achlioptas", seed=6).fit(X)
    np.testing.assert_allclose(rp.transform(X), rp.transform(X.toarray()), atol=1e-12)
    assert sp.issparse(rp.components_)
    density = rp.components_.nnz / (50 * 12)
    assert 0.2 < density < 0.5  # expected 1/3
    assert rng is not None


def test_jl_min_dim_values_and_auto_dimension():
    d = jl_min_dim(1000, 0.3, 0.05)
    assert d == int(np.ceil(4 * np.log(1000 * 999 / 0.05) / (0.09 - 0.027)))
    assert jl_min_dim(1000, 0.3, form="dasgupta_gupta") == 768
    assert jl_min_dim(10, 0.5) < jl_min_dim(100, 0.5) < jl_min_dim(100, 0.2)
    rp = RandomProjection("auto", eps=0.5, seed=0).fit(np.zeros((10, 500)))
    assert rp.n_components_ == jl_min_dim(10, 0.5) < 500


def test_auto_refuses_to_expand_the_dimension():
    # digits' shape: 1797 × 64; the JL dimension (1142 for eps=0.3, delta=0.05) used to be drawn silently
    X = np.random.default_rng(0).normal(size=(1797, 64))
    d = jl_min_dim(1797, 0.3)
    with pytest.raises(DataError, match=rf"n_components='auto' needs {d} dimensions .* but X has only 64 features"):
        RandomProjection("auto", seed=0).fit(X)
    assert RandomProjection(32, seed=0).fit(X).n_components_ == 32  # an explicit d is still honoured


def test_seed_determinism_and_torch_generator():
    import torch

    a = random_projection_matrix(8, 3, seed=5)
    np.testing.assert_array_equal(a, random_projection_matrix(8, 3, seed=5))
    b = random_projection_matrix(8, 3, seed=torch.Generator().manual_seed(1))
    c = random_projection_matrix(8, 3, seed=torch.Generator().manual_seed(1))
    np.testing.assert_array_equal(b, c)


def test_errors():
    with pytest.raises(DataError, match="kind must be one of"):
        random_projection_matrix(5, 2, "cauchy")
    with pytest.raises(DataError, match="n_components must be at most n_features \\(5\\) for kind='orthogonal'"):
        random_projection_matrix(5, 6, "orthogonal")
    with pytest.raises(DataError, match="n_components must be at least 1"):
        random_projection_matrix(5, 0)
    with pytest.raises(DataError, match=r"eps must lie in \(0, 1\); got 1.5"):
        jl_min_dim(10, 1.5)
    with pytest.raises(DataError, match=r"delta must lie in \(0, 1\)"):
        jl_min_dim(10, 0.3, 0.0)
    with pytest.raises(DataError, match="form must be one of"):
        jl_min_dim(10, 0.3, form="exact")
    with pytest.raises(DataError, match="RandomProjection is not fitted yet"):
        RandomProjection(2).transform(np.ones((2, 2)))
    with pytest.raises(DataError, match="X must have 4 features"):
        RandomProjection(2, seed=0).fit(np.ones((3, 4))).transform(np.ones((3, 5)))
    with pytest.raises(DataError, match="the sparse matrix holds NaN or inf"):
        RandomProjection(2).fit(sp.csr_matrix(np.array([[np.nan, 1.0]])))
    with pytest.raises(DataError, match="seed must be an int"):
        random_projection_matrix(5, 2, seed=1.5)
