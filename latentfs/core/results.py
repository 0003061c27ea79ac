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
from latentfs.core.options import as_rng, check_int
from latentfs.core.relabel import apply_draw_permutations, apply_permutations, modal_permutations, relabel_draws

__all__ = ["Posterior", "load", "split_rhat"]

# Convergence thresholds (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, "Rank-normalization,
# folding, and localization: an improved R̂", Bayesian Analysis 16): R̂ below 1.01 and bulk and tail ESS of
# at least 100 per chain before the draws are used.
RHAT_MAX = 1.01
ESS_PER_CHAIN = 100
# A chain whose mean log joint is this many within-chain sds below the best chain's sits in another mode.
CHAIN_GAP_SDS = 5.0
# A site of at most this many values (chains × draws × entries) is checked on every entry (latentfs.core.convergence
# takes ~0.07 µs a value: ~0.35 s at the bound). A larger site is checked on _CHECK_ENTRIES entries: the ones with
# the largest posterior means, which are the ones people read (topic words, loadings), plus a regular sample of
# the rest; ``entries_checked`` says so.
_FULL_CHECK_VALUES = 5_000_000
_CHECK_ENTRIES = 2000
# A chain whose two halves agree this well (R̂ of the chain split in two) is stationary: when chains are each
# stationary but disagree, they sit in different modes, and a longer warm-up does not help.
_STATIONARY_RHAT = 1.05
# Chain-level running means are relabelled by the chain's modal permutation; past this share of draws in
# another labelling they mix labels visibly and the result warns.
_SWITCH_TOLERANCE = 0.05

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


