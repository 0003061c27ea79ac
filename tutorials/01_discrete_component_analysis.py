# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Discrete component analysis: from the Pyro model to feature weights
#
# Buntine & Jakulin's *discrete component analysis* (DCA) covers LDA, multinomial PCA and the
# Gamma-Poisson model of Canny. In latentfs each model is a Pyro model; fast engines written in torch
# fit it; every engine returns the same `Posterior`, which exports to ArviZ; and posterior quantities
# become `FeatureWeights` with credible bands.
#
# It opens with the library in a few lines on real data (the Reuters sample shipped with the `lda`
# package), then
# 1. simulates a corpus from `DirichletDCA` (the Pyro model is the generator),
# 2. fits it with mean-field VB and with direct Gibbs sampling,
# 3. checks that the planted components come back and that held-out likelihood is close to the truth's,
# 4. diagnoses the sampler in ArviZ (trace, R-hat after aligning components across chains),
# 5. turns the posterior into word weights with bands,
# 6. and returns to the Reuters fit to read its components and most salient words.
#
# Set `LATENTFS_QUICK=1` for a fast run (CI does).

# %%
import os

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from scipy.optimize import linear_sum_assignment

import latentfs
from latentfs import plots
from latentfs.datasets import load_reuters
from latentfs.evaluate import document_completion, split_documents

torch.set_num_threads(1)
QUICK = os.environ.get("LATENTFS_QUICK") == "1"
SWEEPS = 150 if QUICK else 600

# %% [markdown]
# ## 0. The library in a few lines
#
# A document × word count table goes in — here a DataFrame whose columns are the words, so every output
# is labelled with them — `latentfs.fit` returns a `Posterior`, and `latentfs.plots` draws it. Twenty
# components, mean-field VB, on 395 Reuters stories × 4,258 words.

# %%
corpus = load_reuters()
counts = pd.DataFrame(corpus.counts.toarray(), columns=list(corpus.vocabulary))
reuters = latentfs.fit(latentfs.DirichletDCA(20, alpha=0.1, gamma=0.1), counts, method="vb", seed=0,
                       max_iter=100 if QUICK else 500, warn=not QUICK)
print(reuters)
print(latentfs.top_words(reuters, n=6)[[0, 1, 2]])  # rank × (component, word and its probability)
plots.topic_summary(reuters, n_words=8, components=range(8))
plt.show()

# %% [markdown]
# ## 1. Simulate from the model
#
# `DirichletDCA(K, alpha, gamma)`: each document's proportions m ~ Dirichlet(α), its words
# w ~ Multinomial(L, Θ m), each component's word distribution θ_k ~ Dirichlet(γ). `simulate` runs the
# declared Pyro model under a seeded, scoped random state.

# %%
K, J = 5, 80
truth_model = latentfs.DirichletDCA(K, alpha=0.2, gamma=0.05)
train = truth_model.simulate(n_documents=400 if QUICK else 1000, n_features=J, doc_length=120, seed=1)
theta_true = train["topic_word"]

# held-out documents from the same Θ, split in halves for document completion
rng = np.random.default_rng(2)
m_test = rng.dirichlet(np.full(K, 0.2), size=200)
X_test = np.stack([rng.multinomial(120, p) for p in m_test @ theta_true]).astype(float)
split = split_documents(X_test, 0.5, seed=0)
oracle = document_completion(theta_true, None, truth_model.alpha, split=split)
print(f"training corpus {train['counts'].shape}, oracle held-out log-likelihood {oracle:.4f} nats/token")

# %% [markdown]
# ## 2. Fit with VB and with Gibbs
#
# One entry point: `latentfs.fit(model, X, method=...)`. VB follows the chapter's Fig. 4 (one document
# update per cycle, vectorised over all documents with sparse operations); Gibbs follows Fig. 5 / Table 3,
# vectorised over all non-zeros, with several chains; `store` keeps the draws of the documents'
# proportions as well as Θ's (section 5 computes word weights per draw from both).

