"""What the one pipeline costs: the engine-only time of engines moved onto it, beside another checkout's.

    python benchmarks/pipeline_overhead.py [--baseline PATH] [--repeats 5] [--rounds 5] [--cases SUBSTRING]

Each engine is timed in a fresh interpreter (median of ``--repeats`` fits after one warm-up fit), with this
checkout's ``latentfs`` and, when ``--baseline`` names another checkout (e.g. ``git worktree add /tmp/old
<commit>``), with that one's, alternately for ``--rounds`` rounds, so both see the same machine load; the table
gives the median over rounds and the median of the per-round ratios. One thread (OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

CASES = {
    "DCA VB, Reuters, K=20, 100 cycles": (
        "from latentfs.datasets import load_reuters\nX = load_reuters().counts\n"
        "model = latentfs.DirichletDCA(20, alpha=0.1, gamma=0.1)\n",
        "latentfs.fit(model, X, method='vb', seed=0, max_iter=100)",
    ),
    "GaussianMixture EM, 20000 x 10, K=5": (
        "rng = np.random.default_rng(0); X = rng.normal(size=(20000, 10)); X[:10000] += 3\n"
        "from latentfs.models.mixture import GaussianMixture\nmodel = GaussianMixture(5)\n",
        "latentfs.fit(model, X, method='em', seed=0)",
    ),
    "FactorAnalysis EM, 20000 x 10, q=3": (
        "rng = np.random.default_rng(0); X = rng.normal(size=(20000, 10)); X[:10000] += 3\n"
        "from latentfs.models.factor import FactorAnalysis\nmodel = FactorAnalysis(3)\n",
        "latentfs.fit(model, X, method='em', seed=0)",
    ),
    "DCA collapsed_gibbs, 2000 x 5000, K=50, defaults": (
        "X = latentfs.DirichletDCA(50, alpha=0.1).simulate(2000, 5000, doc_length=150, seed=0)['counts']\n"
        "model = latentfs.DirichletDCA(50)\n",
        "latentfs.fit(model, X, method='collapsed_gibbs', seed=0)",
    ),
    "GaussianHMM EM, 4 x 500, K=3": (
        "from latentfs.models.hmm import GaussianHMM\n"
        "sim = GaussianHMM(3, mean_precision=0.02).simulate(4, 500, seed=0); X = sim['data']\n"
        "model = GaussianHMM(3)\n",
        "latentfs.fit(model, X, method='em', lengths=sim['lengths'], seed=0)",
    ),
}

SCRIPT = """
import json, time, warnings
import numpy as np
warnings.simplefilter("ignore")
import latentfs
{setup}
{call}
times = []
for _ in range({repeats}):
    t = time.perf_counter(); {call}; times.append(time.perf_counter() - t)
print(json.dumps(sorted(times)[len(times) // 2]))
"""


def _time(setup: str, call: str, repeats: int, path: str | None) -> float:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if path is not None:
        env["PYTHONPATH"] = path
    code = textwrap.dedent(SCRIPT).format(setup=setup, call=call, repeats=repeats)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         cwd=path or os.getcwd())
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="path of another checkout to compare with")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", default="", help="time only the cases whose name contains this")
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print("| engine | this checkout (s) | baseline (s) | ratio |\n|---|---|---|---|")
    import statistics

    for name, (setup, call) in CASES.items():
        if args.cases not in name:
            continue
        news, olds = [], []
        for _ in range(args.rounds):
            news.append(_time(setup, call, args.repeats, here))
            olds.append(_time(setup, call, args.repeats, args.baseline) if args.baseline else float("nan"))
        ratio = statistics.median(n / o for n, o in zip(news, olds, strict=True))
        print(f"| {name} | {statistics.median(news):.3f} | {statistics.median(olds):.3f} | {ratio:.3f} |", flush=True)


if __name__ == "__main__":
    main()
