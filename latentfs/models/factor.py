"""Factor analysis and mixtures of factor analysers declared as Pyro models.

Titterington (2006), taxonomy of latent-structure models ("continuous y, continuous z"):
``y = μ + W z + e`` with z ~ N(0, I_q) and e ~ N(0, Λ), Λ diagonal; Gruber & Weiss (2006), eq. (2),
write the same model as y(t) = A x(t) + η(t) and treat a missing entry as an entry of zero noise
precision. Ghahramani & Hinton (1996) add a categorical
component: ``y | (c, z) ~ N(μ_c + W_c z, Λ)``.

Sites (shared by the engines in :mod:`latentfs.inference.factor.em` and ``factor_gibbs``). For
:class:`FactorAnalysis` q is ``n_components``; for :class:`MixtureOfFactorAnalyzers` K is ``n_components``
(the analysers) and q is ``n_factors`` (the factors of each analyser):

====================  ================================  ==============================================
site                  shape                             meaning (paper's symbol)
====================  ================================  ==============================================
``loadings``          (n_features, q)                   W (Titterington), A = S^t (Gruber & Weiss)
                      MFA: (K, n_features, q)
``noise_variance``    (n_features,)                     diagonal of Λ (Ψ in Gruber & Weiss)
``mean``              (n_features,)  MFA: (K, n_feat.)  μ
``weights``           (K,)  MFA only                    mixing weights π_k
``assignment``        (n_samples,)  MFA only            component c_n
``factors``           (n_samples, q)                    z_n (x(t) in Gruber & Weiss)
``data``              (n_samples, n_features)           y_n; NaN means missing
====================  ================================  ==============================================

Missing values: the ``data`` site is masked entry by entry (``poutine.mask``), so a missing entry
contributes nothing, which is the zero-precision view of Gruber & Weiss. With ``integrate_factors=True``
the factors are summed out and each row's observed entries follow N(μ_o, W_o W_o^t + Λ_o).

Priors are optional: a hyperparameter left at ``None`` gives a flat (improper) prior, so the log joint
with the factors integrated is exactly the log-likelihood that EM maximises; set ``loading_scale`` and
``noise_shape``/``noise_scale`` for MAP and Gibbs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from torch.distributions import constraints

from latentfs.core.data import DataError, check_n_components, check_positive
from latentfs.core.pyro_context import simulate_sites

__all__ = ["FactorAnalysis", "LoadingConstraints", "MixtureOfFactorAnalyzers"]


class LoadingConstraints:
    """Linear equality constraints on each row of the loadings: ``C_j w_j = c_j`` for every feature j.

    This is the general form of Gruber & Weiss (2006, multi-body factorization, eqs. 12-14), where columns of the
    structure matrix are zero outside one block and one entry equals 1; confirmatory factor analysis
    (loadings fixed at zero) is the commonest case, built with :meth:`fixed`.

    Parameters
    ----------
    matrix : array (n_features, n_constraints, n_components)
        C_j stacked; an all-zero row of C_j is an inactive constraint (padding).
    target : array (n_features, n_constraints)
        c_j stacked.

    Examples
    --------
    >>> pattern = np.array([[np.nan, 0.0], [0.0, np.nan], [np.nan, np.nan]])
    >>> LoadingConstraints.fixed(pattern).n_active().tolist()
    [1, 1, 0]
    """

    def __init__(self, matrix: Any, target: Any) -> None:
        C = np.asarray(matrix, dtype=np.float64)
        c = np.asarray(target, dtype=np.float64)
        if C.ndim != 3 or c.shape != C.shape[:2] or not np.isfinite(C).all() or not np.isfinite(c).all():
            raise DataError(
                "constraints must be a finite matrix of shape (n_features, n_constraints, n_components) and a "
                f"finite target of shape (n_features, n_constraints); got {C.shape} and {c.shape}. "
                "Build them with LoadingConstraints.fixed(pattern) for fixed entries."
            )
        active = np.abs(C).sum(-1) > 0
        if (~active & (c != 0)).any():
            j, r = np.argwhere(~active & (c != 0))[0]
            raise DataError(
                f"constraints row {r} of feature {j} has an all-zero matrix row but target {c[j, r]:g}; "
                "an all-zero row must have target 0 (it marks an unused constraint)."
            )
        for j in range(C.shape[0]):
            rows = C[j][active[j]]
            if rows.size and np.linalg.matrix_rank(rows) < rows.shape[0]:
                raise DataError(
                    f"constraints of feature {j} are linearly dependent (rank {np.linalg.matrix_rank(rows)} "
                    f"for {rows.shape[0]} constraints); remove the redundant rows."
                )
            if rows.shape[0] >= C.shape[2]:
                raise DataError(
                    f"constraints of feature {j} fix all {C.shape[2]} loadings of the row; leave at least one "
                    "loading free per feature (or drop the feature)."
                )
        self.matrix, self.target, self.active = C, c, active

    @classmethod
    def fixed(cls, pattern: Any) -> LoadingConstraints:
        """Constraints fixing loadings to values: ``pattern`` (n_features, n_components), NaN = free."""
        P = np.asarray(pattern, dtype=np.float64)
        if P.ndim != 2:
            raise DataError(f"pattern must be 2-D (n_features, n_components); got shape {P.shape}.")
        d, q = P.shape
        fixed = ~np.isnan(P)
        r = max(int(fixed.sum(1).max()), 1)
        C = np.zeros((d, r, q))
        c = np.zeros((d, r))
        for j in range(d):
            for i, f in enumerate(np.flatnonzero(fixed[j])):
                C[j, i, f] = 1.0
                c[j, i] = P[j, f]
        return cls(C, c)

    @property
    def n_features(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def n_components(self) -> int:
        """The number of factors the constraints are written for (the loadings' columns)."""
        return int(self.matrix.shape[2])

    def n_active(self) -> np.ndarray:
        """Number of active constraints per feature."""
        return self.active.sum(1)

    def violation(self, loadings: np.ndarray) -> float:
        """max_j ‖C_j w_j − c_j‖_∞ (0 when the loadings satisfy the constraints)."""
        res = np.einsum("jrk,jk->jr", self.matrix, np.asarray(loadings)) - self.target
        return float(np.abs(res).max()) if res.size else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"matrix": self.matrix.tolist(), "target": self.target.tolist()}


