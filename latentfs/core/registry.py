"""One entry point to fit (DESIGN.md, contract 2): ``fit(model, data, method=..., **options)``.

Engines register themselves for a ``(model class, method)`` pair with :func:`register`. An unknown
pair raises an error that lists the methods the model has.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from latentfs.core.data import DataError
from latentfs.core.options import check_flag
from latentfs.core.parallel import chain_method, check_chain_method, current_chain_method

if TYPE_CHECKING:  # what every registered engine returns; imported for the annotation only
    from latentfs.core.results import Posterior

__all__ = ["dask_engines", "data_kind", "engine_for", "engines", "fit", "register", "register_spec", "methods_for"]

_ENGINES: dict[tuple[type, str], Callable[..., Any]] = {}


def register(model_type: type, method: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``engine(model, data, **options)`` for ``(model_type, method)``."""

    def deco(engine: Callable[..., Any]) -> Callable[..., Any]:
        _ENGINES[(model_type, method)] = engine
        return engine

    return deco


def register_spec(spec: Any, *model_types: type) -> Any:
    """Register an :class:`~latentfs.core.pipeline.EngineSpec` for ``spec.method`` on each of ``model_types``:
    :func:`fit` runs it through the one pipeline (:func:`latentfs.core.pipeline.run`)."""
    for model_type in model_types:
        _ENGINES[(model_type, spec.method)] = spec
    return spec


def engines() -> dict[tuple[type, str], Callable[..., Any]]:
    """Every registered ``(model class, method) -> engine``, all families imported (``check_engine`` runs on each)."""
    _load_engines()
    return dict(_ENGINES)


def dask_engines() -> str:
    """The registered (model, method) pairs whose engines fit a dask array shard by shard (``takes_dask``), as a
    reader lists them: ``"DirichletDCA 'online_vb', 'partially_collapsed', 'vb'; FactorAnalysis 'em', 'map'; ..."``
    (the message a dask array gets from an engine that works in memory)."""
    _load_engines()
    by_model: dict[str, list[str]] = {}
    for (model_type, method), engine in _ENGINES.items():
        if getattr(engine, "takes_dask", False):
            by_model.setdefault(model_type.__name__, []).append(method)
    return "; ".join(f"{m} " + ", ".join(f"'{x}'" for x in sorted(ms)) for m, ms in sorted(by_model.items()))


def is_spec(engine: Any) -> bool:
    """Whether ``engine`` is a declarative spec run by the pipeline (not an engine entry function)."""
    return hasattr(engine, "check_options") and isinstance(getattr(engine, "options", None), dict)


def engine_for(model: Any, method: str) -> Any:
    """The engine registered for ``method`` on ``model``'s class (or its nearest base), or None."""
    _load_engines(model)
    mro = type(model).__mro__ if not isinstance(model, type) else model.__mro__
    return next((_ENGINES[(cls, method)] for cls in mro if (cls, method) in _ENGINES), None)


def methods_for(model: Any) -> list[str]:
    """The methods registered for ``model``'s class (or its bases)."""
    _load_engines(model)
    mro = type(model).__mro__ if not isinstance(model, type) else model.__mro__
    return sorted({m for (cls, m) in _ENGINES if cls in mro})


