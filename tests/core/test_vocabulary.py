"""One vocabulary (issue 13 item 2): the same word means the same thing across the public API.

* ``n_components`` for every latent dimension or cluster count: no ``n_factors`` (except
  :class:`MixtureOfFactorAnalyzers`, whose ``n_factors`` is the latent dimension *per component*, a second
  count next to its ``n_components``), ``n_aspects``, ``n_traits``, ``n_clusters`` or ``k``;
  ``n_init`` for restarts (no ``n_restarts``/``num_restarts``); no ``width`` for a kernel.
* ``gamma`` only where it is scikit-learn's kernel coefficient (the RBF width) or the DCA Dirichlet
  concentration on Θ; the between-class penalty of supervised Q-α is ``between_weight`` and the forest
  test's level is ``significance``.
* HDDC and the mixtures share one init vocabulary.
* No aliases: the old keywords are unknown (a ``TypeError``), the old attributes absent.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import latentfs
import latentfs.select
import latentfs.subspace
from latentfs.core.data import DataError

MODULES = (latentfs, latentfs.select, latentfs.subspace)


def _family_modules() -> list[Any]:
    """The modules of the families this rename touched, each with its own ``__all__``."""
    names = ["latentfs.models.factor", "latentfs.models.plsa", "latentfs.models.latent_trait", "latentfs.models.hdda",
             "latentfs.select.q_alpha", "latentfs.select.q_alpha_kernel", "latentfs.select.forest", "latentfs.select.leverage"]
    for family in ("factor", "plsa", "latent_trait", "hdda"):
        package = importlib.import_module(f"latentfs.inference.{family}")
        names += [package.__name__] + [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
    return [importlib.import_module(name) for name in names]


#: Names that must not be parameters of any public class or function.
RETIRED = {"n_factors", "n_aspects", "n_traits", "n_clusters", "k", "n_restarts", "width", "num_restarts"}

#: The classes whose ``n_factors`` is a distinct count (factors per analyser, next to n_components): the model
N_FACTORS_ALLOWED = {"MixtureOfFactorAnalyzers", "MixtureOfFactorAnalyzersClusterer"}  # and its estimator

#: Where ``gamma`` is allowed, and what it means there.
GAMMA_ALLOWED = {
    "DirichletDCA": "Dirichlet concentration on each component's word distribution (Θ)",
    "GammaPoissonDCA": "Dirichlet concentration on Θ",
    "ConditionalGammaPoissonDCA": "Dirichlet concentration on Θ",
    "DCA": "Dirichlet concentration on Θ (passed to the model)",
    "DCAClassifier": "Dirichlet concentration on Θ (passed to the model)",
    "KernelQAlpha": "scikit-learn's kernel coefficient: rbf exp(-gamma||x-y||^2), polynomial (gamma<x,y>+coef0)^d",
    "feature_kernel": "the same kernel coefficient (KernelQAlpha's kernel)",
}


def _public() -> list[tuple[str, Any]]:
    out = {}
    for module in (*MODULES, *_family_modules()):
        # a module without __all__: the public names it defines itself
        names = getattr(module, "__all__", None) or [
            n for n, o in vars(module).items() if not n.startswith("_") and getattr(o, "__module__", None) == module.__name__
        ]
        for name in names:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                out[name] = obj
    return sorted(out.items())


def _parameters(obj: Any) -> set[str]:
    fn = obj.__init__ if inspect.isclass(obj) else obj
    try:
        return set(inspect.signature(fn).parameters) - {"self"}
    except (TypeError, ValueError):  # a builtin or an exception class without a Python signature
        return set()


PUBLIC = _public()


def test_the_public_api_is_covered():
    names = {name for name, _ in PUBLIC}
    # the classes this issue renamed, and the two whose gamma changed, are all in the sweep
    assert {"FactorAnalysis", "PLSA", "LatentTrait", "SupervisedQAlpha", "ForestRelevanceSelector",
            "forest_relevance", "HDDC", "MixtureOfFactorAnalyzers"} <= names
    assert set(GAMMA_ALLOWED) <= names


@pytest.mark.parametrize("name, obj", PUBLIC, ids=[name for name, _ in PUBLIC])
def test_no_retired_parameter_names(name, obj):
    params = _parameters(obj)
    retired = RETIRED - ({"n_factors"} if name in N_FACTORS_ALLOWED else set())
    assert not params & retired, f"{name} still takes {sorted(params & retired)}; the vocabulary says n_components"
    if "gamma" in params:
        assert name in GAMMA_ALLOWED, (
            f"{name} takes gamma, which the vocabulary keeps for the RBF width and the DCA concentration only"
        )


def test_gamma_list_is_not_stale():
    # every class allowed a gamma still takes one (so the allow-list cannot silently outlive a rename)
    public = dict(PUBLIC)
    assert all("gamma" in _parameters(public[name]) for name in GAMMA_ALLOWED)


@pytest.mark.parametrize(
    "build",
    [
        lambda: latentfs.FactorAnalysis(n_factors=2),
        lambda: latentfs.PLSA(n_aspects=2),
        lambda: latentfs.LatentTrait(n_traits=1),
        lambda: latentfs.select.SupervisedQAlpha(gamma=0.5),
        lambda: latentfs.select.ForestRelevanceSelector(gamma=0.05),
    ],
    ids=["FactorAnalysis", "PLSA", "LatentTrait", "SupervisedQAlpha", "ForestRelevanceSelector"],
)
def test_old_keywords_are_unknown(build):
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        build()


def test_old_keywords_of_the_functions_are_unknown():
    from latentfs.select.q_alpha import supervised_q_alpha

    X = np.random.default_rng(0).normal(size=(12, 4))
    y = np.arange(12) % 2
    with pytest.raises(TypeError, match="unexpected keyword argument 'gamma'"):
        supervised_q_alpha(X, y, gamma=0.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'gamma'"):
        latentfs.select.forest_relevance(X, y, gamma=0.05)


@pytest.mark.parametrize(
    "model, old",
    [
        (latentfs.FactorAnalysis(3), "n_factors"),
        (latentfs.PLSA(3), "n_aspects"),
        (latentfs.LatentTrait(3), "n_traits"),
    ],
    ids=["FactorAnalysis", "PLSA", "LatentTrait"],
)
def test_models_say_n_components(model, old):
    assert model.n_components == 3
    assert not hasattr(model, old)
    assert set(model.hyperparameters()) >= {"n_components"} and old not in model.hyperparameters()
    assert old not in repr(model)


def test_loading_constraints_say_n_components():
    constraints = latentfs.LoadingConstraints.fixed([[0.0, np.nan], [np.nan, np.nan], [np.nan, 1.0]])
    assert constraints.n_components == 2 and not hasattr(constraints, "n_factors")


def test_mixture_of_factor_analyzers_keeps_its_two_counts():
    mfa = latentfs.MixtureOfFactorAnalyzers(n_components=3, n_factors=2)
    assert (mfa.n_components, mfa.n_factors) == (3, 2)
    assert mfa.hyperparameters() == {"n_components": 3, "n_factors": 2}


def test_renamed_selector_parameters_are_used():
    from latentfs.select.q_alpha import supervised_q_alpha

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 15)
    X = rng.normal(size=(30, 6))
    X[:, :2] += rng.normal(size=(30, 2)) * 3 * y[:, None]  # within-class structure in features 0 and 1
    # between_weight reaches the design: a different weight gives a different α
    a0 = supervised_q_alpha(X, y, variant="literal", between_weight=0.0).alpha
    a1 = supervised_q_alpha(X, y, variant="literal", between_weight=2.0).alpha
    assert np.abs(a0 - a1).max() > 1e-3
    sel = latentfs.select.SupervisedQAlpha(2, variant="literal", between_weight=0.0).fit(X, y)
    assert sel.weights_.info["between_weight"] == 0.0
    with pytest.raises(DataError, match="between_weight must be finite and non-negative"):
        latentfs.select.SupervisedQAlpha(2, variant="literal", between_weight=-1.0).fit(X, y)
    with pytest.raises(DataError, match=r"significance must lie in \(0, 1\); got 0"):
        latentfs.select.ForestRelevanceSelector(5, significance=0).fit(X, y)


# ---------------------------------------------------------------------------------------------- HDDC init
def test_hddc_and_the_mixtures_share_one_init_vocabulary():
    from latentfs.inference.hdda.hddc import INITIALISATIONS as HDDC_INITS
    from latentfs.inference.mixture.starts import INITIALISATIONS as MIXTURE_INITS

    assert set(HDDC_INITS) == set(MIXTURE_INITS) == {"kmeans", "kmeans++", "random"}


@pytest.mark.parametrize("init", ["kmeans", "kmeans++", "random"])
def test_hddc_every_init_recovers_separated_clusters(init):
    # three clusters 8 sds apart in 6-D: any start reaches the planted partition (label-invariant ARI)
    rng = np.random.default_rng(3)
    centres = np.array([[0.0] * 6, [8.0] * 6, [0.0, 8.0] * 3])
    truth = np.repeat([0, 1, 2], 40)
    X = centres[truth] + rng.normal(size=(120, 6))
    hc = latentfs.HDDC(3, "AkBkQkD", n_dims=2, init=init, n_init=3, seed=0).fit(X)
    assert adjusted_rand_score(truth, hc.labels_) == 1.0


def test_hddc_unknown_init_lists_the_vocabulary():
    X = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(DataError, match=r"init must be one of \['kmeans', 'kmeans\+\+', 'random'\]"):
        latentfs.HDDC(2, init="k-means").fit(X)


# ---------------------------------------------------------------------------------------------- saved results
def _rename_saved_hyperparameter(path: Path, new: str, old: str) -> None:
    """Rewrite a saved result's header as an earlier latentfs wrote it (``old`` instead of ``new``)."""
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(str(arrays["__meta__"]))
    meta["hyperparameters"][old] = meta["hyperparameters"].pop(new)
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez_compressed(path, **arrays)


