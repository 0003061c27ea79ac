"""The shared trust mechanisms of core/: per-draw relabelling, convergence warnings, points shown as points,
symmetric save/load, option checking and the memory estimate before sampling (issue 12)."""

import warnings

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core.data import DataError
from latentfs.core.driver import ConvergenceWarning, run_sampler
from latentfs.core.relabel import relabel_draws
from latentfs.core.results import Posterior


def _switching_chains(rng, switch_share=0.2, n=400):
    """Two chains of draws around one (3 × 6) truth; chain 0 spends ``switch_share`` of its draws in a
    swapped labelling, chain 1 is entirely in another labelling."""
    truth = rng.dirichlet(np.ones(6), size=3)
    draws = np.empty((2, n, 3, 6))
    for c in range(2):
        for d in range(n):
            x = truth + 0.002 * rng.normal(size=truth.shape)
            if c == 0 and rng.random() < switch_share:
                x = x[[1, 0, 2]]
            if c == 1:
                x = x[[2, 0, 1]]
            draws[c, d] = x
    return truth, draws


def test_within_chain_switching_is_relabelled_per_draw(rng):
    truth, draws = _switching_chains(rng)
    post = Posterior(model="m", method="gibbs", dims={"topic_word": ("component", "feature")}, coords={},
                     trace=np.zeros((2, 400)), draws={"topic_word": draws.copy()})
    # Before: one permutation per chain cannot undo the switches inside chain 0.
    mixed_error = np.abs(draws.mean(axis=(0, 1)) - truth).max()
    assert mixed_error > 0.05
    post.align("topic_word")
    means = post.mean("topic_word")
    # The labelling of the result is arbitrary: compare after matching to the truth.
    from latentfs.core.relabel import matching_permutation

    perm, _ = matching_permutation(truth, means)
    assert np.abs(means[perm] - truth).max() < 0.01
    # Every draw is now close to the relabelled mean (no draw left in another labelling).
    assert np.abs(post.samples("topic_word") - means).max() < 0.02
    assert 0.1 < post.alignment["switch_share"][0] < 0.3
    assert post.relabel_permutations.shape == (2, 400, 3)


def test_relabel_memory_is_per_draw_not_k_squared_v():
    # K = 300 components of V = 2000 features: a K × K × V cost array would need 1.3 GiB.
    rng = np.random.default_rng(1)
    x = rng.random((1, 2, 300, 2000))
    perms, _ = relabel_draws(x)
    assert perms.shape == (1, 2, 300)


def test_chain_extras_follow_the_chain_permutation(rng):
    truth, draws = _switching_chains(rng, switch_share=0.0)
    counts = np.stack([np.array([10.0, 20.0, 30.0]), np.array([10.0, 20.0, 30.0])[[2, 0, 1]]])
    post = Posterior(model="m", method="gibbs", dims={"topic_word": ("component", "feature")}, coords={},
                     trace=np.zeros((2, 400)), draws={"topic_word": draws}, extras={"component_counts": counts})
    post.align("topic_word", chain_extras={"component_counts": 0})
    np.testing.assert_array_equal(post.extras["component_counts"][0], post.extras["component_counts"][1])


def test_chain_extras_warn_when_a_chain_switches(rng):
    _, draws = _switching_chains(rng, switch_share=0.3)
    post = Posterior(model="m", method="gibbs", dims={"topic_word": ("component", "feature")}, coords={},
                     trace=np.zeros((2, 400)), draws={"topic_word": draws}, extras={"c": np.ones((2, 3))})
    with pytest.warns(ConvergenceWarning, match=r"labels switched within a chain .* mix components"):
        post.align("topic_word", chain_extras={"c": 0})


def test_check_convergence_warns_on_chains_that_disagree(rng):
    draws = np.stack([rng.normal(0, 1, (300, 4)), rng.normal(3, 1, (300, 4))])
    post = Posterior(model="m", method="gibbs", dims={"mu": ("feature",)}, coords={},
                     trace=np.zeros((2, 300)), draws={"mu": draws})
    # each chain is stationary, in its own mode: the remedy is not a longer warm-up
    with pytest.warns(ConvergenceWarning, match=r"site 'mu' has not converged \(max R̂ [0-9.]+ > 1.01 at mu\[\d\].*"
                                                r"they sit in different modes"):
        out = post.check_convergence()
    assert out["mu"]["r_hat_max"] > 1.5
    assert post.diagnostics["convergence"]["mu"]["entries_checked"] == 4


