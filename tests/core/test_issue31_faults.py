"""Issue 31, item 8 (options, files and faults): yes/no options that must be booleans, Ctrl-C during
``chain_method="parallel"`` (to the calling process alone, or to the whole process group while the workers start),
and saved results whose header disagrees with their arrays."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.core.options import check_flag, check_options
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile, UnivariateMixtureK

# ------------------------------------------------------------------------------------------ warn / progress

MIXTURE_FITS = [
    ("gm-em", GaussianMixture(2), "em", {"max_iter": 20}),
    ("gm-vb", GaussianMixture(2), "vb", {"max_iter": 20}),
    ("gm-gibbs", GaussianMixture(2), "gibbs", {"num_chains": 1, "num_warmup": 2, "num_samples": 2}),
    ("lp-em", LatentProfile(2), "em", {"max_iter": 20}),
    ("lc-vb", LatentClass(2), "vb", {"max_iter": 20}),
    ("rjmcmc", UnivariateMixtureK(max_components=3), "rjmcmc", {"num_chains": 1, "num_warmup": 2, "num_samples": 2}),
]


def _data(model):
    rng = np.random.default_rng(0)
    if isinstance(model, UnivariateMixtureK):
        return rng.normal(size=30)
    if isinstance(model, LatentClass):
        return (rng.random((40, 4)) < 0.5).astype(float)
    return rng.normal(size=(40, 3))


@pytest.mark.parametrize(("model", "method", "options"), [c[1:] for c in MIXTURE_FITS], ids=[c[0] for c in MIXTURE_FITS])
@pytest.mark.parametrize(("option", "value"), [("warn", "no"), ("warn", None), ("warn", 0), ("progress", "yes"),
                                               ("progress", "no"), ("progress", 1)])
def test_mixture_engines_take_only_booleans_for_warn_and_progress(model, method, options, option, value):
    rule = "True or False" if option == "warn" else r"True, False or None"
    with pytest.raises(DataError, match=rf"{option} must be {rule}.*got {value!r} \({type(value).__name__}\)"):
        latentfs.fit(model, _data(model), method=method, seed=0, **options, **{option: value})


def test_booleans_and_none_pass_the_flag_check():
    assert check_flag("warn", np.bool_(False)) is False
    assert check_flag("progress", None, allow_none=True) is None
    assert check_options(warn=True, progress=None) == (True, None)
    with pytest.raises(DataError, match=r"progress must be True, False or None .*got 'yes' \(str\)"):
        check_options(progress="yes")


# ------------------------------------------------------------------------------------------ Ctrl-C

_SCRIPT = """
import json, os, signal, sys, time, warnings
# a Ctrl-C must be able to reach this process: a shell that starts its jobs in the background (CI's, a nohup)
# passes SIGINT on ignored, and Python then installs no handler
signal.signal(signal.SIGINT, signal.default_int_handler)
import torch
from latentfs.core.driver import run_sampler
from latentfs.core.parallel import chain_method

torch.set_num_threads(1)
MARKS = sys.argv[1]

def init(gen):
    return {"t": 0, "x": torch.zeros(2, dtype=torch.float64)}

def step(state, gen):
    # every chain says, in a file named by its process, how far it has gone
    with open(os.path.join(MARKS, str(os.getpid())), "w") as f:
        f.write(str(state["t"]))
    time.sleep(0.02)
    x = state["x"] + torch.randn(2, generator=gen, dtype=torch.float64)
    return {"t": state["t"] + 1, "x": x}, float(x.sum())

def collect(state):
    return {"x": state["x"].numpy().copy()}

def progress():
    out = {}
    for name in os.listdir(MARKS):
        try:
            out[name] = open(os.path.join(MARKS, name)).read()
        except OSError:
            pass
    return out

