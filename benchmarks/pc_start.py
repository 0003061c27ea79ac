"""Where the partially collapsed sampler's time goes with a large vocabulary, and what its start costs (issue 32).

    nice python benchmarks/pc_start.py                      # 10,000 docs x 50,000 words x 200 tokens (2M tokens)
    nice python benchmarks/pc_start.py --words 10000        # the same tokens over 10,000 words

The corpus of ``benchmarks/dask_sampler.py`` (``scale_out.make_corpus``: DirichletDCA K = 100, α = 0.1, γ = 0.01)
fitted in this process (one block, the in-memory runner: the sweep kernel without a cluster) by
``method="partially_collapsed"``'s own ``init`` / ``sample``, seed 0, from three starts:

* ``uniform``: the engine's start (every token's component drawn uniformly, Φ drawn from those counts);
* ``vb``: the engine's ``init="vb"``: the first sweep starts from the posterior mean of a default VB fit of the
  first tenth of the documents (its time is counted);
* ``online``: ``init=`` the posterior mean of one default ``online_vb`` pass over all documents (counted).

Printed every 5 sweeps: wall seconds so far and the held-out log-likelihood per token of the sweep's Φ draw
(document completion on 300 held-out documents, fold-in α = 0.1, outside the clock); then the median wall time of
the sweep kernel alone (ns per token; run once more beside each sweep, outside the clock) over all sweeps, the
first five and the last five.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_out import ALPHA, GAMMA, heldout, load_split, load_train, machine_info, make_corpus  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--words", type=int, default=50_000)
    ap.add_argument("--tokens", type=float, default=200.0, help="mean document length")
    ap.add_argument("--sweeps", type=int, default=40)
    ap.add_argument("--starts", nargs="+", default=["uniform", "vb", "online"], choices=["uniform", "vb", "online"])
    ap.add_argument("--data-dir", default="/tmp/latentfs_pc_start")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import torch

    import latentfs
    from latentfs.core.driver import chain_generators
    from latentfs.inference.dca import partially_collapsed as pc

    torch.set_num_threads(1)
    K = 100
    root = Path(args.data_dir) / f"d{args.docs}_w{args.words}_t{args.tokens:g}"
    meta = make_corpus(root, args.docs, args.words, K, args.tokens, 2_500, 300)
    print(machine_info(), flush=True)
    print(f"{meta['tokens']:,} tokens, {args.docs:,} documents x {args.words:,} words, K = {K}", flush=True)
    split, X = load_split(root), load_train(root)
    model = latentfs.DirichletDCA(K, alpha=ALPHA, gamma=GAMMA)
    spec = pc.PartiallyCollapsed()
    for start in args.starts:
        t0 = time.perf_counter()
        init: object = None if start == "uniform" else "vb"
        if start == "online":  # its posterior mean, given to the engine as an array
            init = latentfs.fit(model, X, method="online_vb", seed=0).mean("topic_word")
        o = spec.check_options({"seed": 0, "init": init}, "DirichletDCA")
        prep = spec.prepare(model, X, o)  # init="vb": the engine's VB fit of the first tenth of the documents
        state = spec.init(prep, o, chain_generators(0, 1)[0])
        if prep.start is not None:
            print(f"{start}: start fitted in {time.perf_counter() - t0:.1f} s, held-out of its Φ "
                  f"{heldout(np.exp(prep.start.T), split):.4f}", flush=True)
        spent = time.perf_counter() - t0
        kernel = []
        for s in range(args.sweeps):
            t = time.perf_counter()
            block = state.blocks[0]
            pc.block_sweep(block, state.log_phi_t, prep.alpha, state.key, s + 1)  # the kernel alone, timed apart
            kernel.append(time.perf_counter() - t)
            t = time.perf_counter()
            state, _ = spec.sample(prep, o, state, None)
            spent += time.perf_counter() - t
            if (s + 1) % 5 == 0:
                print(f"{start} sweep {s + 1}: {spent:.1f} s, held-out "
                      f"{heldout(spec.topic_word(prep, state), split):.4f}", flush=True)
        per = 1e9 / state.blocks[0].words.size
        print(f"{start}: sweep kernel median {np.median(kernel) * per:.0f} ns/token (first 5 sweeps "
              f"{np.median(kernel[:5]) * per:.0f}, last 5 {np.median(kernel[-5:]) * per:.0f})", flush=True)


if __name__ == "__main__":
    main()
