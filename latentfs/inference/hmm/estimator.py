"""Hidden Markov models as scikit-learn estimators: :class:`GaussianHMMEstimator` and
:class:`CategoricalHMMEstimator` fit :class:`~latentfs.models.hmm.GaussianHMM` and
:class:`~latentfs.models.hmm.CategoricalHMM` with any of their engines (EM, VB, Gibbs).

Several sequences follow hmmlearn's convention: their rows are concatenated into one ``X`` and
``lengths`` (summing to ``n_samples``) says where each ends; every method takes ``lengths`` (None: ``X``
is one sequence). scikit-learn's ``y`` is accepted and ignored.

At the fitted parameters (the point estimates of EM, the posterior means of VB and Gibbs; see
:mod:`latentfs.inference.hmm.decode`):

* ``predict`` is the Viterbi path (Viterbi 1967), ``predict_proba`` and ``transform`` the posterior state
  marginals γ_t(k) = P(z_t = k | y) of the forward–backward pass (Rabiner 1989, eq. 27);
* ``score_samples`` is the one-step predictive log-density log p(y_t | y_1..y_{t−1}) of each row, whose
  sum over a sequence is its log-likelihood log f(y_s | θ̂) (Rabiner 1989, eq. 21 with scaling);
  ``score`` is its mean over the rows, the log-likelihood per observation, as every latentfs
  estimator's ``score`` is a mean per row (hmmlearn's ``score`` is the total: multiply by ``n_samples``).

:class:`GaussianHMMEstimator` takes NaN for a missing value with ``covariance_type="diag"`` (the default, as in
:class:`~latentfs.models.hmm.GaussianHMM` and hmmlearn): a missing entry integrates out of the emission
density, and a row entirely missing keeps its place in the chain with emission factor 1.

Rows of ``X`` are a time series, not exchangeable samples: a subset or a permutation of the rows is
another sequence, with other state marginals. scikit-learn's estimator checks, which feed exchangeable
rows (taken here as one sequence), pass for :class:`GaussianHMMEstimator` with no expected failure;
:class:`CategoricalHMMEstimator` takes one column of symbols, which those checks do not generate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.base import DensityMixin

from latentfs.core.data import DataError
from latentfs.core.estimator import LatentEstimator
from latentfs.inference.hmm.forward_backward import ChainLayout, forward_backward, viterbi_path
from latentfs.models.hmm import CategoricalHMM, GaussianHMM, split_input

__all__ = ["CategoricalHMMEstimator", "GaussianHMMEstimator"]

class _HMMEstimator(DensityMixin, LatentEstimator):
    """Shared code: ``fit`` with ``lengths`` and the decoding methods; subclasses build the model."""

    _min_samples = 2

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any = None, *, lengths: Any = None) -> _HMMEstimator:
        """Fit the HMM to the sequences in ``X`` with the engine ``method``; ``y`` is ignored.

        Parameters
        ----------
        X : array (n_samples, n_features)
            The sequences' rows, concatenated.
        y : ignored
        lengths : sequence of int, optional
            Length of each sequence (positive, summing to ``n_samples``); None: one sequence.

        Returns
        -------
        self
        """
        self._fit_rows(X, lengths=lengths)
        return self

    def fit_transform(self, X: Any, y: Any = None, *, lengths: Any = None) -> np.ndarray:  # type: ignore[override]
        """Fit, then the state marginals of the training rows (:meth:`transform`)."""
        return self.fit(X, y, lengths=lengths).transform(X, lengths=lengths)

    def fit_predict(self, X: Any, y: Any = None, *, lengths: Any = None) -> np.ndarray:
        """Fit, then the Viterbi states of the training rows (:meth:`predict`)."""
        return self.fit(X, y, lengths=lengths).predict(X, lengths=lengths)

    def _after_fit(self, X: Any) -> None:
        post = self.posterior_
        start = np.asarray(post.mean("startprob"), dtype=np.float64)
        trans = np.asarray(post.mean("transmat"), dtype=np.float64)
        self.startprob_ = start / start.sum()
        self.transmat_ = trans / trans.sum(-1, keepdims=True)
        self._set_emission()

    def _set_emission(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def _n_features_out(self) -> int:
        return int(self.startprob_.shape[0])

    # ------------------------------------------------------------------ decoding
    def _log_emission(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        """log g_k(y_t) at the fitted parameters, (n_samples, n_components)."""
        raise NotImplementedError

    def _chain(self, X: Any, lengths: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, ChainLayout]:
        """π, A, the log emissions and the sequence layout of new data (validated, columns matched).

        The emissions are computed row by row from the fitted parameters, not through the engines' data
        preparation, so that one row, or a sequence with a constant column, is decoded like any other.
        """
        self._check_fitted()
        X = self._validate(X, reset=False)
        _, lens, _ = split_input(X, lengths, name="X")
        log_em = torch.as_tensor(self._log_emission(X), dtype=torch.float64)
        start = torch.as_tensor(self.startprob_, dtype=torch.float64)
        trans = torch.as_tensor(self.transmat_, dtype=torch.float64)
        return start, trans, log_em, ChainLayout.from_lengths(torch.as_tensor(lens))

    def predict(self, X: Any, lengths: Any = None) -> np.ndarray:
        """The Viterbi state path of each sequence, concatenated: (n_samples,) int64."""
        return np.asarray(viterbi_path(*self._chain(X, lengths)).numpy(), dtype=np.int64)

    def predict_proba(self, X: Any, lengths: Any = None) -> np.ndarray:
        """Posterior state marginals P(z_t = k | y), (n_samples, n_components); rows sum to 1."""
        return np.asarray(forward_backward(*self._chain(X, lengths)).gamma.numpy(), dtype=np.float64)

    def transform(self, X: Any, lengths: Any = None) -> np.ndarray:
        """The state marginals (:meth:`predict_proba`), the rows' representation."""
        return self.predict_proba(X, lengths)

    def score_samples(self, X: Any, lengths: Any = None) -> np.ndarray:
        """log p(y_t | y_1..y_{t−1}) of each row (at a sequence's first row, log p(y_1)); they sum over a
        sequence to its log-likelihood."""
        start, trans, log_em, layout = self._chain(X, lengths)
        filtered = forward_backward(start, trans, log_em, layout).filtered
        # P(z_t | y_1..y_{t−1}): π at a sequence's first row, the filtered law of t−1 times A elsewhere.
        predicted = torch.empty_like(filtered)
        predicted[1:] = filtered[:-1] @ trans
        predicted[layout.is_start] = start
        out = torch.logsumexp(torch.log(predicted.clamp_min(1e-300)) + log_em, dim=1)
        return np.asarray(out.numpy(), dtype=np.float64)

    def score(self, X: Any, y: Any = None, lengths: Any = None) -> float:
        """Log-likelihood per observation, Σ_s log f(y_s | θ̂) / n_samples (higher is better); ``y`` is
        ignored.

        A mean over the rows, as every latentfs estimator's ``score``; hmmlearn's ``score`` is the total
        log-likelihood Σ_s log f(y_s | θ̂), which is this value times ``n_samples``. A row entirely missing
        counts in ``n_samples`` and adds log 1 = 0 to the total."""
        start, trans, log_em, layout = self._chain(X, lengths)
        fb = forward_backward(start, trans, log_em, layout)
        return float(fb.log_likelihood.sum() / log_em.shape[0])


