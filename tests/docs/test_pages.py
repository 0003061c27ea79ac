"""The generator of the reference's pages (docs/_ext/latentfs_pages.py): option tables from the engines themselves.

Marked ``docs`` (it needs numpydoc, from the docs extra); ``.ci/run`` runs it with ``-m docs``.
"""

import importlib.util
import re
from pathlib import Path

import pytest

from latentfs.core import registry
from latentfs.core.pipeline import SHARED, option_table

pytestmark = pytest.mark.docs

EXT = Path(__file__).resolve().parents[2] / "docs" / "_ext" / "latentfs_pages.py"


def _pages():
    spec = importlib.util.spec_from_file_location("latentfs_pages", EXT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(table: str) -> dict[str, list[str]]:
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        assert len(cells) == 4, line
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def fit_example(model, X, *, n_steps: int = 10, scale: float | None = None, seed=None, progress=None):
    """An entry function as the unmoved engines write them.

    Parameters
    ----------
    n_steps : int
        How many steps to take. More is slower.
    scale : float or None; the step's size (None: chosen from the data; see the module docstring).
    seed, progress : see :func:`latentfs.fit`.
    """


def test_an_entry_function_table_comes_from_its_signature_and_docstring():
    rows = _rows(_pages().engine_table(fit_example))
    assert list(rows) == ["n_steps", "scale", "seed", "progress"]
    assert rows["n_steps"] == ["int", "`10`", "How many steps to take."]
    assert rows["scale"] == ["float \\| None", "`None`", "the step's size (None: chosen from the data; see the module docstring)."]
    # the registry applies the one seed rule before calling an entry function; "see latentfs.fit" is the shared meaning
    assert rows["seed"][1] == "`0`" and rows["seed"][2] == SHARED["seed"].meaning
    assert rows["progress"][2] == SHARED["progress"].meaning


def test_a_spec_table_is_option_table():
    pages = _pages()
    specs = [e for e in registry.engines().values() if registry.is_spec(e)]
    assert specs
    for spec in specs:
        assert pages.engine_table(spec) == option_table(spec)


def test_every_registered_engine_has_a_full_table():
    # each option a row with a type, a default and a meaning, whichever way the engine is written
    pages = _pages()
    for (cls, method), engine in registry.engines().items():
        rows = _rows(pages.engine_table(engine))
        assert rows, (cls.__name__, method)
        empty = [name for name, (kind, default, meaning) in rows.items() if not (kind and default and meaning)]
        assert not empty, (cls.__name__, method, empty)
