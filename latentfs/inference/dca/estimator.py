"""DCA as a scikit-learn estimator: :class:`DCA` fits :class:`~latentfs.models.dca.DirichletDCA` or
:class:`~latentfs.models.dca.GammaPoissonDCA` with any of their engines and represents documents by their
component proportions.

``transform`` folds new documents in with Θ held at the fitted mean (:func:`latentfs.evaluate.heldout.fold_in`,
the library's one fold-in: the DM fixed point, or GaP's update with per-component rates) and ``score`` is
the per-token log-likelihood by document completion (:func:`latentfs.evaluate.heldout.document_completion`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.metaestimators import available_if

from latentfs.core.data import DataError, check_choice
from latentfs.core.estimator import LatentEstimator
from latentfs.evaluate.heldout import document_completion, fold_in
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

__all__ = ["DCA"]

_MODELS: dict[str, type] = {"dirichlet": DirichletDCA, "gamma_poisson": GammaPoissonDCA}


class DCA(LatentEstimator):
    """Discrete component analysis (Buntine & Jakulin 2006) with the scikit-learn contract.

    Parameters
    ----------
    n_components : int, default 10
        K, the number of components.
    model : {"dirichlet", "gamma_poisson"}
        :class:`~latentfs.models.dca.DirichletDCA` (multinomial PCA / LDA) or
        :class:`~latentfs.models.dca.GammaPoissonDCA`.
    alpha, gamma : float or array, optional
        Priors of the model (both default to 1/K).
    beta : float or array (K,), optional
        GaP's score rates (``model="gamma_poisson"``; set from the data when None).
    method : str, default "vb"
        The engine (``latentfs.methods_for(latentfs.DirichletDCA(2))`` lists them).
    seed : int, default 0
    max_iter, tol, n_init : optional
        Optimiser options (VB, MAP, EM engines); None keeps the engine's default.
    num_chains, num_warmup, num_samples : optional
        Sampler options (Gibbs engines); None keeps the engine's default.
    learn_alpha, learn_gamma : bool, optional
        Empirical Bayes: learn α (VB, Gibbs, collapsed Gibbs) or the symmetric γ (collapsed Gibbs, and VB with
        ``theta_update="full"``; :func:`latentfs.inference.dca.vb.fit_vb` says why), so the value given is a
        starting value. None keeps the engine's default.
    theta_update : {"chapter", "map", "full"}, optional
        VB's update of Θ (:mod:`latentfs.inference.dca.vb`); None keeps the engine's default ("chapter").
    non_integer : {"error", "round"}
        What to do with non-integer entries of ``X``: raise (the models are for counts), or round them
        to the nearest integer first (for expected counts, or data made of frequencies × a length).
    fold_in_iter : int, default 200
        Fixed-point iterations of the fold-in in ``transform`` and ``score``.

    Attributes
    ----------
    posterior_ : Posterior
    components_ : ndarray (n_components, n_features)
        Θ, each component's word distribution (the posterior mean).
    n_features_in_, feature_names_in_ : see :class:`~latentfs.core.estimator.LatentEstimator`.

    Examples
    --------
    >>> from latentfs.models.dca import DirichletDCA
    >>> X = DirichletDCA(2).simulate(n_documents=40, n_features=12, doc_length=50, seed=0)["counts"]
    >>> dca = DCA(2, max_iter=300).fit(X)
    >>> dca.transform(X[:3]).shape, dca.get_feature_names_out().tolist()
    ((3, 2), ['dca0', 'dca1'])
    """

    _feature_prefix = "dca"  # scikit-learn's style of output names: the class name, lower-cased
    _accept_sparse = "csr"
    _positive_only = True

    def __init__(
        self,
        n_components: int = 10,
        *,
        model: str = "dirichlet",
        alpha: Any = None,
        gamma: Any = None,
        beta: Any = None,
        method: str = "vb",
        seed: int | None = 0,
        max_iter: int | None = None,
        tol: float | None = None,
        n_init: int | None = None,
        num_chains: int | None = None,
        num_warmup: int | None = None,
        num_samples: int | None = None,
        learn_alpha: bool | None = None,
        learn_gamma: bool | None = None,
        theta_update: str | None = None,
        non_integer: str = "error",
        fold_in_iter: int = 200,
    ) -> None:
        self.n_components = n_components
        self.model = model
        self.alpha = alpha
        self.gamma = gamma
        self.beta = beta
        self.method = method
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.num_chains = num_chains
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.learn_alpha = learn_alpha
        self.learn_gamma = learn_gamma
        self.theta_update = theta_update
        self.non_integer = non_integer
        self.fold_in_iter = fold_in_iter

    def _check_params(self) -> None:
        check_choice("model", self.model, tuple(_MODELS))
        check_choice("non_integer", self.non_integer, ("error", "round"))
        if self.beta is not None and self.model != "gamma_poisson":
            raise DataError(f"beta is GaP's rate; it needs model='gamma_poisson', got model={self.model!r}.")

    def _make_model(self) -> Any:
        if self.model == "gamma_poisson":
            return GammaPoissonDCA(self.n_components, alpha=self.alpha, beta=self.beta, gamma=self.gamma)
        return DirichletDCA(self.n_components, alpha=self.alpha, gamma=self.gamma)

    def _extra_options(self, accepted: list[str] | None) -> dict[str, Any]:
        options: dict[str, Any] = {}
        # Empty rows are documents too (scikit-learn's LDA accepts them): DirichletDCA gives them their prior.
        if accepted is None or "empty_documents" in accepted:
            options["empty_documents"] = "keep"
        for name in ("learn_alpha", "learn_gamma", "theta_update"):
            value = getattr(self, name)
            if value is None:
                continue
            if accepted is not None and name not in accepted:
                raise DataError(f"{name}={value!r} is not an option of method={self.method!r} for this model; "
                                f"drop {name} (None) or choose a method that takes it.")
            options[name] = value
        return options

    @available_if(lambda self: self.model == "dirichlet")
    def partial_fit(self, X: Any, y: Any = None, **online_options: Any) -> Any:
        """One online VB update with the documents ``X`` (Hoffman, Blei & Bach 2010;
        :mod:`latentfs.inference.dca.online`); DirichletDCA only.

        The first call (or the first after :meth:`fit`) starts the stream: ``X`` sets ``n_features_in_`` and
        the column names, λ is drawn from ``seed``, and ``online_options`` (``total_documents``, ``tau0``,
        ``kappa``, ``theta_update``, ``doc_max_iter``, ``doc_tol``) are taken at that call only. Each call
        moves q(Θ) by the step ρ_t = (τ0 + t)^(−κ) towards the estimate from ``X`` scaled to
        ``total_documents`` documents; without ``total_documents`` the corpus is taken to be the documents
        seen so far (scikit-learn's ``total_samples`` assumes 10⁶ instead). ``method`` is not used; empty
        documents carry no evidence about Θ and are skipped. Only with ``model="dirichlet"`` (online VB has no
        GaP form here): a GaP estimator has no ``partial_fit`` attribute, as scikit-learn's ``available_if`` makes it.

        Examples
        --------
        >>> X = DirichletDCA(2).simulate(n_documents=90, n_features=12, doc_length=50, seed=0)["counts"]
        >>> first, *rest = np.array_split(X, 3)
        >>> dca = DCA(2).partial_fit(first, total_documents=90)
        >>> for chunk in rest:
        ...     dca = dca.partial_fit(chunk)
        >>> dca.n_iter_, dca.components_.shape
        (3, (2, 12))
        """
        from dataclasses import replace

        from latentfs.inference.dca.online import online_posterior, online_vb_init, partial_fit_state

        def start(X: Any, total_documents: int | None = None, **options: Any) -> Any:
            if self.model != "dirichlet":  # pragma: no cover - available_if hides partial_fit for GaP
                raise DataError(f"partial_fit runs online VB, for model='dirichlet'; got model={self.model!r}.")
            self._online_total = total_documents
            self._online_seen = 0
            return online_vb_init(self._make_model(), X.shape[1], total_documents=total_documents or max(1, X.shape[0]),
                                  seed=self.seed, **options)

        def update(state: Any, X: Any) -> Any:
            self._online_seen += int(X.shape[0])
            if self._online_total is None:  # the corpus so far
                state = replace(state, total_documents=self._online_seen)
            return partial_fit_state(state, X)

        return self._stream_update(X, online_options, start, update, online_posterior)

    def _after_fit(self, X: Any) -> None:
        self.components_ = self.posterior_.mean("topic_word")

    def _alpha(self) -> np.ndarray:
        return np.asarray(self.posterior_.hyperparameters["alpha"], dtype=np.float64)

    def transform(self, X: Any) -> np.ndarray:
        """Component proportions of each document of ``X`` by fold-in (Θ fixed), shape (n_documents, K).

        For GaP these are E[l] / Σ E[l]; an empty document gets the prior mean.
        """
        self._check_fitted()
        X = self._validate(X, reset=False)
        return fold_in(self.posterior_, X, self._alpha(), max_iter=self.fold_in_iter)

    def score(self, X: Any, y: Any = None) -> float:
        """Per-token held-out log-likelihood of ``X`` by document completion (higher is better).

        Half of each document's tokens (seed 0) are folded in and the other half scored; exp(−score) is
        the per-token perplexity. ``y`` is ignored.
        """
        self._check_fitted()
        X = self._nonempty_rows(self._validate(X, reset=False))
        return float(document_completion(self.posterior_, X, self._alpha(), fraction=0.5, seed=0))
