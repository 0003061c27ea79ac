"""Option checking: one rule and one style of message for every option of every entry point.

Every engine, estimator and the command line check their options here: :func:`check_int`,
:func:`check_float`, :func:`check_seed` (with :func:`as_rng`), :func:`check_dtype`, :func:`check_device`,
:func:`check_level`, :func:`check_choice`, :func:`check_flag`, :func:`check_n_components` and
:func:`check_positive`. A bad value raises :class:`~latentfs.core.errors.DataError` naming the option, the rule,
the value and a remedy. :func:`check_component_memory` refuses, before a fit starts, a number of components whose
parameters cannot fit in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from latentfs.core.errors import DataError

__all__ = [
    "as_rng",
    "check_moments",
    "check_options",
    "check_choice",
    "check_component_memory",
    "check_device",
    "check_dtype",
    "check_flag",
    "check_float",
    "check_int",
    "check_level",
    "check_n_components",
    "check_positive",
    "check_seed",
]


def check_n_components(n_components: Any, max_allowed: int, *, name: str = "n_components", what: str = "") -> int:
    """``n_components`` must be an integer in [1, max_allowed]; ``what`` explains the upper limit."""
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
        raise DataError(f"{name} must be a positive integer; got {n_components!r}.")
    if n_components < 1:
        raise DataError(f"{name} must be at least 1; got {n_components}. Pass a positive number of components.")
    if n_components > max_allowed:
        raise DataError(
            f"{name} must be at most {max_allowed}{' (' + what + ')' if what else ''}; got "
            f"{n_components}. Choose fewer components."
        )
    return int(n_components)


def _size(n_bytes: float) -> str:
    for unit, power in (("TiB", 40), ("GiB", 30), ("MiB", 20)):
        if n_bytes >= 2**power:
            return f"{n_bytes / 2**power:.2f} {unit}"
    return f"{n_bytes / 2**10:.2f} KiB"


def check_component_memory(
    n_components: int, n_features: int, n_rows: int, itemsize: int, *, what: str, remedy: str,
    available: float | None = None,
) -> int:
    """Refuse a fit whose parameters cannot fit in memory, before anything is allocated; returns the estimate.

    The estimate is of the parameter arrays every engine of a components × features model holds at once: the
    (n_components, n_features) and (n_rows, n_components) arrays, each twice (the current values and their update),
    of ``itemsize`` bytes. A fit that needs more than the memory available now (``available``, default
    :func:`latentfs.core.driver.available_memory`, which honours ``ulimit -v``) raises a
    :class:`~latentfs.core.errors.DataError` with the estimate and ``remedy``, instead of failing inside an
    allocation; when the available memory is unknown nothing is checked.

    Examples
    --------
    >>> check_component_memory(10**6, 2 * 10**6, 30, 8, what="DirichletDCA", remedy="Choose fewer components.",
    ...                        available=2**33)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latentfs.core.data.DataError: DirichletDCA with n_components=1000000 × 2000000 features needs about 29.10 TiB ...
    """
    values = 2 * (int(n_components) * int(n_features) + int(n_rows) * int(n_components))
    need = values * int(itemsize)
    if available is None:
        from latentfs.core.driver import available_memory

        available = available_memory()
    if available is not None and need > available:
        raise DataError(
            f"{what} with n_components={n_components} × {n_features} features needs about {_size(need)} for its "
            f"parameters ({values:.3g} values of {itemsize} bytes: the components × features and rows × components "
            f"arrays, each with its update), over the {_size(available)} of memory available. {remedy}"
        )
    return need


def check_positive(
    value: Any, name: str, *, shape: tuple[int, ...] | None = None, allow_zero: bool = False
) -> np.ndarray:
    """A positive scalar or array hyperparameter, broadcast to ``shape``; returns float64 array."""
    arr = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else None
    if arr is None:
        raise DataError(f"{name} must be a positive number or array; got {value!r}.")
    if shape is not None:
        try:
            arr = np.broadcast_to(arr, shape).copy()
        except ValueError:
            raise DataError(f"{name} must be a scalar or have shape {shape}; got shape {arr.shape}.") from None
    bad = ~np.isfinite(arr) | ((arr < 0) if allow_zero else (arr <= 0))
    if bad.any():
        rule = "non-negative" if allow_zero else "positive"
        raise DataError(f"{name} must be finite and {rule}; got {arr.ravel()[np.flatnonzero(bad.ravel())[0]]}.")
    return arr


def _is_torch_generator(value: Any) -> bool:
    return type(value).__name__ == "Generator" and type(value).__module__.startswith("torch")


def _set(name: str, value: Any) -> str:
    """How the user writes ``name = value``: ``seed=0`` in Python, ``--seed 0`` for a command-line option."""
    return f"{name} {value}" if name.startswith("-") else f"{name}={value!r}"


def check_seed(seed: Any, *, name: str = "seed") -> Any:
    """A random seed: None (fresh entropy), an int ≥ 0, a numpy ``Generator`` or ``SeedSequence``, or a
    ``torch.Generator``; returned unchanged (an int as a Python int).

    Floats (even 2.0), negative ints, booleans and strings are refused: numpy would truncate 1.5 to 1 or
    fail on -1 deep inside.

    Examples
    --------
    >>> check_seed(3)
    3
    >>> check_seed(1.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latentfs.core.data.DataError: seed must be an int ≥ 0, None, ...; got 1.5 (float). ...
    """
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence)) or _is_torch_generator(seed):
        return seed
    rule = "must be an int ≥ 0, None, a numpy Generator/SeedSequence or a torch.Generator"
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise DataError(
            f"{name} {rule}; got {seed!r} ({type(seed).__name__}). Pass an integer such as {_set(name, 0)} "
            "(or None for a fresh random start)."
        )
    if seed < 0:
        fix = f"Pass a non-negative integer, e.g. {_set(name, abs(int(seed)))}."
        raise DataError(f"{name} {rule}; got {int(seed)}. {fix}")
    return int(seed)


def as_rng(seed: Any) -> np.random.Generator:
    """A numpy Generator from ``seed`` (checked by :func:`check_seed`): an int ≥ 0, None (fresh entropy), a
    numpy Generator (returned as is), a SeedSequence, or a torch.Generator (one draw from it seeds the numpy
    generator). Public functions accept any of these.

    Examples
    --------
    >>> int(as_rng(3).integers(10)) == int(as_rng(3).integers(10))
    True
    """
    seed = check_seed(seed)
    if isinstance(seed, np.random.Generator):
        return seed
    if _is_torch_generator(seed):
        import torch

        return np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=seed)))
    return np.random.default_rng(seed)


def check_int(
    name: str, value: Any, *, low: int | None = None, high: int | None = None, remedy: str = ""
) -> int:
    """An integer option in ``[low, high]`` (either bound optional); returns a Python int.

    Booleans and floats are refused, even integral ones (``max_iter=1e3``): say ``1000``.

    Examples
    --------
    >>> check_int("max_iter", 50, low=1)
    50
    >>> check_int("max_iter", 0, low=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latentfs.core.data.DataError: max_iter must be an integer ≥ 1; got 0. ...
    """
    rule = _interval_rule("an integer", low, high)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        integral = isinstance(value, (float, np.floating)) and float(value).is_integer()
        hint = f" Write {int(value)} instead." if integral else ""
        raise DataError(f"{name} must be {rule}; got {value!r} ({type(value).__name__}).{hint} {remedy}".rstrip())
    if (low is not None and value < low) or (high is not None and value > high):
        fix = remedy or f"Pass a value in that range, e.g. {_set(name, low if low is not None else high)}."
        raise DataError(f"{name} must be {rule}; got {int(value)}. {fix}")
    return int(value)


def _interval_rule(what: str, low: Any, high: Any, low_open: bool = False, high_open: bool = False) -> str:
    if low is not None and high is not None:
        return f"{what} in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f"{what} {'>' if low_open else '≥'} {low:g}"
    if high is not None:
        return f"{what} {'<' if high_open else '≤'} {high:g}"
    return what


def check_float(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    allow_nan: bool = False,
    low_open: bool = False,
    high_open: bool = False,
    remedy: str = "",
) -> float:
    """A real option in the interval from ``low`` to ``high`` (closed unless ``low_open``/``high_open``);
    returns a Python float. NaN is refused unless ``allow_nan``; ±inf only passes when no bound excludes it.

    Examples
    --------
    >>> check_float("tol", 1e-6, 0)
    1e-06
    >>> check_float("tol", float("nan"), 0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latentfs.core.data.DataError: tol must be a number ≥ 0; got nan. ...
    """
    rule = _interval_rule("a number", low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DataError(f"{name} must be {rule}; got {value!r} ({type(value).__name__}). {remedy}".rstrip())
    v = float(value)
    fix = remedy or "Pass a finite number in that range."
    if np.isnan(v):
        if allow_nan:
            return v
        raise DataError(f"{name} must be {rule}; got nan. {fix}")
    too_low = low is not None and (v <= low if low_open else v < low)
    too_high = high is not None and (v >= high if high_open else v > high)
    if too_low or too_high or (np.isinf(v) and low is None and high is None):
        raise DataError(f"{name} must be {rule}; got {v:g}. {fix}")
    return v


def check_level(level: Any, *, name: str = "level") -> float:
    """A credible or confidence level strictly between 0 and 1 (0.9 means a 90% band).

    Examples
    --------
    >>> check_level(0.9)
    0.9
    """
    return check_float(name, level, 0.0, 1.0, low_open=True, high_open=True,
                       remedy="Use e.g. 0.9 for a 90% band (not 90).")


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    """``value`` must be one of ``choices`` (compared with ``==``; a string is never read as a sequence)."""
    try:
        ok = any(isinstance(value, str) == isinstance(c, str) and bool(value == c) for c in choices)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        import difflib

        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DataError(f"{name} must be one of {list(choices)}; got {value!r}.{hint}")
    return value


_DTYPES = {"float64": "float64", "double": "float64", "float32": "float32"}


def check_dtype(dtype: Any, *, name: str = "dtype") -> Any:
    """A floating torch dtype for an engine's arithmetic: ``torch.float64`` or ``torch.float32``.

    Torch users write ``torch.float64``, numpy users ``"float64"`` or ``np.float64``: both are accepted and mean
    the same (the strings ``"float64"``, ``"float32"``, ``"double"``, ``"torch.float32"``, numpy's spellings such
    as ``"f8"`` or ``np.dtype("<f4")``). The bare ``"float"`` is refused: numpy reads it as float64 and torch as
    float32. Integer, complex and half-precision dtypes are refused (the engines need lgamma/digamma and sums
    that half precision cannot carry).

    Examples
    --------
    >>> import torch
    >>> check_dtype("float32") is torch.float32
    True
    >>> check_dtype("f8") is torch.float64
    True
    """
    import torch

    allowed = {torch.float64, torch.float32}
    if isinstance(dtype, torch.dtype):
        if dtype in allowed:
            return dtype
    else:
        key: str | None = None
        if isinstance(dtype, str):
            text = dtype.strip().removeprefix("torch.")
            if text == "float":
                raise DataError(
                    f"{name} {dtype!r} is ambiguous: numpy reads it as float64, torch as float32. Write "
                    f"{name}='float64' (or torch.float64, the default) or {name}='float32'."
                )
            key = _DTYPES.get(text)
            if key is None and not dtype.startswith("torch."):
                key = _numpy_float(text)
        elif not isinstance(dtype, bool):
            key = _numpy_float(dtype)
        if key is not None:
            return getattr(torch, key)
    raise DataError(
        f"{name} must be torch.float64 or torch.float32; got {dtype!r}. Pass dtype=torch.float64 (the "
        "default, most accurate) or torch.float32 (half the memory), or the strings 'float64'/'float32'; integer "
        "and half-precision dtypes cannot hold the engines' intermediate values."
    )


def _numpy_float(dtype: Any) -> str | None:
    """'float64' or 'float32' when numpy reads ``dtype`` as that type (``np.float32``, ``"f8"``, ``"<f4"``)."""
    try:
        np_dtype = np.dtype(dtype)
    except (TypeError, ValueError):
        return None
    return _DTYPES.get(np_dtype.name) if np_dtype.kind == "f" else None


def check_device(device: Any, *, name: str = "device") -> Any:
    """A torch device that exists here: ``"cpu"``, ``"cuda"``/``"cuda:N"`` when CUDA is available, ``"mps"``
    when available; returns a ``torch.device``.

    The ``meta`` device (no data) is refused, as are unknown names (``"gpu0"``) and accelerators this torch
    build or machine does not have, each with the remedy.

    Examples
    --------
    >>> check_device("cpu")
    device(type='cpu')
    """
    import torch

    if isinstance(device, bool) or not isinstance(device, (str, torch.device)):
        raise DataError(
            f"{name} must be a device name such as 'cpu' or 'cuda:0', or a torch.device; got {device!r} "
            f"({type(device).__name__})."
        )
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise DataError(
            f"{name} must be a torch device name such as 'cpu', 'cuda' or 'cuda:0'; got {device!r}. "
            "Write 'cuda:0' for the first GPU, or 'cpu'."
        ) from None
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise DataError(
                f"{name} is {str(device)!r} but CUDA is not available here (this torch build has "
                f"{'no CUDA support' if torch.version.cuda is None else 'no visible GPU'}). Pass {_set(name, 'cpu')}, "
                "or install a CUDA build of torch on a machine with a GPU."
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise DataError(
                f"{name} is {str(device)!r} but only {count} CUDA device(s) are visible (cuda:0…cuda:{count - 1}). "
                "Pick one of those."
            )
        return dev
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise DataError(f"{name} is 'mps' but the MPS backend is not available here. Pass {_set(name, 'cpu')}.")
        return dev
    if dev.type == "meta":
        raise DataError(
            f"{name} must be a device that holds data; got 'meta' (shapes only, no values). Pass "
            f"{_set(name, 'cpu')} or 'cuda'."
        )
    raise DataError(f"{name} must be 'cpu', 'cuda', 'cuda:N' or 'mps'; got {device!r}. Pass {_set(name, 'cpu')}.")


# The rule for every engine option, by name (issue 19 item 1): the same name gets the same check and the same
# message in every engine. ``None`` passes through for the options whose default is "decide from the data".
_INT_AT_LEAST_1 = (
    "max_iter", "n_init", "inner_iters", "num_chains", "num_samples", "thin", "batch_size", "n_passes",
    "doc_max_iter", "fold_in_iter", "patience", "num_steps", "num_draws",
)
_INT_AT_LEAST_0 = ("num_warmup", "num_ll_draws")
_REMEDIES = {
    "max_iter": "max_iter=0 would return the random start as a fit; pass e.g. max_iter=200.",
    "num_samples": "A sampler needs at least one kept draw; pass e.g. num_samples=200.",
    "num_chains": "Pass num_chains=1 or more (4 lets R-hat compare chains).",
    "num_ll_draws": "Pass num_ll_draws=0 to skip the pointwise log-likelihood, or e.g. 100.",
}


def check_options(**options: Any) -> tuple[Any, ...]:
    """Check engine options by name with the shared checkers of :mod:`latentfs.core.data`; returns the
    checked values in the order given (``dtype="float32"`` becomes ``torch.float32``, ``device`` a
    ``torch.device``, integers Python ints).

    Iteration, restart, chain and draw counts must be integers ≥ 1 (``num_warmup`` and ``num_ll_draws`` ≥ 0;
    ``num_ll_draws=0`` skips the pointwise log-likelihood, so the result has no ``log_likelihood`` group for
    ``az.loo``), ``tol`` a number ≥ 0 (not NaN), ``seed`` what :func:`~latentfs.core.data.check_seed` accepts,
    ``dtype`` float64/float32 (a torch dtype or its name, :func:`check_dtype`), ``device`` a device that exists
    here, ``empty_documents`` one of error/drop/keep, ``warn`` True or False and ``progress`` True, False or None
    (:func:`check_flag`).

    Examples
    --------
    >>> check_options(max_iter=10, dtype="float32")
    (10, torch.float32)
    """
    out: list[Any] = []
    for name, value in options.items():
        if name in _INT_AT_LEAST_1:
            value = check_int(name, value, low=1, remedy=_REMEDIES.get(name, ""))
        elif name in _INT_AT_LEAST_0:
            value = check_int(name, value, low=0, remedy=_REMEDIES.get(name, ""))
        elif name in ("tol", "doc_tol"):
            value = check_float(name, value, 0.0, remedy=f"Pass a small non-negative number, e.g. {name}=1e-6.")
        elif name == "seed":
            value = check_seed(value)
        elif name == "dtype":
            value = check_dtype(value)
        elif name == "device":
            value = check_device(value)
        elif name == "empty_documents":
            value = check_choice(name, value, ("error", "drop", "keep"))
        elif name == "warn":
            value = check_flag(name, value)
        elif name == "progress":
            value = check_flag(name, value, allow_none=True)
        else:  # pragma: no cover - a programming error in an engine
            raise TypeError(f"check_options has no rule for {name!r}")
        out.append(value)
    return tuple(out)


def check_flag(name: str, value: Any, *, allow_none: bool = False) -> bool | None:
    """A yes/no option: True or False (numpy booleans too), and None where it means "decide" (``progress=None``
    shows a bar when stderr is a terminal). Strings are refused: ``warn="no"`` would be true.

    Examples
    --------
    >>> check_flag("warn", False)
    False
    >>> check_flag("warn", "no")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latentfs.core.data.DataError: warn must be True or False; got 'no' (str). ...
    """
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    rule = "True, False or None" if allow_none else "True or False"
    meaning = " (None: a bar when stderr is a terminal)" if allow_none else ""
    raise DataError(
        f"{name} must be {rule}{meaning}; got {value!r} ({type(value).__name__}). Write {name}=False to turn it "
        f"off, {name}=True to turn it on: a string such as 'no' is not read as a yes/no answer."
    )


#: A column whose largest magnitude is below this has squares within a few orders of float64's smallest normal number.
_UNDERFLOW = 1e-150


def check_moments(values: np.ndarray, *, name: str = "X", underflow: bool = True) -> None:
    """Refuse continuous data whose column means or variances overflow float64 (an entry near 1e300 squares
    to inf), or whose column variances underflow (every entry of a column below 1e-150 in magnitude), which would
    otherwise surface as a ``LinAlgError`` or "probabilities contain NaN" deep inside. ``underflow=False`` checks
    the overflow only (new data scored by a fitted model: tiny values are legal there).

    Examples
    --------
    >>> check_moments(np.array([[1.0, 2.0], [3.0, 1e300]]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latentfs.core.data.DataError: X has values too large for float64 arithmetic: ...
    """
    with np.errstate(over="ignore", invalid="ignore"):
        mask = np.isfinite(values)
        # all finite (the usual case): a view of the entries, not a copy
        finite = np.ravel(values, order="K") if mask.all() else values[mask]
        finite = finite.astype(np.float64, copy=False)
        squares = float(np.dot(finite, finite))
        # a finite sum of squares below 1e300 bounds the variance too; near the limit, compute it
        ok = np.isfinite(squares) and (squares < 1e300 or bool(np.isfinite(np.var(finite))))
    if not ok:
        flat = int(np.nanargmax(np.abs(np.where(np.isfinite(values), values, 0.0))))
        row, col = np.unravel_index(flat, values.shape)
        raise DataError(
            f"{name} has values too large for float64 arithmetic: its squares overflow (largest |{name}| = "
            f"{abs(float(values[row, col])):.3g} at row {row}, column {col}). Rescale {name} (for example "
            "standardise its columns) or remove the outlying entries."
        )
    if underflow and values.ndim == 2 and values.size and mask.any():
        # the other end: a column whose every entry is below 1e-150 has squares (and a variance) that underflow to 0
        if mask.all():  # the usual case: no copy of the data
            largest = np.maximum(values.max(axis=0), -values.min(axis=0))
        else:
            with np.errstate(invalid="ignore"):
                kept = np.where(mask, np.abs(values), 0.0)  # a column with nothing finite has largest 0: not checked
            largest = kept.max(axis=0)
        tiny = np.flatnonzero((largest > 0) & (largest < _UNDERFLOW))
        if tiny.size:
            column = int(tiny[0])
            raise DataError(
                f"{name} has values too small for float64 arithmetic: its squares underflow (column {column}'s largest "
                f"|{name}| is {float(largest[column]):.3g}, below {_UNDERFLOW:g}). Rescale {name} (for example "
                "standardise its columns)."
            )
