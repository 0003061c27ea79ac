"""The scikit-learn estimator base of every latent model: ``fit`` runs :func:`latentfs.fit`, the rest reads the
:class:`~latentfs.core.results.Posterior` it returns.

A family's estimator (for example :class:`latentfs.inference.dca.estimator.DCA`) subclasses
:class:`LatentEstimator` and says three things: how to build its model from its parameters
(``_make_model``), how to represent new data (``transform``) and how to score it (``score``). The base
does the rest the scikit-learn way: parameters stored as given in ``__init__`` and validated in ``fit``;
data checked with :func:`sklearn.utils.validation.validate_data`; learned attributes ending in ``_``
(``posterior_`` holds the full result, ``components_``, ``n_features_in_``, ``feature_names_in_``);
``get_feature_names_out`` and ``set_output`` (through :class:`~sklearn.base.TransformerMixin`). A finite
mixture's estimator subclasses :class:`LatentClusterer` and says one thing more, the log joint of a row and each
component (``_log_joint_of``); the responsibilities, labels and per-row log-likelihood follow from it.

The rules for input that estimators outside this base share are here too: a count matrix's
(:func:`check_nonnegative`, :func:`round_counts`) and a classifier's ``y`` (:func:`class_labels`).

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
from sklearn.base import BaseEstimator, ClusterMixin, DensityMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from latentfs.core.blockwise import BlockwiseNewData
from latentfs.core.containers import dataarray_as_frame
from latentfs.core.data import DataError, as_array
from latentfs.core.estimator_io import SaveLoadMixin
from latentfs.core.options import check_moments

__all__ = [
    "LatentClusterer",
    "LatentEstimator",
    "ENGINE_PARAMS",
    "InputRulesTags",
    "SaveLoadMixin",
    "check_nonnegative",
    "class_labels",
    "match_columns",
    "round_counts",
]

# Estimator parameters that are engine options (the vocabulary of the README: scikit-learn's names for
# optimisers, Pyro's for samplers).
ENGINE_PARAMS = ("seed", "max_iter", "tol", "n_init", "num_chains", "num_warmup", "num_samples")


def match_columns(estimator: Any, X: Any) -> Any:
    """``X`` with its columns in the order seen in ``fit`` when both carry names.

    Names are compared as text (a column named ``1`` matches a fitted ``"1"``). Raises :class:`DataError`
    naming the missing and the extra columns, and for a DataFrame whose column names are not strings (the
    positions ``0, 1, …`` of a frame built from an array) when the estimator was fitted on named columns:
    matching by position there would silently score reordered columns. Data without column names, or an
    estimator fitted without them, is returned unchanged (scikit-learn then checks the width).
    """
    names = getattr(estimator, "feature_names_in_", None)
    columns = getattr(X, "columns", None)
    if names is None or columns is None or not hasattr(X, "iloc"):
        return X
    given = [str(c) for c in columns]
    fitted = [str(c) for c in names]
    strings = all(isinstance(c, str) for c in columns)
    missing = [c for c in fitted if c not in set(given)]
    extra = [c for c in given if c not in set(fitted)]
    if not strings and (missing or extra):
        raise DataError(
            f"X's column names are not strings ({_short_list(list(columns))}), but the estimator "
            f"was fitted on named columns {_short_list(fitted)}; columns are matched by name, so these cannot be "
            "matched. Name the columns as in fit (X.columns = est.feature_names_in_ if they are in that order), or "
            "pass X.to_numpy() to take them in the fitted order."
        )
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
    if not strings:  # the fitted names as text: give the frame those names (scikit-learn compares them too)
        X = X.set_axis(given, axis=1)
    if given == fitted:
        return X
    return X.loc[:, fitted]


def check_nonnegative(X: Any, who: str) -> None:
    """Refuse a checked count matrix ``X`` (dense or scipy.sparse) holding a negative entry, naming ``who`` (the
    estimator) and the smallest entry."""
    data = X.data if sp.issparse(X) else X
    if data.size and data.min() < 0:
        raise DataError(
            f"Negative values in data passed to {who}: X must hold non-negative counts; its smallest entry is "
            f"{float(data.min()):g}. Pass raw counts, not centred values."
        )


def round_counts(X: Any) -> Any:
    """A copy of ``X`` (dense or scipy.sparse) with every entry rounded to the nearest integer: what a count model's
    ``non_integer="round"`` does. A sparse matrix drops the entries that round to 0."""
    X = X.copy()
    if sp.issparse(X):
        X.data = np.round(X.data)
        X.eliminate_zeros()
        return X
    return np.round(X)


def class_labels(estimator: Any, y: Any, *, continuous: str = "") -> np.ndarray:
    """``y`` of a classifier's ``fit`` as 1-D class labels: None refused (:func:`~latentfs.core.base.require_y`), NaN
    or infinite values refused, a column vector flattened with scikit-learn's warning, a continuous target refused in
    scikit-learn's words followed by ``continuous`` (what else the estimator's family offers for one)."""
    from sklearn.utils.multiclass import type_of_target
    from sklearn.utils.validation import column_or_1d

    from latentfs.core.base import check_y_finite, require_y

    name = type(estimator).__name__
    require_y(estimator, y, f"{name} needs class labels: call fit(X, y) with y")
    arr = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    check_y_finite(arr)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = column_or_1d(arr, warn=True)
    if arr.ndim == 1 and arr.dtype.kind in "fc" and type_of_target(arr) == "continuous":
        raise DataError(f"Unknown label type: continuous. y must hold class labels for {name}{continuous}.")
    return arr


def _generated(names: list[str]) -> bool:
    """Whether ``names`` are the labels latentfs generates for unnamed columns (``w0, w1, …`` for counts,
    ``x0, x1, …`` for continuous data)."""
    prefix = names[0][:-1]
    return prefix in ("w", "x") and all(n == f"{prefix}{i}" for i, n in enumerate(names))


def _short_list(names: list[Any], n: int = 5) -> str:
    shown = ", ".join(repr(x) for x in names[:n])
    return f"[{shown}{', …' if len(names) > n else ''}] ({len(names)})"



class InputRulesTags:
    """scikit-learn tags from a class's declared input rules: ``_accept_sparse`` (scipy.sparse input kept sparse)
    and ``_positive_only`` (non-negative input, e.g. counts); fits are seeded, so deterministic. Put it before
    scikit-learn's ``BaseEstimator`` in the bases."""

    _accept_sparse: Any = False
    _positive_only = False

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.input_tags.sparse = bool(self._accept_sparse)
        tags.input_tags.positive_only = self._positive_only
        tags.non_deterministic = False
        return tags


