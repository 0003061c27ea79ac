"""Hostile options and data for every mixture engine (issue 19): a DataError naming the option, the rule, the
value and a remedy, or a correct (finite, regularised) fit; never a raw numpy/torch error or a NaN."""

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

METHODS = ["em", "vb", "gibbs"]
SMALL_GIBBS = {"num_chains": 2, "num_warmup": 5, "num_samples": 5, "warn": False}


def _x(n=30, d=2, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)) + np.repeat([[0.0] * d, [4.0] * d], [n // 2, n - n // 2], 0)


def _fit(model, X, method, **options):
    extra = SMALL_GIBBS if method == "gibbs" else {"warn": False}
    return latentfs.fit(model, X, method=method, **{**extra, **options})


def _finite(res):
    for site in res.sites:
        assert np.all(np.isfinite(res.mean(site))), site
    assert all(np.isfinite(v) for v in res.trace.ravel())


# --------------------------------------------------------------------------- options
@pytest.mark.parametrize("method", ["em", "vb"])
@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("max_iter", 0, r"max_iter must be an integer ≥ 1; got 0"),
        ("max_iter", -5, r"max_iter must be an integer ≥ 1; got -5"),
        ("max_iter", 10.5, r"max_iter must be an integer ≥ 1; got 10.5"),
        ("tol", float("nan"), r"tol must be a number ≥ 0; got nan"),
        ("tol", -1e-3, r"tol must be a number ≥ 0; got -0.001"),
        ("n_init", 0, r"n_init must be an integer ≥ 1; got 0"),
        ("n_init", "many", r"n_init must be 'auto' or a positive integer; got 'many'"),
    ],
)
def test_optimizer_options_are_checked(method, option, value, match):
    with pytest.raises(DataError, match=match):
        _fit(GaussianMixture(2), _x(), method, **{option: value})


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("seed", "match"),
    [
        (1.5, r"seed must be an int ≥ 0.*got 1.5 \(float\)"),
        (-1, r"seed must be an int ≥ 0.*got -1\. Pass a non-negative integer"),
        ("abc", r"seed must be an int ≥ 0.*got 'abc' \(str\)"),
    ],
)
def test_seed_is_checked(method, seed, match):
    with pytest.raises(DataError, match=match):
        _fit(LatentProfile(2), _x(), method, seed=seed)


# EM and VB take ``device`` since issue 33 (tests/test_device_options.py checks it); none takes ``dtype``.
@pytest.mark.parametrize(("method", "option"), [("em", "dtype"), ("vb", "dtype"), ("gibbs", "dtype"), ("gibbs", "device")])
def test_unknown_dtype_and_device_options_are_refused_with_the_valid_ones(method, option):
    with pytest.raises(DataError, match=rf"options \['{option}'\] are not options of method '{method}'.*valid options"):
        _fit(GaussianMixture(2), _x(), method, **{option: "meta"})


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("num_samples", 0, r"num_samples must be an integer ≥ 1; got 0"),
        ("num_chains", 0, r"num_chains must be an integer ≥ 1; got 0"),
        ("num_warmup", -1, r"num_warmup must be an integer ≥ 0; got -1"),
        ("thin", 0, r"thin must be an integer ≥ 1; got 0"),
        ("init", "em", r"init must be one of"),
    ],
)
def test_sampler_options_are_checked(option, value, match):
    with pytest.raises(DataError, match=match):
        _fit(GaussianMixture(2), _x(), "gibbs", **{option: value})


@pytest.mark.parametrize("reg", [-1.0, float("nan"), float("inf")])
def test_reg_covar_is_checked(reg):
    with pytest.raises(DataError, match=r"reg_covar must be"):
        _fit(GaussianMixture(2), _x(), "em", reg_covar=reg)


# --------------------------------------------------------------------------- scale
@pytest.mark.parametrize("scale", [1e12, 1e-12])
def test_em_is_scale_equivariant(scale):
    # The variance floor is relative to each column's variance: fitting c·X is the fit of X scaled by c,
    # and ℓ moves by exactly −n d log c. (An absolute floor made 1e12 "singular" and 1e-12 all floor.)
    X = _x(60, 3)
    base = latentfs.fit(GaussianMixture(2), X, seed=0, warn=False)
    scaled = latentfs.fit(GaussianMixture(2), X * scale, seed=0, warn=False)
    n, d = X.shape
    assert scaled.diagnostics["log_likelihood"] == pytest.approx(
        base.diagnostics["log_likelihood"] - n * d * np.log(scale), rel=1e-9, abs=1e-6
    )
    np.testing.assert_allclose(scaled.mean("means"), base.mean("means") * scale, rtol=1e-7)
    np.testing.assert_allclose(scaled.mean("covariance"), base.mean("covariance") * scale**2, rtol=1e-6)


# --------------------------------------------------------------------------- degenerate data
def _duplicated_column():
    X = _x(40, 2)
    return np.column_stack([X, X[:, 0]])


def _wide():
    return _x(6, 10)  # n < d


def _two_rows():
    return np.array([[0.0, 1.0, 2.0], [1.0, 3.0, 2.5]])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("data", [_duplicated_column, _wide, _two_rows], ids=["duplicated", "n<d", "two rows"])
def test_singular_data_gives_a_regularised_fit_or_a_clear_error_in_every_engine(method, data):
    X = data()
    try:
        res = _fit(GaussianMixture(2), X, method, seed=0)
    except DataError as err:
        assert "reg_covar" in str(err) or "components" in str(err)
    else:
        _finite(res)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("model", [LatentProfile(2), GaussianMixture(2)], ids=["profile", "full"])
def test_a_1e300_cell_is_a_data_error(method, model):
    X = _x(30, 3)
    X[4, 1] = 1e300
    with pytest.raises(DataError, match=r"X column 'x1' has values up to 1e\+300.*Rescale that column"):
        _fit(model, X, method, seed=0)


def test_latent_class_options_are_checked_too():
    items = (np.random.default_rng(0).uniform(size=(30, 4)) < 0.5).astype(float)
    for method in ("em", "vb"):
        with pytest.raises(DataError, match=r"max_iter must be an integer ≥ 1; got 0"):
            _fit(LatentClass(2), items, method, max_iter=0)
    with pytest.raises(DataError, match=r"seed must be an int ≥ 0"):
        _fit(LatentClass(2), items, "gibbs", seed=1.5)
