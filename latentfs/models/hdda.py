"""High-dimensional discriminant analysis (HDDA) and clustering (HDDC).

Bouveyron, Girard & Schmid (2006), "Class-specific subspace discriminant analysis for high-dimensional
data", LNCS 3940, and the HDDA/HDDC papers of 2007: every class is Gaussian, N(μ_i, Σ_i), with

    Σ_i = Q_i diag(a_i1, …, a_id_i, b_i, …, b_i) Q_iᵗ = b_i I_p + Q̃_i diag(a_i − b_i) Q̃_iᵗ,

an intrinsic dimension d_i, signal variances a_ij > b_i, a noise variance b_i and an orientation Q̃_i
(p × d_i, orthonormal). This module holds

* :class:`HDDAModel`, the Pyro declaration of that class-conditional / mixture model (the source of truth,
  DESIGN.md contract 1), with ``simulate(..., seed=)`` planting class subspaces, and registered for
  ``latentfs.fit(model, X, method="em")`` (HDDC by EM, :mod:`latentfs.inference.hdda.em`).

The estimators :class:`~latentfs.inference.hdda.estimators.HDDA` (classifier) and
:class:`~latentfs.inference.hdda.estimators.HDDC` (clusterer) and their numerics
(:mod:`latentfs.inference.hdda.numerics`) live with the family's engines.

Pyro sites of :meth:`HDDAModel.model`:

=======================  ========================  ===============================================
site                     shape                     meaning (symbol)
=======================  ========================  ===============================================
``weights``              (k,)                      class proportions π
``means``                (k, p)                    μ_i
``noise_variance``       (k,)                      b_i
``signal_excess``        (k, d_max)                a_ij − b_i > 0 (entries j ≥ d_i are unused)
``orientation_raw``      (k, p, d_max)             Gaussian matrix Z_i; Q̃_i = polar factor of its first
                                                   d_i columns, Z (ZᵗZ)^{-1/2} (Haar-distributed)
``orientation``          (k, p, d_max)             deterministic Q̃_i, zero-padded beyond d_i
``signal_variance``      (k, d_max)                deterministic a_ij = b_i + excess (0 beyond d_i)
``labels``               (n,)                      class of each row (sampled or observed)
``X``                    (n, p)                    the data
=======================  ========================  ===============================================

Missing values are not modelled: NaN in ``X`` raises :class:`~latentfs.core.data.DataError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from latentfs.core.data import DataError, check_n_components, check_positive

__all__ = ["HDDAModel", "polar_orthonormal"]


# ---------------------------------------------------------------------------------------------------
# The Pyro model
# ---------------------------------------------------------------------------------------------------
def polar_orthonormal(raw: torch.Tensor) -> torch.Tensor:
    """Q = Z (ZᵗZ)^{-1/2}, the orthonormal polar factor of a p × d matrix (batched over leading dims).

    For Z with i.i.d. N(0, 1) entries Q is uniform (Haar) on the Stiefel manifold; for an orthonormal Z,
    Q = Z, which is how a fitted Q̃_i is conditioned on.
    """
    gram = raw.transpose(-1, -2) @ raw
    vals, vecs = torch.linalg.eigh(gram)
    inv_sqrt = (vecs * vals.clamp_min(1e-300).rsqrt().unsqueeze(-2)) @ vecs.transpose(-1, -2)
    return raw @ inv_sqrt


class HDDAModel:
    """Gaussian classes living in class-specific subspaces, declared in Pyro (the general model [a_ij b_i Q_i d_i]).

    Generative process (Bouveyron et al. 2006, §2; priors are ours, weakly informative):
    π ~ Dirichlet(c·1_k); μ_i ~ N(0, s_μ² I_p); b_i ~ LogNormal(log s_b, 1); a_ij − b_i ~ LogNormal(log s_a, 1);
    Q̃_i = polar(Z_i), Z_i ~ N(0, 1)^{p×d_i}; z_n ~ Categorical(π);
    x_n ~ N(μ_z, b_z I + Q̃_z diag(a_z − b_z) Q̃_zᵗ) — a ``LowRankMultivariateNormal``.

    Parameters
    ----------
    n_components : int
        k, the number of classes.
    n_dims : int or sequence of int, optional
        d_i, the intrinsic dimension of each class (one int: the same for all). Required by
        :meth:`model` and :meth:`simulate`; when None the EM engine chooses them (``n_dims="cattell"``).
    submodel : str or int, default "AkjBkQkDk"
        The member of the family fitted by the EM engine (see ``latentfs.inference.hdda.numerics.SUBMODELS``).
        The Pyro declaration is the general model; sub-models are equality constraints on its values.
    weight_concentration, mean_scale, noise_scale, signal_scale : float
        c, s_μ, s_b, s_a of the priors above.

    Examples
    --------
    >>> model = HDDAModel(2, n_dims=[1, 2])
    >>> sim = model.simulate(50, 6, seed=0)
    >>> q = sim["orientation"][1]
    >>> sim["X"].shape, sim["orientation"].shape, bool(np.allclose(q.T @ q, np.eye(2)))
    ((50, 6), (2, 6, 2), True)
    """

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "X"

    default_method = "em"

    def __init__(
        self,
        n_components: int,
        n_dims: int | Sequence[int] | None = None,
        *,
        submodel: str | int = "AkjBkQkDk",
        weight_concentration: float = 1.0,
        mean_scale: float = 10.0,
        noise_scale: float = 1.0,
        signal_scale: float = 25.0,
    ) -> None:
        self.n_components = check_n_components(n_components, 10**6)
        if n_dims is None:
            self.n_dims = None
        else:
            arr = np.broadcast_to(np.asarray(n_dims), (self.n_components,))
            if arr.dtype.kind not in "iu" or (arr < 1).any():
                raise DataError(
                    f"n_dims must be positive integers (one, or one per component); got {n_dims!r}."
                )
            self.n_dims = tuple(int(d) for d in arr)
        from latentfs.inference.hdda.numerics import resolve_submodel

        self.submodel = resolve_submodel(submodel, name="submodel").name
        self.weight_concentration = float(check_positive(weight_concentration, "weight_concentration"))
        self.mean_scale = float(check_positive(mean_scale, "mean_scale"))
        self.noise_scale = float(check_positive(noise_scale, "noise_scale"))
        self.signal_scale = float(check_positive(signal_scale, "signal_scale"))

    def __repr__(self) -> str:
        return f"HDDAModel({self.n_components}, n_dims={self.n_dims}, submodel={self.submodel!r})"

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "n_dims": None if self.n_dims is None else list(self.n_dims),
            "submodel": self.submodel,
            "weight_concentration": self.weight_concentration,
            "mean_scale": self.mean_scale,
            "noise_scale": self.noise_scale,
            "signal_scale": self.signal_scale,
        }

    def with_n_components(self, n_components: int) -> HDDAModel:
        """A copy of this model with another number of classes k (for model selection).

        ``n_dims`` is carried over when it is unset or the same for every class; dimensions that differ between
        classes cannot be carried to another k.
        """
        k = check_n_components(n_components, 10**6)
        dims: int | None = None
        if self.n_dims is not None:
            if len(set(self.n_dims)) > 1 and k != self.n_components:
                raise DataError(
                    f"n_dims differs between the {self.n_components} components ({list(self.n_dims)}), so it cannot "
                    f"be carried to n_components={k}. Build HDDAModel({k}, n_dims=...) yourself, or leave n_dims=None "
                    "for the EM engine to choose."
                )
            dims = self.n_dims[0]
        return type(self)(
            k, self.n_dims if k == self.n_components else dims, submodel=self.submodel,
            weight_concentration=self.weight_concentration, mean_scale=self.mean_scale,
            noise_scale=self.noise_scale, signal_scale=self.signal_scale,
        )

    def _dims(self, n_features: int) -> tuple[int, ...]:
        if self.n_dims is None:
            raise DataError("n_dims must be set to declare the Pyro model (HDDAModel(k, n_dims=...)); got None.")
        if max(self.n_dims) >= n_features:
            raise DataError(
                f"n_dims must be below the number of features ({n_features}); got {list(self.n_dims)}."
            )
        return self.n_dims

    def model(
        self,
        X: torch.Tensor | None = None,
        *,
        labels: torch.Tensor | None = None,
        n_samples: int | None = None,
        n_features: int | None = None,
    ) -> torch.Tensor:
        """The model. With ``labels`` (or when simulating) z is an explicit site; with ``X`` and no labels the
        classes are summed out (a ``MixtureSameFamily`` site ``X``), which is what HDDC maximises."""
        if X is not None:
            n_samples, n_features = X.shape
            dtype = X.dtype
        else:
            if n_samples is None or n_features is None:
                raise DataError("model needs X, or n_samples and n_features to simulate.")
            dtype = torch.float64
        k, p = self.n_components, int(n_features)
        dims = self._dims(p)
        d_max = max(dims)
        t = lambda v: torch.as_tensor(v, dtype=dtype)  # noqa: E731
        weights = pyro.sample("weights", dist.Dirichlet(t(np.full(k, self.weight_concentration))))
        with pyro.plate("component", k, dim=-1):
            means = pyro.sample("means", dist.Normal(t(0.0), t(self.mean_scale)).expand([p]).to_event(1))
            noise = pyro.sample("noise_variance", dist.LogNormal(t(np.log(self.noise_scale)), t(1.0)))
            excess = pyro.sample(
                "signal_excess", dist.LogNormal(t(np.log(self.signal_scale)), t(1.0)).expand([d_max]).to_event(1)
            )
            raw = pyro.sample("orientation_raw", dist.Normal(t(0.0), t(1.0)).expand([p, d_max]).to_event(2))
        mask = torch.as_tensor(np.arange(d_max)[None, :] < np.asarray(dims)[:, None], dtype=dtype)  # (k, d_max)
        orientation = torch.stack(
            [torch.nn.functional.pad(polar_orthonormal(raw[i, :, : dims[i]]), (0, d_max - dims[i])) for i in range(k)]
        )
        orientation = pyro.deterministic("orientation", orientation)
        pyro.deterministic("signal_variance", (noise[:, None] + excess) * mask)
        cov_factor = orientation * (excess * mask).sqrt().unsqueeze(-2)  # (k, p, d_max), zero padded columns
        cov_diag = noise[:, None].expand(k, p)
        with pyro.plate("sample", n_samples, dim=-1):
            if labels is not None or X is None:
                z = pyro.sample("labels", dist.Categorical(weights), obs=labels)
                return pyro.sample(
                    "X", dist.LowRankMultivariateNormal(means[z], cov_factor[z], cov_diag[z]), obs=X
                )
            mixture = dist.MixtureSameFamily(
                dist.Categorical(weights), dist.LowRankMultivariateNormal(means, cov_factor, cov_diag)
            )
            return pyro.sample("X", mixture, obs=X)

    def simulate(
        self,
        n_samples: int,
        n_features: int,
        *,
        seed: int | None = None,
        values: dict[str, Any] | None = None,
    ) -> dict[str, np.ndarray]:
        """Draw data with planted class subspaces from :meth:`model` (a scoped RNG; global state untouched).

        ``values`` fixes any sites (for example ``{"noise_variance": [1, 1], "signal_excess": ...}``) by
        conditioning the model, so tests can plant well-separated subspaces. Returns every sample and
        deterministic site as numpy arrays (``X``, ``labels``, ``orientation``, ``signal_variance``, …).
        """
        from latentfs.core.data import check_int
        from latentfs.core.pyro_context import simulate_sites, simulation_seed

        n_samples = check_int("n_samples", n_samples, low=1)
        n_features = check_int("n_features", n_features, low=1)
        seed = simulation_seed(seed)
        fixed = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in (values or {}).items()}
        fn = poutine.condition(self.model, data=fixed) if fixed else self.model
        return simulate_sites(fn, seed, n_samples=int(n_samples), n_features=int(n_features))
