"""The shared result type and drivers: shapes, save/load, interruption, alignment, ArviZ export."""

import warnings

import numpy as np
import pytest
import torch

import latentfs
from latentfs import DataError, InterruptedFitWarning
from latentfs.core.driver import ConvergenceWarning, run_optimizer, run_sampler
from latentfs.core.results import Posterior, split_rhat


@pytest.fixture(scope="module")
def corpus():
    return latentfs.DirichletDCA(3, alpha=0.3, gamma=0.2).simulate(60, 25, doc_length=40, seed=1)


@pytest.fixture(scope="module")
def vb_result(corpus):
    return latentfs.fit(latentfs.DirichletDCA(3, alpha=0.3), corpus["counts"], method="vb", seed=0, tol=1e-6)


@pytest.fixture(scope="module")
def gibbs_result(corpus):
    return latentfs.fit(
        latentfs.DirichletDCA(3, alpha=0.3), corpus["counts"], method="gibbs", seed=0,
        num_chains=2, num_warmup=60, num_samples=40, warn=False,  # short chains: shapes, not convergence
        store=("topic_word", "doc_topic"),
    )


def test_samples_are_shaped_chain_draw_site_for_every_engine(vb_result, gibbs_result):
    assert vb_result.samples("topic_word").shape == (1, 200, 3, 25)
    assert vb_result.samples("doc_topic", 7).shape == (1, 7, 60, 3)
    assert gibbs_result.samples("topic_word").shape == (2, 40, 3, 25)
    assert gibbs_result.samples("doc_topic").shape == (2, 40, 60, 3)
    assert np.allclose(vb_result.samples("topic_word", 50).sum(-1), 1.0)
    # The mean of q(Θ) under the chapter's rule is the chapter's Θ estimate.
    assert np.allclose(vb_result.mean("topic_word").sum(-1), 1.0)
    with pytest.raises(DataError, match=r"site must be one of \['doc_topic', 'topic_word'\]; got 'theta'"):
        vb_result.samples("theta")


@pytest.mark.parametrize("which", ["vb", "gibbs"])
def test_save_and_load_roundtrip_identically(which, vb_result, gibbs_result, tmp_path):
    result = vb_result if which == "vb" else gibbs_result
    path = result.save(tmp_path / "fit")
    assert path.suffix == ".npz"
    back = latentfs.load(path)
    assert back.model == result.model and back.method == result.method
    assert back.sites == result.sites
    for site in result.sites:
        assert np.array_equal(back.samples(site, 20, seed=3), result.samples(site, 20, seed=3))
    assert np.array_equal(back.trace, result.trace)
    assert np.array_equal(back.log_likelihood, result.log_likelihood)
    assert back.coords == result.coords and back.dims == result.dims
    assert back.alignment == result.alignment
    assert back.diagnostics == result.diagnostics
    for k, v in result.extras.items():
        assert np.array_equal(back.extras[k], v)


def test_load_rejects_foreign_files(tmp_path):
    np.savez(tmp_path / "other.npz", __meta__=np.array('{"format": "something"}'))
    with pytest.raises(DataError, match="is not a latentfs Posterior file"):
        latentfs.load(tmp_path / "other.npz")


def test_inference_data_has_named_dims_coords_and_loglik(gibbs_result, corpus):
    idata = gibbs_result.to_inference_data()
    post = idata.posterior
    assert post["topic_word"].dims == ("chain", "draw", "component", "feature")
    assert list(post.coords["feature"].values[:2]) == ["w0", "w1"]
    ll = idata.log_likelihood["counts"]
    assert ll.dims == ("chain", "draw", "document") and ll.shape == (2, 40, 60)
    assert "lp" in idata.sample_stats
    assert "latentfs_alignment" in post.attrs


def test_alignment_undoes_a_planted_label_switch():
    rng = np.random.default_rng(0)
    base = rng.dirichlet(np.ones(6), size=3)
    draws = np.stack([base + 0.001 * rng.normal(size=(500, 3, 6)) for _ in range(2)])
    draws[1] = draws[1][:, [2, 0, 1]]  # chain 1 labels its components differently
    post = Posterior(model="m", method="gibbs", dims={"topic_word": ("component", "feature")}, coords={},
                     trace=np.zeros((2, 500)), draws={"topic_word": draws})
    # rank-normalised R̂ saturates when chains do not overlap at all: 1.83 for two such chains
    assert np.nanmax(post.rhat("topic_word")) > 1.5
    post.align("topic_word")
    assert post.alignment["permutations"] == [[0, 1, 2], [1, 2, 0]]
    assert np.nanmax(post.rhat("topic_word")) < 1.1


