"""Discrete component analysis (DCA) declared as Pyro models: Buntine & Jakulin (2006), Sections 4 and 6.

Two families share one vocabulary of sites:

====================  ===========================  ==========================================
site                  shape                        meaning (chapter symbol)
====================  ===========================  ==========================================
``topic_word``        (n_components, n_features)   each component's word distribution; row k is
                                                   θ_{·,k} of the chapter (Θ is J × K there)
``doc_topic``         (n_documents, n_components)  DirichletDCA: proportions m_(i)
``doc_scores``        (n_documents, n_components)  GammaPoissonDCA and ConditionalGammaPoissonDCA:
                                                   scores l_(i)
``active``            (n_documents, n_components)  ConditionalGammaPoissonDCA: 1[l_k > 0]
``counts``            (n_documents, n_features)    observed word counts w_(i)
``component_counts``  (n_documents, n_components)  augmented form: c_(i), words per component
``latent_counts``     (n_documents, n_components,  augmented form: V_(i) (stored K × J here)
                      n_features)
====================  ===========================  ==========================================

A grouped (multivariate, Section 4.4) DirichletDCA takes ``groups=``, a partition of the vocabulary
(one integer group id per feature): each θ_{·,k} is normalised within every group and each group of a
document is its own multinomial with its own length L_g, so a group with no tokens in a document
contributes nothing.

Each class offers ``model`` (the bag-of-words model with V summed out, eq. 2 and 4), ``augmented_model``
(the component-assignment form, eq. 5 and 10, which the Gibbs engine samples) and ``simulate``.
The gamma is rate-parameterised, as in the chapter and in torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch

from latentfs.core.data import DataError, check_n_components, check_positive
from latentfs.core.pyro_context import simulate_sites
from latentfs.models.dca_distributions import (  # noqa: F401  (the sites' distributions, re-exported)
    GroupedDirichlet,
    GroupedMultinomialCounts,
    MultinomialCounts,
    ZeroOrGamma,
    check_groups,
    group_totals,
)

__all__ = [
    "ConditionalGammaPoissonDCA",
    "DirichletDCA",
    "GammaPoissonDCA",
    "GroupedDirichlet",
    "GroupedMultinomialCounts",
    "MultinomialCounts",
    "ZeroOrGamma",
    "check_groups",
]




class _DCABase:
    """Shared hyperparameter handling for the DCA models."""

    doc_site: str
    default_method = "vb"
    data_kind = "counts"  # documents × words (latentfs.core.registry.data_kind)

    def __init__(self, n_components: int, *, alpha: Any, gamma: Any) -> None:
        self.n_components = check_n_components(n_components, 10**9)
        self.alpha = check_positive(alpha, "alpha", shape=(self.n_components,))
        g = np.asarray(gamma, dtype=np.float64)
        if g.ndim > 1:
            raise DataError(f"gamma must be a scalar or a vector over features; got shape {g.shape}.")
        self.gamma = check_positive(g, "gamma")

    def gamma_vector(self, n_features: int) -> np.ndarray:
        """γ as a J-vector (the Dirichlet prior of each component's word distribution)."""
        if self.gamma.ndim == 1 and self.gamma.size != n_features:
            raise DataError(
                f"gamma must have one entry per feature ({n_features}); got {self.gamma.size}. Pass a scalar "
                "or a vector as long as the vocabulary."
            )
        return np.broadcast_to(self.gamma, (n_features,)).astype(np.float64)

    def _tensor(self, x: Any, like: torch.Tensor | None = None) -> torch.Tensor:
        dtype = like.dtype if like is not None else torch.get_default_dtype()
        device = like.device if like is not None else None
        return torch.as_tensor(np.asarray(x, dtype=np.float64), dtype=dtype, device=device)

    def _topic_word(self, n_features: int, dtype: torch.dtype, device: Any) -> torch.Tensor:
        gamma = torch.as_tensor(self.gamma_vector(n_features), dtype=dtype, device=device)
        groups = self.groups_for(n_features)
        if groups is None:
            prior: Any = dist.Dirichlet(gamma)
        else:
            prior = GroupedDirichlet(gamma, torch.as_tensor(groups, device=device))
        with pyro.plate("component", self.n_components, dim=-1):
            return pyro.sample("topic_word", prior)

    groups: np.ndarray | None = None

    @property
    def n_groups(self) -> int:
        """G, the number of groups of a grouped model (1 otherwise)."""
        return 1 if self.groups is None else int(self.groups.max()) + 1

    def groups_for(self, n_features: int) -> np.ndarray | None:
        """The group codes (J,) checked against the vocabulary size; None for an ungrouped model."""
        if self.groups is None:
            return None
        if self.groups.size != n_features:
            raise DataError(
                f"groups must have one entry per feature ({n_features}); got {self.groups.size}. Pass a group id "
                "for every column of the count matrix."
            )
        return self.groups

    def hyperparameters(self) -> dict[str, Any]:
        out = {"n_components": self.n_components, "alpha": self.alpha.tolist(), "gamma": self.gamma.tolist()}
        if self.groups is not None:
            out["groups"] = self.groups.tolist()
        return out

    def with_n_components(self, n_components: int) -> _DCABase:
        """A copy of this model with another number of components K (for model selection).

        A per-component hyperparameter (α; β and ρ of the Gamma–Poisson models) is carried over when it is the
        same for every component; α and γ at their default 1/K become 1/k. One that differs between
        components cannot be carried to another K.
        """
        import copy

        k = check_n_components(n_components, 10**9)
        new = copy.copy(self)
        if k == self.n_components:
            return new
        default = 1.0 / self.n_components
        new.n_components = k
        for name in ("alpha", "beta", "rho"):
            value = getattr(self, name, None)
            if value is None:
                continue
            arr = np.asarray(value, dtype=np.float64).ravel()
            if np.ptp(arr) != 0:
                raise DataError(
                    f"{name} differs between the {self.n_components} components ({arr.tolist()}), so it cannot be "
                    f"carried to n_components={k}. Build the model with {k} values of {name} yourself."
                )
            first = 1.0 / k if name == "alpha" and arr[0] == default else float(arr[0])
            setattr(new, name, np.full(k, first))
        if np.ndim(self.gamma) == 0 and float(self.gamma) == default:
            new.gamma = np.asarray(1.0 / k)
        return new

    @staticmethod
    def _sizes(data: torch.Tensor | None, n_documents: int | None, n_features: int | None,
               what: str) -> tuple[int, int, torch.Tensor]:
        """(I, J, a tensor giving dtype and device) of a model call: from the data (documents first, words
        last), or from the two sizes given to simulate."""
        if data is not None:
            n_documents, n_features = int(data.shape[0]), int(data.shape[-1])
        if n_documents is None or n_features is None:
            raise DataError(f"{what}, or n_documents and n_features to simulate.")
        return n_documents, n_features, data if data is not None else torch.zeros(())

    def _beta(self, like: torch.Tensor) -> torch.Tensor:
        """The Gamma rate β of the GaP/CGP document scores (set by fit when the model leaves it unset)."""
        beta = getattr(self, "beta", None)
        if beta is None:
            raise DataError(
                f"beta is not set; pass beta=… to {type(self).__name__}, or fit first (fit sets it from the data)."
            )
        return self._tensor(beta, like)

    @staticmethod
    def _check_sizes(n_documents: Any, n_features: Any, dtype: Any = torch.float64) -> tuple[int, int, torch.dtype]:
        """``simulate``'s sizes (integers ≥ 1) and dtype, checked with the shared rules."""
        from latentfs.core.data import check_dtype, check_int

        return (check_int("n_documents", n_documents, low=1), check_int("n_features", n_features, low=1),
                check_dtype(dtype))

    def _run_simulation(self, fn: Any, seed: Any, **kwargs: Any) -> dict[str, np.ndarray]:
        return simulate_sites(fn, seed, **kwargs)


class DirichletDCA(_DCABase):
    """Dirichlet (multinomial PCA / LDA) discrete component analysis; Buntine & Jakulin eq. (4).

    For each document, proportions m ~ Dirichlet(α) over K components and word counts
    w ~ Multinomial(L, Θ m), with each component's word distribution θ_{·,k} ~ Dirichlet(γ). LDA is the
    token-sequence form of the same model: the likelihoods differ by the multinomial coefficient only.

    Parameters
    ----------
    n_components : int
        K, the number of components.
    alpha : float or array (K,), default 1/K
        Dirichlet prior on the document proportions.
    gamma : float or array (J,), default 1/K
        Dirichlet prior on each component's word distribution. The chapter suggests Jeffreys' 0.5; the default
        is 1/K, scikit-learn's and gensim's, because 0.5 per word outweighs the data of a wide vocabulary (on
        1,000 documents × 10,000 words, K = 50, VB's held-out score fell from −7.46 to −8.16 nats per token;
        benchmarks/RESULTS.md, "γ in VB").
    groups : array (J,) of int, optional
        A partition of the vocabulary (multivariate DCA, Section 4.4): θ_{·,k} is normalised within each
        group, and each group of a document is a multinomial with its own length L_g; a group with no
        tokens in a document contributes nothing. ``doc_lengths`` / ``doc_length`` are then per group,
        shaped (I, G) (or broadcastable to it).

    Examples
    --------
    >>> model = DirichletDCA(3, alpha=0.5)
    >>> sim = model.simulate(n_documents=5, n_features=8, doc_length=20, seed=1)
    >>> sim["counts"].shape, sim["counts"].sum(axis=1).tolist()
    ((5, 8), [20.0, 20.0, 20.0, 20.0, 20.0])
    """

    doc_site = "doc_topic"

    def __init__(self, n_components: int, *, alpha: Any = None, gamma: Any = None, groups: Any = None) -> None:
        if alpha is None:
            alpha = 1.0 / check_n_components(n_components, 10**9)
        if gamma is None:
            gamma = 1.0 / check_n_components(n_components, 10**9)
        super().__init__(n_components, alpha=alpha, gamma=gamma)
        self.groups = None if groups is None else check_groups(groups)

    def __repr__(self) -> str:
        grouped = "" if self.groups is None else f", groups=<{self.n_groups} groups>"
        return f"DirichletDCA({self.n_components}, alpha={_short(self.alpha)}, gamma={_short(self.gamma)}{grouped})"

    def _counts_dist(self, lengths: torch.Tensor, probs: torch.Tensor) -> Any:
        """Multinomial(L, p), or one multinomial per group with lengths (…, G) when grouped (Section 4.4)."""
        if self.groups is None:
            return MultinomialCounts(lengths, probs)
        return GroupedMultinomialCounts(lengths, probs, torch.as_tensor(self.groups, device=probs.device))

    def model(
        self,
        counts: torch.Tensor | None = None,
        *,
        doc_lengths: torch.Tensor | None = None,
        n_features: int | None = None,
    ) -> torch.Tensor:
        """The bag-of-words model, V summed out (eq. 4). Pass ``counts`` (I, J) or ``doc_lengths`` (I,).

        Grouped: ``doc_lengths`` holds the group lengths L_(i),g, shaped (I, G).
        """
        if counts is not None:
            n_features = counts.shape[-1]
            groups = self.groups_for(n_features)
            doc_lengths = counts.sum(-1) if groups is None else group_totals(
                counts, torch.as_tensor(groups, device=counts.device), self.n_groups)
        if doc_lengths is None or n_features is None:
            raise DataError("model needs counts, or doc_lengths and n_features to simulate.")
        ref = doc_lengths if torch.is_floating_point(doc_lengths) else doc_lengths.to(torch.get_default_dtype())
        topic_word = self._topic_word(n_features, ref.dtype, ref.device)
        alpha = self._tensor(self.alpha, ref)
        with pyro.plate("document", ref.shape[0], dim=-1):
            doc_topic = pyro.sample("doc_topic", dist.Dirichlet(alpha))
            probs = doc_topic @ topic_word
            return pyro.sample("counts", self._counts_dist(ref, probs), obs=counts)

    def augmented_model(
        self,
        latent_counts: torch.Tensor | None = None,
        *,
        doc_lengths: torch.Tensor | None = None,
        n_features: int | None = None,
    ) -> torch.Tensor:
        """The component-assignment form (eq. 10): c ~ Mult(L, m), v_{·,k} ~ Mult(c_k, θ_{·,k}).

        ``latent_counts`` is V with shape (I, K, J); the observed counts are its sum over components.
        """
        if self.groups is not None:
            raise DataError(
                "augmented_model is declared for ungrouped models only; for groups=… use model() (the bag form), "
                "whose group multinomials the engines are tested against."
            )
        if latent_counts is not None:
            doc_lengths = latent_counts.sum((-1, -2))
            n_features = latent_counts.shape[-1]
        if doc_lengths is None or n_features is None:
            raise DataError("augmented_model needs latent_counts, or doc_lengths and n_features.")
        ref = doc_lengths.to(torch.get_default_dtype()) if not torch.is_floating_point(doc_lengths) else doc_lengths
        topic_word = self._topic_word(n_features, ref.dtype, ref.device)
        alpha = self._tensor(self.alpha, ref)
        with pyro.plate("document", ref.shape[0], dim=-2):
            doc_topic = pyro.sample("doc_topic", dist.Dirichlet(alpha).to_event(0))
            c = pyro.sample(
                "component_counts",
                MultinomialCounts(ref[:, None], doc_topic),  # doc_topic is (I, 1, K) here
                obs=None if latent_counts is None else latent_counts.sum(-1)[:, None, :],
            )
            with pyro.plate("component_of_doc", self.n_components, dim=-1):
                return pyro.sample(
                    "latent_counts",
                    MultinomialCounts(c.squeeze(-2), topic_word),
                    obs=latent_counts,
                )

    def simulate(
        self,
        n_documents: int,
        n_features: int,
        doc_length: int | np.ndarray = 100,
        *,
        seed: int | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> dict[str, np.ndarray]:
        """Draw a corpus from :meth:`model`: returns ``counts``, ``doc_topic`` and ``topic_word``.

        ``doc_length`` is one length for all documents or one per document; for a grouped model, the
        tokens per group, broadcastable to (n_documents, G) (zeros allowed: a missing group).
        """
        n_documents, n_features, dtype = self._check_sizes(n_documents, n_features, dtype)
        if self.groups is not None:
            self.groups_for(int(n_features))
            try:
                lengths = np.broadcast_to(np.asarray(doc_length, dtype=np.float64),
                                          (int(n_documents), self.n_groups)).copy()
            except ValueError:
                raise DataError(
                    f"doc_length must broadcast to (n_documents, n_groups) = ({n_documents}, {self.n_groups}) for a "
                    f"grouped model; got shape {np.shape(doc_length)}."
                ) from None
            if (lengths < 0).any() or (lengths != np.round(lengths)).any() or (lengths.sum(1) < 1).any():
                raise DataError(
                    "doc_length must hold non-negative integer group lengths with at least one token per "
                    f"document; got {doc_length!r}."
                )
            return self._run_simulation(
                self.model, seed, doc_lengths=torch.as_tensor(lengths, dtype=dtype), n_features=int(n_features)
            )
        lengths = np.broadcast_to(np.asarray(doc_length, dtype=np.float64), (int(n_documents),)).copy()
        if (lengths < 1).any() or (lengths != np.round(lengths)).any():
            raise DataError(f"doc_length must hold positive integers; got {doc_length!r}.")
        return self._run_simulation(
            self.model, seed, doc_lengths=torch.as_tensor(lengths, dtype=dtype), n_features=int(n_features)
        )


class _GammaScoresDCA(_DCABase):
    """The Gamma–Poisson models' shared form (GaP and the conditional GaP): document scores l (``doc_scores``) with
    a Gamma(α, β) prior, rate β per component (set by fit when left unset), and counts w_j ~ Poisson((Θ l)_j). A
    subclass draws the scores (:meth:`_doc_scores`)."""

    doc_site = "doc_scores"

    def __init__(self, n_components: int, *, alpha: Any = None, beta: Any = None, gamma: Any = None) -> None:
        if alpha is None:
            alpha = 1.0 / check_n_components(n_components, 10**9)
        if gamma is None:
            gamma = 1.0 / check_n_components(n_components, 10**9)
        super().__init__(n_components, alpha=alpha, gamma=gamma)
        self.beta = None if beta is None else check_positive(beta, "beta", shape=(self.n_components,))

    def hyperparameters(self) -> dict[str, Any]:
        out = super().hyperparameters()
        out["beta"] = None if self.beta is None else self.beta.tolist()
        return out

    def _doc_scores(self, ref: torch.Tensor, event: bool) -> torch.Tensor:  # pragma: no cover - abstract
        """Sample the scores inside the document plate (and, with ``event`` False, the component plate)."""
        raise NotImplementedError

    def model(
        self,
        counts: torch.Tensor | None = None,
        *,
        n_documents: int | None = None,
        n_features: int | None = None,
    ) -> torch.Tensor:
        """The bag-of-words model (eq. 2; the conditional GaP's prior is eq. 3). Pass ``counts`` (I, J), or
        ``n_documents`` and ``n_features``."""
        n_documents, n_features, ref = self._sizes(counts, n_documents, n_features, "model needs counts")
        topic_word = self._topic_word(n_features, ref.dtype, ref.device)
        with pyro.plate("document", n_documents, dim=-1):
            scores = self._doc_scores(ref, event=True)
            rate = scores @ topic_word
            return pyro.sample("counts", dist.Poisson(rate).to_event(1), obs=counts)

    def augmented_model(
        self,
        latent_counts: torch.Tensor | None = None,
        *,
        n_documents: int | None = None,
        n_features: int | None = None,
    ) -> torch.Tensor:
        """The component-assignment form (eq. 5; eq. 8 for the conditional GaP): c_k ~ Poisson(l_k) (0 when
        l_k = 0), v_{·,k} ~ Mult(c_k, θ_{·,k})."""
        n_documents, n_features, ref = self._sizes(latent_counts, n_documents, n_features,
                                                   "augmented_model needs latent_counts")
        topic_word = self._topic_word(n_features, ref.dtype, ref.device)
        with pyro.plate("document", n_documents, dim=-2), pyro.plate("component_of_doc", self.n_components, dim=-1):
            scores = self._doc_scores(ref, event=False)
            c = pyro.sample(
                "component_counts",
                dist.Poisson(scores),
                obs=None if latent_counts is None else latent_counts.sum(-1),
            )
            return pyro.sample("latent_counts", MultinomialCounts(c, topic_word), obs=latent_counts)

    def simulate(
        self,
        n_documents: int,
        n_features: int,
        *,
        seed: int | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> dict[str, np.ndarray]:
        """Draw a corpus from :meth:`model` (β must be set): ``counts``, ``doc_scores``, ``topic_word`` (and the
        conditional GaP's ``active``)."""
        n_documents, n_features, dtype = self._check_sizes(n_documents, n_features, dtype)
        return self._run_simulation(self.model, seed, n_documents=int(n_documents), n_features=int(n_features))


class GammaPoissonDCA(_GammaScoresDCA):
    """Gamma-Poisson (GaP) discrete component analysis; Buntine & Jakulin eq. (2), Canny (2004).

    For each document, scores l_k ~ Gamma(α_k, β_k) (rate β) and counts w_j ~ Poisson((Θ l)_j), with each
    component's word distribution θ_{·,k} ~ Dirichlet(γ). With a common β this is DirichletDCA plus a
    negative-binomial document length (Lemma 1).

    Parameters
    ----------
    n_components : int
    alpha : float or array (K,), default 1/K
        Gamma shape of the scores.
    beta : float or array (K,), optional
        Gamma rate of the scores. By default it is set when fitting so that the prior mean document
        length Σα/β equals the corpus's mean length (recorded in the result's hyperparameters).
    gamma : float or array (J,), default 1/K
        Dirichlet prior on each component's word distribution (as :class:`DirichletDCA`).

    Examples
    --------
    >>> model = GammaPoissonDCA(2, alpha=1.0, beta=0.05)
    >>> sim = model.simulate(n_documents=4, n_features=6, seed=0)
    >>> sorted(sim)
    ['counts', 'doc_scores', 'topic_word']
    """

    def __repr__(self) -> str:
        beta = "auto" if self.beta is None else _short(self.beta)
        alpha, gamma = _short(self.alpha), _short(self.gamma)
        return f"GammaPoissonDCA({self.n_components}, alpha={alpha}, beta={beta}, gamma={gamma})"

    def with_beta_for(self, mean_doc_length: float) -> GammaPoissonDCA:
        """A copy whose unset β gives a prior mean document length equal to ``mean_doc_length``."""
        if self.beta is not None:
            return self
        beta = np.full(self.n_components, self.alpha.sum() / max(float(mean_doc_length), 1e-12))
        return GammaPoissonDCA(self.n_components, alpha=self.alpha, beta=beta, gamma=self.gamma)

    def _doc_scores(self, ref: torch.Tensor, event: bool) -> torch.Tensor:
        prior = dist.Gamma(self._tensor(self.alpha, ref), self._beta(ref))
        return pyro.sample("doc_scores", prior.to_event(1) if event else prior)


class ConditionalGammaPoissonDCA(_GammaScoresDCA):
    """Conditional Gamma-Poisson (CGP) discrete component analysis: a sparse GaP; Buntine & Jakulin eq. (3).

    For each document and component, the score is exactly zero with probability ρ_k and otherwise
    l_k ~ Gamma(α_k, β_k) (rate β); counts w_j ~ Poisson((Θ l)_j) and θ_{·,k} ~ Dirichlet(γ) as in GaP.
    The Pyro model declares the spike with a Bernoulli site ``active`` ~ Bernoulli(1 − ρ_k) and the score
    ``doc_scores`` ~ :class:`ZeroOrGamma` (Gamma where active, 0 otherwise), so the per-component factor
    summed over ``active`` is eq. (3), (1 − ρ_k) Gamma(l_k; α_k, β_k) + ρ_k 1[l_k = 0], and in the
    component-count form (eq. 8) the score integrates out to eq. (9):
    (1 − ρ_k) Γ(c_k+α_k)/Γ(α_k) · β_k^{α_k}/(β_k+1)^{c_k+α_k} + ρ_k 1[c_k = 0].

    With ρ = 0 this is :class:`GammaPoissonDCA`.

    Parameters
    ----------
    n_components : int
    alpha : float or array (K,), default 1/K
        Gamma shape of the non-zero scores.
    beta : float or array (K,), optional
        Gamma rate of the non-zero scores; by default set when fitting so that the prior mean document
        length (1 − ρ)·α/β summed over components equals the corpus's mean length.
    rho : float or array (K,) in [0, 1), default 0.5
        Prior probability that a component is absent from a document (its score exactly 0).
    gamma : float or array (J,), default 1/K
        Dirichlet prior on each component's word distribution (as :class:`DirichletDCA`).

    Examples
    --------
    >>> model = ConditionalGammaPoissonDCA(3, alpha=1.0, beta=0.1, rho=0.6)
    >>> sim = model.simulate(n_documents=5, n_features=8, seed=0)
    >>> sorted(sim)
    ['active', 'counts', 'doc_scores', 'topic_word']
    >>> bool(((sim["doc_scores"] == 0) == (sim["active"] == 0)).all())
    True
    """

    def __init__(
        self, n_components: int, *, alpha: Any = None, beta: Any = None, rho: Any = 0.5, gamma: Any = None
    ) -> None:
        super().__init__(n_components, alpha=alpha, beta=beta, gamma=gamma)
        self.rho = check_rho(rho, self.n_components)

    def __repr__(self) -> str:
        beta = "auto" if self.beta is None else _short(self.beta)
        return (
            f"ConditionalGammaPoissonDCA({self.n_components}, alpha={_short(self.alpha)}, beta={beta}, "
            f"rho={_short(self.rho)}, gamma={_short(self.gamma)})"
        )

    def hyperparameters(self) -> dict[str, Any]:
        out = super().hyperparameters()
        out["rho"] = self.rho.tolist()
        return out

    def with_beta_for(self, mean_doc_length: float) -> ConditionalGammaPoissonDCA:
        """A copy whose unset β gives a prior mean document length Σ_k (1 − ρ_k) α_k / β equal to the mean."""
        if self.beta is not None:
            return self
        active_mass = float(((1 - self.rho) * self.alpha).sum())
        beta = np.full(self.n_components, max(active_mass, 1e-12) / max(float(mean_doc_length), 1e-12))
        return self.replace(beta=beta)

    def replace(self, **changes: Any) -> ConditionalGammaPoissonDCA:
        """A copy with some hyperparameters changed."""
        kw = {"alpha": self.alpha, "beta": self.beta, "rho": self.rho, "gamma": self.gamma}
        kw.update(changes)
        return ConditionalGammaPoissonDCA(self.n_components, **kw)

    def _doc_scores(self, ref: torch.Tensor, event: bool) -> torch.Tensor:
        alpha, beta, rho = self._tensor(self.alpha, ref), self._beta(ref), self._tensor(self.rho, ref)
        active_prior = dist.Bernoulli(probs=1 - rho)
        active = pyro.sample("active", active_prior.to_event(1) if event else active_prior)
        prior = ZeroOrGamma(alpha, beta, active)
        return pyro.sample("doc_scores", prior.to_event(1) if event else prior)


def check_rho(rho: Any, n_components: int) -> np.ndarray:
    """ρ as a K-vector of probabilities in [0, 1)."""
    arr = np.asarray(rho, dtype=np.float64) if not isinstance(rho, str) else None
    if arr is None:
        raise DataError(f"rho must be a probability or an array of {n_components} probabilities; got {rho!r}.")
    try:
        arr = np.broadcast_to(arr, (n_components,)).copy()
    except ValueError:
        raise DataError(f"rho must be a scalar or have shape ({n_components},); got shape {arr.shape}.") from None
    bad = ~np.isfinite(arr) | (arr < 0) | (arr >= 1)
    if bad.any():
        raise DataError(
            f"rho must lie in [0, 1) (the prior probability that a score is exactly 0); got "
            f"{arr[np.flatnonzero(bad)[0]]}. Use rho=0 for plain Gamma-Poisson."
        )
    return arr


def _short(a: np.ndarray) -> str:
    a = np.asarray(a)
    if a.size and np.all(a == a.ravel()[0]):
        return f"{a.ravel()[0]:g}"
    return np.array2string(a, precision=3, threshold=6)
