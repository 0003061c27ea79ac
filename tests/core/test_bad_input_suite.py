"""The bad-input suite (issue 19 item 7): every public entry point of the DCA, PLSA, factor and HDDA families,
with the classes of malformed input of the issue, must raise a DataError naming the argument and the rule, or
give a correct finite result. ``scripts/hostile_campaign.py`` runs the same classes, wider, and counts.
"""

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core.data import DataError
from latentfs.core.registry import _ENGINES, _load_engines, engine_options

_RNG = np.random.default_rng(0)
COUNTS = _RNG.poisson(3.0, size=(16, 6)) + np.eye(16, 6, dtype=np.int64)
COUNTS[:, 0] += 1
CONT = _RNG.normal(size=(30, 5)) + np.repeat([[0.0], [4.0]], 15, axis=0)

FAST = {"max_iter": 5, "num_samples": 3, "num_warmup": 2, "num_chains": 1, "warn": False, "seed": 0}

# (label, model factory, method, data): the engines of the families this suite covers.
ENGINES = [
    ("DirichletDCA/vb", lambda: latentfs.DirichletDCA(2), "vb", COUNTS),
    ("DirichletDCA/gibbs", lambda: latentfs.DirichletDCA(2), "gibbs", COUNTS),
    ("DirichletDCA/map", lambda: latentfs.DirichletDCA(2), "map", COUNTS),
    ("DirichletDCA/plsi_em", lambda: latentfs.DirichletDCA(2), "plsi_em", COUNTS),
    ("DirichletDCA/online_vb", lambda: latentfs.DirichletDCA(2), "online_vb", COUNTS),
    ("GammaPoissonDCA/nmf_kl", lambda: latentfs.GammaPoissonDCA(2), "nmf_kl", COUNTS),
    ("GammaPoissonDCA/vb", lambda: latentfs.GammaPoissonDCA(2), "vb", COUNTS),
    ("ConditionalGammaPoissonDCA/vb", lambda: latentfs.ConditionalGammaPoissonDCA(2), "vb", COUNTS),
    ("ConditionalGammaPoissonDCA/gibbs", lambda: latentfs.ConditionalGammaPoissonDCA(2), "gibbs", COUNTS),
    ("PLSA/em", lambda: latentfs.PLSA(2), "em", COUNTS),
    ("PLSA/tem", lambda: latentfs.PLSA(2), "tem", COUNTS),
    ("FactorAnalysis/em", lambda: latentfs.FactorAnalysis(2), "em", CONT),
    ("FactorAnalysis/map", lambda: latentfs.FactorAnalysis(2), "map", CONT),
    ("FactorAnalysis/gibbs",
     lambda: latentfs.FactorAnalysis(2, loading_scale=1.0, noise_shape=2.0, noise_scale=1.0), "gibbs", CONT),
    ("MixtureOfFactorAnalyzers/em", lambda: latentfs.MixtureOfFactorAnalyzers(2, 1), "em", CONT),
    ("HDDAModel/em", lambda: latentfs.HDDAModel(2), "em", CONT),
]
IDS = [e[0] for e in ENGINES]


def _accepted(model, method):
    _load_engines()
    for cls in type(model).__mro__:
        engine = _ENGINES.get((cls, method))
        if engine is not None:
            return engine_options(engine)
    raise AssertionError(f"no engine for {type(model).__name__}/{method}")


def _fit(make, method, data, **override):
    model = make()
    accepted = _accepted(model, method)
    assert accepted is not None, "every engine here declares its options (the registry checks their names)"
    options = {k: v for k, v in {**FAST, **override}.items() if k in accepted}
    return latentfs.fit(model, data, method=method, **options)


