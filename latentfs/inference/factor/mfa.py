"""EM for a mixture of factor analysers (Ghahramani & Hinton 1996, "The EM algorithm for mixtures of factor
analyzers"; Titterington's chapter): the engine of :class:`~latentfs.models.factor.MixtureOfFactorAnalyzers`.

Every component has its own loadings and mean; the noise variances are shared. The E-step gives each row's
responsibilities and the moments of its factors under each component; the M-step is closed form. The
engine is a spec (:class:`MixtureOfFactorAnalyzersEM`) run by the one pipeline, which owns its restarts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError, as_continuous, check_n_components, check_positive
from latentfs.core.options import check_int, check_moments
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, shared
from latentfs.core.registry import register_spec
from latentfs.core.relabel import component_labels
from latentfs.inference.factor.em import HeywoodWarning
from latentfs.models.factor import MixtureOfFactorAnalyzers

__all__ = [
    "MFAParams",
    "MixtureOfFactorAnalyzersEM",
    "em_mixture_of_factor_analyzers",
    "mfa_component_log_density",
    "mfa_estep",
    "mfa_mstep",
]

_LOG_2PI = math.log(2 * math.pi)


@dataclass
class MFAParams:
    """Mixture-of-factor-analysers parameters (the EM state).

    weights (K,) π_k; means (K, d) μ_k; loadings (K, d, q) W_k; noise_variance (d,) shared diag Λ.
    """

    weights: torch.Tensor
    means: torch.Tensor
    loadings: torch.Tensor
    noise_variance: torch.Tensor


def mfa_component_log_density(params: MFAParams, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """log N(y_n; μ_k, W_k W_k^t + Λ) (n, K), with V_k (K, q, q) and b_nk = W_k^t Λ^{-1}(y_n − μ_k) (n, K, q)."""
    W, psi, mu = params.loadings, params.noise_variance, params.means
    K, d, q = W.shape
    Wp = W / psi[None, :, None]
    M = torch.eye(q, dtype=W.dtype, device=W.device) + W.transpose(1, 2) @ Wp
    L = torch.linalg.cholesky(M)
    V = torch.cholesky_inverse(L)
    b = torch.einsum("nd,kdq->nkq", X, Wp) - torch.einsum("kd,kdq->kq", mu, Wp)[None]
    Vb = torch.einsum("kqr,nkr->nkq", V, b)
    Xs = X / psi
    quad = (Xs * X).sum(1)[:, None] - 2 * Xs @ mu.T + ((mu * mu) / psi).sum(1)[None, :] - (b * Vb).sum(-1)
    logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1) + torch.log(psi).sum()
    return -0.5 * (d * _LOG_2PI + logdet[None, :] + quad), V, Vb


def mfa_estep(params: MFAParams, X: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Responsibilities h_nk and the weighted statistics of Ghahramani & Hinton (1996).

    Returns statistics ``N`` (K,), ``A`` (K, d, q+1) = Σ_n h_nk y_n E[ũ|y_n,k]^t and ``B`` (K, q+1, q+1)
    = Σ_n h_nk E[ũũ^t|y_n,k]; the responsibilities (n, K); and the log-likelihood.
    """
    logdens, V, Ez = mfa_component_log_density(params, X)
    joint = logdens + torch.log(params.weights)[None, :]
    norm = torch.logsumexp(joint, dim=1)
    h = torch.exp(joint - norm[:, None])
    n, K, q = Ez.shape
    N = h.sum(0)
    hEz = h[:, :, None] * Ez  # (n, K, q)
    A = torch.cat([torch.einsum("nd,nkq->kdq", X, hEz), (h.T @ X)[:, :, None]], dim=2)
    B = torch.empty(K, q + 1, q + 1, dtype=X.dtype, device=X.device)
    B[:, :q, :q] = N[:, None, None] * V + torch.einsum("nkq,nkr->kqr", hEz, Ez)
    s = hEz.sum(0)
    B[:, :q, q] = s
    B[:, q, :q] = s
    B[:, q, q] = N
    return {"N": N, "A": A, "B": B}, h, norm.sum()


