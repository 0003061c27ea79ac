"""The collapsed samplers keep ``topic_word`` as count states, not Θ draws (issue 35, item 2).

A kept sweep keeps the tokens' components and the seed of its Θ ~ Dirichlet(γ + N) draw; Θ is drawn on demand.
These tests check what a user relies on: the count state is the sampler's own state at that sweep, the draws
made on demand are the same every time and after a save and load, relabelling works on count states, the
posterior mean is the Rao-Blackwellised one, and the memory kept does not grow with K × J per draw.
"""

from __future__ import annotations

import numpy as np
import pytest

import latentfs
from latentfs.core.count_draws import CountStateDraws, assignment_dtype
from latentfs.core.data import DataError
from latentfs.core.results import Posterior

SAMPLERS = ("collapsed_gibbs", "mh")


def _corpus(seed: int = 1) -> tuple[latentfs.DirichletDCA, np.ndarray]:
    model = latentfs.DirichletDCA(4, alpha=0.5)
    return model, model.simulate(n_documents=60, n_features=30, doc_length=40, seed=seed)["counts"]


@pytest.mark.parametrize("method", SAMPLERS)
def test_the_count_state_is_the_samplers_state_at_the_kept_sweep(method: str) -> None:
    """With one kept sweep and no relabelling, N rebuilt from the kept assignments gives exactly the chain's own
    running outputs at that sweep: the components' token totals exactly, and E[Θ | N] = (γ + N) / rows."""
    model, X = _corpus()
    post = latentfs.fit(model, X, method=method, seed=0, num_warmup=15, num_samples=1, align=False, warn=False)
    site = post._draws["topic_word"]
    assert isinstance(site, CountStateDraws)
    assert site.assignments.dtype == np.uint8
    gamma = post.hyperparameters["gamma"]
    for c in range(2):
        n = site.counts(c, 0)
        np.testing.assert_array_equal(n.sum(0), X.sum(0))  # every token of every word, once
        np.testing.assert_array_equal(n.sum(1), post.extras["component_counts"][c].sum(0))
        conc = n + site.prior[c][None, :]
        # (the row sums are added in another order than the sampler's: equal to rounding)
        np.testing.assert_allclose(conc / conc.sum(1, keepdims=True), post.extras["topic_word_mean"][c], rtol=1e-13)
    if method == "collapsed_gibbs":  # γ learned: each chain's prior is its learned γ; the result reports their mean
        assert np.isclose(site.prior[:, 0].mean(), gamma)


@pytest.mark.parametrize("method", SAMPLERS)
def test_draws_are_made_the_same_every_time_and_survive_save_and_load(method: str, tmp_path) -> None:
    model, X = _corpus(2)
    post = latentfs.fit(model, X, method=method, seed=3, num_warmup=10, num_samples=12, warn=False)
    first, again = post.samples("topic_word"), post.samples("topic_word")
    assert first.shape == (2, 12, 4, 30)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first.sum(-1), 1.0, rtol=1e-12)
    loaded = Posterior.load(post.save(tmp_path / "fit"))
    assert isinstance(loaded._draws["topic_word"], CountStateDraws)
    np.testing.assert_array_equal(loaded.samples("topic_word"), first)
    np.testing.assert_array_equal(loaded.mean("topic_word"), post.mean("topic_word"))
    np.testing.assert_array_equal(loaded.rhat("topic_word"), post.rhat("topic_word"))
    idata = loaded.to_inference_data()
    np.testing.assert_array_equal(idata.posterior["topic_word"].values, first)


def test_the_posterior_mean_is_rao_blackwellised() -> None:
    """``mean`` averages E[Θ | N] over the kept count states; with no label switch within a chain it equals the
    chains' Rao-Blackwellised running means (``extras["topic_word_mean"]``) to rounding, and it is nearer the
    planted Θ than the average of the Θ draws is, on average over entries."""
    model, X = _corpus(4)
    post = latentfs.fit(model, X, method="collapsed_gibbs", seed=5, num_warmup=40, num_samples=30, warn=False)
    assert max(post.alignment["switch_share"]) == 0.0
    np.testing.assert_allclose(post.mean("topic_word"), post.extras["topic_word_mean"], rtol=1e-12, atol=1e-15)
    draws_mean = post.samples("topic_word").mean(axis=(0, 1))
    # the two estimate the same E[Θ | data]: they differ by the draws' Dirichlet noise averaged over 60 draws
    assert np.abs(draws_mean - post.mean("topic_word")).max() < 0.05


