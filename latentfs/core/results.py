"""One result type for every engine (DESIGN.md, contract 3).

A :class:`Posterior` holds either draws (samplers: shaped ``(chain, draw, *site_shape)``) or a fitted
distribution per site (variational and point-estimate engines), and answers the same questions
either way: ``samples``, ``mean``, ``trace``, ``diagnostics``, ``summary``, ``to_inference_data``,
``save``/``load``. Saving writes a compressed ``.npz`` of plain arrays plus a JSON header, and loading
never unpickles.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from latentfs.core.count_draws import CountStateDraws
from latentfs.core.data import DataError
from latentfs.core.options import as_rng
from latentfs.core.posterior_align import _SWITCH_TOLERANCE, AlignMixin, _within_spread  # noqa: F401
from latentfs.core.posterior_checks import (  # noqa: F401
    _CHECK_ENTRIES,
    _FULL_CHECK_VALUES,
    _STATIONARY_RHAT,
    CHAIN_GAP_SDS,
    ESS_PER_CHAIN,
    RHAT_MAX,
    ConvergenceMixin,
    _check_level,
    _entries_to_check,
    _entry_names,
    _nan_reduce,
)
from latentfs.core.posterior_html import HtmlMixin
from latentfs.core.posterior_io import _FORMAT, PersistenceMixin, _jsonable, _npz_path, open_saved  # noqa: F401

__all__ = ["Posterior", "load", "split_rhat"]


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
        "sample": lambda p, n, rng: rng.standard_gamma(p["concentration"], size=(n, *p["concentration"].shape))
        * (1.0 / p["rate"]),
        "mean": lambda p: p["concentration"] / p["rate"],
    },
    "normal": {
        "sample": lambda p, n, rng: rng.normal(p["loc"], p["scale"], size=(n, *p["loc"].shape)),
        "mean": lambda p: p["loc"],
    },
    # q(Λ) of variational Gaussian mixtures and HMMs: degrees of freedom ν and scale matrix W, mean ν W.
    "wishart": {
        "sample": lambda p, n, rng: _wishart(p, n, rng),
        "mean": lambda p: p["dof"][..., None, None] * p["scale"],
    },
}


def _wishart(p: dict[str, np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of Λ ~ Wishart(ν, W) for every leading index of ``p["dof"]`` (Bartlett decomposition:
    Λ = L A Aᵀ Lᵀ with W = L Lᵀ, A lower triangular, A_ii² ~ χ²(ν − i), A_ij ~ N(0, 1) below the diagonal)."""
    dof, scale = np.asarray(p["dof"], dtype=np.float64), np.asarray(p["scale"], dtype=np.float64)
    d = scale.shape[-1]
    chol = np.linalg.cholesky(scale)  # (..., d, d)
    shape = (n, *dof.shape)
    a = np.tril(rng.standard_normal((*shape, d, d)), k=-1)
    diag = np.sqrt(rng.chisquare(dof[..., None] - np.arange(d), size=(*shape, d)))
    a[..., np.arange(d), np.arange(d)] = diag
    la = chol @ a
    return la @ np.swapaxes(la, -1, -2)


