"""``chain_method="parallel"``: chains and restarts in other processes give the sequential result (issue 16, item 3);
``"threads"`` and the default ``"auto"``: chains in threads of this process give it too (issue 15, item 4).

Every sampler and a restart engine of every family is fitted twice with the same seed, once chain after
chain and once each chain (restart) in a worker process; the draws, traces and extras must be identical.
The calling process runs torch and BLAS with one thread for these tests, so each worker does too
(:mod:`latentfs.core.parallel`): equality is then exact, whatever the machine.
"""

import warnings

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

import latentfs
from latentfs.core.data import DataError
from latentfs.core.driver import ConvergenceWarning, InterruptedFitWarning, run_optimizer, run_restarts, run_sampler
from latentfs.core.parallel import chain_method, current_chain_method
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA
from latentfs.models.factor import FactorAnalysis
from latentfs.models.hmm import GaussianHMM
from latentfs.models.hmrf import HiddenPotts
from latentfs.models.mixture import GaussianMixture, LatentClass, UnivariateMixtureK
from latentfs.models.plsa import PLSA


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


def _counts():
    return DirichletDCA(3, alpha=0.3).simulate(n_documents=50, n_features=24, doc_length=30, seed=1)["counts"]


def _hmm():
    truth = {"startprob": np.array([0.5, 0.5]), "transmat": np.array([[0.9, 0.1], [0.3, 0.7]]),
             "means": np.array([[-3.0], [3.0]]), "precision": np.array([[1.0], [1.0]])}
    sim = GaussianHMM(2).simulate(3, 40, params=truth, seed=1)
    return sim["data"], {"lengths": sim["lengths"]}


def _potts():
    sim = HiddenPotts(2).simulate((12, 12), params={"interaction": 0.8, "means": [[0.0], [2.0]],
                                                   "precision": [[2.0], [2.0]]}, seed=0)
    return sim["data"]


SAMPLE = dict(num_chains=2, num_warmup=15, num_samples=10, seed=5, warn=False, progress=False)

# (id, model, data factory, method, options): every sampler of the library, and a restart engine per family
CASES = [
    ("dca-collapsed", DirichletDCA(3), lambda: (_counts(), {}), "collapsed_gibbs", SAMPLE),
    ("dca-gibbs-gap", GammaPoissonDCA(3), lambda: (_counts(), {}), "gibbs", SAMPLE),
    ("fa-gibbs", FactorAnalysis(2, loading_scale=1.0, noise_shape=2.0, noise_scale=1.0), lambda: (np.random.default_rng(0).normal(size=(40, 5)), {}), "gibbs", SAMPLE),
    ("latent-class-gibbs", LatentClass(2, n_levels=3),
     lambda: (LatentClass(2, n_levels=3).simulate(40, 4, seed=0)["items"], {}), "gibbs", SAMPLE),
    ("hmm-gibbs", GaussianHMM(2), _hmm, "gibbs", SAMPLE),
    ("potts-gibbs", HiddenPotts(2), lambda: (_potts(), {}), "gibbs", SAMPLE),
    ("rjmcmc", UnivariateMixtureK(max_components=4),
     lambda: (np.random.default_rng(2).normal(0.0, 1.0, 30), {}), "rjmcmc", SAMPLE),
    ("dca-vb-restarts", DirichletDCA(3), lambda: (_counts(), {}), "vb",
     dict(n_init=3, seed=5, max_iter=15, warn=False, num_ll_draws=0)),
    ("plsa-restarts", PLSA(3), lambda: (_counts(), {}), "em", dict(n_init=3, seed=5, max_iter=15, warn=False)),
    ("fa-em-restarts", FactorAnalysis(2), lambda: (np.random.default_rng(0).normal(size=(40, 5)), {}), "em",
     dict(n_init=3, seed=5, max_iter=15, warn=False)),
    ("mixture-vb-restarts", GaussianMixture(2),
     lambda: (GaussianMixture(2).simulate(60, 2, seed=0)["data"], {}), "vb",
     dict(n_init=3, seed=5, max_iter=15, warn=False)),
    ("hmm-em-restarts", GaussianHMM(2), _hmm, "em", dict(n_init=3, seed=5, max_iter=15, warn=False)),
]


def _arrays(post):
    out = {f"site:{s}": post.samples(s) for s in post.sites}
    out["trace"] = np.asarray(post.trace)
    for name, value in post.extras.items():
        if isinstance(value, np.ndarray) and value.dtype != object:
            out[f"extra:{name}"] = value
    return out


