"""The data side and the major cycle of DCA mean-field VB (:class:`latentfs.inference.dca.vb.DCAVB`), written once
for every back-end of :mod:`latentfs.core.backends`.

The corpus is a :class:`~latentfs.core.backends.ShardSet`: in memory one shard (the prepared :class:`DCAData`, read
directly), for a dask array one per row chunk, each validated inside its task and kept where it was computed. A
cycle (Fig. 4) is the document half, :func:`_shard_estep` (:func:`~.vb_updates.vb_estep` on one shard: its
documents' shapes updated ``inner_iters`` times, the additive Θ statistics S and the shard's bound), run on every
shard by the ShardSet, which sums S and the bounds (one shard's are returned as they are); then the driver's half:
the objective, γ's update from the summed S (``learn_gamma``) and Θ from S. Each shard's document shapes stay with
it from cycle to cycle. The final Θ statistics and the documents' shapes are one more pass (:func:`_shard_final`).

What only an in-memory fit offers reads the one shard (``ss.local``): a warm start (``init``), α/β learning (every
cycle from documents converged at Θ, :func:`~.vb_updates.converge_documents`), threads for the document updates,
the row and feature names, and the pointwise log-likelihood. On dask the shards send their S and bound to the
driver as host values (numpy, Python floats) and the driver sees the corpus only through its sizes and document
lengths (:class:`_CorpusSummary`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.backends import ShardSet, shard_data
from latentfs.core.data import DataError
from latentfs.core.relabel import component_labels
from latentfs.inference.dca.common import DCAData, DCAModel, dims_and_coords, model_groups, prepare, resolve_model
from latentfs.inference.dca.vb_result import _check_init
from latentfs.inference.dca.vb_updates import (
    VBState,
    _hyper,
    converge_documents,
    init_topic_word,
    restart_shape,
    start_shapes,
    theta_stats,
    vb_estep,
    vb_mstep,
    vb_threads,
)

__all__: list[str] = []


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
    """VB state of a fit over several shards: Θ on the driver, each shard's document shapes (a dask object) with
    its shard. An in-memory fit's state is a :class:`VBState`."""

    doc_shape: list[Any]
    topic_word: torch.Tensor


@dataclass
class VBTrack:
    """What one start's run carries besides its state: the document bounds per cycle, its hyperparameters (learned
    ones move) and their values per cycle."""

    bounds: list[float]
    hyper: dict[str, torch.Tensor]
    hyper_trace: dict[str, list[Any]]


@dataclass
class VBPrep:
    """What a DCA VB fit needs from its data, whatever holds them (module docstring): the resolved model, the r-th
    start, one cycle, and the final q(m) and Θ statistics of the result."""

    model: DCAModel
    theta_update: str
    learn: tuple[str, ...]
    learn_gamma: bool
    learn_after: int
    start_state: Any
    cycle: Any
    final: Any
    dims: dict[str, tuple[str, ...]]
    coords: dict[str, list[str]]
    kept_documents: np.ndarray
    doc_lengths: np.ndarray
    groups: Any
    hyper0: dict[str, torch.Tensor]
    data: DCAData | None = None
    shards: int | None = None
    gamma_starts: tuple[float, ...] = ()  # learn_gamma: γ's start for start r is gamma_starts[r % len]


# ------------------------------------------------------------------ per shard (in memory: the one shard)


def _on_shard(data: DCAData, value: Any) -> torch.Tensor:
    """A broadcast value as a tensor of the shard's dtype and device: a tensor in memory is used as it is (dask
    sends host numpy arrays)."""
    if isinstance(value, torch.Tensor):
        return value
    return torch.as_tensor(value, dtype=data.dtype, device=data.device)


