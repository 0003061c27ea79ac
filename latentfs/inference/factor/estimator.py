"""Factor analysis as scikit-learn estimators: :class:`FactorAnalyzer` fits
:class:`~latentfs.models.factor.FactorAnalysis` with any of its engines (EM, MAP, Gibbs), and
:class:`MixtureOfFactorAnalyzersClusterer` fits :class:`~latentfs.models.factor.MixtureOfFactorAnalyzers`.

With loadings W, noise variances Ψ and mean μ (posterior means for Gibbs), ``transform`` gives the factor
scores E[z | x] = (I + Wᵀ Ψ⁻¹ W)⁻¹ Wᵀ Ψ⁻¹ (x − μ) and ``score`` the mean log-likelihood of the rows under
x ~ N(μ, W Wᵀ + Ψ) (Bartholomew, Knott & Moustaki 2011, §3; the same formulas as scikit-learn's
``FactorAnalysis``). NaN marks a missing entry, in ``fit`` (EM, MAP and Gibbs handle missing values exactly)
and in new data (as do the masked entries of a numpy masked array): a row's factor scores and log-likelihood
then use its observed entries o only, E[z | x_o] = (I + W_oᵀ Ψ_o⁻¹ W_o)⁻¹ W_oᵀ Ψ_o⁻¹ (x_o − μ_o) and
x_o ~ N(μ_o, W_o W_oᵀ + Ψ_o) (Gruber & Weiss, eqs. 3-6), so a new respondent with an unanswered item can be
scored.

A mixture of factor analysers scores a row under each analyser k with x ~ N(μ_k, W_k W_kᵀ + Λ) and
weights π_k (Ghahramani & Hinton 1996): ``predict_proba`` gives the responsibilities
h_nk = π_k N(x_n | μ_k, W_k W_kᵀ + Λ) / Σ_l π_l N(x_n | μ_l, W_l W_lᵀ + Λ), ``predict`` their arg max,
``score_samples`` log Σ_k π_k N(x_n | ·) and ``score`` its mean per row, as for the other mixtures.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.linalg
import torch

from latentfs.core.estimator import LatentClusterer, LatentEstimator
from latentfs.models.factor import FactorAnalysis, MixtureOfFactorAnalyzers

__all__ = ["FactorAnalyzer", "MixtureOfFactorAnalyzersClusterer"]


class FactorAnalyzer(LatentEstimator):
    """Factor analysis with the scikit-learn contract.

    Parameters
    ----------
    n_components : int, default 2
        q, the number of factors.
    loading_scale, noise_shape, noise_scale, mean_scale : float, optional
        Priors of :class:`~latentfs.models.factor.FactorAnalysis` (used by ``method="map"`` and ``"gibbs"``).
    method : {"em", "map", "gibbs"}, default "em"
    seed : int, default 0
    max_iter, tol, n_init : optional (EM and MAP); None keeps the engine's default.
    num_chains, num_warmup, num_samples : optional (Gibbs).

    Attributes
    ----------
    posterior_ : Posterior
    components_ : ndarray (n_components, n_features)
        The loadings Wᵀ.
    noise_variance_, mean_ : ndarray (n_features,)

    Examples
    --------
    >>> import numpy as np
    >>> X = FactorAnalysis(1).simulate(100, loadings=[[1.0], [0.9], [0.8]], noise_variance=0.2, mean=0.0,
    ...                                seed=0)["data"]
    >>> fa = FactorAnalyzer(1).fit(X)
    >>> fa.transform(X).shape, fa.get_feature_names_out().tolist()
    ((100, 1), ['factoranalyzer0'])
    """

    _feature_prefix = "factoranalyzer"  # scikit-learn's style of output names: the class name, lower-cased
    _min_samples = 2
    _min_features = 2
    _allow_nan = True

    def __init__(
        self,
        n_components: int = 2,
        *,
        loading_scale: float | None = None,
        noise_shape: float | None = None,
        noise_scale: float | None = None,
        mean_scale: float | None = None,
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
        self.loading_scale = loading_scale
        self.noise_shape = noise_shape
        self.noise_scale = noise_scale
        self.mean_scale = mean_scale
        self.method = method
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.num_chains = num_chains
        self.num_warmup = num_warmup
        self.num_samples = num_samples

    def _make_model(self) -> Any:
        return FactorAnalysis(
            self.n_components,
            loading_scale=self.loading_scale,
            noise_shape=self.noise_shape,
            noise_scale=self.noise_scale,
            mean_scale=self.mean_scale,
        )

    def _after_fit(self, X: Any) -> None:
        post = self.posterior_
        loadings = np.asarray(post.mean("loadings"))
        if loadings.ndim != 2:  # e.g. a mixture of factor analysers' (K, d, q) loadings
            from latentfs.core.data import DataError

            raise DataError(
                f"a FactorAnalyzer takes a factor-analysis result, whose loadings are (features, factors); these are "
                f"{loadings.shape} (a {post.model} result). Use the estimator of that model."
            )
        self.components_ = loadings.T.copy()
        self.noise_variance_ = np.asarray(post.mean("noise_variance"), dtype=np.float64)
        self.mean_ = np.asarray(post.mean("mean"), dtype=np.float64)

    def transform(self, X: Any) -> np.ndarray:
        """Factor scores E[z | x_o], shape (n_samples, n_components); NaN entries of ``X`` are missing."""
        self._check_fitted()
        X = self._validate(X, reset=False)
        if np.isnan(X).any():
            return self._missing_posterior(X)[0]
        W = self.components_.T  # (d, q)
        scaled = W / self.noise_variance_[:, None]  # Ψ⁻¹ W
        precision = np.eye(W.shape[1]) + W.T @ scaled
        return scipy.linalg.solve(precision, scaled.T @ (X - self.mean_).T, assume_a="pos").T

    def score_samples(self, X: Any) -> np.ndarray:
        """Log-likelihood of each row under x_o ~ N(μ_o, W_o W_oᵀ + Ψ_o), o its observed (non-NaN) entries."""
        self._check_fitted()
        X = self._validate(X, reset=False)
        if np.isnan(X).any():
            return self._missing_posterior(X)[1]
        W = self.components_.T
        cov = W @ W.T + np.diag(self.noise_variance_)
        chol = scipy.linalg.cho_factor(cov, lower=True)
        centred = X - self.mean_
        maha = np.einsum("ij,ij->i", centred, scipy.linalg.cho_solve(chol, centred.T).T)
        logdet = 2.0 * np.log(np.diag(chol[0])).sum()
        return -0.5 * (maha + logdet + X.shape[1] * math.log(2 * math.pi))

    def _missing_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """E[z | x_o] and log p(x_o) of rows with missing entries: the EM's E-step at the fitted parameters, grouped
        by missingness pattern (:func:`~latentfs.inference.factor.em.factor_posterior`)."""
        from latentfs.core.data import DataError
        from latentfs.inference.factor.em import FAParams, factor_posterior, prepare_fa_data

        empty = np.flatnonzero(np.isnan(X).all(axis=1))
        if empty.size:
            raise DataError(
                f"X has rows that are entirely missing (rows {empty[:5].tolist()}). Drop them: they carry no "
                "information to score."
            )
        t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
        params = FAParams(loadings=t(self.components_.T), noise_variance=t(self.noise_variance_), mean=t(self.mean_))
        data = prepare_fa_data(X, dtype=torch.float64, device="cpu", use_moments=False)
        _, scores, loglik = factor_posterior(params, data)
        return scores.numpy(), loglik.numpy()

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log-likelihood per row (higher is better); ``y`` is ignored."""
        return float(self.score_samples(X).mean())


