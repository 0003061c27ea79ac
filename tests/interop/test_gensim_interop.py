"""A fitted topic model to gensim's LdaModel and back (issue 34, item 6): the round trip keeps λ (the Dirichlet
q of the topic-word matrix), α and η exactly; gensim's CoherenceModel runs on the export and gives latentfs's
UMass coherence in gensim's convention; a model trained by gensim reads back as a latentfs result."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from gensim.matutils import Sparse2Corpus
from gensim.models import CoherenceModel, LdaModel

import latentfs
from latentfs.core.data import DataError
from latentfs.evaluate.coherence import topic_coherence
from latentfs.interop.gensim import from_gensim, to_gensim

MODEL = latentfs.DirichletDCA(4, alpha=0.3, gamma=0.1)
X = MODEL.simulate(120, 40, doc_length=60, seed=3)["counts"]
NAMES = [f"word{j}" for j in range(X.shape[1])]


@pytest.fixture(scope="module")
def fitted():
    return latentfs.fit(MODEL, X, method="vb", seed=0, max_iter=200, warn=False, feature_names=NAMES)


def test_round_trip_keeps_lambda_alpha_eta_and_names(fitted):
    lda = to_gensim(fitted)
    assert isinstance(lda, LdaModel) and lda.num_topics == 4 and lda.num_terms == 40
    lam = fitted._fitted["topic_word"]["concentration"]
    # gensim stores lambda - eta and adds eta back: equal to the last bit or two
    np.testing.assert_allclose(lda.state.get_lambda(), lam, rtol=1e-14, atol=0)
    np.testing.assert_allclose(lda.get_topics(), fitted.mean("topic_word"), rtol=1e-14, atol=0)
    np.testing.assert_array_equal(lda.alpha, fitted.hyperparameters["alpha"])
    assert np.all(lda.eta == 0.1)
    assert [lda.id2word[j] for j in range(40)] == NAMES
    back = from_gensim(lda)
    assert back.model == "DirichletDCA" and back.method == "gensim"
    np.testing.assert_allclose(back._fitted["topic_word"]["concentration"], lam, rtol=1e-14, atol=0)
    np.testing.assert_allclose(back.mean("topic_word"), fitted.mean("topic_word"), rtol=1e-14, atol=0)
    assert back.hyperparameters["alpha"] == fitted.hyperparameters["alpha"] and back.hyperparameters["gamma"] == 0.1
    assert back.coords["feature"] == NAMES
    # read by latentfs's tools like a fit of its own
    ours, theirs = latentfs.top_words(fitted, 5), latentfs.top_words(back, 5)
    assert theirs.xs("word", axis=1, level="field").equals(ours.xs("word", axis=1, level="field"))


def test_gensim_coherence_on_the_export_equals_latentfs_umass(fitted):
    lda = to_gensim(fitted)
    corpus = list(Sparse2Corpus(sp.csr_matrix(X), documents_columns=False))
    theirs = CoherenceModel(model=lda, corpus=corpus, dictionary=lda.id2word, coherence="u_mass",
                            topn=10).get_coherence_per_topic()
    ours = topic_coherence(fitted, X, measure="umass", n_top=10, umass_convention="gensim")
    np.testing.assert_allclose(theirs, ours, rtol=1e-10)


def test_the_estimator_exports_too():
    est = latentfs.DCA(4, alpha=0.3, gamma=0.1, max_iter=100, seed=0).fit(X)
    np.testing.assert_allclose(to_gensim(est).get_topics(), est.components_, rtol=1e-14, atol=0)


def test_a_gensim_trained_model_reads_back():
    corpus = list(Sparse2Corpus(sp.csr_matrix(X), documents_columns=False))
    lda = LdaModel(corpus, num_topics=3, id2word={j: n for j, n in enumerate(NAMES)}, passes=2, random_state=0,
                   alpha="asymmetric", dtype=np.float64)
    back = from_gensim(lda)
    np.testing.assert_allclose(back.mean("topic_word"), lda.get_topics(), rtol=1e-14)
    np.testing.assert_array_equal(back.hyperparameters["alpha"], lda.alpha)
    assert back.coords["feature"] == NAMES
    again = to_gensim(back)
    np.testing.assert_allclose(again.state.get_lambda(), lda.state.get_lambda(), rtol=1e-14, atol=0)
    np.testing.assert_array_equal(again.alpha, lda.alpha)


def test_fits_without_a_dirichlet_q_are_refused_with_a_remedy():
    gibbs = latentfs.fit(MODEL, X, method="gibbs", seed=0, num_chains=1, num_warmup=5, num_samples=5, warn=False)
    with pytest.raises(DataError, match=r"needs the fit's Dirichlet posterior of topic_word .* Fit with method='vb'"):
        to_gensim(gibbs)
    gap = latentfs.fit(latentfs.GammaPoissonDCA(2), X, method="vb", seed=0, max_iter=20, warn=False)
    with pytest.raises(DataError, match=r"only DirichletDCA fits convert .* got a GammaPoissonDCA fit"):
        to_gensim(gap)
    with pytest.raises(DataError, match=r"fitted must be a fitted DirichletDCA result .* got ndarray"):
        to_gensim(np.zeros((2, 3)))
    with pytest.raises(DataError, match=r"lda must be a gensim.models.LdaModel; got dict"):
        from_gensim({})


def test_missing_gensim_names_the_extra():
    code = ("import sys; sys.modules['gensim'] = None\n"
            "import latentfs\nfrom latentfs.interop.gensim import to_gensim\n"
            "try:\n    to_gensim(None)\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300).stdout
    assert 'pip install "latentfs[gensim]"' in out
