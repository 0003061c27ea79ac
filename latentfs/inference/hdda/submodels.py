"""The HDDA family of sub-models (Bouveyron, Girard & Schmid 2007; the digest's table of 28 models and the
chapter's HDDAh) and their numbers of free parameters, for :mod:`latentfs.inference.hdda.numerics`, which
re-exports everything here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from latentfs.core.data import DataError

LOG_2PI = math.log(2.0 * math.pi)
NOISE_FLOOR = 1e-12  # relative floor on a variance (of tr W / p): keeps log b finite on degenerate data


# ---------------------------------------------------------------------------------------------------
# The family of models
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SubmodelSpec:
    """One member of the HDDA family.

    Attributes
    ----------
    name : str
        HDclassif-style name (``"AkjBkQkDk"`` = [a_ij b_i Q_i d_i]); classical models ``"FULL"`` (QDA),
        ``"COM_FULL"`` (LDA), ``"DIAG"``, ``"COM_DIAG"``, ``"SPHE"``, ``"COM_SPHE"``.
    number : int
        Position in the digest's table (1–14 as in HDclassif, 15–22 the rest of the subspace family,
        23–28 the classical models); 29 is the chapter's homothetic rule HDDAh (Prop. 5).
    label : str
        The bracket notation of Bouveyron et al. (2007).
    a, b, orientation, dims : str
        The constraint on each parameter block: a in {"aij", "ai", "aj", "a"}, b in {"bi", "b"} (HDDAh:
        "ai_ratio" / "bi_ratio", a_i = σ_i²/α and b_i = σ_i²/(1 − α) with one α),
        orientation in {"Qi", "Q"}, dims in {"di", "d"}; ``"classical"`` for models 23–28.
    exact : bool
        Whether the estimator is the closed-form maximum-likelihood one. Models 17–22 (common Q with
        class-specific variances) have no closed form (a common-principal-components problem, Flury 1984);
        they use Q from the eigenvectors of W and are flagged approximate.
    """

    name: str
    number: int
    label: str
    a: str
    b: str
    orientation: str
    dims: str
    exact: bool = True

    @property
    def is_subspace(self) -> bool:
        return self.a != "classical"


def _spec(number: int, name: str, label: str, a: str, b: str, q: str, d: str, exact: bool = True) -> SubmodelSpec:
    return SubmodelSpec(name, number, label, a, b, q, d, exact)


_FAMILY = [
    _spec(1, "AkjBkQkDk", "[a_ij b_i Q_i d_i]", "aij", "bi", "Qi", "di"),
    _spec(2, "AkBkQkDk", "[a_i b_i Q_i d_i]", "ai", "bi", "Qi", "di"),
    _spec(3, "ABkQkDk", "[a b_i Q_i d_i]", "a", "bi", "Qi", "di"),
    _spec(4, "AkjBQkDk", "[a_ij b Q_i d_i]", "aij", "b", "Qi", "di"),
    _spec(5, "AkBQkDk", "[a_i b Q_i d_i]", "ai", "b", "Qi", "di"),
    _spec(6, "ABQkDk", "[a b Q_i d_i]", "a", "b", "Qi", "di"),
    _spec(7, "AkjBkQkD", "[a_ij b_i Q_i d]", "aij", "bi", "Qi", "d"),
    _spec(8, "AkBkQkD", "[a_i b_i Q_i d]", "ai", "bi", "Qi", "d"),
    _spec(9, "ABkQkD", "[a b_i Q_i d]", "a", "bi", "Qi", "d"),
    _spec(10, "AkjBQkD", "[a_ij b Q_i d]", "aij", "b", "Qi", "d"),
    _spec(11, "AkBQkD", "[a_i b Q_i d]", "ai", "b", "Qi", "d"),
    _spec(12, "ABQkD", "[a b Q_i d]", "a", "b", "Qi", "d"),
    _spec(13, "AjBQD", "[a_j b Q d]", "aj", "b", "Q", "d"),
    _spec(14, "ABQD", "[a b Q d]", "a", "b", "Q", "d"),
    _spec(15, "AjBkQkD", "[a_j b_i Q_i d]", "aj", "bi", "Qi", "d"),
    _spec(16, "AjBQkD", "[a_j b Q_i d]", "aj", "b", "Qi", "d"),
    _spec(17, "AkjBkQD", "[a_ij b_i Q d]", "aij", "bi", "Q", "d", exact=False),
    _spec(18, "AjBkQD", "[a_j b_i Q d]", "aj", "bi", "Q", "d", exact=False),
    _spec(19, "AkjBQD", "[a_ij b Q d]", "aij", "b", "Q", "d", exact=False),
    _spec(20, "AkBkQD", "[a_i b_i Q d]", "ai", "bi", "Q", "d", exact=False),
    _spec(21, "ABkQD", "[a b_i Q d]", "a", "bi", "Q", "d", exact=False),
    _spec(22, "AkBQD", "[a_i b Q d]", "ai", "b", "Q", "d", exact=False),
    _spec(23, "FULL", "Full-GMM / QDA", "classical", "classical", "classical", "classical"),
    _spec(24, "COM_FULL", "Com-GMM / LDA", "classical", "classical", "classical", "classical"),
    _spec(25, "DIAG", "Diag-GMM", "classical", "classical", "classical", "classical"),
    _spec(26, "COM_DIAG", "Com-Diag-GMM", "classical", "classical", "classical", "classical"),
    _spec(27, "SPHE", "Sphe-GMM", "classical", "classical", "classical", "classical"),
    _spec(28, "COM_SPHE", "Com-Sphe-GMM", "classical", "classical", "classical", "classical"),
    # The chapter's homothetic rule HDDAh (Bouveyron et al. 2006, Prop. 5): a_i = σ_i²/α, b_i = σ_i²/(1 − α)
    # with one α for all classes (a common ratio a_i/b_i); not a member of the later family. With d_i free
    # the chapter adds d_i log((1 − α)/α) to K_i, which the general cost already contains.
    _spec(29, "HDDAH", "HDDAh: [a_i b_i Q_i d_i] with common a_i/b_i", "ai_ratio", "bi_ratio", "Qi", "di"),
]

#: Every model of the family by name (numbers 1–28 of the digest's table, 29 = the chapter's HDDAh).
SUBMODELS: dict[str, SubmodelSpec] = {s.name: s for s in _FAMILY}
_BY_NUMBER = {s.number: s for s in _FAMILY}


def resolve_submodel(model: Any, *, name: str = "model") -> SubmodelSpec:
    """The :class:`SubmodelSpec` of a model given by name (case-insensitive) or number 1–29.

    Examples
    --------
    >>> resolve_submodel(2).label, resolve_submodel("akjbkqkdk").number
    ('[a_i b_i Q_i d_i]', 1)
    """
    if isinstance(model, SubmodelSpec):
        return model
    if isinstance(model, (int, np.integer)) and not isinstance(model, bool):
        if int(model) in _BY_NUMBER:
            return _BY_NUMBER[int(model)]
        raise DataError(f"{name} must be a model number in 1..29 or a name; got {model}. See SUBMODELS.")
    if isinstance(model, str):
        key = {k.upper(): k for k in SUBMODELS}.get(model.upper())
        if key is not None:
            return SUBMODELS[key]
    raise DataError(
        f"{name} must be one of {list(SUBMODELS)} or a number 1..29; got {model!r}. "
        "Use 'AkjBkQkDk' (the most general subspace model) if unsure."
    )


def resolve_submodels(model: Any, *, name: str = "model") -> list[SubmodelSpec]:
    """One or several models: a name/number, a list of them, or ``"all"`` (models 1–16, the exact ones)."""
    if isinstance(model, str) and model.lower() == "all":
        return [s for s in _FAMILY if s.is_subspace and s.exact and s.number <= 16]
    if isinstance(model, (list, tuple)):
        if not model:
            raise DataError(f"{name} must name at least one model; got an empty list.")
        return [resolve_submodel(m, name=name) for m in model]
    return [resolve_submodel(model, name=name)]


# ---------------------------------------------------------------------------------------------------
# Parameter counts ν (for BIC)
# ---------------------------------------------------------------------------------------------------
def _orientation_count(kind: str, p: int, dims: np.ndarray) -> float:
    """Free parameters of the orientations: τ̄ = Σ_i d_i (p − (d_i + 1)/2), or k τ, or τ (common Q)."""
    tau = dims * (p - (dims + 1) / 2.0)
    return float(tau.sum()) if kind == "Qi" else float(tau[0])


_A_COUNT: dict[str, Callable[[int, np.ndarray], float]] = {
    "aij": lambda k, d: float(d.sum()),
    "ai": lambda k, d: float(k),
    "aj": lambda k, d: float(d[0]),
    "a": lambda k, d: 1.0,
    "ai_ratio": lambda k, d: float(k),  # HDDAh: the σ_i
}
_B_COUNT: dict[str, Callable[[int], float]] = {
    "bi": lambda k: float(k),
    "b": lambda k: 1.0,
    "bi_ratio": lambda k: 1.0,  # HDDAh: the common α
}
_D_COUNT: dict[str, Callable[[int], float]] = {"di": lambda k: float(k), "d": lambda k: 1.0}
_CLASSICAL_COUNT: dict[str, Callable[[int, int], float]] = {
    "FULL": lambda k, p: k * p * (p + 1) / 2.0,
    "COM_FULL": lambda k, p: p * (p + 1) / 2.0,
    "DIAG": lambda k, p: float(k * p),
    "COM_DIAG": lambda k, p: float(p),
    "SPHE": lambda k, p: float(k),
    "COM_SPHE": lambda k, p: 1.0,
}


def n_parameters(model: Any, n_features: int, n_classes: int, dims: Any = None) -> float:
    """Number of free parameters ν of a model (Bouveyron et al. 2007, Table 1; Bergé et al. 2012).

    ν = ρ + (orientation) + (a's) + (b's) + (d's) with ρ = k p + k − 1 (means and proportions), the
    orientation term τ̄ = Σ_i d_i (p − (d_i + 1)/2) (free Q_i, d_i), k τ (free Q_i, common d) or τ (common Q),
    τ = d (p − (d + 1)/2), and one parameter per free a, b and d. Half-integers are possible (τ).

    Examples
    --------
    >>> n_parameters("AkBkQkDk", 100, 4, [10] * 4), n_parameters("FULL", 100, 4)
    (4195.0, 20603.0)
    """
    spec = resolve_submodel(model)
    p, k = int(n_features), int(n_classes)
    rho = k * p + k - 1.0
    if not spec.is_subspace:
        return rho + _CLASSICAL_COUNT[spec.name](k, p)
    d = np.broadcast_to(np.asarray(dims, dtype=np.float64), (k,))
    return (
        rho
        + _orientation_count(spec.orientation, p, d)
        + _A_COUNT[spec.a](k, d)
        + _B_COUNT[spec.b](k)
        + _D_COUNT[spec.dims](k)
    )
