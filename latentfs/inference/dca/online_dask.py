"""The data side of DirichletDCA online VB on a dask array: each mini-batch's document updates as shard tasks
(the Notes of :class:`latentfs.inference.dca.online.DCAOnlineVB`, the one engine, run by the one pipeline).

Online VB (Hoffman, Blei & Bach 2010, Algorithm 2) alternates a local step, each mini-batch document's q(m)
fitted with q(Θ) held, and a global step, λ ← (1 − ρ_t) λ + ρ_t (γ + (D/|B_t|) S_B). Given Θ the documents are
independent and S_B and the bound are sums over them (DESIGN contract 8), so the local step splits by where the
rows lie: the batch's rows are cut at the dask array's row chunks, and each piece is one task that runs on the
chunk's own worker and returns only its part of S_B (on the piece's distinct words), its bound, its number of
documents and of tokens. The driver adds the pieces in chunk order and takes the λ step.

What travels per mini-batch: to the workers, one (J, K) array, what the documents multiply by (exp E[log θ] for
``theta_update="full"``, Θ = λ / Σ_j λ for ``"chapter"``), computed once on the driver (:func:`document_theta_t`)
and held as one dask key; back, K numbers for each distinct word of each piece and three scalars. Each document
stops as soon as its own shapes have converged (``doc_tol``), inside the compiled kernel
(:func:`~latentfs.inference.dca.vb.documents_at_theta`), so a converged document costs nothing more while the
others of its piece iterate.

The row chunks are validated once, at the start, each inside its task (a bad count names its chunk and row), and
kept where they were computed (``persist=True``: on a worker under a ``dask.distributed`` Client); nothing of the
corpus is gathered into the driver. The result equals the in-memory fit on the same rows and mini-batches (same
seed, so the same order) up to the order of floating-point sums: the document updates are the same arithmetic on
the same numbers, the pieces' statistics are added in a fixed order (so the number of workers changes nothing,
and another chunking only the rounding of those sums); measured differences are ~1e-15 relative. The exception
would be a document whose stopping test sits within rounding of ``doc_tol`` (then one more or one fewer update).
Every task is a pure function of its inputs, so a lost worker's pieces (and its chunks) are recomputed by Dask.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from latentfs.core import shards
from latentfs.core.data import DataError, as_counts
from latentfs.inference.dca.common import hyper_tensors, prepare, resolve_model
from latentfs.inference.dca.vb import documents_at_theta, init_topic_word, restart_shape
from latentfs.inference.dca.vb_cycle import _CorpusSummary
from latentfs.models.dca import DirichletDCA

__all__ = ["ShardedRows", "document_theta_t", "shard_rows", "sharded_update"]


@dataclass(frozen=True)
class ShardedRows:
    """A dask array's validated row chunks, where they were computed, and where each chunk starts.

    Attributes
    ----------
    chunks : list
        Each row chunk's :class:`~latentfs.core.data.CountMatrix` (empty documents kept, so its rows are the
        input's rows), as a dask object (persisted, or recomputed by each task that reads it).
    starts, stops : list of int
        The first row of each chunk and one past its last.
    n_features : int
    """

    chunks: list[Any]
    starts: list[int]
    stops: list[int]
    n_features: int

    def pieces(self, rows: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """The sorted input rows ``rows`` cut at the chunk boundaries: (chunk index, rows within the chunk)."""
        which = np.searchsorted(np.asarray(self.stops), rows, side="right")
        return [(int(i), rows[which == i] - self.starts[int(i)]) for i in np.unique(which)]


def _chunk_counts(block: Any, n_features: int) -> Any:
    """One row chunk validated (as :func:`~latentfs.core.data.as_counts` validates a mini-batch), its empty rows
    kept so that row r of the chunk stays row r; the mini-batch pieces drop them (as in memory)."""
    import warnings

    from latentfs.core.data import DataWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        counts = as_counts(block, name="X", empty_documents="keep")
    if counts.n_features != n_features:  # cannot happen with one column chunk; kept as a guard
        raise DataError(f"a row chunk has {counts.n_features} features, X has {n_features}.")
    return counts


def shard_rows(X: Any, persist: bool) -> ShardedRows:
    """The row chunks of the dask array ``X`` (one column chunk), each validated inside its own task and, with
    ``persist``, kept where it was computed for the whole fit."""
    blocks, starts = shards.row_shards(X)
    stops = [*starts[1:], int(X.shape[0])]
    n_features = int(X.shape[1])
    task = shards.delayed(shards.shard_task, pure=True)
    chunks = [
        task(_chunk_counts, i, lo, hi, block, n_features)
        for i, (block, lo, hi) in enumerate(zip(blocks, starts, stops, strict=True))
    ]
    if persist:
        chunks = _persist_balanced(chunks, [hi - lo for lo, hi in zip(starts, stops, strict=True)])
    return ShardedRows(chunks, starts, stops, n_features)


def _persist_balanced(chunks: list[Any], rows: list[int]) -> list[Any]:
    """Persist the chunks; under a distributed Client, spread them over the workers by rows (each chunk to the
    worker holding the fewest rows so far), since every mini-batch's pieces then run where their chunks lie.
    Left to itself the scheduler put 6 of 8 chunks on one of 2 workers in 2 of 3 tries. The placement is a
    preference (``allow_other_workers``): a lost worker's chunks are recomputed elsewhere."""
    client = shards.distributed_client()
    workers = sorted(client.scheduler_info()["workers"]) if client is not None else []
    if len(workers) < 2:
        return shards.persist(chunks)
    held = dict.fromkeys(workers, 0)
    placed = []
    for chunk, n in zip(chunks, rows, strict=True):
        worker = min(workers, key=lambda w: held[w])
        held[worker] += n
        placed.append(client.persist(chunk, workers=[worker], allow_other_workers=True))
    return placed


