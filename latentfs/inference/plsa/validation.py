"""Validation documents and the early stopper of PLSA's (tempered) EM (:mod:`latentfs.inference.plsa.em`).

After each EM iteration the validation documents are folded in with P(x | z) fixed (eq. 2 and 4 iterated,
warm-started from the previous iteration's P(z | d)) and scored; :class:`_EarlyStopper` keeps the best iterate, stops
after ``patience`` iterations without improvement, or (tempered EM, Hofmann 2001 §4.2) lowers β and continues from the
best iterate. Everything here runs on the driver, on in-memory documents, whatever back-end holds the training data.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from latentfs.core.data import DataError, DataWarning, as_counts
from latentfs.evaluate.heldout import completion_score, split_documents
from latentfs.inference.dca.common import DCAData, prepare

_TINY = 1e-300


def _fold_in_data(
    data: DCAData, topic_word: torch.Tensor, doc_topic: torch.Tensor, n_iter: int, tol: float
) -> torch.Tensor:
    """Iterate eq. (2) and (4) for the documents of ``data`` with P(x | z) = ``topic_word`` held fixed."""
    for _ in range(n_iter):
        rates = data.rates_at_nonzeros(doc_topic, topic_word).clamp_min(_TINY)
        new = doc_topic * data.times_t(data.values / rates, topic_word)
        # Σ_k new = n(d) less the tokens of words no aspect can emit (unseen in training): normalising
        # ignores those tokens; a document with no usable token keeps its start.
        total = new.sum(-1, keepdim=True)
        new = torch.where(total > 0, new / total.clamp_min(_TINY), doc_topic)
        change = float((new - doc_topic).abs().max())
        doc_topic = new
        if change <= tol:
            break
    return doc_topic


@dataclass
class _Validation:
    """Validation documents prepared once: fold-in part, scored part and the warm-started P(z | d)."""

    observed: DCAData
    held: sp.csr_matrix
    doc_topic: torch.Tensor
    seen: np.ndarray  # (J,) bool, words that occur in training
    n_unseen: int
    history: list[float] = field(default_factory=list)
    zero_history: list[int] = field(default_factory=list)

    def score(self, topic_word: torch.Tensor, n_iter: int) -> float:
        self.doc_topic = _fold_in_data(self.observed, topic_word, self.doc_topic, n_iter, 0.0)
        # words with no probability under every aspect (unseen in training) cannot be scored
        tw = topic_word.detach().cpu().numpy()
        ok = (tw.sum(0) > 0) & self.seen
        held = self.held[:, ok]
        if not held.nnz:
            self.zero_history.append(0)
            return -math.inf
        out = completion_score(tw[:, ok], self.doc_topic.detach().cpu().numpy(), held)
        self.zero_history.append(out["n_zero_probability"])
        if out["n_zero_probability"] == out["n_tokens"]:
            return math.log(_TINY)
        # For choosing an iterate, a held-out token of probability 0 is charged log(1e-300) ≈ −690.8 nats (so
        # iterates with fewer such tokens win) rather than −inf (which would tie every such iterate); the
        # count is reported in diagnostics["zero_probability_validation_tokens"].
        n = out["n_tokens"]
        return float((out["per_token_scored"] * (n - out["n_zero_probability"]) + out["n_zero_probability"]
                      * math.log(_TINY)) / n)


def _make_validation(
    X_valid: Any, n_features: int, seen: np.ndarray, K: int, how: str, seed: int, dtype: torch.dtype,
    device: torch.device,
) -> _Validation:
    """Validation documents against a training vocabulary of ``n_features`` words, of which ``seen`` (J,) bool
    occur in training."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        valid = as_counts(X_valid, name="X_valid", empty_documents="drop")
    if valid.n_features != n_features:
        raise DataError(
            f"X_valid must have {n_features} features (as X); got {valid.n_features}. Use the same vocabulary."
        )
    if how == "completion":
        if (valid.doc_lengths < 2).all():
            raise DataError("X_valid documents need at least 2 tokens each for completion; pass longer documents.")
        observed, held = split_documents(valid.csr, 0.5, seed=seed)
        keep = np.asarray(observed.sum(1)).ravel() > 0
        observed, held = observed[keep], held[keep]
    else:
        observed = held = valid.csr
    n_unseen = int(held[:, ~seen].sum())
    obs = prepare(sp.csr_matrix(observed), dtype=dtype, device=device)
    start = torch.full((obs.n_documents, K), 1.0 / K, dtype=dtype, device=device)
    return _Validation(obs, sp.csr_matrix(held), start, seen, n_unseen)


@dataclass
class _EarlyStopper:
    """Validation-driven control of (tempered) EM; the step becomes the identity once stopped."""

    validation: _Validation
    patience: int
    tempered: bool
    beta_decay: float
    beta_min: float
    fold_in_iter: int
    beta: float = 1.0
    best_score: float = -math.inf
    best_state: Any = None  # the best iterate: a PLSAState (P(x | z) and its shards' P(z | d))
    best_iter: int = -1
    bad: int = 0
    improved_at_beta: bool = True
    stopped: bool = False
    betas: list[float] = field(default_factory=list)

    def after(self, it: int, new: Any) -> Any:
        score = self.validation.score(new.topic_word, self.fold_in_iter)
        self.validation.history.append(score)
        self.betas.append(self.beta)
        if score > self.best_score:
            self.best_score, self.best_state, self.best_iter = score, new, it
            self.bad, self.improved_at_beta = 0, True
            return new
        self.bad += 1
        if self.bad < self.patience:
            return new
        next_beta = self.beta * self.beta_decay
        if self.tempered and self.improved_at_beta and next_beta >= self.beta_min:
            # Hofmann (2001): lower β and continue from the best iterate
            self.beta, self.bad, self.improved_at_beta = next_beta, 0, False
        else:
            self.stopped = True
        assert self.best_state is not None  # set at the first iteration (score > -inf)
        return self.best_state
