"""Gaussian emissions (Gaussian mixtures, latent profiles, and the states of a Gaussian hidden Markov model).

:class:`GaussianFamily` holds the validated data and computes, in float64, ``log_component`` log g_k(y_n)
(n, K), the τ-weighted ``statistics`` and the maximum-likelihood ``m_step`` (Titterington 2006, §1.4;
Dempster, Laird & Rubin 1977).

Full and tied Gaussian covariances use the ``gram`` E-step by default: with the row features
q_n = [x_i x_j (i ≤ j), x, 1] computed once, −2 log N(x_n; μ_k, Λ_k⁻¹) = q_n · c_k for a coefficient row c_k
per component, so that one E-step is one (K × p)(p × n) product and the τ-weighted moments of the M-step
are one (p × n)(n × K) product (p = d(d+3)/2 + 1). The features are stored feature-major (p × n, each
row contiguous) and the two products run through NumPy's BLAS, which is 2–3× faster than torch's for
these long-inner-dimension shapes on one thread (measured on 20000 × 20, K = 10: 7 ms against 23 ms for
the moments). The ``cholesky`` variant (one batched triangular product per component) needs no O(n d²)
memory and is used past 64 features.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, check_choice
from latentfs.inference.emissions.statistics import _EPS, log_joint_components, responsibilities
from latentfs.models.mixture import GaussianMixture

__all__ = ["COVARIANCE_M_STEPS", "FULL_E_STEPS", "GaussianFamily", "e_step_variant", "gram_rows"]

_LOG_2PI = math.log(2 * math.pi)


@functools.lru_cache(maxsize=64)
def _triu_index(d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Row and column indices of the upper triangle (i ≤ j) and the weights 1 (diagonal) / 2 (off-diagonal);
    cached, since every E- and M-step of every start needs them."""
    idx = torch.triu_indices(d, d)
    return idx[0], idx[1], torch.where(idx[0] == idx[1], 1.0, 2.0).to(torch.float64)


