"""Estimators, dimension rules, parameter counts and EM of the HDDA family (latentfs.inference.hdda.numerics).

Oracles from the digest (book_part3 §2.4–2.9): Props. 3–4 numbers, Cattell examples, the parameter-count
table (models 1–14 as coded in HDclassif, 15–28 by the same counting rule), the trace identity at the
MLE, invariances, the n < p Gram trick, and monotone EM with fixed dimensions.
"""

import math

import numpy as np
import pytest

from latentfs.core.data import DataError
from latentfs.inference.hdda import hddc
from latentfs.inference.hdda import numerics as num

LAMBDA_1 = np.array([9.0, 5.0, 1.2, 1.0, 0.8, 0.5])
LAMBDA_2 = np.array([4.0, 3.0, 2.5, 0.4, 0.3, 0.2])


def scatter_with_eigenvalues(eigenvalues, weight, rng):
    """A Scatter whose W has exactly the given eigenvalues, in a random orientation."""
    p = eigenvalues.size
    rotation, _ = np.linalg.qr(rng.normal(size=(p, p)))
    return num.Scatter(float(weight), rng.normal(size=p), np.diag(np.sqrt(eigenvalues)) @ rotation.T)


def chapter_scatters(rng):
    return [scatter_with_eigenvalues(LAMBDA_1, 50, rng), scatter_with_eigenvalues(LAMBDA_2, 30, rng)]


def labelled(rng, sizes=(60, 80, 70), p=8):
    X = np.vstack([rng.normal(size=(n, p)) @ rng.normal(size=(p, p)) + 2 * i for i, n in enumerate(sizes)])
    return X, np.repeat(np.arange(len(sizes)), sizes)


# ------------------------------------------------------------------ chapter numbers (exact to 1e-6)
def test_proposition_3_hdda_per_class(rng):
    params = num.estimate("AkBkQkDk", chapter_scatters(rng), np.array([2, 3]))
    np.testing.assert_allclose([params.signal[0][0], params.noise[0]], [7.0, 0.875], atol=1e-6)
    np.testing.assert_allclose([params.signal[1][0], params.noise[1]], [3.1666667, 0.3], atol=1e-6)


def test_proposition_4_common_a_and_b(rng):
    # The chapter's HDDAi numbers with d = (2, 3): the common-a, common-b estimator [a b Q_i d_i].
    params = num.estimate("ABQkDk", chapter_scatters(rng), np.array([2, 3]))
    np.testing.assert_allclose(params.signal[0][0], 5.184211, atol=1e-6)
    np.testing.assert_allclose(params.noise, [0.696552, 0.696552], atol=1e-6)
    a, b = params.signal[0][0], params.noise[0]
    np.testing.assert_allclose([b / (a + b), a * b / (a + b)], [0.118446, 0.614048], atol=1e-6)


def test_proposition_5_homothetic_rule(rng):
    # HDDAh: common α, free σ_i; the digest's fixed point (checked there against Nelder–Mead).
    params = num.estimate("HDDAH", chapter_scatters(rng), np.array([2, 3]))
    a, b = np.array([s[0] for s in params.signal]), params.noise
    alpha = b / (a + b)
    np.testing.assert_allclose(alpha, [0.1004425, 0.1004425], atol=1e-6)
    np.testing.assert_allclose(a * b / (a + b), [0.759108, 0.293968], atol=1e-6)
    # ν = ρ + τ̄ + k (σ_i) + 1 (α) + k (d_i)
    assert num.n_parameters("HDDAH", 100, 4, [10] * 4) == 403 + 3780 + 4 + 1 + 4


def test_cattell_examples():
    assert num.cattell_dimension(np.array([10.0, 6, 1, 1, 1]), 100) == 2
    assert num.cattell_dimension(LAMBDA_1, 50) == 2
    assert num.cattell_dimension(LAMBDA_2, 30) == 3
    assert num.cattell_dimension(np.array([3.0, 1.0]), 10) == 1  # p = 2


def test_bic_dimension_finds_planted_gap():
    ev = np.array([50.0, 40, 30] + [1.0] * 17)
    assert num.bic_dimension(ev, ev.sum(), 20, 1000) == 3


