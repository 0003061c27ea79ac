"""A minimal base for selectors that follows the scikit-learn estimator conventions without needing it.

Subclasses implement ``_fit(X, y) -> FeatureWeights`` (and may set other learned attributes ending in
``_``); the base provides ``fit``, ``transform``, ``fit_transform``, ``get_support``, ``get_params``
and ``set_params`` so a selector drops into a scikit-learn ``Pipeline`` when scikit-learn is installed.
Which features are kept is decided by ``n_features_to_select`` (top k) or ``threshold`` on the scores;
subclasses with their own selection rule (a sampled subset, say) set ``support_`` themselves.
"""

from __future__ import annotations

import inspect
from typing import Any, Self

import numpy as np
import scipy.sparse as sp

from latentfs.core.data import DataError
from latentfs.core.weights import FeatureWeights

__all__ = ["BaseSelector"]


class BaseSelector:
    """Base class: learned ``weights_`` (:class:`FeatureWeights`) and ``support_`` (bool mask)."""

    weights_: FeatureWeights
    support_: np.ndarray
    n_features_in_: int

    # --- scikit-learn parameter protocol -------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [
            p.name
            for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Self:
        valid = self._param_names()
        for key, value in params.items():
            if key not in valid:
                raise DataError(f"{type(self).__name__} has no parameter {key!r}; valid: {valid}.")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # --- fitting ---------------------------------------------------------------------------------
    def _fit(self, X: Any, y: Any) -> FeatureWeights:  # pragma: no cover - abstract
        raise NotImplementedError

    def fit(self, X: Any, y: Any = None) -> Self:
        weights = self._fit(X, y)
        self.weights_ = weights
        self.n_features_in_ = weights.n_features
        if not hasattr(self, "support_") or getattr(self, "_support_from_weights", True):
            self.support_ = self._support_from(weights)
        return self

    def _support_from(self, weights: FeatureWeights) -> np.ndarray:
        k = getattr(self, "n_features_to_select", None)
        threshold = getattr(self, "threshold", None)
        if k is None and threshold is None:
            return np.ones(weights.n_features, dtype=bool)
        if k is not None:
            return weights.support(k)
        return weights.support(threshold=threshold)

    def _check_fitted(self) -> None:
        if not hasattr(self, "support_"):
            raise DataError(f"{type(self).__name__} is not fitted yet; call fit(X, y) first.")

    def get_support(self, indices: bool = False) -> np.ndarray:
        self._check_fitted()
        return np.flatnonzero(self.support_) if indices else self.support_.copy()

    def transform(self, X: Any) -> Any:
        self._check_fitted()
        n = X.shape[1] if hasattr(X, "shape") and len(X.shape) == 2 else None
        if n != self.n_features_in_:
            raise DataError(
                f"X must have {self.n_features_in_} features (as in fit); got shape "
                f"{getattr(X, 'shape', None)}."
            )
        cols = np.flatnonzero(self.support_)
        if sp.issparse(X):
            return sp.csr_matrix(X)[:, cols]
        if hasattr(X, "iloc"):
            return X.iloc[:, cols]
        return np.asarray(X)[:, cols]

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        return self.fit(X, y).transform(X)