# ------------------------------------------------------------------------------------------------ options
OPTION_CASES = [
    ("max_iter", 0, r"max_iter must be an integer ≥ 1; got 0\. max_iter=0 would return the random start"),
    ("max_iter", -1, r"max_iter must be an integer ≥ 1; got -1"),
    ("max_iter", 2.5, r"max_iter must be an integer ≥ 1; got 2\.5 \(float\)"),
    ("tol", float("nan"), r"tol must be a number ≥ 0; got nan\. Pass a small non-negative number"),
    ("tol", -1.0, r"tol must be a number ≥ 0; got -1\."),
    ("seed", 1.5, r"seed must be an int ≥ 0, .*got 1\.5 \(float\)\. Pass an integer such as seed=0"),
    ("seed", -1, r"seed must be an int ≥ 0, .*got -1\. Pass a non-negative integer, e\.g\. seed=1"),
    ("seed", "abc", r"seed must be an int ≥ 0, .*got 'abc' \(str\)"),
    ("dtype", torch.int64, r"dtype must be torch\.float64 or torch\.float32; got torch\.int64"),
    ("dtype", torch.float16, r"dtype must be torch\.float64 or torch\.float32; got torch\.float16"),
    ("device", "meta", r"device must be a device that holds data; got 'meta'"),
    ("device", "gpu0", r"device must be a torch device name such as 'cpu'.*got 'gpu0'"),
    ("num_samples", 0, r"num_samples must be an integer ≥ 1; got 0\. A sampler needs at least one kept draw"),
    ("num_samples", -2, r"num_samples must be an integer ≥ 1; got -2"),
    ("num_warmup", -1, r"num_warmup must be an integer ≥ 0; got -1"),
    ("num_chains", 0, r"num_chains must be an integer ≥ 1; got 0"),
    ("thin", 0, r"thin must be an integer ≥ 1; got 0"),
    ("n_init", 0, r"n_init must be an integer ≥ 1; got 0"),
    ("n_init", 0, r"n_init must be an integer ≥ 1; got 0"),
    ("num_ll_draws", -3, r"num_ll_draws must be an integer ≥ 0; got -3\. Pass num_ll_draws=0 to skip"),
    ("threshold", 2.0, r"threshold must be a number in \(0, 1\]; got 2\. threshold is a fraction"),
    ("batch_size", 0, r"batch_size must be an integer ≥ 1; got 0"),
]
if not torch.cuda.is_available():
    OPTION_CASES.append(("device", "cuda", r"device is 'cuda' but CUDA is not available here"))

_PAIRS = [
    pytest.param(engine, case, id=f"{engine[0]}-{case[0]}={case[1]!r}")
    for engine in ENGINES
    for case in OPTION_CASES
    if case[0] in (_accepted(engine[1](), engine[2]) or [])
]


@pytest.mark.parametrize(("engine", "case"), _PAIRS)
def test_every_bad_option_of_every_engine_is_one_data_error(engine, case):
    _, make, method, data = engine
    name, value, message = case
    with pytest.raises(DataError, match=message):
        _fit(make, method, data, **{name: value})


def test_the_option_pairs_cover_every_engine_and_the_core_options():
    covered = {(p.values[0][0], p.values[1][0]) for p in _PAIRS}
    for label, *_ in ENGINES:
        assert (label, "seed") in covered
    assert {name for _, name in covered} >= {"max_iter", "tol", "seed", "dtype", "device", "num_samples",
                                               "num_chains", "num_ll_draws", "threshold", "n_init"}


_WITH_DTYPE = [e for e in ENGINES if "dtype" in _accepted(e[1](), e[2])]


@pytest.mark.parametrize("engine", _WITH_DTYPE, ids=[e[0] for e in _WITH_DTYPE])
def test_dtype_given_as_a_string_is_the_torch_dtype(engine):
    _, make, method, data = engine
    extra = {"validation_fraction": 0.25} if method == "tem" else {}
    post = _fit(make, method, data, dtype="float32", **extra)
    assert all(np.isfinite(post.mean(site)).all() for site in post.sites)


def test_misspelt_plsa_option_names_the_valid_ones():
    # PLSA's engines forwarded **options: a typo was a TypeError from inside fit_plsa.
    with pytest.raises(DataError, match=r"options \['max_iters'\] are not options of method 'em' for PLSA.*"
                                        r"Did you mean 'max_iter'"):
        latentfs.fit(latentfs.PLSA(2), COUNTS, method="em", max_iters=5)


