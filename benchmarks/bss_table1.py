"""Paul, Magdon-Ismail & Drineas (AISTATS 2015), Table 1: supervised feature selection on Bhattacharyya's data.

    OMP_NUM_THREADS=1 python benchmarks/bss_table1.py            # the paper's protocol, one data set per k (~70 s CPU)
    OMP_NUM_THREADS=1 python benchmarks/bss_table1.py --quick    # 2 × 5-fold instead of 10 × 10 (~10 s CPU)
    OMP_NUM_THREADS=1 python benchmarks/bss_table1.py --full     # also 10 data sets per k (the paper's "over
                                                                 # 10 different synthetic datasets"; ~12 min CPU)

Protocol (digest randomized_fs.md, B4 and B8; paper §5.1):

* Data (Bhattacharyya, JMLR 2004): n = 200, d = 1000, y = ±1 with probability ½; features j = 1..k are
  ``y · N(−j, 1)`` (class means ∓j), the other d − k are N(0, 1); k ∈ {40, 50}; r₁ ∈ {30, 40}.
* 10-fold cross-validation repeated 10 times (100 training sets of 180 points).
* Supervised mode, every method: fit ``SVC(kernel="linear", C=1)`` (LIBSVM, as in the paper) on the training
  fold, keep its support vectors X^sv (α > 0), select r₁ features from X^sv, "recalibrate" the SVM on
  (X^sv R, y^sv) and predict the test fold from x_test R.
* BSS (Algorithm 1 with the §5.2 rule: the unselected valid candidate of largest norm) and leverage-score
  sampling (r₁ i.i.d. draws from p_i = ‖V_(i)‖²/ℓ, weights 1/sqrt(r₁ p_i)) are run on V = the right singular
  vectors of X^sv, ℓ = rank(X^sv) = #SV; the selector used is ``SVMFeatureSelector(mode="supervised")``.
  Leverage and uniform selection are repeated 5 times per training set (the paper's protocol).
* Baselines on the same X^sv: RFE (``sklearn.feature_selection.RFE`` with the same SVM, 5% of the features
  removed per round), RRQR (the first r₁ pivots of ``scipy.linalg.qr(X^sv, pivoting=True)``), LPSVM
  (stand-in: ``LinearSVC(penalty="l1")``, C = 1; its feature count is its own) and uniform random picks.
* "Most frequently selected features" (Table 1): the features counted over all selections (100 training sets,
  × 5 repetitions for the randomized methods), the five largest counts, 1-based indices as in the paper, ties
  broken by the larger index.

Not in the paper (marked +): top-r₁ leverage (deterministic), and BSS / leverage on the top singular direction
of X^sv only (``rank=1``). The real data sets of the paper (TechTC-300, RCV1) are downloads, not bundled with
scikit-learn nor in ``load_rdataset``: only the synthetic table is reproduced here.

Printed per setting: out-of-sample error (%), mean ± s.d. over the splits (the paper: 0 for every method),
relevant features among the distinct features picked per training set, the five most frequent features with
their counts next to the paper's list, and the count of the most frequent noise feature.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
import scipy.linalg as sla
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import RFE
from sklearn.model_selection import RepeatedKFold
from sklearn.svm import SVC, LinearSVC

from latentfs.select.bss import SVMFeatureSelector
from latentfs.select.leverage import leverage_scores, right_singular_vectors

# Paul et al. (2015), Table 1: five most frequently selected features, one synthetic data set, 1-based.
PAPER = {
    ("BSS", 30, 40): [40, 39, 34, 36, 37], ("BSS", 30, 50): [50, 49, 48, 47, 44],
    ("BSS", 40, 40): [40, 39, 34, 37, 36], ("BSS", 40, 50): [50, 49, 48, 47, 44],
    ("Lvg", 30, 40): [40, 39, 37, 36, 34], ("Lvg", 30, 50): [50, 49, 48, 47, 46],
    ("Lvg", 40, 40): [40, 39, 37, 31, 32], ("Lvg", 40, 50): [50, 49, 48, 31, 47],
    ("RFE", 30, 40): [40, 39, 38, 37, 36], ("RFE", 30, 50): [50, 49, 48, 47, 46],
    ("RFE", 40, 40): [40, 39, 38, 37, 36], ("RFE", 40, 50): [50, 49, 48, 47, 46],
    ("LPSVM", 30, 40): [40, 39, 38, 37, 34], ("LPSVM", 30, 50): [50, 49, 48, 43, 40],
    ("LPSVM", 40, 40): [40, 39, 38, 37, 34], ("LPSVM", 40, 50): [50, 49, 48, 43, 40],
    ("RRQR", 30, 40): [40, 30, 29, 28, 27], ("RRQR", 30, 50): [50, 30, 29, 28, 27],
    ("RRQR", 40, 40): [40, 39, 38, 37, 36], ("RRQR", 40, 50): [50, 40, 39, 38, 37],
}
C = 1.0
N, D = 200, 1000
REPS = 5  # repetitions of the randomized selectors per training set


def bhattacharyya(rng: np.random.Generator, n: int = N, d: int = D, k: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """x_ij = y_i N(−j, 1) for j = 1..k, N(0, 1) otherwise (Bhattacharyya 2004; Paul et al. §5.1)."""
    y = rng.choice([-1, 1], size=n)
    X = rng.normal(size=(n, d))
    X[:, :k] = y[:, None] * rng.normal(-np.arange(1, k + 1), 1.0, size=(n, k))
    return X, y


def svm() -> SVC:
    return SVC(kernel="linear", C=C)


# A method maps (X_train, y_train, sv, r, seed) to (indices, weights) of the selected columns.
Pick = tuple[np.ndarray, np.ndarray]


def _selector(method: str, rank: int | None = None) -> Callable[..., Pick]:
    def pick(X: np.ndarray, y: np.ndarray, sv: np.ndarray, r: int, rep: int) -> Pick:
        sel = SVMFeatureSelector(r, method=method, mode="supervised", C=C, rank=rank, seed=rep).fit(X, y)
        if not np.array_equal(sel.support_vector_indices_, sv):
            raise AssertionError("the selector's support vectors differ from the benchmark's SVM")
        return sel.get_support(indices=True), sel.scale_
    return pick


def _top_leverage(X: np.ndarray, y: np.ndarray, sv: np.ndarray, r: int, rep: int) -> Pick:
    V, _ = right_singular_vectors(X[sv])
    return np.sort(np.argsort(-leverage_scores(V), kind="stable")[:r]), np.ones(r)


def _rfe(X: np.ndarray, y: np.ndarray, sv: np.ndarray, r: int, rep: int) -> Pick:
    f = RFE(svm(), n_features_to_select=r, step=0.05).fit(X[sv], y[sv])
    return np.flatnonzero(f.support_), np.ones(r)


def _rrqr(X: np.ndarray, y: np.ndarray, sv: np.ndarray, r: int, rep: int) -> Pick:
    _, piv = sla.qr(X[sv], mode="r", pivoting=True)
    return np.sort(piv[:r]), np.ones(r)


def _lpsvm(X: np.ndarray, y: np.ndarray, sv: np.ndarray, r: int, rep: int) -> Pick:
    with warnings.catch_warnings():  # liblinear's L1 solver on ~14 separable points rarely meets its tolerance
        warnings.simplefilter("ignore", ConvergenceWarning)
        w = LinearSVC(penalty="l1", dual=False, C=C, max_iter=20000).fit(X[sv], y[sv]).coef_.ravel()
    idx = np.flatnonzero(np.abs(w) > 1e-10)
    return idx, np.ones(idx.size)


def _uniform(X: np.ndarray, y: np.ndarray, sv: np.ndarray, r: int, rep: int) -> Pick:
    rng = np.random.default_rng(rep)
    return np.sort(rng.choice(X.shape[1], size=r, replace=False)), np.ones(r)


METHODS: dict[str, tuple[Callable[..., Pick], int]] = {  # name: (method, repetitions)
    "BSS": (_selector("bss"), 1),
    "Lvg": (_selector("leverage"), REPS),
    "RFE": (_rfe, 1),
    "LPSVM": (_lpsvm, 1),
    "RRQR": (_rrqr, 1),
    "Uniform": (_uniform, REPS),
    "+Lvg top-r": (_top_leverage, 1),
    "+BSS rank=1": (_selector("bss", rank=1), 1),
    "+Lvg rank=1": (_selector("leverage", rank=1), REPS),
}


class Tally:
    """Errors, relevant counts and selection frequencies of one method in one setting."""

    def __init__(self, d: int) -> None:
        self.err: list[float] = []
        self.n_rel: list[int] = []
        self.n_sel: list[int] = []
        self.count = np.zeros(d, dtype=np.int64)
        self.n_selections = 0

    def add(self, err: float, idx: np.ndarray, k: int) -> None:
        u = np.unique(idx)
        self.err.append(err)
        self.n_rel.append(int(np.sum(u < k)))
        self.n_sel.append(int(u.size))
        self.count[u] += 1
        self.n_selections += 1

    def top5(self) -> list[int]:
        order = np.lexsort((-np.arange(self.count.size), -self.count))  # count desc, then larger index
        return [int(i) for i in order[:5]]


def run_dataset(X: np.ndarray, y: np.ndarray, k: int, rs: tuple[int, ...], n_splits: int, n_repeats: int,
                seed: int, tallies: dict[tuple[str, int], Tally], diag: dict[str, list[float]]) -> None:
    cv = RepeatedKFold(n_splits=n_splits, n_repeats=n_repeats, random_state=seed)
    for split, (tr, te) in enumerate(cv.split(X)):
        Xtr, ytr, Xte, yte = X[tr], y[tr], X[te], y[te]
        # labels coded as the selector codes them (first class = +1), so that both find the same SVs
        sv = np.sort(svm().fit(Xtr, np.where(ytr == ytr.min(), 1, -1)).support_)
        Xsv, ysv = Xtr[sv], ytr[sv]
        V, s = right_singular_vectors(Xsv)
        p = leverage_scores(V)
        diag["n_sv"].append(sv.size)
        diag["s1_over_s2"].append(float(s[0] / s[1]))
        diag["lev_mass_relevant"].append(float(p[:k].sum()))
        diag["v1_mass_relevant"].append(float(np.sum(V[:k, 0] ** 2)))
        diag["v2on_mass_relevant"].append(float(np.mean(np.sum(V[:k, 1:] ** 2, axis=0))))
        for r in rs:
            for name, (fn, reps) in METHODS.items():
                for rep in range(reps):
                    # fresh randomness for every draw: (data set, split, repetition) seeds the selector
                    idx, w = fn(Xtr, ytr, sv, r, (seed * 1000 + split) * REPS + rep)
                    clf = svm().fit(Xsv[:, idx] * w, ysv)  # recalibrate on the support vectors (§4)
                    err = float(np.mean(clf.predict(Xte[:, idx] * w) != yte))
                    tallies[(name, r)].add(err, idx, k)


def report(k: int, rs: tuple[int, ...], tallies: dict[tuple[str, int], Tally], diag: dict[str, list[float]],
           n_data: int) -> str:
    lines = [f"\n### k = {k} relevant features (d = {D}, n = {N}; {n_data} data set(s); "
             f"{tallies[('BSS', rs[0])].n_selections} training sets)",
             f"SVs per training set: {np.mean(diag['n_sv']):.1f} ± {np.std(diag['n_sv']):.1f} (ℓ = rank(X^sv) = #SV); "
             f"σ₁/σ₂ of X^sv: {np.mean(diag['s1_over_s2']):.1f}; share of the leverage on the k relevant features: "
             f"{np.mean(diag['lev_mass_relevant']):.3f} (uniform would be {k / D:.3f}); "
             f"share of v₁ on them {np.mean(diag['v1_mass_relevant']):.3f}, of v₂..v_ℓ "
             f"{np.mean(diag['v2on_mass_relevant']):.3f}",
             "",
             "| method | r₁ | error % (paper: 0) | relevant / distinct picked per training set | "
             "top-5 ours (count) | top-5 paper | top-5 relevant | most frequent noise feature (count) |",
             "|---|---|---|---|---|---|---|---|"]
    for name in METHODS:
        for r in rs:
            t = tallies[(name, r)]
            top = t.top5()
            noise = np.flatnonzero(np.arange(t.count.size) >= k)
            worst = int(noise[np.argmax(t.count[noise])])
            paper = PAPER.get((name, r, k))
            lines.append(
                f"| {name} | {r} | {100 * np.mean(t.err):.2f} ± {100 * np.std(t.err):.2f} | "
                f"{np.mean(t.n_rel):.1f} / {np.mean(t.n_sel):.1f} | "
                + ", ".join(f"{i + 1} ({t.count[i]})" for i in top)
                + f" | {', '.join(map(str, paper)) if paper else '—'} | {sum(i < k for i in top)}/5 | "
                f"{worst + 1} ({t.count[worst]} of {t.n_selections}) |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    quick, full = "--quick" in argv, "--full" in argv
    n_splits, n_repeats = (5, 2) if quick else (10, 10)
    n_data = 10 if full else 1
    rs = (30, 40)
    t0 = time.perf_counter()
    print(f"Paul et al. Table 1 protocol: {n_repeats} × {n_splits}-fold CV, SVC(kernel='linear', C={C}), "
          f"r₁ ∈ {rs}, {REPS} repetitions of the randomized selectors; + marks rows not in the paper.")
    for k in (40, 50):
        tallies = {(m, r): Tally(D) for m in METHODS for r in rs}
        diag: dict[str, list[float]] = {key: [] for key in ("n_sv", "s1_over_s2", "lev_mass_relevant",
                                                              "v1_mass_relevant", "v2on_mass_relevant")}
        for ds in range(n_data):
            X, y = bhattacharyya(np.random.default_rng([k, ds]), k=k)
            run_dataset(X, y, k, rs, n_splits, n_repeats, ds, tallies, diag)
        print(report(k, rs, tallies, diag, n_data), flush=True)
        print(f"[{time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
