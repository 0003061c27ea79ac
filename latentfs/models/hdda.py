"""High-dimensional discriminant analysis (HDDA) and clustering (HDDC).

Bouveyron, Girard & Schmid (2006), "Class-specific subspace discriminant analysis for high-dimensional
data", LNCS 3940, and the HDDA/HDDC papers of 2007: every class is Gaussian, N(μ_i, Σ_i), with

    Σ_i = Q_i diag(a_i1, …, a_id_i, b_i, …, b_i) Q_iᵗ = b_i I_p + Q̃_i diag(a_i − b_i) Q̃_iᵗ,

an intrinsic dimension d_i, signal variances a_ij > b_i, a noise variance b_i and an orientation Q̃_i
(p × d_i, orthonormal). This module holds

* :class:`HDDAModel`, the Pyro declaration of that class-conditional / mixture model (the source of truth,
  DESIGN.md contract 1), with ``simulate(..., seed=)`` planting class subspaces, and registered for
  ``latentfs.fit(model, X, method="em")`` (HDDC by EM, :mod:`latentfs.inference.hdda_em`);
* :class:`HDDA`, the supervised classifier (``fit(X, y)``, ``predict``, ``predict_proba``,
  ``decision_function`` = the cost K_i), and :class:`HDDC`, the clusterer; both follow the scikit-learn
  conventions (learned attributes end in ``_``). Their numerics live in :mod:`latentfs.inference.hdda`.

Pyro sites of :meth:`HDDAModel.model`
=======================  ========================  ===============================================
site                     shape                     meaning (symbol)
=======================  ========================  ===============================================
``weights``              (k,)                      class proportions π
``means``                (k, p)                    μ_i
``noise_variance``       (k,)                      b_i
``signal_excess``        (k, d_max)                a_ij − b_i > 0 (entries j ≥ d_i are unused)
``orientation_raw``      (k, p, d_max)             Gaussian matrix Z_i; Q̃_i = polar factor of its first
                                                   d_i columns, Z (ZᵗZ)^{-1/2} (Haar-distributed)
``orientation``          (k, p, d_max)             deterministic Q̃_i, zero-padded beyond d_i
``signal_variance``      (k, d_max)                deterministic a_ij = b_i + excess (0 beyond d_i)
``labels``               (n,)                      class of each row (sampled or observed)
``X``                    (n, p)                    the data
=======================  ========================  ===============================================

Missing values are not modelled: NaN in ``X`` raises :class:`~latentfs.data.DataError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from latentfs.data import DataError, as_continuous, as_labels, check_n_components, check_positive

__all__ = ["HDDA", "HDDC", "HDDAModel"]


# ---------------------------------------------------------------------------------------------------
# The Pyro model
# ---------------------------------------------------------------------------------------------------
def polar_orthonormal(raw: torch.Tensor) -> torch.Tensor:
    """Q = Z (ZᵗZ)^{-1/2}, the orthonormal polar factor of a p × d matrix (batched over leading dims).

    For Z with i.i.d. N(0, 1) entries Q is uniform (Haar) on the Stiefel manifold; for an orthonormal Z,
    Q = Z, which is how a fitted Q̃_i is conditioned on.
    """
    gram = raw.transpose(-1, -2) @ raw
    vals, vecs = torch.linalg.eigh(gram)
    inv_sqrt = (vecs * vals.clamp_min(1e-300).rsqrt().unsqueeze(-2)) @ vecs.transpose(-1, -2)
    return raw @ inv_sqrt


class HDDAModel:
    """Gaussian classes living in class-specific subspaces, declared in Pyro (the general model [a_ij b_i Q_i d_i]).

    Generative process (Bouveyron et al. 2006, §2; priors are ours, weakly informative):
    π ~ Dirichlet(c·1_k); μ_i ~ N(0, s_μ² I_p); b_i ~ LogNormal(log s_b, 1); a_ij − b_i ~ LogNormal(log s_a, 1);
    Q̃_i = polar(Z_i), Z_i ~ N(0, 1)^{p×d_i}; z_n ~ Categorical(π);
    x_n ~ N(μ_z, b_z I + Q̃_z diag(a_z − b_z) Q̃_zᵗ) — a ``LowRankMultivariateNormal``.

    Parameters
    ----------
    n_components : int
        k, the number of classes.
    n_dims : int or sequence of int, optional
        d_i, the intrinsic dimension of each class (one int: the same for all). Required by
        :meth:`model` and :meth:`simulate`; when None the EM engine chooses them (``n_dims="cattell"``).
    submodel : str or int, default "AkjBkQkDk"
        The member of the family fitted by the EM engine (see ``latentfs.inference.hdda.SUBMODELS``).
        The Pyro declaration is the general model; sub-models are equality constraints on its values.
    weight_concentration, mean_scale, noise_scale, signal_scale : float
        c, s_μ, s_b, s_a of the priors above.

    Examples
    --------
    >>> model = HDDAModel(2, n_dims=[1, 2])
    >>> sim = model.simulate(50, 6, seed=0)
    >>> sim["X"].shape, sim["orientation"].shape, np.round(sim["orientation"][1].T @ sim["orientation"][1], 6).tolist()
    ((50, 6), (2, 6, 2), [[1.0, 0.0], [0.0, 1.0]])
    """

    default_method = "em"

    def __init__(
        self,
        n_components: int,
        n_dims: int | Sequence[int] | None = None,
        *,
        submodel: str | int = "AkjBkQkDk",
        weight_concentration: float = 1.0,
        mean_scale: float = 10.0,
        noise_scale: float = 1.0,
        signal_scale: float = 25.0,
    ) -> None:
        self.n_components = check_n_components(n_components, 10**6)
        if n_dims is None:
            self.n_dims = None
        else:
            arr = np.broadcast_to(np.asarray(n_dims), (self.n_components,))
            if arr.dtype.kind not in "iu" or (arr < 1).any():
                raise DataError(
                    f"n_dims must be positive integers (one, or one per component); got {n_dims!r}."
                )
            self.n_dims = tuple(int(d) for d in arr)
        from latentfs.inference.hdda import resolve_submodel

        self.submodel = resolve_submodel(submodel, name="submodel").name
        self.weight_concentration = float(check_positive(weight_concentration, "weight_concentration"))
        self.mean_scale = float(check_positive(mean_scale, "mean_scale"))
        self.noise_scale = float(check_positive(noise_scale, "noise_scale"))
        self.signal_scale = float(check_positive(signal_scale, "signal_scale"))

    def __repr__(self) -> str:
        return f"HDDAModel({self.n_components}, n_dims={self.n_dims}, submodel={self.submodel!r})"

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "n_dims": None if self.n_dims is None else list(self.n_dims),
            "submodel": self.submodel,
            "weight_concentration": self.weight_concentration,
            "mean_scale": self.mean_scale,
            "noise_scale": self.noise_scale,
            "signal_scale": self.signal_scale,
        }

    def _dims(self, n_features: int) -> tuple[int, ...]:
        if self.n_dims is None:
            raise DataError("n_dims must be set to declare the Pyro model (HDDAModel(k, n_dims=...)); got None.")
        if max(self.n_dims) >= n_features:
            raise DataError(
                f"n_dims must be below the number of features ({n_features}); got {list(self.n_dims)}."
            )
        return self.n_dims

    def model(
        self,
        X: torch.Tensor | None = None,
        *,
        labels: torch.Tensor | None = None,
        n_samples: int | None = None,
        n_features: int | None = None,
    ) -> torch.Tensor:
        """The model. With ``labels`` (or when simulating) z is an explicit site; with ``X`` and no labels the
        classes are summed out (a ``MixtureSameFamily`` site ``X``), which is what HDDC maximises."""
        if X is not None:
            n_samples, n_features = X.shape
            dtype = X.dtype
        else:
            if n_samples is None or n_features is None:
                raise DataError("model needs X, or n_samples and n_features to simulate.")
            dtype = torch.float64
        k, p = self.n_components, int(n_features)
        dims = self._dims(p)
        d_max = max(dims)
        t = lambda v: torch.as_tensor(v, dtype=dtype)  # noqa: E731
        weights = pyro.sample("weights", dist.Dirichlet(t(np.full(k, self.weight_concentration))))
        with pyro.plate("component", k, dim=-1):
            means = pyro.sample("means", dist.Normal(t(0.0), t(self.mean_scale)).expand([p]).to_event(1))
            noise = pyro.sample("noise_variance", dist.LogNormal(t(np.log(self.noise_scale)), t(1.0)))
            excess = pyro.sample(
                "signal_excess", dist.LogNormal(t(np.log(self.signal_scale)), t(1.0)).expand([d_max]).to_event(1)
            )
            raw = pyro.sample("orientation_raw", dist.Normal(t(0.0), t(1.0)).expand([p, d_max]).to_event(2))
        mask = torch.as_tensor(np.arange(d_max)[None, :] < np.asarray(dims)[:, None], dtype=dtype)  # (k, d_max)
        orientation = torch.stack(
            [torch.nn.functional.pad(polar_orthonormal(raw[i, :, : dims[i]]), (0, d_max - dims[i])) for i in range(k)]
        )
        orientation = pyro.deterministic("orientation", orientation)
        pyro.deterministic("signal_variance", (noise[:, None] + excess) * mask)
        cov_factor = orientation * (excess * mask).sqrt().unsqueeze(-2)  # (k, p, d_max), zero padded columns
        cov_diag = noise[:, None].expand(k, p)
        with pyro.plate("sample", n_samples, dim=-1):
            if labels is not None or X is None:
                z = pyro.sample("labels", dist.Categorical(weights), obs=labels)
                return pyro.sample(
                    "X", dist.LowRankMultivariateNormal(means[z], cov_factor[z], cov_diag[z]), obs=X
                )
            mixture = dist.MixtureSameFamily(
                dist.Categorical(weights), dist.LowRankMultivariateNormal(means, cov_factor, cov_diag)
            )
            return pyro.sample("X", mixture, obs=X)

    def simulate(
        self,
        n_samples: int,
        n_features: int,
        *,
        seed: int | None = None,
        values: dict[str, Any] | None = None,
    ) -> dict[str, np.ndarray]:
        """Draw data with planted class subspaces from :meth:`model` (a scoped RNG; global state untouched).

        ``values`` fixes any sites (for example ``{"noise_variance": [1, 1], "signal_excess": ...}``) by
        conditioning the model, so tests can plant well-separated subspaces. Returns every sample and
        deterministic site as numpy arrays (``X``, ``labels``, ``orientation``, ``signal_variance``, …).
        """
        fixed = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in (values or {}).items()}
        fn = poutine.condition(self.model, data=fixed) if fixed else self.model
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(int(seed))
            with torch.no_grad():
                trace = poutine.trace(fn).get_trace(n_samples=int(n_samples), n_features=int(n_features))
        return {
            name: site["value"].detach().cpu().numpy()  # type: ignore[union-attr]
            for name, site in trace.nodes.items()
            if site["type"] == "sample"
        }


# ---------------------------------------------------------------------------------------------------
# scikit-learn-style estimators
# ---------------------------------------------------------------------------------------------------
def _num() -> Any:
    # Lazily: models/ must not import engines at module level (DESIGN.md: imports point downward).
    from latentfs.inference import hdda

    return hdda


class _ParamsMixin:
    """get_params / set_params from the constructor signature (scikit-learn protocol, no scikit-learn)."""

    params_: Any
    n_features_in_: int

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        import inspect

        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {n: getattr(self, n) for n in names}

    def set_params(self, **params: Any) -> Any:
        valid = self.get_params()
        for key, value in params.items():
            if key not in valid:
                raise DataError(f"{type(self).__name__} has no parameter {key!r}; valid: {sorted(valid)}.")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    # ---- shared prediction plumbing --------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "params_"):
            raise DataError(f"{type(self).__name__} is not fitted yet; call fit first.")

    def _check_X(self, X: Any) -> np.ndarray:
        self._check_fitted()
        values = as_continuous(X, name="X", missing="error").values
        if values.shape[1] != self.n_features_in_:
            raise DataError(
                f"X must have the {self.n_features_in_} features seen in fit; got {values.shape[1]}. "
                "Pass the same columns, in the same order."
            )
        return values

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

    def decision_function(self, X: Any) -> np.ndarray:
        """The cost K_i(x) = −2 log(π_i f_i(x)) − p log 2π of each class (n, k); the predicted class minimises it."""
        return _num().cost(self._check_X(X), self.params_)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        from scipy.special import logsumexp

        z = -0.5 * self.decision_function(X)
        return z - logsumexp(z, axis=1, keepdims=True)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior class probabilities softmax(−K/2) (n, k)."""
        return np.exp(self.predict_log_proba(X))