def test_plsa_split_with_a_torch_generator_is_reproducible():
    def run():
        gen = torch.Generator().manual_seed(3)
        return _fit(lambda: latentfs.PLSA(2), "tem", COUNTS, seed=gen, validation_fraction=0.25, max_iter=10)

    first, second = run(), run()
    np.testing.assert_array_equal(first.mean("topic_word"), second.mean("topic_word"))


def test_a_negative_group_id_is_refused():
    with pytest.raises(DataError, match=r"groups must hold integer ids ≥ 0; feature 0 has -1\. A negative id"):
        latentfs.DirichletDCA(2, groups=[-1, 0, 0, 1, 1, 1])


def test_store_given_as_one_site_name_is_that_site_not_its_characters():
    post = _fit(lambda: latentfs.DirichletDCA(2), "gibbs", COUNTS, store="topic_word")
    assert post.samples("topic_word", 2).shape[-2:] == (2, COUNTS.shape[1])
    with pytest.raises(DataError, match=r"store must name sites among \['topic_word', 'doc_topic'\]; got \['t'"):
        _fit(lambda: latentfs.DirichletDCA(2), "gibbs", COUNTS, store=list("topic_word"))


# ------------------------------------------------------------------------------------------------ simulate
SIMULATORS = [
    ("DirichletDCA", lambda **k: latentfs.DirichletDCA(2).simulate(**k), {"n_documents": 4, "n_features": 3}),
    ("GammaPoissonDCA", lambda **k: latentfs.GammaPoissonDCA(2, beta=1.0).simulate(**k),
     {"n_documents": 4, "n_features": 3}),
    ("ConditionalGammaPoissonDCA", lambda **k: latentfs.ConditionalGammaPoissonDCA(2, beta=1.0).simulate(**k),
     {"n_documents": 4, "n_features": 3}),
    ("PLSA", lambda **k: latentfs.PLSA(2).simulate(**k), {"n_documents": 4, "n_features": 3}),
    ("FactorAnalysis", lambda **k: latentfs.FactorAnalysis(1, loading_scale=1.0, noise_shape=2.0, noise_scale=1.0,
                                                           mean_scale=1.0).simulate(**k),
     {"n_samples": 4, "n_features": 3}),
    ("HDDAModel", lambda **k: latentfs.HDDAModel(2, n_dims=1).simulate(**k), {"n_samples": 6, "n_features": 3}),
    ("GaussianMixture", lambda **k: latentfs.GaussianMixture(2).simulate(**k), {"n_samples": 5, "n_features": 3}),
    ("LatentClass", lambda **k: latentfs.LatentClass(2).simulate(**k), {"n_samples": 5, "n_features": 3}),
]


@pytest.mark.parametrize(("label", "simulate", "sizes"), SIMULATORS, ids=[s[0] for s in SIMULATORS])
def test_simulate_checks_sizes_and_seed(label, simulate, sizes):
    first = next(iter(sizes))
    out = simulate(**sizes, seed=np.random.default_rng(1))
    assert all(np.isfinite(np.asarray(v, dtype=float)).all() for v in out.values())
    with pytest.raises(DataError, match=rf"{first} must be an integer ≥ 1; got -1\."):
        simulate(**{**sizes, first: -1})
    with pytest.raises(DataError, match=r"n_features must be an integer ≥ 1; got 5\.5 \(float\)"):
        simulate(**{**sizes, "n_features": 5.5})
    for seed, shown in ((1.5, r"1\.5"), (-1, "-1"), ("abc", "'abc'")):
        with pytest.raises(DataError, match=rf"seed must be an int ≥ 0.*got {shown}"):
            simulate(**sizes, seed=seed)


# ------------------------------------------------------------------------------------------------ numerical
@pytest.mark.parametrize("engine", [e for e in ENGINES if e[3] is CONT], ids=[e[0] for e in ENGINES if e[3] is CONT])
def test_a_1e300_cell_is_a_data_error_with_the_remedy(engine):
    _, make, method, data = engine
    X = data.copy()
    X[2, 3] = 1e300
    with pytest.raises(DataError, match=r"X has values too large for float64 arithmetic: .*1e\+300 at row 2, "
                                        r"column 3\)\. Rescale X"):
        _fit(make, method, X)


