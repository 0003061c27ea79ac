"""PLSA as a scikit-learn feature extractor (Monay et al. 2006, §4): fit by (tempered) EM, transform by fold-in."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from latentfs.core.data import DataError
from latentfs.evaluate.heldout import completion_loglik, completion_score, split_documents
from latentfs.inference.plsa.em import _topic_word_of, fit_plsa, fold_in
from latentfs.models.plsa import PLSA


class PLSATransformer:
    """PLSA as a feature extractor with scikit-learn conventions (Monay et al. 2006, §4).

    ``fit`` runs (tempered) EM on the training documents; ``transform`` folds new documents in and returns
    their aspect representation P(z | d), the features Monay et al. give an SVM. Drops into a scikit-learn
    ``Pipeline``.

    Parameters
    ----------
    n_aspects : int
    tempered, early_stopping, validation_fraction, patience, beta_decay, beta_min, max_iter, tol, n_restarts,
    seed : see :func:`fit_plsa` (validation documents come from ``validation_fraction`` of the training
    documents, or from ``X_valid`` passed to ``fit``).
    fold_in_iter : int
        EM iterations of :func:`fold_in` in ``transform``.

    Attributes
    ----------
    components_ : ndarray (n_aspects, n_features), P(x | z)
    doc_topic_ : ndarray (n_training_documents, n_aspects), P(z | d) of the documents fitted
    result_ : Posterior of the fit

    Examples
    --------
    >>> X = PLSA(2).simulate(40, 12, doc_length=50, seed=1)["counts"]
    >>> plsa = PLSATransformer(2, seed=0, max_iter=100).fit(X)
    >>> plsa.transform(X[:3]).shape
    (3, 2)
    """

    def __init__(
        self,
        n_aspects: int,
        *,
        tempered: bool = False,
        early_stopping: bool = False,
        validation_fraction: float | None = None,
        patience: int = 5,
        beta_decay: float = 0.9,
        beta_min: float = 0.5,
        max_iter: int = 300,
        tol: float = 1e-7,
        n_restarts: int = 1,
        fold_in_iter: int = 100,
        seed: int | None = None,
    ) -> None:
        self.n_aspects = n_aspects
        self.tempered = tempered
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.beta_decay = beta_decay
        self.beta_min = beta_min
        self.max_iter = max_iter
        self.tol = tol
        self.n_restarts = n_restarts
        self.fold_in_iter = fold_in_iter
        self.seed = seed

    _PARAMS = ("n_aspects", "tempered", "early_stopping", "validation_fraction", "patience", "beta_decay",
               "beta_min", "max_iter", "tol", "n_restarts", "fold_in_iter", "seed")

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {p: getattr(self, p) for p in self._PARAMS}

    def set_params(self, **params: Any) -> PLSATransformer:
        for k, v in params.items():
            if k not in self._PARAMS:
                raise DataError(f"set_params got an unknown parameter {k!r}; valid: {list(self._PARAMS)}.")
            setattr(self, k, v)
        return self

    def fit(self, X: Any, y: Any = None, *, X_valid: Any = None) -> PLSATransformer:
        """Fit P(x | z) and the training documents' P(z | d); ``y`` is ignored (unsupervised)."""
        self.result_ = fit_plsa(
            PLSA(self.n_aspects), X, tempered=self.tempered, early_stopping=self.early_stopping,
            X_valid=X_valid, validation_fraction=None if X_valid is not None else self.validation_fraction,
            patience=self.patience, beta_decay=self.beta_decay, beta_min=self.beta_min, max_iter=self.max_iter,
            tol=self.tol, n_restarts=self.n_restarts, seed=self.seed, warn=False,
        )
        self.components_ = self.result_.mean("topic_word")
        self.doc_topic_ = self.result_.mean("doc_topic")
        self.n_features_in_ = self.components_.shape[1]
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Aspect features P(z | d) of ``X`` by fold-in (P(x | z) fixed)."""
        return fold_in(self, X, max_iter=self.fold_in_iter)

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> np.ndarray:
        """Fit, then fold in ``X`` (the same representation ``transform`` gives new documents)."""
        return self.fit(X, y, **fit_params).transform(X)

    def score_details(self, X: Any, *, fraction: float = 0.5, seed: int = 0) -> dict[str, Any]:
        """Document completion of ``X`` with its bookkeeping (:func:`latentfs.evaluate.heldout.completion_score`).

        Returns a dict: ``per_token`` (−inf when a held-out token has probability 0), ``per_token_scored``
        (over the tokens of positive probability), ``n_tokens`` (scored tokens), ``n_zero_probability``
        (held-out tokens to which the folded-in mixture gives probability 0: PLSA's maximum-likelihood
        P(x | z) and P(z | d) can both hold exact zeros) and ``n_unseen_tokens`` (tokens of words never
        seen in training, left out).
        """
        observed, held = split_documents(X, fraction, seed=seed)
        tw = _topic_word_of(self)
        seen = tw.sum(0) > 0
        mix = fold_in(self, observed, max_iter=self.fold_in_iter)
        out = completion_score(tw[:, seen], mix, held[:, seen])
        out["n_unseen_tokens"] = int(held[:, ~seen].sum())
        return out

    def score(self, X: Any, y: Any = None, *, fraction: float = 0.5, seed: int = 0) -> float:
        """Per-token held-out log-likelihood of ``X`` by document completion (fold-in on one part of each
        document, score the rest; :mod:`latentfs.evaluate.heldout`). Tokens of unseen words are left out.
        A held-out token of probability 0 makes the score −inf, with a DataWarning giving the count and the
        score of the other tokens (:meth:`score_details` returns both)."""
        observed, held = split_documents(X, fraction, seed=seed)
        tw = _topic_word_of(self)
        seen = tw.sum(0) > 0
        mix = fold_in(self, observed, max_iter=self.fold_in_iter)
        return completion_loglik(tw[:, seen], mix, held[:, seen])

    def perplexity(self, X: Any, **kwargs: Any) -> float:
        """exp(−score): the per-token held-out perplexity."""
        return math.exp(-self.score(X, **kwargs))
