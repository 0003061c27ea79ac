"""PLSA by EM and tempered EM, with early stopping on validation likelihood and fold-in.

Monay, Quelhas, Gatica-Perez & Odobez (2006), eq. (2)–(4): the E-step P(z | d, x) ∝ P(x | z) P(z | d) and
the M-steps P(x | z) ∝ Σ_d n(d, x) P(z | d, x), P(z | d) = Σ_x n(d, x) P(z | d, x) / n(d), both from the
same E-step, vectorised over the sparse non-zeros exactly as DirichletDCA's PLSI engine
(:func:`latentfs.inference.dca.em.plsi_step`). P(d) = n(d)/Σ n(d) in closed form.

Two controls from the papers:

* **Early stopping** (Monay et al.): after each EM iteration the validation documents are folded in
  (P(x | z) fixed, see :func:`fold_in`) and scored; the iterate with the best validation score is
  kept and the fit stops after ``patience`` iterations without improvement. Validation documents never
  enter P(x | z).
* **Tempered EM** (Hofmann 2001, §4.2): the E-step uses [P(z | d) P(x | z)]^β. β starts at 1; when the
  validation score stops improving, β ← η β and EM continues from the best iterate; the fit ends when
  lowering β brings no further improvement (or β would fall below ``beta_min``).

The validation score is the per-token log-likelihood of document completion
(:mod:`latentfs.evaluate.heldout`'s one definition): each validation document's tokens are split in
two, P(z | d) is folded in on one half and the other half is scored. ``validation_score="fold_in"``
instead scores the same tokens that were folded in (Hofmann's original protocol; optimistic).
Held-out tokens of words never seen in training have probability 0 under PLSA; they are left out of
the validation score and counted in ``diagnostics["unseen_validation_tokens"]``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from latentfs.core.backends import ShardSet, shard_data
from latentfs.core.data import CountMatrix, DataError, as_counts, as_rng, check_choice
from latentfs.core.driver import OptimizerRun
from latentfs.core.options import check_flag, check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.core.relabel import component_labels
from latentfs.core.results import Posterior
from latentfs.inference.dca.common import DCAData, prepare
from latentfs.inference.dca.em import PointState, theta_simplex
from latentfs.inference.plsa.steps import (
    prepare_shard,
    shard_em_step,
    shard_final,
    shard_loglik,
    shard_summary,
    uniform_doc_topic,
)
from latentfs.inference.plsa.validation import _TINY, _EarlyStopper, _fold_in_data, _make_validation
from latentfs.models.plsa import PLSA

__all__ = ["PLSAEM", "PLSAPrep", "PLSAState", "fit_plsa", "fold_in", "plsa_loglik"]

VALIDATION_SCORES = ("completion", "fold_in")


def plsa_loglik(data: DCAData, state: PointState) -> tuple[float, float]:
    """(L, L_cond): L = Σ_i n(d_i) log P(d_i) + L_cond, L_cond = Σ_ij n(d_i, x_j) log P(x_j | d_i) (Monay §2)."""
    rates = data.rates_at_nonzeros(state.doc_latent, state.topic_word).clamp_min(_TINY)
    cond = float((data.values * torch.log(rates)).sum())
    n = data.doc_lengths
    return float((n * torch.log(n / n.sum())).sum()) + cond, cond


def _topic_word_of(source: Any) -> np.ndarray:
    if hasattr(source, "fold_in_iter"):  # a PLSATransformer (plsa/transformer.py imports this module)
        if not hasattr(source, "components_"):
            raise DataError("the PLSATransformer is not fitted yet; call fit(X) before transform or fold_in.")
        return np.asarray(source.components_)
    if isinstance(source, Posterior):
        return source.mean("topic_word")
    tw = np.asarray(source, dtype=np.float64)
    if tw.ndim != 2 or (tw < 0).any() or not np.isfinite(tw).all() or (tw.sum(1) <= 0).any():
        raise DataError(
            "topic_word must be a fitted result or a (n_components, n_features) array of non-negative rows with "
            f"positive sums; got an array of shape {tw.shape}. Pass result or result.mean('topic_word')."
        )
    return tw / tw.sum(1, keepdims=True)


def fold_in(
    topic_word: Any,
    X: Any,
    *,
    max_iter: int = 100,
    tol: float = 1e-8,
    init: np.ndarray | None = None,
) -> np.ndarray:
    """P(z | d_new) for new documents with P(x | z) fixed: EM on eq. (2) and (4) only (Hofmann 2001).

    Parameters
    ----------
    topic_word : Posterior, PLSATransformer or array (K, J)
        P(x | z) (rows are normalised here).
    X : count matrix (n_documents, J)
        New documents. Tokens of words that no aspect emits (P(x | z) = 0 for all z, i.e. unseen in
        training) are ignored; documents with no other token keep the start (uniform by default).
    max_iter, tol : EM iterations, stopping early when no entry of P(z | d) changes by more than ``tol``.
    init : array (n_documents, K), optional
        Starting P(z | d) (default uniform). A fitted document's own P(z | d) is a fixed point.

    Examples
    --------
    >>> theta = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]])
    >>> fold_in(theta, np.array([[3, 1, 0, 0], [1, 0, 2, 1]])).round(3).tolist()
    [[1.0, 0.0], [0.25, 0.75]]
    """
    tw = _topic_word_of(topic_word)
    K, J = tw.shape
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise DataError(f"max_iter must be an integer ≥ 1; got {max_iter!r}.")
    counts = as_counts(X, name="X", empty_documents="keep")  # empty documents keep the uniform P(z|d)
    if counts.n_features != J:
        raise DataError(f"X must have {J} features (as topic_word); got {counts.n_features}.")
    total = counts.n_documents
    start = np.full((total, K), 1.0 / K)
    if init is not None:
        start = np.asarray(init, dtype=np.float64)
        if start.shape != (total, K) or (start < 0).any() or not np.isfinite(start).all():
            raise DataError(
                f"init must be a non-negative array of shape {(total, K)} (one P(z|d) row per document); got "
                f"shape {start.shape}."
            )
        start = start / np.maximum(start.sum(1, keepdims=True), _TINY)
    if counts.csr.nnz == 0:
        return start
    data = prepare(counts)
    m = _fold_in_data(data, torch.as_tensor(tw), torch.as_tensor(start), int(max_iter), float(tol))
    return m.numpy()


def _check_unit(name: str, v: Any, *, closed_high: bool) -> float:
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and 0 < v and (v <= 1 if closed_high else v < 1)
    if not ok:
        interval = "(0, 1]" if closed_high else "(0, 1)"
        raise DataError(f"{name} must be a number in {interval}; got {v!r}.")
    return float(v)


@dataclass
class _Track:
    """What one start's run carries besides its state: its early stopper and its iteration count."""

    stopper: _EarlyStopper | None
    it: int = 0


