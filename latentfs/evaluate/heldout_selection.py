"""Choosing the number of components by held-out likelihood (Buntine & Jakulin §7.5): one split of the documents,
a fit per K on the training part, and the held-out documents scored by document completion or by one of the
estimators of :mod:`latentfs.evaluate.heldout_estimators`, which re-exports :func:`select_n_components` and
:class:`ModelSelection`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from latentfs.core.data import DataError, as_counts
from latentfs.evaluate.heldout import scoring_terms

__all__ = ["ModelSelection", "select_n_components"]


@dataclass(frozen=True)
class ModelSelection:
    """What :func:`select_n_components` returns.

    Attributes
    ----------
    n_components : list of int, the K tried
    scores : ndarray, the per-token held-out log-likelihood of each K (higher is better)
    best : int, the K with the highest score
    method : str, the held-out estimator
    results : list, the fitted results (Posterior) per K
    n_unseen_tokens : int, held-out tokens of words absent from the training split (not scored)
    """

    n_components: list[int]
    scores: np.ndarray
    best: int
    method: str
    results: list[Any]
    n_unseen_tokens: int = 0

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame({"n_components": self.n_components, "heldout_per_token": self.scores,
                             "perplexity": np.exp(-self.scores)}).set_index("n_components")


def select_n_components(
    model_factory: Callable[[int], Any],
    X: Any,
    Ks: Any,
    *,
    method: str = "completion",
    fit_method: str | None = None,
    test_fraction: float = 0.2,
    alpha: Any = None,
    seed: int = 0,
    fit_options: dict[str, Any] | None = None,
    estimator_options: dict[str, Any] | None = None,
) -> ModelSelection:
    """Choose the number of components by held-out likelihood (Buntine & Jakulin §7.5; digest §1.8).

    The documents of ``X`` are split once (``test_fraction`` held out, chosen with ``seed``); for each K,
    ``model_factory(K)`` is fitted to the training documents with ``latentfs.fit(..., method=fit_method)``
    and its Θ scored on the held-out documents by ``method``: ``"completion"`` (document completion,
    :func:`latentfs.evaluate.heldout.document_completion`) or any name of :data:`ESTIMATORS`. Held-out
    tokens of words that never occur in the training split are not scored (maximum-likelihood fits give
    them probability 0), so every K is scored on the same tokens; Θ is renormalised over that vocabulary
    (within every group for a grouped model). Each fit is scored in its own terms: its ``groups`` and a
    GaP's rates β come from the fitted result (module docstring).

    Parameters
    ----------
    model_factory : callable K -> model, e.g. ``lambda k: DirichletDCA(k, alpha=0.1)``
    X : count matrix
    Ks : iterable of int
    method : str
    fit_method : str, optional (the model's default engine)
    test_fraction : float in (0, 1)
    alpha : float or array, optional
        Dirichlet prior used by the held-out estimator; by default the fitted model's α (a model without
        one, such as PLSA or KL-NMF, needs it here).
    seed : int
    fit_options, estimator_options : dict, optional, passed on.

    Examples
    --------
    >>> from latentfs import DirichletDCA
    >>> X = DirichletDCA(3, alpha=0.2).simulate(60, 30, doc_length=60, seed=0)["counts"]
    >>> sel = select_n_components(lambda k: DirichletDCA(k, alpha=0.2), X, [1, 3],
    ...                           fit_options={"seed": 0, "max_iter": 100, "warn": False, "num_ll_draws": 0})
    >>> sel.best
    3
    """
    import latentfs
    from latentfs.evaluate.heldout import document_completion
    from latentfs.evaluate.heldout_estimators import ESTIMATORS, _terms, heldout_loglik

    if method != "completion" and method not in ESTIMATORS:
        raise DataError(f"method must be 'completion' or one of {sorted(ESTIMATORS)}; got {method!r}.")
    if not callable(model_factory):
        raise DataError(f"model_factory must be a callable K -> model; got {type(model_factory).__name__}.")
    Ks = list(Ks) if not isinstance(Ks, (int, np.integer)) else [Ks]
    if not Ks or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in Ks):
        raise DataError(f"Ks must be a non-empty list of positive integers; got {Ks!r}.")
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) or not 0 < test_fraction < 1:
        raise DataError(f"test_fraction must be a number in (0, 1); got {test_fraction!r}.")
    counts = as_counts(X, name="X")
    order = np.random.default_rng(seed).permutation(counts.n_documents)
    n_test = int(round(test_fraction * counts.n_documents))
    if n_test < 1 or n_test >= counts.n_documents:
        raise DataError(
            f"test_fraction={test_fraction} leaves {n_test} test documents of {counts.n_documents}; choose a "
            "fraction that keeps at least one document on each side."
        )
    test, train = counts.csr[np.sort(order[:n_test])], counts.csr[np.sort(order[n_test:])]
    # Score on the training vocabulary: an ML fit (PLSA, KL-NMF) gives unseen words probability 0, and
    # every K must be scored on the same tokens.
    seen = np.asarray(train.sum(0)).ravel() > 0
    scored = sp.csr_matrix(test[:, seen])
    n_unseen = int(test.sum() - scored.sum())
    scored = scored[np.asarray(scored.sum(1)).ravel() > 0]
    scores, results = [], []
    for K in Ks:
        model = model_factory(int(K))
        result = latentfs.fit(model, sp.csr_matrix(train), method=fit_method, **(fit_options or {}))
        a = alpha if alpha is not None else result.hyperparameters.get("alpha", getattr(model, "alpha", None))
        if a is None or isinstance(a, str):
            raise DataError(
                f"alpha is needed to score {type(model).__name__} fitted by {result.method!r} (it has no Dirichlet "
                "prior); pass alpha=… (e.g. 1/K or 0.1)."
            )
        terms = scoring_terms(result)  # Θ, and the fit's own groups / GaP rates
        if terms.model == "ConditionalGammaPoissonDCA":
            if method != "completion":
                _terms(result, estimator=method)  # refuses, with the remedy
            # CGP folds in through its own document step on the full vocabulary: unseen words' tokens removed
            masked = sp.csr_matrix(test.multiply(seen[None, :].astype(np.float64)))
            masked = masked[np.asarray(masked.sum(1)).ravel() > 0]
            scores.append(document_completion(result, masked, a, seed=seed, **(estimator_options or {})))
            results.append(result)
            continue
        tw = terms.topic_word[:, seen]
        kw: dict[str, Any] = {"groups": None if terms.groups is None else terms.groups[seen], "beta": terms.beta}
        if method == "completion":
            scores.append(document_completion(tw, scored, a, seed=seed, **kw, **(estimator_options or {})))
        else:
            est = heldout_loglik(tw, scored, a, method=method, **kw, **(estimator_options or {}))
            scores.append(est.per_token)
        results.append(result)
    arr = np.asarray(scores)
    return ModelSelection([int(k) for k in Ks], arr, int(Ks[int(np.argmax(arr))]), method, results, n_unseen)
