"""The exact partially collapsed sampler on Dask (issue 32 items 1 and 4) against gensim LdaMulticore and Spark.

    nice -n 10 python benchmarks/dask_sampler.py            # 10,000 docs x 10,000 words x 200 tokens = ~2M tokens

Corpus and scoring are those of ``benchmarks/scale_out.py`` (imported from it): DirichletDCA(K=100, alpha=0.1,
gamma=0.01), Theta drawn once (seed 0), Poisson(200) document lengths, shards of 2,500 documents written with
``save_shards``; 300 separate held-out documents split once into observed/held halves; every library scored by
the same estimator, document completion (``latentfs.evaluate.document_completion``, fold-in alpha 0.1), from its
topic-word matrix, evaluation time excluded from the clocks. The issue's target corpus is 20M tokens; on this
2-core machine shared by several sessions a run of each engine at 20M would take 10-30 minutes, so the corpus is
scaled down tenfold (the per-sweep costs are linear in the tokens; what does not scale is said in the results).

* ``pc1``/``pc2``: ``method="partially_collapsed"`` on a ``LocalCluster`` of 1 / 2 worker processes (one thread
  each), the shards read lazily (``open_shards``); the engine's own ``init``/``sample`` are driven one sweep at a
  time, so that Phi can be scored every ``--eval-every`` sweeps (the mean of the Phi draws of those sweeps). The
  clock starts at ``init`` (reading and validating the shards is timed) with the workers started and their
  imports and numba kernels loaded.
* ``gensim2``: gensim LdaMulticore(workers=2), one ``update`` per pass (scored after every pass).
* ``spark``: Spark MLlib online LDA, ``local[2]``, fits of doubling ``maxIter`` (20 iterations of 5% subsamples
  is one pass).

Target: gensim LdaMulticore's final held-out after ``--passes`` passes; "time to target" is the clock at the first
checkpoint at or above it. Each engine runs in a fresh child process, one after another (not interleaved: one
run of each; the load average before and after each run is recorded).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_out import (  # noqa: E402
    ALPHA,
    GAMMA,
    child_gensim,
    child_spark,
    heldout,
    load_split,
    machine_info,
    make_corpus,
    time_to,
    vm_hwm,
)


def _warm_worker() -> None:
    import torch

    from latentfs.inference.dca.pc_kernels import kernels

    kernels()
    torch.set_num_threads(1)


def child_sampler(root: Path, K: int, budget: int, workers: int, every: int = 5, init: str | None = None) -> dict:
    import torch
    from distributed import Client, LocalCluster

    import latentfs
    from latentfs.core.driver import chain_generators
    from latentfs.core.shards import open_shards
    from latentfs.inference.dca.partially_collapsed import PartiallyCollapsed

    torch.set_num_threads(1)
    split = load_split(root)
    spec = PartiallyCollapsed()
    model = latentfs.DirichletDCA(K, alpha=ALPHA, gamma=GAMMA)
    curve: list[tuple[int, float, float]] = []
    with (LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                       silence_logs=50, memory_limit=0) as cluster, Client(cluster) as client):
        client.run(_warm_worker)
        _warm_worker()
        X = open_shards(root / "train")
        o = spec.check_options({"seed": 0, **({"init": init} if init else {})}, "DirichletDCA")
        cpu0 = client.run(time.process_time)
        driver0 = time.process_time()
        spent = 0.0
        t = time.perf_counter()
        prep = spec.prepare(model, X, o)
        state = spec.init(prep, o, chain_generators(0, 1)[0])
        spent += time.perf_counter() - t
        sweep_s = []
        for s in range(budget):
            t = time.perf_counter()
            state, _ = spec.sample(prep, o, state, None)
            sweep_s.append(time.perf_counter() - t)
            spent += sweep_s[-1]
            if (s + 1) % every == 0:  # scored outside the clock: Φ fetched from its worker, then held-out
                curve.append((s + 1, spent, heldout(spec.topic_word(prep, state), split)))
        worker_rss = sorted(client.run(vm_hwm).values())
        worker_cpu = sorted(v - cpu0.get(k, 0.0) for k, v in client.run(time.process_time).items())
    return {"curve": curve, "total_s": spent, "final": curve[-1][2], "driver_mib": vm_hwm(),
            "workers_mib": worker_rss, "workers_cpu_s": worker_cpu, "driver_cpu_s": time.process_time() - driver0,
            "median_sweep_s": float(np.median(sweep_s))}


def child_in_memory(root: Path, K: int, budget: int, workers: int, every: int = 5) -> dict:
    """The same sampler on the in-memory CSR matrix (one block, this process): the kernel's own speed."""
    import torch
    from scale_out import load_train

    import latentfs
    from latentfs.core.driver import chain_generators
    from latentfs.inference.dca.partially_collapsed import PartiallyCollapsed

    torch.set_num_threads(1)
    _warm_worker()
    X = load_train(root)
    spec = PartiallyCollapsed()
    o = spec.check_options({"seed": 0}, "DirichletDCA")
    prep = spec.prepare(latentfs.DirichletDCA(K, alpha=ALPHA, gamma=GAMMA), X, o)
    state = spec.init(prep, o, chain_generators(0, 1)[0])
    sweep_s, kernel_s, kernel_cpu = [], [], []
    from latentfs.inference.dca import partially_collapsed as pc

    for s in range(budget):
        t = time.perf_counter()
        state, _ = spec.sample(prep, o, state, None)
        sweep_s.append(time.perf_counter() - t)
        t, c = time.perf_counter(), time.process_time()
        pc.block_sweep(state.blocks[0], state.log_phi_t, prep.alpha, state.key, s + 1)
        kernel_s.append(time.perf_counter() - t)
        kernel_cpu.append(time.process_time() - c)
    tokens = int(state.blocks[0].words.size)
    return {"curve": [], "total_s": float(sum(sweep_s)), "median_sweep_s": float(np.median(sweep_s)),
            "median_kernel_s": float(np.median(kernel_s)), "tokens": tokens,
            "ns_per_token_kernel": float(np.median(kernel_s)) / tokens * 1e9,
            "cpu_ns_per_token_kernel": float(np.median(kernel_cpu)) / tokens * 1e9, "driver_mib": vm_hwm()}


