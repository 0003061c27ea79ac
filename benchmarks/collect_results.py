"""Gather the per-benchmark result files (benchmarks/results/*.md) into benchmarks/RESULTS.md.

    python benchmarks/collect_results.py

Each benchmark script writes its own results file with the machine it ran on and the command that
reproduces it; this page puts them in one place, after a summary table kept by hand.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ["dca", "dca_gibbs", "dca_news20", "dca_collapsed", "dca_em", "continuous_fa", "continuous_mixture", "hdda", "selection_spectral",
         "selection_subspace"]


def main() -> None:
    summary = (HERE / "SUMMARY.md").read_text() if (HERE / "SUMMARY.md").exists() else ""
    parts = ["# Benchmark results", "", summary.strip(), ""]
    files = {p.stem: p for p in (HERE / "results").glob("*.md")}
    for name in ORDER + sorted(set(files) - set(ORDER)):
        if name in files:
            text = files[name].read_text().strip()
            demoted = "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())
            parts += ["---", "", demoted, ""]
    (HERE / "RESULTS.md").write_text("\n".join(parts) + "\n")
    print(f"wrote {HERE / 'RESULTS.md'}")


if __name__ == "__main__":
    main()
