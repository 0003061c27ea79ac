"""The numerics of DCA's mean-field VB (:mod:`latentfs.inference.dca.vb`): Buntine & Jakulin (2006), Section 7.

The iteration's state (:class:`VBState`), the expectations under q (eq. 14, 17), the per-document bounds (16)/(18)
and the Θ term of the objective, the start, and one major cycle (Fig. 4): the document updates (compiled on the
CPU, :mod:`.vb_kernels`, else sparse torch products), the additive Θ statistics S, and Θ from S. The engine spec
that runs them, its options and its result live in :mod:`latentfs.inference.dca.vb`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from latentfs.inference.dca import vb_kernels
from latentfs.inference.dca.common import (
    DCAData,
    DCAModel,
    group_normalise,
    hyper_tensors,
    log_length_factorials,
    model_groups,
)
from latentfs.inference.dca.hyper import gamma_update
from latentfs.models.dca import DirichletDCA


@dataclass(frozen=True)
class VBState:
    """State of the DCA mean-field iteration.

    Attributes
    ----------
    doc_shape : Tensor (I, K)
        a_(i): Dirichlet parameters of q(m) (DM) or gamma shapes of q(l) (GaP).
    topic_word : Tensor (K, J)
        Θ (row k is θ_{·,k}); for ``"full"`` these are the Dirichlet parameters λ of q(Θ).
    """

    doc_shape: torch.Tensor
    topic_word: torch.Tensor


def _hyper(model: DCAModel, data: DCAData) -> dict[str, torch.Tensor]:
    return hyper_tensors(model, data)


def expected_log_doc(model: DCAModel, a: torch.Tensor, hyper: dict[str, torch.Tensor]) -> torch.Tensor:
    """E_q[log m_k] = ψ(a_k) − ψ(Σa) (DM, eq. 17) or E_q[log l_k] = ψ(a_k) − log b_k (GaP, eq. 14)."""
    if isinstance(model, DirichletDCA):
        return torch.digamma(a) - torch.digamma(a.sum(-1, keepdim=True))
    return torch.digamma(a) - torch.log1p(hyper["beta"])


def exp_expected_log_theta(topic_word: torch.Tensor, theta_update: str) -> torch.Tensor:
    """θ (clamped away from 0), or exp E_q[log θ] under ``"full"``: what the document updates multiply by."""
    if theta_update == "full":
        return torch.exp(expected_log_theta(topic_word, theta_update))
    return topic_word.clamp_min(torch.finfo(topic_word.dtype).tiny)


def expected_log_theta(topic_word: torch.Tensor, theta_update: str) -> torch.Tensor:
    """log θ, or E_q[log θ] = ψ(λ) − ψ(Σ_j λ) under ``"full"``."""
    if theta_update == "full":
        return torch.digamma(topic_word) - torch.digamma(topic_word.sum(-1, keepdim=True))
    return torch.log(topic_word.clamp_min(torch.finfo(topic_word.dtype).tiny))


def vb_doc_bound(
    model: DCAModel,
    data: DCAData,
    a: torch.Tensor,
    elog_doc: torch.Tensor,
    log_z: torch.Tensor,
    hyper: dict[str, torch.Tensor],
) -> torch.Tensor:
    """Per-document bound (16) (GaP) or (18) (DM) at shapes ``a``, with n = n*(a); returns (I,).

    ``log_z`` holds log Z_j at each non-zero, Z_j = Σ_k θ_{jk} exp E[log latent_k].
    """
    words = torch.zeros_like(data.doc_lengths).index_add_(0, data.doc, data.values * log_z)  # Σ_j w_j log Z_j
    return doc_bound_from_words(model, data, a, elog_doc, words, hyper)


def doc_bound_from_words(
    model: DCAModel,
    data: DCAData,
    a: torch.Tensor,
    elog_doc: torch.Tensor,
    words: torch.Tensor,
    hyper: dict[str, torch.Tensor],
) -> torch.Tensor:
    """:func:`vb_doc_bound` given each document's Σ_j w_j log Z_j (``words``, (I,))."""
    alpha = hyper["alpha"]
    shift = ((alpha - a) * elog_doc).sum(-1)  # Σ_k (α_k − a_k) E[log latent_k]
    if isinstance(model, DirichletDCA):
        coef = log_length_factorials(model, data) - data.log_factorials  # log C(L; w), per group when grouped
        # − log[ Γ(Σa) ∏Γ(α) / (Γ(Σα) ∏Γ(a)) ]
        norm = (
            torch.lgamma(a.sum(-1)) + torch.lgamma(alpha).sum() - torch.lgamma(alpha.sum()) - torch.lgamma(a).sum(-1)
        )
        return coef - norm + shift + words
    beta = hyper["beta"]
    b = 1 + beta
    # − Σ_k log[ Γ(α_k) b_k^{a_k} / (Γ(a_k) β_k^{α_k}) ]
    norm = (torch.lgamma(alpha) + a * torch.log(b) - torch.lgamma(a) - alpha * torch.log(beta)).sum(-1)
    return -data.log_factorials - norm + shift + words


