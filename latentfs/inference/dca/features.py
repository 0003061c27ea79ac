"""DCA components as document features, and the class-as-extra-group classifier (Buntine & Jakulin 2006, Section 9).

The chapter feeds a support vector machine with the "component-generated word counts" E[c_(i)] of each
document (alone or next to the word counts), treating a component as absent when its expected count is
below 0.01; and it uses MPCA itself as a classifier by adding the class as an extra multinomial group
(Section 4.4), filled in for training documents and left empty for test documents.

* :func:`component_features` — E[c] (``kind="counts"``) or E[m] (``kind="proportions"``) of the fitted
  documents, from ``result.extras["component_counts"]``;
* :func:`fold_in_features` — the same for new documents, with Θ held at the fitted mean: the per-document
  mean-field update (eq. 14/17, or the CGP step of :mod:`latentfs.inference.dca.cgp`) iterated to
  convergence;
* :class:`DCAFeatures` — fit / transform / fit_transform wrapper of the two;
* :class:`DCAClassifier` — the class as an extra group; P(class | w) = Σ_k E_q[m_k] θ_{class,k}.

With ``kind="counts"`` a feature is E[c_k] = a_k − α_k (VB) or the mean of c_k over draws (Gibbs); with
``kind="proportions"`` it is E[m_k] = a_k / Σa (DM) or E[l_k] / Σ E[l] (GaP, CGP). Entries whose expected
count is below ``threshold`` are set to 0 in both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin

from latentfs.core.base import ParamsAsDataError, check_fitted, check_X
from latentfs.core.data import DataError, as_counts, as_labels, check_choice, check_n_components
from latentfs.core.estimator import check_nonnegative, class_labels, round_counts
from latentfs.core.results import Posterior

__all__ = ["component_features", "fold_in_features", "DCAFeatures", "DCAClassifier"]

KINDS = ("counts", "proportions")
_DCA_MODELS = ("DirichletDCA", "GammaPoissonDCA", "ConditionalGammaPoissonDCA")


def _check_result(result: Any) -> Posterior:
    if not isinstance(result, Posterior) or result.model not in _DCA_MODELS:
        got = result.model if isinstance(result, Posterior) else type(result).__name__
        raise DataError(
            f"result must be a fitted DCA Posterior ({', '.join(_DCA_MODELS)}); got {got}. Fit a DCA model first."
        )
    if "component_counts" not in result.extras:
        raise DataError(
            f"result must hold extras['component_counts'] (VB and Gibbs engines store it); method {result.method!r} "
            "does not. Refit with method='vb' or 'gibbs'."
        )
    return result


def _component_counts(result: Posterior) -> np.ndarray:
    """``extras["component_counts"]`` in the one convention of every engine: (I, K), documents × components,
    chain-averaged after relabelling for samplers. Anything else is refused, never normalised along a guess."""
    counts = np.asarray(result.extras["component_counts"], dtype=np.float64)
    n_docs = len(result.coords.get("document", ())) or counts.shape[0]
    K = len(result.coords.get("component", ())) or int(np.asarray(result.hyperparameters["alpha"]).size)
    if counts.shape != (n_docs, K):
        per_chain = counts.ndim == 3 and counts.shape[1:] == (n_docs, K)
        raise DataError(
            f"result.extras['component_counts'] must have shape (documents, components) = {(n_docs, K)}; got "
            f"{counts.shape}."
            + (" It is per chain: average the chains only after relabelling them to one label order (the engine "
               "should do so and record result.alignment)." if per_chain else " Refit with a current engine.")
        )
    if (counts < 0).any() or not np.isfinite(counts).all():
        raise DataError("result.extras['component_counts'] must hold finite non-negative expected counts.")
    return counts


def _check_kind(kind: str, threshold: float) -> None:
    if kind not in KINDS:
        raise DataError(f"kind must be one of {KINDS}; got {kind!r}.")
    if not np.isfinite(threshold) or threshold < 0:
        raise DataError(f"threshold must be a finite non-negative number; got {threshold!r}.")


def _features(counts: np.ndarray, scores: np.ndarray, kind: str, threshold: float) -> np.ndarray:
    """Threshold E[c] at ``threshold``; for proportions normalise the scores over the present components."""
    present = counts >= threshold
    if kind == "counts":
        return np.where(present, counts, 0.0)
    kept = np.where(present, scores, 0.0)
    totals = kept.sum(1, keepdims=True)
    return kept / np.where(totals > 0, totals, 1.0)


def component_features(result: Posterior, *, kind: str = "counts", threshold: float = 0.01) -> np.ndarray:
    """E[c] or E[m] of every fitted document (I, K); entries with E[c_k] < ``threshold`` are 0.

    Rows follow the documents the fit kept (``result.extras["kept_documents"]``).

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2, alpha=0.5)
    >>> X = model.simulate(20, 8, doc_length=30, seed=0)["counts"]
    >>> result = latentfs.fit(model, X, method="vb", seed=0, warn=False)
    >>> F = component_features(result)
    >>> F.shape, bool(np.allclose(F.sum(1), 30, atol=0.05))
    ((20, 2), True)
    """
    result = _check_result(result)
    _check_kind(kind, threshold)
    counts = _component_counts(result)
    if result.model == "DirichletDCA":
        scores = counts + np.asarray(result.hyperparameters["alpha"])
    elif "doc_scores_mean" in result.extras:
        scores = np.asarray(result.extras["doc_scores_mean"], dtype=np.float64)
    else:
        scores = result.mean("doc_scores")
    return _features(counts, scores, kind, threshold)


def _fold_in_shapes(
    topic_word: np.ndarray, X: sp.csr_matrix, alpha: np.ndarray, beta: np.ndarray | None, max_iter: int, tol: float
) -> np.ndarray:
    """Iterate a = α + exp(E[log latent]) ∘ Σ_j w_j θ_jk / Z_j with Θ fixed (eq. 14/17); returns a (n, K).

    E[log m] = ψ(a) − ψ(Σa) (DM, ``beta`` None) or E[log l] = ψ(a) − log(1 + β) (GaP). Documents without
    tokens keep a = α.
    """
    coo = X.tocoo()
    doc = torch.as_tensor(coo.row.astype(np.int64))
    w = torch.as_tensor(coo.data, dtype=torch.float64)
    theta_nz = torch.as_tensor(topic_word.T, dtype=torch.float64)[torch.as_tensor(coo.col.astype(np.int64))]
    a0 = torch.as_tensor(alpha, dtype=torch.float64)
    K = topic_word.shape[0]
    lengths = torch.zeros(X.shape[0], dtype=torch.float64).index_add_(0, doc, w)
    a = a0 + (lengths / K)[:, None]
    log_b = None if beta is None else torch.log1p(torch.as_tensor(beta, dtype=torch.float64))
    for _ in range(max_iter):
        elog = torch.digamma(a) - (torch.digamma(a.sum(-1, keepdim=True)) if log_b is None else log_b)
        weights = torch.exp(elog)[doc] * theta_nz
        resp = weights * (w / weights.sum(-1))[:, None]
        new = a0 + torch.zeros_like(a).index_add_(0, doc, resp)
        change = float((new - a).abs().max()) if new.numel() else 0.0
        a = new
        if change <= tol:
            break
    return a.numpy()


def fold_in_features(
    result: Posterior,
    X: Any,
    *,
    kind: str = "counts",
    threshold: float = 0.01,
    max_iter: int = 500,
    tol: float = 1e-8,
) -> np.ndarray:
    """E[c] or E[m] of new documents ``X`` with Θ held at the fitted mean (module docstring).

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2, alpha=0.5)
    >>> X = model.simulate(30, 8, doc_length=30, seed=0)["counts"]
    >>> result = latentfs.fit(model, X[:20], method="vb", seed=0, warn=False)
    >>> F = fold_in_features(result, X[20:], kind="proportions")
    >>> F.shape, bool(np.allclose(F.sum(1), 1))
    ((10, 2), True)
    """
    result = _check_result(result)
    _check_kind(kind, threshold)
    for name, v in (("max_iter", max_iter),):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise DataError(f"{name} must be a positive integer; got {v!r}.")
    theta = result.mean("topic_word")
    counts = as_counts(X, name="X", empty_documents="keep").csr
    if counts.shape[1] != theta.shape[1]:
        raise DataError(
            f"X must have {theta.shape[1]} features (the fitted vocabulary); got {counts.shape[1]}. Use the same "
            "columns as the training data."
        )
    hp = result.hyperparameters
    alpha = np.asarray(hp["alpha"], dtype=np.float64)
    if result.model == "ConditionalGammaPoissonDCA":
        from latentfs.inference.dca.cgp import cgp_fold_in

        out = cgp_fold_in(result, counts, max_iter=max_iter, tol=tol)
        return _features(out["component_counts"], out["doc_scores_mean"], kind, threshold)
    beta = None if result.model == "DirichletDCA" else np.asarray(hp["beta"], dtype=np.float64)
    a = _fold_in_shapes(theta, counts, alpha, beta, max_iter, tol)
    scores = a if beta is None else a / (1 + beta)
    return _features(a - alpha, scores, kind, threshold)


def _keep_empty(model: Any, method: str) -> dict[str, Any]:
    """``empty_documents="keep"`` where the engine takes it: an empty row is a document of the data too (it gets
    its prior), so that every row of ``X`` has a feature row, as scikit-learn's LDA does."""
    from latentfs.core.registry import _ENGINES, _load_engines, engine_options

    _load_engines()
    engine = next((_ENGINES[(c, method)] for c in type(model).__mro__ if (c, method) in _ENGINES), None)
    accepted = engine_options(engine) if engine is not None else []
    return {"empty_documents": "keep"} if accepted is None or "empty_documents" in accepted else {}


