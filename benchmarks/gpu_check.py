"""Issue 33 in one run: every torch engine on a CUDA GPU against the CPU, float32 against float64, and the
GPU against one CPU core on the issue's workloads.

    python benchmarks/gpu_check.py --out DIR                          # on the GPU machine (about 6 minutes)
    python benchmarks/gpu_check.py --quick --device cpu --out DIR     # dry run on a CPU machine (under 2 minutes)

Parts (``--parts tests,agree,float32,bench``; each writes as it goes, and a failing part is recorded, never fatal):

* **tests**: ``python -m pytest tests/test_gpu.py tests/test_device_options.py`` in a child process (started
  first, while the parts below that time nothing run beside it); failures are run again with warnings not
  made errors, to tell a numerical failure from a warning of the machine's newer packages.
* **agree**: every engine registered with a ``device`` option (read from the registry, so a new one is
  included) fitted on ``--device`` and on the CPU in float64. Deterministic engines must agree to 1e-6
  (objective and every site, normwise: max |a − b| / max |a|); the DCA and PLSA engines are given one start
  made on the host (``tests/test_gpu.py``'s ``STARTS``), and their same-seed difference (each fit drawing its
  own start, on the host too) is reported beside it. Samplers and online VB draw from
  another random stream on a GPU: their mean objective over the kept iterations must agree within 2%.
* **float32**: every deterministic engine with a ``dtype`` option, float32 on ``--device`` against float64 on
  the CPU from the same start: every point estimate within 1e-4 (normwise), or the engine is named as one
  that should refuse float32. Engines without ``dtype`` (mixtures, HMMs, hidden Potts) run in float64 only.
* **bench**: ``--device`` beside ONE CPU core (``torch.set_num_threads(1)``, BLAS/OpenMP/numba at one thread):
  DirichletDCA VB on a simulated 20-Newsgroups-sized corpus (11,000 × 60,000, ~2.4M tokens) at K = 50 and
  200 (time per cycle; time to the held-out score of the default float64 fit, from one start made on the
  host); KL-NMF and PLSA EM on the same corpus (K = 50); FA EM on 1,000,000 × 100 (q = 10); Gaussian-mixture
  EM on 1,000,000 × 50 at K = 20 (full covariances, the Cholesky E-step on both sides). CPU times are
  measured on a few iterations and extrapolated per iteration (the GMM's on 50,000 rows, scaled linearly
  in rows); the tables say which.

Outputs in ``--out``: ``gpu_check.md`` and ``gpu_check.json`` (rewritten after every record, so a run cut short
keeps what it measured), ``pytest.txt`` and ``pytest_rerun.txt``.

The GPU machine (this workplace's H200 image, as listed in 2026-11): ``python3`` is Python 3.12 with torch
2.11 (CUDA 13), numpy, scipy, scikit-learn, numba, pandas and pytest, and no network. latentfs is pure Python
and runs from the working tree with ``PYTHONPATH=.``; ``pip install -e . --no-deps`` would fail there (pip's
build isolation fetches setuptools from the index; ``--no-build-isolation`` would avoid that, but nothing needs
an install). The models import Pyro, which the image lacks: carry ``pyro_ppl-1.9.1`` and ``pyro_api-0.1.2``
(pure-Python wheels) and install them with ``pip install --no-index --no-deps --target /tmp/site``, then
``PYTHONPATH=/tmp/site:.``. ArviZ, h5netcdf, dask and hmmlearn are absent there and not needed by this script.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"  # the CPU side is one core; set before numpy, torch and numba load

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
torch.set_num_threads(1)

try:  # recorded, not fatal: the tests still run and say why (e.g. Pyro not carried)
    import latentfs
    from latentfs.core.options import check_device
    from latentfs.core.registry import _ENGINES, _load_engines, engine_options
    IMPORT_ERROR = None
except Exception:  # noqa: BLE001
    IMPORT_ERROR = traceback.format_exc()

SAMPLER_METHODS = ("gibbs", "collapsed_gibbs", "nuts", "svi", "rjmcmc")
#: Options an engine cannot run without on the small data sets (by model class name and method).
ENGINE_EXTRAS = {("PLSA", "tem"): {"validation_fraction": 0.25}}
STOCHASTIC_METHODS = ("online_vb",)  # mini-batches drawn on the fit's device: compared like samplers


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------------------ report
class Report:
    """Records written to ``gpu_check.json`` and ``gpu_check.md`` after every addition."""

    def __init__(self, out: Path, args: argparse.Namespace) -> None:
        self.out, self.args = out, args
        self.started = time.time()
        self.machine = machine_info(args.device)
        self.records: list[dict[str, Any]] = []

    def add(self, part: str, name: str, status: str, note: str = "", **metrics: Any) -> None:
        rec = {"part": part, "name": name, "status": status, "note": note, "metrics": _plain(metrics)}
        self.records.append(rec)
        shown = ", ".join(f"{k}={_short(v)}" for k, v in metrics.items() if not isinstance(v, (list, dict)))
        log(f"{part:8s} {name:38s} {status.upper():5s} {shown} {note}".rstrip())
        self.write()

    def write(self) -> None:
        data = {"machine": self.machine, "command": " ".join(sys.argv), "elapsed_s": time.time() - self.started,
                "records": self.records}
        (self.out / "gpu_check.json").write_text(json.dumps(data, indent=1, default=str))
        (self.out / "gpu_check.md").write_text(self.markdown())

    def markdown(self) -> str:
        m = self.machine
        lines = [
            "# GPU check (issue 33)", "",
            f"Device: **{m.get('device_name')}** ({m.get('device')}); torch {m.get('torch')} (CUDA {m.get('cuda')}); "
            f"CPU side: {m.get('cpu')}, one thread; Python {m.get('python')}; numpy {m.get('numpy')}; "
            f"latentfs commit {m.get('commit')}.", "",
            f"Command: `{' '.join(sys.argv)}`; elapsed {time.time() - self.started:.0f} s.", "",
        ]
        counts: dict[str, int] = {}
        for r in self.records:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        lines += ["Summary: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), ""]
        for part, title in (("tests", "tests/test_gpu.py on the device"),
                            ("agree", "Every engine with `device`: device against CPU, float64"),
                            ("float32", "float32 on the device against float64 on the CPU"),
                            ("bench", "Device against one CPU core")):
            recs = [r for r in self.records if r["part"] == part]
            if not recs:
                continue
            lines += [f"## {title}", "", "| name | status | figures | note |", "| --- | --- | --- | --- |"]
            for r in recs:
                figs = "; ".join(f"{k} {_short(v)}" for k, v in r["metrics"].items() if not isinstance(v, (list, dict)))
                note = r["note"].replace("|", "/").replace("\n", " ")
                lines.append(f"| {r['name']} | {r['status']} | {figs} | {note} |")
            lines.append("")
        return "\n".join(lines) + "\n"


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v


def _short(v: Any) -> str:
    if isinstance(v, float):
        if v == 0 or not math.isfinite(v):
            return str(v)
        return f"{v:.3g}" if 1e-3 <= abs(v) < 1e5 else f"{v:.2e}"
    return str(v)


def machine_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "cuda": torch.version.cuda, "numpy": np.__version__, "device": device,
                            "platform": platform.platform(), "cores": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        info["cpu"] = platform.processor()
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(device_name=p.name, capability=f"{p.major}.{p.minor}", memory_gib=round(p.total_memory / 2**30, 1),
                    multiprocessors=p.multi_processor_count)
    else:
        info["device_name"] = "no CUDA device (CPU only)"
    for mod in ("scipy", "sklearn", "numba", "pyro"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception as exc:  # noqa: BLE001 - a missing package is a fact to record
            info[mod] = f"unavailable ({type(exc).__name__})"
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                        text=True, timeout=10).stdout.strip() or "unknown (no .git)"
    except (OSError, subprocess.SubprocessError):
        info["commit"] = "unknown (no git)"
    return info


class Budget:
    """The wall-clock budget of the whole run; a part that would start too late is recorded as skipped."""

    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()


class PartTimeout(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise PartTimeout("part ran past its time limit")


def guarded(report: Report, part: str, name: str, fn: Any, *, limit_s: float, budget: Budget) -> Any:
    """Run ``fn()``; record an exception (or a time-out, checked between Python statements) and go on."""
    if budget.left() < 5:
        report.add(part, name, "skip", "out of time (the run's --budget-s)")
        return None
    limit = int(max(5, min(limit_s, budget.left())))
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except Exception as exc:  # noqa: BLE001 - one failing part never aborts the run
        tb = traceback.format_exc(limit=6).strip().splitlines()
        report.add(part, name, "error", f"{type(exc).__name__}: {exc}"[:600] + " | " + " / ".join(tb[-4:])[:600])
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def now(device: torch.device) -> float:
    sync(device)
    return time.perf_counter()


# ------------------------------------------------------------------------------------------------ part: tests
def start_tests(out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "pytest", "tests/test_gpu.py", "tests/test_device_options.py", "-k", "not dask",
           "-q", "-rA", "-p", "no:cacheprovider"]
    log("tests    starting: " + " ".join(cmd[1:]))
    handle = open(out / "pytest.txt", "w")  # noqa: SIM115 - closed in finish_tests
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
    proc.handle = handle  # type: ignore[attr-defined]
    proc.started = time.perf_counter()  # type: ignore[attr-defined]
    return proc


def _summary(text: str) -> dict[str, int]:
    out = {}
    for key in ("passed", "failed", "skipped", "error", "errors", "xfailed", "deselected"):
        found = re.findall(rf"(\d+) {key}\b", text)
        if found:
            out[key] = int(found[-1])
    return out


def finish_tests(report: Report, proc: subprocess.Popen, out: Path, budget: Budget, timeout_s: float,
                 on_gpu: bool) -> None:
    try:
        proc.wait(timeout=max(5.0, min(timeout_s - (time.perf_counter() - proc.started), budget.left() - 60)))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.handle.close()
    text = (out / "pytest.txt").read_text(errors="replace")
    last = [ln for ln in text.splitlines() if re.search(r"\d+ (passed|failed|skipped|errors?)\b", ln)]
    counts = _summary(last[-1] if last else "")
    failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", text, flags=re.M)))
    skipped_on_gpu = on_gpu and counts.get("skipped", 0) > 0
    ok = proc.returncode == 0 and not skipped_on_gpu
    note = "" if proc.returncode is not None and proc.returncode >= 0 else "killed at its time limit"
    if skipped_on_gpu:
        note += " tests were skipped on a machine that should have CUDA (see pytest.txt)"
    report.add("tests", "pytest tests/test_gpu.py tests/test_device_options.py", "pass" if ok else "fail",
               note.strip(), returncode=proc.returncode, seconds=round(time.perf_counter() - proc.started, 1),
               failed_ids=failed[:40], **counts)
    if failed and budget.left() > 90:
        cmd = [sys.executable, "-m", "pytest", *failed, "-q", "-rA", "-p", "no:cacheprovider",
               "-W", "ignore::DeprecationWarning", "-W", "ignore::FutureWarning", "-W", "ignore::UserWarning",
               "-W", "ignore::RuntimeWarning"]
        try:
            res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=min(150, budget.left() - 60))
            (out / "pytest_rerun.txt").write_text(res.stdout + res.stderr)
            still = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", res.stdout, flags=re.M)))
            report.add("tests", "failures again, warnings not errors", "info",
                       "those still failing fail on their numbers; the others failed on a warning only",
                       still_failing=still, passed_now=sorted(set(failed) - set(still)))
        except subprocess.TimeoutExpired:
            report.add("tests", "failures again, warnings not errors", "skip", "rerun timed out")


# ------------------------------------------------------------------------------------------------ part: agree
def _model_and_data(cls: type, method: str) -> tuple[Any, Any] | None:
    """A small model and data set for every model class that has engines with ``device``."""
    import test_gpu as T

    from latentfs.models.dca import ConditionalGammaPoissonDCA, DirichletDCA, GammaPoissonDCA
    from latentfs.models.factor import FactorAnalysis, MixtureOfFactorAnalyzers
    from latentfs.models.hmm import CategoricalHMM, GaussianHMM
    from latentfs.models.hmrf import HiddenPotts
    from latentfs.models.latent_trait import LatentTrait
    from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile
    from latentfs.models.plsa import PLSA

    priors = {"loading_scale": 1.0, "noise_shape": 2.0, "noise_scale": 1.0}
    table: dict[type, Any] = {
        DirichletDCA: (lambda: DirichletDCA(3), T._counts),
        GammaPoissonDCA: (lambda: GammaPoissonDCA(3), T._counts),
        ConditionalGammaPoissonDCA: (lambda: ConditionalGammaPoissonDCA(3), T._counts),
        PLSA: (lambda: PLSA(3), T._counts),
        FactorAnalysis: (lambda: FactorAnalysis(2, **priors) if method in ("gibbs", "map") else FactorAnalysis(2),
                         T._continuous),
        MixtureOfFactorAnalyzers: (lambda: MixtureOfFactorAnalyzers(2, 1), T._clusters),
        LatentTrait: (lambda: LatentTrait(1), T._items),
        GaussianMixture: (lambda: GaussianMixture(2), T._clusters),
        LatentProfile: (lambda: LatentProfile(2), T._clusters),
        LatentClass: (lambda: LatentClass(2), T._classes),
        GaussianHMM: (lambda: GaussianHMM(2), T._sequences),
        CategoricalHMM: (lambda: CategoricalHMM(2), T._symbols),
        HiddenPotts: (lambda: HiddenPotts(2), T._lattice),
    }
    if cls not in table:
        return None
    make, data = table[cls]
    return make(), data()


def _start_for(model: Any, method: str) -> Any:
    """The host-made common start of tests/test_gpu.py for the engines that draw theirs on the device."""
    import test_gpu as T

    name = type(model).__name__
    key = {("DirichletDCA", "vb"): "dca-vb", ("GammaPoissonDCA", "vb"): "gap-vb",
           ("ConditionalGammaPoissonDCA", "vb"): "cgp-vb", ("GammaPoissonDCA", "nmf_kl"): "nmf-kl",
           ("GammaPoissonDCA", "map"): "dca-map", ("DirichletDCA", "map"): "dca-map",
           ("DirichletDCA", "plsi_em"): "dca-map", ("PLSA", "em"): "plsa-em"}.get((name, method))
    if (name, method) == ("PLSA", "tem"):  # a start for the training documents left by validation_fraction
        frac = ENGINE_EXTRAS[("PLSA", "tem")]["validation_fraction"]

        def tem_start(model: Any, X: Any, device: Any) -> Any:
            doc, tw = T.STARTS["plsa-em"](model, X, device)
            return doc[: X.shape[0] - int(round(frac * X.shape[0]))], tw

        return tem_start
    return None if key is None else T.STARTS[key]


def _cast_start(init: Any, dtype: torch.dtype) -> Any:
    """A start's floating tensors in ``dtype`` (the VB engines' states are dataclasses of tensors)."""
    if isinstance(init, tuple) or init is None:
        return init
    fields = {k: (v.to(dtype) if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in vars(init).items()}
    return type(init)(**fields)


def _options(model: Any, method: str, accepted: list[str], quick: bool) -> dict[str, Any]:
    wanted: dict[str, Any] = {"seed": 0, "max_iter": 30, "tol": 0.0, "warn": False, "num_ll_draws": 0,
                              "num_chains": 2, "num_warmup": 50 if quick else 100, "num_samples": 50 if quick else 100,
                              "progress": False}
    return {**{k: v for k, v in wanted.items() if k in accepted},
            **ENGINE_EXTRAS.get((type(model).__name__, method), {})}


def _normwise(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf
    scale = float(np.max(np.abs(a))) if a.size else 0.0
    return float(np.max(np.abs(a - b))) / max(scale, 1e-300) if a.size else 0.0


def _site_diffs(a: Any, b: Any) -> dict[str, float]:
    out = {}
    for site in a.sites:
        try:
            out[site] = _normwise(a.mean(site), b.mean(site))
        except Exception as exc:  # noqa: BLE001 - a site without a mean is reported, not fatal
            out[site] = f"{type(exc).__name__}"  # type: ignore[assignment]
    return out


def _kept_mean(post: Any, warmup: int) -> float:
    trace = np.asarray(post.trace, dtype=np.float64)
    kept = trace[..., warmup:] if trace.shape[-1] > warmup else trace
    return float(kept.mean())


def agree_engine(report: Report, cls: type, method: str, engine: Any, device: torch.device, quick: bool) -> None:
    name = f"{cls.__name__}/{method}"
    made = _model_and_data(cls, method)
    if made is None:
        report.add("agree", name, "skip", "no data factory for this model class in gpu_check.py: add one")
        return
    model, X = made
    accepted = engine_options(engine) or []
    opts = _options(model, method, accepted, quick)
    stochastic = method in SAMPLER_METHODS or method in STOCHASTIC_METHODS
    t0 = time.perf_counter()
    cpu = latentfs.fit(model, X, method=method, device="cpu", **opts)
    dev = latentfs.fit(model, X, method=method, device=str(device), **opts)
    host = all(isinstance(dev.mean(s), np.ndarray) for s in dev.sites)
    if stochastic:
        warm = int(opts.get("num_warmup", 0))
        a, b = _kept_mean(cpu, warm), _kept_mean(dev, warm)
        rel = abs(b - a) / max(abs(a), 1e-300)
        report.add("agree", name, "pass" if rel <= 0.02 and host else "fail",
                   "sampler/stochastic: mean objective over the kept iterations within 2%",
                   rel_diff=rel, cpu=a, device=b, seconds=round(time.perf_counter() - t0, 2))
        return
    same_seed_obj = abs(float(dev.trace[..., -1].mean()) - float(cpu.trace[..., -1].mean())) / max(
        abs(float(cpu.trace[..., -1].mean())), 1e-300)
    same_seed_sites = _site_diffs(cpu, dev)
    start = _start_for(model, method)
    note = "same seed"
    if start is not None and "init" in accepted:
        cpu = latentfs.fit(model, X, method=method, device="cpu", **opts, init=start(model, X, "cpu"))
        dev = latentfs.fit(model, X, method=method, device=str(device), **opts, init=start(model, X, str(device)))
        note = "common host start (init); same_seed_*: each fit from the seed alone (starts drawn on the host)"
    obj = abs(float(dev.trace[..., -1].mean()) - float(cpu.trace[..., -1].mean())) / max(
        abs(float(cpu.trace[..., -1].mean())), 1e-300)
    sites = _site_diffs(cpu, dev)
    worst = max([v for v in sites.values() if isinstance(v, float)] or [math.inf])
    ok = obj <= 1e-6 and worst <= 1e-6 and host  # iteration counts may differ where one side stops on a zero change
    extra = {} if start is None else {"same_seed_objective_diff": same_seed_obj,
                                      "same_seed_worst_site_diff": max(
                                          [v for v in same_seed_sites.values() if isinstance(v, float)] or [math.inf])}
    report.add("agree", name, "pass" if ok else "fail", note, objective_diff=obj, worst_site_diff=worst,
               iterations=f"{cpu.trace.shape[-1]}/{dev.trace.shape[-1]}", site_diffs=sites, **extra,
               seconds=round(time.perf_counter() - t0, 2))


def part_agree(report: Report, device: torch.device, quick: bool, budget: Budget) -> None:
    _load_engines()
    engines = []
    for (cls, method), engine in _ENGINES.items():
        if "device" in (engine_options(engine) or []):
            engines.append((cls, method, engine))
    engines.sort(key=lambda e: (e[0].__name__, e[1]))
    log(f"agree    {len(engines)} engines take device=")
    for cls, method, engine in engines:
        guarded(report, "agree", f"{cls.__name__}/{method}",
                lambda c=cls, m=method, e=engine: agree_engine(report, c, m, e, device, quick),
                limit_s=60, budget=budget)


# ------------------------------------------------------------------------------------------------ part: float32
def float32_engine(report: Report, cls: type, method: str, engine: Any, device: torch.device, quick: bool) -> None:
    name = f"{cls.__name__}/{method}"
    made = _model_and_data(cls, method)
    if made is None:
        report.add("float32", name, "skip", "no data factory for this model class")
        return
    model, X = made
    accepted = engine_options(engine) or []
    opts = _options(model, method, accepted, quick)
    start = _start_for(model, method)
    kw64 = {} if start is None else {"init": start(model, X, "cpu")}
    kw32 = {} if start is None else {"init": _cast_start(start(model, X, str(device)), torch.float32)}
    ref = latentfs.fit(model, X, method=method, device="cpu", dtype=torch.float64, **opts, **kw64)
    try:
        low = latentfs.fit(model, X, method=method, device=str(device), dtype=torch.float32, **opts, **kw32)
    except latentfs.core.data.DataError as exc:  # an engine that refuses float32 meets the rule
        if "must be float64" not in str(exc):
            raise
        msg = str(exc)
        report.add("float32", name, "pass", "refuses float32: " + msg[msg.find(": ") + 2 : msg.find(" Pass ")])
        return
    sites = _site_diffs(ref, low)
    worst = max([v for v in sites.values() if isinstance(v, float)] or [math.inf])
    obj = abs(float(low.trace[..., -1].mean()) - float(ref.trace[..., -1].mean())) / max(
        abs(float(ref.trace[..., -1].mean())), 1e-300)
    ok = worst <= 1e-4
    note = "every point estimate within 1e-4" if ok else (
        f"float32 is {worst:.1e} off (normwise): this engine should refuse float32 or document the loss")
    report.add("float32", name, "pass" if ok else "fail", note, worst_site_diff=worst, objective_diff=obj,
               site_diffs=sites, iterations=f"{ref.trace.shape[-1]}/{low.trace.shape[-1]}")


def part_float32(report: Report, device: torch.device, quick: bool, budget: Budget) -> None:
    _load_engines()
    no_dtype = []
    for (cls, method), engine in sorted(_ENGINES.items(), key=lambda kv: (kv[0][0].__name__, kv[0][1])):
        accepted = engine_options(engine) or []
        if "device" not in accepted or method in SAMPLER_METHODS or method in STOCHASTIC_METHODS:
            continue
        if "dtype" not in accepted:
            no_dtype.append(f"{cls.__name__}/{method}")
            continue
        guarded(report, "float32", f"{cls.__name__}/{method}",
                lambda c=cls, m=method, e=engine: float32_engine(report, c, m, e, device, quick),
                limit_s=60, budget=budget)
    report.add("float32", "engines without a dtype option", "info", "float64 only: " + ", ".join(no_dtype))


# ------------------------------------------------------------------------------------------------ part: bench
def news20_like(n_docs: int, n_words: int, n_topics: int = 50, mean_length: int = 218, seed: int = 1) -> sp.csr_matrix:
    """A 20-Newsgroups-sized corpus from a DCA-like generator, vectorised (seconds for 2.4M tokens): topics
    Dirichlet(0.01)-like (Gamma(0.01) rows normalised), document mixtures Dirichlet(0.1), lengths Poisson."""
    rng = np.random.default_rng(seed)
    lengths = rng.poisson(mean_length, size=n_docs).clip(20)
    theta = rng.gamma(0.01, size=(n_topics, n_words)) + 1e-12
    theta /= theta.sum(1, keepdims=True)
    mix = rng.dirichlet(np.full(n_topics, 0.1), size=n_docs)
    doc = np.repeat(np.arange(n_docs), lengths)
    comp = np.empty(doc.size, dtype=np.int64)
    cdf_m = np.cumsum(mix, 1)
    for lo in range(0, doc.size, 1 << 18):
        d = doc[lo : lo + (1 << 18)]
        comp[lo : lo + d.size] = np.minimum((cdf_m[d] < rng.random(d.size)[:, None]).sum(1), n_topics - 1)
    words = np.empty(doc.size, dtype=np.int64)
    cdf_t = np.cumsum(theta, 1)
    for k in range(n_topics):
        sel = np.flatnonzero(comp == k)
        words[sel] = np.searchsorted(cdf_t[k], rng.random(sel.size) * cdf_t[k, -1])
    X = sp.csr_matrix((np.ones(doc.size), (doc, np.minimum(words, n_words - 1))), shape=(n_docs, n_words))
    X.sum_duplicates()
    return X


def _vb_start(n_docs: int, k: int, n_words: int) -> Any:
    """The VB engine's own kind of start (a = 0.5, Θ rows 1/J ± 10%), made on the host once for every fit."""
    from latentfs.inference.dca.vb import VBState

    noise = np.random.default_rng(11).gamma(100.0, 1 / 100.0, size=(k, n_words))
    return VBState(doc_shape=torch.full((n_docs, k), 0.5, dtype=torch.float64),
                   topic_word=torch.as_tensor(noise / noise.sum(1, keepdims=True)))