def test_check_convergence_is_quiet_on_independent_draws(rng):
    # Independent N(0, 1) draws: rank-normalised R̂ of 4 entries exceeds 1.01 with probability well below
    # 1e-3 at 2 × 2000 draws (its sd is about 0.004 here); the seed is fixed.
    draws = rng.normal(size=(2, 2000, 4))
    post = Posterior(model="m", method="gibbs", dims={"mu": ("feature",)}, coords={},
                     trace=np.zeros((2, 2000)), draws={"mu": draws})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = post.check_convergence()
    assert out["mu"]["r_hat_max"] < 1.01 and out["mu"]["ess_bulk_min"] > 1000


def test_check_convergence_equals_arviz_on_a_dataset(rng):
    # The check hands ArviZ one (chain, draw) array per entry; ArviZ's Dataset route must give the same
    # numbers (an AR(1) pair of chains with an offset, so R̂ and both ESS are far from their ideal values).
    import arviz as az

    e = rng.normal(size=(2, 300, 5))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]
    for t in range(1, 300):
        x[:, t] = 0.9 * x[:, t - 1] + e[:, t]
    x[1] += 0.5
    post = Posterior(model="m", method="gibbs", dims={"mu": ("feature",)}, coords={},
                     trace=np.zeros((2, 300)), draws={"mu": x})
    out = post.check_convergence(warn=False)["mu"]
    ds = az.convert_to_dataset({"mu": x})
    was_on = bool(az.Numba.numba_flag)
    az.Numba.disable_numba()  # the check uses ArviZ's numpy paths
    try:
        want = (float(az.rhat(ds, method="rank")["mu"].max()), float(az.ess(ds, method="bulk")["mu"].min()),
                float(az.ess(ds, method="tail")["mu"].min()))
    finally:
        if was_on:
            az.Numba.enable_numba()
    assert (out["r_hat_max"], out["ess_bulk_min"], out["ess_tail_min"]) == pytest.approx(want, rel=1e-12)
    assert out["r_hat_max"] > 1.01 and out["ess_bulk_min"] < 100


def test_point_estimates_are_points_not_distributions():
    model = latentfs.DirichletDCA(2)
    X = model.simulate(n_documents=30, n_features=12, doc_length=40, seed=0)["counts"]
    post = latentfs.fit(model, X, method="map", seed=0, max_iter=50, warn=False)
    assert post.kind() == "point"
    assert post.samples("topic_word").shape == (1, 1, 2, 12)
    table = post.summary(["topic_word"])
    assert table["sd"].isna().all() and table.filter(like="q").isna().all().all()
    assert set(table["kind"]) == {"point"}
    assert post.to_inference_data().posterior.attrs["latentfs_kind"] == "point"
    weights = latentfs.word_importance(post)
    assert weights.draws is None
    with pytest.raises(DataError, match="band needs draws"):
        weights.band()


def test_save_and_load_are_symmetric_in_the_path(tmp_path):
    post = Posterior(model="m", method="vb", dims={"w": ("feature",)}, coords={}, trace=np.zeros((1, 3)),
                     fitted={"w": {"family": "point", "value": np.arange(3.0)}})
    written = post.save(tmp_path / "fit")
    assert written.name == "fit.npz"
    back = latentfs.load(tmp_path / "fit")
    np.testing.assert_array_equal(back.mean("w"), np.arange(3.0))
    with pytest.raises(DataError, match="does not exist"):
        latentfs.load(tmp_path / "missing")


def test_unknown_engine_options_are_named_with_the_valid_ones():
    X = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(DataError, match=r"options \['max_iters'\] are not options of method 'em' for GaussianMixture; "
                                        r"valid options: \[.*'max_iter'.*\]\. Did you mean 'max_iter'"):
        latentfs.fit(latentfs.GaussianMixture(2), X, method="em", max_iters=3)
    with pytest.raises(DataError, match=r"model must be a model instance, not the class GaussianMixture"):
        latentfs.fit(latentfs.GaussianMixture, X)


def test_sampler_refuses_draws_over_the_memory_budget():
    def init(gen):
        return torch.zeros(1000)

    def step(state, gen):
        return state, 0.0

    with pytest.raises(DataError, match=r"the requested draws need .* over the memory budget .* thin the chains"):
        run_sampler(init, step, lambda s: {"x": s.numpy()}, num_chains=2, num_warmup=0, num_samples=1000,
                    memory_budget=1e6, progress=False)
    run = run_sampler(init, step, lambda s: {"x": s.numpy()}, num_chains=2, num_warmup=0, num_samples=10,
                      memory_budget=1e6, progress=False)
    assert run.draws["x"].shape == (2, 10, 1000)


