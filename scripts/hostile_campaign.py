"""The project's own bad-input campaign (issue 19): malformed inputs × public entry points, in one process.

Every class of malformed input named in issue 19 (containers and dtypes, options, numerical extremes, sizes,
files) is applied to every public entry point it fits: ``latentfs.fit`` for every model × method, the
scikit-learn estimators, ``simulate``, the result methods (``samples``, ``summary``, ``mean``,
``to_inference_data``) and ``latentfs.load``. Each run is classified as

* **clean**: a :class:`~latentfs.core.data.DataError`, or a finite result where the input is legal;
* **crash**: any other exception (including the per-run time limit and ``MemoryError`` under the memory cap);
* **silent**: a result where an error was due, or NaN/inf in a result.

An input that means the same as a legal one (a masked entry where NaN means missing, a 1-D array for an HMM, which
is one univariate sequence, numeric strings, which scikit-learn's estimators read as numbers) is checked against
its plain form: a DataError is clean, a result is clean only when it equals the result on the plain form, and when
the plain form is refused this one must be too.

Four more classes (issue 31, item 11) reach the entry points the in-memory classes do not: **dask**
(``latentfs.fit`` on a dask array for every engine that takes one, and the estimators' ``fit`` and new-data methods
on dask arrays, compared with the same method on the numpy data: a bad entry in one chunk only, columns split over
chunks, an empty chunk, unknown chunk sizes, 1-D, 3-D, zero rows, float and int8/uint8 counts, a dask DataFrame,
extreme scales), **streams** (``partial_fit`` with a bad batch first or after a good one, and the online engines
given an iterator or list of mini-batches with a bad one in the middle, whose DataError must name the batch, chunk or
row: one that does not counts as a crash), **shards** (``open_shards``/``save_shards`` on malformed folders and
arguments, and a fit on a folder with a bad shard) and **cli** (``latentfs.cli.main(argv)`` in-process: clean is a
non-zero exit with one line on stderr and no traceback, or a result where the input is legal).

Runs are in-process (``try``/``except``) under a per-run alarm (``--timeout`` seconds) and an address-space
cap (``--memory`` GiB above the start), so that a run asking for terabytes fails fast instead of swapping.

Usage (about 3-5 minutes on one core)::

    OMP_NUM_THREADS=1 python scripts/hostile_campaign.py                  # the working tree
    git archive 5adbc47 | tar -x -C /tmp/before
    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/before python scripts/hostile_campaign.py   # an older tree

``--only CLASS ...`` runs some classes, ``--entry TEXT ...`` only the entry points whose label contains one of
the strings (``--entry HMM HDDC``), for a quick look while fixing. ``--details FILE`` writes every non-clean run
(entry point, input, outcome, message) as JSON.
"""

# ruff: noqa: B023  (every thunk runs at once, inside the loop that builds it)
from __future__ import annotations

import argparse
import atexit
import contextlib
import io
import json
import os
import pickle
import resource
import shutil
import signal
import sys
import tempfile
import time
import warnings
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

# ----------------------------------------------------------------------------------------------- outcomes

LEGAL, ILLEGAL, EITHER = "legal", "illegal", "either"  # EITHER: a DataError or a finite result are both clean


@dataclass
class Same:
    """The legality of an input that means the same as the legal ``ref`` (a masked entry and NaN, a 1-D series
    and its column, numeric strings and their numbers): a DataError is clean, and so is a result equal to the
    result on ``ref``; a result that differs is silent. When ``ref`` itself is refused, the input must be too."""

    ref: Any
    rtol: float = 1e-8


class RunTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise RunTimeout("time limit")


@dataclass
class Outcome:
    klass: str
    entry: str
    case: str
    status: str  # clean / crash / silent
    detail: str


def _finite(obj: Any, depth: int = 0) -> bool:
    """Whether every number reachable in ``obj`` (arrays, dicts, a Posterior's draws and fits) is finite."""
    if depth > 4:
        return True
    if obj is None or isinstance(obj, (str, bool)):
        return True
    if isinstance(obj, (int, float, np.number)):
        return bool(np.isfinite(obj))
    if isinstance(obj, np.ndarray):
        return obj.dtype.kind not in "fc" or bool(np.isfinite(obj).all())
    if sp.issparse(obj):
        return _finite(obj.data, depth + 1)
    if hasattr(obj, "detach"):
        return _finite(obj.detach().cpu().numpy(), depth + 1)
    if isinstance(obj, dict):
        return all(_finite(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_finite(v, depth + 1) for v in obj)
    if type(obj).__name__ == "Posterior":
        return all(_finite(obj.mean(s), depth + 1) for s in obj.sites)
    if hasattr(obj, "values") and hasattr(obj, "columns"):  # DataFrame: a point's sd, band and R̂ are NaN by design
        cols = ["mean"] if "mean" in obj.columns else list(obj.select_dtypes("number").columns)
        return _finite(np.asarray(obj[cols], dtype=float), depth + 1)
    return True


def _same(a: Any, b: Any, rtol: float = 1e-8) -> bool:
    """Whether two results agree: every site's mean of two Posteriors, or two arrays (NaN equal to NaN)."""
    if type(a).__name__ == "Posterior" and type(b).__name__ == "Posterior":
        return a.sites == b.sites and all(_same(a.mean(s), b.mean(s), rtol) for s in a.sites)
    if isinstance(a, float) and isinstance(b, float):
        return bool(np.isclose(a, b, rtol=rtol, atol=1e-12, equal_nan=True))
    if hasattr(a, "shape") or hasattr(b, "shape"):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=1e-12, equal_nan=True))
    return True


def run_one(klass: str, entry: str, case: str, legality: Any, thunk: Callable[[], Any], timeout: int,
            expect: Callable[[], Any] | None = None) -> Outcome:
    """Run ``thunk`` and classify it; with ``legality`` a :class:`Same`, ``expect`` computes the reference."""
    from latentfs.core.data import DataError

    reference: Any = None
    rtol = 1e-8
    if isinstance(legality, Same):
        rtol = legality.rtol
        assert expect is not None
        ref = run_one(klass, entry, case + " (reference)", LEGAL, expect, timeout)
        if ref.status != "clean" or ref.detail.startswith("DataError"):
            legality = ILLEGAL  # the plain form is refused: so must this one be
        else:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                reference = expect()
            legality = EITHER

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(
            io.StringIO()
        ):
            warnings.simplefilter("ignore")
            result = thunk()
        signal.alarm(0)
    except DataError as exc:
        signal.alarm(0)
        return Outcome(klass, entry, case, "clean", f"DataError: {str(exc)[:160]}")
    except BaseException as exc:  # noqa: BLE001 - the point is to classify everything
        signal.alarm(0)
        if isinstance(exc, KeyboardInterrupt):
            raise
        return Outcome(klass, entry, case, "crash", f"{type(exc).__name__}: {str(exc)[:160]}")
    try:
        finite = _finite(result)
    except Exception as exc:  # noqa: BLE001
        return Outcome(klass, entry, case, "crash", f"result unreadable: {type(exc).__name__}: {str(exc)[:120]}")
    if not finite:
        return Outcome(klass, entry, case, "silent", "NaN/inf in the result")
    if reference is not None and not _same(result, reference, rtol):
        return Outcome(klass, entry, case, "silent", "differs from the result on the same data given plainly")
    if legality == ILLEGAL:
        return Outcome(klass, entry, case, "silent", "returned a result where an error was due")
    return Outcome(klass, entry, case, "clean", "finite result")


# ----------------------------------------------------------------------------------------------- data

RNG = np.random.default_rng(0)
COUNTS = RNG.poisson(3.0, size=(24, 8)).astype(np.int64)
COUNTS[:, 0] += 1  # no empty documents
_Z = RNG.normal(size=(40, 2))
CONT = _Z @ RNG.normal(size=(2, 6)) + 0.5 * RNG.normal(size=(40, 6)) + np.repeat([[0.0], [4.0]], 20, axis=0)
CATEG = RNG.integers(0, 3, size=(40, 5))
SEQ = RNG.normal(size=(40, 2))
SEQ_CAT = RNG.integers(0, 3, size=(40, 1))


def _kind(model: Any) -> str:
    name = type(model).__name__
    if "DCA" in name or name == "PLSA":
        return "counts"
    if name == "LatentClass":
        return "categorical"
    if name == "CategoricalHMM":
        return "seq_cat"
    if name == "GaussianHMM":
        return "seq"
    return "continuous"


def base_data(kind: str) -> np.ndarray:
    return {"counts": COUNTS, "continuous": CONT, "categorical": CATEG, "seq": SEQ, "seq_cat": SEQ_CAT}[kind]


