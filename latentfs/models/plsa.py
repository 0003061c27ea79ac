"""Probabilistic latent semantic analysis (PLSA, the aspect model) declared as a Pyro model.

Hofmann (1999, 2001); used by Monay, Quelhas, Gatica-Perez & Odobez (2006), eq. (1), as feature
extraction for classification:

    P(x_j, d_i) = P(d_i) Σ_k P(z_k | d_i) P(x_j | z_k).

Each token picks its document d ~ P(d), an aspect z ~ P(z | d) and a word x ~ P(x | z). The three
tables are parameters (no priors): PLSA is fitted by maximum likelihood (EM, tempered EM), see
:mod:`latentfs.inference.plsa.em`. ``P(d)`` has the closed-form estimate n(d_i)/Σ_i n(d_i).

Relation to DCA (digest book part 1, §1.8): P(z | d) and P(x | z) are DirichletDCA's ``doc_topic`` m_(i)
and ``topic_word`` Θ, and the PLSA EM iterates are those of DirichletDCA's MAP with α = γ = 1
(``latentfs.fit(DirichletDCA(K, alpha=1, gamma=1), X, method="map")``) and of KL-NMF with
l_(i) = L_(i) m_(i). PLSA adds only the document term Σ_i n(d_i) log P(d_i), which does not move
the other estimates.

Sites (token plate ``token`` of size N = Σ_ij n(d_i, x_j)):

==========  =========  ==============================================
site        shape      meaning
==========  =========  ==============================================
``doc``     (N,)       document index of each token, d ~ P(d)
``aspect``  (N,)       aspect of each token, z ~ P(z | d) (enumerable)
``word``    (N,)       word index of each token, x ~ P(x | z)
==========  =========  ==============================================
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import scipy.sparse as sp
import torch
from pyro import poutine

from latentfs.core.data import DataError, as_counts, check_n_components, check_positive
from latentfs.core.pyro_context import pyro_scope

__all__ = ["PLSA", "tokens_from_counts"]


def tokens_from_counts(X: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The token sequence of a count matrix, document by document: (doc index, word index), each (N,).

    Examples
    --------
    >>> d, w = tokens_from_counts(np.array([[2, 0, 1], [0, 1, 0]]))
    >>> d.tolist(), w.tolist()
    ([0, 0, 0, 1], [0, 0, 2, 1])
    """
    csr = as_counts(X, name="X").csr
    coo = csr.tocoo()
    reps = coo.data.astype(np.int64)
    doc = np.repeat(coo.row.astype(np.int64), reps)
    word = np.repeat(coo.col.astype(np.int64), reps)
    return torch.as_tensor(doc), torch.as_tensor(word)


#: Floats of P(x | z) one simulation block may hold (2²⁴: 128 MiB in float64).
_SIMULATE_BLOCK = 2**24


