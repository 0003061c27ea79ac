"""Fold-in of new documents: latentfs's compiled fold-in against tomotopy's ``LDAModel.infer``, same Φ on both sides.

One command (about 7 minutes on a 2-core machine shared with other work)::

    nice -n 10 python benchmarks/dca_foldin.py --out benchmarks/results/dca_foldin.md

For each K in 50, 200, 1,000 a tomotopy LDA model is trained once on a simulated corpus; its topic–word matrix Φ
and its (optimised) α are then used by *both* sides to infer the topic mixtures of 10,000+ new documents:

* latentfs: :func:`latentfs.evaluate.fold_in` (the variational fixed point of Buntine & Jakulin eq. 17 with Φ fixed,
  each document to |Δa| ≤ tol), ``n_threads`` = 1 and 2;
* tomotopy: ``LDAModel.infer(docs, iterations=…, workers=1 / 2)`` (collapsed Gibbs with Φ fixed; its mixture is
  (n_dk + α_k) / (n_d + Σα) of the final state), at several iteration counts.

Quality is measured by one estimator on both sides: document completion. Every new document is split at random
into halves (:func:`latentfs.evaluate.split_documents`); the mixture is inferred from the observed half and the
held-out half is scored by the same code (:func:`latentfs.evaluate.heldout.completion_score`). "Equal quality"
compares latentfs with the fewest tomotopy iterations whose held-out per-token log-likelihood is at least
latentfs's minus ``--slack`` (default 0.001 nats/token); when no tomotopy setting reaches it, the ratio is given
against tomotopy's default (100 iterations) and its best setting, and said so.

Times: engine-only (the inference call alone, warm: kernels compiled, documents already in each library's form;
tomotopy's ``make_doc`` is timed apart) as the median of ``--repeats`` runs, the two sides alternating; whole
process (a fresh interpreter that imports the library, loads Φ and the documents from disk, infers and writes the
mixtures) once per side with one thread. ns/token is per observed (folded-in) token; "per core" is wall × threads.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402


def simulate(n_docs: int, vocab: int, n_true: int, mean_length: int, seed: int) -> sp.csr_matrix:
    """LDA-generated counts: n_true topics of Dirichlet(0.05) over ``vocab`` words, mixtures Dirichlet(0.1), lengths
    1 + Poisson(mean_length) (one generator; the first rows train, the rest are new documents)."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(vocab, 0.05), size=n_true)
    mixtures = rng.dirichlet(np.full(n_true, 0.1), size=n_docs)
    lengths = 4 + rng.poisson(mean_length - 4, size=n_docs)
    rows = [rng.multinomial(L, p @ topics) for L, p in zip(lengths, mixtures, strict=True)]
    return sp.csr_matrix(np.asarray(rows, dtype=np.float64))


def words_of(row_cols: np.ndarray, row_vals: np.ndarray) -> list[str]:
    return [f"w{j}" for j, c in zip(row_cols, row_vals, strict=True) for _ in range(int(c))]


def train_tomotopy(train: sp.csr_matrix, K: int, iterations: int, seed: int) -> Any:
    import tomotopy as tp

    mdl = tp.LDAModel(k=K, alpha=0.1, eta=0.01, seed=seed, min_cf=0, rm_top=0)
    for i in range(train.shape[0]):
        lo, hi = train.indptr[i], train.indptr[i + 1]
        mdl.add_doc(words_of(train.indices[lo:hi], train.data[lo:hi]))
    mdl.train(iterations, workers=1)
    return mdl