def _share(value: Any) -> Any:
    """One dask key holding ``value`` for every task of a mini-batch. Under a distributed Client it is sent to every
    worker at once (``scatter(broadcast=True)``): held by one worker only, it drew every piece's task there (it is
    larger than a chunk), and one of two workers did 90% of the work."""
    client = shards.distributed_client()
    if client is None:
        return shards.wrap(value)
    return client.scatter([value], broadcast=True, hash=False)[0]  # one key (a tuple would scatter per item)


def _piece_rows(counts: Any, rows: np.ndarray) -> sp.csr_matrix:
    """The piece's non-empty documents (a mini-batch drops its empty documents, as in memory)."""
    csr = counts.csr[rows]
    return csr[np.diff(csr.indptr) > 0]


def _piece_size(counts: Any, rows: np.ndarray) -> tuple[int, float]:
    """(documents, tokens) of a piece, for λ's start at the first mini-batch."""
    csr = _piece_rows(counts, rows)
    return int(csr.shape[0]), float(csr.sum())


def _piece_estep(
    counts: Any,
    rows: np.ndarray,
    model: DirichletDCA,
    theta: tuple[np.ndarray, np.ndarray | None],
    dtype: torch.dtype,
    device: str,
    max_iter: int,
    tol: float,
) -> tuple[np.ndarray, np.ndarray, float, int, float]:
    """One piece of a mini-batch: its documents' shapes fitted at fixed Θ from the restart α + L/K, each stopping
    when its own shapes have converged (:func:`documents_at_theta`).

    Returns (the piece's distinct words (n_w,), its Θ statistics on them, transposed (n_w, K), the sum of its documents'
    bounds, its number of documents, its number of tokens). The documents see only their words' rows of ``theta``
    (:func:`document_theta_t`), renumbered in order, so each document's arithmetic is that of the in-memory
    update."""
    csr = _piece_rows(counts, rows)
    K = model.n_components
    if csr.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, K)), 0.0, 0, 0.0
    words, local = np.unique(csr.indices, return_inverse=True)  # sorted: the renumbering keeps each row's order
    piece = sp.csr_matrix((csr.data, local.reshape(-1), csr.indptr), shape=(csr.shape[0], words.size))
    data = prepare(piece, dtype=dtype, device=device)
    alpha = torch.as_tensor(model.alpha, dtype=dtype, device=device)
    a0 = restart_shape(model, alpha, data.doc_lengths)
    # the documents multiply by exp E[log θ] (or Θ) at their words, handed to the kernel as a point Θ (which it
    # uses as given, clamped away from 0: a change only where exp E[log θ] underflows)
    _, stats, doc_bounds = documents_at_theta(
        model,
        data,
        a0,
        _theta_at(words, *theta, dtype, device),
        {"alpha": alpha},
        "chapter",
        max_iter=max_iter,
        tol=tol,
    )
    # (n_w, K): the kernel's own layout, so the driver adds whole rows
    return words, stats.T.contiguous().cpu().numpy(), float(doc_bounds.sum()), int(csr.shape[0]), float(csr.sum())


def document_theta_t(topic_word: torch.Tensor, theta_update: str) -> tuple[np.ndarray, np.ndarray | None]:
    """What the documents of a mini-batch multiply by, in two parts that the pieces finish on their own words:
    (λᵀ (J, K), ψ(Σ_j λ_jk) (K,)) for ``"full"``, each piece then taking exp(ψ(λ_jk) − ψ(Σ_j λ_jk)) at its words
    (the operations of :func:`~latentfs.inference.dca.vb_updates._compiled_pass`, elementwise, hence the same
    numbers), or (Θᵀ = (λ / Σ_j λ)ᵀ, None) for ``"chapter"``. The ψ of the K × J entries is then spread over the
    workers (each piece evaluates only its words) instead of being one serial step on the driver per batch."""
    K, J = topic_word.shape
    out = torch.empty((J, K), dtype=topic_word.dtype, device=topic_word.device)
    if theta_update == "full":
        out.copy_(topic_word.T)
        return out.cpu().numpy(), torch.digamma(topic_word.sum(-1)).cpu().numpy()
    out.copy_((topic_word / topic_word.sum(-1, keepdim=True)).T)
    return out.cpu().numpy(), None