print("ready", flush=True)
try:
    with chain_method("parallel"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = run_sampler(init, step, collect, num_chains=3, num_warmup=0, num_samples=50000, seed=0,
                          progress=False)
    outcome = {"outcome": "result", "chains": int(run.draws["x"].shape[0]), "n_draws": int(run.n_draws),
               "interrupted": bool(run.interrupted)}
except KeyboardInterrupt:
    outcome = {"outcome": "KeyboardInterrupt"}
except BaseException as exc:
    outcome = {"outcome": type(exc).__name__, "message": str(exc)}
# no chain may still be running once the call has returned
before = progress()
time.sleep(0.5)
outcome["still_stepping"] = sorted(k for k, v in progress().items() if before.get(k) != v)
print(json.dumps(outcome), flush=True)
"""


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "chains.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, str(script), str(marks)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc, marks


def _finish(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=240)  # a bound that keeps a hang from stalling CI, not a speed test
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the interrupted fit did not return; stderr tail: {err[-2000:]}")
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    assert lines, f"no outcome; stderr tail: {err[-2000:]}"
    return json.loads(lines[-1])


def _wait_for(condition, what: str, limit: float = 180.0) -> None:
    end = time.monotonic() + limit
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"{what} did not happen")
        time.sleep(0.05)


def test_ctrl_c_to_the_calling_process_alone_stops_the_workers_and_keeps_their_draws(tmp_path):
    proc, marks = _start(tmp_path)
    # wait until the calling process and both workers have made some draws
    _wait_for(lambda: sum(1 for p in marks.iterdir() if p.read_text() not in ("", "0", "1", "2")) >= 3,
              "three chains running")
    os.kill(proc.pid, signal.SIGINT)  # as a notebook's interrupt does: the workers get nothing from the terminal
    outcome = _finish(proc)
    assert outcome["outcome"] == "result" and outcome["interrupted"]
    assert outcome["chains"] == 3 and outcome["n_draws"] >= 3  # every chain returned what it had made
    assert outcome["still_stepping"] == []


@pytest.mark.parametrize("delay", [0.5, 1.5, 3.0])
def test_ctrl_c_to_the_process_group_while_the_workers_start_is_a_clean_interrupt(tmp_path, delay):
    proc, _ = _start(tmp_path)
    # the fit has begun; the workers are starting (a new Python importing torch: about a second or more) or
    # running their first draws, depending on the machine: every moment must end the same way
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: every process of the group
    outcome = _finish(proc)
    assert outcome["outcome"] in ("result", "KeyboardInterrupt"), outcome
    if outcome["outcome"] == "result":
        assert outcome["interrupted"]
    assert outcome["still_stepping"] == []


# ------------------------------------------------------------------------------------------ files


def _rewrite(path: Path, out: Path, edit) -> Path:
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    edit(meta)
    np.savez(out, __meta__=np.array(json.dumps(meta)), **arrays)
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    counts = latentfs.DirichletDCA(2).simulate(n_documents=20, n_features=10, doc_length=30, seed=0)["counts"]
    tmp = tmp_path_factory.mktemp("saved")
    fits = {
        "dca": latentfs.fit(latentfs.DirichletDCA(2), counts, method="vb", seed=0, max_iter=20, warn=False,
                            num_ll_draws=0),
        "gm": latentfs.fit(GaussianMixture(2), X, method="em", seed=0, warn=False),
        "fa": latentfs.fit(latentfs.FactorAnalysis(2), X, method="em", seed=0, warn=False),
    }
    return {k: Path(v.save(tmp / k)) for k, v in fits.items()}, tmp


def test_a_header_naming_a_model_without_that_method_is_refused(saved):
    paths, tmp = saved
    bad = _rewrite(paths["dca"], tmp / "dca-as-plsa.npz", lambda m: m.update(model="PLSA"))
    with pytest.raises(DataError, match=r"names model 'PLSA' fitted by method 'vb', which PLSA has no engine for"):
        latentfs.load(bad)
    not_a_name = _rewrite(paths["dca"], tmp / "dca-as-list.npz", lambda m: m.update(model=["DirichletDCA"]))
    with pytest.raises(DataError, match=r"header's model and method must be names; got \['DirichletDCA'\]"):
        latentfs.load(not_a_name)


def test_a_header_naming_another_model_with_that_method_is_refused(saved):
    paths, tmp = saved
    bad = _rewrite(paths["gm"], tmp / "gm-as-fa.npz", lambda m: m.update(model="FactorAnalysis"))
    with pytest.raises(DataError, match=r"names model 'FactorAnalysis', but its arrays are not a FactorAnalysis result"):
        latentfs.load(bad)


@pytest.mark.parametrize(("which", "dim"), [("dca", "component"), ("gm", "component"), ("fa", "factor")])
def test_a_header_with_another_n_components_than_its_arrays_is_refused(saved, which, dim):
    paths, tmp = saved

    def edit(meta):
        meta["hyperparameters"]["n_components"] = 5

    bad = _rewrite(paths[which], tmp / f"{which}-k5.npz", edit)
    with pytest.raises(DataError, match=rf"n_components=5 in its header, but its arrays have 2 {dim}s"):
        latentfs.load(bad)


def test_a_header_whose_labels_disagree_with_a_fitted_distribution_is_refused(saved):
    paths, tmp = saved

    def edit(meta):
        meta["coords"]["component"] = ["c0", "c1", "c2"]
        meta["hyperparameters"]["n_components"] = 3

    bad = _rewrite(paths["dca"], tmp / "dca-3-labels.npz", edit)
    with pytest.raises(DataError, match=r"site 'topic_word' has shape \(2, 10\) .*dims \('component', 'feature'\) "
                                        r"have \(3, 10\) labels"):
        latentfs.load(bad)


def test_saved_results_of_every_kind_still_load(saved):
    paths, _ = saved
    for path in paths.values():
        post = latentfs.load(path)
        assert post.sites


def test_an_estimator_file_whose_parameters_disagree_with_its_result_is_refused(tmp_path):
    X = np.random.default_rng(0).normal(size=(60, 4))
    path = latentfs.FactorAnalyzer(2).fit(X).save(tmp_path / "fa")

    def edit(meta):
        meta["params"]["n_components"] = 3

    bad = _rewrite(path, tmp_path / "fa-3.npz", edit)
    with pytest.raises(DataError, match=r"n_components=3 in its parameters, but its posterior_ has 2"):
        latentfs.FactorAnalyzer.load(bad)
