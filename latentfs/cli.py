"""The ``latentfs`` command.

``latentfs demo``
    Fits DirichletDCA to the Reuters sample shipped in the ``lda`` package (395 × 4,258 counts), prints
    the top words of each component and the most important words with 90% bands (variational), and writes
    the ArviZ InferenceData (netCDF) and a PNG figure.
``latentfs fit FILE``
    Fits a DCA model to a user's count matrix (Matrix Market ``.mtx``, scipy ``.npz``, numpy ``.npy``, or
    CSV) and saves the result (``.npz``, loadable with ``latentfs.load``).

The command never guesses silently. A CSV's first row must be recognisably a header of feature names, or
``--header``/``--no-header`` says what it is; an index column written by ``DataFrame.to_csv()`` (or a
first column of row names) becomes the document names, with a note on stderr; ``.mtx``/``.npz``/``.npy``
files take their vocabulary from ``--vocab``. Every error is one line on stderr naming the file or option
and the remedy, with exit status 2; the output path is checked before anything is fitted. The file readers
are in :mod:`latentfs.cli_input`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from latentfs.cli_input import check_file, fail, handle_empty_documents, note, read_counts, warn

__all__ = ["main", "build_parser"]

_MODELS = {"dirichlet": "DirichletDCA", "gap": "GammaPoissonDCA"}
# How long an engine runs from the command line: samplers (an engine spec of kind "sampler") take --iterations as
# their warm-up and --samples / --chains; engines with max_iter take --iterations as it; these two name their length
# otherwise. Which engine is which, and which take progress= and device=, comes from the registry (_Engine).
_ITERATIONS = {"svi": ("num_steps", 2000), "online_vb": ("n_passes", 1)}


class _Engine:
    """What the command line needs to know of the engine registered for ``method`` on ``model``."""

    def __init__(self, model: Any, method: str) -> None:
        from latentfs.core.registry import engine_for, engine_options, methods_for

        engine = engine_for(model, method)
        self.options = set(engine_options(engine) or [])
        self.sampler = getattr(engine, "kind", "") == "sampler"
        self.samplers = sorted(m for m in methods_for(model)
                               if getattr(engine_for(model, m), "kind", "") == "sampler")
        self.on_device = sorted(m for m in methods_for(model)
                                if "device" in (engine_options(engine_for(model, m)) or []))


def _threads() -> None:
    import torch

    # FIELD_NOTES: on a shared 2-core machine, more threads make small ops far slower.
    torch.set_num_threads(int(os.environ.get("LATENTFS_THREADS", "1")))


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("latentfs")
    except Exception:  # noqa: BLE001 - not installed as a distribution (e.g. run from a source tree)
        return "unknown"


# --------------------------------------------------------------------------------------------------------
# output


def _print_weights(result: Any, n_top: int, out: Any) -> Any:
    import numpy as np

    import latentfs

    table = latentfs.top_words(result, n=n_top)
    names = [table[k]["word"].tolist() for k in table.columns.unique("component")]
    counts = result.extras.get("component_counts")
    shares = None
    if counts is not None:
        counts = np.asarray(counts, dtype=float)
        counts = counts.reshape(-1, counts.shape[-1]) if counts.ndim > 1 else counts[None]
        if counts.shape[-1] == len(names):
            shares = counts.sum(0) / counts.sum()
    order = sorted(range(len(names)), key=lambda k: -shares[k]) if shares is not None else range(len(names))
    print("\nTop words per component" + (" (share of tokens):" if shares is not None else ":"), file=out)
    for k in order:
        share = f"{shares[k]:5.1%}  " if shares is not None else ""
        print(f"  c{k:<3d} {share}{' '.join(names[k])}", file=out)
    from latentfs.core.data import DataError

    try:
        weights = latentfs.word_importance(result)
    except DataError as exc:
        note(f"word importance is not available for this fit ({' '.join(str(exc).split())})")
        return None
    lo: Any = None
    hi: Any = None
    try:
        lo, hi = weights.band(0.9)
    except DataError:  # a point estimate has no draws, so no band
        pass
    label = band_label(result) if lo is not None else f"point estimate of {result.method}, no band"
    print(f"\nMost important words overall (saliency per word, probability units; {label}):", file=out)
    for j in weights.ranking()[:15]:
        band = f"  [{lo[j]:.5f}, {hi[j]:.5f}]" if lo is not None and hi is not None else ""
        print(f"  {weights.feature_names[j]:<14s} {weights.scores[j]:.5f}{band}", file=out)
    return weights


def band_label(result: Any, *, short: bool = False) -> str:
    """What the demo's 90% bands are, in words, for the printed table and the figure alike: a credible band of a
    sampler's draws (marked NOT CONVERGED, with the one R̂ the result holds, when its chains disagree) or the band of
    a variational posterior (too narrow)."""
    if result.kind("topic_word") == "draws":
        label = "90% credible band" if short else f"90% credible band from {result.method} draws"
        conv = result.diagnostics.get("convergence", {}).get("topic_word", {})
        if conv.get("r_hat_max", 0.0) > 1.01:
            label += (f"; NOT CONVERGED (max R-hat {conv['r_hat_max']:.2f}): unreliable" if short else
                      f"; NOT CONVERGED: max R-hat {conv['r_hat_max']:.2f}, treat the band as unreliable")
        return label
    if short:
        return "90% band of the variational posterior, too narrow"
    return f"90% band of the {result.method} variational posterior, narrower than the true posterior"


def _objective_name(result: Any) -> str:
    """What ``result.trace`` holds, in words: the objective a VB fit maximised, or a sampler's log-likelihood."""
    if result.method != "vb":
        return "log-likelihood"
    update = result.diagnostics.get("theta_update", "chapter")
    if update == "full":
        return "variational bound (ELBO), nats"
    return "VB objective: document bounds + Σ γ log θ, nats"


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
    axes[0].set_xlabel(f"saliency ({band_label(result, short=True)})")
    axes[0].set_title("Most important words")
    trace = result.trace
    for c in range(trace.shape[0]):
        axes[1].plot(trace[c], lw=1)
    axes[1].set_xlabel("iteration")
    axes[1].set_ylabel(_objective_name(result))
    axes[1].set_title(f"{result.model} fitted by {result.method}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _output_folder(value: str) -> Path:
    """The folder ``demo --output`` writes to, created if missing, checked before anything is fitted."""
    path = Path(value)
    blocker = next((p for p in (path, *path.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        fail(f"--output {value}: {blocker} is a file, not a folder; choose another path for the demo's files.")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"--output {value}: cannot create the folder ({exc.strerror}); choose a folder you can write to.")
    if not os.access(path, os.W_OK):
        fail(f"--output {value}: cannot write to {path} (permission denied); choose a folder you can write to.")
    return path


def demo(args: argparse.Namespace) -> int:
    _threads()
    import latentfs
    from latentfs.datasets import load_reuters

    out_dir = _output_folder(args.output)
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
          if args.method != "gibbs" else f"done in {elapsed:.1f} s; max R̂ of topic_word after relabelling: "
          f"{result.diagnostics.get('convergence', {}).get('topic_word', {}).get('r_hat_max', float('nan')):.2f}")
    r_hat = result.diagnostics.get("convergence", {}).get("topic_word", {}).get("r_hat_max", 1.0)
    if args.method == "gibbs" and r_hat > 1.01:
        print("The chains disagree: a topic model's posterior has many modes (different ways to split the words "
              "into topics), and each chain settles in one. Each chain's topics are a sound fit; the bands below "
              "mix them and are marked unreliable. For one answer use the default VB, or fit one chain "
              "(latentfs.fit(..., num_chains=1)) and compare chains started from other seeds.")
    if args.method == "vb":
        trace = result.trace[0]
        rose = bool((trace[1:] >= trace[:-1] - 1e-9 * abs(trace[1:])).all())
        print(f"{_objective_name(result)}: {trace[0]:,.0f} at the start, {trace[-1]:,.0f} at the end "
              f"({'it rose every cycle' if rose else 'it did not rise every cycle'}; this is what VB maximises and "
              "what the figure plots)")
    learned = result.hyperparameters.get("learned") or []
    if "gamma" in learned:
        print(f"learned γ = {float(result.hyperparameters['gamma']):.3g} (the model's {model.gamma:g} was the starting "
              "value; learn_gamma=False keeps it)")
    weights = _print_weights(result, 8, sys.stdout)
    idata_path = out_dir / "reuters_dca.nc"
    # a VB result is exported as what it is, its variational parameters (draws only when asked for: 100 draws
    # made the file 75 MB beside a 1.1 MB .npz); a sampler's draws are random floats, which zlib barely shrinks
    result.to_inference_data().to_netcdf(str(idata_path), compress=args.method == "vb")
    result_path = result.save(out_dir / "reuters_dca.npz")
    written = [idata_path, result_path]
    if _figure(result, weights, out_dir / "reuters_dca.png"):
        written.append(out_dir / "reuters_dca.png")
    print("\nWrote " + ", ".join(str(p) for p in written))
    return 0


# --------------------------------------------------------------------------------------------------------
# fit


def _output_path(value: str, source: Path) -> Path:
    """The file ``Posterior.save(value)`` will write, checked before any fitting."""
    path = Path(value)
    target = path if path.suffix == ".npz" else Path(str(path) + ".npz") if path.suffix else path.with_suffix(".npz")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.exists():
        fail(f"--output {value}: the folder {parent} does not exist; create it first (mkdir -p {parent}) or "
              "choose another path.")
    if not parent.is_dir():
        fail(f"--output {value}: {parent} is a file, not a folder; choose another path.")
    if target.is_dir():
        fail(f"--output {value}: {target} is a folder; give a file name such as {target / 'fit.npz'}.")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        fail(f"--output {value}: cannot write to {parent} (permission denied); choose a folder you can write to.")
    if source.exists() and target.exists() and target.resolve() == source.resolve():
        fail(f"--output {value} is the input file; choose another path so the data is not overwritten.")
    return target


def _engine_options(args: argparse.Namespace, model: Any) -> dict[str, Any]:
    from latentfs.core.data import check_device, check_int, check_seed

    method = args.method
    engine = _Engine(model, method)
    options: dict[str, Any] = {"seed": check_seed(args.seed, name="--seed")}
    if "progress" in engine.options:
        options["progress"] = not args.quiet
    if not engine.sampler:
        for flag, value in (("--samples", args.samples), ("--chains", args.chains)):
            if value is not None:
                fail(f"{flag} applies to the samplers ({', '.join(engine.samplers)}); --method {method} is not "
                      f"one. Drop {flag}.")
    iterations = None if args.iterations is None else check_int("--iterations", args.iterations, low=1)
    if method in _ITERATIONS:
        options[_ITERATIONS[method][0]] = _ITERATIONS[method][1] if iterations is None else iterations
    elif engine.sampler:
        options["num_warmup"] = 500 if iterations is None else iterations
        options["num_samples"] = check_int("--samples", 200 if args.samples is None else args.samples, low=1)
        options["num_chains"] = check_int("--chains", 2 if args.chains is None else args.chains, low=1)
    elif "max_iter" in engine.options:
        options["max_iter"] = 500 if iterations is None else iterations
    elif iterations is not None:
        fail(f"--iterations is not an option of --method {method} from the command line; drop it (the engine's "
              "default is used).")
    device = check_device(args.device, name="--device")
    if device.type != "cpu":
        if "device" not in engine.options:
            fail(f"--device {args.device}: --method {method} runs on the CPU only; drop --device, or use one of "
                  f"{engine.on_device}.")
        options["device"] = device
    return options


def _model(args: argparse.Namespace) -> Any:
    import latentfs
    from latentfs.core.data import check_float, check_int

    cls = getattr(latentfs, _MODELS[args.model])
    k = check_int("--components", args.components, low=1, remedy="Pass -k 2 or more components, e.g. -k 10.")
    methods = latentfs.methods_for(cls)
    if args.method not in methods:
        fail(f"--method {args.method} is not available for --model {args.model}; choose one of {methods}.")
    hyper: dict[str, Any] = {}
    for flag, key in (("--alpha", "alpha"), ("--gamma", "gamma"), ("--beta", "beta")):
        value = getattr(args, key)
        if value is None:
            continue
        if key == "beta" and args.model != "gap":
            fail("--beta is the Gamma-Poisson rate; it applies to --model gap only. Drop --beta or add --model gap.")
        hyper[key] = check_float(flag, value, 0.0, low_open=True, remedy=f"Pass a positive number, e.g. {flag} 0.1.")
    return cls(k, **hyper)


def _check_k(k: int, counts: Any, path: Path) -> None:
    if k > counts.n_features:
        fail(f"-k {k} is more than the {counts.n_features} features of {path}: components beyond the number of "
              f"words cannot be told apart. Choose -k {counts.n_features} or fewer.")
    limit = max(2, counts.n_documents // 5)
    if k > limit:
        warn(
            f"-k {k} is large for {counts.n_documents} documents (more than one component per 5 documents): most "
            f"components will get almost no data and the fit is slower. Try -k {limit} or fewer, or compare "
            "several K on held-out documents (latentfs.evaluate.heldout_estimators.select_n_components)."
        )


def fit_command(args: argparse.Namespace) -> int:
    import latentfs

    path = Path(args.file)
    check_file(path)  # before the model, whose engines take seconds to import
    model = _model(args)
    options = _engine_options(args, model)
    output = _output_path(args.output, path)
    _threads()
    counts = handle_empty_documents(read_counts(path, args), path, args.empty_documents)
    _check_k(model.n_components, counts, path)
    if not args.quiet:
        print(f"Fitting {model!r} with --method {args.method} to {counts.n_documents} documents × "
              f"{counts.n_features} features of {path}")
    if args.method in ("gibbs", "collapsed_gibbs"):
        # keep the per-document draws too: the printed word importance and its bands need them
        options["store"] = ("topic_word", model.doc_site)
    result = latentfs.fit(model, counts, method=args.method, **options)
    written = result.save(output)
    if not args.quiet:
        _print_weights(result, 8, sys.stdout)
    print(f"Wrote {written}")
    return 0


# --------------------------------------------------------------------------------------------------------
# parser


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see '{self.prog} --help'.\n")


class _Methods:
    """``--method``'s choices: every engine registered for the two models (``latentfs.methods_for``), so a new
    engine is an option at once. They are looked up when first needed (a ``--method`` given, ``fit --help``), so
    ``latentfs --help`` and the other commands do not import the engines."""

    def __init__(self) -> None:
        self._names: list[str] | None = None

    def _load(self) -> list[str]:
        if self._names is None:
            import latentfs

            models = [getattr(latentfs, name) for name in _MODELS.values()]
            self._names = sorted({m for model in models for m in latentfs.methods_for(model)})
        return self._names

    def __contains__(self, item: object) -> bool:
        return item in self._load()

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


def build_parser() -> argparse.ArgumentParser:
    all_methods = _Methods()
    parser = _Parser(prog="latentfs", description="Latent-structure models and feature selection.")
    parser.add_argument("--version", action="version", version=f"latentfs {_version()}",
                        help="print the installed latentfs version and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    d = sub.add_parser("demo", help="fit DCA to the Reuters sample shipped with the lda package",
                       description="Fit DirichletDCA to the Reuters sample (395 × 4,258) and write the "
                                   "InferenceData, the result and a figure.")
    d.add_argument("--method", choices=["vb", "gibbs"], default="vb", help="engine: vb (default) or gibbs")
    d.add_argument("--components", "-k", type=int, default=20, help="number of components K (default 20)")
    d.add_argument("--iterations", type=int, default=300, help="VB cycles at most, or Gibbs warm-up sweeps")
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    d.add_argument("--output", default="latentfs-output", help="folder for the InferenceData, result and figure")
    d.set_defaults(func=demo)

    f = sub.add_parser(
        "fit", help="fit a DCA model to a count matrix file (.mtx, .npz, .npy, .csv)",
        description="Fit a DCA model to a documents × features count matrix and save the result (.npz, "
                    "read it back with latentfs.load).",
    )
    f.add_argument("file", metavar="FILE",
                   help="counts, one row per document: .csv (header of feature names), .mtx, .npz or .npy")
    f.add_argument("--components", "-k", type=int, required=True, help="number of components K (required)")
    f.add_argument("--model", choices=sorted(_MODELS), default="dirichlet",
                   help="dirichlet: DirichletDCA (LDA-like, default); gap: GammaPoissonDCA (Gamma-Poisson scores)")
    f.add_argument("--method", choices=all_methods, default="vb", metavar="METHOD",
                   help="engine: %(choices)s (default vb); map, nmf_kl and plsi_em give point estimates; gibbs, "
                        "collapsed_gibbs and nuts sample; some engines exist for one model only (the error says which)")
    f.add_argument("--alpha", type=float, default=None, help="prior on the component proportions/scores "
                   "(α, positive; default: the model's own)")
    f.add_argument("--gamma", type=float, default=None, help="Dirichlet prior on each component's word "
                   "distribution (γ, positive; default 1/K)")
    f.add_argument("--beta", type=float, default=None, help="Gamma rate of the scores (β, positive; --model gap only)")
    f.add_argument("--iterations", type=int, default=None,
                   help="optimisers: at most this many iterations (default 500); samplers: warm-up sweeps "
                        "(default 500); svi: steps (default 2000); online_vb: passes over the data (default 1)")
    f.add_argument("--samples", type=int, default=None, help="samplers: draws kept per chain (default 200)")
    f.add_argument("--chains", type=int, default=None, help="samplers: number of chains (default 2)")
    f.add_argument("--seed", type=int, default=0, help="random seed, an integer ≥ 0 (default 0)")
    f.add_argument("--device", default="cpu", help="torch device: cpu (default), cuda or cuda:N")
    f.add_argument("--vocab", metavar="FILE", default=None,
                   help="feature names for .mtx/.npz/.npy (or a CSV with --no-header): one word per line, one "
                        "line per column")
    head = f.add_mutually_exclusive_group()
    head.add_argument("--header", dest="header", action="store_const", const="yes", default="auto",
                      help="CSV: the first row is the header of feature names, even if it looks numeric")
    head.add_argument("--no-header", dest="header", action="store_const", const="no",
                      help="CSV: there is no header row; every row is a document")
    f.add_argument("--index-column", choices=["auto", "first", "none"], default="auto",
                   help="CSV: auto (default) uses a first column of row labels (to_csv's index, text, or "
                        "0..n-1) as document names, with a note; first always does; none never does")
    f.add_argument("--empty-documents", choices=["error", "drop", "keep"], default="error",
                   help="documents with no counts: error (default), drop them with a note, or keep them")
    f.add_argument("--output", "-o", default="latentfs-fit.npz",
                   help="result file (.npz appended if missing; default latentfs-fit.npz); checked before fitting")
    f.add_argument("--quiet", action="store_true", help="print only the path written (no progress, no words)")
    f.set_defaults(func=fit_command)
    return parser


def _format_warning(message: Any, category: type, filename: str, lineno: int, line: str | None = None) -> str:
    text = " ".join(str(message).split())
    return f"latentfs: warning: {category.__name__}: {text}\n"


def main(argv: list[str] | None = None) -> int:
    """Run the ``latentfs`` command; returns the exit status (0, or 2 for bad input)."""
    args = build_parser().parse_args(argv)
    from latentfs.core.data import DataError

    original = warnings.formatwarning
    warnings.formatwarning = _format_warning  # type: ignore[assignment]
    try:
        return int(args.func(args))
    except DataError as exc:
        print(f"latentfs: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except MemoryError:
        print("latentfs: error: out of memory; use fewer components (-k), fewer --samples/--chains, or a "
              "smaller corpus.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("latentfs: interrupted; nothing was written.", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = original


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
