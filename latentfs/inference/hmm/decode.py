"""Decoding with a fitted HMM: posterior state marginals, the Viterbi path, per-sequence log-likelihoods.

Each function takes a fitted :class:`~latentfs.core.results.Posterior` (EM, Gibbs or VB) and new (or the
training) sequences, and uses the plug-in parameters: the point estimates of EM, or the posterior means
of π, A and the emission parameters (Gibbs: over the aligned draws; VB: of q(θ)).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from latentfs.core.data import DataError
from latentfs.inference.hmm.family import HMMFamily, model_from_result, prepare
from latentfs.inference.hmm.forward_backward import forward_backward, log_joint_path, viterbi_path

__all__ = ["state_marginals", "viterbi", "sequence_log_likelihood"]


def _plugin(result: Any, X: Any, lengths: Any) -> tuple[HMMFamily, dict[str, Any]]:
    model = model_from_result(result)
    s = None
    if result.model == "CategoricalHMM":
        s = int(np.asarray(result.mean("emission_probs")).shape[-1])
    fam = prepare(model, X, lengths, for_fit=False, n_categories=s)
    given = {site: result.mean(site) for site in result.sites if site != "precision"}
    if "covariance" not in given and "precision" in result.sites:
        given["precision"] = result.mean("precision")
    for site in ("startprob", "transmat"):
        arr = np.asarray(given[site], dtype=np.float64)
        given[site] = arr / arr.sum(-1, keepdims=True)
    if "emission_probs" in given:
        arr = np.asarray(given["emission_probs"], dtype=np.float64)
        given["emission_probs"] = arr / arr.sum(-1, keepdims=True)
    if not fam.categorical:
        d = fam.data.values.shape[1]
        if np.asarray(given["means"]).shape[-1] != d:
            raise DataError(
                f"X must have the {np.asarray(given['means']).shape[-1]} features the model was fitted on; got {d}."
            )
    return fam, fam.import_(given, 0.0)


def state_marginals(result: Any, X: Any, lengths: Any = None) -> np.ndarray:
    """P(z_t = k | y_s) for every row of ``X`` (N, K), by forward–backward.

    Parameters
    ----------
    result : Posterior of a :class:`~latentfs.models.hmm.GaussianHMM` or
        :class:`~latentfs.models.hmm.CategoricalHMM` fit.
    X : array (N, d) with ``lengths``, or a list of arrays (one per sequence).
    lengths : sequence of int, optional

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.hmm import GaussianHMM
    >>> sim = GaussianHMM(2, mean_precision=0.02).simulate(2, 40, seed=1)
    >>> res = latentfs.fit(GaussianHMM(2), sim["data"], lengths=sim["lengths"], seed=0)
    >>> state_marginals(res, sim["data"], sim["lengths"]).shape
    (80, 2)
    """
    fam, params = _plugin(result, X, lengths)
    fb = forward_backward(params["startprob"], params["transmat"], fam.log_emission(params), fam.layout)
    return fb.gamma.numpy()


def viterbi(result: Any, X: Any, lengths: Any = None, *, return_log_prob: bool = False) -> Any:
    """The most probable state path of every sequence (Viterbi 1967), concatenated: (N,) int64.

    With ``return_log_prob`` also log p(y_s, z_s*) per sequence.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.hmm import CategoricalHMM
    >>> sim = CategoricalHMM(2, 3).simulate(3, 30, seed=0)
    >>> res = latentfs.fit(CategoricalHMM(2), sim["data"], lengths=sim["lengths"], seed=0)
    >>> viterbi(res, sim["data"], sim["lengths"]).shape
    (90,)
    """
    fam, params = _plugin(result, X, lengths)
    log_em = fam.log_emission(params)
    path = viterbi_path(params["startprob"], params["transmat"], log_em, fam.layout)
    if return_log_prob:
        lp = log_joint_path(params["startprob"], params["transmat"], log_em, fam.layout, path)
        return path.numpy(), lp.numpy()
    return path.numpy()


def sequence_log_likelihood(result: Any, X: Any, lengths: Any = None) -> np.ndarray:
    """log f(y_s | θ̂) of every sequence (n_sequences,), by the forward pass."""
    fam, params = _plugin(result, X, lengths)
    fb = forward_backward(params["startprob"], params["transmat"], fam.log_emission(params), fam.layout)
    return fb.log_likelihood.numpy()



