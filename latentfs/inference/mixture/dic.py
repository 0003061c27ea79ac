"""Deviance information criterion for the mixture engines' posteriors; Titterington (2006) §1.7.

Spiegelhalter, Best, Carlin & van der Linde (2002), "Bayesian measures of model complexity and fit",
J. R. Statist. Soc. B 64, 583–639: with the deviance Δ(θ) = −2 log f(y | θ),

    p_D = E[Δ(θ) | y] − Δ(θ̄),   DIC = E[Δ(θ) | y] + p_D = Δ(θ̄) + 2 p_D     (minimise),

θ̄ the posterior mean. For a mixture θ̄ is meaningless unless the draws share one labelling, so ``"dic1"``
uses the result's *aligned* draws (the Gibbs engine relabels every draw, Stephens 2000), and θ̄ is the
posterior mean of the weights, the means and the precisions (the conjugate prior's parameters; DIC depends
on the parametrisation of θ̄). Celeux, Forbes, Robert & Titterington (2006), "Deviance information criteria
for missing data models", Bayesian Analysis 1, 651–674, compare variants; their DIC_3 replaces f(y | θ̄) by
the posterior predictive density of each observation, f̂(y_n) = E[f(y_n | θ) | y], which is label-invariant:

    p_D3 = E[Δ(θ) | y] + 2 Σ_n log f̂(y_n),   DIC_3 = −4 E[log f(y | θ) | y] + 2 Σ_n log f̂(y_n)   (``"dic3"``).

Draws come from the sampler (``method="gibbs"``, ``"rjmcmc"``) or from the variational posterior q
(``method="vb"``: w ~ Dirichlet, Λ ~ Wishart / Gamma, μ | Λ ~ N(m, (κΛ)⁻¹), Bishop 2006 eq. 10.59). For a
reversible-jump result only DIC_3 is defined (θ̄ would average parameter vectors of different lengths).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch
from scipy.special import logsumexp

from latentfs.core.data import DataError, check_choice, check_int
from latentfs.inference.mixture.reversible_jump import spaced_draws

__all__ = ["DIC_VARIANTS", "DICWarning", "dic", "dic_from_loglik", "pointwise_log_likelihood"]

DIC_VARIANTS = ("dic1", "dic3")


class DICWarning(UserWarning):
    """p_D came out negative: Δ(θ̄) exceeds the mean deviance, so θ̄ is not a representative parameter value
    (label switching an alignment could not undo, or a multimodal posterior); DIC_1 is then unreliable
    (Spiegelhalter et al. 2002, §2.6; Celeux et al. 2006, §3)."""


def dic_from_loglik(
    pointwise: Any, loglik_at_mean: Any = None, *, variant: str = "dic1"
) -> dict[str, float]:
    """DIC from pointwise log-likelihoods of posterior draws.

    Parameters
    ----------
    pointwise : array (S, n) or (chain, draw, n)
        log f(y_n | θ_s) for draws θ_s of the posterior.
    loglik_at_mean : array (n,) or float, optional
        log f(y_n | θ̄) (or its sum); needed for ``"dic1"``.
    variant : {"dic1", "dic3"}

    Returns
    -------
    dict with ``dic``, ``p_d``, ``mean_deviance``, ``variant``, ``n_draws`` and ``deviance_at_mean`` (dic1)
    or ``log_predictive`` Σ_n log f̂(y_n) (dic3).

    Examples
    --------
    Normal mean, known σ = 1, flat prior: μ | y ~ N(ȳ, 1/n) and p_D = 1 (Spiegelhalter et al. 2002).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(0.3, 1.0, 50)
    >>> mu = y.mean() + rng.normal(0, 1 / np.sqrt(50), 20000)
    >>> ll = lambda m: -0.5 * np.log(2 * np.pi) - 0.5 * (y - np.asarray(m)[..., None]) ** 2
    >>> out = dic_from_loglik(ll(mu), ll(mu.mean()))
    >>> round(out["p_d"], 1)
    1.0
    """
    check_choice("variant", variant, DIC_VARIANTS)
    ll = np.asarray(pointwise, dtype=np.float64)
    if ll.ndim == 3:
        ll = ll.reshape(-1, ll.shape[-1])
    if ll.ndim != 2 or ll.shape[0] < 2 or ll.shape[1] < 1:
        raise DataError(
            f"pointwise must be (draws, n) or (chain, draw, n) log-likelihoods with at least 2 draws; got shape "
            f"{np.shape(pointwise)}. Pass the pointwise log-likelihood of posterior draws."
        )
    if not np.all(np.isfinite(ll)):
        raise DataError("pointwise must be finite log-likelihoods; it holds NaN or ±inf. Check the draws.")
    mean_dev = float(-2.0 * ll.sum(1).mean())
    out: dict[str, Any] = {"variant": variant, "mean_deviance": mean_dev, "n_draws": int(ll.shape[0])}
    if variant == "dic1":
        if loglik_at_mean is None:
            raise DataError("loglik_at_mean is needed for variant='dic1' (log f(y | θ̄)); or use variant='dic3'.")
        dev_bar = float(-2.0 * np.sum(loglik_at_mean))
        p_d = mean_dev - dev_bar
        out.update(deviance_at_mean=dev_bar)
    else:
        log_pred = float((logsumexp(ll, axis=0) - math.log(ll.shape[0])).sum())
        p_d = mean_dev + 2.0 * log_pred
        out.update(log_predictive=log_pred)
    out.update(p_d=float(p_d), dic=float(mean_dev + p_d))
    return out


# ----------------------------------------------------------------------------- mixtures
def _family(result: Any, X: Any) -> Any:
    """The prepared data of the result's model (its likelihood only: the prior plays no part)."""
    from latentfs.inference.mixture.families import family_for
    from latentfs.models.mixture import GaussianMixture, LatentClass

    hp = result.hyperparameters
    k = int(hp["n_components"])
    if result.model == "LatentClass":
        model: Any = LatentClass(k, n_levels=hp.get("n_levels"))
    elif result.model in ("GaussianMixture", "LatentProfile"):
        model = GaussianMixture(k, covariance_type=str(hp["covariance_type"]))
    else:
        raise DataError(
            f"result must come from a mixture engine (GaussianMixture, LatentProfile, LatentClass or "
            f"UnivariateMixtureK); got model {result.model!r}."
        )
    fam = family_for(model, X)
    n_obs = result.diagnostics.get("n_observations")
    if n_obs is not None and int(n_obs) != fam.n:
        raise DataError(
            f"X must be the data the result was fitted to: it has {fam.n} rows, the fit had {int(n_obs)}. "
            "Pass the same X."
        )
    return fam


