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
# # PLS, projections, feature scores, and honest evaluation
#
# This tutorial walks through the feature-selection and subspace chapters of *Subspace, Latent Structure
# and Feature Selection* (LNCS 3940) that `latentfs` implements outside its latent models:
#
# 1. **Reunanen: cross-indexing.** How much does feature selection gain? The usual answer (the outer loop
#    of cross-validation) is optimistic; cross-indexing A and B remove the bias at no extra cost.
# 2. **Rosipal & Krämer: PLS** with VIP scores and bootstrap bands (linnerud, diabetes), and kernel PLS on
#    the chapter's Fig. 3 curve.
# 3. **Navot et al.: when do more features hurt?** The optimal number of features against the training-set
#    size for two Gaussians, checked by Monte Carlo.
# 4. **Rogers & Gunn: random-forest relevance** on planted features.
# 5. **Mladenić: text feature scores** on the Reuters sample shipped with the `lda` package, including the
#    mutual-information pitfall.
# 6. **Blum: random projections and kernel features**, briefly.
#
# It opens with the library in a few lines on real data. Set `LATENTFS_QUICK=1` for a fast run (CI does);
# the full run takes a few minutes on one core. Where the text quotes a number it says whether it is the
# full run's; the numbers of the run you are looking at are printed beside it ("this run: …").

# %%
# ruff: noqa: E402  (each section of this notebook imports what it needs)
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import matplotlib.pyplot as plt
import numpy as np

QUICK = os.environ.get("LATENTFS_QUICK") == "1"
rng = np.random.default_rng(2026)
print("quick mode" if QUICK else "full mode")

# %% [markdown]
# ## 0. The library in a few lines
#
# Diabetes progression (scikit-learn's `load_diabetes`: 442 patients, 10 baseline variables) as a
# DataFrame. `PLSVIPSelector` fits a PLS regression, computes each variable's VIP score with a bootstrap
# band, and keeps a variable when the **lower end of its 90% band** exceeds 1 (the default rule; the
# customary "VIP > 1" on the point score is `rule="point"`). Names come back from the DataFrame.

# %%
from sklearn.datasets import load_diabetes

from latentfs.subspace import PLSVIPSelector

diabetes = load_diabetes(as_frame=True)
vip_selector = PLSVIPSelector(3, seed=0).fit(diabetes.data, diabetes.target)
print("kept:", list(diabetes.data.columns[vip_selector.get_support()]))
print(vip_selector.weights_.to_frame(level=0.9).round(2).head(5).to_string(index=False))

# %% [markdown]
# ## 1. The bias that cross-indexing removes
#
# A wrapper search proposes the best subset of each size 1..D. Running it once per outer fold and testing
# each size on the held-out fold gives a K × D matrix of accuracies. **Algorithm 1** picks the size with the
# best mean and reports that mean: the same numbers choose and evaluate, so the report is optimistic.
# **Cross-indexing A** chooses the size on K − 1 folds and reads its accuracy on the remaining fold;
# **B** chooses on one fold and reads the other K − 1.
#
# First the pure statistics: rows i.i.d. with the same mean ψ = 0.7 in every column (no size is better).

# %%
from latentfs.evaluate import cross_index_a, cross_index_b, learning_curve, nested_selection_scores, outer_loop_estimate
from latentfs.evaluate.cross_indexing import (  # not re-exported by latentfs.evaluate (see the report)
    cross_index_a_values,
    cross_index_b_values,
    outer_loop_values,
    sequential_forward_selection,
)

draws = 20_000 if QUICK else 100_000
x = 0.7 + 0.05 * rng.standard_normal((draws, 5, 10))
bias = {
    "outer loop (Algorithm 1)": outer_loop_values(x)[1].mean() - 0.7,
    "cross-indexing A": cross_index_a_values(x)[1].mean() - 0.7,
    "cross-indexing B": cross_index_b_values(x)[1].mean() - 0.7,
}
for name, b in bias.items():
    print(f"{name:26s} bias {b:+.4f}")
print("digest check run (10^5 draws): +0.0344, -0.00002, +0.00001")