# ------------------------------------------------------------------ parameter counts
def hdclassif_table(number, p, k, d):
    """The digest's table, written out formula by formula (1–14 as coded in HDclassif)."""
    rho = k * p + k - 1
    dv = np.broadcast_to(np.asarray(d, float), (k,))
    tau_bar = float((dv * (p - (dv + 1) / 2)).sum())
    D = float(dv.sum())
    dd = float(dv[0])
    tau = dd * (p - (dd + 1) / 2)
    return {
        1: rho + tau_bar + 2 * k + D, 2: rho + tau_bar + 3 * k, 3: rho + tau_bar + 2 * k + 1,
        4: rho + tau_bar + k + D + 1, 5: rho + tau_bar + 2 * k + 1, 6: rho + tau_bar + k + 2,
        7: rho + k * (tau + dd + 1) + 1, 8: rho + k * (tau + 2) + 1, 9: rho + k * (tau + 1) + 2,
        10: rho + k * (tau + dd) + 2, 11: rho + k * (tau + 1) + 2, 12: rho + k * tau + 3,
        13: rho + tau + dd + 2, 14: rho + tau + 3,
        15: rho + k * (tau + 1) + dd + 1, 16: rho + k * tau + dd + 2, 17: rho + tau + k * dd + k + 1,
        18: rho + tau + dd + k + 1, 19: rho + tau + k * dd + 2, 20: rho + tau + 2 * k + 1,
        21: rho + tau + k + 2, 22: rho + tau + k + 2,
        23: rho + k * p * (p + 1) / 2, 24: rho + p * (p + 1) / 2, 25: rho + k * p, 26: rho + p,
        27: rho + k, 28: rho + 1,
    }[number]


@pytest.mark.parametrize("number", range(1, 29))
def test_parameter_counts_equal_published_table(number):
    spec = num.resolve_submodel(number)
    for p, k in ((100, 4), (37, 3)):
        dims = [10] * k if spec.dims != "di" else [3, 5, 7, 9][:k]
        assert num.n_parameters(spec, p, k, dims) == hdclassif_table(number, p, k, dims)


def test_parameter_count_examples_of_the_digest():
    assert num.n_parameters(2, 100, 4, [10] * 4) == 4195
    assert num.n_parameters(1, 100, 4, [10] * 4) == 4231
    assert num.n_parameters("FULL", 100, 4) == 20603


def test_every_model_has_one_estimator_and_is_flagged():
    assert set(num.ESTIMATORS) == set(num.SUBMODELS)
    assert len(num.SUBMODELS) == 29  # the digest's 28 + the chapter's HDDAh
    assert [s.number for s in num.SUBMODELS.values() if not s.exact] == list(range(17, 23))
    assert len(num.resolve_submodels("all")) == 16


# ------------------------------------------------------------------ identities at the MLE
@pytest.mark.parametrize("name", list(num.SUBMODELS))
def test_trace_identity_and_eigenvalue_likelihood(name, rng):
    X, y = labelled(rng)
    n, p = X.shape
    spec = num.SUBMODELS[name]
    params, log_lik, _ = num.fit_hdda_params(X, y, 3, spec, 3)
    # quadratic part of K summed over each class's own rows equals n p (trace identity)
    K = num.cost(X, params)[np.arange(n), y]
    log_det = np.array([np.log(a).sum() + (p - d) * np.log(b) * (d < p)
                        for a, b, d in zip(params.signal, params.noise, params.dims, strict=True)])
    quad = K - log_det[y] + 2 * np.log(params.weights[y])
    np.testing.assert_allclose(quad.sum(), n * p, rtol=1e-9)
    sizes = np.bincount(y)
    m2ll = (sizes * (log_det - 2 * np.log(params.weights) + p * (1 + math.log(2 * math.pi)))).sum()
    np.testing.assert_allclose(-2 * log_lik, m2ll, rtol=1e-10)


def test_constraints_hold_in_the_estimates(rng):
    X, y = labelled(rng)
    fit = lambda m, d=3: num.fit_hdda_params(X, y, 3, m, d)[0]  # noqa: E731
    p = fit("AkBkQkDk")
    assert all(np.allclose(a, a[0]) for a in p.signal)
    p = fit("AjBkQkD")
    assert all(np.allclose(a, p.signal[0]) for a in p.signal) and np.unique(p.noise).size == 3
    p = fit("AkjBQkDk")
    assert np.allclose(p.noise, p.noise[0])
    p = fit("DIAG")
    assert p.orientations == [None] * 3
    p = fit("SPHE")
    assert p.dims.tolist() == [0, 0, 0]


def test_rotation_translation_and_permutation_invariance(rng):
    X, y = labelled(rng, p=6)
    Xt = rng.normal(size=(30, 6)) * 3
    R, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    shift = rng.normal(size=6) * 5
    base, ll, _ = num.fit_hdda_params(X, y, 3, "AkjBkQkDk", 2)
    rot, ll_rot, _ = num.fit_hdda_params(X @ R.T + shift, y, 3, "AkjBkQkDk", 2)
    np.testing.assert_allclose(num.cost(Xt @ R.T + shift, rot), num.cost(Xt, base), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(rot.means, base.means @ R.T + shift, atol=1e-9)
    np.testing.assert_allclose(ll_rot, ll, rtol=1e-12)
    perm = np.array([2, 0, 1])
    swapped, _, _ = num.fit_hdda_params(X, perm[y], 3, "AkjBkQkDk", 2)
    np.testing.assert_allclose(num.cost(Xt, swapped)[:, perm], num.cost(Xt, base), rtol=1e-10)


def test_gram_trick_matches_feature_space_route(rng):
    Y = rng.normal(size=(12, 40)) @ np.diag(rng.uniform(0.5, 3, 40))
    small = num.Scatter(1.0, np.zeros(40), Y)  # 12 < 40: Gram route
    vals, vecs = np.linalg.eigh(Y.T @ Y)
    vals, vecs = vals[::-1], vecs[:, ::-1]
    r = small.eigenvalues.size
    assert r == 12
    np.testing.assert_allclose(small.eigenvalues, vals[:r], rtol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(small.eigenvectors * vecs[:, :r], axis=0)), 1.0, atol=1e-9)
    np.testing.assert_allclose(small.trace, np.trace(Y.T @ Y), rtol=1e-12)


