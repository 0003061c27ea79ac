"""Collapsed Gibbs for DCA (Buntine & Jakulin 2006, §7.3): exact, statistical and recovery tiers.

Digest §1.10, oracle 8 (Table 4, invariants, GaP ≡ DM at constant β, enumeration) and oracle 9 (recovery).
"""

import itertools
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy import stats
from scipy.special import gammaln

import latentfs
from latentfs.core.data import DataError
from latentfs.core.relabel import matching_permutation
from latentfs.evaluate.heldout import document_completion, split_documents
from latentfs.inference.dca import collapsed as dc
from latentfs.inference.dca.common import prepare


# ----------------------------------------------------------------------------- helpers
def seq_log_posterior(model, z, doc_of, words, n_docs, n_words):
    """Eqs. (20)/(21) in the token-sequence form (the 1/v! terms dropped), computed directly from z."""
    K = model.n_components
    alpha = model.alpha
    gamma = np.broadcast_to(model.gamma, (n_words,)).astype(float)
    c = np.zeros((n_docs, K))
    N = np.zeros((n_words, K))
    np.add.at(c, (doc_of, z), 1)
    np.add.at(N, (words, z), 1)
    doc_part = gammaln(c + alpha)
    if isinstance(model, latentfs.GammaPoissonDCA):
        doc_part = doc_part - (c + alpha) * np.log1p(model.beta)
    theta_part = gammaln(gamma[:, None] + N).sum(0) - gammaln(gamma.sum() + N.sum(0))
    return doc_part.sum() + theta_part.sum()


def tiny_corpus():
    # 2 documents × 3 tokens over 3 words; document 0 repeats word 0.
    return np.array([[2, 1, 0], [0, 1, 2]])


def setup(model, X, sweep, seed=0, init="random"):
    data = prepare(X)
    model = latentfs.inference.dca.common.resolve_model(model, data)
    corpus = dc.CollapsedCorpus.from_data(data)
    hyper = dc._hyper(model, data.n_features)
    gen = torch.Generator().manual_seed(seed)
    state = dc.collapsed_init(model, corpus, data.n_features, gen, sweep=sweep, init=init)
    return model, corpus, hyper, gen, state


MODELS = {
    "dm": lambda: latentfs.DirichletDCA(2, alpha=[0.4, 0.9], gamma=0.5),
    "gap": lambda: latentfs.GammaPoissonDCA(2, alpha=[0.6, 0.3], beta=[0.2, 1.5], gamma=[0.3, 0.5, 0.8]),
}


# ----------------------------------------------------------------------------- exact tier
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_table4_equals_ratio_of_collapsed_posterior(kind, rng):
    model = MODELS[kind]()
    n_docs, n_words, K = 3, 3, 2
    doc_of = np.repeat(np.arange(n_docs), [4, 3, 5])
    words = rng.integers(0, n_words, doc_of.size)
    z = rng.integers(0, K, doc_of.size)
    gamma = np.broadcast_to(model.gamma, (n_words,)).astype(float)
    for t in range(doc_of.size):
        rest = np.delete(np.arange(doc_of.size), t)
        c = np.bincount(z[rest][doc_of[rest] == doc_of[t]], minlength=K)
        N_j = np.bincount(z[rest][words[rest] == words[t]], minlength=K)
        N = np.bincount(z[rest], minlength=K)
        table4 = dc.table4_conditional(model, words[t], c, N_j, N, gamma)
        logp = []
        for k in range(K):
            zk = z.copy()
            zk[t] = k
            logp.append(seq_log_posterior(model, zk, doc_of, words, n_docs, n_words))
        exact = np.exp(np.array(logp) - max(logp))
        np.testing.assert_allclose(table4, exact / exact.sum(), rtol=1e-12)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_trace_is_the_collapsed_log_joint(kind, rng):
    """The engine's trace differs from eq. (20)/(21) by a constant only, and is normalised (one-token corpus)."""
    model = MODELS[kind]()
    X = np.array([[1, 2, 0], [0, 1, 1], [3, 0, 1]])
    model, corpus, hyper, gen, state = setup(model, X, "sparse")
    doc_of = np.repeat(np.arange(3), np.diff(corpus.doc_ptr))
    diffs = []
    for _ in range(5):
        dc.collapsed_step(state, corpus, hyper, gen, sweep="sparse")
        ours = dc.collapsed_log_joint(model, state.doc_counts, state.word_counts, corpus.lengths, hyper["gamma"])
        diffs.append(ours - seq_log_posterior(model, state.assignment, doc_of, corpus.words, 3, 3))
    np.testing.assert_allclose(diffs, diffs[0], rtol=0, atol=1e-9)
    # One document with one token of word j: Σ_k p(w, k) is the marginal probability of that sequence.
    gamma = np.broadcast_to(model.gamma, (3,)).astype(float)
    one_doc = np.eye(2, dtype=np.int32)  # row k: the token in component k
    word_counts = [np.zeros((3, 2), np.int32) for _ in range(2)]
    for k in range(2):
        word_counts[k][0, k] = 1
    total = np.logaddexp.reduce([
        dc.collapsed_log_joint(model, one_doc[[k]], word_counts[k], np.array([1.0]), gamma) for k in range(2)
    ])
    if isinstance(model, latentfs.GammaPoissonDCA):
        # p(L = 1, word 0) = E[θ_0k] Σ_k E[l_k e^{-Σ l}], scores l_k ~ Gamma(α_k, β_k).
        a, b = model.alpha, model.beta
        none = np.prod((b / (1 + b)) ** a)
        expected = gamma[0] / gamma.sum() * none * np.sum(a / (1 + b))
    else:
        expected = gamma[0] / gamma.sum()
    np.testing.assert_allclose(total, np.log(expected), rtol=1e-12)


