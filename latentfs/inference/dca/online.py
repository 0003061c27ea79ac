"""Online variational Bayes for DirichletDCA (Hoffman, Blei & Bach 2010, "Online learning for latent Dirichlet
allocation", Algorithm 2).

Mini-batches B_t of documents arrive one after another. For each, the documents' shapes a are fitted with
Θ fixed (:func:`latentfs.inference.dca.vb.documents_at_theta`, from the restart α + L/K; each document stops
as soon as its own shapes have converged), the batch's Θ statistics S_B (the same additive statistics as
batch VB) are scaled to the corpus, and q(Θ)'s parameters move part of the way:

    λ̂ = γ + (D / |B_t|) S_B,        λ ← (1 − ρ_t) λ + ρ_t λ̂,        ρ_t = (τ0 + t)^(−κ)

(Hoffman et al. 2010, eq. (6)–(7) and Algorithm 2; κ ∈ (0.5, 1] and τ0 ≥ 0 make Σρ_t = ∞, Σρ_t² < ∞, so
the iteration is a stochastic natural-gradient ascent on the ELBO that converges to a local optimum).

``theta_update="full"`` is that algorithm (q(θ_k) = Dirichlet(λ_k), documents see exp E[log θ]);
``"chapter"`` runs the same recursion on γ + S and lets documents see the point Θ = λ / Σ_j λ, the online
counterpart of batch VB's default.

:func:`partial_fit_state` is the one update (for an estimator's ``partial_fit``); :func:`fit_online_vb`
(``latentfs.fit(DirichletDCA(K), X, method="online_vb")``) streams an array's rows in mini-batches for
several passes, or an iterable of mini-batches once.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from latentfs.core.data import CountMatrix, DataError, as_counts, check_choice, check_float, check_int
from latentfs.core.driver import StreamEnd, chain_generators
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.core.relabel import component_labels
from latentfs.core.results import Posterior
from latentfs.core.streams import chunk_stream, is_batch_stream, row_batches
from latentfs.inference.dca.common import hyper_tensors, prepare, resolve_model
from latentfs.inference.dca.vb import converge_documents, documents_at_theta, init_topic_word, restart_shape
from latentfs.models.dca import DirichletDCA

_END = object()  # the end of the mini-batch stream

__all__ = ["OnlineVBState", "online_vb_init", "partial_fit_state", "fit_online_vb", "online_posterior"]

ONLINE_THETA_UPDATES = ("full", "chapter")


@dataclass(frozen=True)
class OnlineVBState:
    """Everything online VB carries from one mini-batch to the next.

    Attributes
    ----------
    model : DirichletDCA (with its data-dependent defaults filled)
    topic_word : Tensor (K, J) or None
        λ, the Dirichlet parameters of q(Θ) (γ + the running corpus-scaled statistics); None until the first
        batch (it is started with the batch's token count scaled to the corpus).
    n_updates : int
        t, the number of mini-batches seen.
    total_documents : int
        D, the corpus size the batch statistics are scaled to.
    tau0, kappa : float
        The step size ρ_t = (τ0 + t)^(−κ).
    theta_update : {"full", "chapter"}
    n_features : int
    seed : int or None
        Seeds λ's random start (drawn at the first batch).
    doc_max_iter, doc_tol : int, float
        Document updates per batch: until no shape moves by more than ``doc_tol`` relative, at most
        ``doc_max_iter``.
    dtype, device : where the batches are computed.
    trace : tuple of float
        Each batch's evidence lower bound per token (its documents' bounds at the Θ they were fitted with).
    """

    model: DirichletDCA
    topic_word: torch.Tensor | None
    n_updates: int
    total_documents: int
    tau0: float
    kappa: float
    theta_update: str
    n_features: int
    seed: int | None
    doc_max_iter: int
    doc_tol: float
    dtype: torch.dtype
    device: str
    trace: tuple[float, ...] = ()

    def step_size(self) -> float:
        """ρ_t = (τ0 + t)^(−κ) for the next batch."""
        return float((self.tau0 + self.n_updates) ** (-self.kappa))


def _check_online_model(model: Any) -> None:
    if not isinstance(model, DirichletDCA):
        raise DataError(f"model must be a DirichletDCA for online VB; got {type(model).__name__}. Use method='vb'.")
    if model.groups is not None:
        raise DataError("online VB has no grouped DirichletDCA (groups=…); fit it with method='vb'.")


def _check_online_options(
    model: Any, tau0: Any, kappa: Any, total_documents: Any, theta_update: Any, doc_max_iter: Any, doc_tol: Any
) -> None:
    _check_online_model(model)
    check_float("tau0", tau0, 0.0, remedy="τ0 ≥ 0 down-weights the first batches (Hoffman et al. 2010); try 4.0.")
    check_float(
        "kappa",
        kappa,
        0.5,
        1.0,
        low_open=True,
        remedy="κ in (0.5, 1] makes the step sizes (τ0 + t)^−κ converge (Hoffman et al. 2010); try 0.7.",
    )
    if total_documents is not None:
        check_int("total_documents", total_documents, low=1, remedy="Pass the number of documents in the corpus.")
    check_choice("theta_update", theta_update, ONLINE_THETA_UPDATES)
    check_int("doc_max_iter", doc_max_iter, low=1)
    check_float("doc_tol", doc_tol, 0.0, low_open=True)


def online_vb_init(
    model: DirichletDCA,
    n_features: int,
    *,
    total_documents: int,
    tau0: float = 4.0,
    kappa: float = 0.7,
    theta_update: str = "full",
    seed: int | None = None,
    doc_max_iter: int = 100,
    doc_tol: float = 1e-3,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> OnlineVBState:
    """The state before the first mini-batch (λ is drawn at the first batch, see :class:`OnlineVBState`).

    Examples
    --------
    >>> state = online_vb_init(DirichletDCA(2), 12, total_documents=100)
    >>> round(state.step_size(), 4)  # ρ_0 = (4 + 0)^−0.7
    0.3789
    """
    _check_online_options(model, tau0, kappa, total_documents, theta_update, doc_max_iter, doc_tol)
    check_int("total_documents", total_documents, low=1, remedy="Pass the number of documents in the corpus.")
    check_int("n_features", n_features, low=1)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise DataError(f"seed must be an integer or None for online VB; got {seed!r}.")
    return OnlineVBState(
        model=model,
        topic_word=None,
        n_updates=0,
        total_documents=int(total_documents),
        tau0=float(tau0),
        kappa=float(kappa),
        theta_update=theta_update,
        n_features=int(n_features),
        seed=None if seed is None else int(seed),
        doc_max_iter=int(doc_max_iter),
        doc_tol=float(doc_tol),
        dtype=dtype,
        device=str(device),
    )


def partial_fit_state(state: OnlineVBState, batch: Any) -> OnlineVBState:
    """One online VB update (module docstring) with the mini-batch ``batch``; returns the new state.

    Parameters
    ----------
    state : OnlineVBState
        From :func:`online_vb_init` or an earlier call.
    batch : count matrix (n_batch, J)
        Any input :func:`latentfs.core.data.as_counts` accepts; empty documents are dropped (they carry no
        evidence about Θ).
    """
    return _update(state, batch, None)


def _update(state: OnlineVBState, batch: Any, generator: torch.Generator | None) -> OnlineVBState:
    """:func:`partial_fit_state` with λ's random start (at the first batch) drawn from ``generator``, or, when None,
    from the generator :func:`~latentfs.core.driver.chain_generators` makes from ``state.seed`` on the state's
    device (the pipeline's start 0 generator, on that device)."""
    counts = _batch_counts(batch, state.n_features)
    data = prepare(counts, dtype=state.dtype, device=state.device)
    model = resolve_model(state.model, data)
    hyper = hyper_tensors(model, data)
    scale = state.total_documents / data.n_documents  # D / |B|
    lam = state.topic_word
    if lam is None:
        gen = generator if generator is not None else chain_generators(state.seed, 1, state.device)[0]
        # λ's start as in batch VB, with the batch's token count standing in for the corpus's
        tokens = data.doc_lengths.sum() * scale
        lam = init_topic_word(model, data.n_features, tokens, gen, "full", dtype=data.dtype, device=data.device)
    theta = lam if state.theta_update == "full" else lam / lam.sum(-1, keepdim=True)
    a0 = restart_shape(model, hyper["alpha"], data.doc_lengths)
    a, stats, doc_bounds = documents_at_theta(
        model, data, a0, theta, hyper, state.theta_update, max_iter=state.doc_max_iter, tol=state.doc_tol
    )
    bound = float(doc_bounds.sum() / data.doc_lengths.sum())
    rho = state.step_size()
    lam_hat = hyper["gamma"] + scale * stats  # Hoffman et al. (2010), Algorithm 2
    new = (1 - rho) * lam + rho * lam_hat
    assert isinstance(model, DirichletDCA)  # resolve_model keeps the class
    return replace(state, model=model, topic_word=new, n_updates=state.n_updates + 1, trace=(*state.trace, bound))


def _batch_counts(batch: Any, n_features: int) -> CountMatrix:
    with warnings.catch_warnings():
        from latentfs.core.data import DataWarning

        warnings.simplefilter("ignore", DataWarning)
        counts = as_counts(batch, name="batch", empty_documents="drop")
    if counts.n_features != n_features:
        raise DataError(
            f"batch must have the vocabulary the fit started with: {n_features} features; got {counts.n_features}. "
            "Map every mini-batch to one vocabulary (same columns, same order)."
        )
    return counts


def _tau0_option(name: str, value: Any) -> float:
    return float(
        check_float(name, value, 0.0, remedy="τ0 ≥ 0 down-weights the first batches (Hoffman et al. 2010); try 4.0.")
    )


def _kappa_option(name: str, value: Any) -> float:
    return float(
        check_float(
            name,
            value,
            0.5,
            1.0,
            low_open=True,
            remedy="κ in (0.5, 1] makes the step sizes (τ0 + t)^−κ converge (Hoffman et al. 2010); try 0.7.",
        )
    )


def _total_documents_option(name: str, value: Any) -> int | None:
    if value is None:
        return None
    return int(check_int(name, value, low=1, remedy="Pass the number of documents in the corpus."))


def _shuffle_option(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise DataError(f"{name} must be True or False; got {value!r}.")
    return value


def _int_option(name: str, value: Any) -> int:
    return int(check_int(name, value, low=1))


def _positive_option(name: str, value: Any) -> float:
    return float(check_float(name, value, 0.0, low_open=True))


@dataclass
class OnlinePrep:
    """What :meth:`DCAOnlineVB.prepare` makes of the input: the stream of mini-batches and what the start needs."""

    model: DirichletDCA
    batches: Iterator[Any]
    n_batches: int | None  # the stream's length; None for an iterator (its end ends the run)
    n_features: int
    total_documents: int
    counts: CountMatrix | None  # the corpus, for a matrix X (its documents' shapes at the final Θ)
    sharded: Any = None  # a dask array X's row chunks (online_dask.ShardedRows): the batches are then row numbers


class DCAOnlineVB(EngineSpec):
    """DirichletDCA by online VB (``latentfs.fit(DirichletDCA(K), X, method="online_vb", ...)``): a spec run by the
    one pipeline, one step per mini-batch (:func:`partial_fit_state`), the run as long as the stream.

    Parameters
    ----------
    X : count matrix (D, J), or an iterable of mini-batches
        A matrix (anything :func:`latentfs.core.data.as_counts` accepts, or a dask array, see Notes) is
        streamed in mini-batches of ``batch_size`` rows for ``n_passes`` passes, in a new random order each
        pass when ``shuffle``. An iterator (or a list of 2-D matrices) is taken as the mini-batches
        themselves, in order; an iterator is read once.
    batch_size : int
        Rows per mini-batch when ``X`` is a matrix.
    n_passes : int
        Passes over a matrix or a list of batches (an iterator allows 1).
    tau0, kappa : float
        Step sizes ρ_t = (τ0 + t)^(−κ), τ0 ≥ 0, κ ∈ (0.5, 1] (Hoffman et al. 2010). With τ0 = 1 the first
        batch's statistics would replace the random start entirely (ρ_0 = 1) and the next ones nearly so; the
        default τ0 = 4 (ρ_0 = 0.38) was chosen by measurement: after one pass it was best of τ0 ∈ {1, 2, 4, 8,
        16, 64, 256} on three simulated corpus shapes, two seeds each, and above gensim's one-pass held-out on
        all three, where τ0 = 1 was below it on all three (``benchmarks/dca_online_schedule.py``).
    total_documents : int, optional
        D, to which each batch's statistics are scaled (``× D/|B|``); by default the number of rows of a
        matrix or of a list of batches; required for an iterator.
    theta_update : {"full", "chapter"}
        Module docstring.
    shuffle, seed : the order of the rows in each pass and λ's random start.
    doc_max_iter, doc_tol : document updates per batch (:class:`OnlineVBState`).
    dtype, device : see :func:`latentfs.fit`.
    empty_documents : {"drop", "error", "keep"}
        Only for an in-memory matrix ``X``; empty documents in mini-batches (and in a dask array) are dropped.
    persist : bool
        Dask input only: keep every validated row chunk where it was computed (on a worker under a distributed
        Client) for the whole fit; ``False`` reads and validates a chunk again for every mini-batch that
        draws rows from it (memory bounded by the chunks in flight, at that cost).

    Notes
    -----
    ``X`` may be a ``dask.array.Array`` whose row chunks (dense or scipy.sparse blocks, one column chunk)
    are the shards (``pip install "latentfs[dask]"``); the engine then always runs as shard tasks, on the
    active scheduler (a ``dask.distributed.Client`` if one exists, else dask's default): each row chunk is
    validated once inside its own task and kept there (``persist``), and each mini-batch's rows are cut at the
    chunk boundaries into one task per piece, which fits the piece's documents where the chunk lies (each
    document stopping as soon as its own shapes have converged) and returns only its Θ statistics on its
    words and its bound; the driver adds them in chunk order and takes the λ step
    (:mod:`latentfs.inference.dca.online_dask`). The mini-batches are the rows an in-memory fit of the same
    matrix draws for the same seed, and the result equals that fit up to the order of floating-point sums,
    whatever the number of workers, when the matrix has no empty rows. A dask array's empty rows are dropped from
    each mini-batch, not before batching (that would take a pass over the data), and count in the corpus size D,
    while an in-memory fit drops them first: with empty rows the batches, and so the fits, differ (by 0.014 in
    Θ on a 700-document test corpus with one empty row). The result has no document site (only q(Θ)).

    Returns
    -------
    Posterior
        ``topic_word``: Dirichlet(λ). For a matrix ``X``, the document site Dirichlet(a) with each
        document's shapes converged at the final Θ; a stream of batches has no document site. ``trace``
        holds each batch's bound per token (noisy: each is a different batch), ``extras["n_updates"]`` t;
        ``diagnostics["converged"]`` is None (the run is as long as the stream: it has no stopping rule).
    """

    takes_dask = True  # fits a dask array shard by shard

    method = "online_vb"
    kind = "optimizer"
    desc = "online VB"
    options = {
        "batch_size": Option(256, _int_option, "int ≥ 1", "rows per mini-batch when X is a matrix"),
        "n_passes": Option(1, _int_option, "int ≥ 1", "passes over a matrix or a list of mini-batches"),
        "tau0": Option(4.0, _tau0_option, "float ≥ 0", "τ0 of the step size ρ_t = (τ0 + t)^(−κ)"),
        "kappa": Option(0.7, _kappa_option, "float in (0.5, 1]", "κ of the step size ρ_t = (τ0 + t)^(−κ)"),
        "total_documents": Option(
            None,
            _total_documents_option,
            "int ≥ 1 or None",
            "D, the corpus size each batch is scaled to (required for an iterator)",
        ),
        "theta_update": Option(
            "full",
            lambda n, v: check_choice(n, v, ONLINE_THETA_UPDATES),
            "str",
            "'full' (q(θ_k) = Dirichlet(λ_k)) or 'chapter' (documents see Θ = λ / Σ λ)",
        ),
        "shuffle": Option(True, _shuffle_option, "bool", "a new random order of a matrix's rows each pass"),
        "seed": shared("seed"),
        "doc_max_iter": Option(100, _int_option, "int ≥ 1", "the most document updates per batch"),
        "doc_tol": Option(1e-3, _positive_option, "float > 0", "document updates stop at this relative change"),
        "dtype": shared("dtype"),
        "device": shared("device"),
        "empty_documents": shared("empty_documents", "drop"),
        "persist": Option(
            True, _shuffle_option, "bool", "dask input: keep every validated row chunk where it was computed"
        ),
        "progress": shared("progress"),
        "callback": shared("callback", meaning="called as callback(batch, state, bound) after every mini-batch"),
    }

    def prepare(self, model: Any, X: Any, o: Options) -> OnlinePrep:
        from latentfs.core.shards import is_dask_array

        _check_online_model(model)
        total = o.total_documents
        counts: CountMatrix | None = None
        batches: Iterable[Any]
        if is_batch_stream(X):
            if total is None:
                if isinstance(X, Iterator):
                    raise DataError(
                        "total_documents is required when X is an iterator of mini-batches: each batch's statistics "
                        "are scaled by total_documents / batch rows. Pass the corpus size, e.g. "
                        "total_documents=100000."
                    )
                total = int(sum(int(b.shape[0]) for b in X))
            n_batches = None if isinstance(X, Iterator) else len(X) * o.n_passes
            first, batches = chunk_stream(X, o.n_passes, what="mini-batches")
            n_features = int(first.shape[1])
        elif is_dask_array(X):
            from latentfs.inference.dca.online_dask import shard_rows

            sharded = shard_rows(X, o.persist)  # the chunks, validated where they lie (see Notes)
            n_features, n_rows = int(X.shape[1]), int(X.shape[0])
            total = total or n_rows
            n_batches = o.n_passes * -(-n_rows // o.batch_size)
            # each mini-batch is a set of row numbers; its documents are updated where their chunks lie
            batches = row_batches(n_rows, o.batch_size, o.n_passes, o.shuffle, o.seed, lambda rows: rows)
            return OnlinePrep(model, iter(batches), n_batches, n_features, int(total), None, sharded)
        else:
            counts = as_counts(X, empty_documents=o.empty_documents)
            n_features = counts.n_features
            total = total or counts.n_documents
            csr = counts.csr
            n_batches = o.n_passes * -(-counts.n_documents // o.batch_size)
            batches = row_batches(
                counts.n_documents, o.batch_size, o.n_passes, o.shuffle, o.seed, lambda rows: csr[rows]
            )
        return OnlinePrep(model, iter(batches), n_batches, n_features, int(total), counts)

    def n_starts(self, prep: OnlinePrep, o: Options) -> int:
        return 1  # one pass over a stream: there is no second start to compare

    def max_iter(self, prep: OnlinePrep, o: Options) -> int | None:
        return prep.n_batches  # one step per mini-batch; None: the iterator's end ends the run

    def stop_tol(self, prep: OnlinePrep, o: Options) -> float | None:
        return None  # no stopping rule: each objective is another batch's bound

    def start(self, prep: OnlinePrep, o: Options, gen: torch.Generator, index: int) -> Any:
        state = online_vb_init(
            prep.model,
            prep.n_features,
            total_documents=prep.total_documents,
            tau0=o.tau0,
            kappa=o.kappa,
            theta_update=o.theta_update,
            seed=o.seed,
            doc_max_iter=o.doc_max_iter,
            doc_tol=o.doc_tol,
            dtype=o.dtype,
            device=o.device,
        )
        # λ is drawn at the first batch on the fit's device, from this start's seed (so a GPU fit draws its start
        # from the CUDA generator of that seed, as partial_fit_state does)
        device_gen = gen if o.device.type == "cpu" else torch.Generator(o.device).manual_seed(gen.initial_seed())
        return state, device_gen

    def step(self, prep: OnlinePrep, o: Options, state: Any) -> tuple[Any, float]:
        online, gen = state
        batch = next(prep.batches, _END)
        if batch is _END:  # the stream has ended: so does the run
            raise StreamEnd
        if prep.sharded is not None:
            from latentfs.inference.dca.online_dask import sharded_update

            new = sharded_update(online, prep.sharded, np.asarray(batch), gen)
        else:
            new = _update(online, batch, gen)
        return (new, gen), new.trace[-1]  # the batch's bound at the Θ it was fitted with (the state passed in)

    def report(self, o: Options) -> Any:
        callback = o.callback  # the state handed on is the online state, without the run's device generator
        return None if callback is None else (lambda it, state, value: callback(it, state[0], value))

    def export(self, prep: OnlinePrep, o: Options, outcome: Any) -> Export:
        online = outcome.run.state[0]
        dims, coords, fitted, extras, diagnostics = _online_sites(online, prep.counts)
        if prep.sharded is not None:
            diagnostics["shards"] = len(prep.sharded.chunks)
        return Export(dims=dims, coords=coords, fitted=fitted, extras=extras, diagnostics=diagnostics)

    def finalize(self, post: Any, prep: OnlinePrep, o: Options, outcome: Any) -> None:
        post.hyperparameters = dict(outcome.run.state[0].model.hyperparameters())  # the data-dependent defaults


#: the spec, callable as ``fit_online_vb(model, X, **options)`` (the pipeline runs it)
fit_online_vb = register_spec(DCAOnlineVB(), DirichletDCA)


def online_posterior(state: OnlineVBState, counts: CountMatrix | None = None) -> Posterior:
    """The Posterior of an online VB state: q(Θ) = Dirichlet(λ), and, given the corpus ``counts``, each
    document's q(m) = Dirichlet(a) with its shapes converged at the final Θ."""
    if state.topic_word is None:
        raise DataError("state has seen no mini-batch yet; call partial_fit_state(state, batch) first.")
    dims, coords, fitted, extras, diagnostics = _online_sites(state, counts)
    return Posterior(
        model=type(state.model).__name__,
        method="online_vb",
        dims=dims,
        coords=coords,
        trace=np.asarray(state.trace),
        fitted=fitted,
        diagnostics={"converged": None, "n_iter": state.n_updates, **diagnostics},
        extras=extras,
        hyperparameters=state.model.hyperparameters(),
    )


def _online_sites(
    state: OnlineVBState, counts: CountMatrix | None
) -> tuple[dict[str, tuple[str, ...]], dict[str, list[str]], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The result of an online VB state: dims, coords, fitted sites, extras and the engine's diagnostics."""
    if state.topic_word is None:
        raise DataError("state has seen no mini-batch yet; call partial_fit_state(state, batch) first.")
    model = state.model
    lam = state.topic_word
    to_np = lambda t: t.detach().cpu().numpy().astype(np.float64)  # noqa: E731
    K = model.n_components
    dims: dict[str, tuple[str, ...]] = {"topic_word": ("component", "feature")}
    coords: dict[str, list[str]] = {
        "component": component_labels(K),
        "feature": [f"w{j}" for j in range(state.n_features)],
    }
    fitted: dict[str, Any] = {"topic_word": {"family": "dirichlet", "concentration": to_np(lam)}}
    extras: dict[str, Any] = {"n_updates": state.n_updates, "bound_trace": np.asarray(state.trace)}
    if counts is not None:
        coords["feature"] = list(counts.feature_names)
        data = prepare(counts, dtype=state.dtype, device=state.device)
        hyper = hyper_tensors(model, data)
        theta = lam if state.theta_update == "full" else lam / lam.sum(-1, keepdim=True)
        a = converge_documents(
            model,
            data,
            restart_shape(model, hyper["alpha"], data.doc_lengths),
            theta,
            hyper,
            state.theta_update,
            max_iter=state.doc_max_iter,
            tol=state.doc_tol,
        )
        dims[model.doc_site] = ("document", "component")
        coords["document"] = list(counts.document_names)
        fitted[model.doc_site] = {"family": "dirichlet", "concentration": to_np(a)}
        extras["component_counts"] = to_np(a - hyper["alpha"])
        extras["kept_documents"] = counts.kept_documents
        extras["doc_lengths"] = counts.doc_lengths
    diagnostics = {
        "theta_update": state.theta_update,
        "tau0": state.tau0,
        "kappa": state.kappa,
        "total_documents": state.total_documents,
        "observation_dim": "document",
    }
    return dims, coords, fitted, extras, diagnostics
