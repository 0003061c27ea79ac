"""DCA direct Gibbs on the one pipeline (issue 30): the spec is what ``latentfs.fit`` runs and what ``fit_gibbs``
calls, the pipeline writes the run's diagnostics once, and each chain's running means follow the pipeline's
relabelling of the draws (relabel_chain_outputs in the spec's after_align)."""

import numpy as np
import pytest

import latentfs
from latentfs.core import registry
from latentfs.inference.dca.gibbs import DirectGibbs, fit_gibbs


@pytest.fixture(scope="module")
def corpus():
    model = latentfs.DirichletDCA(3, alpha=0.3, gamma=0.05)
    return model.simulate(n_documents=60, n_features=24, doc_length=80, seed=1)["counts"]


def test_fit_gibbs_is_the_registered_spec_and_callable(corpus):
    model = latentfs.DirichletDCA(3)
    assert isinstance(fit_gibbs, DirectGibbs)
    assert registry.engines()[(latentfs.DirichletDCA, "gibbs")] is fit_gibbs
    direct = fit_gibbs(model, corpus, seed=3, num_warmup=5, num_samples=4, warn=False)
    again = latentfs.fit(model, corpus, method="gibbs", seed=3, num_warmup=5, num_samples=4, warn=False)
    assert np.array_equal(direct.samples("topic_word"), again.samples("topic_word"))


def test_the_pipeline_writes_the_run_diagnostics(corpus):
    post = latentfs.fit(latentfs.DirichletDCA(3), corpus, method="gibbs", num_warmup=5, num_samples=4, warn=False)
    d = post.diagnostics
    assert d["seed"] == 0 and d["num_chains"] == 2 and d["num_samples"] == 4 and d["interrupted"] is False
    assert "num_draws" not in d and "convergence" in d
    assert post.alignment["chain_extras"] == ["component_counts", "doc_topic_mean"]


def test_running_means_follow_the_relabelled_draws(corpus):
    post = latentfs.fit(latentfs.DirichletDCA(3, alpha=0.3), corpus, method="gibbs", seed=2, num_warmup=60,
                        num_samples=30, num_chains=3, store=("topic_word", "doc_topic"), warn=False)
    assert max(post.alignment["switch_share"]) == 0.0  # every draw of a chain in its chain's labelling
    assert any(p != [0, 1, 2] for p in post.alignment["permutations"])  # some chain was relabelled
    np.testing.assert_allclose(post.extras["doc_topic_mean"], post.samples("doc_topic").mean((0, 1)), rtol=1e-10)


def test_align_false_keeps_each_chain_and_its_labels(corpus):
    post = latentfs.fit(latentfs.DirichletDCA(3), corpus, method="gibbs", seed=2, num_warmup=5, num_samples=4,
                        align=False, learn_alpha=True, warn=False)
    assert post.alignment is None and post.relabel_permutations is None
    assert post.extras["component_counts"].shape == (2, 60, 3)
    assert post.extras["alpha_trace"].shape == (2, 9, 3)
    assert post.hyperparameters["learned"] == ["alpha"]