@pytest.mark.parametrize("init", sorted(dc.INITS))
@pytest.mark.parametrize("sweep", dc.SWEEPS)
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_count_invariants_after_every_sweep(kind, sweep, init):
    model = MODELS[kind]()
    X = latentfs.DirichletDCA(2, alpha=0.5).simulate(n_documents=40, n_features=3, doc_length=25, seed=3)["counts"]
    model, corpus, hyper, gen, state = setup(model, X, sweep, init=init)
    dc.check_invariants(state, corpus)
    for _ in range(25):
        dc.collapsed_step(state, corpus, hyper, gen, sweep=sweep)
        dc.check_invariants(state, corpus)
    # The helper catches a broken count (so the loop above could fail).
    state.doc_counts[0, 0] += 1
    with pytest.raises(RuntimeError, match="document totals"):
        dc.check_invariants(state, corpus)


def test_invariant_helper_catches_a_stale_word_list():
    model, corpus, hyper, gen, state = setup(MODELS["dm"](), tiny_corpus(), "sparse")
    state.word_list[2 * state.word_ptr[0]] = 0  # word 0 occurs, so its list cannot be empty
    with pytest.raises(RuntimeError, match="component list"):
        dc.check_invariants(state, corpus)


@pytest.mark.parametrize("sweep", dc.SWEEPS)
def test_constant_beta_gap_and_dm_chains_identical(sweep):
    X = latentfs.DirichletDCA(3, alpha=0.5).simulate(n_documents=30, n_features=12, doc_length=20, seed=1)["counts"]
    dm = latentfs.DirichletDCA(3, alpha=[0.2, 0.5, 1.0], gamma=0.3)
    chains = {}
    for beta in (0.7, [0.7, 0.7, 0.7], [0.7, 0.7, 2.0]):
        gap = latentfs.GammaPoissonDCA(3, alpha=[0.2, 0.5, 1.0], beta=beta, gamma=0.3)
        chains[str(beta)] = setup(gap, X, sweep, seed=5)
    ref = setup(dm, X, sweep, seed=5)
    states = {}
    for name, (_, corpus, hyper, gen, state) in {**chains, "dm": ref}.items():
        for _ in range(20):
            dc.collapsed_step(state, corpus, hyper, gen, sweep=sweep)
        states[name] = state.assignment.copy()
    np.testing.assert_array_equal(states["0.7"], states["dm"])
    np.testing.assert_array_equal(states["[0.7, 0.7, 0.7]"], states["dm"])
    assert not np.array_equal(states["[0.7, 0.7, 2.0]"], states["dm"])  # the test can tell chains apart


