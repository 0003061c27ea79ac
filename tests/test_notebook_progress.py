"""Progress bars as a user sees them (issue 34, item 3): a bar in a terminal and in a Jupyter kernel, none in a
pipe or a CI log, none with ``progress=False``; in a kernel a widget when ipywidgets is installed (the
``notebook`` extra) and a text bar otherwise, with no "IProgress not found" warning.

The kernel tests run real notebooks through nbclient and read the cells' outputs.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest
from tqdm.notebook import tqdm as notebook_tqdm

import latentfs._notebook
from latentfs.core import driver

ROOT = Path(__file__).resolve().parents[1]

_SETUP = """\
import torch
torch.set_num_threads(1)
import latentfs
X = latentfs.GaussianMixture(2, mean_precision=0.02).simulate(200, 2, seed=0)["data"]
"""
_FIT = 'r = latentfs.fit(latentfs.GaussianMixture(2), X, method="em", max_iter=5, n_init=1{})'


def _execute(*cells: str) -> nbformat.NotebookNode:
    """Execute the cells in a fresh python3 kernel (the widgets' last state is kept in the metadata)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    return nb


def _run_notebook(*cells: str) -> list[list[dict]]:
    """Execute the cells in a fresh python3 kernel; the outputs of each cell."""
    return [list(cell.outputs) for cell in _execute(*cells).cells]


def _stderr(outputs: list[dict]) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stderr")


def _widgets(outputs: list[dict]) -> list[dict]:
    return [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]


def test_kernel_without_ipywidgets_shows_a_text_bar_and_no_iprogress_warning():
    # ipywidgets hidden from the kernel, as on an install without the notebook extra
    setup, fit, quiet = _run_notebook(
        'import sys\nsys.modules["ipywidgets"] = None\n' + _SETUP, _FIT.format(""), _FIT.format(", progress=False")
    )
    everything = _stderr(setup) + _stderr(fit) + _stderr(quiet)
    assert "IProgress" not in everything and "TqdmWarning" not in everything
    assert "EM GaussianMixture:" in _stderr(fit) and "0/5" in _stderr(fit)  # the text bar
    assert not _widgets(fit)
    assert _stderr(quiet) == "" and not _widgets(quiet)  # progress=False silences


def test_kernel_with_ipywidgets_shows_a_widget_bar():
    setup, fit, quiet = _run_notebook(_SETUP, _FIT.format(""), _FIT.format(", progress=False"))
    assert "IProgress" not in _stderr(setup) + _stderr(fit)
    bars = _widgets(fit)
    assert len(bars) == 1 and "EM GaussianMixture:" in bars[0]["data"]["text/plain"]
    assert _stderr(fit) == ""  # the widget, not a text bar besides it
    assert not _widgets(quiet) and _stderr(quiet) == ""


_CONVERGES = 'r = latentfs.fit(latentfs.GaussianMixture(2), X, method="em", max_iter=500, n_init=1)\nprint(r.diagnostics["n_iter"])'


def test_a_converged_fit_leaves_a_full_bar_not_a_red_one():
    # tqdm paints a notebook bar closed short of its total red (its sign of an error), and a text bar left short
    # reads as stopped: a fit that converged before max_iter must end its bar full, at the iterations it took,
    # and the bar stays under the cell
    nb = _execute(_SETUP, _CONVERGES)
    outputs = nb.cells[1].outputs
    n_iter = int("".join(o["text"] for o in outputs if o.get("name") == "stdout"))
    assert 2 <= n_iter < 500
    (bar,) = _widgets(outputs)
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    box = state[bar["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]]["state"]
    label, progress, text = (state[c.removeprefix("IPY_MODEL_")]["state"] for c in box["children"])
    assert progress["bar_style"] == "success" and progress["value"] == progress["max"] == n_iter
    assert "100%" in label["value"] and f"{n_iter}/{n_iter}" in text["value"]
    assert box.get("layout") and state[box["layout"].removeprefix("IPY_MODEL_")]["state"].get("visibility") != "hidden"
    # and the reference site draws it from that state (docs/_ext/latentfs_widgets.py) as a full, green bar
    spec = importlib.util.spec_from_file_location("latentfs_widgets", ROOT / "docs" / "_ext" / "latentfs_widgets.py")
    widgets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(widgets)
    assert widgets.add_static_widgets(nb) == 1
    page = bar["data"]["text/html"]
    assert f'class="lfs-progress lfs-progress-success" value="{n_iter}" max="{n_iter}"' in page


def test_a_converged_fit_leaves_a_full_text_bar_in_a_kernel_without_ipywidgets():
    setup, fit = _run_notebook('import sys\nsys.modules["ipywidgets"] = None\n' + _SETUP, _CONVERGES)
    n_iter = int("".join(o["text"] for o in fit if o.get("name") == "stdout"))
    last = _stderr(fit).replace("\r", "\n").strip().splitlines()[-1]  # what the notebook shows after the \r
    assert "100%" in last and f"{n_iter}/{n_iter}" in last


def test_no_bar_in_a_pipe_by_default():
    code = _SETUP + _FIT.format("") + "\nprint('done')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert proc.stdout.strip() == "done"
    assert "EM GaussianMixture" not in proc.stderr and "%|" not in proc.stderr


@pytest.mark.parametrize(
    "kernel, tty, widgets, show, expect",
    [
        (False, False, True, None, "off"),  # a pipe, a CI log
        (False, True, True, None, "text"),  # a terminal
        (True, False, True, None, "widget"),  # a kernel with the notebook extra
        (True, False, False, None, "text"),  # a kernel without ipywidgets
        (True, False, True, False, "off"),
        (False, True, True, False, "off"),
        (False, False, False, True, "text"),
    ],
)
def test_bar_choice(monkeypatch, kernel, tty, widgets, show, expect):
    monkeypatch.setattr(latentfs._notebook, "in_kernel", lambda: kernel)
    monkeypatch.setattr(latentfs._notebook, "widgets_available", lambda: widgets)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    if expect == "widget":
        # drawing a widget needs a live kernel (the notebook tests above): check the class that would draw it
        monkeypatch.setattr(notebook_tqdm, "__init__", _record_init)
        _record_init.calls.clear()
        driver._progress(3, "fit", show)
        assert _record_init.calls == [{"total": 3, "desc": "fit", "disable": False}]
        return
    bar = driver._progress(3, "fit", show)
    try:
        assert type(bar).__module__ == "tqdm.std"
        assert bar.disable is (expect == "off")
    finally:
        bar.close()


def _record_init(self, *args, **kwargs):
    _record_init.calls.append({k: kwargs[k] for k in ("total", "desc", "disable")})
    self.disable = True


_record_init.calls = []  # type: ignore[attr-defined]
