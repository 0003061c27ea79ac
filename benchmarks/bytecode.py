"""Byte-compile latentfs before timing fresh processes, as an installed package is.

pip compiles a package's modules to bytecode when it installs it (the peers the benchmarks compare against were
installed so). An editable install is not compiled at install time, and where ``PYTHONDONTWRITEBYTECODE=1`` is
set (this project's machines set it) no process writes the bytecode it compiles: every fresh process would then
compile each latentfs module it imports from source, a cost no installed user pays (about 0.1 s for the four
largest families, 0.05 s of a 0.13 s Gaussian-mixture call). Each fresh-process benchmark calls
:func:`byte_compile_latentfs` first; it writes nothing that is tracked (``__pycache__/`` is ignored).
"""

from __future__ import annotations

import compileall
import importlib.util


def byte_compile_latentfs() -> None:
    """Write the bytecode of every latentfs module (a no-op for modules whose bytecode is current)."""
    spec = importlib.util.find_spec("latentfs")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("latentfs is not importable: install it first (pip install -c constraints.txt -e .)")
    for folder in spec.submodule_search_locations:
        compileall.compile_dir(folder, quiet=1)
