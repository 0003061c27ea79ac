"""Sphinx configuration of latentfs's reference.

Build (after ``pip install -c constraints.txt -e ".[docs]"``): run the tutorials once, keeping the executed
notebooks here, then build with warnings as errors::

    LATENTFS_QUICK=1 python tutorials/run.py --build docs/tutorials
    python -m sphinx -W --keep-going -b html docs docs/_build/html

The API pages, the family pages and their option tables are generated from the package on every build
(``_ext/latentfs_pages.py``); the notebooks are rendered as they were executed, never executed here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import latentfs  # noqa: E402

project = "latentfs"
author = "the latentfs developers"
copyright = "the latentfs developers"
release = version = latentfs.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
    "latentfs_pages",
    "latentfs_widgets",
]
templates_path = ["_templates"]
exclude_patterns = ["_build", "figures", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# autodoc / autosummary: members in source order, one page per public name
autosummary_generate = True
autosummary_imported_members = False
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpydoc Parameters sections say the types; signatures stay readable
autodoc_default_options = {"show-inheritance": False}
# numpydoc: our docstrings are numpydoc; members are listed by autosummary's class template, not by numpydoc
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# notebooks: rendered from the outputs tutorials/run.py recorded, never executed here
nb_execution_mode = "off"
nb_output_stderr = "show"
# The tutorials' progress bars are ipywidgets, whose JavaScript would come from a CDN that an offline reader (and
# CI) cannot reach: no widget JavaScript is loaded, the widget view is not rendered, and _ext/latentfs_widgets.py
# draws each bar as static HTML from the state the run saved (its last iteration count, objective and colour).
nb_ipywidgets_js: dict[str, dict[str, str]] = {}
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
myst_enable_extensions = ["colon_fence"]  # no math: the docstrings write formulas in Unicode
myst_heading_anchors = 3

html_theme = "pydata_sphinx_theme"
html_title = f"latentfs {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
# the theme logs a console error on a first visit unless the colour mode is named
html_context = {"default_mode": "auto"}
html_favicon = "_static/favicon.svg"  # without one, browsers ask for /favicon.ico and log a 404
html_static_path = ["_static"]
html_css_files = ["latentfs.css"]


def _check_notebooks() -> None:
    """Every tutorial has its executed notebook here: a missing one would be a page silently absent."""
    if os.environ.get("LATENTFS_DOCS_SKIP_TUTORIALS"):
        return
    sources = sorted((DOCS.parent / "tutorials").glob("[0-9][0-9]*.py"))
    missing = [p.stem for p in sources if not (DOCS / "tutorials" / f"{p.stem}.ipynb").is_file()]
    if missing:
        raise RuntimeError(
            f"docs/tutorials has no executed notebook for {', '.join(missing)}; run "
            "`LATENTFS_QUICK=1 python tutorials/run.py --build docs/tutorials` first "
            "(or set LATENTFS_DOCS_SKIP_TUTORIALS=1 to build the rest without the tutorials)."
        )


_check_notebooks()
if os.environ.get("LATENTFS_DOCS_SKIP_TUTORIALS"):
    exclude_patterns.append("tutorials/*.ipynb")


def _skip_foreign_members(app, what, name, obj, skip, options):  # noqa: ANN001, ANN202
    """Document latentfs's own members only: scikit-learn's generated ``set_*_request`` methods (metadata routing)
    and other inherited machinery are scikit-learn's to document."""
    module = getattr(obj, "__module__", None) or ""
    if module and not module.startswith("latentfs"):
        return True
    return None


def setup(app):  # noqa: ANN001, ANN201
    app.connect("autodoc-skip-member", _skip_foreign_members)
