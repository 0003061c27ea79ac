"""Run the tutorials: each ``NN_*.py`` (jupytext py:percent) is executed as a notebook with nbclient.

    python tutorials/run.py                 # execute every tutorial (set LATENTFS_QUICK=1 for the quick mode)
    python tutorials/run.py --build         # also write NN_*.ipynb with outputs (figures) beside the sources
    python tutorials/run.py 01 03a          # only the tutorials whose names start with these prefixes

A failing cell fails the run with the cell's traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(path: Path, build: bool, timeout: int) -> float:
    import jupytext
    from nbclient import NotebookClient

    notebook = jupytext.read(path)
    notebook.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
    started = time.perf_counter()
    NotebookClient(notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    if build:
        import nbformat

        nbformat.write(notebook, path.with_suffix(".ipynb"))
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prefixes", nargs="*", help="run only tutorials whose file names start with these")
    parser.add_argument("--build", action="store_true", help="write executed .ipynb files with outputs")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds allowed per cell")
    args = parser.parse_args(argv)
    paths = sorted(p for p in HERE.glob("[0-9][0-9]*.py"))
    if args.prefixes:
        paths = [p for p in paths if any(p.name.startswith(x) for x in args.prefixes)]
    if not paths:
        print("no tutorials matched", file=sys.stderr)
        return 1
    for path in paths:
        print(f"running {path.name} …", flush=True)
        seconds = run(path, args.build, args.timeout)
        print(f"  ok in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