def fit_targets() -> list[tuple[str, Any, str]]:
    """(label, model factory, method) for every registered model × method."""
    import latentfs
    from latentfs.core.registry import _ENGINES, _load_engines

    _load_engines()
    makers: dict[str, Callable[[], Any]] = {
        "DirichletDCA": lambda: latentfs.DirichletDCA(2),
        "GammaPoissonDCA": lambda: latentfs.GammaPoissonDCA(2),
        "ConditionalGammaPoissonDCA": lambda: latentfs.ConditionalGammaPoissonDCA(2),
        "PLSA": lambda: latentfs.PLSA(2),
        "FactorAnalysis": lambda: latentfs.FactorAnalysis(2),
        "MixtureOfFactorAnalyzers": lambda: latentfs.MixtureOfFactorAnalyzers(2, 1),
        "HDDAModel": lambda: latentfs.HDDAModel(2),
        "GaussianMixture": lambda: latentfs.GaussianMixture(2, covariance_type="diag"),
        "LatentProfile": lambda: latentfs.LatentProfile(2),
        "LatentClass": lambda: latentfs.LatentClass(2),
        "GaussianHMM": lambda: latentfs.GaussianHMM(2),
        "CategoricalHMM": lambda: latentfs.CategoricalHMM(2),
    }
    out = []
    for cls, method in sorted(_ENGINES, key=lambda cm: (cm[0].__name__, cm[1])):
        if cls.__name__ in makers:
            out.append((f"fit[{cls.__name__}/{method}]", makers[cls.__name__], method))
    return out


def engine_params(model: Any, method: str) -> list[str] | None:
    from latentfs.core.registry import _ENGINES, engine_options

    for cls in type(model).__mro__:
        eng = _ENGINES.get((cls, method))
        if eng is not None:
            names = engine_options(eng)
            if names is None and type(model).__name__ == "PLSA":  # a wrapper taking **options around fit_plsa
                from latentfs.inference.plsa.em import fit_plsa

                names = engine_options(fit_plsa)
            return names
    return []


FAST = {
    "max_iter": 15, "num_samples": 4, "num_warmup": 4, "num_chains": 1, "n_init": 1, "n_restarts": 1,
    "num_steps": 5, "num_draws": 4, "warn": False, "seed": 0, "progress": False,
}


def fast_options(model: Any, method: str, **override: Any) -> dict[str, Any]:
    accepted = engine_params(model, method)
    opts = {}
    for k, v in {**FAST, **override}.items():
        if accepted is None or k in accepted:
            opts[k] = v
    if isinstance(accepted, list) and "lengths" in accepted:
        opts.setdefault("lengths", [20, 20])
    return opts


# ----------------------------------------------------------------------------------------------- input classes


def container_cases(X: np.ndarray, kind: str) -> Iterator[tuple[str, str, Any]]:
    """(name, legality, data) for the containers-and-dtypes class, built from the legal ``X``."""
    import torch

    mask = np.zeros(X.shape, dtype=bool)
    mask[0, -1] = True
    # where NaN means missing a masked entry is missing: the fit must equal the fit with NaN there
    yield "masked array", Same(np.where(mask, np.nan, X.astype(np.float64))), np.ma.masked_array(
        np.where(mask, 99, X), mask=mask)
    yield "datetime64", ILLEGAL, X.astype("datetime64[D]")
    yield "timedelta64", ILLEGAL, X.astype("timedelta64[s]")
    yield "ragged list", ILLEGAL, [list(r) for r in X[:3]] + [list(X[3, :2])]
    yield "torch meta tensor", ILLEGAL, torch.empty(X.shape, device="meta")
    # numeric strings: refused by latentfs.fit; scikit-learn's estimators read '3' as 3.0 (then equal results)
    yield "string array", Same(X.astype(np.float64)), X.astype(str).astype(object)
    # a 1-D array is one univariate sequence for the HMMs (documented), an error elsewhere
    yield "1-D array", Same(X[:, :1].copy()) if kind.startswith("seq") else ILLEGAL, X[:, 0].copy()
    yield "3-D array", ILLEGAL, X[None, :, :].copy()
    yield "0 rows", ILLEGAL, X[:0]
    yield "complex", ILLEGAL, X.astype(np.complex128) + 1j
    yield "None", ILLEGAL, None
    if kind == "counts":
        yield "sparse uint8 duplicates overflow", EITHER, _dup_overflow(X, np.uint8)
        yield "sparse int8 duplicates overflow", EITHER, _dup_overflow(X, np.int8)
        yield "negative count", ILLEGAL, np.where(mask, -1, X)
        yield "fractional count", ILLEGAL, np.where(mask, 0.5, X)
    else:
        yield "object array with None", ILLEGAL, np.where(mask, None, X.astype(object))


def _dup_overflow(X: np.ndarray, dtype: Any) -> sp.coo_matrix:
    rows, cols = np.nonzero(X)
    vals = X[rows, cols].astype(dtype)
    rows = np.concatenate([rows, [0, 0]])
    cols = np.concatenate([cols, [0, 0]])
    vals = np.concatenate([vals, np.array([100, 100] if dtype == np.int8 else [200, 100], dtype=dtype)])
    return sp.coo_matrix((vals, (rows, cols)), shape=X.shape)


