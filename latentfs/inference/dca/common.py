"""Shared pieces of the DCA engines: sparse data on a device, the log joint, per-document log-likelihood.

The count matrix lives as CSR (documents × words) plus its transpose as its own CSR (FIELD_NOTES:
keep the transpose; slicing CSR tensors is not supported), and as COO index arrays for gathers.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import (
    CountMatrix,
    DataError,
    as_counts,
    check_n_components,
)
from latentfs.core.options import check_component_memory, check_options
from latentfs.core.relabel import component_labels
from latentfs.models.dca import ConditionalGammaPoissonDCA, DirichletDCA, GammaPoissonDCA, group_totals

DCAModel = DirichletDCA | GammaPoissonDCA | ConditionalGammaPoissonDCA


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
    values: torch.Tensor
    doc_lengths: torch.Tensor
    log_factorials: torch.Tensor  # (I,) Σ_j log w_j!

    # The index tensors are built on first use: the compiled CPU kernels read the host CSR's own index arrays
    # (``counts.csr``), and each of these costs an nnz-long int64 array.
    @functools.cached_property
    def crow(self) -> torch.Tensor:
        return _as_long(self.counts.csr.indptr, self.device)

    @functools.cached_property
    def col(self) -> torch.Tensor:
        return _as_long(self.counts.csr.indices, self.device)

    @functools.cached_property
    def doc(self) -> torch.Tensor:
        return _row_of_nonzeros(self.counts.csr.indptr, self.device)

    @property
    def word(self) -> torch.Tensor:
        return self.col

    @functools.cached_property
    def _transpose(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        csr = self.counts.csr
        coo = csr.tocoo()
        csc_order = np.lexsort((coo.row, coo.col))  # column-major order of the row-major non-zeros
        t = csr.T.tocsr()
        t.sort_indices()
        return _as_long(t.indptr, self.device), _as_long(t.indices, self.device), _as_long(csc_order, self.device)

    @property
    def t_crow(self) -> torch.Tensor:
        return self._transpose[0]

    @property
    def t_col(self) -> torch.Tensor:
        return self._transpose[1]

    @property
    def t_perm(self) -> torch.Tensor:
        return self._transpose[2]

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

    def times_t(self, values: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """(documents × words CSR with these per-non-zero values) @ ``right``ᵀ, ``right`` (K, J) -> (I, K). On a GPU
        ``right``ᵀ is made row-major first: cuSPARSE's SpMM reads a transposed view column by column, 4.5× slower
        there (``benchmarks/gpu_sparse_layout.py``); on the CPU the view is used as it is."""
        dense = right.T.contiguous() if right.is_cuda else right.T
        return self.csr(values) @ dense

    def csr_t(self, values: torch.Tensor) -> torch.Tensor:
        """Words × documents CSR with these per-non-zero values (given in row-major order)."""
        return sparse_csr(self.t_crow, self.t_col, values[self.t_perm], (self.n_features, self.n_documents))

    def rates_at_nonzeros(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """(left @ right) evaluated only at the non-zeros: left (I, K), right (K, J) -> (nnz,)."""
        pattern = self.csr(torch.ones_like(self.values))
        if right.is_cuda:  # column-major: cuSPARSE's SDDMM then reads each word's K values contiguously
            right = right.t().contiguous().t()
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
    dtype, device, empty_documents = check_options(dtype=dtype, device=device, empty_documents=empty_documents)
    counts = X if isinstance(X, CountMatrix) else as_counts(X, empty_documents=empty_documents)  # type: ignore[arg-type]
    csr = counts.csr
    values = torch.as_tensor(csr.data, dtype=dtype, device=device)
    doc = _row_of_nonzeros(csr.indptr, device)  # a temporary: DCAData rebuilds it only if an engine asks
    lengths = torch.zeros(counts.n_documents, dtype=dtype, device=device).index_add_(0, doc, values)
    logfact = torch.zeros(counts.n_documents, dtype=dtype, device=device).index_add_(0, doc, torch.lgamma(values + 1))
    return DCAData(counts=counts, values=values, doc_lengths=lengths, log_factorials=logfact)


def _as_long(a: Any, device: str | torch.device) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.int64), device=device)


def _row_of_nonzeros(indptr: np.ndarray, device: str | torch.device) -> torch.Tensor:
    """The row (document) of each stored non-zero of a CSR matrix, in row-major order."""
    return _as_long(np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr)), device)


def resolve_model(model: DCAModel, data: DCAData) -> DCAModel:
    """Check K against the data and fill data-dependent defaults (GaP's β)."""
    check_n_components(
        model.n_components,
        data.n_features,
        what="the number of features: more components than words cannot be told apart",
    )
    check_component_memory(
        model.n_components, data.n_features, data.n_documents, data.doc_lengths.element_size(),
        what=type(model).__name__,
        remedy="Choose fewer components, keep fewer features (e.g. the words seen in at least 5 documents), or "
        "pass dtype=torch.float32 to halve it.",
    )
    model.gamma_vector(data.n_features)  # validates a vector γ's length
    model.groups_for(data.n_features)  # validates the groups' length
    if isinstance(model, (GammaPoissonDCA, ConditionalGammaPoissonDCA)):
        return model.with_beta_for(float(data.doc_lengths.mean()))
    return model


# ------------------------------------------------------------------ grouped (multivariate) DCA, Section 4.4


def model_groups(model: DCAModel, data: DCAData) -> torch.Tensor | None:
    """The group code of every feature as a LongTensor on the data's device (None if ungrouped)."""
    groups = model.groups_for(data.n_features)
    return None if groups is None else torch.as_tensor(groups, device=data.device)


def group_normalise(x: torch.Tensor, groups: torch.Tensor | None) -> torch.Tensor:
    """Normalise the last axis to sum to 1 (ungrouped) or to 1 within every group."""
    if groups is None:
        return x / x.sum(-1, keepdim=True)
    n_groups = int(groups.max().item()) + 1
    return x / group_totals(x, groups, n_groups)[..., groups]


def log_length_factorials(model: DCAModel, data: DCAData) -> torch.Tensor:
    """Σ_g log L_(i),g! per document (I,): the multinomial coefficients' numerators (log L_(i)! ungrouped)."""
    groups = model_groups(model, data)
    if groups is None:
        return torch.lgamma(data.doc_lengths + 1)
    n_groups = int(groups.max().item()) + 1
    lengths = torch.zeros(data.n_documents * n_groups, dtype=data.dtype, device=data.device)
    lengths.index_add_(0, data.doc * n_groups + groups[data.word], data.values)
    return torch.lgamma(lengths + 1).reshape(data.n_documents, n_groups).sum(-1)


def theta_log_prior(model: DCAModel, topic_word: torch.Tensor) -> torch.Tensor:
    """Σ_k log p(θ_{·,k}): Dirichlet(γ), one per group when grouped."""
    like = topic_word
    gamma = torch.as_tensor(model.gamma_vector(topic_word.shape[-1]), dtype=like.dtype, device=like.device)
    groups = model.groups_for(topic_word.shape[-1])
    if groups is None:
        return dirichlet_logpdf(topic_word, gamma).sum()
    g = torch.as_tensor(groups, device=like.device)
    n_groups = int(g.max().item()) + 1
    norm = torch.lgamma(group_totals(gamma, g, n_groups)).sum() - torch.lgamma(gamma).sum()
    return topic_word.shape[0] * norm + ((gamma - 1) * torch.log(topic_word)).sum()


# ------------------------------------------------------------------ conditional GaP, Section 4.2


def cgp_zero_probability(alpha: torch.Tensor, beta: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    """P(l_k = 0 | c_k = 0) = ρ(1+β)^α / [(1−ρ)β^α + ρ(1+β)^α] (Buntine & Jakulin, Table 3, CGP row).

    Computed in log space; 1 − this is the digest's π_k = P(l_k > 0 | c_k = 0) (§1.5).
    """
    log_off = torch.log(rho) + alpha * torch.log1p(beta)
    log_on = torch.log1p(-rho) + alpha * torch.log(beta)
    return torch.exp(log_off - torch.logaddexp(log_off, log_on))


def cgp_posterior_mean(component_counts: Any, alpha: Any, beta: Any, rho: Any) -> np.ndarray:
    """E[l_k | c], the corrected CGP posterior mean (digest §1.5; the chapter's formula is wrong).

    (c_k + α_k)/(1 + β_k) when c_k > 0, and π_k α_k/(1 + β_k) when c_k = 0, with
    π_k = (1−ρ_k)β_k^{α_k} / [(1−ρ_k)β_k^{α_k} + ρ_k(1+β_k)^{α_k}].

    Examples
    --------
    >>> cgp_posterior_mean(np.array([[3.0, 0.0]]), 1.0, 1.0, 0.5).round(4).tolist()
    [[2.0, 0.1667]]
    """
    c = np.asarray(component_counts, dtype=np.float64)
    t = lambda x: torch.as_tensor(np.broadcast_to(np.asarray(x, dtype=np.float64), c.shape[-1:]).copy())  # noqa: E731
    a, b, r = t(alpha), t(beta), t(rho)
    pi = (1 - cgp_zero_probability(a, b, r)).numpy()
    a_np, b_np = a.numpy(), b.numpy()
    return np.where(c > 0, (c + a_np) / (1 + b_np), pi * a_np / (1 + b_np))


def cgp_score_log_prior(model: ConditionalGammaPoissonDCA, doc_scores: torch.Tensor) -> torch.Tensor:
    """Σ_{i,k} log[(1−ρ_k) Gamma(l; α_k, β_k)] where l > 0, and log ρ_k where l = 0.

    This is eq. (3) with the Pyro model's ``active`` site equal to 1[l > 0].
    """
    dtype, device = doc_scores.dtype, doc_scores.device
    alpha = torch.as_tensor(model.alpha, dtype=dtype, device=device)
    beta = torch.as_tensor(model.beta, dtype=dtype, device=device)
    rho = torch.as_tensor(model.rho, dtype=dtype, device=device)
    slab = (
        torch.log1p(-rho) + alpha * torch.log(beta) - torch.lgamma(alpha)
        + (alpha - 1) * torch.log(doc_scores.clamp_min(1e-300)) - beta * doc_scores
    )
    return torch.where(doc_scores > 0, slab, torch.log(rho).expand_as(doc_scores)).sum()


def hyper_tensors(model: DCAModel, data: DCAData) -> dict[str, torch.Tensor]:
    """The model's hyperparameters as tensors on the data's device: α (K,), γ (J,), and β (K,) for GaP."""
    dtype, device = data.dtype, data.device
    out = {
        "alpha": torch.as_tensor(model.alpha, dtype=dtype, device=device),
        "gamma": torch.as_tensor(model.gamma_vector(data.n_features), dtype=dtype, device=device),
    }
    if isinstance(model, (GammaPoissonDCA, ConditionalGammaPoissonDCA)):
        out["beta"] = torch.as_tensor(model.beta, dtype=dtype, device=device)
    return out


def doc_loglik(model: DCAModel, data: DCAData, topic_word: torch.Tensor, doc_latent: torch.Tensor) -> torch.Tensor:
    """log p(w_(i) | latent, Θ) for each document (I,), V summed out.

    DM: the multinomial of eq. (4) with its coefficient. GaP: independent Poissons of eq. (2).
    """
    rates = data.rates_at_nonzeros(doc_latent, topic_word)
    per_doc = torch.zeros(data.n_documents, dtype=rates.dtype, device=rates.device)
    per_doc.index_add_(0, data.doc, data.values * torch.log(rates.clamp_min(torch.finfo(rates.dtype).tiny)))
    if isinstance(model, DirichletDCA):
        # Σ_j (Θm)_j = 1 (within every group when grouped), so only the coefficient remains; a group with
        # no tokens contributes log 0! = 0.
        return per_doc + log_length_factorials(model, data) - data.log_factorials
    # Σ_j (Θl)_j = Σ_k l_k because each θ_{·,k} sums to 1.
    return per_doc - doc_latent.sum(-1) - data.log_factorials


def log_prior(model: DCAModel, topic_word: torch.Tensor, doc_latent: torch.Tensor) -> torch.Tensor:
    """log p(Θ) + Σ_i log p(latent_(i)): the Dirichlet prior on each θ_{·,k} and the score priors."""
    like = topic_word
    gamma = torch.as_tensor(model.gamma_vector(topic_word.shape[-1]), dtype=like.dtype, device=like.device)
    alpha = torch.as_tensor(model.alpha, dtype=like.dtype, device=like.device)
    lp_theta = dirichlet_logpdf(topic_word, gamma).sum() if model.groups is None else theta_log_prior(model, topic_word)
    if isinstance(model, DirichletDCA):
        return lp_theta + dirichlet_logpdf(doc_latent, alpha).sum()
    if isinstance(model, ConditionalGammaPoissonDCA):
        return lp_theta + cgp_score_log_prior(model, doc_latent)
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
    dims: dict[str, tuple[str, ...]] = {
        "topic_word": ("component", "feature"),
        model.doc_site: ("document", "component"),
    }
    coords = {
        "component": component_labels(model.n_components),
        "feature": list(data.counts.feature_names),
        "document": list(data.counts.document_names),
    }
    return dims, coords


def check_store(model: DCAModel, store: Any) -> tuple[str, ...]:
    """Validate a sampler's ``store=``: the sites whose draws are kept (default: ``topic_word`` only).

    The per-document site is kept as a running mean (``extras["<doc_site>_mean"]``) whatever ``store``
    says; its draws are stored only when asked for, since they cost I·K floats per kept sweep.
    """
    allowed = ("topic_word", model.doc_site)
    sites = ("topic_word",) if store is None else tuple([store] if isinstance(store, str) else store)
    unknown = sorted(set(sites) - set(allowed))
    if unknown or not sites:
        raise DataError(
            f"store must name sites among {list(allowed)}; got {list(sites)!r}. Use store=('topic_word',) (the "
            f"default) or store=('topic_word', {model.doc_site!r}) to keep per-document draws too."
        )
    return sites


def finish_sampler(
    post: Any,
    *,
    chain_extras: dict[str, tuple[np.ndarray, int]],
    per_chain: dict[str, tuple[np.ndarray, int]] | None = None,
    align: bool,
    warn: bool,
) -> dict[str, np.ndarray]:
    """Relabel, then average chain-level outputs; then check convergence. Returns the chain-averaged arrays.

    ``chain_extras`` maps an extras name to (array shaped (chain, ...), component axis within one chain's
    array): running means over a chain's kept draws (component counts, Rao-Blackwellised estimates) and
    learned component-indexed hyperparameters. Each chain's components carry its own labels, so these are
    permuted by the chain's modal relabelling (:meth:`Posterior.align`) *before* they are averaged over
    chains; only the averages ((...) without the chain axis) are stored in ``post.extras``. ``per_chain``
    arrays are relabelled the same way but kept per chain (for example hyperparameter traces).

    With ``align=False`` nothing is relabelled and nothing is averaged: every array keeps its chain axis
    (averaging components in different label orders would mix them).
    """
    everything = {**chain_extras, **(per_chain or {})}
    for name, (arr, _) in everything.items():
        post.extras[name] = np.asarray(arr)
    averaged: dict[str, np.ndarray] = {}
    n_chains = next(iter(everything.values()))[0].shape[0] if everything else 1
    if align and "topic_word" in post.sites and post.is_sampled:
        post.align("topic_word", chain_extras={name: axis for name, (_, axis) in everything.items()}, warn=warn)
    if (align and post.alignment is not None) or n_chains == 1:
        for name in chain_extras:
            averaged[name] = post.extras[name].mean(0)
            post.extras[name] = averaged[name]
    if post.is_sampled:
        post.check_convergence(warn=warn)
    return averaged
