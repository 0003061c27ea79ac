"""Bloc-structured roll calls: a simulator of the Senate application of Buntine & Jakulin (2006), Section 8.1.

The chapter fits the 2003 US Senate roll calls (459 votes) with a grouped (multivariate) Dirichlet DCA:
every roll call is a *document*; every senator X contributes two *words*, (X, Yea) and (X, Nay), which
form one binomial *group*; 'Not Voting' means no word (a missing group, contributing nothing); and the
outcome of the roll call is a 101st senator (Yea = passed/confirmed, Nay = rejected/sustained). Those
data are not available offline, so :func:`simulate_rollcalls` draws roll calls with the same encoding
from the grouped model itself, with planted blocs.

Generating process
------------------
1. The S senators are split into K blocs of (near-)equal size; bloc b sits at position x_b on a
   left–right line, x = linspace(−1, 1, K).
2. Component k is "the agenda of bloc k". A senator of bloc b votes Yea on it with probability
   p_{b,k} = clip(1 − spread · |x_b − x_k|, 1 − loyalty, loyalty); each senator's own probability is
   θ_{s,Yea,k} ~ Beta(κ p_{b,k}, κ (1 − p_{b,k})) (κ = ``concentration``), θ_{s,Nay,k} = 1 − θ_{s,Yea,k}.
3. The outcome senator's Yea probability under component k is the bloc's *influence*, drawn
   uniformly from [0.1, 0.95].
4. Every roll call i draws its bloc proportions m_(i) ~ Dirichlet(α 1_K) (the chapter's prior α = 0.1).
5. Every senator is present with probability 1 − ``absence`` (independently); a present senator casts
   one vote, Yea with probability Σ_k m_ik θ_{s,Yea,k}. The outcome is always recorded.

Steps 4–5 run the declared Pyro model (:class:`latentfs.DirichletDCA` with ``groups``), conditioned on the
planted Θ, with the group lengths L_(i),g ∈ {0, 1} given by the presence draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from pyro import poutine

from latentfs.core.data import DataError, as_counts, check_n_components, check_positive
from latentfs.models.dca import DirichletDCA

__all__ = ["RollCalls", "simulate_rollcalls", "bloc_membership"]


@dataclass(frozen=True)
class RollCalls:
    """Simulated roll calls in the chapter's encoding.

    Attributes
    ----------
    counts : ndarray (n_rollcalls, 2 (S + 1)), one 0/1 token per present senator (Yea or Nay column)
    groups : ndarray (2 (S + 1),), the group (senator) of each column; the outcome is group S
    feature_names : tuple of "S007:Yea"-style names; the outcome's are "Outcome:Yea" / "Outcome:Nay"
    senator_bloc : ndarray (S,), the planted bloc of each senator
    topic_word : ndarray (K, 2 (S + 1)), the planted Θ (normalised within each group)
    doc_topic : ndarray (n_rollcalls, K), the planted bloc proportions m_(i)
    """

    counts: np.ndarray
    groups: np.ndarray
    feature_names: tuple[str, ...]
    senator_bloc: np.ndarray
    topic_word: np.ndarray
    doc_topic: np.ndarray

    @property
    def n_senators(self) -> int:
        return int(self.senator_bloc.size)


def simulate_rollcalls(
    n_rollcalls: int = 459,
    n_senators: int = 100,
    n_blocs: int = 5,
    *,
    alpha: float = 0.1,
    loyalty: float = 0.95,
    spread: float = 0.9,
    concentration: float = 30.0,
    absence: float = 0.05,
    seed: int | None = 0,
) -> RollCalls:
    """Draw bloc-structured roll calls (module docstring).

    Examples
    --------
    >>> rc = simulate_rollcalls(20, n_senators=10, n_blocs=2, seed=0)
    >>> rc.counts.shape, rc.feature_names[:2], rc.feature_names[-1]
    ((20, 22), ('S000:Yea', 'S000:Nay'), 'Outcome:Nay')
    >>> bool((rc.counts.reshape(20, 11, 2).sum(-1) <= 1).all())  # at most one vote per senator
    True
    """
    n_rollcalls = check_n_components(n_rollcalls, 10**9, name="n_rollcalls")
    n_senators = check_n_components(n_senators, 10**6, name="n_senators")
    K = check_n_components(n_blocs, n_senators, name="n_blocs", what="one senator per bloc at least")
    for name, v in (("loyalty", loyalty), ("absence", absence)):
        if not 0 <= float(v) < 1:
            raise DataError(f"{name} must lie in [0, 1); got {v!r}.")
    if not 0.5 < float(loyalty):
        raise DataError(f"loyalty must exceed 0.5 (members back their own bloc's agenda); got {loyalty!r}.")
    alpha_v = check_positive(alpha, "alpha")
    check_positive(spread, "spread")
    check_positive(concentration, "concentration")
    rng = np.random.default_rng(seed)
    bloc = np.repeat(np.arange(K), -(-n_senators // K))[:n_senators]
    x = np.linspace(-1.0, 1.0, K) if K > 1 else np.zeros(1)
    p = np.clip(1 - spread * np.abs(x[:, None] - x[None, :]), 1 - loyalty, loyalty)  # (bloc, component)
    yea = rng.beta(concentration * p[bloc], concentration * (1 - p[bloc]))  # (S, K)
    influence = rng.uniform(0.1, 0.95, size=K)
    yea = np.vstack([yea, influence[None, :]])  # the outcome is the last "senator"
    G = n_senators + 1
    theta = np.empty((K, 2 * G))
    theta[:, 0::2] = yea.T
    theta[:, 1::2] = 1 - yea.T
    groups = np.repeat(np.arange(G), 2)
    present = (rng.uniform(size=(n_rollcalls, G)) >= absence).astype(np.float64)
    present[:, -1] = 1.0
    model = DirichletDCA(K, alpha=alpha_v if alpha_v.ndim == 0 else alpha_v, groups=groups)
    conditioned = poutine.condition(model.model, data={"topic_word": torch.as_tensor(theta)})
    sim = model._run_simulation(
        conditioned, int(rng.integers(2**31)), doc_lengths=torch.as_tensor(present), n_features=2 * G
    )
    names = [f"S{s:03d}:{v}" for s in range(n_senators) for v in ("Yea", "Nay")] + ["Outcome:Yea", "Outcome:Nay"]
    return RollCalls(
        counts=sim["counts"].astype(np.float64),
        groups=groups,
        feature_names=tuple(names),
        senator_bloc=bloc,
        topic_word=theta,
        doc_topic=sim["doc_topic"],
    )


def bloc_membership(topic_word: Any, doc_topic: Any, counts: Any, groups: Any) -> np.ndarray:
    """The share of each group's (senator's) votes attributed to each component, (G, K); rows sum to 1.

    The chapter does not give the formula behind its Figs. 7–8; this is the reconstruction of the digest
    (§1.9A, [EXT]): Σ_i E[v_{g,·,k,(i)}] / Σ_i L_(i),g with the plug-in responsibilities
    n_ijk ∝ θ_jk m_ik. A group that never voted gets a uniform row.

    Examples
    --------
    >>> theta = np.array([[0.9, 0.1, 0.5, 0.5], [0.1, 0.9, 0.5, 0.5]])
    >>> bloc_membership(theta, np.array([[0.5, 0.5]]), np.array([[1, 0, 0, 1]]), [0, 0, 1, 1]).round(2).tolist()
    [[0.9, 0.1], [0.5, 0.5]]
    """
    theta = np.asarray(topic_word, dtype=np.float64)
    m = np.asarray(doc_topic, dtype=np.float64)
    coo = as_counts(counts, empty_documents="keep").csr.tocoo()
    g = np.asarray(groups)
    if g.shape != (theta.shape[1],):
        raise DataError(f"groups must have one entry per feature ({theta.shape[1]}); got shape {g.shape}.")
    resp = theta[:, coo.col].T * m[coo.row]  # (nnz, K)
    resp *= (coo.data / resp.sum(1))[:, None]
    n_groups = int(g.max()) + 1
    out = np.zeros((n_groups, theta.shape[0]))
    np.add.at(out, g[coo.col], resp)
    totals = out.sum(1, keepdims=True)
    return np.where(totals > 0, out / np.where(totals > 0, totals, 1), 1.0 / theta.shape[0])
