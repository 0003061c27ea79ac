"""Categorical emissions (latent class models, and the states of a categorical hidden Markov model).

:class:`CategoricalFamily` holds the items one-hot encoded and computes, in float64, ``log_component``
log g_k(y_n) (n, K), the τ-weighted ``statistics`` and the maximum-likelihood ``m_step`` (Titterington 2006,
§1.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.inference.emissions.statistics import _EPS, log_joint_components, responsibilities
from latentfs.models.mixture import LatentClass

__all__ = ["CategoricalFamily"]


@dataclass
class CategoricalFamily:
    """Prepared latent class data: items one-hot encoded over all L = Σ_i S_i levels.

    Attributes
    ----------
    onehot : (n, L) float64, y_nis (a missing item's block is all zero).
    obs : (n, p) float64 observed mask; item_of_level : (L,) long, the item of each level column.
    levels : (p,) S_i.
    """

    model: LatentClass
    onehot: torch.Tensor
    obs: torch.Tensor
    item_of_level: torch.Tensor
    levels: np.ndarray
    feature_names: tuple[str, ...]
    raw: np.ndarray

    @property
    def k(self) -> int:
        return self.model.n_components

    @property
    def n(self) -> int:
        return int(self.onehot.shape[0])

    @property
    def d(self) -> int:
        return int(self.obs.shape[1])

    kind = "categorical"
    default_init = "random"

    @property
    def device(self) -> torch.device:
        return self.onehot.device

    @property
    def width(self) -> int:
        """One-hot levels per row (the cost unit of :func:`auto_n_init`)."""
        return int(self.onehot.shape[1])

    @classmethod
    def prepare(cls, model: LatentClass, X: Any, *, device: Any = None, **_: Any) -> CategoricalFamily:
        data = model.check_data(X)
        return cls.from_rows(model, data.values, data.feature_names, device=device)

    @classmethod
    def from_rows(cls, model: LatentClass, v: np.ndarray, feature_names: tuple[str, ...], *_: Any,
                  device: Any = None) -> CategoricalFamily:
        """The family of validated item codes ``v`` (NaN = missing): a whole data set, a row shard or a
        mini-batch (the statistics add up over shards); its tensors on ``device`` (None = CPU)."""
        levels = model.levels(v.shape[1])
        offsets = np.concatenate([[0], np.cumsum(levels)[:-1]])
        n, p = v.shape
        onehot = np.zeros((n, int(levels.sum())))
        obs = ~np.isnan(v)
        rows, cols = np.nonzero(obs)
        onehot[rows, offsets[cols] + v[rows, cols].astype(np.int64)] = 1.0
        item_of_level = np.repeat(np.arange(p), levels)
        return cls(
            model,
            torch.as_tensor(onehot, device=device),
            torch.as_tensor(obs, dtype=torch.float64, device=device),
            torch.as_tensor(item_of_level, device=device),
            levels,
            tuple(feature_names),
            v,
        )

    def log_component(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        """log g_k(y_n) = Σ_i Σ_s y_nis log θ_iks (missing items contribute 0), one GEMM."""
        return self.onehot @ torch.log(params["probs"].clamp_min(1e-300)).T

    def e_step(self, params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Responsibilities τ (n, K) and row log-likelihoods (n,) at ``params``."""
        return responsibilities(log_joint_components(self, params))

    def statistics(self, resp: Any, eps: float = _EPS) -> dict[str, torch.Tensor]:
        """Class sizes N_k, level counts C_kl = Σ_n τ_nk y_nl, and per-item observed totals D_ki (additive
        over rows when ``eps=0``)."""
        return {"n_k": resp.sum(0) + eps, "counts": resp.T @ self.onehot, "n_item": resp.T @ self.obs + eps}

    def m_step(self, resp: Any, reg: Any = 0.0) -> dict[str, torch.Tensor]:
        """θ_iks = Σ_n τ_nk y_nis / Σ_n τ_nk o_ni; η_k = N_k / N."""
        return self.params_from_statistics(self.statistics(resp), reg)

    def params_from_statistics(self, st: dict[str, torch.Tensor], reg: Any = 0.0) -> dict[str, torch.Tensor]:
        """The M-step from (summed or averaged) statistics (ratios only, so a common scale cancels)."""
        probs = st["counts"] / st["n_item"][:, self.item_of_level]
        return {"weights": st["n_k"] / st["n_k"].sum(), "probs": probs}

    def init_points(self) -> torch.Tensor:
        return self.onehot

    def export(self, params: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        return {"weights": params["weights"].cpu().numpy().copy(), "item_probs": self.to_item_probs(params["probs"])}

    def to_item_probs(self, probs: torch.Tensor) -> np.ndarray:
        """(K, L) level probabilities → (K, p) P(y=1) for binary models, else (K, p, S_max) padded with 0."""
        p_np = probs.cpu().numpy()
        if self.model.binary:
            return p_np[:, 1::2].copy()
        out = np.zeros((p_np.shape[0], self.d, int(self.levels.max())))
        start = 0
        for i, s in enumerate(self.levels):
            out[:, i, : int(s)] = p_np[:, start : start + int(s)]
            start += int(s)
        return out

    def from_item_probs(self, item_probs: np.ndarray) -> torch.Tensor:
        ip = np.asarray(item_probs, dtype=np.float64)
        if self.model.binary:
            return torch.as_tensor(np.stack([1 - ip, ip], -1).reshape(ip.shape[0], -1), device=self.device)
        return torch.as_tensor(np.concatenate([ip[:, i, : int(s)] for i, s in enumerate(self.levels)], -1),
                               device=self.device)

    def import_(self, given: dict[str, Any], reg: float = 0.0) -> dict[str, torch.Tensor]:
        try:
            w = torch.as_tensor(np.asarray(given["weights"], dtype=np.float64), device=self.device).reshape(self.k)
            probs = self.from_item_probs(given["item_probs"])
        except (KeyError, ValueError, IndexError) as exc:
            raise DataError(f"init must give weights (K,) and item_probs in the model's shapes; {exc}.") from None
        return {"weights": w / w.sum(), "probs": probs}

    def dims(self) -> dict[str, tuple[str, ...]]:
        ip = ("component", "item") if self.model.binary else ("component", "item", "level")
        return {"weights": ("component",), "item_probs": ip}

    def sample_data(self, params: dict[str, np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
        z = rng.choice(self.k, size=n, p=params["weights"] / params["weights"].sum())
        ip = params["item_probs"]
        if self.model.binary:
            return (rng.uniform(size=(n, self.d)) < ip[z]).astype(np.float64)
        cum = np.cumsum(ip[z], -1)
        u = rng.uniform(size=(n, self.d, 1))
        return np.minimum((u > cum).sum(-1), self.levels[None, :] - 1).astype(np.float64)
