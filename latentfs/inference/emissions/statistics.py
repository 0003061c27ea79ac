"""What every emission family shares: the small count offset of the M-step, and the E-step from log g_k(y_n).

Families (:mod:`.gaussian`, :mod:`.categorical`) compute ``log_component`` log g_k(y_n); the responsibilities
τ_nk and the per-row log-likelihood follow from it the same way for all of them (Titterington 2006, §1.4).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["COUNT_STATISTICS", "add_eps", "log_joint_components", "responsibilities"]

_EPS = 10 * torch.finfo(torch.float64).eps


#: The count entries of each family's statistics (the ones :data:`_EPS` is added to).
COUNT_STATISTICS = ("n", "n_k", "n_item")


def add_eps(stats: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Statistics computed with ``eps=0`` (summed over shards or averaged over batches) with :data:`_EPS`
    added to their counts, as the in-memory M-step does."""
    return {k: v + _EPS if k in COUNT_STATISTICS else v for k, v in stats.items()}


def log_joint_components(fam: Any, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """log η_k + log g_k(y_n), shape (n, K)."""
    return fam.log_component(params).add_(torch.log(params["weights"].clamp_min(1e-300)))


def responsibilities(log_joint: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """τ_nk (Titterington §1.4) and the per-row log-likelihood log Σ_k η_k g_k(y_n)."""
    lse = torch.logsumexp(log_joint, 1)
    return torch.sub(log_joint, lse[:, None]).exp_(), lse

