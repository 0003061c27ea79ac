"""Finite mixtures declared as Pyro models: Gaussian mixtures, latent profile and latent class models.

Titterington (2006), §1.2–1.3: a single categorical latent variable z ∈ {1..K} per unit with mixing
weights η_k, and component densities g_k(y | φ_k) under local independence where stated, so that
f(y | θ) = Σ_k η_k g_k(y | φ_k).

====================  ===============================  ==============================================
site                  shape                            meaning (chapter symbol)
====================  ===============================  ==============================================
``weights``           (K,)                             mixing weights η, ~ Dirichlet(α)
``means``             (K, d)                           component means μ_k (Gaussian models)
``precision``         full (K, d, d); tied (d, d);     inverse covariances Λ_k (Normal–Wishart or
                      diag (K, d); spherical (K, 1);   Normal–Gamma prior: μ_k | Λ_k ~ N(m0, (κ Λ_k)⁻¹))
                      tied_diag (d,)
``item_probs``        Bernoulli items (K, p)           P(y_i = 1 | z = k) (Beta prior) or, for
                      categorical: ``item_probs_<i>``  categorical items, P(y_i = s | z = k) (Dirichlet)
                      (K, S_i) per item
``assignment``        (n,)                             z, enumerable (``infer={"enumerate": "parallel"}``)
``data`` / ``items``  (n, d) / (n, p)                  observed y; NaN (missing) entries are masked out
====================  ===============================  ==============================================

Missing data (NaN). Under local independence a missing entry integrates out of g_k exactly, so in
:class:`LatentClass`, :class:`LatentProfile` and the ``diag`` / ``spherical`` :class:`GaussianMixture`
missing entries contribute nothing (``poutine.mask``). A ``full`` or ``tied`` Gaussian mixture couples the
features within a component; it rejects NaN (impute, or use a diagonal model).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from latentfs.core.data import DataError, as_continuous, check_n_components, check_positive
from latentfs.core.pyro_context import simulate_sites

__all__ = ["GaussianMixture", "LatentClass", "LatentProfile", "UnivariateMixtureK", "COVARIANCE_TYPES", "PRIOR_RIDGE"]

#: Added to the diagonal of the default Wishart prior covariance Σ0, relative to each column's variance.
PRIOR_RIDGE = 1e-6

# How each covariance type shares and shapes its precision. "wishart" types carry d×d matrices, "gamma"
# types diagonal precisions; ``shared`` says whether one precision serves every component.
COVARIANCE_TYPES: dict[str, dict[str, Any]] = {
    "full": {"kind": "wishart", "shared": False, "missing": False},
    "tied": {"kind": "wishart", "shared": True, "missing": False},
    "diag": {"kind": "gamma", "shared": False, "missing": True, "gamma_shape": "kd"},
    "spherical": {"kind": "gamma", "shared": False, "missing": True, "gamma_shape": "k1"},
    "tied_diag": {"kind": "gamma", "shared": True, "missing": True, "gamma_shape": "1d"},
}


def _check_simulate_sizes(n_samples: Any, n_features: Any) -> tuple[int, int]:
    """``simulate``'s sizes: integers ≥ 1 (5.5 is not truncated, 0 and -1 are refused before Pyro sees them)."""
    from latentfs.core.data import check_int

    return check_int("n_samples", n_samples, low=1), check_int("n_features", n_features, low=1)


class _MixtureBase:
    """Shared pieces: K, the Dirichlet prior on the weights, copies with another K, scoped simulation."""

    default_method = "em"
    n_components: int
    weight_concentration: float

    def with_n_components(self, n_components: int) -> _MixtureBase:
        """A copy of this model with another number of components (for model selection)."""
        new = copy.copy(self)
        new.n_components = check_n_components(n_components, 10**9)
        return new

    def _weights_site(self, dtype: torch.dtype) -> torch.Tensor:
        alpha = torch.full((self.n_components,), float(self.weight_concentration), dtype=dtype)
        return pyro.sample("weights", dist.Dirichlet(alpha))


