"""The partially collapsed sampler for DirichletDCA (``method="partially_collapsed"``), in process and on Dask.

Exact tier: the same draws for the same seed whatever the row chunking, the scheduler (dask's local one, an
in-process ``LocalCluster``, worker processes) and a worker lost mid-fit. Statistical tier: the chain's visits to
the assignment vectors of tiny corpora against the posterior enumerated from the model, E[Φ | w] against the
enumerated mean, and the posterior mean of Φ against ``collapsed_gibbs`` on a simulated corpus.
"""

import itertools
import os
import signal

import dask.array as da  # the latentfs[dask] extra: installed wherever the tests run (no skip)
import distributed
import distributed.diagnostics.plugin
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy import stats
from scipy.special import gammaln

import latentfs
from latentfs.core.data import DataError
from latentfs.core.relabel import matching_permutation
from latentfs.inference.dca.partially_collapsed import PartiallyCollapsed, block_tokens

SPEC = PartiallyCollapsed()


# ----------------------------------------------------------------------------- helpers
def chain(model, X, seed):
    """The spec's own init and sample on an in-memory matrix, driven one sweep at a time (the z's are read from
    the state, which a Posterior does not keep)."""
    o = SPEC.check_options({}, type(model).__name__)
    prep = SPEC.prepare(model, X, o)
    state = SPEC.init(prep, o, torch.Generator().manual_seed(seed))

    def step():
        nonlocal state
        state, _ = SPEC.sample(prep, o, state, None)
        return state

    return step


def enumerate_posterior(model, X):
    """Every assignment vector of X's tokens (in the engine's token order) and p(z | w) ∝ p(w, z) with θ and Φ
    integrated out (Buntine & Jakulin 2006, eq. 21, sequence form)."""
    indptr, words = block_tokens(X, "error")
    doc_of = np.repeat(np.arange(X.shape[0]), np.diff(indptr))
    K, J, S = model.n_components, X.shape[1], words.size
    alpha = np.broadcast_to(np.asarray(model.alpha, float), (K,))
    gamma = np.broadcast_to(np.asarray(model.gamma, float), (J,))
    configs = np.array(list(itertools.product(range(K), repeat=S)))
    logp = np.empty(len(configs))
    for i, z in enumerate(configs):
        c = np.zeros((X.shape[0], K))
        N = np.zeros((J, K))
        np.add.at(c, (doc_of, z), 1)
        np.add.at(N, (words, z), 1)
        logp[i] = gammaln(c + alpha).sum() + (gammaln(gamma[:, None] + N).sum(0) - gammaln(gamma.sum() + N.sum(0))).sum()
    probs = np.exp(logp - logp.max())
    return configs, words, probs / probs.sum()


def pooled_chisquare(observed, expected):
    """χ² test with the cells expected to hold fewer than 5 visits pooled into one."""
    small = expected < 5
    obs, exp = observed[~small], expected[~small]
    if small.any():
        obs, exp = np.append(obs, observed[small].sum()), np.append(exp, expected[small].sum())
    return stats.chisquare(obs, exp * obs.sum() / exp.sum())


TINY = np.array([[2, 1, 0], [0, 2, 1], [1, 0, 1]])  # 8 tokens, K = 2: 256 assignment vectors
TINY3 = np.array([[2, 1, 0], [0, 1, 1], [1, 0, 0]])  # 6 tokens, K = 3: 729
MODELS = {
    "asym-alpha": (TINY, lambda: latentfs.DirichletDCA(2, alpha=[0.4, 0.9], gamma=0.5)),
    "vector-gamma": (TINY, lambda: latentfs.DirichletDCA(2, alpha=0.3, gamma=np.linspace(0.2, 1.5, 3))),
    "k3": (TINY3, lambda: latentfs.DirichletDCA(3, alpha=[0.5, 0.2, 1.0], gamma=0.3)),
}
FIT = {"method": "partially_collapsed", "num_chains": 2, "num_warmup": 15, "num_samples": 8, "seed": 11,
       "warn": False, "store": ("topic_word", "doc_topic")}


def corpus(n_documents=45, seed=0):
    model = latentfs.DirichletDCA(3, alpha=0.4, gamma=0.2)
    return model, model.simulate(n_documents=n_documents, n_features=20, doc_length=25, seed=seed)["counts"]


