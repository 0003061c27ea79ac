"""Scoring a corpus larger than a worker's memory: new data as a dask array run block by block (issue 34, item 5).

    python benchmarks/dask_new_data_memory.py [--rows 500000 5000000 --features 32 --block 100000 --limit 1GiB]

A factor analyser and a Gaussian mixture are fitted in memory on 20,000 rows. The new data are a dask array
generated lazily, block by block, from ``da.random.default_rng`` (rows × features float64: 0.12 and 1.19 GiB by
default), never held anywhere whole. A ``distributed.LocalCluster`` of two worker processes with one thread each
and ``memory_limit`` (1 GiB by default, less than the larger data) computes, for each size one after another:
``fa.transform(X).sum()``, ``fa.score(X)`` and ``gmm.predict(X)`` reduced to counts per component. Before each,
every worker's peak resident set size is reset (``/proc/self/clear_refs``, Linux only; after a warm-up on one
block); reported per worker and step: the peak RSS above the RSS at the reset, against the block's size, for a
data size 10× larger with the same blocks. Results go to ``benchmarks/results/dask_new_data.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path


def _status(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0  # kB -> MiB
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> float:
    """Reset this process's peak RSS to its current RSS; returns the RSS (MiB)."""
    import gc

    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")


def _peak() -> float:
    return _status("VmHWM")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[500_000, 5_000_000])
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--block", type=int, default=100_000)
    parser.add_argument("--limit", default="1GiB")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "dask_new_data.md"))
    args = parser.parse_args()

    import dask.array as da
    import distributed
    import numpy as np
    from dask.utils import parse_bytes

    import latentfs

    rng = np.random.default_rng(0)
    loadings = rng.normal(size=(3, args.features))
    train = rng.normal(size=(20_000, 3)) @ loadings + rng.normal(size=(20_000, args.features))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fa = latentfs.FactorAnalyzer(3, seed=0).fit(train)
        gmm = latentfs.GaussianMixtureClusterer(3, seed=0, n_init=1).fit(train)

    def new_data(n_rows):
        # each block drawn in its task from the seeded generator: nothing is materialised up front
        z = da.random.default_rng(1).standard_normal((n_rows, 3), chunks=(args.block, -1))
        noise = da.random.default_rng(2).standard_normal((n_rows, args.features), chunks=(args.block, -1))
        return z @ loadings + noise

    block_mib = args.block * args.features * 8 / 2**20
    limit = parse_bytes(args.limit)
    steps = {
        "fa.transform(X).sum()": lambda X: float(fa.transform(X).sum().compute()),
        "fa.score(X)": lambda X: fa.score(X),
        "gmm.predict(X) counts": lambda X: da.bincount(gmm.predict(X), minlength=3).compute().tolist(),
    }
    rows = []
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, memory_limit=limit, dashboard_address=":0",
            silence_logs=50,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        warm = new_data(args.block)
        for step in steps.values():
            step(warm)
        for n_rows in args.rows:
            X = new_data(n_rows)
            for name, step in steps.items():
                base = client.run(_reset_peak)
                start = time.perf_counter()
                value = step(X)
                seconds = time.perf_counter() - start
                peak = client.run(_peak)
                grew = {w: peak[w] - base[w] for w in base}
                rows.append((n_rows, name, value, seconds, base, grew))
                print(n_rows, name, value, f"{seconds:.1f} s", [f"{g:.0f} MiB" for g in grew.values()], flush=True)
        # the result on the first 50,000 rows equals the in-memory call (the same generator, one block computed)
        head = new_data(args.rows[-1])[:50_000]
        same = bool(np.allclose(fa.transform(head).compute(), fa.transform(head.compute()), rtol=1e-12, atol=1e-14))
    lines = [
        "# Scoring new data larger than a worker's memory (benchmarks/dask_new_data_memory.py)",
        "",
        f"`python benchmarks/dask_new_data_memory.py --rows {' '.join(map(str, args.rows))} --features {args.features} "
        f"--block {args.block} --limit {args.limit}`",
        "",
        f"New data: rows × {args.features} float64, generated lazily in blocks of {args.block:,} rows "
        f"({block_mib:.1f} MiB). LocalCluster: 2 worker processes × 1 thread, memory_limit {limit / 2**30:.2f} GiB "
        "each. Models fitted in memory on 20,000 rows (FA with 3 factors, a 3-component Gaussian mixture). "
        "Run under `nice -n 10` on a shared 2-core machine with one BLAS thread: the seconds are indicative only.",
        "",
        "| rows | data (GiB) | step | value | seconds | peak RSS above the reset, per worker (MiB) | RSS at the reset (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for n_rows, name, value, seconds, base, grew in rows:
        shown = f"{value:.6f}" if isinstance(value, float) else str(value)
        lines.append(
            f"| {n_rows:,} | {n_rows * args.features * 8 / 2**30:.2f} | `{name}` | {shown} | {seconds:.1f} | "
            f"{', '.join(f'{g:.0f}' for g in grew.values())} | {', '.join(f'{b:.0f}' for b in base.values())} |"
        )
    lines += [
        "",
        f"Blocks equal the in-memory call on the first 50,000 rows (1e-12): {same}.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
