"""Gibbs sampling for Bayesian factor analysis with conjugate priors (data augmentation over factors).

Titterington (2006, "Bayesian approach"): block Gibbs with data augmentation alternates θ ~ p(θ | z, y) and
z ~ p(z | θ, y). For the model of :class:`latentfs.models.factor.FactorAnalysis` with proper priors
(w_j ~ N(0, s² I), λ_j ~ InvGamma(a, b), μ_j ~ N(0, m²) or flat) every block is conjugate:

1. ``z_n | θ, y_n,o ~ N(V_o W_o^t Λ_o^{-1}(y_n,o − μ_o), V_o)``, ``V_o = (I + W_o^t Λ_o^{-1} W_o)^{-1}``
   (missing entries carry zero precision, Gruber & Weiss 2006);
2. ``w̃_j = (w_j, μ_j) | z, λ_j, y ~ N(H_j^{-1} g_j, H_j^{-1})`` with ``H_j = P + λ_j^{-1} Σ_n z̃_n z̃_n^t``
   and ``g_j = λ_j^{-1} Σ_n y_nj z̃_n`` over the rows observing j; linear constraints ``C_j w_j = c_j``
   are imposed by conditioning that Gaussian on them (the conditional of a Gaussian on an affine
   subspace: ``w ← w − H^{-1}C^t (C H^{-1} C^t)^{-1}(C w − c)``);
3. ``λ_j | w̃_j, z, y ~ InvGamma(a + n_j/2, b + ½ Σ_n (y_nj − w̃_j·z̃_n)²)``.

**Rotation, sign and order.** With the rotation-invariant prior the posterior of W is invariant under
W → W R for every orthogonal R, so draws drift along rotations and chains disagree on signs and
order. Before any cross-chain diagnostic every draw is aligned (recorded in ``Posterior.alignment``):

* ``"procrustes"`` (default without constraints): R_s = argmin_R ‖W_s R − W_ref‖_F over orthogonal R
  (R_s = U Vᵗ from the SVD of W_sᵗ W_ref); W_ref starts at the MAP loadings used to start the chains
  and is replaced by the mean of the aligned draws, twice (generalised Procrustes).
* ``"signed_permutation"`` (default with constraints whose targets are all zero): the column
  permutation and signs that best match W_ref (Hungarian on |cross-products|), which keeps zero
  constraints satisfied.
* ``"none"``.

Rotation-invariant quantities (noise variances, communalities, W Wᵗ) need no alignment.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.options import check_flag, check_float, check_moments
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options, shared
from latentfs.core.registry import register_spec
from latentfs.inference.factor.em import (
    FAData,
    FAParams,
    _pack_outer,
    _unpack_symmetric,
    _validate_fa,
    map_factor_analysis,
    posterior_precision,
    prepare_fa_data,
)
from latentfs.models.factor import FactorAnalysis

__all__ = [
    "FAGibbsState",
    "sample_factors",
    "sample_rows",
    "sample_noise_variance",
    "procrustes_rotation",
    "signed_permutation",
    "align_loadings",
    "FactorAnalysisGibbs",
    "gibbs_factor_analysis",
]


@dataclass
class FAGibbsState:
    """State of one chain: the parameters θ, the factors z (n, q) drawn given θ, and the per-row
    log-likelihood log p(y_n,o | θ) (n,)."""

    params: FAParams
    factors: torch.Tensor
    row_loglik: torch.Tensor


def sample_factors(
    params: FAParams, data: FAData, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw z_n | θ, y_n,o for every row; returns (z, E[z|y], log p(y_n,o | θ) per row)."""
    W, psi, mu = params.loadings, params.noise_variance, params.mean
    n, q = data.n_samples, W.shape[1]
    L = torch.linalg.cholesky(posterior_precision(W, psi, data.patterns))
    V = torch.cholesky_inverse(L)
    obs = data.observed
    R = data.values - mu if obs is None else (data.values - mu) * obs
    b = R @ (W / psi[:, None])
    Ez = (V[data.pattern_of_row] @ b[:, :, None]).squeeze(-1)
    eps = torch.randn(n, q, 1, generator=generator, dtype=W.dtype, device=W.device)
    # cov = M^{-1} = L^{-t} L^{-1}: z = E[z] + L^{-t} ε
    noise = torch.linalg.solve_triangular(L[data.pattern_of_row].transpose(1, 2), eps, upper=True).squeeze(-1)
    logdet_M = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)[data.pattern_of_row]
    n_obs: Any
    if obs is None:
        logdet_psi = torch.log(psi).sum()
        n_obs = float(W.shape[0])
    else:
        logdet_psi = obs @ torch.log(psi)
        n_obs = obs.sum(1)
    quad = (R * R / psi).sum(1) - (b * Ez).sum(1)
    row_ll = -0.5 * (n_obs * math.log(2 * math.pi) + logdet_M + logdet_psi + quad)
    return Ez + noise, Ez, row_ll


