"""DCA VB's γ on corpora of three shapes (issue 31, item 1): the default fit beside scikit-learn's default, the old
default γ, and γ learned by the full model's bound from several starts. One estimator scores every fit (document
completion, latentfs.evaluate.heldout, folded in with α = 1/K); one seed; one thread.

    python benchmarks/dca_vb_gamma.py [--corpora reuters wide short] [--out benchmarks/results/dca_vb_gamma.md]

Corpora: the Reuters sample of the `lda` package (335 training + 60 test documents × 4,258 words, K = 20, the
demo's α = γ = 0.1); "wide", the issue's failing shape (1,000 + 200 documents × 10,000 words, 250 tokens each,
K = 50, simulated from DirichletDCA with α = 0.1, γ = 0.01); "short" (3,000 + 300 documents × 2,000 words, 40
tokens each, K = 20, α = 0.1, γ = 0.05). Columns: cycles, CPU seconds, whether the recorded objective rose every
cycle, the final γ, held-out nats per token, and whether the fit ended at the symmetric saddle.
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

import latentfs  # noqa: E402
from latentfs.evaluate.heldout import document_completion, split_documents  # noqa: E402
from latentfs.inference.dca.vb import components_separated  # noqa: E402

torch.set_num_threads(1)


def reuters():
    from latentfs.datasets import load_reuters

    X = load_reuters().counts
    order = np.random.default_rng(0).permutation(X.shape[0])
    return X[order[60:]], X[order[:60]], 20, {"alpha": 0.1, "gamma": 0.1}


def simulated(n_docs, n_words, K, length, gamma, n_test, seed):
    sim = latentfs.DirichletDCA(K, alpha=0.1, gamma=gamma).simulate(
        n_docs + n_test, n_words, doc_length=np.full(n_docs + n_test, length), seed=seed)
    X = sp.csr_matrix(sim["counts"])
    return X[:n_docs], X[n_docs:], K, {}


CORPORA = {
    "reuters": reuters,
    "wide": lambda: simulated(1000, 10000, 50, 250, 0.01, 200, 0),
    "short": lambda: simulated(3000, 2000, 20, 40, 0.05, 300, 1),
}


def run(train, K, split, model_kw, options):
    model = latentfs.DirichletDCA(K, **model_kw)
    t = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = latentfs.fit(model, train, method="vb", seed=0, num_ll_draws=0, **options)
    cpu = time.process_time() - t
    trace = post.trace[0]
    rose = bool(np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])))
    saddle = not components_separated(torch.as_tensor(post.mean("topic_word")))
    gamma = float(np.ravel(post.hyperparameters["gamma"])[0])
    return len(trace), cpu, rose, gamma, document_completion(post, None, 1.0 / K, split=split), saddle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--out", default="benchmarks/results/dca_vb_gamma.md")
    args = parser.parse_args()
    lines = [f"<!-- python benchmarks/dca_vb_gamma.py; {platform.platform()}, {platform.processor() or 'cpu'}, "
             f"torch {torch.__version__}, latentfs {latentfs.__version__}, 1 thread, CPU seconds -->", ""]
    for name in args.corpora:
        train, test, K, base = CORPORA[name]()
        split = split_documents(test, 0.5, seed=0)
        lines += [f"### {name}: {train.shape[0]} × {train.shape[1]}, {int(train.sum())} tokens, K = {K}", "",
                  "| fit | cycles | CPU s | objective rose every cycle | final γ | held-out | at the saddle |",
                  "|---|---|---|---|---|---|---|"]
        from sklearn.decomposition import LatentDirichletAllocation

        t = time.process_time()
        peer = LatentDirichletAllocation(n_components=K, random_state=0).fit(train)
        cpu = time.process_time() - t
        score = document_completion(peer.components_, None, 1.0 / K, split=split)
        lines.append(f"| scikit-learn default (γ = 1/K, batch VB) | {peer.n_iter_} | {cpu:.1f} | – | {1 / K:.3g} | "
                     f"{score:.4f} | – |")
        rows = [
            ("latentfs default" + (f" ({base})" if base else " (γ = 1/K)"), base, {}),
            ("γ = 0.5 fixed (the old default start)", {**base, "gamma": 0.5}, {}),
        ] + [(f"learn_gamma, theta_update='full', one start γ = {g}", {**base, "gamma": g},
              {"theta_update": "full", "learn_gamma": True, "gamma_starts": (g,)}) for g in (0.01, 0.1, 1.0)] + [
            ("learn_gamma, theta_update='full', default starts (0.01, 0.1, 1; best bound)", base,
             {"theta_update": "full", "learn_gamma": True}),
        ]
        for label, model_kw, options in rows:
            n, cpu, rose, gamma, score, saddle = run(train, K, split, model_kw, options)
            lines.append(f"| {label} | {n} | {cpu:.1f} | {'yes' if rose else 'NO'} | {gamma:.4g} | {score:.4f} | "
                         f"{'YES' if saddle else 'no'} |")
            print(lines[-1], flush=True)
        lines.append("")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
