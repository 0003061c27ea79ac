"""Relabelling a default collapsed-Gibbs fit's count states at large K: the CPU of ``relabel_draws`` alone (issue 35).

    python benchmarks/relabel_count_states.py --k 200            # 2,000 docs x 5,000 words x 150 tokens (300k tokens)
    PYTHONPATH=<an older checkout> python benchmarks/relabel_count_states.py --k 200 --out /tmp/old.npy   # before

A corpus of 50 planted topics (``dca_collapsed.simulate_dm_chunked``, seed 2), fitted by
``latentfs.fit(DirichletDCA(K), X, method="collapsed_gibbs", seed=0, align=False, chain_method="sequential")``
(2 chains × 50 kept count states; the fit's own time is printed, not part of the figure); then the process CPU of
``latentfs.core.relabel.relabel_draws`` on the kept ``topic_word`` count states, after a call on a tiny slice has
loaded its compiled kernels. With ``--out`` the permutations are saved (``.npy``), and ``--compare`` prints the
within-label spread (Σ over draws and components of ‖E[θ_k | N] relabelled − its mean over draws‖², over the
draws; lower is a more coherent labelling) of this run's permutations and of other saved ones on the same states.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--n-docs", type=int, default=2000)
    ap.add_argument("--n-words", type=int, default=5000)
    ap.add_argument("--doc-length", type=int, default=150)
    ap.add_argument("--out", default=None, help="save the permutations here (.npy)")
    ap.add_argument("--compare", nargs="*", default=[], help="saved permutations to score beside this run's")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from dca_collapsed import simulate_dm_chunked

    import latentfs
    from latentfs.core.relabel import relabel_draws

    X, _ = simulate_dm_chunked(args.n_docs, args.n_words, 50, args.doc_length, 0.1, 0.01, seed=2)
    t = time.process_time()
    post = latentfs.fit(latentfs.DirichletDCA(args.k), X, method="collapsed_gibbs", seed=0, align=False,
                        chain_method="sequential", warn=False)
    print(f"{int(X.sum())} tokens, K = {args.k}: fit (align=False) {time.process_time() - t:.1f} s CPU", flush=True)
    x = post._draws["topic_word"]
    relabel_draws(type(x)(x.features[:10], x.assignments[:, :2, :10], x.seeds[:, :2], x.prior, x.n_components))
    t = time.process_time()
    perms, iterations = relabel_draws(x)
    print(f"relabel_draws: {time.process_time() - t:.2f} s CPU, {iterations} iterations", flush=True)
    if args.out:
        np.save(args.out, perms)
    c, d = x.shape[:2]
    rows = x.matching_rows()
    for name, p in [("this run", perms)] + [(f, np.load(f)) for f in args.compare]:
        flat = p.reshape(c * d, -1)
        mean = sum(rows[i][flat[i]] for i in range(c * d)) / (c * d)
        spread = sum(float(((rows[i][flat[i]] - mean) ** 2).sum()) for i in range(c * d)) / (c * d)
        print(f"within-label spread, {name}: {spread:.6f}")


if __name__ == "__main__":
    main()
