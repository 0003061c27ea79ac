"""Collapsed Gibbs for DCA/LDA: latentfs against tomotopy and the `lda` package, on 1 thread.

For every corpus and K, each sampler runs from random assignments; at fixed sweep counts
(checkpoints) the sampling CPU time so far is recorded and the current state's topic–word count mean
(γ + N_kj) / (Jγ + N_k) (the same estimator for every library, over the full vocabulary) is scored
by document completion (``latentfs.evaluate.heldout``) on the same held-out documents and the same
50/50 token split. Evaluation time is not counted.

Reported: ns/token/sweep (median over the checkpoint intervals), the held-out per-token log-likelihood
at each checkpoint, and the time each sampler needs to reach a common held-out target (the best final
value that every sampler reaches, i.e. the lowest final mean): "throughput at equal held-out quality".
Held-out values are means over ``--seeds`` chains (1 on the 2.4M-token corpus).

Run: ``python benchmarks/dca_collapsed.py [--quick] [--corpora sim50 reuters news20] [--ks 20 50 200]``.

``--whole`` (issue 15, item 6): the call a user times instead, on sim50 at each ``--ks``: the public
``latentfs.fit(DirichletDCA(K), X, method="collapsed_gibbs")`` with default options, each in a fresh process
(numba cache cold with ``--cold``, and warm), beside tomotopy's whole call (``LDAModel(k=K)`` defaults, one
worker, documents added, trained until it reaches latentfs's held-out), and the same call with
``n_threads=2`` (helpers shared with ``benchmarks/dca.py``).

``--whole-seeds N``: the default whole call over seeds 0..N−1, tomotopy seeded alike, with the median ratio (one
seed says little: both sides' held-out spreads over seeds by more than the gaps compared).
``--whole-corpus news20`` (or ``sim20m``) runs ``--whole`` / ``--whole-seeds`` / ``--threads`` on the 2.4M-token corpus (or
a 20M-token one, 100,000 documents × 50,000 words) instead of sim50.

``--threads``: engine-only speed and held-out of the document-partitioned sweep, ``n_threads`` 1 against 2,
wall clock (medians over 25-sweep chunks), same seeds.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

torch.set_num_threads(1)
logging.getLogger("lda").setLevel(logging.ERROR)  # its per-run INFO lines and empty-column warnings

import latentfs  # noqa: E402
from latentfs.evaluate.heldout import completion_loglik, fold_in, split_documents  # noqa: E402
from latentfs.inference.dca import collapsed as dc  # noqa: E402
from latentfs.inference.dca.common import prepare  # noqa: E402


# ----------------------------------------------------------------------------- corpora
def simulate_dm(n_docs: int, n_words: int, k_true: int, mean_len: float, alpha: float, gamma: float, seed: int):
    """Draw a corpus from DirichletDCA's generative process (eq. 4 in token form), in numpy for speed.

    θ_k ~ Dir(γ) (drawn in log space: Gamma(γ) = Gamma(γ + 1) U^{1/γ}), m_i ~ Dir(α), L_i ~ 1 + Poisson(mean − 1),
    each token's component ~ m_i and word ~ θ_k. Returns (counts CSR, true topic_word).
    """
    rng = np.random.default_rng(seed)
    log_g = np.log(rng.gamma(gamma + 1, size=(k_true, n_words))) + np.log(rng.random((k_true, n_words))) / gamma
    theta = np.exp(log_g - log_g.max(1, keepdims=True))
    theta /= theta.sum(1, keepdims=True)
    lengths = 1 + rng.poisson(mean_len - 1, size=n_docs)
    log_m = np.log(rng.gamma(alpha + 1, size=(n_docs, k_true))) + np.log(rng.random((n_docs, k_true))) / alpha
    m = np.exp(log_m - log_m.max(1, keepdims=True))
    m /= m.sum(1, keepdims=True)
    doc = np.repeat(np.arange(n_docs), lengths)
    cdf = np.cumsum(m, 1)
    topic = (rng.random(doc.size)[:, None] > cdf[doc]).sum(1).clip(max=k_true - 1)
    word = np.empty(doc.size, np.int64)
    for k in range(k_true):
        idx = np.flatnonzero(topic == k)
        word[idx] = np.searchsorted(np.cumsum(theta[k]), rng.random(idx.size) * theta[k].sum()).clip(max=n_words - 1)
    X = sp.csr_matrix((np.ones(doc.size), (doc, word)), shape=(n_docs, n_words))
    X.sum_duplicates()
    return X, theta


def simulate_dm_chunked(n_docs, n_words, k_true, mean_len, alpha, gamma, seed=0, chunk=5000):
    """The generative process of :func:`simulate_dm` with memory O(tokens) (20M tokens would need a tokens × K
    table there): Θ as there, then per chunk of documents m_i ~ Dir(α), the component counts ~ Mult(L_i, m_i),
    and each component's words drawn from Θ_k by inverse CDF."""
    rng = np.random.default_rng(seed)
    log_g = np.log(rng.gamma(gamma + 1, size=(k_true, n_words))) + np.log(rng.random((k_true, n_words))) / gamma
    theta = np.exp(log_g - log_g.max(1, keepdims=True))
    theta /= theta.sum(1, keepdims=True)
    cdf = np.cumsum(theta, 1)
    cdf /= cdf[:, -1:]
    parts = []
    for lo in range(0, n_docs, chunk):
        n = min(chunk, n_docs - lo)
        lengths = 1 + rng.poisson(mean_len - 1, size=n)
        comp = rng.multinomial(lengths, rng.dirichlet(np.full(k_true, alpha), size=n))
        rows, cols = [], []
        for k in range(k_true):
            n_k = int(comp[:, k].sum())
            if n_k:
                rows.append(np.repeat(np.arange(n), comp[:, k]))
                cols.append(np.searchsorted(cdf[k], rng.random(n_k), side="right").clip(max=n_words - 1))
        part = sp.csr_matrix((np.ones(sum(r.size for r in rows)), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(n, n_words))
        part.sum_duplicates()
        parts.append(part)
    return sp.csr_matrix(sp.vstack(parts)), theta


def load_corpus(name: str, quick: bool):
    if name == "sim50":
        # DirichletDCA itself (the Pyro model) draws this one.
        model = latentfs.DirichletDCA(50, alpha=0.1, gamma=0.01)
        n_docs = 600 if quick else 2000
        lengths = 1 + np.random.default_rng(1).poisson(149, size=n_docs)
        sim = model.simulate(n_documents=n_docs, n_features=5000, doc_length=lengths, seed=0)
        return sp.csr_matrix(sim["counts"]), sim["topic_word"], "DirichletDCA(50, α=0.1, γ=0.01) via model.simulate"
    if name == "reuters":
        import lda.datasets

        return sp.csr_matrix(lda.datasets.load_reuters()), None, "lda.datasets.load_reuters() (395 × 4258)"
    if name == "news20":
        n_docs, n_words = (2000, 20000) if quick else (11000, 60000)
        X, theta = simulate_dm(n_docs, n_words, 50, 218, 0.1, 0.01, seed=2)
        return X, theta, f"DM simulated, K_true=50, α=0.1, γ=0.01, {n_docs} docs × {n_words} words, mean length 218"
    if name == "sim20m":
        n_docs, n_words = (5000, 20000) if quick else (100_000, 50_000)
        X, theta = simulate_dm_chunked(n_docs, n_words, 50, 200, 0.1, 0.01, seed=3)
        return X, theta, (f"DM simulated in chunks, K_true=50, α=0.1, γ=0.01, {n_docs} docs × {n_words} words, "
                          "mean length 200")
    raise SystemExit(f"unknown corpus {name!r}")


def train_test(X: sp.csr_matrix, seed: int = 0):
    X = X[np.asarray(X.sum(1)).ravel() > 0]
    rng = np.random.default_rng(seed)
    perm = rng.permutation(X.shape[0])
    n_test = max(20, X.shape[0] // 10)
    test, train = X[np.sort(perm[:n_test])], X[np.sort(perm[n_test:])]
    return sp.csr_matrix(train), split_documents(test, 0.5, seed=seed)


def count_mean(counts_kj: np.ndarray, gamma: float) -> np.ndarray:
    c = counts_kj.astype(np.float64) + gamma
    return c / c.sum(1, keepdims=True)


# ----------------------------------------------------------------------------- samplers
class Latentfs:
    name = "latentfs"

    def __init__(self, X, K, alpha, gamma, seed, sweep="sparse"):
        self.name = f"latentfs-{sweep}"
        self.model = latentfs.DirichletDCA(K, alpha=alpha, gamma=gamma)
        data = prepare(X)
        self.corpus = dc.CollapsedCorpus.from_data(data)
        self.hyper = dc._hyper(self.model, X.shape[1])
        self.gen = torch.Generator().manual_seed(seed)
        self.sweep, self.J, self.gamma = sweep, X.shape[1], gamma

    def start(self):
        self.state = dc.collapsed_init(self.model, self.corpus, self.J, self.gen, sweep=self.sweep)

    def advance(self, n):
        for _ in range(n):
            dc.collapsed_step(self.state, self.corpus, self.hyper, self.gen, sweep=self.sweep)

    def topic_word(self):
        return count_mean(self.state.word_counts.T, self.gamma)


class Tomotopy:
    name = "tomotopy"

    def __init__(self, X, K, alpha, gamma, seed):
        import tomotopy as tp

        self.tp, self.X, self.K, self.alpha, self.gamma, self.seed = tp, X, K, alpha, gamma, seed

    def start(self):
        tp, X = self.tp, self.X
        m = tp.LDAModel(k=self.K, alpha=self.alpha, eta=self.gamma, seed=self.seed)
        m.optim_interval = 0  # keep α fixed, as the other samplers do
        m.burn_in = 0
        for i in range(X.shape[0]):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            m.add_doc(np.repeat(np.array([f"w{j}" for j in X.indices[lo:hi]]), X.data[lo:hi].astype(int)).tolist())
        m.train(0, workers=1, parallel=tp.ParallelScheme.NONE)  # initialises the assignments
        self.m = m

    def advance(self, n):
        self.m.train(n, workers=1, parallel=self.tp.ParallelScheme.NONE)

    def topic_word(self):
        cols = np.array([int(w[1:]) for w in self.m.used_vocabs])
        counts = np.zeros((self.K, self.X.shape[1]))
        for k in range(self.K):
            counts[k, cols] = np.asarray(self.m.get_topic_word_dist(k, normalize=False), np.float64) - self.gamma
        return count_mean(np.maximum(counts.round(), 0), self.gamma)


class LdaPackage:
    name = "lda"

    def __init__(self, X, K, alpha, gamma, seed):
        import lda
        import lda.utils

        self.lda, self.X, self.K, self.alpha, self.gamma, self.seed = lda, X.astype(np.int64), K, alpha, gamma, seed

    def start(self):
        # The loop of lda.LDA._fit, driven sweep by sweep (same shuffled random numbers per sweep).
        self.m = self.lda.LDA(self.K, n_iter=1, alpha=self.alpha, eta=self.gamma, random_state=self.seed, refresh=10**9)
        self.rs = self.lda.utils.check_random_state(self.seed)
        self.rands = self.m._rands.copy()
        self.m._initialize(self.X)

    def advance(self, n):
        for _ in range(n):
            self.rs.shuffle(self.rands)
            self.m._sample_topics(self.rands)

    def topic_word(self):
        return count_mean(self.m.nzw_, self.gamma)


def heldout(topic_word, split, alpha):
    observed, held = split
    return completion_loglik(topic_word, fold_in(topic_word, observed, alpha), held)


def run_one(make, seeds, checkpoints, split, alpha, n_tokens, max_sweeps=None):
    """Run one sampler from each seed; average time and held-out per checkpoint over the seeds."""
    runs = []
    for seed in seeds:
        sampler = make(seed)
        t0 = time.process_time()
        sampler.start()
        init_s = time.process_time() - t0
        rows, done, spent = [], 0, 0.0
        for c in checkpoints:
            if max_sweeps is not None and c > max_sweeps:
                break
            t0 = time.process_time()
            sampler.advance(c - done)
            dt = time.process_time() - t0
            spent += dt
            rows.append((c, init_s + spent, dt / (c - done) / n_tokens * 1e9,
                         heldout(sampler.topic_word(), split, alpha)))
            done = c
        runs.append(np.array(rows))
    arr = np.mean(runs, axis=0)  # (checkpoint, [sweeps, time, ns, heldout])
    spread = np.ptp([r[:, 3] for r in runs], axis=0) if len(runs) > 1 else np.zeros(len(arr))
    ns = float(np.median(np.concatenate([r[:, 2] for r in runs])))
    return {"name": sampler.name, "rows": arr, "spread": spread, "ns": ns}


def time_to(result, target):
    """CPU seconds (start included) until the mean held-out curve reaches ``target``, linearly interpolated."""
    t, h = result["rows"][:, 1], result["rows"][:, 3]
    above = np.flatnonzero(h >= target)
    if not above.size:
        return float("nan")
    i = above[0]
    if i == 0:
        return float(t[0])
    return float(t[i - 1] + (target - h[i - 1]) / (h[i] - h[i - 1]) * (t[i] - t[i - 1]))


def maker(cls, train, K, alpha, gamma, **kw):
    """A seed -> sampler factory."""
    return lambda seed: cls(train, K, alpha, gamma, seed, **kw)


def machine_info() -> str:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import lda
    import numba
    import tomotopy

    return (f"{platform.platform()}; CPU {cpu} ({os.cpu_count()} cores, shared); Python {platform.python_version()}; "
            f"numpy {np.__version__}; torch {torch.__version__}; numba {numba.__version__}; "
            f"tomotopy {tomotopy.__version__} (ISA {getattr(tomotopy, 'isa', '?')}); lda {lda.__version__}")


def thread_speed(train, split, K, alpha, gamma, seeds, sweeps=200, chunk=25) -> list[str]:
    """Engine-only: wall ns/token/sweep (median over chunks) and final held-out, n_threads 1 against 2."""
    out = [f"### Threads, engine only: sim50 K={K}, {sweeps} sweeps per run, seeds {list(seeds)}", "",
           "| n_threads | median wall ns/token/sweep | held-out after the sweeps (per seed) | mean | load |",
           "|---|---|---|---|---|"]
    S = int(train.sum())
    res = {}
    for nt in (1, 2):
        for seed in seeds:
            smp = Latentfs(train, K, alpha, gamma, seed)
            smp.start()
            for _ in range(2):  # compile / warm both kernels outside the clock
                dc.collapsed_step(smp.state, smp.corpus, smp.hyper, smp.gen, sweep="sparse", n_threads=nt)
            times = []
            for _ in range(sweeps // chunk):
                t0 = time.perf_counter()
                for _ in range(chunk):
                    dc.collapsed_step(smp.state, smp.corpus, smp.hyper, smp.gen, sweep="sparse", n_threads=nt)
                times.append((time.perf_counter() - t0) / chunk / S * 1e9)
            res.setdefault(nt, []).append((times, heldout(smp.topic_word(), split, alpha), os.getloadavg()[0]))
    for nt, runs in res.items():
        ns = float(np.median(np.concatenate([r[0] for r in runs])))
        helds = [r[1] for r in runs]
        out.append(f"| {nt} | {ns:.1f} | {', '.join(f'{h:.4f}' for h in helds)} | {np.mean(helds):.4f} | "
                   f"{np.mean([r[2] for r in runs]):.1f} |")
    ns1 = float(np.median(np.concatenate([r[0] for r in res[1]])))
    ns2 = float(np.median(np.concatenate([r[0] for r in res[2]])))
    out += ["", f"**2 threads: {ns1 / ns2:.2f}× its own one-thread speed (wall); held-out difference "
            f"{np.mean([r[1] for r in res[2]]) - np.mean([r[1] for r in res[1]]):+.4f} nats/token.**", ""]
    print("\n".join(out), flush=True)
    return out


def main() -> None:
    from bytecode import byte_compile_latentfs  # noqa: PLC0415

    byte_compile_latentfs()  # as an installed package is (benchmarks/bytecode.py)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--corpora", nargs="+", default=["sim50", "reuters", "news20"])
    ap.add_argument("--ks", nargs="+", type=int, default=[20, 50, 200], help="K values for news20")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per sampler (small corpora; 1 on big ones)")
    ap.add_argument("--lda-max-sweeps", type=int, default=50, help="cap the lda package's sweeps on big corpora")
    ap.add_argument("--reference", action="store_true", help="also time the O(K) reference sweep")
    ap.add_argument("--whole", action="store_true", help="fresh-process whole calls on sim50 at --ks (no engine run)")
    ap.add_argument("--cold", action="store_true", help="with --whole: also a call with an empty numba cache")
    ap.add_argument("--whole-threads", action="store_true", help="with --whole: also the call with n_threads=2, and the default call with torch allowed 2 threads "
                    "(chains in threads)")
    ap.add_argument("--whole-seeds", type=int, default=0, help="default whole calls over this many seeds on both "
                    "sides (latentfs and tomotopy seeded alike), on sim50 at --ks")
    ap.add_argument("--whole-corpus", default="sim50", choices=["sim50", "news20", "sim20m"],
                    help="the corpus of --whole, --whole-seeds and --threads (news20: the simulated 2.4M-token, "
                    "60,000-word corpus; sim20m: 20M tokens, 100,000 documents × 50,000 words)")
    ap.add_argument("--threads", action="store_true", help="engine-only n_threads 1 vs 2 on --whole-corpus at --ks")
    ap.add_argument("--out", default=None, help="write the --whole / --threads tables here")
    args = ap.parse_args()
    print(machine_info(), f"; load average {os.getloadavg()}")
    if args.whole or args.threads or args.whole_seeds:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from dca import whole_calls, whole_collapsed_seeds  # noqa: PLC0415

        name = args.whole_corpus
        X, _, desc = load_corpus(name, args.quick)
        train, split = train_test(X)
        lines = [f"{name}: {desc}; train {train.shape[0]} docs, {int(train.sum())} tokens; held-out "
                 f"{split[0].shape[0]} docs", ""]
        for K in args.ks:
            if args.whole:
                pairs = [("latentfs-collapsed", "tomotopy")]
                pairs += ([("latentfs-collapsed-2threads", ""), ("latentfs-collapsed-2cores", "")]
                          if args.whole_threads else [])
                whole_calls(lines, train, split, K, name, pairs, args.cold)
            if args.whole_seeds:
                whole_collapsed_seeds(lines, train, split, K, name, args.whole_seeds)
            if args.threads:
                lines += thread_speed(train, split, K, 0.1, 0.01, range(args.seeds))
        if args.out:
            Path(args.out).write_text("\n".join(lines) + "\n")
        return
    # Compile the numba kernels before timing anything.
    warm = latentfs.DirichletDCA(2, alpha=0.5)
    latentfs.fit(warm, warm.simulate(n_documents=5, n_features=6, doc_length=10, seed=0)["counts"],
                 method="collapsed_gibbs", seed=0, num_warmup=2, num_samples=1, num_chains=1)
    latentfs.fit(warm, warm.simulate(n_documents=5, n_features=6, doc_length=10, seed=0)["counts"],
                 method="collapsed_gibbs", seed=0, num_warmup=2, num_samples=1, num_chains=1, sweep="reference")
    alpha, gamma = 0.1, 0.01
    jobs = []
    for name in args.corpora:
        ks = [50] if name == "sim50" else [20] if name == "reuters" else args.ks
        jobs += [(name, k) for k in ks]
    cache = {}
    with threadpool_limits(1):
        for name, K in jobs:
            if name not in cache:
                cache[name] = load_corpus(name, args.quick)
            X, theta, desc = cache[name]
            train, split = train_test(X)
            S = int(train.sum())
            big = S > 1_000_000
            checkpoints = ([5, 10, 25, 50] if args.quick else
                           [10, 25, 50, 100] if big else [10, 25, 50, 100, 200, 300])
            print(f"\n## {name}, K={K}: {desc}; train {train.shape[0]} docs, {S} tokens; "
                  f"held-out {split[0].shape[0]} docs ({int(split[1].sum())} scored tokens)")
            if theta is not None:
                print(f"true topics (K={theta.shape[0]}): held-out {heldout(theta, split, alpha):.4f}")
            makers = [maker(Latentfs, train, K, alpha, gamma)]
            if args.reference and not big:
                makers.append(maker(Latentfs, train, K, alpha, gamma, sweep="reference"))
            makers += [maker(Tomotopy, train, K, alpha, gamma), maker(LdaPackage, train, K, alpha, gamma)]
            seeds = list(range(1 if (args.quick or big) else args.seeds))
            results = []
            for mk in makers:
                cap = args.lda_max_sweeps if mk(0).name == "lda" and big else None
                results.append(run_one(mk, seeds, checkpoints, split, alpha, S, cap))
            target = min(r["rows"][-1, 3] for r in results if r["rows"][-1, 0] == checkpoints[-1])
            base = {r["name"]: r for r in results}
            print(f"seeds {seeds}; cells: mean held-out per token (nats) at each sweep count; "
                  f"common target = lowest final mean among full-length runs = {target:.4f}")
            print(f"{'sampler':18s} {'ns/tok/sweep':>12s} "
                  + " ".join(f"{'@' + str(c):>9s}" for c in checkpoints) + f" {'spread':>7s} {'t→target s':>10s}")
            for r in results:
                cells = {int(row[0]): row[3] for row in r["rows"]}
                print(f"{r['name']:18s} {r['ns']:12.1f} "
                      + " ".join(f"{cells[c]:9.4f}" if c in cells else f"{'-':>9s}" for c in checkpoints)
                      + f" {r['spread'][-1]:7.4f} {time_to(r, target):10.2f}")
            ours = base["latentfs-sparse"]
            for peer in ("tomotopy", "lda"):
                p = base[peer]
                print(f"ratio {peer}/latentfs: time per sweep {p['ns'] / ours['ns']:.2f}×; time to held-out ≥ "
                      f"{target:.4f}: {time_to(p, target) / time_to(ours, target):.2f}×")


if __name__ == "__main__":
    main()
