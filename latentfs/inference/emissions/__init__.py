"""Emission families: the component distributions of the finite mixtures and the state distributions of the
hidden Markov models, with their prepared data and the vectorised numerics every engine shares.

:class:`GaussianFamily` (Gaussian mixtures, latent profiles, Gaussian HMMs; :mod:`.gaussian`) and
:class:`CategoricalFamily` (latent class models, categorical HMMs; :mod:`.categorical`) hold the validated data
and compute, in float64, ``log_component`` log g_k(y_n) (n, K), the τ-weighted ``statistics`` and the
maximum-likelihood ``m_step`` (Titterington 2006, §1.4; Dempster, Laird & Rubin 1977). The EM, VB and Gibbs
engines of the mixtures and of the hidden Markov models all use them; the mixture family's
:mod:`latentfs.inference.mixture.families` re-exports them under their earlier names.

Variance floors are scale-aware: ``reg`` is a vector, ``reg_covar`` times each column's variance
(:func:`scaled_reg`), so that fitting ``c · X`` gives exactly the fit of ``X`` scaled by ``c``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from latentfs.core.data import DataError
from latentfs.inference.emissions.categorical import CategoricalFamily
from latentfs.inference.emissions.gaussian import (
    COVARIANCE_M_STEPS,
    FULL_E_STEPS,
    GaussianFamily,
    e_step_variant,
    gram_rows,
)
from latentfs.inference.emissions.statistics import (
    COUNT_STATISTICS,
    add_eps,
    log_joint_components,
    responsibilities,
)
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

__all__ = [
    "COUNT_STATISTICS",
    "COVARIANCE_M_STEPS",
    "FULL_E_STEPS",
    "CategoricalFamily",
    "GaussianFamily",
    "add_eps",
    "e_step_variant",
    "family_for",
    "gram_rows",
    "log_joint_components",
    "responsibilities",
    "scaled_reg",
]

_FAMILIES: dict[type, Any] = {
    GaussianMixture: GaussianFamily,
    LatentProfile: GaussianFamily,
    LatentClass: CategoricalFamily,
}


def family_for(model: Any, X: Any, **options: Any) -> GaussianFamily | CategoricalFamily:
    """Validate X for ``model`` and return the prepared component family."""
    for cls in type(model).__mro__:
        if cls in _FAMILIES:
            return _FAMILIES[cls].prepare(model, X, **options)
    raise DataError(f"model must be a GaussianMixture, LatentProfile or LatentClass; got {type(model).__name__}.")


def scaled_reg(fam: Any, reg_covar: Any) -> torch.Tensor:
    """The variance floor added to each covariance diagonal: ``reg_covar`` times each column's variance.

    Relative to the data's own scale, so that a fit of ``c · X`` is the fit of ``X`` scaled by ``c`` (an
    absolute floor made data × 1e12 "singular" and data × 1e-12 all floor). Latent class models have no
    floor (a zero vector).
    """
    from latentfs.core.data import check_float

    reg = check_float("reg_covar", reg_covar, 0.0, remedy="Pass a small non-negative number such as reg_covar=1e-6.")
    if math.isinf(reg):
        raise DataError("reg_covar must be finite; got inf. Pass a small non-negative number such as reg_covar=1e-6.")
    if isinstance(fam, GaussianFamily):
        return reg * fam.column_variance
    return torch.zeros(fam.d, dtype=torch.float64, device=fam.device)

