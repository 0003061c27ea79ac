"""Mean-field EM for the hidden Potts model (Zhang 1992; Celeux, Forbes & Peyrard 2003).

E-step (mean-field approximation of the neighbours): the posterior of z is replaced by a factorised
q(z) = Π_s q_s(z_s) satisfying the fixed-point equations

    q_s(k) ∝ g_k(y_s) exp{η Σ_{t∈∂s} q_t(k)},

solved by ``inner_iters`` checkerboard sweeps per EM iteration (each colour updated given the other).
M-step: μ_k, σ²_k by weighted maximum likelihood with weights q_s(k); η by maximising the mean-field
pseudo-likelihood Σ_s [η Σ_k q_s(k) ñ_k(s) − log Σ_l exp(η ñ_l(s))], ñ_k(s) = Σ_{t∈∂s} q_t(k)
(Celeux et al. 2003, the "mean field" algorithm).

The objective traced is the naive mean-field free energy at the input state,
F(q, θ) = Σ_s Σ_k q_s(k) log g_k(y_s) + η Σ_{s∼t} Σ_k q_s(k) q_t(k) − Σ_s Σ_k q_s(k) log q_s(k), a lower
bound on log Σ_z exp(η A(z)) Π_s g_{z_s}(y_s) = log f(y | θ) + log G(η). Because η is updated by a
pseudo-likelihood and not by this bound, the trace need not be monotone (Titterington §1.5: little theory
relates such algorithms to the MLE). After the last iteration the E-step is run to its fixed point at the
final θ, so the returned q satisfies the fixed-point equations at the returned parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.options import check_int
from latentfs.core.pipeline import Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.inference.hmrf.family import (
    INTERACTION,
    REG_COVAR,
    RUN_OPTIONS,
    LatticeFamily,
    PottsFit,
    PottsPointSpec,
    conditional_logits,
    maximise_pseudo_likelihood,
    pseudo_log_likelihood,
)
from latentfs.inference.hmrf.icm import initial_state
from latentfs.models.hmrf import HiddenPotts, checkerboard, neighbour_sum

__all__ = ["PottsMeanField", "fixed_point_residual", "mean_field_free_energy", "mean_field_sweep"]


def mean_field_sweep(fam: LatticeFamily, q: torch.Tensor, log_g: torch.Tensor, eta: float) -> torch.Tensor:
    """One checkerboard sweep of q_s(k) ← softmax_k(log g_k(y_s) + η Σ_{t∈∂s} q_t(k))."""
    black = checkerboard(*fam.shape).to(q.device)[..., None]
    for colour in (black, ~black):
        q = torch.where(colour, torch.softmax(conditional_logits(q, log_g, eta), -1), q)
    return q


def fixed_point_residual(q: torch.Tensor, log_g: torch.Tensor, eta: float) -> float:
    """max_s,k |q_s(k) − softmax_k(log g_k(y_s) + η ñ_k(s))|: zero at a mean-field fixed point."""
    return float((q - torch.softmax(conditional_logits(q, log_g, eta), -1)).abs().max())


def mean_field_free_energy(q: torch.Tensor, log_g: torch.Tensor, eta: float) -> float:
    """F(q, θ) (module docstring); each neighbour pair counted once."""
    pair = 0.5 * (q * neighbour_sum(q)).sum()
    entropy = -(q * torch.log(q.clamp_min(1e-300))).sum()
    return float((q * log_g).sum() + eta * pair + entropy)


def _solve(fam: LatticeFamily, q: torch.Tensor, log_g: torch.Tensor, eta: float, sweeps: int,
           tol: float = 0.0) -> torch.Tensor:
    for _ in range(sweeps):
        new = mean_field_sweep(fam, q, log_g, eta)
        change = float((new - q).abs().max())
        q = new
        if change <= tol:
            break
    return q


def mean_field_step(
    fam: LatticeFamily, state: dict[str, Any], reg: float, fixed_eta: float | None, inner: int
) -> tuple[dict[str, Any], float]:
    """One mean-field EM iteration; returns the new state and F at the input state (standardised coordinates: F
    in the data's units is F + H·W·``fam.log_jacobian``)."""
    q, eta = state["q"], state["eta"]
    log_g = fam.standard_log_emission(state["means"], state["variance"])
    value = mean_field_free_energy(q, log_g, eta)
    q = _solve(fam, q, log_g, eta, inner)
    means, variance = fam.m_step(q, reg)
    if fixed_eta is None:
        eta = maximise_pseudo_likelihood(q, fam.model.interaction_max)
    return {"q": q, "means": means, "variance": variance, "eta": eta}, value


class PottsMeanField(PottsPointSpec):
    """Mean-field EM (:func:`latentfs.fit` with ``method="mean_field"``); a point estimate of θ with the
    mean-field label probabilities.

    Parameters
    ----------
    data : array (H, W) or (H, W, d)
    interaction : float, optional
        A fixed η; by default η maximises the mean-field pseudo-likelihood at every M-step (with one label η is
        not identified and is fixed at 0; :func:`~latentfs.inference.hmrf.family.check_interaction`). With weak
        signal that estimate can feed on its own smoothing and run to ``interaction_max``: the result then
        warns (:class:`~latentfs.inference.hmrf.family.InteractionAtBoundWarning`) and lists ``"interaction"``
        in ``diagnostics["at_bound"]``.
    inner_iters : int
        Checkerboard mean-field sweeps per E-step.
    reg_covar : float
        Floor of each emission variance, as a fraction of the feature's variance.
    max_iter, tol : stopping rule (relative change of the free energy F in standardised coordinates, so that the
        stopping point does not depend on the data's scale).
    seed : the k-means start (the same start as ICM's).
    device : str or torch.device
        Where the sweeps and M-steps run (``"cpu"``, ``"cuda"``, ``"cuda:1"``), in float64; the k-means start
        and the 1-D search for η run on the host, and the result holds NumPy arrays.

    Returns
    -------
    Posterior
        Point sites ``interaction``, ``means``, ``variance``; ``extras["label_probabilities"]`` (H, W, K),
        q at its fixed point for the returned θ, and ``extras["labels"]`` its argmax;
        ``diagnostics["fixed_point_residual"]``; ``diagnostics["at_bound"]`` (``["interaction"]`` when the
        estimated η sits at ``interaction_max``, else ``[]``). The trace, ``diagnostics["free_energy"]`` and
        ``diagnostics["restart_objectives"]`` hold F in the data's units. The fit is equivariant to an affine
        change of each feature's units (the labels and η of c·y + b are those of y).

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.hmrf import HiddenPotts
    >>> sim = HiddenPotts(2).simulate((24, 24), params={"interaction": 0.8, "means": [[0.0], [2.0]],
    ...                                                 "precision": [[1.0], [1.0]]}, seed=0)
    >>> res = latentfs.fit(HiddenPotts(2), sim["data"], method="mean_field", seed=0)
    >>> res.extras["label_probabilities"].shape
    (24, 24, 2)
    """

    method = "mean_field"
    desc = "mean-field EM"
    options = {
        "interaction": INTERACTION,
        "inner_iters": Option(5, lambda n, v: check_int(n, v, low=1), "int ≥ 1",
                              "checkerboard mean-field sweeps per E-step"),
        "reg_covar": REG_COVAR,
        "max_iter": shared("max_iter", 500),
        "tol": shared("tol", 1e-6, "stop when the relative change of F (standardised coordinates) is at most this"),
        **RUN_OPTIONS,
    }

    def start(self, prep: PottsFit, o: Options, gen: torch.Generator, index: int) -> dict[str, Any]:
        """ICM's k-means start, its labels softened to q = 0.9 · one-hot + 0.1 / K."""
        start = initial_state(prep.fam, gen, prep.reg, prep.fixed)
        q0 = 0.9 * prep.fam.onehot(start["labels"]) + 0.1 / prep.fam.k
        return {"q": q0, "means": start["means"], "variance": start["variance"], "eta": start["eta"]}

    def step(self, prep: PottsFit, o: Options, state: dict[str, Any]) -> tuple[dict[str, Any], float]:
        return mean_field_step(prep.fam, state, prep.reg, prep.fixed, o.inner_iters)

    def export(self, prep: PottsFit, o: Options, outcome: Any) -> Export:
        fam, st = prep.fam, outcome.run.state
        log_g = fam.standard_log_emission(st["means"], st["variance"])
        q = _solve(fam, st["q"], log_g, st["eta"], 2000, tol=1e-12)  # the E-step to its fixed point at the final θ
        return self.point_export(prep, o, outcome, diagnostics={
            "objective": "mean-field free energy F(q, theta), a lower bound on log f(y | theta) + log G(eta)",
            "free_energy": mean_field_free_energy(q, log_g, st["eta"]) + prep.jacobian,
            "fixed_point_residual": fixed_point_residual(q, log_g, st["eta"]),
            "pseudo_log_likelihood": pseudo_log_likelihood(q, st["eta"]),
        }, extras={"label_probabilities": q.cpu().numpy(), "labels": q.argmax(-1).cpu().numpy().astype(np.int64)})


register_spec(PottsMeanField(), HiddenPotts)
