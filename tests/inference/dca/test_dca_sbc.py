"""Simulation-based calibration (Talts et al. 2018, arXiv:1804.06788) of the DirichletDCA samplers (issue 35): ``mh``
at its default ``mh_steps`` and at 1, ``collapsed_gibbs``, ``partially_collapsed`` and ``gibbs``.

Every replication draws Θ, the documents' proportions m and the counts from :meth:`DirichletDCA.model` (the Pyro
program, through ``simulate``), fits the counts with ``latentfs.fit(..., seed=n)`` from the same model, thins the
chain to L draws by its ESS and ranks the truth among them (:func:`latentfs.testing.calibration.sbc`). The tiny problem: K = 3,
α = γ = 0.5 fixed (no hyperparameter learning), 5 documents of 10 tokens over 5 words.

The test quantities do not depend on the components' labels, which the sampler cannot identify:

* ``word0_max``, ``word0_min``: the largest and smallest of θ_{0,k} over k (word 0's row of Θ, sorted);
* ``entropy``: the mean over k of the entropy of θ_{·,k} (how peaked the components are: γ's business);
* ``doc0_max``: the largest proportion of document 0 (α's business);
* ``same01``: the probability that a token of word 0 and one of word 1 in document 0 share their component,
  Σ_k r_0k r_1k with r_wk ∝ m_0k θ_wk;
* ``pred00``: the probability that document 0's next token is word 0, Σ_k m_0k θ_0k.

Power (the same harness must reject wrong samplers): a sampler given γ × 3 or α × 3 while the data came from γ and
α, and one that conditions on half of the tokens (it fits ⌈X/2⌉), a bug of the "lost counts" kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
from scipy.special import xlogy

import latentfs
from latentfs.testing.calibration import sbc

K, ALPHA, GAMMA = 3, 0.5, 0.5
N_DOCUMENTS, N_WORDS, DOC_LENGTH = 5, 5, 10
NUM_WARMUP = 100
L_DRAWS, N_BINS = 19, 10
FALSE_ALARM = 1e-3  # per test, over its 6 quantities (Bonferroni: each p-value against 1e-3 / 6)
SIMULATION_SEED = 1_000_000  # the data of replication n come from seed SIMULATION_SEED + n, the fit from seed n

MODEL = latentfs.DirichletDCA(K, alpha=ALPHA, gamma=GAMMA)

# each engine with its hyperparameter learning off and the work SBC does not read switched off
QUIET = {
    "collapsed_gibbs": {
        "learn_alpha": False,
        "learn_gamma": False,
        "align": False,
        "log_likelihood": False,
        "trace": False,
    },
    "mh": {"align": False, "log_likelihood": False, "trace": False},
    "partially_collapsed": {},
    "gibbs": {"learn_alpha": False, "align": False, "log_likelihood": False},
}


def quantities(params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The label-invariant test quantities of draws of ``topic_word`` (n, K, J) and ``doc_topic`` (n, I, K)."""
    theta, m = params["topic_word"], params["doc_topic"]
    resp = m[:, 0, :, None] * theta  # (n, K, J): document 0's component of a token of each word, unnormalised
    resp = resp / resp.sum(1, keepdims=True)
    return {
        "word0_max": theta[:, :, 0].max(-1),
        "word0_min": theta[:, :, 0].min(-1),
        "entropy": -xlogy(theta, theta).sum(-1).mean(-1),
        "doc0_max": m[:, 0].max(-1),
        "same01": (resp[:, :, 0] * resp[:, :, 1]).sum(-1),
        "pred00": (m[:, 0] * theta[:, :, 0]).sum(-1),
    }


