"""The option tables the reference shows: one row per option, four cells each (no browser or docs build needed).

The reference's family pages render these Markdown tables (docs/_ext/latentfs_pages.py); a ``|`` inside a cell
that is not escaped splits the cell and shifts the row.
"""

import re

from latentfs.core import registry
from latentfs.core.pipeline import option_table

SPECS = sorted(
    {(cls.__name__, method): engine for (cls, method), engine in registry.engines().items() if registry.is_spec(engine)}.items()
)


def _cells(row: str) -> list[str]:
    return re.split(r"(?<!\\)\|", row.strip())[1:-1]


def test_every_spec_row_has_four_cells():
    assert SPECS, "no spec is registered"
    for (model, method), spec in SPECS:
        rows = option_table(spec).splitlines()
        assert len(rows) == 2 + len(spec.options), (model, method)
        for row, name in zip(rows[2:], spec.options, strict=True):
            cells = _cells(row)
            assert len(cells) == 4, (model, method, row)
            assert cells[0].strip() == f"`{name}`", (model, method, row)


def test_a_pipe_in_a_meaning_is_escaped():
    # PLSA's warm start names P(z|d): the one meaning with a pipe when this test was written
    spec = dict(SPECS)[("PLSA", "em")]
    row = next(r for r in option_table(spec).splitlines() if r.startswith("| `init`"))
    assert "\\|" in row and len(_cells(row)) == 4