def option_cases(model: Any, method: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(name, legality, options) for the options class, only those the engine takes."""
    import torch

    accepted = engine_params(model, method) or []
    cases: list[tuple[str, str, str, Any]] = [
        ("max_iter", "max_iter=0", ILLEGAL, 0),
        ("max_iter", "max_iter=-1", ILLEGAL, -1),
        ("max_iter", "max_iter=2.5", ILLEGAL, 2.5),
        ("tol", "tol=nan", ILLEGAL, float("nan")),
        ("tol", "tol=-1", ILLEGAL, -1.0),
        ("seed", "seed=1.5", ILLEGAL, 1.5),
        ("seed", "seed=-1", ILLEGAL, -1),
        ("seed", "seed='abc'", ILLEGAL, "abc"),
        ("dtype", "dtype=torch.int64", ILLEGAL, torch.int64),
        ("dtype", "dtype='float32'", LEGAL, "float32"),
        ("dtype", "dtype=torch.float16", ILLEGAL, torch.float16),
        ("device", "device='meta'", ILLEGAL, "meta"),
        ("device", "device='gpu0'", ILLEGAL, "gpu0"),
        ("device", "device='cuda' (CPU build)", ILLEGAL if not torch.cuda.is_available() else LEGAL, "cuda"),
        ("num_samples", "num_samples=0", ILLEGAL, 0),
        ("num_samples", "num_samples=-2", ILLEGAL, -2),
        ("num_warmup", "num_warmup=-1", ILLEGAL, -1),
        ("num_chains", "num_chains=0", ILLEGAL, 0),
        ("thin", "thin=0", ILLEGAL, 0),
        ("n_init", "n_init=0", ILLEGAL, 0),
        ("n_restarts", "n_restarts=0", ILLEGAL, 0),
        ("num_ll_draws", "num_ll_draws=-3", ILLEGAL, -3),
        ("store", "store='topic_word'", EITHER, "topic_word"),
        ("store", "store=('nosuchsite',)", ILLEGAL, ("nosuchsite",)),
        ("inner_iters", "inner_iters=0", ILLEGAL, 0),
        ("regularization", "regularization=-1", ILLEGAL, -1.0),
        ("reg_covar", "reg_covar=-1", ILLEGAL, -1.0),
        ("threshold", "threshold=2", ILLEGAL, 2.0),
        ("num_steps", "num_steps=0", ILLEGAL, 0),
        ("batch_size", "batch_size=0", ILLEGAL, 0),
        ("empty_documents", "empty_documents='maybe'", ILLEGAL, "maybe"),
    ]
    for name, label, legality, value in cases:
        if name in accepted:
            yield label, legality, {name: value}


def numeric_cases(X: np.ndarray, kind: str) -> Iterator[tuple[str, str, Any]]:
    """(name, legality, data) for the numerical-extremes class."""
    if kind == "counts":
        big = X.astype(np.float64).copy()
        big[0, 0] = 1e300
        yield "1e300 cell", ILLEGAL, big
        zeros = X.copy()
        zeros[:, 3] = 0
        yield "all-zero column", EITHER, zeros
        yield "one feature", EITHER, X[:, :1].copy()
        yield "two rows", EITHER, X[:2].copy()
        yield "nan cell", ILLEGAL, np.where(np.eye(*X.shape, dtype=bool), np.nan, X.astype(float))
        yield "inf cell", ILLEGAL, np.where(np.eye(*X.shape, dtype=bool), np.inf, X.astype(float))
        yield "bool matrix", EITHER, X > 2
        return
    Xf = X.astype(np.float64)
    big = Xf.copy()
    big[0, 0] = 1e300
    yield "1e300 cell", EITHER, big
    yield "constant data", EITHER, np.ones_like(Xf)
    yield "one feature", EITHER, Xf[:, :1].copy()
    if kind in ("continuous", "seq"):
        yield "duplicated column", EITHER, np.column_stack([Xf, Xf[:, :1]])
        yield "n < d", EITHER, Xf[:3].copy()
        yield "two rows", EITHER, Xf[:2].copy()
        yield "scaled by 1e12", EITHER, Xf * 1e12
        yield "scaled by 1e-12", EITHER, Xf * 1e-12
        yield "inf cell", ILLEGAL, np.where(np.eye(*Xf.shape, dtype=bool), np.inf, Xf)
        yield "nan cell", EITHER, np.where(np.eye(*Xf.shape, dtype=bool), np.nan, Xf)
    else:
        yield "negative category", ILLEGAL, np.where(np.eye(*X.shape, dtype=bool), -1, X)
        yield "fractional category", ILLEGAL, np.where(np.eye(*X.shape, dtype=bool), 0.5, X)


def size_cases(X: np.ndarray, kind: str) -> Iterator[tuple[str, str, Any]]:
    if kind == "counts":
        huge = X.astype(np.int64).copy()
        huge[0, 0] = 10**12
        yield "count 1e12", EITHER, huge
        top = X.astype(np.int64).copy()
        top[0, 0] = np.iinfo(np.int64).max
        yield "count int64 max", ILLEGAL, top
    yield "n_components > n_samples", EITHER, X[:1].copy()


# ----------------------------------------------------------------------------------------------- campaign


_LEGAL_X = object()  # est_run's marker for "the estimator's own legal data" (None is a case of its own)


def campaign(timeout: int, only: set[str] | None,  # noqa: C901 - a flat list of cases
             entry_filter: list[str] | None = None) -> list[Outcome]:
    import latentfs

    out: list[Outcome] = []

    def add(klass: str, entry: str, case: str, legality: Any, thunk: Callable[[], Any],
            expect: Callable[[], Any] | None = None) -> None:
        if only is not None and klass not in only:
            return
        if entry_filter and not any(f in entry for f in entry_filter):
            return
        out.append(run_one(klass, entry, case, legality, thunk, timeout, expect))

    targets = fit_targets()
    fitted: dict[str, Any] = {}
    for label, make, method in targets:
        if entry_filter and not any(f in label for f in entry_filter):
            continue
        model = make()
        kind = _kind(model)
        X = base_data(kind)

        def fit_with(data: Any, make: Callable[[], Any] = make, method: str = method, **opts: Any) -> Any:
            m = make()
            return latentfs.fit(m, data, method=method, **fast_options(m, method, **opts))

        # the control run: legal data, legal options
        t0 = time.perf_counter()
        control = run_one("control", label, "legal data", LEGAL, lambda: fit_with(X), timeout)
        out.append(control)
        if control.status == "clean":
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted[label] = fit_with(X)
        print(f"  {label}: control {control.status} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr)
        for case, legality, data in container_cases(X, kind):
            add("containers", label, case, legality, lambda data=data: fit_with(data),
                (lambda ref=legality.ref: fit_with(ref)) if isinstance(legality, Same) else None)
        for case, legality, opts in option_cases(model, method):
            add("options", label, case, legality, lambda opts=opts: fit_with(X, **opts))
        add("options", label, "model class, not instance", ILLEGAL,
            lambda: latentfs.fit(type(model), X, method=method))
        for case, legality, data in numeric_cases(X, kind):
            add("numerical", label, case, legality, lambda data=data: fit_with(data))
        for case, legality, data in size_cases(X, kind):
            add("sizes", label, case, legality, lambda data=data: fit_with(data))

    # simulate and constructors
    sims: list[tuple[str, Callable[..., Any], dict[str, Any]]] = [
        ("DirichletDCA", lambda **k: latentfs.DirichletDCA(2).simulate(**k), {"n_documents": 5, "n_features": 4}),
        ("GammaPoissonDCA", lambda **k: latentfs.GammaPoissonDCA(2, beta=1.0).simulate(**k),
         {"n_documents": 5, "n_features": 4}),
        ("ConditionalGammaPoissonDCA", lambda **k: latentfs.ConditionalGammaPoissonDCA(2, beta=1.0).simulate(**k),
         {"n_documents": 5, "n_features": 4}),
        ("PLSA", lambda **k: latentfs.PLSA(2).simulate(**k), {"n_documents": 5, "n_features": 4}),
        ("FactorAnalysis", lambda **k: latentfs.FactorAnalysis(2).simulate(**k), {"n_samples": 5, "n_features": 4}),
        ("HDDAModel", lambda **k: latentfs.HDDAModel(2, n_dims=1).simulate(**k), {"n_samples": 8, "n_features": 4}),
        ("GaussianMixture", lambda **k: latentfs.GaussianMixture(2).simulate(**k), {"n_samples": 5, "n_features": 4}),
        ("LatentClass", lambda **k: latentfs.LatentClass(2).simulate(**k), {"n_samples": 5, "n_features": 4}),
    ]
    for name, sim, legal in sims:
        entry = f"simulate[{name}]"
        add("control", entry, "legal", LEGAL, lambda sim=sim, legal=legal: sim(**legal, seed=0))
        size_key = next(iter(legal))
        for key, value in ((size_key, -1), (size_key, 0), ("n_features", 5.5)):
            add("options", entry, f"{key}={value}", ILLEGAL,
                lambda sim=sim, legal=legal, key=key, value=value: sim(**{**legal, key: value}))
        add("options", entry, "seed=1.5", ILLEGAL, lambda sim=sim, legal=legal: sim(**legal, seed=1.5))
        add("options", entry, "seed=-1", ILLEGAL, lambda sim=sim, legal=legal: sim(**legal, seed=-1))
        add("options", entry, "seed='abc'", ILLEGAL, lambda sim=sim, legal=legal: sim(**legal, seed="abc"))
    ctors = [("DirichletDCA", latentfs.DirichletDCA), ("GammaPoissonDCA", latentfs.GammaPoissonDCA),
             ("ConditionalGammaPoissonDCA", latentfs.ConditionalGammaPoissonDCA), ("PLSA", latentfs.PLSA),
             ("FactorAnalysis", latentfs.FactorAnalysis), ("HDDAModel", latentfs.HDDAModel),
             ("GaussianMixture", latentfs.GaussianMixture), ("LatentClass", latentfs.LatentClass),
             ("LatentProfile", latentfs.LatentProfile), ("GaussianHMM", latentfs.GaussianHMM),
             ("CategoricalHMM", latentfs.CategoricalHMM)]
    for name, cls in ctors:
        for case, value in (("n_components=0", 0), ("n_components=1.5", 1.5), ("n_components='2'", "2"),
                            ("n_components=-1", -1), ("n_components=True", True)):
            add("options", f"model[{name}]", case, ILLEGAL, lambda cls=cls, value=value: cls(value))
    add("options", "model[DirichletDCA]", "groups=[-1, 0]", ILLEGAL,
        lambda: latentfs.fit(latentfs.DirichletDCA(2, groups=[-1, 0]), COUNTS[:, :2], method="vb", max_iter=5))
    add("options", "model[DirichletDCA]", "alpha=nan", ILLEGAL, lambda: latentfs.DirichletDCA(2, alpha=float("nan")))
    add("options", "model[MixtureOfFactorAnalyzers]", "n_factors=0", ILLEGAL,
        lambda: latentfs.MixtureOfFactorAnalyzers(2, 0))

    # estimators
    estimators: list[tuple[str, Callable[..., Any], np.ndarray]] = [
        ("DCA", lambda **k: latentfs.DCA(2, **{"max_iter": 15, **k}), COUNTS),
        ("PLSAEstimator", lambda **k: latentfs.PLSAEstimator(2, **{"max_iter": 15, **k}), COUNTS),
        ("PLSATransformer", lambda **k: latentfs.PLSATransformer(2, **{"max_iter": 15, **k}), COUNTS),
        ("FactorAnalyzer", lambda **k: latentfs.FactorAnalyzer(2, **{"max_iter": 15, **k}), CONT),
        ("GaussianMixtureClusterer", lambda **k: latentfs.GaussianMixtureClusterer(2, **{"max_iter": 15, **k}), CONT),
        ("LatentProfileClusterer", lambda **k: latentfs.LatentProfileClusterer(2, **{"max_iter": 15, **k}), CONT),
        ("LatentClassClusterer", lambda **k: latentfs.LatentClassClusterer(2, **{"max_iter": 15, **k}), CATEG),
        ("HDDC", lambda **k: latentfs.HDDC(2, **{"max_iter": 15, "n_init": 1, **k}), CONT),
    ]
    for name, make_est, X in estimators:
        entry = f"estimator[{name}]"
        kind = "counts" if name.startswith(("DCA", "PLSA")) else ("categorical" if "Class" in name else "continuous")

        def est_run(data: Any, make_est: Callable[..., Any] = make_est, X: np.ndarray = X, **params: Any) -> Any:
            est = make_est(**params).fit(X if data is _LEGAL_X else data)  # (data=None is the "None" case)
            return est.transform(X[:5]) if hasattr(est, "transform") else est.predict(X[:5])

        add("control", entry, "legal", LEGAL, lambda est_run=est_run: est_run(_LEGAL_X))
        for case, legality, data in container_cases(X, kind):
            add("containers", entry, case, legality, lambda data=data, est_run=est_run: est_run(data),
                (lambda ref=legality.ref, est_run=est_run: est_run(ref)) if isinstance(legality, Same) else None)
        for case, legality, data in numeric_cases(X, kind):
            add("numerical", entry, case, legality, lambda data=data, est_run=est_run: est_run(data))
        for case, params in (("seed=1.5", {"seed": 1.5}), ("seed=-1", {"seed": -1}), ("max_iter=0", {"max_iter": 0}),
                             ("tol=nan", {"tol": float("nan")})):
            add("options", entry, case, ILLEGAL, lambda params=params, est_run=est_run: est_run(_LEGAL_X, **params))

    # result methods
    for label, post in fitted.items():
        entry = f"result[{label}]"
        site = post.sites[0] if post.sites else "nosite"
        add("control", entry, "summary()", LEGAL, lambda post=post: post.summary(max_entries=20))
        add("results", entry, "samples(num_draws=-1)", ILLEGAL, lambda post=post, site=site: post.samples(site, -1))
        add("results", entry, "samples(num_draws=2.5)", ILLEGAL, lambda post=post, site=site: post.samples(site, 2.5))
        add("results", entry, "samples('nosuchsite')", ILLEGAL, lambda post=post: post.samples("nosuchsite", 3))
        add("results", entry, "samples(seed='abc')", ILLEGAL,
            lambda post=post, site=site: post.samples(site, 3, seed="abc"))
        add("results", entry, "summary(level=1.5)", ILLEGAL, lambda post=post: post.summary(level=1.5))
        add("results", entry, "summary(level=nan)", ILLEGAL, lambda post=post: post.summary(level=float("nan")))
        add("results", entry, "summary(max_entries=-1)", ILLEGAL, lambda post=post: post.summary(max_entries=-1))
        add("results", entry, "mean('nosuchsite')", ILLEGAL, lambda post=post: post.mean("nosuchsite"))
        add("results", entry, "to_inference_data(num_draws=-1)", ILLEGAL,
            lambda post=post: post.to_inference_data(num_draws=-1))

    campaign_more(add, only)

    # files
    if only is not None and "files" not in only:
        return out
    any_post = next(iter(fitted.values()), None)
    with tempfile.TemporaryDirectory() as tmp:
        tdir = Path(tmp)
        good = None
        if any_post is not None:
            with contextlib.suppress(Exception):
                good = Path(any_post.save(tdir / "good.npz"))
        # the damaged files are written before the timed run (writing the 8 GiB zip bomb takes seconds itself)
        for case, make_file in file_cases(tdir, good):
            made = _made(make_file)
            add("files", "latentfs.load", case, ILLEGAL, lambda made=made: latentfs.load(made))
        if good is not None:
            add("control", "latentfs.load", "good file", LEGAL, lambda good=good: latentfs.load(good).summary())
        # estimator files (when the estimators have save/load)
        for name, make_est, X in estimators[:5]:
            entry = f"estimator_file[{name}]"
            est_cls = type(make_est())
            if not hasattr(est_cls, "load"):
                add("files", entry, "estimator has no load()", ILLEGAL, _missing_load(name))
                continue
            path = tdir / f"{name}.est"
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                make_est().fit(X).save(path)
            files = sorted(tdir.glob(f"{name}.est*"))
            if not files:
                add("files", entry, "save() failed", ILLEGAL, _missing_load(name))
                continue
            saved = files[0]
            add("control", entry, "round trip", LEGAL,
                lambda est_cls=est_cls, saved=saved, X=X: est_cls.load(saved).transform(X[:5]))
            for case, make_file in file_cases(tdir, saved, prefix=name):
                made = _made(make_file)
                add("files", entry, case, ILLEGAL, lambda est_cls=est_cls, made=made: est_cls.load(made))
    return out


def _made(make_file: Callable[[], Path]) -> Any:
    """The damaged file written now, or the exception writing it raised (re-raised by the timed run)."""
    try:
        return make_file()
    except Exception as exc:  # noqa: BLE001
        return exc


def _missing_load(name: str) -> Callable[[], Any]:
    def thunk() -> Any:
        raise NotImplementedError(f"{name} has no safe save/load")

    return thunk


def file_cases(tdir: Path, good: Path | None, prefix: str = "post") -> Iterator[tuple[str, Callable[[], Path]]]:
    """(name, a function that writes the damaged file and returns its path)."""

    def write(name: str, data: bytes) -> Path:
        p = tdir / f"{prefix}-{name}.npz"
        p.write_bytes(data)
        return p

    yield "empty file", lambda: write("empty", b"")
    yield "random bytes", lambda: write("random", np.random.default_rng(1).bytes(4096))
    yield "directory", lambda: (tdir / f"{prefix}-dir.npz").mkdir(exist_ok=True) or (tdir / f"{prefix}-dir.npz")
    yield "missing file", lambda: tdir / f"{prefix}-nothing-here.npz"
    yield "pickle file", lambda: write("pickle", pickle.dumps({"trace": np.zeros(3)}))

    def nested_json() -> Path:
        p = tdir / f"{prefix}-nested.npz"
        meta = "[" * 100000 + "]" * 100000
        np.savez(p, __meta__=np.array(meta))
        return p

    yield "nested JSON header", nested_json

    def npz_with_pickle() -> Path:
        p = tdir / f"{prefix}-objarray.npz"
        np.savez(p, __meta__=np.array('{"format": 1}'), trace=np.array([{"a": 1}], dtype=object))
        return p

    yield "npz with an object array", npz_with_pickle
    if good is None:
        return
    blob = good.read_bytes()
    yield "truncated", lambda: write("trunc", blob[: len(blob) // 2])
    yield "truncated to 100 bytes", lambda: write("trunc100", blob[:100])

    def flipped() -> Path:
        b = bytearray(blob)
        for i in range(len(b) // 3, len(b) // 3 + 64):
            b[i] ^= 0xFF
        return write("flip", bytes(b))

    yield "bit-flipped", flipped

    def zip_bomb() -> Path:
        p = tdir / f"{prefix}-bomb.npz"
        with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
            with z.open("trace.npy", "w", force_zip64=True) as f:
                text = b"{'descr': '<f8', 'fortran_order': False, 'shape': (1073741824,), }"
                header = (b"\x93NUMPY\x01\x00v\x00" + text).ljust(127, b" ") + b"\n"
                f.write(header)
                chunk = bytes(2**20)
                for _ in range(2**13):
                    f.write(chunk)
            with zipfile.ZipFile(good) as src:
                for info in src.infolist():
                    if info.filename != "trace.npy":
                        z.writestr(info.filename, src.read(info.filename))
        return p

    yield "zip bomb (8 GiB inflated)", zip_bomb

    def inconsistent_member() -> Path:
        p = tdir / f"{prefix}-inconsistent.npz"
        with zipfile.ZipFile(good) as src, zipfile.ZipFile(p, "w") as z:
            names = src.namelist()
            for n in names:
                data = src.read(n)
                if n.startswith(("draws/", "fitted/", "arrays/", "attr/")) and n != names[-1]:
                    arr = np.load(io.BytesIO(data), allow_pickle=False)
                    if arr.ndim >= 1 and arr.shape[0] > 0:
                        buf = io.BytesIO()
                        np.save(buf, np.concatenate([arr, arr[:1]], axis=0))
                        data = buf.getvalue()
                z.writestr(n, data)
        return p

    yield "arrays with inconsistent shapes", inconsistent_member


# ----------------------------------------------------------------------------------------------- issue 31, item 11:
# dask paths, streams, shard folders and the command line


def _dask(X: Any, rows: int = 10) -> Any:
    import dask.array as da

    return da.from_array(X, chunks=(rows,) + (-1,) * (X.ndim - 1), asarray=not sp.issparse(X))


def _computed(result: Any) -> Any:
    """A lazy result computed (errors inside a block's task are raised here), on dask's synchronous scheduler."""
    import dask

    if hasattr(result, "dask") or type(result).__module__.startswith("dask"):
        (result,) = dask.compute(result, scheduler="synchronous")
    return result


def _one_cell(X: np.ndarray, value: Any, row: int | None = None) -> np.ndarray:
    """``X`` as float with ``value`` in one cell of ``row`` (by default one in the last row chunk only)."""
    out = X.astype(np.float64).copy()
    out[X.shape[0] - 2 if row is None else row, 1] = value
    return out


def dask_fit_cases(X: np.ndarray, kind: str) -> Iterator[tuple[str, Any, Any]]:
    """(name, legality, dask data) for a dask-taking engine, built from its legal in-memory ``X``."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    plain = _dask(X)
    if kind == "counts":
        yield "negative entry in one chunk", ILLEGAL, _dask(_one_cell(X, -1))
        yield "fractional count in one chunk", ILLEGAL, _dask(_one_cell(X, 0.5))
        yield "float counts", Same(plain), _dask(X.astype(np.float64))
        small = np.minimum(X, 20).astype(np.int64)
        small[0, :] = 120  # the row's total (960) overflows int8 if an engine sums in the input's type
        yield "int8 counts whose row totals overflow int8", Same(_dask(small)), _dask(small.astype(np.int8))
        yield "uint8 counts whose row totals overflow uint8", Same(_dask(small)), _dask(small.astype(np.uint8))
        yield "sparse chunks", Same(plain), _dask(sp.csr_matrix(X))
        yield "1e300 cell in one chunk", ILLEGAL, _dask(_one_cell(X, 1e300))
        yield "one document", EITHER, _dask(X[:1])
        yield "constant columns", EITHER, _dask(np.full_like(X, 2))
    elif kind == "categorical":
        yield "negative category in one chunk", ILLEGAL, _dask(_one_cell(X, -1))
        yield "fractional category in one chunk", ILLEGAL, _dask(_one_cell(X, 0.5))
        yield "one class in every column", EITHER, _dask(np.zeros_like(X))
        yield "one row", EITHER, _dask(X[:1])
    else:
        yield "scaled by 1e-200", EITHER, _dask(X * 1e-200)
        yield "scaled by 1e300", EITHER, _dask(X * 1e300)
        yield "shifted by 1e15", EITHER, _dask(X + 1e15)
        yield "constant column", EITHER, _dask(np.column_stack([X[:, :-1], np.full(X.shape[0], 3.0)]))
        yield "ties (values rounded to integers)", EITHER, _dask(np.round(X))
        yield "one row", EITHER, _dask(X[:1])
        yield "float32 chunks", EITHER, _dask(X.astype(np.float32))
    yield "NaN in one chunk", (ILLEGAL if kind != "continuous" else EITHER), _dask(_one_cell(X, np.nan))
    yield "inf in one chunk", ILLEGAL, _dask(_one_cell(X, np.inf))
    yield "columns split over chunks", Same(plain), da.from_array(X, chunks=(10, X.shape[1] // 2))
    yield "an empty chunk", Same(plain), da.concatenate([_dask(X[:0]), plain], axis=0)
    yield "unknown chunk sizes", Same(plain), plain[plain[:, 0] > -1]
    yield "1-D", ILLEGAL, _dask(X[:, 0].copy())
    yield "3-D", ILLEGAL, da.from_array(X[None, :, :], chunks=(1, 10, -1))
    yield "zero rows", ILLEGAL, _dask(X[:0])
    yield "complex chunks", ILLEGAL, _dask(X.astype(np.complex128))
    yield "string chunks", ILLEGAL, _dask(X.astype(str))
    # a dask DataFrame is read as the in-memory matrix it holds (not shard by shard): the same as the numpy fit
    yield "dask DataFrame", Same(X), dd.from_pandas(pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])]),
                                                        npartitions=2)


