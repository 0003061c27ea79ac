"""What a user waits for before the first result: imports, ``latentfs --help``, and a first small fit, each in a
fresh process, beside the peers' imports and first fits (issue 15).

Rows (wall seconds of the whole process, median of ``--repeats`` runs, one thread):

* ``import latentfs``; ``latentfs --help``; ``latentfs fit`` of a missing file (the error a typo gets);
* a first DirichletDCA VB fit of a 200 × 100 simulated corpus (K = 5, defaults) in a new process, including its
  imports, beside scikit-learn's ``LatentDirichletAllocation(5).fit`` and tomotopy's ``LDAModel(k=5)`` trained
  100 sweeps on the same counts (their imports included);
* a first FactorAnalysis EM fit (500 × 20, k = 3) beside scikit-learn's ``FactorAnalysis(3).fit``.

The small problems make the fixed costs (imports, first-call compilation or cache loading) the figure. Run:
``python benchmarks/startup.py [--repeats 5] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dca import machine_info  # noqa: E402

_DCA_DATA = ("import numpy as np\nrng = np.random.default_rng(0)\n"
             "X = rng.poisson(rng.gamma(0.3, 1.0, size=(200, 100)) * 2.0)\nX[X.sum(1) == 0, 0] = 1\n")
_FA_DATA = ("import numpy as np\nrng = np.random.default_rng(0)\n"
            "X = rng.normal(size=(500, 3)) @ rng.normal(size=(3, 20)) + rng.normal(size=(500, 20))\n")

CASES: dict[str, list[str]] = {
    "import latentfs": [sys.executable, "-c", "import latentfs"],
    "latentfs --help": [sys.executable, "-m", "latentfs.cli", "--help"],
    "latentfs fit missing.csv -k 3 (the error)": [sys.executable, "-m", "latentfs.cli", "fit", "missing.csv", "-k", "3"],
    "latentfs: first DirichletDCA(5) VB fit": [sys.executable, "-c", _DCA_DATA + (
        "import latentfs\nlatentfs.fit(latentfs.DirichletDCA(5), X, method='vb', seed=0, warn=False)")],
    "scikit-learn: first LatentDirichletAllocation(5).fit": [sys.executable, "-c", _DCA_DATA + (
        "from sklearn.decomposition import LatentDirichletAllocation\n"
        "LatentDirichletAllocation(5, random_state=0).fit(X)")],
    "tomotopy: first LDAModel(k=5), 100 sweeps": [sys.executable, "-c", _DCA_DATA + (
        "import tomotopy as tp\nm = tp.LDAModel(k=5, seed=0)\n"
        "for row in X:\n    m.add_doc([str(j) for j in np.repeat(np.arange(row.size), row)])\nm.train(100, workers=1)")],
    "latentfs: first FactorAnalysis(3) EM fit": [sys.executable, "-c", _FA_DATA + (
        "import latentfs\nlatentfs.fit(latentfs.FactorAnalysis(3), X, method='em', seed=0)")],
    "scikit-learn: first FactorAnalysis(3).fit": [sys.executable, "-c", _FA_DATA + (
        "from sklearn.decomposition import FactorAnalysis\nFactorAnalysis(3, random_state=0).fit(X)")],
}


def run(cmd: list[str], cwd: str, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 2):  # 2: the missing-file error, which is the point of that row
        raise RuntimeError(f"{cmd} failed:\n{proc.stderr[-2000:]}")
    return wall


def main() -> None:
    from bytecode import byte_compile_latentfs  # noqa: PLC0415

    byte_compile_latentfs()  # as an installed package is (benchmarks/bytecode.py)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the table here (markdown)")
    args = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "LATENTFS_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        env["NUMBA_CACHE_DIR"] = str(Path(tmp) / "numba")
        for cmd in CASES.values():  # once each first: fills the numba cache and the file-system cache
            run(cmd, tmp, env)
        times: dict[str, list[float]] = {name: [] for name in CASES}
        for _ in range(args.repeats):  # interleaved, so a busy minute touches every row alike
            for name, cmd in CASES.items():
                times[name].append(run(cmd, tmp, env))
    machine = machine_info().replace("process CPU time", "wall time of whole processes")
    lines = ["### Startup: fresh processes, imports included", "", f"Machine: {machine}; load average at the end "
             f"{os.getloadavg()[0]:.1f}. Wall seconds of the whole process, median (min–max) of {args.repeats} runs "
             "after one warm-up run each (numba cache filled).", "", "| process | wall s |", "|---|---|"]
    for name, ts in times.items():
        lines.append(f"| {name} | {statistics.median(ts):.2f} ({min(ts):.2f}–{max(ts):.2f}) |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