CHILDREN = {"sampler": child_sampler, "sampler-vb": functools.partial(child_sampler, init="vb"),
            "memory": child_in_memory, "gensim": child_gensim, "spark": child_spark}
ENGINES = ["memory", "pc2", "gensim2", "pc1", "spark"]
OPTIONAL = ["pc2vb"]  # the sampler started from init="vb" (its VB fit timed), on request


def run_child(engine: str, root: Path, K: int, budget: int, workers: int, timeout: float, every: int) -> dict:
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", engine, "--data", str(root),
                               "--k", str(K), "--budget", str(budget), "--workers", str(workers), "--eval-every",
                               str(every)], capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"{engine} ran past {timeout:.0f} s"}
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        return {"error": f"{engine} failed (rc {proc.returncode}): {proc.stderr[-1500:]}"}
    out = json.loads(line[-1][7:])
    return {**out, "process_s": time.perf_counter() - t0, "load_before": load0, "load_after": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--words", type=int, default=10_000)
    parser.add_argument("--tokens", type=float, default=200.0, help="mean document length")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--shard-rows", type=int, default=2_500)
    parser.add_argument("--heldout", type=int, default=300)
    parser.add_argument("--sweeps", type=int, default=150, help="sampler sweeps")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--passes", type=int, default=5, help="gensim passes; Spark up to this many passes")
    parser.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES + OPTIONAL)
    parser.add_argument("--data-dir", default="/tmp/latentfs_dask_sampler")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per child")
    parser.add_argument("--target", type=float, default=None,
                        help="without gensim2 in --engines: its final held-out from an earlier run on the same corpus")
    parser.add_argument("--out", default="benchmarks/results/dask_sampler.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        extra = {"every": args.eval_every} if args.child in ("sampler", "sampler-vb", "memory") else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = CHILDREN[args.child](Path(args.data), args.k, args.budget, args.workers, **extra)
        print("RESULT " + json.dumps(out), flush=True)
        return
    root = Path(args.data_dir) / f"d{args.docs}_w{args.words}_t{args.tokens:g}_k{args.k}_s{args.shard_rows}"
    load_start = os.getloadavg()
    meta = make_corpus(root, args.docs, args.words, args.k, args.tokens, args.shard_rows, args.heldout)
    print(f"corpus: {meta}", flush=True)
    split = load_split(root)
    oracle = heldout(np.load(root / "theta.npy"), split)
    runs = {"memory": ("memory", 1, 8, "latentfs partially_collapsed, in memory (1 block, kernel speed)"),
            "pc1": ("sampler", 1, args.sweeps, "latentfs partially_collapsed, LocalCluster 1 worker"),
            "pc2": ("sampler", 2, args.sweeps, "latentfs partially_collapsed, LocalCluster 2 workers"),
            "pc2vb": ("sampler-vb", 2, args.sweeps,
                      "latentfs partially_collapsed init='vb', LocalCluster 2 workers (VB start timed)"),
            "gensim2": ("gensim", 2, args.passes, "gensim LdaMulticore(workers=2)"),
            "spark": ("spark", 2, args.passes, "Spark MLlib online LDA, local[2]")}
    results = {}
    for name in args.engines:
        engine, workers, budget, _ = runs[name]
        results[name] = run_child(engine, root, args.k, budget, workers, args.timeout, args.eval_every)
        print(name, json.dumps(results[name])[:1500], flush=True)
    # gensim2's final held-out; without a gensim2 run, --target (gensim2's final from an earlier run on this corpus)
    target = results.get("gensim2", {}).get("final", float("nan") if args.target is None else args.target)
    cmd = "nice -n 10 python benchmarks/dask_sampler.py" + "".join(
        f" --{k} {v}" for k, v, d in (("docs", args.docs, 10_000), ("words", args.words, 10_000), ("k", args.k, 100),
                                      ("sweeps", args.sweeps, 150), ("passes", args.passes, 5),
                                      ("eval-every", args.eval_every, 5)) if v != d) + (
        f" --engines {' '.join(args.engines)}" if args.engines != ENGINES else "") + (
        f" --target {args.target}" if args.target is not None and "gensim2" not in args.engines else "")
    lines = [f"# Partially collapsed sampler on Dask ({meta['tokens']:,} tokens, K = {args.k})", "",
             f"Machine: {machine_info()}", "", f"Command: `{cmd}`", "",
             f"Corpus: DirichletDCA K={args.k}, α={ALPHA}, γ={GAMMA}; {args.docs:,} documents × {args.words:,} "
             f"words, {meta['tokens']:,} tokens in {meta['shards']} shards of {args.shard_rows:,} documents; "
             f"{args.heldout} held-out documents, half of each folded in. Oracle held-out (true Θ): {oracle:.4f} "
             "nats/token.", "",
             f"Load average (1, 5, 15 min) at start {tuple(round(x, 2) for x in load_start)}, at end "
             f"{tuple(round(x, 2) for x in os.getloadavg())}.", "",
             f"**Target: gensim LdaMulticore(workers=2)'s final held-out after {args.passes} passes: {target:.4f}** "
             "nats/token.", "",
             "| run | final held-out | steps | wall s to target (step) | wall s total | median s/sweep | "
             "CPU s workers (driver) | peak RSS driver MiB | peak RSS per worker MiB | load before/after |",
             "|---" * 10 + "|"]
    reach = {}
    for name, r in results.items():
        label = runs[name][3]
        if "error" in r:
            lines.append(f"| {label} | failed: {r['error'][:300]!r} |" + " |" * 8)
            continue
        if not r["curve"]:
            lines.append(f"| {label} | – | {runs[name][2]} sweeps | – | {r['total_s']:.1f} | "
                         f"{r['median_sweep_s']:.3f} (kernel {r['median_kernel_s']:.3f}: "
                         f"{r['ns_per_token_kernel']:.0f} ns/token wall, {r['cpu_ns_per_token_kernel']:.0f} CPU) | – | {r['driver_mib']:.0f} | – | "
                         f"{r['load_before']:.1f}/{r['load_after']:.1f} |")
            continue
        hit = time_to(r["curve"], target)
        reach[name] = hit[1] if hit else None
        steps = {"sampler": "sweeps", "sampler-vb": "sweeps", "gensim": "passes", "spark": "maxIter"}[runs[name][0]]
        lines.append(
            f"| {label} | {r['final']:.4f} | {r['curve'][-1][0]} {steps} | "
            + (f"{hit[1]:.1f} ({hit[0]})" if hit else "not reached") + f" | {r['total_s']:.1f} | "
            + (f"{r['median_sweep_s']:.3f}" if "median_sweep_s" in r else "–") + " | "
            + (f"{' + '.join(f'{c:.0f}' for c in r['workers_cpu_s'])} ({r['driver_cpu_s']:.0f})"
               if "workers_cpu_s" in r else "–") + " | "
            f"{r['driver_mib']:.0f} | {', '.join(f'{w:.0f}' for w in r.get('workers_mib', [])) or '–'} | "
            f"{r['load_before']:.1f}/{r['load_after']:.1f} |")
    lines += ["", "Ratios of the time to target (issue 32's targets in brackets):", ""]

    def ratio(a: str, b: str, goal: str) -> None:
        if reach.get(a) and reach.get(b):
            lines.append(f"* {a} / {b}: **{reach[a] / reach[b]:.2f}×** ({goal})")
        else:
            missing = [n for n in (a, b) if not reach.get(n)]
            lines.append(f"* {a} / {b}: not computable ({', '.join(missing)} did not reach the target or did not run)")

    ratio("gensim2", "pc2", "≥ 2×: the sampler in ≤ 0.5× gensim's time")
    if "pc2vb" in results:
        ratio("gensim2", "pc2vb", "≥ 2×: the sampler in ≤ 0.5× gensim's time")
    ratio("pc1", "pc2", "≥ 1.7× from 1 to 2 workers")
    ratio("spark", "pc2", "≥ 5×")
    if "pc1" in results and "pc2" in results and "median_sweep_s" in results["pc1"] and \
            "median_sweep_s" in results["pc2"]:
        lines.append(f"* median sweep, 1 worker / 2 workers: "
                     f"{results['pc1']['median_sweep_s'] / results['pc2']['median_sweep_s']:.2f}×")
    lines += ["", "Curves (step: wall s, held-out):", ""]
    for name, r in results.items():
        if r.get("curve"):
            lines.append(f"* {name}: " + "; ".join(f"{s}: {t:.1f}/{h:.4f}" for s, t, h in r["curve"]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
