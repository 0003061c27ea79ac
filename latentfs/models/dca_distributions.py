"""The distributions the DCA models of :mod:`latentfs.models.dca` declare their sites with, where torch and Pyro
have none: multinomial counts with a total per row, their grouped form (Buntine & Jakulin 2006, Section 4.4) with
the Dirichlet normalised within groups of the vocabulary, and the spike-and-gamma score of the conditional
Gamma–Poisson model (eq. 3).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyro.distributions as dist
import torch
from torch.distributions import constraints

from latentfs.core.data import DataError

__all__ = [
    "GroupedDirichlet",
    "GroupedMultinomialCounts",
    "MultinomialCounts",
    "ZeroOrGamma",
    "check_groups",
    "group_totals",
]


_NO_SAMPLE_SHAPE = torch.Size()


class MultinomialCounts(dist.TorchDistribution):
    """Multinomial counts with a per-row total (torch's Multinomial needs one total for the batch).

    ``log_prob(w) = log L! − Σ_j log w_j! + Σ_j w_j log p_j`` with ``L = total_count``; a value whose sum
    differs from ``total_count`` has probability zero.
    """

    arg_constraints = {"probs": constraints.simplex}
    has_enumerate_support = False

    def __init__(self, total_count: torch.Tensor, probs: torch.Tensor, validate_args: bool | None = None) -> None:
        self.total_count = torch.as_tensor(total_count, dtype=probs.dtype, device=probs.device)
        self.probs = probs
        batch_shape = torch.broadcast_shapes(self.total_count.shape, probs.shape[:-1])
        self.total_count = self.total_count.expand(batch_shape)
        super().__init__(batch_shape, probs.shape[-1:], validate_args=validate_args)

    @property
    def support(self) -> Any:  # type: ignore[override]
        return constraints.integer_interval(0, int(self.total_count.max().item()) if self.total_count.numel() else 0)

    def expand(self, batch_shape: Any, _instance: Any = None) -> MultinomialCounts:
        batch_shape = torch.Size(batch_shape)
        return MultinomialCounts(
            self.total_count.expand(batch_shape), self.probs.expand(batch_shape + self.event_shape)
        )

    def sample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = _NO_SAMPLE_SHAPE) -> torch.Tensor:
        shape = torch.Size(sample_shape) + self.batch_shape
        probs = self.probs.expand(shape + self.event_shape).reshape(-1, self.event_shape[0])
        totals = self.total_count.expand(shape).reshape(-1).long()
        out = torch.zeros_like(probs)
        max_total = int(totals.max().item()) if totals.numel() else 0
        if max_total > 0:
            nonempty = probs.sum(-1) > 0
            safe = torch.where(nonempty[:, None], probs, torch.ones_like(probs))
            tokens = torch.multinomial(safe, max_total, replacement=True)
            keep = torch.arange(max_total, device=probs.device)[None, :] < totals[:, None]
            out.scatter_add_(1, tokens, keep.to(probs.dtype))
        return out.reshape(shape + self.event_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        logp = torch.where(value > 0, value * torch.log(self.probs.clamp_min(1e-300)), torch.zeros_like(value))
        total = value.sum(-1)
        lp = torch.lgamma(total + 1) - torch.lgamma(value + 1).sum(-1) + logp.sum(-1)
        return torch.where(total == self.total_count, lp, torch.full_like(lp, -torch.inf))


def check_groups(groups: Any) -> np.ndarray:
    """Validate a partition of the vocabulary: one integer group id per feature; returns codes 0..G−1.

    The ids may be any integers ≥ 0 (negative ids, often a "no group" mark, are refused); they are relabelled
    0..G−1 in sorted order.
    """
    arr = np.asarray(groups)
    if arr.ndim != 1 or arr.size == 0:
        raise DataError(
            f"groups must be a 1-D array with one group id per feature; got shape {arr.shape}. Pass e.g. "
            "groups=[0, 0, 1, 1] for two groups of two words."
        )
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            bad = int(np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)))[0])
            raise DataError(f"groups must hold integer ids; feature {bad} has {arr[bad]!r}. Pass integer group ids.")
    elif arr.dtype.kind not in "iub":
        raise DataError(f"groups must hold integer ids; got dtype {arr.dtype}. Pass integer group ids.")
    if arr.dtype.kind != "b" and (arr < 0).any():
        bad = int(np.flatnonzero(arr < 0)[0])
        raise DataError(
            f"groups must hold integer ids ≥ 0; feature {bad} has {arr[bad].item()!r}. A negative id often marks 'no "
            "group': give those features a group of their own, or drop them from X."
        )
    _, codes = np.unique(arr, return_inverse=True)
    return codes.astype(np.int64)


def group_totals(x: torch.Tensor, groups: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Σ_{j∈B_g} x_j over the last axis: (..., J) -> (..., G)."""
    out = torch.zeros(*x.shape[:-1], n_groups, dtype=x.dtype, device=x.device)
    return out.index_add_(-1, groups, x)


class _GroupedSimplex(constraints.Constraint):
    """Non-negative vectors summing to 1 within every group.

    No bijection to unconstrained space is registered, so Pyro's NUTS/SVI refuse a grouped model loudly
    (``biject_to`` raises) instead of sampling with the wrong transform; the VB and Gibbs engines support it.
    """

    event_dim = 1

    def __init__(self, groups: torch.Tensor) -> None:
        self.groups = groups
        super().__init__()

    def check(self, value: torch.Tensor) -> torch.Tensor:
        sums = group_totals(value, self.groups, int(self.groups.max().item()) + 1)
        return (value >= 0).all(-1) & ((sums - 1).abs() < 1e-6).all(-1)


class GroupedDirichlet(dist.TorchDistribution):
    """Independent Dirichlet(γ_{B_g}) on each group of a vector: the prior of a grouped θ_{·,k}.

    ``log_prob(x) = Σ_g [log Γ(Σ_{j∈B_g} γ_j) − Σ_{j∈B_g} log Γ(γ_j)] + Σ_j (γ_j − 1) log x_j`` for x whose
    entries sum to 1 within every group (Buntine & Jakulin, Section 4.4).
    """

    arg_constraints = {"concentration": constraints.positive}

    def __init__(self, concentration: torch.Tensor, groups: torch.Tensor, validate_args: bool | None = None) -> None:
        self.concentration = concentration
        self.groups = torch.as_tensor(groups, dtype=torch.long, device=concentration.device)
        self.n_groups = int(self.groups.max().item()) + 1
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=False)

    @property
    def support(self) -> Any:  # type: ignore[override]
        return _GroupedSimplex(self.groups)

    def expand(self, batch_shape: Any, _instance: Any = None) -> GroupedDirichlet:
        return GroupedDirichlet(self.concentration.expand(torch.Size(batch_shape) + self.event_shape), self.groups)

    def sample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        shape = torch.Size(sample_shape) + self.batch_shape + self.event_shape
        tiny = torch.finfo(self.concentration.dtype).tiny
        g = torch._standard_gamma(self.concentration.expand(shape)).clamp_min(tiny)
        return g / group_totals(g, self.groups, self.n_groups)[..., self.groups]

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        conc = self.concentration.expand(value.shape)
        norm = torch.lgamma(group_totals(conc, self.groups, self.n_groups)).sum(-1) - torch.lgamma(conc).sum(-1)
        return norm + ((conc - 1) * torch.log(value)).sum(-1)