def theta_objective(topic_word: torch.Tensor, gamma: torch.Tensor, theta_update: str) -> torch.Tensor:
    """The Θ term that makes a full cycle coordinate ascent (see the module docstring)."""
    if theta_update == "chapter":
        return torch.log(topic_word).matmul(gamma).sum()  # Σ γ_j log θ_jk
    if theta_update == "map":
        return torch.log(topic_word).matmul(gamma - 1).sum()  # log Dirichlet(γ) up to a constant
    lam = topic_word
    elog = expected_log_theta(lam, "full")
    # E_q[log p(Θ)] − E_q[log q(Θ)] for q(θ_k) = Dir(λ_k), prior Dir(γ)
    prior = torch.lgamma(gamma.sum()) - torch.lgamma(gamma).sum()
    q_norm = torch.lgamma(lam.sum(-1)) - torch.lgamma(lam).sum(-1)
    return (prior - q_norm).sum() + ((gamma - lam) * elog).sum()


#: Work per cycle (stored non-zeros × components) from which ``n_threads=None`` uses several threads: below
#: it a cycle takes a few milliseconds and starting threads costs a noticeable share of it.
THREADED_WORK = 2_000_000


def vb_threads(n_threads: int | None, data: DCAData, n_components: int) -> int:
    """The number of threads ``n_threads`` (None: automatic, see :func:`~latentfs.inference.dca.vb.fit_vb`) means
    for these data."""
    if n_threads is not None:
        return int(n_threads)
    if not compiled_updates(data) or data.values.shape[0] * n_components < THREADED_WORK:
        return 1
    return max(1, int(torch.get_num_threads()))


def compiled_updates(data: DCAData) -> bool:
    """Whether the document updates run in the compiled CPU kernel (:mod:`.vb_kernels`)."""
    return data.device.type == "cpu" and data.dtype in (torch.float32, torch.float64)


