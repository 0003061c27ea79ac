"""Stepwise (mini-batch) EM vs batch EM vs scikit-learn on a Gaussian mixture (issue 16, item 2).

Data: K = 10 Gaussian clusters with random full covariances in d = 20 (the generator of
``benchmarks/continuous_mixture.py``), n = 50,000 training rows and 10,000 held-out rows from the same
model. Each method fits the training rows; the figure of merit is the held-out log-likelihood per sample
(higher is better), with the wall time of the fit (one thread; imports done before the clock starts):

* batch EM: ``latentfs.fit(GaussianMixture(10), X, method="em", seed=r)`` (defaults);
* stepwise EM: ``latentfs.fit(GaussianMixture(10), X, method="online_em", seed=r, batch_size=B,
  n_passes=P)`` (Cappé & Moulines 2009; τ0 = 1, κ = 0.7);
* scikit-learn: ``sklearn.mixture.GaussianMixture(10, random_state=r).fit(X)`` (defaults).

Medians over the repeats (a different fit seed each), with the range.

    python benchmarks/mixture_online.py             # n=50000, d=20, K=10, 3 repeats
    python benchmarks/mixture_online.py --quick     # n=10000, 1 repeat
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402


def planted_data(n: int, d: int, k: int, seed: int) -> np.ndarray:
    """K Gaussian clusters with random full covariances and overlapping means (as continuous_mixture.py)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 2.0, size=(k, d))
    factors = rng.normal(size=(k, d, d)) / np.sqrt(d)
    z = rng.integers(0, k, n)
    return means[z] + np.einsum("nij,nj->ni", factors[z], rng.normal(size=(n, d)))


def heldout(post, X: np.ndarray) -> float:
    """Mean log-likelihood per row of X at a latentfs result's parameters (the estimator's scorer)."""
    from latentfs.inference.mixture import GaussianMixtureClusterer

    est = GaussianMixtureClusterer(int(post.mean("weights").shape[0]))._adopt(post)
    return float(est.score(X))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    n, d, k = (10_000, 20, 10) if args.quick else (50_000, 20, 10)
    repeats = args.repeats or (1 if args.quick else 3)
    data = planted_data(n + 10_000, d, k, seed=0)
    X, X_test = data[:n], data[n:]

    import sklearn.mixture

    import latentfs
    from latentfs.models.mixture import GaussianMixture

    def batch_em(seed: int) -> float:
        return heldout(latentfs.fit(GaussianMixture(k), X, method="em", seed=seed, warn=False), X_test)

    def stepwise(batch_size: int, n_passes: int):
        def run(seed: int) -> float:
            post = latentfs.fit(GaussianMixture(k), X, method="online_em", seed=seed, batch_size=batch_size,
                                n_passes=n_passes)
            return heldout(post, X_test)
        return run

    def sk(seed: int) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(sklearn.mixture.GaussianMixture(k, random_state=seed).fit(X).score(X_test))

    methods = {
        "batch EM (latentfs, defaults)": batch_em,
        "stepwise EM, B=2000, 1 pass": stepwise(2000, 1),
        "stepwise EM, B=2000, 3 passes": stepwise(2000, 3),
        "stepwise EM, B=5000, 3 passes": stepwise(5000, 3),
        "scikit-learn GaussianMixture": sk,
    }
    print(f"n={n} (train), 10000 (held out), d={d}, K={k}, {repeats} repeat(s), one thread")
    print(f"{'method':34s} {'held-out ll/sample':>28s} {'time s':>18s}")
    for name, fn in methods.items():
        scores, times = [], []
        for r in range(repeats):
            t0 = time.perf_counter()
            scores.append(fn(r))
            times.append(time.perf_counter() - t0)
        s, t = np.array(scores), np.array(times)
        print(f"{name:34s} {np.median(s):10.4f} [{s.min():.4f}, {s.max():.4f}] "
              f"{np.median(t):7.2f} [{t.min():.2f}, {t.max():.2f}]", flush=True)


if __name__ == "__main__":
    main()
