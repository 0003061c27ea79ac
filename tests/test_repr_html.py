"""How a notebook shows a Posterior and a FeatureWeights (``_repr_html_``): what the fit is, whether it converged
(with a warning badge when not), its sites and shapes, its diagnostics, the top features, and nothing a user's
names could inject."""

import re

import numpy as np
import pytest

import latentfs
from latentfs.core.results import Posterior
from latentfs.core.weights import FeatureWeights

HOSTILE = "<script>alert(1)</script>"
N_DOCS, N_WORDS = 20, 8


@pytest.fixture(scope="module")
def corpus():
    model = latentfs.DirichletDCA(2)
    return model, model.simulate(n_documents=N_DOCS, n_features=N_WORDS, doc_length=20, seed=0)["counts"]


@pytest.fixture(scope="module")
def short_gibbs(corpus):
    model, X = corpus
    names = [HOSTILE] + [f"w{j}" for j in range(1, N_WORDS)]
    return latentfs.fit(model, X, method="gibbs", seed=0, num_warmup=5, num_samples=10, num_chains=2, warn=False,
                        feature_names=names)


def _badge(page):
    found = re.findall(r'<span class="latentfs-status"[^>]*>([^<]*)</span>', page)
    assert len(found) == 1, page
    return found[0]


def test_an_optimiser_stopped_at_max_iter_shows_a_warning_badge_sites_and_diagnostics(corpus):
    model, X = corpus
    result = latentfs.fit(model, X, method="vb", seed=0, max_iter=3, warn=False)
    assert result.diagnostics["converged"] is False
    page = result._repr_html_()
    assert "<b>Posterior</b> of <code>DirichletDCA</code> by <code>vb</code>, kind <code>distribution</code>" in page
    assert _badge(page) == "⚠ not converged"
    assert "the optimiser stopped after 3 iterations before its tolerance was met" in page
    for site, layout in (("topic_word", f"component (2) × feature ({N_WORDS})"),
                         ("doc_topic", f"document ({N_DOCS}) × component (2)")):
        assert f"<tr><td><code>{site}</code></td><td>distribution</td><td>dirichlet</td><td>{layout}</td></tr>" in page
    assert "<tr><td><code>n_iter</code></td><td>3</td></tr>" in page
    assert f"<tr><td><code>objective</code></td><td>{result.diagnostics['objective']:.6g}</td></tr>" in page


def test_a_converged_optimiser_has_no_warning():
    rng = np.random.default_rng(0)  # one planted factor: EM converges in a few iterations
    X = rng.normal(size=(200, 1)) @ np.array([[1.0, 0.8, 0.6, 0.9, 0.7]]) + 0.5 * rng.normal(size=(200, 5))
    result = latentfs.fit(latentfs.FactorAnalysis(1), X, method="em", seed=0)
    assert result.diagnostics["converged"] is True
    page = result._repr_html_()
    assert _badge(page) == "✓ converged" and "⚠" not in page
    assert "kind <code>point</code> (point estimates (no bands))" in page


def test_a_sampler_that_has_not_converged_says_which_site_and_by_how_much(short_gibbs):
    page = short_gibbs._repr_html_()
    conv = short_gibbs.diagnostics["convergence"]["topic_word"]
    assert conv["r_hat_max"] > 1.01
    assert _badge(page) == "⚠ not converged"
    assert "kind <code>draws</code> (draws: 2 chain(s) × 10 draws)" in page
    assert (f"site &#x27;topic_word&#x27; has not converged (max R̂ {conv['r_hat_max']:.3f} &gt; 1.01; "
            f"min bulk ESS {conv['ess_bulk_min']:.0f} &lt; 200") in page
    assert (f"<tr><td><code>topic_word</code></td><td>{conv['r_hat_max']:.6g}</td><td>{conv['ess_bulk_min']:.6g}</td>"
            f"<td>{conv['ess_tail_min']:.6g}</td><td>16 of 16</td></tr>") in page
    assert "components relabelled on site <code>topic_word</code>" in page


def _posterior(**diagnostics):
    return Posterior(model=HOSTILE, method="em & co", dims={"<b>site": ("<i>dim", "feature")},
                     coords={"feature": ["a", "b", "c"]}, trace=np.zeros((1, 4)),
                     fitted={"<b>site": {"family": "point", "value": np.ones((2, 3))}}, diagnostics=diagnostics)


def test_interrupted_and_unchecked_fits_are_not_shown_as_converged():
    interrupted = _posterior(converged=False, interrupted=True, n_iter=7)._repr_html_()
    assert _badge(interrupted) == "⚠ interrupted"
    assert "interrupted (Ctrl-C) after 7 iterations" in interrupted
    assert "before its tolerance was met" not in interrupted  # it was stopped, not out of iterations
    assert _badge(_posterior()._repr_html_()) == "⚠ not checked"
    assert _badge(_posterior(converged=None)._repr_html_()) == "⚠ not checked"  # online fits record None


def test_every_string_in_a_posterior_page_is_escaped():
    page = _posterior(**{"<u>key": "<img src=x onerror=alert(1)>", "n_iter": 4, "converged": True})._repr_html_()
    assert "<script>" not in page and "<img" not in page and "<b>site" not in page and "<u>" not in page
    assert "<code>&lt;script&gt;alert(1)&lt;/script&gt;</code> by <code>em &amp; co</code>" in page
    assert "<td><code>&lt;b&gt;site</code></td><td>point</td><td>point</td><td>&lt;i&gt;dim (2) × feature (3)</td>" in page
    assert "<td><code>&lt;u&gt;key</code></td><td>&lt;img src=x onerror=alert(1)&gt;</td>" in page


def test_long_diagnostics_are_cut_to_a_few_items():
    page = _posterior(converged=True, restart_objectives=np.arange(10.0), n_iter=4)._repr_html_()
    assert "<td>[0, 1, 2, 3, 4, 5, … (10 items)]</td>" in page


def test_feature_weights_show_the_top_features_with_their_band_and_escape_names(short_gibbs):
    weights = latentfs.word_importance(short_gibbs)
    page = weights._repr_html_()
    assert weights.draws is not None
    assert (f"<b>FeatureWeights</b> by <code>{weights.method}</code>: {N_WORDS} features; 90% band from "
            f"{weights.draws.shape[0]} draws") in page
    assert "<th>90% band</th>" in page
    lo, hi = weights.band(0.9)
    for rank, j in enumerate(weights.ranking(), start=1):
        name = weights.feature_names[j].replace("<", "&lt;").replace(">", "&gt;")
        assert (f"<tr><td>{rank}</td><td><code>{name}</code></td><td>{weights.scores[j]:.4g}</td>"
                f"<td>[{lo[j]:.4g}, {hi[j]:.4g}]</td></tr>") in page
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_point_weights_have_no_band_and_long_lists_are_cut():
    scores = np.linspace(0.0, 1.0, 25)
    page = FeatureWeights(scores, method="point & co", draws=scores[None])._repr_html_()
    assert "by <code>point &amp; co</code>: 25 features; none: the scores come from a point estimate" in page
    assert "band</th>" not in page
    assert page.count("<tr><td>") == 10 and "<tr><td>1</td><td><code>x24</code></td><td>1</td></tr>" in page
    assert "… 15 more feature(s); <code>.to_frame()</code> lists them all." in page