def test_split_rhat_of_identical_chains_is_near_one_and_of_shifted_chains_large():
    rng = np.random.default_rng(1)
    same = rng.normal(size=(4, 500, 3))
    assert np.all(np.abs(split_rhat(same) - 1) < 0.02)
    shifted = same + np.arange(4)[:, None, None]
    assert np.all(split_rhat(shifted) > 1.5)


def test_optimizer_stops_on_tolerance_and_warns_when_it_cannot():
    run = run_optimizer(1.0, lambda s: (s / 2, 1 - s), max_iter=100, tol=1e-3, progress=False)
    assert run.converged and run.n_iter == 11  # f_t = 1 - 2^-t: |Δf| / |f| = 2^-t / (1 - 2^-t) first ≤ 1e-3 at t = 10
    with pytest.warns(ConvergenceWarning, match=r"did not converge in 3 iterations.*raise max_iter"):
        run = run_optimizer(1.0, lambda s: (s / 2, 1 - s), max_iter=3, tol=1e-12, progress=False)
    assert not run.converged and run.n_iter == 3


def test_optimizer_interrupt_returns_the_state_so_far():
    def step(s):
        if s == 5:
            raise KeyboardInterrupt
        return s + 1, -1.0 / (s + 1)

    with pytest.warns(InterruptedFitWarning, match="interrupted after 5 iterations"):
        run = run_optimizer(0, step, max_iter=100, tol=0.0, progress=False)
    assert run.interrupted and run.state == 5 and run.n_iter == 5


def test_sampler_interrupt_keeps_rectangular_draws():
    calls = {"n": 0}

    def step(state, gen):
        calls["n"] += 1
        if calls["n"] == 25:  # during chain 2
            raise KeyboardInterrupt
        return state + 1, float(state)

    with pytest.warns(InterruptedFitWarning, match=r"keeping 2 chain\(s\) × 4 draws"):
        run = run_sampler(lambda g: 0, step, lambda s: {"x": np.array(s)}, num_chains=3, num_warmup=5,
                          num_samples=10, seed=0, progress=False)
    assert run.draws["x"].shape == (2, 4) and run.interrupted


def test_fit_interrupted_mid_run_returns_a_usable_result(corpus):
    # Ctrl-C arrives during the fourth cycle (from the monitoring callback, so the test names no engine internals)
    calls = {"n": 0}

    def interrupt(it, state, value):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt

    with pytest.warns(InterruptedFitWarning):
        result = latentfs.fit(latentfs.DirichletDCA(3), corpus["counts"], method="vb", seed=0, callback=interrupt)
    assert result.diagnostics["interrupted"] and result.diagnostics["n_iter"] == 4  # the fourth cycle had finished when it came
    assert result.mean("topic_word").shape == (3, 25)
    assert np.isfinite(result.mean("topic_word")).all()


def test_same_seed_same_result_and_seeds_differ(corpus):
    model = latentfs.DirichletDCA(3, alpha=0.3)
    kw = dict(method="gibbs", num_chains=1, num_warmup=5, num_samples=5, log_likelihood=False)
    a = latentfs.fit(model, corpus["counts"], seed=4, **kw).samples("topic_word")
    b = latentfs.fit(model, corpus["counts"], seed=4, **kw).samples("topic_word")
    c = latentfs.fit(model, corpus["counts"], seed=5, **kw).samples("topic_word")
    assert np.array_equal(a, b) and not np.allclose(a, c)
    before = torch.get_rng_state()
    latentfs.fit(model, corpus["counts"], seed=6, **kw)
    assert torch.equal(before, torch.get_rng_state())  # fits leave the global RNG alone


def test_unknown_method_lists_the_available_ones(corpus):
    with pytest.raises(DataError, match=r"method must be one of \[.*'gibbs'.*'vb'.*\] for DirichletDCA; got 'magic'"):
        latentfs.fit(latentfs.DirichletDCA(2), corpus["counts"], method="magic")
    with pytest.raises(DataError, match=r"theta_update must be one of \['chapter', 'map', 'full'\]; got 'x'"):
        latentfs.fit(latentfs.DirichletDCA(2), corpus["counts"], method="vb", theta_update="x")
    with pytest.raises(DataError, match=r"num_samples must be an integer ≥ 1; got 0"):
        latentfs.fit(latentfs.DirichletDCA(2), corpus["counts"], method="gibbs", num_samples=0)
    with pytest.raises(DataError, match=r"store must name sites among"):
        latentfs.fit(latentfs.DirichletDCA(2), corpus["counts"], method="gibbs", store=("beta",))