@dataclass(frozen=True)
class PLSAState:
    """One start's PLSA iterate: P(x | z) on the driver and each shard's P(z | d), kept with its shard.

    ``doc_topic`` is the back-end's list of per-shard states (:meth:`ShardSet.estep`): in memory one tensor
    (n_documents, K), on dask one persisted object per row chunk. ``topic_word`` is (K, J), rows on the simplex.
    """

    doc_topic: list[Any]
    topic_word: torch.Tensor


@dataclass
class PLSAPrep:
    """What a PLSA fit needs from its data, on any back-end (module docstring of
    :mod:`~latentfs.inference.plsa.steps`): the shards, Σ_d n(d) log P(d), the document lengths and the words seen
    in training; it gives the r-th start, one EM step at a given β (the new state and L at the input), L at a
    state, a fresh early stopper per start (None without validation) and the final per-document quantities."""

    model: PLSA
    options: Options
    tempered: bool
    needs_validation: bool
    shards: ShardSet
    X_valid: Any
    lengths: np.ndarray  # (n_documents,) float64, n(d)
    seen: np.ndarray  # (J,) bool, words that occur in training
    doc_term: float  # Σ_d n(d) log P(d), P(d) = n(d) / Σ n(d)

    @property
    def n_features(self) -> int:
        return int(self.seen.size)

    def start_state(self, gen: torch.Generator, r: int) -> PLSAState:
        o, ss, K = self.options, self.shards, self.model.n_components
        if ss.is_local and r == 0 and o.init is not None:  # a warm start: in memory only
            given = _plsa_init(o.init, ss.local, K, gen)
            return PLSAState([given.doc_latent], given.topic_word)
        # P(x | z) depends on J only, so a sharded fit starts where the in-memory one does
        return PLSAState(ss.start(uniform_doc_topic, K),
                         random_topic_word(K, self.n_features, gen, dtype=o.dtype, device=o.device))

    def inner_step(self, s: PLSAState, beta: float) -> tuple[PLSAState, float]:
        (counts, cond), kept, _ = self.shards.estep(shard_em_step, s.topic_word, beta, state=s.doc_topic, n_sum=2,
                                                    keep=True)
        assert kept is not None  # keep=True
        theta = theta_simplex(torch.as_tensor(counts, dtype=self.options.dtype, device=self.options.device))
        return PLSAState(kept, theta), self.doc_term + float(cond)

    def objective_at(self, s: PLSAState) -> float:
        return self.doc_term + float(np.sum(self.shards.summaries(shard_loglik, s.topic_word, state=s.doc_topic)))

    def make_stopper(self) -> _EarlyStopper | None:
        if not self.needs_validation:
            return None
        o = self.options
        # the same validation split for every restart, so their scores compare
        validation = _make_validation(self.X_valid, self.n_features, self.seen, self.model.n_components,
                                      o.validation_score, 0, o.dtype, o.device)
        return _EarlyStopper(validation, o.patience, self.tempered, o.beta_decay, o.beta_min, o.fold_in_iter)

    def result_parts(self, s: PLSAState) -> dict[str, Any]:
        ss = self.shards
        (cond,), _, gathered = ss.estep(shard_final, s.topic_word, state=s.doc_topic, gather=True)
        assert gathered is not None  # gather=True
        cond = float(cond)
        if ss.is_local:  # the names and kept rows of an in-memory X
            counts = ss.local.counts
            kept, doc_names, feature_names = counts.kept_documents, counts.document_names, counts.feature_names
        else:
            n_docs = int(self.lengths.size)
            kept, doc_names = np.arange(n_docs), [f"doc{i}" for i in range(n_docs)]
            feature_names = [f"w{j}" for j in range(self.n_features)]
        return {"topic_word": s.topic_word.detach().cpu().numpy().astype(np.float64),
                "doc_topic": np.concatenate([g[0] for g in gathered]), "doc_lengths": self.lengths,
                "kept_documents": kept, "document_names": list(doc_names), "feature_names": list(feature_names),
                "loglik": self.doc_term + cond, "cond": cond, "per_doc": np.concatenate([g[1] for g in gathered])}