def test_constant_beta_gap_and_dm_draws_identical_through_fit():
    X = latentfs.DirichletDCA(2, alpha=0.5).simulate(n_documents=20, n_features=8, doc_length=15, seed=2)["counts"]
    opts = {"method": "collapsed_gibbs", "seed": 3, "num_warmup": 10, "num_samples": 4, "num_chains": 2,
            "warn": False, "learn_alpha": False, "learn_gamma": False}  # the identity holds under a fixed prior
    dm = latentfs.fit(latentfs.DirichletDCA(2, alpha=0.5, gamma=0.4), X, **opts)
    gap = latentfs.fit(latentfs.GammaPoissonDCA(2, alpha=0.5, beta=0.1, gamma=0.4), X, **opts)
    np.testing.assert_array_equal(dm.samples("topic_word"), gap.samples("topic_word"))
    # The collapsed joints differ by a constant.
    np.testing.assert_allclose(dm.trace - gap.trace, (dm.trace - gap.trace)[0, 0])


def test_seeded_and_shaped():
    model = latentfs.GammaPoissonDCA(2, alpha=0.5)
    X = latentfs.DirichletDCA(2, alpha=0.5).simulate(n_documents=15, n_features=6, doc_length=12, seed=4)["counts"]
    opts = {"method": "collapsed_gibbs", "num_warmup": 5, "num_samples": 6, "num_chains": 3, "thin": 2,
            "store": ("topic_word", "doc_scores"), "warn": False}
    a = latentfs.fit(model, X, seed=11, **opts)
    b = latentfs.fit(model, X, seed=11, **opts)
    c = latentfs.fit(model, X, seed=12, **opts)
    np.testing.assert_array_equal(a.samples("doc_scores"), b.samples("doc_scores"))
    np.testing.assert_array_equal(a.trace, b.trace)
    assert not np.array_equal(a.trace, c.trace)
    assert a.samples("topic_word").shape == (3, 6, 2, 6)
    assert a.samples("doc_scores").shape == (3, 6, 15, 2)
    assert a.trace.shape == (3, 5 + 6 * 2)
    assert a.log_likelihood.shape == (3, 6, 15)
    assert a.extras["topic_word_mean"].shape == (2, 6)  # chain-averaged after relabelling
    np.testing.assert_allclose(a.extras["component_counts"].sum(-1), X.sum(1))
    np.testing.assert_allclose(a.extras["doc_scores_mean"], a.mean("doc_scores"), atol=1e-12)
    np.testing.assert_allclose(a.samples("topic_word").sum(-1), 1.0)
    assert a.hyperparameters["beta"] is not None and a.diagnostics["sweep"] == "sparse"


# ----------------------------------------------------------------------------- statistical tier
@pytest.mark.parametrize(
    "kind,sweep", [("dm", "reference"), ("dm", "sparse"), ("gap", "reference"), ("gap", "sparse")]
)
def test_chain_matches_exact_enumeration(kind, sweep):
    """2 documents × 3 tokens, K = 2: 64 assignment vectors, their probabilities by enumerating (20)/(21).

    A χ² test of the visit counts of a long chain, thinned by 5 sweeps (this tiny chain forgets its state
    within a few sweeps, so the thinned states are close to independent). Threshold p < 1e-3: a 0.1%
    false-alarm rate for independent draws (a little more with the residual autocorrelation); the seed
    is fixed, so the test is deterministic.
    """
    model, corpus, hyper, gen, state = setup(MODELS[kind](), tiny_corpus(), sweep, seed=7)
    doc_of = np.repeat(np.arange(2), np.diff(corpus.doc_ptr))
    configs = np.array(list(itertools.product(range(2), repeat=6)))
    logp = np.array([seq_log_posterior(model, z, doc_of, corpus.words, 2, 3) for z in configs])
    probs = np.exp(logp - logp.max())
    probs /= probs.sum()
    n_draws, thin = 12_000, 5
    codes = np.empty(n_draws, np.int64)
    weights = 2 ** np.arange(6)[::-1]
    for _ in range(50):
        dc.collapsed_step(state, corpus, hyper, gen, sweep=sweep)
    for d in range(n_draws):
        for _ in range(thin):
            dc.collapsed_step(state, corpus, hyper, gen, sweep=sweep)
        codes[d] = state.assignment @ weights
    observed = np.bincount(codes, minlength=64)
    expected = probs * n_draws
    # Pool the cells expected to hold fewer than 5 visits into one.
    small = expected < 5
    obs, exp = observed[~small], expected[~small]
    if small.any():
        obs, exp = np.append(obs, observed[small].sum()), np.append(exp, expected[small].sum())
    result = stats.chisquare(obs, exp)
    assert result.pvalue > 1e-3, result


