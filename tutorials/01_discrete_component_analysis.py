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
# This tutorial
# 1. simulates a corpus from `DirichletDCA` (the Pyro model is the generator),
# 2. fits it with mean-field VB and with direct Gibbs sampling,
# 3. checks that the planted components come back and that held-out likelihood is close to the truth's,
# 4. diagnoses the sampler in ArviZ (trace, R-hat after aligning components across chains),
# 5. turns the posterior into word weights with bands,
# 6. and repeats the analysis on the Reuters sample shipped with the `lda` package.
#
# Set `LATENTFS_QUICK=1` for a fast run (CI does).

# %%
import os

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import torch

import latentfs
from latentfs.core.relabel import matching_permutation
from latentfs.evaluate.heldout import document_completion, split_documents

torch.set_num_threads(1)
QUICK = os.environ.get("LATENTFS_QUICK") == "1"
SWEEPS = 150 if QUICK else 600

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
# vectorised over all non-zeros, with several chains.

# %%
model = latentfs.DirichletDCA(K, alpha=0.2, gamma=0.05)
vb = latentfs.fit(model, train["counts"], method="vb", seed=0, tol=1e-7, max_iter=2000)
gibbs = latentfs.fit(model, train["counts"], method="gibbs", seed=0, num_chains=2, num_warmup=SWEEPS,
                     num_samples=SWEEPS // 2)
print(vb)
print(gibbs)

# %% [markdown]
# ## 3. Recovery and held-out likelihood
#
# Components are matched to the truth by the Hungarian algorithm; the mean L1 distance per component should
# be small. Held-out likelihood uses one definition for every engine (document completion, per token).

# %%
rows = []
for name, result in [("VB", vb), ("Gibbs", gibbs)]:
    _, l1 = matching_permutation(theta_true, result.mean("topic_word"))
    heldout = document_completion(result, None, model.alpha, split=split)
    rows.append((name, l1, heldout, heldout - oracle))
print(f"{'engine':<8}{'mean L1':>10}{'held-out':>12}{'vs oracle':>12}")
for name, l1, h, d in rows:
    print(f"{name:<8}{l1:>10.4f}{h:>12.4f}{d:>12.4f}")

# %% [markdown]
# ## 4. Diagnose the sampler in ArviZ
#
# Components are exchangeable, so chains may label them differently. `fit` aligns every chain to the
# first by Hungarian matching on Θ *before* any cross-chain diagnostic and records the permutation.

# %%
print("alignment:", gibbs.alignment["permutations"])
idata = gibbs.to_inference_data()
rhat = az.rhat(idata, var_names=["topic_word"])["topic_word"].values
big = gibbs.mean("topic_word") > 0.01  # the entries that carry the components
print(f"R-hat of topic_word after alignment: median {np.median(rhat):.3f}; "
      f"{np.mean(rhat[big] < 1.05):.0%} of the entries above 0.01 have R-hat < 1.05; worst {rhat.max():.3f}")
az.plot_trace(idata, var_names=["topic_word"], coords={"component": ["c0"], "feature": ["w0", "w1", "w2"]})
plt.show()
fig, ax = plt.subplots(figsize=(7, 3))
for c in range(gibbs.trace.shape[0]):
    ax.plot(gibbs.trace[c], lw=0.8, label=f"chain {c}")
ax.set_xlabel("sweep")
ax.set_ylabel("log p(w | latent, Θ)")
ax.legend()
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
# ## 6. The Reuters sample
#
# 395 news stories × 4,258 words from the `lda` package (not the ModApte split the chapter used; see the
# digest). Twenty components, VB, then the top words of each component and the most salient words.

# %%
from latentfs.datasets import load_reuters  # noqa: E402

corpus = load_reuters()
reuters_model = latentfs.DirichletDCA(20, alpha=0.1, gamma=0.1)
reuters = latentfs.fit(reuters_model, corpus.counts, method="vb", seed=0, max_iter=100 if QUICK else 500,
                       warn=not QUICK)
names = latentfs.top_words(reuters, n=8)
for k, words in enumerate(names):
    print(f"c{k:<3d}", " ".join(corpus.vocabulary[int(w[1:])] for w in words))
saliency = latentfs.word_importance(reuters)
print("most salient:", [corpus.vocabulary[int(w[1:])] for w in saliency.top(12)])
