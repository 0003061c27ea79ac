"""Relabelling cost: ``latentfs.core.relabel.relabel_draws`` on synthetic draws (issue 15).

Each draw is one row-normalised Gamma draw around a fixed set of K Dirichlet rows over M entries, its labels
permuted at random in half of the draws (2 chains). Reported: the median wall time of 3 calls after a warm-up,
the pivot iterations and a checksum of the permutations (equal before and after a change that must not move
them).

    python benchmarks/relabel.py                  # 3 × 20 (2 × 2,000 draws), 10 × 100 (2 × 1,000), 200 × 5,000 (2 × 50)
    python benchmarks/relabel.py --case 10 100 1000
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from latentfs.core.relabel import relabel_draws  # noqa: E402


def draws(k: int, m: int, per_chain: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.dirichlet(np.full(m, 0.05), size=k)
    x = np.empty((2, per_chain, k, m))
    for c in range(2):
        for d in range(per_chain):
            theta = rng.standard_gamma(base * 2000 + 0.01)
            theta /= theta.sum(1, keepdims=True)
            x[c, d] = theta[rng.permutation(k)] if rng.random() < 0.5 else theta
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs=3, type=int, action="append", metavar=("K", "M", "DRAWS_PER_CHAIN"))
    args = ap.parse_args()
    for k, m, n in args.case or [(3, 20, 2000), (10, 100, 1000), (200, 5000, 50)]:
        x = draws(k, m, n)
        relabel_draws(x[:, :2])
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            perms, iterations = relabel_draws(x)
            times.append(time.perf_counter() - t0)
        print(f"K={k} M={m} draws=2x{n}: {1e3 * float(np.median(times)):.1f} ms (median of 3), {iterations} "
              f"iterations, checksum {int((perms * np.arange(k)).sum())}")


if __name__ == "__main__":
    main()
