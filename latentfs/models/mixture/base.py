"""What the finite mixtures of :mod:`latentfs.models.mixture` share: the covariance types, the default prior's
ridge, the checks of ``simulate``'s sizes and the base class (K, the Dirichlet prior on the weights, copies with
another K).
"""

from __future__ import annotations

import copy
from typing import Any

import pyro
import pyro.distributions as dist
import torch

from latentfs.core.data import check_n_components

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
