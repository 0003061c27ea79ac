"""Gaussian mixture EM on defaults: the whole public call of latentfs vs scikit-learn (issue 15, item 3).

Each timing is the first call in a fresh Python process (imports done before the clock starts, as a user's
script imports before it fits):

* latentfs: ``latentfs.fit(GaussianMixture(k), X, seed=r)`` (all defaults: ``method="em"``, ``n_init="auto"``
  — one start at this size —, a k-means start made robust by the best of 5 k-means on a 1000-row
  subsample refined on all rows, ``reg_covar=1e-7`` relative to each column's variance, ``tol=1e-6``);
* scikit-learn: ``sklearn.mixture.GaussianMixture(k, random_state=r).fit(X)`` (defaults: one KMeans start,
  ``reg_covar=1e-6``, ``tol=1e-3``).

Both log-likelihoods (per sample) are printed beside the times, so "faster to scikit-learn's
log-likelihood" can be read off: the ratio counts only if latentfs's value is at least scikit-learn's.
A second table gives the engine-only figure: latentfs EM from scikit-learn's own starting point
(its KMeans responsibilities), run for as many iterations as scikit-learn used, against scikit-learn's
fit. One thread everywhere; medians over repeats (data seed fixed, a different fit seed per repeat).

    python benchmarks/continuous_mixture.py            # n=20000, d=20, K=10, 5 repeats
    python benchmarks/continuous_mixture.py --quick    # n=4000, 2 repeats
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def planted_data(n: int, d: int, k: int, seed: int) -> np.ndarray:
    """K Gaussian clusters with random full covariances and overlapping means (EM needs tens of steps)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 2.0, size=(k, d))
    factors = rng.normal(size=(k, d, d)) / np.sqrt(d)
    z = rng.integers(0, k, n)
    return means[z] + np.einsum("nij,nj->ni", factors[z], rng.normal(size=(n, d)))


def worker(which: str, n: int, d: int, k: int, seed: int) -> dict:
    """One timed call in this (fresh) process."""
    import warnings

    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    from sklearn.mixture import GaussianMixture as SkGM

    import latentfs
    from latentfs.models.mixture import GaussianMixture

    X = planted_data(n, d, k, seed=0)
    out: dict = {}
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if which == "latentfs":
            t0, c0 = time.perf_counter(), time.process_time()
            res = latentfs.fit(GaussianMixture(k), X, seed=seed)
            out["wall"], out["cpu"] = time.perf_counter() - t0, time.process_time() - c0
            out["ll"] = res.diagnostics["log_likelihood"] / n
            out["n_iter"] = res.diagnostics["n_iter"]
        elif which == "sklearn":
            t0, c0 = time.perf_counter(), time.process_time()
            sk = SkGM(k, random_state=seed).fit(X)
            out["wall"], out["cpu"] = time.perf_counter() - t0, time.process_time() - c0
            out["ll"] = float(sk.score(X))
            out["n_iter"] = int(sk.n_iter_)
        else:  # engine only: the same start and iteration count for both
            from sklearn.cluster import KMeans

            labels = KMeans(k, n_init=1, random_state=seed).fit(X).labels_
            resp = np.eye(k)[labels]
            t0 = time.process_time()
            sk = SkGM(k, random_state=seed).fit(X)
            out["cpu_sklearn"] = time.process_time() - t0
            t0 = time.process_time()
            res = latentfs.fit(GaussianMixture(k), X, method="em", init={"responsibilities": resp},
                               max_iter=int(sk.n_iter_), tol=0.0, warn=False, progress=False)
            out["cpu_latentfs"] = time.process_time() - t0
            out["n_iter"] = int(sk.n_iter_)
    return out


def spawn(which: str, n: int, d: int, k: int, seed: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", which, "--n", str(n), "--d", str(d), "--k", str(k),
           "--seed", str(seed)]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(text.strip().splitlines()[-1])


def main() -> None:
    from bytecode import byte_compile_latentfs  # noqa: PLC0415

    byte_compile_latentfs()  # as an installed package is (benchmarks/bytecode.py)
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--worker", default=None)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.d, args.k, args.seed)))
        return
    n, d, k = (4000, 20, 10) if args.quick else (args.n, args.d, args.k)
    repeats = args.repeats or (2 if args.quick else 5)

    import sklearn
    import torch

    rows = []
    for rep in range(repeats):
        ours, theirs = spawn("latentfs", n, d, k, rep), spawn("sklearn", n, d, k, rep)
        rows.append((ours, theirs, spawn("engine", n, d, k, rep)))
    print(f"GaussianMixture EM on defaults, full covariance, n={n}, d={d}, K={k}; {repeats} repeat(s), 1 thread, "
          "each call the first in a fresh process")
    print(f"platform: {platform.platform()}; CPU: {cpu_model()}")
    print(f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}, "
          f"scikit-learn {sklearn.__version__}")
    print()
    print("| repeat | latentfs CPU s / wall s | ll/sample | iters | scikit-learn CPU s / wall s | ll/sample | iters | "
          "speed-up (CPU / wall) |")
    print("|---|---|---|---|---|---|---|---|")
    for i, (o, t, _) in enumerate(rows):
        print(f"| {i} | {o['cpu']:.3f} / {o['wall']:.3f} | {o['ll']:.5f} | {o['n_iter']} | {t['cpu']:.3f} / "
              f"{t['wall']:.3f} | {t['ll']:.5f} | {t['n_iter']} | {t['cpu'] / o['cpu']:.2f}x / "
              f"{t['wall'] / o['wall']:.2f}x |")
    cpu_o, wall_o = (np.median([o[key] for o, _, _ in rows]) for key in ("cpu", "wall"))
    cpu_t, wall_t = (np.median([t[key] for _, t, _ in rows]) for key in ("cpu", "wall"))
    better = sum(o["ll"] >= t["ll"] - 1e-6 for o, t, _ in rows)
    print(f"| median | {cpu_o:.3f} / {wall_o:.3f} | | | {cpu_t:.3f} / {wall_t:.3f} | | | {cpu_t / cpu_o:.2f}x / "
          f"{wall_t / wall_o:.2f}x |")
    print(f"\nlatentfs log-likelihood ≥ scikit-learn's in {better} of {repeats} repeats.")
    eng = np.array([[e["cpu_sklearn"], e["cpu_latentfs"], e["n_iter"]] for _, _, e in rows])
    print(f"Engine only (same KMeans start, scikit-learn's iteration count, median {int(np.median(eng[:, 2]))} "
          f"iterations): scikit-learn {np.median(eng[:, 0]):.3f} s, latentfs {np.median(eng[:, 1]):.3f} s CPU, "
          f"{np.median(eng[:, 0] / eng[:, 1]):.2f}x.")


if __name__ == "__main__":
    main()
