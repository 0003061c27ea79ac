"""The result of a DCA VB fit: the fitted q(Θ) and q(latent) as a :class:`~latentfs.core.results.Posterior`
(draws, exports and the pointwise log-likelihood are made from them when asked), whatever holds the data; and the
way back, an earlier result as the start of a warm-started fit (``init=``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.pipeline import Export
from latentfs.core.results import Posterior
from latentfs.inference.dca.common import DCAData, DCAModel, group_normalise
from latentfs.inference.dca.vb_updates import VBState
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


def state_from_posterior(post: Posterior, theta_update: str = "chapter") -> VBState:
    """A warm-start state from an earlier VB result (``init=`` of :func:`fit_vb`)."""
    doc_site = "doc_topic" if "doc_topic" in post.sites else "doc_scores"
    a = torch.as_tensor(post.fitted_params(doc_site)["concentration"])
    spec = post.fitted_params("topic_word")
    if theta_update == "full":
        theta = torch.as_tensor(spec["concentration"])
    else:
        theta = torch.as_tensor(post.mean("topic_word"))
    return VBState(doc_shape=a, topic_word=theta)


def _check_init(init: Any, model: DCAModel, data: DCAData, theta_update: str = "chapter") -> VBState:
    """The start of a warm-started fit: a :class:`VBState`, or the :class:`Posterior` of an earlier VB fit of the
    same model (:func:`state_from_posterior`), checked against this fit's documents, components and features."""
    if isinstance(init, Posterior):
        if init.method != "vb":
            raise DataError(
                f"init is a Posterior of method {init.method!r}; a warm start needs the Posterior of a DCA VB fit "
                "(method='vb'), whose fitted q(m) and q(Θ) are the state. Omit init, or fit with method='vb' first."
            )
        if init.model != type(model).__name__:
            raise DataError(
                f"init is a Posterior of a {init.model} fit; this fit is {type(model).__name__}. Start from a result "
                "of the same model, or omit init."
            )
        if theta_update == "full" and init.fitted_params("topic_word")["family"] != "dirichlet":
            raise DataError(
                "theta_update='full' needs the Dirichlet parameters of q(Θ) to start from; init is a result with a "
                "point Θ (theta_update='map'). Start from a 'chapter' or 'full' result, or omit init."
            )
        init = state_from_posterior(init, theta_update)
    elif not isinstance(init, VBState):
        raise DataError(
            f"init must be a VBState or the Posterior of a DCA VB fit of this model; got {type(init).__name__}. "
            "Pass init=result (an earlier latentfs.fit(..., method='vb')), or omit init to start from seed."
        )
    shapes = ((data.n_documents, model.n_components), (model.n_components, data.n_features))
    got = (tuple(init.doc_shape.shape), tuple(init.topic_word.shape))
    if got != shapes:
        raise DataError(
            f"init holds doc_shape {got[0]} and topic_word {got[1]}; this fit needs {shapes[0]} and {shapes[1]} "
            "((documents, components) and (components, features)). Start from a fit of the same documents with "
            "the same n_components, or omit init."
        )
    for name, value in (("doc_shape", init.doc_shape), ("topic_word", init.topic_word)):
        if not bool(torch.isfinite(value).all()) or not bool((value > 0).all()):
            raise DataError(f"init's {name} must be finite and positive; it holds {float(value.min()):g}.")
    return VBState(
        doc_shape=init.doc_shape.to(device=data.device, dtype=data.dtype),
        topic_word=init.topic_word.to(device=data.device, dtype=data.dtype),
    )