def assert_same_draws(a, b):
    for site in ("topic_word", "doc_topic"):
        assert np.array_equal(a.samples(site), b.samples(site)), site
    # the traced log joint sums the blocks' terms in another order: equal to rounding only
    np.testing.assert_allclose(a.trace, b.trace, rtol=1e-12)


# ----------------------------------------------------------------------------- exact tier
def test_same_draws_for_any_chunking_and_container():
    """One block in memory (numpy, CSR), a dask array of 1, 2 and 3 row chunks (dense and CSR chunks) on dask's
    local scheduler: bitwise the same Φ and θ draws."""
    model, X = corpus()
    base = latentfs.fit(model, X, **FIT)
    assert base.diagnostics["shards"] == 1
    others = [latentfs.fit(model, sp.csr_matrix(X), **FIT)]
    for rows in (45, 23, 15):
        others.append(latentfs.fit(model, da.from_array(X, chunks=(rows, -1)), **FIT))
    others.append(latentfs.fit(model, da.from_array(sp.csr_matrix(X), chunks=(16, -1), asarray=False), **FIT))
    assert [o.diagnostics["shards"] for o in others] == [1, 1, 2, 3, 3]
    for other in others:
        assert_same_draws(base, other)
    # and the seed matters: another seed, other draws
    assert not np.array_equal(latentfs.fit(model, X, **{**FIT, "seed": 12}).samples("topic_word"),
                              base.samples("topic_word"))


def test_same_draws_on_an_in_process_cluster():
    """A ``LocalCluster`` of 1 and of 2 workers (threads of this process): the same draws as without a Client."""
    model, X = corpus()
    base = latentfs.fit(model, X, **FIT)
    for workers in (1, 2):
        with (distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=False,
                                       dashboard_address=":0") as cluster, distributed.Client(cluster)):
            got = latentfs.fit(model, da.from_array(X, chunks=(10, -1)), **FIT)
        assert_same_draws(base, got)


class _KillAfter(distributed.diagnostics.plugin.SchedulerPlugin):
    """A scheduler plugin that kills (SIGKILL) the worker process that finished the n-th block sweep."""

    def __init__(self, scheduler, n):
        super().__init__()
        self.scheduler, self.n, self.seen, self.killed = scheduler, n, 0, None

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "memory" and str(key).startswith("block_sweep"):
            self.seen += 1
            if self.seen == self.n and self.killed is None:
                ws = self.scheduler.workers[kwargs["worker"]]
                self.killed = ws.pid
                os.kill(ws.pid, signal.SIGKILL)


@pytest.mark.slow
def test_worker_killed_mid_fit_changes_nothing():
    """Two worker processes; the one that finishes the 9th block sweep (3 blocks: the third sweep) is killed.
    Dask recomputes the lost block states from their tasks' lineage and the draws equal the in-memory fit's
    (a worker process is started, so this takes ~20 s)."""
    model, X = corpus(n_documents=30)
    opts = {**FIT, "num_chains": 1, "num_warmup": 8, "num_samples": 6}
    base = latentfs.fit(model, X, **opts)
    with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   dashboard_address=":0") as cluster, distributed.Client(cluster)):
        plugin = _KillAfter(cluster.scheduler, 9)
        cluster.scheduler.add_plugin(plugin, name="kill-after")
        got = latentfs.fit(model, da.from_array(X, chunks=(10, -1)), **opts)
    assert plugin.killed is not None and plugin.seen > 3 * (opts["num_warmup"] + opts["num_samples"])
    assert_same_draws(base, got)