def gram_rows(x: torch.Tensor) -> torch.Tensor:
    """The features [x_i x_j (i ≤ j), x, 1] of every row, stored feature-major: shape (d(d+1)/2 + d + 1, n).

    x^T P x = q · vec(P) with off-diagonals doubled (:func:`packed_precision`); rows follow
    ``torch.triu_indices`` (row-major upper triangle). Each block is one contiguous NumPy product
    (about 3.5× faster than filling the row-major (n, p) layout on 20000 × 20).
    """
    xt = np.ascontiguousarray(x.numpy().T)
    d, n = xt.shape
    out = np.empty((d * (d + 1) // 2 + d + 1, n))
    start = 0
    for i in range(d):
        np.multiply(xt[i], xt[i:], out=out[start : start + d - i])
        start += d - i
    out[start : start + d] = xt
    out[-1] = 1.0
    return torch.from_numpy(out)


def packed_precision(precision: torch.Tensor) -> torch.Tensor:
    """vec(P) of each (…, d, d) matrix over i ≤ j, off-diagonal entries doubled (pairs with :func:`gram_rows`)."""
    d = precision.shape[-1]
    i, j, weight = (t.to(precision.device) for t in _triu_index(d))
    return precision[..., i, j] * weight.to(precision.dtype)


def unpack_symmetric(packed: torch.Tensor, d: int) -> torch.Tensor:
    """(…, d(d+1)/2) upper-triangle entries → symmetric (…, d, d)."""
    i, j = (t.to(packed.device) for t in _triu_index(d)[:2])
    out = packed.new_zeros(*packed.shape[:-1], d, d)
    out[..., i, j] = packed
    out[..., j, i] = packed
    return out


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b; on the CPU through NumPy's BLAS, 2–3× faster than torch's for the long inner dimension of the
    stored features on one thread (module docstring), elsewhere (a GPU) through torch."""
    if a.device.type == "cpu":
        return torch.from_numpy(a.numpy() @ b.numpy())
    return a @ b


def _gram_coefficients(fam: GaussianFamily, params: dict[str, torch.Tensor], log_weights: Any = None) -> torch.Tensor:
    """c_k with log N(x_n; μ_k, Λ_k⁻¹) (+ log η_k) = q_n · c_k, (K, p): from
    −2 log N = q_n · vec(Λ_k) − 2 x_n · Λ_k μ_k + (μ_kᵀ Λ_k μ_k − log|Λ_k| + d log 2π)."""
    prec, means = params["precision"].expand(fam.k, fam.d, fam.d), params["means"]
    prec_mean = torch.einsum("kij,kj->ki", prec, means)  # Λ_k μ_k
    const = (prec_mean * means).sum(-1) - params["logdet_precision"].expand(fam.k) + fam.d * _LOG_2PI
    coef = torch.cat([packed_precision(prec), -2.0 * prec_mean, const[:, None]], 1).mul_(-0.5)
    if log_weights is not None:
        coef[:, -1] += log_weights
    return coef


def _gaussian_log_gram(fam: GaussianFamily, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """log N(x_n; μ_k, Λ_k⁻¹), (n, K), as one product with the stored features (:func:`_gram_coefficients`)."""
    return _product(_gram_coefficients(fam, params), fam.gram_t).T


def _gram_e_step_numpy(coef: torch.Tensor, gram_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """τ (n, K) and log Σ_k η_k g_k(y_n) (n,) from the coefficients with log η_k (K, p) and the stored features
    (p, n): one NumPy product and the normalisation of the (K, n) table in place (host tensors only)."""
    table = coef.numpy() @ gram_t.numpy()  # (K, n)
    top = table.max(0)
    table -= top
    np.exp(table, out=table)
    total = table.sum(0)
    table /= total
    return torch.from_numpy(table).T, torch.from_numpy(top + np.log(total))


def _gram_e_step_torch(coef: torch.Tensor, gram_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_gram_e_step_numpy` in torch, on any device (a GPU's)."""
    return responsibilities((coef @ gram_t).T)


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


def _weighted_moments(fam: GaussianFamily, resp: torch.Tensor, eps: float = _EPS) -> dict[str, torch.Tensor]:
    """N_k (or N_kj with missing data), Σ_n τ_nk x_n and the second moments each covariance type needs.

    ``eps`` is added to the counts (so that an empty component divides by it, not by zero); the sharded and
    online engines sum or average statistics with ``eps=0`` and add :data:`_EPS` once
    (:func:`~latentfs.inference.emissions.statistics.add_eps`).
    """
    if fam.kind == "wishart":
        if fam.gram_t is not None:  # one product with [q, x, 1] gives all three moments
            t = fam.d * (fam.d + 1) // 2
            m = _product(fam.gram_t, resp).T
            return {"n": m[:, -1] + eps, "sum": m[:, t:-1], "sum_sq": unpack_symmetric(m[:, :t], fam.d)}
        return {
            "n": resp.sum(0) + eps,
            "sum": resp.T @ fam.x,
            "sum_sq": torch.einsum("nk,ni,nj->kij", resp, fam.x, fam.x),
        }
    nkj = resp.T @ fam.obs + eps
    return {"n": nkj, "sum": resp.T @ fam.ox, "sum_sq": resp.T @ fam.ox2, "n_k": resp.sum(0) + eps}

def _scatter_full(st: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Means x̄_k and scatter matrices S_k = Σ_n τ_nk (x_n − x̄_k)(x_n − x̄_k)ᵀ."""
    means = st["sum"] / st["n"][:, None]
    scatter = st["sum_sq"] - st["n"][:, None, None] * means[:, :, None] * means[:, None, :]
    return means, scatter


def _scatter_diag(st: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Means x̄_kj and per-(k, j) sums of squares Σ_n τ_nk o_nj (x_nj − x̄_kj)²."""
    means = st["sum"] / st["n"]
    return means, (st["sum_sq"] - means * st["sum"]).clamp_min(0.0)


def _reg_diag(reg: Any, like: torch.Tensor) -> torch.Tensor:
    """The floor as a (d, d) diagonal matrix (``reg`` a number or one value per feature), with the dtype and
    device of ``like`` (…, d, d)."""
    return torch.diag_embed(torch.as_tensor(reg, dtype=like.dtype, device=like.device).expand(like.shape[-1]))


def _covariance_full(st: dict[str, torch.Tensor], reg: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Σ_k = S_k / N_k + diag(reg)."""
    means, scatter = _scatter_full(st)
    return means, scatter / st["n"][:, None, None] + _reg_diag(reg, scatter)


def _covariance_tied(st: dict[str, torch.Tensor], reg: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Σ = Σ_k S_k / N + diag(reg) (one covariance for all components)."""
    means, scatter = _scatter_full(st)
    return means, (scatter.sum(0) / st["n"].sum() + _reg_diag(reg, scatter))[None]


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
    gram_t : (d(d+1)/2 + d + 1, n) features [x_i x_j (i ≤ j), x, 1] of each row (:func:`gram_rows`;
        ``gram`` E-step only, else None).
    kind : "wishart" or "gamma"; covariance_type : str; k, d, n : sizes.

    The tensors live on one torch device (the CPU unless ``device`` was given to :meth:`prepare`); ``raw``
    stays a NumPy array on the host, and :meth:`export` returns NumPy arrays.
    """

    model: GaussianMixture
    x: torch.Tensor
    shift: torch.Tensor
    obs: Any  # torch.Tensor, or None for Wishart types
    ox: Any
    ox2: Any
    gram_t: Any
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
    def device(self) -> torch.device:
        return self.x.device

    @property
    def width(self) -> int:
        """Numbers per row and component that one E-step touches (the cost unit of :func:`auto_n_init`)."""
        if self.gram_t is not None:
            return int(self.gram_t.shape[0])
        return self.d * self.d if self.kind == "wishart" else self.d

    @property
    def covariance_type(self) -> str:
        return self.model.covariance_type

    @classmethod
    def prepare(cls, model: GaussianMixture, X: Any, *, e_step: str = "auto", for_fit: bool = True,
                device: Any = None) -> GaussianFamily:
        data = model.check_data(X)
        raw = data.values
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            if np.isnan(raw).any():
                shift = np.nanmean(raw, axis=0)
                xc = np.nan_to_num(raw - shift)
                variance = np.nanvar(raw, axis=0)
            else:  # complete data: the same moments without the NaN-aware copies
                shift = raw.mean(axis=0)
                xc = raw - shift
                variance = np.einsum("ij,ij->j", xc, xc) / raw.shape[0]
            largest = np.maximum(xc.max(0), -xc.min(0))
        # a constant column (or a single row) cannot be fitted, but new data to decode may well be one
        bad = ~np.isfinite(variance) | (largest > 1e150) | ((variance < 1e-280) if for_fit else False)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"X column {data.feature_names[j]!r} has values up to {np.nanmax(np.abs(raw[:, j])):g} (variance "
                f"{variance[j]:g}): outside what float64 moments can hold (squares overflow or underflow). "
                "Rescale that column (e.g. divide it by its standard deviation) before fitting."
            )
        variant = e_step_variant(model, raw.shape[0], raw.shape[1], e_step)
        return cls.from_rows(model, raw, shift, variance, variant, data.feature_names, centred=xc, device=device)

    @classmethod
    def from_rows(
        cls,
        model: GaussianMixture,
        raw: np.ndarray,
        shift: Any,
        column_variance: Any,
        variant: str,
        feature_names: tuple[str, ...],
        *,
        centred: np.ndarray | None = None,
        device: Any = None,
    ) -> GaussianFamily:
        """The family of validated rows ``raw`` (NaN = missing) centred at a given ``shift``, with a given
        column variance (the floor's scale) and E-step variant: a row shard or a mini-batch of a larger data
        set, computed exactly as :meth:`prepare` computes the whole (the statistics add up over shards).
        ``device`` (a ``torch.device``; None = CPU) is where the tensors are put."""
        shift_np = np.asarray(shift, dtype=np.float64)
        xc = np.nan_to_num(raw - shift_np) if centred is None else centred
        x = torch.as_tensor(xc, dtype=torch.float64)
        obs = ox = ox2 = gram_t = None
        if model.spec["kind"] == "gamma":
            obs = torch.as_tensor(~np.isnan(raw), dtype=torch.float64, device=device)
            x = x.to(device)
            ox, ox2 = x * obs, x * x * obs
        elif variant == "gram":
            gram_t = gram_rows(x).to(device)  # built by NumPy on the host, then moved
        return cls(
            model,
            x.to(device),
            torch.as_tensor(shift_np, device=device),
            obs,
            ox,
            ox2,
            gram_t,
            variant,
            tuple(feature_names),
            raw,
            torch.as_tensor(np.asarray(column_variance, dtype=np.float64), device=device),
        )

    def e_step(self, params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Responsibilities τ (n, K) and row log-likelihoods log Σ_k η_k g_k(y_n) (n,) at ``params``.

        With the stored features this is one product and one normalisation of the (K, n) table, in place.
        """
        if self.gram_t is None:
            return responsibilities(log_joint_components(self, params))
        coef = _gram_coefficients(self, params, torch.log(params["weights"].clamp_min(1e-300)))
        return (_gram_e_step_numpy if self.device.type == "cpu" else _gram_e_step_torch)(coef, self.gram_t)

    # --- the quantities engines share
    def log_component(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        """log g_k(y_n), shape (n, K)."""
        if self.kind == "gamma":
            return _gaussian_log_diagonal(self, params)
        return FULL_E_STEPS[self.e_step_variant](self, params)

    def statistics(self, resp: Any, eps: float = _EPS) -> dict[str, torch.Tensor]:
        """The τ-weighted moments (:func:`_weighted_moments`), additive over rows when ``eps=0``."""
        return _weighted_moments(self, resp, eps)

    def m_step(self, resp: Any, reg: Any) -> dict[str, torch.Tensor]:
        """Maximum-likelihood (η, μ, Σ) from responsibilities, via :data:`COVARIANCE_M_STEPS`."""
        return self.params_from_statistics(self.statistics(resp), reg)

    def params_from_statistics(self, st: dict[str, torch.Tensor], reg: Any) -> dict[str, torch.Tensor]:
        """The M-step from (summed or averaged) statistics: every estimate is a ratio of statistics, so
        statistics divided by a common row count give the same parameters."""
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
            eye = torch.eye(self.d, dtype=cov.dtype, device=cov.device).expand_as(cov)
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
            "weights": params["weights"].cpu().numpy().copy(),
            "means": (params["means"] + self.shift).cpu().numpy().copy(),
            "covariance": cov.reshape(shape).cpu().numpy().copy(),
            "precision": prec.reshape(shape).cpu().numpy().copy(),
        }

    def import_(self, given: dict[str, Any], reg: Any) -> dict[str, torch.Tensor]:
        """Parameters from user values ``weights``, ``means`` and ``covariance`` (or ``precision``)."""
        k, d, dev = self.k, self.d, self.device
        try:
            w = torch.as_tensor(np.asarray(given["weights"], dtype=np.float64), device=dev).reshape(k)
            m = torch.as_tensor(np.asarray(given["means"], dtype=np.float64), device=dev).reshape(k, d) - self.shift
            if "covariance" in given:
                c = torch.as_tensor(np.asarray(given["covariance"], dtype=np.float64), device=dev)
            else:
                p = torch.as_tensor(np.asarray(given["precision"], dtype=np.float64), device=dev)
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


def e_step_variant(model: Any, n: int, d: int, e_step: str = "auto") -> str:
    """The E-step of a Gaussian family: "diagonal" for diagonal types, else ``e_step`` (:data:`FULL_E_STEPS`)
    with "auto" choosing "gram" while the product features (n·d(d+1)/2 floats) stay small and d ≤ 64."""
    if model.spec["kind"] == "gamma":
        return "diagonal"
    variant = check_choice("e_step", e_step, ["auto", *FULL_E_STEPS])
    if variant == "auto":
        # The product features cost n·d(d+1)/2 floats; past ~64 features the per-component solve wins.
        variant = "gram" if d <= 64 and n * d * (d + 1) // 2 <= 60_000_000 else "cholesky"
    return str(variant)