def _compiled_pass(
    model: DCAModel,
    data: DCAData,
    a: torch.Tensor,
    topic_word: torch.Tensor,
    theta_update: str,
    hyper: dict[str, torch.Tensor],
    *,
    max_updates: int,
    tol: float = 0.0,
    bound_at: int = -1,
    stats_at: int = -1,
    n_threads: int = 1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`latentfs.inference.dca.vb_kernels.doc_updates` on torch CPU tensors: (a, a at the bound, Σ_j w_j
    log Z_j per document, the Θ statistics S (K, J) or an empty tensor, updates per document).

    The kernel reads θ (or exp E[log θ]) transposed, one word's K values together; that (J, K) array is built
    directly, and S is scaled by θ in place, so a cycle holds as few K × J arrays as it can."""
    dtype = a.dtype
    log_rate = None if isinstance(model, DirichletDCA) else torch.log1p(hyper["beta"]).to(dtype).contiguous().numpy()
    exp_theta_t = torch.empty((topic_word.shape[1], topic_word.shape[0]), dtype=dtype).copy_(topic_word.T)
    if theta_update == "full":  # exp(ψ(λ) − ψ(Σ_j λ))
        exp_theta_t.digamma_().sub_(torch.digamma(topic_word.sum(-1))).exp_()
    else:
        exp_theta_t.clamp_min_(torch.finfo(dtype).tiny)
    a_out, a_bound, words, stats_t, n_updates = vb_kernels.doc_updates(
        data.counts.csr.indptr, data.counts.csr.indices, data.values.numpy(), exp_theta_t.numpy(),
        hyper["alpha"].expand(a.shape[-1]).contiguous().numpy(), log_rate, a.contiguous().numpy(),
        max_updates=max_updates, tol=tol, bound_at=bound_at, stats_at=stats_at, n_threads=n_threads,
    )
    empty = torch.empty(0, dtype=dtype)
    stats = empty if stats_t is None else torch.from_numpy(stats_t).mul_(exp_theta_t).T
    a_new, a_at_bound = torch.from_numpy(a_out), torch.from_numpy(a_bound)
    return a_new, a_at_bound, torch.from_numpy(words), stats, torch.from_numpy(n_updates)


def vb_init(model: DCAModel, data: DCAData, generator: torch.Generator, theta_update: str) -> VBState:
    """Near-uniform random Θ; a_k = 0.5 (DM) or (Σα + L)/K (GaP), as the chapter says.

    Θ starts as Gamma(100, 1/100) noise, normalised per component (each θ_{jk} within about ±10% of
    1/J). Measured on planted corpora, this finds better optima of the ``"full"`` objective than
    Dirichlet(1)-random columns, which commit components to random words early.
    """
    theta = init_topic_word(
        model, data.n_features, data.doc_lengths.sum(), generator, theta_update, dtype=data.dtype, device=data.device
    )
    return VBState(doc_shape=start_shapes(data, model), topic_word=theta)


def start_shapes(data: DCAData, model: DCAModel) -> torch.Tensor:
    """The documents' starting shapes of :func:`vb_init` (one shard's, given its data): a_k = 0.5 (DM) or
    (Σα + L)/K (GaP)."""
    K = model.n_components
    if isinstance(model, DirichletDCA):
        return torch.full((data.n_documents, K), 0.5, dtype=data.dtype, device=data.device)
    start = (float(model.alpha.sum()) + data.doc_lengths) / K
    return start[:, None].expand(-1, K).clone()


def init_topic_word(
    model: DCAModel,
    n_features: int,
    total_tokens: torch.Tensor | float,
    generator: torch.Generator,
    theta_update: str,
    *,
    dtype: torch.dtype,
    device: str | torch.device,
) -> torch.Tensor:
    """The starting Θ of :func:`vb_init`; it depends on the corpus only through J and the token total, so a
    sharded fit starts where the in-memory fit does."""
    from latentfs.core.driver import host_generator

    K, J = model.n_components, n_features
    shape = torch.full((K, J), 100.0, dtype=dtype)  # drawn on the host: a GPU fit starts where the CPU fit does
    noise = (torch._standard_gamma(shape, generator=host_generator(generator)) / 100.0).to(device)
    groups = model.groups_for(J)
    theta = group_normalise(noise, None if groups is None else torch.as_tensor(groups, device=device))
    if theta_update == "full":
        gamma = torch.as_tensor(model.gamma_vector(J), dtype=dtype, device=device)
        theta = noise * total_tokens / (K * J) + gamma
    return theta


def restart_shape(model: DCAModel, alpha: torch.Tensor, doc_lengths: torch.Tensor) -> torch.Tensor:
    """The shapes every document restarts from when ``doc_restart=True``: α + L/K (DM) or (Σα + L)/K (GaP)."""
    K = model.n_components
    if isinstance(model, DirichletDCA):
        return (alpha + doc_lengths[:, None] / K).expand(-1, K)
    return ((float(alpha.sum()) + doc_lengths) / K)[:, None].expand(-1, K)


def vb_estep(
    model: DCAModel,
    data: DCAData,
    a: torch.Tensor,
    topic_word: torch.Tensor,
    hyper: dict[str, torch.Tensor],
    theta_update: str,
    inner_iters: int = 1,
    bound_at: str = "input",
    n_threads: int = 1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The document half of a cycle on one shard of documents: ``inner_iters`` updates of their shapes ``a``.

    Returns (S, bound, new a): the Θ statistics S_jk = Σ_i w_j n_jk (K, J) from the responsibilities of the
    last update, the sum of the shard's document bounds (at the input shapes, or at the last inner
    iteration's, as ``bound_at`` says), and the updated shapes. S and the bound are additive over shards:
    summed over a partition of the documents they are the whole corpus's (DESIGN contract 8). On the CPU
    the updates run in the compiled kernel of :mod:`.vb_kernels` (``n_threads`` blocks of documents), elsewhere
    as sparse torch products; both compute the same numbers up to the order of sums.
    """
    alpha = hyper["alpha"]
    if compiled_updates(data):
        a_new, a_bound, words, stats, _ = _compiled_pass(
            model, data, a, topic_word, theta_update, hyper, max_updates=inner_iters,
            bound_at=vb_kernels.FIRST if bound_at == "input" else vb_kernels.LAST, stats_at=vb_kernels.LAST,
            n_threads=n_threads,
        )
        bound = doc_bound_from_words(model, data, a_bound, expected_log_doc(model, a_bound, hyper), words, hyper)
        return stats, bound.sum(), a_new
    exp_theta = exp_expected_log_theta(topic_word, theta_update)  # θ or exp E[log θ], (K, J)
    bound = stats = torch.zeros((), dtype=data.dtype, device=data.device)
    for it in range(inner_iters):
        elog_doc = expected_log_doc(model, a, hyper)
        exp_doc = torch.exp(elog_doc)  # (I, K)
        z = data.rates_at_nonzeros(exp_doc, exp_theta)  # Z_j at each non-zero
        ratio = data.values / z  # w_j / Z_j
        if it == (0 if bound_at == "input" else inner_iters - 1):
            bound = vb_doc_bound(model, data, a, elog_doc, torch.log(z), hyper).sum()
        if it == inner_iters - 1:
            # Θ statistics S_jk = Σ_i w_j n_jk from the responsibilities that give the final a (eq. 15)
            stats = exp_theta * (data.csr_t(ratio) @ exp_doc).T
        a = alpha + exp_doc * data.times_t(ratio, exp_theta)  # eq. (14)/(17)
    return stats, bound, a