def _vb_run(X: Any, k: int, device: torch.device, dtype: torch.dtype, init: Any, max_iter: int, tol: float,
            every: int, max_seconds: float = math.inf) -> dict[str, Any]:
    """One DirichletDCA VB fit timed per cycle (snapshot copies excluded); Θ kept every ``every`` cycles; stopped
    (as a user's Ctrl-C stops a fit) once it has run ``max_seconds``."""
    model = latentfs.DirichletDCA(k, alpha=0.1, gamma=0.01)
    rec: dict[str, Any] = {"stamps": [], "objective": [], "snaps": [], "excluded": 0.0, "time_capped": False}
    start = now(device)

    def callback(it: int, state: Any, value: float) -> None:
        t = now(device)
        rec["stamps"].append(t - start - rec["excluded"])
        rec["objective"].append(float(value))
        if (it + 1) % every == 0 or it + 1 == max_iter:
            rec["snaps"].append((it + 1, state.topic_word.detach().double().cpu().numpy()))
        rec["last"] = (it + 1, state.topic_word.detach().clone())
        rec["excluded"] += now(device) - t
        if rec["stamps"][-1] > max_seconds:
            rec["time_capped"] = True
            raise KeyboardInterrupt  # the driver returns the state reached so far

    latentfs.fit(model, X, method="vb", seed=0, max_iter=max_iter, tol=tol, dtype=dtype, device=str(device),
                 init=init, num_ll_draws=0, warn=False, progress=False, callback=callback,
                 **({"n_threads": 1} if device.type == "cpu" else {}))
    rec["total"] = now(device) - start - rec["excluded"]
    n = len(rec["stamps"])
    if n and (not rec["snaps"] or rec["snaps"][-1][0] != n):  # stopped before the cap: keep the final Θ too
        rec["snaps"].append((n, rec["last"][1].double().cpu().numpy()))
    rec["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
    return rec


class threads:
    """torch on a few CPU threads inside the block (the held-out scoring, which is not timed), then one again.
    Only on a machine of 8 cores or more: on 2 shared cores two threads made the fold-in 26x slower."""

    def __init__(self, cores: int) -> None:
        self.n = min(4, cores) if cores >= 8 else 1

    def __enter__(self) -> None:
        torch.set_num_threads(self.n)

    def __exit__(self, *exc: Any) -> None:
        torch.set_num_threads(1)


def _per_cycle(stamps: list[float]) -> float:
    diffs = np.diff(stamps)
    return float(np.median(diffs[1:] if diffs.size > 2 else diffs)) if diffs.size else math.nan


def _first_reaching(snaps: list[tuple[int, np.ndarray]], score: Any, target: float) -> tuple[int | None, int]:
    """Index of the first snapshot whose held-out score is ≥ target, by bisection (held-out assumed to rise
    with cycles past the start's plateau); returns (index or None, number of evaluations)."""
    lo, hi, evals, best = 0, len(snaps) - 1, 1, None
    if not snaps or score(snaps[-1][1]) < target:  # the last one first: no search when it is not reached at all
        return None, evals
    best, hi = len(snaps) - 1, len(snaps) - 2
    while lo <= hi:
        mid = (lo + hi) // 2
        evals += 1
        if score(snaps[mid][1]) >= target:
            best, hi = mid, mid - 1
        else:
            lo = mid + 1
    return best, evals


def bench_dca(report: Report, X: Any, split: Any, k: int, device: torch.device, quick: bool, budget: Budget) -> None:
    """Per cycle: CPU (1 thread, float64) against the device in float64 and float32, from one host start. Time to
    target: the held-out score of the default float64 fit (tol 1e-5, capped), which the CPU fit would reach after
    as many cycles (same start, same arithmetic up to rounding: checked on the CPU's cycles)."""
    from latentfs.evaluate.heldout import document_completion

    name = f"DirichletDCA VB, K={k}"
    init = _vb_start(X.shape[0], k, X.shape[1])
    for dev, dtype in ((torch.device("cpu"), torch.float64), (device, torch.float64), (device, torch.float32)):
        # warm-up on 200 documents: numba compiles the CPU kernels, CUDA loads its kernels and handles
        latentfs.fit(latentfs.DirichletDCA(k), X[:200], method="vb", seed=0, max_iter=2, tol=0.0, dtype=dtype,
                     device=str(dev), num_ll_draws=0, warn=False, progress=False, empty_documents="drop",
                     **({"n_threads": 1} if dev.type == "cpu" else {}))
    cpu_cycles = 2 if quick else 3
    cpu = _vb_run(X, k, torch.device("cpu"), torch.float64, init, cpu_cycles, 0.0, 10**9)
    cpu_cycle = _per_cycle(cpu["stamps"])
    cpu_setup = max(cpu["stamps"][0] - cpu_cycle, 0.0)
    max_cycles, every, cap_s = (60, 5, 30.0) if quick else (150, 10, 30.0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    target_line = k == 200 and not quick
    goal = "; issue target >= 100x one core per cycle at K=200" if target_line else ""
    runs: dict[str, Any] = {}
    for label, dtype, tol in (("f64", torch.float64, 1e-5), ("f32", torch.float32, 0.0)):
        run = _vb_run(X, k, device, dtype, init, max_cycles, tol, every, max_seconds=cap_s)
        runs[label] = run
        per = _per_cycle(run["stamps"])
        agree = max(abs(a - b) / max(abs(a), 1e-300) for a, b in zip(cpu["objective"], run["objective"], strict=False))
        status = ("pass" if cpu_cycle / per >= 100 else "fail") if target_line else "info"
        report.add("bench", f"{name}, per cycle, {label}", status,
                   f"CPU: {cpu_cycles} cycles at 1 thread (compiled kernel), median of cycles 2+; device: median of "
                   f"cycles 2+ of {len(run['stamps'])} ({'tol 1e-5' if tol else 'tol 0'}, cap {max_cycles} cycles or "
                   f"{cap_s:g} s{', reached' if run['time_capped'] else ''}); one host start; the first {cpu_cycles} "
                   f"objectives agree to {agree:.1e}{goal}",
                   cpu_s_per_cycle=cpu_cycle, device_s_per_cycle=per, speedup_per_cycle=cpu_clock_ratio(cpu_cycle, per),
                   cycles=len(run["stamps"]), first_objectives_rel_diff=agree, peak_gib=run["peak_gib"])
    evals = {"n": 0, "s": 0.0}
    scored: dict[int, float] = {}  # by the snapshot array's id: each snapshot is scored once

    def score(theta: np.ndarray) -> float:
        if id(theta) not in scored:
            t = time.perf_counter()
            with threads(os.cpu_count() or 1):
                scored[id(theta)] = document_completion(theta, None, 0.1, split=split)
            evals["n"] += 1
            evals["s"] += time.perf_counter() - t
        return scored[id(theta)]

    g64, g32 = runs["f64"], runs["f32"]
    target = score(g64["snaps"][-1][1])
    idx64, _ = _first_reaching(g64["snaps"], score, target)
    c64 = g64["snaps"][idx64][0] if idx64 is not None else len(g64["stamps"])
    cpu_to = cpu_setup + c64 * cpu_cycle
    idx32, _ = _first_reaching(g32["snaps"], score, target)
    c32 = g32["snaps"][idx32][0] if idx32 is not None else None
    gpu32_to = g32["stamps"][c32 - 1] if c32 is not None else None
    best32 = None if c32 is not None else score(g32["snaps"][-1][1])
    report.add(
        "bench", f"{name}, time to the float64 fit's held-out", "info",
        f"target = per-token held-out (document completion, {split[0].shape[0]} documents) of the default float64 fit "
        f"after {len(g64['stamps'])} cycles; first checkpoint (every {every} cycles) at or above it; CPU time = its "
        f"setup + {c64} cycles x its per-cycle time (extrapolated: the CPU fit follows the same path from the same "
        f"start); {evals['n']} held-out evaluations ({evals['s']:.0f} s, not timed)",
        heldout_target=target, cycles_to_target_f64=c64, cpu_s_to_target_extrapolated=cpu_to,
        device_f64_s_to_target=g64["stamps"][c64 - 1], speedup_to_target_f64=cpu_to / g64["stamps"][c64 - 1],
        cycles_to_target_f32=c32, device_f32_s_to_target=gpu32_to,
        speedup_to_target_f32=(cpu_to / gpu32_to) if gpu32_to else None, f32_best_heldout_if_missed=best32,
    )


def cpu_clock_ratio(cpu_s: float, device_s: float) -> float:
    return cpu_s / device_s if device_s > 0 else math.inf


def _timed_fit(model: Any, X: Any, method: str, device: torch.device, dtype: torch.dtype, iters: int,
               **kw: Any) -> float:
    t = now(device)
    latentfs.fit(model, X, method=method, device=str(device), dtype=dtype, max_iter=iters, tol=0.0, warn=False,
                 progress=False, **kw)
    return now(device) - t


def bench_iterations(report: Report, name: str, make: Any, X: Any, method: str, device: torch.device,
                     cpu_iters: tuple[int, int], dev_iters: tuple[int, int], init: Any = None) -> None:
    """Per-iteration time from two fits of m1 and m2 iterations (tol 0), the difference over m2 − m1: the
    data preparation and result building cancel."""
    kw = {} if init is None else {"init": init}
    out: dict[str, Any] = {}
    _timed_fit(make(), X, method, torch.device("cpu"), torch.float64, 1, **kw)  # warm-up (first-call costs)
    c1, c2 = (_timed_fit(make(), X, method, torch.device("cpu"), torch.float64, m, **kw) for m in cpu_iters)
    out["cpu_s_per_iter"] = (c2 - c1) / (cpu_iters[1] - cpu_iters[0])
    for label, dtype in (("f64", torch.float64), ("f32", torch.float32)):
        _timed_fit(make(), X, method, device, dtype, 1, **kw)  # warm-up (CUDA kernels, caches)
        d1, d2 = (_timed_fit(make(), X, method, device, dtype, m, **kw) for m in dev_iters)
        out[f"device_{label}_s_per_iter"] = (d2 - d1) / (dev_iters[1] - dev_iters[0])
        out[f"speedup_{label}"] = out["cpu_s_per_iter"] / out[f"device_{label}_s_per_iter"]
    report.add("bench", name, "info",
               f"per iteration = (time of {cpu_iters[1]} − time of {cpu_iters[0]} iterations) / "
               f"{cpu_iters[1] - cpu_iters[0]} on the CPU, ({dev_iters[1]} − {dev_iters[0]}) / "
               f"{dev_iters[1] - dev_iters[0]} on the device; one host start for both", **out)


def bench_fa(report: Report, n: int, d: int, q: int, device: torch.device) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, q)) @ rng.normal(size=(d, q)).T + rng.normal(size=(n, d)) * rng.uniform(0.5, 1.5, d)
    out: dict[str, Any] = {}

    def run(dev: torch.device, dtype: torch.dtype) -> tuple[float, float]:
        stamps: list[float] = []
        start = now(dev)
        latentfs.fit(latentfs.FactorAnalysis(q), X, method="em", device=str(dev), dtype=dtype, max_iter=20, tol=0.0,
                     warn=False, progress=False, callback=lambda *a: stamps.append(now(dev)))
        return now(dev) - start, _per_cycle(stamps)

    out["cpu_whole_s"], out["cpu_s_per_iter"] = run(torch.device("cpu"), torch.float64)
    run(device, torch.float64)  # warm-up
    for label, dtype in (("f64", torch.float64), ("f32", torch.float32)):
        out[f"device_{label}_whole_s"], out[f"device_{label}_s_per_iter"] = run(device, dtype)
        out[f"speedup_whole_{label}"] = out["cpu_whole_s"] / out[f"device_{label}_whole_s"]
        out[f"speedup_per_iter_{label}"] = out["cpu_s_per_iter"] / out[f"device_{label}_s_per_iter"]
    report.add("bench", f"FactorAnalysis EM {n}x{d}, q={q}", "info",
               "20 iterations from the engine's deterministic start; whole call and per-iteration median", **out)


