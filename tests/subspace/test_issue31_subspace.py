"""Issue 31 items 8 and 9: FPC, InfoMax and hyperbolic PCA at extreme scales and on zero-variance data;
what InfoMax's ``bound_`` is."""


import numpy as np
import pytest

from latentfs.core.data import DataError
from latentfs.subspace.fpc import FPC
from latentfs.subspace.hpca import HyperbolicPCA
from latentfs.subspace.infomax import InfoMaxProjection


def _blobs(seed=0, n=200):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 3))
    X[: n // 2, 1] = rng.uniform(0.40, 0.45, n // 2)  # a cluster tight along coordinate 1
    return X


# ---- FPC: scale-equivariant, so huge data give the same clusters and finite features -----------------------
@pytest.mark.parametrize("scale", [1e300, 1e-300, 2.0**600])
def test_fpc_is_scale_equivariant_at_extreme_scales(scale):
    X = _blobs()
    ref = FPC().fit(X)
    big = FPC().fit(X * scale)
    np.testing.assert_array_equal(big.labels_, ref.labels_)
    F_ref, F_big = ref.transform(X), big.transform(X * scale)
    assert np.isfinite(F_big[np.isfinite(F_ref)]).all() and not np.isnan(F_big).any()
    np.testing.assert_array_equal(np.isinf(F_big), np.isinf(F_ref))
    inside = np.isfinite(F_ref)
    np.testing.assert_allclose(F_big[inside] / scale, F_ref[inside], rtol=1e-12)
    np.testing.assert_allclose(big.cluster_centers_ / scale, ref.cluster_centers_, rtol=1e-12)
    np.testing.assert_array_equal(big.predict(X * scale), ref.predict(X))


def test_fpc_subspace_distance_at_extreme_scale():
    X = _blobs()
    ref = FPC(distance="subspace").fit(X)
    big = FPC(distance="subspace").fit(X * 1e300)
    F_ref, F_big = ref.transform(X), big.transform(X * 1e300)
    inside = np.isfinite(F_ref)
    assert not np.isnan(F_big).any()
    np.testing.assert_allclose(F_big[inside] / 1e300, F_ref[inside], rtol=1e-9, atol=1e-12)


# ---- InfoMax ------------------------------------------------------------------------------------------------
def _two_groups(seed=0):
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal(-2, 1, (40, 4)), rng.normal(2, 1, (40, 4))])


@pytest.mark.parametrize("channel, cov", [("auxiliary", "isotropic"), ("hybrid", "isotropic"), ("hybrid", "full"),
                                          ("auxiliary", "diag")])
def test_infomax_refuses_data_whose_second_moments_overflow(channel, cov):
    # the channel noise s² fixes the units, so the model is not scale-free without scale=True: refuse, naming X
    X = _two_groups() * 1e300
    with pytest.raises(DataError, match=r"X's centred values reach .*e\+300.*squares overflow.*scale=True"):
        InfoMaxProjection(1, n_auxiliary=2, channel=channel, decoder_cov=cov, max_iter=2).fit(X)


def test_infomax_refuses_data_too_small_for_its_squares():
    with pytest.raises(DataError, match=r"X's centred values are at most .*e-2\d\d.*underflow.*scale=True"):
        InfoMaxProjection(1, n_auxiliary=2, max_iter=2).fit(_two_groups() * 1e-250)


@pytest.mark.parametrize("scale", [1e300, 1e-300, 2.0**1000, 2.0**-1000])
def test_infomax_with_scale_true_is_scale_free(scale):
    # standardised inputs: the fit on X × 1e±300 is the fit on X, all finite. A power of two scales exactly, so
    # the fit is then the same to the last bit; 1e±300 changes the standardised data by rounding (1e-16), which
    # the line searches can amplify to ~1e-5 in W after a few iterations.
    X = _two_groups()
    kw = dict(n_auxiliary=2, channel="hybrid", decoder_cov="full", scale=True, max_iter=3)
    ref = InfoMaxProjection(1, **kw).fit(X)
    big = InfoMaxProjection(1, **kw).fit(X * scale)
    exact = np.frexp(scale)[0] == 0.5
    np.testing.assert_allclose(big.components_, ref.components_, rtol=0, atol=0 if exact else 1e-3)
    np.testing.assert_allclose(big.bound_, ref.bound_, rtol=0 if exact else 1e-5)
    assert np.isfinite(big.decoder_["U"]).all() and np.isfinite(big.scale_).all()
    np.testing.assert_allclose(big.transform(X * scale), ref.transform(X), rtol=0, atol=0 if exact else 1e-2)


