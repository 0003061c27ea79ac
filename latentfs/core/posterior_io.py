"""Export and persistence of a :class:`~latentfs.core.results.Posterior`: ArviZ ``InferenceData`` holding what
the result is, and a compressed ``.npz`` with a JSON header whose every entry is checked on load (no pickle)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from latentfs.core.count_draws import CountStateDraws
from latentfs.core.data import DataError
from latentfs.core.options import check_int

if TYPE_CHECKING:
    from latentfs.core.results import Posterior

__all__ = ["open_saved", "read_archive"]

_FORMAT = "latentfs.Posterior/1"


class PersistenceMixin:
    """:meth:`to_inference_data`, :meth:`save` and :meth:`load`, mixed into
    :class:`~latentfs.core.results.Posterior`."""

    def to_inference_data(self: Any, num_draws: int | None = None, *, seed: int = 0) -> Any:
        """ArviZ ``InferenceData`` with named dims and coords, holding what the result is.

        A sampler's draws form the ``posterior`` group (with ``sample_stats`` and the pointwise
        ``log_likelihood``). A fitted (variational) distribution is exported as its parameters, in a group
        ``variational`` with one variable per parameter, ``<site>.<parameter>`` (for example
        ``topic_word.concentration``), and no draws: ``num_draws`` draws from it (and the pointwise
        log-likelihood of the fit's own draws from q) are added to ``posterior`` only when asked for, so a VB
        result's file stays the size of its parameters. A point estimate is exported as one draw of one chain,
        and the posterior group's attribute ``latentfs_kind`` says ``"point"``: ArviZ's summaries of it are not
        credible intervals.
        """
        import arviz as az

        if num_draws is not None:
            check_int("num_draws", num_draws, low=1, remedy="Ask for at least one draw, or None for none.")
        fitted = [s for s in self.sites if self.kind(s) == "distribution"]
        shown = [s for s in self.sites if s not in fitted or num_draws is not None]
        posterior = {site: self.samples(site, num_draws or 1, seed=seed) for site in shown}
        if len({v.shape[:2] for v in posterior.values()}) > 1:
            # ArviZ needs one (chain, draw) grid: repeat points and fitted draws onto the longest one.
            chains = max(v.shape[0] for v in posterior.values())
            draws = max(v.shape[1] for v in posterior.values())
            posterior = {
                k: np.broadcast_to(v, (chains, draws, *v.shape[2:])) if v.shape[:2] != (chains, draws) else v
                for k, v in posterior.items()
            }
        dims = {site: list(self.dims.get(site, ())) for site in shown}
        kwargs: dict[str, Any] = {}
        log_lik = self.pointwise_log_likelihood() if not fitted or num_draws is not None else None
        if log_lik is not None and self.kind() != "point":
            observed = self.diagnostics.get("observed_site") or _observed_site(self.model)
            kwargs["log_likelihood"] = {observed: log_lik}
            dims[observed] = [self.diagnostics.get("observation_dim", "document")]
        if self.sample_stats:
            kwargs["sample_stats"] = dict(self.sample_stats)
        attrs = {"latentfs_model": self.model, "latentfs_method": self.method, "latentfs_kind": self.kind()}
        if self.alignment is not None:
            attrs["latentfs_alignment"] = json.dumps(self.alignment)
        idata = az.from_dict(posterior=posterior or None, dims=dims, coords=self.coords, **kwargs)
        observed_data, omitted = self._observed_dataset(log_lik)
        if observed_data is not None:
            idata.add_groups(observed_data=observed_data)
        elif omitted:
            attrs["latentfs_observed_data"] = omitted
        if fitted:
            idata.add_groups(variational=self._variational_dataset(fitted))
            idata.variational.attrs.update(attrs)
        if posterior:
            idata.posterior.attrs.update(attrs)
        return idata

    def _observed_dataset(self: Any, log_lik: np.ndarray | None) -> tuple[Any, str | None]:
        """The ``observed_data`` group: the data the fit was given, named by the model's observed site, its rows on
        the log-likelihood's observation dim and its columns on ``feature`` where the lengths agree (else
        ``<site>_dim_<i>``). A sparse matrix is written dense up to :data:`OBSERVED_DENSE_MAX` values; above that,
        and for data never held in memory, no group and the reason (second value)."""
        import xarray as xr

        obs = self.observed
        if obs is None:
            return None, (
                "the result does not hold the data its fit was given (a dask array or a stream of mini-batches, or a "
                "fitted estimator's posterior_): no observed_data group"
            )
        if not isinstance(obs, np.ndarray):  # scipy.sparse
            size = int(obs.shape[0]) * int(obs.shape[1])
            if size > OBSERVED_DENSE_MAX:
                return None, (
                    f"the fit's sparse data ({obs.shape[0]} x {obs.shape[1]}) would take {size:,} values dense, over "
                    f"{OBSERVED_DENSE_MAX:,}: no observed_data group (result.observed holds the sparse matrix)"
                )
            obs = obs.toarray()
        site = self.diagnostics.get("observed_site") or _observed_site(self.model)
        row_dim = self.diagnostics.get("observation_dim", "document")
        names = []
        for axis, (dim, n) in enumerate(zip((row_dim, "feature"), obs.shape, strict=False)):
            fits = len(self.coords.get(dim, range(n))) == n
            if axis == 0 and log_lik is not None:
                fits = fits and log_lik.shape[-1] == n
            names.append(dim if fits else f"{site}_dim_{axis}")
        names += [f"{site}_dim_{axis}" for axis in range(len(names), obs.ndim)]
        coords = {d: self.coords[d] for d in names if d in self.coords}
        return xr.Dataset({site: xr.Variable(names, obs)}, coords=coords), None

    def _variational_dataset(self: Any, sites: list[str]) -> Any:
        """The parameters of the fitted distributions of ``sites`` as an xarray Dataset, named by the site's dims
        where a parameter has the site's shape (else ``<site>.<parameter>_dim_<i>``); the family is an attribute."""
        import xarray as xr

        variables = {}
        for site in sites:
            spec = self._fitted[site]
            site_dims = list(self.dims.get(site, ()))
            for name, value in spec.items():
                if name == "family":
                    continue
                arr = np.asarray(value)
                key = f"{site}.{name}"
                if arr.ndim == len(site_dims) and all(
                    d not in self.coords or len(self.coords[d]) == n for d, n in zip(site_dims, arr.shape, strict=True)
                ):
                    arr_dims = site_dims
                elif arr.ndim and arr.ndim <= len(site_dims) and list(arr.shape) == [
                    len(self.coords.get(d, ())) for d in site_dims[: arr.ndim]
                ]:
                    arr_dims = site_dims[: arr.ndim]
                else:
                    arr_dims = [f"{key}_dim_{i}" for i in range(arr.ndim)]
                variables[key] = xr.Variable(arr_dims, arr, attrs={"family": spec["family"], "site": site})
        coords = {d: self.coords[d] for d in {d for v in variables.values() for d in v.dims} if d in self.coords}
        return xr.Dataset(variables, coords=coords)

    def save(self: Any, path: str | Path) -> Path:
        """Write to a compressed ``.npz`` (arrays) with a JSON header; no pickle anywhere."""
        path = _npz_path(Path(path))
        arrays: dict[str, np.ndarray] = {"trace": self.trace}
        for k, v in self._draws.items():
            if isinstance(v, CountStateDraws):  # the count states themselves: the file stays as small as the fit
                arrays.update({f"countdraws/{k}/{name}": part for name, part in v.parts().items()})
            else:
                arrays[f"draws/{k}"] = v
        for k, spec in self._fitted.items():
            for p, a in spec.items():
                if p != "family":
                    arrays[f"fitted/{k}/{p}"] = a
        for k, v in self.extras.items():
            arrays[f"extras/{k}"] = v
        for k, v in self.sample_stats.items():
            arrays[f"sample_stats/{k}"] = v
        log_lik = self.pointwise_log_likelihood()
        if log_lik is not None:
            arrays["log_likelihood"] = log_lik
        if self.relabel_permutations is not None:
            arrays["relabel_permutations"] = self.relabel_permutations
        if isinstance(self.observed, np.ndarray):
            arrays["observed"] = self.observed
        elif self.observed is not None:  # scipy.sparse, as CSR
            csr = self.observed.tocsr()
            arrays.update({"observed_csr/data": csr.data, "observed_csr/indices": csr.indices,
                           "observed_csr/indptr": csr.indptr, "observed_csr/shape": np.asarray(csr.shape, np.int64)})
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
    def load(cls: Any, path: str | Path, *, max_bytes: float | None = None) -> Posterior:
        """Read a file written by :meth:`save` (``allow_pickle=False``); ``load(p)`` finds what ``save(p)``
        wrote, with or without the ``.npz`` suffix.

        The file's structure and the inflated size of every array are checked before anything is
        inflated (``max_bytes``, default half the available memory), and every way a file can be wrong
        (truncated, corrupted, not a latentfs file, inconsistent shapes) raises one
        :class:`~latentfs.core.data.DataError` that says what is wrong. Nothing is ever unpickled.
        """
        return open_saved(
            path,
            lambda p: cls._load_checked(p, max_bytes),
            writer="Posterior.save",
            kind="latentfs Posterior",
            remedy="save the result again",
        )

    @classmethod
    def _load_checked(cls: Any, path: Path, max_bytes: float | None) -> Posterior:
        from latentfs.core.driver import available_memory

        if max_bytes is None:
            # Half the free memory, and no more than a generous expansion of the file itself: a result's
            # arrays compress little, a zip bomb compresses a thousandfold.
            avail = available_memory()
            by_file = max(2.0**28, _MAX_INFLATION * path.stat().st_size)
            max_bytes = by_file if avail is None else min(avail / 2, by_file)
        meta, data = read_archive(path, "latentfs Posterior", _FORMAT, max_bytes)
        for key in ("model", "method", "dims", "coords", "families", "diagnostics", "hyperparameters"):
            if key not in meta:
                raise DataError(f"{str(path)!r} is not a complete latentfs Posterior file (no {key!r} in its header).")
        if "trace" not in data:
            raise DataError(f"{str(path)!r} is not a complete latentfs Posterior file (no trace).")
        draws: dict[str, Any] = {k[6:]: v for k, v in data.items() if k.startswith("draws/")}
        draws.update(_count_draws(path, data))
        grids = {site: v.shape[:2] for site, v in draws.items() if v.ndim >= 2}
        if len(draws) != len(grids) or len(set(grids.values())) > 1:
            raise DataError(
                f"{str(path)!r} is inconsistent: its sites disagree on (chains, draws): {grids}. Save the result again."
            )
        points = {
            k.split("/")[1]: v
            for k, v in data.items()
            if k.startswith("fitted/") and k.endswith("/value") and meta["families"].get(k.split("/")[1]) == "point"
        }
        _check_shapes(path, meta, draws, points)
        fitted: dict[str, dict[str, Any]] = {k: {"family": fam} for k, fam in meta["families"].items()}
        for k, v in data.items():
            if k.startswith("fitted/"):
                _, site, param = k.split("/", 2)
                if site not in fitted:
                    raise DataError(f"{str(path)!r} is inconsistent: fitted site {site!r} has no family.")
                fitted[site][param] = v
        _check_fitted_shapes(path, meta, fitted)
        _check_header_model(path, meta)
        _check_n_components(path, meta)
        post = cls(
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
            alignment=meta.get("alignment"),
        )
        post.relabel_permutations = data.get("relabel_permutations")
        post.observed = _saved_observed(path, data)
        _check_adoptable(path, post)
        return post