class GroupedMultinomialCounts(dist.TorchDistribution):
    """One multinomial per group: w_{B_g} ~ Multinomial(L_g, p_{B_g}), with p summing to 1 in every group.

    ``log_prob(w) = Σ_g log L_g! − Σ_j log w_j! + Σ_j w_j log p_j``; a group with L_g = 0 contributes
    nothing (the chapter's 'Not Voting'), and a value whose group totals differ from ``group_totals``
    has probability zero.
    """

    arg_constraints: dict[str, Any] = {}
    has_enumerate_support = False

    def __init__(
        self, group_totals: torch.Tensor, probs: torch.Tensor, groups: torch.Tensor, validate_args: bool | None = None
    ) -> None:
        self.groups = torch.as_tensor(groups, dtype=torch.long, device=probs.device)
        self.n_groups = int(self.groups.max().item()) + 1
        batch_shape = torch.broadcast_shapes(group_totals.shape[:-1], probs.shape[:-1])
        self.group_totals = group_totals.to(probs.dtype).expand(batch_shape + (self.n_groups,))
        self.probs = probs.expand(batch_shape + probs.shape[-1:])
        super().__init__(batch_shape, probs.shape[-1:], validate_args=False)

    @property
    def support(self) -> Any:  # type: ignore[override]
        return constraints.nonnegative_integer

    def expand(self, batch_shape: Any, _instance: Any = None) -> GroupedMultinomialCounts:
        batch_shape = torch.Size(batch_shape)
        return GroupedMultinomialCounts(
            self.group_totals.expand(batch_shape + (self.n_groups,)), self.probs.expand(batch_shape + self.event_shape),
            self.groups,
        )

    def sample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        shape = torch.Size(sample_shape) + self.batch_shape
        out = torch.zeros(shape + self.event_shape, dtype=self.probs.dtype, device=self.probs.device)
        for g in range(self.n_groups):
            cols = torch.nonzero(self.groups == g).ravel()
            probs = self.probs.expand(shape + self.event_shape)[..., cols]
            totals = self.group_totals.expand(shape + (self.n_groups,))[..., g]
            out[..., cols] = MultinomialCounts(totals, probs).sample()
        return out

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        logp = torch.where(value > 0, value * torch.log(self.probs.clamp_min(1e-300)), torch.zeros_like(value))
        totals = group_totals(value, self.groups, self.n_groups)
        lp = torch.lgamma(totals + 1).sum(-1) - torch.lgamma(value + 1).sum(-1) + logp.sum(-1)
        ok = (totals == self.group_totals).all(-1)
        return torch.where(ok, lp, torch.full_like(lp, -torch.inf))


