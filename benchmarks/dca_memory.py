"""Peak memory of a default DCA fit against the memory of its input and parameters (issue 15's target: ≤ 3×).

    python benchmarks/dca_memory.py [--methods vb collapsed_gibbs online_vb] [--n-docs 2000 --n-words 5000 --k 50]
                                    [--doc-length 150]

Each method runs in a new process (Linux only: it reads and resets ``/proc/self/status`` VmHWM). The process
loads the corpus, makes one small warm-up fit (50 documents) so that imports and compiled kernels are not
counted, resets the peak resident set size (``/proc/self/clear_refs``), then runs
``latentfs.fit(DirichletDCA(K), X, method=...)`` with default options. Reported: the peak RSS above the RSS
just before the call, and its ratio to the input CSR (data, indices, indptr) plus the parameters (Θ, K × J,
and the document proportions, I × K, in float64), and what the result keeps of its sampled sites (the samplers
keep ``topic_word`` as count states: the bytes held, not the bytes of the Θ values they make on demand).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import scipy.sparse as sp


def _status(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0  # kB -> MiB
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(method: str, data: str, K: int) -> None:
    import latentfs

    X = sp.load_npz(data).tocsr()
    n_docs, n_words = X.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        latentfs.fit(latentfs.DirichletDCA(K), X[:50], method=method, seed=0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    before = _status("VmRSS")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = latentfs.fit(latentfs.DirichletDCA(K), X, method=method, seed=0)
    peak = _status("VmHWM") - before
    base = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + 8 * (K * n_words + n_docs * K)) / 2**20
    kept = sum(int(v.nbytes) for v in getattr(post, "_draws", {}).values()) / 2**20
    print("RESULT " + json.dumps({"method": method, "peak_mib": peak, "base_mib": base, "nnz": int(X.nnz),
                                  "ratio": peak / base, "kept_mib": kept, "tokens": int(X.sum())}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=["vb", "online_vb", "collapsed_gibbs"])
    parser.add_argument("--n-docs", type=int, default=2000)
    parser.add_argument("--n-words", type=int, default=5000)
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--doc-length", type=int, default=150)
    parser.add_argument("--child", default=None)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.k)
        return
    import latentfs

    sim = latentfs.DirichletDCA(args.k, alpha=0.1, gamma=0.01).simulate(args.n_docs, args.n_words,
                                                                         doc_length=args.doc_length,
                                                                         seed=0)
    tmp = tempfile.mkdtemp()
    data = os.path.join(tmp, "counts.npz")
    sp.save_npz(data, sp.csr_matrix(sim["counts"]))
    # a fixed mmap threshold: glibc otherwise raises it after large frees and keeps later large arrays on the
    # heap, where freed memory stays resident and hides a later peak
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "MALLOC_MMAP_THRESHOLD_": "131072"}
    print(f"| method | peak above start (MiB) | input + parameters (MiB) | ratio | sampled sites kept (MiB) |  "
          f"({args.n_docs} × {args.n_words}, K = {args.k}, 1 thread)")
    print("|---|---|---|---|---|")
    for method in args.methods:
        out = subprocess.run([sys.executable, __file__, "--child", method, "--data", data, "--k", str(args.k)],
                             env=env, capture_output=True, text=True, check=True).stdout
        r = json.loads([x for x in out.splitlines() if x.startswith("RESULT ")][-1][7:])
        print(f"| {method} | {r['peak_mib']:.1f} | {r['base_mib']:.1f} | {r['ratio']:.1f}× | {r['kept_mib']:.1f} |  "
              f"({r['tokens']:,} tokens)", flush=True)


if __name__ == "__main__":
    main()
