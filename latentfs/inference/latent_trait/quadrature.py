"""Gauss–Hermite quadrature for the latent trait model: the grid, the item response log-probabilities at the
nodes, the marginal log-likelihood and the posterior of the traits at the nodes.

The marginal of a response pattern y_i (Titterington 2006, §1.2; Bock & Aitkin 1981) is

    f(y_i) = ∫ Π_j g_j(y_ij | z) φ_q(z) dz  ≈  Σ_g ω_g Π_j g_j(y_ij | z_g),

with a fixed (non-adaptive) product Gauss–Hermite rule: numpy's ``hermgauss`` nodes x and weights w for
∫ e^{−x²} f(x) dx become z = √2 x and ω = w / √π for the standard normal, and the q-dimensional rule is
the product of q one-dimensional rules (G = n_nodes^q nodes). Under that rule the model is a finite
mixture over the nodes with known weights ω_g, so EM on it is exact EM and the E-step is the posterior
over the nodes, w_ig ∝ ω_g Π_j g_j(y_ij | z_g).

Responses are handled as distinct patterns (NaN kept as missing) with their counts: the LSAT data (1000
people) has 30 distinct patterns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError

__all__ = [
    "ItemData",
    "TraitParams",
    "gauss_hermite_grid",
    "prepare_items",
    "item_log_probs",
    "pattern_log_likelihood",
    "node_posterior",
    "trait_posterior",
    "marginal_log_likelihood",
    "params_from_posterior",
    "MAX_NODES",
]

#: The largest product grid EM builds (n_nodes ** n_components); past it, lower n_nodes or use method="vb".
MAX_NODES = 20000
_LN2 = math.log(2.0)


@dataclass
class TraitParams:
    """Item parameters (the EM state).

    Attributes
    ----------
    intercepts : Tensor (n_items, S_max − 1); α_js (decreasing in s; entries past S_j − 1 are padding, 0).
    discrimination : Tensor (n_items, n_components); α_j.
    """

    intercepts: torch.Tensor
    discrimination: torch.Tensor

    def numpy(self) -> dict[str, np.ndarray]:
        return {"intercepts": self.intercepts.cpu().numpy(), "discrimination": self.discrimination.cpu().numpy()}


@dataclass
class ItemData:
    """Responses as distinct patterns.

    Attributes
    ----------
    onehot : Tensor (n_patterns, n_items, S_max); one-hot answers, all zero where missing.
    counts : Tensor (n_patterns,); how many people gave each pattern.
    inverse : ndarray (n_samples,); the pattern of each person.
    levels : ndarray (n_items,); S_j.
    valid_thresholds : Tensor (n_items, S_max − 1) bool; s < S_j − 1.
    valid_categories : Tensor (n_items, S_max) bool; s < S_j.
    """

    onehot: torch.Tensor
    counts: torch.Tensor
    inverse: np.ndarray
    levels: np.ndarray
    valid_thresholds: torch.Tensor
    valid_categories: torch.Tensor

    @property
    def n_samples(self) -> int:
        return int(self.inverse.size)

    @property
    def binary(self) -> bool:
        return bool((self.levels == 2).all())


def gauss_hermite_grid(
    n_components: int, n_nodes: int, *, dtype: torch.dtype = torch.float64, device: Any = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Product Gauss–Hermite rule for N(0, I_q): nodes (G, q) and log-weights (G,), G = n_nodes ** q.

    Examples
    --------
    >>> z, logw = gauss_hermite_grid(1, 21)
    >>> round(float((logw.exp() * z[:, 0] ** 2).sum()), 12)  # E[z²] = 1, exact for this rule
    1.0
    """
    size = int(n_nodes) ** int(n_components)
    if size > MAX_NODES:
        raise DataError(
            f"n_nodes={n_nodes} with n_components={n_components} (traits) gives a product grid of {size} nodes, over "
            f"the limit of {MAX_NODES}. Lower n_nodes (e.g. n_nodes=7 for three traits) or use method='vb'."
        )
    x, w = np.polynomial.hermite.hermgauss(int(n_nodes))
    z1 = math.sqrt(2.0) * x
    logw1 = np.log(w) - 0.5 * math.log(math.pi)
    grids = np.meshgrid(*([z1] * n_components), indexing="ij")
    lgrids = np.meshgrid(*([logw1] * n_components), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], -1)
    logw = np.sum([g.ravel() for g in lgrids], axis=0)
    return torch.as_tensor(nodes, dtype=dtype, device=device), torch.as_tensor(logw, dtype=dtype, device=device)


