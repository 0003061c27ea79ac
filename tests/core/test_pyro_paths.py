"""The Pyro-backed paths (NUTS, SVI, simulation) under Ctrl-C, from two threads, and with the caller's
random state (issue 19, items 5 and 6)."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core.driver import InterruptedFitWarning


@pytest.fixture(scope="module")
def counts() -> np.ndarray:
    return np.asarray(latentfs.DirichletDCA(2).simulate(n_documents=12, n_features=6, doc_length=20, seed=0)["counts"])


def test_ctrl_c_during_nuts_keeps_the_finished_chains(counts, monkeypatch):
    import pyro.infer

    calls = {"setup": 0}
    setup, sample = pyro.infer.NUTS.setup, pyro.infer.NUTS.sample

    def counted_setup(self, *args, **kwargs):
        calls["setup"] += 1
        return setup(self, *args, **kwargs)

    def interrupted_sample(self, params):
        if calls["setup"] == 2:  # Ctrl-C during the second chain's warm-up
            raise KeyboardInterrupt
        return sample(self, params)

    monkeypatch.setattr(pyro.infer.NUTS, "setup", counted_setup)
    monkeypatch.setattr(pyro.infer.NUTS, "sample", interrupted_sample)
    with pytest.warns(InterruptedFitWarning, match=r"NUTS interrupted; keeping 1 chain\(s\) × 10 draws"):
        result = latentfs.fit(
            latentfs.DirichletDCA(2), counts, method="nuts", num_chains=3, num_warmup=10, num_samples=10, seed=0,
            warn=False,
        )
    assert result.samples("topic_word").shape[:2] == (1, 10)
    assert result.diagnostics["interrupted"] is True
    assert calls["setup"] == 2  # the third chain never started


def test_pyro_paths_leave_the_callers_random_state_alone(counts):
    random.seed(11)
    np.random.seed(11)
    torch.manual_seed(11)
    before = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone())
    latentfs.DirichletDCA(2).simulate(n_documents=5, n_features=4, doc_length=10, seed=3)
    latentfs.fit(latentfs.DirichletDCA(2), counts, method="svi", num_steps=20, num_draws=5, seed=3)
    assert random.getstate() == before[0]
    assert np.array_equal(np.random.get_state()[1], before[1])
    assert torch.equal(torch.get_rng_state(), before[2])


def test_two_threads_fit_and_simulate_through_pyro_as_one_thread_would(counts):
    def job(seed: int) -> tuple[np.ndarray, np.ndarray]:
        fit = latentfs.fit(latentfs.DirichletDCA(2), counts, method="svi", num_steps=30, num_draws=5, seed=seed)
        sim = latentfs.DirichletDCA(2).simulate(n_documents=5, n_features=4, doc_length=10, seed=seed)["counts"]
        return fit.mean("topic_word"), np.asarray(sim)

    expected = {s: job(s) for s in (1, 2)}
    got: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            got[seed] = job(seed)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for s in (1, 2):
        np.testing.assert_array_equal(got[s][0], expected[s][0])
        np.testing.assert_array_equal(got[s][1], expected[s][1])