class ZeroOrGamma(dist.TorchDistribution):
    """Gamma(α, rate β) where ``active`` is 1 and a point mass at 0 where it is 0.

    With ``active ~ Bernoulli(1 − ρ)`` this is the conditional Gamma-Poisson score prior of Buntine &
    Jakulin eq. (3): marginally (1 − ρ) Gamma(l; α, β) + ρ 1[l = 0].
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative

    def __init__(
        self, concentration: torch.Tensor, rate: torch.Tensor, active: torch.Tensor, validate_args: bool | None = None
    ) -> None:
        rate = torch.as_tensor(rate)
        self.concentration, self.rate, self.active = torch.broadcast_tensors(
            torch.as_tensor(concentration), rate, torch.as_tensor(active, dtype=rate.dtype)
        )
        super().__init__(self.concentration.shape, validate_args=False)

    def expand(self, batch_shape: Any, _instance: Any = None) -> ZeroOrGamma:
        b = torch.Size(batch_shape)
        return ZeroOrGamma(self.concentration.expand(b), self.rate.expand(b), self.active.expand(b))

    def sample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        shape = torch.Size(sample_shape) + self.batch_shape
        g = torch._standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return torch.where(self.active.expand(shape) > 0, g, torch.zeros_like(g))

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        a, b = self.concentration, self.rate
        slab = a * torch.log(b) - torch.lgamma(a) + (a - 1) * torch.log(value.clamp_min(1e-300)) - b * value
        spike = torch.where(value == 0, torch.zeros_like(value), torch.full_like(value, -torch.inf))
        return torch.where(self.active > 0, slab, spike)