class HDDA(_ParamsMixin):
    """High-dimensional discriminant analysis: supervised classification with class-specific subspaces.

    Bouveyron, Girard & Schmid (2006), Theorem 1: assign x to argmin_i K_i(x). Each class's parameters are
    the ML estimates of the chosen member of the family (:data:`latentfs.inference.hdda.SUBMODELS`); the
    intrinsic dimensions come from Cattell's scree test, a per-class BIC, or are given. When a class has
    fewer samples than features, its eigen-decomposition is computed from the n_i × n_i Gram matrix.

    Parameters
    ----------
    model : str, int, list or "all", default "AkjBkQkDk"
        A model name or number (1–28), a list of them, or ``"all"`` (models 1–16); with several, the one
        with the lowest BIC is kept (``criteria_`` lists them all).
    n_dims : "cattell", "bic", int or sequence of int, default "cattell"
        How to choose d_i (see :func:`latentfs.inference.hdda.select_dimensions`).
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
        data = as_continuous(X, name="X", missing="error")
        Xv = data.values
        codes, classes = as_labels(y, Xv.shape[0], name="y", min_classes=2)
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
        self.n_features_in_ = Xv.shape[1]
        self.feature_names_in_ = np.array(data.feature_names)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The class minimising K_i(x)."""
        cost = self.decision_function(X)
        return self.classes_[np.argmin(cost, axis=1)]

    def score(self, X: Any, y: Any) -> float:
        """Accuracy on (X, y); labels not seen in fit are an error."""
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
        return float(np.mean(self.predict(Xv) == arr))

    def bic(self) -> float:
        """BIC = −2 log L + ν log n of the fitted model (lower is better)."""
        self._check_fitted()
        return float(self.bic_)