@pytest.mark.parametrize(("model", "make", "method", "options"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parallel_equals_sequential(model, make, method, options):
    X, more = make()
    seq = latentfs.fit(model, X, method=method, **more, **options)
    par = latentfs.fit(model, X, method=method, chain_method="parallel", **more, **options)
    a, b = _arrays(seq), _arrays(par)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)
    assert par.diagnostics["chain_method"] == "parallel" and "chain_method" not in seq.diagnostics
    assert current_chain_method() == "auto"  # the context ends with the fit


@pytest.mark.parametrize(("model", "make", "method", "options"),
                         [c[1:] for c in CASES if "num_chains" in c[4]], ids=[c[0] for c in CASES if "num_chains" in c[4]])
def test_chains_in_threads_equal_sequential(model, make, method, options):
    # chains side by side in threads of this process (as many at once as chains and cores): the same draws
    X, more = make()
    seq = latentfs.fit(model, X, method=method, chain_method="sequential", **more, **options)
    thr = latentfs.fit(model, X, method=method, chain_method="threads", **more, **options)
    a, b = _arrays(seq), _arrays(thr)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)
    assert thr.diagnostics["chain_method"] == "threads" and "chain_method" not in seq.diagnostics


def test_auto_runs_large_collapsed_chains_in_threads(monkeypatch):
    # chain_method="auto" (the default): collapsed Gibbs runs its chains in threads once tokens × K reach
    # CHAIN_THREADS_WORK and torch may use two threads; the draws are the sequential ones
    from latentfs.inference.dca import collapsed

    X = _counts()
    seq = latentfs.fit(DirichletDCA(3), X, method="collapsed_gibbs", **SAMPLE)  # 1,500 tokens × 3: below it
    assert "chain_method" not in seq.diagnostics
    monkeypatch.setattr(collapsed, "CHAIN_THREADS_WORK", 1000)
    assert "chain_method" not in latentfs.fit(DirichletDCA(3), X, method="collapsed_gibbs", **SAMPLE).diagnostics
    torch.set_num_threads(2)  # the module's fixture restores one thread for the other tests
    try:
        auto = latentfs.fit(DirichletDCA(3), X, method="collapsed_gibbs", **SAMPLE)
        one = latentfs.fit(DirichletDCA(3), X, method="collapsed_gibbs", chain_method="sequential", **SAMPLE)
    finally:
        torch.set_num_threads(1)
    assert auto.diagnostics["chain_method"] == "threads" and "chain_method" not in one.diagnostics
    a, b = _arrays(one), _arrays(auto)
    for name in a:
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)


def test_chains_in_threads_interrupted_keep_their_draws():
    # Ctrl-C inside a chain stops every chain after its current step; each keeps what it made, truncated to
    # the shortest, and a chain stopped before its first kept draw is dropped. How far the other chain got
    # depends on timing, so only the bounds are fixed; every kept draw is the sequential run's.
    init, step, collect = _toy_sampler(stop_after=12)
    with chain_method("threads"), pytest.warns(InterruptedFitWarning, match="keeping"):
        run = run_sampler(init, step, collect, num_chains=2, num_warmup=5, num_samples=20, seed=1, progress=False)
    assert run.interrupted and run.chain_method == "threads" and 1 <= run.n_draws <= 7
    ref = run_sampler(init, *_toy_sampler()[1:], num_chains=2, num_warmup=5, num_samples=20, seed=1, progress=False)
    kept = run.draws["x"]
    assert kept.shape[0] in (1, 2)
    for chain in kept:
        assert any(np.array_equal(chain, r[: run.n_draws]) for r in ref.draws["x"])


def test_an_error_in_a_threaded_chain_is_raised():
    def init(gen):
        return 0

    def step(state, gen):
        if state == 3:
            raise ValueError("chain broke")
        return state + 1, 0.0

    with chain_method("threads"), pytest.raises(ValueError, match="chain broke"):
        run_sampler(init, step, lambda s: {"x": np.zeros(1)}, num_chains=2, num_warmup=1, num_samples=5, seed=0,
                    progress=False)


