"""Estimators on a dask array (issue 16: "each estimator's fit accepts a dask.array.Array"), and the engines that
work in memory refusing one instead of gathering it.

An estimator's ``fit`` on a dask array must give the result of the sharded engine call it stands for, and
for DCA VB the in-memory fit (its start does not depend on the rows). Fits run on dask's synchronous
scheduler; equality is to 1e-9 relative (summation order only).
"""

import contextlib
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import latentfs
from latentfs.core.data import DataError
from latentfs.models.dca import DirichletDCA
from latentfs.models.factor import FactorAnalysis
from latentfs.models.mixture import GaussianMixture, LatentClass
from latentfs.models.plsa import PLSA

RTOL = 1e-9


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _counts():
    return DirichletDCA(3, alpha=0.3).simulate(n_documents=120, n_features=30, doc_length=40, seed=1)["counts"]


def _continuous():
    return GaussianMixture(2).simulate(300, 3, seed=0)["data"]


def _items():
    return LatentClass(2, n_levels=3).simulate(200, 5, seed=0)["items"]


CASES = [
    ("dca", lambda: latentfs.DCA(3, seed=0, max_iter=30), DirichletDCA(3), "vb", _counts,
     dict(seed=0, max_iter=30, warn=False), "topic_word"),
    ("plsa", lambda: latentfs.PLSAEstimator(3, seed=0, max_iter=30), PLSA(3), "em", _counts,
     dict(seed=0, max_iter=30, warn=False), "topic_word"),
    ("fa", lambda: latentfs.FactorAnalyzer(2, seed=0), FactorAnalysis(2), "em", _continuous,
     dict(seed=0, warn=False), "loadings"),
    ("gaussian-mixture", lambda: latentfs.GaussianMixtureClusterer(2, seed=0), GaussianMixture(2), "em", _continuous,
     dict(seed=0, warn=False), "means"),
    ("latent-class", lambda: latentfs.LatentClassClusterer(2, n_levels=3, seed=0), LatentClass(2, n_levels=3), "em",
     _items, dict(seed=0, warn=False), "item_probs"),
]


def _close(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize(("make", "model", "method", "data", "options", "site"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_estimator_fit_on_a_dask_array_is_the_sharded_engine_fit(make, model, method, data, options, site):
    X = data()
    Xd = da.from_array(X, chunks=(X.shape[0] // 4, -1))
    est = make()
    with _no_convergence_noise():
        est.fit(Xd)
        ref = latentfs.fit(model, Xd, method=method, **options)
    _close(est.posterior_.mean(site), ref.mean(site))
    assert est.n_features_in_ == X.shape[1] and not hasattr(est, "feature_names_in_")
    assert not hasattr(est, "labels_")  # computed from training rows, which stay in their shards
    new = est.transform(X[:5]) if hasattr(est, "transform") else est.predict(X[:5])
    assert np.asarray(new).shape[0] == 5


@contextlib.contextmanager
def _no_convergence_noise():
    """Short fits: a ConvergenceWarning is expected noise here; every other warning is still an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", latentfs.ConvergenceWarning)
        yield


def test_dca_estimator_on_sparse_chunks_equals_the_in_memory_fit():
    X = sp.csr_matrix(_counts())
    Xd = da.from_array(X, chunks=(30, -1), asarray=False)
    with _no_convergence_noise():
        sharded = latentfs.DCA(3, seed=0, max_iter=30).fit(Xd)
        memory = latentfs.DCA(3, seed=0, max_iter=30).fit(X)
    _close(sharded.components_, memory.components_)
    _close(sharded.transform(X), memory.transform(X))


def test_an_engine_that_works_in_memory_refuses_a_dask_array_instead_of_gathering_it():
    Xd = da.from_array(_counts(), chunks=(30, -1))
    with pytest.raises(DataError, match=r"X is a dask array, but this call works in memory.*X\.compute\(\)"):
        latentfs.fit(DirichletDCA(3), Xd, method="collapsed_gibbs")
    est = latentfs.DCA(3, method="collapsed_gibbs", seed=0)
    with pytest.raises(DataError, match=r"engines that fit a dask array shard by shard are .*'vb'"):
        est.fit(Xd)


def test_names_are_refused_for_a_dask_array_with_the_remedy():
    Xd = da.from_array(_counts(), chunks=(30, -1))
    names = [f"w{j}" for j in range(Xd.shape[1])]
    with pytest.raises(DataError, match=r"cannot be attached to a dask array X.*result.coords\['feature'\]"):
        latentfs.fit(DirichletDCA(3), Xd, method="vb", feature_names=names)


def test_the_dask_engines_message_lists_what_the_engines_declare():
    # issue 30: core named the dask-capable families in a hand-written string, which missed partially_collapsed;
    # the list now comes from the registry (EngineSpec.takes_dask)
    import dask.array as da

    import latentfs
    from latentfs.core.registry import _ENGINES, _load_engines, dask_engines

    _load_engines()
    declared = {(m.__name__, meth) for (m, meth), e in _ENGINES.items() if getattr(e, "takes_dask", False)}
    assert ("DirichletDCA", "partially_collapsed") in declared and ("FactorAnalysis", "map") in declared
    text = dask_engines()
    for model, method in declared:
        assert model in text and f"'{method}'" in text
    X = da.from_array(np.random.default_rng(0).poisson(1.0, size=(20, 6)).astype(float), chunks=10)
    with pytest.raises(DataError, match=r"shard by shard are DirichletDCA 'online_vb', 'partially_collapsed', 'vb';"):
        latentfs.fit(latentfs.DirichletDCA(2), X, method="map")
