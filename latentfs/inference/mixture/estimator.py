"""Finite mixtures as scikit-learn clusterers: :class:`GaussianMixtureClusterer`,
:class:`LatentProfileClusterer` and :class:`LatentClassClusterer` fit the Pyro declarations of
:mod:`latentfs.models.mixture` with any of their engines (EM, VB, Gibbs).

New rows are scored with the engines' own component densities (:func:`~latentfs.inference.mixture.em.family_for`)
at the fitted parameters (the posterior means for VB and Gibbs): ``predict_proba`` gives the
responsibilities τ_nk = η_k g_k(x_n) / Σ_l η_l g_l(x_n) (Titterington 2006, §1.4), ``predict`` their
arg max, ``score_samples`` log Σ_k η_k g_k(x_n) and ``score`` its mean.

scikit-learn's ``GaussianMixture`` attributes, with its meanings: ``weights_``, ``means_``, ``covariances_``
(Gaussian estimators; shapes per ``covariance_type`` as scikit-learn's, plus ``tied_diag``: one shared diagonal,
``(n_features,)``), ``converged_`` and ``n_iter_``; ``bic(X)`` = −2 log L(X) + p log n and ``aic(X)`` = −2 log L(X)
+ 2p, with log L(X) = Σ_n ``score_samples`` and p the model's free parameters
(:meth:`~latentfs.models.mixture.GaussianMixture.n_parameters`; Schwarz 1978, Akaike 1974).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.linalg

from latentfs.core.estimator import LatentClusterer
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

__all__ = ["GaussianMixtureClusterer", "LatentClassClusterer", "LatentProfileClusterer"]


class _MixtureEstimator(LatentClusterer):
    """Shared code: the fitted attributes, the component densities, ``partial_fit`` and the information criteria;
    the prediction methods are :class:`~latentfs.core.estimator.LatentClusterer`'s; subclasses build the model."""

    _min_samples = 2
    _param_sites: tuple[str, ...] = ("weights", "means", "covariance")

    def _after_fit(self, X: Any) -> None:
        post = self.posterior_
        self.weights_ = np.asarray(post.mean("weights"), dtype=np.float64)
        self.components_ = np.asarray(post.mean(self._param_sites[1]), dtype=np.float64)
        self.components_ = self.components_.reshape(self.components_.shape[0], -1)
        if "means" in self._param_sites:
            self.means_ = np.asarray(post.mean("means"), dtype=np.float64)
            self.covariances_ = np.asarray(post.mean("covariance"), dtype=np.float64)
        # scikit-learn's meaning: whether the fit met its stopping rule (n_iter_ is set by LatentEstimator.fit). A
        # sampler has no stopping rule: converged_ is the R̂ / ESS rule on every site (Posterior.check_convergence).
        self.converged_ = bool(post._convergence_status()[0] == "converged")
        super()._after_fit(X)  # labels_

    def _log_joint_of(self, X: np.ndarray) -> Any:
        """log η_k + log g_k(x_n), (n, K) as a torch tensor, at the fitted parameters (posterior means)."""
        import torch

        log_weights = np.log(np.clip(self.weights_, 1e-300, None))
        return torch.as_tensor(self._log_component(X) + log_weights)

    def _log_component(self, X: np.ndarray) -> np.ndarray:
        """log g_k(x_n) of a Gaussian component, (n, K)."""
        post = self.posterior_
        means = np.asarray(post.mean("means"), dtype=np.float64)
        cov = np.asarray(post.mean("covariance"), dtype=np.float64)
        k, d = means.shape
        if cov.ndim == 3:
            full = cov  # full
        elif cov.ndim == 2 and cov.shape == (d, d) and self._covariance_type() == "tied":
            full = np.broadcast_to(cov, (k, d, d))
        elif cov.ndim == 2:
            full = np.stack([np.diag(c) for c in cov])  # diag
        elif cov.shape == (k,) and self._covariance_type() == "spherical":
            full = cov[:, None, None] * np.eye(d)
        else:
            full = np.broadcast_to(np.diag(cov), (k, d, d))  # tied_diag
        out = np.empty((X.shape[0], k))
        for j in range(k):
            chol = np.linalg.cholesky(full[j])
            z = scipy.linalg.solve_triangular(chol, (X - means[j]).T, lower=True)
            out[:, j] = -0.5 * (z**2).sum(0) - np.log(np.diag(chol)).sum() - 0.5 * d * math.log(2 * math.pi)
        return out

    def partial_fit(self, X: Any, y: Any = None, **online_options: Any) -> Any:
        """One stepwise EM update with the rows ``X`` (:mod:`latentfs.inference.mixture.online`).

        The first call (or the first after :meth:`fit`) starts the stream: ``X`` sets ``n_features_in_``,
        the centring and the variance floor's scale, and gives the start (a short batch EM on ``X``, seeded
        by ``seed``); ``online_options`` (``tau0``, ``kappa``, ``reg_covar``, ``init``, ``n_init``,
        ``e_step``) are taken at that call only. Later calls update the running statistics with step size
        ρ_t = (τ0 + t)^(−κ); ``X`` must have the ``n_features_in_`` columns seen first. ``method`` is not
        used; ``posterior_``, ``weights_``, ``components_`` are updated after each call and ``labels_`` holds
        the components of the rows of the last call.

        Examples
        --------
        >>> X = GaussianMixture(2, mean_precision=0.02).simulate(600, 2, seed=0)["data"]
        >>> gm = GaussianMixtureClusterer(2)
        >>> for chunk in np.array_split(X, 3):
        ...     gm = gm.partial_fit(chunk)
        >>> gm.posterior_.diagnostics["n_iter"], gm.predict(X[:4]).shape
        (3, (4,))
        """
        from latentfs.inference.mixture.online import online_em_init, online_posterior, partial_fit_state

        def start(X: Any, **options: Any) -> Any:
            names = getattr(self, "feature_names_in_", None)
            return online_em_init(self._make_model(), X.shape[1], seed=self.seed, feature_names=names, **options)

        return self._stream_update(X, online_options, start, partial_fit_state, online_posterior)

    def _covariance_type(self) -> str:
        return str(self._make_model().covariance_type)

    def _n_parameters(self) -> int:
        """Free parameters of the fitted model (the count scikit-learn's ``GaussianMixture._n_parameters`` gives
        for its covariance types)."""
        self._check_fitted()
        return int(self._make_model().n_parameters(self.n_features_in_))

    def bic(self, X: Any) -> float:
        """Bayesian information criterion of ``X`` at the fitted parameters: −2 log L(X) + p log n (lower is
        better; Schwarz 1978), p the free parameters, n the rows of ``X``; scikit-learn's definition."""
        log_lik = self.score_samples(X)
        return float(-2.0 * log_lik.sum() + self._n_parameters() * math.log(log_lik.shape[0]))

    def aic(self, X: Any) -> float:
        """Akaike information criterion of ``X`` at the fitted parameters: −2 log L(X) + 2p (lower is better;
        Akaike 1974); scikit-learn's definition."""
        return float(-2.0 * self.score_samples(X).sum() + 2 * self._n_parameters())