def estimator_dask_cases(X: np.ndarray, kind: str) -> Iterator[tuple[str, Any]]:
    """(name, new data as numpy) for an estimator's new-data methods on a dask array (each compared with the same
    method on the numpy data, which gives the legality)."""
    if kind == "counts":
        yield "negative entry in one chunk", _one_cell(X, -1)
    if kind == "categorical":
        yield "negative category in one chunk", _one_cell(X, -1)
        yield "unseen category in one chunk", _one_cell(X, 7)
    yield "NaN in one chunk", _one_cell(X, np.nan)
    yield "inf in one chunk", _one_cell(X, np.inf)
    yield "wrong width", X[:, :-1].copy()
    yield "zero rows", X[:0]
    yield "one row", X[:1].copy()
    if kind == "continuous":
        yield "scaled by 1e300", X * 1e300
        yield "shifted by 1e15", X + 1e15


def stream_batches(X: np.ndarray, kind: str) -> Iterator[tuple[str, Any, Any]]:
    """(name, legality, batch) for one bad mini-batch (in the middle of a stream, or given to partial_fit)."""
    yield "wrong width", ILLEGAL, X[:8, :-1].copy()
    yield "NaN batch", (EITHER if kind == "continuous" else ILLEGAL), _one_cell(X[:8], np.nan, row=3)
    yield "inf batch", ILLEGAL, _one_cell(X[:8], np.inf, row=3)
    yield "empty batch", EITHER, X[:0]
    yield "batch of one row", EITHER, X[:1].copy()
    yield "1-D batch", ILLEGAL, X[0].copy()
    # numeric strings: refused by latentfs.fit, read as numbers by the estimators (then the same as the numbers)
    yield "string batch", Same(X[:8].astype(np.float64)), X[:8].astype(str)
    if kind == "counts":
        yield "negative batch", ILLEGAL, _one_cell(X[:8], -1, row=3)
        yield "1e300 batch", ILLEGAL, _one_cell(X[:8], 1e300, row=3)
    elif kind == "categorical":
        yield "negative category batch", ILLEGAL, _one_cell(X[:8], -1, row=3)
    else:
        yield "batch scaled by 1e300", EITHER, X[:8] * 1e300
        yield "batch scaled by 1e-200", EITHER, X[:8] * 1e-200