def _prepare_shard(block: Any, dtype: torch.dtype, device: str, empty_documents: str, quiet: bool) -> DCAData:
    """Validate one shard (``as_counts`` inside :func:`prepare`) and put it on the device. ``quiet`` (dask): the
    empty rows a shard drops are reported once by the driver, not by each shard."""
    if not quiet:
        return prepare(block, dtype=dtype, device=device, empty_documents=empty_documents)
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
    topic_word: Any,
    hyper: dict[str, Any],
    theta_update: str,
    inner_iters: int,
    bound_at: str,
    n_threads: int,
    host: bool,
) -> tuple[Any, Any, torch.Tensor]:
    """One shard's document half of a cycle: (S (K, J), the sum of its document bounds, its new shapes), S and
    the bound as host values when ``host`` (dask), else as the tensors :func:`vb_estep` returns."""
    h = {k: _on_shard(data, v) for k, v in hyper.items()}
    if a is None:  # doc_restart: every cycle starts the shard's documents afresh
        a = restart_shape(model, h["alpha"], data.doc_lengths)
    theta = _on_shard(data, topic_word)
    stats, bound, new_a = vb_estep(model, data, a, theta, h, theta_update, inner_iters, bound_at, n_threads)
    if host:
        return stats.cpu().numpy(), float(bound), new_a
    return stats, bound, new_a


def _shard_final(
    data: DCAData, a: torch.Tensor, model: DCAModel, topic_word: Any, hyper: dict[str, Any], theta_update: str,
    host: bool,
) -> tuple[Any, Any]:
    """One shard's Θ statistics at its final shapes, and the shapes (host arrays when ``host``)."""
    h = {k: _on_shard(data, v) for k, v in hyper.items()}
    stats = theta_stats(model, data, a, _on_shard(data, topic_word), h, theta_update)
    if host:
        return stats.cpu().numpy(), a.cpu().numpy()
    return stats, a


# ------------------------------------------------------------------ the driver


def _summarise(ss: ShardSet, X: Any, dtype: torch.dtype, device: Any) -> tuple[_CorpusSummary, np.ndarray,
                                                                              np.ndarray]:
    """A sharded corpus's sizes, kept rows and document lengths, from one pass over its shards; the empty rows
    they dropped are reported here, once."""
    import warnings

    from latentfs.core.data import DataWarning

    summaries = ss.summaries(_shard_summary)
    n_features = {int(s[0]) for s in summaries}
    if len(n_features) != 1:  # cannot happen with one column chunk; kept as a guard
        raise DataError(f"X's shards disagree on the number of features: {sorted(n_features)}.")
    lengths = np.concatenate([np.asarray(s[1], dtype=np.float64) for s in summaries])
    kept = np.concatenate([np.asarray(s[2], dtype=np.int64) + lo for s, lo in zip(summaries, ss.starts, strict=True)])
    if lengths.size == 0:
        raise DataError("X holds no documents with counts. Pass a non-empty corpus.")
    if kept.size < int(X.shape[0]):
        dropped = np.setdiff1d(np.arange(int(X.shape[0])), kept)
        shown = ", ".join(str(i) for i in dropped[:5]) + (" …" if dropped.size > 5 else "")
        warnings.warn(
            f"dropped {dropped.size} empty document(s) of X (rows {shown}); extras['kept_documents'] maps the "
            "remaining rows to the input.",
            DataWarning,
            stacklevel=6,
        )
    summary = _CorpusSummary(n_documents=int(lengths.size), n_features=n_features.pop(),
                             doc_lengths=torch.as_tensor(lengths, dtype=dtype, device=device))
    return summary, kept, lengths


