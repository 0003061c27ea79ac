"""The EM engine of :class:`latentfs.models.hdda.HDDAModel` (HDDC), registered as ``method="em"``.

``latentfs.fit(HDDAModel(k, n_dims=...), X, method="em", seed=0)`` clusters X with
:func:`latentfs.inference.hdda.hddc.fit_hddc` and returns a :class:`~latentfs.core.results.Posterior` of
point estimates whose sites are those of the Pyro model (``weights``, ``means``, ``noise_variance``,
``signal_variance``, ``orientation``), zero-padded to d_max along the subspace axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from latentfs.core.data import as_continuous, check_n_components
from latentfs.core.registry import register
from latentfs.core.relabel import component_labels
from latentfs.core.results import Posterior
from latentfs.inference.hdda.hddc import fit_hddc
from latentfs.models.hdda import HDDAModel

__all__ = ["hddc_em"]


@register(HDDAModel, "em")
def hddc_em(
    model: HDDAModel,
    data: Any,
    *,
    seed: int | np.random.Generator | None = None,
    n_dims: Any = None,
    threshold: float = 0.2,
    init: Any = "kmeans",
    n_init: int = 4,
    max_iter: int = 200,
    tol: float = 1e-6,
    algorithm: str = "em",
    warn: bool = True,
    progress: bool | None = None,
) -> Posterior:
    """HDDC by EM (Bouveyron, Girard & Schmid 2007, CSDA) for ``model.submodel``.

    The dimensions are ``model.n_dims`` when set (EM is then monotone), else ``n_dims`` (default
    ``"cattell"``, re-chosen at every M-step). Options as in :func:`latentfs.inference.hdda.hddc.fit_hddc`.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs import fit
    >>> model = HDDAModel(2, n_dims=1)
    >>> X = model.simulate(60, 5, seed=0)["X"]
    >>> post = fit(model, X, method="em", seed=0, n_init=2)
    >>> post.mean("orientation").shape, post.diagnostics["submodel"]
    ((2, 5, 1), 'AkjBkQkDk')
    """
    mat = as_continuous(data, name="X", missing="error", min_samples=2)
    X = mat.values
    k = check_n_components(model.n_components, X.shape[0] // 2, what="at least 2 samples per cluster")
    dims = model.n_dims if model.n_dims is not None else (n_dims if n_dims is not None else "cattell")
    if isinstance(dims, tuple):
        dims = list(dims)
    fit = fit_hddc(
        X, k, model.submodel, dims, threshold=threshold, init=init, n_init=n_init, max_iter=max_iter,
        tol=tol, algorithm=algorithm, seed=seed, warn=warn, progress=progress,
    )
    params = fit.params
    p = X.shape[1]
    d_max = max(int(params.dims.max()), 1)
    orientation = np.zeros((k, p, d_max))
    signal = np.zeros((k, d_max))
    for i in range(k):
        d = int(params.dims[i])
        q = params.orientations[i]
        if d:
            orientation[i, :, :d] = np.eye(p)[:, :d] if q is None else q[:, :d]
            signal[i, :d] = params.signal[i][:d]
    point = lambda v: {"family": "point", "value": v}  # noqa: E731
    return Posterior(
        model="HDDAModel",
        method="em",
        dims={
            "weights": ("component",),
            "means": ("component", "feature"),
            "noise_variance": ("component",),
            "signal_variance": ("component", "subspace"),
            "orientation": ("component", "feature", "subspace"),
        },
        coords={"feature": list(mat.feature_names), "component": component_labels(k)},
        trace=fit.trace[None, :],
        fitted={
            "weights": point(params.weights),
            "means": point(params.means),
            "noise_variance": point(params.noise),
            "signal_variance": point(signal),
            "orientation": point(orientation),
        },
        diagnostics={
            "submodel": params.model,
            "dims": params.dims.tolist(),
            "log_likelihood": fit.log_likelihood,
            "bic": fit.bic,
            "icl": fit.icl,
            "n_parameters": fit.n_parameters,
            "converged": bool(fit.converged),
            "n_iter": int(fit.n_iter),
            "interrupted": bool(fit.interrupted),
            "restart_objectives": [float(v) for v in fit.restart_log_likelihoods],
            "best_restart": int(fit.best_restart),
            "observation_dim": "sample",
        },
        log_likelihood=fit.row_log_likelihood[None, None, :],
        extras={"responsibilities": fit.resp, "labels": fit.resp.argmax(1), "dims": params.dims},
        hyperparameters=model.hyperparameters(),
    )