# ----------------------------------------------------------------------------- statistical tier
@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_chain_matches_exact_enumeration(kind):
    """The visits of z to the assignment vectors of a tiny corpus against p(z | w) enumerated from the model (Φ
    and θ integrated out): one chain of 40,000 kept sweeps thinned by 2 (the tiny chain forgets its state within a
    few sweeps), χ² with the sparse cells pooled. Threshold p < 1e-3: a 0.1% false-alarm rate for independent
    draws (a little more with the residual autocorrelation); the seed is fixed, so the test is deterministic.

    Power: the same visits are tested against the posterior of a model whose α is 1.5 times larger; that must be
    rejected, so a sampler off by that much fails here. Both buckets of the sweep are exercised: α is of the order
    of the counts, so the prior bucket's alias tables draw a good share of the tokens."""
    X, make = MODELS[kind]
    model = make()
    configs, _, probs = enumerate_posterior(model, X)
    K, S = model.n_components, configs.shape[1]
    weights = K ** np.arange(S)[::-1]
    assert (configs @ weights == np.arange(K**S)).all()
    step = chain(model, X, seed=5)
    for _ in range(20):
        step()
    n_draws, thin = 40_000, 2
    codes = np.empty(n_draws, np.int64)
    for d in range(n_draws):
        for _ in range(thin):
            state = step()
        codes[d] = state.blocks[0].z @ weights
    observed = np.bincount(codes, minlength=K**S)
    assert pooled_chisquare(observed, probs * n_draws).pvalue > 1e-3
    wrong = latentfs.DirichletDCA(K, alpha=1.5 * np.asarray(model.alpha), gamma=model.gamma)
    _, _, wrong_probs = enumerate_posterior(wrong, X)
    assert pooled_chisquare(observed, wrong_probs * n_draws).pvalue < 1e-3


@pytest.mark.slow
def test_topic_word_mean_matches_enumeration():
    """E[Φ_kj | w] = Σ_z p(z | w) (γ_j + N_jk)/(Σγ + N_k) by enumeration (asymmetric α: the components are not
    exchangeable, so the chains' unrelabelled means are comparable) against the mean of the Φ draws of 16
    independent chains of 3,000 sweeps. The standard error comes from the spread of the 16 chain means (t with 15
    degrees of freedom); the threshold is the t quantile at a two-sided 1e-4 / 6 (Bonferroni over the entries), a
    false-alarm rate of at most 1e-4 (seeds fixed). The bound also tells the posterior mean from the prior mean."""
    model = latentfs.DirichletDCA(2, alpha=[0.3, 1.2], gamma=0.5)
    X = np.array([[3, 0, 1], [0, 3, 1], [2, 1, 0]])  # 11 tokens: 2048 assignment vectors
    configs, words, probs = enumerate_posterior(model, X)
    exact = np.zeros((2, 3))
    for z, p in zip(configs, probs, strict=True):
        N = np.zeros((3, 2))
        np.add.at(N, (words, z), 1)
        exact += p * ((N + 0.5) / (N.sum(0) + 1.5)).T
    means = []
    for c in range(16):
        step = chain(model, X, seed=100 + c)
        for _ in range(20):
            step()
        means.append(np.mean([np.exp(step().log_phi_t.T) for _ in range(3000)], axis=0))
    mean, se = np.mean(means, 0), np.std(means, 0, ddof=1) / 4.0
    limit = stats.t.ppf(1 - 1e-4 / (2 * 6), df=15)
    assert (np.abs(mean - exact) < limit * se).all(), (mean, exact, se)
    assert np.abs(np.full((2, 3), 1 / 3) - exact).max() > 3 * limit * se.max()


@pytest.mark.slow
def test_topic_word_mean_matches_collapsed_gibbs():
    """A simulated corpus (150 documents × 60 tokens, 30 words, K = 3, α = 0.3, γ = 0.1 fixed): the posterior mean
    of Φ of this engine against ``collapsed_gibbs``'s (learning off; both relabelled, then matched). Each mean's
    Monte-Carlo standard error is estimated by batch means (4 chains × 10 batches of 40 kept sweeps, 40 batches);
    every entry must agree within 4.5 combined standard errors (two-sided normal tail 6.8e-6 per entry, < 1e-3 over
    the 90 entries with Bonferroni; seeds fixed). The planted Φ is recovered too (max error < 0.05)."""
    model = latentfs.DirichletDCA(3, alpha=0.3, gamma=0.1)
    sim = model.simulate(n_documents=150, n_features=30, doc_length=60, seed=4)
    X = sim["counts"]
    opts = {"num_chains": 4, "num_warmup": 150, "num_samples": 400, "seed": 2, "warn": False}
    pc = latentfs.fit(model, X, method="partially_collapsed", **opts).samples("topic_word")
    cg = latentfs.fit(model, X, method="collapsed_gibbs", learn_alpha=False, learn_gamma=False, **opts,
                      log_likelihood=False).samples("topic_word")

    def mean_and_se(draws):
        batches = draws.reshape(4, 10, 40, *draws.shape[2:]).mean(2).reshape(40, *draws.shape[2:])
        return batches.mean(0), batches.std(0, ddof=1) / np.sqrt(40)

    (m1, s1), (m2, s2) = mean_and_se(pc), mean_and_se(cg)
    perm, _ = matching_permutation(m2, m1)
    m1, s1 = m1[perm], s1[perm]
    assert (np.abs(m1 - m2) < 4.5 * np.hypot(s1, s2)).all(), np.abs(m1 - m2).max()
    truth_perm, _ = matching_permutation(sim["topic_word"], m1)
    assert np.abs(m1[truth_perm] - sim["topic_word"]).max() < 0.05