def _names_batch(thunk: Callable[[], Any]) -> Callable[[], Any]:
    """A stream fit whose DataError must say which batch (or chunk) was bad: one that does not is a crash."""
    from latentfs.core.data import DataError

    def run() -> Any:
        try:
            return thunk()
        except DataError as exc:
            text = str(exc).lower()
            if not any(w in text for w in ("batch", "chunk", "row")):
                raise AssertionError(f"the error does not name the bad batch: {exc}") from exc
            raise

    return run


def _cli(argv: list[str], expect_file: Path | None = None) -> Any:
    """``latentfs.cli.main(argv)`` in-process. A non-zero exit with a one-line message (no traceback) raises a
    DataError (clean where an error is due); any other exception, or a message over several lines, is a crash; a
    zero exit returns the result written to ``expect_file`` (read back with ``latentfs.load``)."""
    import latentfs
    from latentfs.cli import main
    from latentfs.core.data import DataError

    err, outbuf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(outbuf):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1 if exc.code else 0
    lines = [line for line in err.getvalue().splitlines() if line.strip() and "warning:" not in line
             and not line.startswith("latentfs: note")]
    if code != 0:
        if "Traceback" in err.getvalue() or len(lines) != 1:
            raise RuntimeError(f"exit {code} with {len(lines)} line(s) on stderr: {err.getvalue()[:300]!r}")
        raise DataError(f"exit {code}: {lines[0]}")
    if expect_file is not None and expect_file.exists():
        return latentfs.load(expect_file)
    return {"exit": code}


