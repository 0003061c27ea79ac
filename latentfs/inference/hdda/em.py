"""The EM engine of :class:`latentfs.models.hdda.HDDAModel` (HDDC), registered as ``method="em"``.

``latentfs.fit(HDDAModel(k, n_dims=...), X, method="em", seed=0)`` clusters X with
:func:`latentfs.inference.hdda.hddc.hddc_setup`, run by the one pipeline, and returns a
:class:`~latentfs.core.results.Posterior` of
point estimates whose sites are those of the Pyro model (``weights``, ``means``, ``noise_variance``,
``signal_variance``, ``orientation``), zero-padded to d_max along the subspace axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.data import as_continuous, check_n_components
from latentfs.core.diagnostics import CollapsedComponentWarning
from latentfs.core.options import check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.core.relabel import component_labels
from latentfs.inference.hdda.hddc import HDDC_REMEDIES, DegenerateClusterError, hddc_fit_from, hddc_setup
from latentfs.models.hdda import HDDAModel

__all__ = ["HDDCEM", "hddc_em"]


#: A class whose smallest variance (its noise b_k, or a signal variance a_kj) is at most this fraction of the data's
#: mean column variance has collapsed onto points with no spread (duplicated rows): its density, and the
#: log-likelihood, grow without bound there (the mixtures' rule, latentfs.inference.mixture.em.COLLAPSE_RATIO).
COLLAPSE_RATIO = 1e-6


class HDDCEM(EngineSpec):
    """HDDC by EM (Bouveyron, Girard & Schmid 2007, CSDA) for ``model.submodel``.

    The dimensions are ``model.n_dims`` when set (EM is then monotone), else ``n_dims`` (default
    ``"cattell"``, re-chosen at every M-step). Options as in :func:`latentfs.inference.hdda.hddc.fit_hddc`; start r
    is drawn from the r-th generator spawned from ``seed``.

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

    affine_equivariant = True  # checked by check_engine: the fit of a·X + b is the fit of X transformed
    degenerate_warning = CollapsedComponentWarning  # a collapsed class is flagged, and ranks last among starts

    method = "em"
    kind = "optimizer"
    desc = "HDDC"
    remedies = HDDC_REMEDIES
    drop = (DegenerateClusterError,)
    options = {
        "seed": shared("seed"),
        "n_dims": Option(None, None, "int, list, 'cattell', 'bic' or None",
                         "the subspace dimensions when the model does not fix them (default 'cattell')"),
        "threshold": Option(0.2, None, "float in (0, 1]", "Cattell's scree-test threshold"),
        "init": Option("kmeans", None, "str or labels", "'kmeans', 'kmeans++', 'random', or one label per row"),
        "n_init": Option(4, lambda n, v: check_int(n, v, low=1, remedy=f"Pass e.g. {n}=4."), "int ≥ 1",
                         "starts; the best log-likelihood is kept"),
        "max_iter": shared("max_iter", 200),
        "tol": shared("tol", 1e-6),
        "algorithm": Option("em", None, "str", "'em', or 'cem' (classification EM: hard assignments)"),
        "warn": shared("warn"),
        "progress": shared("progress"),
    }

    def prepare(self, model: Any, data: Any, o: Options) -> Any:
        from types import SimpleNamespace

        mat = as_continuous(data, name="X", missing="error", min_samples=2)
        X = mat.values
        k = check_n_components(model.n_components, X.shape[0] // 2, what="at least 2 samples per cluster")
        dims = model.n_dims if model.n_dims is not None else (o.n_dims if o.n_dims is not None else "cattell")
        if isinstance(dims, tuple):
            dims = list(dims)
        setup = hddc_setup(X, k, model.submodel, dims, threshold=o.threshold, noise_ctrl=1e-8, init=o.init,
                           algorithm=o.algorithm, min_size=2.0)
        scale = float(np.mean(np.var(X, axis=0)))  # the data's own scale: the rule is the same for a·X + b
        return SimpleNamespace(setup=setup, feature_names=list(mat.feature_names), k=k, p=X.shape[1], scale=scale)

    def n_starts(self, prep: Any, o: Options) -> int:
        return prep.setup.n_starts(o.n_init)

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> Any:
        return prep.setup.start(gen)

    def step(self, prep: Any, o: Options, state: Any) -> tuple[Any, float]:
        return prep.setup.step(state)  # type: ignore[no-any-return]

    def degenerate(self, prep: Any, o: Options, state: Any) -> list[dict[str, Any]]:
        """The classes whose smallest variance is within :data:`COLLAPSE_RATIO` of zero, relative to the data."""
        params, flags = state.params, []
        for i in range(prep.k):
            d = int(params.dims[i])
            smallest = min([float(np.ravel(params.noise)[i])] + [float(v) for v in np.ravel(params.signal[i])[:d]])
            if smallest <= COLLAPSE_RATIO * prep.scale:
                flags.append({"component": i, "relative_variance": smallest / max(prep.scale, 1e-300),
                              "weight": float(params.weights[i])})
        return flags

    def degenerate_message(self, prep: Any, o: Options, flags: list[dict[str, Any]]) -> str:
        listed = ", ".join(f"class {f['component']} (weight {f['weight']:.2g}, smallest variance "
                           f"{f['relative_variance']:.2g} of the data's)" for f in flags)
        return (f"HDDC: {listed} collapsed onto points with (almost) no spread, such as duplicated rows; its density "
                "and the log-likelihood (and BIC) grow without bound there. Use fewer components (n_components), "
                "more starts (n_init), or drop duplicated rows.")

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        fit = hddc_fit_from(prep.setup, outcome)
        params, k, p = fit.params, prep.k, prep.p
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
        return Export(
            dims={
                "weights": ("component",),
                "means": ("component", "feature"),
                "noise_variance": ("component",),
                "signal_variance": ("component", "subspace"),
                "orientation": ("component", "feature", "subspace"),
            },
            coords={"feature": prep.feature_names, "component": component_labels(k)},
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
                "observation_dim": "sample",
            },
            log_likelihood=fit.row_log_likelihood[None, None, :],
            extras={"responsibilities": fit.resp, "labels": fit.resp.argmax(1), "dims": params.dims},
        )


#: the spec, callable as ``hddc_em(model, X, **options)`` (the pipeline runs it)
hddc_em = register_spec(HDDCEM(), HDDAModel)
