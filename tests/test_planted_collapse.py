"""check_engine's planted collapse (issue 30, item 4: "a planted collapse flagged"): a fit that ends with a variance
at zero on data built to collapse must say so. It found HDDC EM, MFA EM and mixture stepwise EM returning such fits
without a word (a class on 15 copies of one row: noise variance 7.7e-13 of the data's; a shared MFA noise variance at
1e-6; a stepwise-EM component at 8e-8); each now warns and lists it in its diagnostics."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import latentfs
from latentfs.core import registry
from latentfs.core.diagnostics import CollapsedComponentWarning
from latentfs.testing import check_planted_collapse, planted_collapse, tiny_model


def _engine(model_class, method):
    registry._load_engines(model_class(2) if model_class is not latentfs.HDDAModel else model_class(2, 1))
    return registry._ENGINES[(model_class, method)]


@pytest.mark.parametrize("model_class, method, key", [
    (latentfs.HDDAModel, "em", "collapsed"),
    (latentfs.GaussianMixture, "online_em", "collapsed"),
    (latentfs.MixtureOfFactorAnalyzers, "em", "heywood_features"),
])
def test_a_planted_collapse_is_flagged(model_class, method, key):
    model, X, needed = planted_collapse(tiny_model(model_class))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = latentfs.fit(model, X, method=method, seed=3, **needed)
    assert result.diagnostics[key]
    assert any("collapse" in str(w.message) or "Heywood" in str(w.message) for w in caught)


def test_the_check_fails_on_an_engine_that_says_nothing(monkeypatch):
    engine = _engine(latentfs.HDDAModel, "em")
    check_planted_collapse(tiny_model(latentfs.HDDAModel), "em", {}, engine, "HDDC")
    monkeypatch.setattr(type(engine), "degenerate_warning", None)
    with pytest.raises(AssertionError, match="planted collapse ends with a variance at .* declares no degeneracy"):
        check_planted_collapse(tiny_model(latentfs.HDDAModel), "em", {}, engine, "HDDC")


def test_the_check_fails_when_the_warning_is_not_issued(monkeypatch):
    engine = _engine(latentfs.GaussianMixture, "online_em")
    monkeypatch.setattr(type(engine), "degenerate_warning", CollapsedComponentWarning)
    monkeypatch.setattr(type(engine), "degenerate", lambda self, prep, o, state: [])
    with pytest.raises(AssertionError, match="does not list it"):
        check_planted_collapse(tiny_model(latentfs.GaussianMixture), "online_em", {}, engine, "online EM")


def test_a_model_without_own_variances_has_no_planted_collapse():
    assert planted_collapse(tiny_model(latentfs.LatentClass)) is None
    model, X, _ = planted_collapse(tiny_model(latentfs.GaussianMixture))
    assert model.n_components == 3 and np.isclose(X[-15:], X[-1]).all()
