"""Item discriminations as feature weights, and item characteristic curves.

An item's discrimination ‖α_j‖ is how sharply its answer changes with the traits: the slope of the logit
of P(y_j ≥ s | z) (Bartholomew, Knott & Moustaki 2011, §4.2). The Euclidean norm is invariant to the
rotation (and sign) of the traits, so it does not depend on the orientation a fit chose. A fit is a
point estimate: the weights carry no band unless bootstrap replicates are asked for (``n_bootstrap``),
each a refit of the engine on a resample of the people (Efron & Tibshirani 1993).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, as_rng, check_int
from latentfs.core.results import Posterior
from latentfs.core.weights import FeatureWeights
from latentfs.inference.latent_trait.quadrature import item_log_probs, params_from_posterior
from latentfs.models.latent_trait import LatentTrait

__all__ = ["discrimination_weights", "item_characteristic_curves"]


def _posterior_of(source: Any) -> Posterior:
    post = getattr(source, "posterior_", source)
    if not isinstance(post, Posterior) or post.model != "LatentTrait":
        raise DataError(
            "source must be a LatentTrait fit (a Posterior from latentfs.fit or a fitted LatentTraitAnalyzer); "
            f"got {type(source).__name__}."
        )
    return post


def discrimination_weights(
    source: Any, X: Any = None, *, n_bootstrap: int = 0, seed: Any = 0, **fit_options: Any
) -> FeatureWeights:
    """‖α_j‖ per item as :class:`~latentfs.core.weights.FeatureWeights` (module docstring).

    Parameters
    ----------
    source : Posterior or fitted LatentTraitAnalyzer
    X : array, optional
        The item codes the fit used; needed for ``n_bootstrap > 0``.
    n_bootstrap : int, default 0
        Bootstrap refits (people resampled with replacement) giving draws, hence a band; 0 gives points
        (no band). A resample in which some item loses a category is drawn again.
    seed : int
    **fit_options : passed to the engine for the refits (for example ``n_nodes``).

    Examples
    --------
    >>> import latentfs
    >>> lt = LatentTrait(1)
    >>> X = lt.simulate(400, intercepts=[0.0, 0.0, 0.0, 0.0], discrimination=[[3.0], [1.0], [0.2], [2.0]],
    ...                 seed=0)["items"]
    >>> discrimination_weights(latentfs.fit(lt, X)).ranking().tolist()
    [0, 3, 1, 2]
    """
    post = _posterior_of(source)
    n_bootstrap = check_int("n_bootstrap", n_bootstrap, low=0)
    A = np.asarray(post.mean("discrimination"), dtype=np.float64)
    scores = np.linalg.norm(A, axis=1)
    info: dict[str, Any] = {"definition": "||alpha_j||, the Euclidean norm of item j's discriminations"}
    draws = None
    if n_bootstrap > 0:
        if X is None:
            raise DataError("discrimination_weights needs X (the fitted item codes) for n_bootstrap > 0; pass X=...")
        from latentfs.core.registry import fit

        values = np.asarray(getattr(X, "values", X), dtype=np.float64)
        # The number of traits is read off the fitted discriminations, so a result saved before the
        # hyperparameter was renamed (n_traits -> n_components) refits the same model.
        model = LatentTrait(A.shape[1], n_levels=post.hyperparameters.get("n_levels"))
        rng = as_rng(seed)
        reps: list[np.ndarray] = []
        redrawn = 0
        while len(reps) < n_bootstrap:
            rows = rng.integers(0, values.shape[0], size=values.shape[0])
            try:
                refit = fit(model, values[rows], method=post.method, warn=False, **fit_options)
            except DataError:
                redrawn += 1
                if redrawn > 10 * n_bootstrap:
                    raise
                continue
            reps.append(np.linalg.norm(np.asarray(refit.mean("discrimination")), axis=1))
        draws = np.stack(reps)
        info.update({"band": f"bootstrap, {n_bootstrap} refits ({post.method})", "redrawn": redrawn})
    else:
        info["band"] = "none: the scores come from a point estimate"
    return FeatureWeights(scores, method="latent_trait.discrimination", feature_names=post.coords.get("item"),
                          draws=draws, info=info)


def item_characteristic_curves(source: Any, z: Any) -> np.ndarray:
    """P(y_j = s | z) at the fitted item parameters, shape (n_points, n_items, S_max) (padding 0).

    ``z`` is (n_points,) for one trait or (n_points, n_components). For a binary item P(y_j = 1 | z) is
    ``curves[:, j, 1]``, the item characteristic curve σ(α_j0 + α_jᵀ z).
    """
    post = _posterior_of(source)
    params = params_from_posterior(post)
    q = params.discrimination.shape[1]
    pts = np.asarray(z, dtype=np.float64)
    if pts.ndim == 1:
        pts = pts[:, None]
    if pts.ndim != 2 or pts.shape[1] != q:
        raise DataError(f"z must have shape (n_points,) or (n_points, {q}); got {np.shape(z)}.")
    levels = np.asarray(post.extras["levels"], dtype=np.int64)
    s_max = int(levels.max())
    s = np.arange(s_max)
    vt = torch.as_tensor(s[None, : s_max - 1] < (levels - 1)[:, None])
    vc = torch.as_tensor(s[None, :] < levels[:, None])
    logp = item_log_probs(params.intercepts, params.discrimination, torch.as_tensor(pts), vt, vc)
    probs = torch.where(vc[:, None, :], logp.exp(), torch.zeros_like(logp))
    return probs.permute(1, 0, 2).numpy()
