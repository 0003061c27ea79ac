"""Number of mixture components: AIC, BIC, ICL, DIC and McLachlan's bootstrap likelihood-ratio test.

Titterington (2006) §1.7: the χ² theory of the likelihood-ratio test breaks down for mixtures (the null
lies on the boundary and is not identifiable), so the null distribution of
λ = 2(ℓ̂_{K0+1} − ℓ̂_{K0}) is obtained by the parametric bootstrap (McLachlan 1987). AIC = −2ℓ̂ + 2ν
(Akaike 1973), BIC = −2ℓ̂ + ν log N (Schwarz 1978), ICL = BIC + 2·EN(τ) with the classification entropy
EN = −Σ_nk τ_nk log τ_nk (Biernacki, Celeux & Govaert 2000); all are minimised. ν is the model's number
of free parameters (:func:`n_parameters`). DIC (Spiegelhalter et al. 2002) and its label-invariant variant
DIC_3 (Celeux, Forbes, Robert & Titterington 2006) come from posterior draws
(:func:`latentfs.inference.mixture.dic.dic`).

Every function works for :class:`~latentfs.models.mixture.GaussianMixture`,
:class:`~latentfs.models.mixture.LatentProfile` and :class:`~latentfs.models.mixture.LatentClass`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latentfs.core.data import DataError, check_choice, check_n_components
from latentfs.core.options import as_rng

__all__ = [
    "BootstrapLRT",
    "ComponentSelection",
    "bootstrap_lrt",
    "information_criteria",
    "n_parameters",
    "select_n_components",
]

_CRITERIA = ("aic", "bic", "icl")
_BAYES_CRITERIA = {"dic": "dic1", "dic3": "dic3"}


def n_parameters(model: Any, n_features: int) -> int:
    """Free parameters ν of a mixture model on ``n_features`` features.

    Gaussian, d features: (K−1) + K d + {full: K d(d+1)/2, tied: d(d+1)/2, diag: K d, spherical: K,
    tied_diag (latent profile): d}; latent class: (K−1) + K Σ_i (S_i − 1).

    Examples
    --------
    >>> from latentfs.models.mixture import GaussianMixture, LatentClass
    >>> n_parameters(GaussianMixture(3), 2), n_parameters(LatentClass(2), 5)
    (17, 11)
    """
    if not hasattr(model, "n_parameters"):
        raise DataError(f"model must be a latentfs mixture model; got {type(model).__name__}.")
    return int(model.n_parameters(int(n_features)))


def information_criteria(result: Any) -> dict[str, float]:
    """AIC, BIC and ICL of an EM fit (a :class:`Posterior` from ``method="em"``).

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.mixture import LatentClass
    >>> lc = LatentClass(2)
    >>> res = latentfs.fit(lc, lc.simulate(100, 4, seed=0)["items"], method="em", seed=0)
    >>> sorted(information_criteria(res))
    ['aic', 'bic', 'icl', 'log_likelihood', 'n_parameters']
    """
    diag = getattr(result, "diagnostics", None)
    if diag is None or "log_likelihood" not in diag or "bic" not in diag:
        raise DataError(
            "result must be a maximum-likelihood fit of a mixture (latentfs.fit(..., method='em')); got "
            f"{type(result).__name__} with method {getattr(result, 'method', None)!r}."
        )
    return {k: float(diag[k]) for k in ("log_likelihood", "n_parameters", *_CRITERIA)}


@dataclass
class ComponentSelection:
    """What :func:`select_n_components` returns.

    Attributes
    ----------
    table : pandas.DataFrame indexed by K: log_likelihood, n_parameters, aic, bic, icl, collapsed, and,
        when asked for, dic / p_d (Spiegelhalter) and dic3 / p_d3 (Celeux et al. 2006).
        A fit with a collapsed component (:func:`~latentfs.inference.mixture.em.collapsed_components`)
        gets NaN criteria, as mclust reports NA for a singular fit (Scrucca et al. 2016), so it is never
        chosen: its likelihood is limited only by ``reg_covar``.
    best : dict criterion -> K minimising it (among fits without a collapsed component).
    fits : dict K -> Posterior (the EM fits).
    bayes_fits : dict K -> Posterior (the posteriors behind DIC; empty when no DIC was asked for).
    """

    table: Any
    best: dict[str, int]
    fits: dict[int, Any] = field(repr=False)
    bayes_fits: dict[int, Any] = field(default_factory=dict, repr=False)


def select_n_components(
    model: Any,
    X: Any,
    n_components: Iterable[int] = range(1, 7),
    *,
    seed: Any = 0,
    n_init: int = 3,
    criteria: str | Iterable[str] | None = None,
    dic_method: str = "gibbs",
    dic_options: dict[str, Any] | None = None,
    **fit_options: Any,
) -> ComponentSelection:
    """Fit ``model`` by EM for each K and tabulate AIC, BIC and ICL (and DIC when asked).

    Parameters
    ----------
    model : a mixture model; its K is replaced by each value of ``n_components``.
    X : data for the model.
    n_components : iterable of int
    seed, n_init, **fit_options : passed to the EM engine.
    criteria : str or iterable of str, optional
        Extra criteria beside AIC, BIC and ICL (which are always tabulated): ``"dic"`` (Spiegelhalter et
        al. 2002, at the aligned posterior mean) and ``"dic3"`` (Celeux et al. 2006, label-invariant). They
        need a posterior for each K, from ``latentfs.fit(model, X, method=dic_method, **dic_options)``.
    dic_method : {"gibbs", "vb"}
    dic_options : dict, optional
        Options of that engine; by default 2 chains × 500 draws after 200 warm-up sweeps (Gibbs), the
        same ``seed``, and no convergence warnings (the table is the output; check ``bayes_fits``).

    Examples
    --------
    >>> from latentfs.models.mixture import GaussianMixture
    >>> gm = GaussianMixture(2, covariance_type="diag", mean_precision=0.01)
    >>> X = gm.simulate(300, 2, seed=1)["data"]
    >>> sel = select_n_components(gm, X, [1, 2, 3], seed=0)
    >>> sel.best["bic"]
    2
    """
    import pandas as pd

    from latentfs.core.registry import fit

    ks = [check_n_components(k, 10**9, name="n_components") for k in n_components]
    if not ks:
        raise DataError("n_components must hold at least one K; got an empty sequence. Pass e.g. range(1, 6).")
    extra = _check_criteria(criteria)
    if extra:
        check_choice("dic_method", dic_method, ("gibbs", "vb"))
        if dic_options is not None and not isinstance(dic_options, dict):
            raise DataError(f"dic_options must be a dict of engine options; got {type(dic_options).__name__}.")
    from latentfs.inference.mixture.em import CollapsedComponentWarning

    fits, rows, bayes = {}, [], {}
    for k in ks:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CollapsedComponentWarning)
            res = fit(model.with_n_components(k), X, method="em", seed=seed, n_init=n_init, **fit_options)
        fits[k] = res
        collapsed = bool(res.diagnostics.get("collapsed"))
        crit = information_criteria(res)
        if collapsed:  # a degenerate maximiser: its likelihood is set by reg_covar, not by the data
            crit.update({c: math.nan for c in _CRITERIA})
        row = {"n_components": k, **crit, "collapsed": collapsed}
        if extra:
            bayes[k], dics = _bayes_criteria(model.with_n_components(k), X, extra, dic_method, dic_options, seed)
            row.update(dics)
        rows.append(row)
    table = pd.DataFrame(rows).set_index("n_components")
    if table["collapsed"].all():
        raise DataError(
            f"every fit in n_components={ks} has a collapsed component (covariance at the reg_covar floor); "
            "no K can be chosen. Use a constrained covariance_type, a larger reg_covar, or jitter tied values."
        )
    best = {c: int(table[c].idxmin()) for c in _CRITERIA}
    best.update({c: int(table[c].idxmin()) for c in extra})
    if "dic" in extra and (table["p_d"] < 0).any():
        from latentfs.inference.mixture.dic import DICWarning

        bad = [int(k) for k in table.index[table["p_d"] < 0]]
        warnings.warn(
            f"p_D < 0 at K = {bad}: DIC_1 is unreliable there (the posterior mean averages switched labels, "
            "typically when K exceeds what the data support; Celeux et al. 2006). Prefer dic3.",
            DICWarning,
            stacklevel=2,
        )
    return ComponentSelection(table=table, best=best, fits=fits, bayes_fits=bayes)


def _check_criteria(criteria: str | Iterable[str] | None) -> list[str]:
    """The requested criteria beyond AIC / BIC / ICL (which are always computed)."""
    if criteria is None:
        return []
    names = [criteria] if isinstance(criteria, str) else list(criteria)
    allowed = (*_CRITERIA, *_BAYES_CRITERIA)
    for c in names:
        if not isinstance(c, str) or c not in allowed:
            raise DataError(
                f"criteria must be names among {list(allowed)}; got {c!r}. Pass e.g. criteria=['bic', 'dic']."
            )
    return [c for c in _BAYES_CRITERIA if c in names]


def _bayes_criteria(
    model: Any, X: Any, names: list[str], method: str, options: dict[str, Any] | None, seed: Any
) -> tuple[Any, dict[str, float]]:
    """Fit one posterior and compute the requested DIC variants on it."""
    from latentfs.core.registry import fit
    from latentfs.inference.mixture.dic import DICWarning, dic

    defaults: dict[str, Any] = {"seed": seed, "warn": False}
    if method == "gibbs":
        defaults.update(num_chains=2, num_warmup=200, num_samples=500)
    post = fit(model, X, method=method, **{**defaults, **(options or {})})
    out: dict[str, float] = {}
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DICWarning)  # reported once, for all K, by the caller
            res = dic(post, X, _BAYES_CRITERIA[name])
        suffix = "3" if name == "dic3" else ""
        out[name], out[f"p_d{suffix}"] = res["dic"], res["p_d"]
    return post, out


@dataclass
class BootstrapLRT:
    """What :func:`bootstrap_lrt` returns.

    Attributes
    ----------
    statistic : float, λ_obs = 2(ℓ̂_{K0+1} − ℓ̂_{K0}).
    p_value : float, (1 + #{λ_b ≥ λ_obs}) / (B + 1).
    null_statistics : ndarray (B,), λ_b on data simulated from the fitted K0 model.
    n_components : int, K0.
    """

    statistic: float
    p_value: float
    null_statistics: np.ndarray
    n_components: int


def _lrt_statistic(
    model: Any, X: Any, k0: int, seed: Any, n_init: int, fit_options: dict[str, Any]
) -> tuple[float, Any]:
    from latentfs.core.registry import fit

    opts = {"warn": False, **fit_options}
    null = fit(model.with_n_components(k0), X, method="em", seed=seed, n_init=n_init, **opts)
    alt = fit(model.with_n_components(k0 + 1), X, method="em", seed=seed, n_init=n_init, **opts)
    if alt.diagnostics.get("collapsed") or null.diagnostics.get("collapsed"):
        # A degenerate fit would inflate λ by an amount set by reg_covar; the test is not defined then.
        raise DataError(
            f"the {k0}- or {k0 + 1}-component fit has a collapsed component (covariance at the reg_covar "
            "floor), so the likelihood-ratio statistic is meaningless. Use a constrained covariance_type, a "
            "larger reg_covar, or jitter tied values."
        )
    lam = 2.0 * (alt.diagnostics["log_likelihood"] - null.diagnostics["log_likelihood"])
    # A local optimum of the larger model can fall below the nested null; the MLE cannot.
    return max(lam, 0.0), null


def bootstrap_lrt(
    model: Any, X: Any, n_components: int, *, n_bootstrap: int = 99, seed: Any = 0, n_init: int = 3, **fit_options: Any
) -> BootstrapLRT:
    """McLachlan's (1987) parametric bootstrap test of K0 = ``n_components`` against K0 + 1 components.

    Replicates are drawn (complete, no missing values) from the EM fit with K0 components; both models are
    refitted to each with ``n_init`` restarts. Replicates that the model rejects (for example a binary item
    that came out constant) are redrawn. ``n_bootstrap`` ≥ 99 is advised; tests use fewer for speed.

    Examples
    --------
    >>> from latentfs.models.mixture import GaussianMixture
    >>> gm = GaussianMixture(1, covariance_type="spherical")
    >>> X = gm.simulate(60, 2, seed=0)["data"]
    >>> out = bootstrap_lrt(gm, X, 1, n_bootstrap=9, seed=0, n_init=1)
    >>> 0 < out.p_value <= 1, out.null_statistics.shape
    (True, (9,))
    """
    from latentfs.inference.mixture.em import family_for

    k0 = check_n_components(n_components, 10**9, name="n_components")
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)) or n_bootstrap < 1:
        raise DataError(f"n_bootstrap must be a positive integer; got {n_bootstrap!r}. Use 99 or more in practice.")
    rng = as_rng(seed)
    stat, null = _lrt_statistic(model, X, k0, seed, n_init, fit_options)
    fam = family_for(model.with_n_components(k0), X)
    params = {s: null.mean(s) for s in null.sites}
    n = fam.n
    lams: list[float] = []
    tries = 0
    while len(lams) < n_bootstrap:
        tries += 1
        if tries > 10 * n_bootstrap:
            raise DataError(
                f"bootstrap_lrt could not draw valid replicates from the fitted {k0}-component model "
                f"({tries - 1} attempts were rejected). Use more data or fewer components."
            )
        Xb = fam.sample_data(params, n, rng)
        try:
            lam_b, _ = _lrt_statistic(model, Xb, k0, int(rng.integers(2**31)), n_init, fit_options)
        except DataError:
            continue
        lams.append(lam_b)
    null_stats = np.asarray(lams)
    p = (1.0 + float((null_stats >= stat).sum())) / (n_bootstrap + 1.0)
    return BootstrapLRT(statistic=stat, p_value=p, null_statistics=null_stats, n_components=k0)
