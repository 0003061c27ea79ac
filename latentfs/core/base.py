"""The scikit-learn base of the model-free estimators: input checks with :class:`DataError` messages, and the
selector base.

Every estimator of :mod:`latentfs.select`, :mod:`latentfs.subspace` and the family estimators that are not
:class:`~latentfs.core.estimator.LatentEstimator` subclasses (HDDA, HDDC, DCAFeatures, DCAClassifier,
PLSATransformer) are scikit-learn estimators: :class:`~sklearn.base.BaseEstimator` with the mixin of their
kind, parameters stored unchanged in ``__init__`` and checked in ``fit``, learned attributes ending in
``_`` (``n_features_in_``, ``feature_names_in_`` when ``X`` had string column names).

:func:`check_X` is :func:`sklearn.utils.validation.validate_data` with two additions: a DataFrame whose
columns are the fitted ones in another order is reordered by name (:func:`latentfs.core.estimator.match_columns`;
missing or extra columns raise), and scikit-learn's ``ValueError`` becomes a :class:`DataError` that keeps
its text (so scikit-learn's own checks still recognise it) and adds a remedy.

:class:`BaseSelector` is :class:`~sklearn.feature_selection.SelectorMixin` + ``BaseEstimator``: subclasses
implement ``_fit(X, y) -> FeatureWeights`` (and may set other learned attributes ending in ``_``); the base
gives ``fit``, ``transform``, ``get_support``, ``get_feature_names_out``, ``inverse_transform`` and
``set_output``. Which features are kept is decided by ``n_features_to_select`` (top k) or ``threshold`` on
the scores; subclasses with their own selection rule (a sampled subset, say) set ``_support_from_weights
= False`` and set ``support_`` themselves.

:func:`document_input_attributes` ends a class docstring's ``Attributes`` section with the two attributes that
:func:`check_X` sets in ``fit`` (:data:`INPUT_ATTRIBUTES_DOC`), so their description is written once.
"""

from __future__ import annotations

from typing import Any, Self, TypeVar

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.feature_selection import SelectorMixin
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.validation import assert_all_finite, check_is_fitted, validate_data

from latentfs.core.containers import dataarray_as_frame
from latentfs.core.data import DataError
from latentfs.core.estimator import InputRulesTags, match_columns
from latentfs.core.weights import FeatureWeights

__all__ = [
    "INPUT_ATTRIBUTES_DOC",
    "BaseSelector",
    "NotFittedDataError",
    "ParamsAsDataError",
    "check_X",
    "check_fitted",
    "check_y_finite",
    "document_input_attributes",
    "require_y",
]

_REMEDY = "Pass a 2-D numeric array (rows = samples) of finite values."

INPUT_ATTRIBUTES_DOC = """n_features_in_ : int
feature_names_in_ : ndarray of str
    Only when ``X`` in ``fit`` had string column names."""
"""The numpydoc entries of the attributes :func:`check_X` sets in ``fit`` (``reset=True``)."""

_Class = TypeVar("_Class", bound=type)


def document_input_attributes(cls: _Class) -> _Class:
    """Class decorator: end the ``Attributes`` section of ``cls``'s docstring with :data:`INPUT_ATTRIBUTES_DOC`.

    The entries go after the section's last line before its first blank line, at the section's indentation. A
    docstring removed by ``python -OO`` is left as it is; a docstring without an ``Attributes`` section raises
    ``TypeError`` (a mistake in the library, not in the user's input).
    """
    doc = cls.__doc__
    if doc is None:
        return cls
    lines = doc.split("\n")
    header = next(
        (i for i in range(len(lines) - 1) if lines[i].strip() == "Attributes" and set(lines[i + 1].strip()) == {"-"}),
        None,
    )
    if header is None:
        raise TypeError(
            f"document_input_attributes needs an 'Attributes' section in the docstring of {cls.__name__}; it has "
            "none. Add the section (numpydoc: 'Attributes' underlined by '----------')."
        )
    indent = lines[header][: len(lines[header]) - len(lines[header].lstrip())]
    end = next((i for i in range(header + 2, len(lines)) if not lines[i].strip()), len(lines))
    lines[end:end] = [indent + line for line in INPUT_ATTRIBUTES_DOC.split("\n")]
    cls.__doc__ = "\n".join(lines)
    return cls


class NotFittedDataError(DataError, NotFittedError):
    """An estimator used before ``fit``: both a :class:`DataError` and scikit-learn's ``NotFittedError``."""


