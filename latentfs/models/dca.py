"""Discrete component analysis (DCA) declared as Pyro models: Buntine & Jakulin (2006), Sections 4 and 6.

Two families share one vocabulary of sites:

==================  ===========================  ==========================================
site                shape                        meaning (chapter symbol)
==================  ===========================  ==========================================
``topic_word``      (n_components, n_features)   each component's word distribution; row k is
                                                 θ_{·,k} of the chapter (Θ is J × K there)
``doc_topic``       (n_documents, n_components)  DirichletDCA: proportions m_(i)
``doc_scores``      (n_documents, n_components)  GammaPoissonDCA: scores l_(i)
``counts``          (n_documents, n_features)    observed word counts w_(i)
``component_counts``(n_documents, n_components)  augmented form: c_(i), words per component
``latent_counts``   (n_documents, n_components,  augmented form: V_(i) (stored K × J here)
                    n_features)
==================  ===========================  ==========================================

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
from pyro import poutine
from pyro.poutine.util import site_is_subsample
from torch.distributions import constraints

from latentfs.data import DataError, check_n_components, check_positive

__all__ = ["DirichletDCA", "GammaPoissonDCA", "MultinomialCounts"]


class MultinomialCounts(dist.TorchDistribution):
    """Multinomial counts with a per-row total (torch's Multinomial needs one total for the batch).

    ``log_prob(w) = log L! − Σ_j log w_j! + Σ_j w_j log p_j`` with ``L = total_count``; a value whose sum
    differs from ``total_count`` has probability zero.
    """

    arg_constraints = {"probs": constraints.simplex}
    has_enumerate_support = False

    def __init__(self, total_count: torch.Tensor, probs: torch.Tensor, validate_args: bool | None = None) -> None:
        self.total_count = torch.as_tensor(total_count, dtype=probs.dtype, device=probs.device)
        self.probs = probs
        batch_shape = torch.broadcast_shapes(self.total_count.shape, probs.shape[:-1])
        self.total_count = self.total_count.expand(batch_shape)
        super().__init__(batch_shape, probs.shape[-1:], validate_args=validate_args)

    @property
    def support(self) -> Any:  # type: ignore[override]
        return constraints.integer_interval(0, int(self.total_count.max().item()) if self.total_count.numel() else 0)

    def expand(self, batch_shape: Any, _instance: Any = None) -> MultinomialCounts:
        batch_shape = torch.Size(batch_shape)
        return MultinomialCounts(
            self.total_count.expand(batch_shape), self.probs.expand(batch_shape + self.event_shape)
        )

    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:
        shape = torch.Size(sample_shape) + self.batch_shape
        probs = self.probs.expand(shape + self.event_shape).reshape(-1, self.event_shape[0])
        totals = self.total_count.expand(shape).reshape(-1).long()
        out = torch.zeros_like(probs)
        max_total = int(totals.max().item()) if totals.numel() else 0
        if max_total > 0:
            nonempty = probs.sum(-1) > 0
            safe = torch.where(nonempty[:, None], probs, torch.ones_like(probs))
            tokens = torch.multinomial(safe, max_total, replacement=True)
            keep = torch.arange(max_total, device=probs.device)[None, :] < totals[:, None]
            out.scatter_add_(1, tokens, keep.to(probs.dtype))
        return out.reshape(shape + self.event_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        logp = torch.where(value > 0, value * torch.log(self.probs.clamp_min(1e-300)), torch.zeros_like(value))
        total = value.sum(-1)
        lp = torch.lgamma(total + 1) - torch.lgamma(value + 1).sum(-1) + logp.sum(-1)
        return torch.where(total == self.total_count, lp, torch.full_like(lp, -torch.inf))


class _DCABase:
    """Shared hyperparameter handling for the DCA models."""

    doc_site: str
    default_method = "vb"

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
        with pyro.plate("component", self.n_components, dim=-1):
            return pyro.sample("topic_word", dist.Dirichlet(gamma))

    def hyperparameters(self) -> dict[str, Any]:
        return {"n_components": self.n_components, "alpha": self.alpha.tolist(), "gamma": self.gamma.tolist()}

    def _run_simulation(self, fn: Any, seed: int | None, **kwargs: Any) -> dict[str, np.ndarray]:
        # A scoped RNG: the caller's global torch state is restored afterwards.
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(int(seed))
            with torch.no_grad():
                trace = poutine.trace(fn).get_trace(**kwargs)
        return {
            name: site["value"].detach().cpu().numpy()
            for name, site in trace.nodes.items()
            if site["type"] == "sample" and not site_is_subsample(site)  # not the plates' index sites
        }


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
    gamma : float or array (J,), default 0.5
        Dirichlet prior on each component's word distribution (Jeffreys' 0.5, as in the chapter).

    Examples
    --------
    >>> model = DirichletDCA(3, alpha=0.5)
    >>> sim = model.simulate(n_documents=5, n_features=8, doc_length=20, seed=1)
    >>> sim["counts"].shape, sim["counts"].sum(axis=1).tolist()
    ((5, 8), [20.0, 20.0, 20.0, 20.0, 20.0])
    """

    doc_site = "doc_topic"

    def __init__(self, n_components: int, *, alpha: Any = None, gamma: Any = 0.5) -> None:
        if alpha is None:
            alpha = 1.0 / check_n_components(n_components, 10**9)
        super().__init__(n_components, alpha=alpha, gamma=gamma)

    def __repr__(self) -> str:
        return f"DirichletDCA({self.n_components}, alpha={_short(self.alpha)}, gamma={_short(self.gamma)})"

    def model(
        self,
        counts: torch.Tensor | None = None,
        *,
        doc_lengths: torch.Tensor | None = None,
        n_features: int | None = None,
    ) -> torch.Tensor:
        """The bag-of-words model, V summed out (eq. 4). Pass ``counts`` (I, J) or ``doc_lengths`` (I,)."""
        if counts is not None:
            doc_lengths = counts.sum(-1)
            n_features = counts.shape[-1]
        if doc_lengths is None or n_features is None:
            raise DataError("model needs counts, or doc_lengths and n_features to simulate.")
        ref = doc_lengths if torch.is_floating_point(doc_lengths) else doc_lengths.to(torch.get_default_dtype())
        topic_word = self._topic_word(n_features, ref.dtype, ref.device)
        alpha = self._tensor(self.alpha, ref)
        with pyro.plate("document", ref.shape[0], dim=-1):
            doc_topic = pyro.sample("doc_topic", dist.Dirichlet(alpha))
            probs = doc_topic @ topic_word
            return pyro.sample("counts", MultinomialCounts(ref, probs), obs=counts)

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

        ``doc_length`` is one length for all documents or one per document.
        """
        lengths = np.broadcast_to(np.asarray(doc_length, dtype=np.float64), (int(n_documents),)).copy()
        if (lengths < 1).any() or (lengths != np.round(lengths)).any():
            raise DataError(f"doc_length must hold positive integers; got {doc_length!r}.")
        return self._run_simulation(
            self.model, seed, doc_lengths=torch.as_tensor(lengths, dtype=dtype), n_features=int(n_features)
        )


class GammaPoissonDCA(_DCABase):
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
    gamma : float or array (J,), default 0.5

    Examples
    --------
    >>> model = GammaPoissonDCA(2, alpha=1.0, beta=0.05)
    >>> sim = model.simulate(n_documents=4, n_features=6, seed=0)
    >>> sorted(sim)
    ['counts', 'doc_scores', 'topic_word']
    """

    doc_site = "doc_scores"

    def __init__(self, n_components: int, *, alpha: Any = None, beta: Any = None, gamma: Any = 0.5) -> None:
        if alpha is None:
            alpha = 1.0 / check_n_components(n_components, 10**9)
        super().__init__(n_components, alpha=alpha, gamma=gamma)
        self.beta = None if beta is None else check_positive(beta, "beta", shape=(self.n_components,))

    def __repr__(self) -> str:
        beta = "auto" if self.beta is None else _short(self.beta)
        return f"GammaPoissonDCA({self.n_components}, alpha={_short(self.alpha)}, beta={beta}, gamma={_short(self.gamma)})"

    def hyperparameters(self) -> dict[str, Any]:
        out = super().hyperparameters()
        out["beta"] = None if self.beta is None else self.beta.tolist()
        return out

    def with_beta_for(self, mean_doc_length: float) -> GammaPoissonDCA:
        """A copy whose unset β gives a prior mean document length equal to ``mean_doc_length``."""
        if self.beta is not None:
            return self
        beta = np.full(self.n_components, self.alpha.sum() / max(float(mean_doc_length), 1e-12))
        return GammaPoissonDCA(self.n_components, alpha=self.alpha, beta=beta, gamma=self.gamma)

    def _beta(self, like: torch.Tensor) -> torch.Tensor:
        if self.beta is None:
            raise DataError(
                "beta is not set; pass beta=… to GammaPoissonDCA, or fit first (fit sets it from the data)."
            )
        return self._tensor(self.beta, like)

    def model(
        self,
        counts: torch.Tensor | None = None,
        *,
        n_documents: int | None = None,
        n_features: int | None = None,
    ) -> torch.Tensor:
        """The bag-of-words model (eq. 2). Pass ``counts`` (I, J), or ``n_documents`` and ``n_features``."""
        if counts is not None:
            n_documents, n_features = counts.shape
        if n_documents is None or n_features is None:
            raise DataError("model needs counts, or n_documents and n_features to simulate.")
        ref = counts if counts is not None else torch.zeros(())
        topic_word = self._topic_word(n_features, ref.dtype, ref.device)
        alpha, beta = self._tensor(self.alpha, ref), self._beta(ref)
        with pyro.plate("document", n_documents, dim=-1):
            scores = pyro.sample("doc_scores", dist.Gamma(alpha, beta).to_event(1))
            rate = scores @ topic_word
            return pyro.sample("counts", dist.Poisson(rate).to_event(1), obs=counts)

    def augmented_model(
        self,
        latent_counts: torch.Tensor | None = None,
        *,
        n_documents: int | None = None,
        n_features: int | None = None,
    ) -> torch.Tensor:
        """The component-assignment form (eq. 5): c_k ~ Poisson(l_k), v_{·,k} ~ Mult(c_k, θ_{·,k})."""
        if latent_counts is not None:
            n_documents, _, n_features = latent_counts.shape
        if n_documents is None or n_features is None:
            raise DataError("augmented_model needs latent_counts, or n_documents and n_features.")
        ref = latent_counts if latent_counts is not None else torch.zeros(())
        topic_word = self._topic_word(n_features, ref.dtype, ref.device)
        alpha, beta = self._tensor(self.alpha, ref), self._beta(ref)
        with pyro.plate("document", n_documents, dim=-2), pyro.plate("component_of_doc", self.n_components, dim=-1):
            scores = pyro.sample("doc_scores", dist.Gamma(alpha, beta))
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
        """Draw a corpus from :meth:`model` (β must be set): ``counts``, ``doc_scores``, ``topic_word``."""
        return self._run_simulation(self.model, seed, n_documents=int(n_documents), n_features=int(n_features))


def _short(a: np.ndarray) -> str:
    a = np.asarray(a)
    if a.size and np.all(a == a.ravel()[0]):
        return f"{a.ravel()[0]:g}"
    return np.array2string(a, precision=3, threshold=6)
