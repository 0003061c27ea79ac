"""Factor analysis as a scikit-learn estimator: :class:`FactorAnalyzer` fits
:class:`~latentfs.models.factor.FactorAnalysis` with any of its engines (EM, MAP, Gibbs).

With loadings W, noise variances Ψ and mean μ (posterior means for Gibbs), ``transform`` gives the factor
scores E[z | x] = (I + Wᵀ Ψ⁻¹ W)⁻¹ Wᵀ Ψ⁻¹ (x − μ) and ``score`` the mean log-likelihood of the rows under
x ~ N(μ, W Wᵀ + Ψ) (Bartholomew, Knott & Moustaki 2011, §3; the same formulas as scikit-learn's
``FactorAnalysis``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.linalg

from latentfs.core.estimator import LatentEstimator
from latentfs.models.factor import FactorAnalysis

__all__ = ["FactorAnalyzer"]


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
    ((100, 1), ['factor0'])
    """

    _feature_prefix = "factor"
    _min_samples = 2
    _min_features = 2

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
        self.components_ = np.asarray(post.mean("loadings")).T.copy()
        self.noise_variance_ = np.asarray(post.mean("noise_variance"), dtype=np.float64)
        self.mean_ = np.asarray(post.mean("mean"), dtype=np.float64)

    def transform(self, X: Any) -> np.ndarray:
        """Factor scores E[z | x], shape (n_samples, n_components)."""
        self._check_fitted()
        X = self._validate(X, reset=False)
        W = self.components_.T  # (d, q)
        scaled = W / self.noise_variance_[:, None]  # Ψ⁻¹ W
        precision = np.eye(W.shape[1]) + W.T @ scaled
        return scipy.linalg.solve(precision, scaled.T @ (X - self.mean_).T, assume_a="pos").T

    def score_samples(self, X: Any) -> np.ndarray:
        """Log-likelihood of each row under x ~ N(μ, W Wᵀ + Ψ)."""
        self._check_fitted()
        X = self._validate(X, reset=False)
        W = self.components_.T
        cov = W @ W.T + np.diag(self.noise_variance_)
        chol = scipy.linalg.cho_factor(cov, lower=True)
        centred = X - self.mean_
        maha = np.einsum("ij,ij->i", centred, scipy.linalg.cho_solve(chol, centred.T).T)
        logdet = 2.0 * np.log(np.diag(chol[0])).sum()
        return -0.5 * (maha + logdet + X.shape[1] * math.log(2 * math.pi))

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log-likelihood per row (higher is better); ``y`` is ignored."""
        return float(self.score_samples(X).mean())