# %% [markdown]
# The outer loop overstates the attainable accuracy by about 3.4 points even though nothing can be
# gained; both cross-indexing estimates are unbiased.
#
# Now the chapter's protocol on real data, Wisconsin diagnostic breast cancer (`load_breast_cancer`, the
# chapter's "wdbc"): split into a search set of m = 284 and a held-out test set, run SFS with 1-NN guided
# by 5-fold inner CV, 5 outer folds, and compare each method's estimated gain δ⁽ᵉ⁾ (best size vs all
# features) with the gain δ⁽ᵗ⁾ measured on the held-out test set. Δ = δ⁽ᵉ⁾ − δ⁽ᵗ⁾ is the bias.

# %%
from sklearn.datasets import load_breast_cancer

from latentfs.evaluate.cross_indexing import nearest_neighbour_accuracy  # not re-exported either

data = load_breast_cancer()
Xw, yw = data.data, data.target
repeats = 2 if QUICK else 10
max_feat = 8 if QUICK else 30
rows = []
for r in range(repeats):
    perm = np.random.default_rng(r).permutation(len(yw))
    search_idx, test_idx = perm[:284], perm[284:]
    mean, sd = Xw[search_idx].mean(0), Xw[search_idx].std(0)
    Xs, Xt = (Xw[search_idx] - mean) / sd, (Xw[test_idx] - mean) / sd
    ys, yt = yw[search_idx], yw[test_idx]

    def search(a, b, r=r):
        return sequential_forward_selection(a, b, n_folds=5, max_features=max_feat, seed=r)

    nested = nested_selection_scores(Xs, ys, search, n_folds=5, seed=r)
    final = search(Xs, ys)  # steps 7–8: the search on all search data
    full_test = nearest_neighbour_accuracy(Xs, ys, Xt, yt)
    estimates = {
        "0 (inner CV)": (int(np.argmax(final.inner_scores)) + 1,
                         final.inner_scores.max() - final.inner_scores[-1]),
        "1 (outer loop)": outer_loop_estimate(nested.scores),
        "2 (cross-index A)": cross_index_a(nested.scores),
        "3 (cross-index B)": cross_index_b(nested.scores),
    }
    for name, est in estimates.items():
        size, gain = (est if isinstance(est, tuple) else (est.size, est.gain))
        subset = final.subsets[int(round(size)) - 1]
        delta_t = nearest_neighbour_accuracy(Xs[:, subset], ys, Xt[:, subset], yt) - full_test
        rows.append((name, size, 100 * gain, 100 * delta_t))

print(f"{repeats} repeats; SFS up to {max_feat} features (the 'full set' column is the largest size searched)")
print(f"{'method':20s} {'d̂':>6s} {'δ(e) %':>8s} {'δ(t) %':>8s} {'Δ %':>7s}")
for name in estimates:
    sel = np.array([row[1:] for row in rows if row[0] == name])
    print(f"{name:20s} {sel[:, 0].mean():6.1f} {sel[:, 1].mean():8.1f} {sel[:, 2].mean():8.1f} "
          f"{(sel[:, 1] - sel[:, 2]).mean():7.1f}")
print("Reunanen Table 3 (wdbc, 5-fold inner CV): Δ0 = 5 ± 2, Δ1 = 2 ± 3, Δ2 = 0 ± 4, Δ3 = -0 ± 3")

# %% [markdown]
# In the full run (10 splits, SFS to all 30 features) the chapter's pattern holds: method 0 (the search's
# own inner-CV curve) is clearly optimistic, the outer loop less so, and cross-indexing reports gains that
# the held-out data confirm — Δ = 3.3, 1.4, 0.0 and −0.1 points for methods 0–3, against the chapter's
# 5 ± 2, 2 ± 3, 0 ± 4 and −0 ± 3. The Δ column above is this run's; with the 2 splits of quick mode it
# can break the pattern. Differences to expect: the chapter averages 30 splits (our spread is
# large with 10, and very large with the 2 of quick mode), its "wdbc" has 29 features (scikit-learn's copy
# has 30), and in quick mode the search stops at 8 features, so "full set" there means the best 8.
# The learning curve (accuracy against the number of features, mean ± s.e. over outer folds) of the last
# split:

# %%
curve = learning_curve(nested.scores)
fig, ax = plt.subplots(figsize=(5, 3))
ax.errorbar(curve.sizes, curve.mean, yerr=curve.std_error, marker="o", ms=3)
ax.set_xlabel("number of features (SFS + 1-NN)")
ax.set_ylabel("outer-fold accuracy")
ax.set_title("wdbc: learning curve over the number of features")
fig.tight_layout()

# %% [markdown]
# ## 2. PLS with VIP scores
#
# `latentfs.subspace.PLS` implements NIPALS (PLS1/PLS2 and Mode A) and SIMPLS; where the algorithms
# coincide it agrees with scikit-learn's `PLSRegression` to machine precision (the tests check this).
# VIP scores (Σ VIP² = number of features, so the average VIP² is 1) come with bootstrap bands. The
# customary rule "VIP > 1" on the point score keeps about a third of pure-noise features; `PLSVIPSelector`
# therefore keeps a feature only when the lower end of its 90% bootstrap band exceeds 1 (about 1% of noise
# features in the library's tests), and `rule="point"` gives the customary rule.

# %%
from sklearn.cross_decomposition import PLSRegression
from sklearn.datasets import load_linnerud

from latentfs.subspace import PLS, KernelPLS, vip_scores

lin = load_linnerud(as_frame=True)
model = PLS(2, scale=True).fit(lin.data, lin.target)
ref = PLSRegression(2, scale=True, tol=1e-30, max_iter=100_000).fit(lin.data, lin.target)
print("linnerud: max |prediction difference| vs scikit-learn:",
      f"{np.abs(np.asarray(model.predict(lin.data)) - ref.predict(lin.data)).max():.1e}")
fw = vip_scores(lin.data, lin.target, 2, n_bootstrap=50 if QUICK else 500, seed=0)
print(fw.to_frame(level=0.9).round(3).to_string(index=False))
lo, _ = fw.band(0.9)
print(f"this run: {fw.top(1)[0]} has the largest VIP; features whose 90% band lies above 1: "
      f"{[n for n, low in zip(fw.feature_names, lo, strict=True) if low > 1] or 'none'}")

# %% [markdown]
# In the full run *Situps* has the largest VIP, but with 20 athletes every band straddles the VIP = 1 line
# (the line above says which features this run's bands put above 1): the data cannot single out one
# exercise, and the band rule keeps nothing where "VIP > 1" would keep the top feature. On diabetes
# (442 patients, 10 baseline variables) the picture is sharper:

# %%
fw_d = vip_scores(diabetes.data, diabetes.target, 3, n_bootstrap=50 if QUICK else 500, seed=1)
frame = fw_d.to_frame(level=0.9)
print(frame.round(3).to_string(index=False))
print("this run: band rule (lower 90% bound > 1) keeps", list(frame.loc[frame["lower"] > 1, "feature"]),
      "; point rule (VIP > 1) keeps", list(frame.loc[frame["score"] > 1, "feature"]))
fig, ax = plt.subplots(figsize=(5, 3))
ax.errorbar(frame["feature"], frame["score"], yerr=[frame["score"] - frame["lower"], frame["upper"] - frame["score"]],
            fmt="o", ms=4)
ax.axhline(1.0, color="grey", lw=0.8)
ax.set_ylabel("VIP (90% bootstrap band)")
ax.set_title("diabetes: PLS-VIP, 3 components")
fig.tight_layout()

# %% [markdown]
# BMI and the s5 serum measurement (log triglycerides) stand clearly above 1; s4 and blood pressure have
# point VIPs just above 1, so the point rule keeps them, while their bands reach down to about 1 (s4) or
# well below (bp), so the band rule keeps s4 only when its band clears 1 in that run (printed above). BMI,
# s5 and bp are also the variables the lasso path of this data set picks first. The chapter has no
# numbers for real data; its only experiment is
# the kernel PLS demo of Fig. 3, reproduced next: 100 points of Wahba's curve with noise of variance 0.04
# and a Gaussian kernel of width h = 1.8 (exp(−‖x − y‖²/h), i.e. scikit-learn's `gamma` = 1/h), fitted with
# 1, 4 and 8 score vectors.

