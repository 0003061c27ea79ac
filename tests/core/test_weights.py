"""FeatureWeights: the one feature-score type."""

import numpy as np
import pytest

from latentfs import DataError, FeatureWeights


def test_ranking_top_support_and_band():
    draws = np.array([[0.1, 0.9, 0.4], [0.3, 0.7, 0.2], [0.2, 0.8, 0.3]])
    fw = FeatureWeights(draws.mean(0), "demo", ["a", "b", "c"], draws=draws)
    assert fw.ranking().tolist() == [1, 2, 0]
    assert fw.top(2) == ["b", "c"]
    assert fw.support(1).tolist() == [False, True, False]
    assert fw.support(threshold=0.25).tolist() == [False, True, True]
    lo, hi = fw.band(0.5)
    assert np.all(lo <= fw.scores) and np.all(fw.scores <= hi)
    frame = fw.to_frame()
    assert frame["feature"].tolist() == ["b", "c", "a"] and {"lower", "upper"} <= set(frame.columns)


def test_roundtrip_and_immutability():
    fw = FeatureWeights([1.0, 2.0], "demo", draws=[[1.0, 2.0], [1.5, 2.5]], info={"k": 1})
    back = FeatureWeights.from_dict(fw.to_dict())
    assert np.array_equal(back.scores, fw.scores) and np.array_equal(back.draws, fw.draws)
    assert back.feature_names == ("x0", "x1") and back.info == {"k": 1}
    with pytest.raises(ValueError):
        fw.scores[0] = 3.0


def test_ties_keep_input_order():
    assert FeatureWeights([1.0, 1.0, 2.0], "t").ranking().tolist() == [2, 0, 1]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"scores": [[1.0]]}, r"scores must be 1-D \(one per feature\); got shape \(1, 1\)"),
        ({"scores": [1.0, np.nan]}, r"scores must not contain NaN; feature 1 is NaN"),
        ({"scores": [1.0], "feature_names": ["a", "b"]}, r"one name per score: got 2 names for 1 scores"),
        ({"scores": [1.0, 2.0], "draws": [1.0, 2.0]}, r"draws must have shape \(n_draws, 2\); got \(2,\)"),
    ],
)
def test_construction_errors(kwargs, match):
    with pytest.raises(DataError, match=match):
        FeatureWeights(method="m", **kwargs)


def test_selection_errors():
    fw = FeatureWeights([1.0, 2.0], "m")
    with pytest.raises(DataError, match=r"k must be at most the number of features \(2\); got 3"):
        fw.top(3)
    with pytest.raises(DataError, match=r"k must be a positive integer; got 0"):
        fw.support(0)
    with pytest.raises(DataError, match="support needs exactly one of k or threshold"):
        fw.support()
    with pytest.raises(DataError, match=r"band needs draws, and the weights of 'm' have none"):
        fw.band()
    with pytest.raises(DataError, match=r"level must lie in \(0, 1\); got 1.5"):
        FeatureWeights([1.0], "m", draws=[[1.0], [2.0]]).band(1.5)
    # One replicate is a point estimate: it gives no band, never a zero-width one.
    point = FeatureWeights([1.0], "m", draws=[[1.0]])
    assert point.draws is None and "point estimate" in point.info["band"]


def test_band_is_a_labelled_table_that_still_unpacks_into_lower_and_upper():
    """issue 34: ``weights.band(0.9)`` printed two bare arrays. It now prints a table labelled by feature; unpacking
    (``lo, hi = weights.band(level)``, used across tests, tutorials and the CLI) keeps its meaning."""
    import pickle

    rng = np.random.default_rng(0)
    draws = rng.normal(size=(200, 3)) + [0.0, 5.0, 1.0]
    fw = FeatureWeights(draws.mean(0), "demo", ["alpha", "beta", "gamma"], draws=draws)
    band = fw.band(0.9)
    lo, hi = band
    expect_lo, expect_hi = np.quantile(draws, [(1 - 0.9) / 2, (1 + 0.9) / 2], axis=0)
    assert isinstance(lo, np.ndarray) and np.array_equal(lo, expect_lo) and np.array_equal(hi, expect_hi)
    assert band[0] is lo and band.lower is lo and band.upper is hi and len(band) == 2
    frame = band.to_frame()
    assert frame.index.tolist() == ["alpha", "beta", "gamma"] and frame.index.name == "feature"
    assert frame.columns.tolist() == ["lower", "upper"] and frame.attrs["level"] == 0.9
    assert np.array_equal(frame.loc["beta"].to_numpy(), [expect_lo[1], expect_hi[1]])
    text = repr(band)
    assert text.startswith("Band(level=0.9, n_features=3)") and "90% band" in text
    assert all(name in text for name in ("alpha", "beta", "gamma"))
    assert "<table" in band._repr_html_() and "gamma" in band._repr_html_()
    back = pickle.loads(pickle.dumps(band))
    assert back.level == 0.9 and back.feature_names == band.feature_names and np.array_equal(back[1], hi)
    assert fw.band(0.975).to_frame().columns.name == "97.5% band"