def _dirichlet(conc: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Dirichlet draws along the last axis, made in log space so tiny concentrations don't underflow."""
    from latentfs.core.random import log_dirichlet_draws

    return log_dirichlet_draws(conc, n, rng, log=False)


def split_rhat(draws: np.ndarray) -> np.ndarray:
    """Split-R̂ (Gelman et al., BDA3 §11.4) of each entry of ``draws`` (chain, draw, *shape), vectorised.

    Returns NaN entries when there are fewer than 2 chains × 4 draws or an entry is constant.
    """
    c, n = draws.shape[:2]
    if c * 2 < 2 or n < 4:
        return np.full(draws.shape[2:], np.nan)
    half = n // 2
    flat = np.asarray(draws).reshape(c, n, -1)
    out = np.empty(flat.shape[2])
    # entries in blocks of ~16 MiB of split chains, so the peak memory stays near the draws' own size
    step = max(1, (2 << 20) // max(1, 2 * c * half))
    for lo in range(0, flat.shape[2], step):
        block = flat[:, :, lo : lo + step]
        x = np.concatenate([block[:, :half], block[:, n - half :]], axis=0).astype(np.float64)  # (2c, half, E)
        chain_means = x.mean(axis=1)
        within = x.var(axis=1, ddof=1).mean(axis=0)
        between = half * chain_means.var(axis=0, ddof=1)
        var_plus = (half - 1) / half * within + between / half
        with np.errstate(divide="ignore", invalid="ignore"):
            out[lo : lo + step] = np.sqrt(var_plus / within)
    return out.reshape(draws.shape[2:])


class Posterior(AlignMixin, ConvergenceMixin, PersistenceMixin, HtmlMixin):
    """The result of :func:`latentfs.fit`.

    Parameters
    ----------
    model, method : str
        Model class name and engine name.
    dims : dict site -> tuple of dim names
        Named dims of each site (for example ``("component", "feature")``).
    coords : dict dim -> list of labels
    draws : dict site -> ndarray ``(chain, draw, *shape)``, optional
        Samples from a sampler (already aligned across chains when ``alignment`` is set).
    fitted : dict site -> ``{"family": str, **parameter arrays}``, optional
        Fitted distribution per site (``point``, ``dirichlet``, ``gamma``, ``normal``).
    trace : ndarray (chain, iteration)
        The objective (bound, log-likelihood or log joint) per iteration.
    diagnostics : dict
        JSON-friendly diagnostics (convergence flags, R-hat, timing…).
    log_likelihood : ndarray (chain, draw, n_observations) or a callable returning one, optional
        Pointwise log-likelihood (per document / row), discrete latents summed out. A callable is
        evaluated on first use (:attr:`log_likelihood`), so a fit does not pay for it unless asked.
    extras : dict name -> ndarray
        Engine-specific outputs (for example the expected component counts of each document).
    hyperparameters : dict
        The model's hyperparameters, JSON-friendly.
    alignment : dict, optional
        How components were permuted per chain (``{"site", "axis", "permutations", "reference_chain"}``).

    Attributes
    ----------
    observed : ndarray, scipy.sparse matrix or None
        The data the fit was given (rows × features, as passed: not a copy of a numpy array), exported as ArviZ's
        ``observed_data`` group and kept by :meth:`save`; None for data that never sat in memory (a dask array, a
        stream of mini-batches), and for the ``posterior_`` an estimator's ``fit`` makes: a fitted estimator does
        not keep its training data.
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
        log_likelihood: np.ndarray | Any | None = None,
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
        # count-state sites (:mod:`latentfs.core.count_draws`) stay count states: their values are made on demand
        self._draws = {k: v if isinstance(v, CountStateDraws) else np.asarray(v) for k, v in (draws or {}).items()}
        self._convergence_cache: dict[str, dict[str, Any]] = {}
        self._fitted = {
            k: {"family": v["family"], **{p: np.asarray(a, dtype=np.float64) for p, a in v.items() if p != "family"}}
            for k, v in (fitted or {}).items()
        }
        for site, spec in self._fitted.items():
            if spec["family"] not in _FAMILIES:
                raise DataError(f"fitted[{site!r}] has unknown family {spec['family']!r}; known: {sorted(_FAMILIES)}.")
        self.diagnostics = dict(diagnostics or {})
        # A callable is computed on first use (pointwise log-likelihoods of variational fits are costly).
        self._log_likelihood_fn = log_likelihood if callable(log_likelihood) else None
        self._log_likelihood = (
            None if log_likelihood is None or callable(log_likelihood) else np.asarray(log_likelihood, np.float64)
        )
        self.relabel_permutations = None
        self.extras = {k: np.asarray(v) for k, v in (extras or {}).items()}
        self.hyperparameters = dict(hyperparameters or {})
        self.alignment = alignment
        self.sample_stats = {k: np.asarray(v) for k, v in (sample_stats or {}).items()}
        self.observed: Any = None

    # ------------------------------------------------------------------ vocabulary
    @property
    def log_likelihood(self) -> np.ndarray | None:
        """Pointwise log-likelihood (chain, draw, n_observations), computed on first use if it is lazy."""
        return self.pointwise_log_likelihood()

    @log_likelihood.setter
    def log_likelihood(self, value: np.ndarray | Any | None) -> None:
        self._log_likelihood_fn = value if callable(value) else None
        self._log_likelihood = None if value is None or callable(value) else np.asarray(value, np.float64)

    def pointwise_log_likelihood(self) -> np.ndarray | None:
        if self._log_likelihood is None and self._log_likelihood_fn is not None:
            self._log_likelihood = np.asarray(self._log_likelihood_fn(), dtype=np.float64)
            self._log_likelihood_fn = None
        return self._log_likelihood

    @property
    def sites(self) -> list[str]:
        return sorted(set(self._draws) | set(self._fitted))

    @property
    def is_sampled(self) -> bool:
        return bool(self._draws)

    def kind(self, site: str | None = None) -> str:
        """What the result holds for ``site`` (or for every site): ``"draws"`` (a sampler),
        ``"distribution"`` (a fitted variational distribution) or ``"point"`` (an estimate, no uncertainty).
        A result whose sites differ is ``"mixed"``."""
        sites = [site] if site is not None else self.sites
        kinds = set()
        for s in sites:
            self._check_site(s)
            if s in self._draws:
                kinds.add("draws")
            else:
                kinds.add("point" if self._fitted[s]["family"] == "point" else "distribution")
        return kinds.pop() if len(kinds) == 1 else "mixed"

    def _check_site(self, site: str) -> None:
        if site not in self._draws and site not in self._fitted:
            raise DataError(f"site must be one of {self.sites}; got {site!r}.")

    def samples(self, site: str, num_draws: int = 200, *, seed: int = 0) -> np.ndarray:
        """Draws of ``site`` shaped ``(chain, draw, *site_shape)``.

        For samplers these are the stored draws (``num_draws`` and ``seed`` are ignored); a site kept as count
        states (:class:`~latentfs.core.count_draws.CountStateDraws`) makes them here, every time, from the kept
        assignments and seeds: the values a sampler that kept them would have kept. For a fitted
        distribution, ``num_draws`` draws from it form one chain. A point estimate is not a distribution:
        its "draws" are the point itself, once, shaped ``(1, 1, *site_shape)``.
        """
        self._check_site(site)
        # checked whatever the site holds: a bad option is an error even where it would not be used
        if isinstance(num_draws, bool) or not isinstance(num_draws, (int, np.integer)) or num_draws < 1:
            raise DataError(f"num_draws must be an integer ≥ 1; got {num_draws!r}. Ask for at least one draw.")
        rng = as_rng(seed)
        if site in self._draws:
            return np.asarray(self._draws[site])
        spec = self._fitted[site]
        params = {k: v for k, v in spec.items() if k != "family"}
        if spec["family"] == "point":
            return np.asarray(params["value"])[None, None]
        return _FAMILIES[spec["family"]]["sample"](params, int(num_draws), rng)[None]

    def draw_blocks(
        self, site: str, *, max_bytes: float | None = None, num_draws: int = 200, seed: int = 0
    ) -> Iterator[np.ndarray]:
        """The draws of :meth:`samples`, chains after one another, as blocks ``(n, *site_shape)`` of at most
        ``max_bytes`` each (at least one draw a block): how to read a large site without holding every draw.

        A site kept as count states makes only the block's draws (the same values as :meth:`samples`); stored
        draws are sliced, not copied. The default ``max_bytes`` is 256 MiB or an eighth of the memory available
        now, whichever is smaller. A fitted distribution or a point gives :meth:`samples`'s draws in one block.

        Examples
        --------
        >>> import latentfs
        >>> model = latentfs.DirichletDCA(2)
        >>> X = model.simulate(n_documents=20, n_features=8, doc_length=30, seed=0)["counts"]
        >>> result = latentfs.fit(model, X, method="collapsed_gibbs", num_warmup=10, num_samples=4, seed=0,
        ...                       warn=False)
        >>> [b.shape for b in result.draw_blocks("topic_word", max_bytes=3 * 2 * 8 * 8)]
        [(3, 2, 8), (3, 2, 8), (2, 2, 8)]
        """
        self._check_site(site)
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, float))
                                      or not max_bytes > 0):
            raise DataError(f"max_bytes must be a positive number of bytes; got {max_bytes!r}. Pass e.g. 2**28.")
        if site not in self._draws:
            x = self.samples(site, num_draws, seed=seed)
            yield x.reshape(-1, *x.shape[2:])
            return
        x = self._draws[site]
        n = int(x.shape[0] * x.shape[1])
        per_draw = max(1, int(np.prod(x.shape[2:])) * 8)
        if max_bytes is None:
            from latentfs.core import memory

            avail = memory.available_memory()
            max_bytes = 2**28 if avail is None else min(2**28, avail / 8)
        step = max(1, int(max_bytes // per_draw))
        flat = None if isinstance(x, CountStateDraws) else np.asarray(x).reshape(n, *x.shape[2:])
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            yield x.flat_draws(lo, hi) if flat is None else flat[lo:hi]

    def mean(self, site: str) -> np.ndarray:
        """Posterior mean of ``site`` (over chains and draws, or of the fitted distribution). A site kept as count
        states gives the Rao-Blackwellised mean, the average of E[θ | counts] over its kept count states."""
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

    # ------------------------------------------------------------------ new data
    def estimator(self) -> Any:
        """This result as the fitted scikit-learn estimator of its family, without refitting.

        :meth:`transform`, :meth:`predict`, :meth:`predict_proba` and :meth:`score` go through it: new
        data are folded in (topic models) or scored at the fitted parameters (mixtures, factor analysis,
        latent traits) exactly as the family's estimator does, with columns matched by name when the fit
        had names (missing or extra columns are refused).

        Examples
        --------
        >>> import latentfs
        >>> model = latentfs.DirichletDCA(2)
        >>> X = model.simulate(n_documents=30, n_features=12, doc_length=40, seed=0)["counts"]
        >>> result = latentfs.fit(model, X, method="vb", seed=0, warn=False)
        >>> result.transform(X[:3]).shape
        (3, 2)
        """
        from importlib import import_module

        from latentfs.core.registry import new_data_estimator, new_data_models

        spec = new_data_estimator(self.model)
        if spec is None:
            raise DataError(
                f"transform, predict and score are not available for {self.model} results; they exist for "
                f"{new_data_models()}. Use the engine's own functions (see the family's module)."
            )
        module, name, params = spec
        cls = getattr(import_module(module), name)
        components = self.hyperparameters.get("n_components") or next(
            (len(self.coords[d]) for d in ("component", "factor", "trait") if d in self.coords), None
        )
        est = cls(n_components=components, method=self.method, **params(self.hyperparameters))
        return est._adopt(self)

    def _new_data(self, est: Any, X: Any) -> Any:
        """``X`` for ``est``: a DataFrame's names are matched when the fit had names; otherwise its columns
        are taken in order (a fit on a plain array has no names to match)."""
        if getattr(est, "feature_names_in_", None) is None and hasattr(X, "columns"):
            from latentfs.core.data import as_array

            return as_array(X)
        return X

    def transform(self, X: Any, **kwargs: Any) -> np.ndarray:
        """The representation of new rows ``X``: component proportions of documents (DCA, PLSA), factor
        scores (FA), responsibilities (mixtures), trait scores (latent trait), state marginals (HMM). Keyword
        arguments go to the estimator (``lengths=`` for hidden Markov models). See :meth:`estimator`. A dask array
        ``X`` gives a lazy dask array computed block by block (:mod:`latentfs.core.blockwise`), as do
        :meth:`predict` and :meth:`predict_proba`."""
        from latentfs.core.blockwise import is_dask_collection

        est = self.estimator()
        out = est.transform(X if is_dask_collection(X) else self._new_data(est, X), **kwargs)
        return out if is_dask_collection(out) else np.asarray(out)  # a dask X gives a lazy dask array

    def predict(self, X: Any, **kwargs: Any) -> np.ndarray:
        """The most probable component of each new row (mixtures; the Viterbi states of an HMM). Keyword
        arguments go to the estimator (``lengths=``). See :meth:`estimator`."""
        from latentfs.core.blockwise import is_dask_collection

        est = self.estimator()
        if not hasattr(est, "predict"):
            raise DataError(f"predict needs a model with labels (a mixture); {self.model} has none. Use transform.")
        out = est.predict(X if is_dask_collection(X) else self._new_data(est, X), **kwargs)
        return out if is_dask_collection(out) else np.asarray(out)  # a dask X gives a lazy dask array

    def predict_proba(self, X: Any, **kwargs: Any) -> np.ndarray:
        """P(component | row) of each new row (mixtures, HMM state marginals). Keyword arguments go to the
        estimator (``lengths=``). See :meth:`estimator`."""
        from latentfs.core.blockwise import is_dask_collection

        est = self.estimator()
        if not hasattr(est, "predict_proba"):
            raise DataError(
                f"predict_proba needs a model with labels (a mixture); {self.model} has none. Use transform."
            )
        out = est.predict_proba(X if is_dask_collection(X) else self._new_data(est, X), **kwargs)
        return out if is_dask_collection(out) else np.asarray(out)  # a dask X gives a lazy dask array

    def score(self, X: Any, **kwargs: Any) -> float:
        """Held-out log-likelihood of new data, higher is better: per token by document completion for
        topic models, mean per row for the others. Keyword arguments go to the estimator (``lengths=``). See
        :meth:`estimator`. A dask array ``X`` is scored block by block (:mod:`latentfs.core.blockwise`)."""
        from latentfs.core.blockwise import is_dask_collection

        est = self.estimator()
        return float(est.score(X if is_dask_collection(X) else self._new_data(est, X), **kwargs))

    def _site_list(self, sites: Iterable[str] | str | None, default: Iterable[str]) -> list[str]:
        """``sites`` as a list of known sites: one name is one site (not its characters)."""
        if sites is None:
            return list(default)
        chosen = [sites] if isinstance(sites, str) else list(sites)
        unknown = [s for s in chosen if s not in self.sites]
        if unknown:
            raise DataError(
                f"sites must name sites of this result {self.sites}; got {unknown!r}. Pass one name or a list."
            )
        return chosen

    def __repr__(self) -> str:
        if self._draws:
            kind = f"{self.trace.shape[0]} chain(s) × {next(iter(self._draws.values())).shape[1]} draws"
        else:
            kind = {"point": "point estimates (no bands)", "distribution": "fitted distributions"}.get(
                self.kind(), "fitted distributions and point estimates"
            )
        return f"Posterior(model={self.model}, method={self.method}, {kind}, sites={self.sites})"


def load(path: str | Path, *, max_bytes: float | None = None) -> Posterior:
    """Load a :class:`Posterior` saved with :meth:`Posterior.save` (see :meth:`Posterior.load`)."""
    return Posterior.load(path, max_bytes=max_bytes)
