"""Layering (issue 30): ``core/`` names no family, and every family's results take new data in a fresh process,
where only the result file and ``import latentfs`` exist (HMM and MFA results used to raise DataError there: their
new-data rows were added only when their estimator module happened to be imported)."""

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.models import GaussianHMM, MixtureOfFactorAnalyzers

CORE = Path(latentfs.__file__).parent / "core"


def test_core_imports_no_family_and_no_model():
    offending = []
    for path in sorted(CORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] if node.module != "latentfs.inference" else []
            offending += [f"{path.name}: {n}" for n in names
                          if n.startswith(("latentfs.models", "latentfs.inference.", "latentfs.select",
                                           "latentfs.subspace", "latentfs.evaluate"))]
    assert offending == []


def _fresh_transform(tmp_path, result, X):
    saved = result.save(tmp_path / "result")
    np.save(tmp_path / "X.npy", X)
    code = (
        "import sys, numpy as np, latentfs\n"
        f"r = latentfs.load({str(saved)!r})\n"
        f"out = r.transform(np.load({str(tmp_path / 'X.npy')!r}))\n"
        f"np.save({str(tmp_path / 'out.npy')!r}, out)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return np.load(tmp_path / "out.npy")


def test_hmm_results_transform_new_sequences_in_a_fresh_process(tmp_path):
    model = GaussianHMM(2)
    X = model.simulate(1, 150, seed=0)["data"]
    result = latentfs.fit(model, X, method="em", seed=0, warn=False)
    fresh = _fresh_transform(tmp_path, result, X[:30])
    assert fresh.shape == (30, 2)
    np.testing.assert_allclose(fresh, result.transform(X[:30]), rtol=1e-10, atol=1e-12)


def test_mfa_results_transform_new_rows_in_a_fresh_process(tmp_path):
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (80, 4)) @ np.diag([2, 1, 1, 0.5]), rng.normal(4, 1, (80, 4))])
    result = latentfs.fit(MixtureOfFactorAnalyzers(2, 1), X, method="em", seed=0, warn=False)
    fresh = _fresh_transform(tmp_path, result, X[:10])
    assert fresh.shape[0] == 10
    np.testing.assert_allclose(fresh, result.transform(X[:10]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("model", "method"), [
    (latentfs.DirichletDCA(2), "vb"), (latentfs.DirichletDCA(2), "collapsed_gibbs"), (latentfs.DirichletDCA(2), "gibbs"),
    (latentfs.models.PLSA(2), "em"), (latentfs.models.FactorAnalysis(1), "em"), (GaussianHMM(2), "em"),
    (latentfs.models.LatentTrait(1), "em"), (MixtureOfFactorAnalyzers(2, 1), "em"),
])
def test_warn_and_progress_must_be_yes_or_no_for_every_engine(model, method):
    # issue 31 item 8: warn="no" turned warnings on and any string passed as progress; one check for every engine
    X = np.ones((4, 3))
    with pytest.raises(DataError, match=r"warn must be True or False; got 'no'"):
        latentfs.fit(model, X, method=method, warn="no")
    with pytest.raises(DataError, match=r"progress must be True, False or None \(None: a bar when stderr is a terminal\); got 'yes'"):
        latentfs.fit(model, X, method=method, progress="yes")