def _theta_at(
    words: np.ndarray, theta_t: np.ndarray, shift: np.ndarray | None, dtype: torch.dtype, device: str
) -> torch.Tensor:
    """(K, n_w): what the piece's documents multiply by at its words (:func:`document_theta_t`)."""
    rows = torch.as_tensor(theta_t[words], dtype=dtype, device=device)
    if shift is not None:  # exp E[log θ] = exp(ψ(λ) − ψ(Σ_j λ))
        rows.digamma_().sub_(torch.as_tensor(shift, dtype=dtype, device=device)).exp_()
    return rows.T


def sharded_update(state: Any, corpus: ShardedRows, rows: np.ndarray, generator: torch.Generator) -> Any:
    """:func:`latentfs.inference.dca.online.partial_fit_state` for the mini-batch of input rows ``rows`` (sorted) of
    a sharded corpus: the document updates as one task per piece (module docstring), the λ step here. λ's random
    start (at the first mini-batch) is drawn from ``generator``, as in memory."""
    pieces = corpus.pieces(rows)
    chunks = corpus.chunks
    dev = str(state.device)
    model = state.model
    lam = state.topic_word
    if lam is None:  # λ's start needs the batch's tokens: one small round of tasks, at the first batch only
        size = shards.delayed(_piece_size, pure=True)
        sizes = shards.compute(*[size(chunks[i], local) for i, local in pieces])
        n_docs = sum(s[0] for s in sizes)
        if n_docs == 0:
            raise DataError(_EMPTY_BATCH.format(rows=_rows_text(rows)))
        first: Any = _CorpusSummary(n_docs, corpus.n_features, torch.zeros(1, dtype=state.dtype))  # sizes only
        model = resolve_model(model, first)
        tokens = torch.as_tensor(sum(s[1] for s in sizes), dtype=state.dtype, device=dev)
        scale = state.total_documents / n_docs
        # λ's start as in batch VB, with the batch's token count standing in for the corpus's (as in memory)
        lam = init_topic_word(
            model, corpus.n_features, tokens * scale, generator, "full", dtype=state.dtype, device=dev
        )
    theta_key = _share(document_theta_t(lam, state.theta_update))
    estep = shards.delayed(shards.shard_task, pure=False)
    outs = shards.compute(
        *[
            estep(
                _piece_estep,
                i,
                corpus.starts[i],
                corpus.stops[i],
                chunks[i],
                local,
                model,
                theta_key,
                state.dtype,
                dev,
                state.doc_max_iter,
                state.doc_tol,
            )
            for i, local in pieces
        ]
    )
    n_docs = sum(o[3] for o in outs)
    summary: Any = _CorpusSummary(n_docs, corpus.n_features, torch.zeros(1, dtype=state.dtype, device=dev))
    if n_docs == 0:
        raise DataError(_EMPTY_BATCH.format(rows=_rows_text(rows)))
    stats_t = np.zeros((corpus.n_features, lam.shape[0]), dtype=_numpy_dtype(state.dtype))  # S transposed, (J, K)
    for words, piece_stats, *_ in outs:  # in chunk order, whatever finished first (a piece's words are distinct)
        stats_t[words] += piece_stats
    stats = torch.from_numpy(stats_t).to(dev).T
    tokens_total = sum(o[4] for o in outs)
    bound = sum(o[2] for o in outs) / tokens_total
    scale = state.total_documents / n_docs  # D / |B|
    hyper = hyper_tensors(model, summary)  # duck-typed DCAData: γ (J,) and α (K,) need only sizes and the device
    rho = state.step_size()
    lam_hat = hyper["gamma"] + scale * stats  # Hoffman et al. (2010), Algorithm 2
    new = ((1 - rho) * lam + rho * lam_hat).contiguous()  # λ (K, J) in the layout the in-memory update keeps
    return replace(state, model=model, topic_word=new, n_updates=state.n_updates + 1, trace=(*state.trace, bound))


_EMPTY_BATCH = (
    "batch holds no counts at all (every entry is 0): mini-batch rows {rows} of X are all empty "
    "documents. Drop X's empty rows before fitting, or shuffle=True to spread them over the batches."
)


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def _rows_text(rows: np.ndarray) -> str:
    return ", ".join(str(int(r)) for r in rows[:5]) + (" …" if rows.size > 5 else "")
