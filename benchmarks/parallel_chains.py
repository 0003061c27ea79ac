"""Chains in parallel (issues 15 item 4 and 16 item 3): the whole default call, chains one after another
against ``chain_method="parallel"`` (each chain in a worker process), in fresh processes.

Workloads (defaults of each engine unless stated; DCA samplers run 2 chains, FA Gibbs 4):

* ``collapsed``: ``latentfs.fit(DirichletDCA(50), X, method="collapsed_gibbs")`` on sim50 (1,800 simulated
  documents × 5,000 words, 270k tokens, the corpus of ``benchmarks/dca_collapsed.py``);
* ``collapsed-long``: the same call with ``num_warmup=800, num_samples=200`` (2 × 1,000 sweeps);
* ``gibbs``: ``latentfs.fit(DirichletDCA(20), X, method="gibbs")`` on the same corpus;
* ``fa``: ``latentfs.fit(FactorAnalysis(5, proper priors), X, method="gibbs")`` on 2,000 × 50 Gaussian data.

Each call runs in a new Python process (imports untimed; the first parallel call in a process starts the
worker pool, and that start is timed, as a user pays it). Reported: wall seconds (median of ``--repeats``),
the speed-up, and whether the draws are identical to the sequential call's (a digest of every site's
draws). CPU time is not reported: the workers' CPU is not the caller's.

Run: ``python benchmarks/parallel_chains.py [--repeats 3] [--workloads collapsed gibbs fa]``; the table goes to
``benchmarks/results/parallel_chains.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("results") / "parallel_chains.md"

CHILD = r"""
import hashlib, json, os, sys, time, warnings
import numpy as np
import latentfs
from latentfs.models.dca import DirichletDCA
from latentfs.models.factor import FactorAnalysis
warnings.simplefilter("ignore")
workload, how = sys.argv[1], sys.argv[2]
if workload == "fa":
    rng = np.random.default_rng(0)
    W = rng.normal(size=(50, 5))
    X = rng.normal(size=(2000, 5)) @ W.T + rng.normal(size=(2000, 50))
    model, method = FactorAnalysis(5, loading_scale=1.0, noise_shape=2.0, noise_scale=1.0), "gibbs"
else:
    X = DirichletDCA(50, alpha=0.1, gamma=0.01).simulate(n_documents=1800, n_features=5000, doc_length=150,
                                                       seed=0)["counts"]
    model, method = (DirichletDCA(20), "gibbs") if workload == "gibbs" else (DirichletDCA(50), "collapsed_gibbs")
extra = {"num_warmup": 800, "num_samples": 200} if workload == "collapsed-long" else {}
t = time.perf_counter()
post = latentfs.fit(model, X, method=method, seed=0, chain_method=how, **extra)
wall = time.perf_counter() - t
digest = hashlib.sha256()
for site in sorted(post.sites):
    digest.update(np.ascontiguousarray(post.samples(site)).tobytes())
print(json.dumps({"wall": wall, "digest": digest.hexdigest()[:16]}))
"""


def run_child(workload: str, how: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, workload, how], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"{workload}/{how} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", default=["collapsed", "collapsed-long", "gibbs", "fa"])
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    for workload in args.workloads:
        walls: dict[str, list[float]] = {"sequential": [], "parallel": []}
        digests: dict[str, set[str]] = {"sequential": set(), "parallel": set()}
        for _ in range(args.repeats):
            for how in ("sequential", "parallel"):  # alternate, so load drifts hit both alike
                r = run_child(workload, how)
                walls[how].append(r["wall"])
                digests[how].add(r["digest"])
                print(workload, how, f"{r['wall']:.2f} s", r["digest"], flush=True)
        med = {h: sorted(v)[len(v) // 2] for h, v in walls.items()}
        same = digests["sequential"] == digests["parallel"] and len(digests["sequential"]) == 1
        rows.append((workload, med["sequential"], med["parallel"], med["sequential"] / med["parallel"], same,
                     walls))
    load_after = os.getloadavg()[0]
    lines = [
        "# Parallel chains: whole default call, sequential vs `chain_method=\"parallel\"`",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}; "
        f"load average (1 min) {load_before:.1f} before, {load_after:.1f} after. Date: {time.strftime('%Y-%m-%d')}.",
        f"Command: `python benchmarks/parallel_chains.py --repeats {args.repeats} --workloads "
        f"{' '.join(args.workloads)}`; wall seconds, median of {args.repeats} fresh processes each.",
        "",
        "| workload | sequential s | parallel s | speed-up | draws identical | all runs (seq / par) |",
        "|---|---|---|---|---|---|",
    ]
    for workload, s, p, ratio, same, walls in rows:
        runs = " / ".join(", ".join(f"{w:.1f}" for w in walls[h]) for h in ("sequential", "parallel"))
        lines.append(f"| {workload} | {s:.2f} | {p:.2f} | {ratio:.2f}× | {'yes' if same else 'NO'} | {runs} |")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    digest = hashlib.sha256(RESULTS.read_bytes()).hexdigest()[:8]
    print(f"written {RESULTS} ({digest})")


if __name__ == "__main__":
    main()