def _row_statistics(factors: torch.Tensor, data: FAData) -> tuple[torch.Tensor, torch.Tensor]:
    """A_j = Σ y_nj z̃_n (d, q+1) and B_j = Σ z̃_n z̃_nᵗ over rows observing j (d, q+1, q+1)."""
    n = factors.shape[0]
    zt = torch.cat([factors, torch.ones(n, 1, dtype=factors.dtype, device=factors.device)], dim=1)
    A = data.values.T @ zt
    q1 = zt.shape[1]
    outer = _pack_outer(zt)
    if data.observed is None:
        B = _unpack_symmetric(outer.sum(0), q1).expand(A.shape[0], q1, q1)
    else:
        B = _unpack_symmetric(data.observed.T @ outer, q1)
    return A, B


def sample_rows(
    factors: torch.Tensor,
    noise_variance: torch.Tensor,
    data: FAData,
    prior_precision: torch.Tensor,
    generator: torch.Generator,
    constraints: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw w̃_j = (w_j, μ_j) | z, λ_j, y for every feature; returns (draw, mean, precision H).

    ``prior_precision`` (q+1,) is the diagonal of P (0 for a flat prior on the mean);
    ``constraints`` = (C̃ (d, r, q+1), c (d, r), inactive (d, r)) conditions the draw on C̃ w̃ = c.
    """
    A, B = _row_statistics(factors, data)
    H = B / noise_variance[:, None, None] + torch.diag(prior_precision)
    g = A / noise_variance[:, None]
    L = torch.linalg.cholesky(H)
    mean = torch.cholesky_solve(g[:, :, None], L).squeeze(-1)
    eps = torch.randn(mean.shape + (1,), generator=generator, dtype=mean.dtype, device=mean.device)
    draw = mean + torch.linalg.solve_triangular(L.transpose(1, 2), eps, upper=True).squeeze(-1)
    if constraints is not None:
        C, c, inactive = constraints
        HinvCt = torch.cholesky_solve(C.transpose(1, 2), L)  # (d, q+1, r)
        S = C @ HinvCt + torch.diag_embed(inactive)
        for w in (draw, mean):
            resid = (C @ w[:, :, None]).squeeze(-1) - c
            w -= (HinvCt @ torch.linalg.solve(S, resid[:, :, None])).squeeze(-1)
    return draw, mean, H


def sample_noise_variance(
    rows: torch.Tensor,
    factors: torch.Tensor,
    data: FAData,
    shape: float,
    scale: float,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw λ_j | w̃_j, z, y ~ InvGamma(a + n_j/2, b + ½ SSE_j); returns (draw, posterior shape, posterior scale)."""
    zt = torch.cat([factors, torch.ones(factors.shape[0], 1, dtype=factors.dtype, device=factors.device)], dim=1)
    resid = data.values - zt @ rows.T
    if data.observed is not None:
        resid = resid * data.observed
    post_shape = shape + 0.5 * data.count
    post_scale = scale + 0.5 * (resid * resid).sum(0)
    precision = torch._standard_gamma(post_shape, generator=generator) / post_scale
    return 1.0 / precision, post_shape, post_scale


# ---------------------------------------------------------------------------------------------- alignment
def procrustes_rotation(loadings: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Orthogonal R minimising ‖loadings R − reference‖_F (Schönemann 1966), by SciPy's
    :func:`scipy.linalg.orthogonal_procrustes` (R = U Vᵗ, U Σ Vᵗ = Wᵗ W_ref).

    Examples
    --------
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> R = np.array([[0.0, -1.0], [1.0, 0.0]])
    >>> np.allclose(W @ R @ procrustes_rotation(W @ R, W), W)
    True
    """
    from scipy.linalg import orthogonal_procrustes

    R, _ = orthogonal_procrustes(np.asarray(loadings, dtype=np.float64), np.asarray(reference, dtype=np.float64))
    return R


def signed_permutation(loadings: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The signed permutation matrix P maximising tr(Pᵗ Wᵗ W_ref) (Hungarian on |Wᵗ W_ref|).

    Examples
    --------
    >>> W = np.array([[1.0, 0.1], [0.0, 2.0], [0.5, 0.0]])
    >>> np.allclose(-W[:, ::-1] @ signed_permutation(-W[:, ::-1], W), W)
    True
    """
    from scipy.optimize import linear_sum_assignment  # here: scipy.optimize takes ~0.8 s to import

    cross = np.asarray(loadings).T @ np.asarray(reference)
    rows, cols = linear_sum_assignment(-np.abs(cross))
    P = np.zeros_like(cross)
    P[rows, cols] = np.sign(cross[rows, cols]) + (cross[rows, cols] == 0)
    return P


_ALIGNMENTS = {"procrustes": procrustes_rotation, "signed_permutation": signed_permutation}


def align_loadings(
    draws: np.ndarray, reference: np.ndarray, rule: str = "procrustes", n_rounds: int = 2
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Align loadings draws (chain, draw, d, q) to a reference; returns (aligned, transforms, reference).

    After each round the reference becomes the mean of the aligned draws (generalised Procrustes).
    ``transforms[c, s]`` (q × q) maps draw s of chain c: aligned = draw @ transform.
    """
    if rule not in _ALIGNMENTS:
        raise DataError(f"align must be one of {sorted(_ALIGNMENTS) + ['none']}; got {rule!r}.")
    fn = _ALIGNMENTS[rule]
    c, s, d, q = draws.shape
    flat = draws.reshape(c * s, d, q)
    ref = np.asarray(reference, dtype=np.float64)
    for _ in range(max(int(n_rounds), 1)):
        T = np.stack([fn(w, ref) for w in flat])
        aligned = flat @ T
        ref = aligned.mean(0)
    return aligned.reshape(draws.shape), T.reshape(c, s, q, q), ref


# ---------------------------------------------------------------------------------------------- engine
def _align_option(name: str, value: Any) -> Any:
    if value is not None and value not in (*_ALIGNMENTS, "none"):
        raise DataError(f"{name} must be one of {sorted(_ALIGNMENTS) + ['none']}; got {value!r}.")
    return value


class FactorAnalysisGibbs(EngineSpec):
    """Bayesian factor analysis by block Gibbs with data augmentation; NaN entries are missing.

    Needs proper priors on the loadings and noise variances (``loading_scale``, ``noise_shape``,
    ``noise_scale``); the mean may have a flat prior. Chains start at the MAP estimate with the
    loadings jittered by ``init_jitter`` × their scale (different per chain). Draws of ``loadings``
    are aligned across chains and draws by ``align`` (see the module docstring; default
    ``"procrustes"``, or ``"signed_permutation"`` with zero constraints, ``"none"`` with other
    constraints) before R̂ is computed; the rule, the reference and the per-draw transforms are
    recorded (``Posterior.alignment``, ``extras["alignment_transforms"]``).

    Returns
    -------
    Posterior with draws of ``loadings`` (chain, draw, d, q), ``noise_variance``, ``mean`` and
    ``communalities`` (Σ_k W_jk² / (Σ_k W_jk² + λ_j)); pointwise log-likelihood log p(y_n,o | θ);
    extras ``factor_scores`` (E[z|y] at the posterior mean, aligned frame); diagnostics with the
    largest split-R̂ per site and, after alignment, rank-normalised R̂ / ESS per site
    (``diagnostics["convergence"]``; a :class:`~latentfs.core.driver.ConvergenceWarning` when they are off,
    unless ``warn=False``).

    Examples
    --------
    >>> import latentfs
    >>> fa = FactorAnalysis(1, loading_scale=1.0, noise_shape=2.0, noise_scale=0.5)
    >>> X = fa.simulate(100, loadings=[[1.0], [0.9], [0.8]], noise_variance=0.2, mean=0.0, seed=0)["data"]
    >>> post = latentfs.fit(fa, X, method="gibbs", num_chains=2, num_warmup=50, num_samples=50, warn=False)
    >>> post.samples("loadings").shape
    (2, 50, 3, 1)
    """

    method = "gibbs"
    kind = "sampler"
    desc = "gibbs"
    options = {
        **chain_options(num_chains=4, num_warmup=500, num_samples=500),
        "align": Option(None, _align_option, "str or None",
                        "'procrustes', 'signed_permutation' or 'none' (default: from the constraints)"),
        "init_jitter": Option(0.3, lambda n, v: check_float(n, v, 0.0), "float ≥ 0",
                              "each chain's start: the MAP loadings jittered by this × their scale"),
        "pointwise_log_likelihood": Option(True, lambda n, v: bool(check_flag(n, v)), "bool",
                                           "keep each row's log-likelihood per draw (the log_likelihood group)"),
        "dtype": shared("dtype"),
        "device": shared("device"),
    }

    def prepare(self, model: Any, X: Any, o: Options) -> Any:
        from types import SimpleNamespace

        started = time.perf_counter()
        matrix = _validate_fa(model, X)  # no singular-covariance check: the priors keep the posterior proper
        if not model.has_proper_priors:
            raise DataError(
                "gibbs needs proper priors on the loadings and the noise variances; got loading_scale="
                f"{model.loading_scale}, noise_shape={model.noise_shape}. Build the model with e.g. "
                "FactorAnalysis(k, loading_scale=1.0, noise_shape=2.0, noise_scale=1.0), or use method='map'."
            )
        dtype, device = o.dtype, o.device
        values = matrix.values
        check_moments(values)
        q = model.n_components
        align = o.align
        if align is None:
            if model.constraints is None:
                align = "procrustes"
            else:
                align = "signed_permutation" if np.all(model.constraints.target == 0) else "none"
        data = prepare_fa_data(values, dtype=dtype, device=device, use_moments=False)
        start = map_factor_analysis(model, values, max_iter=300, tol=1e-7, warn=False, dtype=dtype, device=device,
                                    progress=False, regularization=1e-6)
        t = lambda a: torch.as_tensor(np.array(a, dtype=np.float64), dtype=dtype, device=device)  # noqa: E731
        prior = np.zeros(q + 1)
        prior[:q] = 1.0 / model.loading_scale**2  # type: ignore[operator]
        prior[q] = 0.0 if model.mean_scale is None else 1.0 / model.mean_scale**2
        cons = None
        if model.constraints is not None:
            c = model.constraints
            mat = np.concatenate([c.matrix, np.zeros(c.matrix.shape[:2] + (1,))], axis=2)
            cons = (t(mat), t(c.target), t((~c.active).astype(np.float64)))
        return SimpleNamespace(
            model=model, matrix=matrix, values=values, q=q, align=align, data=data, t=t, prior=t(prior), cons=cons,
            start={k: start.mean(k) for k in ("loadings", "noise_variance", "mean")}, started=started,
            a0=float(model.noise_shape), b0=float(model.noise_scale),  # type: ignore[arg-type]
            scale=np.sqrt(np.nanvar(values, axis=0)),
        )

    def init(self, prep: Any, o: Options, gen: torch.Generator) -> FAGibbsState:
        t, q, start = prep.t, prep.q, prep.start
        from latentfs.core.driver import host_generator

        # drawn on the host (a chain's generator lives on the fit's device): a GPU chain starts where the CPU's does
        jitter = torch.randn(prep.values.shape[1], q, generator=host_generator(gen), dtype=o.dtype).numpy()
        W = start["loadings"] + o.init_jitter * jitter * prep.scale[:, None] / math.sqrt(q)
        if prep.model.constraints is not None:
            from latentfs.inference.factor.em import _project

            W = _project(FAParams(t(W), t(start["noise_variance"]), t(start["mean"])),
                         prep.model.constraints).loadings.cpu().numpy()
        params = FAParams(t(W), t(start["noise_variance"]), t(start["mean"]))
        z, _, ll = sample_factors(params, prep.data, gen)
        return FAGibbsState(params, z, ll)

    def sample(self, prep: Any, o: Options, state: FAGibbsState, gen: torch.Generator) -> tuple[FAGibbsState, float]:
        # θ | z (rows, then noise variances), then z | θ; the last also gives log p(y_n,o | θ_new).
        data = prep.data
        rows, _, _ = sample_rows(state.factors, state.params.noise_variance, data, prep.prior, gen, prep.cons)
        psi, _, _ = sample_noise_variance(rows, state.factors, data, prep.a0, prep.b0, gen)
        new = FAParams(rows[:, :-1].contiguous(), psi, rows[:, -1].contiguous())
        z, _, row_ll = sample_factors(new, data, gen)
        return FAGibbsState(new, z, row_ll), float(row_ll.sum())

    def collect(self, prep: Any, o: Options, state: FAGibbsState) -> dict[str, Any]:
        out: dict[str, Any] = state.params.numpy()
        if o.pointwise_log_likelihood:
            out["_row_loglik"] = state.row_loglik.cpu().numpy()  # log p(y_n,o | θ) at this state's parameters
        return out

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        t, align = prep.t, prep.align
        draws = dict(outcome.draws)
        row_ll = draws.pop("_row_loglik", None)
        alignment = None
        extras: dict[str, Any] = {}
        if align != "none":
            aligned, transforms, ref = align_loadings(draws["loadings"], prep.start["loadings"], align)
            draws["loadings"] = aligned
            extras["alignment_transforms"] = transforms
            alignment = {"site": "loadings", "dim": "factor", "rule": align, "reference": ref.tolist(),
                         "reference_start": "map", "rounds": 2}
        common = (draws["loadings"] ** 2).sum(-1)
        draws["communalities"] = common / (common + draws["noise_variance"])
        mean_params = FAParams(t(draws["loadings"].mean((0, 1))), t(draws["noise_variance"].mean((0, 1))),
                               t(draws["mean"].mean((0, 1))))
        gen0 = torch.Generator(device=prep.data.values.device).manual_seed(0)
        # only E[z | y] is kept (the draw is discarded); its generator must live on the data's device
        _, Ez, _ = sample_factors(mean_params, prep.data, gen0)
        extras["factor_scores"] = Ez.cpu().numpy()
        return Export(
            dims={"loadings": ("feature", "factor"), "noise_variance": ("feature",), "mean": ("feature",),
                  "communalities": ("feature",)},
            coords={"feature": list(prep.matrix.feature_names), "factor": [f"f{k}" for k in range(prep.q)],
                    "sample": list(prep.matrix.sample_names)},
            draws=draws, log_likelihood=row_ll, extras=extras, alignment=alignment,
            diagnostics={"align": align, "num_warmup": int(o.num_warmup),
                         "seconds": time.perf_counter() - prep.started, "observation_dim": "sample"},
        )


#: the spec, callable as ``gibbs_factor_analysis(model, X, **options)`` (the pipeline runs it)
gibbs_factor_analysis = register_spec(FactorAnalysisGibbs(), FactorAnalysis)
