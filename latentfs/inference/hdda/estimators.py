"""The HDDA and HDDC estimators: Bouveyron, Girard & Schmid (2006), LNCS 3940.

:class:`HDDA` is the supervised classifier (``fit(X, y)``, ``predict``, ``predict_proba``, ``cost`` = the
cost K_i, ``decision_function`` = −K_i/2, scikit-learn's larger-is-likelier convention) and :class:`HDDC` the
clusterer; both are scikit-learn estimators (learned attributes end in ``_``). The model is declared in
:mod:`latentfs.models.hdda`; the numerics live in :mod:`latentfs.inference.hdda.numerics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, ClusterMixin

from latentfs.core.base import ParamsAsDataError, check_fitted, check_X
from latentfs.core.blockwise import BlockwiseNewData
from latentfs.core.data import (
    DataError,
    as_array,
    as_continuous,
    as_labels,
    as_rng,
    check_int,
    check_n_components,
    check_positive,
)
from latentfs.core.estimator import class_labels, match_columns
from latentfs.core.options import check_moments
from latentfs.inference.hdda import numerics as _numerics
from latentfs.inference.hdda.hddc import fit_hddc

__all__ = ["HDDA", "HDDC"]


# ---------------------------------------------------------------------------------------------------
# scikit-learn-style estimators
# ---------------------------------------------------------------------------------------------------
def _num() -> Any:
    return _numerics


class _HDDBase(BlockwiseNewData, ParamsAsDataError, BaseEstimator):
    """Shared prediction plumbing of :class:`HDDA` and :class:`HDDC` (the cost K_i and its softmax). ``predict``,
    ``predict_proba`` and ``predict_log_proba`` take a dask array too (:mod:`latentfs.core.blockwise`)."""

    params_: Any
    n_features_in_: int

    def _check_fitted(self) -> None:
        check_fitted(self, "params_")

    def _fit_input(self, X: Any, min_samples: int = 1) -> Any:
        """X as float64 (DataError messages) with ``n_features_in_``/``feature_names_in_`` set."""
        as_array(X, name="X")  # the container first: masked entries, dates, ragged rows, meta tensors
        # a class subspace needs a lower dimension than the data: at least 2 features
        checked = check_X(self, X, reset=True, ensure_all_finite=False, ensure_min_samples=min_samples,
                          ensure_min_features=2)
        return as_continuous(X if hasattr(X, "iloc") else checked, name="X", missing="error", min_samples=min_samples)

    def _check_X(self, X: Any) -> np.ndarray:
        self._check_fitted()
        as_array(X, name="X")
        X = match_columns(self, X)
        given = getattr(X, "shape", (0, None))[-1]
        if given is not None and given != self.n_features_in_:
            raise DataError(
                f"X must have the {self.n_features_in_} features seen in fit; got {given}. Pass the same columns, "
                f"in the same order (X has {given} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input)."
            )
        checked = check_X(self, X, reset=False, ensure_all_finite=False)
        values = as_continuous(checked, name="X", missing="error").values
        check_moments(values, underflow=False)  # squares that overflow would give NaN costs and probabilities
        return values

    @property
    def _n_features_out(self) -> int:  # the columns of predict_proba on a dask array: one per class
        return int(np.asarray(self.params_.weights).shape[0])

    @property
    def means_(self) -> np.ndarray:
        return self.params_.means

    @property
    def weights_(self) -> np.ndarray:
        return self.params_.weights

    @property
    def dims_(self) -> np.ndarray:
        """d_i, the intrinsic dimension of each class."""
        return self.params_.dims

    @property
    def orientations_(self) -> list[np.ndarray | None]:
        """Q̃_i (p × d_i) per class; None for axis-aligned (diagonal / spherical) models."""
        return self.params_.orientations

    @property
    def signal_variances_(self) -> list[np.ndarray]:
        """a_ij per class."""
        return self.params_.signal

    @property
    def noise_variances_(self) -> np.ndarray:
        """b_i per class."""
        return self.params_.noise

    def cost(self, X: Any) -> np.ndarray:
        """The cost K_i(x) = −2 log(π_i f_i(x)) − p log 2π of each class (n, k); the predicted class minimises it."""
        return _num().cost(self._check_X(X), self.params_)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """log P(class i | x) = log softmax(−K/2) (n, k)."""
        from scipy.special import logsumexp

        z = -0.5 * self.cost(X)
        return z - logsumexp(z, axis=1, keepdims=True)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior class probabilities softmax(−K/2) (n, k)."""
        return np.exp(self.predict_log_proba(X))


