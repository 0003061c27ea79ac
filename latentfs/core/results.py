"""One result type for every engine (DESIGN.md, contract 3).

A :class:`Posterior` holds either draws (samplers: shaped ``(chain, draw, *site_shape)``) or a fitted
distribution per site (variational and point-estimate engines), and answers the same questions
either way: ``samples``, ``mean``, ``trace``, ``diagnostics``, ``summary``, ``to_inference_data``,
``save``/``load``. Saving writes a compressed ``.npz`` of plain arrays plus a JSON header, and loading
never unpickles.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from latentfs.core.data import DataError
from latentfs.core.relabel import align_chains, apply_permutations

__all__ = ["Posterior", "load", "split_rhat"]

_FORMAT = "latentfs.Posterior/1"

# How to draw from, and take the mean of, each fitted family. Parameters are numpy arrays; a draw adds
# a leading axis of size n.
_FAMILIES: dict[str, dict[str, Any]] = {
    "point": {
        "sample": lambda p, n, rng: np.broadcast_to(p["value"], (n, *p["value"].shape)).copy(),
        "mean": lambda p: p["value"],
    },
    "dirichlet": {
        "sample": lambda p, n, rng: _dirichlet(p["concentration"], n, rng),
        "mean": lambda p: p["concentration"] / p["concentration"].sum(-1, keepdims=True),
    },
    "gamma": {
        "sample": lambda p, n, rng: rng.gamma(p["concentration"], 1.0 / p["rate"], size=(n, *p["concentration"].shape)),
        "mean": lambda p: p["concentration"] / p["rate"],
    },
    "normal": {
        "sample": lambda p, n, rng: rng.normal(p["loc"], p["scale"], size=(n, *p["loc"].shape)),
        "mean": lambda p: p["loc"],
    },
}


def _dirichlet(conc: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Dirichlet draws along the last axis, computed in log space so tiny concentrations don't underflow."""
    shape = (n, *conc.shape)
    # Gamma(a) = Gamma(a + 1) · U^(1/a): stable for small a (FIELD_NOTES, small concentrations).
    log_g = np.log(rng.gamma(conc + 1.0, size=shape)) + np.log(rng.uniform(size=shape)) / conc
    log_g -= log_g.max(-1, keepdims=True)
    g = np.exp(log_g)
    return g / g.sum(-1, keepdims=True)


def split_rhat(draws: np.ndarray) -> np.ndarray:
    """Split-R̂ (Gelman et al., BDA3 §11.4) of each entry of ``draws`` (chain, draw, *shape), vectorised.

    Returns NaN entries when there are fewer than 2 chains × 4 draws or an entry is constant.
    """
    c, n = draws.shape[:2]
    if c * 2 < 2 or n < 4:
        return np.full(draws.shape[2:], np.nan)
    half = n // 2
    x = np.concatenate([draws[:, :half], draws[:, n - half :]], axis=0)  # (2c, half, ...)
    chain_means = x.mean(axis=1)
    within = x.var(axis=1, ddof=1).mean(axis=0)
    between = half * chain_means.var(axis=0, ddof=1)
    var_plus = (half - 1) / half * within + between / half
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(var_plus / within)