class PLSA:
    """The PLSA aspect model with ``n_components`` aspects (module docstring).

    Parameters
    ----------
    n_components : int
        N_z, the number of aspects (Monay et al. use 20 for soft clustering and 60 for features).

    Examples
    --------
    >>> model = PLSA(3)
    >>> sim = model.simulate(n_documents=4, n_features=10, doc_length=25, seed=0)
    >>> sim["counts"].shape, sim["counts"].sum(1).tolist()
    ((4, 10), [25.0, 25.0, 25.0, 25.0])
    """

    data_kind = "counts"  # documents × words (latentfs.core.registry.data_kind)

    default_method = "em"
    doc_site = "doc_topic"

    def __init__(self, n_components: int) -> None:
        self.n_components = check_n_components(n_components, 10**9)

    def __repr__(self) -> str:
        return f"PLSA({self.n_components})"

    def hyperparameters(self) -> dict[str, Any]:
        return {"n_components": self.n_components}

    def with_n_components(self, n_components: int) -> PLSA:
        """A copy of this model with another number of aspects (for model selection)."""
        return type(self)(n_components)

    def model(
        self,
        doc: torch.Tensor | None = None,
        word: torch.Tensor | None = None,
        *,
        doc_prior: torch.Tensor,
        doc_topic: torch.Tensor,
        topic_word: torch.Tensor,
        n_tokens: int | None = None,
    ) -> torch.Tensor:
        """Tokens of the aspect model: d ~ P(d), z ~ P(z | d), x ~ P(x | z) in a plate over tokens.

        ``doc_prior`` (I,), ``doc_topic`` (I, K) and ``topic_word`` (K, J) are the model's parameters. Pass
        the observed ``doc`` and ``word`` indices (see :func:`tokens_from_counts`), or ``n_tokens`` to
        simulate. The aspect site can be enumerated (``config_enumerate``) to sum z out.
        """
        if doc_topic.shape[-1] != self.n_components or topic_word.shape[0] != self.n_components:
            raise DataError(
                f"doc_topic and topic_word must have {self.n_components} aspects; got shapes "
                f"{tuple(doc_topic.shape)} and {tuple(topic_word.shape)}."
            )
        n = n_tokens if doc is None else doc.shape[0]
        if n is None:
            raise DataError("model needs the observed doc indices, or n_tokens to simulate.")
        with pyro.plate("token", n, dim=-1):
            d = pyro.sample("doc", dist.Categorical(doc_prior), obs=doc)
            z = pyro.sample("aspect", dist.Categorical(doc_topic[d]))
            return pyro.sample("word", dist.Categorical(topic_word[z]), obs=word)

    def simulate(
        self,
        n_documents: int,
        n_features: int,
        doc_length: int | np.ndarray = 100,
        *,
        doc_concentration: float = 0.5,
        word_concentration: float = 0.1,
        seed: int | None = None,
    ) -> dict[str, np.ndarray]:
        """A planted corpus: P(z | d_i) ~ Dirichlet(doc_concentration), P(x | z_k) ~ Dirichlet(word_concentration),
        then the tokens of each document drawn from :meth:`model` with the document fixed.

        Returns ``counts`` (I, J), ``doc_topic`` (I, K), ``topic_word`` (K, J) and ``doc_prior`` (I,).
        """
        from latentfs.core.data import check_int
        from latentfs.core.pyro_context import simulation_seed

        I, J = check_int("n_documents", n_documents, low=1), check_int("n_features", n_features, low=1)
        seed = simulation_seed(seed)
        lengths = np.broadcast_to(np.asarray(doc_length, dtype=np.float64), (I,)).copy()
        if (lengths < 1).any() or (lengths != np.round(lengths)).any():
            raise DataError(f"doc_length must hold positive integers; got {doc_length!r}.")
        a = float(check_positive(doc_concentration, "doc_concentration"))
        b = float(check_positive(word_concentration, "word_concentration"))
        with pyro_scope():  # the process-wide Pyro lock and a scoped RNG (caller state restored)
            if seed is not None:
                torch.manual_seed(int(seed))
            dt = torch.float64
            doc_topic = dist.Dirichlet(torch.full((I, self.n_components), a, dtype=dt)).sample()
            topic_word = dist.Dirichlet(torch.full((self.n_components, J), b, dtype=dt)).sample()
            doc = torch.as_tensor(np.repeat(np.arange(I), lengths.astype(np.int64)))
            prior = torch.as_tensor(lengths / lengths.sum(), dtype=dt)
            # The model's plate holds P(x | z) for every token, (tokens × J): run it over blocks of at most
            # _SIMULATE_BLOCK / J tokens (one block on small corpora), so memory does not grow with tokens × J.
            step = max(1, _SIMULATE_BLOCK // J)
            words = []
            with torch.no_grad():
                for lo in range(0, doc.shape[0], step):
                    trace = poutine.trace(self.model).get_trace(
                        doc[lo: lo + step], doc_prior=prior, doc_topic=doc_topic, topic_word=topic_word
                    )
                    words.append(np.asarray(trace.nodes["word"]["value"]))
            word = np.concatenate(words) if words else np.zeros(0, dtype=np.int64)
        counts = sp.coo_matrix((np.ones(word.size), (doc.numpy(), word)), shape=(I, J)).toarray()
        return {"counts": counts, "doc_topic": doc_topic.numpy(), "topic_word": topic_word.numpy(),
                "doc_prior": prior.numpy()}