class HDDA(ClassifierMixin, _HDDBase):
    """High-dimensional discriminant analysis: supervised classification with class-specific subspaces.

    Bouveyron, Girard & Schmid (2006), Theorem 1: assign x to argmin_i K_i(x). Each class's parameters are
    the ML estimates of the chosen member of the family (:data:`latentfs.inference.hdda.numerics.SUBMODELS`); the
    intrinsic dimensions come from Cattell's scree test, a per-class BIC, or are given. When a class has
    fewer samples than features, its eigen-decomposition is computed from the n_i × n_i Gram matrix.

    Parameters
    ----------
    model : str, int, list or "all", default "AkjBkQkDk"
        A model name or number (1–28), a list of them, or ``"all"`` (models 1–16); with several, the one
        with the lowest BIC is kept (``criteria_`` lists them all).
    n_dims : "cattell", "bic", int or sequence of int, default "cattell"
        How to choose d_i (see :func:`latentfs.inference.hdda.numerics.select_dimensions`).
    threshold : float, default 0.2
        Cattell's relative threshold t.
    noise_ctrl : float, default 1e-8
        Eigenvalues below ``noise_ctrl`` × λ_1 are ignored by the scree test.

    Attributes
    ----------
    classes_, n_features_in_, model_ (chosen model name), params_ (``HDDAParams``), means_, weights_,
    dims_, orientations_, signal_variances_, noise_variances_, log_likelihood_ (complete-data, at the
    MLE), n_parameters_, bic_ (−2 log L + ν log n, lower is better), criteria_ (model -> BIC).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 1, (30, 8)), rng.normal(3, 1, (30, 8))])
    >>> y = np.repeat(["a", "b"], 30)
    >>> clf = HDDA("AkBkQkDk", n_dims=2).fit(X, y)
    >>> clf.dims_.tolist(), float(np.mean(clf.predict(X) == y))
    ([2, 2], 1.0)
    """

    def __init__(
        self,
        model: Any = "AkjBkQkDk",
        *,
        n_dims: Any = "cattell",
        threshold: float = 0.2,
        noise_ctrl: float = 1e-8,
    ) -> None:
        self.model = model
        self.n_dims = n_dims
        self.threshold = threshold
        self.noise_ctrl = noise_ctrl

    def fit(self, X: Any, y: Any) -> HDDA:
        """Estimate each class's parameters (and choose the model by BIC when several are given)."""
        num = _num()
        data = self._fit_input(X, min_samples=2)
        Xv = data.values
        continuous = " (a classifier); use HDDC for clusters or a regression model for a continuous target"
        codes, classes = as_labels(class_labels(self, y, continuous=continuous), Xv.shape[0], name="y", min_classes=2)
        counts = np.bincount(codes, minlength=classes.size)
        if (counts < 2).any():
            bad = int(np.flatnonzero(counts < 2)[0])
            raise DataError(
                f"y must hold at least 2 samples per class to estimate a class covariance; class "
                f"{classes[bad]!r} has {counts[bad]}. Drop that class or add samples."
            )
        check_positive(self.threshold, "threshold")
        specs = num.resolve_submodels(self.model)
        fits = {}
        for spec in specs:
            params, ll, nu = num.fit_hdda_params(
                Xv, codes, classes.size, spec, self.n_dims, threshold=self.threshold,
                noise_ctrl=self.noise_ctrl, class_names=classes.tolist(),
            )
            fits[spec.name] = (params, ll, nu, num.criterion_value("bic", ll, nu, Xv.shape[0]))
        best = min(fits, key=lambda m: fits[m][3])
        self.params_, self.log_likelihood_, self.n_parameters_, self.bic_ = fits[best]
        self.model_ = best
        self.criteria_ = {m: f[3] for m, f in fits.items()}
        self.classes_ = classes
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """scikit-learn's decision values, larger for the predicted class: −K_i(x)/2 = log(π_i f_i(x)) + const
        per class (n, k), or for two classes the difference (n,), positive for ``classes_[1]``. The cost
        itself is :meth:`cost`."""
        score = -0.5 * self.cost(X)
        return score[:, 1] - score[:, 0] if score.shape[1] == 2 else score

    def predict(self, X: Any) -> np.ndarray:
        """The class minimising K_i(x)."""
        cost = self.cost(X)
        return self.classes_[np.argmin(cost, axis=1)]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy on (X, y) (weighted by ``sample_weight`` when given); labels not seen in fit are an error."""
        Xv = self._check_X(X)
        arr = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
        if arr.shape != (Xv.shape[0],):
            raise DataError(f"y must have one label per row of X ({Xv.shape[0]}); got shape {arr.shape}.")
        unseen = np.setdiff1d(np.unique(arr), self.classes_)
        if unseen.size:
            raise DataError(
                f"y holds labels not seen in fit: {unseen[:5].tolist()}; known classes are "
                f"{self.classes_.tolist()}. Drop those rows or refit with them."
            )
        return float(np.average(self.predict(Xv) == arr, weights=sample_weight))

    def bic(self) -> float:
        """BIC = −2 log L + ν log n of the fitted model (lower is better)."""
        self._check_fitted()
        return float(self.bic_)


class HDDC(ClusterMixin, _HDDBase):
    """High-dimensional data clustering: a mixture of subspace Gaussians fitted by EM with restarts.

    Bouveyron, Girard & Schmid (2007, CSDA). E-step t_i(x) = softmax(−K/2); M-step the supervised estimators
    weighted by t; d_i by Cattell's test at each M-step (or fixed). Several models and/or numbers of
    components are compared by BIC or ICL (``criteria_``).

    Parameters
    ----------
    n_components : int or list of int, default 2
    model : str, int, list or "all", default "AkjBkQkDk"
    n_dims, threshold, noise_ctrl : as in :class:`HDDA`
    criterion : {"bic", "icl"}, default "bic"
        Used to choose among several models / numbers of components (lower is better).
    init : {"kmeans", "kmeans++", "random"} or array of labels, default "kmeans"
        The mixtures' starts (:mod:`latentfs.inference.mixture.starts`): ``"kmeans"`` one scikit-learn
        k-means run, ``"kmeans++"`` k-means++ seeding alone (rows to the nearest seed), ``"random"`` a
        random partition.
    n_init : int, default 4
        Restarts (the best log-likelihood wins).
    max_iter, tol : EM stopping rule (relative change of the log-likelihood).
    algorithm : {"em", "cem"}, default "em"
    seed : int, numpy Generator or None, default 0

    Attributes
    ----------
    labels_, resp_ (n, k), params_, model_, n_components_, dims_, log_likelihood_, bic_, icl_,
    n_parameters_, trace_, converged_, n_iter_, criteria_ ((model, k) -> criterion value).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> X = np.vstack([rng.normal(0, 1, (40, 6)), rng.normal(5, 1, (40, 6))])
    >>> hc = HDDC(2, "AkBkQkD", n_dims=2, seed=0, n_init=2).fit(X)
    >>> sorted(np.bincount(hc.labels_).tolist())
    [40, 40]
    """

    def __init__(
        self,
        n_components: int | Sequence[int] = 2,
        model: Any = "AkjBkQkDk",
        *,
        n_dims: Any = "cattell",
        threshold: float = 0.2,
        noise_ctrl: float = 1e-8,
        criterion: str = "bic",
        init: Any = "kmeans",
        n_init: int = 4,
        max_iter: int = 200,
        tol: float = 1e-6,
        algorithm: str = "em",
        seed: int | np.random.Generator | None = 0,
    ) -> None:
        self.n_components = n_components
        self.model = model
        self.n_dims = n_dims
        self.threshold = threshold
        self.noise_ctrl = noise_ctrl
        self.criterion = criterion
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.algorithm = algorithm
        self.seed = seed

    def fit(self, X: Any, y: Any = None) -> HDDC:
        """Cluster X (``y`` is ignored)."""
        num = _num()
        data = self._fit_input(X, min_samples=2)
        Xv = data.values
        if self.criterion not in ("bic", "icl"):
            raise DataError(f"criterion must be 'bic' or 'icl'; got {self.criterion!r}.")
        ks = [self.n_components] if np.ndim(self.n_components) == 0 else list(self.n_components)  # type: ignore[arg-type]
        ks = [check_n_components(k, Xv.shape[0] // 2, what="at least 2 samples per cluster") for k in ks]
        n_init = check_n_components(self.n_init, 10**6, name="n_init")
        rng = as_rng(self.seed)
        fits = {}
        for spec in num.resolve_submodels(self.model):
            for k in ks:
                fit = fit_hddc(
                    Xv, k, spec, self.n_dims, threshold=self.threshold, noise_ctrl=self.noise_ctrl,
                    init=self.init, n_init=n_init, max_iter=self.max_iter, tol=self.tol,
                    algorithm=self.algorithm, seed=rng,
                )
                fits[(spec.name, k)] = fit
        self.criteria_ = {key: getattr(f, self.criterion) for key, f in fits.items()}
        key = min(self.criteria_, key=self.criteria_.get)  # type: ignore[arg-type]
        best = fits[key]
        self.model_, self.n_components_ = key
        self.fit_ = best
        self.params_ = best.params
        self.resp_ = best.resp
        self.labels_ = best.resp.argmax(1)
        self.log_likelihood_ = best.log_likelihood
        self.bic_, self.icl_, self.n_parameters_ = best.bic, best.icl, best.n_parameters
        self.trace_, self.converged_, self.n_iter_ = best.trace, best.converged, best.n_iter
        return self

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit, then the cluster of each row of ``X`` (``labels_``)."""
        return self.fit(X).labels_

    def predict(self, X: Any) -> np.ndarray:
        """The cluster minimising K_i(x)."""
        return np.argmin(self.cost(X), axis=1)

    def sample(self, n_samples: int, *, seed: int | np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Draw (X, labels) from the fitted mixture: x = μ_i + Q̃_i diag(sqrt(a_i − b_i)) z₁ + sqrt(b_i) z₂."""
        self._check_fitted()
        rng = as_rng(seed)
        n_samples = check_int("n_samples", n_samples, low=1)
        params = self.params_
        labels = rng.choice(params.n_classes, size=int(n_samples), p=params.weights)
        p = params.n_features
        out = np.empty((labels.size, p))
        for i in range(params.n_classes):
            rows = np.flatnonzero(labels == i)
            q, a, b, d = params.orientations[i], params.signal[i], params.noise[i], int(params.dims[i])
            x = params.means[i] + (rng.standard_normal((rows.size, p)) * np.sqrt(b) if d < p else 0.0)
            if d > 0:
                excess = np.sqrt(np.maximum(a - (b if d < p else 0.0), 0.0))
                z = rng.standard_normal((rows.size, d)) * excess
                x = x + (z if q is None else z @ q.T)
            out[rows] = x
        return out, labels
