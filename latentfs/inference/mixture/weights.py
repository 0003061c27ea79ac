"""Which features separate the components of a mixture: the between-component share of variance.

For feature j of a mixture with weights η_k, the law of total variance splits Var(y_j) into a
between-component part B_j = Σ_k η_k (μ_kj − μ̄_j)², μ̄_j = Σ_k η_k μ_kj, and a within part
W_j = Σ_k η_k σ²_kj (σ²_kj the j-th diagonal entry of Σ_k). The score is

    R²_j = B_j / (B_j + W_j) ∈ [0, 1]

(the population η² / correlation ratio of feature j with z). For a categorical item, the same split
applied to its level indicators gives B_i = Σ_k η_k Σ_s (θ_iks − θ̄_is)² and W_i = Σ_k η_k Σ_s θ_iks(1 − θ_iks),
with B + W = 1 − Σ_s θ̄_is² (the Gini variance of the item). The score does not depend on the labels of the
components, so draws need no alignment. A feature that carries no information about z scores 0; one
that determines z scores near 1. It is a marginal measure: a feature that separates components only
jointly with others (through correlations) can score low. Related: the feature saliency of Law,
Figueiredo & Jain (2004), which Titterington (2006) §1.10 lists among posterior → feature weights.

Bands come from Gibbs draws (one score per draw), from draws of a VB posterior, or from the
nonparametric bootstrap of an EM fit (:func:`bootstrap_feature_weights`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from latentfs.core.base import BaseSelector
from latentfs.core.data import DataError
from latentfs.core.weights import FeatureWeights

__all__ = ["MixtureSeparationSelector", "between_share", "bootstrap_feature_weights", "mixture_feature_weights"]

_METHOD = "mixture.between_share"


# σ²_kj, shape (…, K, d), from a covariance in the model's site shape for each covariance type (batched).
_WITHIN_VARIANCE = {
    "full": lambda c, k, d: np.diagonal(c, axis1=-2, axis2=-1),
    "tied": lambda c, k, d: np.broadcast_to(np.diagonal(c, axis1=-2, axis2=-1)[..., None, :], (*c.shape[:-2], k, d)),
    "diag": lambda c, k, d: c,
    "spherical": lambda c, k, d: np.broadcast_to(c[..., None], (*c.shape, d)),
    "tied_diag": lambda c, k, d: np.broadcast_to(c[..., None, :], (*c.shape[:-1], k, d)),
}


def between_share(
    weights: np.ndarray,
    *,
    means: np.ndarray | None = None,
    covariance: np.ndarray | None = None,
    covariance_type: str = "full",
    item_probs: np.ndarray | None = None,
) -> np.ndarray:
    """R²_j = B_j / (B_j + W_j) per feature (batched over leading axes of the inputs).

    Pass ``means`` (…, K, d) with ``covariance`` (the model's site shape for ``covariance_type``) for
    Gaussian mixtures, or
    ``item_probs`` (…, K, p) (binary, P(y=1)) or (…, K, p, S) (categorical) for latent class models.

    Examples
    --------
    >>> w = np.array([0.5, 0.5])
    >>> between_share(w, means=np.array([[0.0, 0.0], [2.0, 0.0]]), covariance=np.ones((2, 2)),
    ...               covariance_type="diag").round(3).tolist()
    [0.5, 0.0]
    """
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum(-1, keepdims=True)
    if item_probs is not None:
        p = np.asarray(item_probs, dtype=np.float64)
        if p.ndim == w.ndim + 1:  # binary: P(y = 1) → levels (0, 1)
            p = np.stack([1 - p, p], -1)
        wk = w[..., :, None, None]
        pbar = (wk * p).sum(-3, keepdims=True)
        between = (wk * (p - pbar) ** 2).sum((-3, -1))
        within = (wk * p * (1 - p)).sum((-3, -1))
    elif means is not None and covariance is not None:
        mu = np.asarray(means, dtype=np.float64)
        k, d = mu.shape[-2:]
        if covariance_type not in _WITHIN_VARIANCE:
            raise DataError(f"covariance_type must be one of {sorted(_WITHIN_VARIANCE)}; got {covariance_type!r}.")
        var = _WITHIN_VARIANCE[covariance_type](np.asarray(covariance, dtype=np.float64), k, d)
        wk = w[..., :, None]
        mbar = (wk * mu).sum(-2, keepdims=True)
        between = (wk * (mu - mbar) ** 2).sum(-2)
        within = (wk * var).sum(-2)
    else:
        raise DataError("between_share needs means and covariance (Gaussian) or item_probs (latent class).")
    total = between + within
    return np.where(total > 0, between / np.where(total > 0, total, 1.0), 0.0)


def _scores_of(draw: dict[str, np.ndarray], covariance_type: str) -> np.ndarray:
    if "item_probs" in draw:
        return between_share(draw["weights"], item_probs=draw["item_probs"])
    return between_share(
        draw["weights"], means=draw["means"], covariance=draw["covariance"], covariance_type=covariance_type
    )


def mixture_feature_weights(result: Any, *, num_draws: int = 200, seed: int = 0) -> FeatureWeights:
    """Between-component share of variance per feature from a fitted mixture :class:`Posterior`.

    Gibbs results give one score per draw (all chains); VB results are drawn from (weights and means from
    their fitted distributions, covariance at its plug-in value); EM results give a point score without draws
    (use :func:`bootstrap_feature_weights` for a band). The score is the mean over draws.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.mixture import GaussianMixture
    >>> gm = GaussianMixture(2, covariance_type="diag")
    >>> rng = np.random.default_rng(0)    # two unit-variance clusters apart along the first feature only
    >>> X = rng.normal(size=(200, 3)) + np.repeat([[0.0, 0, 0], [6.0, 0, 0]], 100, axis=0)
    >>> fw = mixture_feature_weights(latentfs.fit(gm, X, method="em", seed=0))
    >>> fw.top(1)
    ['x0']
    """
    sites = getattr(result, "sites", None)
    if sites is None or "weights" not in sites:
        raise DataError(f"result must be a fitted mixture Posterior; got {type(result).__name__}.")
    keys = ["weights", "item_probs"] if "item_probs" in sites else ["weights", "means", "covariance"]
    names = result.coords.get("item" if "item_probs" in sites else "feature")
    draws = None
    ct = result.hyperparameters.get("covariance_type", "full")
    if result.method == "em":
        scores = _scores_of({s: result.mean(s) for s in keys}, ct)
    else:
        arr = {s: result.samples(s, num_draws, seed=seed) for s in keys}
        flat = {s: a.reshape(-1, *a.shape[2:]) for s, a in arr.items()}
        draws = _scores_of(flat, ct)
        scores = draws.mean(0)
    return FeatureWeights(
        scores,
        _METHOD,
        feature_names=names,
        draws=draws,
        info={"definition": "B_j / (B_j + W_j), between-component share of variance", "source": result.method},
    )


def bootstrap_feature_weights(
    model: Any, X: Any, *, n_bootstrap: int = 50, seed: int = 0, n_init: int = 2, **fit_options: Any
) -> FeatureWeights:
    """EM fit of ``model`` with a nonparametric bootstrap band (rows resampled, EM refitted each time).

    Examples
    --------
    >>> from latentfs.models.mixture import LatentClass
    >>> lc = LatentClass(2)
    >>> X = lc.simulate(150, 4, params={"item_probs": [[.9, .9, .5, .5], [.1, .1, .5, .5]]}, seed=0)["items"]
    >>> fw = bootstrap_feature_weights(lc, X, n_bootstrap=5, seed=0)
    >>> fw.draws.shape, fw.top(2) in (['x0', 'x1'], ['x1', 'x0'])
    ((5, 4), True)
    """
    from latentfs.core.registry import fit
    from latentfs.inference.mixture.em import family_for
    from latentfs.inference.mixture.model_selection import accepted_replicates

    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)) or n_bootstrap < 2:
        raise DataError(f"n_bootstrap must be an integer ≥ 2; got {n_bootstrap!r}.")
    opts = {"warn": False, **fit_options}
    base = fit(model, X, method="em", seed=seed, n_init=n_init, **opts)
    point = mixture_feature_weights(base)
    raw = family_for(model, X).raw
    rng = np.random.default_rng(seed)

    def replicate() -> np.ndarray:
        idx = rng.integers(0, raw.shape[0], raw.shape[0])
        res = fit(model, raw[idx], method="em", seed=int(rng.integers(2**31)), n_init=n_init, **opts)
        return mixture_feature_weights(res).scores

    def give_up(rejected: int) -> str:
        return (
            f"bootstrap_feature_weights could not fit {rejected} resampled data sets (constant columns or "
            "collapsed components). Use more data, fewer components or a larger reg_covar."
        )

    draws = accepted_replicates(n_bootstrap, replicate, give_up)
    return FeatureWeights(
        point.scores,
        _METHOD,
        feature_names=point.feature_names,
        draws=np.asarray(draws),
        info={**point.info, "source": "em+bootstrap", "n_bootstrap": int(n_bootstrap)},
    )


class MixtureSeparationSelector(BaseSelector):
    """Keep the features that best separate the components of a mixture fitted by EM.

    Parameters
    ----------
    model : GaussianMixture, LatentProfile or LatentClass
        The mixture model (a parameter: it is not changed by ``fit``).
    n_features_to_select : int, optional
        Keep the top k; or ``threshold`` on the score R²_j; neither keeps all.
    threshold : float, optional
    seed : int, Generator or None, default 0
        Randomness of the EM starts.

    Attributes
    ----------
    weights_ : FeatureWeights
        R²_j per feature.
    support_ : ndarray of bool (n_features,)
    result_ : Posterior
        The EM fit.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` in ``fit`` had string column names.

    Examples
    --------
    >>> from latentfs.models.mixture import LatentProfile
    >>> lp = LatentProfile(2)
    >>> planted = {"means": [[0, 0, 0, 0], [5, 0, 0, 0]], "precision": [1.0, 1.0, 1.0, 1.0]}
    >>> X = lp.simulate(200, 4, params=planted, seed=0)["data"]
    >>> MixtureSeparationSelector(lp, n_features_to_select=1).fit(X).get_support().tolist()
    [True, False, False, False]
    """

    _min_samples = 2  # a mixture of one row has no components to separate

    def __init__(
        self, model: Any, *, n_features_to_select: int | None = None, threshold: float | None = None, seed: Any = 0
    ) -> None:
        self.model = model
        self.n_features_to_select = n_features_to_select
        self.threshold = threshold
        self.seed = seed

    def _fit(self, X: Any, y: Any) -> FeatureWeights:
        from latentfs.core.registry import fit

        self.result_ = fit(self.model, X, method="em", seed=self.seed)
        return mixture_feature_weights(self.result_)
