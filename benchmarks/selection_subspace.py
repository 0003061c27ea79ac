"""Benchmark: PLS fit and VIP against scikit-learn's PLSRegression; forest relevance against Boruta.

Run: ``python benchmarks/selection_subspace.py [--quick]``. One thread everywhere; peers run in this
process on the same data; one untimed warm-up call, then medians of repeats of the process CPU time
(``time.process_time``: with one thread this is the compute each method needs, and other jobs on a shared
machine disturb it less than wall-clock time). Timings are still noisy: read the ratios.

* PLS: 1,000 × 5,000 dense Gaussian X with a planted low-rank signal, 10 components, one response (PLS1)
  and five responses (PLS2), centred only (``scale=False``) and autoscaled (``scale=True``).
  scikit-learn has no VIP; its fit time is the reference for "VIP at no more than 10% extra".
* Forest relevance: make_friedman1 with 50 features (5 relevant), label y > 14, 1,000 rows; Rogers & Gunn
  (100 trees, HT at γ = 0.05) against BorutaPy (100-tree forests of depth 5, up to 100 iterations) when the
  ``boruta`` package is installed, otherwise scikit-learn's permutation importance.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import sklearn  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

torch.set_num_threads(1)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up (page faults, lazy imports), not timed
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return float(np.median(times))


def bench_pls(n: int, p: int, n_components: int, repeats: int) -> list[tuple[str, float, float, float, float]]:
    from sklearn.cross_decomposition import PLSRegression

    from latentfs.subspace.pls import PLS

    rng = np.random.default_rng(0)
    latent = rng.normal(size=(n, 5))
    X = latent @ rng.normal(size=(5, p)) + rng.normal(size=(n, p))
    Y = latent @ rng.normal(size=(5, 5)) + 0.5 * rng.normal(size=(n, 5))
    rows = []
    for label, y in (("PLS1 (1 response)", Y[:, 0]), ("PLS2 (5 responses)", Y)):
        for scale in (False, True):
            ours = PLS(n_components, scale=scale)
            ref = PLSRegression(n_components, scale=scale)
            t_ours = median_time(lambda ours=ours, y=y: ours.fit(X, y), repeats)
            t_vip = median_time(lambda ours=ours: ours.vip(), max(repeats, 5))
            t_ref = median_time(lambda ref=ref, y=y: ref.fit(X, y), repeats)
            diff = float(np.abs(ours.predict(X) - ref.predict(X)).max())
            rows.append((f"{label}, scale={scale}", t_ours, t_vip, t_ref, diff))
    return rows


def bench_forest(n: int, repeats: int) -> list[tuple[str, float, str]]:
    from sklearn.datasets import make_friedman1

    from latentfs.select.forest import forest_relevance

    X, yr = make_friedman1(n, n_features=50, noise=1.0, random_state=0)
    y = (yr > 14).astype(int)

    def describe(mask: np.ndarray) -> str:
        mask = np.asarray(mask, dtype=bool)
        return f"{int(mask[:5].sum())}/5 relevant, {int(mask[5:].sum())}/45 noise"

    rows = []
    holder: dict = {}
    t = median_time(lambda: holder.update(fw=forest_relevance(X, y, n_trees=100, significance=0.05, seed=0)), repeats)
    rows.append(("latentfs forest_relevance (RF HT, γ=0.05)", t, describe(holder["fw"].info["selected_ht"])))
    rows.append(("latentfs forest_relevance (RF Thr)", t, describe(holder["fw"].info["selected_thr"])))
    from sklearn.ensemble import RandomForestClassifier

    try:
        from boruta import BorutaPy
    except ImportError:
        BorutaPy = None
    if BorutaPy is not None:
        def run_boruta() -> None:
            rf = RandomForestClassifier(n_jobs=1, max_depth=5, random_state=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                holder["boruta"] = BorutaPy(rf, n_estimators=100, max_iter=100, random_state=0).fit(X, y)

        t = median_time(run_boruta, repeats)
        rows.append(("BorutaPy (100 trees × ≤100 iterations)", t, describe(holder["boruta"].support_)))
    else:
        from sklearn.inspection import permutation_importance

        def run_perm() -> None:
            rf = RandomForestClassifier(n_estimators=100, n_jobs=1, random_state=0).fit(X, y)
            holder["perm"] = permutation_importance(rf, X, y, n_repeats=5, random_state=0, n_jobs=1)

        t = median_time(run_perm, repeats)
        imp = holder["perm"]
        rows.append(("sklearn permutation importance (mean − 2 sd > 0)", t,
                     describe(imp.importances_mean - 2 * imp.importances_std > 0)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and fewer repeats")
    args = parser.parse_args()
    n, p, repeats = (200, 1000, 2) if args.quick else (1000, 5000, 5)
    print(f"platform: {platform.platform()}; CPU: {cpu_model()}; python {platform.python_version()}")
    versions = f"numpy {np.__version__}, scipy {scipy.__version__}, scikit-learn {sklearn.__version__}"
    try:
        import boruta

        versions += f", boruta {getattr(boruta, '__version__', 'installed')}"
    except ImportError:
        versions += ", boruta not installed"
    print(f"versions: {versions}; threads: 1; repeats: {repeats} (median CPU time)\n")
    with threadpool_limits(1):
        print(f"## PLS on {n} × {p}, 10 components\n")
        print("| case | latentfs fit (s) | latentfs VIP (s) | VIP / fit | scikit-learn fit (s) "
              "| sklearn / latentfs | max |Δ prediction| |")
        print("|---|---|---|---|---|---|---|")
        for name, t_ours, t_vip, t_ref, diff in bench_pls(n, p, 10, repeats):
            print(f"| {name} | {t_ours:.3f} | {t_vip:.5f} | {t_vip / t_ours:.2%} | {t_ref:.3f} | "
                  f"{t_ref / t_ours:.2f}× | {diff:.1e} |")
        nf = 300 if args.quick else 1000
        print(f"\n## Forest relevance on make_friedman1 ({nf} rows, 50 features, 5 relevant)\n")
        print("| method | time (s) | selected |")
        print("|---|---|---|")
        for name, t, sel in bench_forest(nf, 1 if args.quick else 3):
            print(f"| {name} | {t:.2f} | {sel} |")


if __name__ == "__main__":
    main()