_MAX_INFLATION = 200
#: the largest sparse observed matrix (in values) that :meth:`PersistenceMixin.to_inference_data` writes dense
OBSERVED_DENSE_MAX = 10_000_000


def observed_array(data: Any) -> Any:
    """What a result keeps of the data its fit was given (:attr:`Posterior.observed`): a numeric numpy array as it
    is (a DataFrame's or DataArray's values, a masked array with NaN at its masked entries, a CPU tensor's array), a
    scipy.sparse matrix as CSR, and None for anything not in memory or not a table (a dask array, a stream, a list
    of sequences, a tensor on another device)."""
    import sys

    sparse = sys.modules.get("scipy.sparse")
    if sparse is not None and sparse.issparse(data):
        return data.tocsr()
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(data, torch.Tensor):
        return data.detach().numpy() if data.device.type == "cpu" and data.ndim in (1, 2) else None
    if isinstance(data, np.ma.MaskedArray):
        data = np.ma.filled(data.astype(np.float64), np.nan)
    elif not isinstance(data, np.ndarray):
        values = getattr(data, "values", None) if hasattr(data, "dtypes") or hasattr(data, "dims") else None
        if not isinstance(values, np.ndarray):
            return None
        data = values
    if data.ndim not in (1, 2) or data.dtype.kind not in "biuf":
        return None
    return data


