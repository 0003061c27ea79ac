"""DCA engines beside the peers a user would otherwise pick, on the same data, in one process.

    python benchmarks/dca.py [--quick] [--repeats 3] [--out benchmarks/results/dca.md]

Workloads (issue 2): a corpus simulated from DirichletDCA (2,000 documents, 5,000 words, K = 50, ~150
tokens per document, α = 0.1, γ = 0.01) and the Reuters sample of the `lda` package (K = 20). Every
library is scored by the same code: per-token held-out log-likelihood by document completion
(latentfs.evaluate.heldout) on held-out documents, folded in with the same α.

* VB: time for latentfs VB to reach the held-out log-likelihood at which scikit-learn's batch
  LatentDirichletAllocation finishes, against scikit-learn's own time; gensim's online LdaModel reported.
* Gibbs: ns per token per sweep for latentfs direct Gibbs, the `lda` package and tomotopy, and the
  held-out log-likelihood each reaches at (about) equal wall time.

One BLAS/OpenMP thread everywhere; times are process CPU times (robust to other load on a shared
machine, and equal to wall time for single-threaded work); medians of repeats; ratios printed.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import latentfs  # noqa: E402
from latentfs.evaluate.heldout import document_completion, split_documents  # noqa: E402
from latentfs.inference.dca.common import prepare, resolve_model  # noqa: E402
from latentfs.inference.dca.gibbs import _hyper as gibbs_hyper  # noqa: E402
from latentfs.inference.dca.gibbs import gibbs_init, gibbs_step, token_index  # noqa: E402

torch.set_num_threads(1)


def machine_info() -> str:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import sklearn

    return (f"{platform.platform()}, {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"torch {torch.__version__}, scikit-learn {sklearn.__version__}, latentfs {latentfs.__version__}; "
            f"1 thread, process CPU time; load average at start {os.getloadavg()[0]:.1f}")


# ------------------------------------------------------------------------------------------ data


def simulated(quick: bool):
    n_docs, n_words, K = (600, 2000, 20) if quick else (2000, 5000, 50)
    model = latentfs.DirichletDCA(K, alpha=0.1, gamma=0.01)
    rng = np.random.default_rng(0)
    lengths = rng.poisson(150, size=n_docs + 300).clip(20)
    sim = model.simulate(n_docs + 300, n_words, doc_length=lengths, seed=0)
    X = sp.csr_matrix(sim["counts"])
    train, test = X[:n_docs], X[n_docs:]
    return f"simulated DirichletDCA {n_docs}x{n_words}, K={K}", train, test, K, 0.1, 0.01, sim["topic_word"]


def news20(quick: bool):
    """A 20-Newsgroups-sized corpus simulated from DirichletDCA (issue 3): 11,000 docs × 60,000 words, ~2.4M tokens."""
    n_docs, n_words, K = (2000, 20000, 50) if quick else (11000, 60000, 50)
    model = latentfs.DirichletDCA(K, alpha=0.1, gamma=0.01)
    rng = np.random.default_rng(1)
    lengths = rng.poisson(218, size=n_docs + 500).clip(20)
    theta = model.simulate(1, n_words, doc_length=1, seed=1)["topic_word"]  # the components only
    m = rng.dirichlet(np.full(K, 0.1), size=n_docs + 500)
    # two-stage draw (component, then word) keeps memory at O(tokens): no dense documents × words matrix
    cdf = np.cumsum(theta, axis=1)
    cdf /= cdf[:, -1:]
    rows, cols = [], []
    for i, L in enumerate(lengths):
        comps = rng.choice(K, size=L, p=m[i])
        words = np.array([np.searchsorted(cdf[k], rng.random()) for k in comps]).clip(max=n_words - 1)
        rows.append(np.full(L, i))
        cols.append(words)
    rows_a, cols_a = np.concatenate(rows), np.concatenate(cols)
    X = sp.csr_matrix((np.ones(rows_a.size), (rows_a, cols_a)), shape=(n_docs + 500, n_words))
    X.sum_duplicates()
    return f"simulated 20-Newsgroups-sized DirichletDCA {n_docs}x{n_words}, K={K}", X[:n_docs], X[n_docs:], K, 0.1, 0.01, theta


def reuters(quick: bool):
    from latentfs.datasets import load_reuters

    X = load_reuters().counts
    rng = np.random.default_rng(0)
    order = rng.permutation(X.shape[0])
    test_idx, train_idx = order[:60], order[60:]
    return "Reuters sample (lda package) 335+60 docs x 4258", X[train_idx], X[test_idx], 20, 0.1, 0.1, None


# ------------------------------------------------------------------------------------------ VB


def sklearn_batch(train, K, alpha, gamma, split, max_iter, seed):
    from sklearn.decomposition import LatentDirichletAllocation

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lda = LatentDirichletAllocation(n_components=K, doc_topic_prior=alpha, topic_word_prior=gamma,
                                        learning_method="batch", max_iter=max_iter, evaluate_every=-1,
                                        random_state=seed)
        t = time.process_time()
        lda.fit(train)
        elapsed = time.process_time() - t
    return elapsed, document_completion(lda.components_, None, alpha, split=split)


def latentfs_vb_curve(train, K, alpha, gamma, split, max_iter, seed, theta_update, target, dtype):
    """latentfs.fit with its defaults; held-out checked every 5 cycles (check time excluded)."""
    model = latentfs.DirichletDCA(K, alpha=alpha, gamma=gamma)
    record = {"reached": None, "last": None, "check": 0.0, "start": time.process_time()}

    def monitor(it, state, _value):
        if (it + 1) % 5:
            return
        t = time.process_time()
        theta = state.topic_word.double().numpy()  # Θ (chapter/map) or λ (full): both normalise to the mean
        held = document_completion(theta, None, alpha, split=split)
        record["check"] += time.process_time() - t
        spent = time.process_time() - record["start"] - record["check"]
        record["last"] = (spent, it + 1, held)
        if record["reached"] is None and held >= target:
            record["reached"] = (spent, it + 1, held)
            raise KeyboardInterrupt  # stop the fit here: the target is reached

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        latentfs.fit(model, train, method="vb", theta_update=theta_update, seed=seed, max_iter=max_iter, tol=0.0,
                     dtype=dtype, empty_documents="drop", num_ll_draws=0, progress=False, callback=monitor)
    return record["reached"], record["last"]


def gensim_online(train, K, alpha, gamma, split, passes, seed):
    from gensim.matutils import Sparse2Corpus
    from gensim.models import LdaModel

    corpus = Sparse2Corpus(train, documents_columns=False)
    t = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lda = LdaModel(corpus, num_topics=K, alpha=np.full(K, alpha), eta=gamma, passes=passes, random_state=seed,
                       id2word={j: str(j) for j in range(train.shape[1])})
    elapsed = time.process_time() - t
    return elapsed, document_completion(lda.get_topics(), None, alpha, split=split)


# ------------------------------------------------------------------------------------------ Gibbs


def latentfs_gibbs(train, K, alpha, gamma, split, sweeps, seed, dtype):
    model = latentfs.DirichletDCA(K, alpha=alpha, gamma=gamma)
    data = prepare(train, dtype=dtype, empty_documents="drop")
    model = resolve_model(model, data)
    hyper = gibbs_hyper(model, data)
    tokens = token_index(data)
    gen = torch.Generator().manual_seed(seed)
    state = gibbs_init(model, data, tokens, hyper, gen)
    t = time.process_time()
    for _ in range(sweeps):
        state = gibbs_step(model, data, tokens, state, hyper, gen)
    elapsed = time.process_time() - t
    theta = (state.word_counts + hyper["gamma"]).double().numpy()
    return elapsed, document_completion(theta, None, alpha, split=split), int(tokens.doc.numel())


def lda_package(train, K, alpha, gamma, split, sweeps, seed):
    import logging

    import lda

    logging.getLogger("lda").setLevel(logging.ERROR)
    model = lda.LDA(n_topics=K, n_iter=sweeps, alpha=alpha, eta=gamma, random_state=seed, refresh=10**9)
    X = sp.csr_matrix(train).astype(np.int64)
    t = time.process_time()
    model.fit(X)
    return time.process_time() - t, document_completion(model.topic_word_, None, alpha, split=split)


def tomotopy_gibbs(train, K, alpha, gamma, split, sweeps, seed):
    import tomotopy as tp

    model = tp.LDAModel(k=K, alpha=alpha, eta=gamma, seed=seed)
    X = sp.csr_matrix(train)
    for i in range(X.shape[0]):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        words = np.repeat(X.indices[lo:hi], X.data[lo:hi].astype(int)).astype(str).tolist()
        if words:
            model.add_doc(words)
    model.train(0, workers=1)
    t = time.process_time()
    model.train(sweeps, workers=1)
    elapsed = time.process_time() - t
    vocab = {w: j for j, w in enumerate(model.used_vocabs)}
    theta = np.full((K, X.shape[1]), 1e-12)
    for k in range(K):
        dist = model.get_topic_word_dist(k)
        for w, j in vocab.items():
            theta[k, int(w)] = dist[j]
    return elapsed, document_completion(theta, None, alpha, split=split)


# ------------------------------------------------------------------------------------------ whole calls, fresh processes
# What a user times: one new Python process, the public call with default options, first call included. The
# corpus and the held-out split are written once to an .npz; each call runs in its own child process
# (``python benchmarks/dca.py --child NAME --data FILE --k K``), which times only the fit call (wall and CPU)
# and scores the result with latentfs's document completion. ``NUMBA_CACHE_DIR`` points every child at a cache
# folder: a fresh empty one ("cold": numba compiles in the call) or one a previous child filled ("warm").
EVAL_ALPHA = 0.1  # the fold-in α used to score every library (the simulated corpus's true α)


def save_problem(path: Path, train, split) -> None:
    arrays = {}
    for name, m in (("train", train), ("obs", split[0]), ("held", split[1])):
        m = sp.csr_matrix(m)
        arrays.update({f"{name}_data": m.data, f"{name}_indices": m.indices, f"{name}_indptr": m.indptr,
                       f"{name}_shape": np.array(m.shape)})
    np.savez(path, **arrays)


def load_problem(path: str):
    d = np.load(path)

    def get(name):
        return sp.csr_matrix((d[f"{name}_data"], d[f"{name}_indices"], d[f"{name}_indptr"]),
                             shape=tuple(d[f"{name}_shape"]))

    return get("train"), (get("obs"), get("held"))


def _child_latentfs(method: str, n_threads: int = 1, torch_threads: int = 1):
    """The default call; ``n_threads`` is passed to the engine, ``torch_threads`` is what torch may use (two:
    the default ``chain_method="auto"`` may run collapsed Gibbs's chains in threads)."""

    def fit(X, K, split, extra):
        torch.set_num_threads(torch_threads)
        kw = {"n_threads": n_threads} if n_threads > 1 else {}
        if "seed" in extra:
            kw["seed"] = extra["seed"]
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a ConvergenceWarning would not change the timing
            post = latentfs.fit(latentfs.DirichletDCA(K), X, method=method, **kw)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return {"wall": wall, "cpu": cpu, "heldout": document_completion(post, None, EVAL_ALPHA, split=split)}

    return fit


def _child_sklearn(X, K, split, extra):
    from sklearn.decomposition import LatentDirichletAllocation

    t0, c0 = time.perf_counter(), time.process_time()
    lda = LatentDirichletAllocation(n_components=K, learning_method="batch", random_state=extra.get("seed", 0)).fit(X)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall": wall, "cpu": cpu, "heldout": document_completion(lda.components_, None, EVAL_ALPHA, split=split)}


def _child_tomotopy(X, K, split, extra):
    """tomotopy LDAModel(k=K) defaults, 1 worker: build + train in steps until the held-out reaches ``target``.

    Returns the curve [(sweeps, wall s, cpu s, held-out)]; evaluation time is excluded from the clocks.
    """
    import tomotopy as tp

    target = extra.get("target", np.inf)
    t0, c0 = time.perf_counter(), time.process_time()
    model = tp.LDAModel(k=K, seed=extra["seed"]) if "seed" in extra else tp.LDAModel(k=K)
    for i in range(X.shape[0]):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        model.add_doc(np.repeat(X.indices[lo:hi], X.data[lo:hi].astype(int)).astype(str).tolist())
    model.train(0, workers=1)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    curve, done = [], 0
    for c in extra.get("checkpoints", [50, 100, 200, 300, 400, 600, 800, 1000]):
        t0, c0 = time.perf_counter(), time.process_time()
        model.train(c - done, workers=1)
        wall, cpu, done = wall + time.perf_counter() - t0, cpu + time.process_time() - c0, c
        theta = np.full((K, X.shape[1]), 1e-12)
        cols = np.array([int(w) for w in model.used_vocabs])
        for k in range(K):
            theta[k, cols] = model.get_topic_word_dist(k)
        curve.append((c, wall, cpu, document_completion(theta, None, EVAL_ALPHA, split=split)))
        if curve[-1][3] >= target:
            break
    return {"curve": curve, "wall": wall, "cpu": cpu, "heldout": curve[-1][3]}


CHILDREN = {"latentfs-vb": _child_latentfs("vb"), "latentfs-vb-2threads": _child_latentfs("vb", 2),
            "latentfs-collapsed": _child_latentfs("collapsed_gibbs"),
            "latentfs-collapsed-2threads": _child_latentfs("collapsed_gibbs", 2),
            "latentfs-collapsed-2cores": _child_latentfs("collapsed_gibbs", 1, torch_threads=2),
            "sklearn-batch": _child_sklearn, "tomotopy": _child_tomotopy}


def child_main(name: str, data: str, K: int, extra: str) -> None:
    X, split = load_problem(data)
    out = CHILDREN[name](X, K, split, json.loads(extra))
    print("RESULT " + json.dumps(out), flush=True)


def fresh_call(name: str, data: Path, K: int, cache_dir: Path, extra: dict | None = None, threads: int = 1) -> dict:
    """Run one whole call in a new process; returns its JSON plus the process's own wall time."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": str(threads)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "dca.py"), "--child", name,
                           "--data", str(data), "--k", str(K), "--extra", json.dumps(extra or {})],
                          env=env, capture_output=True, text=True, check=False)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        raise RuntimeError(f"child {name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return {**json.loads(line[-1][7:]), "process_wall": time.perf_counter() - t0, "load": os.getloadavg()[0]}


def whole_calls(lines: list[str], train, split, K: int, label: str, pairs: list[tuple[str, str]], cold: bool) -> None:
    """Time each (ours, peer) pair as whole calls in fresh processes; numba cache cold and warm for ours."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "problem.npz"
        save_problem(data, train, split)
        lines += [f"### Whole calls in fresh processes: {label}, K={K}", "",
                  "Each row is one new process running the public call with default options (first call in the "
                  "process, so numba compilation or cache loading is included); held-out scored by "
                  f"`latentfs.evaluate.document_completion` with fold-in α = {EVAL_ALPHA} for every library. "
                  "Times are wall (and CPU) seconds of the call alone; the load average is the machine's at the end.",
                  "", "| call | numba cache | wall s | CPU s | held-out | load |", "|---|---|---|---|---|---|"]
        results = {}
        for ours, peer in pairs:
            threads = 2 if ("2threads" in ours or "2cores" in ours) else 1
            cache = Path(tempfile.mkdtemp(dir=tmp))  # empty: the first call compiles and fills it
            first = fresh_call(ours, data, K, cache, threads=threads)
            runs = ([("cold", first)] if cold else []) + [("warm", fresh_call(ours, data, K, cache, threads=threads))]
            for mode, r in runs:
                results[(ours, mode)] = r
                lines.append(f"| `{ours}` | {mode} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['heldout']:.4f} | "
                             f"{r['load']:.1f} |")
            if peer and (peer, "") not in results:
                target = results[(ours, "warm")]["heldout"]
                r = fresh_call(peer, data, K, Path(tmp) / "peer", {"target": target})
                results[(peer, "")] = r
                lines.append(f"| `{peer}` | – | {r['wall']:.2f} | {r['cpu']:.2f} | {r['heldout']:.4f} | "
                             f"{r['load']:.1f} |")
                if "curve" in r:
                    reached = [c for c in r["curve"] if c[3] >= target]
                    lines.append("")
                    lines.append(f"{peer} curve (sweeps, wall s, CPU s, held-out): "
                                 + "; ".join(f"{c[0]}: {c[1]:.2f}/{c[2]:.2f}/{c[3]:.4f}" for c in r["curve"]))
                    ours_r = results[(ours, "warm")]
                    if reached:
                        lines.append(f"**{peer} needs {reached[0][1]:.2f} s wall ({reached[0][2]:.2f} s CPU, "
                                     f"{reached[0][0]} sweeps) to reach `{ours}`'s default held-out {target:.4f}: "
                                     f"ratio {reached[0][2] / ours_r['cpu']:.2f}× by CPU, "
                                     f"{reached[0][1] / ours_r['wall']:.2f}× by wall (warm cache).**")
                    else:
                        lines.append(f"{peer} did not reach {target:.4f} within {r['curve'][-1][0]} sweeps.")
                    lines.append("")
                else:
                    ours_r = results[(ours, "warm")]
                    lines.append("")
                    lines.append(f"**Default against default: {peer} {r['cpu']:.2f} s CPU / latentfs "
                                 f"{ours_r['cpu']:.2f} s CPU = {r['cpu'] / ours_r['cpu']:.2f}× (wall "
                                 f"{r['wall'] / ours_r['wall']:.2f}×); held-out {r['heldout']:.4f} vs "
                                 f"{ours_r['heldout']:.4f}.**")
                    lines.append("")
        print("\n".join(lines[-14:]), flush=True)


def whole_collapsed_seeds(lines: list[str], train, split, K: int, label: str, n_seeds: int) -> None:
    """Default collapsed-Gibbs whole calls over seeds 0..n−1 beside tomotopy ``LDAModel(k=K, seed=seed)`` (one
    worker) trained in steps until it reaches each call's held-out (1,000 sweeps at most).

    Both sides draw a different chain per seed, and their held-out spreads over seeds by more than the gaps the
    ratio measures, so one seed says little. Fresh process per call, warm numba cache (a first call fills it and
    is not counted: the first 300 training documents)."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "problem.npz"
        save_problem(data, train, split)
        cache = Path(tmp) / "numba"
        # A first call fills the numba cache; a slice of the corpus compiles the same kernels (same K, same dtypes)
        # without a second whole fit of a large corpus.
        warm = Path(tmp) / "warm-up.npz"
        save_problem(warm, sp.csr_matrix(train)[:300], tuple(sp.csr_matrix(m)[:50] for m in split))
        fresh_call("latentfs-collapsed", warm, K, cache, {"seed": 99})
        rows = []
        for seed in range(n_seeds):
            ours = fresh_call("latentfs-collapsed", data, K, cache, {"seed": seed})
            peer = fresh_call("tomotopy", data, K, Path(tmp) / "peer", {"target": ours["heldout"], "seed": seed})
            reached = [c for c in peer["curve"] if c[3] >= ours["heldout"]]
            rows.append((seed, ours, peer, reached[0] if reached else None))
            print(f"seed {seed}: latentfs {ours['wall']:.2f} s {ours['heldout']:.4f}; tomotopy "
                  + (f"{reached[0][1]:.2f} s ({reached[0][0]} sweeps)" if reached else
                     f"not reached, best {max(c[3] for c in peer['curve']):.4f}") + f"; load {peer['load']:.1f}",
                  flush=True)
    lines += [f"### Default collapsed Gibbs whole calls over {n_seeds} seeds: {label}, K={K}", "",
              "Fresh process per call, warm numba cache, one thread; `latentfs.fit(DirichletDCA(K), X, "
              "method='collapsed_gibbs', seed=seed)` against tomotopy `LDAModel(k=K, seed=seed)`, one worker, trained "
              "until it reaches the latentfs call's held-out (checkpoints 50, 100, 200, 300, 400, 600, 800, 1000 "
              "sweeps); held-out by `document_completion`, fold-in α = 0.1.", "",
              "| seed | latentfs wall s | held-out | tomotopy to reach it: sweeps | wall s | tomotopy at 200 sweeps | "
              "ratio (tomotopy / latentfs) | load |", "|---|---|---|---|---|---|---|---|"]
    ratios, missed = [], 0
    for seed, ours, peer, hit in rows:
        at200 = next((f"{c[3]:.4f}" for c in peer["curve"] if c[0] == 200), "– (stopped earlier)")
        if hit:
            ratios.append(hit[1] / ours["wall"])
            cells = f"{hit[0]} | {hit[1]:.2f} | {at200} | {ratios[-1]:.2f}×"
        else:
            missed += 1
            best = max(peer["curve"], key=lambda c: c[3])
            cells = (f"> {peer['curve'][-1][0]} | > {peer['wall']:.2f} | {at200} | > "
                     f"{peer['wall'] / ours['wall']:.2f}× (best {best[3]:.4f} at {best[0]} sweeps)")
            ratios.append(peer["wall"] / ours["wall"])  # a lower bound
        lines.append(f"| {seed} | {ours['wall']:.2f} | {ours['heldout']:.4f} | {cells} | {peer['load']:.1f} |")
    lines += ["", f"**Median ratio {float(np.median(ratios)):.2f}× (tomotopy's wall time to latentfs's held-out over "
              f"latentfs's wall time; {missed} of {n_seeds} seeds not reached within 1,000 sweeps count at their "
              "lower bound).**", ""]


def whole_vb_seeds(lines: list[str], train, split, K: int, label: str, n_seeds: int) -> None:
    """Default VB whole calls (1 and 2 threads) beside scikit-learn's default batch LDA, over seeds 0..n−1.

    Each call is a fresh process with a warm numba cache (a first call fills it and is not counted). Reports
    every seed and the medians, and how often latentfs's default ends at or above scikit-learn's held-out.
    """
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "problem.npz"
        save_problem(data, train, split)
        cache = Path(tmp) / "numba"
        fresh_call("latentfs-vb", data, K, cache, {"seed": 99})  # fills the numba cache: the one-thread kernel
        fresh_call("latentfs-vb-2threads", data, K, cache, {"seed": 99}, threads=2)  # and the threaded one
        rows = []
        for seed in range(n_seeds):
            one = fresh_call("latentfs-vb", data, K, cache, {"seed": seed})
            two = fresh_call("latentfs-vb-2threads", data, K, cache, {"seed": seed}, threads=2)
            sk = fresh_call("sklearn-batch", data, K, cache, {"seed": seed})
            rows.append((seed, one, two, sk))
            print(f"seed {seed}: latentfs {one['wall']:.2f} s {one['heldout']:.4f}, 2 threads {two['wall']:.2f} s, "
                  f"sklearn {sk['wall']:.2f} s {sk['heldout']:.4f}, load {sk['load']:.1f}", flush=True)
    med = lambda xs: float(np.median(xs))  # noqa: E731
    lines += [f"### Default VB whole calls over {n_seeds} seeds: {label}, K={K}", "",
              "Fresh process per call, warm numba cache, one thread unless stated (`n_threads=2`: the same call "
              "with two threads); scikit-learn `LatentDirichletAllocation(n_components=K, learning_method='batch', "
              "random_state=seed)`; held-out by `document_completion`, fold-in α = 0.1.", "",
              "| seed | latentfs wall s | CPU s | held-out | latentfs 2 threads wall s | held-out | scikit-learn wall s "
              "| CPU s | held-out | load |", "|---|---|---|---|---|---|---|---|---|---|"]
    for seed, one, two, sk in rows:
        lines.append(f"| {seed} | {one['wall']:.2f} | {one['cpu']:.2f} | {one['heldout']:.4f} | {two['wall']:.2f} | "
                     f"{two['heldout']:.4f} | {sk['wall']:.2f} | {sk['cpu']:.2f} | {sk['heldout']:.4f} | "
                     f"{sk['load']:.1f} |")
    one_t, two_t, sk_t = (med([r[i]["wall"] for r in rows]) for i in (1, 2, 3))
    one_c, sk_c = med([r[1]["cpu"] for r in rows]), med([r[3]["cpu"] for r in rows])
    one_h, sk_h = med([r[1]["heldout"] for r in rows]), med([r[3]["heldout"] for r in rows])
    better = sum(r[1]["heldout"] >= r[3]["heldout"] for r in rows)
    lines += ["", f"**Medians: latentfs {one_t:.2f} s wall ({one_c:.2f} s CPU), 2 threads {two_t:.2f} s; scikit-learn "
              f"{sk_t:.2f} s wall ({sk_c:.2f} s CPU): {sk_c / one_c:.2f}× by CPU on one thread, {sk_t / two_t:.2f}× by "
              f"wall with two threads. Held-out median {one_h:.4f} vs {sk_h:.4f}; latentfs's default ends at or above "
              f"scikit-learn's (same seed) in {better} of {len(rows)}.**", ""]
    print("\n".join(lines[-(len(rows) + 6):]), flush=True)


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    from bytecode import byte_compile_latentfs  # noqa: PLC0415

    byte_compile_latentfs()  # as an installed package is (benchmarks/bytecode.py)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/dca.md")
    parser.add_argument("--corpora", nargs="+", default=["simulated", "reuters"], choices=["simulated", "reuters", "news20"])
    parser.add_argument("--no-gibbs", action="store_true", help="skip the direct-Gibbs comparison")
    parser.add_argument("--no-vb", action="store_true", help="skip the VB comparison")
    parser.add_argument("--whole", action="store_true", help="only the fresh-process whole-call comparison")
    parser.add_argument("--no-whole", action="store_true", help="skip the fresh-process whole-call comparison")
    parser.add_argument("--cold", action="store_true", help="also time a call with an empty numba cache")
    parser.add_argument("--whole-seeds", type=int, default=0,
                        help="only: default VB whole calls (1 and 2 threads) vs scikit-learn over this many seeds")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--k", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--extra", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args.child, args.data, args.k, args.extra)
        return
    reps = 1 if args.quick else args.repeats
    lines = [f"# DCA benchmark ({'quick' if args.quick else 'full'})", "", f"Machine: {machine_info()}", "",
             f"Command: `python benchmarks/dca.py{' --quick' if args.quick else ''} --repeats {args.repeats} --corpora "
             f"{' '.join(args.corpora)}{' --no-gibbs' if args.no_gibbs else ''}{' --no-vb' if args.no_vb else ''}"
             f"{f' --whole-seeds {args.whole_seeds}' if args.whole_seeds else ''}`", ""]
    with threadpool_limits(1):
        for load in [{"simulated": simulated, "reuters": reuters, "news20": news20}[c] for c in args.corpora]:
            name, train, test, K, alpha, gamma, truth = load(args.quick)
            split = split_documents(test, 0.5, seed=0)
            lines += [f"## {name}", ""]
            if truth is not None:
                lines.append(f"Oracle held-out (true Θ): {document_completion(truth, None, alpha, split=split):.4f} nats/token")
                lines.append("")
            if args.whole_seeds:
                whole_vb_seeds(lines, train, split, K, name, args.whole_seeds)
                continue
            if not args.no_whole and not args.no_vb:
                whole_calls(lines, train, split, K, name, [("latentfs-vb", "sklearn-batch")], args.cold)
            if args.whole:
                continue
            # ---- VB
            sk_iter = 10 if args.quick else 40
            rows = []
            for r in range(0 if args.no_vb else reps):
                sk_t, sk_h = sklearn_batch(train, K, alpha, gamma, split, sk_iter, r)
                for tu in ("full", "chapter"):
                    reached, last = latentfs_vb_curve(train, K, alpha, gamma, split, 400, r, tu, sk_h, torch.float64)
                    rows.append((r, tu, sk_t, sk_h, reached, last))
                g_t, g_h = gensim_online(train, K, alpha, gamma, split, 2 if args.quick else 10, r)
                rows.append((r, "gensim", g_t, g_h, None, None))
            if args.no_vb:
                rows = []
            lines += [] if args.no_vb else ["### VB: time to scikit-learn batch LDA's final held-out log-likelihood", "",
                      f"scikit-learn `LatentDirichletAllocation(learning_method='batch', max_iter={sk_iter})`; latentfs "
                      "VB from its own random start, held-out checked every 5 cycles (check time excluded).", "",
                      "| Θ update | sklearn s | sklearn held-out | latentfs s to reach it | cycles | speed-up |",
                      "|---|---|---|---|---|---|"]
            for tu in () if args.no_vb else ("full", "chapter"):
                sel = [x for x in rows if x[1] == tu]
                sk_ts = [x[2] for x in sel]
                reached = [x[4] for x in sel]
                if all(rr is not None for rr in reached):
                    ours = [rr[0] for rr in reached]
                    speed = statistics.median(a / b for a, b in zip(sk_ts, ours, strict=True))
                    lines.append(f"| {tu} | {statistics.median(sk_ts):.2f} | {statistics.median(x[3] for x in sel):.4f} | "
                                 f"{statistics.median(ours):.2f} | {statistics.median(rr[1] for rr in reached)} | "
                                 f"**{speed:.1f}×** |")
                else:
                    lasts = [x[5] for x in sel]
                    lines.append(f"| {tu} | {statistics.median(sk_ts):.2f} | {statistics.median(x[3] for x in sel):.4f} | "
                                 f"not reached in 400 cycles ({statistics.median(lt[0] for lt in lasts):.2f} s, final "
                                 f"{statistics.median(lt[2] for lt in lasts):.4f}) | – | – |")
            gen_rows = [x for x in rows if x[1] == "gensim"]
            lines += [] if args.no_vb else ["", f"gensim online LdaModel ({2 if args.quick else 10} passes): "
                      f"{statistics.median(x[2] for x in gen_rows):.2f} s, held-out "
                      f"{statistics.median(x[3] for x in gen_rows):.4f}", ""]
            # ---- Gibbs
            if args.no_gibbs:
                print("\n".join(lines[-12:]), flush=True)
                continue
            sweeps = 50 if args.quick else 300
            res: dict[str, list] = {"latentfs gibbs f32": [], "latentfs gibbs f64": [], "lda": [], "tomotopy": []}
            for r in range(reps):
                t, h, n_tok = latentfs_gibbs(train, K, alpha, gamma, split, sweeps, r, torch.float32)
                res["latentfs gibbs f32"].append((t, h))
                t, h, _ = latentfs_gibbs(train, K, alpha, gamma, split, sweeps, r, torch.float64)
                res["latentfs gibbs f64"].append((t, h))
                res["lda"].append(lda_package(train, K, alpha, gamma, split, sweeps, r))
                res["tomotopy"].append(tomotopy_gibbs(train, K, alpha, gamma, split, sweeps, r))
            lda_ns = statistics.median(t for t, _ in res["lda"]) / sweeps / n_tok * 1e9
            lines += [f"### Gibbs: {sweeps} sweeps over {n_tok} tokens", "",
                      "| sampler | ns/token/sweep | throughput vs `lda` | held-out after the sweeps |", "|---|---|---|---|"]
            for key, vals in res.items():
                ns = statistics.median(t for t, _ in vals) / sweeps / n_tok * 1e9
                lines.append(f"| {key} | {ns:.0f} | {lda_ns / ns:.2f}× | {statistics.median(h for _, h in vals):.4f} |")
            lines.append("")
            print("\n".join(lines[-12:]), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