class HDDC(_ParamsMixin):
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
    init : {"kmeans", "random"} or array of labels, default "kmeans"
    n_init : int, default 4
        Restarts (the best log-likelihood wins).
    max_iter, tol : EM stopping rule (relative change of the log-likelihood).
    algorithm : {"em", "cem"}, default "em"
    seed : int or numpy Generator, optional

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
        seed: int | np.random.Generator | None = None,
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
        data = as_continuous(X, name="X", missing="error", min_samples=2)
        Xv = data.values
        if self.criterion not in ("bic", "icl"):
            raise DataError(f"criterion must be 'bic' or 'icl'; got {self.criterion!r}.")
        ks = [self.n_components] if np.ndim(self.n_components) == 0 else list(self.n_components)  # type: ignore[arg-type]
        ks = [check_n_components(k, Xv.shape[0] // 2, what="at least 2 samples per cluster") for k in ks]
        n_init = check_n_components(self.n_init, 10**6, name="n_init")
        rng = self.seed if isinstance(self.seed, np.random.Generator) else np.random.default_rng(self.seed)
        fits = {}
        for spec in num.resolve_submodels(self.model):
            for k in ks:
                fit = num.fit_hddc(
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
        self.n_features_in_ = Xv.shape[1]
        self.feature_names_in_ = np.array(data.feature_names)
        return self

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        return self.fit(X).labels_

    def predict(self, X: Any) -> np.ndarray:
        """The cluster minimising K_i(x)."""
        return np.argmin(self.decision_function(X), axis=1)

    def sample(self, n_samples: int, *, seed: int | np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Draw (X, labels) from the fitted mixture: x = μ_i + Q̃_i diag(sqrt(a_i − b_i)) z₁ + sqrt(b_i) z₂."""
        self._check_fitted()
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
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
