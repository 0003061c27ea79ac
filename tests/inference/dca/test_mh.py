"""Metropolis–Hastings with alias tables for DirichletDCA (``method="mh"``): exact, statistical and recovery tiers.

The sampler must leave the collapsed posterior (Buntine & Jakulin eq. 21) invariant: its long-run visit
frequencies are tested against the posterior enumerated over every assignment of tiny corpora, and its posterior
mean of Θ against the enumerated mean and against ``collapsed_gibbs``.
"""

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import gammaln

import latentfs
from latentfs.core.data import DataError
from latentfs.core.driver import InterruptedFitWarning
from latentfs.core.relabel import matching_permutation
from latentfs.evaluate.heldout import document_completion, split_documents
from latentfs.inference.dca import collapsed as dc
from latentfs.inference.dca import mh
from latentfs.inference.dca.common import prepare, resolve_model
from latentfs.inference.dca.mh_kernels import TOPIC_BITS
from latentfs.inference.dca.mh_kernels import kernels as mh_kernels

ROOT = Path(__file__).resolve().parents[3]


# ----------------------------------------------------------------------------- helpers
def setup(model, X, seed=0):
    data = prepare(X)
    model = resolve_model(model, data)
    corpus = mh.MHCorpus.from_data(data)
    hyper = mh.mh_hyper(model, data.n_features)
    gen = torch.Generator().manual_seed(seed)
    return model, corpus, hyper, gen, mh.mh_init(model, corpus, data.n_features, gen)


def seq_log_posterior(model, z, doc_of, words, n_docs, n_words):
    """Eq. (21) in the token-sequence form, up to a constant, directly from the assignments z."""
    K = model.n_components
    gamma = np.broadcast_to(model.gamma, (n_words,)).astype(float)
    c = np.zeros((n_docs, K))
    N = np.zeros((n_words, K))
    np.add.at(c, (doc_of, z), 1)
    np.add.at(N, (words, z), 1)
    return gammaln(c + model.alpha).sum() + (gammaln(gamma[:, None] + N).sum(0) - gammaln(gamma.sum() + N.sum(0))).sum()


def enumerate_posterior(model, corpus, n_words):
    """Every assignment vector of the corpus's tokens and its posterior probability."""
    K, S = model.n_components, corpus.n_tokens
    doc_of = np.repeat(np.arange(corpus.n_documents), np.diff(corpus.doc_ptr))
    configs = np.array(list(itertools.product(range(K), repeat=S)))
    logp = np.array([seq_log_posterior(model, z, doc_of, corpus.words, corpus.n_documents, n_words) for z in configs])
    probs = np.exp(logp - logp.max())
    return configs, probs / probs.sum()


def pooled_chisquare(observed, expected):
    """χ² test with the cells expected to hold fewer than 5 visits pooled into one."""
    small = expected < 5
    obs, exp = observed[~small], expected[~small]
    if small.any():
        obs, exp = np.append(obs, observed[small].sum()), np.append(exp, expected[small].sum())
    return stats.chisquare(obs, exp * obs.sum() / exp.sum())


# 3 documents over 3 words; words 0 and 1 occur several times, so both halves hold some of their tokens and
# the word tables are not empty.
TINY = np.array([[2, 1, 0], [0, 2, 1], [1, 0, 1]])
TINY3 = np.array([[2, 1, 0], [0, 1, 1], [1, 0, 0]])

# Each takes the vocabulary size J (the vector γ has one entry per word).
MODELS = {
    "asym-alpha": lambda J: latentfs.DirichletDCA(2, alpha=[0.4, 0.9], gamma=0.5),
    "vector-gamma": lambda J: latentfs.DirichletDCA(2, alpha=0.3, gamma=np.linspace(0.2, 1.5, J)),
    "k3": lambda J: latentfs.DirichletDCA(3, alpha=[0.5, 0.2, 1.0], gamma=0.3),
}