# %%
xs = np.linspace(0, 3.5, 100)[:, None]
z = 4.26 * (np.exp(-xs[:, 0]) - 4 * np.exp(-2 * xs[:, 0]) + 3 * np.exp(-3 * xs[:, 0]))
y_noisy = z + 0.2 * np.random.default_rng(3).standard_normal(100)
y_noisy = y_noisy - y_noisy.mean()
z_c = z - z.mean()
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(xs, y_noisy, ".", color="grey", ms=3)
for p in (1, 4, 8):
    fit = KernelPLS(p, kernel="rbf", kernel_params={"gamma": 1 / 1.8}).fit(xs, y_noisy).predict(xs)
    ax.plot(xs, fit, label=f"{p} components")
    print(f"p = {p}: training MSE {np.mean((fit - y_noisy) ** 2):.3f}, MSE vs truth {np.mean((fit - z_c) ** 2):.4f}")
print("digest reproduction (another seed): training 0.075 / 0.047 / 0.033, truth 0.039 / 0.013 / 0.0014")
ax.legend()
ax.set_title("kernel PLS on Wahba's curve (Rosipal & Krämer, Fig. 3)")
fig.tight_layout()

# %% [markdown]
# The error against the true curve falls as in the digest's reproduction (0.039 and 0.013 for 1 and 4
# components, the same to two digits); at 8 components ours is 0.003 against the digest's 0.0014, and the
# training errors are higher: a different noise draw (the chapter gives no seed or numbers, only the figure).

# %% [markdown]
# ## 3. Navot et al.: the optimal number of features grows with the training set
#
# Two spherical Gaussians N(±μ, I) with |μ_j| decreasing. With m training points the ML rule on the first n
# features has expected error ≈ Φ(−f(n, m)), f = s_n/√(n/m + s_n), s_n = Σ_{j≤n} μ_j². Below: the three
# families of the chapter, the approximate curve and the exact average error by Monte Carlo at m = 16.

# %%
from latentfs.evaluate import expected_error_mc, optimal_num_features
from latentfs.evaluate.navot import approximate_error  # not re-exported by latentfs.evaluate

N = 2000
j = np.arange(1, N + 1)
families = {"μ_j = 2^(-j/2)": 2.0 ** (-j / 2), "μ_j = 1/j": 1 / j, "μ_j = 1/√j": 1 / np.sqrt(j)}
print(f"{'family':14s} " + " ".join(f"m={m:<5d}" for m in (16, 100, 225, 1000)))
for name, mu in families.items():
    cells = [optimal_num_features(mu, m) for m in (16, 100, 225, 1000)]
    print(f"{name:14s} " + " ".join(f"{c.n_features:4d}/{c.error:.4f}" for c in cells))
print("digest table: 4/0.1948 6/0.1677 7/0.1633 9/0.1600 | 4/0.1356 10/0.1138 15/0.1091 32/0.1042 | "
      "31/0.0496 154/0.0179 327/0.0114 1345/0.0050")

fig, axes = plt.subplots(1, 3, figsize=(11, 3), sharey=True)
for ax, (name, mu) in zip(axes, families.items(), strict=True):
    mu200 = mu[:200]
    mc, se = expected_error_mc(mu200, 16, n_repeats=400 if QUICK else 2000, seed=0)
    for m in (16, 100, 225):
        ax.plot(np.arange(1, 201), approximate_error(mu200, m), label=f"Φ(−f), m={m}")
    ax.plot(np.arange(1, 201), mc, "k:", label="Monte Carlo, m=16")
    ax.set_xscale("log")
    ax.set_title(name)
    ax.set_xlabel("number of features n")
    print(f"{name}: max |MC − approximation| at m=16 = {np.abs(mc - approximate_error(mu200, 16)).max():.4f}, "
          f"MC argmin {np.argmin(mc) + 1}, approximate argmin {optimal_num_features(mu200, 16).n_features}")
axes[0].set_ylabel("expected error")
axes[0].legend(fontsize=7)
fig.tight_layout()

