"""Feature-selection benchmarks of issues 6 and 7 in one command.

    python benchmarks/selection.py [--quick]

Runs ``selection_spectral.py`` (Q-alpha, leverage scores, BSS against SelectKBest and RFE) and
``selection_subspace.py`` (PLS and VIP against scikit-learn, forest relevance against Boruta), each in
its own process so that one BLAS thread and a clean memory measurement apply to each.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    extra = sys.argv[1:]
    code = 0
    for script in ("selection_spectral.py", "selection_subspace.py"):
        print(f"== {script}", flush=True)
        code |= subprocess.call([sys.executable, str(HERE / script), *extra])
    return code


if __name__ == "__main__":
    raise SystemExit(main())
