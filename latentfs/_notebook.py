"""What the progress bars need to know about the front end: a Jupyter kernel, and whether ipywidgets is there.

Imported by ``import latentfs`` (it imports nothing heavy): inside a kernel without ipywidgets, the first import of
``tqdm.auto`` (Pyro makes it when latentfs first imports Pyro) warns "IProgress not found" although the bar falls
back to text; :func:`quiet_tqdm_auto` makes that first import itself with the notice silenced, so the user sees
the text bar and no warning. Outside a kernel it does nothing.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings

__all__ = ["in_kernel", "widgets_available", "quiet_tqdm_auto"]


def in_kernel() -> bool:
    """True inside a Jupyter kernel (the test tqdm.autonotebook makes: an IPython shell run by IPKernelApp)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
        return shell is not None and "IPKernelApp" in shell.config
    except Exception:  # an IPython without get_ipython or config: not a kernel we can draw a widget in
        return False


def widgets_available() -> bool:
    """True when ipywidgets can be imported (the notebook extra), so a widget bar can be drawn."""
    if "ipywidgets" in sys.modules:
        return sys.modules["ipywidgets"] is not None
    try:
        return importlib.util.find_spec("ipywidgets") is not None
    except (ImportError, ValueError):
        return False


def quiet_tqdm_auto() -> None:
    """Inside a kernel without ipywidgets, import ``tqdm.auto`` once with its "IProgress not found" notice
    silenced (later imports, Pyro's included, find the module already loaded and warn no more)."""
    if "tqdm.auto" in sys.modules or not in_kernel() or widgets_available():
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import tqdm.auto  # noqa: F401