# ----------------------------------------------------------------------------- the public call
def test_registered_for_dirichlet_dca_only():
    assert "partially_collapsed" in latentfs.methods_for(latentfs.DirichletDCA(2))
    assert "partially_collapsed" not in latentfs.methods_for(latentfs.GammaPoissonDCA(2))


def test_bad_input_is_refused_with_a_remedy():
    model, X = corpus()
    Xe = X.copy()
    Xe[3] = 0
    with pytest.raises(DataError, match="empty_documents='drop' cannot renumber the rows of a dask array"):
        latentfs.fit(model, da.from_array(Xe, chunks=(10, -1)), **{**FIT, "empty_documents": "drop"})
    with pytest.raises(DataError, match=r"in row chunk 0 \(input rows 0–9.*empty"):
        latentfs.fit(model, da.from_array(Xe, chunks=(10, -1)), **FIT)
    with pytest.raises(DataError, match="must hold every feature of a document in one chunk"):
        latentfs.fit(model, da.from_array(X, chunks=(10, 7)), **FIT)
    with latentfs.chain_method("parallel"), pytest.raises(DataError, match="chain_method='parallel' would run"):
        latentfs.fit(model, da.from_array(X, chunks=(10, -1)), **FIT)
    with pytest.raises(DataError, match="samples an ungrouped DirichletDCA"):
        latentfs.fit(latentfs.DirichletDCA(2, groups=[0] * 10 + [1] * 10), X, **FIT)
    with pytest.raises(DataError, match="store must name sites"):
        latentfs.fit(model, X, **{**FIT, "store": ("topic_word", "theta")})
    with pytest.raises(DataError, match="n_components must be at most the number of features"):
        latentfs.fit(latentfs.DirichletDCA(30), X, **FIT)


def test_empty_documents_kept_get_their_prior_on_a_dask_array():
    """``empty_documents='keep'`` on a dask array: the empty row stays (its θ draws are Dir(α) draws) and the draws
    equal the in-memory fit's."""
    model, X = corpus()
    Xe = X.copy()
    Xe[3] = 0
    opts = {**FIT, "empty_documents": "keep"}
    mem = latentfs.fit(model, Xe, **opts)
    got = latentfs.fit(model, da.from_array(Xe, chunks=(10, -1)), **opts)
    assert_same_draws(mem, got)
    assert got.samples("doc_topic").shape[2] == 45


def test_a_corpus_too_large_to_expand_is_refused_before_allocating():
    """Each token gets an assignment: 10^12 tokens are refused with their memory estimate, not a MemoryError."""
    X = np.ones((4, 6), dtype=np.int64)
    X[0, 0] = 10**12
    with pytest.raises(DataError, match="tokens"):
        latentfs.fit(latentfs.DirichletDCA(2), X, method="partially_collapsed", num_warmup=2, num_samples=2)


