"""Mladenić's text feature selection experiment (issue 17, item 5) on the offline Reuters sample.

    OMP_NUM_THREADS=1 python benchmarks/text_selection.py [--quick] [--estimator multinomial|laplace]
                                                          [--drop-label-words] [--no-search]

Mladenić (2006, LNCS 3940, §4; digest book_part2 §2.4–2.5) scores words one at a time, keeps the top ones and
trains multinomial naive Bayes (Laplace estimates) for one category against the rest, reporting precision,
recall and F2 by 5-fold cross-validation at the best number of kept words (Table 1: odds ratio best,
information gain among the worst with random; Fig. 5: every measure but random peaks near "vector size" 1,
i.e. as many words as the positive documents' vocabulary, and fewer words beat all words).

Data: ``latentfs.datasets.load_reuters()`` (395 Reuters news stories of 1996–97 shipped with the ``lda``
package, 4,258 words). It has no category labels, so the categories are defined from the *titles* (which are
not part of the counts) by keyword patterns fixed before any result was seen (``CATEGORIES`` below); each
is a binary task "title matches vs the rest", 4–13% positive — the imbalance the chapter stresses. The
keywords also occur in the story bodies, so a category's own name is a strong word; ``--drop-label-words``
removes every vocabulary word that matches the category's pattern, to see the measures without it.

Estimator: every measure estimates P(F|C) and P(F) with ``--estimator`` (default ``multinomial``:
add-one token frequencies, the naive-Bayes event model; with the plug-in Bernoulli joint MutualInfoTxt is
≤ 0 for every word and ranks uninformative words first, see ``latentfs.select.scores``).

Part 2 runs the chapter's search strategies (forward, backward, forward/backward stepwise, random mutation)
as wrappers judged by inner 3-fold F2 of naive Bayes over the 12 best odds-ratio words of each outer training
fold, on the first two categories, and tests the chosen subset on the outer fold (nested: the search never
sees the test fold); "filter_top12" keeps all 12. Wrapper search over the whole vocabulary is out of reach
(each step costs one cross-validation per candidate word). Prints Markdown tables to stdout. A few minutes
on one core (``--quick``: 3 categories in the filter part, no stepwise searches).
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

import numpy as np
from sklearn.metrics import fbeta_score, precision_score, recall_score
from sklearn.model_selection import StratifiedKFold
from sklearn.naive_bayes import MultinomialNB

from latentfs.datasets import load_reuters
from latentfs.select.text_search import TextSearchSelector, naive_bayes_curve

CATEGORIES = {
    "pope": r"\bpope|vatican|papal",
    "royals": r"\bcharles\b|diana|camilla|royal|queen|prince|princess|\bking\b",
    "obituary": r"\bdies\b|\bdead\b|death|funeral|mourn|buried|burial",
    "church": r"church|bishop|cardinal|archbishop|catholic",
    "teresa": r"teresa",
    "harriman": r"harriman",
}
"""Category → case-insensitive pattern matched against the story's title."""

MEASURES = ("odds_ratio", "term_freq", "mutual_info_txt", "info_gain", "cross_entropy_txt", "random", "bns", "chi2")
"""The chapter's Table 1 measures, then two it does not tabulate (Forman's BNS, χ²)."""

POOL = 12
"""Candidate words of the wrapper searches (the best by odds ratio on the training fold)."""

VECTOR_SIZES = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, np.inf)
"""Kept words as a multiple of the positive training vocabulary (inf = all 4,258 words)."""


def labels(titles: tuple[str, ...], pattern: str) -> np.ndarray:
    """1 where the title matches ``pattern`` (case-insensitive), else 0."""
    rx = re.compile(pattern, re.IGNORECASE)
    return np.array([1 if rx.search(t) else 0 for t in titles])


def filter_table(counts: Any, vocab: tuple[str, ...], titles: tuple[str, ...], cats: list[str], estimator: str,
                 drop: bool) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, np.ndarray]]:
    """Best-F2 rows per category and measure, and the F2 curve (mean over categories) per measure."""
    best: dict[str, dict[str, dict[str, float]]] = {}
    curves: dict[str, list[np.ndarray]] = {m: [] for m in MEASURES}
    for cat in cats:
        y = labels(titles, CATEGORIES[cat])
        X = counts
        if drop:
            rx = re.compile(CATEGORIES[cat], re.IGNORECASE)
            keep = np.array([not rx.search(w) for w in vocab])
            X = counts[:, np.flatnonzero(keep)]
        best[cat] = {}
        for m in MEASURES:
            curve = naive_bayes_curve(X, y, m, estimator=estimator, vector_sizes=VECTOR_SIZES, positive_class=1,
                                      seed=0)
            best[cat][m] = curve.best()
            curves[m].append(curve.mean())
    return best, {m: np.mean(v, axis=0) for m, v in curves.items()}


