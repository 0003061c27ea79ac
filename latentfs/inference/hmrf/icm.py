"""Iterated conditional modes with pseudo-likelihood estimation of η (Besag 1986; Qian & Titterington 1991).

Each iteration: (1) one checkerboard ICM sweep, every site set to the mode of its full conditional,
z_s ← argmax_k η n_k(s) + log g_k(y_s) (a site keeps its label on a tie); (2) the emission parameters
by maximum likelihood given the labels; (3) η by maximising the pseudo-likelihood PL(η; z) (Besag 1975;
:func:`~latentfs.inference.hmrf.family.maximise_pseudo_likelihood`).

The objective traced is U(z, θ) = Σ_s log g_{z_s}(y_s) + η A(z), the log posterior of z up to log G(η)
(A = number of agreeing neighbour pairs). At fixed η, steps (1) and (2) never decrease U (each site's update
maximises U over that site, same-colour sites do not interact, and the emission step is an exact
constrained maximiser), so with ``interaction`` fixed the trace is non-decreasing. Step (3) maximises a
different function (the pseudo-likelihood), so when η is estimated U may move either way by the η term.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.pipeline import Export, Options, shared
from latentfs.core.registry import register_spec
from latentfs.inference.hmrf.family import (
    INTERACTION,
    REG_COVAR,
    RUN_OPTIONS,
    LatticeFamily,
    PottsFit,
    PottsPointSpec,
    conditional_logits,
    kmeans_labels,
    maximise_pseudo_likelihood,
    pseudo_log_likelihood,
)
from latentfs.models.hmrf import HiddenPotts, agreement, checkerboard

__all__ = ["PottsICM", "icm_objective", "icm_step", "icm_sweep"]


def icm_sweep(fam: LatticeFamily, labels: torch.Tensor, log_g: torch.Tensor, eta: float) -> torch.Tensor:
    """One checkerboard sweep of conditional modes; a site keeps its label when it is among the modes."""
    black = checkerboard(*fam.shape).to(labels.device)
    for colour in (black, ~black):
        logits = conditional_logits(fam.onehot(labels), log_g, eta)
        best = logits.argmax(-1)
        current = logits.gather(-1, labels[..., None])[..., 0]
        keep = current >= logits.max(-1).values
        labels = torch.where(colour & ~keep, best, labels)
    return labels


def icm_objective(fam: LatticeFamily, labels: torch.Tensor, log_g: torch.Tensor, eta: float) -> float:
    """U(z, θ) = Σ_s log g_{z_s}(y_s) + η A(z)."""
    return float(log_g.gather(-1, labels[..., None]).sum() + eta * agreement(labels))


def icm_step(
    fam: LatticeFamily, state: dict[str, Any], reg: float, fixed_eta: float | None
) -> tuple[dict[str, Any], float]:
    """One ICM iteration; returns the new state and U at the input state (standardised coordinates: U in the
    data's units is U + H·W·``fam.log_jacobian``)."""
    labels, eta = state["labels"], state["eta"]
    log_g = fam.standard_log_emission(state["means"], state["variance"])
    value = icm_objective(fam, labels, log_g, eta)
    labels = icm_sweep(fam, labels, log_g, eta)
    means, variance = fam.m_step(fam.onehot(labels), reg)
    if fixed_eta is None:
        eta = maximise_pseudo_likelihood(fam.onehot(labels), fam.model.interaction_max)
    return {"labels": labels, "means": means, "variance": variance, "eta": eta}, value


def initial_state(fam: LatticeFamily, gen: torch.Generator, reg: float, fixed_eta: float | None) -> dict[str, Any]:
    """k-means labels, their emission M-step (standardised coordinates), and η from their pseudo-likelihood (or
    the fixed η)."""
    labels = kmeans_labels(fam, gen)
    means, variance = fam.m_step(fam.onehot(labels), reg)
    eta = fixed_eta if fixed_eta is not None else maximise_pseudo_likelihood(fam.onehot(labels),
                                                                              fam.model.interaction_max)
    return {"labels": labels, "means": means, "variance": variance, "eta": eta}


class PottsICM(PottsPointSpec):
    """ICM with pseudo-likelihood η (:func:`latentfs.fit` with ``method="icm"``); a point estimate.

    Parameters
    ----------
    data : array (H, W) or (H, W, d)
        The observed lattice.
    interaction : float, optional
        A fixed η; by default η is estimated by maximum pseudo-likelihood after every sweep (with one label η
        is not identified and is fixed at 0; :func:`~latentfs.inference.hmrf.family.check_interaction`).
    reg_covar : float
        Floor of each emission variance, as a fraction of the feature's variance.
    max_iter, tol : stopping rule of :func:`~latentfs.core.driver.run_optimizer` (relative change of U in
        standardised coordinates, so that the stopping point does not depend on the data's scale).
    seed : the starting k-means labels, drawn from the first generator spawned from the seed (the pipeline's
        restart rule, :func:`~latentfs.core.pipeline.run_starts`).
    device : str or torch.device
        Where the sweeps and M-steps run (``"cpu"``, ``"cuda"``, ``"cuda:1"``), in float64; the k-means start
        and the 1-D search for η run on the host, and the result holds NumPy arrays.

    Returns
    -------
    Posterior
        Point sites ``interaction``, ``means`` (K, d), ``variance`` (K, d); ``extras["labels"]`` (H, W), the
        restored field; ``diagnostics["pseudo_log_likelihood"]``; ``diagnostics["at_bound"]`` lists
        ``"interaction"`` when the estimated η sits at ``interaction_max`` (with an
        :class:`~latentfs.inference.hmrf.family.InteractionAtBoundWarning`). The trace and
        ``diagnostics["restart_objectives"]`` hold U in the data's units. The fit is equivariant to an affine
        change of each feature's units (the labels and η of c·y + b are those of y).

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.hmrf import HiddenPotts
    >>> sim = HiddenPotts(2).simulate((24, 24), params={"interaction": 0.8, "means": [[0.0], [2.0]],
    ...                                                 "precision": [[1.0], [1.0]]}, seed=0)
    >>> res = latentfs.fit(HiddenPotts(2), sim["data"], method="icm", seed=0)
    >>> res.kind(), res.extras["labels"].shape
    ('point', (24, 24))
    """

    method = "icm"
    desc = "ICM"
    options = {
        "interaction": INTERACTION,
        "reg_covar": REG_COVAR,
        "max_iter": shared("max_iter", 100),
        "tol": shared("tol", 1e-10, "stop when the relative change of U (standardised coordinates) is at most this"),
        **RUN_OPTIONS,
    }

    def start(self, prep: PottsFit, o: Options, gen: torch.Generator, index: int) -> dict[str, Any]:
        return initial_state(prep.fam, gen, prep.reg, prep.fixed)

    def step(self, prep: PottsFit, o: Options, state: dict[str, Any]) -> tuple[dict[str, Any], float]:
        return icm_step(prep.fam, state, prep.reg, prep.fixed)

    def export(self, prep: PottsFit, o: Options, outcome: Any) -> Export:
        fam, st = prep.fam, outcome.run.state
        return self.point_export(prep, o, outcome, diagnostics={
            "objective": "sum_s log g(y_s | z_s) + eta * A(z) (log posterior of z up to log G(eta))",
            "pseudo_log_likelihood": pseudo_log_likelihood(fam.onehot(st["labels"]), st["eta"]),
        }, extras={"labels": st["labels"].cpu().numpy().astype(np.int64)})


register_spec(PottsICM(), HiddenPotts)
