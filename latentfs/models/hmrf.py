"""Hidden Markov random fields: a hidden Potts model on a 2-D lattice with Gaussian emissions.

Titterington (2006), §1.2–1.3, Case 3: the latent labels z_s ∈ {0..K−1} of the pixels s of an H × W lattice
form a Markov random field, and y_s depends on z_s only through an emission density g_k(y_s). Here the
field is the first-order (4-neighbour) Potts model (the K-label generalisation of the chapter's hidden Ising
example):

    h(z | η) = G(η)⁻¹ exp{ η Σ_{s∼t} [z_s = z_t] },

the sum running over horizontal and vertical nearest-neighbour pairs (free boundary), and
y_s | z_s = k ~ N(μ_k, diag(1/λ_k)). For K = 2 with labels ±1 this is the hidden Ising model with
interaction η/2 (since [z_s = z_t] = (1 + z_s z_t)/2). The normalising constant G(η) is a sum over K^{HW}
configurations: the likelihood f(y | θ) is "typically not a practical proposition" (Titterington §1.3),
which is why the engines in :mod:`latentfs.inference.hmrf` use ICM with pseudo-likelihood (Besag 1986),
mean-field EM (Zhang 1992; Celeux, Forbes & Peyrard 2003) and Gibbs sampling with a pseudo-likelihood
Metropolis step for η.

==================  =====================  =====================================================
site                shape                  meaning
==================  =====================  =====================================================
``interaction``     ()                     η ≥ 0, ~ Uniform(0, ``interaction_max``)
``precision``       (K, d)                 emission precisions λ_k, ~ Gamma(ν0/2, ν0 σ0²/2)
``means``           (K, d)                 emission means μ_k, ~ N(m0, 1/(κ0 λ_k))
``labels``          (H, W)                 z, a uniform Categorical per pixel times the Potts factor
``potts``           ()                     the factor η Σ_{s∼t} [z_s = z_t] (``pyro.factor``)
``data``            (H, W, d)              y
==================  =====================  =====================================================

The Pyro declaration (:meth:`HiddenPotts.model`) is the source of truth for the **joint log density up to
the Potts normalising constant**: log p(θ) − HW log K + η A(z) + Σ_s log g_{z_s}(y_s) with A(z) the number
of agreeing neighbour pairs; −log G(η) + HW log K is missing. Differences of it between two label
configurations at the same θ (conditional log-odds) are exact, which is what the engines are tested
against; it is meant for small lattices (one sample site per pixel). :meth:`HiddenPotts.simulate` draws the
field by checkerboard Gibbs sweeps from the prior (forward sampling of a Potts field is not possible).
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
from latentfs.core.options import check_float, check_int
from latentfs.core.pyro_context import simulate_sites

__all__ = [
    "HiddenPotts",
    "LatticeData",
    "agreement",
    "checkerboard",
    "neighbour_sum",
    "potts_sweep",
]


# ----------------------------------------------------------------------------- lattice primitives
def neighbour_sum(x: torch.Tensor) -> torch.Tensor:
    """Σ over the 4 nearest neighbours (free boundary) of ``x`` shaped (..., H, W, K): for one-hot labels
    the neighbour counts n_k(s) = #{t ∈ ∂s : z_t = k}; for mean-field probabilities Σ_{t∈∂s} q_t(k)."""
    out = torch.zeros_like(x)
    out[..., 1:, :, :] += x[..., :-1, :, :]
    out[..., :-1, :, :] += x[..., 1:, :, :]
    out[..., :, 1:, :] += x[..., :, :-1, :]
    out[..., :, :-1, :] += x[..., :, 1:, :]
    return out


def agreement(labels: torch.Tensor) -> torch.Tensor:
    """A(z) = Σ_{s∼t} [z_s = z_t], the number of agreeing horizontal and vertical neighbour pairs of
    ``labels`` shaped (..., H, W); returns a (...,) float64 tensor."""
    vertical = (labels[..., 1:, :] == labels[..., :-1, :]).sum((-2, -1))
    horizontal = (labels[..., :, 1:] == labels[..., :, :-1]).sum((-2, -1))
    return (vertical + horizontal).to(torch.float64)


def checkerboard(height: int, width: int) -> torch.Tensor:
    """(H, W) bool mask of the 'black' sites ((i + j) even); black sites have only white neighbours, so
    all sites of one colour are conditionally independent given the other colour."""
    i = torch.arange(height)[:, None]
    j = torch.arange(width)[None, :]
    return (i + j) % 2 == 0