def search_table(counts: Any, titles: tuple[str, ...], cats: list[str], strategies: list[str],
                 estimator: str) -> dict[str, dict[str, float]]:
    """Outer 5-fold test F2/P/R of each search strategy (inner CV inside the selector), averaged over categories."""
    rows: dict[str, dict[str, list[float]]] = {}
    for cat in cats:
        y = labels(titles, CATEGORIES[cat])
        folds = StratifiedKFold(5, shuffle=True, random_state=0).split(np.zeros(y.size), y)
        for train, test in folds:
            for strategy in strategies:
                t0 = time.perf_counter()
                if strategy.startswith("filter"):
                    cols = _top_odds(counts[train], y[train], estimator, POOL)
                else:
                    sel = TextSearchSelector(strategy, estimator=estimator, candidates=POOL, n_folds=3, max_iter=60,
                                             seed=0)
                    cols = sel.fit(counts[train], y[train]).get_support(indices=True)
                secs = time.perf_counter() - t0
                nb = MultinomialNB(alpha=1.0).fit(counts[train][:, cols], y[train])
                pred = nb.predict(counts[test][:, cols])
                r = rows.setdefault(strategy, {"f2": [], "precision": [], "recall": [], "size": [], "seconds": []})
                r["f2"].append(fbeta_score(y[test], pred, beta=2, zero_division=1.0))
                r["precision"].append(precision_score(y[test], pred, zero_division=1.0))
                r["recall"].append(recall_score(y[test], pred, zero_division=1.0))
                r["size"].append(len(cols))
                r["seconds"].append(secs)
    out = {}
    for s, r in rows.items():
        f2 = np.array(r["f2"])
        out[s] = {k: float(np.mean(v)) for k, v in r.items()}
        out[s]["f2_se"] = float(f2.std(ddof=1) / np.sqrt(f2.size))
    return out


def _top_odds(X: Any, y: np.ndarray, estimator: str, k: int) -> np.ndarray:
    from latentfs.select.scores import text_feature_scores

    return text_feature_scores(X, y, "odds_ratio", estimator=estimator, positive_class=1).ranking()[:k]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--estimator", default="multinomial", choices=["multinomial", "laplace", "bernoulli"])
    ap.add_argument("--drop-label-words", action="store_true")
    ap.add_argument("--no-search", action="store_true")
    args = ap.parse_args()
    corpus = load_reuters()
    counts, vocab, titles = corpus.counts.tocsr(), corpus.vocabulary, corpus.titles
    cats = list(CATEGORIES)[:3] if args.quick else list(CATEGORIES)
    t0 = time.perf_counter()
    best, curves = filter_table(counts, vocab, titles, cats, args.estimator, args.drop_label_words)
    print(f"## Reuters sample, {len(cats)} title-keyword categories (one vs rest), multinomial NB, 5-fold CV; "
          f"estimator={args.estimator}, label words {'dropped' if args.drop_label_words else 'kept'}\n")
    print("Positives: " + ", ".join(f"{c} {int(labels(titles, CATEGORIES[c]).sum())}" for c in cats) + " of 395.\n")
    print("### F2 at the best vector size (mean ± s.e. over folds), P and R there; measures by mean F2\n")
    print("| measure | " + " | ".join(cats) + " | mean F2 | mean P | mean R | best vector sizes |")
    print("|---|" + "---|" * (len(cats) + 4))
    order = sorted(MEASURES, key=lambda m: -np.mean([best[c][m]["f_beta"] for c in cats]))
    for m in order:
        cells = [f"{best[c][m]['f_beta']:.2f} ± {best[c][m]['f_beta_se']:.2f}" for c in cats]
        mf = np.mean([best[c][m]["f_beta"] for c in cats])
        mp = np.mean([best[c][m]["precision"] for c in cats])
        mr = np.mean([best[c][m]["recall"] for c in cats])
        sizes = ",".join(f"{best[c][m]['grid']:g}" for c in cats)
        print(f"| {m} | " + " | ".join(cells) + f" | {mf:.2f} | {mp:.2f} | {mr:.2f} | {sizes} |")
    print("\n### F2 against vector size (mean over categories and folds)\n")
    print("| measure | " + " | ".join(f"{v:g}" for v in VECTOR_SIZES) + " |")
    print("|---|" + "---|" * len(VECTOR_SIZES))
    for m in order:
        print(f"| {m} | " + " | ".join(f"{x:.2f}" for x in curves[m]) + " |")
    print(f"\n(filter part: {time.perf_counter() - t0:.0f} s)\n")
    if args.no_search:
        return
    t0 = time.perf_counter()
    strategies = ["filter_top12", "forward", "backward", "random_mutation"]
    if not args.quick:
        strategies[3:3] = ["forward_stepwise", "backward_stepwise"]
    scats = cats[:2]
    res = search_table(counts, titles, scats, strategies, args.estimator)
    print(f"### Search strategies over the {POOL} best odds-ratio words (outer 5-fold, inner 3-fold; "
          f"{', '.join(scats)})\n")
    print("| strategy | test F2 ± s.e. | P | R | words kept | seconds per fit |")
    print("|---|---|---|---|---|---|")
    for s in strategies:
        r = res[s]
        print(f"| {s} | {r['f2']:.2f} ± {r['f2_se']:.2f} | {r['precision']:.2f} | {r['recall']:.2f} | "
              f"{r['size']:.1f} | {r['seconds']:.2f} |")
    print(f"\n(search part: {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
