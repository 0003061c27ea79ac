"""The univariate Gaussian mixture with an unknown number of components (:mod:`latentfs.models.mixture`): the
model that reversible jump samples (Richardson & Green 1997).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from latentfs.core.data import DataError, as_continuous, check_n_components, check_positive
from latentfs.core.pyro_context import simulate_sites
from latentfs.models.mixture.base import _check_simulate_sizes, _MixtureBase


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
