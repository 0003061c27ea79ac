"""New data whose squares overflow float64 (issue 31, item 11's campaign: 11 silent runs): fitted mixture, HDDC
and factor-analysis estimators returned NaN or inf scores, probabilities and transforms for X × 1e300; they now
refuse it with the remedy. Tiny new data (× 1e-200) are legal and scored."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.testing import tiny_data, tiny_model

X, _ = tiny_data(tiny_model(latentfs.GaussianMixture))


@pytest.fixture(scope="module", params=["GaussianMixtureClusterer", "LatentProfileClusterer", "HDDC",
                                        "FactorAnalyzer"])
def fitted(request):
    est = getattr(latentfs, request.param)(1 if request.param == "FactorAnalyzer" else 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X)


def test_overflowing_new_data_are_refused(fitted):
    methods = [m for m in ("score_samples", "predict_proba", "transform", "score", "predict") if hasattr(fitted, m)]
    assert len(methods) >= 2
    for method in methods:
        with pytest.raises(DataError, match=r"too large for float64 arithmetic: its squares overflow .* Rescale X"):
            getattr(fitted, method)(X * 1e300)


def test_tiny_new_data_are_scored(fitted):
    out = fitted.score_samples(X * 1e-200) if hasattr(fitted, "score_samples") else fitted.predict_proba(X * 1e-200)
    assert np.isfinite(out).all()
