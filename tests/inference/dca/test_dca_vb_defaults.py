"""DCA VB's defaults on corpora of several shapes (issue 31, item 1): the objective the fit records only rises, a
fit at the symmetric saddle says so, and the default fit is not worse held-out than scikit-learn's default."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import latentfs
from latentfs.core.driver import ConvergenceWarning
from latentfs.evaluate.heldout import document_completion, split_documents


def _corpus(n_docs, n_words, K, length, seed):
    sim = latentfs.DirichletDCA(K, alpha=0.1, gamma=0.01).simulate(
        n_docs + 100, n_words, doc_length=np.full(n_docs + 100, length), seed=seed)
    X = sp.csr_matrix(sim["counts"])
    return X[:n_docs], X[n_docs:]


def test_a_fit_at_the_symmetric_saddle_warns_and_says_so():
    # a prior far heavier than the data pulls every component to the corpus's unigram distribution
    X, _ = _corpus(60, 200, 3, 30, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        at_saddle = latentfs.fit(latentfs.DirichletDCA(4, gamma=500.0), X, method="vb", seed=0, max_iter=40)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert any("at the symmetric saddle: all 4 components are within 0.05" in m for m in messages), messages
    assert at_saddle.diagnostics["symmetric_saddle"] is True and at_saddle.diagnostics["converged"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fitted = latentfs.fit(latentfs.DirichletDCA(3), X, method="vb", seed=0)
    assert fitted.diagnostics["symmetric_saddle"] is False


@pytest.mark.slow
@pytest.mark.parametrize(("shape", "K"), [((300, 4000, 120), 10), ((1500, 800, 30), 10)],
                         ids=["wide-vocabulary", "short-documents"])
def test_default_vb_is_not_worse_than_scikit_learns_default_held_out(shape, K):
    # The failing case was 1,000 × 10,000 words, 250 tokens each, K = 50: the default fit (γ = 0.5, learned)
    # ended at the saddle, 1.2 nats per token below scikit-learn; these are smaller corpora of the same two shapes
    # (a wide vocabulary with long documents, and many short documents). One estimator scores both fits; the
    # tolerance (0.01 nats per token) is the spread of either library over seeds on such corpora.
    from sklearn.decomposition import LatentDirichletAllocation

    n_docs, n_words, length = shape
    train, test = _corpus(n_docs, n_words, K, length, seed=1)
    split = split_documents(test, 0.5, seed=0)
    ours = latentfs.fit(latentfs.DirichletDCA(K), train, method="vb", seed=0)
    peer = LatentDirichletAllocation(n_components=K, random_state=0).fit(train)
    ours_score = document_completion(ours, None, 1.0 / K, split=split)
    peer_score = document_completion(peer.components_, None, 1.0 / K, split=split)
    assert ours.diagnostics["symmetric_saddle"] is False
    assert ours_score >= peer_score - 0.01, (ours_score, peer_score)


def test_the_estimator_exposes_hyperparameter_learning():
    from latentfs.core.data import DataError
    from latentfs.inference.dca.estimator import DCA

    X, _ = _corpus(60, 80, 3, 40, seed=2)
    learned = DCA(3, gamma=0.5, learn_gamma=True, theta_update="full").fit(X)
    assert learned.posterior_.hyperparameters["learned"] == ["gamma"]
    assert float(learned.posterior_.hyperparameters["gamma"]) != 0.5
    assert "learned" not in DCA(3).fit(X).posterior_.hyperparameters
    with pytest.raises(DataError, match="learn_gamma=True is not an option of method='map' for this model; drop"):
        DCA(3, method="map", learn_gamma=True).fit(X)