@pytest.mark.parametrize("family", ["FactorAnalysis", "PLSA", "LatentTrait"])
def test_results_saved_with_the_old_names_still_load_and_transform(family, tmp_path):
    rng = np.random.default_rng(0)
    if family == "FactorAnalysis":
        model, old = latentfs.FactorAnalysis(2), "n_factors"
        X = rng.normal(size=(60, 5)) + rng.normal(size=(60, 1)) * np.arange(1, 6)
    elif family == "PLSA":
        model, old = latentfs.PLSA(2), "n_aspects"
        X = model.simulate(30, 10, doc_length=40, seed=0)["counts"]
    else:
        model, old = latentfs.LatentTrait(1), "n_traits"
        X = model.simulate(300, intercepts=[0.5, 0.0, -0.5, 0.2], discrimination=[[1.5], [1.0], [2.0], [0.8]],
                           seed=0)["items"]
    post = latentfs.fit(model, X, seed=0, warn=False)
    assert post.hyperparameters["n_components"] == model.n_components  # today's files say n_components
    path = post.save(tmp_path / "result")
    _rename_saved_hyperparameter(path, "n_components", old)
    with zipfile.ZipFile(path) as archive:
        assert "__meta__.npy" in archive.namelist()
    loaded = latentfs.load(path)
    assert old in loaded.hyperparameters and "n_components" not in loaded.hyperparameters
    # the number of components is read off the result's coordinates, so the old file still works
    np.testing.assert_allclose(loaded.transform(X[:5]), post.transform(X[:5]), rtol=1e-6, atol=1e-8)
    if family == "LatentTrait":
        weights = latentfs.discrimination_weights(loaded, X, n_bootstrap=2, seed=0)
        assert weights.draws is not None and weights.draws.shape == (2, 4)