def test_vb_restarts_keep_the_best_and_warm_start_continues(corpus):
    from latentfs.inference.dca.vb import state_from_posterior

    model = latentfs.DirichletDCA(3, alpha=0.3)
    best = latentfs.fit(model, corpus["counts"], method="vb", seed=0, n_init=3, tol=1e-6)
    objs = best.diagnostics["restart_objectives"]
    assert best.diagnostics["objective"] == max(objs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        short = latentfs.fit(model, corpus["counts"], method="vb", seed=0, max_iter=5, inner_iters=1, doc_restart=False)
    warm = latentfs.fit(model, corpus["counts"], method="vb", init=state_from_posterior(short), max_iter=500, tol=1e-6,
                        inner_iters=1, doc_restart=False)
    assert warm.trace[0, 0] >= short.trace[0, -1] - 1e-6 * abs(short.trace[0, -1])


def test_summary_has_rhat_for_samplers(gibbs_result):
    table = gibbs_result.summary(["topic_word"], max_entries=1000)
    assert len(table) == 75 and table["r_hat"].notna().all()
    compact = gibbs_result.summary(["doc_topic"], max_entries=10)
    assert len(compact) == 1


def test_chapter_schedule_never_decreases_and_options_are_checked(corpus):
    seen = []
    result = latentfs.fit(latentfs.DirichletDCA(3, alpha=0.3), corpus["counts"], method="vb", seed=0, tol=1e-9,
                          max_iter=300, inner_iters=1, doc_restart=False, callback=lambda i, s, v: seen.append(v))
    trace = result.trace[0]
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace).max())
    assert seen == trace.tolist()
    with pytest.raises(DataError, match="doc_restart must be True, False or None \\(automatic\\); got 'yes'"):
        latentfs.fit(latentfs.DirichletDCA(3), corpus["counts"], method="vb", doc_restart="yes")
    with pytest.raises(DataError, match=r"inner_iters must be an integer ≥ 1; got 0"):
        latentfs.fit(latentfs.DirichletDCA(3), corpus["counts"], method="vb", inner_iters=0)


# ----------------------------------------------------------------------------- relabelling cost (issue 19, item 3)
def test_relabel_memory_is_checked_against_a_budget():
    from latentfs.core.relabel import relabel_draws, relabel_memory

    # K = 1000, V = 2000: a K × K × V array would be 14.9 GiB; the working memory is 0.05 GiB, and the cache
    # of cross products 8 MiB per draw.
    assert relabel_memory(1000, 2000) < 2**30 / 16
    assert relabel_memory(1000, 2000, 10) - relabel_memory(1000, 2000) == 10 * 8 * (1000**2 + 5 * 1000)
    rng = np.random.default_rng(1)
    x = rng.random((2, 5, 6, 40))
    with pytest.raises(DataError, match="relabelling draws of 6 components × 40 entries needs .* memory_budget"):
        relabel_draws(x, memory_budget=1000)
    # A budget without room for the cache recomputes every product: the same permutations.
    small = relabel_memory(6, 40) + 8 * 10 * 5 * 6
    assert small < relabel_memory(6, 40, 10)
    np.testing.assert_array_equal(relabel_draws(x, memory_budget=small)[0], relabel_draws(x)[0])


def _stephens_full(x: np.ndarray, max_iter: int = 20) -> np.ndarray:
    """Stephens' relabelling with every cost recomputed at every iteration (the textbook form)."""
    from scipy.optimize import linear_sum_assignment

    c, d, k = x.shape[:3]
    flat = x.reshape(c * d, k, -1)
    perms = np.tile(np.arange(k), (c * d, 1))
    pivot = flat[d - 1].copy()
    for it in range(1, max_iter + 1):
        new = np.empty_like(perms)
        for i, draw in enumerate(flat):
            cost = ((pivot[:, None, :] - draw[None, :, :]) ** 2).sum(-1)
            rows, cols = linear_sum_assignment(cost)
            new[i, rows] = cols
        changed = not np.array_equal(new, perms)
        perms = new
        pivot = np.mean([draw[p] for draw, p in zip(flat, perms, strict=True)], axis=0)
        if not changed and it > 1:
            break
    return perms.reshape(c, d, k)