# ----------------------------------------------------------------------------- Gaussian mixtures
class GaussianMixture(_MixtureBase):
    """Gaussian mixture f(y) = Σ_k η_k N(y; μ_k, Λ_k⁻¹); Titterington (2006) §1.3, Case 1.

    The Bayesian engines use conjugate priors: η ~ Dirichlet(α), and per component a Normal–Wishart
    (``full``/``tied``; Bishop 2006 §10.2, eq. 10.40) or Normal–Gamma (``diag``/``spherical``/``tied_diag``)
    prior: Λ ~ Wishart(ν0, (ν0 Σ0)⁻¹) (so E[Λ] = Σ0⁻¹), μ_k | Λ_k ~ N(m0, (κ0 Λ_k)⁻¹). For a Gamma
    precision λ ~ Gamma(ν0/2, ν0 σ0²/2). EM ignores the priors (maximum likelihood).

    Missing values (NaN): with ``diag``, ``spherical`` or ``tied_diag`` covariances a missing entry is
    integrated out exactly (it contributes nothing to the likelihood, the E-step or the M-step); ``full``
    and ``tied`` reject NaN with an error (exact EM for them would need per-pattern conditional moments,
    not implemented) — impute first or use a diagonal type.

    Parameters
    ----------
    n_components : int
        K.
    covariance_type : {"full", "diag", "spherical", "tied", "tied_diag"}
        ``tied_diag`` (one diagonal covariance shared by all components) is the latent profile model.
    weight_concentration : float, default 1.0
        α of the Dirichlet prior on the weights.
    mean_prior : array (d,), optional
        m0; by default the data's column means (0 when simulating).
    mean_precision : float, optional
        κ0, the prior's pseudo-count for the means (small values give well-separated simulated means);
        by default 0.01 when fitting (Fraley & Raftery 2007) and 1 when simulating.
    degrees_of_freedom : float, optional
        ν0; default d + 2 for Wishart types (finite prior mean of the covariance) and 2 for Gamma types.
    covariance_prior : float or array, optional
        Σ0 (d×d for Wishart types, a variance per feature otherwise); by default the data's covariance
        (variances) divided by K^(2/d), Fraley & Raftery's (2007) weakly informative default (Wishart types
        add :data:`PRIOR_RIDGE` × each column's variance on the diagonal so that Σ0 stays positive
        definite for collinear columns or fewer rows than features), and the identity when simulating.

    Examples
    --------
    >>> gm = GaussianMixture(2, covariance_type="diag", mean_precision=0.05)
    >>> sim = gm.simulate(50, 3, seed=0)
    >>> sim["data"].shape, sim["means"].shape, sim["precision"].shape
    ((50, 3), (2, 3), (2, 3))
    """

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "data"

    data_site = "data"

    def __init__(
        self,
        n_components: int,
        *,
        covariance_type: str = "full",
        weight_concentration: float = 1.0,
        mean_prior: Any = None,
        mean_precision: float | None = None,
        degrees_of_freedom: float | None = None,
        covariance_prior: Any = None,
    ) -> None:
        self.n_components = check_n_components(n_components, 10**9)
        if covariance_type not in COVARIANCE_TYPES:
            raise DataError(f"covariance_type must be one of {sorted(COVARIANCE_TYPES)}; got {covariance_type!r}.")
        self.covariance_type = covariance_type
        self.weight_concentration = float(check_positive(weight_concentration, "weight_concentration"))
        self.mean_prior = None if mean_prior is None else np.asarray(mean_prior, dtype=np.float64)
        self.mean_precision = (
            None if mean_precision is None else float(check_positive(mean_precision, "mean_precision"))
        )
        self.degrees_of_freedom = None if degrees_of_freedom is None else float(degrees_of_freedom)
        self.covariance_prior = None if covariance_prior is None else np.asarray(covariance_prior, dtype=np.float64)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.n_components}, covariance_type={self.covariance_type!r})"

    @property
    def spec(self) -> dict[str, Any]:
        return COVARIANCE_TYPES[self.covariance_type]

    @property
    def allows_missing(self) -> bool:
        return bool(self.spec["missing"])

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "covariance_type": self.covariance_type,
            "weight_concentration": self.weight_concentration,
            "mean_precision": self.mean_precision,
            "degrees_of_freedom": self.degrees_of_freedom,
            "mean_prior": None if self.mean_prior is None else self.mean_prior.tolist(),
            "covariance_prior": None if self.covariance_prior is None else self.covariance_prior.tolist(),
        }

    # ---------------------------------------------------------------- data and priors
    def check_data(self, X: Any, *, name: str = "X") -> Any:
        """Validate X (NaN allowed only for diagonal types), with at least K rows and no constant column."""
        data = as_continuous(
            X, name=name, missing="allow" if self.allows_missing else "error", allow_constant=False, min_samples=2
        )
        check_n_components(self.n_components, data.shape[0], what=f"the number of rows of {name}")
        return data

    def n_parameters(self, n_features: int) -> int:
        """Free parameters: (K−1) weights + K d means + the covariance parameters (McLachlan & Peel 2000)."""
        k, d = self.n_components, int(n_features)
        cov = {
            "full": k * d * (d + 1) // 2,
            "tied": d * (d + 1) // 2,
            "diag": k * d,
            "spherical": k,
            "tied_diag": d,
        }[self.covariance_type]
        return (k - 1) + k * d + cov

    def prior(self, X: np.ndarray | None, n_features: int) -> dict[str, np.ndarray]:
        """The resolved prior: m0 (d,), κ0, ν0, and Σ0 (d, d) for Wishart types or σ0² (d,) otherwise.

        Unset parts come from ``X`` (column means and (co)variances ignoring NaN), or 0 and the identity
        when ``X`` is None (simulation).
        """
        d = int(n_features)
        wishart = self.spec["kind"] == "wishart"
        if self.mean_prior is not None:
            m0 = np.broadcast_to(self.mean_prior, (d,)).astype(np.float64)
        else:
            m0 = np.zeros(d) if X is None else np.nanmean(X, axis=0)
        if self.covariance_prior is not None:
            c = self.covariance_prior
            if wishart:
                s0 = np.diag(np.broadcast_to(c, (d,))) if c.ndim < 2 else c
                if s0.shape != (d, d):
                    raise DataError(f"covariance_prior must be {d}×{d} here; got shape {s0.shape}.")
            else:
                s0 = np.broadcast_to(c if c.ndim < 2 else np.diag(c), (d,)).astype(np.float64)
        elif X is None:
            s0 = np.eye(d) if wishart else np.ones(d)
        elif wishart:
            # Fraley & Raftery (2007, J. Classification 24, §3): the data's covariance shrunk by K^(2/d), the
            # volume one of K equal components would take. The whole covariance (between-component spread
            # included) made posterior variances about twice the MLE on Old Faithful.
            s0 = np.atleast_2d(np.cov(X, rowvar=False)) / self.n_components ** (2.0 / d)
            # A ridge of PRIOR_RIDGE × each column's variance keeps Σ0 positive definite when the columns are
            # collinear (a duplicated column, fewer rows than features, two rows), as EM's reg_covar does.
            s0 = s0 + np.diag(PRIOR_RIDGE * np.var(X, axis=0))
        else:
            s0 = np.nanvar(X, axis=0) / self.n_components ** (2.0 / d)
        nu0 = self.degrees_of_freedom if self.degrees_of_freedom is not None else (d + 2.0 if wishart else 2.0)
        if wishart and nu0 <= d - 1:
            raise DataError(
                f"degrees_of_freedom must exceed n_features - 1 = {d - 1} for a Wishart prior; got {nu0}. "
                f"Pass degrees_of_freedom >= {d}."
            )
        return {
            "mean": m0,
            # Fraley & Raftery's (2007) κ0 = 0.01 when fitting: the prior mean barely pulls the component
            # means; simulation keeps κ0 = 1 so that simulated means stay on the data's scale.
            "mean_precision": np.asarray(
                self.mean_precision if self.mean_precision is not None else (1.0 if X is None else 0.01)
            ),
            "dof": np.asarray(nu0),
            "covariance": np.asarray(s0, dtype=np.float64),
        }

    # ---------------------------------------------------------------- the Pyro model
    def model(
        self, data: torch.Tensor | None = None, *, n_samples: int | None = None, n_features: int | None = None
    ) -> torch.Tensor:
        """The mixture with z enumerable. Pass ``data`` (n, d) (NaN = missing) or ``n_samples``, ``n_features``."""
        if data is not None:
            n_samples, n_features = data.shape
        if n_samples is None or n_features is None:
            raise DataError("model needs data, or n_samples and n_features to simulate.")
        if self.spec["kind"] == "wishart" and data is not None and bool(torch.isnan(data).any()):
            raise DataError(
                f"data must not contain NaN for covariance_type={self.covariance_type!r}; impute first "
                "or use a diagonal covariance_type."
            )
        dtype = data.dtype if data is not None else torch.float64
        prior = self.prior(None if data is None else data.detach().cpu().numpy(), n_features)
        t = {k: torch.as_tensor(v, dtype=dtype) for k, v in prior.items()}
        k, d = self.n_components, n_features
        spec = self.spec
        weights = self._weights_site(dtype)
        kappa, nu0 = t["mean_precision"], t["dof"]
        if spec["kind"] == "wishart":
            scale0 = torch.linalg.inv(nu0 * t["covariance"])  # W0, so that E[Λ] = Σ0⁻¹
            if spec["shared"]:
                precision = pyro.sample("precision", dist.Wishart(nu0, covariance_matrix=scale0))
                with pyro.plate("component", k):
                    means = pyro.sample("means", dist.MultivariateNormal(t["mean"], precision_matrix=kappa * precision))
                prec_k = precision.expand(k, d, d)
            else:
                with pyro.plate("component", k):
                    precision = pyro.sample("precision", dist.Wishart(nu0, covariance_matrix=scale0))
                    means = pyro.sample("means", dist.MultivariateNormal(t["mean"], precision_matrix=kappa * precision))
                prec_k = precision
        else:
            a0, b0 = nu0 / 2, nu0 * t["covariance"] / 2  # Gamma(shape, rate); b0 (d,)
            shape = spec["gamma_shape"]
            comp_plate, feat_plate = pyro.plate("component", k, dim=-2), pyro.plate("feature", d, dim=-1)
            if shape == "kd":
                with comp_plate, feat_plate:
                    precision = pyro.sample("precision", dist.Gamma(a0, b0))
                lam = precision
            elif shape == "k1":
                with comp_plate:
                    precision = pyro.sample("precision", dist.Gamma(a0, b0.mean()).expand([k, 1]))
                lam = precision.expand(k, d)
                precision = precision[..., 0]
            else:
                with feat_plate:
                    precision = pyro.sample("precision", dist.Gamma(a0, b0))
                lam = precision.expand(k, d)
            with comp_plate, feat_plate:
                means = pyro.sample("means", dist.Normal(t["mean"], (kappa * lam).rsqrt()))
        with pyro.plate("sample", n_samples, dim=-2):
            z = pyro.sample(
                "assignment", dist.Categorical(weights).expand([n_samples, 1]), infer={"enumerate": "parallel"}
            )
            zi = z[..., 0]
            if spec["kind"] == "wishart":
                obs = None if data is None else data[:, None, :]
                y = pyro.sample(
                    "data",
                    dist.MultivariateNormal(means[zi][..., None, :], precision_matrix=prec_k[zi][..., None, :, :]),
                    obs=obs,
                )
                return y[..., 0, :] if y.dim() >= 3 else y
            with feat_plate:
                mask = None if data is None else ~torch.isnan(data)
                obs = None if data is None else torch.nan_to_num(data)
                with poutine.mask(mask=mask if mask is not None else True):  # type: ignore[arg-type]
                    return pyro.sample("data", dist.Normal(means[zi], lam[zi].rsqrt()), obs=obs)

    def simulate(
        self, n_samples: int, n_features: int, *, params: dict[str, Any] | None = None, seed: Any = None
    ) -> dict[str, np.ndarray]:
        """Draw from :meth:`model`: ``weights``, ``means``, ``precision``, ``assignment``, ``data`` (n, d).

        ``params`` fixes any of the parameter sites (e.g. planted ``means``); the rest come from the prior.
        """
        n_samples, n_features = _check_simulate_sizes(n_samples, n_features)
        cond = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in (params or {}).items()}
        out = simulate_sites(
            poutine.condition(self.model, cond), seed, n_samples=int(n_samples), n_features=int(n_features)
        )
        out["assignment"] = out["assignment"].reshape(-1).astype(np.int64)
        out["data"] = out["data"].reshape(int(n_samples), int(n_features))
        return out