def _toy_sampler(stop_after=None, warn_at=None):
    def init(gen):
        return {"t": 0, "x": torch.zeros(2, dtype=torch.float64)}

    def step(state, gen):
        t = state["t"] + 1
        if stop_after is not None and t > stop_after:
            raise KeyboardInterrupt
        if warn_at is not None and t == warn_at:
            warnings.warn("a chain saw something", UserWarning, stacklevel=1)
        x = state["x"] + torch.randn(2, generator=gen, dtype=torch.float64)
        return {"t": t, "x": x}, float(x.sum())

    return init, step, lambda state: {"x": state["x"].numpy().copy()}


def test_parallel_chains_interrupted_in_the_workers_keep_their_draws():
    init, step, collect = _toy_sampler(stop_after=12)
    with chain_method("parallel"), pytest.warns(InterruptedFitWarning, match="keeping 3 chain"):
        run = run_sampler(init, step, collect, num_chains=3, num_warmup=5, num_samples=20, seed=1, progress=False)
    assert run.interrupted and run.n_draws == 7 and run.draws["x"].shape == (3, 7, 2)
    ref = run_sampler(init, *_toy_sampler()[1:], num_chains=3, num_warmup=5, num_samples=20, seed=1, progress=False)
    np.testing.assert_array_equal(run.draws["x"], ref.draws["x"][:, :7])


def test_a_warning_inside_a_worker_chain_reaches_the_caller_once():
    init, step, collect = _toy_sampler(warn_at=3)
    with chain_method("parallel"), pytest.warns(UserWarning, match="a chain saw something") as seen:
        run_sampler(init, step, collect, num_chains=2, num_warmup=2, num_samples=3, seed=1, progress=False)
    assert sum("a chain saw something" in str(w.message) for w in seen) == 1


def test_parallel_restarts_keep_the_sequential_best_and_warn_once():
    def one(r):
        def step(x):
            return x * 0.5, -float(abs(x - r))  # restart r's objective rises to -r·(…); restart 0 is best

        return run_optimizer(float(r + 1), step, max_iter=3, tol=0.0, warn=False, progress=False)

    with pytest.warns(ConvergenceWarning, match="best of 3 start"):
        seq, seq_runs = run_restarts(3, one, desc="toy")
    with chain_method("parallel"), pytest.warns(ConvergenceWarning, match="best of 3 start") as seen:
        par, par_runs = run_restarts(3, one, desc="toy")
    assert len([w for w in seen if issubclass(w.category, ConvergenceWarning)]) == 1
    assert [r.info["restart"] for r in par_runs] == [0, 1, 2]
    assert par.info["restart"] == seq.info["restart"]
    np.testing.assert_array_equal(par.trace, seq.trace)


def test_bad_chain_method_is_refused_with_the_choices():
    with pytest.raises(DataError, match=r"chain_method must be one of \['auto', 'sequential', 'threads', 'parallel'\]; "
                                        r"got 'thread'"):
        latentfs.fit(DirichletDCA(2), _counts(), method="vb", chain_method="thread")


def test_the_context_manager_reaches_estimator_fits():
    X = _counts()
    seq = latentfs.DCA(3, method="collapsed_gibbs", num_chains=2, num_warmup=15, num_samples=10, seed=5)
    par = latentfs.DCA(3, method="collapsed_gibbs", num_chains=2, num_warmup=15, num_samples=10, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 15 warm-up sweeps: alpha still moving, by design
        seq.fit(X)
        with latentfs.chain_method("parallel"):
            par.fit(X)
    assert par.posterior_.diagnostics["chain_method"] == "parallel"
    np.testing.assert_array_equal(par.posterior_.samples("topic_word"), seq.posterior_.samples("topic_word"))
    np.testing.assert_array_equal(par.transform(X), seq.transform(X))


def test_on_an_active_dask_client_the_chains_run_on_its_workers():
    import distributed  # the latentfs[dask] extra: installed wherever the tests run (no skip)

    X = _counts()
    seq = latentfs.fit(DirichletDCA(3), X, method="collapsed_gibbs", **SAMPLE)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            distributed.Client(cluster), distributed.get_task_stream() as stream:
        par = latentfs.fit(DirichletDCA(3), X, method="collapsed_gibbs", chain_method="parallel", **SAMPLE)
    chain_tasks = [t for t in stream.data if t["key"].startswith("_in_worker")]
    assert len(chain_tasks) == 2  # one task per chain, on the cluster
    for name, value in _arrays(seq).items():
        np.testing.assert_array_equal(_arrays(par)[name], value, err_msg=name)
