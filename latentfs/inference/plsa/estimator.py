"""PLSA as a scikit-learn estimator on the shared base: :class:`PLSAEstimator` runs ``latentfs.fit(PLSA(K), X,
method="em" | "tem")`` and represents documents by P(z | d) folded in with P(x | z) fixed
(:func:`latentfs.inference.plsa.em.fold_in`, Hofmann 2001); ``score`` is the per-token log-likelihood by
document completion, tokens of words unseen in training left out (as :class:`PLSATransformer` scores).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from latentfs.core.estimator import LatentEstimator
from latentfs.evaluate.heldout import completion_loglik, split_documents
from latentfs.inference.plsa.em import fold_in
from latentfs.models.plsa import PLSA

__all__ = ["PLSAEstimator"]


class PLSAEstimator(LatentEstimator):
    """Probabilistic latent semantic analysis with the scikit-learn contract.

    Parameters
    ----------
    n_components : int, default 10
        The number of aspects.
    method : {"em", "tem"}, default "em"
        EM, or tempered EM (Hofmann 2001, §4.2; validation documents from ``validation_fraction``).
    validation_fraction : float, optional
        Share of the training documents held out for early stopping / tempering.
    seed : int, default 0
    max_iter, tol, n_init : optional; None keeps the engine's default.
    non_integer : {"error", "round"}
        Non-integer entries of ``X``: raise, or round to the nearest integer (as ``DCA`` does).
    fold_in_iter : int, default 100
        EM iterations of the fold-in in ``transform`` and ``score``.

    Attributes
    ----------
    posterior_ : Posterior
    components_ : ndarray (n_components, n_features), P(x | z)

    Examples
    --------
    >>> X = PLSA(2).simulate(40, 12, doc_length=50, seed=1)["counts"]
    >>> PLSAEstimator(2, max_iter=100).fit(X).transform(X[:3]).shape
    (3, 2)
    """

    _feature_prefix = "plsaestimator"  # scikit-learn's style of output names: the class name, lower-cased
    _accept_sparse = "csr"
    _positive_only = True

    def __init__(
        self,
        n_components: int = 10,
        *,
        method: str = "em",
        validation_fraction: float | None = None,
        seed: int | None = 0,
        max_iter: int | None = None,
        tol: float | None = None,
        n_init: int | None = None,
        non_integer: str = "error",
        fold_in_iter: int = 100,
    ) -> None:
        self.n_components = n_components
        self.method = method
        self.validation_fraction = validation_fraction
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.non_integer = non_integer
        self.fold_in_iter = fold_in_iter

    def _make_model(self) -> Any:
        return PLSA(self.n_components)

    def _engine_options(self, model: Any) -> dict[str, Any]:
        # The PLSA engines take **options (fit_plsa's keywords): name them here.
        names = {"seed": "seed", "max_iter": "max_iter", "tol": "tol", "n_init": "n_init",
                 "validation_fraction": "validation_fraction"}
        return {engine: getattr(self, ours) for ours, engine in names.items() if getattr(self, ours) is not None}

    def _fit_data(self, X: Any) -> Any:
        # A document with no tokens leaves P(x | z) unchanged and has no P(z | d) to estimate.
        return self._nonempty_rows(X)

    def _after_fit(self, X: Any) -> None:
        self.components_ = self.posterior_.mean("topic_word")

    def transform(self, X: Any) -> np.ndarray:
        """P(z | d) of each document of ``X`` by fold-in, shape (n_documents, n_components)."""
        self._check_fitted()
        X = self._validate(X, reset=False)
        return fold_in(self.posterior_, X, max_iter=self.fold_in_iter)

    def score(self, X: Any, y: Any = None) -> float:
        """Per-token held-out log-likelihood by document completion (seed 0, half of each document);
        tokens of words unseen in training are left out. ``y`` is ignored."""
        self._check_fitted()
        X = self._nonempty_rows(self._validate(X, reset=False))
        observed, held = split_documents(X, 0.5, seed=0)
        tw = self.components_
        seen = tw.sum(0) > 0
        mix = fold_in(self.posterior_, observed, max_iter=self.fold_in_iter)
        return float(completion_loglik(tw[:, seen], mix, held[:, seen]))

    def _score_weight(self, X: Any, **options: Any) -> float:
        """The held-out tokens :meth:`score` averages over: those of words seen in training (a dask array's score
        weighs its blocks by them)."""
        X = self._nonempty_rows(self._validate(X, reset=False))
        if X.shape[0] == 0:
            return 0.0
        held = split_documents(X, 0.5, seed=0)[1]
        return float(held[:, self.components_.sum(0) > 0].sum())
