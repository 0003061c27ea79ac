"""Conditional Gamma–Poisson DCA: spike-and-slab VB against block Gibbs on planted data (issue 12, item 4).

The question the issue asks: how far is VB's Θ from Gibbs's, and do restarts close the gap? Data are simulated
from the Pyro model ``ConditionalGammaPoissonDCA(K, alpha, beta, rho, gamma)``; each engine is run through the
public call ``latentfs.fit`` and scored by the L1 distance between its posterior-mean Θ (components matched to
the truth by the Hungarian algorithm) and the planted Θ, averaged over components and over data seeds. VB is
run with ``n_init`` = 1 and 5, with ρ fixed at the truth and learned from a 0.05 start; Gibbs with its default
schedule (2 chains) and ρ fixed at the truth.

Usage: ``python benchmarks/cgp_vb_vs_gibbs.py [--seeds 5] [--documents 300] [--features 60]``.
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
import torch  # noqa: E402

import latentfs  # noqa: E402
from latentfs.core.relabel import matching_permutation  # noqa: E402
from latentfs.models import ConditionalGammaPoissonDCA  # noqa: E402

torch.set_num_threads(1)


def theta_error(truth: np.ndarray, estimate: np.ndarray) -> float:
    perm, _ = matching_permutation(truth, estimate)
    return float(np.abs(estimate[perm] - truth).sum(1).mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--documents", type=int, default=300)
    ap.add_argument("--features", type=int, default=60)
    ap.add_argument("--components", type=int, default=3)
    args = ap.parse_args()
    K = args.components
    truth_model = ConditionalGammaPoissonDCA(K, alpha=1.0, beta=0.05, rho=0.5, gamma=0.2)
    runs = {
        "gibbs (default, 2 chains)": dict(method="gibbs"),
        "vb n_init=1": dict(method="vb", n_init=1),
        "vb n_init=5": dict(method="vb", n_init=5),
        "vb n_init=1, learn_rho from 0.05": dict(method="vb", n_init=1, learn_rho=True, rho=0.05),
        "vb n_init=5, learn_rho from 0.05": dict(method="vb", n_init=5, learn_rho=True, rho=0.05),
    }
    errors: dict[str, list[float]] = {name: [] for name in runs}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for seed in range(args.seeds):
        sim = truth_model.simulate(args.documents, args.features, seed=100 + seed)
        keep = sim["counts"].sum(1) > 0
        X, truth = sim["counts"][keep], np.asarray(sim["topic_word"])
        for name, opts in runs.items():
            opts = dict(opts)
            rho = opts.pop("rho", 0.5)
            model = ConditionalGammaPoissonDCA(K, alpha=1.0, beta=0.05, rho=rho, gamma=0.2)
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = latentfs.fit(model, X, seed=seed, **opts)
            times[name].append(time.perf_counter() - t)
            errors[name].append(theta_error(truth, result.mean("topic_word")))
    print(f"# CGP VB vs Gibbs: {args.seeds} data seeds, {args.documents} documents × {args.features} words, K = {K}")
    print(f"# {platform.platform()}, {platform.processor() or platform.machine()}, torch {torch.__version__}")
    print("| engine | mean L1 error of Θ per component | worst seed | median time (s) |")
    print("|---|---|---|---|")
    for name in runs:
        e = np.asarray(errors[name])
        print(f"| {name} | {e.mean():.3f} | {e.max():.3f} | {np.median(times[name]):.2f} |")


if __name__ == "__main__":
    main()
