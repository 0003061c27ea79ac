"""DCA mean-field VB on a dask array: one task per row shard (the Notes of :func:`latentfs.inference.dca.vb.fit_vb`).

Each cycle runs the document half of :func:`~latentfs.inference.dca.vb.vb_estep` as one task per shard; the
tasks return the additive Θ statistics and bound, the driver sums them (a tree reduction) and updates Θ, and
each shard's document shapes stay with it. Every shard is validated inside its task and no shard's counts are
gathered into the driver. ``fit_vb`` calls :func:`fit_vb_dask` when ``X`` is a dask array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.driver import OptimizerRun, chain_generators, run_optimizer, run_restarts
from latentfs.core.relabel import component_labels
from latentfs.core.results import Posterior
from latentfs.inference.dca.common import DCAData, DCAModel, model_groups, prepare, resolve_model
from latentfs.inference.dca.hyper import gamma_update, with_hyperparameters
from latentfs.inference.dca.vb import (
    VBState,
    _hyper,
    _theta_from_stats,
    components_separated,
    flag_saddle,
    gamma_settled,
    init_topic_word,
    learns_gamma_at,
    restart_shape,
    theta_objective,
    theta_stats,
    vb_estep,
)
from latentfs.inference.dca.vb_result import _build_posterior
from latentfs.models.dca import DirichletDCA

__all__ = ["ShardedVBState", "fit_vb_dask"]

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


def fit_vb_dask(
    model: DCAModel,
    X: Any,
    *,
    theta_update: str,
    max_iter: int,
    tol: float,
    inner_iters: int,
    doc_restart: bool,
    n_init: int,
    seed: int | torch.Generator | None,
    dtype: torch.dtype,
    device: str | torch.device,
    empty_documents: str,
    progress: bool | None,
    warn: bool,
    callback: Any,
    persist: bool,
    learn_gamma: bool = False,
    learn_after: int = 20,
) -> Posterior:
    """:func:`fit_vb` on a dask array (its Notes): the same cycles, with the document half as shard tasks; γ is
    learned in the driver from the summed statistics, on the in-memory schedule."""
    import warnings

    from latentfs.core import shards
    from latentfs.core.data import DataWarning, check_choice

    check_choice("empty_documents", empty_documents, ("error", "drop", "keep"))
    blocks, starts = shards.row_shards(X)
    stops = starts[1:] + [int(X.shape[0])]
    dev = str(device)
    task = shards.delayed(shards.shard_task, pure=True)
    prepared = [
        task(_shard_prepare, i, lo, hi, block, empty_documents, dtype, dev)
        for i, (block, lo, hi) in enumerate(zip(blocks, starts, stops, strict=True))
    ]
    if persist:
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
            stacklevel=3,
        )
    summary = _CorpusSummary(
        n_documents=int(lengths_np.size), n_features=J,
        doc_lengths=torch.as_tensor(lengths_np, dtype=dtype, device=device),
    )
    as_data: Any = summary  # duck-typed DCAData: sizes and lengths only
    model = resolve_model(model, as_data)
    hyper = _hyper(model, as_data)
    hyper_np = {k: v.cpu().numpy() for k, v in hyper.items()}
    groups = model_groups(model, as_data)
    gens = chain_generators(seed, n_init, device)
    estep = shards.delayed(shards.shard_task, nout=3, pure=False)
    bound_at = "last" if doc_restart else "input"

    def one(r: int) -> OptimizerRun:
        theta0 = init_topic_word(
            model, J, summary.doc_lengths.sum(), gens[r], theta_update, dtype=dtype, device=device
        )
        if doc_restart:
            shapes: list[Any] = [None] * len(prepared)
        else:  # the chapter's schedule: each shard's shapes persist from cycle to cycle, on its worker
            start = shards.delayed(_shard_start, pure=True)
            shapes = [start(p, model, hyper_np) for p in prepared]
        bounds: list[float] = []
        h = dict(hyper)  # this start's hyperparameters (γ may be learned)
        gamma_trace: list[float] = []

        def step(s: ShardedVBState) -> tuple[ShardedVBState, float]:
            theta_key = shards.wrap(s.topic_word.cpu().numpy())
            outs = [
                estep(_shard_estep, i, lo, hi, p, None if doc_restart else a, model, theta_key, hyper_np,
                      theta_update, inner_iters, bound_at)
                for i, (p, a, lo, hi) in enumerate(zip(prepared, s.doc_shape, starts, stops, strict=True))
            ]
            # the new shapes stay with their shard (persisted on its own: the shard's S is not kept with it); S
            # and the bounds are summed in a tree of tasks on the workers and only the totals reach the driver
            *kept_outs, stats_total, bound_total = shards.persist(
                [o[2] for o in outs] + [shards.tree_sum([o[0] for o in outs]), shards.tree_sum([o[1] for o in outs])]
            )
            stats_np, bound_value = shards.compute(stats_total, bound_total)
            stats = torch.as_tensor(stats_np, dtype=dtype, device=device)
            bound = float(bound_value)
            objective = bound + float(theta_objective(s.topic_word, h["gamma"], theta_update))
            if learn_gamma and learns_gamma_at(len(bounds), learn_after):
                h["gamma"] = torch.full_like(h["gamma"], gamma_update(stats, float(h["gamma"][0])))
            bounds.append(bound)
            if learn_gamma:
                gamma_trace.append(float(h["gamma"][0]))
            theta = _theta_from_stats(stats, h["gamma"], theta_update, groups)
            return ShardedVBState(doc_shape=kept_outs, topic_word=theta), objective

        run = run_optimizer(
            ShardedVBState(doc_shape=shapes, topic_word=theta0), step, max_iter=max_iter, tol=tol,
            desc=f"{type(model).__name__} VB (dask)", progress=progress, warn=False, callback=callback,
            settled=lambda s: (components_separated(s.topic_word)
                               and gamma_settled(gamma_trace if learn_gamma else None, learn_after)),
        )
        run.info["bounds"] = np.asarray(bounds[: run.n_iter])
        run.info["restart"] = r
        run.info["hyper"] = h
        run.info["gamma_trace"] = np.asarray(gamma_trace[: run.n_iter])
        return run

    run, runs = run_restarts(n_init, one, warn=warn, desc=f"{type(model).__name__} VB",
                             remedies="raise max_iter, loosen tol, or use inner_iters > 1")
    final: ShardedVBState = run.state
    hyper = run.info["hyper"]
    hyper_np = {k: v.cpu().numpy() for k, v in hyper.items()}
    if learn_gamma:
        model = with_hyperparameters(model, gamma=float(hyper["gamma"][0]))
    theta_key = shards.wrap(final.topic_word.cpu().numpy())
    fin = shards.delayed(shards.shard_task, nout=2, pure=False)
    outs = [
        fin(_shard_final, i, lo, hi, p, a, model, theta_key, hyper_np, theta_update)
        for i, (p, a, lo, hi) in enumerate(zip(prepared, final.doc_shape, starts, stops, strict=True))
    ]
    stats_np, a_parts = shards.compute(shards.tree_sum([o[0] for o in outs]), [o[1] for o in outs])
    stats = torch.as_tensor(stats_np, dtype=dtype, device=device)
    a_all = torch.as_tensor(np.concatenate(a_parts), dtype=dtype, device=device)
    run.state = VBState(doc_shape=a_all, topic_word=final.topic_word)
    dims: dict[str, tuple[str, ...]] = {
        "topic_word": ("component", "feature"),
        model.doc_site: ("document", "component"),
    }
    coords = {
        "component": component_labels(model.n_components),
        "feature": [f"w{j}" for j in range(J)],
        "document": [f"doc{i}" for i in kept],
    }
    post = _build_posterior(
        model, run, theta_update, hyper, [r.objective for r in runs], stats=stats, a=a_all, dims=dims,
        coords=coords, kept_documents=kept, doc_lengths=lengths_np, groups=groups,
    )
    post.diagnostics["shards"] = len(prepared)
    flag_saddle(post, final.topic_word, warn=warn, n_iter=run.n_iter)
    if learn_gamma:
        post.hyperparameters["learned"] = ["gamma"]
        post.extras["gamma_trace"] = run.info["gamma_trace"]
    return post


def _shard_start(data: DCAData, model: DCAModel, hyper: dict[str, np.ndarray]) -> torch.Tensor:
    """A shard's starting shapes under the chapter's schedule (as :func:`vb_init`)."""
    K = model.n_components
    if isinstance(model, DirichletDCA):
        return torch.full((data.n_documents, K), 0.5, dtype=data.dtype, device=data.device)
    start = (float(hyper["alpha"].sum()) + data.doc_lengths) / K
    return start[:, None].expand(-1, K).clone()
