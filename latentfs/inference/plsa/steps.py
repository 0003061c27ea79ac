"""PLSA's EM arithmetic over one shard of documents: what every data back-end runs (DESIGN contract 8).

The fit's rows are a :class:`~latentfs.core.backends.ShardSet`: in memory one shard, holding every document; for a
``dask.array.Array`` one shard per row chunk, each validated and prepared inside its own task. The functions here
take one prepared shard (a :class:`~latentfs.inference.dca.common.DCAData`) and its documents' P(z | d), and are the
whole of the per-document work of :class:`~latentfs.inference.plsa.em.PLSAEM`; the driver only normalises the summed
word–aspect counts into P(x | z) and runs the validation. In memory the back-end calls them directly on the one
shard, so the in-memory fit is exactly this arithmetic.

PLSA's EM step (Monay et al. 2006, eq. 2–4; Hofmann 2001 for the tempered E-step) is additive over documents: a
shard's responsibilities P(z | d, x) give its new P(z | d) (which stays with the shard) and its word–aspect counts
Σ_{d in shard} n(d, x) P(z | d, x) (K × J), which sum over shards.

The parameters broadcast to every shard (P(x | z), β) arrive as torch tensors in memory and as host numpy arrays
on dask; ``torch.as_tensor`` turns either into a tensor of the shard's dtype and device (a no-op in memory).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.inference.dca.common import DCAData, prepare
from latentfs.inference.dca.em import _normalise_rows, _rates, expected_counts

__all__ = ["prepare_shard", "shard_em_step", "shard_final", "shard_loglik", "shard_summary", "uniform_doc_topic"]


def prepare_shard(rows: Any, dtype: torch.dtype, device: torch.device) -> DCAData:
    """Index one shard's documents: an in-memory fit's already validated
    :class:`~latentfs.core.data.CountMatrix`, or a dask row chunk, validated here as the in-memory fit validates
    ``X`` (non-negative integer counts, no empty document)."""
    return prepare(rows, dtype=dtype, device=device, empty_documents="error")


def shard_summary(data: DCAData) -> tuple[np.ndarray, np.ndarray]:
    """The shard's document lengths n(d) and word totals Σ_d n(d, x) (which words occur), float64."""
    totals = np.asarray(data.counts.csr.sum(0), dtype=np.float64).ravel()
    return np.asarray(data.counts.doc_lengths, dtype=np.float64), totals


def uniform_doc_topic(data: DCAData, n_components: int) -> torch.Tensor:
    """The start of P(z | d) for the shard's documents: uniform."""
    return torch.full((data.n_documents, n_components), 1.0 / n_components, dtype=data.dtype, device=data.device)


def shard_loglik(data: DCAData, doc_topic: torch.Tensor, topic_word: Any) -> float:
    """Σ_{d in shard} Σ_x n(d, x) log P(x | d) with P(x | d) = Σ_z P(z | d) P(x | z) (Monay §2), as
    :func:`latentfs.inference.plsa.em.plsa_loglik`'s conditional term."""
    theta = torch.as_tensor(topic_word, dtype=data.dtype, device=data.device)
    return float((data.values * torch.log(_rates(data, doc_topic, theta))).sum())


def shard_em_step(
    data: DCAData, doc_topic: torch.Tensor, topic_word: Any, beta: Any
) -> tuple[torch.Tensor, float, torch.Tensor]:
    """One (tempered) EM step on the shard's documents, the arithmetic of
    :func:`latentfs.inference.dca.em.plsi_step` with the P(x | z) normalisation left to the driver.

    Returns the word–aspect counts Σ_d n(d, x) P(z | d, x) (K, J) and Σ n(d, x) log P(x | d) at the input state
    (both additive over shards), and the shard's new P(z | d) (kept with the shard).
    """
    theta = torch.as_tensor(topic_word, dtype=data.dtype, device=data.device)
    beta = float(beta)
    m = doc_topic
    rates = _rates(data, m, theta)
    cond = float((data.values * torch.log(rates)).sum())
    if beta != 1.0:
        # (θ m)^β = θ^β m^β: the tempered normaliser is one more sampled product (Hofmann 2001)
        m, theta = m.pow(beta), theta.pow(beta)
        rates = _rates(data, m, theta)
    doc_counts, word_counts = expected_counts(data, m, theta, data.values / rates)
    new_m = _normalise_rows(doc_counts / data.doc_lengths[:, None])
    return word_counts, cond, new_m


def shard_final(
    data: DCAData, doc_topic: torch.Tensor, topic_word: Any
) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
    """At the final state: the shard's Σ n(d, x) log P(x | d) (additive), and its P(z | d) and per-document
    Σ_x n(d, x) log P(x | d) as float64 arrays (gathered in shard order)."""
    theta = torch.as_tensor(topic_word, dtype=data.dtype, device=data.device)
    terms = data.values * torch.log(_rates(data, doc_topic, theta))
    per_doc = torch.zeros(data.n_documents, dtype=data.dtype, device=data.device).index_add_(0, data.doc, terms)
    to_np = lambda t: t.detach().cpu().numpy().astype(np.float64)  # noqa: E731
    return float(terms.sum()), (to_np(doc_topic), to_np(per_doc))
