"""An xarray DataArray is accepted wherever a DataFrame is, its coordinates naming documents/samples (first
dimension) and features (second) (issue 34, item 6). Before, its labels were dropped."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import latentfs
from latentfs.core.data import DataError, as_continuous, as_counts

COUNTS = latentfs.DirichletDCA(2, alpha=0.5).simulate(30, 6, doc_length=40, seed=0)["counts"]
WORDS = ["apple", "bread", "cheese", "dates", "eggs", "figs"]
DOCS = [f"story-{i}" for i in range(30)]


def test_fit_takes_a_dataarrays_labels_as_names():
    da = xr.DataArray(COUNTS, dims=("document", "word"), coords={"document": DOCS, "word": WORDS})
    result = latentfs.fit(latentfs.DirichletDCA(2), da, method="vb", seed=0, max_iter=50, warn=False)
    assert result.coords["feature"] == WORDS and result.coords["document"] == DOCS
    frame = latentfs.fit(latentfs.DirichletDCA(2), da.to_pandas(), method="vb", seed=0, max_iter=50, warn=False)
    np.testing.assert_array_equal(result.mean("topic_word"), frame.mean("topic_word"))  # same data, same fit


def test_continuous_and_partial_labels():
    X = np.random.default_rng(0).normal(size=(20, 3))
    da = xr.DataArray(X, dims=("sample", "gene"), coords={"gene": ["g1", "g2", "g3"]})  # rows unlabelled
    cm = as_continuous(da)
    assert cm.feature_names == ("g1", "g2", "g3") and cm.sample_names[:2] == ("s0", "s1")
    np.testing.assert_array_equal(cm.values, X)
    bare = as_counts(xr.DataArray(COUNTS))  # no coordinates: generated names, as for an array
    assert bare.feature_names == tuple(f"w{j}" for j in range(6)) and bare.document_names[0] == "doc0"
    named = as_counts(xr.DataArray(COUNTS, dims=("d", "w"), coords={"w": WORDS}), feature_names=list("abcdef"))
    assert named.feature_names == tuple("abcdef")  # feature_names= overrides, as for a DataFrame


def test_bad_dataarrays_are_refused_with_a_remedy():
    with pytest.raises(DataError, match=r"X must be a 2-D DataArray .* got dims \('a', 'b', 'c'\)\. Select or stack"):
        as_counts(xr.DataArray(np.ones((2, 3, 4)), dims=("a", "b", "c")))
    dup = xr.DataArray(COUNTS, dims=("document", "word"), coords={"word": ["a", "a", "b", "c", "d", "e"]})
    with pytest.raises(DataError, match=r"the DataArray's 'word' coordinate .*'a'"):
        as_counts(dup)


def test_estimators_keep_a_dataarrays_feature_labels():
    # issue 34: scikit-learn's validation turned a DataArray into a bare array, so fit dropped its coordinates
    # (feature_names_in_ unset, posterior_ named x0…, output names generic); now it is read as the DataFrame it is
    from latentfs import DCA, FactorAnalyzer

    da = xr.DataArray(COUNTS, dims=("document", "word"), coords={"document": DOCS, "word": WORDS})
    est = DCA(2).fit(da)
    assert list(est.feature_names_in_) == WORDS
    assert est.posterior_.coords["feature"] == WORDS
    # new data by name: the same columns in another order give the same scores
    reordered = da.isel(word=[5, 4, 3, 2, 1, 0])
    np.testing.assert_allclose(est.transform(reordered), est.transform(da), rtol=1e-10)
    X = np.random.default_rng(1).normal(size=(40, 3))
    genes = xr.DataArray(X, dims=("sample", "gene"), coords={"gene": ["g1", "g2", "g3"]})
    fa = FactorAnalyzer(1).fit(genes)
    assert list(fa.feature_names_in_) == ["g1", "g2", "g3"] and fa.posterior_.coords["feature"] == ["g1", "g2", "g3"]


def test_selectors_keep_a_dataarrays_feature_labels():
    from latentfs.select import LeverageScoreSelector

    X = np.random.default_rng(2).normal(size=(30, 4))
    da = xr.DataArray(X, dims=("sample", "gene"), coords={"gene": ["a", "b", "c", "d"]})
    sel = LeverageScoreSelector(n_features_to_select=2).fit(da)
    assert list(sel.feature_names_in_) == ["a", "b", "c", "d"]
    assert set(sel.get_feature_names_out()) <= {"a", "b", "c", "d"} and len(sel.get_feature_names_out()) == 2
