"""The families' Dask fits (issue 16, item 1): the whole public call on a dask array against the same call in
memory, on dask's synchronous scheduler and on a ``distributed.LocalCluster`` of 1 and of 2 worker processes
(1 thread each), with the largest relative difference from the in-memory result.

Workloads (fixed iteration counts, ``tol=0``, so every run does the same work):

* ``fa``: FactorAnalysis(5) EM, 400,000 × 30 complete data (one moments pass, then EM on the driver);
* ``fa-missing``: the same model, 40,000 × 30 with 10% of entries missing (one E-step task per shard per
  iteration), 20 iterations;
* ``plsa``: PLSA(20) EM, 20,000 documents × 2,000 words (2M tokens, drawn with numpy from the aspect model),
  20 iterations, sparse shards;
* ``mixture``: GaussianMixture(10) EM, 200,000 × 20, 30 iterations, the start on 4,000 sampled rows
  (``init_rows``) in both calls.

Each shard is ~1/8 of the rows. Timings are wall seconds of one call (the cluster started beforehand and
warmed by a small fit; its start is not timed). Run: ``python benchmarks/dask_families.py [--workloads …]``;
the table goes to ``benchmarks/results/dask_families.md``.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

import latentfs  # noqa: E402
from latentfs.models.factor import FactorAnalysis  # noqa: E402
from latentfs.models.mixture import GaussianMixture  # noqa: E402
from latentfs.models.plsa import PLSA  # noqa: E402

RESULTS = Path(__file__).with_name("results") / "dask_families.md"


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def workloads(names: list[str]) -> list[tuple[str, object, object, dict, str]]:
    rng = np.random.default_rng(0)
    out = []
    if "fa" in names or "fa-missing" in names:
        W = rng.normal(size=(30, 5))
        X = FactorAnalysis(5).simulate(400_000, loadings=W, noise_variance=0.5, mean=0.0, seed=0)["data"]
        if "fa" in names:
            out.append(("fa", FactorAnalysis(5), X, dict(method="em", seed=0, max_iter=50, tol=0.0), "loadings"))
        if "fa-missing" in names:
            Y = X[:40_000].copy()
            Y[rng.random(Y.shape) < 0.1] = np.nan
            out.append(("fa-missing", FactorAnalysis(5), Y,
                        dict(method="em", seed=0, max_iter=20, tol=0.0, acceleration="none"), "loadings"))
    if "plsa" in names:
        K, J, I = 20, 2000, 20_000
        topic_word = rng.dirichlet(np.full(J, 0.1), size=K)
        doc_topic = rng.dirichlet(np.full(K, 0.5), size=I)
        counts = np.stack([rng.multinomial(100, doc_topic[i] @ topic_word) for i in range(I)])
        out.append(("plsa", PLSA(K), sp.csr_matrix(counts), dict(method="em", seed=0, max_iter=20, tol=0.0),
                    "topic_word"))
    if "mixture" in names:
        X = GaussianMixture(10, mean_precision=0.05).simulate(200_000, 20, seed=0)["data"]
        out.append(("mixture", GaussianMixture(10), X,
                    dict(method="em", seed=0, max_iter=30, tol=0.0, n_init=1, init_rows=4000), "means"))
    return out


def timed(model, X, opts):
    """One whole call ``latentfs.fit(model, X, **opts)`` and its wall seconds."""
    t = time.perf_counter()
    out = latentfs.fit(model, X, **opts)
    return out, time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=["fa", "fa-missing", "plsa", "mixture"])
    args = parser.parse_args()
    warnings.simplefilter("ignore", latentfs.ConvergenceWarning)
    import distributed

    load_before = os.getloadavg()[0]
    rows = []
    for name, model, X, opts, site in workloads(args.workloads):
        chunks = (X.shape[0] // 8, -1)
        Xd = da.from_array(X, chunks=chunks, asarray=not sp.issparse(X))
        ref, t_mem = timed(model, X, opts)
        with dask.config.set(scheduler="synchronous"):
            syn, t_syn = timed(model, Xd, opts)
        cluster_times = {}
        for workers in (1, 2):
            with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                          dashboard_address=":0", silence_logs=50) as lc, distributed.Client(lc):
                small = Xd[: X.shape[0] // 8]
                latentfs.fit(model, small, **{**opts, "max_iter": 2})  # warm the workers' imports
                res, cluster_times[workers] = timed(model, Xd, opts)
        diff = max(_rel(syn.mean(site), ref.mean(site)), _rel(res.mean(site), ref.mean(site)))
        rows.append((name, X.shape, t_mem, t_syn, cluster_times[1], cluster_times[2], diff))
        print(rows[-1], flush=True)
    lines = [
        "# The families' Dask fits: sharded against in memory, 1 and 2 workers",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}, "
        f"torch {torch.__version__}, dask {dask.__version__}; load average (1 min) {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after. Date: {time.strftime('%Y-%m-%d')}.",
        f"Command: `python benchmarks/dask_families.py --workloads {' '.join(args.workloads)}`; wall seconds of one "
        "whole call each, 8 row shards.",
        "",
        "| workload | rows × cols | in memory s | dask synchronous s | LocalCluster 1 worker s | 2 workers s | "
        "1→2 workers | max rel. diff vs in memory |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, shape, t_mem, t_syn, t1, t2, diff in rows:
        lines.append(f"| {name} | {shape[0]:,} × {shape[1]:,} | {t_mem:.2f} | {t_syn:.2f} | {t1:.2f} | {t2:.2f} | "
                     f"{t1 / t2:.2f}× | {diff:.1e} |")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
