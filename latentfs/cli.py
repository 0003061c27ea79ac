"""The ``latentfs`` command.

``latentfs demo``
    Fits DirichletDCA to the Reuters sample shipped in the ``lda`` package (395 × 4,258 counts), prints
    the top words of each component and the most important words with 90% credible bands, and writes
    the ArviZ InferenceData (netCDF) and a PNG figure.
``latentfs fit FILE``
    Fits a DCA model to a user's count matrix (Matrix Market ``.mtx``, scipy ``.npz``, or CSV with a
    header row of feature names) and saves the result (``.npz``, loadable with ``latentfs.load``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

_MODELS = {"dirichlet": "DirichletDCA", "gamma-poisson": "GammaPoissonDCA"}


def _threads() -> None:
    import torch

    # FIELD_NOTES: on a shared 2-core machine, more threads make small ops far slower.
    torch.set_num_threads(int(os.environ.get("LATENTFS_THREADS", "1")))


def _print_weights(result: Any, n_top: int, out: Any) -> Any:
    import latentfs

    names = latentfs.top_words(result, n=n_top)
    shares = result.extras["component_counts"].sum(0)
    shares = shares / shares.sum()
    print("\nTop words per component (share of tokens):", file=out)
    for k in sorted(range(len(names)), key=lambda k: -shares[k]):
        print(f"  c{k:<3d} {shares[k]:5.1%}  {' '.join(names[k])}", file=out)
    weights = latentfs.word_importance(result)
    lo, hi = weights.band(0.9)
    print("\nMost important words overall (saliency, 90% credible band):", file=out)
    for j in weights.ranking()[:15]:
        print(f"  {weights.feature_names[j]:<14s} {weights.scores[j]:.5f}  [{lo[j]:.5f}, {hi[j]:.5f}]", file=out)
    return weights


def _figure(result: Any, weights: Any, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    top = weights.ranking()[:20][::-1]
    lo, hi = weights.band(0.9)
    err = [weights.scores[top] - lo[top], hi[top] - weights.scores[top]]
    axes[0].errorbar(weights.scores[top], np.arange(top.size), xerr=err, fmt="o", capsize=2)
    axes[0].set_yticks(np.arange(top.size), [weights.feature_names[j] for j in top])
    axes[0].set_xlabel("saliency (90% credible band)")
    axes[0].set_title("Most important words")
    trace = result.trace
    for c in range(trace.shape[0]):
        axes[1].plot(trace[c], lw=1)
    axes[1].set_xlabel("iteration")
    axes[1].set_ylabel("objective" if result.method == "vb" else "log-likelihood")
    axes[1].set_title(f"{result.model} fitted by {result.method}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def demo(args: argparse.Namespace) -> int:
    _threads()
    import latentfs
    from latentfs.datasets import load_reuters

    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus = load_reuters()
    print(f"Reuters sample from the lda package: {corpus.shape[0]} documents × {corpus.shape[1]} words, "
          f"{int(corpus.counts.sum())} tokens")
    model = latentfs.DirichletDCA(args.components, alpha=0.1, gamma=0.1)
    started = time.perf_counter()
    import pandas as pd

    X = pd.DataFrame.sparse.from_spmatrix(corpus.counts, columns=list(corpus.vocabulary))
    options: dict[str, Any] = {"seed": args.seed, "progress": True}
    if args.method == "gibbs":
        options.update(num_chains=2, num_warmup=args.iterations, num_samples=100, thin=2)
    else:
        options.update(max_iter=args.iterations)
    print(f"Fitting {model} with method={args.method!r} …")
    result = latentfs.fit(model, X, method=args.method, **options)
    elapsed = time.perf_counter() - started
    print(f"done in {elapsed:.1f} s ({result.diagnostics.get('n_iter', '')} iterations)"
          if args.method != "gibbs" else f"done in {elapsed:.1f} s; max split-R̂ of topic_word after alignment: "
          f"{result.diagnostics.get('rhat_max_topic_word', float('nan')):.2f}")
    weights = _print_weights(result, 8, sys.stdout)
    idata_path = out_dir / "reuters_dca.nc"
    result.to_inference_data(num_draws=100).to_netcdf(idata_path)
    result_path = result.save(out_dir / "reuters_dca.npz")
    written = [idata_path, result_path]
    if _figure(result, weights, out_dir / "reuters_dca.png"):
        written.append(out_dir / "reuters_dca.png")
    print("\nWrote " + ", ".join(str(p) for p in written))
    return 0


def _read_counts(path: Path) -> Any:
    import numpy as np
    import scipy.io
    import scipy.sparse as sp

    from latentfs.core.data import DataError

    if not path.exists():
        raise DataError(f"FILE {path} does not exist; pass the path of a .mtx, .npz or .csv count matrix.")
    suffix = path.suffix.lower()
    if suffix == ".mtx":
        return sp.csr_matrix(scipy.io.mmread(str(path)))
    if suffix == ".npz":
        try:
            return sp.load_npz(path)
        except (ValueError, KeyError):
            with np.load(path, allow_pickle=False) as f:
                if len(f.files) != 1:
                    raise DataError(
                        f"{path} holds arrays {f.files}; save one array or a scipy sparse matrix."
                    ) from None
                return f[f.files[0]]
    if suffix == ".csv":
        import pandas as pd

        return pd.read_csv(path)
    raise DataError(f"FILE must end in .mtx, .npz or .csv; got {path.name!r}.")


def fit_command(args: argparse.Namespace) -> int:
    _threads()
    import latentfs

    X = _read_counts(Path(args.file))
    model = getattr(latentfs, _MODELS[args.model])(args.components)
    options: dict[str, Any] = {"seed": args.seed, "progress": not args.quiet}
    if args.method == "vb":
        options["max_iter"] = args.iterations
    elif args.method == "gibbs":
        options.update(num_warmup=args.iterations, num_samples=args.samples, num_chains=args.chains)
    result = latentfs.fit(model, X, method=args.method, **options)
    path = result.save(args.output)
    if not args.quiet:
        _print_weights(result, 8, sys.stdout)
    print(f"Wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="latentfs", description="Latent-structure models and feature selection.")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="fit DCA to the Reuters sample shipped with the lda package")
    d.add_argument("--method", choices=["vb", "gibbs"], default="vb")
    d.add_argument("--components", "-k", type=int, default=20)
    d.add_argument("--iterations", type=int, default=300, help="VB cycles at most, or Gibbs warm-up sweeps")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--output", default="latentfs-output", help="folder for the InferenceData, result and figure")
    d.set_defaults(func=demo)
    f = sub.add_parser("fit", help="fit a DCA model to a count matrix file (.mtx, .npz, .csv)")
    f.add_argument("file")
    f.add_argument("--model", choices=sorted(_MODELS), default="dirichlet")
    f.add_argument("--components", "-k", type=int, required=True)
    f.add_argument("--method", choices=["vb", "gibbs"], default="vb")
    f.add_argument("--iterations", type=int, default=500)
    f.add_argument("--samples", type=int, default=200)
    f.add_argument("--chains", type=int, default=2)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--output", "-o", default="latentfs-fit.npz")
    f.add_argument("--quiet", action="store_true")
    f.set_defaults(func=fit_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from latentfs.core.data import DataError

    try:
        return int(args.func(args))
    except DataError as exc:
        print(f"latentfs: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
