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
:class:`~latentfs.models.mixture.LatentProfile` and :class:`~latentfs.models.mixture.LatentClass`;
:func:`select_n_components` also for every model whose ``method="em"`` fit reports its log-likelihood, free
parameters and BIC (factor analysis, mixtures of factor analysers, latent trait models): there ICL is not
defined (no classes) and the cross-validated log-likelihood is tabulated instead.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
_HEYWOOD = r".*Heywood case"  # the factor-analysis warning, matched by text (this module knows no other family)
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
    if diag is None or any(k not in diag for k in ("log_likelihood", "n_parameters", "bic")):
        raise DataError(
            "result must be a maximum-likelihood fit (latentfs.fit(..., method='em')) that reports its "
            f"log-likelihood, free parameters and BIC; got {type(result).__name__} with method "
            f"{getattr(result, 'method', None)!r}."
        )
    ll, nu = float(diag["log_likelihood"]), float(diag["n_parameters"])
    # AIC from ℓ̂ and ν where the engine does not report it; ICL only for models with classes (NaN otherwise)
    return {"log_likelihood": ll, "n_parameters": nu, "aic": float(diag.get("aic", -2.0 * ll + 2.0 * nu)),
            "bic": float(diag["bic"]), "icl": float(diag.get("icl", math.nan))}


