"""What the hidden-Potts engines share: the prepared lattice, Gaussian emissions, conditionals, the
pseudo-likelihood of η and its maximiser, starting values and the result's layout.

Pseudo-likelihood (Besag 1975): PL(η; z) = Π_s P(z_s | z_∂s, η) with
P(z_s = k | z_∂s, η) = exp(η n_k(s)) / Σ_l exp(η n_l(s)), n_k(s) the number of 4-neighbours of s labelled k.
It needs no normalising constant and log PL is concave in η (a sum of linear terms minus log-sum-exps of
linear terms), so its maximiser on [0, η_max] is found by a bounded 1-D search. The mean-field version
(Celeux, Forbes & Peyrard 2003) replaces the neighbours' labels by their mean-field probabilities q_t:
ñ_k(s) = Σ_{t∈∂s} q_t(k), and weights the numerator by q_s.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.options import check_float
from latentfs.core.relabel import component_labels
from latentfs.models.hmrf import HiddenPotts, LatticeData, agreement, neighbour_sum

__all__ = [
    "LatticeFamily",
    "conditional_logits",
    "maximise_pseudo_likelihood",
    "prepare",
    "pseudo_log_likelihood",
]


@dataclass
class LatticeFamily:
    """A prepared lattice: ``y`` (H, W, d) float64 tensor, the model, K. The engines' tensors live on
    ``y``'s device (the CPU unless ``device`` was given to :func:`prepare`)."""

    model: HiddenPotts
    data: LatticeData
    y: torch.Tensor

    @property
    def k(self) -> int:
        return self.model.n_components

    @property
    def shape(self) -> tuple[int, int]:
        return self.data.shape

    @property
    def n(self) -> int:
        return self.data.n_pixels

    @property
    def d(self) -> int:
        return self.data.n_features

    @property
    def device(self) -> torch.device:
        return self.y.device

    def onehot(self, labels: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(labels, self.k).to(torch.float64)

    def log_emission(self, means: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
        """log g_k(y_s) (H, W, K) for diagonal Gaussians N(μ_k, diag σ²_k)."""
        diff = self.y[:, :, None, :] - means
        return -0.5 * (diff.square() / variance + torch.log(2 * math.pi * variance)).sum(-1)

    def m_step(self, weights: torch.Tensor, reg: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Weighted maximum-likelihood μ_k and σ²_k from weights (H, W, K), σ²_k floored at ``reg`` × the
        feature's variance (the exact maximiser over σ² ≥ floor, so the update never lowers the likelihood);
        an empty label takes the overall mean and variance."""
        w = weights.reshape(self.n, self.k)
        y = self.y.reshape(self.n, self.d)
        nk = w.sum(0)[:, None]
        overall_mean, overall_var = y.mean(0), y.var(0, unbiased=False)
        means = torch.where(nk > 1e-10, (w.T @ y) / nk.clamp_min(1e-10), overall_mean)
        second = (w.T @ y.square()) / nk.clamp_min(1e-10)
        var = torch.where(nk > 1e-10, (second - means.square()).clamp_min(0.0), overall_var)
        return means, torch.maximum(var, reg * overall_var.clamp_min(1e-300))

    def potts_energy(self, labels: torch.Tensor, eta: float) -> torch.Tensor:
        """η A(z), the unnormalised log Potts prior."""
        return eta * agreement(labels)

    def dims(self) -> dict[str, tuple[str, ...]]:
        return {"interaction": (), "means": ("component", "feature"), "variance": ("component", "feature")}

    def coords(self) -> dict[str, list[str]]:
        return {"component": component_labels(self.k), "feature": list(self.data.feature_names)}


def prepare(model: Any, data: Any, *, for_fit: bool = True, device: Any = None) -> LatticeFamily:
    """Validate ``data`` for ``model`` (:meth:`HiddenPotts.check_data`); the lattice on ``device`` (None = CPU)."""
    if not isinstance(model, HiddenPotts):
        raise DataError(f"model must be a HiddenPotts; got {type(model).__name__}.")
    lat = model.check_data(data, for_fit=for_fit)
    return LatticeFamily(model=model, data=lat, y=torch.as_tensor(lat.values, dtype=torch.float64, device=device))


def conditional_logits(onehot_or_q: torch.Tensor, log_g: torch.Tensor | None, eta: float) -> torch.Tensor:
    """η n_k(s) + log g_k(y_s) (…, H, W, K): the log of P(z_s = k | z_∂s, y_s) up to a per-site constant.
    ``onehot_or_q`` holds one-hot labels (the Gibbs / ICM conditional) or mean-field probabilities."""
    logits = eta * neighbour_sum(onehot_or_q)
    return logits if log_g is None else logits + log_g


def _pl_terms(weights: np.ndarray, counts: np.ndarray, eta: float) -> float:
    a = eta * counts
    m = a.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(a - m).sum(-1, keepdims=True)))[..., 0]
    return float((weights * a).sum() - lse.sum())


def pseudo_log_likelihood(labels_or_q: torch.Tensor, eta: float) -> float:
    """log PL(η) = Σ_s [η Σ_k w_s(k) n_k(s) − log Σ_l exp(η n_l(s))]: with one-hot labels w = z (Besag
    1975); with mean-field probabilities w = q and n the expected neighbour counts (Celeux et al. 2003)."""
    w = labels_or_q.detach().cpu().numpy()
    return _pl_terms(w, neighbour_sum(labels_or_q).detach().cpu().numpy(), float(eta))


def maximise_pseudo_likelihood(labels_or_q: torch.Tensor, eta_max: float, *, start: float | None = None) -> float:
    """argmax of :func:`pseudo_log_likelihood` over η ∈ [0, η_max] (concave, bounded Brent search of
    SciPy); a boundary value when the maximum is there."""
    from scipy.optimize import minimize_scalar

    w = labels_or_q.detach().cpu().numpy()
    counts = neighbour_sum(labels_or_q).detach().cpu().numpy()
    res = minimize_scalar(lambda e: -_pl_terms(w, counts, e), bounds=(0.0, float(eta_max)), method="bounded",
                          options={"xatol": 1e-7})
    best = float(res.x)
    # Brent's bounded search never evaluates the ends; the maximum of a concave function may be there.
    for end in (0.0, float(eta_max)):
        if _pl_terms(w, counts, end) > _pl_terms(w, counts, best):
            best = end
    if start is not None and _pl_terms(w, counts, float(start)) > _pl_terms(w, counts, best):
        best = float(start)
    return best


def check_interaction(interaction: Any, model: HiddenPotts) -> float | None:
    """``interaction=None`` (estimate η) or a fixed η in [0, interaction_max]."""
    if interaction is None:
        return None
    return check_float("interaction", interaction, 0.0, model.interaction_max,
                       remedy="Pass interaction=None to estimate η, or a value within [0, model.interaction_max].")


def kmeans_labels(fam: LatticeFamily, gen: torch.Generator) -> torch.Tensor:
    """k-means labels of the pixels (scikit-learn, k-means++ with 3 starts seeded from ``gen``), (H, W), on the
    family's device."""
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning

    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen).item())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkConvergenceWarning)
        lab = KMeans(n_clusters=fam.k, n_init=3, random_state=seed).fit(fam.data.flat()).labels_
    return torch.as_tensor(lab, dtype=torch.long, device=fam.device).reshape(fam.shape)


def point_fitted(eta: float, means: torch.Tensor, variance: torch.Tensor) -> dict[str, dict[str, Any]]:
    return {
        "interaction": {"family": "point", "value": np.asarray(eta, dtype=np.float64)},
        "means": {"family": "point", "value": means.cpu().numpy()},
        "variance": {"family": "point", "value": variance.cpu().numpy()},
    }