# %% [markdown]
# The chapter's Fig. 1 shows these curves without numbers; the digest's Monte Carlo found the approximation
# within 0.011 with the same argmin. For 1/√j the optimum is flat (the error changes by < 0.001 over
# n = 28..34), so the Monte Carlo argmin can move by one or two. The optimal n against m:

# %%
ms = np.unique(np.logspace(0.5, 3.5, 25).astype(int))
fig, ax = plt.subplots(figsize=(5, 3))
for name, mu in families.items():
    ax.plot(ms, [optimal_num_features(mu, int(m)).n_features for m in ms], marker=".", label=name)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("training-set size m")
ax.set_ylabel("optimal number of features")
ax.legend(fontsize=7)
fig.tight_layout()

# %% [markdown]
# The slopes match the chapter's examples: n_opt grows like log m for 2^(−j/2), like √m for 1/j, and like m
# for 1/√j.
#
# ## 4. Random-forest relevance on planted features
#
# Rogers & Gunn grow trees that pick **one feature at random at every node** and record the information
# gain of each split; an irrelevant feature's expected gain is known in closed form (the midpoint of two
# bounds), so each feature gets a one-sided t-test (RF HT) or a threshold (RF Thr). Their synthetic sets:
# *Simple* (9 features, y = X₁² + 2X₂, thresholded at the median — the chapter does not say how) and
# *Friedman* (10 features, y > 14).
#
# **The chapter's test is `null="midpoint"`; the library's default is `null="shadow"`.** The chapter's
# t-test treats the nodes that split on a feature as independent, although every tree reuses one sample,
# so a noise feature's chance association with y counts many times: on pure noise (160 × 30, 80 trees)
# its RF HT at γ = 0.05 kept 13% of the features in the library's own measurements, 2.6 times γ. The default grows permuted copies of every column ("shadow"
# features, as in Boruta) in the same forest and refers each real feature's t statistic to the shadows'
# (an empirical null), which brings the false-positive rate back to about γ (the `significance` argument,
# default 0.05) and handles any number of classes, at the price of a larger forest and some power. We
# reproduce the chapter with its own null,
# then measure both on pure noise.

# %%
from sklearn.datasets import make_friedman1

from latentfs.select import forest_relevance

trials = 3 if QUICK else 20
results = {"Simple": [], "Friedman": []}
for t in range(trials):
    g = np.random.default_rng(100 + t)
    Xs_ = g.random((300, 9))
    ys_ = Xs_[:, 0] ** 2 + 2 * Xs_[:, 1]
    results["Simple"].append(forest_relevance(Xs_, (ys_ > np.median(ys_)).astype(int), n_trees=100,
                                              null="midpoint", seed=t))
    Xf, yf = make_friedman1(300, n_features=10, noise=1.0, random_state=t)
    results["Friedman"].append(forest_relevance(Xf, (yf > 14).astype(int), n_trees=100, null="midpoint", seed=t))
paper = {"Simple": (6.80, 4.17), "Friedman": (7.99, 5.80)}
for name, fws in results.items():
    thr = np.mean([sum(f.info["selected_thr"]) for f in fws])
    ht = np.mean([sum(f.info["selected_ht"]) for f in fws])
    relevant = 2 if name == "Simple" else 5
    hit = np.mean([all(f.info["selected_ht"][:relevant]) for f in fws])
    print(f"{name:9s} features kept: RF Thr {thr:.2f}, RF HT(γ=0.05) {ht:.2f} "
          f"(paper: {paper[name][0]:.2f}, {paper[name][1]:.2f}); all relevant kept by HT in {hit:.0%} of trials")
last = results["Friedman"][-1]
print("Friedman t statistics:", np.round(last.scores, 1))

# %% [markdown]
# A full run (20 trials) kept 5.20 (RF Thr) and 2.40 (RF HT) features on *Simple* and 7.50 and 4.45 on
# *Friedman*, against the paper's 6.80/4.17 and 7.99/5.80 (this run's counts are printed above): the same
# pattern (Thr keeps most features, HT fewer), with our HT stricter. Reasons we cannot remove: the paper weights nodes by a complexity measure
# from an earlier paper that the chapter does not give (we use the unweighted mean), and it states neither
# the HT level of its Table 3 nor Friedman's sample size (we use γ = 0.05 and 300 rows). The t statistics of
# Friedman's features 1, 2 and 4 dwarf the noise features'; feature 3 enters y through 20(X₃ − ½)², which
# no single split captures well, and it is the relevant feature HT misses most often. Adding noise features
# makes the trees larger, as in the chapter's Table 1:

