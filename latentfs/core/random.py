"""Random draws with an explicit generator that every engine shares: log-Gamma and Dirichlet draws made in log
space, so that small concentrations (γ = 0.01, a Dirichlet prior of 1e-3 on a rare state) do not underflow in
float32 or float64 (FIELD_NOTES)."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["dirichlet_rows", "dirichlet_sample", "group_softmax", "log_dirichlet_draws", "log_gamma_sample"]


def log_gamma_sample(conc: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """log of Gamma(conc, 1) draws, stable for small ``conc``: log G(conc + 1) + log(U) / conc
    (Gamma(a) = Gamma(a + 1) · U^{1/a}; Marsaglia & Tsang 2000, Section 6)."""
    g = torch._standard_gamma(conc + 1, generator=generator)
    u = torch.rand(conc.shape, generator=generator, dtype=conc.dtype, device=conc.device)
    tiny = torch.finfo(conc.dtype).tiny
    return torch.log(g.clamp_min(tiny)) + torch.log(u.clamp_min(tiny)) / conc


def dirichlet_sample(conc: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Dirichlet draws along the last axis, made in log space (normalised log-Gamma draws)."""
    return torch.softmax(log_gamma_sample(conc, generator), dim=-1)


def group_softmax(logits: torch.Tensor, groups: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last axis, within every group of entries when ``groups`` (the group code of each
    entry, 0..G−1) is given: with log-Gamma draws as ``logits`` this is one Dirichlet draw per group (a
    grouped DCA's Θ, a latent-class item's response probabilities)."""
    if groups is None:
        return torch.softmax(logits, dim=-1)
    n_groups = int(groups.max().item()) + 1
    index = groups.expand_as(logits)
    top = torch.full((*logits.shape[:-1], n_groups), -torch.inf, dtype=logits.dtype, device=logits.device)
    top = top.scatter_reduce(-1, index, logits, reduce="amax", include_self=True)
    e = torch.exp(logits - top[..., groups])
    totals = torch.zeros(*e.shape[:-1], n_groups, dtype=e.dtype, device=e.device).index_add_(-1, groups, e)
    return e / totals[..., groups]


def log_dirichlet_draws(conc: np.ndarray, n: int, rng: np.random.Generator, *, log: bool = True) -> np.ndarray:
    """log m for ``n`` draws m ~ Dirichlet(conc) along the last axis, shape (n, *conc.shape), with a numpy
    Generator: the same log-space construction as :func:`log_gamma_sample`, for the numpy paths (drawing from
    a fitted Dirichlet family on export, importance sampling of held-out likelihoods). ``log=False`` returns m
    itself, normalised after the largest log-Gamma draw of each row is subtracted (so nothing underflows that
    the log form keeps).

    The variates come from ``rng`` (Gamma draws, then uniforms, as always; ``standard_gamma`` and ``random``
    give the same values as ``gamma`` with scale 1 and ``uniform`` on [0, 1), with less overhead: one draw of
    200 × 5,000 took 66 → 60 ms); the logs, exponentials and sums run
    in place through torch, whose vectorised log and exp are 2–3× numpy's here (200 draws of a 20 × 4258
    family: 2.0 → 0.93 s with ``log=False``, 2.0 → 1.1 s in log form)."""
    conc = np.asarray(conc, dtype=np.float64)
    shape = (n, *conc.shape)
    g = torch.from_numpy(rng.standard_gamma(conc + 1.0, size=shape))
    u = torch.from_numpy(rng.random(size=shape))
    # a read-only conc (a broadcast view) is copied: torch warns on tensors over read-only memory
    g.log_().add_(u.log_().div_(torch.from_numpy(conc) if conc.flags.writeable else torch.tensor(conc)))
    del u
    g.sub_(g.amax(dim=-1, keepdim=True))
    if log:
        g.sub_(g.exp().sum(dim=-1, keepdim=True).log_())
    else:
        g.exp_()
        g.div_(g.sum(dim=-1, keepdim=True))
    return g.numpy()


def dirichlet_rows(conc: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """θ_k ~ Dirichlet(conc_k) for every row of ``conc`` (K, J): one draw of :func:`log_dirichlet_draws` in linear
    space (log space inside, so small concentrations do not underflow; FIELD_NOTES), for the collapsed sampler's
    Θ draws."""
    return log_dirichlet_draws(conc, 1, rng, log=False)[0]
