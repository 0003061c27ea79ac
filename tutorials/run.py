"""Run the tutorials: each ``NN_*.py`` (jupytext py:percent) is executed as a notebook with nbclient.

    python tutorials/run.py                 # execute every tutorial (set LATENTFS_QUICK=1 for the quick mode)
    python tutorials/run.py --build         # also write NN_*.ipynb with outputs (figures) beside the sources
    python tutorials/run.py --build docs/tutorials   # ... or into a folder (the docs render them from there)
    python tutorials/run.py 01 03a          # only the tutorials whose names start with these prefixes

A failing cell fails the run with the cell's traceback. Every tutorial promises a number of figures
(``MIN_FIGURES`` below); a notebook whose outputs carry fewer ``image/png`` figures fails the run, so a
backend that draws nothing (``MPLBACKEND=Agg`` leaking into the kernel) cannot go unnoticed.

The kernel runs with matplotlib's inline backend whatever ``MPLBACKEND`` says in the calling shell (CI
sets Agg for plain scripts). Nothing else is hidden: the notebooks show what a user sees, progress bars
included (widgets with ipywidgets, text without), and a cell that prints Pyro's "IProgress not found"
warning fails the run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The figures each notebook must carry (image/png outputs), in quick and full mode alike.
MIN_FIGURES = {
    "01_discrete_component_analysis": 4,
    "02_dca_complete": 3,
    "02b_plsa_and_nmf": 3,
    "03a_factor_analysis": 5,
    "03b_mixtures": 3,
    "04_hdda": 3,
    "05_spectral_feature_selection": 7,
    "06_pls_projections_and_evaluation": 6,
    "07_hidden_markov_models": 4,
    "08_latent_trait": 4,
    "09_hidden_markov_random_fields": 4,
    "10_choosing_k": 4,
    "11_infomax": 4,
    "12_fpc": 5,
    "13_hyperbolic_pca": 4,
}

INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


def kernel_env() -> dict[str, str]:
    """The kernel's environment: the caller's, with matplotlib's inline backend."""
    env = dict(os.environ)
    env["MPLBACKEND"] = INLINE_BACKEND
    return env


def count_figures(notebook) -> int:
    """Number of ``image/png`` outputs in an executed notebook."""
    return sum(
        "image/png" in output.get("data", {})
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )


def warnings_in(notebook) -> list[str]:
    """Text of the stderr outputs that mention IProgress (the warning the kernel must not print)."""
    return [
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("name") == "stderr" and "IProgress" in output.get("text", "")
    ]


def run(path: Path, build: Path | None, timeout: int) -> tuple[float, int, list[str]]:
    import jupytext
    from nbclient import NotebookClient

    notebook = jupytext.read(path)
    notebook.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
    started = time.perf_counter()
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}})
    client.execute(env=kernel_env())
    if build is not None:
        import nbformat

        build.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, build / f"{path.stem}.ipynb")
    return time.perf_counter() - started, count_figures(notebook), warnings_in(notebook)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prefixes", nargs="*", help="run only tutorials whose file names start with these")
    parser.add_argument(
        "--build", nargs="?", const=HERE, default=None, type=Path, metavar="DIR",
        help="write executed .ipynb files with outputs into DIR (default: beside the sources)",
    )
    parser.add_argument("--timeout", type=int, default=1200, help="seconds allowed per cell")
    args = parser.parse_args(argv)
    paths = sorted(p for p in HERE.glob("[0-9][0-9]*.py"))
    if args.prefixes:
        paths = [p for p in paths if any(p.name.startswith(x) for x in args.prefixes)]
    if not paths:
        print("no tutorials matched", file=sys.stderr)
        return 1
    failures = []
    for path in paths:
        print(f"running {path.name} …", flush=True)
        seconds, figures, noisy = run(path, args.build, args.timeout)
        promised = MIN_FIGURES.get(path.stem)
        if promised is None:
            failures.append(f"{path.name}: no entry in MIN_FIGURES (tutorials/run.py); add the figures it promises")
        elif figures < promised:
            failures.append(f"{path.name}: {figures} figure(s) in the notebook, {promised} promised")
        if noisy:
            failures.append(f"{path.name}: a cell printed the IProgress warning: {noisy[0].strip()[:120]}")
        print(f"  ok in {seconds:.1f} s, {figures} figure(s) (at least {promised} promised)", flush=True)
    if failures:
        print("\n".join(["tutorial checks failed:", *failures]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