def fit(model: Any, data: Any, method: str | None = None, **options: Any) -> Posterior:
    """Fit ``model`` to ``data`` with the engine registered for ``method``.

    Parameters
    ----------
    model : a latentfs model instance (for example :class:`latentfs.DirichletDCA`)
    data : the data, in any form :mod:`latentfs.core.data` accepts for that model
    method : str, optional
        Engine name; defaults to the model's ``default_method``.
    **options
        Passed to the engine (``seed``, ``max_iter``, ``num_samples``…: every engine's options, with type,
        default and meaning, are tabled on its model family's page of the reference, docs/), except
        ``chain_method`` and the names of the data's axes. ``chain_method="parallel"`` runs a sampler's chains,
        or an optimiser's ``n_init`` restarts, each in a separate process (on the active Dask cluster when a
        ``dask.distributed`` Client exists), ``"threads"`` runs chains in threads of this process and
        ``"sequential"`` one after another, all with the same result for the same seed; the default ``"auto"``
        uses threads where the chains run in compiled code (collapsed Gibbs for DCA on large corpora) and
        torch may use two or more threads (:mod:`latentfs.core.parallel`); ``with
        latentfs.chain_method("parallel"):`` sets it for every fit in the block, estimators' included. The
        names of the data's axes work with every container (numpy, scipy.sparse, torch, pandas):
        ``feature_names=`` for the columns and ``document_names=`` (count models) or ``sample_names=``
        (continuous models) for the rows. They label the result's ArviZ coordinates and
        feature weights; duplicates are refused. A pandas DataFrame carries its own names.

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2)
    >>> X = model.simulate(n_documents=30, n_features=12, doc_length=40, seed=0)["counts"]
    >>> result = latentfs.fit(model, X, method="vb", seed=0, max_iter=50, warn=False)
    >>> result.samples("topic_word").shape
    (1, 200, 2, 12)
    >>> import scipy.sparse as sp
    >>> vocab = [f"word{j}" for j in range(12)]
    >>> named = latentfs.fit(model, sp.csr_matrix(X), method="vb", feature_names=vocab, seed=0, warn=False)
    >>> named.coords["feature"][:2]
    ['word0', 'word1']
    """
    _load_engines(model)
    if method is None:
        method = getattr(model, "default_method", None)
    if isinstance(model, type):
        raise DataError(
            f"model must be a model instance, not the class {model.__name__}; write {model.__name__}(n_components)."
        )
    names = {k: options.pop(k) for k in _NAME_OPTIONS if k in options}
    how = check_chain_method(options.pop("chain_method", current_chain_method()))
    for cls in type(model).__mro__:
        engine = _ENGINES.get((cls, method))  # type: ignore[arg-type]
        if engine is not None:
            if not is_spec(engine):  # a spec's names are checked by the pipeline, once
                _check_options(engine, options, type(model).__name__, method)  # type: ignore[arg-type]
            # the yes/no options every engine shares, checked once here: warn="no" would otherwise be true
            if "warn" in options:
                options["warn"] = check_flag("warn", options["warn"])
            if "progress" in options:
                options["progress"] = check_flag("progress", options["progress"], allow_none=True)
            seed = None
            if not is_spec(engine) and "seed" in (engine_options(engine) or ()):
                # the one seed rule, for the engines not yet run by the pipeline (which applies it itself)
                from latentfs.core.pipeline import resolve_seed

                seed = options["seed"] = resolve_seed(options.get("seed", 0))
            if names:
                data = _with_names(model, data, names, options)
            with chain_method(how):
                result = engine(model, data, **options)
            if isinstance(getattr(result, "diagnostics", None), dict):
                if seed is not None:
                    result.diagnostics.setdefault("seed", seed)
                if how not in ("auto", "sequential"):
                    result.diagnostics["chain_method"] = how
            return result
    available = methods_for(model)
    if not available:
        raise DataError(f"model must be a latentfs model with registered engines; got {type(model).__name__}.")
    raise DataError(f"method must be one of {available} for {type(model).__name__}; got {method!r}.")


_NAME_OPTIONS = ("feature_names", "document_names", "sample_names")


def data_kind(model: Any) -> str:
    """What a model's data are: ``"counts"`` (documents × words), ``"continuous"`` (samples × features),
    ``"sequences"`` or ``"lattice"``, as the model class declares it (``data_kind``; "continuous" when it does
    not). ``core`` names no family: each model says what it takes."""
    return str(getattr(model, "data_kind", "continuous"))


#: model class name -> (estimator module, estimator class name, the estimator's keyword arguments from a result's
#: hyperparameters): how :meth:`Posterior.estimator` (and so ``transform``, ``predict``, ``score``) rebuilds a
#: family's estimator from a result. Each family registers its own models when it is imported.
_NEW_DATA: dict[str, tuple[str, str, Callable[[dict[str, Any]], dict[str, Any]]]] = {}


