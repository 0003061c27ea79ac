"""Where a DirichletDCA VB cycle spends its time on a GPU (issue 33's K = 200 figure), by torch's profiler.

    python benchmarks/gpu_profile.py --out DIR                 # on the GPU machine (about 30 s)
    python benchmarks/gpu_profile.py --out DIR --device cpu --quick

The corpus is ``gpu_check.py``'s simulated 20-Newsgroups-sized one (11,000 × 60,000, ~2.4M tokens). After
three unprofiled cycles, five cycles are profiled in float64 and in float32; the table of operators sorted by
device time (or CPU time on the CPU) is written to ``DIR/gpu_profile.txt`` and printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_check import news20_like  # noqa: E402

import latentfs  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a small corpus (a dry run)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    X = news20_like(600, 3000) if args.quick else news20_like(11_000, 60_000)
    device = torch.device(args.device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    sort_by = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    lines = [f"DirichletDCA({args.k}) VB on {X.shape[0]} x {X.shape[1]} ({int(X.sum())} tokens), device {device}"]
    for dtype in (torch.float64, torch.float32):
        model = latentfs.DirichletDCA(args.k, alpha=0.1, gamma=0.01)
        opts = dict(method="vb", device=str(device), dtype=dtype, seed=0, tol=0.0, warn=False, num_ll_draws=0)
        latentfs.fit(model, X, max_iter=3, **opts)  # compile, allocate, warm the caches
        if device.type == "cuda":
            torch.cuda.synchronize()
        with torch.profiler.profile(activities=activities) as prof:
            t = time.perf_counter()
            latentfs.fit(model, X, max_iter=5, **opts)
            if device.type == "cuda":
                torch.cuda.synchronize()
            wall = time.perf_counter() - t
        lines += ["", f"## {dtype}: 5 cycles (with setup and export) in {wall:.3f} s wall", "",
                  prof.key_averages().table(sort_by=sort_by, row_limit=25, max_name_column_width=60)]
    text = "\n".join(lines)
    (args.out / "gpu_profile.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
