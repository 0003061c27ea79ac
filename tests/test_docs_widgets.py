"""The reference site draws the tutorials' progress bars as static HTML from their saved widget state
(docs/_ext/latentfs_widgets.py; issue 34: the pages showed no bar, since the widget JavaScript would come from a
CDN). Plain Python, so these run in the default suite; the built pages are checked by tests/docs/test_site.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXT = Path(__file__).resolve().parents[1] / "docs" / "_ext" / "latentfs_widgets.py"
VIEW = "application/vnd.jupyter.widget-view+json"


def _ext():
    spec = importlib.util.spec_from_file_location("latentfs_widgets", EXT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _notebook(models: dict, shown: str = "box") -> dict:
    output = {
        "output_type": "display_data",
        "metadata": {},
        "data": {VIEW: {"model_id": shown, "version_major": 2, "version_minor": 0}, "text/plain": "fit:   0%"},
    }
    return {
        "cells": [{"cell_type": "code", "outputs": [output]}],
        "metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": models}}},
    }


def _bar(style: str = "success", value: float = 37.0, high: float = 37.0, hidden: bool = False) -> dict:
    return {
        "box": {
            "model_name": "HBoxModel",
            "state": {"children": ["IPY_MODEL_l", "IPY_MODEL_p", "IPY_MODEL_t"], "layout": "IPY_MODEL_lay"},
        },
        "lay": {"model_name": "LayoutModel", "state": {"visibility": "hidden"} if hidden else {}},
        "l": {"model_name": "HTMLModel", "state": {"value": "EM\u2007fit:\u2007100%"}},
        "p": {
            "model_name": "FloatProgressModel",
            "state": {"bar_style": style, "min": 0.0, "max": high, "value": value},
        },
        "t": {"model_name": "HTMLModel", "state": {"value": "\u200737/37\u2007[00:00&lt;00:00]"}},
    }


def _only_output(nb: dict) -> dict:
    return nb["cells"][0]["outputs"][0]["data"]


def test_a_bar_is_drawn_from_its_last_state():
    nb = _notebook(_bar())
    assert _ext().add_static_widgets(nb) == 1
    page = _only_output(nb)["text/html"]
    assert '<progress class="lfs-progress lfs-progress-success" value="37" max="37">' in page
    assert "EM\u2007fit:\u2007100%" in page and "37/37\u2007[00:00&lt;00:00]" in page  # tqdm's text, escaped once
    assert page.startswith('<div class="lfs-widget lfs-hbox">')


def test_a_bar_stopped_short_keeps_its_colour_and_count():
    nb = _notebook(_bar(style="danger", value=12.0, high=100.0))
    _ext().add_static_widgets(nb)
    assert 'class="lfs-progress lfs-progress-danger" value="12" max="100"' in _only_output(nb)["text/html"]


def test_a_hidden_bar_renders_as_nothing():
    nb = _notebook(_bar(hidden=True))
    _ext().add_static_widgets(nb)
    data = _only_output(nb)
    assert data["text/html"] == "" and "text/plain" not in data


def test_an_unknown_widget_keeps_its_text():
    models = _bar()
    models["t"] = {"model_name": "DatePickerModel", "state": {}}
    nb = _notebook(models)
    assert _ext().add_static_widgets(nb) == 0
    assert "text/html" not in _only_output(nb) and _only_output(nb)["text/plain"] == "fit:   0%"


def test_a_label_is_escaped():
    models = _bar()
    models["l"] = {"model_name": "LabelModel", "state": {"value": "<b>a & b</b>"}}
    nb = _notebook(models)
    _ext().add_static_widgets(nb)
    assert "&lt;b&gt;a &amp; b&lt;/b&gt;" in _only_output(nb)["text/html"]


def test_a_notebook_without_saved_state_is_left_alone():
    nb = _notebook({})
    assert _ext().add_static_widgets(nb) == 0 and "text/html" not in _only_output(nb)