def _saved(tmp_path):
    post = Posterior(model="m", method="gibbs", dims={"w": ("component",)}, coords={}, trace=np.zeros((2, 5)),
                     draws={"w": np.random.default_rng(0).random((2, 5, 3))})
    return post.save(tmp_path / "ok.npz")


@pytest.mark.parametrize("damage", ["truncated", "bitflip", "empty", "random", "directory", "pickle", "json_list"])
def test_load_refuses_every_damaged_file_with_one_clear_error(tmp_path, damage):
    import pickle
    import zipfile

    good = _saved(tmp_path).read_bytes()
    bad = tmp_path / f"{damage}.npz"
    if damage == "truncated":
        bad.write_bytes(good[: len(good) // 2])
    elif damage == "bitflip":
        flipped = bytearray(good)
        for i in range(60, len(flipped) - 200, 97):
            flipped[i] ^= 0xFF
        bad.write_bytes(bytes(flipped))
    elif damage == "empty":
        bad.write_bytes(b"")
    elif damage == "random":
        bad.write_bytes(np.random.default_rng(0).bytes(4096))
    elif damage == "directory":
        bad.mkdir()
    elif damage == "pickle":
        np.savez(bad, __meta__=np.array([{"format": "x"}], dtype=object), allow_pickle=True)
        assert pickle  # an object array needs pickle to load: load must refuse, never unpickle
    elif damage == "json_list":
        with zipfile.ZipFile(bad, "w") as z:
            with z.open("__meta__.npy", "w") as f:
                np.lib.format.write_array(f, np.array("[1, 2]"))
    with pytest.raises(DataError, match=r"(not a readable latentfs Posterior file|not a latentfs Posterior file|"
                                        r"is a directory)"):
        latentfs.load(bad)


def test_load_checks_the_inflated_size_before_inflating(tmp_path):
    path = _saved(tmp_path)
    with pytest.raises(DataError, match=r"would inflate to .* over the limit"):
        latentfs.load(path, max_bytes=10)


def test_load_refuses_sites_that_disagree_on_chains(tmp_path):
    post = Posterior(model="m", method="gibbs", dims={}, coords={}, trace=np.zeros((2, 5)),
                     draws={"a": np.zeros((2, 5, 3)), "b": np.zeros((3, 5, 3))})
    path = post.save(tmp_path / "odd.npz")
    with pytest.raises(DataError, match=r"sites disagree on \(chains, draws\)"):
        latentfs.load(path)


@pytest.mark.parametrize("family", ["dca_vb", "mixture_em"])
def test_ctrl_c_ends_every_restart_not_just_the_current_one(family):
    """Ctrl-C during the second of five starts returns the best of the starts so far, flagged, and the
    remaining starts never begin."""
    from latentfs.core.driver import InterruptedFitWarning

    calls = {"starts": 0, "iters": 0}

    def callback(it, state, value):
        if it == 0:
            calls["starts"] += 1
        calls["iters"] += 1
        if calls["starts"] == 2 and it == 1:
            raise KeyboardInterrupt

    if family == "dca_vb":
        model = latentfs.DirichletDCA(2)
        X = model.simulate(n_documents=40, n_features=15, doc_length=40, seed=0)["counts"]
        with pytest.warns(InterruptedFitWarning, match="interrupted"):
            post = latentfs.fit(model, X, method="vb", seed=0, n_init=5, callback=callback)
        assert len(post.diagnostics["restart_objectives"]) == 2
    else:
        rng = np.random.default_rng(0)
        X = np.concatenate([rng.normal(0, 1, (60, 2)), rng.normal(5, 1, (60, 2))])
        with pytest.warns(InterruptedFitWarning, match="interrupted"):
            latentfs.fit(latentfs.GaussianMixture(2), X, method="em", seed=0, n_init=5, short_iter=0,
                         callback=callback)
    assert calls["starts"] == 2


def test_one_site_name_is_one_site_not_its_characters():
    model = latentfs.DirichletDCA(2)
    X = model.simulate(n_documents=20, n_features=8, doc_length=30, seed=0)["counts"]
    result = latentfs.fit(model, X, method="vb", seed=0, warn=False)
    table = result.summary(sites="topic_word")
    assert len(table) == 2 * 8  # every entry of topic_word, nothing else
    with pytest.raises(DataError, match=r"sites must name sites of this result.*'nope'.*Pass one name or a list"):
        result.summary(sites=["nope"])


def test_result_methods_check_their_options():
    model = latentfs.DirichletDCA(2)
    X = model.simulate(n_documents=20, n_features=8, doc_length=30, seed=0)["counts"]
    result = latentfs.fit(model, X, method="vb", seed=0, warn=False)
    with pytest.raises(DataError, match=r"seed"):
        result.samples("topic_word", seed=-1)
    with pytest.raises(DataError, match=r"seed"):
        result.samples("topic_word", seed="abc")
    with pytest.raises(DataError, match=r"max_entries must be an integer ≥ 1; got -1"):
        result.summary(max_entries=-1)
    # the default seed still gives the same draws as before (numpy's default_rng(0))
    assert np.array_equal(result.samples("topic_word", 5), result.samples("topic_word", 5, seed=0))


def test_load_refuses_a_zip_bomb_without_inflating_it(tmp_path):
    """A small file that declares a huge member (here 320 MiB of zeros deflated to ~0.3 MiB) is refused
    from its directory, before anything is read, with the default limit."""
    import zipfile

    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("__meta__.npy", "w") as f:
            np.lib.format.write_array(f, np.asarray('{"format": "x"}'))
        with archive.open("trace.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (40 * 2**20,)})
            chunk = bytes(2**20)
            for _ in range(320):
                f.write(chunk)
    assert path.stat().st_size < 2**21
    with pytest.raises(DataError, match=r"would inflate to 0.31 GiB, over the limit"):
        latentfs.load(path)


@pytest.mark.parametrize("method", ["gibbs", "collapsed_gibbs"])
def test_load_refuses_draws_whose_shape_disagrees_with_their_labels(tmp_path, method):
    model = latentfs.DirichletDCA(2)
    X = model.simulate(n_documents=20, n_features=8, doc_length=30, seed=0)["counts"]
    result = latentfs.fit(model, X, method=method, seed=0, num_warmup=10, num_samples=10, warn=False)
    path = tmp_path / "fit.npz"
    result.save(path)
    with np.load(path, allow_pickle=False) as f:
        members = {k: f[k] for k in f.files}
    if method == "gibbs":
        members["draws/topic_word"] = members["draws/topic_word"][..., :5]
    else:  # count states (Θ drawn on demand) made consistent with 5 words: still not the 8 labels
        members["countdraws/topic_word/prior"] = members["countdraws/topic_word/prior"][:, :5]
        members["countdraws/topic_word/features"] = members["countdraws/topic_word/features"] % 5
    np.savez(path, **members)
    with pytest.raises(DataError, match=r"inconsistent: site .topic_word. has shape \(2, 5\) \(per draw\)"):
        latentfs.load(path)


@pytest.mark.parametrize("method", ["vb", "gibbs", "collapsed_gibbs"])
def test_a_numpy_generator_seeds_every_engine_reproducibly(method):
    model = latentfs.DirichletDCA(2)
    X = model.simulate(n_documents=20, n_features=8, doc_length=30, seed=0)["counts"]
    options = {} if method == "vb" else {"num_warmup": 5, "num_samples": 5}
    first, again = (
        latentfs.fit(model, X, method=method, seed=np.random.default_rng(3), warn=False, **options) for _ in range(2)
    )
    assert np.array_equal(first.mean("topic_word"), again.mean("topic_word"))


def test_the_repr_of_a_point_fit_says_point():
    model = latentfs.DirichletDCA(2)
    X = model.simulate(n_documents=20, n_features=8, doc_length=30, seed=0)["counts"]
    assert "point estimates (no bands)" in repr(latentfs.fit(model, X, method="plsi_em", seed=0, warn=False))
    assert "fitted distributions" in repr(latentfs.fit(model, X, method="vb", seed=0, warn=False))


def test_samples_checks_its_options_for_every_kind_of_site(tmp_path):
    model = latentfs.DirichletDCA(2)
    X = model.simulate(n_documents=20, n_features=8, doc_length=30, seed=0)["counts"]
    point = latentfs.fit(model, X, method="plsi_em", seed=0, warn=False)
    draws = latentfs.fit(model, X, method="collapsed_gibbs", seed=0, num_warmup=5, num_samples=5, warn=False)
    for result in (point, draws):
        with pytest.raises(DataError, match=r"num_draws must be an integer ≥ 1; got -1"):
            result.samples("topic_word", -1)
        with pytest.raises(DataError, match=r"seed"):
            result.samples("topic_word", 3, seed="abc")
    # a point estimate stored with the wrong shape is refused on load
    path = tmp_path / "point.npz"
    point.save(path)
    with np.load(path, allow_pickle=False) as f:
        members = {k: f[k] for k in f.files}
    members["fitted/topic_word/value"] = np.concatenate([members["fitted/topic_word/value"]] * 2)
    np.savez(path, **members)
    with pytest.raises(DataError, match=r"inconsistent: site 'topic_word' has shape \(4, 8\)"):
        latentfs.load(path)