def simulate(n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Θ, m and the counts drawn by the Pyro model (``DirichletDCA.simulate`` runs ``DirichletDCA.model``)."""
    sim = MODEL.simulate(N_DOCUMENTS, N_WORDS, DOC_LENGTH, seed=SIMULATION_SEED + n)
    return {"topic_word": sim["topic_word"], "doc_topic": sim["doc_topic"]}, sim["counts"]


def sampler(
    method: str, model: Any = MODEL, data: Callable[[np.ndarray], np.ndarray] | None = None, **options: Any
) -> Callable[[np.ndarray, int, int], dict[str, np.ndarray]]:
    """``sample(X, n, S)`` for :func:`sbc`: one chain of ``method`` on X after ``NUM_WARMUP`` sweeps, S kept draws
    of Θ and m. ``model`` and ``data`` plant an error (a wrong prior, lost tokens) for the power checks."""

    def sample(X: np.ndarray, n: int, num_samples: int) -> dict[str, np.ndarray]:
        post = latentfs.fit(
            model,
            X if data is None else data(X),
            method=method,
            seed=n,
            num_chains=1,
            num_warmup=NUM_WARMUP,
            num_samples=num_samples,
            store=("topic_word", "doc_topic"),
            warn=False,
            **QUIET[method],
            **options,
        )
        return {"topic_word": post.samples("topic_word")[0], "doc_topic": post.samples("doc_topic")[0]}

    return sample


@pytest.mark.parametrize(
    ("method", "options", "n_simulations"),
    [
        ("mh", {}, 200),
        ("mh", {"mh_steps": 1}, 200),
        ("collapsed_gibbs", {}, 200),
        pytest.param("partially_collapsed", {}, 100, marks=pytest.mark.slow),
        pytest.param("gibbs", {}, 100, marks=pytest.mark.slow),
    ],
    ids=["mh", "mh-1-step", "collapsed_gibbs", "partially_collapsed", "gibbs"],
)
def test_sampler_is_calibrated(method, options, n_simulations):
    """The ranks of all 6 quantities are uniform (χ² on 10 bins of the 20 ranks): false-alarm rate 1e-3 per
    sampler (Bonferroni over the quantities), up to the χ² approximation with ≥ 10 ranks expected per bin."""
    result = sbc(
        simulate, sampler(method, **options), quantities, n_simulations=n_simulations, n_draws=L_DRAWS, n_bins=N_BINS
    )
    print(f"\n{method} {options}: {result.report()}")  # the figures of benchmarks/RESULTS.md (pytest -s)
    assert result.ranks.shape == (n_simulations, 6)
    result.check(FALSE_ALARM)


@pytest.mark.parametrize(
    ("wrong", "sample", "n_simulations", "caught"),
    [
        (
            "gamma x 3",
            sampler("mh", model=latentfs.DirichletDCA(K, alpha=ALPHA, gamma=3 * GAMMA)),
            100,
            {"word0_min", "entropy", "same01"},
        ),
        ("alpha x 3", sampler("mh", model=latentfs.DirichletDCA(K, alpha=3 * ALPHA, gamma=GAMMA)), 100, {"doc0_max"}),
        ("half the tokens", sampler("collapsed_gibbs", data=lambda X: np.ceil(X / 2)), 200, {"entropy"}),
    ],
    ids=["gamma-x3", "alpha-x3", "half-the-tokens"],
)
def test_sbc_rejects_a_wrong_sampler(wrong, sample, n_simulations, caught):
    """Power: the harness of :func:`test_sampler_is_calibrated`, at the same false-alarm rate (1e-3), fails a
    sampler whose posterior is wrong (measured: every quantity named here has p < 1e-9, against 1.7e-4)."""
    result = sbc(simulate, sample, quantities, n_simulations=n_simulations, n_draws=L_DRAWS, n_bins=N_BINS)
    print(f"\n{wrong}: {result.report()}")
    assert caught <= set(result.rejected(FALSE_ALARM)), f"{wrong}:\n{result.report()}"
    with pytest.raises(AssertionError, match="are not uniform at false-alarm rate 0.001"):
        result.check(FALSE_ALARM)