def bench_gmm(report: Report, n: int, d: int, k: int, cpu_rows: int, device: torch.device, quick: bool) -> None:
    rng = np.random.default_rng(4)
    centres = rng.normal(scale=3.0, size=(k, d))
    z = rng.integers(k, size=n)
    X = centres[z] + rng.normal(size=(n, d))
    init = {"weights": np.full(k, 1.0 / k), "means": X[rng.choice(n, k, replace=False)],
            "covariance": np.tile(np.eye(d), (k, 1, 1))}

    def run(rows: np.ndarray, dev: torch.device, iters: int) -> tuple[float, float]:
        stamps: list[float] = []
        start = now(dev)
        latentfs.fit(latentfs.GaussianMixture(k), rows, method="em", device=str(dev), init=init, e_step="cholesky",
                     max_iter=iters, tol=0.0, warn=False, progress=False, callback=lambda *a: stamps.append(now(dev)))
        return now(dev) - start, _per_cycle(stamps)

    cpu_whole, cpu_iter = run(X[:cpu_rows], torch.device("cpu"), 3)
    scale = n / cpu_rows
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    run(X[: max(k * 10, 10_000)], device, 2)  # warm-up
    dev_whole, dev_iter = run(X, device, 6 if not quick else 4)
    speed = cpu_iter * scale / dev_iter
    status = "info" if quick else ("pass" if speed >= 50 else "fail")
    report.add("bench", f"GaussianMixture EM {n}x{d}, K={k}, full", status,
               f"Cholesky E-step on both sides; CPU per iteration measured on {cpu_rows} rows (median of "
               f"iterations 2+) and scaled by {scale:g} (the E- and M-steps are linear in rows); issue target >= 50x",
               cpu_s_per_iter_measured=cpu_iter, cpu_rows=cpu_rows, cpu_s_per_iter_extrapolated=cpu_iter * scale,
               device_s_per_iter=dev_iter, device_whole_s=dev_whole, speedup_per_iter=speed,
               peak_gib=(torch.cuda.max_memory_allocated() / 2**30) if device.type == "cuda" else None)