@dataclass
class ComponentSelection:
    """What :func:`select_n_components` returns.

    Attributes
    ----------
    table : pandas.DataFrame indexed by K: log_likelihood, n_parameters, aic, bic, icl (NaN for a model
        without classes), collapsed, and, when computed, cv_log_likelihood (mean held-out log-likelihood per
        row over the folds), heywood (factor analysis: a noise variance at zero, a boundary maximum whose
        criteria stand) and dic / p_d (Spiegelhalter) and dic3 / p_d3 (Celeux et al. 2006).
        A fit with a collapsed component (:func:`~latentfs.inference.mixture.em.collapsed_components`)
        gets NaN criteria, as mclust reports NA for a singular fit (Scrucca et al. 2016), so it is never
        chosen: its likelihood is limited only by ``reg_covar``.
    best : dict criterion -> K minimising it (among fits without a collapsed component); ``"cv"`` -> the K
        maximising cv_log_likelihood.
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
    cv: int | None = None,
    dic_method: str = "gibbs",
    dic_options: dict[str, Any] | None = None,
    **fit_options: Any,
) -> ComponentSelection:
    """Fit ``model`` by EM for each K and tabulate AIC, BIC and ICL (and the cross-validated log-likelihood
    and DIC when asked).

    Parameters
    ----------
    model : a latentfs model with ``n_components`` and ``with_n_components`` whose ``method="em"`` fit reports
        its log-likelihood, free parameters and BIC: a mixture, factor analysis, a mixture of factor analysers,
        a latent trait model. Its K is replaced by each value of ``n_components``.
    X : data for the model (rows are observations).
    n_components : iterable of int
    seed, n_init, **fit_options : passed to the EM engine.
    cv : int or None
        Folds of the cross-validated log-likelihood (``cv_log_likelihood``: the rows are split once with
        ``seed`` into ``cv`` folds; each K is fitted on the other folds and scored on each by
        ``Posterior.score``, the mean held-out log-likelihood per row; ``best["cv"]`` maximises it). None
        (default): 5 folds for a model without classes (no ICL: factor analysis, latent trait), none for
        mixtures; 0 turns it off.
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

    Factor analysis, by BIC and by 5-fold cross-validated log-likelihood:

    >>> from latentfs.models.factor import FactorAnalysis
    >>> W = np.array([[1.0, 0.0], [0.9, 0.1], [0.8, 0.0], [0.7, 0.2], [0.0, 1.0], [0.1, 0.9], [0.0, 0.8], [0.2, 0.7]])
    >>> X = FactorAnalysis(2).simulate(300, loadings=W, noise_variance=0.2, mean=0.0, seed=0)["data"]
    >>> sel = select_n_components(FactorAnalysis(1), X, [1, 2, 3], n_init=1)
    >>> sel.best["bic"], sel.best["cv"]
    (2, 2)
    """
    import pandas as pd

    from latentfs.core.registry import fit

    if not hasattr(model, "with_n_components") or not hasattr(model, "n_components"):
        raise DataError(
            f"model must be a latentfs model with n_components and with_n_components (a mixture, FactorAnalysis, "
            f"MixtureOfFactorAnalyzers, LatentTrait); got {type(model).__name__}. For topic models choose K by "
            "held-out likelihood: latentfs.evaluate.heldout_estimators.select_n_components."
        )
    if cv is not None and (isinstance(cv, bool) or not isinstance(cv, (int, np.integer)) or cv == 1 or cv < 0):
        raise DataError(f"cv must be 0, None or an integer ≥ 2; got {cv!r}. It is the number of folds (0: none).")
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
            # FA's Heywood warning (a noise variance at zero) is expected when K is too large: the table says so
            warnings.filterwarnings("ignore", message=_HEYWOOD)
            res = fit(model.with_n_components(k), X, method="em", seed=seed, n_init=n_init, **fit_options)
        fits[k] = res
        collapsed = bool(res.diagnostics.get("collapsed"))
        crit = information_criteria(res)
        if collapsed:  # a degenerate maximiser: its likelihood is set by reg_covar, not by the data
            crit.update({c: math.nan for c in _CRITERIA})
        row = {"n_components": k, **crit, "collapsed": collapsed}
        if "heywood_features" in res.diagnostics:  # a boundary maximum (finite likelihood): criteria kept
            row["heywood"] = bool(res.diagnostics["heywood_features"])
        if extra:
            bayes[k], dics = _bayes_criteria(model.with_n_components(k), X, extra, dic_method, dic_options, seed)
            row.update(dics)
        if cv is None:  # a model without classes has no ICL: the held-out likelihood is its second criterion
            cv = 0 if "icl" in res.diagnostics else 5
        if cv:
            row["cv_log_likelihood"] = _cv_log_likelihood(model.with_n_components(k), X, int(cv), seed, n_init,
                                                          fit_options)
        rows.append(row)
    table = pd.DataFrame(rows).set_index("n_components")
    if table["collapsed"].all():
        raise DataError(
            f"every fit in n_components={ks} has a collapsed component (covariance at the reg_covar floor); "
            "no K can be chosen. Use a constrained covariance_type, a larger reg_covar, or jitter tied values."
        )
    best = {c: int(table[c].idxmin()) for c in _CRITERIA if table[c].notna().any()}
    best.update({c: int(table[c].idxmin()) for c in extra})
    if "cv_log_likelihood" in table:
        best["cv"] = int(table["cv_log_likelihood"].idxmax())
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


def _rows(X: Any, idx: np.ndarray) -> Any:
    """The rows ``idx`` of X (a DataFrame by position, a sparse or dense matrix by row)."""
    if hasattr(X, "iloc"):
        return X.iloc[idx]
    if hasattr(X, "tocsr"):
        return X.tocsr()[idx]
    return np.asarray(X)[idx]


def _cv_log_likelihood(
    model: Any, X: Any, folds: int, seed: Any, n_init: int, fit_options: dict[str, Any]
) -> float:
    """Mean held-out log-likelihood per row over ``folds`` folds (split once with ``seed``; Posterior.score)."""
    from latentfs.core.registry import fit
    from latentfs.inference.mixture.em import CollapsedComponentWarning

    n = int(X.shape[0])
    if folds > n:
        raise DataError(f"cv must be at most the number of rows ({n}); got {folds}. Pass fewer folds.")
    order = as_rng(seed).permutation(n)
    total = 0.0
    for test in np.array_split(order, folds):
        train = np.setdiff1d(np.arange(n), test)
        with warnings.catch_warnings():  # as for the fits on all rows: degenerate fits are part of choosing K
            warnings.simplefilter("ignore", CollapsedComponentWarning)
            warnings.filterwarnings("ignore", message=_HEYWOOD)
            res = fit(model, _rows(X, train), method="em", seed=seed, n_init=n_init, **fit_options)
        total += float(res.score(_rows(X, test))) * test.size
    return total / n


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


_T = TypeVar("_T")


def accepted_replicates(n: int, draw: Callable[[], _T], give_up: Callable[[int], str]) -> list[_T]:
    """``n`` values of ``draw()``, one bootstrap replicate each; a replicate the model refuses (``draw`` raises
    :class:`DataError`: a constant column, a collapsed component) is drawn again. After ``10 n`` draws, a
    :class:`DataError` with the message ``give_up(rejected)``, ``rejected`` the draws refused."""
    out: list[_T] = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 10 * n:
            raise DataError(give_up(tries - 1))
        try:
            out.append(draw())
        except DataError:
            continue
    return out


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

    def replicate() -> float:
        Xb = fam.sample_data(params, n, rng)
        return _lrt_statistic(model, Xb, k0, int(rng.integers(2**31)), n_init, fit_options)[0]

    def give_up(rejected: int) -> str:
        return (
            f"bootstrap_lrt could not draw valid replicates from the fitted {k0}-component model "
            f"({rejected} attempts were rejected). Use more data or fewer components."
        )

    null_stats = np.asarray(accepted_replicates(n_bootstrap, replicate, give_up))
    p = (1.0 + float((null_stats >= stat).sum())) / (n_bootstrap + 1.0)
    return BootstrapLRT(statistic=stat, p_value=p, null_statistics=null_stats, n_components=k0)