def mfa_mstep(stats: dict[str, torch.Tensor], X2sum: torch.Tensor, n: int, floor: torch.Tensor) -> MFAParams:
    """W̃_k = A_k B_k^{-1}; Λ = diag(Σ y² − Σ_k W̃_k ∘ A_k)/N; π_k = N_k/N (Ghahramani & Hinton 1996)."""
    B = stats["B"]
    q1 = B.shape[-1]
    # A component with (almost) no responsibility keeps a tiny ridge so its solve stays defined.
    jitter = 1e-10 * torch.eye(q1, dtype=B.dtype, device=B.device) * (1.0 + stats["N"][:, None, None])
    Wt = torch.linalg.solve(B + jitter, stats["A"].transpose(1, 2)).transpose(1, 2)  # (K, d, q+1)
    psi = (X2sum - (Wt * stats["A"]).sum((0, 2))) / n
    psi = torch.maximum(psi, floor)
    weights = stats["N"] / n
    return MFAParams(weights=weights, means=Wt[:, :, -1].contiguous(), loadings=Wt[:, :, :-1].contiguous(),
                     noise_variance=psi)


def _mfa_init(X: np.ndarray, K: int, q: int, gen: torch.Generator) -> MFAParams:
    """k-means++ seeds, five Lloyd steps, then principal axes within each cluster."""
    n, d = X.shape
    rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,), generator=gen).item()))
    centres = [X[rng.integers(n)]]
    for _ in range(1, K):
        dist2 = np.min(((X[:, None, :] - np.array(centres)[None]) ** 2).sum(-1), axis=1)
        centres.append(X[rng.choice(n, p=dist2 / dist2.sum()) if dist2.sum() > 0 else rng.integers(n)])
    C = np.array(centres)
    for _ in range(5):
        lab = np.argmin(((X[:, None, :] - C[None]) ** 2).sum(-1), axis=1)
        C = np.array([X[lab == k].mean(0) if (lab == k).any() else C[k] for k in range(K)])
    lab = np.argmin(((X[:, None, :] - C[None]) ** 2).sum(-1), axis=1)
    var = X.var(0)
    W = np.zeros((K, d, q))
    resid = np.zeros(d)
    for k in range(K):
        Xk = X[lab == k]
        if Xk.shape[0] > 1:
            cov = np.cov(Xk, rowvar=False, bias=True).reshape(d, d)
            evals, evecs = np.linalg.eigh(cov)
            evals, evecs = evals[::-1], evecs[:, ::-1]
            m = min(q, d)
            rest = evals[m:].mean() if m < d else 0.0
            W[k, :, :m] = evecs[:, :m] * np.sqrt(np.maximum(evals[:m] - rest, 1e-3 * var.mean()))
            resid += (np.diag(cov) - (W[k] ** 2).sum(1)) * Xk.shape[0]
        else:
            W[k] = 1e-2 * rng.standard_normal((d, q)) * np.sqrt(var)[:, None]
    psi = np.maximum(resid / n, 0.05 * var)
    pi = np.maximum(np.bincount(lab, minlength=K) / n, 1.0 / n)
    t = lambda a: torch.as_tensor(np.array(a, dtype=np.float64), dtype=torch.float64)  # noqa: E731
    return MFAParams(weights=t(pi / pi.sum()), means=t(C), loadings=t(W), noise_variance=t(psi))


def _init_option(name: str, value: Any) -> Any:
    if value is not None and not isinstance(value, MFAParams):
        raise DataError(f"{name} must be None or an MFAParams (weights, means, loadings, noise_variance); got "
                        f"{type(value).__name__}. Pass the parameters of an earlier fit, or leave it out.")
    return value


