"""Shared pieces of the DCA engines: sparse data on a device, the log joint, per-document log-likelihood.

The count matrix lives as CSR (documents × words) plus its transpose as its own CSR (FIELD_NOTES:
keep the transpose; slicing CSR tensors is not supported), and as COO index arrays for gathers.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.data import CountMatrix, as_counts, check_n_components
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

DCAModel = DirichletDCA | GammaPoissonDCA


def sparse_csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """A CSR tensor, without torch's one-off 'beta' warning (it would fail warnings-as-errors runs)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)


@dataclass
class DCAData:
    """A validated corpus on a device.

    Attributes
    ----------
    counts : CountMatrix (host copy, with names)
    doc, word : LongTensor (nnz,), row and column of each non-zero, row-major
    values : Tensor (nnz,), the counts w_{j,(i)}
    crow, col : the CSR structure of documents × words
    t_crow, t_col, t_perm : the CSR structure of the transpose, and the permutation taking row-major
        non-zero order to column-major order
    doc_lengths : Tensor (I,), L_(i); log_coef : Tensor (I,), log L! − Σ_j log w_j! (multinomial coefficient)
    """

    counts: CountMatrix
    doc: torch.Tensor
    word: torch.Tensor
    values: torch.Tensor
    crow: torch.Tensor
    col: torch.Tensor
    t_crow: torch.Tensor
    t_col: torch.Tensor
    t_perm: torch.Tensor
    doc_lengths: torch.Tensor
    log_factorials: torch.Tensor  # (I,) Σ_j log w_j!

    @property
    def n_documents(self) -> int:
        return self.counts.n_documents

    @property
    def n_features(self) -> int:
        return self.counts.n_features

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device

    def csr(self, values: torch.Tensor) -> torch.Tensor:
        """Documents × words CSR with these per-non-zero values."""
        return sparse_csr(self.crow, self.col, values, (self.n_documents, self.n_features))

    def csr_t(self, values: torch.Tensor) -> torch.Tensor:
        """Words × documents CSR with these per-non-zero values (given in row-major order)."""
        return sparse_csr(self.t_crow, self.t_col, values[self.t_perm], (self.n_features, self.n_documents))

    def rates_at_nonzeros(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """(left @ right) evaluated only at the non-zeros: left (I, K), right (K, J) -> (nnz,)."""
        pattern = self.csr(torch.ones_like(self.values))
        return torch.sparse.sampled_addmm(pattern, left, right, beta=0.0).values()

    def dense(self) -> torch.Tensor:
        out = torch.zeros(self.n_documents, self.n_features, dtype=self.dtype, device=self.device)
        out[self.doc, self.word] = self.values
        return out


def prepare(
    X: Any,
    *,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
    empty_documents: str = "error",
) -> DCAData:
    counts = X if isinstance(X, CountMatrix) else as_counts(X, empty_documents=empty_documents)  # type: ignore[arg-type]
    csr = counts.csr
    coo = csr.tocoo()
    csc_order = np.lexsort((coo.row, coo.col))  # column-major order of the row-major non-zeros
    t = csr.T.tocsr()
    t.sort_indices()
    as_long = lambda a: torch.as_tensor(np.asarray(a, dtype=np.int64), device=device)  # noqa: E731
    values = torch.as_tensor(csr.data, dtype=dtype, device=device)
    doc = as_long(coo.row)
    lengths = torch.zeros(counts.n_documents, dtype=dtype, device=device).index_add_(0, doc, values)
    logfact = torch.zeros(counts.n_documents, dtype=dtype, device=device).index_add_(0, doc, torch.lgamma(values + 1))
    return DCAData(
        counts=counts,
        doc=doc,
        word=as_long(coo.col),
        values=values,
        crow=as_long(csr.indptr),
        col=as_long(csr.indices),
        t_crow=as_long(t.indptr),
        t_col=as_long(t.indices),
        t_perm=as_long(csc_order),
        doc_lengths=lengths,
        log_factorials=logfact,
    )


def resolve_model(model: DCAModel, data: DCAData) -> DCAModel:
    """Check K against the data and fill data-dependent defaults (GaP's β)."""
    check_n_components(
        model.n_components,
        data.n_features,
        what="the number of features: more components than words cannot be told apart",
    )
    model.gamma_vector(data.n_features)  # validates a vector γ's length
    if isinstance(model, GammaPoissonDCA):
        return model.with_beta_for(float(data.doc_lengths.mean()))
    return model


def doc_loglik(model: DCAModel, data: DCAData, topic_word: torch.Tensor, doc_latent: torch.Tensor) -> torch.Tensor:
    """log p(w_(i) | latent, Θ) for each document (I,), V summed out.

    DM: the multinomial of eq. (4) with its coefficient. GaP: independent Poissons of eq. (2).
    """
    rates = data.rates_at_nonzeros(doc_latent, topic_word)
    per_doc = torch.zeros(data.n_documents, dtype=rates.dtype, device=rates.device)
    per_doc.index_add_(0, data.doc, data.values * torch.log(rates.clamp_min(torch.finfo(rates.dtype).tiny)))
    if isinstance(model, DirichletDCA):
        # Σ_j (Θm)_j = 1, so only the coefficient remains.
        return per_doc + torch.lgamma(data.doc_lengths + 1) - data.log_factorials
    # Σ_j (Θl)_j = Σ_k l_k because each θ_{·,k} sums to 1.
    return per_doc - doc_latent.sum(-1) - data.log_factorials


def log_prior(model: DCAModel, topic_word: torch.Tensor, doc_latent: torch.Tensor) -> torch.Tensor:
    """log p(Θ) + Σ_i log p(latent_(i)): the Dirichlet prior on each θ_{·,k} and the score priors."""
    like = topic_word
    gamma = torch.as_tensor(model.gamma_vector(topic_word.shape[-1]), dtype=like.dtype, device=like.device)
    alpha = torch.as_tensor(model.alpha, dtype=like.dtype, device=like.device)
    lp_theta = dirichlet_logpdf(topic_word, gamma).sum()
    if isinstance(model, DirichletDCA):
        return lp_theta + dirichlet_logpdf(doc_latent, alpha).sum()
    beta = torch.as_tensor(model.beta, dtype=like.dtype, device=like.device)
    lp = alpha * torch.log(beta) - torch.lgamma(alpha) + (alpha - 1) * torch.log(doc_latent) - beta * doc_latent
    return lp_theta + lp.sum()


def dirichlet_logpdf(x: torch.Tensor, conc: torch.Tensor) -> torch.Tensor:
    """log Dirichlet(x | conc) over the last axis."""
    conc = conc.expand_as(x)
    norm = torch.lgamma(conc.sum(-1)) - torch.lgamma(conc).sum(-1)
    return norm + ((conc - 1) * torch.log(x)).sum(-1)


def log_joint(model: DCAModel, data: DCAData, topic_word: torch.Tensor, doc_latent: torch.Tensor) -> torch.Tensor:
    """The engine's log p(w, latent, Θ) of the bag model; equals the Pyro trace's ``log_prob_sum``."""
    return log_prior(model, topic_word, doc_latent) + doc_loglik(model, data, topic_word, doc_latent).sum()


def dims_and_coords(model: DCAModel, data: DCAData) -> tuple[dict[str, tuple[str, ...]], dict[str, list[str]]]:
    dims = {"topic_word": ("component", "feature"), model.doc_site: ("document", "component")}
    coords = {
        "component": [f"c{k}" for k in range(model.n_components)],
        "feature": list(data.counts.feature_names),
        "document": list(data.counts.document_names),
    }
    return dims, coords