class GaussianHMMEstimator(_HMMEstimator):
    """Gaussian-emission HMM (:class:`~latentfs.models.hmm.GaussianHMM`) with the scikit-learn contract.

    Parameters
    ----------
    n_components : int, default 2
        K, the number of hidden states.
    covariance_type : {"diag", "full"}, default "diag"
        As :class:`~latentfs.models.hmm.GaussianHMM` (and hmmlearn). ``diag`` takes NaN for a missing value
        (a missing entry integrates out; a row entirely missing has emission factor 1); ``full`` refuses NaN.
    startprob_concentration, transition_concentration, mean_precision, degrees_of_freedom :
        priors of the Bayesian engines (see :class:`~latentfs.models.hmm.GaussianHMM`); EM ignores them.
    method : {"em", "vb", "gibbs"}, default "em"
    seed : int, default 0
    max_iter, tol, n_init : optional (EM, VB); num_chains, num_warmup, num_samples : optional (Gibbs).
        None keeps the engine's default.

    Attributes
    ----------
    posterior_ : Posterior
    startprob_ : ndarray (n_components,)
    transmat_ : ndarray (n_components, n_components), rows sum to 1
    components_ : ndarray (n_components, n_features), the state means
    covars_ : ndarray, (n_components, n_features, n_features) (full) or (n_components, n_features) (diag)

    Examples
    --------
    >>> sim = GaussianHMM(2, mean_precision=0.02).simulate(3, 40, seed=1)
    >>> hmm = GaussianHMMEstimator(2).fit(sim["data"], lengths=sim["lengths"])
    >>> hmm.predict(sim["data"], lengths=sim["lengths"]).shape, hmm.transmat_.shape
    ((120,), (2, 2))
    """

    _feature_prefix = "gaussianhmmestimator"  # scikit-learn's style of output names: the class name, lower-cased

    def __init__(
        self,
        n_components: int = 2,
        *,
        covariance_type: str = "diag",
        startprob_concentration: float = 1.0,
        transition_concentration: float = 1.0,
        mean_precision: float = 1.0,
        degrees_of_freedom: float | None = None,
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
        self.covariance_type = covariance_type
        self.startprob_concentration = startprob_concentration
        self.transition_concentration = transition_concentration
        self.mean_precision = mean_precision
        self.degrees_of_freedom = degrees_of_freedom
        self.method = method
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.num_chains = num_chains
        self.num_warmup = num_warmup
        self.num_samples = num_samples

    @property
    def _allow_nan(self) -> bool:  # type: ignore[override]
        """NaN (a missing value) is taken with diagonal covariances, which integrate it out."""
        return self.covariance_type == "diag"

    def _make_model(self) -> GaussianHMM:
        return GaussianHMM(
            self.n_components,
            covariance_type=self.covariance_type,
            startprob_concentration=self.startprob_concentration,
            transition_concentration=self.transition_concentration,
            mean_precision=self.mean_precision,
            degrees_of_freedom=self.degrees_of_freedom,
        )

    def _set_emission(self) -> None:
        post = self.posterior_
        self.components_ = np.asarray(post.mean("means"), dtype=np.float64)
        if "covariance" in post.sites:
            self.covars_ = np.asarray(post.mean("covariance"), dtype=np.float64)
        else:  # Bayesian engines store the precision
            prec = np.asarray(post.mean("precision"), dtype=np.float64)
            self.covars_ = np.asarray(np.linalg.inv(prec) if prec.ndim == 3 else 1.0 / prec, dtype=np.float64)

    def _log_emission(self, X: np.ndarray) -> np.ndarray:
        """log N(y_t | μ_k, Σ_k), (n_samples, n_components), by the family's own emission density at the
        fitted parameters (the decoders' path; one row or a constant column is decoded like any other)."""
        from latentfs.inference.hmm.decode import _plugin

        fam, params = _plugin(self.posterior_, X, [X.shape[0]])
        return np.asarray(fam.log_emission(params).numpy(), dtype=np.float64)


class CategoricalHMMEstimator(_HMMEstimator):
    """Categorical-emission HMM (:class:`~latentfs.models.hmm.CategoricalHMM`) with the scikit-learn contract.

    ``X`` holds one symbol per row, coded 0, 1, …, S−1: shape (n_samples, 1) (or (n_samples,)).

    Parameters
    ----------
    n_components : int, default 2
    n_categories : int, optional
        S; by default one more than the largest symbol seen in ``fit``. New data may only hold symbols
        below it.
    startprob_concentration, transition_concentration, emission_concentration : float, default 1.0
        Priors of the Bayesian engines; EM ignores them.
    method, seed, max_iter, tol, n_init, num_chains, num_warmup, num_samples : as
        :class:`GaussianHMMEstimator`.

    Attributes
    ----------
    posterior_ : Posterior
    startprob_, transmat_ : as :class:`GaussianHMMEstimator`
    components_ : ndarray (n_components, n_categories), the emission probabilities P(y = s | z = k)
    n_categories_ : int

    Examples
    --------
    >>> sim = CategoricalHMM(2, 3).simulate(3, 30, seed=0)
    >>> hmm = CategoricalHMMEstimator(2).fit(sim["data"].reshape(-1, 1), lengths=sim["lengths"])
    >>> hmm.components_.shape, hmm.predict_proba(sim["data"].reshape(-1, 1), lengths=sim["lengths"]).shape
    ((2, 3), (90, 2))
    """

    _feature_prefix = "categoricalhmmestimator"  # scikit-learn's style of output names: the class name, lower-cased

    def __init__(
        self,
        n_components: int = 2,
        *,
        n_categories: int | None = None,
        startprob_concentration: float = 1.0,
        transition_concentration: float = 1.0,
        emission_concentration: float = 1.0,
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
        self.n_categories = n_categories
        self.startprob_concentration = startprob_concentration
        self.transition_concentration = transition_concentration
        self.emission_concentration = emission_concentration
        self.method = method
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.num_chains = num_chains
        self.num_warmup = num_warmup
        self.num_samples = num_samples

    def _make_model(self) -> CategoricalHMM:
        return CategoricalHMM(
            self.n_components,
            self.n_categories,
            startprob_concentration=self.startprob_concentration,
            transition_concentration=self.transition_concentration,
            emission_concentration=self.emission_concentration,
        )

    def _validate(self, X: Any, *, reset: bool) -> Any:
        if hasattr(X, "ndim") and not hasattr(X, "columns") and X.ndim == 1:
            X = np.asarray(X).reshape(-1, 1)  # one symbol per row
        elif isinstance(X, (list, tuple)) and X and np.ndim(X[0]) == 0:
            X = np.asarray(X).reshape(-1, 1)
        X = super()._validate(X, reset=reset)
        if X.shape[1] != 1:
            raise DataError(
                f"X must hold one symbol per row for {type(self).__name__} (shape (n_samples, 1)); got "
                f"{X.shape[1]} columns. Encode each combination of columns as one symbol."
            )
        return X

    def _set_emission(self) -> None:
        probs = np.asarray(self.posterior_.mean("emission_probs"), dtype=np.float64)
        self.components_ = probs / probs.sum(-1, keepdims=True)
        self.n_categories_ = int(self.components_.shape[1])

    def _log_emission(self, X: np.ndarray) -> np.ndarray:
        """log P(y_t = s | z_t = k) = log B_ks, (n_samples, n_components)."""
        v = X[:, 0]
        s = self.n_categories_
        bad = np.flatnonzero((v != np.round(v)) | (v < 0) | (v >= s))
        if bad.size:
            i = int(bad[0])
            raise DataError(
                f"X must hold the symbols 0, 1, …, {s - 1} the model was fitted on; row {i} holds {v[i]:g}. Decode "
                "only those symbols (or refit with a larger n_categories)."
            )
        with np.errstate(divide="ignore"):
            return np.log(self.components_[:, v.astype(np.int64)].T)

    def _adopt(self, posterior: Any) -> CategoricalHMMEstimator:
        super()._adopt(posterior)
        self.n_features_in_ = 1  # one symbol column (the result's coordinates name the symbols)
        return self
