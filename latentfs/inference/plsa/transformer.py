"""PLSA as a scikit-learn feature extractor (Monay et al. 2006, §4): fit by (tempered) EM, transform by fold-in."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin

from latentfs.core.base import ParamsAsDataError, check_fitted, check_X
from latentfs.core.data import DataError, as_array, check_choice
from latentfs.core.estimator import SaveLoadMixin, check_nonnegative, round_counts
from latentfs.evaluate.heldout import completion_loglik, completion_score, split_documents
from latentfs.inference.plsa.em import _topic_word_of, fit_plsa, fold_in
from latentfs.models.plsa import PLSA


class PLSATransformer(
    SaveLoadMixin, ParamsAsDataError, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """PLSA as a feature extractor with scikit-learn conventions (Monay et al. 2006, §4).

    ``fit`` runs (tempered) EM on the training documents; ``transform`` folds new documents in and returns
    their aspect representation P(z | d), the features Monay et al. give an SVM. Drops into a scikit-learn
    ``Pipeline``; the columns of a DataFrame are matched by name to those seen in ``fit``.

    Parameters
    ----------
    n_components : int
        The number of aspects K.
    tempered, early_stopping, validation_fraction, patience, beta_decay, beta_min, max_iter, tol, n_init,
    seed : see :func:`fit_plsa` (``n_init`` is its number of restarts; validation documents come from
    ``validation_fraction`` of the training documents, or from ``X_valid`` passed to ``fit``).
    seed : int, Generator or None, default 0
    fold_in_iter : int
        EM iterations of :func:`fold_in` in ``transform``.
    non_integer : {"error", "round"}
        What to do with non-integer entries of ``X``: raise (PLSA models counts), or round them first.

    Attributes
    ----------
    components_ : ndarray (n_components, n_features), P(x | z)
    doc_topic_ : ndarray (n_training_documents, n_components), P(z | d) of the documents fitted (empty
        documents, which carry no tokens, are left out of the fit)
    result_ : Posterior of the fit
    n_iter_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` in ``fit`` had string column names.

    Examples
    --------
    >>> X = PLSA(2).simulate(40, 12, doc_length=50, seed=1)["counts"]
    >>> plsa = PLSATransformer(2, seed=0, max_iter=100).fit(X)
    >>> plsa.transform(X[:3]).shape
    (3, 2)
    """

    def __init__(
        self,
        n_components: int = 10,
        *,
        tempered: bool = False,
        early_stopping: bool = False,
        validation_fraction: float | None = None,
        patience: int = 5,
        beta_decay: float = 0.9,
        beta_min: float = 0.5,
        max_iter: int = 300,
        tol: float = 1e-7,
        n_init: int = 1,
        fold_in_iter: int = 100,
        seed: int | None = 0,
        non_integer: str = "error",
    ) -> None:
        self.n_components = n_components
        self.tempered = tempered
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.beta_decay = beta_decay
        self.beta_min = beta_min
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.fold_in_iter = fold_in_iter
        self.seed = seed
        self.non_integer = non_integer

    def _counts(self, X: Any, *, reset: bool) -> Any:
        check_choice("non_integer", self.non_integer, ("error", "round"))
        as_array(X, name="X")  # the container first: masked entries, dates, ragged rows, meta tensors
        X = check_X(self, X, reset=reset, accept_sparse="csr")
        check_nonnegative(X, "PLSATransformer")
        return round_counts(X) if self.non_integer == "round" else X

    def fit(self, X: Any, y: Any = None, *, X_valid: Any = None) -> PLSATransformer:
        """Fit P(x | z) and the training documents' P(z | d); ``y`` is ignored (unsupervised)."""
        Xc = self._counts(X, reset=True)
        totals = np.asarray(Xc.sum(axis=1)).ravel()
        if (totals == 0).all():
            raise DataError("X holds no counts (every document is empty); PLSA needs at least one token.")
        Xc = Xc[totals > 0]  # an empty document has no tokens to fit
        self.result_ = fit_plsa(
            PLSA(self.n_components), Xc, tempered=self.tempered, early_stopping=self.early_stopping,
            X_valid=X_valid, validation_fraction=None if X_valid is not None else self.validation_fraction,
            patience=self.patience, beta_decay=self.beta_decay, beta_min=self.beta_min, max_iter=self.max_iter,
            tol=self.tol, n_init=self.n_init, seed=self.seed, warn=False,
        )
        for name, value in self._derived_arrays().items():
            setattr(self, name, value)
        self.n_iter_ = max(1, int(self.result_.diagnostics.get("n_iter", 1)))
        return self

    @property
    def _n_features_out(self) -> int:
        return int(self.components_.shape[0])

    @staticmethod
    def _nonempty(X: Any) -> Any:
        """The documents of ``X`` that hold tokens (an empty one adds nothing to a per-token score)."""
        return X[np.asarray(X.sum(axis=1)).ravel() > 0]

    def _derived_arrays(self) -> dict[str, np.ndarray]:
        """The learned arrays, from the fitted result (also how a loaded file is checked for consistency)."""
        return {"components_": self.result_.mean("topic_word"), "doc_topic_": self.result_.mean("doc_topic")}

    def transform(self, X: Any) -> np.ndarray:
        """Aspect features P(z | d) of ``X`` by fold-in (P(x | z) fixed)."""
        check_fitted(self, "components_", call="fit(X)")
        return fold_in(self, self._counts(X, reset=False), max_iter=self.fold_in_iter)

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> np.ndarray:
        """Fit, then fold in ``X`` (the same representation ``transform`` gives new documents)."""
        return self.fit(X, y, **fit_params).transform(X)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        return tags

    def score_details(self, X: Any, *, fraction: float = 0.5, seed: int = 0) -> dict[str, Any]:
        """Document completion of ``X`` with its bookkeeping (:func:`latentfs.evaluate.heldout.completion_score`).

        Returns a dict: ``per_token`` (−inf when a held-out token has probability 0), ``per_token_scored``
        (over the tokens of positive probability), ``n_tokens`` (scored tokens), ``n_zero_probability``
        (held-out tokens to which the folded-in mixture gives probability 0: PLSA's maximum-likelihood
        P(x | z) and P(z | d) can both hold exact zeros) and ``n_unseen_tokens`` (tokens of words never
        seen in training, left out).
        """
        check_fitted(self, "components_", call="fit(X)")
        observed, held = split_documents(self._nonempty(self._counts(X, reset=False)), fraction, seed=seed)
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
        check_fitted(self, "components_", call="fit(X)")
        observed, held = split_documents(self._nonempty(self._counts(X, reset=False)), fraction, seed=seed)
        tw = _topic_word_of(self)
        seen = tw.sum(0) > 0
        mix = fold_in(self, observed, max_iter=self.fold_in_iter)
        return completion_loglik(tw[:, seen], mix, held[:, seen])

    def perplexity(self, X: Any, **kwargs: Any) -> float:
        """exp(−score): the per-token held-out perplexity."""
        return math.exp(-self.score(X, **kwargs))
