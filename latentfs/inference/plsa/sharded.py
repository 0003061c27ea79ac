"""The data side of PLSA EM and tempered EM on a dask array: one task per row shard (DESIGN contract 8).

The engine is the in-memory one, :class:`~latentfs.inference.plsa.em.PLSAEM`, run by the one pipeline (its restarts,
early stopping, ranking and result); this module gives it the shards' E/M step (:func:`prepare_shards`).

The documents of a ``dask.array.Array`` of counts (dense or scipy.sparse row chunks, one column chunk) are
split into shards by its row chunks (:mod:`latentfs.core.shards`). PLSA's EM step (Monay et al. 2006,
eq. 2–4; Hofmann 2001 for the tempered E-step) is additive over documents: each shard's task computes its
responsibilities P(z | d, x), its new P(z | d) (which stays with the shard, persisted where it was
computed) and its word–aspect counts Σ_{d in shard} n(d, x) P(z | d, x) (K × J). The driver sums the
counts and normalises them into P(x | z), so only K × J numbers per shard travel each iteration.

The objective traced is the in-memory one: L = Σ_d n(d) log P(d) + Σ_d Σ_x n(d, x) log P(x | d), the second
sum added over shards and the first computed once from the document lengths. Validation documents
(``X_valid``, in memory) are folded in on the driver with P(x | z) alone, so early stopping and tempered EM
run unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.inference.dca.common import DCAData, prepare
from latentfs.inference.dca.em import _normalise_rows, _rates, expected_counts, theta_simplex
from latentfs.inference.plsa.em import (
    _TINY,
    PLSAPrep,
    _EarlyStopper,
    _make_validation,
    random_topic_word,
)
from latentfs.models.plsa import PLSA

__all__ = ["ShardedPLSAState", "prepare_shards"]


@dataclass(frozen=True)
class ShardedPLSAState:
    """PLSA state of a sharded fit: P(x | z) on the driver and each shard's P(z | d) (a dask object, or None
    before the first iteration: uniform) with its shard."""

    doc_latent: list[Any]
    topic_word: torch.Tensor


# ---------------------------------------------------------------------------------------------- shard tasks
def _shard_prepare(block: Any, dtype: torch.dtype, device: str) -> DCAData:
    """Validate one shard as the in-memory fit validates X (counts, no empty document) and index it."""
    return prepare(block, dtype=dtype, device=device, empty_documents="error")


def _shard_summary(data: DCAData) -> tuple[int, np.ndarray, np.ndarray]:
    """The shard's vocabulary size, document lengths and word totals (which words occur)."""
    totals = np.asarray(data.counts.csr.sum(0), dtype=np.float64).ravel()
    return data.n_features, np.asarray(data.counts.doc_lengths, dtype=np.float64), totals


def _doc_topic(data: DCAData, doc_topic: torch.Tensor | None, K: int) -> torch.Tensor:
    if doc_topic is None:  # the in-memory start: uniform P(z | d)
        return torch.full((data.n_documents, K), 1.0 / K, dtype=data.dtype, device=data.device)
    return doc_topic


def _shard_step(
    data: DCAData, doc_topic: torch.Tensor | None, topic_word: np.ndarray, beta: float
) -> tuple[np.ndarray, float, torch.Tensor]:
    """One (tempered) EM step on the shard's documents, as :func:`latentfs.inference.dca.em.plsi_step`.

    Returns the word–aspect counts (K, J) (additive over shards), Σ n(d, x) log P(x | d) at the input
    state (as :func:`latentfs.inference.plsa.em.plsa_loglik`), and the shard's new P(z | d).
    """
    theta = torch.as_tensor(topic_word, dtype=data.dtype, device=data.device)
    m = _doc_topic(data, doc_topic, theta.shape[0])
    rates = data.rates_at_nonzeros(m, theta).clamp_min(_TINY)
    cond = float((data.values * torch.log(rates)).sum())
    if beta != 1.0:
        # (θ m)^β = θ^β m^β: the tempered normaliser is one more sampled product (Hofmann 2001)
        m, theta = m.pow(beta), theta.pow(beta)
        rates = _rates(data, m, theta)
    doc_counts, word_counts = expected_counts(data, m, theta, data.values / rates)
    new_m = _normalise_rows(doc_counts / data.doc_lengths[:, None])
    return word_counts.cpu().numpy(), cond, new_m