class Posterior:
    """The result of :func:`latentfs.fit`.

    Parameters
    ----------
    model, method : str
        Model class name and engine name.
    dims : dict site -> tuple of dim names
        Named dims of each site (for example ``("component", "feature")``).
    coords : dict dim -> list of labels
    draws : dict site -> ndarray (chain, draw, *shape), optional
        Samples from a sampler (already aligned across chains when ``alignment`` is set).
    fitted : dict site -> {"family": str, **parameter arrays}, optional
        Fitted distribution per site (``point``, ``dirichlet``, ``gamma``, ``normal``).
    trace : ndarray (chain, iteration)
        The objective (bound, log-likelihood or log joint) per iteration.
    diagnostics : dict
        JSON-friendly diagnostics (convergence flags, R-hat, timing…).
    log_likelihood : ndarray (chain, draw, n_observations), optional
        Pointwise log-likelihood (per document / row), discrete latents summed out.
    extras : dict name -> ndarray
        Engine-specific outputs (for example the expected component counts of each document).
    hyperparameters : dict
        The model's hyperparameters, JSON-friendly.
    alignment : dict, optional
        How components were permuted per chain (``{"site", "axis", "permutations", "reference_chain"}``).
    """

    def __init__(
        self,
        *,
        model: str,
        method: str,
        dims: dict[str, tuple[str, ...]],
        coords: dict[str, list[str]],
        trace: np.ndarray,
        draws: dict[str, np.ndarray] | None = None,
        fitted: dict[str, dict[str, Any]] | None = None,
        diagnostics: dict[str, Any] | None = None,
        log_likelihood: np.ndarray | None = None,
        extras: dict[str, np.ndarray] | None = None,
        hyperparameters: dict[str, Any] | None = None,
        alignment: dict[str, Any] | None = None,
        sample_stats: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.model = model
        self.method = method
        self.dims = {k: tuple(v) for k, v in dims.items()}
        self.coords = {k: [str(x) for x in v] for k, v in coords.items()}
        self.trace = np.atleast_2d(np.asarray(trace, dtype=np.float64))
        self._draws = {k: np.asarray(v) for k, v in (draws or {}).items()}
        self._fitted = {
            k: {"family": v["family"], **{p: np.asarray(a, dtype=np.float64) for p, a in v.items() if p != "family"}}
            for k, v in (fitted or {}).items()
        }
        for site, spec in self._fitted.items():
            if spec["family"] not in _FAMILIES:
                raise DataError(f"fitted[{site!r}] has unknown family {spec['family']!r}; known: {sorted(_FAMILIES)}.")
        self.diagnostics = dict(diagnostics or {})
        self.log_likelihood = None if log_likelihood is None else np.asarray(log_likelihood, dtype=np.float64)
        self.extras = {k: np.asarray(v) for k, v in (extras or {}).items()}
        self.hyperparameters = dict(hyperparameters or {})
        self.alignment = alignment
        self.sample_stats = {k: np.asarray(v) for k, v in (sample_stats or {}).items()}

    # ------------------------------------------------------------------ vocabulary
    @property
    def sites(self) -> list[str]:
        return sorted(set(self._draws) | set(self._fitted))

    @property
    def is_sampled(self) -> bool:
        return bool(self._draws)

    def _check_site(self, site: str) -> None:
        if site not in self._draws and site not in self._fitted:
            raise DataError(f"site must be one of {self.sites}; got {site!r}.")

    def samples(self, site: str, num_draws: int = 200, *, seed: int = 0) -> np.ndarray:
        """Draws of ``site`` shaped ``(chain, draw, *site_shape)``.

        For samplers these are the stored draws (``num_draws`` and ``seed`` are ignored). For a fitted
        distribution, ``num_draws`` draws from it form one chain (a point estimate repeats).
        """
        self._check_site(site)
        if site in self._draws:
            return self._draws[site]
        spec = self._fitted[site]
        params = {k: v for k, v in spec.items() if k != "family"}
        rng = np.random.default_rng(seed)
        return _FAMILIES[spec["family"]]["sample"](params, int(num_draws), rng)[None]

    def mean(self, site: str) -> np.ndarray:
        """Posterior mean of ``site`` (over chains and draws, or of the fitted distribution)."""
        self._check_site(site)
        if site in self._draws:
            return self._draws[site].mean(axis=(0, 1))
        spec = self._fitted[site]
        return _FAMILIES[spec["family"]]["mean"]({k: v for k, v in spec.items() if k != "family"})

    def fitted_params(self, site: str) -> dict[str, np.ndarray]:
        """Parameters of the fitted distribution of ``site`` (variational and point engines)."""
        if site not in self._fitted:
            raise DataError(f"site must be one of the fitted sites {sorted(self._fitted)}; got {site!r}.")
        return dict(self._fitted[site])

    # ------------------------------------------------------------------ alignment
    def align(self, site: str, component_dim: str = "component") -> Posterior:
        """Permute the components of every chain to match chain 0 (in place); records the permutation.

        Every stored site with a ``component_dim`` axis is permuted the same way.
        """
        if site not in self._draws or self._draws[site].shape[0] < 2:
            return self
        axis = self.dims[site].index(component_dim)
        perms = align_chains(self._draws[site], component_axis=axis)
        for s, arr in self._draws.items():
            if component_dim in self.dims.get(s, ()):
                self._draws[s] = apply_permutations(arr, perms, self.dims[s].index(component_dim))
        self.alignment = {
            "site": site,
            "dim": component_dim,
            "reference_chain": 0,
            "permutations": [p.tolist() for p in perms],
        }
        return self

    # ------------------------------------------------------------------ summaries
    def rhat(self, site: str) -> np.ndarray:
        """Split-R̂ of each entry of a sampled site (after alignment)."""
        self._check_site(site)
        if site not in self._draws:
            raise DataError(f"rhat needs draws from a sampler; site {site!r} comes from {self.method!r}.")
        return split_rhat(self._draws[site])

    def summary(self, sites: Iterable[str] | None = None, *, max_entries: int = 200, level: float = 0.9) -> Any:
        """A pandas DataFrame: mean, sd, equal-tailed interval and (for samplers) split-R̂ per entry.

        Sites with more than ``max_entries`` entries are summarised by one row of aggregates (mean of
        the entries' means, max R̂) instead of row by row.
        """
        import pandas as pd

        rows = []
        for site in sites if sites is not None else self.sites:
            x = self.samples(site)
            flat = x.reshape(x.shape[0], x.shape[1], -1)
            lo, hi = np.quantile(flat, [(1 - level) / 2, (1 + level) / 2], axis=(0, 1))
            mean, sd = flat.mean(axis=(0, 1)), flat.std(axis=(0, 1))
            rh = split_rhat(flat) if site in self._draws and flat.shape[0] >= 2 else np.full(flat.shape[2], np.nan)
            if flat.shape[2] <= max_entries:
                names = _entry_names(site, x.shape[2:], self.dims.get(site, ()), self.coords)
                for i, name in enumerate(names):
                    rows.append((name, mean[i], sd[i], lo[i], hi[i], rh[i]))
            else:
                rmax = np.nanmax(rh) if np.isfinite(rh).any() else np.nan
                rows.append((f"{site}[{flat.shape[2]} entries]", mean.mean(), sd.mean(), lo.mean(), hi.mean(), rmax))
        lo_name, hi_name = f"q{(1 - level) / 2 * 100:g}", f"q{(1 + level) / 2 * 100:g}"
        return pd.DataFrame(rows, columns=["entry", "mean", "sd", lo_name, hi_name, "r_hat"]).set_index("entry")

    def to_inference_data(self, num_draws: int = 200, *, seed: int = 0) -> Any:
        """ArviZ ``InferenceData`` with named dims and coords; fitted distributions are drawn from."""
        import arviz as az

        posterior = {site: self.samples(site, num_draws, seed=seed) for site in self.sites}
        dims = {site: list(self.dims.get(site, ())) for site in self.sites}
        kwargs: dict[str, Any] = {}
        if self.log_likelihood is not None:
            observed = self.diagnostics.get("observed_site", "counts")
            kwargs["log_likelihood"] = {observed: self.log_likelihood}
            dims[observed] = [self.diagnostics.get("observation_dim", "document")]
        if self.sample_stats:
            kwargs["sample_stats"] = dict(self.sample_stats)
        attrs = {"latentfs_model": self.model, "latentfs_method": self.method}
        if self.alignment is not None:
            attrs["latentfs_alignment"] = json.dumps(self.alignment)
        idata = az.from_dict(posterior=posterior, dims=dims, coords=self.coords, **kwargs)
        idata.posterior.attrs.update(attrs)
        return idata

    def __repr__(self) -> str:
        kind = (
            f"{self.trace.shape[0]} chain(s) × {next(iter(self._draws.values())).shape[1]} draws"
            if self._draws
            else "fitted distributions"
        )
        return f"Posterior(model={self.model}, method={self.method}, {kind}, sites={self.sites})"

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write to a compressed ``.npz`` (arrays) with a JSON header; no pickle anywhere."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
        arrays: dict[str, np.ndarray] = {"trace": self.trace}
        for k, v in self._draws.items():
            arrays[f"draws/{k}"] = v
        for k, spec in self._fitted.items():
            for p, a in spec.items():
                if p != "family":
                    arrays[f"fitted/{k}/{p}"] = a
        for k, v in self.extras.items():
            arrays[f"extras/{k}"] = v
        for k, v in self.sample_stats.items():
            arrays[f"sample_stats/{k}"] = v
        if self.log_likelihood is not None:
            arrays["log_likelihood"] = self.log_likelihood
        meta = {
            "format": _FORMAT,
            "model": self.model,
            "method": self.method,
            "dims": {k: list(v) for k, v in self.dims.items()},
            "coords": self.coords,
            "families": {k: v["family"] for k, v in self._fitted.items()},
            "diagnostics": _jsonable(self.diagnostics),
            "hyperparameters": _jsonable(self.hyperparameters),
            "alignment": self.alignment,
        }
        for name in arrays:
            if arrays[name].dtype == object:
                raise DataError(f"cannot save {name!r}: object arrays are not saved (no pickle).")
        arrays["__meta__"] = np.array(json.dumps(meta))
        np.savez_compressed(path, **arrays)  # type: ignore[arg-type]
        return path

    @classmethod
    def load(cls, path: str | Path) -> Posterior:
        """Read a file written by :meth:`save` (``allow_pickle=False``)."""
        with np.load(Path(path), allow_pickle=False) as f:
            meta = json.loads(str(f["__meta__"]))
            if meta.get("format") != _FORMAT:
                raise DataError(f"{path} is not a latentfs Posterior file (format {meta.get('format')!r}).")
            data = {k: f[k] for k in f.files if k != "__meta__"}
        draws = {k[6:]: v for k, v in data.items() if k.startswith("draws/")}
        fitted: dict[str, dict[str, Any]] = {k: {"family": fam} for k, fam in meta["families"].items()}
        for k, v in data.items():
            if k.startswith("fitted/"):
                _, site, param = k.split("/", 2)
                fitted[site][param] = v
        return cls(
            model=meta["model"],
            method=meta["method"],
            dims={k: tuple(v) for k, v in meta["dims"].items()},
            coords=meta["coords"],
            trace=data["trace"],
            draws=draws,
            fitted=fitted,
            diagnostics=meta["diagnostics"],
            log_likelihood=data.get("log_likelihood"),
            extras={k[7:]: v for k, v in data.items() if k.startswith("extras/")},
            sample_stats={k[13:]: v for k, v in data.items() if k.startswith("sample_stats/")},
            hyperparameters=meta["hyperparameters"],
            alignment=meta["alignment"],
        )


def load(path: str | Path) -> Posterior:
    """Load a :class:`Posterior` saved with :meth:`Posterior.save`."""
    return Posterior.load(path)


def _entry_names(site: str, shape: tuple[int, ...], dims: tuple[str, ...], coords: dict[str, list[str]]) -> list[str]:
    if not shape:
        return [site]
    labels = []
    for d, n in zip(dims, shape, strict=False):
        labels.append(coords.get(d, [str(i) for i in range(n)])[:n])
    while len(labels) < len(shape):
        labels.append([str(i) for i in range(shape[len(labels)])])
    idx = np.indices(shape).reshape(len(shape), -1).T
    return [f"{site}[{', '.join(labels[a][i] for a, i in enumerate(row))}]" for row in idx]


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    return obj