def _check_non_integer(non_integer: str) -> None:
    check_choice("non_integer", non_integer, ("error", "round"))


def _rounded_counts(estimator: Any, X: Any, *, reset: bool, min_samples: int = 1) -> Any:
    """``X`` checked as a non-negative count matrix (CSR kept sparse), rounded when ``non_integer="round"``."""
    X = check_X(estimator, X, reset=reset, accept_sparse="csr", ensure_min_samples=min_samples)
    check_nonnegative(X, type(estimator).__name__)
    return round_counts(X) if estimator.non_integer == "round" else X


class _FittedCounts:
    """Mixin of the estimators here, which take count matrices and keep their fit as ``result_``: scikit-learn's tags
    for sparse, non-negative input, and pickling that first computes the result's pointwise log-likelihood (a
    Posterior may hold it as a closure until first use; computed, it is plain arrays)."""

    def __getstate__(self) -> dict[str, Any]:
        post = self.__dict__.get("result_")
        if post is not None and hasattr(post, "pointwise_log_likelihood"):
            post.pointwise_log_likelihood()
        return super().__getstate__()  # type: ignore[misc,return-value]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        return tags


class DCAFeatures(_FittedCounts, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Component features of documents (module docstring): fit a DCA model, then E[c] or E[m] per document.

    Parameters
    ----------
    model : a latentfs DCA model (DirichletDCA, GammaPoissonDCA, ConditionalGammaPoissonDCA)
        A parameter: ``fit`` does not change it, and :func:`sklearn.base.clone` copies it.
    kind : {"counts", "proportions"}
    threshold : float, default 0.01
        Components with expected count below this are absent (the chapter's rule).
    method : str, default "vb"
    seed : int, Generator or None, default 0
    fit_options : dict, optional
        Passed to :func:`latentfs.fit`.
    non_integer : {"error", "round"}
        What to do with non-integer entries of ``X``: raise (the models are for counts), or round first.

    Attributes
    ----------
    result_ : Posterior of the fit
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` in ``fit`` had string column names.

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(3, alpha=0.3)
    >>> X = model.simulate(40, 12, doc_length=40, seed=1)["counts"]
    >>> feats = DCAFeatures(model, fit_options={"warn": False}).fit(X[:30])
    >>> feats.transform(X[30:]).shape
    (10, 3)
    """

    def __init__(
        self,
        model: Any = None,
        *,
        kind: str = "counts",
        threshold: float = 0.01,
        method: str = "vb",
        seed: Any = 0,
        fit_options: dict[str, Any] | None = None,
        non_integer: str = "error",
    ) -> None:
        self.model = model
        self.kind = kind
        self.threshold = threshold
        self.method = method
        self.seed = seed
        self.fit_options = fit_options
        self.non_integer = non_integer

    def fit(self, X: Any, y: Any = None) -> DCAFeatures:
        """Fit the DCA model to the counts ``X``; ``y`` is ignored."""
        from latentfs.core.registry import fit
        from latentfs.models.dca import DirichletDCA

        _check_kind(self.kind, self.threshold)
        _check_non_integer(self.non_integer)
        counts = _rounded_counts(self, X, reset=True)
        model = DirichletDCA(2) if self.model is None else self.model
        K, J = int(getattr(model, "n_components", 1)), counts.shape[1]
        if K > J:
            raise DataError(
                f"model has {K} components but X has n_features = {J} word(s); more components than words cannot "
                "be told apart. Use a model with fewer components or more words."
            )
        options = {**_keep_empty(model, self.method), **(self.fit_options or {})}
        self.result_ = fit(model, counts, method=self.method, seed=self.seed, **options)
        return self

    @property
    def _n_features_out(self) -> int:
        return int(self.result_.mean("topic_word").shape[0])

    def _check_fitted(self) -> Posterior:
        check_fitted(self, "result_", call="fit(X)")
        return self.result_

    def transform(self, X: Any) -> np.ndarray:
        """Features of (new) documents by fold-in with Θ fixed."""
        result = self._check_fitted()
        return fold_in_features(result, _rounded_counts(self, X, reset=False), kind=self.kind, threshold=self.threshold)

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit, then the fitted documents' own features (from the fit, not a second fold-in).

        These equal ``fit(X).transform(X)`` only at convergence: the fit's E[c] comes from the joint fit,
        ``transform`` folds each document in again with Θ held at its posterior mean.
        """
        return component_features(self.fit(X).result_, kind=self.kind, threshold=self.threshold)


class DCAClassifier(_FittedCounts, ParamsAsDataError, ClassifierMixin, BaseEstimator):
    """Dirichlet DCA as a classifier: the class is an extra multinomial group (Buntine & Jakulin, Sections 4.4, 9).

    Training documents get ``class_tokens`` tokens of their class's word in the class group; the grouped
    model is fitted to words and classes together. A test document's class group is empty (it contributes
    nothing), its proportions are folded in from its words with Θ fixed, and
    P(class c | w) = Σ_k E_q[m_k] θ_{c,k}; the rows sum to 1 because Θ is normalised within the class
    group.

    Parameters
    ----------
    n_components : int
    alpha : float or array (K,), default 1/K
    gamma : float, default 0.5
    class_tokens : int, default 1
        Tokens of the class word added to each training document (the chapter adds the class as one
        multinomial group; more tokens tie components more tightly to classes).
    groups : array (J,), optional
        A grouping of the word vocabulary itself (the class group is appended).
    method : {"vb", "gibbs"}, default "vb"
    seed : int
    fit_options : dict, optional
        Passed to :func:`latentfs.fit`.
    class_prior : {"uniform", "fitted", "model"} or array (C,), default "uniform"
        The class prior π of the decision. The model gives P_model(c | w) = Σ_k E_q[m_k] θ_{c,k} and, from
        the prior E[m] = α / Σα, P_model(c) = Σ_k α_k θ_{c,k} / Σα; the class likelihood is
        p(w | c) ∝ P_model(c | w) / P_model(c), and P(c | w) ∝ π_c p(w | c) (Bayes' rule, as in naive
        Bayes). ``"uniform"`` (default): π = 1/C, a balanced decision; on a 92/8 planted problem it gave
        minority recall 0.98 where the model's own posterior and the training frequencies gave 0.0
        (the model's class posterior already carries the training imbalance); ``"fitted"``: π = the
        training class frequencies; ``"model"``: the model's own P_model(c | w) unchanged (the behaviour
        before class priors); an array: those prior probabilities.
    threshold : float in (0, 1), optional
        Two classes only: predict ``classes_[1]`` when its probability is at least ``threshold``
        (instead of the larger probability).
    non_integer : {"error", "round"}
        What to do with non-integer entries of ``X``: raise (the model is for counts), or round first.

    Attributes
    ----------
    classes_ : ndarray, the class labels; ``class_prior_`` : ndarray, π used; ``result_`` : the fitted Posterior;
    ``n_features_in_`` : int; ``feature_names_in_`` : ndarray of str (only when ``X`` had string column names)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.multinomial(30, [0.4, 0.4, 0.1, 0.1], size=20),
    ...                rng.multinomial(30, [0.1, 0.1, 0.4, 0.4], size=20)])
    >>> y = np.repeat(["a", "b"], 20)
    >>> clf = DCAClassifier(2, alpha=0.5, fit_options={"warn": False}).fit(X, y)
    >>> float((clf.predict(X) == y).mean()) > 0.9
    True
    """

    def __init__(
        self,
        n_components: int = 10,
        *,
        alpha: Any = None,
        gamma: Any = 0.5,
        class_tokens: int = 1,
        groups: Any = None,
        method: str = "vb",
        seed: int = 0,
        fit_options: dict[str, Any] | None = None,
        class_prior: Any = "uniform",
        threshold: float | None = None,
        non_integer: str = "error",
    ) -> None:
        self.n_components = n_components
        self.alpha = alpha
        self.gamma = gamma
        self.class_tokens = class_tokens
        self.groups = groups
        self.method = method
        self.seed = seed
        self.fit_options = fit_options
        self.class_prior = class_prior
        self.threshold = threshold
        self.non_integer = non_integer

    def _resolve_prior(self, frequencies: np.ndarray) -> np.ndarray | None:
        """π of the decision (None for the model's own posterior); validates class_prior and threshold."""
        C = frequencies.size
        t = self.threshold
        if t is not None:
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < 1:
                raise DataError(f"threshold must be a number in (0, 1) or None; got {t!r}.")
            if C != 2:
                raise DataError(f"threshold applies to two classes; got {C}. Use class_prior=… for more classes.")
        prior = self.class_prior
        if isinstance(prior, str):
            if prior == "fitted":
                return frequencies / frequencies.sum()
            if prior == "uniform":
                return np.full(C, 1.0 / C)
            if prior == "model":
                return None
            raise DataError(
                f"class_prior must be 'fitted', 'uniform', 'model' or an array of {C} probabilities; got {prior!r}."
            )
        arr = np.asarray(prior, dtype=np.float64)
        if arr.shape != (C,) or not np.isfinite(arr).all() or (arr <= 0).any():
            raise DataError(
                f"class_prior must hold {C} positive numbers (one per class, in the order of classes_); got {prior!r}."
            )
        return arr / arr.sum()

    def fit(self, X: Any, y: Any) -> DCAClassifier:
        from latentfs.core.registry import fit
        from latentfs.models.dca import DirichletDCA, check_groups

        _check_non_integer(self.non_integer)
        counts = as_counts(_rounded_counts(self, X, reset=True, min_samples=2), name="X", empty_documents="keep").csr
        n, J = counts.shape
        codes, classes = as_labels(class_labels(self, y), n)
        check_n_components(self.n_components, J + classes.size, what="the number of words plus classes")
        w = self.class_tokens
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 1:
            raise DataError(f"class_tokens must be a positive integer (class tokens per document); got {w!r}.")
        if self.method not in ("vb", "gibbs"):
            raise DataError(f"method must be 'vb' or 'gibbs'; got {self.method!r}.")
        word_groups = np.zeros(J, dtype=np.int64) if self.groups is None else check_groups(self.groups)
        if word_groups.size != J:
            raise DataError(f"groups must have one entry per feature ({J}); got {word_groups.size}.")
        groups = np.concatenate([word_groups, np.full(classes.size, word_groups.max() + 1)])
        onehot = sp.csr_matrix((np.full(n, float(w)), (np.arange(n), codes)), shape=(n, classes.size))
        augmented = sp.hstack([counts, onehot], format="csr")
        model = DirichletDCA(self.n_components, alpha=self.alpha, gamma=self.gamma, groups=groups)
        self.class_prior_ = self._resolve_prior(np.bincount(codes, minlength=classes.size).astype(np.float64))
        self.result_ = fit(model, augmented, method=self.method, seed=self.seed, **(self.fit_options or {}))
        self.classes_ = classes
        return self

    def _check_fitted(self) -> None:
        check_fitted(self, "result_", call="fit(X, y)")

    def predict_proba(self, X: Any) -> np.ndarray:
        """P(class | words) for each document (n, C) under ``class_prior``; rows sum to 1."""
        self._check_fitted()
        counts = as_counts(_rounded_counts(self, X, reset=False), name="X", empty_documents="keep").csr
        theta = self.result_.mean("topic_word")
        J = self.n_features_in_
        alpha = np.asarray(self.result_.hyperparameters["alpha"], dtype=np.float64)
        a = _fold_in_shapes(theta[:, :J], counts, alpha, None, 500, 1e-8)  # the class group is empty
        m = a / a.sum(1, keepdims=True)
        proba = m @ theta[:, J:]
        if self.class_prior_ is not None:
            model_prior = alpha @ theta[:, J:] / alpha.sum()  # P_model(c), from E[m] = α / Σα
            proba = proba / model_prior * self.class_prior_
        return proba / proba.sum(1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each document (or, with ``threshold``, classes_[1] when P ≥ threshold)."""
        self._check_fitted()
        proba = self.predict_proba(X)
        if self.threshold is not None:
            return self.classes_[(proba[:, 1] >= self.threshold).astype(np.int64)]
        return self.classes_[np.argmax(proba, axis=1)]