class Posterior:
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
        self._draws = {k: np.asarray(v) for k, v in (draws or {}).items()}
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
        self.relabel_permutations: np.ndarray | None = None
        self.extras = {k: np.asarray(v) for k, v in (extras or {}).items()}
        self.hyperparameters = dict(hyperparameters or {})
        self.alignment = alignment
        self.sample_stats = {k: np.asarray(v) for k, v in (sample_stats or {}).items()}

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

        For samplers these are the stored draws (``num_draws`` and ``seed`` are ignored). For a fitted
        distribution, ``num_draws`` draws from it form one chain. A point estimate is not a distribution:
        its "draws" are the point itself, once, shaped ``(1, 1, *site_shape)``.
        """
        self._check_site(site)
        # checked whatever the site holds: a bad option is an error even where it would not be used
        if isinstance(num_draws, bool) or not isinstance(num_draws, (int, np.integer)) or num_draws < 1:
            raise DataError(f"num_draws must be an integer ≥ 1; got {num_draws!r}. Ask for at least one draw.")
        rng = as_rng(seed)
        if site in self._draws:
            return self._draws[site]
        spec = self._fitted[site]
        params = {k: v for k, v in spec.items() if k != "family"}
        if spec["family"] == "point":
            return np.asarray(params["value"])[None, None]
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
    def align(
        self,
        site: str,
        component_dim: str = "component",
        *,
        chain_extras: dict[str, int] | None = None,
        also: tuple[str, ...] = (),
        warn: bool = True,
        match_on: tuple[str, ...] | None = None,
    ) -> Posterior:
        """Relabel the components of every draw, within and across chains (in place); records how.

        Each draw is matched to one pivot labelling (:func:`latentfs.core.relabel.relabel_draws`, Stephens
        2000) on every component-indexed site jointly: ``site`` and, by default, every other stored site with a
        ``component_dim`` axis that is a global parameter (no axis over observations, such as a document's
        proportions), each feature measured in its within-component spread (:meth:`_joint_relabel`; ``match_on``
        names the sites instead). Matching on one site alone leaves draws whose components that site cannot tell
        apart (two HMM states with overlapping means) with their other sites swapped. Every stored site with a
        ``component_dim`` axis is then permuted the same way, draw by draw; dims named in ``also`` index the
        same components (the destination state of a transition matrix, say) and are permuted the same way.
        ``chain_extras`` maps the name of an extras array
        shaped ``(chain, ...)`` (a running mean over a chain's draws) to its component axis within one
        chain's array; each is permuted by its chain's
        modal permutation, and if more than 5% of a chain's draws were in another labelling a
        :class:`~latentfs.core.driver.ConvergenceWarning` says that such outputs mix labels (``warn=False``
        silences it). The result's
        ``alignment`` records the method, each chain's modal permutation (``permutations``) and switch share;
        ``relabel_permutations`` holds every draw's permutation (chain, draw, K). The draws are permuted in place
        (an array returned earlier by :meth:`samples` changes with them; copy it to keep the old labelling).
        """
        import warnings

        if site not in self._draws:
            return self
        matched = self._matching_sites(site, component_dim, match_on)
        if len(matched) == 1:
            perms, iterations = relabel_draws(self._draws[site], component_axis=self.dims[site].index(component_dim))
        else:
            perms, iterations = self._joint_relabel(self._joint_components(matched, component_dim, also))
        for s, arr in self._draws.items():
            for ax, name in enumerate(self.dims.get(s, ())):
                if name == component_dim or name in also:
                    # the result owns its draws: permute them where they are (no second copy of the site)
                    arr = apply_draw_permutations(arr, perms, ax, in_place=True)
            self._draws[s] = arr
        self._convergence_cache.clear()  # the draws are relabelled: R̂ and ESS are computed again
        modes, switched = modal_permutations(perms)
        for name, comp_axis in (chain_extras or {}).items():
            arr = self.extras[name]
            if arr.shape[0] != perms.shape[0]:
                raise DataError(
                    f"chain_extras[{name!r}] must have one entry per chain ({perms.shape[0]}); got shape "
                    f"{arr.shape}. Keep per-chain arrays until the result is aligned."
                )
            self.extras[name] = apply_permutations(arr[:, None], modes, comp_axis)[:, 0]
        if warn and chain_extras and float(switched.max()) > _SWITCH_TOLERANCE:
            from latentfs.core.convergence_warning import ConvergenceWarning  # imports scikit-learn: only to warn

            warnings.warn(
                f"labels switched within a chain ({float(switched.max()):.0%} of one chain's draws are in "
                f"another labelling); the chain-level outputs {sorted(chain_extras)} mix components. Store "
                "the per-draw sites instead (store=...), or run a longer warm-up.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.relabel_permutations = perms
        self.alignment = {
            "method": "per-draw Hungarian matching to an iterated pivot (Stephens 2000)",
            "site": site,
            "matched_on": list(matched),
            "dim": component_dim,
            "iterations": int(iterations),
            "permutations": [m.tolist() for m in modes],
            "switch_share": switched.tolist(),
            "chain_extras": sorted(chain_extras or {}),
        }
        return self

    # ------------------------------------------------------------------ convergence
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

    def check_convergence(self, sites: Iterable[str] | str | None = None, *, warn: bool = True) -> dict[str, Any]:
        """Rank-normalised split-R̂ and bulk / tail ESS of the sampled sites, after relabelling: one number.

        Computed once per site by :mod:`latentfs.core.convergence` (ArviZ's ``az.rhat(method="rank")`` and
        ``az.ess(method="bulk" | "tail")``, entry for entry) and shared by the warning, ``diagnostics``,
        :meth:`summary` and :meth:`rhat`, so they print what ``az.summary(result.to_inference_data())`` prints.
        Stored in ``diagnostics["convergence"]`` as ``{site: {"r_hat_max", "r_hat_argmax", "ess_bulk_min",
        "ess_tail_min", "entries_checked", "n_entries"}}``. A site of at most 5 million values is checked on
        every entry; a larger one on the 2,000 entries with the largest posterior means plus a regular sample of
        the rest (``entries_checked`` says how many). With ``warn`` a
        :class:`~latentfs.core.driver.ConvergenceWarning` names each site whose R̂ exceeds 1.01 or whose ESS is
        below 100 per chain, with a remedy that fits: when each chain is stationary on its own (its two halves
        agree) but the chains disagree, they sit in different modes and the warning says so, since a longer
        warm-up rarely frees a chain from a mode.
        """
        import warnings

        out: dict[str, Any] = {}
        names = [s for s in self._site_list(sites, self._draws) if s in self._draws]
        for site in names:
            chains, n = self._draws[site].shape[:2]
            conv = self._site_convergence(site)
            idx, rhat = conv["entries"], conv["r_hat"]
            entry: dict[str, Any] = {"entries_checked": int(idx.size), "n_entries": int(conv["n_entries"])}
            finite = np.isfinite(rhat)
            if chains < 2 or not finite.any():
                entry.update(r_hat_max=float("nan"), r_hat_argmax=None, ess_bulk_min=float("nan"),
                             ess_tail_min=float("nan"))
                out[site] = entry
                continue
            worst = int(idx[np.flatnonzero(finite)[np.argmax(rhat[finite])]])
            bulk, tail = conv["ess_bulk"], conv["ess_tail"]
            entry.update(
                r_hat_max=float(np.nanmax(rhat)),
                r_hat_argmax=_entry_names(site, self._draws[site].shape[2:], self.dims.get(site, ()),
                                          self.coords)[worst] if self._draws[site].ndim > 2 else site,
                ess_bulk_min=float(np.nanmin(bulk)) if np.isfinite(bulk).any() else float("nan"),
                ess_tail_min=float(np.nanmin(tail)) if np.isfinite(tail).any() else float("nan"),
            )
            out[site] = entry
            if warn:
                problems = []
                if entry["r_hat_max"] > RHAT_MAX:
                    problems.append(f"max R̂ {entry['r_hat_max']:.3f} > {RHAT_MAX} at {entry['r_hat_argmax']}")
                need = ESS_PER_CHAIN * chains
                for key, label in (("ess_bulk_min", "bulk"), ("ess_tail_min", "tail")):
                    if entry[key] < need:
                        problems.append(f"min {label} ESS {entry[key]:.0f} < {need}")
                if problems:
                    from latentfs.core.convergence_warning import ConvergenceWarning  # imports scikit-learn

                    checked = ("" if entry["entries_checked"] == entry["n_entries"] else
                               f"; {entry['entries_checked']} of its {entry['n_entries']} entries checked")
                    if entry["r_hat_max"] > RHAT_MAX and self._chains_stationary(site, idx, rhat):
                        remedy = (
                            "Each chain is stationary on its own (its two halves agree) but the chains disagree: "
                            "they sit in different modes, and a longer warm-up rarely moves a chain out of one. "
                            "Compare the chains (result.samples(site)[c] per chain c), run more chains and keep "
                            "the better ones, or start the sampler from a VB fit (init=...)."
                        )
                    else:
                        remedy = ("Its means and bands are unreliable: raise num_warmup and num_samples, or use more "
                                  "chains.")
                    warnings.warn(
                        f"{self.method} on {self.model}: site {site!r} has not converged ({'; '.join(problems)}, "
                        f"{chains} chains × {n} draws{checked}). {remedy}",
                        ConvergenceWarning,
                        stacklevel=2,
                    )
        modes = self._chain_modes()
        if modes is not None:
            self.diagnostics["chain_modes"] = modes
            if warn and modes["poorer_chains"]:
                from latentfs.core.convergence_warning import ConvergenceWarning  # imports scikit-learn

                pairs = zip(modes["poorer_chains"], modes["gaps"], strict=True)
                gaps = ", ".join(f"chain {c} by {g:.4g}" for c, g in pairs)
                warnings.warn(
                    f"{self.method} on {self.model}: some chains sit in poorer modes than the best chain (mean log "
                    f"joint below it: {gaps}; within-chain sd at most {modes['within_sd']:.3g}). In a latent model "
                    "this usually means a component lost or duplicated, and a longer warm-up rarely frees the chain; "
                    "means over chains mix the modes. Compare the chains (result.trace), run more chains, or refit "
                    "with another seed.",
                    ConvergenceWarning,
                    stacklevel=2,
                )
        self.diagnostics["convergence"] = out
        return out

    def _matching_sites(self, site: str, component_dim: str, match_on: tuple[str, ...] | None) -> list[str]:
        """The sites :meth:`align` matches on: ``match_on``, else ``site`` and every stored global site with a
        ``component_dim`` axis."""
        if match_on is not None:
            missing = [s for s in match_on if s not in self._draws or component_dim not in self.dims.get(s, ())]
            if missing:
                raise DataError(f"match_on names sites without draws over {component_dim!r}: {missing}; choose from "
                                f"{sorted(s for s in self._draws if component_dim in self.dims.get(s, ()))}.")
            return list(dict.fromkeys(match_on))
        local = self.diagnostics.get("observation_dim")
        shape = self._draws[site].shape[:2]
        return [site] + [s for s, v in self._draws.items() if s != site and component_dim in self.dims.get(s, ())
                         and local not in self.dims.get(s, ()) and v.shape[:2] == shape]

    def _joint_components(self, sites: list[str], component_dim: str, also: tuple[str, ...] = ()) -> list[np.ndarray]:
        """Each site's values per component, (chain, draw, K, features), on the log scale where a site is
        positive (variances, weights, rates: their draws are skewed). A site with a second axis over the same
        components (a transition matrix's destination, named in ``also``) gives its diagonal (the self-transition
        probabilities): its other entries move with both labellings at once and cannot be matched row by row."""
        parts = []
        for s in sites:
            dims = self.dims[s]
            arr = np.asarray(self._draws[s], dtype=np.float64)
            second = [i for i, name in enumerate(dims) if name in also]
            if second:
                arr = np.diagonal(arr, axis1=2 + dims.index(component_dim), axis2=2 + second[0])  # K last
                arr = np.moveaxis(arr, -1, 2)
            else:
                arr = np.moveaxis(arr, 2 + dims.index(component_dim), 2)
            arr = arr.reshape(arr.shape[0], arr.shape[1], arr.shape[2], -1)
            if (arr > 0).all():
                arr = np.log(arr)
            parts.append(arr)
        return parts

    @staticmethod
    def _joint_relabel(parts: list[np.ndarray], rounds: int = 3) -> tuple[np.ndarray, int]:
        """Permutations from every site jointly, starting from the first site's own labelling: then each feature
        is measured in units of its posterior spread within a component under the current labelling (the median
        absolute deviation: draws in which a component is empty and wanders over its prior would otherwise make
        the informative site look noisy), so a site whose
        components sit far apart in its own noise units decides and a noisy one hardly counts (two HMM states
        whose means overlap are told apart by their variances), and the matching is repeated until the
        labelling stops changing (at most ``rounds`` times)."""
        from latentfs.core.relabel import apply_draw_permutations

        perms, iterations = relabel_draws(parts[0], component_axis=0)
        for _ in range(rounds):
            aligned = [apply_draw_permutations(p, perms, 0) for p in parts]
            scales = [_within_spread(a) for a in aligned]
            joint = np.concatenate([p / np.where(sc > 0, sc, 1.0) for p, sc in zip(parts, scales, strict=True)],
                                   axis=3)
            new, iterations = relabel_draws(joint, component_axis=0)
            if np.array_equal(new, perms):
                break
            perms = new
        return perms, iterations

    def _site_convergence(self, site: str) -> dict[str, Any]:
        """R̂ and bulk / tail ESS of the checked entries of a sampled site, computed once (cached until the draws
        are relabelled): ``{"entries", "n_entries", "r_hat", "ess_bulk", "ess_tail"}``."""
        cached = self._convergence_cache.get(site)
        if cached is not None:
            return cached
        from latentfs.core import convergence

        x = self._draws[site]
        flat = x.reshape(x.shape[0], x.shape[1], -1)
        if flat.size <= _FULL_CHECK_VALUES:
            idx = np.arange(flat.shape[2])
            sub = flat
        else:
            idx = _entries_to_check(flat)
            sub = flat[:, :, idx]
        with np.errstate(all="ignore"):
            values = convergence.diagnostics(sub)
        result = {"entries": idx, "n_entries": flat.shape[2], **values}
        self._convergence_cache[site] = result
        return result

    def _chains_stationary(self, site: str, idx: np.ndarray, rhat: np.ndarray, n_worst: int = 50) -> bool:
        """Whether every chain, split into its two halves, agrees with itself (R̂ ≤ 1.05) on the ``n_worst``
        entries with the largest R̂: chains that are each stationary but disagree sit in different modes."""
        from latentfs.core import convergence

        x = self._draws[site]
        flat = x.reshape(x.shape[0], x.shape[1], -1)
        half = flat.shape[1] // 2
        if half < 4:
            return False
        order = np.argsort(-np.where(np.isfinite(rhat), rhat, -np.inf), kind="stable")[:n_worst]
        cols = flat[:, :, idx[order]]
        for chain in cols:
            halves = np.stack([chain[:half], chain[chain.shape[0] - half :]])  # (2, half, entries)
            with np.errstate(all="ignore"):
                own = convergence.rhat(halves)
            if np.isfinite(own).any() and float(np.nanmax(own)) > _STATIONARY_RHAT:
                return False
        return True

    def _chain_modes(self) -> dict[str, Any] | None:
        """Chains stuck in separate modes, from the log joint of the kept draws (``sample_stats["lp"]``, or the
        driver's per-step trace after warm-up).

        A chain is "poorer" when its mean log joint is below the best chain's by more than
        ``CHAIN_GAP_SDS`` within-chain standard deviations (the largest over the two chains, and at least
        one nat): chains in one mode differ in mean by a fraction of an sd. Label-free, so it sees what
        relabelling cannot fix (a component lost in one chain and split in two in another). None when
        there is no log joint or fewer than two chains.
        """
        lp = self.sample_stats.get("lp")
        if lp is None:  # the per-step log joint of the driver's trace, after warm-up
            warmup = self.diagnostics.get("num_warmup")
            trace = np.asarray(self.trace, dtype=np.float64) if self.trace is not None else None
            if trace is None or trace.ndim != 2 or not isinstance(warmup, (int, np.integer)):
                return None
            lp = trace[:, int(warmup):]
        lp = np.asarray(lp, dtype=np.float64)
        if lp.ndim != 2 or lp.shape[0] < 2 or lp.shape[1] < 2 or not np.isfinite(lp).all():
            return None
        means, sds = lp.mean(1), lp.std(1, ddof=1)
        best = int(np.argmax(means))
        poorer, gaps = [], []
        for c in range(lp.shape[0]):
            gap = float(means[best] - means[c])
            if c != best and gap > max(CHAIN_GAP_SDS * max(sds[best], sds[c]), 1.0):
                poorer.append(c)
                gaps.append(gap)
        return {"mean_log_joint": means.tolist(), "within_sd": float(sds.max()), "best_chain": best,
                "poorer_chains": poorer, "gaps": gaps}

    # ------------------------------------------------------------------ summaries
    def rhat(self, site: str) -> np.ndarray:
        """Rank-normalised split-R̂ of every entry of a sampled site, after relabelling, shaped as the site: the
        R̂ of :meth:`check_convergence`, :meth:`summary` and ``az.rhat(method="rank")``."""
        self._check_site(site)
        if site not in self._draws:
            raise DataError(f"rhat needs draws from a sampler; site {site!r} comes from {self.method!r}.")
        conv = self._site_convergence(site)
        shape = self._draws[site].shape[2:]
        if conv["entries"].size == conv["n_entries"]:
            return np.asarray(conv["r_hat"]).reshape(shape)
        from latentfs.core import convergence

        with np.errstate(all="ignore"):
            return convergence.rhat(self._draws[site])

    def summary(self, sites: Iterable[str] | str | None = None, *, max_entries: int = 200, level: float = 0.9) -> Any:
        """A pandas DataFrame: kind, mean, sd, equal-tailed interval and (for samplers) bulk / tail ESS and
        rank-normalised R̂ per entry, as ``az.summary`` computes them (sd with ddof = 1; the R̂ and ESS of
        :meth:`check_convergence`, computed once).

        A point estimate (``kind == "point"``) has no sd and no interval (NaN): it is not a distribution.

        Sites with more than ``max_entries`` entries are summarised by one row of aggregates (mean of
        the entries' means, min ESS, max R̂ over the entries :meth:`check_convergence` checks) instead of
        row by row.
        """
        import pandas as pd

        max_entries = check_int("max_entries", max_entries, low=1, remedy="Pass e.g. max_entries=200.")

        _check_level(level)
        rows = []
        for site in self._site_list(sites, self.sites):
            x = self.samples(site)
            flat = x.reshape(x.shape[0], x.shape[1], -1)
            mean = flat.mean(axis=(0, 1))
            if flat.shape[0] * flat.shape[1] < 2:
                # A point estimate: no spread and no interval to report.
                sd = lo = hi = np.full(flat.shape[2], np.nan)
            else:
                lo, hi = np.quantile(flat, [(1 - level) / 2, (1 + level) / 2], axis=(0, 1))
                sd = flat.std(axis=(0, 1), ddof=1)
            nan = np.full(flat.shape[2], np.nan)
            rh, bulk, tail = nan, nan, nan
            sampled = site in self._draws
            if sampled:
                conv = self._site_convergence(site)
                if conv["entries"].size == flat.shape[2]:
                    rh, bulk, tail = conv["r_hat"], conv["ess_bulk"], conv["ess_tail"]
            kind = self.kind(site)
            if flat.shape[2] <= max_entries:
                names = _entry_names(site, x.shape[2:], self.dims.get(site, ()), self.coords)
                for i, name in enumerate(names):
                    rows.append((name, kind, mean[i], sd[i], lo[i], hi[i], bulk[i], tail[i], rh[i]))
            else:
                if sampled:
                    rh, bulk, tail = conv["r_hat"], conv["ess_bulk"], conv["ess_tail"]
                rows.append((f"{site}[{flat.shape[2]} entries]", kind, mean.mean(), sd.mean(), lo.mean(), hi.mean(),
                             _nan_reduce(np.nanmin, bulk), _nan_reduce(np.nanmin, tail), _nan_reduce(np.nanmax, rh)))
        lo_name, hi_name = f"q{(1 - level) / 2 * 100:g}", f"q{(1 + level) / 2 * 100:g}"
        columns = ["entry", "kind", "mean", "sd", lo_name, hi_name, "ess_bulk", "ess_tail", "r_hat"]
        return pd.DataFrame(rows, columns=columns).set_index("entry")

    def to_inference_data(self, num_draws: int | None = None, *, seed: int = 0) -> Any:
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
        if fitted:
            idata.add_groups(variational=self._variational_dataset(fitted))
            idata.variational.attrs.update(attrs)
        if posterior:
            idata.posterior.attrs.update(attrs)
        return idata

    def _variational_dataset(self, sites: list[str]) -> Any:
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

    def __repr__(self) -> str:
        if self._draws:
            kind = f"{self.trace.shape[0]} chain(s) × {next(iter(self._draws.values())).shape[1]} draws"
        else:
            kind = {"point": "point estimates (no bands)", "distribution": "fitted distributions"}.get(
                self.kind(), "fitted distributions and point estimates"
            )
        return f"Posterior(model={self.model}, method={self.method}, {kind}, sites={self.sites})"

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write to a compressed ``.npz`` (arrays) with a JSON header; no pickle anywhere."""
        path = _npz_path(Path(path))
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
        log_lik = self.pointwise_log_likelihood()
        if log_lik is not None:
            arrays["log_likelihood"] = log_lik
        if self.relabel_permutations is not None:
            arrays["relabel_permutations"] = self.relabel_permutations
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
    def load(cls, path: str | Path, *, max_bytes: float | None = None) -> Posterior:
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
    def _load_checked(cls, path: Path, max_bytes: float | None) -> Posterior:
        import zipfile

        from latentfs.core.driver import available_memory

        if not zipfile.is_zipfile(path):
            raise DataError(f"{str(path)!r} is not a latentfs Posterior file (not an .npz archive).")
        with zipfile.ZipFile(path) as archive:
            sizes = {info.filename: info.file_size for info in archive.infolist()}
        if "__meta__.npy" not in sizes:
            raise DataError(f"{str(path)!r} is not a latentfs Posterior file (no __meta__ header).")
        if max_bytes is None:
            # Half the free memory, and no more than a generous expansion of the file itself: a result's
            # arrays compress little, a zip bomb compresses a thousandfold.
            avail = available_memory()
            by_file = max(2.0**28, _MAX_INFLATION * path.stat().st_size)
            max_bytes = by_file if avail is None else min(avail / 2, by_file)
        total = sum(sizes.values())
        if max_bytes is not None and total > max_bytes:
            raise DataError(
                f"{str(path)!r} would inflate to {total / 2**30:.2f} GiB, over the limit of "
                f"{max_bytes / 2**30:.2f} GiB; pass max_bytes=... if you trust the file and have the memory."
            )
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["__meta__"]))
            if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
                got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
                raise DataError(f"{path} is not a latentfs Posterior file (format {got!r}).")
            data = {k: f[k] for k in f.files if k != "__meta__"}
        for key in ("model", "method", "dims", "coords", "families", "diagnostics", "hyperparameters"):
            if key not in meta:
                raise DataError(f"{str(path)!r} is not a complete latentfs Posterior file (no {key!r} in its header).")
        if "trace" not in data:
            raise DataError(f"{str(path)!r} is not a complete latentfs Posterior file (no trace).")
        draws = {k[6:]: v for k, v in data.items() if k.startswith("draws/")}
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
        _check_adoptable(path, post)
        return post

    # ------------------------------------------------------------------ notebooks
    def _repr_html_(self) -> str:
        """The result as a notebook shows it: model, method and kind; the convergence status, with a warning
        badge when the fit has not converged, was interrupted or was not checked; each site's kind, dims and
        shape; the diagnostics. Every string is HTML-escaped (feature, site and model names come from users)."""
        import html

        e = html.escape
        status, reasons = self._convergence_status()
        ok = status == "converged"
        colour = {"converged": "#1e7e34", "not checked": "#8a6d00"}.get(status, "#b02a37")
        badge = (f'<span class="latentfs-status" style="background:{colour};color:#fff;padding:1px 6px;'
                 f'border-radius:3px;font-weight:bold">{"✓" if ok else "⚠"} {e(status)}</span>')
        if self._draws:
            grid = next(iter(self._draws.values())).shape
            holds = f"draws: {grid[0]} chain(s) × {grid[1]} draws"
        else:
            holds = {"point": "point estimates (no bands)", "distribution": "fitted distributions"}.get(
                self.kind(), "fitted distributions and point estimates")
        parts = [
            '<div class="latentfs-posterior">',
            f"<p><b>Posterior</b> of <code>{e(self.model)}</code> by <code>{e(self.method)}</code>, "
            f"kind <code>{e(self.kind())}</code> ({e(holds)}) {badge}</p>",
        ]
        if reasons:
            parts.append("<ul>" + "".join(f"<li>{e(r)}</li>" for r in reasons) + "</ul>")
        if self.alignment is not None:
            parts.append(f"<p>components relabelled on site <code>{e(str(self.alignment.get('site')))}</code>: "
                         f"{e(str(self.alignment.get('method', '')))}</p>")
        rows = []
        for site in self.sites:
            shape = self._site_shape(site)
            dims = self.dims.get(site, ())
            if len(dims) == len(shape):
                layout = " × ".join(f"{d} ({n})" for d, n in zip(dims, shape, strict=True))
            else:
                layout = " × ".join(map(str, shape)) or "scalar"
            kind = self.kind(site)
            family = "" if kind == "draws" else self._fitted[site]["family"]
            rows.append(f"<tr><td><code>{e(site)}</code></td><td>{e(kind)}</td><td>{e(family)}</td>"
                        f"<td>{e(layout)}</td></tr>")
        parts.append("<table><thead><tr><th>site</th><th>kind</th><th>family</th><th>dims (size)</th></tr>"
                     "</thead><tbody>" + "".join(rows) + "</tbody></table>")
        convergence = self.diagnostics.get("convergence")
        if isinstance(convergence, dict) and convergence:
            head = ("<tr><th>site</th><th>max R̂</th><th>min bulk ESS</th><th>min tail ESS</th>"
                    "<th>entries checked</th></tr>")
            body = "".join(
                f"<tr><td><code>{e(str(site))}</code></td>"
                + "".join(f"<td>{e(self._html_value(entry.get(k)))}</td>"
                          for k in ("r_hat_max", "ess_bulk_min", "ess_tail_min"))
                + f"<td>{e(str(entry.get('entries_checked')))} of {e(str(entry.get('n_entries')))}</td></tr>"
                for site, entry in convergence.items() if isinstance(entry, dict))
            parts.append(f"<p>convergence of the draws (rank-normalised R̂ ≤ {RHAT_MAX}, ESS ≥ {ESS_PER_CHAIN} "
                         f"per chain)</p><table><thead>{head}</thead><tbody>{body}</tbody></table>")
        rest = {k: v for k, v in self.diagnostics.items() if k != "convergence"}
        if rest:
            body = "".join(f"<tr><td><code>{e(str(k))}</code></td><td>{e(self._html_value(v))}</td></tr>"
                           for k, v in rest.items())
            parts.append(f"<details open><summary>diagnostics ({len(rest)})</summary><table><tbody>{body}</tbody>"
                         "</table></details>")
        parts.append("</div>")
        return "\n".join(parts)

    def _convergence_status(self) -> tuple[str, list[str]]:
        """``(status, reasons)`` from what the fit recorded in :attr:`diagnostics`: ``"interrupted"``,
        ``"not converged"`` (an optimiser's ``converged`` is False; a sampled site fails the R̂ / ESS rule of
        :meth:`check_convergence`; chains sit in poorer modes), ``"converged"``, or ``"not checked"`` when
        nothing was recorded (an online fit, or draws never checked)."""
        d = self.diagnostics
        reasons: list[str] = []
        checked = False
        if d.get("interrupted"):
            reasons.append(f"interrupted (Ctrl-C) after {d.get('n_iter', '?')} iterations: the result holds the "
                           "state reached so far")
        if d.get("converged") is not None:
            checked = True
            if not d["converged"] and not d.get("interrupted"):
                reasons.append(f"the optimiser stopped after {d.get('n_iter', '?')} iterations before its "
                               "tolerance was met: raise max_iter or loosen tol")
        convergence = d.get("convergence")
        for site, entry in (convergence.items() if isinstance(convergence, dict) else ()):
            if not isinstance(entry, dict):
                continue
            rhat, bulk, tail = (entry.get(k) for k in ("r_hat_max", "ess_bulk_min", "ess_tail_min"))
            chains = self._draws[site].shape[0] if site in self._draws else self.trace.shape[0]
            need = ESS_PER_CHAIN * chains
            found = []
            if isinstance(rhat, (int, float)) and np.isfinite(rhat):
                checked = True
                if rhat > RHAT_MAX:
                    found.append(f"max R̂ {rhat:.3f} > {RHAT_MAX}")
            for value, label in ((bulk, "bulk"), (tail, "tail")):
                if isinstance(value, (int, float)) and np.isfinite(value):
                    checked = True
                    if value < need:
                        found.append(f"min {label} ESS {value:.0f} < {need}")
            if found:
                reasons.append(f"site {site!r} has not converged ({'; '.join(found)}): raise num_warmup and "
                               "num_samples, or use more chains")
        modes = d.get("chain_modes")
        if isinstance(modes, dict) and modes.get("poorer_chains"):
            reasons.append(f"chains {list(modes['poorer_chains'])} sit in poorer modes than chain "
                           f"{modes.get('best_chain')}: compare result.trace, or refit with another seed")
        if d.get("interrupted"):
            return "interrupted", reasons
        if reasons:
            return "not converged", reasons
        return ("converged" if checked else "not checked"), reasons

    def _site_shape(self, site: str) -> tuple[int, ...]:
        """The shape of one value of ``site``, read from the stored arrays (nothing is drawn or averaged)."""
        if site in self._draws:
            return tuple(self._draws[site].shape[2:])
        spec = self._fitted[site]
        if spec["family"] == "wishart":
            return tuple(np.broadcast_shapes((*spec["dof"].shape, 1, 1), spec["scale"].shape))
        return tuple(np.broadcast_shapes(*(np.shape(v) for k, v in spec.items() if k != "family")))

    @staticmethod
    def _html_value(value: Any, limit: int = 6) -> str:
        """A diagnostics value in a few characters: floats to 6 significant digits, long sequences cut."""
        if isinstance(value, (bool, np.bool_)) or value is None:
            return str(value)
        if isinstance(value, (float, np.floating)):
            return f"{float(value):.6g}"
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if isinstance(value, (list, tuple)):
            shown = ", ".join(Posterior._html_value(v, limit) for v in value[:limit])
            return f"[{shown}{f', … ({len(value)} items)' if len(value) > limit else ''}]"
        if isinstance(value, dict):
            items = list(value.items())
            shown = ", ".join(f"{k}: {Posterior._html_value(v, limit)}" for k, v in items[:limit])
            return "{" + shown + (f", … ({len(items)} entries)" if len(items) > limit else "") + "}"
        return str(value)


_MAX_INFLATION = 200


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


def load(path: str | Path, *, max_bytes: float | None = None) -> Posterior:
    """Load a :class:`Posterior` saved with :meth:`Posterior.save` (see :meth:`Posterior.load`)."""
    return Posterior.load(path, max_bytes=max_bytes)


def _npz_path(path: Path) -> Path:
    """The file :meth:`Posterior.save` writes for ``path``: ``.npz`` appended unless already there."""
    if path.suffix == ".npz":
        return path
    return path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")


def _check_level(level: Any) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0 < float(level) < 1:
        raise DataError(f"level must be a number strictly between 0 and 1; got {level!r}. Use e.g. 0.9.")
    return float(level)


def _within_spread(aligned: np.ndarray) -> np.ndarray:
    """The spread of each feature within a component, over draws and chains, averaged over components: 1.4826 ×
    the median absolute deviation (the sd for normal draws). ``aligned`` is (chain, draw, K, features)."""
    center = np.median(aligned, axis=(0, 1), keepdims=True)
    return 1.4826 * np.median(np.abs(aligned - center), axis=(0, 1)).mean(axis=0)


def _nan_reduce(fn: Any, values: np.ndarray) -> float:
    """``fn`` (np.nanmin / np.nanmax) of the finite-or-NaN ``values``; NaN when none is finite."""
    return float(fn(values)) if np.isfinite(values).any() else float("nan")


def _entries_to_check(flat: np.ndarray) -> np.ndarray:
    """Indices of the entries of a (chain, draw, entries) array that :meth:`Posterior.check_convergence`
    checks: all of them when there are few, else the largest posterior means plus a regular sample."""
    n = flat.shape[2]
    if n <= _CHECK_ENTRIES:
        return np.arange(n)
    means = np.abs(flat.mean(axis=(0, 1)))
    top = np.argsort(-means, kind="stable")[: _CHECK_ENTRIES // 2]
    regular = np.linspace(0, n - 1, _CHECK_ENTRIES - top.size).astype(np.int64)
    return np.unique(np.concatenate([top, regular]))


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