def test_n_smaller_than_p_fit_equals_dense_computation(rng):
    X = rng.normal(size=(30, 60))
    y = np.repeat([0, 1], 15)
    params, _, _ = num.fit_hdda_params(X, y, 2, "AkjBkQkDk", 4)
    for i in range(2):
        cov = np.cov(X[y == i].T, bias=True)
        vals = np.linalg.eigvalsh(cov)[::-1]
        np.testing.assert_allclose(params.signal[i], vals[:4], rtol=1e-9)
        np.testing.assert_allclose(params.noise[i], vals[4:].sum() / 56, rtol=1e-9)


def test_criterion_sign_convention():
    assert num.criterion_value("bic", -10.0, 3, 100) == pytest.approx(20 + 3 * math.log(100))
    assert num.criterion_value("icl", -10.0, 3, 100, entropy=2.0) == pytest.approx(24 + 3 * math.log(100))


# ------------------------------------------------------------------ HDDC
def test_hddc_em_is_monotone_with_fixed_dimensions(rng):
    X = np.vstack([rng.normal(size=(80, 10)) @ rng.normal(size=(10, 10)) + 4 * i for i in range(3)])
    for model in ("AkjBkQkDk", "ABQkD", "AkBQD"):
        fit = hddc.fit_hddc(X, 3, model, 2, seed=0, n_init=1, init="random", tol=1e-10, max_iter=60, warn=False)
        assert fit.n_iter > 3
        assert np.all(np.diff(fit.trace) >= -1e-8 * np.abs(fit.trace[1:]))


def test_hddc_cem_gives_hard_assignments_and_restarts_keep_best(rng):
    X = np.vstack([rng.normal(size=(50, 5)), rng.normal(size=(50, 5)) + 5])
    fit = hddc.fit_hddc(X, 2, "AkBkQkD", 1, seed=1, n_init=3, algorithm="cem")
    assert len(fit.run_objectives) == 3
    assert fit.log_likelihood >= max(fit.run_objectives) - 1e-6 * abs(fit.log_likelihood)
    labels = np.eye(2)[np.r_[np.zeros(50, int), np.ones(50, int)]].argmax(1)
    fit2 = hddc.fit_hddc(X, 2, "AkBkQkD", 1, init=labels)
    assert fit2.resp.argmax(1)[:50].std() == 0 and fit2.icl >= fit2.bic


# ------------------------------------------------------------------ bad input
def test_model_name_errors():
    with pytest.raises(DataError, match="model number in 1..29"):
        num.resolve_submodel(30)
    with pytest.raises(DataError, match="model must be one of"):
        num.resolve_submodel("AkBkQk")
    with pytest.raises(DataError, match="at least one model"):
        num.resolve_submodels([])


def test_dimension_argument_errors(rng):
    X, y = labelled(rng)
    with pytest.raises(DataError, match="n_dims must be one of"):
        num.fit_hdda_params(X, y, 3, "AkBkQkDk", "scree")
    with pytest.raises(DataError, match="n_dims must be 'cattell', 'bic', an int"):
        num.fit_hdda_params(X, y, 3, "AkBkQkDk", 2.5)
    with pytest.raises(DataError, match=r"one int or one per class \(3\)"):
        num.fit_hdda_params(X, y, 3, "AkBkQkDk", [1, 2])
    with pytest.raises(DataError, match="single common dimension for model AkBkQkD"):
        num.fit_hdda_params(X, y, 3, "AkBkQkD", [1, 2, 3])


def test_hddc_argument_errors(rng):
    X = rng.normal(size=(40, 3))
    with pytest.raises(DataError, match="algorithm must be one of"):
        hddc.fit_hddc(X, 2, algorithm="sem")
    with pytest.raises(DataError, match="init must be one of"):
        hddc.fit_hddc(X, 2, init="param")
    with pytest.raises(DataError, match=r"init labels must be 40 integers in 0\.\.1"):
        hddc.fit_hddc(X, 2, "AkBkQkD", 1, init=np.r_[np.zeros(39, int), 2])
    with pytest.raises(DataError, match="every HDDC run lost a cluster"):
        hddc.fit_hddc(X, 2, "AkBkQkD", 1, init=np.r_[np.zeros(39, int), 1])
    with pytest.raises(DataError, match="criterion must be one of"):
        num.criterion_value("aic", 0.0, 1, 10)
