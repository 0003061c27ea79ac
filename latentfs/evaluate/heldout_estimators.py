"""Estimators of the held-out likelihood of whole documents under DirichletDCA / LDA, and choosing K.

Every estimator here targets the same quantity, the *sequence* likelihood of a test document given the
component–word distributions Θ and the Dirichlet prior α,

    log p(w_(i) | Θ, α) = log ∫ ∏_n (Σ_k m_k θ_{k, x_n}) Dirichlet(m; α) dm,

without the multinomial coefficient (Buntine & Jakulin §3.1), and reports per-token values with the one
definition of :mod:`latentfs.evaluate.heldout`:

    per-token log-likelihood = Σ_i log p̂(w_(i)) / Σ_i L_(i),     perplexity = exp(−per-token value).

Estimators (Wallach, Murray, Salakhutdinov & Mimno 2009; digest book part 1 §1.8), chosen by name in
:data:`ESTIMATORS`:

==================  ============================================================================
``"is_prior"``      importance sampling from the prior, m_s ~ Dirichlet(α): unbiased for p(w), with a
                    variance that explodes with the document length
``"is_posterior"``  importance sampling with the mean-field posterior q(m) = Dirichlet(a) as proposal
                    (a from the DM VB fold-in, eq. 17, Θ fixed), by default mixed with 10 % of the
                    prior (``defensive``) to keep the weights' variance finite: unbiased for p(w);
                    its log is a stochastic lower bound of log p(w) that tightens as ``n_samples`` grows
``"left_to_right"`` Wallach et al. (2009), Algorithm 3, with ``n_particles`` particles: tokens scored
                    in order, p(x_n | x_<n) averaged over particles whose earlier assignments are
                    resampled before each position (``variant="wallach"``); ``variant="sequential"``
                    skips the resampling and averages the particles' products, which is sequential
                    importance sampling and unbiased for p(w) (Buntine 2009)
``"bound"``         the VB lower bound (18) of Buntine & Jakulin, less the multinomial coefficient
``"exact"``         brute force over all K^L assignments (tiny documents only; the tests' reference)
==================  ============================================================================

Each model is scored in its own terms; a fitted Posterior brings its ``groups`` and ``beta`` along
(:func:`latentfs.evaluate.heldout.scoring_terms`), or pass them as ``groups=`` / ``beta=``:

* **Grouped DirichletDCA** (Section 4.4): Θ is normalised within every group and a token's probability
  is Σ_k m_k θ_{k,x} within its group; every estimator's formula is otherwise unchanged.
* **GammaPoissonDCA** scores the sequence given its length, p(w_(i) | L_(i), Θ, α, β). With a common
  rate β this is DirichletDCA's with the same α (Lemma 1). With per-component rates (what ``learn_beta``
  produces) it is not: integrating l_k ~ Gamma(α_k, β_k) against Poisson(L; Σl) ∏_n (Σ_k l_k θ_{k,x_n})/Σl,

      p(w | L) = E_{l ~ Gamma(α, 1 + β)}[∏_n (Σ_k l_k θ_{k,x_n})] / Z_L,
      Z_L = L! Σ_{|c| = L} ∏_k Γ(c_k + α_k) / (Γ(α_k) c_k!) (1 + β_k)^{−c_k},

  (the e^{−Σl} of the Poisson tilts each gamma's rate to 1 + β_k and the factors (β_k/(1+β_k))^{α_k}
  cancel between p(w, L) and p(L); Z_L is a convolution of negative-binomial terms). Equivalently the
  assignments have p(z | L) ∝ ∏_k Γ(c_k + α_k)/Γ(α_k) (1 + β_k)^{−c_k}, which ``exact`` enumerates;
  ``is_prior`` / ``is_posterior`` sample l from the tilted prior / the GaP fold-in q(l_k) =
  Gamma(a_k, 1 + β_k); ``bound`` is Σ_j w_j log Σ_k e^{E log l_k} θ_{jk} − Σ_k KL(q_k ‖ Gamma(α_k, 1 + β_k))
  − log Z_L. ``left_to_right`` is not derived for unequal rates and refuses.
* **ConditionalGammaPoissonDCA** has no whole-document estimator here (its spike makes p(w | L) a sum
  over 2^K on/off patterns): these estimators refuse it; document completion scores it.

The Poisson–gamma length term p(L) is not part of the per-token value.

Document completion (:func:`latentfs.evaluate.heldout.document_completion`) is the other held-out
protocol; :func:`select_n_components` accepts it as ``method="completion"``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import gammaln, logsumexp

from latentfs.core.data import DataError, as_counts, check_positive
from latentfs.core.random import log_dirichlet_draws
from latentfs.evaluate.heldout import ScoringTerms, scoring_terms
from latentfs.evaluate.heldout_selection import ModelSelection, select_n_components

__all__ = [
    "ESTIMATORS",
    "HeldOutLikelihood",
    "ModelSelection",
    "heldout_loglik",
    "per_token_loglik",
    "perplexity",
    "exact_loglik",
    "importance_sampling",
    "left_to_right",
    "vb_bound",
    "variational_shapes",
    "select_n_components",
]


# ------------------------------------------------------------------------------------ definitions
def per_token_loglik(doc_logliks: Any, doc_lengths: Any) -> float:
    """Σ_i log p(w_(i)) / Σ_i L_(i): the one per-token held-out log-likelihood (sequence form).

    Examples
    --------
    >>> per_token_loglik([-10.0, -20.0], [5, 10])
    -2.0
    """
    ll, n = np.asarray(doc_logliks, dtype=np.float64), np.asarray(doc_lengths, dtype=np.float64)
    if ll.shape != n.shape or n.sum() <= 0:
        raise DataError(
            f"doc_logliks and doc_lengths must have the same shape and positive total length; got shapes "
            f"{ll.shape} and {n.shape}, total {n.sum():g}."
        )
    return float(ll.sum() / n.sum())


def perplexity(doc_logliks: Any, doc_lengths: Any) -> float:
    """exp(−per-token log-likelihood) (:func:`per_token_loglik`).

    Examples
    --------
    >>> round(perplexity([-10.0, -20.0], [5, 10]), 4)
    7.3891
    """
    return float(np.exp(-per_token_loglik(doc_logliks, doc_lengths)))


@dataclass(frozen=True)
class HeldOutLikelihood:
    """Per-document estimates of log p(w_(i) | Θ, α) and their per-token summary.

    Attributes
    ----------
    per_document : ndarray (n_documents,), log p̂(w_(i))
    doc_lengths : ndarray (n_documents,), L_(i)
    method : str, the estimator
    info : dict, estimator settings
    """

    per_document: np.ndarray
    doc_lengths: np.ndarray
    method: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def per_token(self) -> float:
        return per_token_loglik(self.per_document, self.doc_lengths)

    @property
    def perplexity(self) -> float:
        return perplexity(self.per_document, self.doc_lengths)


# ------------------------------------------------------------------------------------ inputs
def _terms(topic_word: Any, groups: Any = None, beta: Any = None, *, estimator: str = "") -> ScoringTerms:
    terms = scoring_terms(topic_word, groups=groups, beta=beta)
    if terms.model == "ConditionalGammaPoissonDCA":
        raise DataError(
            f"{estimator or 'this estimator'} has no formula for a ConditionalGammaPoissonDCA (its spike at zero makes "
            "p(w | L) a sum over on/off patterns, not derived here); score it by document completion "
            "(latentfs.evaluate.heldout.document_completion(result, X, alpha)) instead."
        )
    return terms


def _topic_word(topic_word: Any, groups: Any = None) -> np.ndarray:
    return _terms(topic_word, groups).topic_word


def _gap_log_norm(alpha: np.ndarray, beta: np.ndarray, max_length: int) -> np.ndarray:
    """log Z_L for L = 0..max_length (module docstring): L! times a convolution of negative-binomial terms."""
    c = np.arange(max_length + 1, dtype=np.float64)
    total = np.full(max_length + 1, -np.inf)
    total[0] = 0.0
    for a, b in zip(alpha, beta, strict=True):
        f = gammaln(c + a) - gammaln(a) - gammaln(c + 1) - c * np.log1p(b)
        total = np.array([logsumexp(total[: n + 1] + f[n::-1]) for n in range(max_length + 1)])
    return total + gammaln(c + 1)


def _docs(X: Any, n_features: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(words, counts) of each document; empty documents are an error (they have no tokens to score)."""
    counts = as_counts(X, name="X")
    if counts.n_features != n_features:
        raise DataError(f"X must have {n_features} features (as topic_word); got {counts.n_features}.")
    csr = counts.csr
    return [(csr.indices[csr.indptr[i]:csr.indptr[i + 1]].copy(), csr.data[csr.indptr[i]:csr.indptr[i + 1]].copy())
            for i in range(csr.shape[0])]


