"""KL-NMF in latentfs (``method="nmf_kl"``) against scikit-learn's ``NMF(beta_loss="kullback-leibler", solver="mu")``.

Time to equal objective, one thread, same data, same start:

1. scikit-learn runs ``N`` multiplicative-update iterations from a common start (W0, H0) (``init="custom"``,
   ``tol=0``); its final generalised KL divergence D(X ‖ W H) is the target.
2. latentfs's engine is stepped from the same start until its divergence is ≤ the target; that number of
   iterations is then timed through the public API, ``latentfs.fit(GammaPoissonDCA(K), X, method="nmf_kl",
   init=(W0, H0), max_iter=n, tol=0)`` (which includes validation, the sparse set-up and the result object).

Both schedules are timed: ``alternating`` (scikit-learn's order; identical products W H iteration by iteration)
and ``em`` (both factors from the same ratios: the chapter's rewrite rules / PLSI EM).

Usage: ``python benchmarks/dca_em.py [--quick]``. Results: ``benchmarks/results/dca_em.md``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import latentfs  # noqa: E402
from latentfs.inference.dca.common import prepare  # noqa: E402
from latentfs.inference.dca.em import PointState, kl_divergence, nmf_step  # noqa: E402

torch.set_num_threads(1)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def datasets(quick: bool) -> dict[str, sp.csr_matrix]:
    import lda.datasets

    out = {"Reuters (lda), 395 × 4258": sp.csr_matrix(lda.datasets.load_reuters().astype(np.float64))}
    n_docs, n_words = (500, 2000) if quick else (2000, 5000)
    model = latentfs.GammaPoissonDCA(20, alpha=0.1, beta=0.1 / 15, gamma=0.05)  # mean length Σα/β = 300
    sim = model.simulate(n_docs, n_words, seed=0)["counts"]
    sim = sim[sim.sum(1) > 0].astype(np.float64)
    out[f"GaP simulated, {sim.shape[0]} × {n_words}, K=20"] = sp.csr_matrix(sim)
    return out


def sklearn_kl(X: sp.csr_matrix, W0: np.ndarray, H0: np.ndarray, n_iter: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, D(X ‖ W H)) of scikit-learn's mu solver for ``n_iter`` iterations."""
    from sklearn.decomposition import NMF
    from sklearn.exceptions import ConvergenceWarning

    est = NMF(W0.shape[1], beta_loss="kullback-leibler", solver="mu", init="custom", max_iter=n_iter, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0, c0 = time.perf_counter(), time.process_time()
        est.fit_transform(X, W=W0.copy(), H=H0.copy())
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return seconds, cpu, 0.5 * est.reconstruction_err_**2  # scikit-learn reports sqrt(2 D)


def iterations_to_reach(X: sp.csr_matrix, W0: np.ndarray, H0: np.ndarray, target: float, schedule: str,
                        limit: int) -> tuple[int, float]:
    data = prepare(X)
    scale = H0.sum(1)
    state = PointState(torch.as_tensor(W0 * scale), torch.as_tensor(H0 / scale[:, None]))
    for it in range(limit + 1):
        kl = kl_divergence(data, state.doc_latent, state.topic_word)
        if kl <= target:
            return it, kl
        state, _ = nmf_step(data, state, schedule)
    return limit, kl


def latentfs_kl(X: sp.csr_matrix, W0: np.ndarray, H0: np.ndarray, n_iter: int,
                schedule: str) -> tuple[float, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    result = latentfs.fit(latentfs.GammaPoissonDCA(W0.shape[1]), X, method="nmf_kl", schedule=schedule,
                          init=(W0, H0), max_iter=max(n_iter, 1), tol=0.0, warn=False)
    return time.perf_counter() - t0, time.process_time() - c0, result.diagnostics["kl_divergence"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller corpus, fewer iterations and repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 5
    n_iter = 50 if args.quick else 200
    K = 20
    import sklearn

    print(f"platform: {platform.platform()}; CPU: {cpu_model()}; python {platform.python_version()}")
    print(f"torch {torch.__version__}, numpy {np.__version__}, scikit-learn {sklearn.__version__}; 1 thread; "
          f"medians of {repeats} repeats; K = {K}; scikit-learn runs {n_iter} iterations")
    rows = []
    with threadpool_limits(1):
        for name, X in datasets(args.quick).items():
            rng = np.random.default_rng(0)
            W0 = rng.uniform(0.5, 1.5, size=(X.shape[0], K)) * np.asarray(X.sum(1)) / K
            H0 = rng.dirichlet(np.ones(X.shape[1]), size=K)
            sk = [sklearn_kl(X, W0, H0, n_iter) for _ in range(repeats)]
            sk_time, sk_cpu = float(np.median([s[0] for s in sk])), float(np.median([s[1] for s in sk]))
            target = sk[0][2]
            for schedule in ("alternating", "em"):
                n_ours, _ = iterations_to_reach(X, W0, H0, target, schedule, limit=20 * n_iter)
                ours = [latentfs_kl(X, W0, H0, n_ours, schedule) for _ in range(repeats)]
                ours_time = float(np.median([o[0] for o in ours]))
                ours_cpu, ours_kl = float(np.median([o[1] for o in ours])), ours[0][2]
                rows.append((name, X.nnz, schedule, n_iter, sk_time, sk_cpu, target, n_ours, ours_time, ours_cpu,
                             ours_kl))
    print("| corpus | nnz | latentfs schedule | sklearn iters | sklearn wall s | sklearn CPU s | sklearn D | "
          "latentfs iters | latentfs wall s | latentfs CPU s | latentfs D | ratio sklearn/latentfs (wall) | "
          "(CPU) |")
    print("|" + "---|" * 13)
    for name, nnz, schedule, n_sk, t_sk, c_sk, d_sk, n_us, t_us, c_us, d_us in rows:
        print(f"| {name} | {nnz} | {schedule} | {n_sk} | {t_sk:.3f} | {c_sk:.3f} | {d_sk:.1f} | {n_us} | "
              f"{t_us:.3f} | {c_us:.3f} | {d_us:.1f} | {t_sk / t_us:.2f} | {c_sk / c_us:.2f} |")


if __name__ == "__main__":
    main()