def test_relabel_draws_keeps_the_permutations_of_recomputing_every_cost():
    # Later iterations multiply only the pivot rows that moved; the permutations must be those of the textbook
    # algorithm. 12 components, half of them nearly empty (noise rows that keep swapping for a few iterations),
    # 3 chains of 30 draws, each draw in a random labelling.
    from latentfs.core.relabel import relabel_draws

    rng = np.random.default_rng(3)
    k, v = 12, 30
    centres = rng.dirichlet(np.full(v, 0.3), size=k)
    centres[6:] = 1.0 / v
    x = np.empty((3, 30, k, v))
    for c in range(3):
        for d in range(30):
            draw = centres + rng.normal(scale=0.01, size=(k, v))
            x[c, d] = draw[rng.permutation(k)]
    expected = _stephens_full(x)
    perms, iterations = relabel_draws(x)
    assert iterations > 2  # the noise rows moved after the second iteration: the partial update ran
    np.testing.assert_array_equal(perms, expected)
    # One labelling at the end: every relabelled draw is near the first (a draw left unaligned would not be).
    aligned = np.take_along_axis(x, perms[..., None], axis=2)
    assert np.abs(aligned - aligned[0, 0]).max() < 0.1


def test_split_rhat_in_blocks_equals_the_textbook_formula_and_apply_permutations_in_place():
    # issue 15 memory: split-R̂ is computed over blocks of entries and draws are permuted one at a time (a
    # default collapsed fit peaked at 915 MiB for 190 MiB of Θ draws; now 402 MiB)
    from latentfs.core.relabel import apply_draw_permutations

    rng = np.random.default_rng(0)
    draws = rng.normal(size=(2, 20, 3, 40000))  # 120,000 entries: three blocks
    draws[1] += 0.3 * rng.normal(size=(1, 3, 40000))  # chains that disagree a little
    x = np.concatenate([draws[:, :10], draws[:, 10:]], axis=0)
    within = x.var(axis=1, ddof=1).mean(axis=0)
    between = 10 * x.mean(axis=1).var(axis=0, ddof=1)
    np.testing.assert_allclose(split_rhat(draws), np.sqrt((9 / 10 * within + between / 10) / within), rtol=1e-12)
    perms = np.stack([rng.permutation(3) for _ in range(40)]).reshape(2, 20, 3)
    expected = np.take_along_axis(draws, perms[..., None], axis=2)
    copied = apply_draw_permutations(draws, perms, 0)
    np.testing.assert_array_equal(copied, expected)
    assert not np.array_equal(copied, draws)  # the input was left alone
    assert apply_draw_permutations(draws, perms, 0, in_place=True) is draws
    np.testing.assert_array_equal(draws, expected)


def test_a_run_over_a_stream_ends_with_the_stream_and_has_no_stopping_rule():
    # issue 30: online engines step once per mini-batch; the run ends when the stream does (StreamEnd), records
    # converged=None (there is no stopping rule) and never warns; a StopIteration from the arithmetic is not
    # mistaken for the end of the data
    import warnings as _w

    from latentfs.core.driver import StreamEnd, run_optimizer

    batches = iter([1.0, 2.0, 3.0])

    def step(state):
        b = next(batches, None)
        if b is None:
            raise StreamEnd
        return state + b, -b

    with _w.catch_warnings():
        _w.simplefilter("error")
        run = run_optimizer(0.0, step, max_iter=None, tol=None, progress=False)
    assert run.n_iter == 3 and run.converged is None and run.state == 6.0 and not run.interrupted

    def leaky(state):
        raise StopIteration

    with pytest.raises(StopIteration):  # propagates: not taken as the stream's end
        run_optimizer(0.0, leaky, max_iter=None, tol=None, progress=False)


def test_online_vb_over_one_batch_runs_one_step():
    import latentfs

    X = latentfs.DirichletDCA(2, alpha=0.5).simulate(40, 12, doc_length=30, seed=0)["counts"]
    post = latentfs.fit(latentfs.DirichletDCA(2), iter([X]), method="online_vb", total_documents=40)
    assert post.diagnostics["converged"] is None and post.diagnostics["n_iter"] == 1
    assert post.trace.shape[-1] == 1
