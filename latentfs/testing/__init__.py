"""The conformance harness: the checks every engine and estimator of latentfs passes (issue 13, item 5).

A new engine is added by passing these, as scikit-learn's estimator checks do for estimators. They are
plain functions that raise ``AssertionError`` with a message saying what differed, so they work in
pytest and in a notebook alike.

Oracles
    :func:`pyro_log_density` — the log density of a Pyro model at given values of its sample sites (the
    single source of truth every engine's log joint and bound is checked against).

Statistics with stated false-alarm rates
    :func:`z_test` (a Monte Carlo estimate against a target, two-sided), :func:`chi2_test` (counts of a
    sampler against exact probabilities), :func:`false_alarm_rate`.

Engine checks
    :func:`check_reproducible` (same seed, same numbers; another seed, other numbers),
    :func:`check_interruptible` (Ctrl-C returns what was computed, flagged),
    :func:`check_result_contract` (the one result type: shapes, kinds, no NaN, save/load identical).

    :func:`check_engine` — the engine-level counterpart of ``check_estimator``, run for every registered
    ``(model, method)`` pair (:func:`tiny_model` and :func:`tiny_data` give each model class a tiny problem): the
    option schema (unknown names, wrong types), the seed rule (same seed same numbers, the seed recorded, a
    ``seed=None`` fit refitted exactly from the recorded seed), Ctrl-C (engines with a ``callback``: what was
    computed comes back, flagged, with one warning), the result contract with save/load, the one diagnostics
    vocabulary, the data kept and exported as ArviZ's ``observed_data`` (:func:`check_observed`), a planted collapse
    flagged by every optimiser of a model with per-component variances (:func:`check_planted_collapse`), and for
    samplers one R̂ (``summary()`` prints the number ``diagnostics`` holds) and the joint relabelling
    (:func:`check_planted_switch`: a label switch planted in one chain is undone on every site); an engine that
    declares ``affine_equivariant`` fits a·X + b along the path of X (:func:`check_affine`).

    :func:`sbc` — simulation-based calibration of a sampler over data sets drawn from the model's Pyro program
    (:mod:`latentfs.testing.calibration`): ranks of the truth among thinned draws, χ² with a stated false-alarm rate.

Estimator checks
    :func:`check_estimator` — scikit-learn's ``check_estimator`` with the rule that no check may be
    skipped silently and at most two expected failures, each with a reason.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from latentfs.testing.calibration import sbc
from latentfs.testing.result_checks import (
    check_affine,
    check_observed,
    check_planted_collapse,
    check_planted_switch,
    planted_collapse,
)

__all__ = [
    "check_engine",
    "check_affine",
    "check_estimator",
    "check_interruptible",
    "check_observed",
    "check_planted_collapse",
    "check_planted_switch",
    "check_reproducible",
    "check_result_contract",
    "chi2_test",
    "false_alarm_rate",
    "planted_collapse",
    "pyro_log_density",
    "sbc",
    "tiny_data",
    "tiny_model",
    "z_test",
]


# ---------------------------------------------------------------------------------------------- oracles
def pyro_log_density(
    model_fn: Callable[..., Any],
    values: Mapping[str, Any],
    *args: Any,
    sites: list[str] | None = None,
    **kwargs: Any,
) -> float:
    """log p(values) under a Pyro model: the sum of ``log_prob`` of its sample sites (observed sites
    included) with the latent sites conditioned on ``values``.

    Runs under :func:`latentfs.core.pyro_context.pyro_scope`, so it is safe from two threads and leaves the
    caller's random state alone. A latent site missing from ``values`` would be *sampled*, which makes the
    number random: that is refused.

    Parameters
    ----------
    model_fn : a Pyro model (for example ``DirichletDCA(2).augmented_model``)
    values : dict site name -> value of the latent sites
    *args, **kwargs : passed to ``model_fn`` (the data)
    sites : list of str, optional
        Sum only these sites (default: every sample site).

    Examples
    --------
    >>> import torch, pyro, pyro.distributions as dist
    >>> def model(x):
    ...     mu = pyro.sample("mu", dist.Normal(0.0, 1.0))
    ...     pyro.sample("x", dist.Normal(mu, 1.0), obs=x)
    >>> round(pyro_log_density(model, {"mu": torch.tensor(0.0)}, torch.tensor(0.0)), 4)
    -1.8379
    """
    import torch
    from pyro import poutine
    from pyro.poutine.util import site_is_subsample

    from latentfs.core.pyro_context import pyro_scope

    with pyro_scope(seed=0), torch.no_grad():
        conditioned = poutine.condition(model_fn, data=dict(values))
        trace = poutine.trace(conditioned).get_trace(*args, **kwargs)
        trace.compute_log_prob()  # applies poutine.mask / obs masks and plate scales, as Pyro's own ELBOs do
        total = 0.0
        for name, site in trace.nodes.items():
            if site["type"] != "sample" or site_is_subsample(site) or (sites is not None and name not in sites):
                continue
            if not site["is_observed"]:
                raise AssertionError(
                    f"site {name!r} of the model was sampled, not conditioned: give its value in `values` "
                    "(a log density at a random point is not an oracle)."
                )
            total += float(site["log_prob_sum"])
    return total


# ---------------------------------------------------------------------------------------------- statistics
def false_alarm_rate(z: float) -> float:
    """``P(|Z| > z)`` for a standard normal Z: the chance that a two-sided :func:`z_test` at ``z`` fails for a
    correct engine."""
    return math.erfc(z / math.sqrt(2.0))


def z_test(estimate: float, target: float, standard_error: float, *, z: float = 4.5, what: str = "estimate") -> None:
    """Two-sided z-test: ``|estimate − target| ≤ z · standard_error``.

    The default z = 4.5 has false-alarm rate :func:`false_alarm_rate` (4.5) ≈ 6.8e-6 per call, so a suite
    of a thousand such tests fails spuriously less than once in a hundred runs.

    Examples
    --------
    >>> z_test(1.02, 1.0, 0.01)
    >>> z_test(1.2, 1.0, 0.01)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: estimate = 1.2 differs from 1 by 20 standard errors ...
    """
    if not (standard_error > 0 and math.isfinite(standard_error)):
        raise AssertionError(f"standard_error must be finite and > 0; got {standard_error}.")
    dist = abs(estimate - target) / standard_error
    if not dist <= z:
        raise AssertionError(
            f"{what} = {estimate:.6g} differs from {target:.6g} by {dist:.3g} standard errors (> {z}; "
            f"false-alarm rate {false_alarm_rate(z):.1e})."
        )


def chi2_test(
    observed: Any, probabilities: Any, *, alpha: float = 1e-4, min_expected: float = 5.0, what: str = "draws"
) -> float:
    """Pearson χ² goodness of fit of ``observed`` counts to exact ``probabilities``; returns the p-value.

    Cells with expected count below ``min_expected`` are pooled into one (the χ² approximation needs it).
    Fails when p < ``alpha``: the false-alarm rate for a correct sampler is ``alpha`` (default 1e-4).
    """
    from scipy import stats

    obs = np.asarray(observed, dtype=np.float64).ravel()
    p = np.asarray(probabilities, dtype=np.float64).ravel()
    if obs.shape != p.shape:
        raise AssertionError(f"observed has {obs.size} cells but probabilities has {p.size}.")
    if not np.isclose(p.sum(), 1.0, atol=1e-9) or (p < 0).any():
        raise AssertionError(f"probabilities must be ≥ 0 and sum to 1; they sum to {p.sum():.6g}.")
    n = obs.sum()
    expected = n * p
    small = expected < min_expected
    if small.any():
        obs = np.append(obs[~small], obs[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
        keep = expected > 0
        obs, expected = obs[keep], expected[keep]
    if obs.size < 2:
        raise AssertionError("fewer than two cells with enough expected counts: draw more samples.")
    pvalue = float(stats.chisquare(obs, expected).pvalue)
    if pvalue < alpha:
        raise AssertionError(
            f"{what} do not follow the exact distribution: χ² p-value {pvalue:.2e} < {alpha:g} "
            f"({n:.0f} draws, {obs.size} cells; false-alarm rate {alpha:g})."
        )
    return pvalue


# ---------------------------------------------------------------------------------------------- engine checks
def _site_arrays(result: Any) -> dict[str, np.ndarray]:
    return {site: np.asarray(result.mean(site)) for site in result.sites}


def check_reproducible(fit: Callable[[int], Any], *, seeds: tuple[int, int] = (0, 1)) -> None:
    """``fit(seed)`` returns the same numbers for the same seed, and other numbers for another seed.

    ``fit`` is a one-argument callable, e.g. ``lambda s: latentfs.fit(model, X, method="vb", seed=s)``.
    """
    a, b, c = fit(seeds[0]), fit(seeds[0]), fit(seeds[1])
    first, again, other = _site_arrays(a), _site_arrays(b), _site_arrays(c)
    for site, value in first.items():
        if not np.array_equal(value, again[site]):
            raise AssertionError(f"site {site!r} differs between two fits with seed {seeds[0]}: not reproducible.")
    if all(np.array_equal(v, other[s]) for s, v in first.items()):
        raise AssertionError(f"seeds {seeds[0]} and {seeds[1]} gave identical results: the seed is ignored.")


def check_interruptible(fit: Callable[[Callable[..., None]], Any], *, stop_at: int = 3) -> Any:
    """Ctrl-C during a fit returns what was computed, flagged, with one :class:`InterruptedFitWarning`.

    ``fit`` takes a callback and passes it to the engine (``callback=``); the callback raises
    ``KeyboardInterrupt`` at iteration ``stop_at``. Returns the interrupted result.
    """
    from latentfs.core.driver import InterruptedFitWarning

    def callback(it: int, *_: Any) -> None:
        if it == stop_at:
            raise KeyboardInterrupt

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit(callback)
    flagged = [w for w in caught if issubclass(w.category, InterruptedFitWarning)]
    if len(flagged) != 1:
        raise AssertionError(f"expected one InterruptedFitWarning after Ctrl-C, got {len(flagged)}.")
    if not result.diagnostics.get("interrupted", False):
        raise AssertionError("the interrupted result is not flagged: diagnostics['interrupted'] must be True.")
    return result


def check_result_contract(result: Any, *, save: bool = True) -> None:
    """The one result type's promises: every site's draws are shaped ``(chain, draw, *dims)`` with its named
    dims, the kind matches (a point has one draw and no band), means are finite, and a saved result loads
    back identical."""
    import latentfs

    kind = result.kind()
    if kind not in ("draws", "distribution", "point", "mixed"):
        raise AssertionError(f"kind() must be draws, distribution, point or mixed; got {kind!r}.")
    for site in result.sites:
        mean = np.asarray(result.mean(site))
        # a variable-dimension result (reversible jump) pads absent components with NaN: its draws may hold NaN,
        # never ±inf, and a mean is NaN only where some draw lacks that component
        padded = "padded" in str(result.diagnostics.get("storage", ""))
        if not (np.isfinite(mean).all() or (padded and not np.isinf(mean).any())):
            raise AssertionError(f"site {site!r} has a non-finite mean.")
        dims = result.dims.get(site, ())
        if len(dims) != mean.ndim:
            raise AssertionError(f"site {site!r} has shape {mean.shape} but dims {dims}.")
        for axis, dim in enumerate(dims):
            if dim in result.coords and len(result.coords[dim]) != mean.shape[axis]:
                raise AssertionError(
                    f"site {site!r} axis {axis} ({dim}) has {mean.shape[axis]} entries but "
                    f"{len(result.coords[dim])} coords."
                )
        if result.kind(site) == "point" and result.samples(site).shape[:2] != (1, 1):
            raise AssertionError(f"site {site!r} is a point but samples() gives {result.samples(site).shape[:2]}.")
    if save:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "result.npz"
            result.save(path)
            loaded = latentfs.load(path)
        for site in result.sites:
            if not np.array_equal(np.asarray(result.mean(site)), np.asarray(loaded.mean(site)), equal_nan=True):
                raise AssertionError(f"site {site!r} differs after save/load.")
        if loaded.kind() != kind:
            raise AssertionError(f"kind() was {kind!r} before save and {loaded.kind()!r} after.")


# ---------------------------------------------------------------------------------------------- check_engine
def tiny_model(model_class: type) -> Any:
    """A small instance of a built-in model class, for :func:`check_engine`; an AssertionError names a class that
    has none (a new model must add itself here, so that no registered engine escapes the checks)."""
    name = model_class.__name__
    two = {"GaussianMixture": {"mean_precision": 0.02}, "LatentProfile": {"mean_precision": 0.02}}
    if name in ("DirichletDCA", "GammaPoissonDCA", "ConditionalGammaPoissonDCA", "PLSA", "GaussianMixture",
                "LatentProfile", "LatentClass", "GaussianHMM", "HiddenPotts"):
        return model_class(2, **two.get(name, {}))
    if name == "FactorAnalysis":  # proper priors: the Gibbs sampler needs them
        return model_class(1, loading_scale=1.0, noise_shape=2.0, noise_scale=1.0)
    if name == "LatentTrait":
        return model_class(1)
    if name in ("MixtureOfFactorAnalyzers", "HDDAModel"):
        return model_class(2, 1)
    if name == "CategoricalHMM":
        return model_class(2, 3)
    if name == "UnivariateMixtureK":
        return model_class(2, max_components=5)
    raise AssertionError(f"latentfs.testing.tiny_model has no tiny instance of {name}: add one so that "
                         "check_engine runs on its engines.")


def tiny_data(model: Any) -> tuple[Any, dict[str, Any]]:
    """Tiny data for ``model`` (and the options the data need, such as an HMM's ``lengths``), drawn with a fixed
    seed: documents × words counts, rows × features, sequences or a lattice, as the model takes."""
    name = type(model).__name__
    rng = np.random.default_rng(0)
    kind = getattr(model, "data_kind", "continuous")
    if kind == "counts":
        from latentfs.models.dca import DirichletDCA

        return DirichletDCA(2).simulate(12, 15, 20, seed=0)["counts"], {}
    if kind == "sequences":
        if name == "CategoricalHMM":
            return rng.integers(0, 3, size=(40, 1)), {"lengths": [20, 20]}
        z = np.repeat([0, 1, 0, 1], 10)
        return (rng.normal(size=(40, 1)) + 3.0 * z[:, None]), {"lengths": [20, 20]}
    if kind == "lattice":
        z = np.zeros((8, 8))
        z[:, 4:] = 1
        return z + 0.3 * rng.normal(size=(8, 8)), {}
    if name == "LatentClass":
        return (rng.random((40, 4)) < np.where(np.arange(40) < 20, 0.8, 0.2)[:, None]).astype(float), {}
    if name == "LatentTrait":
        ability = rng.normal(size=(60, 1))
        return (rng.random((60, 4)) < 1 / (1 + np.exp(-2 * ability))).astype(float), {}
    if name == "UnivariateMixtureK":
        return np.concatenate([rng.normal(-2, 1, 20), rng.normal(3, 1, 20)]), {}
    if name == "FactorAnalysis":
        f = rng.normal(size=(60, 1))
        return f @ np.array([[1.0, 0.8, -0.6, 0.5]]) + 0.5 * rng.normal(size=(60, 4)), {}
    z = np.repeat([0.0, 1.0], 30)
    x = rng.normal(size=(60, 4)) + 4.0 * z[:, None] * np.array([1.0, -1.0, 0.5, 0.0])
    return x, {}


#: Options a tiny fit of a (model class, method) needs beyond its data's.
_NEEDS: dict[tuple[str, str], dict[str, Any]] = {("PLSA", "tem"): {"validation_fraction": 0.25}}

#: Options that keep a tiny fit short, set where an engine takes them.
_QUICK = {"max_iter": 15, "num_chains": 2, "num_warmup": 10, "num_samples": 20, "num_steps": 20, "n_passes": 1,
          "num_draws": 20, "progress": False, "warn": False}


def _fuzz_values(default: Any) -> list[Any]:
    """Values of the wrong type for an option with this default."""
    if isinstance(default, bool):
        return ["no"]
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        return ["x"]
    return []


def check_engine(model: Any, method: str, data: Any = None, **options: Any) -> Any:
    """The engine-level conformance checks of ``latentfs.fit(model, data, method=method)`` (module docstring);
    ``data`` defaults to :func:`tiny_data`. Raises AssertionError naming what failed; returns the first fit."""
    import latentfs
    from latentfs.core import registry
    from latentfs.core.data import DataError
    from latentfs.core.diagnostics import DIAGNOSTICS

    if data is None:
        data, needed = tiny_data(model)
        options = {**needed, **options}
    registry._load_engines(model)  # a fresh process has not imported the model's family yet
    engine = next((registry._ENGINES[(cls, method)] for cls in type(model).__mro__
                   if (cls, method) in registry._ENGINES), None)
    if engine is None:
        raise AssertionError(f"no engine {method!r} is registered for {type(model).__name__}.")
    valid = registry.engine_options(engine)
    where = f"{type(model).__name__} {method!r}"
    if valid is None:
        raise AssertionError(f"{where}: the engine takes **options, so unknown names cannot be refused.")
    quick = {k: v for k, v in _QUICK.items() if k in valid and k not in options}
    opts = {**quick, **_NEEDS.get((type(model).__name__, method), {}), **options}

    def fit(**extra: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return latentfs.fit(model, data, method=method, **{**opts, **extra})

    # the option schema: unknown names, wrong types
    try:
        fit(not_an_option=1)
    except DataError as exc:
        if "not_an_option" not in str(exc):
            raise AssertionError(f"{where}: the error for an unknown option does not name it: {exc}") from None
    else:
        raise AssertionError(f"{where}: an unknown option was accepted.")
    fuzz: list[tuple[str, Any]] = [("seed", "x")] if "seed" in valid else []
    if registry.is_spec(engine):
        fuzz += [(name, bad) for name, opt in engine.options.items()  # type: ignore[attr-defined]
                 if opt.check is not None for bad in _fuzz_values(opt.default)]
    for name, bad in fuzz:
        try:
            fit(**{name: bad})
        except DataError as exc:
            if name not in str(exc):
                raise AssertionError(f"{where}: the error for {name}={bad!r} does not name {name}: {exc}") from None
        else:
            raise AssertionError(f"{where}: {name}={bad!r} was accepted.")
    # the seed rule
    first, again = fit(seed=3), fit(seed=3)
    for site, value in _site_arrays(first).items():
        if not np.array_equal(value, _site_arrays(again)[site], equal_nan=True):  # NaN: an absent component
            raise AssertionError(f"{where}: site {site!r} differs between two fits with seed 3.")
    if "seed" in valid:
        if first.diagnostics.get("seed") != 3:
            raise AssertionError(f"{where}: diagnostics['seed'] is {first.diagnostics.get('seed')!r}, not the seed 3.")
        fresh = fit(seed=None)
        used = fresh.diagnostics.get("seed")
        if not isinstance(used, int):
            raise AssertionError(f"{where}: a seed=None fit recorded diagnostics['seed']={used!r}, not an int.")
        redo = fit(seed=used)
        for site, value in _site_arrays(fresh).items():
            if not np.array_equal(value, _site_arrays(redo)[site], equal_nan=True):
                raise AssertionError(f"{where}: refitting with the recorded seed {used} changed site {site!r}.")
    # Ctrl-C returns what was computed, flagged, for every engine that reports its iterations
    if "callback" in valid:
        longer = {"max_iter": 50, "tol": 0.0} if "max_iter" in valid and "tol" in valid else {}
        if "n_passes" in valid:  # a stream engine: enough mini-batches to be interrupted (tiny data make one a pass)
            longer["n_passes"] = 5
        # a sampler is interrupted two sweeps after its warm-up, when it has draws to return
        stop_at = int(opts["num_warmup"]) + 2 if "num_warmup" in opts else 2
        check_interruptible(lambda callback: latentfs.fit(model, data, method=method,
                                                          **{**opts, **longer, "seed": 3, "callback": callback}),
                            stop_at=stop_at)
    # relabelling: a label switch planted in one chain is undone on every component-indexed site jointly
    check_planted_switch(first, where)
    # equivariance: an engine that declares it fits a·X + b along the path it fits X
    if getattr(engine, "affine_equivariant", False):
        short = {"max_iter": 3, "tol": 0.0} if {"max_iter", "tol"} <= set(valid) else {}
        def fit_on(X: Any) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return latentfs.fit(model, X, method=method, **{**opts, "seed": 3, **short})

        check_affine(fit_on, data, where)
    # the result contract, save/load included
    check_result_contract(first)
    # ArviZ's observed_data is the data the fit was given
    check_observed(first, data, where)
    # a planted collapse is flagged by every optimiser of a model whose components carry their own variance
    if getattr(engine, "kind", None) == "optimizer":
        check_planted_collapse(model, method, {k: v for k, v in opts.items() if k not in ("max_iter", "warn")},
                               engine, where)
    # one diagnostics vocabulary
    unknown = sorted(set(first.diagnostics) - set(DIAGNOSTICS))
    if unknown:
        raise AssertionError(f"{where}: diagnostics keys {unknown} are not in latentfs.core.diagnostics.DIAGNOSTICS.")
    # one R̂: what summary() prints is what diagnostics holds
    if first.is_sampled and first.trace.shape[0] >= 2:
        conv = first.check_convergence(warn=False)
        table = first.summary()
        for site, entry in conv.items():
            rows = [i for i in table.index if str(i) == site or str(i).startswith(f"{site}[")]
            if rows and np.isfinite(entry["r_hat_max"]):
                shown = float(np.nanmax(table.loc[rows, "r_hat"].to_numpy(dtype=float)))
                if not math.isclose(shown, entry["r_hat_max"], rel_tol=1e-9, abs_tol=1e-12):
                    raise AssertionError(f"{where}: summary() R-hat {shown} for {site!r} but diagnostics say "
                                         f"{entry['r_hat_max']}.")
    return first


# ---------------------------------------------------------------------------------------------- estimators
def check_estimator(estimator: Any, *, expected_failed: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """scikit-learn's ``check_estimator`` under latentfs's rules: at most two expected failures, each with
    its reason; any other failure raises ``AssertionError`` naming the check. Array-API checks are left
    out (latentfs computes in numpy/torch and does not claim array-API support). Returns scikit-learn's
    per-check records."""
    from sklearn.utils.estimator_checks import check_estimator as sk_check

    expected = dict(expected_failed or {})
    if len(expected) > 2:
        raise AssertionError(f"at most two expected failures per estimator; got {len(expected)}: {sorted(expected)}.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = sk_check(estimator, on_fail=None, expected_failed_checks=expected)
    failed = [
        r for r in records if r["status"] == "failed" and "array_api" not in r["check_name"]
    ]
    if failed:
        first = failed[0]
        raise AssertionError(
            f"{type(estimator).__name__} fails scikit-learn's {first['check_name']}: {first['exception']} "
            f"({len(failed)} failed checks in all)."
        )
    return list(records)
