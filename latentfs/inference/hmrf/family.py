"""What the hidden-Potts engines share: the prepared lattice, Gaussian emissions, conditionals, the
pseudo-likelihood of η and its maximiser, starting values, the checks of η (at its bound; not identified with
one label), the options ``interaction`` and ``reg_covar`` (:data:`INTERACTION`, :data:`REG_COVAR`), what a fit
prepares (:class:`PottsFit`) and the result's layout.

The engines work in **standardised coordinates**: each feature centred and divided by its standard deviation
(computed without overflow, :func:`standardise`), so that every floor and data-dependent prior is relative to
the data's own scale and a fit of c·y + b is the fit of y mapped back (labels and η unchanged; an absolute
variance floor put the labels of an image × 1e−30 at chance, and squares of an image × 1e300 overflowed).
Parameters are returned in the data's units (:meth:`LatticeFamily.to_data_units`), objectives too (log g in
data units is log g in standardised units minus Σ_j log s_j per pixel).

Pseudo-likelihood (Besag 1975): PL(η; z) = Π_s P(z_s | z_∂s, η) with
P(z_s = k | z_∂s, η) = exp(η n_k(s)) / Σ_l exp(η n_l(s)), n_k(s) the number of 4-neighbours of s labelled k.
It needs no normalising constant and log PL is concave in η (a sum of linear terms minus log-sum-exps of
linear terms), so its maximiser on [0, η_max] is a boundary or the root of its decreasing slope. The mean-field version
(Celeux, Forbes & Peyrard 2003) replaces the neighbours' labels by their mean-field probabilities q_t:
ñ_k(s) = Σ_{t∈∂s} q_t(k), and weights the numerator by q_s.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.options import check_float
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.relabel import component_labels
from latentfs.models.hmrf import HiddenPotts, LatticeData, agreement, neighbour_sum

__all__ = [
    "INTERACTION",
    "InteractionAtBoundWarning",
    "LatticeFamily",
    "PottsFit",
    "PottsPointSpec",
    "REG_COVAR",
    "conditional_logits",
    "maximise_pseudo_likelihood",
    "prepare",
    "pseudo_log_likelihood",
]


#: A point estimate of η this close (relative) to ``interaction_max`` is at its bound.
AT_BOUND_POINT = 1e-6
#: Draws of η whose median lies in this top fraction of [0, ``interaction_max``] pile against the bound.
AT_BOUND_DRAWS = 0.05


class InteractionAtBoundWarning(UserWarning):
    """A hidden-Potts fit whose interaction η sits at its upper bound ``interaction_max``: the estimate ran to
    the cap of its search (or its draws pile against it), not to a maximum, and the labels are over-smoothed."""


def standardise(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y − b) / s per feature of an (n, d) array, with b the column mean and s the column standard deviation
    (1 for a constant column), computed on y / max|y| so that neither the sum nor the squares overflow or
    underflow at any finite scale. Returns (standardised, b, s)."""
    top = np.abs(values).max(0)
    top = np.where((top > 0) & np.isfinite(top), top, 1.0)
    unit = values / top
    centre = unit.mean(0)
    spread = unit.std(0)
    spread = np.where(spread > 0, spread, 1.0)
    return (unit - centre) / spread, centre * top, spread * top


