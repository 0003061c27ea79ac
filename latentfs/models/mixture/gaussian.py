"""Gaussian mixtures and latent profile models (:mod:`latentfs.models.mixture`): Titterington (2006) §1.3."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from latentfs.core.data import DataError, as_continuous, check_n_components, check_positive
from latentfs.core.pyro_context import simulate_sites
from latentfs.models.mixture.base import COVARIANCE_TYPES, PRIOR_RIDGE, _check_simulate_sizes, _MixtureBase


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
