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

__all__ = ["RollCalls", "SenatorBlocs", "simulate_rollcalls", "bloc_membership", "senator_blocs"]


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

    This summarises the *roll calls* a senator took part in, not the senator: a vote is credited to the
    roll call's agenda m_(i) whoever casts it, so every senator of a chamber gets nearly the same row
    (on the simulator's defaults the argmax of these rows has ARI 0.03 with the planted blocs). To place
    senators in blocs use :func:`senator_blocs`.

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


@dataclass(frozen=True)
class SenatorBlocs:
    """What :func:`senator_blocs` returns.

    Attributes
    ----------
    profile : ndarray (S, K), each senator's centred log-odds of Yea under every component
    membership : ndarray (S, B), soft bloc membership (rows sum to 1)
    labels : ndarray (S,), the bloc of each senator (argmax of ``membership``)
    centres : ndarray (B, K), the blocs' mean profiles
    """

    profile: np.ndarray
    membership: np.ndarray
    labels: np.ndarray
    centres: np.ndarray


def senator_blocs(
    topic_word: Any, groups: Any, n_blocs: int | None = None, *, n_senators: int | None = None, seed: int = 0
) -> SenatorBlocs:
    """Senator-level blocs: senators who vote alike on every component's agenda form a bloc.

    Each senator s (a group of two columns, Yea then Nay, as :func:`simulate_rollcalls` encodes them) is
    described by its log-odds of Yea under every component, log θ_{s,Yea,k} / θ_{s,Nay,k}, centred over
    senators per component (a component on which everybody votes Yea says nothing about blocs). The
    profiles are clustered by k-means (scikit-learn, 10 initialisations) into ``n_blocs`` blocs (default
    K); the soft membership is the responsibility of each bloc under an isotropic Gaussian mixture with
    the k-means centres and their pooled within-bloc variance. Blocs are unordered labels.

    Parameters
    ----------
    topic_word : array (K, J) or Posterior, Θ of a grouped fit (normalised within groups)
    groups : array (J,), the group (senator) of every column; every group has two columns
    n_blocs : int, optional, default K
    n_senators : int, optional
        Use the first ``n_senators`` groups only (e.g. leave out the simulator's outcome "senator").
    seed : int, the k-means seed

    Examples
    --------
    >>> rc = simulate_rollcalls(200, n_senators=12, n_blocs=3, seed=0)
    >>> blocs = senator_blocs(rc.topic_word, rc.groups, n_senators=12)
    >>> blocs.membership.shape, len(set(blocs.labels[rc.senator_bloc == 0]))
    ((12, 3), 1)
    """
    from sklearn.cluster import KMeans

    from latentfs.core.results import Posterior
    from latentfs.models.dca import check_groups

    theta = np.asarray(topic_word.mean("topic_word") if isinstance(topic_word, Posterior) else topic_word,
                       dtype=np.float64)
    g = check_groups(groups)
    if theta.ndim != 2 or g.shape != (theta.shape[1],):
        raise DataError(
            f"groups must have one entry per column of topic_word ({theta.shape[-1]}); got shape {g.shape}."
        )
    sizes = np.bincount(g)
    if (sizes != 2).any():
        raise DataError(
            f"every group must hold two columns (Yea, Nay); group {int(np.argmax(sizes != 2))} has "
            f"{int(sizes[sizes != 2][0])}. Use the simulator's encoding."
        )
    order = np.argsort(g, kind="stable")
    yea, nay = theta[:, order[0::2]], theta[:, order[1::2]]  # (K, G): first and second column of each group
    S = sizes.size if n_senators is None else check_n_components(n_senators, sizes.size, name="n_senators")
    K = theta.shape[0]
    B = K if n_blocs is None else check_n_components(n_blocs, S, name="n_blocs", what="one senator per bloc")
    tiny = np.finfo(np.float64).tiny
    logit = (np.log(np.maximum(yea, tiny)) - np.log(np.maximum(nay, tiny))).T[:S]  # (S, K)
    profile = logit - logit.mean(0)
    km = KMeans(B, n_init=10, random_state=seed).fit(profile)
    d2 = ((profile[:, None, :] - km.cluster_centers_[None]) ** 2).sum(-1)  # (S, B)
    var = max(float(d2[np.arange(S), km.labels_].mean()) / K, 1e-12)
    logr = -d2 / (2 * var)
    r = np.exp(logr - logr.max(1, keepdims=True))
    membership = r / r.sum(1, keepdims=True)
    return SenatorBlocs(profile, membership, membership.argmax(1), km.cluster_centers_)