class MixtureOfFactorAnalyzersClusterer(LatentClusterer):
    """Mixture of factor analysers (:class:`~latentfs.models.factor.MixtureOfFactorAnalyzers`) with the
    scikit-learn contract.

    Parameters
    ----------
    n_components : int, default 2
        K, the number of analysers (clusters).
    n_factors : int, default 1
        q, the factors of each analyser (at most n_features − 1).
    method : {"em"}, default "em"
    seed : int, default 0
    max_iter, tol, n_init : optional; None keeps the engine's default.

    Attributes
    ----------
    posterior_ : Posterior
    weights_ : ndarray (n_components,)
    components_ : ndarray (n_components, n_features), the analysers' means μ_k
    loadings_ : ndarray (n_components, n_features, n_factors), W_k
    noise_variance_ : ndarray (n_features,), the shared diagonal Λ
    labels_ : ndarray (n_samples,), the analyser of each training row

    Examples
    --------
    >>> W = np.array([[[1.0], [1.0], [0.0]], [[0.0], [1.0], [1.0]]])
    >>> X = MixtureOfFactorAnalyzers(2, 1).simulate(100, loadings=W, mean=[[0, 0, 0], [6, 6, 6]],
    ...                                            noise_variance=0.1, seed=0)["data"]
    >>> mfa = MixtureOfFactorAnalyzersClusterer(2, n_factors=1).fit(X)
    >>> mfa.predict_proba(X).shape, mfa.loadings_.shape
    ((100, 2), (2, 3, 1))
    """

    _feature_prefix = "mixtureoffactoranalyzersclusterer"  # scikit-learn's style: the class name, lower-cased
    _min_samples = 2
    _min_features = 2

    def __init__(
        self,
        n_components: int = 2,
        *,
        n_factors: int = 1,
        method: str = "em",
        seed: int | None = 0,
        max_iter: int | None = None,
        tol: float | None = None,
        n_init: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.n_factors = n_factors
        self.method = method
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init

    def _make_model(self) -> MixtureOfFactorAnalyzers:
        return MixtureOfFactorAnalyzers(self.n_components, self.n_factors)

    def _after_fit(self, X: Any) -> None:
        post = self.posterior_
        self.weights_ = np.asarray(post.mean("weights"), dtype=np.float64)
        self.components_ = np.asarray(post.mean("mean"), dtype=np.float64)
        self.loadings_ = np.asarray(post.mean("loadings"), dtype=np.float64)
        self.noise_variance_ = np.asarray(post.mean("noise_variance"), dtype=np.float64)
        super()._after_fit(X)  # labels_

    def _log_joint_of(self, X: np.ndarray) -> torch.Tensor:
        """log π_k + log N(x_n | μ_k, W_k W_kᵀ + Λ), (n, K)."""
        from latentfs.inference.factor.mfa import MFAParams, mfa_component_log_density

        t = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731  (a copy: X may be read-only)
        params = MFAParams(
            weights=t(self.weights_), means=t(self.components_), loadings=t(self.loadings_),
            noise_variance=t(self.noise_variance_),
        )
        logdens, _, _ = mfa_component_log_density(params, t(X))
        return logdens + torch.log(t(self.weights_).clamp_min(1e-300))[None, :]