def prepare_vb(model: DCAModel, X: Any, o: Any, learn: tuple[str, ...], learn_g: bool, doc_restart: bool) -> VBPrep:
    """The data side of the DCA VB spec (module docstring): the corpus as a ShardSet, the r-th start, one cycle
    and the final pass. ``learn`` (α/β learning), ``o.init`` and ``o.n_threads`` are in-memory only (the spec
    refuses the first two for a dask array)."""
    from latentfs.core.shards import is_dask_array
    from latentfs.inference.dca.hyper import vb_hyper_update, with_hyperparameters

    theta_update, inner_iters, learn_after = o.theta_update, o.inner_iters, o.learn_after
    ss = shard_data(X, _prepare_shard, o.dtype, str(o.device), o.empty_documents, is_dask_array(X),
                    persist=bool(o.persist))
    data: DCAData | None = ss.local if ss.is_local else None
    if data is not None:
        corpus: Any = data
        kept, lengths = data.counts.kept_documents, data.counts.doc_lengths
    else:
        corpus, kept, lengths = _summarise(ss, X, o.dtype, o.device)  # duck-typed DCAData: sizes and lengths only
    model = resolve_model(model, corpus)
    hyper0 = _hyper(model, corpus)
    groups = model_groups(model, corpus)
    dtype, device, J = corpus.dtype, corpus.device, corpus.n_features
    threads = 1 if data is None else vb_threads(o.n_threads, data, model.n_components)
    host = data is None  # dask: S and the bounds come back as host values
    bound_at = "last" if doc_restart else "input"
    init = o.init

    def state(shapes: list[Any], theta: torch.Tensor) -> Any:
        if data is not None:
            return VBState(doc_shape=shapes[0], topic_word=theta)
        return ShardedVBState(doc_shape=shapes, topic_word=theta)

    def shapes_of(s: Any) -> list[Any]:
        return [s.doc_shape] if data is not None else list(s.doc_shape)

    def start_state(gen: torch.Generator, r: int, gamma: float | None = None) -> Any:
        if data is not None and init is not None and r == 0:
            return _check_init(init, model, data, theta_update)
        start_model = model if gamma is None else with_hyperparameters(model, gamma=gamma)
        theta0 = init_topic_word(start_model, J, corpus.doc_lengths.sum(), gen, theta_update, dtype=dtype,
                                 device=device)
        # the shapes each shard starts from under the chapter's schedule (on dask made lazily, where the shard is)
        return state(ss.start(start_shapes, start_model), theta0)

    def cycle(s: Any, track: VBTrack) -> tuple[Any, float]:
        bounds, h = track.bounds, track.hyper
        shapes: list[Any] = [None] * ss.n_shards if doc_restart else shapes_of(s)
        if data is not None and learn and len(bounds) >= learn_after:
            # while learning, every cycle starts from converged documents, so both Θ's statistics and the
            # hyperparameter update see q(m) at its optimum (see converge_documents)
            a = restart_shape(model, h["alpha"], data.doc_lengths) if doc_restart else s.doc_shape
            shapes = [converge_documents(model, data, a, s.topic_word, h, theta_update, n_threads=threads)]
        (stats, bound), kept_shapes, _ = ss.estep(
            _shard_estep, model, s.topic_word, h, theta_update, inner_iters, bound_at, threads, host,
            state=shapes, n_sum=2, keep=True,
        )
        stats = torch.as_tensor(stats, dtype=dtype, device=device)  # a no-op in memory
        # γ (learn_gamma: from the first cycle) before Θ; the objective at the input Θ
        theta, objective = vb_mstep(stats, bound, s.topic_word, h, theta_update, groups, learn_g)
        new = state(kept_shapes or [], theta)
        bounds.append(float(bound))
        if learn_g:
            track.hyper_trace["gamma"].append(float(h["gamma"][0]))
        if data is not None and learn:
            if len(bounds) > learn_after:
                # learn from converged document shapes at the new Θ, not from a few updates after a restart
                converged = converge_documents(model, data, new.doc_shape, new.topic_word, h, theta_update,
                                               n_threads=threads)
                h.update(vb_hyper_update(model, converged, h, learn))
            for name in learn:
                track.hyper_trace[name].append(h[name].cpu().numpy().copy())
        return new, objective

    def final(s: Any, hyper: dict[str, torch.Tensor], fitted: DCAModel) -> tuple[torch.Tensor, VBState]:
        # Θ statistics at the final a, so the reported q(Θ) matches the final document parameters
        (stats,), _, parts = ss.estep(_shard_final, fitted, s.topic_word, hyper, theta_update, host,
                                      state=shapes_of(s), n_sum=1, gather=True)
        assert parts is not None
        if data is not None:
            return stats, VBState(doc_shape=parts[0], topic_word=s.topic_word)
        a_all = torch.as_tensor(np.concatenate(parts), dtype=dtype, device=device)
        return torch.as_tensor(stats, dtype=dtype, device=device), VBState(doc_shape=a_all, topic_word=s.topic_word)

    if data is not None:
        dims, coords = dims_and_coords(model, data)
    else:
        dims = {"topic_word": ("component", "feature"), model.doc_site: ("document", "component")}
        coords = {
            "component": component_labels(model.n_components),
            "feature": [f"w{j}" for j in range(J)],
            "document": [f"doc{i}" for i in kept],
        }
    return VBPrep(model, theta_update, learn, learn_g, learn_after, start_state, cycle, final, dims, coords,
                  kept_documents=kept, doc_lengths=lengths, groups=groups, hyper0=hyper0, data=data,
                  shards=None if data is not None else ss.n_shards)