def _flat(shape: tuple[int, ...], support: Any) -> dist.TorchDistribution:
    """An improper flat prior (log density 0): maximum likelihood is MAP under it."""
    return dist.ImproperUniform(support, torch.Size(()), torch.Size(shape))


def _as_tensor(x: Any, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float64), dtype=like.dtype, device=like.device)


def _prepare_data(data: torch.Tensor | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Data with NaN replaced by 0, and the observed-entry mask (None when nothing is missing)."""
    if data is None:
        return None, None
    observed = ~torch.isnan(data)
    if bool(observed.all()):
        return data, None
    return torch.where(observed, data, torch.zeros_like(data)), observed


class FactorAnalysis:
    """Factor analysis, ``y = μ + W z + e``; Titterington (2006); Gruber & Weiss (2006) eq. (2).

    Parameters
    ----------
    n_components : int
        q, the number of factors (the latent dimension).
    loading_scale : float, optional
        Each loading ~ N(0, loading_scale²) a priori; None (default) gives a flat prior.
    noise_shape, noise_scale : float, optional
        Each noise variance ~ InverseGamma(noise_shape, noise_scale) (scale = rate of the precision's
        gamma); None (default) gives a flat prior.
    mean_scale : float, optional
        Each mean ~ N(0, mean_scale²); None (default) gives a flat prior.
    constraints : LoadingConstraints, optional
        Linear equality constraints on the loadings (Gruber & Weiss 2006, eqs. 12-14).

    Examples
    --------
    >>> fa = FactorAnalysis(2)
    >>> W = np.array([[1.0, 0.0], [0.8, 0.2], [0.0, 1.0], [0.3, 0.9]])
    >>> sim = fa.simulate(50, loadings=W, noise_variance=0.1, mean=0.0, seed=0)
    >>> sim["data"].shape, sim["factors"].shape
    ((50, 4), (50, 2))
    """

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "data"

    default_method = "em"

    def __init__(
        self,
        n_components: int,
        *,
        loading_scale: float | None = None,
        noise_shape: float | None = None,
        noise_scale: float | None = None,
        mean_scale: float | None = None,
        constraints: LoadingConstraints | None = None,
    ) -> None:
        self.n_components = check_n_components(n_components, 10**6)
        self.loading_scale = _optional_positive(loading_scale, "loading_scale")
        self.noise_shape = _optional_positive(noise_shape, "noise_shape")
        self.noise_scale = _optional_positive(noise_scale, "noise_scale")
        if (self.noise_shape is None) != (self.noise_scale is None):
            raise DataError(
                "noise_shape and noise_scale must be given together (an inverse-gamma prior) or both left "
                f"None (flat prior); got noise_shape={noise_shape!r}, noise_scale={noise_scale!r}."
            )
        self.mean_scale = _optional_positive(mean_scale, "mean_scale")
        if constraints is not None:
            if not isinstance(constraints, LoadingConstraints):
                raise DataError(
                    f"constraints must be a LoadingConstraints; got {type(constraints).__name__}. Build one "
                    "with LoadingConstraints.fixed(pattern) or LoadingConstraints(matrix, target)."
                )
            if constraints.n_components != self.n_components:
                raise DataError(
                    f"constraints must have n_components={self.n_components} columns (one per factor); got "
                    f"{constraints.n_components}."
                )
        self.constraints = constraints

    def __repr__(self) -> str:
        return (f"FactorAnalysis(n_components={self.n_components}, loading_scale={self.loading_scale}, "
                f"noise_shape={self.noise_shape})")

    @property
    def has_proper_priors(self) -> bool:
        """Whether the loadings and the noise variances have proper priors (needed by Gibbs)."""
        return self.loading_scale is not None and self.noise_shape is not None

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "loading_scale": self.loading_scale,
            "noise_shape": self.noise_shape,
            "noise_scale": self.noise_scale,
            "mean_scale": self.mean_scale,
            "constraints": None if self.constraints is None else self.constraints.to_dict(),
        }

    def with_n_components(self, n_components: int) -> FactorAnalysis:
        """A copy of this model with another number of factors q (for model selection); the priors are kept.

        Loading constraints are written for one number of factors, so a model with constraints is copied only
        to the same q.
        """
        q = check_n_components(n_components, 10**6)
        if self.constraints is not None and q != self.n_components:
            raise DataError(
                f"n_components={q}: this model's loading constraints are written for n_components="
                f"{self.n_components} factors. Build a FactorAnalysis with constraints for {q} factors, or choose q "
                "on a model without constraints."
            )
        return type(self)(q, loading_scale=self.loading_scale, noise_shape=self.noise_shape,
                          noise_scale=self.noise_scale, mean_scale=self.mean_scale, constraints=self.constraints)

    # ------------------------------------------------------------------ Pyro declaration
    def _parameters(self, d: int, ref: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        q = self.n_components
        feature = pyro.plate("feature", d, dim=-1)
        with feature:
            if self.loading_scale is None:
                loadings = pyro.sample("loadings", _flat((q,), constraints.real_vector))
            else:
                scale = _as_tensor(self.loading_scale, ref)
                loadings = pyro.sample("loadings", dist.Normal(torch.zeros(q, dtype=ref.dtype), scale).to_event(1))
            if self.noise_shape is None:
                noise = pyro.sample("noise_variance", _flat((), constraints.positive))
            else:
                noise = pyro.sample(
                    "noise_variance",
                    dist.InverseGamma(_as_tensor(self.noise_shape, ref), _as_tensor(self.noise_scale, ref)),
                )
            if self.mean_scale is None:
                mean = pyro.sample("mean", _flat((), constraints.real))
            else:
                zero = torch.zeros((), dtype=ref.dtype)
                mean = pyro.sample("mean", dist.Normal(zero, _as_tensor(self.mean_scale, ref)))
        return feature, loadings, noise, mean

    def model(
        self,
        data: torch.Tensor | None = None,
        *,
        n_samples: int | None = None,
        n_features: int | None = None,
        integrate_factors: bool = False,
        dtype: torch.dtype = torch.float64,
    ) -> torch.Tensor:
        """The model; ``data`` (n, d) may hold NaN (missing, masked out of the likelihood).

        With ``integrate_factors=True`` the factors are summed out: each row's observed entries follow
        N(μ_o, W_o W_o^t + Λ_o) (a ``LowRankMultivariateNormal`` per missingness pattern).
        Without data pass ``n_samples`` and ``n_features`` (to simulate; ``dtype`` is then used).
        """
        filled, observed = _prepare_data(data)
        if data is not None:
            n_samples, n_features = data.shape
        if n_samples is None or n_features is None:
            raise DataError("model needs data, or n_samples and n_features to simulate.")
        ref = data if data is not None else torch.zeros((), dtype=dtype)
        feature, loadings, noise, mean = self._parameters(int(n_features), ref)
        sample = pyro.plate("sample", int(n_samples), dim=-1 if integrate_factors else -2)
        if integrate_factors:
            return _integrated_data(sample, filled, observed, mean, loadings, noise)
        with sample:
            factors = pyro.sample(
                "factors", dist.Normal(torch.zeros(self.n_components, dtype=ref.dtype), 1.0).to_event(1)
            )  # (n, 1, q) inside the two-dim plate layout
        loc = mean + (factors @ loadings.transpose(-1, -2)).squeeze(-2)
        with sample, feature:
            with poutine.mask(mask=observed if observed is not None else True):  # type: ignore[arg-type]
                return pyro.sample("data", dist.Normal(loc, noise.sqrt()), obs=filled)

    def simulate(
        self,
        n_samples: int,
        n_features: int | None = None,
        *,
        loadings: Any = None,
        noise_variance: Any = None,
        mean: Any = None,
        missing_fraction: float = 0.0,
        seed: int | None = None,
    ) -> dict[str, np.ndarray]:
        """Draw from :meth:`model`: ``data`` (NaN where missing), ``factors`` and the parameters.

        Parameters given here are held fixed (conditioned on); the others are drawn from their priors,
        which must then be proper. ``missing_fraction`` blanks that fraction of entries completely at
        random, keeping at least one observed entry per row and per column.
        """
        from latentfs.core.data import check_int
        from latentfs.core.pyro_context import simulation_seed

        n_samples = check_int("n_samples", n_samples, low=1)
        if n_features is not None:
            n_features = check_int("n_features", n_features, low=1)
        seed = simulation_seed(seed)
        fixed: dict[str, torch.Tensor] = {}
        if loadings is not None:
            W = np.asarray(loadings, dtype=np.float64)
            if W.ndim != 2 or W.shape[1] != self.n_components:
                raise DataError(f"loadings must have shape (n_features, {self.n_components}); got {W.shape}.")
            n_features = W.shape[0] if n_features is None else n_features
            fixed["loadings"] = torch.as_tensor(W)
        if n_features is None:
            raise DataError("simulate needs n_features, or loadings of shape (n_features, n_components).")
        d = int(n_features)
        for name, value, prior in (
            ("loadings", loadings, self.loading_scale),
            ("noise_variance", noise_variance, self.noise_shape),
            ("mean", mean, self.mean_scale),
        ):
            if value is None and prior is None:
                raise DataError(
                    f"simulate needs {name}: its prior is flat (improper) in this model. Pass {name}=... or "
                    "set the prior's hyperparameters."
                )
            if value is not None and name != "loadings":
                fixed[name] = torch.as_tensor(np.broadcast_to(np.asarray(value, dtype=np.float64), (d,)).copy())
        if "noise_variance" in fixed:
            check_positive(fixed["noise_variance"].numpy(), "noise_variance")
        if not 0.0 <= missing_fraction < 1.0:
            raise DataError(f"missing_fraction must lie in [0, 1); got {missing_fraction}.")
        out = simulate_sites(poutine.condition(self.model, fixed), seed, n_samples=int(n_samples), n_features=d)
        out["factors"] = out["factors"].reshape(int(n_samples), self.n_components)
        if missing_fraction > 0:
            out["data"] = _blank(out["data"], missing_fraction, seed)
        return out


def _integrated_data(
    sample: Any,
    filled: torch.Tensor | None,
    observed: torch.Tensor | None,
    mean: torch.Tensor,
    loadings: torch.Tensor,
    noise: torch.Tensor,
) -> torch.Tensor:
    """``data`` with factors summed out; one LowRankMultivariateNormal per missingness pattern.

    A missing entry is given a unit variance, zero loading and a zero value, and its density
    (−½ log 2π) is removed by an additive factor, so each row scores N(y_o; μ_o, W_o W_o^t + Λ_o).
    """
    if observed is None:
        with sample:
            return pyro.sample("data", dist.LowRankMultivariateNormal(mean, loadings, noise), obs=filled)
    obs = observed.to(mean.dtype)
    loc = mean * obs
    cov_factor = loadings * obs[..., None]
    cov_diag = noise * obs + (1.0 - obs)
    with sample:
        value = pyro.sample("data", dist.LowRankMultivariateNormal(loc, cov_factor, cov_diag), obs=filled)
    # The padded entries contributed N(0; 0, 1) each; remove them.
    pyro.factor("missing_entries", 0.5 * np.log(2 * np.pi) * (1.0 - obs).sum())
    return value


def _blank(data: np.ndarray, fraction: float, seed: int | None) -> np.ndarray:
    """Blank ``fraction`` of the entries at random, keeping one observed entry per row and per column."""
    rng = np.random.default_rng(None if seed is None else [int(seed), 7])
    n, d = data.shape
    drop = rng.uniform(size=(n, d)) < fraction
    drop[np.arange(n), rng.integers(0, d, size=n)] = False
    drop[rng.integers(0, n, size=d), np.arange(d)] = False
    out = data.copy()
    out[drop] = np.nan
    return out


def _optional_positive(value: Any, name: str) -> float | None:
    if value is None:
        return None
    return float(check_positive(value, name))


class MixtureOfFactorAnalyzers:
    """Mixture of factor analysers with a shared diagonal noise; Ghahramani & Hinton (1996).

    ``c_n ~ Categorical(π)``, ``z_n ~ N(0, I_q)``, ``y_n | c_n, z_n ~ N(μ_c + W_c z_n, Λ)``
    (Titterington 2006, the "continuous + categorical z" row of the taxonomy).

    Parameters
    ----------
    n_components : int
        K, the number of analysers.
    n_factors : int
        q, factors per analyser.

    Priors are flat (the model is fitted by maximum likelihood); :meth:`simulate` needs the parameters.

    Examples
    --------
    >>> mfa = MixtureOfFactorAnalyzers(2, 1)
    >>> W = np.array([[[1.0], [1.0], [0.0]], [[0.0], [1.0], [1.0]]])
    >>> sim = mfa.simulate(40, loadings=W, mean=[[0, 0, 0], [5, 5, 5]], noise_variance=0.1, seed=0)
    >>> sim["data"].shape, sorted(set(sim["assignment"].tolist()))
    ((40, 3), [0, 1])
    """

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "data"

    default_method = "em"

    def __init__(self, n_components: int, n_factors: int) -> None:
        self.n_components = check_n_components(n_components, 10**6)
        self.n_factors = check_n_components(n_factors, 10**6, name="n_factors")

    def __repr__(self) -> str:
        return f"MixtureOfFactorAnalyzers({self.n_components}, {self.n_factors})"

    def hyperparameters(self) -> dict[str, Any]:
        return {"n_components": self.n_components, "n_factors": self.n_factors}

    def with_n_components(self, n_components: int) -> MixtureOfFactorAnalyzers:
        """A copy of this model with another number of analysers K (for model selection); n_factors is kept."""
        return type(self)(n_components, self.n_factors)

    def model(
        self,
        data: torch.Tensor | None = None,
        *,
        n_samples: int | None = None,
        n_features: int | None = None,
        integrate_latents: bool = False,
        dtype: torch.dtype = torch.float64,
    ) -> torch.Tensor:
        """The model; with ``integrate_latents=True`` both the component and the factors are summed out."""
        if data is not None:
            if bool(torch.isnan(data).any()):
                raise DataError(
                    "data must not contain NaN for MixtureOfFactorAnalyzers; impute or drop the missing "
                    "values, or use FactorAnalysis (which handles missing data)."
                )
            n_samples, n_features = data.shape
        if n_samples is None or n_features is None:
            raise DataError("model needs data, or n_samples and n_features to simulate.")
        K, q, d = self.n_components, self.n_factors, int(n_features)
        ref = data if data is not None else torch.zeros((), dtype=dtype)
        weights = pyro.sample("weights", _flat((K,), constraints.simplex))
        with pyro.plate("component", K, dim=-1):
            means = pyro.sample("mean", _flat((d,), constraints.real_vector))
            loadings = pyro.sample("loadings", _flat((d, q), constraints.independent(constraints.real, 2)))
        with pyro.plate("feature", d, dim=-1):
            noise = pyro.sample("noise_variance", _flat((), constraints.positive))
        if integrate_latents:
            with pyro.plate("sample", int(n_samples), dim=-1):
                mix = dist.MixtureSameFamily(
                    dist.Categorical(weights),
                    dist.LowRankMultivariateNormal(means, loadings, noise.expand(K, d)),
                )
                return pyro.sample("data", mix, obs=data)
        with pyro.plate("sample", int(n_samples), dim=-1):
            c = pyro.sample("assignment", dist.Categorical(weights))
            z = pyro.sample("factors", dist.Normal(torch.zeros(q, dtype=ref.dtype), 1.0).to_event(1))
            loc = means[c] + (loadings[c] @ z[..., None]).squeeze(-1)
            return pyro.sample("data", dist.Normal(loc, noise.sqrt()).to_event(1), obs=data)

    def simulate(
        self,
        n_samples: int,
        *,
        loadings: Any,
        mean: Any,
        noise_variance: Any,
        weights: Any = None,
        seed: int | None = None,
    ) -> dict[str, np.ndarray]:
        """Draw ``data``, ``assignment`` and ``factors`` from :meth:`model` at the given parameters."""
        from latentfs.core.data import check_int
        from latentfs.core.pyro_context import simulation_seed

        n_samples = check_int("n_samples", n_samples, low=1)
        seed = simulation_seed(seed)
        K, q = self.n_components, self.n_factors
        W = np.asarray(loadings, dtype=np.float64)
        if W.ndim != 3 or W.shape[0] != K or W.shape[2] != q:
            raise DataError(f"loadings must have shape ({K}, n_features, {q}); got {W.shape}.")
        d = W.shape[1]
        mu = np.broadcast_to(np.asarray(mean, dtype=np.float64), (K, d)).copy()
        psi = check_positive(np.broadcast_to(np.asarray(noise_variance, dtype=np.float64), (d,)), "noise_variance")
        pi = np.full(K, 1.0 / K) if weights is None else check_positive(weights, "weights", shape=(K,))
        pi = pi / pi.sum()
        fixed = {
            "weights": torch.as_tensor(pi),
            "mean": torch.as_tensor(mu),
            "loadings": torch.as_tensor(W),
            "noise_variance": torch.as_tensor(psi.copy()),
        }
        return simulate_sites(poutine.condition(self.model, fixed), seed, n_samples=int(n_samples), n_features=d)
