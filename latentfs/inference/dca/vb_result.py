"""The result of a DCA VB fit: the fitted q(Θ) and q(latent) as a :class:`~latentfs.core.results.Posterior`
(draws, exports and the pointwise log-likelihood are made from them when asked), shared by the in-memory fit
(:mod:`.vb`) and the dask fit's data side (:mod:`.vb_sharded`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.pipeline import Export
from latentfs.core.results import Posterior
from latentfs.inference.dca.common import DCAData, DCAModel, group_normalise
from latentfs.models.dca import DirichletDCA

__all__: list[str] = []


def vb_export(
    model: DCAModel,
    run: Any,
    theta_update: str,
    hyper: dict[str, torch.Tensor],
    *,
    stats: torch.Tensor,
    a: torch.Tensor,
    dims: dict[str, tuple[str, ...]],
    coords: dict[str, list[str]],
    kept_documents: np.ndarray,
    doc_lengths: np.ndarray,
    groups: torch.Tensor | None,
    bounds: np.ndarray,
) -> Export:
    """What a DCA VB result holds (the pipeline adds the run's bookkeeping: converged, n_iter, restarts)."""
    state = run.state
    gamma = hyper["gamma"]
    to_np = lambda t: t.detach().cpu().numpy().astype(np.float64)  # noqa: E731
    extra_theta: dict[str, np.ndarray] = {}
    if theta_update == "map":
        theta_spec: dict[str, Any] = {"family": "point", "value": to_np(state.topic_word)}
    elif model.groups is not None:
        # One Dirichlet(γ + S) per group: results.py has no grouped-Dirichlet family, so the point is the
        # mean (normalised within groups) and the concentrations are kept in extras.
        theta_spec = {"family": "point", "value": to_np(group_normalise(stats + gamma, groups))}
        extra_theta["topic_word_concentration"] = to_np(stats + gamma)
    elif theta_update == "chapter":
        theta_spec = {"family": "dirichlet", "concentration": to_np(stats + gamma)}
    else:
        theta_spec = {"family": "dirichlet", "concentration": to_np(state.topic_word)}
    if isinstance(model, DirichletDCA):
        doc_spec: dict[str, Any] = {"family": "dirichlet", "concentration": to_np(a)}
    else:
        doc_spec = {"family": "gamma", "concentration": to_np(a), "rate": to_np((1 + hyper["beta"]).expand_as(a))}
    return Export(
        dims=dims,
        coords=coords,
        trace=run.trace,
        fitted={"topic_word": theta_spec, model.doc_site: doc_spec},
        diagnostics={
            "objective": run.objective,
            "bound": float(bounds[-1]) if bounds.size else None,
            "theta_update": theta_update,
            "observation_dim": "document",
        },
        extras={
            "component_counts": to_np(a - hyper["alpha"]),
            "bound_trace": bounds,
            "kept_documents": kept_documents,
            "doc_lengths": doc_lengths,
            **extra_theta,
        },
    )


def _pointwise_loglik(model: DCAModel, data: DCAData, post: Posterior, n: int) -> np.ndarray:
    """log p(w_(i) | Θ) at ``n`` draws of Θ from q, each document's latent integrated out
    (:mod:`latentfs.inference.dca.loo`): shape (1, n, I). A point Θ gives the same value at every draw."""
    from latentfs.inference.dca.loo import draw_marginal_loglik

    theta = post.samples("topic_word", n, seed=1)[0]  # a point estimate comes back once: (1, K, J)
    once = [draw_marginal_loglik(model, data, theta[s], {}, 0) for s in range(min(n, theta.shape[0]))]
    return np.stack([once[s % len(once)] for s in range(n)])[None]