def potts_sweep(
    labels: torch.Tensor, log_g: torch.Tensor | None, eta: float, k: int, gen: torch.Generator
) -> torch.Tensor:
    """One checkerboard Gibbs sweep of the labels (..., H, W): each colour in turn drawn from
    P(z_s = k | z_∂s, y_s) ∝ exp(η n_k(s)) g_k(y_s) (Geman & Geman 1984). ``log_g`` (H, W, K) is
    log g_k(y_s), or None for the prior field."""
    h, w = labels.shape[-2:]
    black = checkerboard(h, w)
    for colour in (black, ~black):
        onehot = torch.nn.functional.one_hot(labels, k).to(torch.float64)
        logits = eta * neighbour_sum(onehot)
        if log_g is not None:
            logits = logits + log_g
        u = torch.rand(logits.shape[:-1], generator=gen, dtype=torch.float64)
        cdf = torch.softmax(logits, -1).cumsum(-1)
        draw = (u[..., None] > cdf).sum(-1).clamp_max(k - 1)
        labels = torch.where(colour, draw, labels)
    return labels


# ----------------------------------------------------------------------------- data
class LatticeData:
    """A validated lattice: ``values`` (H, W, d) float64, ``feature_names``."""

    def __init__(self, values: np.ndarray, feature_names: tuple[str, ...]) -> None:
        self.values = values
        self.feature_names = feature_names

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.values.shape[0]), int(self.values.shape[1])

    @property
    def n_pixels(self) -> int:
        return int(self.values.shape[0] * self.values.shape[1])

    @property
    def n_features(self) -> int:
        return int(self.values.shape[2])

    def flat(self) -> np.ndarray:
        """(H·W, d), rows in C order."""
        return self.values.reshape(self.n_pixels, self.n_features)


def _check_lattice(X: Any, name: str, k: int, for_fit: bool) -> LatticeData:
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    elif hasattr(X, "to_numpy") and not isinstance(X, np.ndarray):
        X = X.to_numpy()
    try:
        arr = np.asarray(X)
    except (ValueError, TypeError):
        raise DataError(f"{name} must be a rectangular numeric array (height, width[, n_features]).") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise DataError(
            f"{name} must be numeric (height, width) or (height, width, n_features); got dtype {arr.dtype}. "
            "Convert it with np.asarray(..., float)."
        )
    if arr.ndim == 2:
        arr = arr[:, :, None]
    elif arr.ndim != 3:
        raise DataError(
            f"{name} must be a 2-D lattice: a (height, width) image or a (height, width, n_features) array; got "
            f"a {arr.ndim}-D array of shape {arr.shape}."
            + (" A 1-D array is a sequence: use GaussianHMM, or reshape it to (height, width)." if arr.ndim == 1 else
               " Fit one lattice at a time.")
        )
    h, w, d = arr.shape
    if h < 2 or w < 2:
        raise DataError(
            f"{name} must be a 2-D lattice with at least 2 rows and 2 columns; got shape {arr.shape}. A single "
            "row or column is a sequence: use GaussianHMM."
        )
    if d > min(h, w):
        raise DataError(
            f"{name} is read as (height, width, n_features), but its last axis ({d} features) is longer than its "
            f"shortest side ({min(h, w)} pixels); shape {arr.shape} looks like a stack of images, not lattice × "
            "features. Fit one image at a time, or move the feature axis last (np.moveaxis(X, 0, -1))."
        )
    flat = as_continuous(arr.reshape(h * w, d).astype(np.float64), name=name, missing="error",
                         allow_constant=not for_fit)
    if for_fit:
        check_n_components(k, h * w, what=f"the number of pixels of {name}, {h}×{w} = {h * w}")
    return LatticeData(flat.values.reshape(h, w, d), tuple(f"feature{j}" for j in range(d)))


