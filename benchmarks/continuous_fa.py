"""Factor analysis: latentfs EM vs scikit-learn FactorAnalysis and factor_analyzer, one thread.

Usage: ``python benchmarks/continuous_fa.py [--quick] [--repeats R]``, and ``--whole [--repeats R]`` for the
whole default calls in fresh processes (issue 15, item 6): ``latentfs.fit(FactorAnalysis(k), X)`` beside
``sklearn.decomposition.FactorAnalysis(k).fit(X)``, each the first call in a new Python process, both scored by
the same exact log-likelihood.

Data: simulated from ``FactorAnalysis(k)`` (loadings N(0, 1), noise variances U(0.5, 2), means N(0, 1)),
n = 5000, d = 200, k = 10 (``--quick``: n = 1000, d = 50, k = 5).

"Time to the same log-likelihood": every fit's parameters are scored with one function (the exact
Gaussian log-likelihood of the observed entries, latentfs ``factor_posterior``). The reference ℓ* is
the best log-likelihood any method reaches; a method "reaches" it when its ℓ ≥ ℓ* − 1e-7·|ℓ*|.
Times are wall-clock medians over repeats, including input validation and the covariance pass.

Missing data: the same matrix with 10% and 30% of the entries blanked completely at random. latentfs
runs its exact per-pattern EM; the peers cannot take NaN, so they get the column-mean-imputed matrix
(factor_analyzer's own ``impute="mean"``), and their parameters are scored on the observed entries.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

torch.set_num_threads(1)
threadpool_limits(1)

import latentfs  # noqa: E402
from latentfs.inference.factor import em as fem  # noqa: E402
from latentfs.models.factor import FactorAnalysis  # noqa: E402


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def loglik(X: np.ndarray, W: np.ndarray, psi: np.ndarray, mu: np.ndarray) -> float:
    """Exact log-likelihood of the observed entries of X under N(μ, W Wᵗ + diag ψ)."""
    data = fem.prepare_fa_data(X, dtype=torch.float64, device="cpu", use_moments=False)
    p = fem.FAParams(*(torch.as_tensor(np.array(a, dtype=np.float64)) for a in (W, psi, mu)))
    return float(fem.factor_posterior(p, data)[2].sum())


def run_latentfs(X: np.ndarray, k: int, tol: float) -> tuple[float, dict]:
    t0 = time.perf_counter()
    post = latentfs.fit(FactorAnalysis(k), X, method="em", tol=tol, max_iter=20000, progress=False)
    dt = time.perf_counter() - t0
    params = {s: post.mean(s) for s in ("loadings", "noise_variance", "mean")}
    return dt, {"params": params, "n_iter": post.diagnostics["n_iter"]}


def run_sklearn(X: np.ndarray, k: int, svd_method: str, tol: float) -> tuple[float, dict]:
    from sklearn.decomposition import FactorAnalysis as SkFA

    Xf = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = SkFA(k, svd_method=svd_method, tol=tol, max_iter=20000, random_state=0).fit(Xf)
    dt = time.perf_counter() - t0
    return dt, {"params": {"loadings": sk.components_.T, "noise_variance": sk.noise_variance_, "mean": sk.mean_},
                "n_iter": sk.n_iter_}


def _patch_factor_analyzer() -> None:
    """factor_analyzer 0.5.1 calls scikit-learn's check_array(force_all_finite=...), a keyword that
    scikit-learn 1.8 renamed to ensure_all_finite; translate it (benchmark-only shim)."""
    import factor_analyzer.factor_analyzer as fa_mod
    from sklearn.utils import check_array

    def shim(*args, **kwargs):
        if "force_all_finite" in kwargs:
            kwargs["ensure_all_finite"] = kwargs.pop("force_all_finite")
        return check_array(*args, **kwargs)

    fa_mod.check_array = shim


def run_factor_analyzer(X: np.ndarray, k: int) -> tuple[float, dict]:
    from factor_analyzer import FactorAnalyzer

    _patch_factor_analyzer()

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fa = FactorAnalyzer(n_factors=k, rotation=None, method="ml", impute="mean").fit(X)
    dt = time.perf_counter() - t0
    # factor_analyzer fits the correlation matrix: map back to the covariance scale
    sd = np.nanstd(X, axis=0)
    W = fa.loadings_ * sd[:, None]
    psi = fa.get_uniquenesses() * sd**2
    return dt, {"params": {"loadings": W, "noise_variance": psi, "mean": np.nanmean(X, axis=0)}, "n_iter": None}


def timed(fn, repeats: int) -> tuple[float, dict]:
    times, out = [], None
    for _ in range(repeats):
        dt, out = fn()
        times.append(dt)
    return statistics.median(times), out


def simulated(quick: bool) -> tuple[np.ndarray, int]:
    n, d, k = (1000, 50, 5) if quick else (5000, 200, 10)
    rng = np.random.default_rng(0)
    W = rng.normal(size=(d, k))
    psi = rng.uniform(0.5, 2.0, size=d)
    mu = rng.normal(size=d)
    return FactorAnalysis(k).simulate(n, loadings=W, noise_variance=psi, mean=mu, seed=1)["data"], k


def whole_child(which: str, quick: bool) -> None:
    """One default whole call, the first in this process; prints its time and log-likelihood."""
    import json

    X, k = simulated(quick)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0, c0 = time.perf_counter(), time.process_time()
        if which == "latentfs":
            post = latentfs.fit(FactorAnalysis(k), X)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            p = {s: post.mean(s) for s in ("loadings", "noise_variance", "mean")}
        else:
            from sklearn.decomposition import FactorAnalysis as SkFA

            sk = SkFA(k).fit(X)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            p = {"loadings": sk.components_.T, "noise_variance": sk.noise_variance_, "mean": sk.mean_}
    ll = loglik(X, p["loadings"], p["noise_variance"], p["mean"])
    print("RESULT " + json.dumps({"wall": wall, "cpu": cpu, "ll": ll}), flush=True)


def whole_calls(quick: bool, repeats: int) -> None:
    import json
    import subprocess
    import sys

    rows = []
    for _ in range(repeats):
        row = {}
        for which in ("latentfs", "sklearn"):
            out = subprocess.run([sys.executable, __file__, "--child", which] + (["--quick"] if quick else []),
                                 capture_output=True, text=True, check=True).stdout
            row[which] = json.loads([x for x in out.splitlines() if x.startswith("RESULT ")][-1][7:])
        rows.append(row)
        print(f"latentfs {row['latentfs']['wall']:.3f} s (CPU {row['latentfs']['cpu']:.3f}) ℓ {row['latentfs']['ll']:.4f}"
              f" | scikit-learn {row['sklearn']['wall']:.3f} s (CPU {row['sklearn']['cpu']:.3f}) "
              f"ℓ {row['sklearn']['ll']:.4f} | load {os.getloadavg()[0]:.1f}", flush=True)
    med = {w: statistics.median(r[w]["cpu"] for r in rows) for w in ("latentfs", "sklearn")}
    medw = {w: statistics.median(r[w]["wall"] for r in rows) for w in ("latentfs", "sklearn")}
    better = sum(r["latentfs"]["ll"] >= r["sklearn"]["ll"] for r in rows)
    print(f"\nwhole default calls, fresh processes, median of {repeats}: latentfs {medw['latentfs']:.3f} s wall "
          f"({med['latentfs']:.3f} s CPU), scikit-learn {medw['sklearn']:.3f} s wall ({med['sklearn']:.3f} s CPU): "
          f"{med['sklearn'] / med['latentfs']:.2f}× by CPU, {medw['sklearn'] / medw['latentfs']:.2f}× by wall; "
          f"latentfs's log-likelihood ≥ scikit-learn's in {better} of {repeats}")


def main() -> None:
    from bytecode import byte_compile_latentfs  # noqa: PLC0415

    byte_compile_latentfs()  # as an installed package is (benchmarks/bytecode.py)
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--whole", action="store_true", help="default whole calls in fresh processes only")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        whole_child(args.child, args.quick)
        return
    repeats = args.repeats or (1 if args.quick else 3)
    if args.whole:
        whole_calls(args.quick, repeats)
        return
    X, k = simulated(args.quick)
    n, d = X.shape

    from importlib.metadata import version

    print(f"platform: {platform.platform()}; CPU: {cpu_model()}; python {platform.python_version()}")
    print(f"torch {torch.__version__}, numpy {np.__version__}, scikit-learn {version('scikit-learn')}, "
          f"factor_analyzer {version('factor_analyzer')}, latentfs {version('latentfs')}")
    print(f"n={n}, d={d}, k={k}, 1 thread, median of {repeats} repeat(s); shared machine: timings are noisy\n")

    methods = {
        "latentfs em (squarem, tol 1e-9)": lambda: run_latentfs(X, k, 1e-9),
        "scikit-learn (randomized, tol 1e-2 default)": lambda: run_sklearn(X, k, "randomized", 1e-2),
        "scikit-learn (lapack, tol 1e-2)": lambda: run_sklearn(X, k, "lapack", 1e-2),
        "factor_analyzer (ml)": lambda: run_factor_analyzer(X, k),
    }
    results = {}
    for name, fn in methods.items():
        reps = 1 if name.startswith("factor_analyzer") else repeats
        dt, out = timed(fn, reps)
        p = out["params"]
        results[name] = (dt, loglik(X, p["loadings"], p["noise_variance"], p["mean"]), out["n_iter"])
    best = max(r[1] for r in results.values())
    base = results["scikit-learn (randomized, tol 1e-2 default)"][0]
    print(f"{'method':46s} {'time s':>9s} {'vs sklearn':>10s} {'iters':>6s} {'log-lik':>18s} {'ℓ*−ℓ':>10s} reached")
    for name, (dt, ll, it) in results.items():
        ok = ll >= best - 1e-7 * abs(best)
        print(f"{name:46s} {dt:9.3f} {base / dt:9.2f}x {str(it):>6s} {ll:18.4f} {best - ll:10.4f} {ok}")

    print("\nmissing data (MCAR); latentfs exact EM vs peers on the mean-imputed matrix, "
          "all scored on the observed entries")
    print(f"{'missing':>8s} {'method':40s} {'time s':>9s} {'× complete':>10s} {'iters':>6s} {'observed log-lik':>18s}")
    t_complete = results["latentfs em (squarem, tol 1e-9)"][0]
    for frac in (0.1, 0.3):
        Xm = X.copy()
        Xm[np.random.default_rng(2).uniform(size=X.shape) < frac] = np.nan
        rows = {
            "latentfs em, exact missing-data E-step": lambda Xm=Xm: run_latentfs(Xm, k, 1e-9),
            "scikit-learn randomized, mean-imputed": lambda Xm=Xm: run_sklearn(Xm, k, "randomized", 1e-2),
        }
        if args.quick:
            rows["factor_analyzer ml, mean-imputed"] = lambda Xm=Xm: run_factor_analyzer(Xm, k)
        for name, fn in rows.items():
            dt, out = timed(fn, 1)
            p = out["params"]
            ll = loglik(Xm, p["loadings"], p["noise_variance"], p["mean"])
            print(f"{frac:8.0%} {name:40s} {dt:9.3f} {dt / t_complete:9.1f}x {str(out['n_iter']):>6s} {ll:18.2f}")


if __name__ == "__main__":
    main()
