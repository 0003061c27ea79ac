"""Where a default collapsed-Gibbs fit spends its CPU: the sweeps, the kept sweeps' outputs, the relabelling and the
convergence check (issue 35, item 2: what keeping count states instead of Θ draws moved).

    python benchmarks/dca_collapsed_phases.py [--k 50 200] [--n-docs 2000 --n-words 5000 --doc-length 150]

One process per K: a corpus simulated from DirichletDCA(K, α=0.1, γ=0.01), a warm-up fit on 50 documents (imports and
compiled kernels not counted), then ``latentfs.fit(DirichletDCA(K), X, method="collapsed_gibbs", seed=0,
chain_method="sequential")`` with the spec's hooks and the Posterior's ``align`` / ``check_convergence`` wrapped by a
process-CPU timer. Run it with ``PYTHONPATH=<an older checkout>`` for the figures before a change.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings


def child(k: int, n_docs: int, n_words: int, doc_length: int) -> None:
    import scipy.sparse as sp

    import latentfs
    from latentfs.core import results
    from latentfs.inference.dca.collapsed import CollapsedGibbs

    warnings.simplefilter("ignore")
    sim = latentfs.DirichletDCA(k, alpha=0.1, gamma=0.01).simulate(n_docs, n_words, doc_length=doc_length, seed=0)
    X = sp.csr_matrix(sim["counts"])
    latentfs.fit(latentfs.DirichletDCA(k), X[:50], method="collapsed_gibbs", seed=0)
    spent: dict[str, float] = {}

    def timed(owner: type, name: str) -> None:
        fn = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - t

        setattr(owner, name, wrapper)

    for name in ("sample", "collect", "export"):
        timed(CollapsedGibbs, name)
    for name in ("align", "check_convergence"):
        timed(results.Posterior, name)
    t = time.process_time()
    latentfs.fit(latentfs.DirichletDCA(k), X, method="collapsed_gibbs", seed=0, chain_method="sequential")
    total = time.process_time() - t
    print(f"| {k} | {int(X.sum()):,} | {total:.2f} | " + " | ".join(f"{spent.get(n, 0.0):.2f}" for n in
          ("sample", "collect", "align", "check_convergence")) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[50, 200])
    ap.add_argument("--n-docs", type=int, default=2000)
    ap.add_argument("--n-words", type=int, default=5000)
    ap.add_argument("--doc-length", type=int, default=150)
    ap.add_argument("--child", type=int, default=None)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.n_docs, args.n_words, args.doc_length)
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    print("| K | tokens | whole fit (CPU s) | sweeps | kept sweeps' outputs | relabelling | convergence check |")
    print("|---|---|---|---|---|---|---|", flush=True)
    for k in args.k:
        subprocess.run([sys.executable, __file__, "--child", str(k), "--n-docs", str(args.n_docs), "--n-words",
                        str(args.n_words), "--doc-length", str(args.doc_length)], env=env, check=True)


if __name__ == "__main__":
    main()