def phi_in_our_columns(mdl: Any, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Φ (K, J') over the training vocabulary, columns in our word order, and our ids of those columns."""
    ids = np.array([int(w[1:]) for w in mdl.used_vocabs])
    tw = np.array([mdl.get_topic_word_dist(k) for k in range(mdl.k)])  # (K, used vocab) in tomotopy's order
    order = np.argsort(ids)
    return np.ascontiguousarray(tw[:, order]), ids[order]


def child(kind: str, folder: str, threads: int, iterations: int) -> None:
    """A whole process: import, load, infer, write (timed from outside)."""
    d = Path(folder)
    if kind == "latentfs":
        from latentfs.evaluate import fold_in

        phi = np.load(d / "phi.npy")
        alpha = np.load(d / "alpha.npy")
        observed = sp.load_npz(d / "observed.npz").tocsr()
        np.save(d / "out_latentfs.npy", fold_in(phi, observed, alpha, n_threads=threads, method="cvb0"))
    else:
        import tomotopy as tp

        mdl = tp.LDAModel.load(str(d / "model.bin"))
        observed = sp.load_npz(d / "observed_subset.npz").tocsr()
        ids = np.load(d / "ids.npy")
        docs = []
        for i in range(observed.shape[0]):
            lo, hi = observed.indptr[i], observed.indptr[i + 1]
            docs.append(mdl.make_doc(words_of(ids[observed.indices[lo:hi]], observed.data[lo:hi])))
        dists, _ = mdl.infer(docs, iterations=iterations, workers=threads)
        np.save(d / "out_tomotopy.npy", np.asarray(dists))


def whole_process(kind: str, folder: str, threads: int, iterations: int) -> float:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(max(threads, 1)))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", kind, folder, str(threads), str(iterations)], check=True,
                   env=env)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--components", default="50,200,1000")
    p.add_argument("--train-docs", type=int, default=3000)
    p.add_argument("--new-docs", type=int, default=10000)
    p.add_argument("--vocab", type=int, default=5000)
    p.add_argument("--mean-length", type=int, default=60)
    p.add_argument("--train-iterations", type=int, default=50)
    p.add_argument("--tomotopy-iterations", default="10,100")
    p.add_argument("--tomotopy-docs", default="1000,400,150",
                   help="per K: tomotopy infers the first this many new documents (its cost per document does not "
                        "depend on the batch; see the module docstring)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--slack", type=float, default=0.001)
    p.add_argument("--no-whole", action="store_true", help="skip the whole-process runs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the markdown table here")
    p.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), int(args.child[3]))
        return

    import numba
    import tomotopy as tp
    import torch

    torch.set_num_threads(1)
    from latentfs.evaluate.heldout import completion_score, fold_in, split_documents
    from latentfs.inference.dca.foldin_kernels import cvb0_csr, fold_in_csr

    t_start = time.perf_counter()
    Ks = [int(k) for k in args.components.split(",")]
    tomo_iters = [int(i) for i in args.tomotopy_iterations.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    subsets = [int(n) for n in args.tomotopy_docs.split(",")]
    methods = ["vb", "cvb0"]
    X = simulate(args.train_docs + args.new_docs, args.vocab, 100, args.mean_length, args.seed)
    train, new = X[:args.train_docs], X[args.train_docs:]
    rows: list[dict[str, Any]] = []
    info = {
        "python": platform.python_version(), "machine": platform.machine(), "cpu": _cpu_name(),
        "cores": os.cpu_count(), "numba": numba.__version__, "tomotopy": tp.__version__,
        "tomotopy_isa": getattr(tp, "isa", "?"), "numba_threading_layer": None,
        "command": "nice -n 10 python benchmarks/dca_foldin.py " + " ".join(sys.argv[1:]),
    }
    for K, n_tomo in zip(Ks, subsets, strict=True):
        t0 = time.perf_counter()
        mdl = train_tomotopy(train, K, args.train_iterations, args.seed)
        train_s = time.perf_counter() - t0
        phi, ids = phi_in_our_columns(mdl, args.vocab)
        alpha = np.asarray(mdl.alpha, dtype=np.float64)
        new_k = new[:, ids]  # new documents over the training vocabulary, columns as Φ's
        observed, held = split_documents(new_k, 0.5, seed=args.seed + 1)
        n_docs = observed.shape[0]
        n_tomo = min(n_tomo, n_docs)
        obs_sub, held_sub = observed[:n_tomo], held[:n_tomo]
        n_tokens, n_tokens_sub = float(observed.sum()), float(obs_sub.sum())
        # tomotopy's documents (made once; timed apart from inference)
        t0 = time.perf_counter()
        docs = []
        for i in range(n_tomo):
            lo, hi = observed.indptr[i], observed.indptr[i + 1]
            docs.append(mdl.make_doc(words_of(ids[observed.indices[lo:hi]], observed.data[lo:hi])))
        make_doc_s = time.perf_counter() - t0
        for method in methods:  # compile (or load the cache) before timing
            fold_in(phi, observed[:2], alpha, n_threads=1, method=method)
        info["numba_threading_layer"] = numba.threading_layer()
        times: dict[tuple[str, int, int], list[float]] = {}
        mixtures: dict[tuple[str, int, int], np.ndarray] = {}
        for rep in range(args.repeats):
            for th in threads:
                order = ["latentfs", "tomotopy"] if rep % 2 == 0 else ["tomotopy", "latentfs"]
                for side in order:
                    if side == "latentfs":
                        for method in methods:
                            t = time.perf_counter()
                            mix = fold_in(phi, observed, alpha, n_threads=th, method=method)
                            times.setdefault((method, 0, th), []).append(time.perf_counter() - t)
                            mixtures[(method, 0, th)] = mix
                    else:
                        for it in tomo_iters:
                            t = time.perf_counter()
                            dists, _ = mdl.infer(docs, iterations=it, workers=th)
                            times.setdefault(("tomotopy", it, th), []).append(time.perf_counter() - t)
                            mixtures[("tomotopy", it, th)] = np.asarray(dists)  # the last repeat's is scored
        _, vb_iter = fold_in_csr(observed.indptr, observed.indices, observed.data, np.ascontiguousarray(phi.T),
                                 alpha, None, max_iter=200, tol=1e-6, n_threads=1)
        _, cvb0_iter = cvb0_csr(observed.indptr, observed.indices, observed.data, np.ascontiguousarray(phi.T),
                                alpha, max_iter=200, tol=1e-6, n_threads=1)
        updates = {"vb": vb_iter, "cvb0": cvb0_iter}
        whole: dict[str, float] = {}
        if not args.no_whole:
            with tempfile.TemporaryDirectory() as folder:
                np.save(Path(folder) / "phi.npy", phi)
                np.save(Path(folder) / "alpha.npy", alpha)
                np.save(Path(folder) / "ids.npy", ids)
                sp.save_npz(Path(folder) / "observed.npz", observed)
                sp.save_npz(Path(folder) / "observed_subset.npz", obs_sub)
                mdl.save(str(Path(folder) / "model.bin"))
                whole["latentfs"] = whole_process("latentfs", folder, 1, 0)
                whole["tomotopy"] = whole_process("tomotopy", folder, 1, 100)
        for th in threads:
            row: dict[str, Any] = {"K": K, "threads": th, "docs": n_docs, "tokens": int(n_tokens),
                                   "tomotopy_docs": n_tomo, "tomotopy_tokens": int(n_tokens_sub), "train_s": train_s,
                                   "make_doc_s": make_doc_s, "latentfs": {}, "tomotopy": {}}
            for method in methods:
                mix = mixtures[(method, 0, th)]
                row["latentfs"][method] = {
                    "s": statistics.median(times[(method, 0, th)]),
                    "quality": completion_score(phi, mix, held)["per_token"],
                    "quality_subset": completion_score(phi, mix[:n_tomo], held_sub)["per_token"],
                    "updates_median": float(np.median(updates[method])), "updates_max": int(updates[method].max()),
                }
            for it in tomo_iters:
                row["tomotopy"][it] = {"s": statistics.median(times[("tomotopy", it, th)]),
                                       "quality_subset": completion_score(phi, mixtures[("tomotopy", it, th)],
                                                                          held_sub)["per_token"]}
            best = max(methods, key=lambda m: row["latentfs"][m]["quality_subset"])
            lq = row["latentfs"][best]["quality_subset"]
            # time per token on each side (tomotopy measured on its subset)
            lt = row["latentfs"][best]["s"] / n_tokens
            reach = [it for it in tomo_iters if row["tomotopy"][it]["quality_subset"] >= lq - args.slack]
            # none reaching latentfs's held-out: its fastest setting (a lower bound on the ratio at equal quality)
            ref_it = reach[0] if reach else min(tomo_iters, key=lambda it: row["tomotopy"][it]["s"])
            row["best_method"] = best
            row["equal_iter"] = reach[0] if reach else None
            row["ratio_equal"] = row["tomotopy"][ref_it]["s"] / n_tokens_sub / lt
            row["ratio_vb_default"] = (row["tomotopy"][100]["s"] / n_tokens_sub) / (row["latentfs"]["vb"]["s"] / n_tokens)
            row["whole"] = whole if th == 1 else {}
            rows.append(row)
            print(json.dumps(row), flush=True)
    info["total_s"] = time.perf_counter() - t_start
    text = report(rows, info, args)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def report(rows: list[dict[str, Any]], info: dict[str, Any], args: Any) -> str:
    out = ["# Fold-in of new documents: latentfs `fold_in` vs tomotopy `LDAModel.infer` (same Φ and α)", ""]
    out.append(f"Command: `{info['command']}`  ")
    out.append(f"Machine: {info['cpu']}, {info['cores']} cores (shared with other work), Python {info['python']}, "
               f"numba {info['numba']} ({info['numba_threading_layer']}), tomotopy {info['tomotopy']} "
               f"({info['tomotopy_isa']}); total {info['total_s']:.0f} s.  ")
    out.append(f"Corpus: simulated LDA, 100 true topics over {args.vocab} words, {args.train_docs} training "
               f"documents, {args.new_docs} new documents of mean length {args.mean_length}, each split in halves "
               f"(the observed half folded in, the other scored). Φ, α: tomotopy LDAModel(k=K, alpha=0.1, "
               f"eta=0.01) after {args.train_iterations} training iterations (α optimised by tomotopy).  ")
    out.append(f"latentfs folds in all new documents; tomotopy the first {args.tomotopy_docs} (per K) of them, "
               "because its cost per document is large and does not depend on the batch (it is compared per token). "
               f"Engine-only times: medians of {args.repeats} runs, the sides alternating. Held-out: per-token "
               "log-likelihood by document completion (nats/token, higher is better), the same code on both sides, on "
               f"tomotopy's documents. Equal quality: tomotopy's fewest iterations within {args.slack} of latentfs's "
               "better method; none reaching it, its fastest setting (so the ratio at equal quality is at least that).")
    out.append("")
    out.append("| K | threads | vb ns/token | vb docs/s | vb held-out | cvb0 ns/token | cvb0 docs/s | cvb0 held-out "
               "| sweeps vb / cvb0 (median, max) | tomotopy iters: ns/token (held-out) | ratio at equal quality "
               "| ratio tomotopy default / vb |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tok, tok_sub = r["tokens"], r["tomotopy_tokens"]
        v, c = r["latentfs"]["vb"], r["latentfs"]["cvb0"]
        tomo = "; ".join(f"{it}: {x['s'] / tok_sub * 1e9:.0f} ({x['quality_subset']:.4f})"
                         for it, x in r["tomotopy"].items())
        eq = f"{r['ratio_equal']:.1f}× ({r['best_method']}; tomotopy " + (
            f"{r['equal_iter']} iters)" if r["equal_iter"] is not None else "never reaches it: its fastest)")
        out.append(f"| {r['K']} | {r['threads']} | {v['s'] / tok * 1e9:.0f} | {r['docs'] / v['s']:.0f} | "
                   f"{v['quality_subset']:.4f} | {c['s'] / tok * 1e9:.0f} | {r['docs'] / c['s']:.0f} | "
                   f"{c['quality_subset']:.4f} | {v['updates_median']:.0f}, {v['updates_max']} / "
                   f"{c['updates_median']:.0f}, {c['updates_max']} | {tomo} | {eq} | {r['ratio_vb_default']:.1f}× |")
    out.append("")
    out.append("ns/token: wall time per observed (folded-in) token; per core at 2 threads, multiply by 2. Ratios: "
               "tomotopy's time per token / latentfs's at the same number of threads (> 1: latentfs faster). "
               "Held-out of latentfs over all new documents: " + ", ".join(
                   f"K={r['K']}: vb {r['latentfs']['vb']['quality']:.4f}, cvb0 {r['latentfs']['cvb0']['quality']:.4f}"
                   for r in rows if r["threads"] == 1) + ".")
    out.append("")
    out.append("Whole process, 1 thread (a fresh interpreter: import, load Φ and documents, infer, write; latentfs "
               "`fold_in(method='cvb0')` on all new documents; tomotopy `infer` at 100 iterations on its "
               "subset, making its documents inside):")
    out.append("")
    out.append("| K | latentfs docs | latentfs s | latentfs docs/s | tomotopy docs | tomotopy s "
               "| tomotopy docs/s | ratio (docs/s) |")
    out.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        w = r["whole"]
        if w:
            lf = w["latentfs"]
            out.append(f"| {r['K']} | {r['docs']} | {w['latentfs']:.2f} | "
                       f"{r['docs'] / lf:.0f} | {r['tomotopy_docs']} | {w['tomotopy']:.2f} | "
                       f"{r['tomotopy_docs'] / w['tomotopy']:.0f} | "
                       f"{(r['docs'] / lf) / (r['tomotopy_docs'] / w['tomotopy']):.1f}× |")
    out.append("")
    out.append("Training of the shared tomotopy model and tomotopy's make_doc (in no ratio): " + ", ".join(
        f"K={r['K']}: train {r['train_s']:.1f} s, make_doc {r['make_doc_s']:.2f} s" for r in rows
        if r["threads"] == 1))
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()