# ----------------------------------------------------------------------------- exact tier
def test_alias_tables_draw_their_weights(rng):
    kern = mh_kernels()
    for n in (1, 2, 7, 50):
        weights = rng.gamma(0.3, size=n) + (rng.random(n) < 0.3) * 5.0
        prob, alias = np.empty(n), np.empty(n, np.int64)
        total = kern["alias_build"](weights, n, prob, alias, np.empty(n, np.int64), np.empty(n, np.int64))
        assert total == pytest.approx(weights.sum(), rel=1e-14)
        np.testing.assert_allclose(kern["alias_probabilities"](prob, alias, n), weights / weights.sum(),
                                   rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_word_tables_are_the_fixed_halfs_proposal(kind):
    """After a sweep, the tables in the state are those of half 0 (built for the second phase): every word's
    table draws exactly q_w(k) ∝ (λ_w H_wk + γ_w)/(λ H_k + Σγ) restricted to its components, with H the counts
    of half 0, and the dense table draws ∝ 1/(λ H_k + Σγ): the probabilities the acceptance ratio uses."""
    X = latentfs.DirichletDCA(3, alpha=0.5).simulate(n_documents=30, n_features=8, doc_length=20, seed=1)["counts"]
    model, corpus, hyper, gen, state = setup(MODELS[kind](X.shape[1]), X)
    J, K = X.shape[1], model.n_components
    for _ in range(3):
        mh.mh_step(state, corpus, hyper, gen)
    half0 = corpus.by_word[corpus.by_word_ptr[0, 0] : corpus.by_word_ptr[0, -1]]
    H = np.zeros((J, K), np.int64)
    np.add.at(H, (corpus.words[half0], state.assignment[half0]), 1)
    np.testing.assert_array_equal(state.pair_counts[:, :, 1], H)
    np.testing.assert_array_equal(state.half_totals, H.sum(0))
    inv_q = 1.0 / (corpus.half_scale[0] * H.sum(0) + hyper["gamma_sum"])
    alias_probs = mh_kernels()["alias_probabilities"]
    for w in range(J):
        base, n, mass, lam = state.meta[w]
        base, n = int(base), int(n)
        assert lam == corpus.word_scale[0, w]
        weights = lam * H[w] * inv_q
        assert mass == pytest.approx(weights.sum(), rel=1e-12)
        packed = state.table[base : base + n, 1].astype(np.int64)
        topics, alias_topics = packed >> TOPIC_BITS, packed & ((1 << TOPIC_BITS) - 1)
        assert sorted(topics) == sorted(np.flatnonzero(H[w]))
        slots = {k: i for i, k in enumerate(topics)}
        drawn = alias_probs(state.table[base : base + n, 0].copy(), np.array([slots[k] for k in alias_topics]), n)
        np.testing.assert_allclose(drawn, weights[topics] / weights.sum(), rtol=1e-12)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_trace_is_the_collapsed_log_joint(kind):
    X = latentfs.DirichletDCA(3, alpha=0.5).simulate(n_documents=25, n_features=8, doc_length=15, seed=2)["counts"]
    model, corpus, hyper, gen, state = setup(MODELS[kind](X.shape[1]), X)
    for _ in range(4):
        mh.mh_step(state, corpus, hyper, gen)
        ours = mh.mh_log_joint(model, state, corpus, hyper["gamma"])
        dense = dc.collapsed_log_joint(model, state.doc_counts, state.word_counts, corpus.lengths, hyper["gamma"])
        assert ours == pytest.approx(dense, rel=1e-12, abs=1e-9)
    post = latentfs.fit(model, X, method="mh", num_warmup=3, num_samples=2, num_chains=1, warn=False)
    assert np.isfinite(post.trace).all() and post.trace.shape == (1, 5)


def test_count_invariants_after_every_sweep():
    X = latentfs.DirichletDCA(3, alpha=0.5).simulate(n_documents=40, n_features=6, doc_length=25, seed=3)["counts"]
    model, corpus, hyper, gen, state = setup(latentfs.DirichletDCA(4, alpha=0.2, gamma=0.1), X)
    mh.check_mh_invariants(state, corpus)
    for steps, order in ((1, "document"), (3, "word")):
        for _ in range(10):
            mh.mh_step(state, corpus, hyper, gen, mh_steps=steps, order=order)
            mh.check_mh_invariants(state, corpus)
    state.doc_counts[0, 0] += 1  # the helper catches a broken count, so the loop above could fail
    with pytest.raises(RuntimeError, match="document counts"):
        mh.check_mh_invariants(state, corpus)


def test_halves_split_every_word_and_document():
    X = latentfs.DirichletDCA(3, alpha=0.5).simulate(n_documents=30, n_features=10, doc_length=12, seed=4)["counts"]
    corpus = mh.MHCorpus.from_data(prepare(X))
    np.testing.assert_array_equal(np.sort(corpus.by_word), np.arange(corpus.n_tokens))
    in_half = np.diff(corpus.by_word_ptr, axis=1)  # (2, J)
    np.testing.assert_array_equal(in_half.sum(0), X.sum(0))
    assert (in_half[0] - in_half[1] >= 0).all() and (in_half[0] - in_half[1] <= 1).all()  # alternate occurrences
    for i in range(X.shape[0]):
        lo, mid, hi = corpus.doc_ptr[i], corpus.doc_mid[i], corpus.doc_ptr[i + 1]
        np.testing.assert_array_equal(np.bincount(corpus.words[lo:hi], minlength=10), X[i])
        half0 = set(range(lo, mid))
        for h in range(2):
            positions = corpus.by_word[corpus.by_word_ptr[h, 0] : corpus.by_word_ptr[h, -1]]
            mine = set(positions[(positions >= lo) & (positions < hi)].tolist())
            assert mine == (half0 if h == 0 else set(range(mid, hi)))


# ----------------------------------------------------------------------------- statistical tier
@pytest.mark.parametrize(
    "kind,mh_steps,order",
    [(kind, steps, "document") for kind in sorted(MODELS) for steps in (1, 2)] + [("asym-alpha", 2, "word"),
                                                                                  ("k3", 1, "word")],
)
def test_chain_matches_exact_enumeration(kind, mh_steps, order):
    """Tiny corpora (8 tokens, K = 2: 256 assignment vectors; 6 tokens, K = 3: 729), the collapsed posterior by
    enumeration, and a χ² test of the visit counts of one long chain thinned by 3 sweeps (the tiny chain forgets
    its state within a few sweeps). Threshold p < 1e-3: a 0.1% false-alarm rate for independent draws (a little
    more with the residual autocorrelation); the seed is fixed, so the test is deterministic.

    Power: the same visit counts are also tested against the posterior of a model whose α is 1.5 times larger (a
    small change in the target); that must be rejected, so a sampler off by that much would fail here (and a
    word step that leaves q_w out of its acceptance ratio fails with p = 0.0: checked by hand).
    Both visiting orders are covered (``order``).
    """
    X = TINY3 if kind == "k3" else TINY
    model = MODELS[kind](X.shape[1])
    model, corpus, hyper, gen, state = setup(model, X, seed=7)
    configs, probs = enumerate_posterior(model, corpus, X.shape[1])
    K, S = model.n_components, corpus.n_tokens
    n_draws, thin = 40_000, 3
    weights = K ** np.arange(S)[::-1]
    codes = np.empty(n_draws, np.int64)
    for _ in range(20):
        mh.mh_step(state, corpus, hyper, gen, mh_steps=mh_steps, order=order)
    for d in range(n_draws):
        for _ in range(thin):
            mh.mh_step(state, corpus, hyper, gen, mh_steps=mh_steps, order=order)
        codes[d] = state.assignment @ weights
    assert (configs @ weights == np.arange(K**S)).all()
    observed = np.bincount(codes, minlength=K**S)
    result = pooled_chisquare(observed, probs * n_draws)
    assert result.pvalue > 1e-3, result
    wrong = latentfs.DirichletDCA(K, alpha=1.5 * np.asarray(model.alpha), gamma=model.gamma)
    _, wrong_probs = enumerate_posterior(wrong, corpus, X.shape[1])
    assert pooled_chisquare(observed, wrong_probs * n_draws).pvalue < 1e-3


def test_topic_word_mean_matches_enumeration_and_collapsed_gibbs():
    """E[θ_kj | w] = E[(γ_j + N_jk)/(Σγ + N_k)] on a tiny corpus (asymmetric α, so the components are not
    exchangeable and the unrelabelled means are comparable), exactly by enumeration, against the
    Rao-Blackwellised ``extras["topic_word_mean"]`` of 16 independent chains of each engine (``align=False``).

    Each estimate's standard error comes from the spread of its 16 chain means (t with 15 degrees of freedom);
    the threshold is the t quantile at a two-sided 1e-4 / (number of entries) (Bonferroni), so the false-alarm
    rate of each of the three comparisons is at most 1e-4 (the seeds are fixed).
    """
    model = latentfs.DirichletDCA(2, alpha=[0.3, 1.2], gamma=0.5)
    X = np.array([[3, 0, 1], [0, 3, 1], [2, 1, 0]])  # 11 tokens: 2048 assignment vectors
    _, corpus, _, _, _ = setup(model, X)
    configs, probs = enumerate_posterior(model, corpus, 3)
    exact = np.zeros((2, 3))
    for z, p in zip(configs, probs, strict=True):
        N = np.zeros((3, 2))
        np.add.at(N, (corpus.words, z), 1)
        exact += p * ((N + 0.5) / (N.sum(0) + 1.5)).T
    opts = {"num_chains": 16, "num_warmup": 20, "num_samples": 1500, "seed": 3, "align": False, "warn": False,
            "trace": False, "log_likelihood": False}
    means = {}
    for method in ("mh", "collapsed_gibbs"):
        extra = {"learn_alpha": False, "learn_gamma": False} if method == "collapsed_gibbs" else {}
        post = latentfs.fit(model, X, method=method, **opts, **extra)
        chains = post.extras["topic_word_mean"]
        assert chains.shape == (16, 2, 3)
        means[method] = (chains.mean(0), chains.std(0, ddof=1) / np.sqrt(16))
    limit = stats.t.ppf(1 - 1e-4 / (2 * 6), df=15)
    for method, (mean, se) in means.items():
        assert (np.abs(mean - exact) < limit * se).all(), (method, mean, exact, se)
    (m1, s1), (m2, s2) = means["mh"], means["collapsed_gibbs"]
    assert (np.abs(m1 - m2) < limit * np.hypot(s1, s2)).all(), (m1, m2)
    # and the bound is tight enough to mean something: it tells the posterior mean from the prior mean
    assert (np.abs(np.full((2, 3), 1 / 3) - exact).max() > 3 * limit * s1.max())


# ----------------------------------------------------------------------------- the public call
def test_registered_with_the_collapsed_engines_vocabulary():
    assert "mh" in latentfs.methods_for(latentfs.DirichletDCA(2))
    assert "mh" not in latentfs.methods_for(latentfs.GammaPoissonDCA(2))


def test_auto_order_reads_the_smaller_table_at_random():
    assert mh.sweep_order(5000, 20000) == "word" and mh.sweep_order(20000, 2000) == "document"
    X = latentfs.DirichletDCA(2, alpha=0.5).simulate(n_documents=30, n_features=10, doc_length=15, seed=9)["counts"]
    opts = {"method": "mh", "num_warmup": 3, "num_samples": 2, "num_chains": 1, "warn": False}
    auto = latentfs.fit(latentfs.DirichletDCA(2), X, **opts)
    assert auto.diagnostics["sweep"] == "document-major"  # 30 documents ≥ 2 × 10 words
    same = latentfs.fit(latentfs.DirichletDCA(2), X, order="document", **opts)
    other = latentfs.fit(latentfs.DirichletDCA(2), X, order="word", **opts)
    np.testing.assert_array_equal(auto.samples("topic_word"), same.samples("topic_word"))
    assert other.diagnostics["sweep"] == "word-major" and not np.array_equal(auto.trace, other.trace)


def test_same_seed_same_draws():
    X = latentfs.DirichletDCA(3, alpha=0.5).simulate(n_documents=30, n_features=12, doc_length=20, seed=5)["counts"]
    opts = {"method": "mh", "num_warmup": 5, "num_samples": 6, "num_chains": 2, "thin": 2, "warn": False,
            "store": ("topic_word", "doc_topic")}
    model = latentfs.DirichletDCA(3)
    a = latentfs.fit(model, X, seed=11, **opts)
    b = latentfs.fit(model, X, seed=11, **opts)
    c = latentfs.fit(model, X, seed=12, **opts)
    for site in ("topic_word", "doc_topic"):
        np.testing.assert_array_equal(a.samples(site), b.samples(site))
    np.testing.assert_array_equal(a.trace, b.trace)
    np.testing.assert_array_equal(a.log_likelihood, b.log_likelihood)
    assert not np.array_equal(a.trace, c.trace)
    # the default seed is 0: two default calls agree
    d = latentfs.fit(model, X, method="mh", num_warmup=5, num_samples=3, warn=False)
    e = latentfs.fit(model, X, method="mh", num_warmup=5, num_samples=3, warn=False, seed=0)
    np.testing.assert_array_equal(d.samples("topic_word"), e.samples("topic_word"))


def test_result_has_the_sites_and_dims_of_collapsed_gibbs(tmp_path):
    X = latentfs.DirichletDCA(3, alpha=0.5).simulate(n_documents=40, n_features=15, doc_length=30, seed=6)["counts"]
    model = latentfs.DirichletDCA(3, alpha=0.5, gamma=0.1)
    names = [f"w{j}" for j in range(15)]
    opts = {"num_warmup": 20, "num_samples": 8, "num_chains": 2, "seed": 0, "warn": False, "feature_names": names}
    ours = latentfs.fit(model, X, method="mh", **opts)
    ref = latentfs.fit(model, X, method="collapsed_gibbs", learn_alpha=False, learn_gamma=False, **opts)
    assert ours.method == "mh" and ours.model == ref.model == "DirichletDCA"
    assert ours.sites == ref.sites == ["topic_word"]
    assert ours.dims == ref.dims and ours.coords == ref.coords
    assert ours.samples("topic_word").shape == ref.samples("topic_word").shape == (2, 8, 3, 15)
    assert ours.trace.shape == ref.trace.shape
    assert set(ours.extras) == set(ref.extras)
    for name in ref.extras:
        assert np.shape(ours.extras[name]) == np.shape(ref.extras[name]), name
    assert ours.log_likelihood.shape == ref.log_likelihood.shape == (2, 8, 40)
    assert set(ref.diagnostics) - {"init", "n_threads"} <= set(ours.diagnostics)
    assert ours.diagnostics["sweep"] == "document-major"  # 40 documents ≥ 2 × 15 words
    assert ours.alignment is not None and "topic_word" in ours.diagnostics["convergence"]
    assert ours.hyperparameters == ref.hyperparameters
    acc = ours.diagnostics["acceptance"]
    assert all(0 < a <= 1 for a in acc["word"] + acc["document"])
    np.testing.assert_allclose(ours.extras["component_counts"].sum(1), X.sum(1))
    # downstream: transform, score, ArviZ and save/load work unchanged
    assert ours.transform(X[:4]).shape == (4, 3)
    assert np.isfinite(ours.score(X[:10]))
    idata = ours.to_inference_data()
    assert idata.posterior["topic_word"].shape == (2, 8, 3, 15)
    path = tmp_path / "mh.nc"
    ours.save(path)
    back = latentfs.load(path)
    assert back.method == "mh"
    np.testing.assert_array_equal(back.samples("topic_word"), ours.samples("topic_word"))


@pytest.mark.parametrize(
    "option,value,match",
    [
        ("mh_steps", 0, "mh_steps must be an integer ≥ 1; got 0"),
        ("mh_steps", 1.5, "mh_steps must be an integer ≥ 1; got 1.5"),
        ("num_samples", 0, "num_samples must be an integer ≥ 1"),
        ("num_chains", 0, "num_chains must be an integer ≥ 1"),
        ("thin", 0, "thin must be an integer ≥ 1"),
        ("seed", -1, "seed must be an int ≥ 0"),
        ("store", ("doc_scores",), "store must name sites"),
        ("trace", "yes", "trace must be True or False"),
        ("log_likelihood", 1, "log_likelihood must be True or False"),
        ("empty_documents", "skip", "empty_documents must be one of"),
        ("order", "random", "order must be one of"),
        ("sweep", "sparse", "sweep"),
    ],
)
def test_bad_options_are_data_errors(option, value, match):
    with pytest.raises(DataError, match=match):
        latentfs.fit(latentfs.DirichletDCA(2), TINY, method="mh", **{option: value})


def test_models_it_does_not_sample_are_refused():
    with pytest.raises(DataError, match="groups"):
        latentfs.fit(latentfs.DirichletDCA(2, groups=[0, 0, 1]), TINY, method="mh")
    with pytest.raises(DataError, match="method must be one of"):
        latentfs.fit(latentfs.GammaPoissonDCA(2), TINY, method="mh")
    with pytest.raises(DataError, match="model must be a DirichletDCA"):
        mh.fit_mh(latentfs.GammaPoissonDCA(2, beta=1.0), TINY)


def test_interrupt_keeps_the_draws_made(monkeypatch):
    X = latentfs.DirichletDCA(2, alpha=0.5).simulate(n_documents=20, n_features=8, doc_length=15, seed=7)["counts"]
    calls = {"n": 0}
    step = mh.mh_step

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 12:  # chain 0: 5 warm-up + 6 kept sweeps done, then Ctrl-C
            raise KeyboardInterrupt
        return step(*args, **kwargs)

    monkeypatch.setattr(mh, "mh_step", interrupted)
    with pytest.warns(InterruptedFitWarning, match="keeping 1 chain"):
        post = latentfs.fit(latentfs.DirichletDCA(2), X, method="mh", num_warmup=5, num_samples=20, warn=False)
    assert post.diagnostics["interrupted"] and post.samples("topic_word").shape == (1, 6, 2, 8)
    assert np.isfinite(post.extras["topic_word_mean"]).all()


def test_fresh_process_default_fit():
    code = (
        "import numpy as np, latentfs\n"
        "X = latentfs.DirichletDCA(4, alpha=0.2, gamma=0.05).simulate(n_documents=60, n_features=30, "
        "doc_length=40, seed=0)['counts']\n"
        "post = latentfs.fit(latentfs.DirichletDCA(4), X, method='mh', warn=False)\n"
        "print(post.method, post.samples('topic_word').shape, post.diagnostics['mh_steps'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[0] == f"mh (2, {mh.NUM_SAMPLES}, 4, 30) {mh.MH_STEPS}"


# ----------------------------------------------------------------------------- recovery tier
def test_recovers_planted_topics_and_heldout_near_oracle():
    truth = latentfs.DirichletDCA(4, alpha=0.3, gamma=0.2)
    sim = truth.simulate(n_documents=550, n_features=50, doc_length=100, seed=8)
    X = sim["counts"]
    train, test = X[:500], X[500:]
    post = latentfs.fit(latentfs.DirichletDCA(4, alpha=0.3, gamma=0.2), train, method="mh", seed=0, num_warmup=150,
                        num_samples=20, warn=False)
    for estimate in (post.mean("topic_word"), post.extras["topic_word_mean"]):
        perm, _ = matching_permutation(sim["topic_word"], estimate)
        l1 = np.abs(sim["topic_word"] - estimate[perm]).sum(1).mean()
        assert l1 < 0.1, l1
    split = split_documents(test, 0.5, seed=0)
    oracle = document_completion(sim["topic_word"], None, 0.3, split=split)
    ours = document_completion(post.extras["topic_word_mean"], None, 0.3, split=split)
    assert abs(ours - oracle) < 0.02, (ours, oracle)
