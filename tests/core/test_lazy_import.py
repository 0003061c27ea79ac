"""The package imports what a call needs when the call is made (latentfs._lazy, issue 15).

``import latentfs`` used to import torch, Pyro, scikit-learn and every family (4–5 s, before ``latentfs --help``
printed a line). Each check that depends on what a fresh process has imported runs in a new interpreter.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import latentfs
import latentfs.core
import latentfs.inference
import latentfs.inference.dca
import latentfs.inference.factor
import latentfs.inference.hmm
import latentfs.inference.latent_trait
import latentfs.inference.plsa
from latentfs.core import registry

# the families whose scikit-learn estimators are imported on first use
FAMILIES = [latentfs.inference.dca, latentfs.inference.factor, latentfs.inference.hmm, latentfs.inference.latent_trait,
            latentfs.inference.plsa]


def _fresh(code: str) -> list[str]:
    """Run ``code`` in a new interpreter; it prints one line, returned split on spaces."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1].split()


def test_import_latentfs_imports_no_engine_library():
    loaded = _fresh("import sys, latentfs; print(*[m for m in ('torch', 'pyro', 'sklearn', 'numba', 'arviz', "
                    "'latentfs.inference.dca', 'latentfs.core.estimator') if m in sys.modules], 'end')")
    assert loaded == ["end"]


def test_help_imports_no_engine_library():
    code = ("import sys\nfrom latentfs.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit as e:\n"
            "    code = e.code\nprint(code, *[m for m in ('torch', 'sklearn', 'latentfs.models.dca') if m in sys.modules])")
    assert _fresh(code) == ["0"]


def test_fits_do_not_import_scikit_learn_or_other_families():
    """A DirichletDCA and a FactorAnalysis fit, each in a new process, import their own family only (and the
    VB fit, which relabels nothing, not scipy.optimize: 0.8 s)."""
    code = ("import sys, latentfs\nm = latentfs.DirichletDCA(2)\n"
            "X = m.simulate(n_documents=20, n_features=8, doc_length=20, seed=0)['counts']\n"
            "r = latentfs.fit(m, X, method='vb', seed=0, max_iter=5, warn=False)\n"
            "print(r.method, *[m for m in ('sklearn', 'scipy.optimize', 'latentfs.inference.mixture', "
            "'latentfs.inference.hmm') if m in sys.modules])")
    assert _fresh(code) == ["vb"]
    code = ("import sys, numpy as np, latentfs\nX = np.random.default_rng(0).normal(size=(60, 6))\n"
            "r = latentfs.fit(latentfs.FactorAnalysis(2), X, method='em', seed=0)\n"
            "print(r.method, *[m for m in ('sklearn', 'latentfs.inference.dca') if m in sys.modules])")
    assert _fresh(code) == ["em"]


def test_every_exported_name_resolves_and_is_listed():
    for package in (latentfs, latentfs.core, *FAMILIES):
        for name in package.__all__:
            assert getattr(package, name) is not None, (package.__name__, name)
        assert set(package.__all__) <= set(dir(package))
    assert latentfs.select.QAlpha is not None  # a subpackage after a bare ``import latentfs``
    from latentfs import DirichletDCA, fit  # noqa: F401  (the form users write)


def test_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="module 'latentfs' has no attribute 'DirichletDAC'"):
        latentfs.DirichletDAC  # noqa: B018
    assert not hasattr(latentfs.core, "nothing_here")


@pytest.mark.parametrize("package", [latentfs, latentfs.core, *FAMILIES])
def test_lazy_table_matches_the_type_checking_imports(package):
    """The names served lazily are exactly those the ``if TYPE_CHECKING:`` block imports, from the same modules,
    so editors and mypy see what users get."""
    tree = ast.parse(Path(package.__file__).read_text(encoding="utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    typed = {(node.module, a.name) for node in guarded.body if isinstance(node, ast.ImportFrom) for a in node.names}
    table = {(module, name) for module, names in package._EXPORTS.items() for name in names}
    assert typed == table


def test_modules_left_out_of_a_family_import_register_no_engine():
    """A family package imports its engine modules and leaves the estimators to first use; importing every module
    of every family afterwards registers nothing new, so ``fit`` never misses an engine."""
    latentfs.inference.load_all()
    before = dict(registry._ENGINES)
    for family in pkgutil.iter_modules(latentfs.inference.__path__):
        pkg = importlib.import_module(f"latentfs.inference.{family.name}")
        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
    assert registry._ENGINES == before


def test_fit_finds_the_engines_of_a_models_own_family_in_a_fresh_process():
    code = ("import latentfs\nprint(*latentfs.methods_for(latentfs.DirichletDCA), '|', "
            "*latentfs.methods_for(latentfs.GaussianMixture))")
    out = _fresh(code)
    assert out[: out.index("|")] == ["collapsed_gibbs", "gibbs", "map", "mh", "nuts", "online_vb", "partially_collapsed",
                                    "plsi_em", "svi", "vb"]
    assert {"em", "gibbs", "vb"} <= set(out[out.index("|") + 1:])


def test_every_built_in_engine_lives_in_its_models_family():
    """``fit`` imports only ``latentfs.inference.<family>`` for a model of ``latentfs.models.<family>``; that finds
    every engine only if each engine for a built-in model is defined in that model's family."""
    latentfs.inference.load_all()
    checked = 0
    for (cls, method), engine in registry._ENGINES.items():
        model_family = cls.__module__.split(".")
        if model_family[:2] != ["latentfs", "models"]:
            continue
        assert engine.__module__.split(".")[:3] == ["latentfs", "inference", model_family[2]], (cls, method)
        checked += 1
    assert checked >= 40


def test_a_family_name_that_is_also_a_module_name_stays_the_function():
    """``latentfs.inference.mixture.dic`` is a function and a module of the same name: importing the module
    (as model_selection does) must not leave the package's ``dic`` pointing at the module (tutorial 10 broke so)."""
    code = ("import latentfs.inference.mixture.model_selection\nfrom latentfs.inference.mixture import dic\n"
            "print(callable(dic), type(dic).__name__)")
    assert _fresh(code) == ["True", "function"]