# ----------------------------------------------------------------------------- the model
class HiddenPotts:
    """Hidden Potts model on a 2-D lattice with Gaussian emissions; Titterington (2006) §1.3, Case 3.

    z ~ Potts(η) with 4-neighbour interaction, h(z | η) ∝ exp{η Σ_{s∼t} [z_s = z_t]}, and
    y_s | z_s = k ~ N(μ_k, diag(1/λ_k)). The Pyro model (:meth:`model`) gives the joint log density **up to
    the Potts normalising constant** G(η) (see the module docstring); it is practical on small lattices only.
    The engines (``method="icm"``, ``"mean_field"``, ``"gibbs"``) never need G(η).

    Parameters
    ----------
    n_components : int
        K, the number of labels.
    interaction_max : float, default 3.0
        Upper end of the Uniform(0, ·) prior of η and of the pseudo-likelihood search. The Potts critical point
        is η_c = log(1 + √K) (≈ 0.881 for K = 2, 1.005 for K = 3).
    mean_prior, mean_precision, degrees_of_freedom, variance_prior
        Emission prior (Gibbs only): λ_kj ~ Gamma(ν0/2, ν0 σ0²_j/2), μ_kj ~ N(m0_j, 1/(κ0 λ_kj)); m0 and σ0²
        default to the data's column means and variances (0 and 1 when simulating), κ0 = 0.01, ν0 = 3.

    Examples
    --------
    >>> potts = HiddenPotts(2)
    >>> sim = potts.simulate((16, 16), params={"interaction": 0.8, "means": [[-1.0], [1.0]],
    ...                                        "precision": [[4.0], [4.0]]}, seed=0)
    >>> sim["labels"].shape, sim["data"].shape
    ((16, 16), (16, 16, 1))
    """

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "data"

    default_method = "icm"
    data_site = "data"
    data_kind = "lattice"

    def __init__(
        self,
        n_components: int,
        *,
        interaction_max: float = 3.0,
        mean_prior: Any = None,
        mean_precision: float = 0.01,
        degrees_of_freedom: float = 3.0,
        variance_prior: Any = None,
    ) -> None:
        self.n_components = check_n_components(n_components, 10**9)
        self.interaction_max = check_float("interaction_max", interaction_max, 0.0, low_open=True,
                                           remedy="Pass e.g. interaction_max=3.0.")
        self.mean_prior = None if mean_prior is None else np.asarray(mean_prior, dtype=np.float64)
        if self.mean_prior is not None and not np.isfinite(self.mean_prior).all():
            raise DataError(f"mean_prior must be finite; got {mean_prior!r}.")
        self.mean_precision = float(check_positive(mean_precision, "mean_precision"))
        self.degrees_of_freedom = float(check_positive(degrees_of_freedom, "degrees_of_freedom"))
        self.variance_prior = None if variance_prior is None else check_positive(variance_prior, "variance_prior")

    def __repr__(self) -> str:
        return f"HiddenPotts({self.n_components})"

    def with_n_components(self, n_components: int) -> HiddenPotts:
        """A copy of this model with another number of labels."""
        new = copy.copy(self)
        new.n_components = check_n_components(n_components, 10**9)
        return new

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "interaction_max": self.interaction_max,
            "mean_prior": None if self.mean_prior is None else self.mean_prior.tolist(),
            "mean_precision": self.mean_precision,
            "degrees_of_freedom": self.degrees_of_freedom,
            "variance_prior": None if self.variance_prior is None else self.variance_prior.tolist(),
        }

    def n_parameters(self, n_features: int) -> int:
        """1 interaction + K d means + K d variances."""
        return 1 + 2 * self.n_components * int(n_features)

    def check_data(self, X: Any, *, name: str = "X", for_fit: bool = True) -> LatticeData:
        """Validate a lattice: (H, W) or (H, W, d) real values, H, W ≥ 2, no NaN or inf, d ≤ min(H, W)
        (a longer last axis is read as a stack of images and refused), and for fitting K ≤ H·W and no
        constant feature."""
        return _check_lattice(X, name, self.n_components, for_fit)

    def prior(self, X: np.ndarray | None, n_features: int) -> dict[str, np.ndarray]:
        """The resolved emission prior: m0 (d,), σ0² (d,), κ0, ν0; m0 and σ0² from ``X`` (N, d) when unset (σ0²
        the column variance, relative to the data's scale; 1 for a constant column)."""
        d = int(n_features)
        if self.mean_prior is not None:
            m0 = np.broadcast_to(self.mean_prior, (d,)).astype(np.float64)
        else:
            m0 = np.zeros(d) if X is None else X.mean(0)
        if self.variance_prior is not None:
            s0 = np.broadcast_to(self.variance_prior, (d,)).astype(np.float64)
        else:
            # the column variance itself (1 for a constant column): an absolute floor (it was 1e-12) swamped
            # the variance of an image × 1e-30 and put the Gibbs labels at chance
            var = None if X is None else X.var(0)
            s0 = np.ones(d) if var is None else np.where(var > 0, var, 1.0)
        return {"mean": m0, "variance": s0, "mean_precision": np.asarray(self.mean_precision, dtype=np.float64),
                "dof": np.asarray(self.degrees_of_freedom, dtype=np.float64)}

    # ---------------------------------------------------------------- the Pyro model
    def _parameters(self, d: int, prior: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        k = self.n_components
        eta = pyro.sample(
            "interaction",
            dist.Uniform(
                torch.tensor(0.0, dtype=torch.float64), torch.tensor(self.interaction_max, dtype=torch.float64)
            ),
        )
        nu0 = prior["dof"]
        with pyro.plate("component", k, dim=-2), pyro.plate("feature", d, dim=-1):
            precision = pyro.sample("precision", dist.Gamma(nu0 / 2, nu0 * prior["variance"] / 2))
            means = pyro.sample("means", dist.Normal(prior["mean"], (prior["mean_precision"] * precision).rsqrt()))
        return eta, means, precision

    def model(
        self,
        data: torch.Tensor | None = None,
        *,
        shape: tuple[int, int] | None = None,
        n_features: int | None = None,
    ) -> None:
        """The hidden Potts model with one ``labels`` site per pixel and the Potts interaction as a
        ``pyro.factor``; ``data`` (H, W, d), or ``shape`` and ``n_features`` without data. Its log density
        omits −log G(η) + H·W·log K (the Potts normaliser relative to the uniform label prior)."""
        if data is not None:
            if data.ndim != 3:
                raise DataError(f"data must be (height, width, n_features); got shape {tuple(data.shape)}.")
            h, w, d = (int(s) for s in data.shape)
            raw = data.reshape(h * w, d).detach().cpu().numpy()
        else:
            if shape is None or n_features is None:
                raise DataError("model needs data (height, width, n_features), or shape and n_features.")
            (h, w), d, raw = shape, int(n_features), None
        prior = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in self.prior(raw, d).items()}
        eta, means, precision = self._parameters(d, prior)
        k = self.n_components
        with pyro.plate("row", h, dim=-2), pyro.plate("column", w, dim=-1):
            labels = pyro.sample("labels", dist.Categorical(torch.full((k,), 1.0 / k, dtype=torch.float64)))
        pyro.factor("potts", eta * agreement(labels))
        with pyro.plate("row_obs", h, dim=-2), pyro.plate("column_obs", w, dim=-1):
            pyro.sample("data", dist.Normal(means[labels], precision[labels].rsqrt()).to_event(1), obs=data)

    def simulate(
        self,
        shape: tuple[int, int],
        n_features: int = 1,
        *,
        params: dict[str, Any] | None = None,
        n_sweeps: int = 200,
        seed: Any = None,
    ) -> dict[str, np.ndarray]:
        """Draw θ from the prior (or take it from ``params``: ``interaction``, ``means``, ``precision``),
        the field z by ``n_sweeps`` checkerboard Gibbs sweeps of the Potts prior from a uniform random
        start, and y | z. Returns the sites ``interaction``, ``means``, ``precision``, ``labels`` (H, W) int64
        and ``data`` (H, W, d). The caller's random state is left alone (a generator derived from ``seed``)."""
        from latentfs.core.driver import make_generator
        from latentfs.core.options import check_seed

        if not isinstance(shape, (tuple, list)) or len(shape) != 2:
            raise DataError(f"shape must be (height, width); got {shape!r}.")
        h = check_int("shape[0]", shape[0], low=2)
        w = check_int("shape[1]", shape[1], low=2)
        d = check_int("n_features", n_features, low=1)
        sweeps = check_int("n_sweeps", n_sweeps, low=0)
        gen = make_generator(check_seed(seed))
        cond = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in (params or {}).items()}
        unknown = sorted(set(cond) - {"interaction", "means", "precision"})
        if unknown:
            raise DataError(f"params may fix 'interaction', 'means' and 'precision'; got {unknown}.")
        prior = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in self.prior(None, d).items()}
        param_seed = int(torch.randint(0, 2**62, (1,), generator=gen).item())

        def parameters() -> None:
            self._parameters(d, prior)

        out = simulate_sites(poutine.condition(parameters, cond), param_seed)
        k = self.n_components
        labels = torch.randint(0, k, (h, w), generator=gen)
        eta = float(out["interaction"])
        for _ in range(sweeps):
            labels = potts_sweep(labels, None, eta, k, gen)
        means = torch.as_tensor(out["means"]).reshape(k, d)
        sd = torch.as_tensor(out["precision"]).reshape(k, d).rsqrt()
        noise = torch.randn((h, w, d), generator=gen, dtype=torch.float64)
        out["means"] = means.numpy()
        out["precision"] = np.asarray(out["precision"]).reshape(k, d)
        out["labels"] = labels.numpy().astype(np.int64)
        out["data"] = (means[labels] + sd[labels] * noise).numpy()
        return out
