"""``method="mh"`` as a pipeline spec: what the pipeline owns for it (chains, seed rule, relabelling, R̂) and what
the spec keeps (threads from a corpus size on, the draws' memory budget, chain-level means permuted by each chain's
modal relabelling before they are averaged)."""

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core import registry
from latentfs.core.data import DataError
from latentfs.core.relabel import apply_permutations
from latentfs.inference.dca import mh

X = latentfs.DirichletDCA(3, alpha=0.5).simulate(n_documents=40, n_features=15, doc_length=30, seed=6)["counts"]
OPTS = {"method": "mh", "num_warmup": 4, "num_samples": 12, "warn": False}


def test_registered_as_a_spec_under_its_old_name():
    engine = registry.engines()[(latentfs.DirichletDCA, "mh")]
    assert registry.is_spec(engine) and engine is mh.fit_mh
    post = mh.fit_mh(latentfs.DirichletDCA(3), X, num_warmup=4, num_samples=12, warn=False)
    again = latentfs.fit(latentfs.DirichletDCA(3), X, **OPTS)
    np.testing.assert_array_equal(post.samples("topic_word"), again.samples("topic_word"))
    # the pipeline's run diagnostics, once each
    assert post.diagnostics["seed"] == 0 and post.diagnostics["num_chains"] == 2
    assert post.diagnostics["num_samples"] == post.diagnostics["num_draws"] == 12
    assert post.diagnostics["interrupted"] is False


def test_chain_means_are_permuted_by_each_chains_modal_relabelling():
    aligned = latentfs.fit(latentfs.DirichletDCA(3), X, seed=2, **OPTS)
    raw = latentfs.fit(latentfs.DirichletDCA(3), X, seed=2, align=False, **OPTS)
    modes = [np.asarray(p) for p in aligned.alignment["permutations"]]
    assert aligned.alignment["chain_extras"] == ["component_counts", "doc_topic_mean", "topic_word_mean"]
    assert raw.alignment is None and raw.extras["topic_word_mean"].shape == (2, 3, 15)
    for name, axis in (("topic_word_mean", 0), ("component_counts", 1), ("doc_topic_mean", 1)):
        expected = apply_permutations(raw.extras[name][:, None], modes, axis)[:, 0].mean(0)
        np.testing.assert_array_equal(aligned.extras[name], expected)


def test_memory_budget_refuses_the_draws_before_sampling(monkeypatch):
    calls = {"n": 0}
    step = mh.mh_step

    def counted(*args, **kwargs):
        calls["n"] += 1
        return step(*args, **kwargs)

    monkeypatch.setattr(mh, "mh_step", counted)
    with pytest.raises(DataError, match="DirichletDCA MH: the requested draws need .* doc_topic"):
        # 2 chains × 50 draws × (K·J + I·K) floats: 132,000 bytes; the tokens: 1,200 × 64 = 76,800 bytes
        latentfs.fit(latentfs.DirichletDCA(3), X, store=("topic_word", "doc_topic"), memory_budget=1e5,
                     **{**OPTS, "num_samples": 50})
    assert calls["n"] == 0


def test_large_corpora_run_their_chains_in_threads_with_the_same_draws(monkeypatch):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        sequential = latentfs.fit(latentfs.DirichletDCA(3), X, **OPTS)
        monkeypatch.setattr(mh, "CHAIN_THREADS_WORK", 0)
        threaded = latentfs.fit(latentfs.DirichletDCA(3), X, **OPTS)
    finally:
        torch.set_num_threads(threads)
    assert "chain_method" not in sequential.diagnostics and threaded.diagnostics["chain_method"] == "threads"
    np.testing.assert_array_equal(sequential.samples("topic_word"), threaded.samples("topic_word"))
    np.testing.assert_array_equal(sequential.extras["topic_word_mean"], threaded.extras["topic_word_mean"])
    assert mh.fit_mh.threadable is False  # each fit decided on its own copy of the registered spec