def theta_stats(
    model: DCAModel,
    data: DCAData,
    a: torch.Tensor,
    topic_word: torch.Tensor,
    hyper: dict[str, torch.Tensor],
    theta_update: str,
) -> torch.Tensor:
    """Θ statistics S (K, J) at shapes ``a`` and Θ (no document update); additive over shards."""
    if compiled_updates(data):
        return _compiled_pass(model, data, a, topic_word, theta_update, hyper, max_updates=0,
                              stats_at=vb_kernels.FINAL)[3]
    exp_theta = exp_expected_log_theta(topic_word, theta_update)
    exp_doc = torch.exp(expected_log_doc(model, a, hyper))
    return exp_theta * (data.csr_t(data.values / data.rates_at_nonzeros(exp_doc, exp_theta)) @ exp_doc).T


def vb_step(
    model: DCAModel,
    data: DCAData,
    state: VBState,
    hyper: dict[str, torch.Tensor],
    theta_update: str,
    inner_iters: int = 1,
    bound_at: str = "input",
    n_threads: int = 1,
    learn_gamma: bool = False,
) -> tuple[VBState, float, float]:
    """One major cycle (Fig. 4): update every a (``inner_iters`` times), then Θ.

    Returns (new state, objective, bound), evaluated at the input state (``bound_at="input"``: the
    objective then never decreases from cycle to cycle) or at the last inner iteration's a
    (``bound_at="last"``, used when documents restart every cycle). With ``learn_gamma`` the symmetric γ is
    re-estimated from this cycle's statistics (:func:`gamma_update`) before Θ is updated, and
    ``hyper["gamma"]`` is replaced by the new value.
    """
    stats, bound, a = vb_estep(model, data, state.doc_shape, state.topic_word, hyper, theta_update, inner_iters,
                               bound_at, n_threads)
    theta, objective = vb_mstep(stats, bound, state.topic_word, hyper, theta_update, model_groups(model, data),
                                learn_gamma)
    return VBState(doc_shape=a, topic_word=theta), objective, float(bound)