# ----------------------------------------------------------------------------- recovery tier
@pytest.mark.parametrize("kind", ["dm", "gap"])
def test_recovers_planted_topics_and_heldout_near_oracle(kind):
    truth = latentfs.DirichletDCA(4, alpha=0.3, gamma=0.2)
    sim = truth.simulate(n_documents=550, n_features=50, doc_length=100, seed=8)
    X = sim["counts"]
    train, test = X[:500], X[500:]
    model = (latentfs.DirichletDCA(4, alpha=0.3, gamma=0.2) if kind == "dm"
             else latentfs.GammaPoissonDCA(4, alpha=0.3, gamma=0.2))
    post = latentfs.fit(model, train, method="collapsed_gibbs", seed=0, num_warmup=150, num_samples=20, num_chains=2,
                        warn=False)
    for estimate in (post.mean("topic_word"), post.extras["topic_word_mean"]):
        perm, _ = matching_permutation(sim["topic_word"], estimate)
        l1 = np.abs(sim["topic_word"] - estimate[perm]).sum(1).mean()
        assert l1 < 0.1, l1
    split = split_documents(test, 0.5, seed=0)
    oracle = document_completion(sim["topic_word"], None, 0.3, split=split)
    ours = document_completion(post.extras["topic_word_mean"], None, 0.3, split=split)
    assert abs(ours - oracle) < 0.02, (ours, oracle)


def test_dense_and_sparse_inputs_agree():
    X = latentfs.DirichletDCA(2, alpha=0.5).simulate(n_documents=10, n_features=5, doc_length=8, seed=6)["counts"]
    opts = {"method": "collapsed_gibbs", "seed": 0, "num_warmup": 3, "num_samples": 2, "num_chains": 1,
            "store": ("topic_word", "doc_topic"), "warn": False}
    model = latentfs.DirichletDCA(2)
    a = latentfs.fit(model, X, **opts)
    b = latentfs.fit(model, sp.csr_matrix(X), **opts)
    np.testing.assert_array_equal(a.samples("doc_topic"), b.samples("doc_topic"))


# ----------------------------------------------------------------------------- bad input
def test_bad_sweep_and_store():
    X = tiny_corpus()
    with pytest.raises(DataError, match="sweep must be one of"):
        latentfs.fit(latentfs.DirichletDCA(2), X, method="collapsed_gibbs", sweep="alias")
    with pytest.raises(DataError, match="init must be one of"):
        latentfs.fit(latentfs.DirichletDCA(2), X, method="collapsed_gibbs", init="vb")
    with pytest.raises(DataError, match="store must name sites"):
        latentfs.fit(latentfs.DirichletDCA(2), X, method="collapsed_gibbs", store=("doc_scores",))
    with pytest.raises(DataError, match="num_samples must be an integer"):
        latentfs.fit(latentfs.DirichletDCA(2), X, method="collapsed_gibbs", num_samples=0)


def test_table4_needs_beta():
    with pytest.raises(DataError, match="beta of GammaPoissonDCA is not set"):
        dc.table4_conditional(latentfs.GammaPoissonDCA(2), 0, [1, 0], [1, 0], [2, 1], np.ones(3))


def test_missing_numba_is_a_clear_error(monkeypatch):
    dc._kernels.cache_clear()
    monkeypatch.setitem(sys.modules, "numba", None)
    try:
        with pytest.raises(DataError, match="pip install numba"):
            dc._kernels()
    finally:
        monkeypatch.undo()
        dc._kernels.cache_clear()


