"""EM for finite mixtures (Gaussian, latent profile, latent class); Titterington (2006) §1.4.

E-step: τ_nk = η_k g_k(y_n) / Σ_l η_l g_l(y_n); M-step: η_k = N_k / N with N_k = Σ_n τ_nk and the
component parameters from τ-weighted sufficient statistics (Dempster, Laird & Rubin 1977). The
observed-data log-likelihood ℓ = Σ_n log Σ_k η_k g_k(y_n) never decreases from one step to the next.

The component families below (:class:`GaussianFamily`, :class:`CategoricalFamily`) hold the prepared data
and compute, in vectorised float64 torch, the quantities every engine needs: ``log_component`` (n, K),
the τ-weighted ``statistics`` and the maximum-likelihood ``m_step``. The Gibbs and VB engines reuse them.

Covariance M-steps are chosen by a dict (:data:`COVARIANCE_M_STEPS`); so is the full-covariance E-step
(:data:`FULL_E_STEPS`: the ``gram`` variant expands the quadratic form over the d(d+1)/2 products x_i x_j,
computed once, so that each iteration is two GEMMs; ``cholesky`` solves per component and needs no
O(n d²) memory).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.driver import make_generator, run_optimizer
from latentfs.core.registry import register
from latentfs.core.results import Posterior
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile

__all__ = [
    "COVARIANCE_M_STEPS",
    "CollapsedComponentWarning",
    "absolute_reg",
    "collapsed_components",
    "FULL_E_STEPS",
    "CategoricalFamily",
    "GaussianFamily",
    "em_step",
    "family_for",
    "fit_em",
    "initial_responsibilities",
    "log_joint_components",
    "responsibilities",
]

_LOG_2PI = math.log(2 * math.pi)
_EPS = 10 * torch.finfo(torch.float64).eps


# ----------------------------------------------------------------------------- Gaussian family
def _triu_index(d: int) -> tuple[torch.Tensor, torch.Tensor]:
    idx = torch.triu_indices(d, d)
    return idx[0], idx[1]


def gram_features(x: torch.Tensor, *, extra: int = 0) -> torch.Tensor:
    """q_n = (x_ni x_nj)_{i ≤ j}, shape (n, d(d+1)/2 + extra): x^T P x = q · vec(P) with off-diagonals doubled.

    Columns follow ``torch.triu_indices`` (row-major upper triangle); written row block by row block into
    one buffer (about twice as fast as gathering both factors). ``extra`` trailing columns are left for the
    caller to fill.
    """
    n, d = x.shape
    out = torch.empty(n, d * (d + 1) // 2 + extra, dtype=x.dtype)
    start = 0
    for i in range(d):
        torch.mul(x[:, i : i + 1], x[:, i:], out=out[:, start : start + d - i])
        start += d - i
    return out


def packed_precision(precision: torch.Tensor) -> torch.Tensor:
    """vec(P) of each (…, d, d) matrix over i ≤ j, off-diagonal entries doubled (pairs with :func:`gram_features`)."""
    d = precision.shape[-1]
    i, j = _triu_index(d)
    return precision[..., i, j] * torch.where(i == j, 1.0, 2.0).to(precision.dtype)


def unpack_symmetric(packed: torch.Tensor, d: int) -> torch.Tensor:
    """(…, d(d+1)/2) upper-triangle entries → symmetric (…, d, d)."""
    i, j = _triu_index(d)
    out = packed.new_zeros(*packed.shape[:-1], d, d)
    out[..., i, j] = packed
    out[..., j, i] = packed
    return out


def _gaussian_log_gram(fam: GaussianFamily, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """log N(x_n; μ_k, Λ_k⁻¹) as one GEMM: with the row features [q_n, x_n, 1] (``fam.gram``),
    −2 log N = q_n · vec(Λ_k) − 2 x_n · Λ_k μ_k + (μ_kᵀ Λ_k μ_k − log|Λ_k| + d log 2π)."""
    prec, means = params["precision"].expand(fam.k, fam.d, fam.d), params["means"]
    prec_mean = torch.einsum("kij,kj->ki", prec, means)  # Λ_k μ_k
    const = (prec_mean * means).sum(-1) - params["logdet_precision"].expand(fam.k) + fam.d * _LOG_2PI
    coef = torch.cat([packed_precision(prec), -2.0 * prec_mean, const[:, None]], 1)
    return (fam.gram @ coef.T).mul_(-0.5)


def _gaussian_log_cholesky(fam: GaussianFamily, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """log N(x_n; μ_k, Λ_k⁻¹) with ‖(x_n − μ_k)ᵀ L_k‖², L_k the Cholesky factor of Λ_k (batched)."""
    chol = torch.linalg.cholesky(params["precision"]).expand(fam.k, fam.d, fam.d)
    diff = fam.x[None, :, :] - params["means"][:, None, :]
    quad = (diff @ chol).pow(2).sum(-1).T
    return 0.5 * (params["logdet_precision"].expand(fam.k) - fam.d * _LOG_2PI - quad)


FULL_E_STEPS = {"gram": _gaussian_log_gram, "cholesky": _gaussian_log_cholesky}


def _gaussian_log_diagonal(fam: GaussianFamily, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """Σ_j o_nj log N(x_nj; μ_kj, 1/λ_kj): missing entries (o = 0) integrate out (local independence)."""
    lam = params["precision"].expand(fam.k, fam.d)
    means = params["means"]
    ox, ox2, o = fam.ox, fam.ox2, fam.obs
    quad = ox2 @ lam.T - 2.0 * ox @ (lam * means).T + o @ (lam * means * means).T
    return 0.5 * (o @ (torch.log(lam) - _LOG_2PI).T - quad)


def _weighted_moments(fam: GaussianFamily, resp: torch.Tensor) -> dict[str, torch.Tensor]:
    """N_k (or N_kj with missing data), Σ_n τ_nk x_n and the second moments each covariance type needs."""
    if fam.kind == "wishart":
        if fam.gram is not None:  # one GEMM against [q, x, 1] gives all three moments
            t = fam.d * (fam.d + 1) // 2
            m = resp.T @ fam.gram
            return {"n": m[:, -1] + _EPS, "sum": m[:, t:-1], "sum_sq": unpack_symmetric(m[:, :t], fam.d)}
        return {
            "n": resp.sum(0) + _EPS,
            "sum": resp.T @ fam.x,
            "sum_sq": torch.einsum("nk,ni,nj->kij", resp, fam.x, fam.x),
        }
    nkj = resp.T @ fam.obs + _EPS
    return {"n": nkj, "sum": resp.T @ fam.ox, "sum_sq": resp.T @ fam.ox2, "n_k": resp.sum(0) + _EPS}


def _scatter_full(st: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Means x̄_k and scatter matrices S_k = Σ_n τ_nk (x_n − x̄_k)(x_n − x̄_k)ᵀ."""
    means = st["sum"] / st["n"][:, None]
    scatter = st["sum_sq"] - st["n"][:, None, None] * means[:, :, None] * means[:, None, :]
    return means, scatter