def _saved_observed(path: Path, data: dict[str, np.ndarray]) -> Any:
    if "observed" in data:
        return data["observed"]
    parts = {k.split("/", 1)[1]: v for k, v in data.items() if k.startswith("observed_csr/")}
    if not parts:
        return None
    from scipy import sparse

    try:
        shape = tuple(int(n) for n in parts["shape"])
        matrix = sparse.csr_matrix((parts["data"], parts["indices"], parts["indptr"]), shape=shape)
        matrix.check_format(full_check=True)
    except (KeyError, ValueError, TypeError) as exc:
        raise DataError(f"{str(path)!r} is inconsistent: its observed data are not a valid CSR matrix ({exc}). "
                        "Save the result again.") from None
    return matrix


def read_archive(path: Path, kind: str, fmt: str, max_bytes: float | None, *,
                 header_kind: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON header and the arrays of a saved ``kind`` file in format ``fmt``. Before anything is inflated, a file
    that is not an .npz archive, has no ``__meta__`` header or would inflate to more than ``max_bytes`` (None: no
    limit) is refused; then one whose header names another format. The messages about the header call the file
    a ``header_kind`` file (default: ``kind``)."""
    import zipfile

    if not zipfile.is_zipfile(path):
        raise DataError(f"{str(path)!r} is not a {kind} file (not an .npz archive).")
    with zipfile.ZipFile(path) as archive:
        sizes = {info.filename: info.file_size for info in archive.infolist()}
    if "__meta__.npy" not in sizes:
        raise DataError(f"{str(path)!r} is not a {header_kind or kind} file (no __meta__ header).")
    total = sum(sizes.values())
    if max_bytes is not None and total > max_bytes:
        raise DataError(
            f"{str(path)!r} would inflate to {total / 2**30:.2f} GiB, over the limit of "
            f"{max_bytes / 2**30:.2f} GiB; pass max_bytes=... if you trust the file and have the memory."
        )
    with np.load(path, allow_pickle=False) as f:
        meta = json.loads(str(f["__meta__"]))
        if not isinstance(meta, dict) or meta.get("format") != fmt:
            got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise DataError(f"{str(path)!r} is not a {header_kind or kind} file (format {got!r}).")
        return meta, {k: f[k] for k in f.files if k != "__meta__"}


def open_saved(path: str | Path, read: Any, *, writer: str, kind: str, remedy: str) -> Any:
    """Read a file written by ``writer`` with ``read(path)``: the ``.npz`` suffix may be left off, and every
    failure that is not already a :class:`DataError` (truncated, corrupted or foreign file) becomes one
    that names the file and ``remedy``. Shared by :meth:`Posterior.load` and the estimators' ``load``."""
    path = Path(path)
    if not path.exists() and path.suffix != ".npz" and _npz_path(path).exists():
        path = _npz_path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise DataError(f"path must be a file written by {writer}; {str(path)!r} {what}.")
    try:
        return read(path)
    except DataError:
        raise
    except (Exception, RecursionError) as exc:  # every other failure is a damaged or foreign file
        raise DataError(
            f"{str(path)!r} is not a readable {kind} file ({type(exc).__name__}: {exc}). It may be truncated or "
            f"corrupted: {remedy}."
        ) from None


def _count_draws(path: Path, data: dict[str, np.ndarray]) -> dict[str, CountStateDraws]:
    """The sites a file keeps as count states (``countdraws/<site>/<part>``), made again; a DataError when their
    parts are missing or disagree."""
    parts: dict[str, dict[str, np.ndarray]] = {}
    for key, value in data.items():
        if key.startswith("countdraws/"):
            _, site, name = key.split("/", 2)
            parts.setdefault(site, {})[name] = value
    out = {}
    for site, p in parts.items():
        try:
            out[site] = CountStateDraws.from_parts(p)
        except (KeyError, ValueError, TypeError) as exc:
            raise DataError(f"{str(path)!r} is inconsistent: the count states of site {site!r} do not fit together "
                            f"({exc}). Save the result again.") from None
    return out


def _check_shapes(
    path: Path, meta: dict[str, Any], draws: dict[str, np.ndarray], points: dict[str, np.ndarray] | None = None
) -> None:
    """Every stored draw array (and every point estimate) has the shape its named dims and coords say (a
    file edited or damaged into other shapes would otherwise load and summarise wrong labels)."""
    coords, dims = meta["coords"], meta["dims"]
    arrays = [(site, value.shape[2:]) for site, value in draws.items()]
    arrays += [(site, value.shape) for site, value in (points or {}).items()]
    for site, shape in arrays:
        site_dims = dims.get(site)
        if site_dims is None:
            continue
        expected = [len(coords[d]) if d in coords else None for d in site_dims]
        got = list(shape)
        if len(got) != len(expected) or any(e is not None and e != g for e, g in zip(expected, got, strict=False)):
            raise DataError(
                f"{str(path)!r} is inconsistent: site {site!r} has shape {tuple(got)} (per draw) but its dims "
                f"{tuple(site_dims)} have {tuple(expected)} labels. Save the result again."
            )


# The parameter of each fitted family that has the site's shape; the others broadcast to it (a Wishart's
# degrees of freedom to the shape without its last two axes).
_SHAPED_PARAMETER = {"point": "value", "dirichlet": "concentration", "gamma": "concentration", "normal": "loc",
                     "wishart": "scale"}


def _check_fitted_shapes(path: Path, meta: dict[str, Any], fitted: dict[str, dict[str, Any]]) -> None:
    """Every fitted distribution's parameters have the shape its site's dims and labels say (the point
    estimates are checked by :func:`_check_shapes`; this covers the Dirichlet, gamma, normal and Wishart
    parameters of variational results too)."""
    coords, dims = meta["coords"], meta["dims"]
    for site, spec in fitted.items():
        main = _SHAPED_PARAMETER.get(spec["family"])
        site_dims = dims.get(site)
        if main is None or main not in spec:
            raise DataError(
                f"{str(path)!r} is inconsistent: fitted site {site!r} ({spec['family']}) has no {main!r} parameter. "
                "Save the result again."
            )
        shape = tuple(np.shape(spec[main]))
        if site_dims is not None:
            expected = [len(coords[d]) if d in coords else None for d in site_dims]
            wrong = any(e is not None and e != g for e, g in zip(expected, shape, strict=False))
            if len(shape) != len(expected) or wrong:
                raise DataError(
                    f"{str(path)!r} is inconsistent: site {site!r} has shape {shape} ({spec['family']} {main}) but its "
                    f"dims {tuple(site_dims)} have {tuple(expected)} labels. Save the result again."
                )
        for param, value in spec.items():
            if param in ("family", main):
                continue
            target = shape[:-2] if spec["family"] == "wishart" and param == "dof" else shape
            try:
                ok = np.broadcast_shapes(np.shape(value), target) == target
            except ValueError:
                ok = False
            # a parameter per leading entry (a Normal–Wishart's κ, one per component of a (K, d) mean) also fits
            ok = ok or (0 < np.ndim(value) < len(target) and tuple(np.shape(value)) == target[: np.ndim(value)])
            if not ok:
                raise DataError(
                    f"{str(path)!r} is inconsistent: site {site!r} has {main} of shape {shape} but {param} of shape "
                    f"{np.shape(value)}. Save the result again."
                )


def _model_class(name: str) -> type | None:
    """The model class called ``name`` among those with registered engines (every family imported when this
    process has not registered it yet); None for any other name (a result built by hand, or a model of the
    user's whose engines are not imported)."""
    from latentfs.core.registry import _ENGINES, _load_engines

    def registered() -> type | None:
        return next((c for c, _ in _ENGINES if c.__name__ == name), None)

    if registered() is None:
        _load_engines()
    return registered()


def _observed_site(name: str) -> str:
    """The Pyro site of a model's observations (its ``observed_site``: ``"data"`` for continuous rows, ``"items"``
    for answers, ``"counts"`` for documents), the name of its log-likelihood variable in an ArviZ export."""
    cls = _model_class(name)
    return str(getattr(cls, "observed_site", "counts"))


def _check_header_model(path: Path, meta: dict[str, Any]) -> type | None:
    """A header naming a model latentfs knows must name a method of that model; returns the class (None for a
    model latentfs does not know, whose result is loaded as it is)."""
    from latentfs.core.registry import methods_for

    name, method = meta["model"], meta["method"]
    if not isinstance(name, str) or not isinstance(method, str):
        raise DataError(
            f"{str(path)!r} is inconsistent: its header's model and method must be names; got {name!r} and "
            f"{method!r}. Save the result again."
        )
    cls = _model_class(name)
    if cls is None:
        return None
    methods = methods_for(cls)
    if method not in methods:
        raise DataError(
            f"{str(path)!r} names model {name!r} fitted by method {method!r}, which {name} has no engine for (its "
            f"methods: {methods}). The header does not describe these arrays: save the result again."
        )
    return cls


# The dim that indexes a model's components, by name (mixtures and topic models, factor analysis, latent traits).
_COMPONENT_DIMS = ("component", "factor", "trait")


def _check_n_components(path: Path, meta: dict[str, Any]) -> None:
    """The header's ``n_components`` (``max_components`` for a model whose number of components varies) is the
    number of labels of the component dim, whose arrays :func:`_check_shapes` has checked."""
    hyper, coords = meta["hyperparameters"], meta["coords"]
    key = "max_components" if "max_components" in hyper else "n_components"
    k = hyper.get(key) if isinstance(hyper, dict) else None
    if k is None:
        return
    dim = next((d for d in _COMPONENT_DIMS if d in coords), None)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise DataError(f"{str(path)!r} is inconsistent: its header gives {key}={k!r}. Save the result again.")
    if dim is not None and len(coords[dim]) != k:
        raise DataError(
            f"{str(path)!r} is inconsistent: {key}={k} in its header, but its arrays have {len(coords[dim])} {dim}s. "
            "Save the result again."
        )


def _check_adoptable(path: Path, post: Posterior) -> None:
    """A result whose model has a new-data estimator must be one that estimator can take (the sites it reads,
    with their shapes): a header naming another model than the arrays' would otherwise load and transform."""
    from latentfs.core.registry import new_data_estimator

    if new_data_estimator(post.model) is None:
        return
    try:
        post.estimator()
    except Exception as exc:  # any failure means the arrays are not a result of the named model
        raise DataError(
            f"{str(path)!r} names model {post.model!r}, but its arrays are not a {post.model} result "
            f"({type(exc).__name__}: {exc}). Save the result again."
        ) from None


def _npz_path(path: Path) -> Path:
    """The file :meth:`Posterior.save` writes for ``path``: ``.npz`` appended unless already there."""
    if path.suffix == ".npz":
        return path
    return path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")


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