def campaign_more(add: Callable[..., None], only: set[str] | None) -> None:  # noqa: C901 - a flat list of cases
    """The classes ``dask``, ``streams``, ``shards`` and ``cli``."""
    import latentfs
    from latentfs.core.registry import _ENGINES, _load_engines

    def wanted(klass: str) -> bool:
        return only is None or klass in only

    makers = {name: make for label, make, _ in fit_targets() for name in [label.split("[")[1].split("/")[0]]}

    # dask: latentfs.fit on a dask array, every engine that takes one
    if wanted("dask"):
        _load_engines()
        for (cls, method), eng in sorted(_ENGINES.items(), key=lambda cm: (cm[0][0].__name__, cm[0][1])):
            if not getattr(eng, "takes_dask", False) or cls.__name__ not in makers:
                continue
            make = makers[cls.__name__]
            kind = _kind(make())
            X = base_data(kind)
            entry = f"dask fit[{cls.__name__}/{method}]"

            def fit_with(data: Any, make: Callable[[], Any] = make, method: str = method) -> Any:
                m = make()
                return latentfs.fit(m, data, method=method, **fast_options(m, method, batch_size=8))

            add("control", entry, "legal dask array", LEGAL, lambda X=X, fit_with=fit_with: fit_with(_dask(X)))
            for case, legality, data in dask_fit_cases(X, kind):
                add("dask", entry, case, legality, lambda data=data, fit_with=fit_with: fit_with(data),
                    (lambda ref=legality.ref, fit_with=fit_with: fit_with(ref)) if isinstance(legality, Same)
                    else None)

        # the estimators' fit and new-data methods on dask arrays
        estimators: list[tuple[str, Callable[[], Any], np.ndarray, str]] = [
            ("DCA", lambda: latentfs.DCA(2, max_iter=15), COUNTS, "counts"),
            ("PLSAEstimator", lambda: latentfs.PLSAEstimator(2, max_iter=15), COUNTS, "counts"),
            ("FactorAnalyzer", lambda: latentfs.FactorAnalyzer(2, max_iter=15), CONT, "continuous"),
            ("GaussianMixtureClusterer", lambda: latentfs.GaussianMixtureClusterer(2, max_iter=15), CONT,
             "continuous"),
            ("LatentProfileClusterer", lambda: latentfs.LatentProfileClusterer(2, max_iter=15), CONT, "continuous"),
            ("LatentClassClusterer", lambda: latentfs.LatentClassClusterer(2, max_iter=15), CATEG, "categorical"),
            ("HDDC", lambda: latentfs.HDDC(2, max_iter=15, n_init=1), CONT, "continuous"),
        ]
        for name, make_est, X, kind in estimators:
            entry = f"dask estimator[{name}]"
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    fitted = make_est().fit(X)
            except Exception:  # noqa: BLE001 - the control run of the in-memory campaign reports it
                continue
            add("dask", entry, "fit on a dask array", EITHER,
                lambda make_est=make_est, X=X: _estimator_summary(make_est().fit(_dask(X))))
            add("dask", entry, "fit on a dask array with NaN in one chunk", EITHER if kind == "continuous" else ILLEGAL,
                lambda make_est=make_est, X=X: _estimator_summary(make_est().fit(_dask(_one_cell(X, np.nan)))))
            methods = [m for m in ("transform", "predict", "predict_proba", "score_samples", "score")
                       if hasattr(fitted, m)]
            for meth in methods:
                for case, data in estimator_dask_cases(X, kind):
                    # the fold-in of count data stops per block (blockwise.py): the same to its tolerance only
                    tol = 1e-3 if kind == "counts" else 1e-8
                    legality: Any = Same(data, rtol=tol) if not (meth == "score" and kind == "counts") else EITHER
                    add("dask", f"{entry}.{meth}", case, legality,
                        lambda fitted=fitted, meth=meth, data=data: _computed(getattr(fitted, meth)(_dask(data, 4))),
                        (lambda fitted=fitted, meth=meth, data=data: getattr(fitted, meth)(data))
                        if isinstance(legality, Same) else None)

    # streams: partial_fit, and online engines given an iterator of mini-batches with a bad one in the middle
    if wanted("streams"):
        streamers: list[tuple[str, Callable[[], Any], np.ndarray, str]] = [
            ("DCA", lambda: latentfs.DCA(2), COUNTS, "counts"),
            ("GaussianMixtureClusterer", lambda: latentfs.GaussianMixtureClusterer(2, covariance_type="diag"), CONT,
             "continuous"),
            ("LatentProfileClusterer", lambda: latentfs.LatentProfileClusterer(2), CONT, "continuous"),
            ("LatentClassClusterer", lambda: latentfs.LatentClassClusterer(2), CATEG, "categorical"),
        ]
        for name, make_est, X, kind in streamers:
            if not hasattr(make_est(), "partial_fit"):
                continue
            entry = f"partial_fit[{name}]"

            def stream(second: Any, make_est: Callable[[], Any] = make_est, X: np.ndarray = X, name: str = name) -> Any:
                est = make_est().partial_fit(X[:12], **({"total_documents": 24} if name == "DCA" else {}))
                return _estimator_summary(est.partial_fit(second), X[:5])

            add("control", entry, "two legal batches", LEGAL, lambda stream=stream, X=X: stream(X[12:]))
            for case, legality, batch in stream_batches(X, kind):
                ref = legality.ref if isinstance(legality, Same) else None
                add("streams", entry, f"{case} after a good one", legality,
                    lambda stream=stream, batch=batch: stream(batch),
                    None if ref is None else (lambda stream=stream, ref=ref: stream(ref)))

                def first(batch: Any, make_est: Callable[[], Any] = make_est, X: np.ndarray = X) -> Any:
                    return _estimator_summary(make_est().partial_fit(batch), X[:5])

                add("streams", entry, f"{case} first", legality, lambda first=first, batch=batch: first(batch),
                    None if ref is None else (lambda first=first, ref=ref: first(ref)))
        online = [("DirichletDCA", "online_vb", COUNTS, "counts"),
                  ("GaussianMixture", "online_em", CONT, "continuous"),
                  ("LatentProfile", "online_em", CONT, "continuous"),
                  ("LatentClass", "online_em", CATEG, "categorical")]
        for model_name, method, X, kind in online:
            make = makers[model_name]
            entry = f"stream fit[{model_name}/{method}]"

            def fit_stream(batches: list[Any], make: Callable[[], Any] = make, method: str = method,
                           as_list: bool = False) -> Any:
                m = make()
                extra = {"total_documents": 24} if method == "online_vb" else {}
                opts = {k: v for k, v in fast_options(m, method, **extra).items() if k != "batch_size"}
                return latentfs.fit(m, list(batches) if as_list else iter(batches), method=method, **opts)

            good = [X[:8], X[8:16], X[16:24]]
            add("control", entry, "iterator of 3 legal batches", LEGAL, lambda fit_stream=fit_stream, good=good:
                fit_stream(good))
            for case, legality, batch in stream_batches(X, kind):
                legality = ILLEGAL if isinstance(legality, Same) else legality  # latentfs.fit refuses strings
                bad = [good[0], batch, good[2]]
                add("streams", entry, f"iterator: {case} in the middle", legality,
                    _names_batch(lambda fit_stream=fit_stream, bad=bad: fit_stream(bad)))
                add("streams", entry, f"list: {case} in the middle", legality,
                    _names_batch(lambda fit_stream=fit_stream, bad=bad: fit_stream(bad, as_list=True)))
            add("streams", entry, "empty iterator", ILLEGAL, lambda fit_stream=fit_stream: fit_stream([]))
            add("streams", entry, "iterator of non-arrays", ILLEGAL,
                lambda fit_stream=fit_stream, good=good: fit_stream([good[0], "abc", good[2]]))
            add("streams", entry, "iterator of None", ILLEGAL,
                lambda fit_stream=fit_stream, good=good: fit_stream([good[0], None, good[2]]))

    if wanted("shards"):
        _shard_cases(add)
    if wanted("cli"):
        _cli_cases(add)


def _estimator_summary(est: Any, X: np.ndarray | None = None) -> Any:
    """What a fitted estimator gives, as numbers for the finite check: its posterior (or components) and, with
    ``X``, its transform or predict_proba of ``X``."""
    out: dict[str, Any] = {}
    for attr in ("posterior_", "components_", "weights_", "means_"):
        if hasattr(est, attr):
            out[attr] = getattr(est, attr)
    if X is not None:
        out["new"] = est.transform(X) if hasattr(est, "transform") else est.predict_proba(X)
    return out


