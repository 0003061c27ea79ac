"""latentfs.ConvergenceWarning subclasses scikit-learn's, so whatever silences scikit-learn's silences latentfs's;
and the scikit-learn import that this needs happens only when the class is needed (a fresh process for each
check of what gets imported)."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
import sklearn.exceptions

import latentfs
import latentfs.core
import latentfs.core.driver


def _fresh(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1].split()


def _short_fa_fit():
    X = np.random.default_rng(0).normal(size=(60, 5))
    return latentfs.fit(latentfs.FactorAnalysis(2), X, method="em", seed=0, max_iter=2)


def test_one_class_under_every_name_and_a_subclass_of_scikit_learns():
    cls = latentfs.ConvergenceWarning
    assert cls is latentfs.core.driver.ConvergenceWarning is latentfs.core.ConvergenceWarning
    from latentfs.core.driver import ConvergenceWarning

    assert ConvergenceWarning is cls
    assert issubclass(cls, sklearn.exceptions.ConvergenceWarning) and issubclass(cls, UserWarning)
    with pytest.raises(AttributeError, match="module 'latentfs.core.driver' has no attribute 'ConvergenceWarnin'"):
        latentfs.core.driver.ConvergenceWarnin  # noqa: B018


def test_an_optimiser_warning_is_silenced_by_scikit_learns_filter():
    with pytest.warns(latentfs.ConvergenceWarning, match="did not converge in 2 iterations"):
        _short_fa_fit()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning that gets through fails the test
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        assert _short_fa_fit().method == "em"


def test_a_sampler_warning_is_silenced_by_scikit_learns_filter():
    model = latentfs.DirichletDCA(2)
    X = model.simulate(n_documents=20, n_features=8, doc_length=20, seed=0)["counts"]
    options = dict(method="gibbs", seed=0, num_warmup=5, num_samples=10, num_chains=2)
    with pytest.warns(latentfs.ConvergenceWarning, match="site 'topic_word' has not converged"):
        latentfs.fit(model, X, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        result = latentfs.fit(model, X, **options)
    assert result.diagnostics["convergence"]["topic_word"]["r_hat_max"] > 1.01  # not converged, and silent


def test_scikit_learn_is_imported_only_when_the_class_is_needed():
    # a sampled DCA fit that does not warn relabels and checks R-hat without scikit-learn (warn=False reaches
    # Posterior.align without a warnings filter that names the class)
    code = ("import sys, latentfs\nm = latentfs.DirichletDCA(2)\n"
            "X = m.simulate(n_documents=20, n_features=8, doc_length=20, seed=0)['counts']\n"
            "r = latentfs.fit(m, X, method='gibbs', seed=0, num_warmup=5, num_samples=10, num_chains=2, warn=False)\n"
            "print(r.alignment is not None, 'sklearn' in sys.modules)")
    assert _fresh(code) == ["True", "False"]
    # reading the class imports scikit-learn, and not torch or the engines
    code = ("import sys, latentfs\nc = latentfs.ConvergenceWarning\n"
            "print(c.__name__, *[m for m in ('torch', 'latentfs.core.driver') if m in sys.modules])")
    assert _fresh(code) == ["ConvergenceWarning"]