@pytest.mark.slow
@pytest.mark.parametrize("sweep", ["reference", "sparse"])
def test_geweke_collapsed_sampler_with_word_resampling_recovers_the_prior(sweep):
    """Geweke (2004) successive-conditional simulator in the collapsed space.

    Each iteration resamples every token's word from its collapsed predictive given the assignments
    (a Pólya urn per component: p(w_t = j | z, w_-t) ∝ γ_j + N_jk without token t), then runs one sweep of
    the sampler under test on the new words. If Table 4 is right, the chain's stationary law is the
    model's prior over (z, w), whose moments are known: E[c_ik] = L α_k / Σα and E[#tokens of word j] =
    S γ_j / Σγ. Four statistics, batch-means standard errors over 4 chains; |z| < 4.5 for each has a
    family-wise false-alarm rate below 3e-5.
    """
    from latentfs.inference.dca.collapsed import (
        CollapsedCorpus,
        CollapsedState,
        _dense_to_lists,
        _hyper,
        _run_sweep,
        check_invariants,
    )

    model = latentfs.DirichletDCA(2, alpha=[0.6, 1.4], gamma=[0.5, 1.0, 1.5])
    J, K, lengths = 3, 2, np.array([3, 4])
    hyper = _hyper(model, J)
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    S = int(lengths.sum())
    records = []
    for chain in range(4):
        rng = np.random.default_rng(50 + chain)
        gen = torch.Generator().manual_seed(60 + chain)
        z = rng.integers(0, K, size=S).astype(np.int32)
        words = rng.integers(0, J, size=S).astype(np.int32)
        history = []
        for it in range(6000):
            # words | assignments, one token at a time (Pólya urn of the token's component)
            for t in range(S):
                k = z[t]
                counts = np.bincount(words[z == k], minlength=J).astype(float)
                counts[words[t]] -= 1
                p = hyper["gamma"] + counts
                words[t] = rng.choice(J, p=p / p.sum())
            doc_of = np.repeat(np.arange(lengths.size), lengths)
            ndk = np.zeros((lengths.size, K), dtype=np.int32)
            np.add.at(ndk, (doc_of, z), 1)
            nwk = np.zeros((J, K), dtype=np.int32)
            np.add.at(nwk, (words, z), 1)
            nk = nwk.sum(0).astype(np.int64)
            if sweep == "sparse":
                totals = np.bincount(words, minlength=J)
                room = np.minimum(K, totals)
                wptr = np.concatenate([[0], np.cumsum(room + 1)]).astype(np.int64)
                wlist = np.zeros(2 * int(wptr[-1]), dtype=np.int32)
                _dense_to_lists(nwk, wptr, wlist)
            else:
                wptr = wlist = None
            corpus = CollapsedCorpus(doc_ptr, words.copy(), lengths.astype(float), np.bincount(words, minlength=J).astype(np.int64))
            state = CollapsedState(z, ndk, nwk, nk, wptr, wlist, gen)
            _run_sweep(state, corpus, hyper, gen, sweep, first=False)
            if it % 500 == 0:
                check_invariants(state, corpus)
            z = state.assignment
            history.append((ndk[0, 0], ndk[1, 1], np.sum(words == 0), np.sum(words == 2)))
        records.append(np.array(history[500:], dtype=float))
    a, g = model.alpha, model.gamma_vector(J)
    expected = [lengths[0] * a[0] / a.sum(), lengths[1] * a[1] / a.sum(), S * g[0] / g.sum(), S * g[2] / g.sum()]
    for col, mean in enumerate(expected):
        chains = [s[:, col] for s in records]
        batches = [c[: len(c) // 20 * 20].reshape(20, -1).mean(1) for c in chains]
        se = np.sqrt(sum(b.var(ddof=1) / 20 for b in batches)) / 4
        observed = np.mean([c.mean() for c in chains])
        assert abs(observed - mean) / se < 4.5, (col, observed, mean, se)


@pytest.mark.parametrize(("sweep", "init", "digest"), [
    ("sparse", "random", "23046593d56cd158"),
    ("sparse", "sequential", "f4e55f575f41e06f"),
    ("reference", "random", "d465ff3a8cbb842c"),
])
def test_one_thread_chain_unchanged(sweep, init, digest):
    # Golden digests of the assignments after 15 sweeps, recorded before the threaded sweep (issue 15, item 4)
    # was added: n_threads=1 (the default) must stay bitwise the same chain for a given seed.
    import hashlib

    model = latentfs.DirichletDCA(5, alpha=0.2, gamma=0.05)
    X = model.simulate(n_documents=60, n_features=40, doc_length=50, seed=3)["counts"]
    model, corpus, hyper, gen, state = setup(model, X, sweep, seed=7, init=init)
    for _ in range(15):
        dc.collapsed_step(state, corpus, hyper, gen, sweep=sweep)
    assert hashlib.sha256(np.ascontiguousarray(state.assignment).tobytes()).hexdigest()[:16] == digest