def _unit(closed_high: bool) -> Callable[[str, Any], float]:
    return lambda name, v: _check_unit(name, v, closed_high=closed_high)


def _persist(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise DataError(f"{name} must be True or False; got {value!r}.")
    return value


def _split_validation(counts: CountMatrix, o: Options) -> tuple[CountMatrix, Any]:
    """In memory: (training documents, X_valid), holding out ``validation_fraction`` of X's documents (chosen with
    ``seed``) when it is given."""
    if o.validation_fraction is None:
        return counts, o.X_valid
    frac = o.validation_fraction
    order = as_rng(o.seed).permutation(counts.n_documents)
    n_valid = int(round(frac * counts.n_documents))
    if n_valid < 1 or n_valid >= counts.n_documents:
        raise DataError(
            f"validation_fraction={frac} leaves {n_valid} validation documents of {counts.n_documents}; "
            "choose a fraction that keeps at least one document on each side."
        )
    train_rows = np.sort(order[n_valid:])
    train = as_counts(counts.csr[train_rows], document_names=[counts.document_names[i] for i in train_rows],
                      feature_names=counts.feature_names)
    return train, counts.csr[np.sort(order[:n_valid])]


def _refuse_for_dask(o: Options) -> None:
    """What a dask array X cannot do: hold out a fraction of its documents, validate on a dask array, warm start."""
    from latentfs.core.shards import is_dask_array

    if o.validation_fraction is not None:
        raise DataError(
            f"validation_fraction is not available for a dask array X (got {o.validation_fraction!r}): holding out "
            "a random fraction of its documents would gather them on the driver. Pass the held-out documents "
            "as an in-memory count matrix, X_valid=…, or split the dask array before fitting."
        )
    if is_dask_array(o.X_valid):
        raise DataError(
            "X_valid must be an in-memory count matrix (numpy or scipy.sparse) for a dask array X; got a dask "
            "array. Validation documents are folded in on the driver: pass X_valid.compute() (a sample)."
        )
    if o.init is not None:
        raise DataError(
            f"init is not available for a dask array X; got {type(o.init).__name__}. Omit init (fit from seed)."
        )


def _prepare(model: PLSA, X: Any, o: Options, tempered: bool) -> PLSAPrep:
    """The data side of a PLSA fit on the pipeline's back-end: X's shards (one in memory, its row chunks for a dask
    array) prepared once; the document lengths and the words seen in training from one pass over them."""
    from latentfs.core.shards import is_dask_array

    sharded = is_dask_array(X)
    if sharded:
        _refuse_for_dask(o)
        rows, X_valid = X, o.X_valid
    else:
        rows, X_valid = _split_validation(as_counts(X, name="X"), o)
    needs_validation = tempered or o.early_stopping
    if needs_validation and X_valid is None:
        where = ("(in memory: validation_fraction is not available for a dask array X)" if sharded
                 else "or validation_fraction=…")
        raise DataError(f"early_stopping and tempered EM need validation documents; pass X_valid=… {where}.")
    ss = shard_data(rows, prepare_shard, o.dtype, o.device, persist=bool(o.persist))
    summaries = ss.summaries(shard_summary)
    lengths = np.concatenate([s[0] for s in summaries])
    seen = np.sum([s[1] for s in summaries], axis=0) > 0
    K, n_docs, J = model.n_components, int(lengths.size), int(seen.size)
    if K > min(n_docs, J):
        raise DataError(
            f"n_components must be at most {min(n_docs, J)} (the smaller of the numbers of documents and features); "
            f"got {K}. Choose fewer aspects."
        )
    n = torch.as_tensor(lengths, dtype=o.dtype, device=o.device)
    doc_term = float((n * torch.log(n / n.sum())).sum())  # as plsa_loglik
    return PLSAPrep(model, o, tempered, needs_validation, ss, X_valid, lengths, seen, doc_term)


class PLSAEM(EngineSpec):
    """PLSA by EM (``method="em"``) or tempered EM (``method="tem"``): one spec (module docstring).

    Parameters
    ----------
    tempered : bool
        Hofmann's tempered EM (``method="tem"`` sets it); needs validation documents.
    early_stopping : bool
        Keep the iterate with the best validation score and stop after ``patience`` iterations without
        improvement (Monay et al.); needs validation documents.
    X_valid : count matrix, optional
        Validation documents (same vocabulary). Alternatively ``validation_fraction``.
    validation_fraction : float in (0, 1), optional
        Hold out this fraction of X's documents (chosen with ``seed``) as validation documents.
    validation_score : {"completion", "fold_in"}
        How validation documents are scored (module docstring).
    patience : int
        Iterations without improvement before stopping (or lowering β).
    beta_decay, beta_min : η < 1 and the smallest β of tempered EM.
    fold_in_iter : int
        Fold-in iterations per EM iteration for the validation documents (warm-started).
    max_iter, tol, n_init, init, seed, dtype, device, progress, warn
        As for the DCA engines; ``init`` is (P(z | d), P(x | z)), the first start's; start r draws its random
        P(x | z) from the r-th generator spawned from ``seed``.
    persist : bool
        Dask input only (see Notes): keep every validated shard in memory where it was first computed (on a
        worker under a distributed Client) instead of reading and validating it again at every iteration.

    Notes
    -----
    The fit runs on the pipeline's data back-end (:mod:`latentfs.core.backends`): the documents are shards, and
    every EM iteration runs one per-shard step (:func:`~latentfs.inference.plsa.steps.shard_em_step`: the
    E-step and the P(z | d) update) and sums the shards' word–aspect counts Σ_d n(d, x) P(z | d, x) (K × J)
    and log-likelihoods; the driver normalises the counts into P(x | z) and runs the validation. In memory
    the data are one shard and the step is called directly. ``X`` may also be a ``dask.array.Array`` of
    counts whose row chunks (dense or scipy.sparse blocks, one column chunk) are the shards (needs
    ``pip install "latentfs[dask]"``): the step is one task per shard on the active scheduler (a
    ``dask.distributed.Client`` if one exists), each shard's P(z | d) stays with it and only the K × J counts
    and the log-likelihood come to the driver. Each shard is validated inside its task. P(x | z) starts as in
    memory (it depends on J only), so the result equals the in-memory fit for the same seed up to summation
    order (bit for bit with one row chunk). Tempered EM and early stopping work with an in-memory
    ``X_valid``; not with dask input: ``validation_fraction`` (the split would gather documents on the
    driver), a dask ``X_valid``, and ``init``. The fitted P(z | d) (n_documents × K) and per-document
    log-likelihoods are gathered at the end, as for DCA VB.

    Returns
    -------
    Posterior
        Point sites ``topic_word`` (P(x | z)) and ``doc_topic`` (P(z | d)); ``extras["doc_prior"]`` is P(d);
        ``trace`` is the log-likelihood L (Monay §2); ``extras["validation_trace"]`` and
        ``extras["beta_trace"]`` the validation score and β per iteration; ``diagnostics`` has
        ``best_iter`` and ``stopped_early``.

    Examples
    --------
    >>> import latentfs
    >>> X = PLSA(2).simulate(30, 15, doc_length=40, seed=0)["counts"]
    >>> result = latentfs.fit(PLSA(2), X, method="em", seed=0, warn=False)
    >>> bool((np.diff(result.trace[0]) >= -1e-9).all())
    True
    """

    takes_dask = True  # fits a dask array shard by shard

    kind = "optimizer"
    remedies = "raise max_iter, loosen tol, or use n_init > 1"
    options = {
        "tempered": Option(False, lambda n, v: bool(check_flag(n, v)), "bool", "Hofmann's tempered EM"),
        "early_stopping": Option(False, lambda n, v: bool(check_flag(n, v)), "bool",
                                 "keep the iterate with the best validation score"),
        "X_valid": Option(None, None, "count matrix or None", "validation documents (same vocabulary)"),
        "validation_fraction": Option(None, lambda n, v: None if v is None else _check_unit(n, v, closed_high=False),
                                      "float in (0, 1) or None", "hold out this fraction of X's documents"),
        "validation_score": Option("completion", lambda n, v: check_choice(n, v, VALIDATION_SCORES), "str",
                                   "how validation documents are scored: 'completion' or 'fold_in'"),
        "patience": Option(5, lambda n, v: check_int(n, v, low=1), "int ≥ 1",
                           "iterations without improvement before stopping (or lowering β)"),
        "beta_decay": Option(0.9, _unit(False), "float in (0, 1)", "η: β ← η β when tempered EM stalls"),
        "beta_min": Option(0.5, _unit(True), "float in (0, 1]", "the smallest β of tempered EM"),
        "fold_in_iter": Option(20, lambda n, v: check_int(n, v, low=1), "int ≥ 1",
                               "fold-in iterations per EM iteration for the validation documents"),
        "max_iter": shared("max_iter", 500),
        "tol": shared("tol", 1e-7),
        "n_init": Option(1, lambda n, v: check_int(n, v, low=1, remedy=f"Pass e.g. {n}=5."), "int ≥ 1",
                         "starts; the best by validation score (or log-likelihood) is kept"),
        "init": Option(None, None, "(doc_topic, topic_word) or None", "the first start's P(z | d) and P(x | z)"),
        "seed": shared("seed"),
        "dtype": shared("dtype"),
        "device": shared("device"),
        "progress": shared("progress"),
        "warn": shared("warn"),
        "persist": Option(True, _persist, "bool", "dask input: keep every validated shard where it was computed"),
    }

    def __init__(self, method: str) -> None:
        self.method = method
        self.desc = "PLSA " + ("TEM" if method == "tem" else "EM")
        if method == "tem":  # tempered by definition: tempered=False is refused in prepare
            self.options = {**PLSAEM.options, "tempered": replace(PLSAEM.options["tempered"], default=True)}

    def prepare(self, model: Any, X: Any, o: Options) -> PLSAPrep:
        tempered = bool(o.tempered)
        if self.method == "tem" and not tempered:
            raise DataError("method='tem' is tempered EM; drop tempered=False or use method='em'.")
        if o.X_valid is not None and o.validation_fraction is not None:
            raise DataError("pass either X_valid or validation_fraction, not both.")
        return _prepare(model, X, o, tempered)

    def n_starts(self, prep: PLSAPrep, o: Options) -> int:
        return int(o.n_init)

    def start(self, prep: PLSAPrep, o: Options, gen: torch.Generator, index: int) -> Any:
        return prep.start_state(gen, index), _Track(prep.make_stopper())

    def step(self, prep: PLSAPrep, o: Options, state: Any) -> tuple[Any, float]:
        inner, track = state
        stopper = track.stopper
        if stopper is not None and stopper.stopped:
            return state, prep.objective_at(inner)  # identity: the driver sees no change and stops
        new, objective = prep.inner_step(inner, stopper.beta if stopper is not None else 1.0)
        if stopper is not None:
            new = stopper.after(track.it, new)
        track.it += 1
        return (new, track), objective

    def finish(self, prep: PLSAPrep, o: Options, state: Any) -> Any:
        inner, track = state
        if track.stopper is not None and track.stopper.best_state is not None:
            return track.stopper.best_state, track  # the best iterate by validation
        return state

    def score(self, prep: PLSAPrep, o: Options, run: OptimizerRun) -> float:
        stopper = run.state[1].stopper
        return float(stopper.best_score) if stopper is not None else run.objective

    def stop_tol(self, prep: PLSAPrep, o: Options) -> float:
        return 0.0 if prep.needs_validation else float(o.tol)

    def warn_unconverged(self, prep: PLSAPrep, o: Options) -> bool:
        return bool(o.warn) and not prep.needs_validation

    def export(self, prep: PLSAPrep, o: Options, outcome: Any) -> Export:
        run = outcome.run
        inner, track = run.state
        stopper: _EarlyStopper | None = track.stopper
        if o.warn and stopper is not None and not stopper.stopped and not run.interrupted:
            from latentfs.core.driver import ConvergenceWarning

            warnings.warn(
                f"PLSA early stopping did not trigger in {o.max_iter} iterations; raise max_iter or lower patience.",
                ConvergenceWarning, stacklevel=4,
            )
        parts = prep.result_parts(inner)
        lengths = np.asarray(parts["doc_lengths"], dtype=np.float64)
        doc_topic = parts["doc_topic"]
        extras: dict[str, Any] = {
            "doc_prior": lengths / lengths.sum(),
            "doc_lengths": parts["doc_lengths"],
            "kept_documents": parts["kept_documents"],
            "component_counts": doc_topic * lengths[:, None],
        }
        diagnostics: dict[str, Any] = {
            "log_likelihood": parts["loglik"],
            "conditional_log_likelihood": parts["cond"],
            "train_perplexity": math.exp(-parts["cond"] / float(lengths.sum())),
            "restart_scores": [self.score(prep, o, r) for r in outcome.runs],
            "observation_dim": "document",
            "tempered": prep.tempered,
        }
        if not prep.shards.is_local:
            diagnostics["shards"] = prep.shards.n_shards
        if stopper is not None:
            extras["validation_trace"] = np.asarray(stopper.validation.history)
            extras["beta_trace"] = np.asarray(stopper.betas)
            zeros = stopper.validation.zero_history
            diagnostics.update(best_iter=stopper.best_iter, stopped_early=stopper.stopped,
                               best_validation_score=stopper.best_score, final_beta=stopper.beta,
                               unseen_validation_tokens=stopper.validation.n_unseen,
                               zero_probability_validation_tokens=zeros[stopper.best_iter]
                               if 0 <= stopper.best_iter < len(zeros) else 0)
        return Export(
            dims={"topic_word": ("component", "feature"), "doc_topic": ("document", "component")},
            coords={"component": component_labels(prep.model.n_components), "feature": parts["feature_names"],
                    "document": parts["document_names"]},
            fitted={"topic_word": {"family": "point", "value": parts["topic_word"]},
                    "doc_topic": {"family": "point", "value": doc_topic}},
            diagnostics=diagnostics, log_likelihood=parts["per_doc"][None, None, :], extras=extras,
            trace=run.trace,
        )


def _plsa_init(init: Any, data: DCAData, K: int, generator: torch.Generator) -> PointState:
    kw: dict[str, Any] = {"dtype": data.dtype, "device": data.device}
    if init is None:
        return PointState(torch.full((data.n_documents, K), 1.0 / K, **kw),
                          random_topic_word(K, data.n_features, generator, **kw))
    if not (isinstance(init, (tuple, list)) and len(init) == 2):
        raise DataError(f"init must be a pair (doc_topic, topic_word) of arrays; got {type(init).__name__}.")
    m, tw = (np.asarray(a, dtype=np.float64) for a in init)
    if m.shape != (data.n_documents, K) or tw.shape != (K, data.n_features) or (m < 0).any() or (tw < 0).any():
        raise DataError(
            f"init must hold non-negative doc_topic of shape {(data.n_documents, K)} and topic_word of shape "
            f"{(K, data.n_features)}; got {m.shape} and {tw.shape}."
        )
    m = m / np.maximum(m.sum(1, keepdims=True), _TINY)
    tw = tw / np.maximum(tw.sum(1, keepdims=True), _TINY)
    return PointState(torch.as_tensor(m, **kw), torch.as_tensor(tw, **kw))


def random_topic_word(K: int, J: int, generator: torch.Generator, *, dtype: torch.dtype,
                      device: torch.device) -> torch.Tensor:
    """The random start of P(x | z): rows of independent Exp(1) draws, normalised (a uniform draw from the
    simplex); it depends on the corpus only through J, so a sharded fit starts where the in-memory one does."""
    from latentfs.core.driver import host_generator

    e = -torch.log(torch.rand(K, J, generator=host_generator(generator), dtype=dtype).clamp_min(_TINY))
    return (e / e.sum(-1, keepdim=True)).to(device)


#: the two specs, callable as ``engine(model, X, **options)``; ``fit_plsa`` is the "em" one
fit_plsa = register_spec(PLSAEM("em"), PLSA)
register_spec(PLSAEM("tem"), PLSA)