def _alpha(alpha: Any, K: int) -> np.ndarray:
    return check_positive(alpha, "alpha", shape=(K,))


def _rng(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise DataError(f"seed must be an int or a numpy Generator; got {seed!r}.")
    return np.random.default_rng(int(seed))


def _check_int(name: str, v: Any, low: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise DataError(f"{name} must be an integer ≥ {low}; got {v!r}.")
    return int(v)


def _log_dirichlet_samples(conc: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """log m for m ~ Dirichlet(conc), (n, K), in log space: Gamma(a) = Gamma(a + 1) U^{1/a}."""
    return log_dirichlet_draws(np.asarray(conc, dtype=np.float64).reshape(-1), n, rng)


def _log_dirichlet_pdf(log_m: np.ndarray, conc: np.ndarray) -> np.ndarray:
    return gammaln(conc.sum()) - gammaln(conc).sum() + ((conc - 1) * log_m).sum(-1)


# ------------------------------------------------------------------------------------ estimators
def exact_loglik(
    topic_word: Any,
    X: Any,
    alpha: Any,
    *,
    max_assignments: int = 2_000_000,
    groups: Any = None,
    beta: Any = None,
) -> HeldOutLikelihood:
    """log p(w_(i) | Θ, α) by summing over all K^L token assignments (brute force, tiny documents).

    p(w) = Σ_z p(z | α) ∏_n θ_{z_n, x_n}, with p(z | α) = Γ(Σα)/Γ(L + Σα) ∏_k Γ(c_k + α_k)/Γ(α_k)
    (the Dirichlet-multinomial of the assignments); for a GaP with per-component rates β,
    p(z | L) = ∏_k Γ(c_k + α_k)/Γ(α_k) (1 + β_k)^{−c_k} / Z_L (module docstring).

    Examples
    --------
    >>> theta = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> round(float(np.exp(exact_loglik(theta, [[1, 0]], 1.0).per_document[0])), 3)  # (0.9 + 0.2) / 2
    0.55
    """
    terms = _terms(topic_word, groups, beta, estimator="exact_loglik")
    tw = terms.topic_word
    K = tw.shape[0]
    a = _alpha(alpha, K)
    docs = _docs(X, tw.shape[1])
    max_len = int(max((c.sum() for _, c in docs), default=0))
    log_norm = None if terms.beta is None else _gap_log_norm(a, terms.beta, max_len)
    out, lengths = [], []
    for words, counts in docs:
        tokens = np.repeat(words, counts.astype(np.int64))
        L = tokens.size
        if float(K) ** L > max_assignments:
            raise DataError(
                f"exact_loglik enumerates K^L = {K}^{L} assignments, above max_assignments={max_assignments}; "
                "use a shorter document or another estimator (is_posterior, left_to_right)."
            )
        z = np.indices((K,) * L).reshape(L, -1).T  # (K^L, L)
        c = np.stack([(z == k).sum(1) for k in range(K)], 1)
        if log_norm is None:
            log_prior = gammaln(a.sum()) - gammaln(L + a.sum()) + (gammaln(c + a) - gammaln(a)).sum(1)
        else:
            assert terms.beta is not None
            log_prior = (gammaln(c + a) - gammaln(a) - c * np.log1p(terms.beta)).sum(1) - log_norm[L]
        log_lik = np.log(np.maximum(tw[z, tokens[None, :]], 1e-300)).sum(1)
        out.append(logsumexp(log_prior + log_lik))
        lengths.append(L)
    return HeldOutLikelihood(np.asarray(out), np.asarray(lengths, dtype=np.float64), "exact", _info(terms))


def _info(terms: ScoringTerms, **more: Any) -> dict[str, Any]:
    info: dict[str, Any] = dict(more)
    if terms.groups is not None:
        info["n_groups"] = int(terms.groups.max()) + 1
    if terms.beta is not None:
        info["beta"] = terms.beta.tolist()
    return info


def variational_shapes(
    topic_word: Any,
    X: Any,
    alpha: Any,
    *,
    max_iter: int = 500,
    tol: float = 1e-10,
    groups: Any = None,
    beta: Any = None,
) -> np.ndarray:
    """a_(i) of q(m) = Dirichlet(a) with Θ fixed: iterate eq. (17), a = α + Σ_j w_j n_jk(a), to convergence.

    For a GaP with per-component rates β, the shapes of q(l_k) = Gamma(a_k, 1 + β_k) (eq. 14).

    Examples
    --------
    >>> theta = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> variational_shapes(theta, [[3, 1]], 0.5).round(6).tolist()
    [[3.5, 1.5]]
    """
    from latentfs.evaluate.heldout import fold_in_shapes

    terms = _terms(topic_word, groups, beta, estimator="variational_shapes")
    tw = terms.topic_word
    a0 = _alpha(alpha, tw.shape[0])
    counts = as_counts(X, name="X")
    if counts.n_features != tw.shape[1]:
        raise DataError(f"X must have {tw.shape[1]} features (as topic_word); got {counts.n_features}.")
    return fold_in_shapes(tw, counts.csr, a0, max_iter=_check_int("max_iter", max_iter), tol=tol,
                          groups=terms.groups, beta=terms.beta)


def vb_bound(
    topic_word: Any,
    X: Any,
    alpha: Any,
    *,
    max_iter: int = 500,
    tol: float = 1e-10,
    groups: Any = None,
    beta: Any = None,
) -> HeldOutLikelihood:
    """The DM mean-field bound (18) at the fold-in fixed point, without the multinomial coefficient.

    − log[Γ(Σa) ∏Γ(α_k) / (Γ(Σα) ∏Γ(a_k))] + Σ_k (α_k − a_k) E[log m_k] + Σ_j w_j log Z_j ≤ log p(w | Θ, α);
    for a GaP with per-component rates, the gamma form of the module docstring.
    """
    from scipy.special import digamma

    terms = _terms(topic_word, groups, beta, estimator="vb_bound")
    tw = terms.topic_word
    a0 = _alpha(alpha, tw.shape[0])
    shapes = variational_shapes(tw, X, a0, max_iter=max_iter, tol=tol, groups=terms.groups, beta=terms.beta)
    docs = _docs(X, tw.shape[1])
    max_len = int(max((c.sum() for _, c in docs), default=0))
    log_norm = None if terms.beta is None else _gap_log_norm(a0, terms.beta, max_len)
    out, lengths = [], []
    for a, (words, counts) in zip(shapes, docs, strict=True):
        if log_norm is None:
            elog = digamma(a) - digamma(a.sum())
            norm = gammaln(a.sum()) + gammaln(a0).sum() - gammaln(a0.sum()) - gammaln(a).sum()
            kl = norm - ((a0 - a) * elog).sum()
        else:
            assert terms.beta is not None
            elog = digamma(a) - np.log1p(terms.beta)
            # KL(Gamma(a, b) ‖ Gamma(α, b)) with the same rate b = 1 + β
            kl = ((a - a0) * digamma(a) - gammaln(a) + gammaln(a0)).sum() + log_norm[int(counts.sum())]
        log_z = np.log(np.maximum(np.exp(elog) @ tw[:, words], 1e-300))
        out.append(-kl + (counts * log_z).sum())
        lengths.append(counts.sum())
    return HeldOutLikelihood(np.asarray(out), np.asarray(lengths), "bound", _info(terms))


def importance_sampling(
    topic_word: Any,
    X: Any,
    alpha: Any,
    *,
    proposal: str = "posterior",
    n_samples: int = 1000,
    defensive: float = 0.1,
    seed: int | np.random.Generator = 0,
    batch: int = 256,
    groups: Any = None,
    beta: Any = None,
) -> HeldOutLikelihood:
    """log of the importance-sampling estimate (1/S) Σ_s p(w | m_s) p(m_s) / q(m_s) per document.

    Parameters
    ----------
    proposal : {"posterior", "prior"}
        q = Dirichlet(a) from the VB fold-in (:func:`variational_shapes`), or the prior Dirichlet(α).
    n_samples : int
        S, proposal draws per document.
    defensive : float in [0, 1)
        Weight ε of the prior in a defensive mixture proposal (1 − ε) q + ε Dirichlet(α) (Hesterberg 1995),
        used with ``proposal="posterior"``. With ε = 0 the proposal is q alone, as in Wallach et al.;
        the estimate is still unbiased, but because q = Dirichlet(a) has lighter tails than the
        posterior near the simplex's faces (a_k > α_k), the weights have infinite variance whenever
        some a_k ≥ 2 α_k (the usual case). ε > 0 bounds every weight by p(w | m)/ε.
    seed : int or numpy Generator
    batch : int
        Draws evaluated at once (memory).

    Examples
    --------
    >>> theta = np.array([[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])
    >>> est = importance_sampling(theta, [[2, 1, 0], [0, 1, 3]], 0.5, n_samples=4000, seed=0)
    >>> exact = exact_loglik(theta, [[2, 1, 0], [0, 1, 3]], 0.5)
    >>> bool(np.allclose(est.per_document, exact.per_document, atol=0.01))
    True
    """
    if proposal not in ("posterior", "prior"):
        raise DataError(f"proposal must be one of ['posterior', 'prior']; got {proposal!r}.")
    S = _check_int("n_samples", n_samples)
    batch = _check_int("batch", batch)
    if isinstance(defensive, bool) or not isinstance(defensive, (int, float)) or not 0 <= defensive < 1:
        raise DataError(f"defensive must be a number in [0, 1); got {defensive!r}. Use 0 for q alone.")
    eps = float(defensive) if proposal == "posterior" else 0.0
    rng = _rng(seed)
    terms = _terms(topic_word, groups, beta, estimator="importance_sampling")
    tw = terms.topic_word
    a0 = _alpha(alpha, tw.shape[0])
    docs = _docs(X, tw.shape[1])
    if proposal == "posterior":
        shapes = variational_shapes(tw, X, a0, groups=terms.groups, beta=terms.beta)
    else:
        shapes = np.broadcast_to(a0, (len(docs), a0.size))
    sample: Callable[[np.ndarray, int, np.random.Generator], np.ndarray]
    logpdf: Callable[[np.ndarray, np.ndarray], np.ndarray]
    if terms.beta is None:
        # m on the simplex: Dirichlet proposals and prior
        sample, logpdf = _log_dirichlet_samples, _log_dirichlet_pdf
        log_norm = np.zeros(1)
    else:
        # l in the positive orthant: gamma proposals and the tilted prior Gamma(α, 1 + β) (module docstring)
        rate = 1.0 + terms.beta
        sample = lambda conc, n, rng: _log_gamma_samples(conc, rate, n, rng)  # noqa: E731
        logpdf = lambda log_l, conc: _log_gamma_pdf(log_l, conc, rate)  # noqa: E731
        log_norm = _gap_log_norm(a0, terms.beta, int(max((c.sum() for _, c in docs), default=0)))
    out = []
    for q, (words, counts) in zip(shapes, docs, strict=True):
        th = tw[:, words]
        logw = []
        for start in range(0, S, batch):
            n = min(batch, S - start)
            log_m = sample(q, n, rng)
            if eps > 0:
                from_prior = rng.uniform(size=n) < eps
                if from_prior.any():
                    log_m[from_prior] = sample(a0, int(from_prior.sum()), rng)
            log_q = logpdf(log_m, q)
            log_prior = logpdf(log_m, a0)
            if eps > 0:
                log_q = np.logaddexp(np.log1p(-eps) + log_q, np.log(eps) + log_prior)
            log_lik = (counts * np.log(np.maximum(np.exp(log_m) @ th, 1e-300))).sum(1)
            logw.append(log_lik + log_prior - log_q)
        w = np.concatenate(logw)
        out.append(logsumexp(w) - np.log(S) - (log_norm[int(counts.sum())] if terms.beta is not None else 0.0))
    lengths = np.asarray([c.sum() for _, c in docs])
    return HeldOutLikelihood(np.asarray(out), lengths, f"is_{proposal}", _info(terms, n_samples=S, defensive=eps))


def _log_gamma_samples(shape: np.ndarray, rate: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """log l for l_k ~ Gamma(shape_k, rate_k), (n, K), in log space (small shapes do not underflow)."""
    size = (n, shape.size)
    log_g = np.log(rng.standard_gamma(shape + 1.0, size=size)) + np.log(rng.random(size=size)) / shape
    return log_g - np.log(rate)


def _log_gamma_pdf(log_l: np.ndarray, shape: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Σ_k log Gamma(l_k; shape_k, rate_k) evaluated at l = exp(log_l)."""
    return (shape * np.log(rate) - gammaln(shape) + (shape - 1) * log_l - rate * np.exp(log_l)).sum(-1)


def _categorical(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of unnormalised ``weights`` (R, K) by inverse CDF."""
    cdf = np.cumsum(weights, axis=1)
    u = rng.uniform(size=(weights.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf < u).sum(1), weights.shape[1] - 1)


def _l2r_document(
    tokens: np.ndarray, tw: np.ndarray, a0: np.ndarray, R: int, resample: bool, rng: np.random.Generator
) -> float:
    """Wallach et al. (2009) Algorithm 3 for one token sequence, vectorised over the R particles."""
    K, N = tw.shape[0], tokens.size
    rows = np.arange(R)
    counts = np.zeros((R, K))
    z = np.zeros((R, N), dtype=np.int64)
    per_position = np.zeros((R, N))
    total_alpha = a0.sum()
    for n in range(N):
        if resample:
            for prev in range(n):  # Gibbs pass over the earlier tokens' assignments
                counts[rows, z[:, prev]] -= 1
                z[:, prev] = _categorical((counts + a0) * tw[:, tokens[prev]], rng)
                counts[rows, z[:, prev]] += 1
        # p(x_n | z_<n) = Σ_k θ_{k,x_n} (c_k + α_k) / (n + Σα)
        per_position[:, n] = ((counts + a0) @ tw[:, tokens[n]]) / (n + total_alpha)
        z[:, n] = _categorical((counts + a0) * tw[:, tokens[n]], rng)
        counts[rows, z[:, n]] += 1
    logp = np.log(np.maximum(per_position, 1e-300))
    if resample:
        # average over particles at each position, then multiply (Algorithm 3)
        return float((logsumexp(logp, axis=0) - np.log(R)).sum())
    # sequential importance sampling: each particle's weight is its product; average the weights
    return float(logsumexp(logp.sum(1)) - np.log(R))


_L2R_VARIANTS = {"wallach": True, "sequential": False}


def left_to_right(
    topic_word: Any,
    X: Any,
    alpha: Any,
    *,
    n_particles: int = 20,
    variant: str = "wallach",
    seed: int | np.random.Generator = 0,
    groups: Any = None,
    beta: Any = None,
) -> HeldOutLikelihood:
    """The left-to-right estimator of Wallach et al. (2009), Algorithm 3, with ``n_particles`` particles.

    A bag of words has no order: each document's tokens are put in a random order (drawn with ``seed``);
    p(w) of the sequence does not depend on the order, the estimator's noise does. The cost is
    O(R L² K) per document for ``variant="wallach"`` (each position resamples the earlier tokens) and
    O(R L K) for ``"sequential"``.

    Examples
    --------
    >>> theta = np.array([[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])
    >>> est = left_to_right(theta, [[2, 1, 0]], 0.5, n_particles=2000, seed=0)
    >>> bool(abs(est.per_document[0] - exact_loglik(theta, [[2, 1, 0]], 0.5).per_document[0]) < 0.01)
    True
    """
    if variant not in _L2R_VARIANTS:
        raise DataError(f"variant must be one of {sorted(_L2R_VARIANTS)}; got {variant!r}.")
    R = _check_int("n_particles", n_particles)
    rng = _rng(seed)
    terms = _terms(topic_word, groups, beta, estimator="left_to_right")
    if terms.beta is not None:
        raise DataError(
            "left_to_right is derived for DirichletDCA (and GammaPoissonDCA with one common beta, Lemma 1); this "
            f"GammaPoissonDCA has per-component beta {np.round(terms.beta, 4).tolist()}. Use method='is_posterior', "
            "'exact' or 'bound', which score per-component rates."
        )
    tw = terms.topic_word
    a0 = _alpha(alpha, tw.shape[0])
    out, lengths = [], []
    for words, counts in _docs(X, tw.shape[1]):
        tokens = rng.permutation(np.repeat(words, counts.astype(np.int64)))
        out.append(_l2r_document(tokens, tw, a0, R, _L2R_VARIANTS[variant], rng))
        lengths.append(tokens.size)
    return HeldOutLikelihood(np.asarray(out), np.asarray(lengths, dtype=np.float64), "left_to_right",
                             _info(terms, n_particles=R, variant=variant))


ESTIMATORS: dict[str, Callable[..., HeldOutLikelihood]] = {
    "is_posterior": lambda tw, X, a, **kw: importance_sampling(tw, X, a, proposal="posterior", **kw),
    "is_prior": lambda tw, X, a, **kw: importance_sampling(tw, X, a, proposal="prior", **kw),
    "left_to_right": left_to_right,
    "bound": vb_bound,
    "exact": exact_loglik,
}


def heldout_loglik(
    topic_word: Any, X: Any, alpha: Any, *, method: str = "is_posterior", **options: Any
) -> HeldOutLikelihood:
    """log p(w_(i) | Θ, α) of each document of ``X`` by the estimator ``method`` (module docstring).

    ``topic_word`` is a (K, J) array or a fitted Posterior (its mean Θ). ``options`` go to the estimator
    (``n_samples``, ``n_particles``, ``variant``, ``seed``…).

    Examples
    --------
    >>> theta = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]])
    >>> ho = heldout_loglik(theta, [[2, 2, 0, 0], [0, 1, 1, 2]], 1.0, method="exact")
    >>> round(ho.per_token, 3), round(ho.perplexity, 3)  # (log 0.0125 + log 0.003125) / 8 tokens
    (-1.269, 3.557)
    """
    if method not in ESTIMATORS:
        raise DataError(f"method must be one of {sorted(ESTIMATORS)}; got {method!r}.")
    return ESTIMATORS[method](topic_word, X, alpha, **options)
