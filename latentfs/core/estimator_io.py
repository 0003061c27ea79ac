"""Saving and loading a fitted estimator without pickle: :class:`SaveLoadMixin`, mixed into
:class:`~latentfs.core.estimator.LatentEstimator` (moved here from ``core/estimator.py``, verbatim).

An estimator is written as one ``.npz``: its parameters and scalar fitted attributes as JSON, its array attributes
and its ``posterior_`` (:meth:`~latentfs.core.results.Posterior.save`) as arrays; ``load`` checks the file against
the class and the posterior before anything is used.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentfs.core.data import DataError

__all__ = ["SaveLoadMixin"]


_ESTIMATOR_FORMAT = "latentfs-estimator-1"


def _json_value(name: str, value: Any) -> Any:
    """``value`` as JSON (a parameter or a scalar fitted attribute), or a DataError naming it."""
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        value = value.item()
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return {"__array__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, (list, tuple)):
        return [_json_value(name, v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(name, v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise DataError(
        f"cannot save {name}={value!r} ({type(value).__name__}): only numbers, strings, None, lists and numeric "
        "arrays are saved (no pickle). Set it to a plain value, or keep the estimator with joblib if you trust "
        "the file."
    )


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if "__array__" in value:
            return np.asarray(value["__array__"], dtype=np.dtype(value["dtype"]))
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


class SaveLoadMixin:
    """Safe ``save(path)`` / ``load(path)`` for a fitted scikit-learn-style estimator: no pickle anywhere.

    One ``.npz`` file holds a JSON header (the class, ``get_params()``, the scalar fitted attributes), every
    fitted numeric array attribute (``components_``, ``labels_``…) as an array, ``feature_names_in_`` as a
    list of strings, and every fitted :class:`~latentfs.core.results.Posterior` attribute (``posterior_``)
    embedded as the bytes of :meth:`Posterior.save`, which :meth:`load` reads back through
    :meth:`Posterior.load` (so the same structure and size checks apply). Reading uses
    ``allow_pickle=False``; a damaged, truncated or foreign file raises one
    :class:`~latentfs.core.data.DataError` that says what is wrong.

    Any estimator whose parameters are plain values can adopt it: ``class MyEstimator(SaveLoadMixin,
    BaseEstimator)``. :class:`LatentEstimator` does.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np, latentfs
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 1)) * [1.0, 0.8, 0.6, 0.9] + 0.5 * rng.normal(size=(60, 4))
    >>> fa = latentfs.FactorAnalyzer(1).fit(X)
    >>> path = fa.save(pathlib.Path(tempfile.mkdtemp()) / "fa")
    >>> again = latentfs.FactorAnalyzer.load(path)
    >>> bool(np.array_equal(again.transform(X), fa.transform(X)))
    True
    """

    def save(self, path: str | Path) -> Path:
        """Write the fitted estimator to ``path`` (``.npz`` appended unless there); returns the path written."""
        from latentfs.core.results import Posterior, _npz_path

        check_is_fitted(self)
        path = _npz_path(Path(path))
        cls = type(self)
        params = {k: _json_value(k, v) for k, v in self.get_params(deep=False).items()}  # type: ignore[attr-defined]
        arrays: dict[str, np.ndarray] = {}
        scalars: dict[str, Any] = {}
        posteriors: list[str] = []
        for name, value in vars(self).items():
            if not name.endswith("_") or name.startswith("_"):
                continue
            if isinstance(value, Posterior):
                with tempfile.TemporaryDirectory() as tmp:
                    arrays[f"posterior/{name}"] = np.frombuffer(
                        value.save(Path(tmp) / "posterior.npz").read_bytes(), dtype=np.uint8
                    )
                posteriors.append(name)
            elif isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
                arrays[f"attr/{name}"] = value
            elif name == "feature_names_in_":
                scalars[name] = {"__names__": [str(v) for v in np.asarray(value).tolist()]}
            else:
                scalars[name] = _json_value(name, value)
        meta = {
            "format": _ESTIMATOR_FORMAT,
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "params": params,
            "scalars": scalars,
            "arrays": sorted(k[5:] for k in arrays if k.startswith("attr/")),
            "posteriors": posteriors,
        }
        arrays["__meta__"] = np.array(json.dumps(meta))
        np.savez_compressed(path, **arrays)  # type: ignore[arg-type]
        return path

    @classmethod
    def load(cls, path: str | Path, *, max_bytes: float | None = None) -> Any:
        """Read an estimator written by :meth:`save` of this class; ``max_bytes`` bounds the inflated size
        (default half the available memory), as in :func:`latentfs.load`."""
        from latentfs.core.results import open_saved

        return open_saved(
            path,
            lambda p: cls._load_checked(p, max_bytes),
            writer=f"{cls.__name__}.save",
            kind=cls.__name__,
            remedy="fit and save the estimator again",
        )

    @classmethod
    def _load_checked(cls, path: Path, max_bytes: float | None) -> Any:
        from latentfs.core.driver import available_memory
        from latentfs.core.posterior_io import read_archive
        from latentfs.core.results import Posterior

        where = f"{str(path)!r}"
        if max_bytes is None:
            avail = available_memory()
            max_bytes = None if avail is None else avail / 2
        meta, data = read_archive(path, cls.__name__, _ESTIMATOR_FORMAT, max_bytes, header_kind="latentfs estimator")
        expected = f"{cls.__module__}.{cls.__qualname__}"
        if meta.get("class") != expected:
            raise DataError(
                f"{where} holds a {meta.get('class')!r}, not a {expected!r}; load it with that class's load()."
            )
        for key in ("params", "scalars", "arrays", "posteriors"):
            if key not in meta:
                raise DataError(f"{where} is not a complete estimator file (no {key!r} in its header).")
        missing = [f"attr/{a}" for a in meta["arrays"]] + [f"posterior/{p}" for p in meta["posteriors"]]
        missing = [m for m in missing if m not in data]
        if missing:
            raise DataError(f"{where} is not a complete estimator file (no {missing}).")
        est = cls(**{k: _from_json(v) for k, v in meta["params"].items()})
        for name, value in meta["scalars"].items():
            if isinstance(value, dict) and "__names__" in value:
                setattr(est, name, np.asarray(value["__names__"], dtype=object))
            else:
                setattr(est, name, _from_json(value))
        for name in meta["arrays"]:
            setattr(est, name, data[f"attr/{name}"])
        for name in meta["posteriors"]:
            with tempfile.TemporaryDirectory() as tmp:
                inner = Path(tmp) / "posterior.npz"
                inner.write_bytes(data[f"posterior/{name}"].tobytes())
                try:
                    setattr(est, name, Posterior.load(inner, max_bytes=max_bytes))
                except DataError as exc:
                    raise DataError(f"{where} holds a damaged {name} ({exc}). Fit and save it again.") from None
        n_features = getattr(est, "n_features_in_", None)
        components = getattr(est, "components_", None)
        if isinstance(n_features, int) and isinstance(components, np.ndarray) and components.ndim == 2:
            if components.shape[1] != n_features:
                raise DataError(
                    f"{where} is inconsistent: components_ has {components.shape[1]} columns but n_features_in_ "
                    f"is {n_features}. Fit and save the estimator again."
                )
        _check_params_against_posterior(est, where)
        _check_against_posterior(est, meta["arrays"], where)
        return est


def _check_params_against_posterior(est: Any, where: str) -> None:
    """The saved ``n_components`` parameter must be the fitted result's (a file edited into another number would
    otherwise load an estimator that refits, clones and reports one size and transforms with another)."""
    post = getattr(est, "posterior_", None)
    params = est.get_params(deep=False)
    if post is None or params.get("n_components") is None:  # None: the estimator chooses it from the data
        return
    fitted = post.hyperparameters.get("n_components")
    if isinstance(fitted, int) and not isinstance(fitted, bool) and params["n_components"] != fitted:
        raise DataError(
            f"{where} is inconsistent: n_components={params['n_components']!r} in its parameters, but its posterior_ "
            f"has {fitted}. Fit and save the estimator again."
        )


def _check_against_posterior(est: Any, arrays: list[str], where: str) -> None:
    """The saved learned arrays of a latent estimator must be what its saved ``posterior_`` gives (a file
    edited or damaged into other shapes or values would otherwise load and transform)."""
    derived: dict[str, Any] = {}
    post = getattr(est, "posterior_", None)
    if hasattr(est, "_derived_arrays"):  # estimators that keep their fit elsewhere (e.g. result_)
        derived = est._derived_arrays()
    elif post is not None and hasattr(est, "_adopt"):
        try:
            ref = type(est)(**est.get_params(deep=False))._adopt(post)
        except Exception:  # a family whose attributes cannot be re-derived without data: the shape check stands
            return
        derived = {name: getattr(ref, name, None) for name in arrays}
    for name in arrays:
        want = derived.get(name)
        if not isinstance(want, np.ndarray):
            continue
        got = getattr(est, name)
        if got.shape != want.shape or not np.array_equal(got, want, equal_nan=True):
            raise DataError(
                f"{where} is inconsistent: {name} (shape {got.shape}) is not what its fitted result gives (shape "
                f"{want.shape}). Fit and save the estimator again."
            )