def _scatter_diag(st: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Means x̄_kj and per-(k, j) sums of squares Σ_n τ_nk o_nj (x_nj − x̄_kj)²."""
    means = st["sum"] / st["n"]
    return means, (st["sum_sq"] - means * st["sum"]).clamp_min(0.0)


def _reg_diag(reg: Any, d: int, dtype: torch.dtype) -> torch.Tensor:
    """The floor as a (d, d) diagonal matrix (``reg`` a number or one value per feature)."""
    return torch.diag_embed(torch.as_tensor(reg, dtype=dtype).expand(d))


def _covariance_full(st: dict[str, torch.Tensor], reg: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Σ_k = S_k / N_k + diag(reg)."""
    means, scatter = _scatter_full(st)
    return means, scatter / st["n"][:, None, None] + _reg_diag(reg, scatter.shape[-1], scatter.dtype)


def _covariance_tied(st: dict[str, torch.Tensor], reg: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Σ = Σ_k S_k / N + diag(reg) (one covariance for all components)."""
    means, scatter = _scatter_full(st)
    return means, (scatter.sum(0) / st["n"].sum() + _reg_diag(reg, scatter.shape[-1], scatter.dtype))[None]


def _variance_diag(st: dict[str, torch.Tensor], reg: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """σ²_kj = Σ_n τ_nk o_nj (x_nj − μ_kj)² / N_kj + reg."""
    means, ss = _scatter_diag(st)
    return means, ss / st["n"] + reg


def _variance_spherical(st: dict[str, torch.Tensor], reg: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """σ²_k = Σ_j Σ_n τ_nk o_nj (x_nj − μ_kj)² / Σ_j N_kj + mean(reg)."""
    means, ss = _scatter_diag(st)
    return means, ss.sum(1, keepdim=True) / st["n"].sum(1, keepdim=True) + torch.as_tensor(reg).mean()


def _variance_tied_diag(st: dict[str, torch.Tensor], reg: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """σ²_j = Σ_k Σ_n τ_nk o_nj (x_nj − μ_kj)² / Σ_k N_kj + reg (latent profile: one diagonal Λ)."""
    means, ss = _scatter_diag(st)
    return means, ss.sum(0, keepdim=True) / st["n"].sum(0, keepdim=True) + reg


COVARIANCE_M_STEPS = {
    "full": _covariance_full,
    "tied": _covariance_tied,
    "diag": _variance_diag,
    "spherical": _variance_spherical,
    "tied_diag": _variance_tied_diag,
}


def _singular_error(what: str, reg: Any) -> DataError:
    return DataError(
        f"the M-step produced a singular (or non-positive) {what} (variance floor "
        f"{float(torch.as_tensor(reg).max()):g}): a component collapsed "
        "onto too few or collinear points. Raise reg_covar (e.g. reg_covar=1e-4), use fewer components, or a "
        "simpler covariance_type."
    )


@dataclass
class GaussianFamily:
    """Prepared data of a Gaussian mixture and its component computations.

    Attributes
    ----------
    x : (n, d) float64, data centred at ``shift`` (NaN set to 0); shift : (d,), the column means.
    obs, ox, ox2 : (n, d) observed mask o_nj, o·x, o·x² (diagonal types only; else None).
    gram : (n, d(d+1)/2 + d + 1) row features [x_i x_j (i ≤ j), x, 1] (``gram`` E-step only; else None).
    kind : "wishart" or "gamma"; covariance_type : str; k, d, n : sizes.
    """

    model: GaussianMixture
    x: torch.Tensor
    shift: torch.Tensor
    obs: Any  # torch.Tensor, or None for Wishart types
    ox: Any
    ox2: Any
    gram: Any
    e_step_variant: str
    feature_names: tuple[str, ...]
    raw: np.ndarray
    column_variance: torch.Tensor

    default_init = "kmeans"

    @property
    def k(self) -> int:
        return self.model.n_components

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def d(self) -> int:
        return int(self.x.shape[1])

    @property
    def kind(self) -> str:
        return self.model.spec["kind"]

    @property
    def covariance_type(self) -> str:
        return self.model.covariance_type

    @classmethod
    def prepare(cls, model: GaussianMixture, X: Any, *, e_step: str = "auto") -> GaussianFamily:
        data = model.check_data(X)
        raw = data.values
        shift = np.nanmean(raw, axis=0)
        xc = np.nan_to_num(raw - shift)
        x = torch.as_tensor(xc, dtype=torch.float64)
        n, d = x.shape
        obs = ox = ox2 = gram = None
        if model.spec["kind"] == "gamma":
            obs = torch.as_tensor(~np.isnan(raw), dtype=torch.float64)
            ox, ox2 = x * obs, x * x * obs
            variant = "diagonal"
        else:
            if e_step not in ("auto", *FULL_E_STEPS):
                raise DataError(f"e_step must be 'auto' or one of {sorted(FULL_E_STEPS)}; got {e_step!r}.")
            variant = e_step
            if variant == "auto":
                # The product features cost n·d(d+1)/2 floats; past ~64 features the per-component solve wins.
                variant = "gram" if d <= 64 and n * d * (d + 1) // 2 <= 60_000_000 else "cholesky"
            if variant == "gram":
                gram = gram_features(x, extra=d + 1)
                gram[:, -d - 1 : -1] = x
                gram[:, -1] = 1.0
        return cls(
            model,
            x,
            torch.as_tensor(shift),
            obs,
            ox,
            ox2,
            gram,
            variant,
            data.feature_names,
            raw,
            torch.as_tensor(np.nanvar(raw, axis=0)),
        )

    # --- the quantities engines share
    def log_component(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        """log g_k(y_n), shape (n, K)."""
        if self.kind == "gamma":
            return _gaussian_log_diagonal(self, params)
        return FULL_E_STEPS[self.e_step_variant](self, params)

    def statistics(self, resp: torch.Tensor) -> dict[str, torch.Tensor]:
        return _weighted_moments(self, resp)

    def m_step(self, resp: torch.Tensor, reg: Any) -> dict[str, torch.Tensor]:
        """Maximum-likelihood (η, μ, Σ) from responsibilities, via :data:`COVARIANCE_M_STEPS`."""
        st = self.statistics(resp)
        means, cov = COVARIANCE_M_STEPS[self.covariance_type](st, reg, self.n)
        weights = st["n"] if self.kind == "wishart" else st["n_k"]
        return {"weights": weights / weights.sum(), "means": means, **self.from_covariance(cov, reg)}

    def from_covariance(self, cov: torch.Tensor, reg: Any = 0.0) -> dict[str, torch.Tensor]:
        """Precision and log|Λ| from a covariance; a singular covariance raises with the reg_covar remedy."""
        # Rounding can leave a rank-deficient covariance with a tiny positive pivot; treat pivots below
        # 1e-13 of the data's own variance as zero.
        floor = 1e-13 * self.column_variance
        if self.kind == "wishart":
            chol, info = torch.linalg.cholesky_ex(cov)
            if bool((info != 0).any()) or not bool(torch.isfinite(cov).all()):
                raise _singular_error("covariance matrix", reg)
            if bool((torch.diagonal(chol, dim1=-2, dim2=-1).pow(2) <= floor.max()).any()):
                raise _singular_error("covariance matrix", reg)
            eye = torch.eye(self.d, dtype=cov.dtype).expand_as(cov)
            inv_chol = torch.linalg.solve_triangular(chol, eye, upper=False)
            precision = inv_chol.transpose(-1, -2) @ inv_chol
            logdet = -2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
            return {"covariance": cov, "precision": precision, "logdet_precision": logdet}
        if not bool((cov > floor).all()) or not bool(torch.isfinite(cov).all()):
            raise _singular_error("variance", reg)
        return {"covariance": cov, "precision": 1.0 / cov, "logdet_precision": -torch.log(cov)}

    def init_points(self) -> torch.Tensor:
        """Rows used for k-means++ seeding (missing entries at the column mean, i.e. 0 after centring)."""
        return self.x

    def export(self, params: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        """User-facing parameters (uncentred means; covariance/precision in the model's site shapes)."""
        cov, prec = params["covariance"], params["precision"]
        ct = self.covariance_type
        shape = {
            "full": (self.k, self.d, self.d),
            "tied": (self.d, self.d),
            "diag": (self.k, self.d),
            "spherical": (self.k,),
            "tied_diag": (self.d,),
        }[ct]
        return {
            "weights": params["weights"].numpy().copy(),
            "means": (params["means"] + self.shift).numpy().copy(),
            "covariance": cov.reshape(shape).numpy().copy(),
            "precision": prec.reshape(shape).numpy().copy(),
        }

    def import_(self, given: dict[str, Any], reg: Any) -> dict[str, torch.Tensor]:
        """Parameters from user values ``weights``, ``means`` and ``covariance`` (or ``precision``)."""
        k, d = self.k, self.d
        try:
            w = torch.as_tensor(np.asarray(given["weights"], dtype=np.float64)).reshape(k)
            m = torch.as_tensor(np.asarray(given["means"], dtype=np.float64)).reshape(k, d) - self.shift
            if "covariance" in given:
                c = torch.as_tensor(np.asarray(given["covariance"], dtype=np.float64))
            else:
                p = torch.as_tensor(np.asarray(given["precision"], dtype=np.float64))
                c = torch.linalg.inv(p) if self.kind == "wishart" else 1.0 / p
        except (KeyError, RuntimeError, ValueError) as exc:
            raise DataError(
                f"init must give weights (K,), means (K, d) and covariance or precision in the model's shapes "
                f"(K={k}, d={d}); {exc}."
            ) from None
        shape = {"full": (k, d, d), "tied": (1, d, d), "diag": (k, d), "spherical": (k, 1), "tied_diag": (1, d)}[
            self.covariance_type
        ]
        return {"weights": w / w.sum(), "means": m, **self.from_covariance(c.reshape(shape), reg)}

    def dims(self) -> dict[str, tuple[str, ...]]:
        cov = {
            "full": ("component", "feature", "feature_bis"),
            "tied": ("feature", "feature_bis"),
            "diag": ("component", "feature"),
            "spherical": ("component",),
            "tied_diag": ("feature",),
        }[self.covariance_type]
        return {"weights": ("component",), "means": ("component", "feature"), "covariance": cov, "precision": cov}

    def sample_data(self, params: dict[str, np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw n rows (complete data) from exported parameters (used by the bootstrap LRT)."""
        z = rng.choice(self.k, size=n, p=params["weights"] / params["weights"].sum())
        cov = params["covariance"]
        ct = self.covariance_type
        out = np.empty((n, self.d))
        for k in range(self.k):
            idx = np.flatnonzero(z == k)
            if ct == "full":
                c = cov[k]
            elif ct == "tied":
                c = cov
            elif ct == "diag":
                c = np.diag(cov[k])
            elif ct == "spherical":
                c = cov[k] * np.eye(self.d)
            else:
                c = np.diag(cov)
            out[idx] = rng.multivariate_normal(params["means"][k], c, size=idx.size, method="cholesky")
        return out


# ----------------------------------------------------------------------------- categorical family
@dataclass
class CategoricalFamily:
    """Prepared latent class data: items one-hot encoded over all L = Σ_i S_i levels.

    Attributes
    ----------
    onehot : (n, L) float64, y_nis (a missing item's block is all zero).
    obs : (n, p) float64 observed mask; item_of_level : (L,) long, the item of each level column.
    levels : (p,) S_i.
    """

    model: LatentClass
    onehot: torch.Tensor
    obs: torch.Tensor
    item_of_level: torch.Tensor
    levels: np.ndarray
    feature_names: tuple[str, ...]
    raw: np.ndarray

    @property
    def k(self) -> int:
        return self.model.n_components

    @property
    def n(self) -> int:
        return int(self.onehot.shape[0])

    @property
    def d(self) -> int:
        return int(self.obs.shape[1])

    kind = "categorical"
    default_init = "random"

    @classmethod
    def prepare(cls, model: LatentClass, X: Any, **_: Any) -> CategoricalFamily:
        data = model.check_data(X)
        v = data.values
        levels = model.levels(v.shape[1])
        offsets = np.concatenate([[0], np.cumsum(levels)[:-1]])
        n, p = v.shape
        onehot = np.zeros((n, int(levels.sum())))
        obs = ~np.isnan(v)
        rows, cols = np.nonzero(obs)
        onehot[rows, offsets[cols] + v[rows, cols].astype(np.int64)] = 1.0
        item_of_level = np.repeat(np.arange(p), levels)
        return cls(
            model,
            torch.as_tensor(onehot),
            torch.as_tensor(obs, dtype=torch.float64),
            torch.as_tensor(item_of_level),
            levels,
            data.feature_names,
            v,
        )

    def log_component(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        """log g_k(y_n) = Σ_i Σ_s y_nis log θ_iks (missing items contribute 0), one GEMM."""
        return self.onehot @ torch.log(params["probs"].clamp_min(1e-300)).T

    def statistics(self, resp: torch.Tensor) -> dict[str, torch.Tensor]:
        """Class sizes N_k, level counts C_kl = Σ_n τ_nk y_nl, and per-item observed totals D_ki."""
        return {"n_k": resp.sum(0) + _EPS, "counts": resp.T @ self.onehot, "n_item": resp.T @ self.obs + _EPS}

    def m_step(self, resp: torch.Tensor, reg: float = 0.0) -> dict[str, torch.Tensor]:
        """θ_iks = Σ_n τ_nk y_nis / Σ_n τ_nk o_ni; η_k = N_k / N."""
        st = self.statistics(resp)
        probs = st["counts"] / st["n_item"][:, self.item_of_level]
        return {"weights": st["n_k"] / st["n_k"].sum(), "probs": probs}

    def init_points(self) -> torch.Tensor:
        return self.onehot

    def export(self, params: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        return {"weights": params["weights"].numpy().copy(), "item_probs": self.to_item_probs(params["probs"])}

    def to_item_probs(self, probs: torch.Tensor) -> np.ndarray:
        """(K, L) level probabilities → (K, p) P(y=1) for binary models, else (K, p, S_max) padded with 0."""
        p_np = probs.numpy()
        if self.model.binary:
            return p_np[:, 1::2].copy()
        out = np.zeros((p_np.shape[0], self.d, int(self.levels.max())))
        start = 0
        for i, s in enumerate(self.levels):
            out[:, i, : int(s)] = p_np[:, start : start + int(s)]
            start += int(s)
        return out

    def from_item_probs(self, item_probs: np.ndarray) -> torch.Tensor:
        ip = np.asarray(item_probs, dtype=np.float64)
        if self.model.binary:
            return torch.as_tensor(np.stack([1 - ip, ip], -1).reshape(ip.shape[0], -1))
        return torch.as_tensor(np.concatenate([ip[:, i, : int(s)] for i, s in enumerate(self.levels)], -1))

    def import_(self, given: dict[str, Any], reg: float = 0.0) -> dict[str, torch.Tensor]:
        try:
            w = torch.as_tensor(np.asarray(given["weights"], dtype=np.float64)).reshape(self.k)
            probs = self.from_item_probs(given["item_probs"])
        except (KeyError, ValueError, IndexError) as exc:
            raise DataError(f"init must give weights (K,) and item_probs in the model's shapes; {exc}.") from None
        return {"weights": w / w.sum(), "probs": probs}

    def dims(self) -> dict[str, tuple[str, ...]]:
        ip = ("component", "item") if self.model.binary else ("component", "item", "level")
        return {"weights": ("component",), "item_probs": ip}

    def sample_data(self, params: dict[str, np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
        z = rng.choice(self.k, size=n, p=params["weights"] / params["weights"].sum())
        ip = params["item_probs"]
        if self.model.binary:
            return (rng.uniform(size=(n, self.d)) < ip[z]).astype(np.float64)
        cum = np.cumsum(ip[z], -1)
        u = rng.uniform(size=(n, self.d, 1))
        return np.minimum((u > cum).sum(-1), self.levels[None, :] - 1).astype(np.float64)


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


# ----------------------------------------------------------------------------- EM
def log_joint_components(fam: Any, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """log η_k + log g_k(y_n), shape (n, K)."""
    return fam.log_component(params).add_(torch.log(params["weights"].clamp_min(1e-300)))


def responsibilities(log_joint: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """τ_nk (Titterington §1.4) and the per-row log-likelihood log Σ_k η_k g_k(y_n)."""
    lse = torch.logsumexp(log_joint, 1)
    return torch.sub(log_joint, lse[:, None]).exp_(), lse


def em_step(fam: Any, params: dict[str, torch.Tensor], reg: float) -> tuple[dict[str, torch.Tensor], float]:
    """One EM iteration; returns the new parameters and ℓ at the *input* parameters."""
    resp, row_ll = responsibilities(log_joint_components(fam, params))
    return fam.m_step(resp, reg), float(row_ll.sum())


def _kmeans_plus_plus(points: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """Hard responsibilities from k-means++ seeding (Arthur & Vassilvitskii 2007): centres drawn with
    probability ∝ squared distance to the nearest chosen centre; each row goes to its nearest centre."""
    n = points.shape[0]
    first = int(torch.randint(n, (1,), generator=gen).item())
    centres = [points[first]]
    d2 = (points - points[first]).pow(2).sum(1)
    for _ in range(1, k):
        total = d2.sum()
        if float(total) <= 0:
            idx = int(torch.randint(n, (1,), generator=gen).item())
        else:
            u = torch.rand((), generator=gen, dtype=points.dtype) * total
            idx = int(torch.searchsorted(torch.cumsum(d2, 0), u).clamp_max(n - 1).item())
        centres.append(points[idx])
        d2 = torch.minimum(d2, (points - points[idx]).pow(2).sum(1))
    c = torch.stack(centres)
    dist2 = (points * points).sum(1, keepdim=True) - 2 * points @ c.T + (c * c).sum(1)
    resp = torch.zeros(n, k, dtype=points.dtype)
    resp[torch.arange(n), dist2.argmin(1)] = 1.0
    return resp


def _kmeans_lloyd(points: torch.Tensor, k: int, gen: torch.Generator, max_iter: int = 100) -> torch.Tensor:
    """Hard responsibilities from k-means: k-means++ seeding (:func:`_kmeans_plus_plus`), then Lloyd
    iterations until no row changes cluster (at most ``max_iter``), as scikit-learn's ``GaussianMixture``
    initialises with ``KMeans(n_init=1)``. Written in torch (one GEMM per iteration) rather than calling
    scikit-learn's ``KMeans``: on 20000 × 20, K = 10 that call costs ~0.13 s per start, more than the EM run
    it seeds, and the fixed cost per restart is what made several starts expensive."""
    labels = _kmeans_plus_plus(points, k, gen).argmax(1)
    sq = (points * points).sum(1, keepdim=True)
    for _ in range(max_iter):
        counts = torch.bincount(labels, minlength=k).to(points.dtype)
        sums = torch.zeros(k, points.shape[1], dtype=points.dtype).index_add_(0, labels, points)
        empty = counts == 0
        centres = sums / counts.clamp_min(1.0)[:, None]
        if bool(empty.any()):  # re-seed an empty cluster at the row farthest from its centre
            dist = (points - centres[labels]).pow(2).sum(1)
            centres[empty] = points[dist.topk(int(empty.sum())).indices]
        new = (sq - 2 * points @ centres.T + (centres * centres).sum(1)).argmin(1)
        if bool((new == labels).all()):
            break
        labels = new
    resp = torch.zeros(points.shape[0], k, dtype=points.dtype)
    resp[torch.arange(points.shape[0]), labels] = 1.0
    return resp


def _random_resp(points: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """Uniform random responsibilities, normalised per row."""
    r = torch.rand(points.shape[0], k, generator=gen, dtype=points.dtype)
    return r / r.sum(1, keepdim=True)


INITIALISATIONS = {"kmeans": _kmeans_lloyd, "kmeans++": _kmeans_plus_plus, "random": _random_resp}


def _initial_params(fam: Any, init: Any, gen: torch.Generator, reg: float) -> dict[str, torch.Tensor]:
    if isinstance(init, dict):
        if "responsibilities" in init:
            resp = torch.as_tensor(np.asarray(init["responsibilities"], dtype=np.float64))
            if resp.shape != (fam.n, fam.k):
                raise DataError(
                    f"init['responsibilities'] must have shape (n_samples, K) = {(fam.n, fam.k)}; "
                    f"got {tuple(resp.shape)}."
                )
            return fam.m_step(resp, reg)
        return fam.import_(init, reg)
    return fam.m_step(initial_responsibilities(fam, init, gen), reg)


def initial_responsibilities(fam: Any, init: Any, gen: torch.Generator) -> torch.Tensor:
    """Starting τ from :data:`INITIALISATIONS` (``None`` picks the family's default). For latent class
    models hard k-means++ assignments are mixed with the uniform (weight 0.2): a level probability that
    starts at exactly 0 stays 0 under EM, which traps it at the boundary."""
    if init is None:
        init = fam.default_init
    if init not in INITIALISATIONS:
        raise DataError(f"init must be one of {sorted(INITIALISATIONS)} or a dict of starting values; got {init!r}.")
    resp = INITIALISATIONS[init](fam.init_points(), fam.k, gen)
    if fam.kind == "categorical" and init == "kmeans++":
        resp = 0.8 * resp + 0.2 / fam.k
    return resp


class CollapsedComponentWarning(UserWarning):
    """A mixture fit has a component whose covariance sits at the regularisation floor."""


#: A component direction whose variance (before the floor, relative to the column variances) is below
#: this, or below 10 × reg_covar, counts as collapsed.
COLLAPSE_RATIO = 1e-6


def collapsed_components(fam: Any, params: dict[str, torch.Tensor], reg: Any, reg_covar: float) -> list[dict[str, Any]]:
    """Components whose covariance, less the floor ``reg``, is (numerically) singular.

    Such a component sits on rows that tie in some feature (iris: 29 setosa rows sharing petal width
    0.2) or that are collinear; its likelihood grows without bound as the floor shrinks, so it is a
    spurious maximiser (McLachlan & Peel 2000, §3.10), not a better fit. Each entry gives ``component``,
    ``feature`` (the feature that dominates the collapsed direction), ``relative_variance`` (the
    direction's variance over the column variance) and ``weight``. Latent class models: always empty.
    """
    if not isinstance(fam, GaussianFamily):
        return []
    var = fam.column_variance
    sd = var.sqrt()
    cov = params["covariance"]
    limit = max(10.0 * float(reg_covar), COLLAPSE_RATIO)
    reg_t = torch.as_tensor(reg, dtype=cov.dtype).expand(fam.d)
    out: list[dict[str, Any]] = []
    weights = params["weights"]
    if fam.kind == "wishart":
        empirical = (cov - torch.diag_embed(reg_t)) / (sd[:, None] * sd[None, :])
        vals, vecs = torch.linalg.eigh(empirical)
        for k in range(vals.shape[0]):
            if float(vals[k, 0]) <= limit:
                j = int(vecs[k, :, 0].abs().argmax())
                out.append({"component": k if vals.shape[0] > 1 else "all", "feature": fam.feature_names[j],
                            "relative_variance": max(float(vals[k, 0]), 0.0),
                            "weight": float(weights[k]) if vals.shape[0] > 1 else 1.0})
        return out
    c = cov.expand(cov.shape[0], fam.d) if fam.covariance_type != "spherical" else cov.expand(cov.shape[0], fam.d)
    floor = reg_t if fam.covariance_type != "spherical" else reg_t.mean().expand(fam.d)
    ratio = (c - floor) / var
    for k in range(ratio.shape[0]):
        j = int(ratio[k].argmin())
        if float(ratio[k, j]) <= limit:
            out.append({"component": k if ratio.shape[0] > 1 else "all", "feature": fam.feature_names[j],
                        "relative_variance": max(float(ratio[k, j]), 0.0),
                        "weight": float(weights[k]) if ratio.shape[0] > 1 else 1.0})
    return out


def collapse_message(collapsed: list[dict[str, Any]], reg_covar: float) -> str:
    """The warning text for :func:`collapsed_components` output: which component, which feature, remedy."""
    parts = "; ".join(
        f"component {c['component']} (weight {c['weight']:.3f}) has variance {c['relative_variance']:.2g} × the "
        f"column variance along feature {c['feature']!r}" for c in collapsed
    )
    return (
        f"EM kept a fit with collapsed component(s): {parts}. Such a component sits on rows that tie in that "
        f"feature (or are collinear) and its likelihood is limited only by reg_covar={reg_covar:g}: it is a "
        "degenerate maximiser, not a better fit, and information criteria must not reward it. Use fewer "
        "components, a constrained covariance_type ('diag', 'tied', 'spherical'), a larger reg_covar, add "
        "jitter to discretised features, or method='vb'/'gibbs' with a proper prior."
    )


#: Default number of starts of Gaussian-mixture EM (chosen by measurement; see :func:`_em_engine`).
DEFAULT_N_INIT = 5

#: Iterations of each short EM run when several starts compete (Biernacki, Celeux & Govaert 2003,
#: "short runs of EM"); the winner is then run to convergence.
SHORT_RUN_ITER = 20
SHORT_RUN_TOL = 1e-4


def fit_em(
    fam: Any,
    *,
    n_init: int = 5,
    init: Any = None,
    reg_covar: float = 1e-6,
    max_iter: int = 1000,
    tol: float = 1e-6,
    seed: Any = None,
    warn: bool = True,
    progress: bool | None = None,
    callback: Any = None,
    short_iter: int = SHORT_RUN_ITER,
) -> dict[str, Any]:
    """EM with restarts on a prepared family; returns the best run's parameters and diagnostics.

    With ``n_init`` > 1 every start gets a short EM run (``short_iter`` iterations or a relative change
    below 1e-4), and only the start with the highest log-likelihood after it is run to convergence (the
    "short runs of EM" strategy of Biernacki, Celeux & Govaert 2003). ``short_iter=0`` runs every start to
    convergence instead. ``reg_covar`` is added to each variance (:func:`absolute_reg`).
    """
    if isinstance(n_init, bool) or not isinstance(n_init, (int, np.integer)) or n_init < 1:
        raise DataError(f"n_init must be a positive integer; got {n_init!r}.")
    reg = absolute_reg(fam, reg_covar)
    gen = make_generator(seed)
    n_starts = 1 if isinstance(init, dict) else int(n_init)
    desc = f"EM {type(fam.model).__name__}"

    def step(p: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], float]:
        return em_step(fam, p, reg)

    def run(start: Any, iters: int, tolerance: float, warn_now: bool) -> Any:
        return run_optimizer(start, step, max_iter=iters, tol=tolerance, desc=desc, progress=progress,
                             warn=warn_now, remedies="raise max_iter, loosen tol, or raise n_init",
                             callback=callback)

    def rank(r: Any) -> tuple[bool, float]:
        # Non-degenerate fits first, then the log-likelihood.
        return (not collapsed_components(fam, r.state, reg, reg_covar), r.objective)

    starts = [_initial_params(fam, init, gen, reg) for _ in range(n_starts)]
    if n_starts == 1 or short_iter <= 0:
        runs = _until_interrupted(lambda s0: run(s0, max_iter, tol, warn), starts)
        best_index = max(range(len(runs)), key=lambda i: rank(runs[i]))
        best = runs[best_index]
    else:
        runs = _until_interrupted(lambda s0: run(s0, min(short_iter, max_iter), max(tol, SHORT_RUN_TOL), False), starts)
        best_index = max(range(len(runs)), key=lambda i: rank(runs[i]))
        first = runs[best_index]
        best = first
        if not first.interrupted:
            best = run(first.state, max(max_iter - first.n_iter, 1), tol, warn)
            best.trace = np.concatenate([first.trace, best.trace])
            best.n_iter += first.n_iter
    resp, row_ll = responsibilities(log_joint_components(fam, best.state))
    return {"params": best.state, "run": best, "runs": runs, "best_index": best_index, "resp": resp,
            "row_loglik": row_ll, "reg": reg, "collapsed": collapsed_components(fam, best.state, reg, reg_covar)}


def _until_interrupted(fit_one: Any, starts: list[Any]) -> list[Any]:
    """Runs from each start in turn; Ctrl-C in one run ends the whole fit (no further starts)."""
    runs = []
    for s0 in starts:
        runs.append(fit_one(s0))
        if runs[-1].interrupted:
            break
    return runs


def absolute_reg(fam: Any, reg_covar: Any) -> float:
    """The variance floor added to each covariance diagonal: ``reg_covar`` itself, as scikit-learn.

    A floor relative to each column's variance would make EM scale-equivariant, but it changes the
    objective: on the benchmark data of ``benchmarks/continuous_mixture.py`` (column variances ≈ 5, some
    component eigenvalues ≈ 1e-5) it lowers the attainable log-likelihood by 0.01 per sample, so the
    fits would no longer be comparable with scikit-learn's. Degenerate fits are handled instead by
    :func:`collapsed_components`, which measures variances relative to the columns.
    """
    reg = float(reg_covar)
    if not math.isfinite(reg) or reg < 0:
        raise DataError(f"reg_covar must be a finite non-negative number; got {reg_covar!r}.")
    return reg


def entropy_of(resp: torch.Tensor) -> float:
    """Classification entropy −Σ_nk τ_nk log τ_nk (Biernacki, Celeux & Govaert 2000)."""
    return float(-(resp * torch.log(resp.clamp_min(1e-300))).sum())


def criteria(loglik: float, n_params: int, n: int, entropy: float) -> dict[str, float]:
    """AIC = −2ℓ + 2ν, BIC = −2ℓ + ν log N, ICL = BIC + 2·entropy (all minimised)."""
    bic = -2 * loglik + n_params * math.log(n)
    return {"aic": -2 * loglik + 2 * n_params, "bic": bic, "icl": bic + 2 * entropy}


def _coords(fam: Any) -> dict[str, list[str]]:
    names = list(fam.feature_names)
    out = {"component": [f"c{k}" for k in range(fam.k)], "feature": names, "item": names, "feature_bis": names}
    if isinstance(fam, CategoricalFamily):
        out["level"] = [str(s) for s in range(int(fam.levels.max()))]
    return out


def _em_engine(
    model: Any,
    data: Any,
    *,
    n_init: int = DEFAULT_N_INIT,
    init: Any = None,
    reg_covar: float = 1e-6,
    max_iter: int = 1000,
    tol: float = 1e-6,
    seed: Any = 0,
    warn: bool = True,
    progress: bool | None = None,
    e_step: str = "auto",
    callback: Any = None,
    short_iter: int = SHORT_RUN_ITER,
) -> Posterior:
    """Maximum likelihood by EM with restarts (:func:`latentfs.fit` with ``method="em"``).

    Parameters
    ----------
    n_init : int
        Starts. Each gets a short EM run (``short_iter`` iterations) and the best is run to convergence
        (:func:`fit_em`); a start whose fit has a collapsed component (:func:`collapsed_components`) is
        only kept when every start collapses. The default was chosen by measurement: with it EM reaches
        scikit-learn's best optimum on standardised wine, iris and Old Faithful (full and diagonal), at
        about the cost of one full run.
    init : {"kmeans", "kmeans++", "random"} or dict, optional
        k-means (k-means++ seeding and Lloyd iterations; the default for Gaussian models, as
        scikit-learn initialises), k-means++ seeding alone with hard assignment, uniform
        random responsibilities (default for latent class models), or starting values
        (``{"responsibilities": (n, K)}``, or the parameters ``weights``, ``means``, ``covariance``/
        ``precision`` — ``weights``, ``item_probs`` for latent class — in the model's site shapes).
    reg_covar : float
        Added to each covariance diagonal (variance) after the M-step, as in scikit-learn
        (:func:`absolute_reg` says why it is not made relative to the column variances).
    max_iter, tol : stopping rule of :func:`run_optimizer` (relative change of ℓ).
    e_step : {"auto", "gram", "cholesky"}
        Full/tied E-step variant (:data:`FULL_E_STEPS`).
    short_iter : int
        Iterations of each short run; 0 runs every start to convergence.

    Warns
    -----
    CollapsedComponentWarning
        When the kept fit has a component whose covariance sits at the floor (it collapsed onto tied or
        collinear rows); ``diagnostics["collapsed"]`` lists them.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.mixture import GaussianMixture
    >>> gm = GaussianMixture(2, mean_precision=0.02)
    >>> X = gm.simulate(200, 2, seed=0)["data"]
    >>> res = latentfs.fit(gm, X, method="em", seed=0)
    >>> res.mean("means").shape, bool(res.diagnostics["converged"])
    ((2, 2), True)
    """
    fam = family_for(model, data, e_step=e_step) if isinstance(model, GaussianMixture) else family_for(model, data)
    out = fit_em(
        fam,
        n_init=n_init,
        init=init,
        reg_covar=reg_covar,
        max_iter=max_iter,
        tol=tol,
        seed=seed,
        warn=warn,
        progress=progress,
        callback=callback,
        short_iter=short_iter,
    )
    params = fam.export(out["params"])
    ll = float(out["row_loglik"].sum())
    n_params = model.n_parameters(fam.d)
    collapsed = out["collapsed"]
    if warn and collapsed:
        warnings.warn(collapse_message(collapsed, reg_covar), CollapsedComponentWarning, stacklevel=3)
    diag = {
        "log_likelihood": ll,
        "n_parameters": n_params,
        "n_observations": fam.n,
        "entropy": entropy_of(out["resp"]),
        "converged": bool(out["run"].converged),
        "n_iter": int(out["run"].n_iter),
        "restart_log_likelihoods": [float(r.objective) for r in out["runs"]],
        "best_restart": int(out["best_index"]),
        "observation_dim": "sample",
        "reg_covar": float(reg_covar),
        "collapsed": collapsed,
    }
    diag.update(criteria(ll, n_params, fam.n, diag["entropy"]))
    return Posterior(
        model=type(model).__name__,
        method="em",
        dims=fam.dims(),
        coords=_coords(fam),
        trace=out["run"].trace[None],
        fitted={k: {"family": "point", "value": v} for k, v in params.items()},
        diagnostics=diag,
        log_likelihood=out["row_loglik"].numpy()[None, None],
        extras={"responsibilities": out["resp"].numpy()},
        hyperparameters=model.hyperparameters(),
    )


for _cls in (GaussianMixture, LatentProfile, LatentClass):
    register(_cls, "em")(_em_engine)