@dataclass
class LatticeFamily:
    """A prepared lattice, in the engines' standardised coordinates.

    Attributes
    ----------
    model : HiddenPotts
    data : LatticeData, the validated lattice in the data's units.
    y : (H, W, d) float64 tensor, the standardised lattice (y_data − centre) / scale.
    centre, scale : (d,) float64 tensors, b and s of :func:`standardise` (y_data = b + s y).

    The engines' tensors live on ``y``'s device (the CPU unless ``device`` was given to :func:`prepare`).
    :meth:`m_step`, :meth:`standard_log_emission` and the engines' states hold μ and σ² in standardised
    coordinates; :meth:`log_emission` takes them in the data's units.
    """

    model: HiddenPotts
    data: LatticeData
    y: torch.Tensor
    centre: torch.Tensor
    scale: torch.Tensor

    @property
    def k(self) -> int:
        return self.model.n_components

    @property
    def shape(self) -> tuple[int, int]:
        return self.data.shape

    @property
    def n(self) -> int:
        return self.data.n_pixels

    @property
    def d(self) -> int:
        return self.data.n_features

    @property
    def device(self) -> torch.device:
        return self.y.device

    def onehot(self, labels: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(labels, self.k).to(torch.float64)

    @property
    def log_jacobian(self) -> float:
        """−Σ_j log s_j: log g_k(y_s) in the data's units minus log g_k in standardised units, per pixel."""
        return -float(torch.log(self.scale).sum())

    def standard_log_emission(self, means: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
        """log g_k(y_s) (H, W, K) of the standardised lattice for diagonal Gaussians N(μ_k, diag σ²_k) given in
        standardised coordinates (what the engines use)."""
        diff = self.y[:, :, None, :] - means
        return -0.5 * (diff.square() / variance + torch.log(2 * math.pi * variance)).sum(-1)

    def log_emission(self, means: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
        """log g_k(y_s) (H, W, K) for diagonal Gaussians N(μ_k, diag σ²_k) given in the data's units."""
        std_means, std_variance = self.to_standard_units(means, variance)
        return self.standard_log_emission(std_means, std_variance) + self.log_jacobian

    def to_standard_units(self, means: Any, variance: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ − b) / s and σ² / s² from the data's units."""
        m = torch.as_tensor(means, dtype=torch.float64, device=self.device)
        v = torch.as_tensor(variance, dtype=torch.float64, device=self.device)
        return (m - self.centre) / self.scale, v / self.scale.square()

    def to_data_units(self, means: Any, variance: Any) -> tuple[np.ndarray, np.ndarray]:
        """b + s μ and s² σ² (NumPy) from standardised coordinates, over any leading axes (draws). A variance
        beyond the float64 range (data of scale 1e155 and up) comes back as inf."""
        centre, scale = self.centre.cpu().numpy(), self.scale.cpu().numpy()
        m = np.asarray(means.cpu().numpy() if isinstance(means, torch.Tensor) else means, dtype=np.float64)
        v = np.asarray(variance.cpu().numpy() if isinstance(variance, torch.Tensor) else variance, dtype=np.float64)
        with np.errstate(over="ignore"):
            return centre + scale * m, v * scale * scale

    def prior(self) -> dict[str, torch.Tensor]:
        """The model's emission prior (:meth:`HiddenPotts.prior`) in standardised coordinates: m0 and σ0² from
        the standardised data when the model leaves them unset, else the model's values mapped over."""
        scale = self.scale.cpu().numpy()
        pr = self.model.prior(self.data_flat_standard(), self.d)
        if self.model.mean_prior is not None:
            pr["mean"] = (pr["mean"] - self.centre.cpu().numpy()) / scale
        if self.model.variance_prior is not None:
            pr["variance"] = pr["variance"] / (scale * scale)
        return {k: torch.as_tensor(v, dtype=torch.float64) for k, v in pr.items()}

    def data_flat_standard(self) -> np.ndarray:
        """The standardised lattice as (H·W, d) rows in C order, on the host."""
        return self.y.reshape(self.n, self.d).cpu().numpy()

    def m_step(self, weights: torch.Tensor, reg: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Weighted maximum-likelihood μ_k and σ²_k (standardised coordinates) from weights (H, W, K), σ²_k
        floored at ``reg`` × the feature's variance (the exact maximiser over σ² ≥ floor, so the update never
        lowers the likelihood); an empty label takes the overall mean and variance."""
        w = weights.reshape(self.n, self.k)
        y = self.y.reshape(self.n, self.d)
        nk = w.sum(0)[:, None]
        overall_mean, overall_var = y.mean(0), y.var(0, unbiased=False)
        means = torch.where(nk > 1e-10, (w.T @ y) / nk.clamp_min(1e-10), overall_mean)
        second = (w.T @ y.square()) / nk.clamp_min(1e-10)
        var = torch.where(nk > 1e-10, (second - means.square()).clamp_min(0.0), overall_var)
        return means, torch.maximum(var, reg * overall_var.clamp_min(1e-300))

    def potts_energy(self, labels: torch.Tensor, eta: float) -> torch.Tensor:
        """η A(z), the unnormalised log Potts prior."""
        return eta * agreement(labels)

    def dims(self) -> dict[str, tuple[str, ...]]:
        return {"interaction": (), "means": ("component", "feature"), "variance": ("component", "feature")}

    def coords(self) -> dict[str, list[str]]:
        return {"component": component_labels(self.k), "feature": list(self.data.feature_names)}


def prepare(model: Any, data: Any, *, for_fit: bool = True, device: Any = None) -> LatticeFamily:
    """Validate ``data`` for ``model`` (:meth:`HiddenPotts.check_data`); the lattice on ``device`` (None = CPU)."""
    if not isinstance(model, HiddenPotts):
        raise DataError(f"model must be a HiddenPotts; got {type(model).__name__}.")
    lat = model.check_data(data, for_fit=for_fit)
    flat, centre, scale = standardise(lat.flat())
    return LatticeFamily(
        model=model,
        data=lat,
        y=torch.as_tensor(flat.reshape(lat.values.shape), dtype=torch.float64, device=device),
        centre=torch.as_tensor(centre, dtype=torch.float64, device=device),
        scale=torch.as_tensor(scale, dtype=torch.float64, device=device),
    )


def conditional_logits(onehot_or_q: torch.Tensor, log_g: torch.Tensor | None, eta: float) -> torch.Tensor:
    """η n_k(s) + log g_k(y_s) (…, H, W, K): the log of P(z_s = k | z_∂s, y_s) up to a per-site constant.
    ``onehot_or_q`` holds one-hot labels (the Gibbs / ICM conditional) or mean-field probabilities."""
    logits = eta * neighbour_sum(onehot_or_q)
    return logits if log_g is None else logits + log_g


def _pl_terms(weights: np.ndarray, counts: np.ndarray, eta: float) -> float:
    a = eta * counts
    m = a.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(a - m).sum(-1, keepdims=True)))[..., 0]
    return float((weights * a).sum() - lse.sum())


def pseudo_log_likelihood(labels_or_q: torch.Tensor, eta: float) -> float:
    """log PL(η) = Σ_s [η Σ_k w_s(k) n_k(s) − log Σ_l exp(η n_l(s))]: with one-hot labels w = z (Besag
    1975); with mean-field probabilities w = q and n the expected neighbour counts (Celeux et al. 2003)."""
    w = labels_or_q.detach().cpu().numpy()
    return _pl_terms(w, neighbour_sum(labels_or_q).detach().cpu().numpy(), float(eta))


def _pl_slope(weights: np.ndarray, counts: np.ndarray, eta: float) -> tuple[float, float]:
    """d/dη and d²/dη² of :func:`pseudo_log_likelihood`: Σ_s [Σ_k w_s(k) n_k(s) − E_p[n(s)]] and
    −Σ_s Var_p[n(s)], p = softmax_k(η n_k(s))."""
    a = eta * counts
    p = np.exp(a - a.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    mean = (p * counts).sum(-1)
    first = float((weights * counts).sum() - mean.sum())
    second = -float(((p * counts * counts).sum(-1) - mean * mean).sum())
    return first, second


def maximise_pseudo_likelihood(labels_or_q: torch.Tensor, eta_max: float, *, start: float | None = None) -> float:
    """argmax of :func:`pseudo_log_likelihood` over η ∈ [0, η_max]: log PL is concave, so its slope decreases;
    the maximum is 0 when the slope there is ≤ 0, η_max when the slope there is ≥ 0, and otherwise the root of
    the slope, found by Newton steps kept inside a shrinking bracket (bisection when a step leaves it) to
    machine precision. (A bounded Brent search stopped at 1e-7 and moved with the last bits of its input, so
    fits of c·y differed from those of y in η's 7th digit and then in their stopping iteration.)"""
    w = labels_or_q.detach().cpu().numpy()
    counts = neighbour_sum(labels_or_q).detach().cpu().numpy()
    cap = float(eta_max)
    if _pl_slope(w, counts, 0.0)[0] <= 0.0:
        best = 0.0
    elif _pl_slope(w, counts, cap)[0] >= 0.0:
        best = cap
    else:
        lo, hi = 0.0, cap
        eta = 0.5 * cap
        for _ in range(200):
            first, second = _pl_slope(w, counts, eta)
            if first > 0.0:
                lo = eta
            else:
                hi = eta
            step = eta - first / second if second < 0.0 else 0.5 * (lo + hi)
            new = step if lo < step < hi else 0.5 * (lo + hi)
            if abs(new - eta) <= 4e-16 * max(1.0, eta) or hi - lo <= 4e-16 * max(1.0, hi):
                eta = new
                break
            eta = new
        best = float(eta)
    if start is not None and _pl_terms(w, counts, float(start)) > _pl_terms(w, counts, best):
        best = float(start)
    return best


def check_interaction(interaction: Any, model: HiddenPotts) -> float | None:
    """``interaction=None`` (estimate η) or a fixed η in [0, interaction_max].

    With one label (K = 1) every neighbour pair agrees whatever η is: exp(η A(z)) / G(η) = 1, so η does not
    enter the likelihood and is not identified. It is then fixed at 0 (the pseudo-likelihood is flat, and a
    search or a random walk would report an arbitrary value, the bound), and the result says
    ``interaction_estimated=False``.
    """
    if interaction is None:
        return 0.0 if model.n_components == 1 else None
    return check_float("interaction", interaction, 0.0, model.interaction_max,
                       remedy="Pass interaction=None to estimate η, or a value within [0, model.interaction_max].")


def flag_interaction_at_bound(post: Any, eta: np.ndarray, model: HiddenPotts, *, estimated: bool, warn: bool) -> None:
    """Record ``diagnostics["at_bound"]`` (``["interaction"]`` or ``[]``) and warn with
    :class:`InteractionAtBoundWarning` when an estimated η sits at ``interaction_max``: a point estimate within
    :data:`AT_BOUND_POINT` of it (relative), or draws whose median lies in the top :data:`AT_BOUND_DRAWS` of
    [0, interaction_max]. A fixed η is the user's and is never flagged."""
    cap = float(model.interaction_max)
    values = np.asarray(eta, dtype=np.float64).ravel()
    if values.size == 1:
        at = float(values[0]) >= cap * (1.0 - AT_BOUND_POINT)
    else:
        at = float(np.median(values)) >= cap * (1.0 - AT_BOUND_DRAWS)
    at = bool(estimated and at)
    post.diagnostics["at_bound"] = ["interaction"] if at else []
    if at and warn:
        shown = float(values[0]) if values.size == 1 else float(np.median(values))
        what = "its estimate" if values.size == 1 else "the median of its draws"
        warnings.warn(
            f"{post.method} on HiddenPotts: the interaction η sits at its upper bound ({what} {shown:.4g}, "
            f"interaction_max={cap:g}): the estimate ran to the cap, not to a maximum, and the labels are "
            "over-smoothed (with weak signal the mean-field pseudo-likelihood feeds on its own smoothing). Use "
            "method='icm' or method='gibbs', fix η (interaction=...), or raise interaction_max if an interaction "
            "that strong is plausible.",
            InteractionAtBoundWarning,
            stacklevel=3,
        )


def _reg_covar(name: str, value: Any) -> float:
    return check_float(name, value, 0.0, remedy=f"Pass a small non-negative number, e.g. {name}=1e-6.")


#: ``interaction``: a fixed η, checked against the model's ``interaction_max`` when the fit is prepared
#: (:func:`check_interaction`), or None to estimate it.
INTERACTION = Option(None, None, "float or None",
                     "a fixed interaction η in [0, interaction_max]; None estimates it (fixed at 0 with one label)")
#: ``reg_covar``: the floor of each emission variance of the optimisers.
REG_COVAR = Option(1e-6, _reg_covar, "float ≥ 0",
                   "floor of each emission variance, as a fraction of the feature's variance")


@dataclass
class PottsFit:
    """What a hidden-Potts fit prepares once: the lattice (:class:`LatticeFamily`), the fixed η (None when it is
    estimated; :func:`check_interaction`) and the variance floor ``reg`` (the ``reg_covar`` option)."""

    model: HiddenPotts
    fam: LatticeFamily
    fixed: float | None
    reg: float

    @property
    def jacobian(self) -> float:
        """H·W·``fam.log_jacobian``: an objective in standardised coordinates plus this is the data's units'."""
        return self.fam.n * self.fam.log_jacobian


def prepare_fit(model: Any, data: Any, o: Options, *, device: Any = None) -> PottsFit:
    """The lattice of ``data`` for ``model`` (on ``device``) and the checked η of ``o.interaction``."""
    fam = prepare(model, data, device=device)
    return PottsFit(model=model, fam=fam, fixed=check_interaction(o.interaction, model),
                    reg=float(o.get("reg_covar", 1e-6)))


def finish_point_fit(post: Any, prep: PottsFit, o: Options, eta: float) -> None:
    """The last touches of an ICM or mean-field result: the objective each start reached in the data's units (as
    the trace; the runs stop on the change in standardised coordinates) and the η-at-bound flag."""
    post.diagnostics["restart_objectives"] = [v + prep.jacobian for v in post.diagnostics["restart_objectives"]]
    flag_interaction_at_bound(post, np.asarray(eta), prep.model, estimated=prep.fixed is None, warn=bool(o.warn))


def kmeans_labels(fam: LatticeFamily, gen: torch.Generator) -> torch.Tensor:
    """k-means labels of the pixels (scikit-learn, k-means++ with 3 starts seeded from ``gen``), (H, W), on the
    family's device. They run on the data centred and divided by one common scale (the largest feature
    scale): the geometry of the data's own units, free of their magnitude."""
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning

    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen).item())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkConvergenceWarning)
        points = fam.data_flat_standard() * (fam.scale / fam.scale.max()).cpu().numpy()
        lab = KMeans(n_clusters=fam.k, n_init=3, random_state=seed).fit(points).labels_
    return torch.as_tensor(lab, dtype=torch.long, device=fam.device).reshape(fam.shape)


def warn_overflowed_variance(variance: np.ndarray, method: str, *, warn: bool) -> None:
    """A :class:`~latentfs.core.data.DataWarning` when emission variances in the data's units exceed the float64
    range (data of scale 1e155 and up): they are reported as inf, and only they are affected."""
    if warn and not np.isfinite(variance).all():
        from latentfs.core.data import DataWarning

        warnings.warn(
            f"{method} on HiddenPotts: the emission variances in the data's units exceed the float64 range (the "
            "data's scale is 1e155 or more) and are reported as inf; the labels, η and the means were fitted in "
            "standardised coordinates and are unaffected. Divide the image by a constant to read the variances.",
            DataWarning,
            stacklevel=3,
        )


def point_fitted(fam: LatticeFamily, eta: float, means: torch.Tensor, variance: torch.Tensor, *,
                 method: str = "", warn: bool = True) -> dict[str, dict[str, Any]]:
    """The point sites of ICM and mean-field results, μ and σ² (standardised coordinates) in the data's units."""
    data_means, data_variance = fam.to_data_units(means, variance)
    warn_overflowed_variance(data_variance, method, warn=warn)
    return {
        "interaction": {"family": "point", "value": np.asarray(eta, dtype=np.float64)},
        "means": {"family": "point", "value": data_means},
        "variance": {"family": "point", "value": data_variance},
    }


#: The run options of the point engines, after their own.
RUN_OPTIONS: dict[str, Option] = {name: shared(name) for name in ("seed", "warn", "progress", "callback", "device")}


class PottsPointSpec(EngineSpec):
    """What the point engines of :class:`HiddenPotts` (ICM, mean-field EM) share: the prepared lattice
    (:func:`prepare_fit`), the point sites and diagnostics of the result (:meth:`point_export`) and its last
    touches (:func:`finish_point_fit`); each engine supplies its start, its step and its own diagnostics."""

    affine_equivariant = True  # checked by check_engine: the fit of a·X + b is the fit of X transformed

    kind = "optimizer"
    remedies = "raise max_iter, loosen tol, or try another initialisation"

    def prepare(self, model: Any, data: Any, o: Options) -> PottsFit:
        return prepare_fit(model, data, o, device=o.device)

    def point_export(self, prep: PottsFit, o: Options, outcome: Any, diagnostics: dict[str, Any],
                     extras: dict[str, Any]) -> Export:
        """The result of the kept run: η, μ and σ² in the data's units, the engine's ``diagnostics`` followed by
        the shared ones, its ``extras``, and the trace in the data's units."""
        fam, st = prep.fam, outcome.run.state
        return Export(
            dims=fam.dims(),
            coords=fam.coords(),
            fitted=point_fitted(fam, st["eta"], st["means"], st["variance"], method=self.method, warn=o.warn),
            diagnostics={
                **diagnostics,
                "interaction_estimated": prep.fixed is None,
                "observation_dim": "pixel",
                "n_pixels": fam.n,
                "reg_covar": prep.reg,
            },
            extras=extras,
            trace=outcome.run.trace[None] + prep.jacobian,
        )

    def finalize(self, post: Any, prep: PottsFit, o: Options, outcome: Any) -> None:
        finish_point_fit(post, prep, o, outcome.run.state["eta"])
