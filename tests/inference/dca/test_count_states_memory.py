"""A fit that keeps count states stays usable when its Θ draws, made as values, would not fit in memory.

A collapsed fit on a large corpus keeps every kept sweep's assignments (one byte a token), but all of its Θ draws
as float64 values can be far larger than the machine (2 chains × 50 draws × 200 × 60,000 × 8 bytes = 9.6 GB on a
news20-sized corpus). Before this change ``summary()`` and the feature weights made every draw at once, and the
operating system killed the process, taking the fit with it. Now:

* whatever would make every draw at once (``samples``, ``np.asarray``, the ArviZ export) is refused first with a
  DataError that says how large and what to do instead;
* ``summary()`` and the feature weights read the draws in blocks, with the same numbers as before.

The memory a process may use is simulated by patching :func:`latentfs.core.memory.available_memory`.
"""

from __future__ import annotations

import numpy as np
import pytest

import latentfs
from latentfs.core import memory
from latentfs.core.count_draws import CountStateDraws
from latentfs.core.data import DataError
from latentfs.inference.dca.weights import word_importance, word_relevance

SAMPLERS = ("collapsed_gibbs", "mh")


def _fit(method: str):
    model = latentfs.DirichletDCA(3, alpha=0.5)
    X = model.simulate(n_documents=40, n_features=25, doc_length=30, seed=4)["counts"]
    post = latentfs.fit(model, X, method=method, seed=2, num_warmup=10, num_samples=9, warn=False)
    assert isinstance(post._draws["topic_word"], CountStateDraws)
    return post


def _tight(monkeypatch, post, n_draws: float) -> None:
    """Leave this process memory for ``n_draws`` draws' values (as twice that: the checks allow half)."""
    per_draw = 3 * 25 * 8
    monkeypatch.setattr(memory, "available_memory", lambda: int(2 * n_draws * per_draw))


@pytest.mark.parametrize("method", SAMPLERS)
def test_making_every_draw_at_once_is_refused_when_it_would_not_fit(method: str, monkeypatch) -> None:
    post = _fit(method)
    _tight(monkeypatch, post, 5)  # room for 5 of the 18 draws
    with pytest.raises(DataError, match=r"making 18 draws of this \(3 × 25\) site as float64 values needs .* over "
                                        r"half the memory available now .*draw_blocks"):
        post.samples("topic_word")
    with pytest.raises(DataError, match="draw_blocks"):
        post.to_inference_data()


@pytest.mark.parametrize("method", SAMPLERS)
def test_summary_and_weights_read_the_draws_in_blocks_with_the_same_numbers(method: str, monkeypatch) -> None:
    post = _fit(method)
    draws = post.samples("topic_word")  # every draw, with memory to spare
    summary = post.summary(max_entries=1000)
    aggregate = post.summary()
    relevance, importance = word_relevance(post, 1), word_importance(post)
    _tight(monkeypatch, post, 5)
    with pytest.raises(DataError):
        post.samples("topic_word")  # the tight memory is in force
    blocks = list(post.draw_blocks("topic_word"))
    assert max(b.shape[0] for b in blocks) <= 5 and len(blocks) >= 2
    np.testing.assert_array_equal(np.concatenate(blocks), draws.reshape(-1, 3, 25))
    tight = post.summary(max_entries=1000)
    np.testing.assert_allclose(tight.drop(columns="kind").to_numpy(float), summary.drop(columns="kind").to_numpy(float),
                               rtol=1e-12, atol=1e-15)
    assert list(tight.index) == list(summary.index)
    np.testing.assert_allclose(post.summary().drop(columns="kind").to_numpy(float),
                               aggregate.drop(columns="kind").to_numpy(float), rtol=1e-12)
    np.testing.assert_allclose(word_relevance(post, 1).draws, relevance.draws, rtol=1e-12)
    np.testing.assert_allclose(word_importance(post).draws, importance.draws, rtol=1e-12, atol=1e-300)


def test_draw_blocks_of_stored_draws_and_of_a_point() -> None:
    model = latentfs.DirichletDCA(2, alpha=0.5)
    X = model.simulate(n_documents=20, n_features=8, doc_length=30, seed=0)["counts"]
    gibbs = latentfs.fit(model, X, method="gibbs", seed=0, num_warmup=5, num_samples=4, warn=False)
    assert not isinstance(gibbs._draws["topic_word"], CountStateDraws)
    blocks = list(gibbs.draw_blocks("topic_word", max_bytes=3 * 2 * 8 * 8))
    assert [b.shape[0] for b in blocks] == [3, 3, 2]
    np.testing.assert_array_equal(np.concatenate(blocks), gibbs.samples("topic_word").reshape(-1, 2, 8))
    em = latentfs.fit(model, X, method="map", seed=0, warn=False)
    (point,) = list(em.draw_blocks("topic_word"))
    assert point.shape == (1, 2, 8)
    with pytest.raises(DataError, match="max_bytes must be a positive number of bytes; got 0"):
        next(em.draw_blocks("topic_word", max_bytes=0))


def test_the_memory_message_names_only_the_users_sites(monkeypatch) -> None:
    """The check before a long fit lists the sites' sizes; the sampler's internal per-draw seed is counted but
    not named."""
    model = latentfs.DirichletDCA(3, alpha=0.5)
    X = model.simulate(n_documents=40, n_features=25, doc_length=30, seed=4)["counts"]
    with pytest.raises(DataError, match="memory budget") as err:
        latentfs.fit(model, X, method="collapsed_gibbs", seed=0, num_warmup=5, num_samples=100, memory_budget=100_000,
                     warn=False)
    assert "topic_word" in str(err.value) and "_topic_word_seed" not in str(err.value)


def test_topic_summary_bands_come_from_the_draws_read_in_blocks(monkeypatch) -> None:
    """The plot's bands are the draws' quantiles at the drawn words, the same under a tight memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from latentfs import plots

    post = _fit("collapsed_gibbs")
    draws = post.samples("topic_word").reshape(-1, 3, 25)
    _tight(monkeypatch, post, 5)
    fig = plots.topic_summary(post, n_words=4)
    for k, ax in enumerate(fig.axes):
        segments = ax.collections[0].get_segments()  # one horizontal bar per word, bottom to top
        top = np.argsort(-post.mean("topic_word")[k], kind="stable")[:4][::-1]
        lo, hi = np.quantile(draws[:, k, top], [0.05, 0.95], axis=0)
        np.testing.assert_allclose([s[0][0] for s in segments], lo, rtol=1e-12)
        np.testing.assert_allclose([s[1][0] for s in segments], hi, rtol=1e-12)
    plt.close(fig)
