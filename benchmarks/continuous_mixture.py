"""Gaussian mixture EM, full covariances: latentfs vs scikit-learn, time to the same log-likelihood.

Both start from the same parameters (the M-step of one set of random responsibilities, passed to
scikit-learn as weights_init / means_init / precisions_init) and run the same EM iteration, so after the
same number of steps both hold the same log-likelihood. scikit-learn runs to its own convergence rule
(tol on the per-sample bound); latentfs then runs exactly as many iterations, and the table checks the two
final log-likelihoods agree (relative difference). One thread everywhere; medians of repeats.

    python benchmarks/continuous_mixture.py            # n=20000, d=20, K=10, 3 repeats
    python benchmarks/continuous_mixture.py --quick    # n=4000, 1 repeat
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

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


def planted_data(n: int, d: int, k: int, seed: int) -> np.ndarray:
    """K Gaussian clusters with random full covariances and overlapping means (EM needs tens of steps)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 2.0, size=(k, d))
    factors = rng.normal(size=(k, d, d)) / np.sqrt(d)
    z = rng.integers(0, k, n)
    return means[z] + np.einsum("nij,nj->ni", factors[z], rng.normal(size=(n, d)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--sk-tol", type=float, default=1e-4, help="scikit-learn's tol (sets the iteration count)")
    args = parser.parse_args()
    n, d, k = (4000, 20, 10) if args.quick else (20000, 20, 10)
    repeats = args.repeats or (1 if args.quick else 3)

    import sklearn
    from sklearn.mixture import GaussianMixture as SkGM

    import latentfs
    from latentfs.inference.mixture.em import family_for
    from latentfs.models.mixture import GaussianMixture

    X = planted_data(n, d, k, seed=0)
    model = GaussianMixture(k, covariance_type="full")
    rows = []
    with threadpool_limits(1):
        for rep in range(repeats):
            resp = np.random.default_rng(100 + rep).dirichlet(np.ones(k), size=n)
            fam = family_for(model, X)
            start = fam.export(fam.m_step(torch.as_tensor(resp), 1e-6))
            sk = SkGM(
                k,
                covariance_type="full",
                tol=args.sk_tol,
                max_iter=1000,
                reg_covar=1e-6,
                init_params="random",
                weights_init=start["weights"],
                means_init=start["means"],
                precisions_init=start["precision"],
                random_state=0,
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0, c0 = time.perf_counter(), time.process_time()
                sk.fit(X)
                t_sk, c_sk = time.perf_counter() - t0, time.process_time() - c0
            ll_sk = sk.score(X) * n
            t0, c0 = time.perf_counter(), time.process_time()
            res = latentfs.fit(
                model,
                X,
                method="em",
                init={"responsibilities": resp},
                max_iter=int(sk.n_iter_),
                tol=0.0,
                warn=False,
                progress=False,
            )
            t_ours, c_ours = time.perf_counter() - t0, time.process_time() - c0
            ll_ours = res.diagnostics["log_likelihood"]
            rows.append((int(sk.n_iter_), c_sk, c_ours, ll_sk, ll_ours, t_sk, t_ours))
    arr = np.array(rows)
    med = np.median(arr, axis=0)
    print(
        f"GaussianMixture EM, full covariance, n={n}, d={d}, K={k}; {repeats} repeat(s), 1 thread, "
        f"scikit-learn tol={args.sk_tol:g}"
    )
    print(f"platform: {platform.platform()}; CPU: {cpu_model()}")
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}, "
        f"scikit-learn {sklearn.__version__}"
    )
    print()
    print("CPU seconds (process time; one thread, so robust to other jobs on the machine); wall seconds after '/'.")
    print()
    print("| repeat | EM iterations | scikit-learn s | latentfs s | speed-up (CPU) | log-lik (sklearn) | rel. diff |")
    print("|---|---|---|---|---|---|---|")
    for i, (it, ts, to, ls, lo, ws, wo) in enumerate(rows):
        print(
            f"| {i} | {int(it)} | {ts:.3f} / {ws:.3f} | {to:.3f} / {wo:.3f} | {ts / to:.2f}x | {ls:.6f} | "
            f"{abs(lo - ls) / abs(ls):.1e} |"
        )
    print(
        f"| median | {int(med[0])} | {med[1]:.3f} / {med[5]:.3f} | {med[2]:.3f} / {med[6]:.3f} | "
        f"{np.median(arr[:, 1] / arr[:, 2]):.2f}x | | |"
    )
    per_it = arr[:, 1:3] / arr[:, :1]
    print(
        f"\nCPU per iteration (median, fixed costs included): scikit-learn {np.median(per_it[:, 0]) * 1e3:.1f} ms, "
        f"latentfs {np.median(per_it[:, 1]) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