#: A shared noise variance at most this fraction of its column's variance (or 10 × ``regularization``) is flagged.
MFA_COLLAPSE_RATIO = 1e-6


class MixtureOfFactorAnalyzersEM(EngineSpec):
    """EM for a mixture of factor analysers with ``n_init`` restarts (best final log-likelihood kept).

    Each restart starts from k-means++ seeds with principal axes per cluster (or from ``init``), drawn from
    a generator of its own (the pipeline's restarts, :func:`latentfs.core.pipeline.run_starts`: they may run in
    parallel, ``latentfs.chain_method("parallel")``, with the same result).
    At most one ``ConvergenceWarning`` per fit.
    ``regularization`` floors the shared noise variances at that fraction of each column's variance.

    Returns
    -------
    Posterior with point sites ``weights``, ``mean``, ``loadings``, ``noise_variance``; extras
    ``responsibilities`` (n, K), ``factor_scores`` (n, K, q) = E[z|y_n, c=k] and the log-likelihood
    of every restart.

    Examples
    --------
    >>> import latentfs
    >>> mfa = MixtureOfFactorAnalyzers(2, 1)
    >>> W = np.array([[[1.0], [1.0], [0.0]], [[0.0], [1.0], [1.0]]])
    >>> X = mfa.simulate(200, loadings=W, mean=[[0, 0, 0], [6, 6, 6]], noise_variance=0.1, seed=0)["data"]
    >>> post = latentfs.fit(mfa, X, method="em", seed=0, n_init=2)
    >>> sorted(np.round(post.mean("weights"), 1).tolist())
    [0.5, 0.5]
    """

    affine_equivariant = True  # checked by check_engine: the fit of a·X + b is the fit of X transformed
    # a shared noise variance at (or near) zero is flagged as in factor analysis (a Heywood case): one component
    # sitting on points with no spread in a feature (duplicated rows) pulls it there
    degenerate_warning = HeywoodWarning
    degenerate_key = "heywood_features"
    rank_degenerate = False  # as in factor analysis: it may be the maximum likelihood itself

    method = "em"
    kind = "optimizer"
    desc = "MFA em"
    options = {
        "seed": shared("seed"),
        "n_init": Option(3, lambda n, v: check_int(n, v, low=1, remedy=f"Pass e.g. {n}=3."), "int ≥ 1",
                         "starts; the best final log-likelihood is kept"),
        "max_iter": shared("max_iter", 2000),
        "tol": shared("tol", 1e-8),
        "init": Option(None, _init_option, "MFAParams or None", "starting parameters instead of k-means++ starts"),
        "regularization": Option(1e-6, lambda n, v: float(check_positive(v, n)), "float > 0",
                                 "floor on the shared noise variances as a fraction of each column's variance"),
        "dtype": shared("dtype"),
        "device": shared("device"),
        "progress": shared("progress"),
        "warn": shared("warn"),
    }

    def prepare(self, model: Any, X: Any, o: Options) -> Any:
        from types import SimpleNamespace

        started = time.perf_counter()
        if not isinstance(model, MixtureOfFactorAnalyzers):
            raise DataError(f"model must be a MixtureOfFactorAnalyzers; got {type(model).__name__}.")
        matrix = as_continuous(X, missing="error", allow_constant=False, min_samples=2)
        values = matrix.values
        check_moments(values)
        n, d = values.shape
        K, q = model.n_components, model.n_factors
        check_n_components(K, n, what=f"the number of samples, {n}")
        check_n_components(q, d - 1 if d > 1 else 1, name="n_factors",
                           what=f"one less than the number of features, {d}")
        Xt = torch.as_tensor(values, dtype=o.dtype, device=o.device)
        return SimpleNamespace(model=model, matrix=matrix, values=values, n=n, d=d, K=K, q=q, Xt=Xt,
                               X2=(Xt * Xt).sum(0), started=started,
                               floor=torch.as_tensor(o.regularization * values.var(0), dtype=o.dtype,
                                                     device=o.device))

    def n_starts(self, prep: Any, o: Options) -> int:
        return 1 if o.init is not None else int(o.n_init)

    def degenerate(self, prep: Any, o: Options, state: MFAParams) -> list[Any]:
        """The features whose shared noise variance is (numerically) zero: at most max(10 · ``regularization``,
        1e-6) of its column's variance, the mixtures' collapse rule (a column's variance includes the spread
        between the components, so factor analysis's :data:`HEYWOOD_FRACTION` would flag sound fits)."""
        psi = state.noise_variance.cpu().numpy()
        ratio = psi / np.maximum(prep.values.var(0), 1e-300)
        limit = max(10.0 * float(o.regularization), MFA_COLLAPSE_RATIO)
        return [prep.matrix.feature_names[j] for j in np.flatnonzero(ratio <= limit)]

    def degenerate_message(self, prep: Any, o: Options, flags: list[Any]) -> str:
        listed = ", ".join(map(repr, flags))
        return (f"MixtureOfFactorAnalyzers em: Heywood case: the shared noise variance of {listed} "
                "is (numerically) zero (a component sits on points with no spread there, such as duplicated rows, or a "
                "feature is explained entirely by the factors). Try fewer components or factors, more starts "
                "(n_init), a larger regularization, or drop duplicated rows.")

    def start(self, prep: Any, o: Options, gen: torch.Generator, index: int) -> MFAParams:
        first = o.init if o.init is not None else _mfa_init(prep.values, prep.K, prep.q, gen)
        return MFAParams(*(torch.as_tensor(getattr(first, f), dtype=o.dtype, device=o.device)
                           for f in ("weights", "means", "loadings", "noise_variance")))

    def step(self, prep: Any, o: Options, state: MFAParams) -> tuple[MFAParams, float]:
        stats, _, ll = mfa_estep(state, prep.Xt)
        return mfa_mstep(stats, prep.X2, prep.n, prep.floor), float(ll)

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        params: MFAParams = outcome.run.state
        K, q, d, n = prep.K, prep.q, prep.d, prep.n
        logdens, _, Ez = mfa_component_log_density(params, prep.Xt)
        joint = logdens + torch.log(params.weights)[None, :]
        ll_rows = torch.logsumexp(joint, 1)
        h = torch.exp(joint - ll_rows[:, None])
        n_free = (K - 1) + K * d + K * (d * q - q * (q - 1) // 2) + d
        loglik = float(ll_rows.sum())
        fitted = {"weights": params.weights, "mean": params.means, "loadings": params.loadings,
                  "noise_variance": params.noise_variance}
        return Export(
            dims={"weights": ("component",), "mean": ("component", "feature"),
                  "loadings": ("component", "feature", "factor"), "noise_variance": ("feature",)},
            coords={"component": component_labels(K), "feature": list(prep.matrix.feature_names),
                    "factor": [f"f{k}" for k in range(q)], "sample": list(prep.matrix.sample_names)},
            fitted={k: {"family": "point", "value": v.cpu().numpy()} for k, v in fitted.items()},
            diagnostics={"log_likelihood": loglik, "n_parameters": int(n_free),
                         "bic": float(-2 * loglik + n_free * math.log(n)),
                         "seconds": time.perf_counter() - prep.started, "observation_dim": "sample"},
            log_likelihood=ll_rows.cpu().numpy()[None, None, :],
            extras={"responsibilities": h.cpu().numpy(), "factor_scores": Ez.cpu().numpy()},
        )


#: the spec, callable as ``em_mixture_of_factor_analyzers(model, X, **options)`` (the pipeline runs it)
em_mixture_of_factor_analyzers = register_spec(MixtureOfFactorAnalyzersEM(), MixtureOfFactorAnalyzers)