def check_fitted(estimator: Any, attributes: Any = None, *, call: str = "fit") -> None:
    """Raise :class:`NotFittedDataError` unless ``estimator`` is fitted (scikit-learn's rule, or ``attributes``)."""
    try:
        check_is_fitted(estimator, attributes)
    except NotFittedError:
        raise NotFittedDataError(
            f"this {type(estimator).__name__} is not fitted yet; call {call} first, then use this method."
        ) from None


def require_y(estimator: Any, y: Any, message: str) -> None:
    """Raise :class:`DataError` with ``message`` when a supervised estimator gets ``y=None``.

    The message is completed with scikit-learn's phrase ("requires y to be passed, but the target y is None").
    """
    if y is None:
        name = type(estimator).__name__
        raise DataError(f"{message} ({name} requires y to be passed, but the target y is None.)")


def check_y_finite(y: Any) -> None:
    """:class:`DataError` when numeric targets hold NaN or infinite values (scikit-learn's wording kept)."""
    arr = np.asarray(y)
    if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        try:
            assert_all_finite(arr, input_name="y")
        except ValueError as exc:
            raise DataError(f"{exc} y must hold finite values: drop or impute those rows.") from None


def _n_columns(X: Any) -> int | None:
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2:
        return int(shape[1])
    return None


def check_X(
    estimator: Any,
    X: Any,
    *,
    reset: bool,
    accept_sparse: bool | str | list[str] = False,
    dtype: Any = np.float64,
    ensure_all_finite: bool = True,
    ensure_min_samples: int = 1,
    ensure_min_features: int = 1,
    skip_check_array: bool = False,
) -> Any:
    """``validate_data(estimator, X, reset=...)`` with :class:`DataError` messages (module docstring).

    With ``reset=False`` (``transform``, ``predict``, ``score``) the columns of a DataFrame are matched by
    name first, and a wrong number of columns is reported in scikit-learn's words and in ours.
    """
    X = dataarray_as_frame(X)  # its coordinates name the features, as a DataFrame's columns do
    if not reset:
        X = match_columns(estimator, X)
        expected = getattr(estimator, "n_features_in_", None)
        given = _n_columns(X)
        if expected is not None and given is not None and given != expected:
            name = type(estimator).__name__
            raise DataError(
                f"X has {given} features, but {name} is expecting {expected} features as input: X must have "
                f"{expected} features (as in fit). Pass the columns used in fit, in the same order."
            )
    try:
        out = validate_data(
            estimator,
            X,
            reset=reset,
            accept_sparse=accept_sparse,
            dtype=dtype,
            ensure_all_finite=False,
            ensure_min_samples=ensure_min_samples,
            ensure_min_features=ensure_min_features,
            skip_check_array=skip_check_array,
        )
    except DataError:
        raise
    except ValueError as exc:
        text = str(exc)
        if text.startswith("Found array with 0 "):
            raise DataError(f"X is empty: {text} Pass at least one row and one feature.") from None
        raise DataError(f"{text} {_REMEDY}") from None
    if ensure_all_finite and not skip_check_array:
        _check_finite(out)
    return out


def _check_finite(X: Any) -> None:
    """:class:`DataError` naming the first NaN or infinite entry (row and column)."""
    values = X.data if sp.issparse(X) else np.asarray(X)
    if values.dtype.kind not in "fc" or np.isfinite(values).all():
        return
    if sp.issparse(X):
        coo = sp.coo_matrix(X)
        i = int(np.flatnonzero(~np.isfinite(coo.data))[0])
        r, c, v = int(coo.row[i]), int(coo.col[i]), coo.data[i]
    else:
        r, c = (int(k) for k in np.argwhere(~np.isfinite(values))[0])
        v = values[r, c]
    kind = "NaN" if np.isnan(v) else "infinite (inf)"
    raise DataError(
        f"X must not contain NaN or infinite values; row {r} column {c} is {kind}. Impute or drop the missing "
        "values first."
    )


class ParamsAsDataError:
    """``set_params`` that names an unknown parameter with a :class:`DataError` (listing the valid ones)."""

    def set_params(self, **params: Any) -> Any:
        valid = self.get_params(deep=True)  # type: ignore[attr-defined]
        for key in params:
            if key.split("__", 1)[0] not in valid:
                names = sorted(k for k in valid if "__" not in k)
                raise DataError(
                    f"{type(self).__name__} has no parameter {key!r} (unknown parameter {key!r}); valid: {names}."
                )
        return super().set_params(**params)  # type: ignore[misc]


