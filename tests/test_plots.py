"""latentfs.plots: every plot returns a Figure with the panels, lines and labels it promises."""

import sys
import warnings

import matplotlib

matplotlib.use("Agg")  # this module only: no display in tests

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from matplotlib.patches import Ellipse, Rectangle  # noqa: E402

import latentfs  # noqa: E402
from latentfs import plots  # noqa: E402
from latentfs.core.data import DataError  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _quietly(fn, *args, **kwargs):
    # Short chains on purpose: their convergence warnings are not what these tests check.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", latentfs.ConvergenceWarning)
        return fn(*args, **kwargs)


@pytest.fixture(scope="module")
def corpus():
    model = latentfs.DirichletDCA(3, alpha=0.3, gamma=0.1)
    X = model.simulate(n_documents=60, n_features=15, doc_length=50, seed=0)["counts"]
    names = [f"word{j}" for j in range(X.shape[1])]
    return model, X, names


@pytest.fixture(scope="module")
def vb(corpus):
    model, X, names = corpus
    return latentfs.fit(model, pd.DataFrame(np.asarray(X), columns=names), method="vb", seed=0, warn=False)


@pytest.fixture(scope="module")
def gibbs(corpus):
    model, X, _ = corpus
    return _quietly(latentfs.fit, model, X, method="gibbs", seed=0, num_chains=2, num_warmup=30, num_samples=20)


# ---------------------------------------------------------------------------------------------- topics
def test_topic_summary_one_panel_per_component_with_bands(vb, corpus):
    fig = plots.topic_summary(vb, n_words=5)
    axes = fig.get_axes()
    assert len(axes) == 3
    for ax in axes:
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert len(labels) == 5 and all(label.startswith("word") for label in labels)
        assert len(ax.collections) == 1  # the band (one segment per word)
        assert len(ax.collections[0].get_segments()) == 5
        assert "component" in ax.get_title()


def test_topic_summary_ranks_by_the_posterior_mean(vb):
    theta = vb.mean("topic_word")
    fig = plots.topic_summary(vb, n_words=4, components=[1])
    (ax,) = fig.get_axes()
    shown = [t.get_text() for t in ax.get_yticklabels()][::-1]  # drawn bottom-up
    assert shown == [vb.coords["feature"][j] for j in np.argsort(-theta[1], kind="stable")[:4]]


def test_topic_summary_point_estimate_has_no_band(corpus):
    _, X, names = corpus
    em = latentfs.fit(latentfs.PLSA(3), X, method="em", seed=0, warn=False)
    fig = plots.topic_summary(em, feature_names=names, n_words=3)
    assert len(fig.get_axes()) == 3
    assert all(len(ax.collections) == 0 for ax in fig.get_axes())
    assert [t.get_text() for t in fig.get_axes()[0].get_yticklabels()][0].startswith("word")


def test_topic_summary_refuses_bad_arguments(vb):
    with pytest.raises(DataError, match="n_words must be an integer in"):
        plots.topic_summary(vb, n_words=0)
    with pytest.raises(DataError, match="components must be"):
        plots.topic_summary(vb, components=[7])
    with pytest.raises(DataError, match="feature_names must have one name per column"):
        plots.topic_summary(vb, feature_names=["a", "b"])