def test_hdda_refuses_constant_data_and_one_feature():
    with pytest.raises(DataError, match=r"X is constant \(every column holds one value\)"):
        latentfs.fit(latentfs.HDDAModel(2), np.ones((20, 4)), method="em", seed=0)
    with pytest.raises(DataError, match=r"X must have at least 2 features for HDDA.*got 1"):
        latentfs.fit(latentfs.HDDAModel(2), CONT[:, :1], method="em", seed=0)


@pytest.mark.parametrize("scale", [1e-12, 1e12])
def test_factor_analysis_is_scale_equivariant(scale):
    # The noise floor is relative to each column's variance, so scaled data is not "singular".
    base = _fit(lambda: latentfs.FactorAnalysis(1), "em", CONT, max_iter=200)
    scaled = _fit(lambda: latentfs.FactorAnalysis(1), "em", CONT * scale, max_iter=200)
    np.testing.assert_allclose(scaled.mean("noise_variance"), base.mean("noise_variance") * scale**2, rtol=1e-5)


# ------------------------------------------------------------------------------------------------ estimators
ESTIMATORS = [
    ("DCA", lambda: latentfs.DCA(2, max_iter=20), COUNTS),
    ("DCA-gibbs", lambda: latentfs.DCA(2, method="gibbs", num_samples=4, num_warmup=2, num_chains=1), COUNTS),
    ("PLSAEstimator", lambda: latentfs.PLSAEstimator(2, max_iter=20), COUNTS),
    ("FactorAnalyzer", lambda: latentfs.FactorAnalyzer(2, max_iter=20), CONT),
    ("GaussianMixtureClusterer", lambda: latentfs.GaussianMixtureClusterer(2, max_iter=20), CONT),
]


@pytest.mark.filterwarnings("ignore::latentfs.ConvergenceWarning")
@pytest.mark.parametrize(("label", "make", "X"), ESTIMATORS, ids=[e[0] for e in ESTIMATORS])
def test_estimator_save_load_round_trip_is_bit_identical(label, make, X, tmp_path):
    est = make().fit(X)
    path = est.save(tmp_path / "model")
    assert path.suffix == ".npz"
    again = type(est).load(tmp_path / "model")  # found with or without the suffix
    assert again.get_params() == est.get_params()
    np.testing.assert_array_equal(again.transform(X), est.transform(X))
    assert again.score(X) == est.score(X)
    np.testing.assert_array_equal(again.posterior_.mean(again.posterior_.sites[0]),
                                  est.posterior_.mean(est.posterior_.sites[0]))


def test_estimator_file_keeps_feature_names(tmp_path):
    import pandas as pd

    frame = pd.DataFrame(CONT, columns=[f"g{j}" for j in range(CONT.shape[1])])
    est = latentfs.FactorAnalyzer(1, max_iter=20).fit(frame)
    again = latentfs.FactorAnalyzer.load(est.save(tmp_path / "fa"))
    assert again.feature_names_in_.tolist() == est.feature_names_in_.tolist()
    np.testing.assert_array_equal(again.transform(frame[frame.columns[::-1]]), est.transform(frame))