def test_sweep_tables_are_reused_only_for_the_same_phi_and_alpha() -> None:
    """A worker builds a sweep's alias tables once for all its blocks: reused for the same log Φ object and α,
    rebuilt for any other Φ or α (so a second fit in the same process never sees the first one's tables)."""
    from latentfs.inference.dca.partially_collapsed import sweep_tables

    rng = np.random.default_rng(0)
    log_phi_t = np.log(rng.dirichlet(np.ones(7), size=5)).T.copy()  # (J, K) = (7, 5)
    alpha = np.full(5, 0.1)
    first = sweep_tables(log_phi_t, alpha)
    assert sweep_tables(log_phi_t, alpha) is first
    np.testing.assert_allclose(first[3], (np.exp(log_phi_t) * alpha).sum(1), rtol=1e-12)  # A_w = Σ_k α_k Φ_kw
    other = log_phi_t.copy()
    other[0, 0] -= 1.0
    second = sweep_tables(other, alpha)
    assert second is not first
    np.testing.assert_array_equal(second[0], np.exp(other))
    third = sweep_tables(other, 2 * alpha)
    assert third is not second
    np.testing.assert_allclose(third[3], 2 * second[3], rtol=1e-12)


def test_an_in_memory_fit_keeps_no_tables_after_it_returns() -> None:
    from latentfs.inference.dca import partially_collapsed as pc

    model = latentfs.DirichletDCA(3, alpha=0.3, gamma=0.1)
    X = model.simulate(n_documents=40, n_features=20, doc_length=30, seed=1)["counts"]
    latentfs.fit(model, X, method="partially_collapsed", seed=0, num_warmup=3, num_samples=2, warn=False)
    assert pc._TABLES == []


# ----------------------------------------------------------------------------- the start (init)
def test_a_vb_start_gives_the_same_draws_for_any_chunking():
    """``init='vb'`` fits the first tenth of the documents whatever the chunking: in memory, dask's local scheduler
    with 1 and 3 row chunks, and an in-process cluster, the same draws; and not those of the uniform start."""
    model, X = corpus()
    opts = {**FIT, "init": "vb"}
    base = latentfs.fit(model, X, **opts)
    for rows in (45, 15):
        assert_same_draws(base, latentfs.fit(model, da.from_array(X, chunks=(rows, -1)), **opts))
    with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                   dashboard_address=":0") as cluster, distributed.Client(cluster)):
        assert_same_draws(base, latentfs.fit(model, da.from_array(X, chunks=(10, -1)), **opts))
    assert not np.array_equal(base.samples("topic_word"), latentfs.fit(model, X, **FIT).samples("topic_word"))


def test_the_first_sweep_draws_from_the_given_start():
    """With Φ0 the true Φ, the first sweep's assignments follow it: the Φ drawn after one sweep is far closer to
    the truth than after one sweep from the uniform start (a margin of 3× in squared error; deterministic seeds)."""
    model = latentfs.DirichletDCA(3, alpha=0.2, gamma=0.05)
    sim = model.simulate(n_documents=200, n_features=30, doc_length=60, seed=4)
    truth, X = np.asarray(sim["topic_word"]), sim["counts"]
    opts = {"method": "partially_collapsed", "num_chains": 1, "num_warmup": 0, "num_samples": 1, "seed": 3,
            "warn": False}

    def error(post):
        phi = post.samples("topic_word")[0, 0]
        return min(float(((phi[list(p)] - truth) ** 2).sum()) for p in itertools.permutations(range(3)))

    assert 3 * error(latentfs.fit(model, X, init=truth, **opts)) < error(latentfs.fit(model, X, **opts))


def test_a_bad_start_is_refused_with_a_remedy():
    model, X = corpus()
    with pytest.raises(DataError, match=r"init must be None \(a uniform random start\), 'vb' or a"):
        latentfs.fit(model, X, **{**FIT, "init": "kmeans"})
    with pytest.raises(DataError, match=r"init must have one row per component .*\(3, 20\); got shape \(3, 19\)"):
        latentfs.fit(model, X, **{**FIT, "init": np.full((3, 19), 1 / 19)})
    bad = np.full((3, 20), 0.05)
    bad[1, 2] = -0.1
    with pytest.raises(DataError, match="init must hold finite probabilities ≥ 0"):
        latentfs.fit(model, X, **{**FIT, "init": bad})
    # zeros are allowed: raised to the smallest float, so every log is finite
    zeros = np.zeros((3, 20))
    zeros[:, :5] = 0.2
    assert np.isfinite(latentfs.fit(model, X, **{**FIT, "init": zeros}).trace).all()
