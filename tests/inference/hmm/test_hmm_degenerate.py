"""Degenerate HMM fits (issue 30): a state collapsed onto tied rows is flagged, and the covariance floor is relative to
the data's scale, so a fit of c·X is the fit of X scaled (an absolute 1e-6 floor decoded returns × 1e-8 at chance)."""

import warnings

import numpy as np
import pytest

import latentfs
from latentfs.inference.mixture.em import CollapsedComponentWarning
from latentfs.models import GaussianHMM


def _returns():
    # daily-return-like data: heavy tails, 1% scale, 73 exact zeros (market holidays) among 1,859 days
    rng = np.random.default_rng(0)
    x = rng.standard_t(4, size=1859) * 0.01
    x[rng.choice(1859, 73, replace=False)] = 0.0
    return x[:, None]


def test_a_state_collapsed_on_the_zero_days_is_flagged():
    x = _returns()
    init = {"startprob": np.full(3, 1 / 3), "transmat": np.full((3, 3), 1 / 3),
            "means": np.array([[0.0], [-0.01], [0.01]]), "covariance": np.array([[[1e-9]], [[1e-4]], [[1e-4]]])}
    with pytest.warns(CollapsedComponentWarning, match=r"collapsed state\(s\): state 0 has variance .* along 'x0'"):
        res = latentfs.fit(GaussianHMM(3, covariance_type="full"), x, method="em", init=init, seed=0)
    (entry,) = res.diagnostics["collapsed"]
    assert entry["state"] == 0 and entry["relative_variance"] < 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("error", CollapsedComponentWarning)
        clean = latentfs.fit(GaussianHMM(2), x[x[:, 0] != 0], method="em", seed=0)
    assert clean.diagnostics["collapsed"] == []


@pytest.mark.parametrize("scale", [1e-8, 1e6])
def test_em_is_scale_equivariant(scale):
    x = _returns()
    options = {"method": "em", "seed": 0, "n_init": 1, "max_iter": 40, "tol": 0.0, "warn": False}
    base = latentfs.fit(GaussianHMM(3), x, **options)
    scaled = latentfs.fit(GaussianHMM(3), x * scale, **options)
    np.testing.assert_allclose(scaled.mean("means"), base.mean("means") * scale, rtol=1e-6)
    np.testing.assert_allclose(scaled.mean("covariance"), base.mean("covariance") * scale**2, rtol=1e-6)
    np.testing.assert_allclose(scaled.transform(x * scale), base.transform(x), atol=1e-6)
