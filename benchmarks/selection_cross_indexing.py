"""Reunanen's protocol (Tables 3 and 5) on wdbc: how biased is each estimate of the gain of feature selection?

    OMP_NUM_THREADS=1 python benchmarks/selection_cross_indexing.py [--repeats R] [--data wdbc|wine]

wdbc (scikit-learn's copy, 569 × 30) split in two halves (f = 2): the search set (m = 284, stratified) and a
held-out test set. On the search set a wrapper search (SFS or SFFS, 5-fold inner CV of 1-NN) is run inside 5
outer folds, giving the K × D matrix; methods 0 (the search's own inner-CV curve), 1 (outer loop), 2
(cross-indexing A) and 3 (B) estimate the best size d̂ and the gain δ^(e) over the full set; the search on the
whole search set then gives the subset of size round(d̂), whose gain δ^(t) on the test set is measured; the
bias is Δ = δ^(e) − δ^(t) (digest book_part3 §7.5). Features are z-scored with the search set's moments.
Mean ± s.d. over R repeats (the chapter uses 30; the default here is 5 to stay within a few minutes).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from sklearn.datasets import load_breast_cancer, load_wine

from latentfs.evaluate.cross_indexing import cross_indexing_report, stratified_folds


def run(data: str, repeats: int) -> str:
    X, y = (load_breast_cancer if data == "wdbc" else load_wine)(return_X_y=True)
    D = X.shape[1]
    lines = [f"| search | method | d̂ | η (%) | δ^(e) | δ^(t) | Δ |  ({data}, D = {D}, {repeats} repeats)",
             "|---|---|---|---|---|---|---|"]
    for search in ("sfs", "sffs"):
        rows: list[list[tuple[float, float, float, float, float]]] = []
        t0 = time.perf_counter()
        for r in range(repeats):
            half = stratified_folds(y, 2, np.random.default_rng(r)) == 0
            mu, sd = X[half].mean(0), X[half].std(0)
            Xs, Xt = (X[half] - mu) / sd, (X[~half] - mu) / sd
            rep = cross_indexing_report(Xs, y[half], search, X_test=Xt, y_test=y[~half], seed=r, n_boot=200)
            rows.append([(m.size, m.eta, m.delta_e, m.delta_t, m.bias) for m in rep.methods])
        arr = np.array(rows)  # (R, 4, 5)
        for i in range(arr.shape[1]):
            mean, sdv = arr[:, i].mean(0), arr[:, i].std(0, ddof=1) if repeats > 1 else np.zeros(5)
            cells = [f"{mean[0]:.1f} ± {sdv[0]:.1f}", f"{mean[1]:.0f} ± {sdv[1]:.0f}"]
            cells += [f"{100 * mean[j]:.1f} ± {100 * sdv[j]:.1f}" for j in (2, 3, 4)]
            lines.append(f"| {search.upper()} | {i} | " + " | ".join(cells) + " |")
        print(f"{search}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return "\n".join(lines)


def main() -> int:
    args = sys.argv[1:]
    repeats = int(args[args.index("--repeats") + 1]) if "--repeats" in args else 5
    data = args[args.index("--data") + 1] if "--data" in args else "wdbc"
    print(run(data, repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