def test_to_pyldavis_returns_prepare_arrays(vb, corpus):
    _, X, names = corpus
    frame = pd.DataFrame(np.asarray(X), columns=names)
    data = plots.to_pyldavis(vb, frame)
    assert sorted(data) == ["doc_lengths", "doc_topic_dists", "term_frequency", "topic_term_dists", "vocab"]
    assert data["vocab"] == names
    np.testing.assert_allclose(data["topic_term_dists"].sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(data["doc_topic_dists"].sum(1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(data["doc_lengths"], np.asarray(X).sum(1))
    np.testing.assert_array_equal(data["term_frequency"], np.asarray(X).sum(0))
    sparse = plots.to_pyldavis(vb, sp.csr_matrix(np.asarray(X)), names)
    np.testing.assert_array_equal(sparse["term_frequency"], data["term_frequency"])


def test_to_pyldavis_checks_shapes_and_the_optional_package(vb, corpus, monkeypatch):
    _, X, _ = corpus
    with pytest.raises(DataError, match="X must have one column per word"):
        plots.to_pyldavis(vb, np.asarray(X)[:, :5])
    with pytest.raises(DataError, match="X must have one row per document"):
        plots.to_pyldavis(vb, np.asarray(X)[:10])
    monkeypatch.setitem(sys.modules, "pyLDAvis", None)  # as if not installed, on every machine
    with pytest.raises(DataError, match="pip install pyLDAvis"):
        plots.to_pyldavis(vb, X, prepare=True)


# ---------------------------------------------------------------------------------------------- traces
def test_trace_objective_per_chain_with_warmup_and_legend(gibbs):
    fig = plots.trace(gibbs)
    (ax,) = fig.get_axes()
    assert len(ax.get_lines()) == 2  # one per chain
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[1:] == ["chain 0", "chain 1"] and legend[0].startswith("warm-up (30")
    (span,) = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert span.get_x() == 0 and span.get_width() == 30


def test_trace_of_a_site_two_panels_per_entry(gibbs):
    fig = plots.trace(gibbs, "topic_word", entries=[(0, 1), (2, 3)])
    axes = fig.get_axes()
    assert len(axes) == 4
    assert axes[0].get_ylabel() == "topic_word[c0, w1]"
    assert all(len(ax.get_lines()) == 2 for ax in axes[1::2])  # a trace line per chain
    assert [t.get_text() for t in axes[1].get_legend().get_texts()] == ["chain 0", "chain 1"]
    assert len(plots.trace(gibbs, "topic_word", max_entries=2).get_axes()) == 4


def test_trace_refuses_a_site_without_draws(vb, gibbs):
    with pytest.raises(DataError, match="needs draws from a sampler"):
        plots.trace(vb, "topic_word")
    with pytest.raises(DataError, match="site must be 'objective' or one of"):
        plots.trace(gibbs, "nope")
    with pytest.raises(DataError, match="entries must index the site"):
        plots.trace(gibbs, "topic_word", entries=[(5, 0)])
    assert len(plots.trace(vb).get_axes()[0].get_lines()) == 1  # VB: one run, no warm-up
    assert len(plots.trace(vb).get_axes()[0].patches) == 0


# ---------------------------------------------------------------------------------------------- mixtures
@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    return np.vstack([rng.normal(0, 1, (60, 3)), rng.normal(4, 0.8, (40, 3))])


def test_mixture_ellipses_point_fit(blobs):
    result = latentfs.fit(latentfs.GaussianMixture(2), blobs, method="em", seed=0)
    fig = plots.mixture_ellipses(result, blobs, dims=(0, 2))
    (ax,) = fig.get_axes()
    assert sum(isinstance(p, Ellipse) for p in ax.patches) == 2 * 2  # two levels per component
    assert len(ax.collections) == 2  # one scatter per component
    assert ax.get_xlabel() == "x0" and ax.get_ylabel() == "x2"
    # the two groups are far apart: each point's colour is its group's (label-invariant check)
    sizes = sorted(len(c.get_offsets()) for c in ax.collections)
    assert sizes == [40, 60]


def test_mixture_ellipses_diag_tied_and_sampled(blobs):
    lpa = latentfs.fit(latentfs.LatentProfile(2), blobs, seed=0)
    assert sum(isinstance(p, Ellipse) for p in plots.mixture_ellipses(lpa, blobs, levels=[0.9]).get_axes()[0].patches) == 2
    sampled = _quietly(latentfs.fit, latentfs.GaussianMixture(2), blobs, method="gibbs", seed=0, num_chains=1,
                       num_warmup=20, num_samples=10)
    ax = plots.mixture_ellipses(sampled, blobs, num_draws=5).get_axes()[0]
    assert sum(isinstance(p, Ellipse) for p in ax.patches) == 2 * 2 + 5 * 2
    with pytest.raises(DataError, match="dims must be two different feature indices"):
        plots.mixture_ellipses(sampled, blobs, dims=(0, 0))
    with pytest.raises(DataError, match="X must be the data the mixture was fitted on"):
        plots.mixture_ellipses(sampled, blobs[:, :2])


# ---------------------------------------------------------------------------------------------- factors
@pytest.fixture(scope="module")
def factor_data():
    rng = np.random.default_rng(1)
    loadings = np.array([[0.9, 0.0], [0.8, 0.1], [0.7, 0.0], [0.0, 0.9], [0.1, 0.8], [0.0, 0.7], [0.05, 0.05]])
    X = rng.normal(size=(200, 2)) @ loadings.T + 0.6 * rng.normal(size=(200, 7))
    return pd.DataFrame(X, columns=[f"item{j}" for j in range(7)])


def test_loadings_heatmap_point_estimate(factor_data):
    result = latentfs.fit(latentfs.FactorAnalysis(2), factor_data, method="em", seed=0)
    fig = plots.loadings_heatmap(result)
    heat, bar = fig.get_axes()
    assert len(heat.texts) == 7 * 2 and "[" not in heat.texts[0].get_text()
    assert [t.get_text() for t in heat.get_yticklabels()] == list(factor_data.columns)


def test_loadings_heatmap_bands_and_hatches_when_sampled(factor_data):
    model = latentfs.FactorAnalysis(2, loading_scale=1.0, noise_shape=2.0, noise_scale=1.0)
    result = _quietly(latentfs.fit, model, factor_data, method="gibbs", seed=0, num_chains=1, num_warmup=100,
                      num_samples=100)
    heat, _ = plots.loadings_heatmap(result, level=0.9).get_axes()
    assert len(heat.texts) == 14 and all("[" in t.get_text() for t in heat.texts)
    draws = result.samples("loadings").reshape(-1, 7, 2)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    hatched = sum(isinstance(p, Rectangle) and p.get_hatch() == "///" for p in heat.patches)
    assert hatched == int(((lo <= 0) & (hi >= 0)).sum()) >= 1  # item6 loads 0.05 on both factors
