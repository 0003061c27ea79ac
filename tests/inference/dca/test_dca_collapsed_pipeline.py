"""DCA collapsed Gibbs on the one pipeline (issue 30): the spec is what ``latentfs.fit`` runs and what
``fit_collapsed_gibbs`` calls; its per-fit hooks (threads for long sweeps only, the caller's memory budget for the
kept draws) and the run's diagnostics written once by the pipeline."""

import numpy as np
import pytest

import latentfs
from latentfs.core import registry
from latentfs.core.data import DataError
from latentfs.inference.dca.collapsed import CHAIN_THREADS_WORK, CollapsedGibbs, fit_collapsed_gibbs

pytestmark = pytest.mark.exact


@pytest.fixture(scope="module")
def corpus():
    model = latentfs.DirichletDCA(3, alpha=0.3, gamma=0.05)
    return model.simulate(n_documents=40, n_features=30, doc_length=50, seed=2)["counts"]


def test_fit_collapsed_gibbs_is_the_registered_spec_and_callable(corpus):
    model = latentfs.DirichletDCA(3)
    assert isinstance(fit_collapsed_gibbs, CollapsedGibbs)
    assert registry.engines()[(latentfs.GammaPoissonDCA, "collapsed_gibbs")] is fit_collapsed_gibbs
    direct = fit_collapsed_gibbs(model, corpus, seed=4, num_warmup=5, num_samples=4, warn=False)
    again = latentfs.fit(model, corpus, method="collapsed_gibbs", seed=4, num_warmup=5, num_samples=4, warn=False)
    assert np.array_equal(direct.samples("topic_word"), again.samples("topic_word"))
    d = again.diagnostics
    assert d["seed"] == 4 and d["num_chains"] == 2 and d["num_samples"] == 4 and "num_draws" not in d
    assert again.alignment["chain_extras"] == ["alpha", "alpha_trace", "component_counts", "doc_topic_mean",
                                               "topic_word_mean"]


def test_chains_run_in_threads_only_for_long_sweeps(corpus):
    spec = fit_collapsed_gibbs
    o = spec.check_options({}, "DirichletDCA")
    prep = spec.prepare(latentfs.DirichletDCA(3), corpus, o)
    assert corpus.sum() * 3 < CHAIN_THREADS_WORK and not spec.is_threadable(prep, o)
    big = spec.prepare(latentfs.DirichletDCA(3), corpus * (CHAIN_THREADS_WORK // int(corpus.sum() * 3) + 1), o)
    assert spec.is_threadable(big, o)
    assert not spec.is_threadable(big, spec.check_options({"n_threads": 2}, "DirichletDCA"))


def test_memory_budget_bounds_the_kept_draws_too(corpus):
    tokens = int(corpus.sum())
    budget = tokens * 64  # the token arrays fit (32 bytes a token); 2 × 500 draws of Θ (3 × 30 floats) do not
    with pytest.raises(DataError, match="over the memory budget"):
        latentfs.fit(latentfs.DirichletDCA(3), corpus, method="collapsed_gibbs", num_warmup=1, num_samples=500,
                     memory_budget=budget, warn=False)
