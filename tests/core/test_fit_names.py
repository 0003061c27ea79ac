"""Names on any input (issue 14, item 2): ``latentfs.fit(model, X, feature_names=…, document_names=…)``
labels the result whatever the container — numpy, scipy.sparse, torch, pandas (sparse kept sparse) —
and the names reach ArviZ coords and feature weights; wrong or duplicate names are refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

import latentfs
from latentfs.core.data import DataError

VOCAB = [f"word_{j}" for j in range(12)]
DOCS = [f"doc_{i}" for i in range(30)]


@pytest.fixture(scope="module")
def counts() -> np.ndarray:
    return np.asarray(latentfs.DirichletDCA(2).simulate(n_documents=30, n_features=12, doc_length=40, seed=0)["counts"])


CONTAINERS = {
    "numpy": lambda x: x,
    "csr": sp.csr_matrix,
    "coo": sp.coo_matrix,
    "torch": torch.as_tensor,
    "torch_sparse": lambda x: torch.as_tensor(x).to_sparse(),
}


@pytest.mark.parametrize("container", sorted(CONTAINERS))
@pytest.mark.parametrize("method", ["vb", "collapsed_gibbs"])
def test_names_reach_coords_for_every_container(counts, container, method):
    X = CONTAINERS[container](counts)
    options = {"num_warmup": 10, "num_samples": 10, "num_chains": 2} if method == "collapsed_gibbs" else {}
    result = latentfs.fit(
        latentfs.DirichletDCA(2), X, method=method, feature_names=VOCAB, document_names=DOCS, seed=0, warn=False,
        **options,
    )
    assert result.coords["feature"] == VOCAB
    assert result.coords["document"] == DOCS
    idata = result.to_inference_data(num_draws=5) if result.kind() != "draws" else result.to_inference_data()
    assert list(idata.posterior["topic_word"].coords["feature"].values) == VOCAB


def test_names_reach_feature_weights(counts):
    result = latentfs.fit(latentfs.DirichletDCA(2), sp.csr_matrix(counts), method="vb", feature_names=VOCAB, seed=0)
    weights = latentfs.word_importance(result)
    assert list(weights.feature_names) == VOCAB


def test_pandas_sparse_frame_names_are_kept(counts):
    frame = pd.DataFrame.sparse.from_spmatrix(sp.csr_matrix(counts), columns=VOCAB, index=DOCS)
    result = latentfs.fit(latentfs.DirichletDCA(2), frame, method="vb", seed=0)
    assert result.coords["feature"] == VOCAB
    assert result.coords["document"] == DOCS


def test_continuous_models_take_sample_names():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(40, 1)) * [1.0, 0.8, 0.6, 0.9] + 0.5 * rng.normal(size=(40, 4))  # one real factor
    names = ["height", "weight", "age", "income"]
    samples = [f"person_{i}" for i in range(40)]
    fa = latentfs.fit(latentfs.FactorAnalysis(1), Y, feature_names=names, sample_names=samples, seed=0)
    assert fa.coords["feature"] == names
    assert fa.coords["sample"] == samples
    gm = latentfs.fit(latentfs.GaussianMixture(2), torch.as_tensor(Y), feature_names=names, seed=0)
    assert gm.coords["feature"] == names


def test_duplicate_feature_names_are_refused(counts):
    with pytest.raises(DataError, match=r"feature_names must be unique; 'w' appears 12 times.*Rename the duplicates"):
        latentfs.fit(latentfs.DirichletDCA(2), sp.csr_matrix(counts), feature_names=["w"] * 12)


def test_wrong_number_of_names_is_refused(counts):
    with pytest.raises(DataError, match=r"feature_names"):
        latentfs.fit(latentfs.DirichletDCA(2), counts, feature_names=VOCAB[:5])


def test_row_names_use_the_model_vocabulary(counts):
    with pytest.raises(DataError, match=r"sample_names is not an option for DirichletDCA.*document_names="):
        latentfs.fit(latentfs.DirichletDCA(2), counts, sample_names=DOCS)
    with pytest.raises(DataError, match=r"document_names is not an option for FactorAnalysis.*sample_names="):
        latentfs.fit(latentfs.FactorAnalysis(1), np.eye(5), document_names=[f"d{i}" for i in range(5)])


def test_engine_empty_document_rule_still_applies_to_named_input(counts):
    X = counts.copy()
    X[3] = 0
    with pytest.raises(DataError, match=r"1 document\(s\) with no counts"):
        latentfs.fit(latentfs.DirichletDCA(2), X, feature_names=VOCAB)


@pytest.mark.parametrize(
    "method, options, message",
    [
        ("nuts", {"num_samples": 0}, r"num_samples must be an integer ≥ 1; got 0"),
        ("nuts", {"seed": -1}, r"seed"),
        ("nuts", {"target_accept_prob": 1.5}, r"target_accept_prob"),
        ("svi", {"num_steps": 0}, r"num_steps must be an integer ≥ 1; got 0"),
        ("svi", {"learning_rate": -0.1}, r"learning_rate"),
    ],
)
def test_pyro_reference_engines_check_their_options(counts, method, options, message):
    with pytest.raises(DataError, match=message):
        latentfs.fit(latentfs.DirichletDCA(2), counts, method=method, **options)


def test_names_are_refused_for_lattices():
    image = np.random.default_rng(0).normal(size=(6, 6))
    with pytest.raises(DataError, match=r"are not options for HiddenPotts: its data are a lattice"):
        latentfs.fit(latentfs.HiddenPotts(2), image, feature_names=[f"c{j}" for j in range(6)])