# %%
base = forest_relevance(Xf, (yf > 14).astype(int), n_trees=50, null="midpoint", seed=0)
noisy = forest_relevance(np.hstack([Xf, rng.random((300, 30))]), (yf > 14).astype(int), n_trees=50,
                         null="midpoint", seed=0)
print(f"mean tree size: {np.mean(base.info['tree_sizes']):.1f} nodes with 10 features, "
      f"{np.mean(noisy.info['tree_sizes']):.1f} with 30 extra noise features")

# %% [markdown]
# **Calibration on pure noise.** Labels independent of 30 uniform features (160 rows, balanced classes,
# 80 trees): every kept feature is a false positive, and RF HT at γ = 0.05 should keep about 5% of them.
# The library's measurements on this design: 13% with the chapter's midpoint null, 4–5% with shadows.
# Quick mode draws 2 data sets (60 features, so one false positive moves the share by 1.7 points) and can
# land anywhere near those values; the full run draws 8.

# %%
noise_sets = 2 if QUICK else 8
kept = {"midpoint": [], "shadow": []}
for t in range(noise_sets):
    g = np.random.default_rng(500 + t)
    Xn, yn = g.random((160, 30)), np.repeat([0, 1], 80)
    for null in kept:
        kept[null].append(np.mean(forest_relevance(Xn, yn, n_trees=80, null=null, seed=t).info["selected_ht"]))
for null, shares in kept.items():
    print(f"null={null!r:11s} RF HT keeps {np.mean(shares):.1%} of pure-noise features "
          f"({noise_sets} data sets × 30 features; nominal 5%)")

# %% [markdown]
# ## 5. Text feature scores on the Reuters sample
#
# The `lda` package ships 395 Reuters news stories (4,258 words). Their titles begin with the dateline's
# country, which gives labels: here "USA" (88 stories) against the rest. Mladenić's measures score each word
# alone. **The probability estimator is an explicit argument**: with one consistent Bernoulli joint the
# chapter's MutualInfoTxt is never positive and ranks uninformative words first; estimated at the token
# level (multinomial) it behaves as in the literature.

# %%
import lda.datasets

from latentfs.select import text_feature_scores

counts = lda.datasets.load_reuters()
vocab = lda.datasets.load_reuters_vocab()
titles = lda.datasets.load_reuters_titles()
country = np.array([t.split(" ", 1)[1].split(":")[0] for t in titles])
is_usa = (country == "USA").astype(int)
print(counts.shape, "documents × words;", is_usa.sum(), "USA stories")

for measure, est in [("info_gain", "bernoulli"), ("odds_ratio", "laplace"), ("chi2", "bernoulli"),
                     ("bns", "laplace"), ("weight_of_evidence", "laplace"),
                     ("mutual_info_txt", "bernoulli"), ("mutual_info_txt", "multinomial")]:
    fw_t = text_feature_scores(counts, is_usa, measure, estimator=est, feature_names=vocab)
    print(f"{measure:19s} [{est:11s}] {', '.join(fw_t.top(8))}")
mi_b = text_feature_scores(counts, is_usa, "mutual_info_txt", estimator="bernoulli").scores
print(f"MutualInfoTxt under one Bernoulli joint: max {mi_b.max():.2e} (never positive)")

