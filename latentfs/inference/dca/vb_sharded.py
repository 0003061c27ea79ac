"""The data side of DCA mean-field VB on a dask array: one task per row shard (the Notes of
:class:`latentfs.inference.dca.vb.DCAVB`, the one engine, run by the one pipeline).

Each cycle runs the document half of :func:`~latentfs.inference.dca.vb.vb_estep` as one task per shard; the
tasks return the additive Θ statistics and bound, the driver sums them (a tree reduction) and updates Θ, and
each shard's document shapes stay with it. Every shard is validated inside its task and no shard's counts are
gathered into the driver. The spec's ``prepare`` calls :func:`prepare_shards` when ``X`` is a dask array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.relabel import component_labels
from latentfs.inference.dca.common import DCAData, DCAModel, model_groups, prepare, resolve_model
from latentfs.inference.dca.hyper import gamma_update, with_hyperparameters
from latentfs.inference.dca.vb import (
    VBPrep,
    VBState,
    _hyper,
    _theta_from_stats,
    init_topic_word,
    restart_shape,
    theta_objective,
    theta_stats,
    vb_estep,
)
from latentfs.models.dca import DirichletDCA

__all__ = ["ShardedVBState", "prepare_shards"]

@dataclass(frozen=True)
class _CorpusSummary:
    """What the driver knows of a sharded corpus: its sizes and document lengths (never its counts). It
    stands in for :class:`DCAData` where only these are read (resolve_model, hyper_tensors, Θ's start)."""

    n_documents: int
    n_features: int
    doc_lengths: torch.Tensor

    @property
    def dtype(self) -> torch.dtype:
        return self.doc_lengths.dtype

    @property
    def device(self) -> torch.device:
        return self.doc_lengths.device


@dataclass(frozen=True)
class ShardedVBState:
    """VB state of a sharded fit: Θ on the driver, each shard's document shapes (a dask object) with its shard."""

    doc_shape: list[Any]
    topic_word: torch.Tensor


def _shard_prepare(block: Any, empty_documents: str, dtype: torch.dtype, device: str) -> DCAData:
    """Validate one shard (``as_counts`` inside :func:`prepare`) and put it on the device; empty rows dropped
    here are reported once by the driver."""
    import warnings

    from latentfs.core.data import DataWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return prepare(block, dtype=dtype, device=device, empty_documents=empty_documents)


def _shard_summary(data: DCAData) -> tuple[int, np.ndarray, np.ndarray]:
    return data.n_features, data.counts.doc_lengths, data.counts.kept_documents


def _shard_estep(
    data: DCAData,
    a: torch.Tensor | None,
    model: DCAModel,
    topic_word: np.ndarray,
    hyper: dict[str, np.ndarray],
    theta_update: str,
    inner_iters: int,
    bound_at: str,
) -> tuple[np.ndarray, float, torch.Tensor]:
    h = {k: torch.as_tensor(v, dtype=data.dtype, device=data.device) for k, v in hyper.items()}
    if a is None:  # doc_restart: every cycle starts the shard's documents afresh
        a = restart_shape(model, h["alpha"], data.doc_lengths)
    theta = torch.as_tensor(topic_word, dtype=data.dtype, device=data.device)
    stats, bound, new_a = vb_estep(model, data, a, theta, h, theta_update, inner_iters, bound_at)
    return stats.cpu().numpy(), float(bound), new_a


def _shard_final(
    data: DCAData, a: torch.Tensor, model: DCAModel, topic_word: np.ndarray, hyper: dict[str, np.ndarray],
    theta_update: str,
) -> tuple[np.ndarray, np.ndarray]:
    h = {k: torch.as_tensor(v, dtype=data.dtype, device=data.device) for k, v in hyper.items()}
    theta = torch.as_tensor(topic_word, dtype=data.dtype, device=data.device)
    return theta_stats(model, data, a, theta, h, theta_update).cpu().numpy(), a.cpu().numpy()


def prepare_shards(model: DCAModel, X: Any, o: Any, learn_gamma: bool, doc_restart: bool) -> VBPrep:
    """The data side of the DCA VB spec (:class:`~latentfs.inference.dca.vb.DCAVB`) on a dask array (module
    docstring): the shards validated (and persisted) once, one cycle's document half as one task per shard with
    Θ's statistics and the bounds summed in a tree, γ learned in the driver from the summed statistics, and the
    final q(m) gathered at the end."""
    import warnings

    from latentfs.core import shards
    from latentfs.core.data import DataWarning

    theta_update, inner_iters, learn_after = o.theta_update, o.inner_iters, o.learn_after
    dtype, device, empty_documents = o.dtype, o.device, o.empty_documents
    blocks, starts = shards.row_shards(X)
    stops = starts[1:] + [int(X.shape[0])]
    dev = str(device)
    task = shards.delayed(shards.shard_task, pure=True)
    prepared = [
        task(_shard_prepare, i, lo, hi, block, empty_documents, dtype, dev)
        for i, (block, lo, hi) in enumerate(zip(blocks, starts, stops, strict=True))
    ]
    if o.persist:
        prepared = shards.persist(prepared)
    summaries = shards.compute(*[shards.delayed(_shard_summary, pure=True)(p) for p in prepared])
    n_features = {int(s[0]) for s in summaries}
    if len(n_features) != 1:  # cannot happen with one column chunk; kept as a guard
        raise DataError(f"X's shards disagree on the number of features: {sorted(n_features)}.")
    J = n_features.pop()
    lengths_np = np.concatenate([np.asarray(s[1], dtype=np.float64) for s in summaries])
    kept = np.concatenate([np.asarray(s[2], dtype=np.int64) + lo for s, lo in zip(summaries, starts, strict=True)])
    if lengths_np.size == 0:
        raise DataError("X holds no documents with counts. Pass a non-empty corpus.")
    if kept.size < int(X.shape[0]):
        dropped = np.setdiff1d(np.arange(int(X.shape[0])), kept)
        shown = ", ".join(str(i) for i in dropped[:5]) + (" …" if dropped.size > 5 else "")
        warnings.warn(
            f"dropped {dropped.size} empty document(s) of X (rows {shown}); extras['kept_documents'] maps the "
            "remaining rows to the input.",
            DataWarning,
            stacklevel=5,
        )
    summary = _CorpusSummary(
        n_documents=int(lengths_np.size), n_features=J,
        doc_lengths=torch.as_tensor(lengths_np, dtype=dtype, device=device),
    )
    as_data: Any = summary  # duck-typed DCAData: sizes and lengths only
    model = resolve_model(model, as_data)
    hyper0 = _hyper(model, as_data)
    hyper_np = {k: v.cpu().numpy() for k, v in hyper0.items()}
    groups = model_groups(model, as_data)
    estep = shards.delayed(shards.shard_task, nout=3, pure=False)
    bound_at = "last" if doc_restart else "input"

    def start_state(gen: torch.Generator, r: int, gamma: float | None = None) -> ShardedVBState:
        start_model = model if gamma is None else with_hyperparameters(model, gamma=gamma)
        theta0 = init_topic_word(start_model, J, summary.doc_lengths.sum(), gen, theta_update, dtype=dtype,
                                 device=device)
        if doc_restart:
            shapes: list[Any] = [None] * len(prepared)
        else:  # the chapter's schedule: each shard's shapes persist from cycle to cycle, on its worker
            start = shards.delayed(_shard_start, pure=True)
            shapes = [start(p, model, hyper_np) for p in prepared]
        return ShardedVBState(doc_shape=shapes, topic_word=theta0)

    def cycle(s: ShardedVBState, track: Any) -> tuple[ShardedVBState, float]:
        bounds, h = track.bounds, track.hyper
        theta_key = shards.wrap(s.topic_word.cpu().numpy())
        outs = [
            estep(_shard_estep, i, lo, hi, p, None if doc_restart else a, model, theta_key, hyper_np,
                  theta_update, inner_iters, bound_at)
            for i, (p, a, lo, hi) in enumerate(zip(prepared, s.doc_shape, starts, stops, strict=True))
        ]
        # the new shapes stay with their shard (persisted on its own: the shard's S is not kept with it); S and the
        # bounds are summed in a tree of tasks on the workers and only the totals reach the driver
        *kept_outs, stats_total, bound_total = shards.persist(
            [o[2] for o in outs] + [shards.tree_sum([o[0] for o in outs]), shards.tree_sum([o[1] for o in outs])]
        )
        stats_np, bound_value = shards.compute(stats_total, bound_total)
        stats = torch.as_tensor(stats_np, dtype=dtype, device=device)
        bound = float(bound_value)
        objective = bound + float(theta_objective(s.topic_word, h["gamma"], theta_update))
        if learn_gamma:  # from the first cycle, as in memory
            h["gamma"] = torch.full_like(h["gamma"], gamma_update(stats, float(h["gamma"][0])))
        bounds.append(bound)
        if learn_gamma:
            track.hyper_trace["gamma"].append(float(h["gamma"][0]))
        theta = _theta_from_stats(stats, h["gamma"], theta_update, groups)
        return ShardedVBState(doc_shape=kept_outs, topic_word=theta), objective

    def final(state: ShardedVBState, hyper: dict[str, torch.Tensor], fitted: DCAModel) -> tuple[Any, VBState]:
        final_np = {k: v.cpu().numpy() for k, v in hyper.items()}
        theta_key = shards.wrap(state.topic_word.cpu().numpy())
        fin = shards.delayed(shards.shard_task, nout=2, pure=False)
        outs = [
            fin(_shard_final, i, lo, hi, p, a, fitted, theta_key, final_np, theta_update)
            for i, (p, a, lo, hi) in enumerate(zip(prepared, state.doc_shape, starts, stops, strict=True))
        ]
        stats_np, a_parts = shards.compute(shards.tree_sum([o[0] for o in outs]), [o[1] for o in outs])
        stats = torch.as_tensor(stats_np, dtype=dtype, device=device)
        a_all = torch.as_tensor(np.concatenate(a_parts), dtype=dtype, device=device)
        return stats, VBState(doc_shape=a_all, topic_word=state.topic_word)

    dims: dict[str, tuple[str, ...]] = {
        "topic_word": ("component", "feature"),
        model.doc_site: ("document", "component"),
    }
    coords = {
        "component": component_labels(model.n_components),
        "feature": [f"w{j}" for j in range(J)],
        "document": [f"doc{i}" for i in kept],
    }
    return VBPrep(model, theta_update, (), learn_gamma, learn_after, start_state, cycle, final, dims, coords,
                  kept_documents=kept, doc_lengths=lengths_np, groups=groups, hyper0=hyper0, shards=len(prepared))


def _shard_start(data: DCAData, model: DCAModel, hyper: dict[str, np.ndarray]) -> torch.Tensor:
    """A shard's starting shapes under the chapter's schedule (as :func:`vb_init`)."""
    K = model.n_components
    if isinstance(model, DirichletDCA):
        return torch.full((data.n_documents, K), 0.5, dtype=data.dtype, device=data.device)
    start = (float(hyper["alpha"].sum()) + data.doc_lengths) / K
    return start[:, None].expand(-1, K).clone()
