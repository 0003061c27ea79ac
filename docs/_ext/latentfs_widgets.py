"""Static HTML for the widgets the tutorials drew (their progress bars), from the state the run saved.

A tutorial executed by ``tutorials/run.py`` keeps every widget's last state in the notebook's metadata (nbclient's
``store_widget_state``). Drawing a widget on a page takes the ipywidgets JavaScript, which would come from a CDN: an
offline reader (and CI) cannot reach it, and the site loads nothing from another host. So, as a notebook is read,
every output that shows a widget gains a ``text/html`` rendering of that widget's last state (a progress bar becomes
its label, an HTML ``<progress>`` element and its text: what the reader of the executed notebook saw under the cell),
and the widget view itself is not rendered (``conf.py``'s ``nb_mime_priority_overrides``). A widget that was hidden
when its cell ended renders as nothing, as in Jupyter; a model this renderer does not know keeps its text fallback.
"""

from __future__ import annotations

import html
import json
from typing import Any

VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
_BOXES = {"HBoxModel": "lfs-hbox", "VBoxModel": "lfs-vbox", "BoxModel": "lfs-hbox"}
_PROGRESS = {"FloatProgressModel", "IntProgressModel"}


def _ref(value: str) -> str:
    return value.removeprefix("IPY_MODEL_")


def _hidden(models: dict[str, Any], state: dict[str, Any]) -> bool:
    layout = models.get(_ref(state.get("layout") or ""), {}).get("state", {})
    return layout.get("visibility") == "hidden" or layout.get("display") == "none"


def render(model_id: str, models: dict[str, Any]) -> str | None:
    """HTML for the widget ``model_id`` in its saved state; ``""`` when it was hidden, None when a model in it is
    one this renderer does not draw (the output then keeps its other representations)."""
    model = models.get(model_id)
    if model is None:
        return None
    name, state = model.get("model_name"), model.get("state", {})
    if _hidden(models, state):
        return ""
    if name in _BOXES:
        parts = [render(_ref(child), models) for child in state.get("children", [])]
        if any(p is None for p in parts):
            return None
        return f'<div class="lfs-widget {_BOXES[name]}">{"".join(p for p in parts if p)}</div>'
    if name == "HTMLModel":  # its value is HTML by definition (tqdm escapes what it writes there)
        return f'<span class="lfs-widget-text">{state.get("value", "")}</span>'
    if name == "LabelModel":
        return f'<span class="lfs-widget-text">{html.escape(str(state.get("value", "")))}</span>'
    if name in _PROGRESS:
        low, high, value = (float(state.get(k, d)) for k, d in (("min", 0.0), ("max", 100.0), ("value", 0.0)))
        style = state.get("bar_style") or "plain"
        return (
            f'<progress class="lfs-progress lfs-progress-{html.escape(style)}" '
            f'value="{value - low:g}" max="{max(high - low, 0.0):g}">{value:g} of {high:g}</progress>'
        )
    return None


def add_static_widgets(notebook: dict[str, Any]) -> int:
    """Give every widget output of ``notebook`` (a notebook as JSON) its ``text/html`` from the saved state; the
    number of outputs changed."""
    models = notebook.get("metadata", {}).get("widgets", {}).get(STATE, {}).get("state", {})
    changed = 0
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            view = data.get(VIEW)
            if not view or "text/html" in data:
                continue
            rendered = render(view.get("model_id", ""), models)
            if rendered is None:
                continue
            data["text/html"] = rendered
            if not rendered:  # hidden when its cell ended: nothing to show, not even its first text
                data.pop("text/plain", None)
            changed += 1
    return changed


def _on_source_read(app: Any, docname: str, source: list[str]) -> None:
    if not docname.startswith("tutorials/"):
        return
    try:
        notebook = json.loads(source[0])
    except ValueError:  # not a notebook in JSON (a MyST page)
        return
    if add_static_widgets(notebook):
        source[0] = json.dumps(notebook)


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
