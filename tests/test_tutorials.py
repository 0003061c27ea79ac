"""Static checks of the tutorials (CI executes them with tutorials/run.py; nothing is executed here)."""

import importlib.util
import re
from pathlib import Path

import pytest

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"
SOURCES = sorted(TUTORIALS.glob("[0-9][0-9]*.py"))


def _run_module():
    spec = importlib.util.spec_from_file_location("tutorials_run", TUTORIALS / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_tutorials():
    assert len(SOURCES) >= 8


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_every_tutorial_promises_figures(path):
    assert _run_module().MIN_FIGURES.get(path.stem, 0) >= 1


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_no_backend_forced_in_a_cell(path):
    # a backend set in a cell (Agg) keeps the figures out of the notebook
    assert "matplotlib.use(" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_only_public_entry_points(path):
    text = path.read_text(encoding="utf-8")
    private = re.findall(r"^\s*from (latentfs\.(?:core|models)\S*|latentfs\.inference\.\w+\.\w+\S*) import",
                         text, flags=re.M)
    assert private == []
    assert "latentfs.inference.fit" not in text
    assert re.search(r"from latentfs[\w.]* import _", text) is None


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_every_tutorial_opens_with_the_public_api(path):
    # issue 14 item 3: a "few lines" section on real data comes before the paper's sections
    text = path.read_text(encoding="utf-8")
    quick_start = text.find("## 0. The library in a few lines")
    first_section = text.find("## 1.")
    assert 0 <= quick_start < first_section
    assert re.search(r"^import latentfs$|^from latentfs(\.\w+)? import", text, flags=re.M)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_quick_mode_is_announced_where_prose_quotes_full_run_numbers(path):
    # prose that quotes a full run must say so, and the notebook must read the quick switch
    text = path.read_text(encoding="utf-8")
    if "full run" in text or "full mode" in text:
        assert 'os.environ.get("LATENTFS_QUICK")' in text


def test_kernel_env_forces_the_inline_backend(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    env = _run_module().kernel_env()
    assert env["MPLBACKEND"] == "module://matplotlib_inline.backend_inline"
    # nothing else is hidden from the notebooks: no progress-bar switch, no warning filter
    assert "TQDM_DISABLE" not in env and "IProgress" not in env.get("PYTHONWARNINGS", "")


def test_count_figures_counts_png_outputs():
    import nbformat

    nb = nbformat.v4.new_notebook()
    png = nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    text = nbformat.v4.new_output("stream", name="stdout", text="hello")
    nb.cells = [nbformat.v4.new_code_cell("a", outputs=[png, text]), nbformat.v4.new_markdown_cell("x"),
                nbformat.v4.new_code_cell("b", outputs=[png, png])]
    assert _run_module().count_figures(nb) == 3