class LatentProfile(GaussianMixture):
    """Latent profile analysis (Gibson 1959): a Gaussian mixture with diagonal covariances.

    Titterington (2006) §1.2: y = W Z + e with Z the indicator of z, e ~ N(0, Λ), Λ diagonal, so the
    components have means μ_k (the columns of W) and, by default, one shared diagonal covariance Λ
    (``variance="shared"``); ``variance="free"`` gives each class its own diagonal. Missing entries
    (NaN) contribute nothing (local independence).

    Examples
    --------
    >>> lp = LatentProfile(2)
    >>> lp.covariance_type, lp.n_parameters(4)
    ('tied_diag', 13)
    """

    def __init__(
        self,
        n_components: int,
        *,
        variance: str = "shared",
        weight_concentration: float = 1.0,
        mean_prior: Any = None,
        mean_precision: float | None = None,
        degrees_of_freedom: float | None = None,
        covariance_prior: Any = None,
    ) -> None:
        types = {"shared": "tied_diag", "free": "diag"}
        if variance not in types:
            raise DataError(f"variance must be 'shared' or 'free'; got {variance!r}.")
        self.variance = variance
        super().__init__(
            n_components,
            covariance_type=types[variance],
            weight_concentration=weight_concentration,
            mean_prior=mean_prior,
            mean_precision=mean_precision,
            degrees_of_freedom=degrees_of_freedom,
            covariance_prior=covariance_prior,
        )

    def __repr__(self) -> str:
        return f"LatentProfile({self.n_components}, variance={self.variance!r})"


