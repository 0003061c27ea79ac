"""Pyro's own inference (NUTS, SVI) on the DCA models: the reference the fast engines are tested against.

These run the declared ``model`` as it is, on a dense count matrix, so they are meant for small data
(a few thousand cells). NUTS chains run one after another; SVI fits an ``AutoNormal`` guide and returns
draws from it as one chain. Pyro's global parameter store is scoped to the call, and Pyro's global RNG
is seeded inside a forked RNG state, so a fit changes no global state.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pyro
import torch
from pyro.infer import MCMC, NUTS, SVI, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

from latentfs.core.data import DataError
from latentfs.core.driver import InterruptedFitWarning, chain_generators, run_optimizer
from latentfs.core.options import check_float, check_options
from latentfs.core.pyro_context import pyro_scope
from latentfs.core.registry import register
from latentfs.core.results import Posterior
from latentfs.inference.dca.common import DCAModel, dims_and_coords, log_joint, prepare, resolve_model
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

__all__ = ["fit_nuts", "fit_svi"]

_MAX_CELLS = 200_000


def _dense(model: DCAModel, X: Any, dtype: torch.dtype, empty_documents: str) -> tuple[Any, torch.Tensor, DCAModel]:
    if getattr(model, "groups", None) is not None:
        raise DataError(
            "the generic Pyro engines (nuts, svi) do not support grouped models (groups=…); use method='vb' or "
            "method='gibbs', whose grouped updates are tested against the same Pyro model."
        )
    data = prepare(X, dtype=dtype, empty_documents=empty_documents)
    model = resolve_model(model, data)
    cells = data.n_documents * data.n_features
    if cells > _MAX_CELLS:
        raise DataError(
            f"X has {cells} cells; the generic Pyro engines work on a dense matrix and are meant for at most "
            f"{_MAX_CELLS}. Use method='vb' or method='gibbs' for data of this size."
        )
    return data, data.dense(), model


def _seed_of(gen: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=gen).item())


def fit_nuts(
    model: DCAModel,
    X: Any,
    *,
    num_samples: int = 500,
    num_warmup: int = 500,
    num_chains: int = 2,
    seed: int | torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    empty_documents: str = "error",
    progress: bool | None = None,
    init_values: dict[str, Any] | None = None,
    target_accept_prob: float = 0.8,
    warn: bool = True,
) -> Posterior:
    """NUTS on :meth:`model.model` (``latentfs.fit(model, X, method="nuts")``), small data only.

    ``init_values`` (site -> array) starts every chain there (FIELD_NOTES: explicit starts avoid chains in
    label-swapped modes); otherwise Pyro's default initialisation is used. The draws are relabelled per
    draw and checked for convergence (a :class:`~latentfs.core.driver.ConvergenceWarning` when R̂ or ESS
    is off, unless ``warn=False``). Ctrl-C keeps the chains already finished.

    Parameters
    ----------
    num_samples, num_warmup, num_chains : int
        Draws kept per chain, warm-up steps per chain, and chains (run one after another).
    init_values : dict site -> array, optional
        Where every chain starts (Pyro's ``init_to_value``); None: Pyro's default initialisation.
    target_accept_prob : float
        NUTS's target acceptance probability during step-size adaptation, in (0, 1).
    seed, dtype, empty_documents, progress, warn : see :func:`latentfs.fit`.
    """
    num_samples, num_warmup, num_chains, seed, dtype, empty_documents = check_options(
        num_samples=num_samples, num_warmup=num_warmup, num_chains=num_chains, seed=seed, dtype=dtype,
        empty_documents=empty_documents,
    )
    target_accept_prob = check_float(
        "target_accept_prob", target_accept_prob, 0.0, 1.0, low_open=True, high_open=True,
        remedy="Pass a probability such as 0.8.",
    )
    data, counts, model = _dense(model, X, dtype, empty_documents)
    sites = ("topic_word", model.doc_site)
    chains: dict[str, list[np.ndarray]] = {s: [] for s in sites}
    gens = chain_generators(seed, num_chains)
    for c in range(num_chains):
        kernel_kwargs: dict[str, Any] = {"target_accept_prob": target_accept_prob}
        if init_values is not None:
            from pyro.infer.autoguide.initialization import init_to_value

            values = {k: torch.as_tensor(np.asarray(v), dtype=dtype) for k, v in init_values.items()}
            kernel_kwargs["init_strategy"] = init_to_value(values=values)
        try:
            with pyro_scope(_seed_of(gens[c])):
                mcmc = MCMC(
                    NUTS(model.model, **kernel_kwargs),
                    num_samples=num_samples,
                    warmup_steps=num_warmup,
                    num_chains=1,
                    disable_progbar=not bool(progress),
                )
                mcmc.run(counts)
                samples = mcmc.get_samples()
        except KeyboardInterrupt:
            # Pyro's MCMC keeps nothing of an interrupted chain: return the chains finished so far.
            if not chains["topic_word"]:
                raise
            warnings.warn(
                f"NUTS interrupted during chain {c}; keeping the {c} chain(s) finished so far.",
                InterruptedFitWarning,
                stacklevel=2,
            )
            break
        for s in sites:
            chains[s].append(samples[s].detach().cpu().numpy())
    draws = {s: np.stack(v) for s, v in chains.items()}
    post = _sampled_posterior(model, data, draws, "nuts")
    post.diagnostics["interrupted"] = len(chains["topic_word"]) < num_chains
    post.check_convergence(warn=warn)
    return post


def _sampled_posterior(model: DCAModel, data: Any, draws: dict[str, np.ndarray], method: str) -> Posterior:
    from latentfs.inference.dca.loo import count_constants, lazy_marginal_loglik

    n_chain, n_draw = draws["topic_word"].shape[:2]
    lp = np.empty((n_chain, n_draw))
    for c in range(n_chain):
        for d in range(n_draw):
            t = torch.as_tensor(draws["topic_word"][c, d], dtype=data.dtype)
            x = torch.as_tensor(draws[model.doc_site][c, d], dtype=data.dtype)
            lp[c, d] = float(log_joint(model, data, t, x))
    dims, coords = dims_and_coords(model, data)
    post = Posterior(
        model=type(model).__name__,
        method=method,
        dims=dims,
        coords=coords,
        trace=lp,
        draws=draws,
        diagnostics={"num_chains": n_chain, "num_draws": n_draw, "observation_dim": "document"},
        extras={"doc_lengths": data.counts.doc_lengths},
        hyperparameters=model.hyperparameters(),
        sample_stats={"lp": lp},
    )
    # log p(w_(i) | Θ) at each draw, the document's latent integrated out (what az.loo assumes), on first use
    post.log_likelihood = lazy_marginal_loglik(post, data.counts.csr, count_constants(model, data),
                                               [model] * n_chain, [{}] * n_chain, 0)
    if n_chain > 1:
        post.align("topic_word")
    return post


def fit_svi(
    model: DCAModel,
    X: Any,
    *,
    num_steps: int = 2000,
    learning_rate: float = 0.02,
    num_draws: int = 500,
    seed: int | torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    empty_documents: str = "error",
    progress: bool | None = None,
    tol: float = 0.0,
) -> Posterior:
    """SVI with an ``AutoNormal`` guide and ``Trace_ELBO`` (``latentfs.fit(model, X, method="svi")``).

    The trace is the ELBO estimate per step. The result holds ``num_draws`` draws from the fitted guide
    as one chain. ``tol=0`` (default) runs all ``num_steps`` steps.

    Parameters
    ----------
    num_steps : int
        SVI steps (Adam updates of the guide's parameters).
    learning_rate : float
        Adam's step size, > 0.
    num_draws : int
        Draws taken from the fitted guide into the result.
    tol : float
        Stop early when the ELBO's relative change is at most this (0: run every step).
    seed, dtype, empty_documents, progress : see :func:`latentfs.fit`.
    """
    num_steps, num_draws, seed, dtype, empty_documents, tol = check_options(
        num_steps=num_steps, num_draws=num_draws, seed=seed, dtype=dtype, empty_documents=empty_documents, tol=tol
    )
    learning_rate = check_float(
        "learning_rate", learning_rate, 0.0, low_open=True, remedy="Pass a small positive step, e.g. 0.02."
    )
    data, counts, model = _dense(model, X, dtype, empty_documents)
    gen = chain_generators(seed, 1)[0]
    with pyro_scope(_seed_of(gen)):
        guide = AutoNormal(model.model)
        optimizer = pyro.optim.Adam({"lr": learning_rate})  # type: ignore[attr-defined]  # made at import time
        svi = SVI(model.model, guide, optimizer, Trace_ELBO())

        def step(state: int) -> tuple[int, float]:
            return state + 1, -svi.step(counts)

        run = run_optimizer(0, step, max_iter=num_steps, tol=tol, min_iter=num_steps if tol == 0 else 2,
                            desc=f"{type(model).__name__} SVI", progress=progress, warn=False)
        with torch.no_grad():
            samples = [guide() for _ in range(num_draws)]
    draws = {s: np.stack([d[s].cpu().numpy() for d in samples])[None] for s in ("topic_word", model.doc_site)}
    post = _sampled_posterior(model, data, draws, "svi")
    post.trace = np.atleast_2d(run.trace)
    post.diagnostics.update({"n_iter": run.n_iter, "interrupted": run.interrupted, "elbo": run.objective})
    return post


for _cls in (DirichletDCA, GammaPoissonDCA):
    register(_cls, "nuts")(fit_nuts)
    register(_cls, "svi")(fit_svi)
