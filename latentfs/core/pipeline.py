"""One pipeline for every engine spec (DESIGN.md, contract 2).

An engine is a declarative :class:`EngineSpec` registered for a ``(model class, method)`` pair: an option schema
(:class:`Option`: default, rule, one-line meaning), ``prepare`` (the data, once per fit), and either

* an **optimiser** (EM, VB, MAP): ``start(prep, o, generator) -> state`` and ``step(prep, o, state) -> (state,
  objective)``, the objective at the state passed in; or
* a **sampler** (Gibbs): ``init(prep, o, generator) -> state``, ``sample(prep, o, state, generator) -> (state,
  lp)`` and ``collect(prep, o, state) -> {site: value}`` for each kept draw;

then ``export(prep, o, outcome) -> Export`` (the sites and extras the result holds). :func:`run` owns what is the
same for every engine, so no engine writes it again:

1. **options**: unknown names refused with the valid ones and the closest match; every value checked by its
   rule (the shared options, :data:`SHARED`, have one rule and one meaning everywhere); defaults filled in;
2. **the seed rule**: ``seed`` defaults to 0 for every engine and estimator; ``None`` draws a fresh seed from the
   operating system's entropy; a numpy or torch generator gives one draw; the integer actually used is recorded
   as ``diagnostics["seed"]``, so every result can be refitted exactly;
3. **restarts** (optimisers): start r draws from the r-th generator spawned from the seed
   (:func:`~latentfs.core.driver.chain_generators`), so the starts run one after another or in worker processes
   with the same result; optional short runs (Biernacki, Celeux & Govaert 2003) with the best start continued;
   runs ranked by degeneracy, then objective, near-ties to the earlier start (:func:`run_starts`);
   **chains** (samplers) through :func:`~latentfs.core.driver.run_sampler`;
4. **degeneracy**: ``degenerate(prep, o, state)`` lists the components at a degenerate point (a collapsed
   variance); the pipeline ranks restarts by it, warns with the spec's message and records the list as
   ``diagnostics["collapsed"]``;
5. **diagnostics** in one vocabulary (:data:`latentfs.core.diagnostics.DIAGNOSTICS`): ``seed``, ``converged``,
   ``n_iter``, ``interrupted``, ``restart_objectives``, ``best_restart`` (optimisers); ``num_chains``,
   ``num_samples``, ``interrupted`` (samplers), then the spec's own; ``dask_dashboard`` for a fit on a dask
   collection under a ``dask.distributed`` Client, whose link is also written once above the progress bar;
6. **the result**: one :class:`~latentfs.core.results.Posterior`; a sampler's draws relabelled on every
   component-indexed site jointly before its one R̂/ESS check (:meth:`Posterior.align`,
   :meth:`Posterior.check_convergence`).
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from latentfs.core.driver import OptimizerRun, SamplerRun, dask_dashboard, note_above_bar, run_sampler
from latentfs.core.errors import DataError
from latentfs.core.options import (
    _is_torch_generator,
    check_choice,
    check_device,
    check_dtype,
    check_flag,
    check_float,
    check_int,
    check_seed,
)
from latentfs.core.posterior_io import observed_array
from latentfs.core.restarts import SHORT_RUN_TOL, TIE_RTOL, Starts, _dropped_run, _Rank, run_starts  # noqa: F401

__all__ = [
    "EngineSpec",
    "Export",
    "Option",
    "Options",
    "SHARED",
    "Starts",
    "chain_options",
    "option_table",
    "resolve_seed",
    "run",
    "run_starts",
    "shared",
]


# ----------------------------------------------------------------------------- options
@dataclass(frozen=True)
class Option:
    """One engine option: its ``default``, its rule (``check(name, value) -> checked value``, raising a
    :class:`~latentfs.core.data.DataError` that names the option, the rule, the value and a remedy), the
    ``type`` as a reader writes it and a one-line ``meaning`` (the documentation's option tables come from
    here)."""

    default: Any
    check: Callable[[str, Any], Any] | None = None
    type: str = "any"
    meaning: str = ""


def _int_at_least(low: int, remedy: str = "") -> Callable[[str, Any], int]:
    return lambda name, value: check_int(name, value, low=low, remedy=remedy)


def _tolerance(name: str, value: Any) -> float:
    return check_float(name, value, 0.0, remedy=f"Pass a small non-negative number, e.g. {name}=1e-6.")


def _seed(name: str, value: Any) -> Any:
    return check_seed(value, name=name)


def _flag(name: str, value: Any) -> bool:
    return bool(check_flag(name, value))


def _maybe_flag(name: str, value: Any) -> bool | None:
    return check_flag(name, value, allow_none=True)


def _device(name: str, value: Any) -> torch.device:
    return check_device(value, name=name)


def _callback(name: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise DataError(
            f"{name} must be a function called as {name}(iteration, state, objective), or None; got "
            f"{value!r} ({type(value).__name__}). Pass a function or leave it out."
        )
    return value


def _n_init(name: str, value: Any) -> Any:
    if isinstance(value, str) and value == "auto":
        return value
    if isinstance(value, str):
        raise DataError(f"{name} must be 'auto' or a positive integer; got {value!r}. Pass {name}='auto' or e.g. 5.")
    return check_int(name, value, low=1, remedy=f"Pass {name}='auto' or a positive number of starts, e.g. 5.")


#: The options every engine that takes them shares: one rule and one meaning each (an engine may change the
#: default with :func:`shared`).
SHARED: dict[str, Option] = {
    "seed": Option(0, _seed, "int, None or generator",
                   "the random seed; the default 0 makes every fit reproducible, None draws a fresh one; the seed "
                   "used is recorded in diagnostics['seed']"),
    "warn": Option(True, _flag, "bool", "warn on non-convergence and degenerate fits"),
    "progress": Option(None, _maybe_flag, "bool or None", "a progress bar; None shows one when stderr is a terminal"),
    "max_iter": Option(1000, _int_at_least(1, "max_iter=0 would return the random start as a fit; pass e.g. "
                                              "max_iter=200."), "int ≥ 1", "the most iterations of a start"),
    "tol": Option(1e-6, _tolerance, "float ≥ 0", "stop when the objective's relative change is at most this"),
    "n_init": Option("auto", _n_init, "'auto' or int ≥ 1", "the number of random starts; the best one is kept"),
    "num_chains": Option(4, _int_at_least(1, "Pass num_chains=1 or more (4 lets R-hat compare chains)."),
                         "int ≥ 1", "the number of chains"),
    "num_warmup": Option(200, _int_at_least(0), "int ≥ 0", "the steps of each chain before draws are kept"),
    "num_samples": Option(500, _int_at_least(1, "A sampler needs at least one kept draw; pass e.g. "
                                                "num_samples=200."), "int ≥ 1", "the draws kept per chain"),
    "thin": Option(1, _int_at_least(1), "int ≥ 1", "keep every thin-th step after warm-up"),
    "device": Option("cpu", _device, "str or torch.device", "where the updates run ('cpu', 'cuda', 'cuda:1')"),
    "dtype": Option(torch.float64, lambda name, value: check_dtype(value, name=name), "torch dtype or its name",
                    "float64 (default) or float32"),
    "empty_documents": Option("error", lambda name, value: check_choice(name, value, ("error", "drop", "keep")),
                              "str", "documents without tokens: 'error', 'drop' or 'keep'"),
    "callback": Option(None, _callback, "callable or None", "called as callback(iteration, state, objective)"),
}


def chain_options(*, num_chains: int = 4, num_warmup: int = 200, num_samples: int = 500) -> dict[str, Option]:
    """The options of every sampler: its chain lengths (with the engine's defaults), ``thin``, ``seed``,
    ``progress`` and ``warn``."""
    return {
        "num_chains": shared("num_chains", num_chains),
        "num_warmup": shared("num_warmup", num_warmup),
        "num_samples": shared("num_samples", num_samples),
        "thin": shared("thin"),
        "seed": shared("seed"),
        "progress": shared("progress"),
        "warn": shared("warn"),
    }


def shared(name: str, default: Any = ..., meaning: str | None = None) -> Option:
    """The shared option ``name`` (:data:`SHARED`), with this engine's default or meaning where it differs."""
    base = SHARED[name]
    return replace(base, default=base.default if default is ... else default,
                   meaning=base.meaning if meaning is None else meaning)


class Options(dict):  # type: ignore[type-arg]
    """The checked options of one fit, read as attributes (``o.max_iter``) or items."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def resolve_seed(seed: Any) -> int:
    """The seed rule: an int is used as given; None draws a fresh one from the operating system's entropy; a
    numpy Generator, SeedSequence or torch.Generator gives one draw (so the generator moves on). Returns the int
    that seeds the fit, which the result records."""
    seed = check_seed(seed)
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1, dtype=np.uint64)[0] % 2**63)
    if _is_torch_generator(seed):
        return int(torch.randint(0, 2**62, (1,), generator=seed).item())
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**62))
    if isinstance(seed, np.random.SeedSequence):
        return int(seed.generate_state(1, dtype=np.uint64)[0] % 2**63)
    return int(seed)


def check_option_names(given: Mapping[str, Any], valid: list[str], model: str, method: str) -> None:
    """Refuse option names the engine does not take, listing the valid ones and the closest match."""
    unknown = sorted(set(given) - set(valid))
    if unknown:
        close = {u: difflib.get_close_matches(u, valid, n=1) for u in unknown}
        hints = "".join(f" Did you mean {c[0]!r} for {u!r}?" for u, c in close.items() if c)
        raise DataError(
            f"options {unknown} are not options of method {method!r} for {model}; valid options: {sorted(valid)}."
            + hints
        )


def option_table(spec: EngineSpec) -> str:
    """The spec's options as a Markdown table (name, type, default, meaning): the documentation's source."""
    def cell(text: object) -> str:  # a "|" in a cell (P(z|d)) would end the cell
        return str(text).replace("|", "\\|")

    rows = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for name, opt in spec.options.items():
        rows.append(f"| `{name}` | {cell(opt.type)} | `{cell(repr(opt.default))}` | {cell(opt.meaning)} |")
    return "\n".join(rows)


# ----------------------------------------------------------------------------- specs
@dataclass
class Export:
    """What an engine's ``export`` hands the pipeline: the result's axes, its sites (``fitted`` for an optimiser's
    parameters or variational factors, ``draws`` for a sampler's), ``extras``, the pointwise ``log_likelihood``
    (an array, or a function computed on first use), the engine's own ``diagnostics`` and ``sample_stats``, and
    ``lazy_extras`` set on the result after it is made (dask arrays stay lazy). ``relabel`` names the site and
    dimension a sampler's draws are relabelled on (jointly with every other component-indexed global site;
    ``relabel_also`` names dims that index the same components, such as a transition matrix's destination);
    ``alignment`` records an alignment the engine made itself (factor loadings are aligned by rotation, not by
    permutation)."""

    dims: dict[str, tuple[str, ...]]
    coords: dict[str, list[str]]
    fitted: dict[str, dict[str, Any]] | None = None
    draws: dict[str, np.ndarray] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    log_likelihood: Any = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    sample_stats: dict[str, np.ndarray] | None = None
    lazy_extras: dict[str, Any] = field(default_factory=dict)
    relabel: tuple[str, str] | None = None
    relabel_also: tuple[str, ...] = ()
    trace: np.ndarray | None = None
    alignment: dict[str, Any] | None = None
    #: extras computed per chain (running means over a chain's draws), by name → their component axis: relabelled
    #: with each chain's modal permutation before the pipeline aligns the draws (``Posterior.align``'s rule)
    chain_extras: dict[str, int] | None = None


class EngineSpec:
    """A declarative engine: subclass, set ``method``, ``kind`` and ``options``, and write the hooks of the kind.

    Optimisers (``kind = "optimizer"``): :meth:`prepare`, :meth:`n_starts`, :meth:`start`, :meth:`step`, optionally
    :meth:`finish`, :meth:`short_iter`, :meth:`degenerate` / :meth:`degenerate_message` (with
    ``degenerate_warning``), ``drop``; samplers (``kind = "sampler"``): :meth:`prepare`, :meth:`init`,
    :meth:`sample`, :meth:`collect`, optionally :meth:`after_align`; both: :meth:`export`. ``errors`` maps an
    exception type raised by the math (``FloatingPointError``) to the remedy appended to its message. Calling a
    spec runs it through :func:`run`.
    """

    method: str = ""
    kind: str = "optimizer"
    options: dict[str, Option] = {}
    #: what the progress bar and warnings call the fit ("EM GaussianMixture"): ``desc`` + the model's class name
    desc: str = "fit"
    remedies: str = "raise max_iter, loosen tol, or raise n_init"
    drop: tuple[type[BaseException], ...] = ()
    degenerate_warning: type[Warning] | None = None
    #: whether a degenerate run ranks below every other when restarts compete (a mixture's collapsed component is a
    #: spurious maximiser; a factor analysis's Heywood case may be the maximum likelihood itself)
    rank_degenerate: bool = True
    #: the diagnostics key of :meth:`degenerate`'s list (the one vocabulary: ``collapsed``; a noise variance at
    #: its bound: ``heywood_features``)
    degenerate_key: str = "collapsed"
    errors: dict[type[BaseException], str] = {}
    threadable: bool = False
    #: the engine fits a ``dask.array.Array`` shard by shard (its own ``prepare`` reads the shards); the registry
    #: lists these pairs where a dask array reaches an engine that would gather it (:func:`registry.dask_engines`)
    takes_dask: bool = False
    #: the fit of a·X + b (a > 0) is the fit of X transformed: same path from the same seed, the objective shifted
    #: by the Jacobian (starts, floors and priors relative to the data's scale); checked by ``check_engine``
    affine_equivariant: bool = False

    # -- both kinds
    def prepare(self, model: Any, data: Any, o: Options) -> Any:
        raise NotImplementedError

    def is_threadable(self, prep: Any, o: Options) -> bool:
        """Whether this fit's chains may run in threads (its steps release the GIL in compiled code); default the
        class's ``threadable``. An engine whose kernels pay for threads only on a large corpus decides here."""
        return bool(self.threadable)

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        raise NotImplementedError

    def hyperparameters(self, model: Any, prep: Any, o: Options) -> dict[str, Any]:
        return dict(model.hyperparameters())

    def finalize(self, post: Any, prep: Any, o: Options, outcome: Any) -> None:
        """Last touches on the assembled result (a function of the result itself, such as a log-likelihood drawn
        from it on first use; learned hyperparameters)."""

    def settled(self, prep: Any, o: Options, state: Any) -> bool:
        """Whether a run whose objective has stopped changing may stop (an engine refuses a stop on a plateau
        that only looks converged: the symmetric saddle of a topic model)."""
        return True

    # -- optimisers
    def n_starts(self, prep: Any, o: Options) -> int:
        return int(o.get("n_init", 1))

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> Any:
        """Start number ``index`` of the fit, drawn from its own generator ``gen``."""
        raise NotImplementedError

    def step(self, prep: Any, o: Options, state: Any) -> tuple[Any, float]:
        raise NotImplementedError

    def finish(self, prep: Any, o: Options, state: Any) -> Any:
        return state

    def short_iter(self, prep: Any, o: Options) -> int:
        return 0

    def degenerate(self, prep: Any, o: Options, state: Any) -> list[dict[str, Any]]:
        return []

    def degenerate_message(self, prep: Any, o: Options, flags: list[dict[str, Any]]) -> str:
        return f"the fit is degenerate: {flags}"

    def score(self, prep: Any, o: Options, run: OptimizerRun) -> float:
        """What ranks a start's run (default: its final objective)."""
        return run.objective

    def stop_tol(self, prep: Any, o: Options) -> float | None:
        """The relative change that stops a run (default: the ``tol`` option); None: a run without a stopping rule
        (a stream's: it ends after :meth:`max_iter` steps or when ``step`` raises
        :class:`~latentfs.core.driver.StreamEnd`; the result
        records ``converged=None`` and no run warns)."""
        return float(o.tol)

    def max_iter(self, prep: Any, o: Options) -> int | None:
        """The most steps of a run (default: the ``max_iter`` option). An engine that steps through a stream (online
        VB: one mini-batch per step) gives the stream's length, or None when only the stream knows it (an iterator
        of mini-batches: ``step`` raises :class:`~latentfs.core.driver.StreamEnd` at its end)."""
        return int(o.max_iter)

    def warn_unconverged(self, prep: Any, o: Options) -> bool:
        """Whether a run that used up ``max_iter`` warns (an engine with its own stopping rule warns itself)."""
        return bool(o.get("warn", True))

    def describe(self, model_name: str) -> str:
        """What the progress bar and the warnings call the fit: ``desc`` and the model's class name, or ``desc``
        alone when it names the model already."""
        return self.desc if model_name in self.desc else f"{self.desc} {model_name}"

    def report(self, o: Options) -> Callable[[int, Any, float], None] | None:
        """The per-iteration callback handed to the optimiser (the user's ``callback`` by default)."""
        return o.get("callback")

    # -- samplers
    def init(self, prep: Any, o: Options, gen: torch.Generator) -> Any:
        raise NotImplementedError

    def sample(self, prep: Any, o: Options, state: Any, gen: torch.Generator) -> tuple[Any, float]:
        raise NotImplementedError

    def collect(self, prep: Any, o: Options, state: Any) -> dict[str, Any]:
        raise NotImplementedError

    def checked_sites(self, prep: Any, o: Options) -> list[str] | None:
        """The sites whose R̂/ESS the pipeline checks and warns about (None: every sampled site). A
        variable-dimension sampler names its fixed-dimension sites: a reversible-jump chain's padded component
        slots change meaning with k, so their R̂ says nothing a user can act on."""
        return None

    def after_align(self, post: Any, prep: Any, o: Options, outcome: Any) -> None:
        """A sampler's last touches, once its draws are relabelled and their R̂/ESS checked: outputs counted on the
        relabelled draws (a hidden Potts model's label marginals, through ``post.relabel_permutations``), draws
        aligned and checked in the engine's own coordinates mapped to the data's units."""

    # -- the pipeline
    def check_options(self, given: Mapping[str, Any], model_name: str) -> Options:
        """The options of one fit: names checked against the schema, values by their rules, defaults filled in,
        the seed resolved by the seed rule (:func:`resolve_seed`)."""
        check_option_names(given, list(self.options), model_name, self.method)
        out = Options()
        for name, opt in self.options.items():
            value = given.get(name, opt.default)
            out[name] = opt.check(name, value) if opt.check is not None else value
        if "seed" in out:
            out["seed"] = resolve_seed(out["seed"])
        return out

    def __call__(self, model: Any, data: Any, **options: Any) -> Any:
        return run(self, model, data, options)


def run(spec: EngineSpec, model: Any, data: Any, options: Mapping[str, Any]) -> Any:
    """Fit ``model`` to ``data`` with ``spec``: options → seed → restarts or chains → degeneracy → diagnostics →
    :class:`~latentfs.core.results.Posterior` (module docstring)."""
    from latentfs.core.results import Posterior

    name = type(model).__name__
    o = spec.check_options(options, name)
    prep = spec.prepare(model, data, o)
    desc = spec.describe(name)
    flags: list[dict[str, Any]] = []
    dashboard = dask_dashboard(data)  # a fit on a dask collection under a distributed Client
    with note_above_bar(None if dashboard is None else f"Dask dashboard: {dashboard}"):
        try:
            if spec.kind == "sampler":
                outcome: Any = run_sampler(
                    lambda gen: spec.init(prep, o, gen),
                    lambda state, gen: spec.sample(prep, o, state, gen),
                    lambda state: spec.collect(prep, o, state),
                    num_chains=o.num_chains, num_warmup=o.num_warmup, num_samples=o.num_samples, thin=o.thin,
                    seed=o.seed, device=o.get("device", "cpu"), desc=desc, progress=o.get("progress"),
                    threadable=spec.is_threadable(prep, o), memory_budget=o.get("memory_budget"),
                )
                common: dict[str, Any] = {
                    "num_chains": int(outcome.trace.shape[0]),
                    "num_samples": int(outcome.n_draws),
                    "interrupted": bool(outcome.interrupted),
                }
            else:
                outcome = run_starts(
                    lambda gen, r: spec.start(prep, o, gen, r),
                    lambda state: spec.step(prep, o, state),
                    indexed=True, n_init=spec.n_starts(prep, o), seed=o.seed, max_iter=spec.max_iter(prep, o),
                    tol=spec.stop_tol(prep, o), score=lambda run: spec.score(prep, o, run),
                    short_iter=spec.short_iter(prep, o), finish=lambda state: spec.finish(prep, o, state),
                    degenerate=(lambda state: bool(spec.degenerate(prep, o, state))) if spec.rank_degenerate else None,
                    drop=spec.drop,
                    warn=spec.warn_unconverged(prep, o), desc=desc, remedies=spec.remedies, progress=o.get("progress"),
                    callback=spec.report(o), settled=lambda state: spec.settled(prep, o, state),
                )
                flags = spec.degenerate(prep, o, outcome.run.state)
                common = outcome.diagnostics()
        except tuple(spec.errors) as exc:  # the math's own failure, with the engine's remedy
            remedy = next(text for kind, text in spec.errors.items() if isinstance(exc, kind))
            raise DataError(f"{exc} {remedy}") from None
    if flags and o.get("warn", True) and spec.degenerate_warning is not None:
        warnings.warn(spec.degenerate_message(prep, o, flags), spec.degenerate_warning, stacklevel=3)
    ex = spec.export(prep, o, outcome)
    diagnostics = {"seed": o.seed, **ex.diagnostics, **common}
    if dashboard is not None:  # where a notebook user finds it after the fit
        diagnostics["dask_dashboard"] = dashboard
    if spec.kind == "optimizer" and spec.degenerate_warning is not None:
        diagnostics[spec.degenerate_key] = flags
    trace = ex.trace if ex.trace is not None else (
        outcome.trace if isinstance(outcome, SamplerRun) else outcome.run.trace[None])
    post = Posterior(
        model=name,
        method=spec.method,
        dims=ex.dims,
        coords=ex.coords,
        trace=trace,
        draws=ex.draws,
        fitted=ex.fitted,
        diagnostics=diagnostics,
        log_likelihood=ex.log_likelihood,
        extras=ex.extras,
        hyperparameters=spec.hyperparameters(model, prep, o),
        sample_stats=ex.sample_stats,
        alignment=ex.alignment,
    )
    post.extras.update(ex.lazy_extras)
    post.observed = observed_array(data)
    spec.finalize(post, prep, o, outcome)
    if spec.kind == "sampler":
        if ex.relabel is not None:
            post.align(*ex.relabel, also=ex.relabel_also, chain_extras=ex.chain_extras, warn=o.get("warn", True))
        post.check_convergence(spec.checked_sites(prep, o), warn=o.get("warn", True))
        spec.after_align(post, prep, o, outcome)
    return post