# ----------------------------------------------------------------------------- latent class
class LatentClass(_MixtureBase):
    """Latent class analysis: categorical items, locally independent given the class; Titterington §1.2.

    g(y | z = k) = Π_i Π_s θ_{iks}^{y_is}, with θ_{ik·} ~ Dirichlet(c) (Beta(c, c) for binary items) and
    η ~ Dirichlet(α). Items are coded 0..S_i−1; NaN marks a missing answer, which contributes nothing.

    Parameters
    ----------
    n_components : int
    n_levels : int or sequence of int, optional
        Levels per item. ``None`` means binary (Bernoulli) items coded 0/1, declared with a Beta prior
        and a Bernoulli likelihood; otherwise items are categorical.
    weight_concentration : float, default 1.0
    item_concentration : float, default 1.0
        c, the symmetric Beta/Dirichlet prior on each item's response probabilities.

    Examples
    --------
    >>> lc = LatentClass(2)
    >>> sim = lc.simulate(20, 4, seed=0)
    >>> sim["items"].shape, lc.n_parameters(4)
    ((20, 4), 9)
    """

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "items"

    data_site = "items"

    def __init__(
        self,
        n_components: int,
        *,
        n_levels: int | Sequence[int] | None = None,
        weight_concentration: float = 1.0,
        item_concentration: float = 1.0,
    ) -> None:
        self.n_components = check_n_components(n_components, 10**9)
        if n_levels is not None:
            lv = np.atleast_1d(np.asarray(n_levels))
            if lv.dtype.kind not in "iu" or (lv < 2).any() or lv.ndim != 1:
                raise DataError(
                    f"n_levels must be an integer ≥ 2 or a list of them (one per item); got {n_levels!r}. "
                    "Binary items need no n_levels."
                )
            n_levels = int(lv[0]) if lv.size == 1 and np.ndim(n_levels) == 0 else [int(v) for v in lv]
        self.n_levels = n_levels
        self.weight_concentration = float(check_positive(weight_concentration, "weight_concentration"))
        self.item_concentration = float(check_positive(item_concentration, "item_concentration"))

    def __repr__(self) -> str:
        return f"LatentClass({self.n_components}, n_levels={self.n_levels!r})"

    @property
    def binary(self) -> bool:
        return self.n_levels is None

    allows_missing = True

    def levels(self, n_items: int) -> np.ndarray:
        """S_i per item (2 for binary items)."""
        if self.n_levels is None:
            return np.full(n_items, 2, dtype=np.int64)
        if isinstance(self.n_levels, int):
            return np.full(n_items, self.n_levels, dtype=np.int64)
        if len(self.n_levels) != n_items:
            raise DataError(
                f"n_levels must give one number per item: got {len(self.n_levels)} for {n_items} items. "
                "Pass a single int when all items have the same number of levels."
            )
        return np.asarray(self.n_levels, dtype=np.int64)

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "n_levels": self.n_levels,
            "weight_concentration": self.weight_concentration,
            "item_concentration": self.item_concentration,
        }

    def check_data(self, X: Any, *, name: str = "X") -> Any:
        """Validate item codes: integers in 0..S_i−1 or NaN; no all-missing rows/columns; no constant item."""
        data = as_continuous(X, name=name, missing="allow", allow_constant=False, min_samples=2)
        v = data.values
        obs = ~np.isnan(v)
        levels = self.levels(v.shape[1])
        bad = obs & ((v != np.round(np.nan_to_num(v))) | (v < 0))
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise DataError(
                f"{name} must hold item codes 0, 1, …, S_i−1 (or NaN for missing); row {r} column {c} "
                f"holds {v[r, c]:g}. Recode the answers as consecutive integers from 0."
            )
        over = obs & (np.nan_to_num(v) >= levels[None, :])
        if over.any():
            r, c = np.argwhere(over)[0]
            what = "binary items must be coded 0/1" if self.binary else f"item {c} has n_levels={levels[c]}"
            raise DataError(
                f"{name} holds a level that was not declared: row {r} column {c} holds {v[r, c]:g}, but {what}. "
                "Pass n_levels with the true number of levels per item, or recode the item."
            )
        check_n_components(self.n_components, v.shape[0], what=f"the number of rows of {name}")
        return data

    def n_parameters(self, n_features: int) -> int:
        """(K−1) + K Σ_i (S_i − 1) (Goodman 1974)."""
        k = self.n_components
        return (k - 1) + k * int((self.levels(int(n_features)) - 1).sum())

    def model(
        self, items: torch.Tensor | None = None, *, n_samples: int | None = None, n_features: int | None = None
    ) -> torch.Tensor:
        """The latent class model with z enumerable. Pass ``items`` (n, p) (NaN = missing) or the sizes."""
        if items is not None:
            n_samples, n_features = items.shape
        if n_samples is None or n_features is None:
            raise DataError("model needs items, or n_samples and n_features to simulate.")
        dtype = items.dtype if items is not None else torch.float64
        k, p = self.n_components, n_features
        levels = self.levels(p)
        c = float(self.item_concentration)
        weights = self._weights_site(dtype)
        mask = None if items is None else ~torch.isnan(items)
        obs = None if items is None else torch.nan_to_num(items).round()
        if self.binary:
            item_plate = pyro.plate("item", p, dim=-1)
            with pyro.plate("component", k, dim=-2), item_plate:
                probs = pyro.sample("item_probs", dist.Beta(torch.tensor(c, dtype=dtype), torch.tensor(c, dtype=dtype)))
            with pyro.plate("sample", n_samples, dim=-2):
                z = pyro.sample(
                    "assignment", dist.Categorical(weights).expand([n_samples, 1]), infer={"enumerate": "parallel"}
                )
                with item_plate, poutine.mask(mask=mask if mask is not None else True):  # type: ignore[arg-type]
                    return pyro.sample("items", dist.Bernoulli(probs[z[..., 0]]), obs=obs)
        item_probs = []
        with pyro.plate("component", k, dim=-1):
            for i, s in enumerate(levels):
                item_probs.append(pyro.sample(f"item_probs_{i}", dist.Dirichlet(torch.full((int(s),), c, dtype=dtype))))
        outs = []
        with pyro.plate("sample", n_samples, dim=-1):
            z = pyro.sample("assignment", dist.Categorical(weights), infer={"enumerate": "parallel"})
            for i in range(p):
                m = True if mask is None else mask[:, i]
                with poutine.mask(mask=m):  # type: ignore[arg-type]
                    outs.append(
                        pyro.sample(
                            f"item_{i}",
                            dist.Categorical(item_probs[i][z]),
                            obs=None if obs is None else obs[:, i].long(),
                        )
                    )
        return torch.stack([o.to(dtype) for o in outs], -1)

    def simulate(
        self, n_samples: int, n_features: int, *, params: dict[str, Any] | None = None, seed: Any = None
    ) -> dict[str, np.ndarray]:
        """Draw from :meth:`model`: ``weights``, ``item_probs`` (K, p) or (K, p, S_max) padded with 0,
        ``assignment`` and ``items`` (n, p) coded 0..S_i−1. ``params`` may fix ``weights``/``item_probs``.
        """
        n_samples, n_features = _check_simulate_sizes(n_samples, n_features)
        cond = {}
        for key, v in (params or {}).items():
            arr = torch.as_tensor(np.asarray(v, dtype=np.float64))
            if key == "item_probs" and not self.binary:
                for i, s in enumerate(self.levels(int(n_features))):
                    cond[f"item_probs_{i}"] = arr[:, i, : int(s)]
            else:
                cond[key] = arr
        out = simulate_sites(
            poutine.condition(self.model, cond), seed, n_samples=int(n_samples), n_features=int(n_features)
        )
        if not self.binary:
            levels = self.levels(int(n_features))
            probs = np.zeros((self.n_components, int(n_features), int(levels.max())))
            for i, s in enumerate(levels):
                probs[:, i, : int(s)] = out.pop(f"item_probs_{i}")
            out["item_probs"] = probs
            out["items"] = np.stack([out.pop(f"item_{i}") for i in range(int(n_features))], -1).astype(np.float64)
        else:
            out["items"] = out["items"].reshape(int(n_samples), int(n_features))
        out["assignment"] = out["assignment"].reshape(-1).astype(np.int64)
        return out