# %% [markdown]
# Information gain and χ² find US-news words (US cities, and "rev", the clergy title used in 13 stories,
# all from the USA); weight of
# evidence is symmetric in the classes and here picks words of the *other* class (Britain, the Vatican, the
# royal family). Odds ratio and BNS favour words that occur *only* in US stories, many of them rare. BNS is
# Forman's |Φ⁻¹(P(F|pos)) − Φ⁻¹(P(F|neg))|, symmetric in the classes (the chapter prints it without |·|,
# which ranks a word seen only in the negative class below useless words); odds ratio stays signed, as the
# chapter defines it, so it ranks words of the positive class only. The
# Bernoulli MutualInfoTxt ranking is useless, as the pitfall predicts: its maximum is 0, reached by words
# that occur everywhere. Token-level MutualInfoTxt ranks rare words first (its known bias towards rare
# terms, sharpened by add-one smoothing).
#
# Mladenić's experiment selects words inside a naive Bayes classifier and reports F₂ (recall weighted more).
# Her Yahoo! data are not public; the same protocol on Reuters (5-fold CV, selection inside each training
# fold, multinomial naive Bayes):

# %%
from sklearn.metrics import fbeta_score
from sklearn.model_selection import StratifiedKFold
from sklearn.naive_bayes import MultinomialNB

folds = np.empty(is_usa.size, dtype=int)
for f, (_, held) in enumerate(StratifiedKFold(5, shuffle=True, random_state=0).split(counts, is_usa)):
    folds[held] = f
sizes = [50, 200] if QUICK else [20, 50, 100, 200, 500, 1000]
table = {}
for measure, est in [("odds_ratio", "laplace"), ("term_freq", "bernoulli"), ("mutual_info_txt", "multinomial"),
                     ("info_gain", "bernoulli"), ("cross_entropy_txt", "bernoulli"), ("random", "bernoulli")]:
    for k in sizes:
        f2 = []
        for f in range(5):
            tr, te = folds != f, folds == f
            w = text_feature_scores(counts[tr], is_usa[tr], measure, estimator=est, seed=f)
            cols = w.ranking()[:k]
            nb = MultinomialNB(alpha=1.0).fit(counts[tr][:, cols], is_usa[tr])
            f2.append(fbeta_score(is_usa[te], nb.predict(counts[te][:, cols]), beta=2, zero_division=0.0))
        table[(measure, k)] = np.mean(f2)
print("F2 of 'USA' (mean over 5 folds) by number of selected words")
print(f"{'measure':18s}" + "".join(f"{k:>7d}" for k in sizes))
for measure in dict.fromkeys(m for m, _ in table):
    print(f"{measure:18s}" + "".join(f"{table[(measure, k)]:7.2f}" for k in sizes))

# %% [markdown]
# Mladenić's Table 1 (Yahoo! hierarchy, F₂ at the best number of features) ranks odds ratio first
# (0.30–0.42), then term frequency and MutualInfoTxt, with information gain and cross entropy last and
# random selection near 0.001. **Here the ordering is reversed**: in a full run information gain and cross
# entropy reach F₂ ≈ 0.86, term frequency 0.81, odds ratio 0.68 and MutualInfoTxt 0.52 at 1,000 words, and
# odds ratio is *worse than random* below 200 words. The setting explains it: her positive classes are tiny
# hierarchy nodes (a few documents among thousands, vocabulary ≈ a few thousand words), where words seen
# only in positives are what naive Bayes needs; our positive class is 22% of the documents, so the rare
# US-only words odds ratio picks are absent from most US test stories and naive Bayes falls back on the
# prior. What does reproduce is that the choice of measure changes F₂ several-fold at small subset sizes, and
# that it matters less as the subset grows (her Fig. 5). Her Yahoo! data are not public, so her numbers
# cannot be reproduced directly.
#
# ## 6. Random projections and kernel features (Blum)
#
# A Johnson–Lindenstrauss projection of the Reuters documents (as dense term vectors) keeps all pairwise
# squared distances within 1 ± ε for d ≥ 4 ln(n²/δ)/(ε² − ε³); Blum's mapping F2 turns a kernel into
# explicit features whose inner products reproduce the kernel on the landmarks.

# %%
from scipy.spatial.distance import pdist
from sklearn.metrics.pairwise import rbf_kernel

from latentfs.subspace import KernelFeatureMap, RandomProjection, jl_min_dim

docs = counts[:100].astype(float)
d = jl_min_dim(100, 0.3, 0.05)
projected = np.asarray(RandomProjection(d, kind="achlioptas", seed=0).fit_transform(docs))
before, after = pdist(docs, "sqeuclidean"), pdist(projected, "sqeuclidean")
ratios = after[before > 0] / before[before > 0]
print(f"d = {d}: squared-distance ratios in [{ratios.min():.3f}, {ratios.max():.3f}] over {ratios.size} pairs")

