"""The compiled VB document updates (latentfs/inference/dca/vb_kernels.py) against the torch formulation.

On the CPU every VB fit runs the compiled kernel; the sparse-torch formulation (what runs off the CPU) is
the reference here: both must give the same traces and Θ up to the order of floating-point sums, for every
model variant and schedule, and threads must not change the result beyond that order.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.dca import vb as V
from latentfs.inference.dca import vb_updates
from latentfs.inference.dca.common import hyper_tensors, prepare, resolve_model


@pytest.fixture(scope="module")
def corpus():
    sim = latentfs.DirichletDCA(4, alpha=0.2, gamma=0.05).simulate(120, 60, doc_length=40, seed=3)
    return sim["counts"]


def _fit(X, model, *, torch_path: bool, monkeypatch, **kw):
    with monkeypatch.context() as m:
        if torch_path:
            m.setattr(vb_updates, "compiled_updates", lambda data: False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a short fit may not converge; the comparison is the point
            return latentfs.fit(model, X, method="vb", seed=0, **kw)


CASES = {
    "dirichlet": (lambda: latentfs.DirichletDCA(4), {}),
    "gamma-poisson": (lambda: latentfs.GammaPoissonDCA(4), {}),
    "full": (lambda: latentfs.DirichletDCA(4), {"theta_update": "full"}),
    "map": (lambda: latentfs.DirichletDCA(4), {"theta_update": "map"}),
    "chapter-schedule": (lambda: latentfs.DirichletDCA(4), {"doc_restart": False, "inner_iters": 1}),
    "grouped": (lambda: latentfs.DirichletDCA(4, groups=[0] * 30 + [1] * 30), {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_updates_equal_the_torch_formulation(corpus, monkeypatch, case):
    make, kw = CASES[case]
    fast = _fit(corpus, make(), torch_path=False, monkeypatch=monkeypatch, max_iter=40, **kw)
    ref = _fit(corpus, make(), torch_path=True, monkeypatch=monkeypatch, max_iter=40, **kw)
    a, b = fast.extras["bound_trace"], ref.extras["bound_trace"]
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-10)
    np.testing.assert_allclose(fast.mean("topic_word"), ref.mean("topic_word"), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(fast.extras["component_counts"], ref.extras["component_counts"], rtol=1e-8,
                               atol=1e-10)


def test_compiled_updates_in_float32(corpus, monkeypatch):
    kw = {"dtype": torch.float32, "max_iter": 15}
    fast = _fit(corpus, latentfs.DirichletDCA(4), torch_path=False, monkeypatch=monkeypatch, **kw)
    ref = _fit(corpus, latentfs.DirichletDCA(4), torch_path=True, monkeypatch=monkeypatch, **kw)
    assert fast.extras["bound_trace"].dtype == ref.extras["bound_trace"].dtype
    np.testing.assert_allclose(fast.extras["bound_trace"], ref.extras["bound_trace"], rtol=1e-5)


def test_threads_change_only_the_order_of_sums(corpus):
    one = latentfs.fit(latentfs.DirichletDCA(4), corpus, method="vb", seed=1, n_threads=1)
    two = latentfs.fit(latentfs.DirichletDCA(4), corpus, method="vb", seed=1, n_threads=3)
    np.testing.assert_allclose(one.extras["bound_trace"], two.extras["bound_trace"], rtol=1e-12)
    np.testing.assert_allclose(one.mean("topic_word"), two.mean("topic_word"), rtol=1e-10, atol=1e-14)


def test_document_convergence_is_per_document(corpus):
    """Every document stops when its own shapes have converged: after the call, one more update moves no
    shape by more than the tolerance (the torch loop's criterion, applied document by document)."""
    data = prepare(corpus, dtype=torch.float64, device="cpu", empty_documents="error")
    model = resolve_model(latentfs.DirichletDCA(4), data)
    hyper = hyper_tensors(model, data)
    theta = torch.as_tensor(np.asarray(
        latentfs.fit(latentfs.DirichletDCA(4), corpus, method="vb", seed=0).mean("topic_word")))
    a0 = V.restart_shape(model, hyper["alpha"], data.doc_lengths)
    a, _, _, _, n_updates = V._compiled_pass(model, data, a0, theta, "chapter", hyper, max_updates=5000, tol=1e-6)
    assert int(n_updates.max()) < 5000
    assert int(n_updates.min()) < int(n_updates.max())  # documents stop at different updates
    again = V._compiled_pass(model, data, a, theta, "chapter", hyper, max_updates=1)[0]
    assert float(((again - a).abs() / again).max()) <= 1e-6 * 1.5  # one more step moves less than the last


def test_documents_at_theta_matches_its_parts(corpus, monkeypatch):
    data = prepare(corpus, dtype=torch.float64, device="cpu", empty_documents="error")
    model = resolve_model(latentfs.DirichletDCA(4), data)
    hyper = hyper_tensors(model, data)
    theta = latentfs.fit(latentfs.DirichletDCA(4), corpus, method="vb", seed=0).mean("topic_word")
    theta = torch.as_tensor(np.asarray(theta))
    a0 = V.restart_shape(model, hyper["alpha"], data.doc_lengths)
    fast = V.documents_at_theta(model, data, a0, theta, hyper, "chapter", tol=1e-10, max_iter=2000)
    monkeypatch.setattr(vb_updates, "compiled_updates", lambda data: False)
    ref = V.documents_at_theta(model, data, a0, theta, hyper, "chapter", tol=1e-10, max_iter=2000)
    for got, want in zip(fast, ref, strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-7)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "two"])
def test_n_threads_is_checked(corpus, bad):
    with pytest.raises(DataError, match=r"n_threads must be None \(automatic\) or an integer >= 1; got"):
        latentfs.fit(latentfs.DirichletDCA(4), corpus, method="vb", n_threads=bad)


def test_automatic_threads_follow_the_work_and_torch(corpus, monkeypatch):
    data = prepare(corpus, dtype=torch.float64, device="cpu", empty_documents="error")
    assert V.vb_threads(None, data, 4) == 1  # a small problem: one thread
    monkeypatch.setattr(vb_updates, "THREADED_WORK", 1)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    assert V.vb_threads(None, data, 4) == 3
    assert V.vb_threads(2, data, 4) == 2