class LatentEstimator(BlockwiseNewData, SaveLoadMixin, InputRulesTags, TransformerMixin, BaseEstimator):
    """Base of the latent-model estimators (module docstring).

    Subclasses define ``__init__`` (parameters stored as given), ``_make_model()`` and the
    ``_feature_prefix`` of output names, and may override ``_after_fit`` (to set ``components_``),
    ``transform`` and ``score``. The new-data methods it defines (``transform``, ``predict``, ``predict_proba``,
    ``score_samples``, ``score``) take a dask array too and run on it block by block
    (:mod:`latentfs.core.blockwise`; ``_score_weight`` weighs each block in ``score``).

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
    # NaN means a missing entry, which the engines and the new-data methods handle (a masked entry too)
    _allow_nan = False

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
        X = dataarray_as_frame(X)  # its coordinates name the features, as a DataFrame's columns do
        if not reset:
            X = match_columns(self, X)
        # latentfs's container checks first (masked entries, dates, ragged rows, meta tensors), which
        # scikit-learn's validation would fit silently or fail on deep inside numpy. Sparse input goes on as the
        # float64 matrix made there: its duplicate entries are summed after widening (scikit-learn sums them in
        # the matrix's own dtype, and uint8 200 + 100 is 44); a masked array goes on with NaN where it is masked
        # when the estimator takes missing values (np.asarray would drop the mask).
        converted = as_array(X, name="X", masked="nan" if self._allow_nan else "error")
        if sp.issparse(converted) or isinstance(X, np.ma.MaskedArray):
            X = converted
        if self._allow_nan and isinstance(X, np.ndarray) and X.dtype == object:
            # scikit-learn would read None as NaN, a missing value here: say so explicitly instead
            where = np.argwhere(np.vectorize(lambda v: v is None, otypes=[bool])(X))
            if where.size:
                at = f" at index {tuple(int(i) for i in where[0])}"
                raise DataError(
                    f"X holds None{at}; None is not a number. Write np.nan where a value is missing, or pass a float "
                    "array."
                )
        try:
            X = validate_data(
                self,
                X,
                reset=reset,
                accept_sparse=self._accept_sparse,
                dtype=np.float64,
                ensure_all_finite="allow-nan" if self._allow_nan else True,
                ensure_min_samples=self._min_samples if reset else 1,
                ensure_min_features=self._min_features if reset else 1,
            )
        except DataError:
            raise
        except ValueError as exc:
            finite = "finite numbers (NaN for a missing entry)" if self._allow_nan else "finite numbers"
            raise DataError(
                f"X cannot be used by {type(self).__name__}: {exc} Pass a 2-D array of {finite} "
                "(rows × features), with the columns seen in fit."
            ) from None
        if self._positive_only:
            check_nonnegative(X, type(self).__name__)
        elif not reset and isinstance(X, np.ndarray):
            # new data: squares that overflow would come back as NaN or inf scores, probabilities and transforms
            # (fit's data are checked by the engine itself, once)
            check_moments(X, underflow=False)
        if getattr(self, "non_integer", "error") == "round":  # count models that opt in to rounding
            X = round_counts(X)
        return X

    @staticmethod
    def _nonempty_rows(X: Any) -> Any:
        """The rows of a count matrix that hold tokens (empty documents add nothing to a per-token score)."""
        totals = np.asarray(X.sum(axis=1)).ravel()
        return X[totals > 0]

    def _score_weight(self, X: Any, **options: Any) -> float:
        """The weight of the in-memory rows ``X`` in ``score``, a mean (a dask array's score averages its blocks'
        scores with these weights, :mod:`latentfs.core.blockwise`): the held-out tokens for count data, scored per
        token by document completion with half of each document's tokens held out (⌊L_d / 2⌋ of a document of
        L_d tokens, none of an empty one), else the rows. A family whose score is a mean over something else
        overrides it."""
        from latentfs.core.registry import data_kind

        if data_kind(self._make_model()) != "counts":
            return float(X.shape[0])
        lengths = np.asarray(self._validate(X, reset=False).sum(axis=1), dtype=np.float64).ravel()
        return float(np.floor(0.5 * lengths).sum())

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
        from latentfs.core.shards import is_dask_array

        self.__dict__.pop("_online_state", None)  # a later partial_fit starts a new stream
        if is_dask_array(X):
            return self._fit_sharded(X)
        return self._fit_rows(X)

    def _fit_rows(self, X: Any, **fit_options: Any) -> LatentEstimator:
        """``fit`` on in-memory rows: ``X`` validated, the model built, :func:`latentfs.fit` run with the engine
        options and ``fit_options`` (a family's own arguments of ``fit``, an HMM's ``lengths``), then the fitted
        attributes (:meth:`_take_posterior`)."""
        from latentfs.core.registry import data_kind, fit

        X = self._validate(X, reset=True)
        self._check_params()
        model = self._make_model()
        options = self._engine_options(model)
        names = getattr(self, "feature_names_in_", None)
        if names is not None and data_kind(model) in ("counts", "continuous"):
            # validate_data turned the DataFrame into an array: the result is labelled with its columns
            options["feature_names"] = [str(c) for c in names]
        posterior = fit(model, self._fit_data(X), method=self.method, **fit_options, **options)
        posterior.observed = None  # a fitted estimator does not keep its training data (saved, pickled)
        self._take_posterior(posterior, X)
        return self

    def _take_posterior(self, posterior: Any, X: Any) -> None:
        """Set ``posterior_``, ``n_iter_`` (the kept run's iterations, or a sampler's trace length) and the family's
        attributes (:meth:`_after_fit`, given the training rows ``X`` or None when they are not at hand)."""
        self.posterior_ = posterior
        self.n_iter_ = max(1, int(posterior.diagnostics.get("n_iter", int(posterior.trace.shape[-1]))))
        self._after_fit(X)

    def _stream_update(
        self,
        X: Any,
        online_options: dict[str, Any],
        start: Any,
        update: Any,
        posterior: Any,
    ) -> LatentEstimator:
        """The plumbing of every ``partial_fit``: the first call (or the first after ``fit``) validates ``X`` and
        starts the stream with ``start(X, **online_options)``; later calls refuse options. ``X`` must have the
        columns seen first: by the first call of a new estimator, or by ``fit`` (a stream after ``fit`` keeps its
        width and names; another width is refused naming both counts). Then ``update(state, X)`` and
        ``posterior(state)`` give the new state and ``posterior_``."""
        state = self.__dict__.get("_online_state")
        if state is None:
            X = self._validate(X, reset="posterior_" not in self.__dict__)
            self._check_params()
            state = start(X, **online_options)
        else:
            if online_options:
                raise DataError(
                    f"partial_fit takes online options only at its first call; got {sorted(online_options)} later. "
                    "Call fit(), or start a new estimator, to change them."
                )
            X = self._validate(X, reset=False)
        state = update(state, X)
        self._online_state = state
        self.posterior_ = posterior(state)
        self.n_iter_ = int(state.n_updates)
        self._after_fit(X)
        return self

    def _fit_sharded(self, X: Any) -> LatentEstimator:
        """``fit`` on a ``dask.array.Array``: the engine fits it shard by shard (each shard validated in its
        own task; engines that cannot shard refuse it in :func:`latentfs.fit`). The training rows are never
        gathered, so attributes computed from them (``labels_``) are not set: ``est.predict(X)`` gives them lazily,
        block by block."""
        from latentfs.core.registry import fit

        if X.ndim != 2:
            raise DataError(f"X must be a 2-D dask array (rows × features); got {X.ndim} dimension(s).")
        self._check_params()
        for name in ("feature_names_in_", "labels_"):
            self.__dict__.pop(name, None)
        self.n_features_in_ = int(X.shape[1])
        model = self._make_model()
        self._take_posterior(fit(model, X, method=self.method, **self._engine_options(model)), None)
        return self

    def _adopt(self, posterior: Any) -> LatentEstimator:
        """Make this estimator the fitted estimator of ``posterior`` (a result of :func:`latentfs.fit` of
        the matching model) without refitting: its learned attributes come from the result. Column names
        are matched on new data when the result carries names given by the user (generated names such as
        ``w0, w1, …`` are not names)."""
        names = posterior.coords.get("feature") or posterior.coords.get("item") or []
        self.n_features_in_ = len(names)
        if names and not _generated(names):
            self.feature_names_in_ = np.asarray(names, dtype=object)
        self._take_posterior(posterior, None)
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
        tags.input_tags.allow_nan = self._allow_nan
        return tags


class LatentClusterer(ClusterMixin, DensityMixin, LatentEstimator):
    """Base of the finite-mixture estimators: a subclass gives ``_log_joint_of(X)``, the (n, K) torch tensor
    log π_k + log g_k(x_n) of validated rows at the fitted parameters, and sets ``weights_`` (π) before calling this
    class's ``_after_fit``; the base gives the rest of the clusterer.

    ``predict_proba`` (and ``transform``) gives the responsibilities τ_nk = π_k g_k(x_n) / Σ_l π_l g_l(x_n)
    (Titterington 2006, §1.4), ``predict`` their arg max, ``score_samples`` log Σ_k π_k g_k(x_n), ``score`` its mean
    per row, and ``labels_`` the component of each training row (not set for a fit adopted from a result or on a
    dask array, where no training rows are at hand).
    """

    weights_: np.ndarray

    def _log_joint_of(self, X: np.ndarray) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _after_fit(self, X: Any) -> None:
        if X is not None:  # None: adopted from a result (Posterior.estimator) or fitted on shards, no rows at hand
            self.labels_ = np.asarray(self._log_joint_of(X).argmax(1), dtype=np.int64)

    def _log_joint(self, X: Any) -> Any:
        """log π_k + log g_k(x_n) of new rows (validated, columns matched), (n, K).

        Computed row by row from the fitted parameters, not through the engines' data preparation, so that a
        single row or a batch with a constant column is scored like any other.
        """
        self._check_fitted()
        return self._log_joint_of(self._validate(X, reset=False))

    @property
    def _n_features_out(self) -> int:
        return int(self.weights_.shape[0])

    def predict_proba(self, X: Any) -> np.ndarray:
        """Responsibilities P(component | x), shape (n_samples, n_components); rows sum to 1."""
        import torch

        return torch.softmax(self._log_joint(X), 1).numpy()

    def transform(self, X: Any) -> np.ndarray:
        """The responsibilities (:meth:`predict_proba`), the samples' representation."""
        return self.predict_proba(X)

    def predict(self, X: Any) -> np.ndarray:
        """The most probable component of each row."""
        return np.asarray(self.predict_proba(X).argmax(1), dtype=np.int64)

    def fit_predict(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        """Fit, then the component of each training row (``labels_``)."""
        return np.asarray(self.fit(X).labels_)

    def score_samples(self, X: Any) -> np.ndarray:
        """log p(x_n) = log Σ_k π_k g_k(x_n) of each row."""
        import torch

        return torch.logsumexp(self._log_joint(X), 1).numpy()

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log-likelihood per row (higher is better); ``y`` is ignored."""
        return float(self.score_samples(X).mean())