class GaussianMixtureClusterer(_MixtureEstimator):
    """Gaussian mixture (:class:`~latentfs.models.mixture.GaussianMixture`) with the scikit-learn contract.

    Parameters
    ----------
    n_components : int, default 2
    covariance_type : {"full", "diag", "spherical", "tied", "tied_diag"}
    weight_concentration, mean_precision, degrees_of_freedom : priors of the Bayesian engines
        (see :class:`~latentfs.models.mixture.GaussianMixture`).
    method : {"em", "vb", "gibbs"}, default "em"
    seed : int, default 0
    n_init : int or "auto", default 1
        Starts of EM/VB, as scikit-learn's default. ``None`` or ``"auto"`` gives :func:`latentfs.fit`'s rule
        (:func:`~latentfs.inference.mixture.em.auto_n_init`: 10 starts on data as small as wine, each given a
        short run, the best continued). Measured with 20 seeds (``benchmarks/mixture_n_init.py``, one thread):
        on standardised wine (K = 3, full) one start ends at a per-sample log-likelihood of −11.646 or higher in
        19 of 20 seeds, the 10 short-run starts at −11.739 in 18 of 20, and take 2–3× as long (0.07 s against
        0.03 s); on iris and Old Faithful both reach the same optimum in 20 of 20 at 4–7× the time. No fit in
        either setting ended with a collapsed component. Several starts remain the remedy when a fit warns of
        one (:class:`~latentfs.inference.mixture.em.CollapsedComponentWarning`).
    max_iter, tol : optional (EM, VB); num_chains, num_warmup, num_samples : optional (Gibbs).

    Attributes
    ----------
    posterior_ : Posterior
    weights_ : ndarray (n_components,)
    means_ : ndarray (n_components, n_features)
    covariances_ : ndarray, shaped by ``covariance_type`` as in scikit-learn: full (n_components, n_features,
        n_features), diag (n_components, n_features), spherical (n_components,), tied (n_features, n_features);
        tied_diag (n_features,)
    converged_ : bool, the stopping rule was met (EM, VB), or every site passed the R̂ / ESS rule (Gibbs)
    n_iter_ : int, iterations of the kept start (EM, VB); the sweeps per chain, warm-up included (Gibbs)
    components_ : ndarray (n_components, n_features), the component means
    labels_ : ndarray (n_samples,), the component of each training row

    Examples
    --------
    >>> X = GaussianMixture(2, mean_precision=0.02).simulate(100, 2, seed=0)["data"]
    >>> gm = GaussianMixtureClusterer(2).fit(X)
    >>> gm.predict_proba(X).shape, gm.labels_.shape, gm.means_.shape, gm.covariances_.shape
    ((100, 2), (100,), (2, 2), (2, 2, 2))
    >>> bool(gm.bic(X) > gm.aic(X))  # log 100 > 2: BIC charges each of the 11 parameters more
    True
    """

    _feature_prefix = "gaussianmixtureclusterer"  # scikit-learn's style of output names: the class name, lower-cased
    def __init__(
        self,
        n_components: int = 2,
        *,
        covariance_type: str = "full",
        weight_concentration: float = 1.0,
        mean_precision: float | None = None,
        degrees_of_freedom: float | None = None,
        method: str = "em",
        seed: int | None = 0,
        max_iter: int | None = None,
        tol: float | None = None,
        n_init: int | str | None = 1,
        num_chains: int | None = None,
        num_warmup: int | None = None,
        num_samples: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.weight_concentration = weight_concentration
        self.mean_precision = mean_precision
        self.degrees_of_freedom = degrees_of_freedom
        self.method = method
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.num_chains = num_chains
        self.num_warmup = num_warmup
        self.num_samples = num_samples

    def _make_model(self) -> Any:
        return GaussianMixture(
            self.n_components,
            covariance_type=self.covariance_type,
            weight_concentration=self.weight_concentration,
            mean_precision=self.mean_precision,
            degrees_of_freedom=self.degrees_of_freedom,
        )


class LatentProfileClusterer(_MixtureEstimator):
    """Latent profile analysis (:class:`~latentfs.models.mixture.LatentProfile`) with the scikit-learn contract.

    Parameters
    ----------
    n_components : int, default 2
    variance : {"shared", "free"}
    method, seed, max_iter, tol, n_init, num_chains, num_warmup, num_samples : as
        :class:`GaussianMixtureClusterer`.
    """

    _feature_prefix = "latentprofileclusterer"  # scikit-learn's style of output names: the class name, lower-cased
    def __init__(
        self,
        n_components: int = 2,
        *,
        variance: str = "shared",
        method: str = "em",
        seed: int | None = 0,
        max_iter: int | None = None,
        tol: float | None = None,
        n_init: int | None = None,
        num_chains: int | None = None,
        num_warmup: int | None = None,
        num_samples: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.variance = variance
        self.method = method
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.num_chains = num_chains
        self.num_warmup = num_warmup
        self.num_samples = num_samples

    def _make_model(self) -> Any:
        return LatentProfile(self.n_components, variance=self.variance)


class LatentClassClusterer(_MixtureEstimator):
    """Latent class analysis (:class:`~latentfs.models.mixture.LatentClass`) with the scikit-learn contract.

    Items are coded 0..S−1 (binary 0/1 when ``n_levels`` is None); ``components_`` holds each class's
    response probabilities, flattened.

    Parameters
    ----------
    n_components : int, default 2
    n_levels : int or list of int, optional
    method, seed, max_iter, tol, n_init, num_chains, num_warmup, num_samples : as
        :class:`GaussianMixtureClusterer`.
    """

    _feature_prefix = "latentclassclusterer"  # scikit-learn's style of output names: the class name, lower-cased
    _param_sites = ("weights", "item_probs")

    def _log_component(self, X: np.ndarray) -> np.ndarray:
        """log g_k(y_n) = Σ_i log θ_{i k y_ni} (local independence), (n, K)."""
        probs = np.asarray(self.posterior_.mean("item_probs"), dtype=np.float64)
        codes = X.astype(np.int64)
        if probs.ndim == 2:  # binary items: P(y = 1)
            p = np.clip(probs, 1e-300, None)
            q = np.clip(1 - probs, 1e-300, None)
            return codes @ np.log(p).T + (1 - codes) @ np.log(q).T
        levels = probs.shape[2]
        if (codes < 0).any() or (codes >= levels).any() or (codes != X).any():
            from latentfs.core.data import DataError

            raise DataError(f"X must hold item codes 0..{levels - 1} (as in fit); got values outside them.")
        logp = np.log(np.clip(probs, 1e-300, None))  # (K, items, levels)
        items = np.arange(X.shape[1])
        return logp[:, items[None, :], codes].sum(-1).T

    def __init__(
        self,
        n_components: int = 2,
        *,
        n_levels: Any = None,
        method: str = "em",
        seed: int | None = 0,
        max_iter: int | None = None,
        tol: float | None = None,
        n_init: int | None = None,
        num_chains: int | None = None,
        num_warmup: int | None = None,
        num_samples: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.n_levels = n_levels
        self.method = method
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.num_chains = num_chains
        self.num_warmup = num_warmup
        self.num_samples = num_samples

    def _make_model(self) -> Any:
        return LatentClass(self.n_components, n_levels=self.n_levels)