def test_relabelling_count_states_undoes_a_label_switch() -> None:
    """Draws whose labels were swapped (the same state under another labelling) are matched back on E[Θ | N]:
    after ``align`` every draw's state is in one labelling, without the draws being made all at once."""
    rng = np.random.default_rng(0)
    K, J, S = 3, 12, 600
    words = rng.integers(0, J, S)
    base = np.where(words < 4, 0, np.where(words < 8, 1, 2)).astype(np.uint8)  # three clean topics
    z = np.stack([np.stack([base] * 6)] * 2)  # (chain, draw, S)
    swapped = z.copy()
    perm = np.array([2, 0, 1], dtype=np.uint8)
    swapped[0, 1::2] = perm[base]  # every other draw of chain 0 in another labelling
    seeds = np.arange(12, dtype=np.int64).reshape(2, 6)
    prior = np.full((2, J), 0.1)

    def posterior(assign: np.ndarray) -> Posterior:
        site = CountStateDraws(words, assign, seeds, prior, K)
        return Posterior(model="DirichletDCA", method="collapsed_gibbs", dims={"topic_word": ("component", "word")},
                         coords={}, trace=np.zeros((2, 6)), draws={"topic_word": site})

    switched = posterior(swapped)
    site = switched._draws["topic_word"]
    first = site.conditional_mean(0, 0)
    assert not np.array_equal(site.conditional_mean(0, 1), first)
    switched.align("topic_word", "component", warn=False)
    # one labelling for every draw (which one is arbitrary): the same state gives the same E[Θ | N] everywhere
    reference = site.conditional_mean(0, 0)
    assert np.array_equal(np.sort(reference, axis=0), np.sort(first, axis=0))
    for c in range(2):
        for d in range(6):
            np.testing.assert_array_equal(site.conditional_mean(c, d), reference)
    assert switched.alignment["switch_share"][0] == pytest.approx(0.5)
    assert switched.alignment["switch_share"][1] == 0.0
    # a draw is Dirichlet(γ + N) in the relabelled labels: its rows sum to one and follow its state's rows
    theta = switched.samples("topic_word")
    np.testing.assert_allclose(theta.sum(-1), 1.0, rtol=1e-12)
    assert (np.argmax(theta, axis=2) == np.argmax(reference, axis=0)[None, None]).mean() > 0.9


def test_memory_kept_does_not_grow_with_the_vocabulary_per_draw() -> None:
    """One byte a token a draw for K ≤ 256 against K × J × 8 bytes a draw for the values: on this corpus (2,400
    tokens, K = 4, J = 30) the values would take 960 bytes a draw against 2,400; at K = 200 and J = 60,000 they
    take 96 MB a draw. The kept bytes are the assignments, their seeds and the tokens' words."""
    model, X = _corpus()
    post = latentfs.fit(model, X, method="collapsed_gibbs", seed=0, num_warmup=5, num_samples=8, warn=False)
    site = post._draws["topic_word"]
    tokens = int(X.sum())
    assert site.assignments.nbytes == 2 * 8 * tokens
    assert site.features.dtype == np.int32  # the sampler's token words, not copied to a wider type
    assert site.nbytes == site.assignments.nbytes + site.seeds.nbytes + site.prior.nbytes + 4 * tokens + \
        site.permutations.nbytes
    assert assignment_dtype(256) == np.uint8 and assignment_dtype(257) == np.uint16
    assert assignment_dtype(70_000) == np.uint32


def test_a_file_with_inconsistent_count_states_is_refused(tmp_path) -> None:
    model, X = _corpus()
    post = latentfs.fit(model, X, method="collapsed_gibbs", seed=0, num_warmup=5, num_samples=4, warn=False)
    path = post.save(tmp_path / "fit")
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["countdraws/topic_word/assignments"] = arrays["countdraws/topic_word/assignments"] + np.uint8(9)
    bad = tmp_path / "bad.npz"
    np.savez_compressed(bad, **arrays)
    with pytest.raises(DataError, match="count states of site 'topic_word' do not fit together"):
        Posterior.load(bad)
    del arrays["countdraws/topic_word/seeds"]
    np.savez_compressed(bad, **arrays)
    with pytest.raises(DataError, match="count states of site 'topic_word'"):
        Posterior.load(bad)


def test_the_matching_read_from_the_tokens_equals_the_dense_conditional_means() -> None:
    """Relabelling reads each draw's E[Θ | N] from its tokens (products with pivot rows, row norms, sums of chosen
    rows), never as a K × J array: the same numbers as the dense rows, in the relabelled order, to rounding."""
    model, X = _corpus(3)
    post = latentfs.fit(model, X, method="collapsed_gibbs", seed=1, num_warmup=10, num_samples=6, align=False,
                        warn=False)
    site = post._draws["topic_word"]
    rng = np.random.default_rng(0)
    site.permute(np.array([[rng.permutation(4) for _ in range(6)] for _ in range(2)]))
    rows = site.matching_rows()
    dense = rows[0:12]  # (chain·draw, K, J), relabelled
    part = rng.random((3, 30))
    np.testing.assert_allclose(rows.products(part, 2, 9), np.einsum("mj,nkj->nmk", part, dense[2:9]), rtol=1e-12)
    np.testing.assert_allclose(rows.sq_norms(0, 12), (dense**2).sum(-1), rtol=1e-12)
    chosen = np.array([rng.permutation(4)[:2] for _ in range(12)])  # distinct rows a draw, as relabelling asks
    np.testing.assert_allclose(rows.row_sums(chosen, 0, 12), dense[np.arange(12)[:, None], chosen].sum(0),
                               rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_relabelling_count_states_equals_relabelling_their_conditional_means(seed: int) -> None:
    """On a corpus whose components are distinct, the permutations found from the tokens are those found from the
    dense E[Θ | N] arrays (the two differ only in the rounding of the products)."""
    from latentfs.core.relabel import relabel_draws

    model = latentfs.DirichletDCA(6, alpha=0.1, gamma=0.05)
    X = model.simulate(n_documents=300, n_features=200, doc_length=80, seed=seed)["counts"]
    post = latentfs.fit(latentfs.DirichletDCA(6), X, method="collapsed_gibbs", seed=seed, num_warmup=30,
                        num_samples=15, align=False, warn=False)
    site = post._draws["topic_word"]
    dense = np.asarray(site.matching_rows()[0:30]).reshape(2, 15, 6, 200)
    perms, _ = relabel_draws(site)
    np.testing.assert_array_equal(perms, relabel_draws(dense)[0])
