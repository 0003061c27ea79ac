"""The Dask dashboard's link on a fit's progress (issue 32, item 4).

A fit on a dask collection under a ``dask.distributed`` Client writes one line, "Dask dashboard: <link>", above
its first progress bar, through the bar (so the bar redraws under it), and records the link as
``diagnostics["dask_dashboard"]`` whether or not a bar is shown. An in-memory fit, a fit without a Client and a
scheduler without a dashboard get neither; nothing imports ``distributed`` to look for one.

The cluster runs in this process (one worker thread) with its dashboard on a free port (``dashboard_address=":0"``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import dask.array as da
import distributed
import numpy as np
import pytest

import latentfs
from latentfs.core import registry
from latentfs.core.driver import ConvergenceWarning, dask_dashboard
from latentfs.models.dca import DirichletDCA
from latentfs.models.factor import FactorAnalysis
from latentfs.models.mixture import GaussianMixture

LINE = "Dask dashboard: "


@pytest.fixture
def client():
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0", silence_logs=50
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _rows():
    return GaussianMixture(3).simulate(120, 4, seed=0)["data"]


def _counts():
    counts = DirichletDCA(3, alpha=0.3).simulate(n_documents=60, n_features=20, doc_length=30, seed=1)["counts"]
    return np.asarray(counts.toarray() if hasattr(counts, "toarray") else counts)


#: engines that fit a dask array, one of each kind the pipeline runs: a single-start optimiser, restarts (a bar
#: each: the line comes once, above the first), a run over a stream, and a sampler (chains share one bar)
FITS = {
    "fa_em": (lambda: FactorAnalysis(2), _rows, {"method": "em", "max_iter": 5}),
    "mixture_restarts": (lambda: GaussianMixture(2), _rows, {"method": "em", "max_iter": 5, "n_init": 3}),
    "dca_online_vb": (lambda: DirichletDCA(3), _counts, {"method": "online_vb"}),
    "dca_partially_collapsed": (lambda: DirichletDCA(3), _counts,
                                {"method": "partially_collapsed", "num_chains": 2, "num_warmup": 2, "num_samples": 3}),
}


def _fit(name, *, lazy=True, **options):
    model, data, opts = FITS[name]
    X = data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short fits: convergence and R-hat warnings are not what is tested
        return latentfs.fit(model(), da.from_array(X, chunks=(30, -1)) if lazy else X, seed=0, **opts, **options)


@pytest.mark.parametrize("name", list(FITS))
def test_link_written_once_above_the_bar_and_recorded(client, capsys, name):
    link = client.dashboard_link
    assert link.startswith("http")  # the dashboard started (it needs no optional package to serve its link)
    post = _fit(name, progress=True)
    err = capsys.readouterr().err
    assert err.count(LINE) == 1
    assert f"{LINE}{link}\n" in err
    # through the bar: drawn at 0, cleared for the line, drawn again under it at 0
    before, after = err[: err.index(LINE)], err[err.index(LINE) + len(LINE) + len(link) + 1:]
    assert before.startswith("\r") and "0%|" in before and "| 1/" not in before
    assert after.startswith("\r") and after.split("\r")[1].split("|")[0].endswith("0%")
    assert post.diagnostics["dask_dashboard"] == link


def test_the_line_comes_before_the_first_iteration(client, capsys):
    def callback(iteration, state, objective):
        sys.stderr.write(f"<iteration {iteration}>")

    _fit("fa_em", progress=True, callback=callback)
    err = capsys.readouterr().err
    assert 0 <= err.index(LINE) < err.index("<iteration 0>") < err.index("<iteration 4>")


def test_no_bar_no_line_but_the_diagnostic(client, capsys):
    post = _fit("fa_em", progress=False)
    captured = capsys.readouterr()
    assert LINE not in captured.err and LINE not in captured.out
    assert post.diagnostics["dask_dashboard"] == client.dashboard_link


def test_in_memory_fit_has_neither(client, capsys):
    post = _fit("fa_em", lazy=False, progress=True)
    err = capsys.readouterr().err
    assert "/5 [" in err  # the bar was shown
    assert LINE not in err
    assert "dask_dashboard" not in post.diagnostics
    assert dask_dashboard(_rows()) is None


def test_no_client_has_neither(capsys):
    with pytest.raises(ValueError):  # no test left a Client open
        distributed.default_client()
    post = _fit("fa_em", progress=True)  # dask's local scheduler
    assert LINE not in capsys.readouterr().err
    assert "dask_dashboard" not in post.diagnostics


@pytest.mark.parametrize("answer", ["", None, KeyError("dashboard")])
def test_a_scheduler_without_dashboard_has_neither(client, capsys, monkeypatch, answer):
    """A Client whose scheduler serves no dashboard: its link is "" (a cluster object), None, or asking raises."""

    class NoDashboard:
        @property
        def dashboard_link(self):
            if isinstance(answer, Exception):
                raise answer
            return answer

    monkeypatch.setattr(distributed, "default_client", lambda: NoDashboard())
    post = _fit("fa_em", progress=True)
    assert LINE not in capsys.readouterr().err
    assert "dask_dashboard" not in post.diagnostics


def test_the_desc_and_warnings_do_not_carry_the_link(client, capsys):
    X = da.from_array(_rows(), chunks=(30, -1))
    with pytest.warns(ConvergenceWarning) as caught:
        latentfs.fit(FactorAnalysis(2), X, method="em", seed=0, max_iter=2, tol=0.0, progress=True)
    assert caught and all("dashboard" not in str(w.message) and client.dashboard_link not in str(w.message)
                          for w in caught)
    err = capsys.readouterr().err
    assert err.count(client.dashboard_link) == 1  # the note's line only, not every redraw of the bar


def test_diagnostic_is_json_and_survives_save_and_load(client, tmp_path):
    post = _fit("fa_em", progress=False)
    assert json.loads(json.dumps(post.diagnostics))["dask_dashboard"] == client.dashboard_link
    path = post.save(tmp_path / "fit.nc")
    assert latentfs.load(path).diagnostics["dask_dashboard"] == client.dashboard_link


def test_every_dask_engine_runs_through_the_pipeline():
    """The link comes from the one pipeline (core.pipeline.run): every engine that takes a dask array is a spec."""
    registry._load_engines()
    takers = [(m.__name__, method, e) for (m, method), e in registry._ENGINES.items() if getattr(e, "takes_dask", 0)]
    assert len(takers) >= 10
    assert [(m, method) for m, method, e in takers if not registry.is_spec(e)] == []


def test_an_in_memory_fit_does_not_import_distributed():
    code = ("import sys, numpy as np, latentfs\nfrom latentfs.models.factor import FactorAnalysis\n"
            "X = np.random.default_rng(0).normal(size=(50, 4))\n"
            "r = latentfs.fit(FactorAnalysis(2), X, method='em', seed=0, max_iter=5, warn=False, progress=True)\n"
            "print(r.method, 'dask_dashboard' in r.diagnostics, 'distributed' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300,
                          cwd=Path(latentfs.__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["em", "False", "False"]
    assert LINE not in proc.stderr
