"""Starting points of the mixture engines: k-means (scikit-learn's ``KMeans``), k-means++ seeding, random.

Every initialisation maps the family's rows (:meth:`GaussianFamily.init_points`) to starting
responsibilities τ⁰ (n, K); the engines turn them into parameters with one M-step (EM) or one
conjugate update (VB, Gibbs). They are drawn on the host (scikit-learn, or torch with the engine's CPU
generator) and then moved to the family's device, so that a fit on a GPU starts where the CPU fit starts.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

from latentfs.core.data import DataError

__all__ = ["INITIALISATIONS", "initial_params", "initial_responsibilities"]


def _sklearn_seed(gen: torch.Generator) -> int:
    """A scikit-learn ``random_state`` drawn from the engine's torch generator (so one seed drives both)."""
    return int(torch.randint(0, 2**31 - 1, (1,), generator=gen).item())


def _hard(labels: np.ndarray, k: int) -> torch.Tensor:
    resp = torch.zeros(labels.shape[0], k, dtype=torch.float64)
    resp[torch.arange(labels.shape[0]), torch.as_tensor(labels, dtype=torch.long)] = 1.0
    return resp


#: The one-start k-means (:func:`_kmeans` with ``best_of``) runs this many k-means on a subsample of
#: ``max(SUBSAMPLE_MIN, SUBSAMPLE_PER_COMPONENT · K)`` rows, then refines the best on all rows.
KMEANS_REPEATS = 5
SUBSAMPLE_MIN = 1000
SUBSAMPLE_PER_COMPONENT = 100


def _kmeans(points: torch.Tensor, k: int, gen: torch.Generator, *, best_of: bool = False) -> torch.Tensor:
    """Hard responsibilities from scikit-learn's ``KMeans``: greedy k-means++ seeding (Arthur & Vassilvitskii
    2007) and Lloyd iterations, as scikit-learn's ``GaussianMixture`` starts.

    One k-means run by default (each of several EM starts gets its own, which keeps the starts diverse).
    With ``best_of`` (a fit with a single start) the start is made robust: the best of
    :data:`KMEANS_REPEATS` k-means runs by inertia, computed on a random subsample when the data are more
    than twice its size and then refined by Lloyd iterations on all rows (initialisation on a subset, as
    mclust does for large data; Fraley, Raftery & Wehrens 2005). On 20000 × 20 with K = 10 one k-means
    run ends in a merged-cluster local optimum for 10 of 30 seeds; the best of 5 on 1000 rows, refined,
    for none, at the cost of one full run (~28 ms). Fewer distinct rows than components is not an error
    here (EM then decides), so scikit-learn's warning about it is silenced.
    """
    x = points.cpu().numpy()
    seed = _sklearn_seed(gen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SklearnConvergenceWarning)
        if not best_of:
            return _hard(KMeans(k, n_init=1, random_state=seed).fit(x).labels_, k)
        size = max(SUBSAMPLE_MIN, SUBSAMPLE_PER_COMPONENT * k)
        if x.shape[0] <= 2 * size:
            return _hard(KMeans(k, n_init=KMEANS_REPEATS, random_state=seed).fit(x).labels_, k)
        rows = np.random.default_rng(seed).choice(x.shape[0], size, replace=False)
        centres = KMeans(k, n_init=KMEANS_REPEATS, random_state=seed).fit(x[rows]).cluster_centers_
        return _hard(KMeans(k, init=centres, n_init=1).fit(x).labels_, k)


def _kmeans_plus_plus(points: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """Hard responsibilities from k-means++ seeding alone (scikit-learn's ``kmeans_plusplus``): each row
    goes to its nearest seed."""
    x = points.cpu().numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SklearnConvergenceWarning)
        centres, _ = kmeans_plusplus(x, k, random_state=_sklearn_seed(gen))
    dist2 = (x * x).sum(1)[:, None] - 2 * x @ centres.T + (centres * centres).sum(1)
    return _hard(dist2.argmin(1), k)


def _random_resp(points: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """Uniform random responsibilities, normalised per row."""
    r = torch.rand(points.shape[0], k, generator=gen, dtype=points.dtype, device=gen.device)
    return r / r.sum(1, keepdim=True)


INITIALISATIONS = {"kmeans": _kmeans, "kmeans++": _kmeans_plus_plus, "random": _random_resp}


def initial_responsibilities(fam: Any, init: Any, gen: torch.Generator, *, single: bool = False) -> torch.Tensor:
    """Starting τ from :data:`INITIALISATIONS` (``None`` picks the family's default); ``single`` says the
    fit has only this start (k-means is then made robust, :func:`_kmeans`). For latent class models hard
    k-means assignments are mixed with the uniform (weight 0.2): a level probability that starts at
    exactly 0 stays 0 under EM, which traps it at the boundary."""
    if init is None:
        init = fam.default_init
    if not isinstance(init, str) or init not in INITIALISATIONS:
        raise DataError(f"init must be one of {sorted(INITIALISATIONS)} or a dict of starting values; got {init!r}.")
    if init == "kmeans":
        resp = _kmeans(fam.init_points(), fam.k, gen, best_of=single)
    else:
        resp = INITIALISATIONS[init](fam.init_points(), fam.k, gen)
    if fam.kind == "categorical" and init != "random":
        resp = 0.8 * resp + 0.2 / fam.k
    return resp.to(fam.device)


def initial_params(fam: Any, init: Any, gen: torch.Generator, reg: Any) -> dict[str, torch.Tensor]:
    """Starting parameters: one M-step from :func:`initial_responsibilities`, from given responsibilities
    (``init={"responsibilities": (n, K)}``), or the given parameters themselves."""
    if isinstance(init, dict):
        if "responsibilities" in init:
            resp = torch.as_tensor(np.asarray(init["responsibilities"], dtype=np.float64), device=fam.device)
            if resp.shape != (fam.n, fam.k) or not bool(torch.isfinite(resp).all()) or bool((resp < 0).any()):
                raise DataError(
                    f"init['responsibilities'] must have shape (n_samples, K) = {(fam.n, fam.k)} with finite "
                    f"non-negative entries; got shape {tuple(resp.shape)}."
                )
            return fam.m_step(resp, reg)
        return fam.import_(init, reg)
    return fam.m_step(initial_responsibilities(fam, init, gen), reg)