from sklearn.datasets import load_digits

digits = load_digits().data / 16
fmap = KernelFeatureMap(200, mapping="F2", kernel="rbf", kernel_params={"gamma": 1 / 20.0},
                        landmarks="pivoted_cholesky").fit(digits)
F = fmap.transform(digits[:300])
K = rbf_kernel(digits[:300], gamma=1 / 20.0)  # the same kernel, computed by scikit-learn
print(f"digits: 200 pivoted-Cholesky landmarks reproduce the RBF Gram of 300 digits to "
      f"{np.abs(F @ F.T - K).max():.3f} (max abs error)")

# %% [markdown]
# ## 7. Every selector against the baselines people use
#
# `benchmarks/selection_suite.py` runs every latentfs selector beside `f_classif`, `mutual_info_classif`, RFE,
# L1-logistic and Boruta on five real data sets and a planted one, with the selection made inside each
# training fold of a stratified 5-fold split (never on the test fold), then scores a logistic regression on the
# k selected features. It takes about ten minutes, so this notebook reads its recorded table
# (`benchmarks/results/selection_suite.md`, written by the last full run) rather than rerunning it. Left:
# test accuracy; right: Nogueira et al.'s stability of the k-subsets over the five folds (1: the same subset
# in every fold; 0: chance overlap).

# %%
from pathlib import Path

import pandas as pd

here = Path.cwd()
table = next(p / "benchmarks" / "results" / "selection_suite.md" for p in (here, *here.parents)
             if (p / "benchmarks" / "results" / "selection_suite.md").exists())
rows = [line.strip().strip("|").split("|") for line in table.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and not line.startswith("| data set")]
suite = pd.DataFrame([[c.strip() for c in r] for r in rows],
                     columns=["data set", "k", "method", "accuracy", "Kuncheva", "Nogueira", "s/fold"])
suite["data set"] = suite["data set"].str.split(" (", regex=False).str[0]
suite["acc"] = suite["accuracy"].str.split(" ", regex=False).str[0].astype(float)
suite["stab"] = pd.to_numeric(suite["Nogueira"], errors="coerce")
acc = suite.pivot(index="method", columns="data set", values="acc")
stab = suite.pivot(index="method", columns="data set", values="stab")
fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
for ax, grid, title in ((axes[0], acc, "test accuracy"), (axes[1], stab, "Nogueira stability")):
    im = ax.imshow(grid.to_numpy(), aspect="auto", cmap="viridis")
    ax.set_xticks(range(grid.shape[1]), grid.columns, rotation=40, ha="right")
    ax.set_yticks(range(grid.shape[0]), grid.index)
    ax.set_title(title)
    for (i, j), v in np.ndenumerate(grid.to_numpy()):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < grid.to_numpy().mean() else "k")
    fig.colorbar(im, ax=ax, fraction=0.04)
fig.tight_layout()
plt.show()
print(acc.idxmax().to_string())

# %% [markdown]
# Read the table method by method (the full run of 2026-11-24). The baselines win most columns: L1-logistic on
# wdbc (0.975) and tissue (0.979), RFE on digits (0.871), mutual information and Boruta on wine (0.944), Boruta
# on Reuters (0.975, BSS 0.972 next, unsupervised Q-α last at 0.858); on
# NCI60 (57 samples, 8 tumour types) every method lies within the fold noise (0.44–0.53). The seed methods:
# BSS with the class direction (`rank`, r//4) is second on tissue (0.974) but fails on Weston (0.525), where the
# class signal is not the support vectors' top direction (`benchmarks/bss_table1.py`); supervised Q-α matches
# the filters on wdbc and Weston and loses on digits, tissue and wine, unsupervised Q-α is last on digits
# (0.528); PLS-VIP sits with the filters; the forest relevance test (Rogers & Gunn) is calibrated under the
# null but keeps too few of Weston's features (0.865 against 0.99) and is the least stable selector on four of
# the six sets.
# Where a seed method loses, it loses to a baseline that also costs less.