# %%
model = latentfs.DirichletDCA(K, alpha=0.2, gamma=0.05)
# learn_gamma=False: both engines under the model's γ as given (the collapsed sampler would otherwise learn it)
vb = latentfs.fit(model, train["counts"], method="vb", seed=0, tol=1e-7, max_iter=2000, learn_gamma=False)
gibbs = latentfs.fit(model, train["counts"], method="gibbs", seed=0, num_chains=2, num_warmup=SWEEPS,
                     num_samples=SWEEPS // 2, store=("topic_word", "doc_topic"), warn=not QUICK)
if QUICK:
    print("quick mode: the chains are too short to converge; section 4 shows how far they are (R-hat)")
print(vb)
print(gibbs)

# %% [markdown]
# ## 3. Recovery and held-out likelihood
#
# Components are matched to the truth by the Hungarian algorithm (SciPy's `linear_sum_assignment` on the
# L1 distances between rows of Θ); the mean L1 distance per component should be small. Held-out
# likelihood uses one definition for every engine (document completion, per token).

# %%
def matched_l1(truth, fitted):
    """Mean L1 distance between the rows of Θ after the best one-to-one matching of components."""
    cost = np.abs(truth[:, None, :] - fitted[None, :, :]).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


rows = []
for name, result in [("VB", vb), ("Gibbs", gibbs)]:
    l1 = matched_l1(theta_true, result.mean("topic_word"))
    heldout = document_completion(result, None, model.alpha, split=split)
    rows.append((name, l1, heldout, heldout - oracle))
print(f"{'engine':<8}{'mean L1':>10}{'held-out':>12}{'vs oracle':>12}")
for name, l1, h, d in rows:
    print(f"{name:<8}{l1:>10.4f}{h:>12.4f}{d:>12.4f}")

# %% [markdown]
# ## 4. Diagnose the sampler in ArviZ
#
# Components are exchangeable, so chains may label them differently. `fit` relabels the draws (within and
# across chains) to one labelling *before* any cross-chain diagnostic and records how in
# `result.alignment`. The result exports to ArviZ for R̂; `plots.trace` draws the objective per chain with
# the warm-up shaded, and the draws of the entries of Θ that carry the most mass.

# %%
print("alignment:", {k: gibbs.alignment[k] for k in ("method", "permutations") if k in gibbs.alignment})
idata = gibbs.to_inference_data()
rhat = az.rhat(idata, var_names=["topic_word"])["topic_word"].values
big = gibbs.mean("topic_word") > 0.01  # the entries that carry the components
print(f"R-hat of topic_word after alignment: median {np.median(rhat):.3f}; "
      f"{np.mean(rhat[big] < 1.05):.0%} of the entries above 0.01 have R-hat < 1.05; worst {rhat.max():.3f}")
plots.trace(gibbs)
plt.show()
plots.trace(gibbs, "topic_word", max_entries=3)
plt.show()

# %% [markdown]
# ## 5. Feature weights with credible bands
#
# `word_importance` is each word's saliency (Chuang et al. 2012) computed per posterior draw, so the draws
# give a band; `word_relevance` ranks words within one component (Sievert & Shirley 2014).

# %%
weights = latentfs.word_importance(gibbs)
print(weights.to_frame().head(8))
lo, hi = weights.band(0.9)
top = weights.ranking()[:15][::-1]
fig, ax = plt.subplots(figsize=(6, 4))
ax.errorbar(weights.scores[top], range(len(top)), xerr=[weights.scores[top] - lo[top], hi[top] - weights.scores[top]],
            fmt="o", capsize=2)
ax.set_yticks(range(len(top)), [weights.feature_names[j] for j in top])
ax.set_xlabel("saliency, 90% band")
plt.show()

# %% [markdown]
# ## 6. Back to the Reuters sample
#
# The fit of section 0 (395 news stories × 4,258 words from the `lda` package, not the ModApte split the
# chapter used; see the digest). Because the counts came as a DataFrame, words come back by name: the top
# words of each component, then the most salient words overall. `plots.to_pyldavis` gives the arrays
# pyLDAvis' `prepare` takes, for its interactive view (pyLDAvis is not a dependency).

# %%
words = latentfs.top_words(reuters, n=8).xs("word", axis=1, level="field")  # rank × component
for k in words.columns:
    print(f"c{k:<3d}", " ".join(words[k]))
saliency = latentfs.word_importance(reuters)
print("most salient:", saliency.top(12))
view = plots.to_pyldavis(reuters, counts)
print({name: np.shape(value) for name, value in view.items()})
