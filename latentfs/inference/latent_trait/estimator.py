"""Latent trait analysis as a scikit-learn estimator: :class:`LatentTraitAnalyzer` fits
:class:`~latentfs.models.latent_trait.LatentTrait` with Bock–Aitkin EM or variational EM.

``transform`` gives each person's EAP trait scores E[z | y] (posterior means on the Gauss–Hermite grid, at
the fitted item parameters; :meth:`LatentTraitAnalyzer.transform_sd` gives the posterior SDs) and ``score``
the mean marginal log-likelihood per person, log ∫ Π_j g_j(y_j | z) φ(z) dz, by the same quadrature
(Bock & Aitkin 1981; Bartholomew, Knott & Moustaki 2011, §4.6 for EAP scores).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.utils.validation import validate_data

from latentfs.core.data import DataError, as_continuous, check_choice, check_int
from latentfs.core.estimator import LatentEstimator, match_columns
from latentfs.inference.latent_trait.em import default_n_nodes
from latentfs.inference.latent_trait.quadrature import (
    gauss_hermite_grid,
    params_from_posterior,
    prepare_items,
    trait_posterior,
)
from latentfs.models.latent_trait import LatentTrait

__all__ = ["LatentTraitAnalyzer"]


class LatentTraitAnalyzer(LatentEstimator):
    """Latent trait analysis (2PL for binary items, graded response for ordinal items) with the scikit-learn
    contract.

    Parameters
    ----------
    n_components : int, default 1
        q, the number of latent traits.
    n_levels : int or list of int, optional
        Categories per item. None (default) reads them from the data in ``fit``: items coded 0/1 throughout
        give the binary (2PL) model, otherwise item j gets max_j + 1 ordered categories (codes 0..S_j − 1).
    n_bins : int, optional
        Cut each column at its training quantiles into at most ``n_bins`` ordered categories before fitting
        (for continuous or many-valued columns); None (default) takes ``X`` as item codes.
    method : {"em", "vb"}, default "em"
        ``"vb"`` (Jaakkola–Jordan variational EM) takes binary items only.
    n_nodes : int, optional
        Gauss–Hermite nodes per trait for EM, ``transform`` and ``score`` (default 21 for one trait).
    seed : int, default 0
    max_iter, tol, n_init : optional; None keeps the engine's default.

    Attributes
    ----------
    posterior_ : Posterior
    components_ : ndarray (n_components, n_features), the discriminations α_jᵀ
    discrimination_ : ndarray (n_features, n_components)
    intercepts_ : ndarray (n_features,) for binary items, (n_features, S_max − 1) for ordinal ones (NaN padding)
    n_levels_ : ndarray (n_features,), the categories of each item
    bin_edges_ : list of ndarray, only with ``n_bins``

    Examples
    --------
    >>> X = LatentTrait(1).simulate(300, intercepts=[1.0, 0.0, -0.5, 0.5],
    ...                             discrimination=[[1.5], [1.0], [2.0], [1.2]], seed=0)["items"]
    >>> lta = LatentTraitAnalyzer(1).fit(X)
    >>> lta.transform(X).shape, lta.get_feature_names_out().tolist()
    ((300, 1), ['latenttraitanalyzer0'])
    """

    _feature_prefix = "latenttraitanalyzer"  # scikit-learn's style of output names: the class name, lower-cased
    _min_samples = 2
    _min_features = 2

    def __init__(
        self,
        n_components: int = 1,
        *,
        n_levels: Any = None,
        n_bins: int | None = None,
        method: str = "em",
        n_nodes: int | None = None,
        seed: int | None = 0,
        max_iter: int | None = None,
        tol: float | None = None,
        n_init: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.n_levels = n_levels
        self.n_bins = n_bins
        self.method = method
        self.n_nodes = n_nodes
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init

    # ------------------------------------------------------------------ data
    def _validate(self, X: Any, *, reset: bool) -> Any:
        if not reset:
            X = match_columns(self, X)
        X = validate_data(
            self, X, reset=reset, dtype=np.float64, ensure_all_finite="allow-nan",
            ensure_min_samples=self._min_samples if reset else 1,
            ensure_min_features=self._min_features if reset else 1,
        )
        if reset:
            self._learn_coding(X)
        return self._code(X)

    def _learn_coding(self, X: np.ndarray) -> None:
        if self.n_bins is not None:
            n_bins = check_int("n_bins", self.n_bins, low=2, remedy="Pass n_bins=2 or more, or None for item codes.")
            cuts = np.linspace(0, 1, n_bins + 1)[1:-1]
            self.bin_edges_ = []
            for j in range(X.shape[1]):
                col = X[~np.isnan(X[:, j]), j]
                edges = np.unique(np.quantile(col, cuts)) if col.size else np.empty(0)
                # keep only the edges below a category the training column uses (ties at a quantile can
                # leave a category empty): the training codes are then 0, 1, … without gaps
                used = np.unique(np.searchsorted(edges, col, side="right"))
                self.bin_edges_.append(edges[used[1:] - 1] if used.size else edges[:0])
            self.n_levels_ = np.array([e.size + 1 for e in self.bin_edges_], dtype=np.int64)
            self._binary_ = bool((self.n_levels_ == 2).all())
            return
        if self.n_levels is not None:
            self._binary_ = False
            self.n_levels_ = LatentTrait(1, n_levels=self.n_levels).levels(X.shape[1])
            return
        self._check_codes(X)
        top = np.nan_to_num(np.nanmax(np.where(np.isnan(X), -np.inf, X), axis=0), neginf=0.0)
        self._binary_ = bool((top <= 1).all())
        self.n_levels_ = (top.astype(np.int64) + 1).clip(min=2)

    @staticmethod
    def _check_codes(X: np.ndarray) -> None:
        obs = ~np.isnan(X)
        v = np.nan_to_num(X)
        bad = obs & ((v != np.round(v)) | (v < 0))
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise DataError(
                f"X must hold item codes 0, 1, …, S−1 (or NaN for missing); row {r} column {c} holds {X[r, c]:g}. "
                "Recode the answers as integers from 0, or pass n_bins=... to cut continuous columns into "
                "ordered categories."
            )

    def _code(self, X: np.ndarray) -> np.ndarray:
        if self.n_bins is None:
            return X
        out = np.full(X.shape, np.nan)
        for j, edges in enumerate(self.bin_edges_):
            obs = ~np.isnan(X[:, j])
            out[obs, j] = np.searchsorted(edges, X[obs, j], side="right")
        return out

    def _fit_data(self, X: Any) -> Any:
        names = getattr(self, "feature_names_in_", None)
        return as_continuous(X, missing="allow", feature_names=None if names is None else [str(c) for c in names])

    def _check_params(self) -> None:
        check_choice("method", self.method, ("em", "vb"))

    def _make_model(self) -> Any:
        levels = None if self._binary_ else [int(v) for v in self.n_levels_]
        return LatentTrait(self.n_components, n_levels=levels)

    def _extra_options(self, accepted: list[str] | None) -> dict[str, Any]:
        if self.n_nodes is not None and (accepted is None or "n_nodes" in accepted):
            return {"n_nodes": self.n_nodes}
        return {}

    def _after_fit(self, X: Any) -> None:
        post = self.posterior_
        if X is None:  # adopted from a result (Posterior.estimator): the categories come from the fit
            self.n_levels_ = np.asarray(post.extras["levels"], dtype=np.int64).reshape(-1)
            self._binary_ = bool((self.n_levels_ == 2).all())
        self.discrimination_ = np.asarray(post.mean("discrimination"), dtype=np.float64)
        self.components_ = self.discrimination_.T.copy()
        self.intercepts_ = np.asarray(post.mean("intercepts"), dtype=np.float64)

    # ------------------------------------------------------------------ scoring
    def _posterior_of(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._check_fitted()
        codes = self._validate(X, reset=False)
        if self.n_bins is None:
            self._check_codes(codes)
            over = ~np.isnan(codes) & (np.nan_to_num(codes) >= self.n_levels_[None, :])
            if over.any():
                r, c = np.argwhere(over)[0]
                raise DataError(
                    f"X row {r} column {c} holds {codes[r, c]:g}, a category item {c} did not have in fit "
                    f"(codes 0..{self.n_levels_[c] - 1}). Recode it, or refit with n_levels=..."
                )
        n_nodes = self.n_nodes if self.n_nodes is not None else default_n_nodes(self.n_components)
        params = params_from_posterior(self.posterior_)
        data = prepare_items(codes, self.n_levels_, dtype=torch.float64, device="cpu")
        nodes, logw = gauss_hermite_grid(self.n_components, n_nodes)
        return trait_posterior(params, data, nodes, logw)

    def transform(self, X: Any) -> np.ndarray:
        """EAP trait scores E[z | y], shape (n_samples, n_components); NaN answers are skipped."""
        return self._posterior_of(X)[0]

    def transform_sd(self, X: Any) -> np.ndarray:
        """Posterior standard deviations of the traits, shape (n_samples, n_components)."""
        return self._posterior_of(X)[1]

    def score_samples(self, X: Any) -> np.ndarray:
        """Marginal log-likelihood of each person's answers (quadrature)."""
        return self._posterior_of(X)[2]

    def score(self, X: Any, y: Any = None) -> float:
        """Mean marginal log-likelihood per person (higher is better); ``y`` is ignored."""
        return float(self.score_samples(X).mean())

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags
