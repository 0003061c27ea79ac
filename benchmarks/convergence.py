"""Convergence diagnostics: ``latentfs.core.convergence`` beside ArviZ 0.23 on the same draws.

Two tables, one thread:

* **calls**: CPU seconds of ``rhat``, ``ess_bulk``, ``ess_tail`` and ``diagnostics`` (the three at once) beside
  ``az.rhat(method="rank")``, ``az.ess(method="bulk")`` and ``az.ess(method="tail")`` on standard normal
  draws: one (4, 100) entry (median of ``--repeats`` calls; ArviZ on the bare ndarray), a (4, 1000, 10) site and
  sites of (4, 100, E) for E = 2,000 and E = 200 × 5,000 (ArviZ through a dataset, as ``az.summary`` does).
  ArviZ loops over entries in Python, so on the largest site it is timed on its first ``--arviz-entries``
  entries and scaled to all of them (marked ``~``); the largest site needs 3.2 GB for its draws.
  The largest relative difference between the two over the entries ArviZ computed is printed beside each row.
* **fresh process**: wall seconds of a new interpreter that imports the module (``import numpy`` alone for
  reference), and of one that also makes a first call on one (4, 100) entry.

    python benchmarks/convergence.py [--repeats 5] [--arviz-entries 2000] [--no-large]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bytecode import byte_compile_latentfs  # noqa: E402

from latentfs.core import convergence as cv  # noqa: E402

OURS: dict[str, Callable[[np.ndarray], object]] = {
    "rhat": cv.rhat,
    "ess_bulk": cv.ess_bulk,
    "ess_tail": cv.ess_tail,
    "diagnostics": cv.diagnostics,
}

FRESH = {
    "python -c pass": "pass",
    "import numpy": "import numpy",
    "import latentfs.core.convergence": "import latentfs.core.convergence",
    "  + first rhat, ess_bulk, ess_tail": (
        "import numpy as np, latentfs.core.convergence as cv\n"
        "x = np.random.default_rng(0).normal(size=(4, 100))\ncv.rhat(x); cv.ess_bulk(x); cv.ess_tail(x)"
    ),
    "import scipy.stats": "import scipy.stats",
    "import arviz": "import arviz",
    "  + first az.rhat, az.ess bulk, tail": (
        "import numpy as np, arviz as az\n"
        "x = np.random.default_rng(0).normal(size=(4, 100))\n"
        "az.rhat(x); az.ess(x, method='bulk'); az.ess(x, method='tail')"
    ),
}


def _arviz_functions() -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    import arviz as az

    def through_dataset(function: Callable[..., object], **kwargs: object) -> Callable[[np.ndarray], np.ndarray]:
        def call(draws: np.ndarray) -> np.ndarray:
            if draws.ndim == 2:  # one entry: ArviZ's fastest path, the bare ndarray
                return np.asarray(function(draws, **kwargs))
            dataset = az.convert_to_dataset({"theta": draws})
            return np.asarray(function(dataset, **kwargs)["theta"].values)  # type: ignore[index]

        return call

    return {
        "rhat": through_dataset(az.rhat, method="rank"),
        "ess_bulk": through_dataset(az.ess, method="bulk"),
        "ess_tail": through_dataset(az.ess, method="tail"),
    }


def _cpu_seconds(function: Callable[[np.ndarray], object], draws: np.ndarray, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.process_time()
        result = function(draws)
        times.append(time.process_time() - start)
    return statistics.median(times), result


def _relative_difference(ours: np.ndarray, theirs: np.ndarray) -> float:
    ours, theirs = np.asarray(ours, dtype=float).ravel(), np.asarray(theirs, dtype=float).ravel()
    if not np.array_equal(np.isnan(ours), np.isnan(theirs)):
        return float("inf")
    finite = np.isfinite(theirs)
    if not finite.any():
        return 0.0
    return float(np.max(np.abs(ours[finite] - theirs[finite]) / np.abs(theirs[finite])))


def calls_table(repeats: int, arviz_entries: int, large: bool) -> None:
    theirs = _arviz_functions()
    rng = np.random.default_rng(0)
    cases = [("(4, 100)", (4, 100)), ("(4, 1000, 10)", (4, 1000, 10)), ("(4, 100, 2000)", (4, 100, 2000))]
    if large:
        cases.append(("(4, 100, 200 x 5000)", (4, 100, 200, 5000)))
    for ours in OURS.values():  # warm-up: the first call imports scipy.special
        ours(rng.normal(size=(4, 100)))
    for arviz_function in theirs.values():
        arviz_function(rng.normal(size=(4, 100, 2)))  # warm-up: numba compiles ArviZ's variance
    print(f"{'draws':<22}{'function':<13}{'latentfs s':>12}{'ArviZ s':>13}{'speed-up':>10}{'max rel. diff':>15}")
    for label, shape in cases:
        draws = rng.standard_normal(size=shape)
        n_entry = int(np.prod(shape[2:], dtype=np.int64))
        rounds = repeats if n_entry <= 2000 else 1
        if len(shape) == 2:
            sample, scale = draws, 1.0
        else:  # ArviZ's time grows with the entries: time a slice and scale it
            sample = draws.reshape(4, shape[1], -1)[:, :, :arviz_entries]
            scale = n_entry / sample.shape[2]
        for name, function in OURS.items():
            ours_s, ours_value = _cpu_seconds(function, draws, rounds)
            if name == "diagnostics":
                print(f"{label:<22}{name:<13}{ours_s:12.4g}{'':>13}{'':>10}{'':>15}")
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs_s, theirs_value = _cpu_seconds(theirs[name], sample, rounds)
            ours_sample = np.asarray(ours_value).reshape(-1)[: np.asarray(theirs_value).size]
            difference = _relative_difference(ours_sample, np.asarray(theirs_value))
            theirs_s *= scale
            mark = "~" if scale > 1 else " "
            print(f"{label:<22}{name:<13}{ours_s:12.4g}{mark:>2}{theirs_s:11.4g}{theirs_s / ours_s:9.1f}x"
                  f"{difference:15.1e}")


def fresh_table(repeats: int) -> None:
    byte_compile_latentfs()  # as an installed package is (benchmarks/bytecode.py)
    print(f"\n{'fresh process (wall s, median of ' + str(repeats) + ')':<44}{'seconds':>10}")
    for label, code in FRESH.items():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-W", "ignore", "-c", code], check=True)
            times.append(time.perf_counter() - start)
        print(f"{label:<44}{statistics.median(times):10.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--arviz-entries", type=int, default=2000)
    parser.add_argument("--no-large", action="store_true", help="skip the (4, 100, 200 x 5000) site")
    args = parser.parse_args()
    import arviz
    import numba

    print(f"numpy {np.__version__}, ArviZ {arviz.__version__} (numba {numba.__version__}: ArviZ's variances "
          f"in one pass), Python {sys.version.split()[0]}, one thread, CPU seconds\n")
    calls_table(args.repeats, args.arviz_entries, not args.no_large)
    fresh_table(args.repeats)


if __name__ == "__main__":
    main()