def _shard_cases(add: Callable[..., None]) -> None:
    import latentfs
    from latentfs.core.shards import open_shards, save_shards

    tmp = Path(tempfile.mkdtemp(prefix="hostile-shards-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    entry_open, entry_save, entry_fit = "open_shards", "save_shards", "fit[DirichletDCA/vb](open_shards)"

    def folder(name: str, files: dict[str, Any]) -> Path:
        """A folder of shard files: an array is saved as .npy, a sparse matrix as .npz, bytes written raw."""
        root = tmp / name
        root.mkdir()
        for fname, value in files.items():
            if sp.issparse(value):
                sp.save_npz(root / fname, value)
            elif isinstance(value, (bytes, bytearray)):
                (root / fname).write_bytes(value)
            else:
                np.save(root / fname, value, allow_pickle=True)
        return root

    def opened(root: Path) -> Any:
        return _computed(open_shards(root))

    def fitted(root: Path) -> Any:
        return latentfs.fit(latentfs.DirichletDCA(2), open_shards(root), method="vb", max_iter=10)

    good = folder("good", {"a-1.npy": COUNTS[:12], "a-2.npy": COUNTS[12:]})
    add("control", entry_open, "two .npy shards", LEGAL, lambda: opened(good))
    add("control", entry_fit, "two .npy shards", LEGAL, lambda: fitted(good))
    goodz = folder("goodz", {"a-1.npz": sp.csr_matrix(COUNTS[:12]), "a-2.npz": sp.csr_matrix(COUNTS[12:])})
    add("control", entry_fit, "two .npz shards", LEGAL, lambda: fitted(goodz))
    npy = (tmp / "good" / "a-1.npy").read_bytes()
    npz = (tmp / "goodz" / "a-1.npz").read_bytes()
    cases: list[tuple[str, str, Path | Callable[[], Path]]] = [
        ("missing folder", entry_open, tmp / "nothing-here"),
        ("a file, not a folder", entry_open, tmp / "good" / "a-1.npy"),
        ("empty folder", entry_open, lambda: folder("empty", {})),
        ("only text files", entry_open, lambda: folder("text", {"a.txt": b"1,2,3\n"})),
        ("mixed .npz and .npy", entry_open, lambda: folder("mixed", {"a.npy": COUNTS[:12],
                                                                     "b.npz": sp.csr_matrix(COUNTS[12:])})),
        ("shards of different widths", entry_open, lambda: folder("widths", {"a.npy": COUNTS[:12],
                                                                             "b.npy": COUNTS[12:, :-1]})),
        ("a 1-D shard", entry_open, lambda: folder("oned", {"a.npy": COUNTS[:12], "b.npy": COUNTS[12]})),
        ("a 3-D shard", entry_open, lambda: folder("threed", {"a.npy": COUNTS[None]})),
        ("a string shard", entry_open, lambda: folder("strings", {"a.npy": COUNTS.astype(str)})),
        ("an object shard", entry_open, lambda: folder("objects", {"a.npy": COUNTS.astype(object)})),
        ("a complex shard", entry_open, lambda: folder("complex", {"a.npy": COUNTS.astype(complex)})),
        ("a truncated .npy (header intact)", entry_open,
         lambda: folder("trunc", {"a.npy": COUNTS[:12], "b.npy": npy[: len(npy) - 40]})),
        ("a .npy cut inside its header", entry_open, lambda: folder("trunchead", {"a.npy": npy[:20]})),
        ("an empty .npy file", entry_open, lambda: folder("emptyfile", {"a.npy": b""})),
        ("a truncated .npz", entry_open, lambda: folder("truncz", {"a.npz": npz[: len(npz) // 2]})),
        ("random bytes as .npz", entry_open,
         lambda: folder("randz", {"a.npz": np.random.default_rng(2).bytes(512)})),
        ("a dense .npz (numpy.savez)", entry_open, lambda: folder("savez", {"a.npz": _savez_bytes(COUNTS)})),
        ("a zarr store with a 3-D array", entry_open, lambda: _zarr_store(tmp / "zarr3d", COUNTS[None])),
        ("a zarr store of strings", entry_open, lambda: _zarr_store(tmp / "zarrstr", COUNTS.astype(str))),
        ("shards with no rows only", entry_open, lambda: folder("norows", {"a.npy": COUNTS[:0]})),
        ("a negative count in one shard", entry_fit,
         lambda: folder("neg", {"a.npy": COUNTS[:12], "b.npy": _one_cell(COUNTS[12:], -1)})),
        ("NaN in one shard", entry_fit,
         lambda: folder("nan", {"a.npy": COUNTS[:12], "b.npy": _one_cell(COUNTS[12:], np.nan)})),
        ("a fractional count in one shard", entry_fit,
         lambda: folder("frac", {"a.npy": COUNTS[:12], "b.npy": _one_cell(COUNTS[12:], 0.5)})),
    ]
    for case, entry, make in cases:
        root = _made(make) if callable(make) else make
        thunk = (lambda root=root: opened(root)) if entry == entry_open else (lambda root=root: fitted(root))
        add("shards", entry, case, ILLEGAL, thunk)
    # a shard rewritten after open_shards read the headers
    changed = folder("changed", {"a.npy": COUNTS[:12], "b.npy": COUNTS[12:]})
    lazy = _made(lambda: open_shards(changed))
    np.save(changed / "b.npy", COUNTS[12:20])
    add("shards", entry_open, "a shard rewritten after opening", ILLEGAL, lambda: _computed(lazy))

    # save_shards
    def save(X: Any, name: str, **kw: Any) -> Any:
        return [p.name for p in save_shards(X, tmp / name, **kw)] and opened(tmp / name)

    add("control", entry_save, "round trip", LEGAL, lambda: save(COUNTS, "saved", rows_per_shard=10))
    add("control", entry_save, "dask round trip", LEGAL, lambda: save(_dask(COUNTS), "saved_dask"))
    (tmp / "a-file").write_text("x")
    save_cases: list[tuple[str, Any, str, dict[str, Any]]] = [
        ("1-D X", COUNTS[0], "s1", {"rows_per_shard": 2}),
        ("3-D X", COUNTS[None], "s2", {"rows_per_shard": 2}),
        ("X None", None, "s3", {"rows_per_shard": 2}),
        ("rows_per_shard=0", COUNTS, "s4", {"rows_per_shard": 0}),
        ("rows_per_shard=2.5", COUNTS, "s5", {"rows_per_shard": 2.5}),
        ("rows_per_shard='10'", COUNTS, "s6", {"rows_per_shard": "10"}),
        ("rows_per_shard missing", COUNTS, "s7", {}),
        ("format='csv'", COUNTS, "s8", {"rows_per_shard": 10, "format": "csv"}),
        ("overwrite='yes'", COUNTS, "s9", {"rows_per_shard": 10, "overwrite": "yes"}),
        ("path is a file", COUNTS, "a-file", {"rows_per_shard": 10}),
        ("folder already holds shards", COUNTS, "saved", {"rows_per_shard": 10}),
        ("dask X of unknown chunk sizes", _dask(COUNTS)[_dask(COUNTS)[:, 0] > -1], "s10", {}),
        ("string X", COUNTS.astype(str), "s11", {"rows_per_shard": 10}),
        ("object X", COUNTS.astype(object), "s12", {"rows_per_shard": 10}),
        ("zero rows", COUNTS[:0], "s13", {"rows_per_shard": 10}),
    ]
    for case, X, name, kw in save_cases:
        add("shards", entry_save, case, ILLEGAL, lambda X=X, name=name, kw=kw: save(X, name, **kw))


def _savez_bytes(X: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, X=X)
    return buf.getvalue()


def _zarr_store(root: Path, X: np.ndarray) -> Path:
    """A zarr store holding ``X`` when zarr is installed, else a folder that only looks like one (its marker
    file), which open_shards must refuse as clearly."""
    try:
        import zarr

        zarr.save_array(str(root), X)
    except ImportError:
        root.mkdir()
        (root / ".zarray").write_text("{}")
    return root


def _cli_cases(add: Callable[..., None]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hostile-cli-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)

    def write(name: str, text: str) -> str:
        (tmp / name).write_text(text)
        return str(tmp / name)

    header = ",".join(f"w{j}" for j in range(COUNTS.shape[1]))
    good = write("good.csv", header + "\n" + "\n".join(",".join(str(v) for v in row) for row in COUNTS) + "\n")
    np.save(tmp / "good.npy", COUNTS)
    sp.save_npz(tmp / "good.npz", sp.csr_matrix(COUNTS))
    out = str(tmp / "out.npz")
    fast = ["-k", "2", "--iterations", "5", "--quiet", "-o", out]

    def fit(*argv: str, file: str = good, opts: list[str] | None = None) -> Callable[[], Any]:
        return lambda: _cli(["fit", file, *(fast if opts is None else opts), *argv], Path(out))

    add("control", "cli fit", "good CSV", LEGAL, fit())
    add("control", "cli fit", "good .npy", LEGAL, fit(file=str(tmp / "good.npy")))
    add("control", "cli fit", "--seed 2**70 (any int ≥ 0 is a seed)", LEGAL, fit("--seed", str(2**70)))
    add("control", "cli fit", "gibbs --samples 3 --chains 1", LEGAL,
        fit("--method", "gibbs", "--samples", "3", "--chains", "1"))
    (tmp / "a-file").write_text("x")
    (tmp / "a-folder.npz").mkdir()
    np.save(tmp / "three.npy", COUNTS[None])
    np.save(tmp / "strings.npy", COUNTS.astype(str))
    np.save(tmp / "neg.npy", _one_cell(COUNTS, -1))
    cases: list[tuple[str, list[str]]] = [
        ("no command", []),
        ("unknown command", ["frobnicate"]),
        ("fit without a file", ["fit", "-k", "2"]),
        ("unknown --model", ["fit", good, "-k", "2", "--model", "nosuch"]),
        ("unknown --method", ["fit", good, "-k", "2", "--method", "nosuch"]),
        ("--method not for the model", ["fit", good, "-k", "2", "--model", "gap", "--method", "online_vb"]),
        ("missing file", ["fit", str(tmp / "nothing.csv"), "-k", "2"]),
        ("a folder as the file", ["fit", str(tmp), "-k", "2"]),
        ("empty CSV", ["fit", write("empty.csv", ""), *fast]),
        ("header only CSV", ["fit", write("headonly.csv", header + "\n"), *fast]),
        ("non-numeric CSV", ["fit", write("words.csv", header + "\n" + "a,b,c,d,e,f,g,h\n" * 4), *fast]),
        ("NaN in a CSV", ["fit", write("nan.csv", header + "\n" + "1,2,nan,1,1,1,1,1\n" + "1,1,1,1,1,1,1,1\n" * 4),
                          *fast]),
        ("negative in a CSV", ["fit", write("negc.csv", header + "\n" + "1,-2,1,1,1,1,1,1\n" * 5), *fast]),
        ("fractions in a CSV", ["fit", write("frac.csv", header + "\n" + "1,0.5,1,1,1,1,1,1\n" * 5), *fast]),
        ("ragged CSV", ["fit", write("ragged.csv", header + "\n" + "1,2,3\n1,2,3,4,5,6,7,8\n"), *fast]),
        ("semicolon delimiter", ["fit", write("semi.csv", header.replace(",", ";") + "\n" + "\n".join(
            ";".join(str(v) for v in row) for row in COUNTS) + "\n"), *fast]),
        ("binary bytes as CSV", ["fit", str(_write_bytes(tmp / "bin.csv")), *fast]),
        ("3-D .npy", ["fit", str(tmp / "three.npy"), *fast]),
        ("string .npy", ["fit", str(tmp / "strings.npy"), *fast]),
        ("negative .npy", ["fit", str(tmp / "neg.npy"), *fast]),
        ("malformed .mtx", ["fit", write("bad.mtx", "%%MatrixMarket matrix coordinate integer general\n3 3 2\n1 1\n"),
                            *fast]),
        ("unknown extension", ["fit", write("data.xyz", "1,2\n"), *fast]),
        ("-k 0", ["fit", good, "-k", "0", "-o", out]),
        ("-k abc", ["fit", good, "-k", "abc", "-o", out]),
        ("-k larger than the features", ["fit", good, "-k", "50", "-o", out]),
        ("--samples 0", ["fit", good, *fast, "--method", "gibbs", "--samples", "0"]),
        ("--samples -5", ["fit", good, *fast, "--method", "gibbs", "--samples", "-5"]),
        ("--samples abc", ["fit", good, *fast, "--method", "gibbs", "--samples", "abc"]),
        ("--samples with vb", ["fit", good, *fast, "--samples", "10"]),
        ("--chains 0", ["fit", good, *fast, "--method", "gibbs", "--chains", "0"]),
        ("--chains 1.5", ["fit", good, *fast, "--method", "gibbs", "--chains", "1.5"]),
        ("--seed -1", ["fit", good, *fast, "--seed", "-1"]),
        ("--seed 1.5", ["fit", good, *fast, "--seed", "1.5"]),
        ("--iterations 0", ["fit", good, "-k", "2", "-o", out, "--iterations", "0"]),
        ("--alpha -1", ["fit", good, *fast, "--alpha", "-1"]),
        ("--alpha nan", ["fit", good, *fast, "--alpha", "nan"]),
        ("--gamma inf", ["fit", good, *fast, "--gamma", "inf"]),
        ("--beta with dirichlet", ["fit", good, *fast, "--beta", "1"]),
        ("--device meta", ["fit", good, *fast, "--device", "meta"]),
        ("--device gpu0", ["fit", good, *fast, "--device", "gpu0"]),
        ("--vocab missing", ["fit", str(tmp / "good.npy"), *fast, "--vocab", str(tmp / "nothing.txt")]),
        ("--vocab of the wrong length", ["fit", str(tmp / "good.npy"), *fast, "--vocab", write("v.txt", "a\nb\n")]),
        ("output folder is a file", ["fit", good, "-k", "2", "--quiet", "-o", str(tmp / "a-file" / "out.npz")]),
        ("output folder missing", ["fit", good, "-k", "2", "--quiet", "-o", str(tmp / "no" / "out.npz")]),
        ("output is a folder", ["fit", good, "-k", "2", "--quiet", "-o", str(tmp / "a-folder.npz")]),
        ("output is the input", ["fit", str(tmp / "good.npz"), "-k", "2", "--quiet", "-o", str(tmp / "good.npz")]),
        ("demo -k 0", ["demo", "-k", "0", "--iterations", "2", "--output", str(tmp / "demo0")]),
        ("demo --iterations 0", ["demo", "--iterations", "0", "--output", str(tmp / "demo1")]),
        ("demo --seed -1", ["demo", "--seed", "-1", "--iterations", "2", "--output", str(tmp / "demo2")]),
        ("demo --output is a file", ["demo", "-k", "2", "--iterations", "2", "--output", str(tmp / "a-file")]),
        ("demo --method nosuch", ["demo", "--method", "nosuch"]),
    ]
    for case, argv in cases:
        add("cli", "cli " + (argv[0] if argv and not argv[0].startswith("-") else "main"), case, ILLEGAL,
            lambda argv=argv: _cli(argv, Path(out)))


def _write_bytes(path: Path) -> Path:
    path.write_bytes(np.random.default_rng(3).bytes(2048))
    return path


# ----------------------------------------------------------------------------------------------- report


def table(outcomes: list[Outcome]) -> str:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"clean": 0, "crash": 0, "silent": 0})
    entries: dict[str, set[str]] = defaultdict(set)
    cases: dict[str, set[str]] = defaultdict(set)
    for o in outcomes:
        counts[o.klass][o.status] += 1
        entries[o.klass].add(o.entry)
        cases[o.klass].add(o.case)
    lines = [f"{'class':<12} {'inputs':>6} {'entries':>7} {'runs':>5} {'clean':>6} {'crash':>6} {'silent':>6}"]
    total = {"clean": 0, "crash": 0, "silent": 0}
    for k in ("control", "containers", "options", "numerical", "sizes", "results", "files", "dask", "streams",
              "shards", "cli"):
        if k not in counts:
            continue
        c = counts[k]
        n = sum(c.values())
        lines.append(f"{k:<12} {len(cases[k]):>6} {len(entries[k]):>7} {n:>5} {c['clean']:>6} {c['crash']:>6} "
                     f"{c['silent']:>6}")
        for s in total:
            total[s] += c[s]
    lines.append(f"{'total':<12} {'':>6} {'':>7} {sum(total.values()):>5} {total['clean']:>6} {total['crash']:>6} "
                 f"{total['silent']:>6}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=int, default=20, help="seconds per run (default 20)")
    parser.add_argument("--memory", type=float, default=3.0, help="GiB of address space above the start (3)")
    parser.add_argument("--details", type=Path, default=None, help="write the non-clean runs to this JSON file")
    parser.add_argument("--only", nargs="*", default=None, help="classes to run (default all)")
    parser.add_argument("--entry", nargs="*", default=None,
                        help="run only the entry points whose label contains one of these strings, e.g. HMM")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    sys.path.append(str(Path(__file__).resolve().parents[1]))  # the checkout, after any PYTHONPATH
    import latentfs

    print(f"latentfs from {Path(latentfs.__file__).parent}", file=sys.stderr)
    # address-space cap: whatever is mapped now plus --memory GiB
    with open("/proc/self/status") as f:
        vm = next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize")), 0)
    cap = int(vm + args.memory * 2**30)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
    t0 = time.perf_counter()
    outcomes = campaign(args.timeout, set(args.only) if args.only else None, args.entry)
    print(table(outcomes))
    print(f"({len(outcomes)} runs in {time.perf_counter() - t0:.0f} s)")
    if args.details is not None:
        bad = [o.__dict__ for o in outcomes if o.status != "clean"]
        args.details.write_text(json.dumps(bad, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
