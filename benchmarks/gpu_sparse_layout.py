"""The sparse products of a DCA VB cycle on a GPU, by the memory layout of their dense operand (issue 33).

    python benchmarks/gpu_sparse_layout.py            # on the GPU machine (about 20 s)
    python benchmarks/gpu_sparse_layout.py --quick --device cpu

A VB cycle on a GPU is three products on the corpus's sparsity pattern (``gpu_profile.py``): the rates
Z = (E[m] Θ) at the non-zeros (cuSPARSE's SDDMM), and two sparse-by-dense products. cuSPARSE reads its dense
operand row by row or column by column as it is laid out; this times each product with the dense operand
row-major and column-major (same numbers, checked) on the simulated 20-Newsgroups-sized corpus at K = 200.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_check import news20_like  # noqa: E402

from latentfs.inference.dca.common import sparse_csr  # noqa: E402


def timed(fn, device: torch.device, repeat: int = 10) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(X, t, dtype: torch.dtype, device: torch.device, k: int) -> None:
    n, j = X.shape
    kw = {"dtype": dtype, "device": device}
    crow, col = torch.as_tensor(X.indptr, device=device), torch.as_tensor(X.indices, device=device)
    vals = torch.as_tensor(X.data, **kw)
    pattern = sparse_csr(crow, col, torch.ones_like(vals), (n, j))
    csr = sparse_csr(crow, col, vals, (n, j))
    csr_t = sparse_csr(torch.as_tensor(t.indptr, device=device), torch.as_tensor(t.indices, device=device),
                       torch.as_tensor(t.data, **kw), (j, n))
    g = np.random.default_rng(0)
    left = torch.as_tensor(g.random((n, k)), **kw)
    right = torch.as_tensor(g.random((k, j)), **kw)
    right_cm = right.t().contiguous().t()  # the same K x J matrix, column-major
    ref = torch.sparse.sampled_addmm(pattern, left, right, beta=0.0).values()
    alt = torch.sparse.sampled_addmm(pattern, left, right_cm, beta=0.0).values()
    rel = float((ref - alt).abs().max() / ref.abs().max())
    a = timed(lambda: torch.sparse.sampled_addmm(pattern, left, right, beta=0.0), device)
    b = timed(lambda: torch.sparse.sampled_addmm(pattern, left, right_cm, beta=0.0), device)
    print(f"{dtype}: SDDMM rates, Θ row-major {a * 1e3:.2f} ms, column-major {b * 1e3:.2f} ms (x{a / b:.2f}); "
          f"same numbers to {rel:.1e}")
    view = right.t()  # what `csr @ exp_theta.T` passes: a column-major J x K view
    r1, r2 = csr @ view, csr @ view.contiguous()
    rel = float((r1 - r2).abs().max() / r1.abs().max())
    a = timed(lambda: csr @ view, device)
    b = timed(lambda: csr @ view.contiguous(), device)
    print(f"{dtype}: SpMM docs (I x J)(J x K), Θᵀ view {a * 1e3:.2f} ms, contiguous copy {b * 1e3:.2f} ms "
          f"(x{a / b:.2f}); same numbers to {rel:.1e}")
    a = timed(lambda: csr_t @ left, device)
    b = timed(lambda: csr_t @ left.t().contiguous().t(), device)
    print(f"{dtype}: SpMM words (J x I)(I x K), E[m] row-major {a * 1e3:.2f} ms, column-major {b * 1e3:.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    device = torch.device(args.device)
    X = news20_like(600, 3000) if args.quick else news20_like(11_000, 60_000)
    n, j, k = X.shape[0], X.shape[1], args.k
    print(f"corpus {n} x {j}, nnz {X.nnz}, K = {k}, device {device}")
    t = X.T.tocsr()
    t.sort_indices()
    for dtype in (torch.float64, torch.float32):
        measure(X, t, dtype, device, k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
