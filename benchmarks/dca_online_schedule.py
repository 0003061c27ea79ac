"""Which step-size offset τ0 should ``method="online_vb"`` default to? Held-out after one and two passes over
corpora of three shapes, several seeds, beside gensim's online ``LdaModel`` with its defaults (issue 32: online VB
should reach gensim's one-pass quality).

The step size of online VB (Hoffman, Blei & Bach 2010) is ρ_t = (τ0 + t)^(−κ). With τ0 = 1 the first mini-batch
replaces λ entirely (ρ_0 = 1) and the next ones nearly so; a larger τ0 damps the early steps. Session 16 measured
on one corpus and one seed that latentfs's default (τ0 = 1, κ = 0.7, 256 documents a batch) stalls at −9.07 nats a
token after a pass where τ0 = 16 gives −8.50 and gensim −8.66. This script asks the same on more shapes and seeds.

Corpora (simulated from the DM process, ``benchmarks/dca_collapsed.py:simulate_dm_chunked``; 300 held-out documents
each, split once into halves for document completion, ``latentfs.evaluate.document_completion`` at fold-in α = 0.1):

* "wide": 5,000 documents × 20,000 words, 200 tokens each, K_true = 50;
* "short": 20,000 documents × 2,000 words, 50 tokens each, K_true = 50;
* "many": 10,000 documents × 10,000 words, 200 tokens each, K_true = 100.

Every latentfs fit is ``latentfs.fit(DirichletDCA(K), X, method="online_vb", seed=s, tau0=t, n_passes=p)`` with K =
K_true and the model's default priors; the other options are the defaults (κ = 0.7, 256 documents a batch).
gensim: ``LdaModel(corpus, num_topics=K, random_state=s)``, its defaults (one pass, chunks of 2,000). One thread.

Run: ``python benchmarks/dca_online_schedule.py`` (about 10 minutes here); writes
``benchmarks/results/dca_online_schedule.md``.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dca_collapsed import simulate_dm_chunked  # noqa: E402

import latentfs  # noqa: E402
from latentfs.evaluate.heldout import document_completion, split_documents  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "dca_online_schedule.md"
CORPORA = {"wide": (5000, 20000, 50, 200), "short": (20000, 2000, 50, 50), "many": (10000, 10000, 100, 200)}
EVAL_ALPHA = 0.1


def corpus(name: str, quick: bool):
    n_docs, n_words, k, length = CORPORA[name]
    if quick:
        n_docs //= 10
    X, _ = simulate_dm_chunked(n_docs + 300, n_words, k, length, 0.1, 0.01, seed=11)
    X = sp.csr_matrix(X)
    return X[:n_docs], split_documents(X[n_docs:], 0.5, seed=0), k


def gensim_one_pass(train, k: int, seed: int) -> tuple[np.ndarray, float]:
    from gensim.matutils import Sparse2Corpus
    from gensim.models import LdaModel

    t = time.process_time()
    lda = LdaModel(Sparse2Corpus(train, documents_columns=False), num_topics=k, id2word={j: str(j) for j in
                   range(train.shape[1])}, random_state=seed)
    return lda.get_topics(), time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the documents (smoke run)")
    ap.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    ap.add_argument("--tau0", nargs="+", type=float, default=[1, 4, 16, 64, 256])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--passes", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    lines = ["# Online VB's step-size offset τ0: held-out by corpus shape, seed and passes", "",
             f"Command: `python benchmarks/dca_online_schedule.py{' --quick' if args.quick else ''}` "
             f"({time.strftime('%Y-%m-%d')}); {platform.platform()}, Python {platform.python_version()}, torch "
             f"{torch.__version__}; load average at start {os.getloadavg()[0]:.1f}.", "",
             "Held-out: document completion, nats a token (higher is better); CPU seconds of the call. κ = 0.7 and "
             "256 documents a batch (the defaults) throughout.", ""]
    summary = []
    for name in args.corpora:
        train, split, k = corpus(name, args.quick)

        def score(tw, split=split) -> float:
            return float(document_completion(np.asarray(tw, dtype=np.float64), None, EVAL_ALPHA, split=split))

        lines += [f"## {name}: {train.shape[0]} documents × {train.shape[1]} words, {int(train.sum())} tokens, "
                  f"K = {k}", "", "| fit | " + " | ".join(f"seed {s}" for s in range(args.seeds)) + " | mean | CPU s |",
                  "|---|" + "---|" * (args.seeds + 2)]
        ref = [gensim_one_pass(train, k, s) for s in range(args.seeds)]
        held = [score(tw) for tw, _ in ref]
        lines.append("| gensim LdaModel, defaults (1 pass) | " + " | ".join(f"{h:.4f}" for h in held)
                     + f" | {np.mean(held):.4f} | {np.mean([c for _, c in ref]):.1f} |")
        print(lines[-1], flush=True)
        g_mean = float(np.mean(held))
        for p in args.passes:
            for tau in args.tau0:
                vals, cpu = [], []
                for s in range(args.seeds):
                    t = time.process_time()
                    post = latentfs.fit(latentfs.DirichletDCA(k), train, method="online_vb", seed=s, tau0=tau,
                                        n_passes=p)
                    cpu.append(time.process_time() - t)
                    vals.append(score(post.mean("topic_word")))
                lines.append(f"| online_vb τ0 = {tau:g}, {p} pass{'es' if p > 1 else ''} | "
                             + " | ".join(f"{v:.4f}" for v in vals) + f" | {np.mean(vals):.4f} | {np.mean(cpu):.1f} |")
                print(lines[-1], flush=True)
                summary.append((name, p, tau, float(np.mean(vals)), float(np.mean(vals)) - g_mean))
        lines.append("")
    lines += ["## Mean held-out minus gensim's one-pass mean, by τ0 (rows: corpus, passes)", "",
              "| corpus | passes | " + " | ".join(f"τ0 = {t:g}" for t in args.tau0) + " |",
              "|---|---|" + "---|" * len(args.tau0)]
    for name in args.corpora:
        for p in args.passes:
            cells = [next(d for (n, pp, t, _, d) in summary if n == name and pp == p and t == tau) for tau in args.tau0]
            lines.append(f"| {name} | {p} | " + " | ".join(f"{c:+.4f}" for c in cells) + " |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-(2 + len(args.corpora) * len(args.passes)):]))


if __name__ == "__main__":
    main()