@pytest.mark.parametrize("X", [np.full((30, 4), 0.1), np.tile([1.0, 2.0, 3.0], (30, 1))])
def test_infomax_refuses_zero_variance_data(X):
    for scale in (False, True):
        with pytest.raises(DataError, match=r"X has zero variance: all 30 rows are identical"):
            InfoMaxProjection(1, n_auxiliary=2, scale=scale, max_iter=2).fit(X)


def test_infomax_constant_column_is_exactly_centred():
    # a constant column of 0.1 (whose mean is not exactly 0.1 in floating point) carries no variation: it is
    # centred to exactly 0, gets a zero loading, and the encoder is the one fitted without it up to the change
    # of the isotropic decoder variance and the ridge, which average over one more feature
    X = _two_groups()
    Xc = np.column_stack([X, np.full(len(X), 0.1)])
    assert Xc[:, -1].mean() != 0.1  # the rounding residue the fit used to see
    ref = InfoMaxProjection(1, n_auxiliary=2, max_iter=3).fit(X)
    with_const = InfoMaxProjection(1, n_auxiliary=2, max_iter=3).fit(Xc)
    assert with_const.components_[0, -1] == 0.0
    np.testing.assert_allclose(np.abs(with_const.components_[0, :-1]), np.abs(ref.components_[0]), atol=1e-3)


def test_infomax_singular_full_decoder_is_a_clear_error():
    # decoder_cov="full" without a ridge on rank-deficient data (a duplicated column): S_j is singular
    X = _two_groups()
    X = np.column_stack([X, X[:, 0]])
    with pytest.raises(DataError, match=r"decoder covariance S_j is not positive definite.*reg_covar=0.*reg_covar=1e-6"):
        InfoMaxProjection(1, n_auxiliary=2, decoder_cov="full", reg_covar=0.0, max_iter=2).fit(X)


def test_infomax_bound_is_not_a_bound_on_mi_minus_entropy_for_an_empirical_source():
    # Issue 31 item 9: the docstring said every value of bound_ is a lower bound on I − H(x). For the empirical
    # distribution of the rows (a discrete source) I(x, y) ≤ H(x), so I − H(x) ≤ 0, while bound_ is a mean
    # log-density and can be positive: on 600 digits (5 components, full decoder covariances, standardised
    # pixels) it ends at +20.0 (the issue saw 15.6). The text now says what bound_ is.
    from sklearn.datasets import load_digits

    X = load_digits().data[:600]
    model = InfoMaxProjection(5, decoder_cov="full", scale=True, max_iter=2).fit(X)
    assert model.bound_[-1] > 10
    doc = InfoMaxProjection.__doc__ + __import__("latentfs.subspace.infomax", fromlist=["x"]).__doc__
    assert "lower bound on I − H(x)" not in doc
    assert "empirical" in InfoMaxProjection.__doc__


# ---- Hyperbolic PCA ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize("normalize", [True, False])
def test_hpca_refuses_zero_variance_data(kernel, normalize):
    y = np.repeat([0, 1, 2], 10)
    for X in (np.ones((30, 4)), np.tile([0.3, -1.0, 2.0, 0.5], (30, 1))):
        with pytest.raises(DataError, match=r"X has zero variance: all 30 rows of its 4 feature\(s\) are identical"):
            HyperbolicPCA(2, kernel=kernel, normalize=normalize).fit(X, y)


def test_hpca_rbf_refuses_rows_the_kernel_cannot_tell_apart():
    # rows that differ by 1e-10 give ψ(x) − ψ(x') of squared norm 1 − exp(−8e-20) = 0 in floating point
    rng = np.random.default_rng(0)
    X = 1.0 + 1e-10 * rng.normal(size=(30, 4))
    y = np.repeat([0, 1, 2], 10)
    with pytest.raises(DataError, match=r"X has no spread in the RBF feature space.*largest ‖ψ\(x\) − ψ\(x′\)‖² is "
                                        r".*raise C"):
        HyperbolicPCA(2, kernel="rbf", normalize=False).fit(X, y)
    # the same data recentred and rescaled are fine
    Z = (X - X.mean(0)) / X.std(0)
    assert HyperbolicPCA(2, kernel="rbf", normalize=False).fit(Z, y).eigenvalues_.shape == (2,)