# ----------------------------------------------------------------------------- univariate mixture, unknown k
class UnivariateMixtureK(_MixtureBase):
    """Univariate Gaussian mixture with the hierarchical prior of Richardson & Green (1997, §2), for a fixed k.

    This declares the model *conditional on* k, the source of truth for the reversible-jump engine
    (``latentfs.fit(model, y, method="rjmcmc")``), which also puts a prior on k ~ Uniform{1, …,
    ``max_components``} and samples it:

    .. code-block:: text

        β ~ Gamma(g, h)                    (shape, rate)
        w ~ Dirichlet(δ, …, δ)             site ``weights`` (k,)
        μ_j ~ N(ξ, κ⁻¹)                     site ``means`` (k,)
        σ_j⁻² | β ~ Gamma(α, β)             site ``precision`` (k,)
        z_i | w ~ Categorical(w)            site ``assignment`` (n,), enumerable
        y_i | z_i ~ N(μ_{z_i}, σ²_{z_i})    site ``data`` (n,)

    The engine keeps μ_1 < … < μ_k (R&G's identifiability constraint), so its density on the ordered
    space is k! times this one. With R the data's range, the defaults are R&G's: ξ the midpoint of the
    data, κ = 1/R², α = 2, g = 0.2, h = 10/R², δ = 1, k_max = 30.

    Parameters
    ----------
    n_components : int, default 1
        k of the Pyro model (and the sampler's starting k).
    max_components : int, default 30
        k_max of the uniform prior on k.
    weight_concentration : float, default 1.0
        δ.
    precision_shape : float, default 2.0
        α.
    beta_shape : float, default 0.2
        g.
    beta_rate : float, optional
        h; by default 10/R² (10 when simulating without data).
    mean_prior : float, optional
        ξ; by default the midpoint of the data's range (0 when simulating).
    mean_precision : float, optional
        κ; by default 1/R² (1 when simulating).

    Examples
    --------
    >>> m = UnivariateMixtureK(3)
    >>> sim = m.simulate(40, seed=0)
    >>> sim["data"].shape, sim["means"].shape, sim["precision"].shape
    ((40,), (3,), (3,))
    """

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "data"

    data_site = "data"
    default_method = "rjmcmc"

    def __init__(
        self,
        n_components: int = 1,
        *,
        max_components: int = 30,
        weight_concentration: float = 1.0,
        precision_shape: float = 2.0,
        beta_shape: float = 0.2,
        beta_rate: float | None = None,
        mean_prior: float | None = None,
        mean_precision: float | None = None,
    ) -> None:
        from latentfs.core.data import check_float, check_int

        self.max_components = check_int(
            "max_components", max_components, low=1, remedy="Richardson & Green (1997) use max_components=30."
        )
        self.n_components = check_int(
            "n_components", n_components, low=1, high=self.max_components,
            remedy="Pass a starting k between 1 and max_components.",
        )
        self.weight_concentration = float(check_positive(weight_concentration, "weight_concentration"))
        self.precision_shape = float(check_positive(precision_shape, "precision_shape"))
        self.beta_shape = float(check_positive(beta_shape, "beta_shape"))
        self.beta_rate = None if beta_rate is None else float(check_positive(beta_rate, "beta_rate"))
        self.mean_prior = None if mean_prior is None else check_float("mean_prior", mean_prior)
        self.mean_precision = (
            None if mean_precision is None else float(check_positive(mean_precision, "mean_precision"))
        )

    def __repr__(self) -> str:
        return f"UnivariateMixtureK({self.n_components}, max_components={self.max_components})"

    def with_n_components(self, n_components: int) -> UnivariateMixtureK:
        new = copy.copy(self)
        new.max_components = max(self.max_components, int(check_n_components(n_components, 10**9)))
        new.n_components = int(n_components)
        return new

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "max_components": self.max_components,
            "weight_concentration": self.weight_concentration,
            "precision_shape": self.precision_shape,
            "beta_shape": self.beta_shape,
            "beta_rate": self.beta_rate,
            "mean_prior": self.mean_prior,
            "mean_precision": self.mean_precision,
        }

    def n_parameters(self, n_features: int = 1) -> int:
        """Free parameters at the model's k: (k − 1) weights + k means + k variances."""
        return 3 * self.n_components - 1

    def check_data(self, X: Any, *, name: str = "X") -> np.ndarray:
        """Validate univariate data: a vector or one column, finite, not constant; returns a 1-D float64 array."""
        from latentfs.core.data import ContinuousMatrix

        arr = X.values if isinstance(X, ContinuousMatrix) else (X.to_numpy() if hasattr(X, "to_numpy") else X)
        arr = np.asarray(arr) if not isinstance(arr, torch.Tensor) else arr.detach().cpu().numpy()
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1:
            raise DataError(
                f"{name} must be univariate (a vector or a single column); got shape {arr.shape}. "
                "This model is for one feature: pick a column, or use GaussianMixture for several."
            )
        data = as_continuous(arr[:, None], name=name, missing="error", allow_constant=False, min_samples=2)
        return np.asarray(data.values, dtype=np.float64)[:, 0]

    def prior(self, y: np.ndarray | None) -> dict[str, float]:
        """The resolved hyperparameters ξ, κ, α, g, h, δ (R&G's data-dependent defaults from ``y``'s range R)."""
        if y is None:
            mid, rng = 0.0, 1.0
        else:
            lo, hi = float(np.min(y)), float(np.max(y))
            mid, rng = 0.5 * (lo + hi), hi - lo
            if not rng > 0:
                raise DataError(f"data must not be constant (range 0, value {lo}); a mixture needs spread.")
        return {
            "xi": float(self.mean_prior) if self.mean_prior is not None else mid,
            "kappa": float(self.mean_precision) if self.mean_precision is not None else 1.0 / rng**2,
            "alpha": self.precision_shape,
            "g": self.beta_shape,
            "h": float(self.beta_rate) if self.beta_rate is not None else 10.0 / rng**2,
            "delta": self.weight_concentration,
        }

    def model(
        self, data: torch.Tensor | None = None, *, n_samples: int | None = None, n_components: int | None = None
    ) -> torch.Tensor:
        """The fixed-k model with z enumerable. Pass ``data`` (n,) or ``n_samples`` to simulate."""
        if data is not None:
            n_samples = int(data.shape[0])
        if n_samples is None:
            raise DataError("model needs data, or n_samples to simulate.")
        k = int(n_components) if n_components is not None else self.n_components
        dtype = data.dtype if data is not None else torch.float64
        pr = self.prior(None if data is None else data.detach().cpu().numpy())
        t = {key: torch.tensor(v, dtype=dtype) for key, v in pr.items()}
        beta = pyro.sample("beta", dist.Gamma(t["g"], t["h"]))
        weights = pyro.sample("weights", dist.Dirichlet(t["delta"].expand(k)))
        with pyro.plate("component", k):
            means = pyro.sample("means", dist.Normal(t["xi"], t["kappa"].rsqrt()))
            precision = pyro.sample("precision", dist.Gamma(t["alpha"], beta))
        with pyro.plate("sample", n_samples):
            z = pyro.sample("assignment", dist.Categorical(weights), infer={"enumerate": "parallel"})
            return pyro.sample("data", dist.Normal(means[z], precision[z].rsqrt()), obs=data)

    def simulate(
        self, n_samples: int, *, params: dict[str, Any] | None = None, seed: Any = None
    ) -> dict[str, np.ndarray]:
        """Draw from :meth:`model` at k = ``n_components``: ``beta``, ``weights``, ``means``, ``precision``,
        ``assignment``, ``data`` (n,). ``params`` fixes any of the parameter sites."""
        n_samples, _ = _check_simulate_sizes(n_samples, 1)
        cond = {key: torch.as_tensor(np.asarray(v, dtype=np.float64)) for key, v in (params or {}).items()}
        out = simulate_sites(poutine.condition(self.model, cond), seed, n_samples=int(n_samples))
        out["assignment"] = out["assignment"].reshape(-1).astype(np.int64)
        return out