def _damaged(tmp_path, good):
    blob = good.read_bytes()
    flipped = bytearray(blob)
    for i in range(len(blob) // 3, len(blob) // 3 + 64):
        flipped[i] ^= 0xFF
    files = {
        "empty": b"",
        "truncated": blob[: len(blob) // 2],
        "bit-flipped": bytes(flipped),
        "random": np.random.default_rng(1).bytes(2048),
        "pickle": __import__("pickle").dumps({"components_": np.zeros(3)}),
    }
    for name, data in files.items():
        path = tmp_path / f"{name}.npz"
        path.write_bytes(data)
        yield name, path
    nested = tmp_path / "nested.npz"
    np.savez(nested, __meta__=np.array("[" * 50000 + "]" * 50000))
    yield "nested JSON", nested
    yield "directory", tmp_path
    yield "missing", tmp_path / "nothing.npz"


def test_a_damaged_estimator_file_is_one_data_error(tmp_path):
    good = latentfs.FactorAnalyzer(1, max_iter=20).fit(CONT).save(tmp_path / "good")
    for name, path in _damaged(tmp_path, good):
        with pytest.raises(DataError, match=r"(not a readable FactorAnalyzer file|not a FactorAnalyzer file|not a "
                                            r"latentfs estimator file|is a directory|does not exist|damaged)"):
            latentfs.FactorAnalyzer.load(path)
        assert name  # every kind of damage reached the assertion above


def test_an_estimator_file_is_loaded_by_its_own_class_only(tmp_path):
    path = latentfs.FactorAnalyzer(1, max_iter=20).fit(CONT).save(tmp_path / "fa")
    with pytest.raises(DataError, match=r"holds a 'latentfs\.inference\.factor\.estimator\.FactorAnalyzer', not a "
                                        r"'latentfs\.inference\.dca\.estimator\.DCA'; load it with that class"):
        latentfs.DCA.load(path)
    with pytest.raises(DataError, match=r"not a latentfs estimator file \(format 'latentfs\.Posterior"):
        latentfs.FactorAnalyzer.load(latentfs.FactorAnalyzer(1, max_iter=20).fit(CONT).posterior_.save(tmp_path / "p"))


def test_an_unfitted_estimator_cannot_be_saved(tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        latentfs.DCA(2).save(tmp_path / "x")


# ------------------------------------------------------------------------------------------------ second pass
# Groups left after the first pass of the campaign (scripts/hostile_campaign.py): HMM containers, HMM and
# mixture simulation, the HDDC and PLSATransformer containers and seeds, and the optimiser's divergence.
SEQ = _RNG.normal(size=(30, 2))
SYMBOLS = _RNG.integers(0, 3, size=(30, 1))


@pytest.mark.parametrize("method", ["em", "vb", "gibbs"])
def test_an_hmm_refuses_a_meta_tensor(method):
    for model, X in ((latentfs.GaussianHMM(2), SEQ), (latentfs.CategoricalHMM(2), SYMBOLS)):
        with pytest.raises(DataError, match=r"X is a torch tensor on the 'meta' device, which holds no values"):
            latentfs.fit(model, torch.empty(X.shape, device="meta"), method=method)
        with pytest.raises(DataError, match=r"X\[0\] is a torch tensor on the 'meta' device"):
            latentfs.fit(model, [torch.empty(X.shape, device="meta")], method=method)


def test_a_categorical_hmm_refuses_a_symbol_too_large_to_be_a_category():
    big = SYMBOLS.astype(float)
    big[0, 0] = 1e300
    with pytest.raises(DataError, match=r"X must hold symbols coded 0, 1, …, S−1; row 0 holds 1e\+300, too large"):
        latentfs.fit(latentfs.CategoricalHMM(2), big, method="em", max_iter=3)
    many = SYMBOLS.copy()
    many[0, 0] = 10**9  # a one-hot table of 30 × 10**9 would be 240 GB
    with pytest.raises(DataError, match=r"categories.*would take .* GiB.*Recode the symbols as consecutive"):
        latentfs.fit(latentfs.CategoricalHMM(2), many, method="em", max_iter=3)


def test_a_list_of_masked_sequences_keeps_its_mask():
    # np.asarray dropped the mask of each sequence: a masked 99 was fitted as 99.
    seq = np.ma.masked_array(np.where(np.eye(15, 2, dtype=bool), 99.0, SEQ[:15]), mask=np.eye(15, 2, dtype=bool))
    nan = np.where(np.eye(15, 2, dtype=bool), np.nan, SEQ[:15])
    masked = latentfs.fit(latentfs.GaussianHMM(2), [seq, SEQ[15:]], method="em", max_iter=5, seed=0, warn=False)
    with_nan = latentfs.fit(latentfs.GaussianHMM(2), [nan, SEQ[15:]], method="em", max_iter=5, seed=0, warn=False)
    np.testing.assert_array_equal(masked.mean("means"), with_nan.mean("means"))
    sym = np.ma.masked_array(SYMBOLS[:15, 0], mask=np.arange(15) == 3)
    with pytest.raises(DataError, match=r"masked array with 1 masked entry"):
        latentfs.fit(latentfs.CategoricalHMM(2), [sym, SYMBOLS[15:, 0]], method="em", max_iter=3)


def test_hmm_simulate_checks_its_seed():
    for seed, shown in ((1.5, r"1\.5"), (-1, "-1"), ("abc", "'abc'")):
        with pytest.raises(DataError, match=rf"seed must be an int ≥ 0.*got {shown}"):
            latentfs.GaussianHMM(2).simulate(2, 5, seed=seed)
        with pytest.raises(DataError, match=rf"seed must be an int ≥ 0.*got {shown}"):
            latentfs.CategoricalHMM(2, n_categories=3).simulate(2, 5, seed=seed)


def test_hddc_checks_containers_and_seed():
    hddc = latentfs.HDDC(2, max_iter=10, n_init=1)
    with pytest.raises(DataError, match=r"X must hold numbers, not dates or durations; got dtype datetime64"):
        hddc.fit(CONT.astype("datetime64[D]"))
    with pytest.raises(DataError, match=r"X is a torch tensor on the 'meta' device"):
        hddc.fit(torch.empty(CONT.shape, device="meta"))
    for seed, shown in ((1.5, r"1\.5"), (-1, "-1")):
        with pytest.raises(DataError, match=rf"seed must be an int ≥ 0.*got {shown}"):
            latentfs.HDDC(2, max_iter=10, n_init=1, seed=seed).fit(CONT)
    fitted = latentfs.HDDC(2, max_iter=10, n_init=1).fit(CONT)
    with pytest.raises(DataError, match=r"X is a torch tensor on the 'meta' device"):
        fitted.predict(torch.empty(CONT.shape, device="meta"))
    with pytest.raises(DataError, match=r"seed must be an int ≥ 0.*got 1\.5"):
        fitted.sample(3, seed=1.5)


def test_plsa_transformer_checks_containers():
    plsa = latentfs.PLSATransformer(2, max_iter=10)
    mask = np.zeros(COUNTS.shape, dtype=bool)
    mask[0, -1] = True
    with pytest.raises(DataError, match=r"X is a masked array with 1 masked entry"):
        plsa.fit(np.ma.masked_array(np.where(mask, 99, COUNTS), mask=mask))
    with pytest.raises(DataError, match=r"X must hold numbers, not dates or durations; got dtype timedelta64"):
        plsa.fit(COUNTS.astype("timedelta64[s]"))
    with pytest.raises(DataError, match=r"X is a torch tensor on the 'meta' device"):
        plsa.fit(torch.empty(COUNTS.shape, device="meta"))


@pytest.mark.filterwarnings("ignore::latentfs.ConvergenceWarning")
def test_plsa_transformer_saves_and_loads_without_pickle(tmp_path):
    # It had no save/load: pickle was the only way to keep a fitted transformer.
    plsa = latentfs.PLSATransformer(2, max_iter=10).fit(COUNTS)
    again = latentfs.PLSATransformer.load(plsa.save(tmp_path / "plsa"))
    assert again.get_params() == plsa.get_params()
    np.testing.assert_array_equal(again.transform(COUNTS), plsa.transform(COUNTS))
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(DataError, match=r"not a PLSATransformer file"):
        latentfs.PLSATransformer.load(tmp_path / "bad.npz")


def test_a_diverging_objective_is_a_data_error_with_the_remedy():
    from latentfs.core.driver import run_optimizer

    with pytest.raises(DataError, match=r"toy: the objective became nan at iteration 1; the fit diverged\. Check"):
        run_optimizer(0, lambda s: (s + 1, 1.0 if s == 0 else float("nan")), max_iter=5, tol=0.0, desc="toy")


def test_the_memory_budget_honours_an_address_space_limit(monkeypatch):
    # Under ``ulimit -v`` (RLIMIT_AS) the process cannot allocate past the cap whatever MemAvailable says, so a
    # file that inflates past it must be refused before inflating, not die with MemoryError half way.
    import resource

    from latentfs.core.driver import available_memory

    monkeypatch.setattr(resource, "getrlimit", lambda what: (2**20 * 300, resource.RLIM_INFINITY)
                        if what == resource.RLIMIT_AS else (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    avail = available_memory()
    assert avail is not None and avail <= 2**20 * 300