def vb_mstep(
    stats: torch.Tensor,
    bound: torch.Tensor | float,
    topic_word: torch.Tensor,
    hyper: dict[str, torch.Tensor],
    theta_update: str,
    groups: torch.Tensor | None,
    learn_gamma: bool,
) -> tuple[torch.Tensor, float]:
    """The driver's half of a cycle, from the documents' summed Θ statistics ``stats`` and bound: (new Θ, the
    objective at the input Θ). With ``learn_gamma``, γ is re-estimated from ``stats`` (:func:`gamma_update`) before
    Θ is updated and ``hyper["gamma"]`` replaced. A tensor bound (in memory) is added to Θ's term in its dtype, a
    float (summed over dask shards on the host) in double precision."""
    gamma = hyper["gamma"]
    term = theta_objective(topic_word, gamma, theta_update)
    objective = float(bound + term) if isinstance(bound, torch.Tensor) else bound + float(term)
    if learn_gamma:
        gamma = hyper["gamma"] = torch.full_like(gamma, gamma_update(stats, float(gamma[0])))
    return _theta_from_stats(stats, gamma, theta_update, groups), objective


def converge_documents(
    model: DCAModel,
    data: DCAData,
    a: torch.Tensor,
    topic_word: torch.Tensor,
    hyper: dict[str, torch.Tensor],
    theta_update: str,
    *,
    max_iter: int = 200,
    tol: float = 1e-6,
    n_threads: int = 1,
) -> torch.Tensor:
    """Document updates (eq. 14/17) with Θ fixed, from ``a`` until no a_ik moves by more than ``tol`` relative.

    Hyperparameter learning uses these shapes: α's update (Newton on Σ_i E_q[log m_(i)]) is a coordinate
    step on the bound only when each q(m_(i)) is at its optimum for the current Θ and α; three updates from
    a flat restart leave q(m) much flatter than that and pull α up (a planted [0.1, 0.3, 1.0] was learned as
    ~[1.4, 0.8, 1.6] that way).
    """
    if compiled_updates(data):  # each document stops as soon as its own shapes have converged
        return _compiled_pass(model, data, a, topic_word, theta_update, hyper, max_updates=max_iter, tol=tol,
                              n_threads=n_threads)[0]
    exp_theta = exp_expected_log_theta(topic_word, theta_update)
    alpha = hyper["alpha"]
    for _ in range(max_iter):
        exp_doc = torch.exp(expected_log_doc(model, a, hyper))
        ratio = data.values / data.rates_at_nonzeros(exp_doc, exp_theta)
        new = alpha + exp_doc * data.times_t(ratio, exp_theta)
        done = bool(((new - a).abs() <= tol * new).all())
        a = new
        if done:
            break
    return a


def documents_at_theta(
    model: DCAModel,
    data: DCAData,
    a: torch.Tensor,
    topic_word: torch.Tensor,
    hyper: dict[str, torch.Tensor],
    theta_update: str,
    *,
    max_iter: int = 200,
    tol: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Converged document shapes at a fixed Θ, with their Θ statistics and document bounds.

    Returns (a, S (K, J), bound per document (I,)): :func:`converge_documents`, then :func:`theta_stats` and
    :func:`vb_doc_bound` at the converged shapes, in one pass of the compiled kernel on the CPU.
    """
    if compiled_updates(data):
        a, _, words, stats, _ = _compiled_pass(
            model, data, a, topic_word, theta_update, hyper, max_updates=max_iter, tol=tol,
            bound_at=vb_kernels.FINAL, stats_at=vb_kernels.FINAL,
        )
        bound = doc_bound_from_words(model, data, a, expected_log_doc(model, a, hyper), words, hyper)
        return a, stats, bound
    exp_theta = exp_expected_log_theta(topic_word, theta_update)
    a = converge_documents(model, data, a, topic_word, hyper, theta_update, max_iter=max_iter, tol=tol)
    stats = theta_stats(model, data, a, topic_word, hyper, theta_update)
    elog_doc = expected_log_doc(model, a, hyper)
    z = data.rates_at_nonzeros(torch.exp(elog_doc), exp_theta)
    return a, stats, vb_doc_bound(model, data, a, elog_doc, torch.log(z), hyper)


def _theta_from_stats(
    stats: torch.Tensor, gamma: torch.Tensor, theta_update: str, groups: torch.Tensor | None = None
) -> torch.Tensor:
    if theta_update == "full":
        return gamma + stats
    shifted = stats + gamma if theta_update == "chapter" else (stats + gamma).sub_(1).clamp_min_(0)
    shifted = shifted.clamp_min_(torch.finfo(stats.dtype).tiny)
    if groups is None:  # in place: the cycle's peak memory is K × J arrays like this one
        return shifted.div_(shifted.sum(-1, keepdim=True))
    return group_normalise(shifted, groups)