def _pointwise_at(fam: Any, given: dict[str, np.ndarray]) -> np.ndarray:
    from latentfs.inference.mixture.families import log_joint_components

    params = fam.import_(given, 0.0)
    return torch.logsumexp(log_joint_components(fam, params), 1).numpy()


def _vb_draws(result: Any, num_draws: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Joint draws from q: weights and precisions from their fitted families, means | precision."""
    rng = np.random.default_rng(seed)
    weights = result.samples("weights", num_draws, seed=seed)[0]
    if "item_probs" in result.sites:
        raise DataError(
            "dic of a variational LatentClass fit is not available (its item probabilities are stored as a point); "
            "use method='gibbs'."
        )
    prec = result.samples("precision", num_draws, seed=seed + 1)[0]
    fm = result.fitted_params("means")
    loc, kappa = fm["loc"], fm["kappa"]
    kdim, d = loc.shape
    ct = result.hyperparameters["covariance_type"]
    draws = []
    for s in range(num_draws):
        lam = prec[s]
        if ct in ("full", "tied"):
            lam_k = np.broadcast_to(lam, (kdim, d, d))
            chol = np.linalg.cholesky(lam_k * kappa[:, None, None])
            eps = rng.standard_normal((kdim, d, 1))
            means = loc + np.linalg.solve(np.swapaxes(chol, -1, -2), eps)[..., 0]
        else:
            if ct == "diag":
                lam_kd = lam
            elif ct == "spherical":
                lam_kd = np.broadcast_to(np.reshape(lam, (kdim, 1)), (kdim, d))
            else:  # tied_diag
                lam_kd = np.broadcast_to(lam, (kdim, d))
            means = loc + rng.standard_normal((kdim, d)) / np.sqrt(kappa.reshape(kdim, -1) * lam_kd)
        draws.append({"weights": weights[s], "means": means, "precision": lam})
    return draws


def _rj_pointwise(result: Any, y: np.ndarray, num_draws: int) -> np.ndarray:
    w, mu, s2 = spaced_draws(result, num_draws)
    empty = np.isnan(w)
    logw = np.where(empty, -np.inf, np.log(np.where(empty, 1.0, w)))
    mu, s2 = np.where(empty, 0.0, mu), np.where(empty, 1.0, s2)
    out = np.empty((w.shape[0], y.size))
    for a in range(0, w.shape[0], 256):
        sl = slice(a, a + 256)
        lj = (logw[sl, None, :] - 0.5 * np.log(2 * np.pi * s2[sl, None, :])
              - 0.5 * (y[None, :, None] - mu[sl, None, :]) ** 2 / s2[sl, None, :])
        out[sl] = logsumexp(lj, axis=-1)
    return out


def pointwise_log_likelihood(result: Any, X: Any, *, num_draws: int = 1000, seed: int = 0) -> np.ndarray:
    """log f(x_n | θ_s) for posterior draws θ_s of a mixture result, shape (S, n).

    Samplers (``gibbs``, ``rjmcmc``): the stored draws (at most ``num_draws``, evenly spaced, for
    ``rjmcmc``; all of them for ``gibbs``, whose pointwise values are stored by the engine); ``vb``:
    ``num_draws`` joint draws from q (seeded by ``seed``).
    """
    num_draws = check_int("num_draws", num_draws, low=2, remedy="Use several hundred draws.")
    method = getattr(result, "method", None)
    if method == "rjmcmc":
        from latentfs.models.mixture import UnivariateMixtureK

        y = UnivariateMixtureK().check_data(X, name="X")
        if int(result.diagnostics.get("n_observations", y.size)) != y.size:
            raise DataError(
                f"X must be the data the result was fitted to: it has {y.size} values, the fit had "
                f"{result.diagnostics['n_observations']}. Pass the same X."
            )
        return _rj_pointwise(result, y, num_draws)
    if method not in ("gibbs", "vb"):
        raise DataError(
            f"result must be a posterior of a mixture from method 'gibbs', 'vb' or 'rjmcmc'; got method {method!r}. "
            "DIC needs posterior draws (an EM fit has none: use information_criteria for AIC/BIC)."
        )
    fam = _family(result, X)
    if method == "gibbs":
        stored = result.log_likelihood
        if stored is not None and stored.shape[-1] == fam.n:
            return stored.reshape(-1, fam.n)
        sites = ["weights", "item_probs"] if "item_probs" in result.sites else ["weights", "means", "precision"]
        arrs = {s: result.samples(s).reshape(-1, *result.samples(s).shape[2:]) for s in sites}
        n_draws = arrs["weights"].shape[0]
        return np.stack([_pointwise_at(fam, {s: a[i] for s, a in arrs.items()}) for i in range(n_draws)])
    return np.stack([_pointwise_at(fam, g) for g in _vb_draws(result, num_draws, seed)])


def _loglik_at_posterior_mean(result: Any, X: Any) -> np.ndarray:
    if result.method == "rjmcmc":
        raise DataError(
            "variant='dic1' is not defined for a reversible-jump result: the posterior mean would average "
            "parameter vectors of different lengths. Use variant='dic3' (label- and dimension-invariant)."
        )
    fam = _family(result, X)
    if result.method == "gibbs" and result.alignment is None and int(result.hyperparameters["n_components"]) > 1:
        raise DataError(
            "variant='dic1' needs draws with one labelling; this result is not aligned. Call "
            "result.align('means') (or 'item_probs') first, or use variant='dic3'."
        )
    sites = ["weights", "item_probs"] if "item_probs" in result.sites else ["weights", "means", "precision"]
    return _pointwise_at(fam, {s: result.mean(s) for s in sites})


def dic(result: Any, X: Any, variant: str = "dic1", *, num_draws: int = 1000, seed: int = 0) -> dict[str, float]:
    """DIC of a mixture posterior (``latentfs.fit(..., method="gibbs" | "vb" | "rjmcmc")``) on its data ``X``.

    Parameters
    ----------
    result : Posterior
    X : the data the result was fitted to.
    variant : {"dic1", "dic3"}
        ``"dic1"``: Spiegelhalter et al. (2002) at the posterior mean of the aligned weights, means and
        precisions (item probabilities for latent class models). ``"dic3"``: Celeux et al. (2006), with the
        posterior predictive density of each observation (label-invariant; the only one for ``rjmcmc``).
    num_draws : int
        Draws from q for ``vb``; the most draws used for ``rjmcmc``.
    seed : int

    Returns
    -------
    dict: ``dic``, ``p_d``, ``mean_deviance``, ``deviance_at_mean`` or ``log_predictive``, ``variant``,
    ``n_draws``. Smaller DIC is better.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.mixture import GaussianMixture
    >>> gm = GaussianMixture(1)
    >>> X = gm.simulate(400, 1, seed=0)["data"]
    >>> post = latentfs.fit(gm, X, method="gibbs", num_chains=2, num_warmup=50, num_samples=400, seed=0, warn=False)
    >>> out = dic(post, X)
    >>> 1.5 < out["p_d"] < 2.5  # a mean and a variance
    True
    """
    check_choice("variant", variant, DIC_VARIANTS)
    pointwise = pointwise_log_likelihood(result, X, num_draws=num_draws, seed=seed)
    at_mean = _loglik_at_posterior_mean(result, X) if variant == "dic1" else None
    out = dic_from_loglik(pointwise, at_mean, variant=variant)
    if out["p_d"] < 0:
        warnings.warn(
            f"p_D = {out['p_d']:.3g} < 0 for {result.model} ({result.method}, K = "
            f"{result.hyperparameters.get('n_components')}): the posterior mean is not a representative "
            "parameter (labels switch in a way alignment cannot undo, typically with more components than the "
            "data support), so DIC_1 is unreliable. Use variant='dic3'.",
            DICWarning,
            stacklevel=2,
        )
    return out
