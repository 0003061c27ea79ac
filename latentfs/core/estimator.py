"""The scikit-learn estimator base of every latent model: ``fit`` runs :func:`latentfs.fit`, the rest reads the
:class:`~latentfs.core.results.Posterior` it returns.

A family's estimator (for example :class:`latentfs.inference.dca.estimator.DCA`) subclasses
:class:`LatentEstimator` and says three things: how to build its model from its parameters
(``_make_model``), how to represent new data (``transform``) and how to score it (``score``). The base
does the rest the scikit-learn way: parameters stored as given in ``__init__`` and validated in ``fit``;
data checked with :func:`sklearn.utils.validation.validate_data`; learned attributes ending in ``_``
(``posterior_`` holds the full result, ``components_``, ``n_features_in_``, ``feature_names_in_``);
``get_feature_names_out`` and ``set_output`` (through :class:`~sklearn.base.TransformerMixin`).

Columns are matched by name: an estimator fitted on a DataFrame reorders the columns of a new DataFrame to
the order seen in ``fit``, and raises :class:`~latentfs.core.data.DataError` naming any missing or extra
column (scikit-learn would refuse a reordered frame; a plain array is taken in the fitted order).

Engine options that the chosen ``method`` does not take (``max_iter`` for a sampler, say) are not passed
to it; the ones it takes are passed when set (``None`` keeps the engine's default).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from latentfs.core.data import DataError

__all__ = ["LatentEstimator", "ENGINE_PARAMS", "match_columns"]

# Estimator parameters that are engine options (the vocabulary of the README: scikit-learn's names for
# optimisers, Pyro's for samplers).
ENGINE_PARAMS = ("seed", "max_iter", "tol", "n_init", "num_chains", "num_warmup", "num_samples")
# Engines that still call restarts ``n_restarts`` get ``n_init`` under that name.
_ALIASES = {"n_init": ("n_restarts",)}


def match_columns(estimator: Any, X: Any) -> Any:
    """``X`` with its columns in the order seen in ``fit`` when both carry names.

    Raises :class:`DataError` naming the missing and the extra columns; data without column names, or an
    estimator fitted without them, is returned unchanged (scikit-learn then checks the width).
    """
    names = getattr(estimator, "feature_names_in_", None)
    columns = getattr(X, "columns", None)
    if names is None or columns is None or not hasattr(X, "iloc"):
        return X
    given = [str(c) for c in columns]
    if not all(isinstance(c, str) for c in columns):
        return X  # not string names: scikit-learn's own check applies
    fitted = [str(c) for c in names]
    missing = [c for c in fitted if c not in set(given)]
    extra = [c for c in given if c not in set(fitted)]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {_short_list(missing)}")
        if extra:
            parts.append(f"extra {_short_list(extra)}")
        raise DataError(
            f"X must have the columns seen in fit ({len(fitted)} named columns); it has {' and '.join(parts)}. "
            "Select the fitted columns, X[est.feature_names_in_], or refit on the new columns."
        )
    if given == fitted:
        return X
    return X.loc[:, fitted]


def _short_list(names: list[str], n: int = 5) -> str:
    shown = ", ".join(repr(x) for x in names[:n])
    return f"[{shown}{', …' if len(names) > n else ''}] ({len(names)})"


class LatentEstimator(TransformerMixin, BaseEstimator):
    """Base of the latent-model estimators (module docstring).

    Subclasses define ``__init__`` (parameters stored as given), ``_make_model()`` and the
    ``_feature_prefix`` of output names, and may override ``_after_fit`` (to set ``components_``),
    ``transform`` and ``score``.

    Attributes
    ----------
    posterior_ : Posterior
        The full result of :func:`latentfs.fit`.
    components_ : ndarray (n_components, n_features)
    n_features_in_ : int
    n_iter_ : int
        Iterations (optimisers) or the trace length (samplers) of the kept run.
    feature_names_in_ : ndarray of str
        Only when ``X`` in ``fit`` had string column names.
    """

    _feature_prefix = "component"
    _accept_sparse: bool | str | list[str] = False
    _positive_only = False
    _min_samples = 1
    _min_features = 1

    method: str

    # ------------------------------------------------------------------ hooks
    def _make_model(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _after_fit(self, X: Any) -> None:
        """Set ``components_`` and other learned attributes from ``self.posterior_``."""

    def _check_params(self) -> None:
        """Validate parameters before fitting (building the model validates the model's own)."""

    # ------------------------------------------------------------------ data
    def _validate(self, X: Any, *, reset: bool) -> Any:
        if not reset:
            X = match_columns(self, X)
        X = validate_data(
            self,
            X,
            reset=reset,
            accept_sparse=self._accept_sparse,
            dtype=np.float64,
            ensure_min_samples=self._min_samples if reset else 1,
            ensure_min_features=self._min_features if reset else 1,
        )
        if self._positive_only:
            data = X.data if sp.issparse(X) else X
            if data.size and data.min() < 0:
                raise DataError(
                    f"Negative values in data passed to {type(self).__name__} (X must hold non-negative counts; "
                    f"its smallest entry is {float(data.min()):g}). Pass raw counts, not centred values."
                )
        if getattr(self, "non_integer", "error") == "round":  # count models that opt in to rounding
            X = X.copy()
            if sp.issparse(X):
                X.data = np.round(X.data)
                X.eliminate_zeros()
            else:
                X = np.round(X)
        return X

    @staticmethod
    def _nonempty_rows(X: Any) -> Any:
        """The rows of a count matrix that hold tokens (empty documents add nothing to a per-token score)."""
        totals = np.asarray(X.sum(axis=1)).ravel()
        return X[totals > 0]

    def _engine_options(self, model: Any) -> dict[str, Any]:
        from latentfs.core.registry import _ENGINES, _load_engines, engine_options

        _load_engines()
        engine = None
        for cls in type(model).__mro__:
            engine = _ENGINES.get((cls, self.method))
            if engine is not None:
                break
        if engine is None:
            return {}  # latentfs.fit raises with the list of methods
        accepted = engine_options(engine)
        options: dict[str, Any] = {}
        for name in ENGINE_PARAMS:
            value = getattr(self, name, None)
            if value is None:
                continue
            if accepted is None or name in accepted:
                options[name] = value
            else:
                alias = next((a for a in _ALIASES.get(name, ()) if a in accepted), None)
                if alias is not None:
                    options[alias] = value
        options.update(self._extra_options(accepted))
        return options

    def _extra_options(self, accepted: list[str] | None) -> dict[str, Any]:
        """Further engine options a subclass passes (only those the engine accepts)."""
        return {}

    # ------------------------------------------------------------------ scikit-learn API
    def fit(self, X: Any, y: Any = None) -> LatentEstimator:
        """Fit the model to ``X`` with the engine ``method``; ``y`` is ignored.

        Returns
        -------
        self
        """
        from latentfs.core.registry import fit

        X = self._validate(X, reset=True)
        self._check_params()
        model = self._make_model()
        self.posterior_ = fit(model, self._fit_data(X), method=self.method, **self._engine_options(model))
        self.n_iter_ = max(1, int(self.posterior_.diagnostics.get("n_iter", self.posterior_.trace.shape[-1])))
        self._after_fit(X)
        return self

    def _fit_data(self, X: Any) -> Any:
        """The data handed to the engine (a subclass may drop rows the engine refuses)."""
        return X

    def __getstate__(self) -> dict[str, Any]:
        # A Posterior may hold its pointwise log-likelihood as a closure until first use; pickling
        # computes it (the result is then plain arrays).
        post = self.__dict__.get("posterior_")
        if post is not None and hasattr(post, "pointwise_log_likelihood"):
            post.pointwise_log_likelihood()
        return super().__getstate__()

    def _check_fitted(self) -> None:
        check_is_fitted(self, "posterior_")

    @property
    def _n_features_out(self) -> int:
        return int(self.components_.shape[0])

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Output names ``"<prefix>0"`` … ``"<prefix>{K-1}"`` (one per component)."""
        self._check_fitted()
        return np.asarray([f"{self._feature_prefix}{k}" for k in range(self._n_features_out)], dtype=object)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = bool(self._accept_sparse)
        tags.input_tags.positive_only = self._positive_only
        tags.non_deterministic = False
        return tags