def part_bench(report: Report, device: torch.device, quick: bool, budget: Budget) -> None:
    from latentfs.evaluate.heldout import split_documents

    sizes = dict(docs=600, test=40, words=3000, ks=(10, 20), fa=(20_000, 20, 4), gmm=(20_000, 10, 5, 5_000),
                 k_point=10) if quick else dict(docs=11_000, test=100, words=60_000, ks=(200, 50),
                                                 fa=(1_000_000, 100, 10), gmm=(1_000_000, 50, 20, 50_000), k_point=50)
    holder: dict[str, Any] = {}

    def corpus() -> None:
        t = time.perf_counter()
        X = news20_like(sizes["docs"] + sizes["test"], sizes["words"])
        holder["train"], test = X[: sizes["docs"]], X[sizes["docs"] :]
        holder["split"] = split_documents(test, 0.5, seed=0)
        report.add("bench", "corpus", "info", "news20-sized simulated corpus (train rows; held-out docs split 50/50)",
                   documents=holder["train"].shape[0], words=holder["train"].shape[1],
                   tokens=int(holder["train"].sum()), nonzeros=int(holder["train"].nnz),
                   heldout_documents=test.shape[0], seconds=round(time.perf_counter() - t, 1))

    guarded(report, "bench", "corpus", corpus, limit_s=120, budget=budget)
    # ordered by what the targets need first: GMM and DCA VB at K=200
    guarded(report, "bench", "GaussianMixture EM", lambda: bench_gmm(report, *sizes["gmm"], device, quick),
            limit_s=150, budget=budget)
    if "train" in holder:
        for k in sizes["ks"]:
            guarded(report, "bench", f"DirichletDCA VB, K={k}",
                    lambda k=k: bench_dca(report, holder["train"], holder["split"], k, device, quick, budget),
                    limit_s=200, budget=budget)
        train, kp = holder["train"], sizes["k_point"]
        pair = (np.full((train.shape[0], kp), 1.0 / kp) * np.asarray(train.sum(1)),
                _vb_start(1, kp, train.shape[1]).topic_word.numpy())
        guarded(report, "bench", f"GammaPoissonDCA KL-NMF, K={kp}",
                lambda: bench_iterations(report, f"GammaPoissonDCA KL-NMF, K={kp}", lambda: latentfs.GammaPoissonDCA(kp),
                                         train, "nmf_kl", device, (1, 3) if not quick else (1, 2), (3, 23), init=pair),
                limit_s=90, budget=budget)
        guarded(report, "bench", f"PLSA EM, K={kp}",
                lambda: bench_iterations(report, f"PLSA EM, K={kp}", lambda: latentfs.PLSA(kp), train, "em", device,
                                         (1, 3) if not quick else (1, 2), (3, 23), init=pair),
                limit_s=90, budget=budget)
    guarded(report, "bench", "FactorAnalysis EM", lambda: bench_fa(report, *sizes["fa"], device), limit_s=90,
            budget=budget)


