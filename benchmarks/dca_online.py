"""Online VB for DirichletDCA (issue 16, item 2): latentfs ``method="online_vb"`` against gensim's online
``LdaModel`` (the same algorithm, Hoffman, Blei & Bach 2010) and latentfs batch VB, by held-out quality and
time, on one thread.

Corpus: DirichletDCA(K=50, α=0.1, γ=0.01) simulated, 5,300 documents × 20,000 words × 200 tokens (≈1M
tokens); the last 300 documents are held out and scored by document completion (per-token log-likelihood of
the second half of each document given the first, ``latentfs.evaluate.document_completion``, fold-in α = 0.1)
from each library's topic–word matrix. Both online fits use the same priors (α = 0.1, η = γ = 0.01), mini-
batches of 256 documents, τ0 = 1, κ = 0.7, and continue pass after pass (gensim: one ``update`` call per
pass; latentfs: ``n_passes`` = 1, 2, 3 as separate whole calls from the same seed, so a row's time is the
whole call for that many passes). Batch VB is the default whole call.

Run: ``python benchmarks/dca_online.py [--passes 3]``; the table goes to ``benchmarks/results/dca_online.md``.
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

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

import latentfs  # noqa: E402
from latentfs.evaluate.heldout import document_completion  # noqa: E402
from latentfs.models.dca import DirichletDCA  # noqa: E402

RESULTS = Path(__file__).with_name("results") / "dca_online.md"
K, ALPHA, GAMMA, BATCH = 50, 0.1, 0.01, 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    from gensim.matutils import Sparse2Corpus
    from gensim.models import LdaModel

    warnings.simplefilter("ignore")
    X = sp.csr_matrix(DirichletDCA(K, alpha=ALPHA, gamma=GAMMA).simulate(n_documents=5300, n_features=20000,
                                                                        doc_length=200, seed=0)["counts"])
    train, test = X[:5000], X[5000:]
    score = lambda topic_word: document_completion(topic_word, test, ALPHA, seed=0)  # noqa: E731
    load = os.getloadavg()[0]
    rows = []
    for p in range(1, args.passes + 1):
        t = time.perf_counter()
        post = latentfs.fit(DirichletDCA(K, alpha=ALPHA, gamma=GAMMA), train, method="online_vb", batch_size=BATCH,
                            n_passes=p, seed=0)
        rows.append((f"latentfs online_vb, {p} pass(es)", time.perf_counter() - t, score(post.mean("topic_word"))))
        print(rows[-1], flush=True)
    corpus = Sparse2Corpus(train, documents_columns=False)
    t = time.perf_counter()
    lda = LdaModel(None, num_topics=K, id2word={j: str(j) for j in range(X.shape[1])}, alpha=np.full(K, ALPHA),
                   eta=GAMMA, chunksize=BATCH, offset=1.0, decay=0.7, random_state=0, eval_every=None)
    spent = time.perf_counter() - t
    for p in range(1, args.passes + 1):
        t = time.perf_counter()
        lda.update(corpus)
        spent += time.perf_counter() - t
        rows.append((f"gensim LdaModel (online), {p} pass(es)", spent, score(lda.get_topics())))
        print(rows[-1], flush=True)
    t = time.perf_counter()
    post = latentfs.fit(DirichletDCA(K, alpha=ALPHA, gamma=GAMMA), train, method="vb", seed=0, num_ll_draws=0)
    rows.append((f"latentfs batch VB, default ({post.diagnostics['n_iter']} cycles)", time.perf_counter() - t,
                 score(post.mean("topic_word"))))
    print(rows[-1], flush=True)
    lines = [
        "# Online VB for DirichletDCA against gensim's online LDA and batch VB",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}, "
        f"torch {torch.__version__}; one thread; load average (1 min) {load:.1f} before, {os.getloadavg()[0]:.1f} "
        f"after. Date: {time.strftime('%Y-%m-%d')}. Command: `python benchmarks/dca_online.py --passes {args.passes}`.",
        "",
        "| fit | wall s | held-out per token |",
        "|---|---|---|",
        *[f"| {name} | {t:.1f} | {h:.4f} |" for name, t, h in rows],
    ]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