def prepare_items(values: np.ndarray, levels: np.ndarray, *, dtype: torch.dtype, device: Any) -> ItemData:
    """Distinct response patterns (NaN kept as missing) with counts, and their one-hot codes."""
    codes = np.where(np.isnan(values), -1, values).astype(np.int64)
    patterns, inverse, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    s_max = int(levels.max())
    onehot = np.zeros((patterns.shape[0], patterns.shape[1], s_max))
    r, c = np.nonzero(patterns >= 0)
    onehot[r, c, patterns[r, c]] = 1.0
    s = np.arange(s_max)
    return ItemData(
        onehot=torch.as_tensor(onehot, dtype=dtype, device=device),
        counts=torch.as_tensor(counts, dtype=dtype, device=device),
        inverse=np.asarray(inverse).reshape(-1),
        levels=np.asarray(levels, dtype=np.int64),
        valid_thresholds=torch.as_tensor(s[None, : s_max - 1] < (levels - 1)[:, None], device=device),
        valid_categories=torch.as_tensor(s[None, :] < levels[:, None], device=device),
    )


def _log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 − eˣ) for x < 0, stably (Mächler 2012), with both branches finite so gradients stay finite.

    x is clamped at −1e-300 (two thresholds equal in floating point give a tiny, not a zero, probability).
    """
    x = torch.clamp(x, max=-1e-300)
    small = x > -_LN2
    xa = torch.where(small, x, torch.full_like(x, -_LN2))
    xb = torch.where(small, torch.full_like(x, -_LN2 - 1.0), x)
    return torch.where(small, torch.log(-torch.expm1(xa)), torch.log1p(-torch.exp(xb)))


def item_log_probs(
    intercepts: torch.Tensor,
    discrimination: torch.Tensor,
    nodes: torch.Tensor,
    valid_thresholds: torch.Tensor,
    valid_categories: torch.Tensor,
) -> torch.Tensor:
    """log P(y_j = s | z_g) of the graded model (2PL when S_j = 2), shape (n_items, G, S_max).

    log P(y ≥ s) = log σ(α_js + α_jᵀ z) and log P(y = s) = log P(y ≥ s) + log(1 − P(y ≥ s + 1)/P(y ≥ s));
    padded categories hold 0.
    """
    eta = discrimination @ nodes.transpose(-1, -2)  # (p, G)
    u = intercepts[..., :, None, :] + eta[..., None]  # (p, G, m)
    neg_inf = torch.full_like(u, -math.inf)
    ls = torch.where(valid_thresholds[..., :, None, :], torch.nn.functional.logsigmoid(u), neg_inf)
    zero = torch.zeros_like(u[..., :1])
    upper = torch.cat([zero, ls], -1)  # log P(y ≥ s), s = 0..S_max−1
    lower = torch.cat([ls, torch.full_like(zero, -math.inf)], -1)  # log P(y ≥ s + 1)
    valid = valid_categories[..., :, None, :].expand_as(upper)
    diff = torch.where(valid, lower - upper, torch.full_like(upper, -1.0))
    return torch.where(valid, upper + _log1mexp(diff), torch.zeros_like(upper))


def pattern_log_likelihood(params: TraitParams, data: ItemData, nodes: torch.Tensor) -> torch.Tensor:
    """log Π_j g_j(y_pj | z_g) of each pattern at each node, (n_patterns, G)."""
    logp = item_log_probs(params.intercepts, params.discrimination, nodes, data.valid_thresholds,
                          data.valid_categories)
    return torch.einsum("pjs,jgs->pg", data.onehot, logp)


def node_posterior(
    params: TraitParams, data: ItemData, nodes: torch.Tensor, log_weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Posterior weights over the nodes of each pattern (n_patterns, G) and each pattern's marginal
    log-likelihood log Σ_g ω_g Π_j g_j(y_pj | z_g) (n_patterns,)."""
    joint = pattern_log_likelihood(params, data, nodes) + log_weights
    marginal = torch.logsumexp(joint, -1)
    return torch.exp(joint - marginal[:, None]), marginal


def trait_posterior(
    params: TraitParams, data: ItemData, nodes: torch.Tensor, log_weights: torch.Tensor
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per person: EAP scores E[z | y] (n, q), posterior SDs (n, q) and marginal log-likelihoods (n,)."""
    post, marginal = node_posterior(params, data, nodes, log_weights)
    mean = post @ nodes
    second = post @ nodes**2
    sd = torch.sqrt(torch.clamp(second - mean**2, min=0.0))
    inv = data.inverse
    return mean.cpu().numpy()[inv], sd.cpu().numpy()[inv], marginal.cpu().numpy()[inv]


def marginal_log_likelihood(
    params: TraitParams, data: ItemData, nodes: torch.Tensor, log_weights: torch.Tensor
) -> float:
    """Σ_i log f(y_i) under the quadrature rule."""
    _, marginal = node_posterior(params, data, nodes, log_weights)
    return float((data.counts * marginal).sum())


def params_from_posterior(post: Any, *, dtype: torch.dtype = torch.float64, device: Any = "cpu") -> TraitParams:
    """The item parameters of a latent trait fit as a :class:`TraitParams` (NaN padding becomes 0)."""
    c = np.asarray(post.mean("intercepts"), dtype=np.float64)
    if c.ndim == 1:
        c = c[:, None]
    c = np.nan_to_num(c)
    A = np.asarray(post.mean("discrimination"), dtype=np.float64)
    return TraitParams(torch.as_tensor(c, dtype=dtype, device=device), torch.as_tensor(A, dtype=dtype, device=device))