# ------------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for gpu_check.md/json and pytest logs")
    parser.add_argument("--device", default="cuda", help="the device side (default cuda; cpu for a dry run)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a dry run)")
    parser.add_argument("--parts", default="tests,agree,float32,bench")
    parser.add_argument("--budget-s", type=float, default=None, help="wall-clock budget (default 400; quick 100)")
    parser.add_argument("--pytest-timeout-s", type=float, default=240)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget_s if args.budget_s is not None else (100 if args.quick else 400))
    parts = set(args.parts.split(","))
    report = Report(args.out, args)
    log(f"gpu_check: device {args.device} ({report.machine.get('device_name')}), torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}, quick={args.quick}, out={args.out}")
    proc = start_tests(args.out) if "tests" in parts else None
    if IMPORT_ERROR is not None:
        report.add("setup", "import latentfs", "error", IMPORT_ERROR.strip().splitlines()[-1], traceback=IMPORT_ERROR)
        if proc is not None:
            finish_tests(report, proc, args.out, budget, args.pytest_timeout_s, torch.cuda.is_available())
        return 1
    try:
        device = check_device(args.device)
    except Exception as exc:  # noqa: BLE001 - recorded; the parts then compare the CPU with itself
        report.add("setup", "device", "error", f"{type(exc).__name__}: {exc}")
        device = torch.device("cpu")
    if device.type == "cuda":
        torch.ones(1, device=device).sum().item()  # start the CUDA context before any timing

    def run_part(name: str, fn: Any) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - one failing part never aborts the run
            report.add(name, "the whole part", "error", f"{type(exc).__name__}: {exc}"[:600],
                       traceback=traceback.format_exc(limit=8))

    if "agree" in parts:
        run_part("agree", lambda: part_agree(report, device, args.quick, budget))
    if "float32" in parts:
        run_part("float32", lambda: part_float32(report, device, args.quick, budget))
    if proc is not None:  # the benchmarks time nothing while the tests still run on the same device
        run_part("tests", lambda: finish_tests(report, proc, args.out, budget, args.pytest_timeout_s,
                                               device.type == "cuda"))
    if "bench" in parts:
        run_part("bench", lambda: part_bench(report, device, args.quick, budget))
    report.write()
    counts: dict[str, int] = {}
    for r in report.records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    log(f"done in {time.time() - report.started:.0f} s: {counts}; wrote {args.out / 'gpu_check.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