def register_new_data(
    model_name: str, module: str, estimator: str, params: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> None:
    """Declare the estimator that handles new data for results of ``model_name`` (called by a family's
    ``__init__``): ``module.estimator(n_components=..., method=..., **params(hyperparameters))``."""
    _NEW_DATA[model_name] = (module, estimator, params or (lambda h: {}))


def new_data_estimator(model_name: str) -> tuple[str, str, Callable[[dict[str, Any]], dict[str, Any]]] | None:
    """The registration of :func:`register_new_data` for ``model_name``, importing the families first when this
    process has not imported the model's (a result loaded from a file knows its model only by name)."""
    if model_name not in _NEW_DATA:
        _load_engines()
    return _NEW_DATA.get(model_name)


def new_data_models() -> list[str]:
    """Every model whose results take new data (all families imported)."""
    _load_engines()
    return sorted(_NEW_DATA)


def _with_names(model: Any, data: Any, names: dict[str, Any], options: dict[str, Any]) -> Any:
    """Attach axis names to ``data`` with the validator of the model's data kind, applying the engine's own
    rule for empty documents (count engines take a named matrix as validated); continuous engines
    validate the named matrix again with their own rules."""
    from latentfs.core.data import as_continuous, as_counts
    from latentfs.core.shards import is_dask_array

    kind = data_kind(model)
    model_name = type(model).__name__
    if is_dask_array(data):
        raise DataError(
            f"{sorted(names)} cannot be attached to a dask array X (naming its rows or columns here would gather "
            "it); fit without them and name the result's axes afterwards, e.g. "
            "result.coords['feature'] = list(feature_names)."
        )
    if kind in ("sequences", "lattice"):
        what = "sequences" if kind == "sequences" else "a lattice (an image)"
        raise DataError(
            f"{sorted(names)} are not options for {model_name}: its data are {what}, not a named matrix. "
            "Drop the names; pass the data as the engine's docstring says."
        )
    rows, wrong = ("document_names", "sample_names") if kind == "counts" else ("sample_names", "document_names")
    if wrong in names:
        raise DataError(
            f"{wrong} is not an option for {model_name}: its rows are named with {rows}= "
            f"({'documents of a count matrix' if kind == 'counts' else 'samples of a continuous matrix'}). "
            f"Write {rows}=… instead."
        )
    if kind == "counts":
        return as_counts(
            data,
            empty_documents=options.get("empty_documents", "error"),
            document_names=names.get("document_names"),
            feature_names=names.get("feature_names"),
        )
    return as_continuous(
        data, missing="allow", sample_names=names.get("sample_names"), feature_names=names.get("feature_names")
    )


def engine_options(engine: Callable[..., Any]) -> list[str] | None:
    """The option names an engine accepts (a spec's schema, or an entry function's parameters after ``model``
    and ``data``), or None when it takes arbitrary ``**options`` and cannot be checked."""
    if is_spec(engine):
        return list(engine.options)  # type: ignore[attr-defined]
    params = list(inspect.signature(engine).parameters.values())[2:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in named]


def _check_options(engine: Callable[..., Any], options: dict[str, Any], model: str, method: str) -> None:
    valid = engine_options(engine)
    if valid is None:
        return
    unknown = sorted(set(options) - set(valid))
    if unknown:
        from latentfs.core.pipeline import check_option_names

        check_option_names(options, valid, model, method)


def _load_engines(model: Any = None) -> None:
    """Import engine modules, which register themselves on import. A built-in model's engines live in the family
    of the same name (``latentfs.models.dca`` → ``latentfs.inference.dca``), so only that family is imported for
    it (a fit of a DirichletDCA need not import scikit-learn or the other seven families); any other model, or
    none, imports every family."""
    if model is not None:
        for cls in (model if isinstance(model, type) else type(model)).__mro__:
            parts = cls.__module__.split(".")
            if parts[:2] == ["latentfs", "models"] and len(parts) > 2:
                family = f"latentfs.inference.{parts[2]}"
                if importlib.util.find_spec(family) is not None:
                    importlib.import_module(family)
                    return
    from latentfs.inference import load_all

    load_all()