class BaseSelector(ParamsAsDataError, InputRulesTags, SelectorMixin, BaseEstimator):
    """Base class of the selectors: learned ``weights_`` (:class:`FeatureWeights`) and ``support_`` (bool mask).

    Class attributes a subclass may set: ``_requires_y`` (supervised), ``_accept_sparse`` (scipy.sparse
    input kept sparse), ``_positive_only`` (non-negative input, e.g. counts), ``_min_samples``, ``_min_features``,
    ``_support_from_weights`` (False when ``_fit`` sets ``support_`` itself).
    """

    weights_: FeatureWeights
    support_: np.ndarray
    n_features_in_: int

    _requires_y = False
    _accept_sparse: bool | str = False
    _positive_only = False
    _min_samples = 1
    _min_features = 1
    _support_from_weights = True

    # --- fitting ---------------------------------------------------------------------------------
    def _fit(self, X: Any, y: Any) -> FeatureWeights:  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit_input(self, X: Any) -> Any:
        """Check ``X`` in ``fit`` (shape, type, numbers) and set ``n_features_in_``/``feature_names_in_``.

        NaN and infinite entries pass through to the estimator's own check, which names the row and column.
        A DataFrame is passed on as given (its column names become the weights' feature names).
        """
        X = dataarray_as_frame(X)
        checked = check_X(
            self, X, reset=True, accept_sparse="csr" if self._accept_sparse else False,
            ensure_all_finite=False, ensure_min_samples=self._min_samples, ensure_min_features=self._min_features,
        )
        if self._positive_only:
            data = checked.data if sp.issparse(checked) else checked
            negative = data < 0
            if negative.any():
                raise DataError(
                    f"Negative values in data passed to {type(self).__name__}: X must hold non-negative values "
                    f"(counts); its smallest entry is {float(data[negative].min()):g}. Pass raw counts, not centred "
                    "or log-transformed values."
                )
        return X if hasattr(X, "iloc") else checked

    def fit(self, X: Any, y: Any = None) -> Self:
        """Score the features of ``X`` (with labels or responses ``y`` where the selector needs them).

        Returns
        -------
        self
        """
        for name in ("support_", "weights_"):
            self.__dict__.pop(name, None)
        Xc = self._fit_input(X)
        weights = self._fit(Xc, y)
        self.weights_ = weights
        if self._support_from_weights or not hasattr(self, "support_"):
            self.support_ = self._support_from(weights)
        return self

    def _support_from(self, weights: FeatureWeights) -> np.ndarray:
        k = getattr(self, "n_features_to_select", None)
        threshold = getattr(self, "threshold", None)
        if k is None and threshold is None:
            return np.ones(weights.n_features, dtype=bool)
        if k is not None:
            n = weights.n_features
            if not isinstance(k, bool) and isinstance(k, (int, np.integer)) and k > n:
                raise DataError(
                    f"n_features_to_select must be at most the number of features (n_features = {n}); got {k}. "
                    "Select fewer features."
                )
            return weights.support(k)
        return weights.support(threshold=threshold)

    # --- scikit-learn selector protocol -------------------------------------------------------------
    def _get_support_mask(self) -> np.ndarray:
        check_fitted(self, "support_")
        return self.support_.copy()

    def _check_fitted(self) -> None:
        check_fitted(self, "support_")

    def transform(self, X: Any) -> Any:
        """The selected columns of ``X`` (DataFrame columns matched by name to those seen in ``fit``)."""
        check_fitted(self, "support_")
        X = dataarray_as_frame(X)
        keep_frame = _get_output_config("transform", estimator=self)["dense"] != "default" and hasattr(X, "iloc")
        X = check_X(
            self, X, reset=False, accept_sparse="csr", dtype=None, skip_check_array=keep_frame,
        )
        return self._transform(X)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self._requires_y
        return tags


def rescaled(X: Any, scale: np.ndarray) -> Any:
    """``X`` (the selected columns) times ``scale`` per column, sparse kept sparse, DataFrames kept frames."""
    if sp.issparse(X):
        return sp.csr_matrix(X.multiply(scale[None, :]))
    if hasattr(X, "iloc"):
        return X * scale
    return np.asarray(X) * scale