def _shard_loglik(data: DCAData, doc_topic: torch.Tensor | None, topic_word: np.ndarray) -> float:
    theta = torch.as_tensor(topic_word, dtype=data.dtype, device=data.device)
    rates = data.rates_at_nonzeros(_doc_topic(data, doc_topic, theta.shape[0]), theta).clamp_min(_TINY)
    return float((data.values * torch.log(rates)).sum())


def _shard_final(
    data: DCAData, doc_topic: torch.Tensor | None, topic_word: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The shard's P(z | d) and per-document Σ_x n(d, x) log P(x | d) at the final state."""
    theta = torch.as_tensor(topic_word, dtype=data.dtype, device=data.device)
    m = _doc_topic(data, doc_topic, theta.shape[0])
    rates = data.rates_at_nonzeros(m, theta).clamp_min(_TINY)
    per_doc = torch.zeros(data.n_documents, dtype=data.dtype, device=data.device)
    per_doc.index_add_(0, data.doc, data.values * torch.log(rates))
    return m.cpu().numpy().astype(np.float64), per_doc.cpu().numpy().astype(np.float64)


# ---------------------------------------------------------------------------------------------- the data side
def prepare_shards(model: PLSA, X: Any, o: Any, tempered: bool) -> PLSAPrep:
    """The data side of the PLSA spec (:class:`~latentfs.inference.plsa.em.PLSAEM`) on a dask array (module
    docstring): the shards prepared (and persisted) once, one EM step as one task per shard with the word–aspect
    counts summed in a tree, the final P(z | d) and per-document log-likelihoods gathered at the end."""
    from latentfs.core import shards

    X_valid, dtype, device = o.X_valid, o.dtype, o.device
    if o.validation_fraction is not None:
        raise DataError(
            f"validation_fraction is not available for a dask array X (got {o.validation_fraction!r}): holding out "
            "a random fraction of its documents would gather them on the driver. Pass the held-out documents "
            "as an in-memory count matrix, X_valid=…, or split the dask array before fitting."
        )
    if shards.is_dask_array(X_valid):
        raise DataError(
            "X_valid must be an in-memory count matrix (numpy or scipy.sparse) for a dask array X; got a dask "
            "array. Validation documents are folded in on the driver: pass X_valid.compute() (a sample)."
        )
    if o.init is not None:
        raise DataError(
            f"init is not available for a dask array X; got {type(o.init).__name__}. Omit init (fit from seed)."
        )
    needs_validation = tempered or o.early_stopping
    if needs_validation and X_valid is None:
        raise DataError(
            "early_stopping and tempered EM need validation documents; pass X_valid=… (in memory: validation_fraction "
            "is not available for a dask array X)."
        )
    blocks, starts = shards.row_shards(X)
    stops = starts[1:] + [int(X.shape[0])]
    dev = str(device)
    task = shards.delayed(shards.shard_task, pure=True)
    prepared = [task(_shard_prepare, i, lo, hi, b, dtype, dev)
                for i, (b, lo, hi) in enumerate(zip(blocks, starts, stops, strict=True))]
    if o.persist:
        prepared = shards.persist(prepared)
    summaries = shards.compute(*[shards.delayed(_shard_summary, pure=True)(p) for p in prepared])
    J = int(X.shape[1])
    lengths = np.concatenate([s[1] for s in summaries])
    seen = np.sum([s[2] for s in summaries], axis=0) > 0
    n_docs = int(lengths.size)
    K = model.n_components
    if K > min(n_docs, J):
        raise DataError(
            f"n_components must be at most {min(n_docs, J)} (the smaller of the numbers of documents and features); "
            f"got {K}. Choose fewer aspects."
        )
    n = torch.as_tensor(lengths, dtype=dtype, device=device)
    doc_term = float((n * torch.log(n / n.sum())).sum())  # Σ_d n(d) log P(d), as plsa_loglik
    step_task = shards.delayed(shards.shard_task, nout=3, pure=False)
    ll_task = shards.delayed(shards.shard_task, pure=False)

    def make_stopper() -> _EarlyStopper | None:
        if not needs_validation:
            return None
        return _EarlyStopper(_make_validation(X_valid, J, seen, K, o.validation_score, 0, dtype, torch.device(device)),
                             o.patience, tempered, o.beta_decay, o.beta_min, o.fold_in_iter)

    def start_state(gen: torch.Generator, r: int) -> ShardedPLSAState:
        return ShardedPLSAState([None] * len(prepared),
                                random_topic_word(K, J, gen, dtype=dtype, device=torch.device(device)))

    def objective_at(s: ShardedPLSAState) -> float:
        theta_key = shards.wrap(s.topic_word.cpu().numpy())
        args = enumerate(zip(prepared, s.doc_latent, starts, stops, strict=True))
        parts = shards.compute(*[ll_task(_shard_loglik, i, lo, hi, p, m, theta_key) for i, (p, m, lo, hi) in args])
        return doc_term + float(np.sum(parts))

    def inner_step(s: ShardedPLSAState, beta: float) -> tuple[ShardedPLSAState, float]:
        theta_key = shards.wrap(s.topic_word.cpu().numpy())
        args = enumerate(zip(prepared, s.doc_latent, starts, stops, strict=True))
        outs = [step_task(_shard_step, i, lo, hi, p, m, theta_key, beta) for i, (p, m, lo, hi) in args]
        # each shard's new P(z | d) stays where it was computed (persisted on its own); the word–aspect counts and
        # log-likelihoods are summed in a tree of tasks and only the totals reach the driver
        *latent, counts_total, cond_total = shards.persist(
            [o[2] for o in outs] + [shards.tree_sum([o[0] for o in outs]), shards.tree_sum([o[1] for o in outs])]
        )
        counts, cond = shards.compute(counts_total, cond_total)
        theta = theta_simplex(torch.as_tensor(counts, dtype=dtype, device=device))
        return ShardedPLSAState(latent, theta), doc_term + float(cond)

    def result_parts(final: ShardedPLSAState) -> dict[str, Any]:
        theta_key = shards.wrap(final.topic_word.cpu().numpy())
        fin = shards.delayed(shards.shard_task, nout=2, pure=False)
        outs = [fin(_shard_final, i, lo, hi, p, m, theta_key)
                for i, (p, m, lo, hi) in enumerate(zip(prepared, final.doc_latent, starts, stops, strict=True))]
        doc_parts, ll_parts = shards.compute([o[0] for o in outs], [o[1] for o in outs])
        per_doc = np.concatenate(ll_parts)
        cond = float(per_doc.sum())
        return {"topic_word": final.topic_word.detach().cpu().numpy().astype(np.float64),
                "doc_topic": np.concatenate(doc_parts), "doc_lengths": lengths, "kept_documents": np.arange(n_docs),
                "document_names": [f"doc{i}" for i in range(n_docs)], "feature_names": [f"w{j}" for j in range(J)],
                "loglik": doc_term + cond, "cond": cond, "per_doc": per_doc}

    return PLSAPrep(model, tempered, needs_validation, start_state=start_state, inner_step=inner_step,
                    objective_at=objective_at, make_stopper=make_stopper, result_parts=result_parts,
                    shards=len(prepared))
