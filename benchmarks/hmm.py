"""Gaussian HMM EM: the whole public call of latentfs vs hmmlearn (issue 18, item 1).

Each timing is one call in a fresh Python process, one thread; ``call`` starts the clock after the imports,
``+imports`` starts it before ``import torch`` / ``import hmmlearn`` (the whole default call as a script
sees it, less the interpreter's own start):

* **defaults**: ``latentfs.fit(GaussianHMM(k), X, method="em", lengths=L, n_init=1)`` against
  ``hmmlearn.hmm.GaussianHMM(k, n_iter=1000, tol=...).fit(X, L)``, each with its own k-means start and
  the same stopping rule (hmmlearn's tol is absolute on ℓ, so it is set to latentfs's relative 1e-6 × |ℓ|
  measured on a first run). Both log-likelihoods are printed: the ratio counts only where they agree.
* **same start**: both from the same parameters (latentfs after 2 EM steps from k-means), no covariance
  prior or floor, exactly ``--iters`` iterations; the log-likelihoods must agree to 1e-6 (relative), so
  the ratio is at equal log-likelihood. This is the **engine-only** figure: per-iteration time of the
  forward–backward pass and M-step, with no k-means, restarts or validation in the way.

Medians over repeats (data seed fixed).

    python benchmarks/hmm.py            # 20 sequences of 500 (N = 10000), d = 4, K = 5, 3 repeats
    python benchmarks/hmm.py --quick    # 8 sequences of 250, K = 3
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def simulated(n_seq: int, length: int, d: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Data from the declared model with overlapping states (EM needs tens of steps)."""
    from latentfs.models.hmm import GaussianHMM

    sim = GaussianHMM(k, mean_precision=0.1).simulate(n_seq, length, d, seed=seed)
    return sim["data"], sim["lengths"]


def start_params(X: np.ndarray, lengths: np.ndarray, k: int) -> dict:
    import latentfs
    from latentfs.models.hmm import GaussianHMM

    res = latentfs.fit(GaussianHMM(k), X, lengths=lengths, n_init=1, max_iter=2, warn=False, seed=0)
    return {s: res.mean(s).tolist() for s in ("startprob", "transmat", "means", "covariance")}


def worker(cfg: dict) -> dict:
    """One timed call in this (fresh) process."""
    import warnings

    t_start = time.perf_counter()
    if cfg["which"] == "latentfs":
        import torch

        torch.set_num_threads(1)
        import latentfs
        from latentfs.models.hmm import GaussianHMM
    else:
        import hmmlearn.hmm
    t_imported = time.perf_counter()

    X, lengths = np.load(cfg["data"])["X"], np.load(cfg["data"])["lengths"]
    k = cfg["k"]
    start = cfg.get("start")
    t0 = time.perf_counter()
    if cfg["which"] == "latentfs":
        if start is None:
            res = latentfs.fit(GaussianHMM(k), X, method="em", lengths=lengths, n_init=1, seed=cfg["seed"])
        else:
            res = latentfs.fit(GaussianHMM(k), X, method="em", lengths=lengths, init=start, reg_covar=0.0,
                               max_iter=cfg["iters"], tol=0.0, warn=False)
        elapsed = time.perf_counter() - t0
        ll, n_iter = res.diagnostics["log_likelihood"], res.diagnostics["n_iter"]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if start is None:
                m = hmmlearn.hmm.GaussianHMM(k, n_iter=1000, tol=cfg["abs_tol"], random_state=cfg["seed"])
            else:
                m = hmmlearn.hmm.GaussianHMM(k, init_params="", n_iter=cfg["iters"], tol=-np.inf,
                                             covars_prior=0.0, min_covar=0.0)
                m.startprob_, m.transmat_ = np.array(start["startprob"]), np.array(start["transmat"])
                m.means_, m.covars_ = np.array(start["means"]), np.array(start["covariance"])
            m.fit(X, lengths)
            elapsed = time.perf_counter() - t0
            ll, n_iter = float(m.score(X, lengths)), int(m.monitor_.iter)
    return {"seconds": elapsed, "with_imports": elapsed + (t_imported - t_start), "log_likelihood": float(ll),
            "n_iter": int(n_iter)}


def run_fresh(cfg: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", json.dumps(cfg)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from bytecode import byte_compile_latentfs  # noqa: PLC0415

    byte_compile_latentfs()  # as an installed package is (benchmarks/bytecode.py)
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--worker")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    size = dict(n_seq=8, length=250, d=2, k=3) if args.quick else dict(n_seq=20, length=500, d=4, k=5)
    X, lengths = simulated(size["n_seq"], size["length"], size["d"], size["k"], 0)
    import tempfile

    data_file = os.path.join(tempfile.mkdtemp(), "hmm_data.npz")
    np.savez(data_file, X=X, lengths=lengths)
    base = dict(size, data=data_file)
    print(f"CPU: {cpu_model()}; 1 thread; N = {X.shape[0]} in {len(lengths)} sequences, d = {size['d']}, "
          f"K = {size['k']}; median of {args.repeats} fresh processes")
    first = run_fresh(dict(base, which="latentfs", seed=0))
    abs_tol = 1e-6 * abs(first["log_likelihood"])
    rows = {}
    for which in ("latentfs", "hmmlearn"):
        runs = [run_fresh(dict(base, which=which, seed=r, abs_tol=abs_tol)) for r in range(args.repeats)]
        rows[which] = runs
    print("\n[defaults: own k-means start, same stopping rule]")
    for which, runs in rows.items():
        t = np.median([r["seconds"] for r in runs])
        ti = np.median([r["with_imports"] for r in runs])
        print(f"  {which:9s} call {t:8.3f} s   +imports {ti:8.3f} s   "
              f"ll = {[round(r['log_likelihood'], 3) for r in runs]}   iters = {[r['n_iter'] for r in runs]}")
    ratio = np.median([r["seconds"] for r in rows["latentfs"]]) / np.median([r["seconds"] for r in rows["hmmlearn"]])
    print(f"  time ratio latentfs / hmmlearn = {ratio:.2f}")
    start = start_params(X, lengths, size["k"])
    same = {which: [run_fresh(dict(base, which=which, seed=0, start=start, iters=args.iters))
                    for _ in range(args.repeats)] for which in ("latentfs", "hmmlearn")}
    print(f"\n[same start, {args.iters} iterations, no covariance prior]")
    for which, runs in same.items():
        t = np.median([r["seconds"] for r in runs])
        per_iter = np.median([r["seconds"] / r["n_iter"] for r in runs])
        print(f"  {which:9s} {t:8.3f} s   {1e3 * per_iter:7.2f} ms/iteration   "
              f"ll = {runs[0]['log_likelihood']:.8f}   iters = {runs[0]['n_iter']}")
    lf, hl = same["latentfs"][0]["log_likelihood"], same["hmmlearn"][0]["log_likelihood"]
    print(f"  relative ll difference = {abs(lf - hl) / abs(hl):.2e} (must be < 1e-6)")
    ratio = np.median([r["seconds"] / r["n_iter"] for r in same["latentfs"]]) / np.median(
        [r["seconds"] / r["n_iter"] for r in same["hmmlearn"]])
    print(f"  per-iteration time ratio latentfs / hmmlearn (engine only) = {ratio:.2f}")
    print("  (latentfs stops early once ℓ stops changing in float64 (tol=0): iters counts the steps it took)")


if __name__ == "__main__":
    main()
