"""Auxiliary variational InfoMax projections (Agakov & Barber 2006, LNCS 3940, pp. 204–215).

A linear noisy channel p(y | x) = N(W x, s² I) with orthonormal rows W Wᵀ = I sends a source x (|x| = D) to a code
y (|y| = K < D). Mutual information I(x, y) = H(x) − H(x | y) is intractable for a non-Gaussian source, so the
chapter maximises lower bounds on it with the **IM algorithm**: coordinate ascent alternating a variational decoder
q and the encoder (Barber & Agakov 2003).

* **Simple bound** (eq. 4): I(x, y) ≥ H(x) + ⟨log q(x | y)⟩. With a linear Gaussian decoder q(x|y) = N(U y, S) its
  optimum over the encoder is Linsker's as-if-Gaussian I_G (eq. 3) minus the negentropy of x, whose maximiser is
  the PCA subspace: the simple bound cannot beat PCA.
* **Auxiliary bound** (eq. 8): an auxiliary variable z ∈ {1..J}, p(z_j | x) = softmax_j(v_jᵀx + b_j) (eq. 9, not
  transmitted), and a mixture-of-experts decoder q(x | y, z_j) = N(U_j y, S_j) with a y-independent q(z) give

      I(x, y) ≥ H(x) + ⟨log q(x | y, z)⟩ − (1/M) Σ_i KL(p(z | x_i) ‖ q(z)).

  J = 1 is the simple bound.
* **Hybrid channel** (eq. 10–12): z is sent too, x → {y, z}, and the bound on I(x, {y, z}) drops the KL term:

      Ĩ_H = H(x) + ⟨log q(x | y, z)⟩,  ⟨log q⟩ = −(1/2M) Σ_ij p_ij [tr S_j⁻¹(d_ij d_ijᵀ + s² U_j U_jᵀ) + log|S_j|]
      (+ the −(D/2) log 2π this module keeps), d_ij = x_i − U_j W x_i.

The chapter gives the objective but not the update equations. The updates here (digest §3.6, derived from eqs. 8–12):

* decoder step, closed form for fixed W and p: U_j = C_j Wᵀ (W C_j Wᵀ + s² I)⁻¹ (optimal for any S_j), S_j the
  maximiser within the chosen family (``decoder_cov``: σ_j² I with σ_j² = tr(A_j)/D, diag(A_j), or A_j) of
  A_j = C_j − U_j W C_j, the Gaussian conditional covariance of x given y, plus a ridge ``reg_covar``; q(z_j) = r_j/M.
  C_j = Σ_i p_ij x_i x_iᵀ / r_j, r_j = Σ_i p_ij.
* encoder step: gradient ascent on W over the Stiefel manifold (the Euclidean gradient from torch autograd
  projected on the tangent space, then the chapter's map W = (W̃ W̃ᵀ)^(−1/2) W̃ as retraction), and on (V, b), each
  with a backtracking (Armijo) line search, so no step lowers the objective.

The ridge makes S_j non-singular when M < D (the chapter has M = 30 < D = 196 and does not say how S_j was kept
non-singular). The objective actually maximised is the bound computed with A_j + ρI in place of A_j, that is the
bound minus (ρ/2) Σ_j (r_j/M) tr S_j⁻¹; it is never above the bound, and it is exactly the bound when ρ = 0.

**What ``bound_`` is.** Reported values exclude H(x), as the chapter's Fig. 3 does: each is the sample mean over
the rows of ⟨log q(x_i | y, z)⟩ (minus the KL term for the auxiliary channel), a cross-entropy term in nats of a
*density* q. For a continuous source with differential entropy H(x), its expectation at fixed parameters plus
H(x) is a lower bound on I(x, y) (on I(x, {y, z}) for the hybrid channel); the value itself is not a bound on
I − H(x) for the data at hand. For the empirical distribution of the rows (a discrete source, H(x) = log M,
I(x, y) ≤ H(x)) I − H(x) ≤ 0, while ``bound_`` can be any number: on 600 of the 8 × 8 digits (5 components,
``decoder_cov="full"``, ``scale=True``) it ends at +20.0. It also
depends on the units of x (rescaling x by c shifts it by −D log c at the matching channel noise; digest §3.7).
Use it to compare fits on the same data in the same units (restarts, n_auxiliary, channels), not as mutual
information.

**Scale and degenerate data.** The channel noise s² fixes the units of x, so without ``scale=True`` the data
must be representable in those units: ``fit`` refuses (with a :class:`DataError`) centred values whose squares
overflow or underflow float64. With ``scale=True`` every feature is standardised first (computed without
forming squares of huge values), and the fit does not depend on the units. Constant columns are centred to
exactly zero (they carry no variation); data whose rows are all identical are refused.

Also here: :func:`gaussian_channel_mi` (the exact I(x, y) = ½ log|I + W C Wᵀ/s²| of a Gaussian source, which is
Linsker's I_G of the data covariance), :func:`as_if_gaussian_mi` (eq. 3 written with the joint covariance blocks),
:func:`linear_gaussian_bound` (bound (4) for a Gaussian source with the optimal linear decoder, tight),
:func:`linsker_projection` (maximises I_G by Stiefel gradient ascent; the baseline of §3.7), :func:`pca_components`
and :func:`subspace_overlap` (the W W_pcaᵀ (W W_pcaᵀ)ᵀ matrix of Fig. 3b).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin

from latentfs.core.base import ParamsAsDataError, check_fitted, check_X, document_input_attributes
from latentfs.core.data import DataError
from latentfs.core.driver import ConvergenceWarning, OptimizerRun, chain_generators, run_restarts
from latentfs.core.options import as_rng, check_choice, check_float, check_int, check_seed
from latentfs.core.weights import FeatureWeights
from latentfs.subspace.infomax_bounds import (  # noqa: F401  (re-exported)
    _LOG_2PI,
    CHANNELS,
    DECODER_COVARIANCES,
    _as_matrix,
    _bound_per_sample,
    _centre_and_scale,
    _check_pair,
    _decoder_step,
    _log_q_terms,
    _orthonormalise,
    _responsibilities,
    _tangent,
    as_if_gaussian_mi,
    gaussian_channel_mi,
    infomax_bound,
    linear_gaussian_bound,
    linsker_projection,
    pca_components,
    subspace_overlap,
)

__all__ = [
    "CHANNELS",
    "DECODER_COVARIANCES",
    "InfoMaxProjection",
    "as_if_gaussian_mi",
    "gaussian_channel_mi",
    "infomax_bound",
    "linear_gaussian_bound",
    "linsker_projection",
    "pca_components",
    "subspace_overlap",
]

# --------------------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------------------
@document_input_attributes
class InfoMaxProjection(ParamsAsDataError, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Orthonormal linear projection maximising an auxiliary variational bound on mutual information
    (Agakov & Barber 2006): the IM algorithm with auxiliary variables, for the auxiliary or the hybrid channel.

    Parameters
    ----------
    n_components : int, default 2
        ``|y|``, the dimension of the code; at most the number of features (the chapter has ``|y| < |x|``).
    n_auxiliary : int, default 3
        ``|z|``, the number of states of the auxiliary variable (decoder experts); 1 gives the simple bound (4),
        whose optimum is the PCA subspace.
    channel : {"auxiliary", "hybrid"}, default "auxiliary"
        ``"auxiliary"``: z is not transmitted, bound (8) on I(x, y) with the penalty −KL(p(z|x) ‖ q(z)).
        ``"hybrid"``: z is transmitted, bound (10) on I(x, {y, z}).
    channel_noise : float, default 1.0
        s², the variance of the channel noise (fixed, as in the chapter).
    decoder_cov : {"isotropic", "diag", "full"}, default "isotropic"
        Family of the decoder covariances S_j. ``"full"`` with ``reg_covar=0`` needs M > D per expert.
    reg_covar : float, default 1e-6
        Ridge ρ added to each S_j, relative to the mean per-feature variance of the (centred, scaled) data.
    scale : bool, default False
        Divide each centred feature by its standard deviation (constant features keep scale 1). The data are
        always centred (the channel has no bias).
    init : {"pca", "random"}, default "pca"
        Initial encoder: the chapter's W_pca, or a random orthonormal W (seeded per restart).
    max_iter : int, default 30
        IM iterations T (the chapter's Fig. 3 uses 30).
    inner_steps : int, default 10
        Line-searched gradient steps on W and on (V, b) per IM iteration.
    tol : float, default 0.0
        Stop when an iteration raises the bound by at most ``tol · max(1, |bound|)``; 0 runs ``max_iter``
        iterations (a :class:`ConvergenceWarning` is raised only when ``tol > 0`` and it was not met).
    n_init : int, default 1
        Random restarts (different (V, b), and W when ``init="random"``); the restart with the highest final
        bound is kept.
    init_scale : float, default 0.1
        Standard deviation of the initial v_j·x + b_j ("random around zero").
    seed : int, Generator or None, default 0

    Attributes
    ----------
    components_ : (K, D) array
        W, orthonormal rows, acting on the centred (scaled) inputs.
    mean_, scale_ : (D,) arrays
    aux_coef_, aux_intercept_ : (J, D), (J,) arrays
        V and b of p(z | x) = softmax(V x + b).
    decoder_ : dict
        ``"U"`` (J, D, K), ``"S"`` (the covariances in the ``decoder_cov`` family), ``"q"`` (J,) q(z),
        ``"ridge"`` (the absolute ρ), ``"code_mean"`` (J, K) and ``"code_cov"`` (J, K, K), the per-expert moments
        of the noisy code used by :meth:`code_posterior`.
    bound_ : (T + 1,) array
        The objective (nats, with the ridge) after the first decoder step and after every IM iteration, for the
        kept restart; non-decreasing. It is the bound minus H(x) for a continuous source: the mean over the rows
        of ⟨log q(x | y, z)⟩ (minus the KL term for the auxiliary channel), a log-density in the units of the
        (centred, scaled) inputs. It is not a bound on I − H(x) for the empirical distribution of the rows,
        where I − H(x) ≤ 0 while this value can be positive (+20.0 on digits); see the module docstring.
    init_bounds_ : (n_init,) array
        Final bound of each restart.
    n_iter_ : int

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-3, 1, (50, 4)), rng.normal(3, 1, (50, 4))])
    >>> model = InfoMaxProjection(n_components=1, n_auxiliary=2, max_iter=5).fit(X)
    >>> model.transform(X).shape
    (100, 1)
    >>> bool(np.all(np.diff(model.bound_) >= -1e-9))
    True
    """

    def __init__(
        self, n_components: int = 2, *, n_auxiliary: int = 3, channel: str = "auxiliary",
        channel_noise: float = 1.0, decoder_cov: str = "isotropic", reg_covar: float = 1e-6, scale: bool = False,
        init: str = "pca", max_iter: int = 30, inner_steps: int = 10, tol: float = 0.0, n_init: int = 1,
        init_scale: float = 0.1, seed: Any = 0,
    ) -> None:
        self.n_components = n_components
        self.n_auxiliary = n_auxiliary
        self.channel = channel
        self.channel_noise = channel_noise
        self.decoder_cov = decoder_cov
        self.reg_covar = reg_covar
        self.scale = scale
        self.init = init
        self.max_iter = max_iter
        self.inner_steps = inner_steps
        self.tol = tol
        self.n_init = n_init
        self.init_scale = init_scale
        self.seed = seed

    # --- checks ---------------------------------------------------------------------------------
    def _check_params(self, M: int, D: int) -> None:
        check_int("n_components", self.n_components, low=1, high=D,
                  remedy=f"X has n_features = {D}, so pass n_components ≤ {D} (the chapter's codes are smaller "
                         "than the source).")
        check_int("n_auxiliary", self.n_auxiliary, low=1, high=max(M, 1),
                  remedy=f"Each auxiliary state needs data: X has {M} rows, pass n_auxiliary ≤ {M} (e.g. 3).")
        check_choice("channel", self.channel, CHANNELS)
        check_choice("decoder_cov", self.decoder_cov, DECODER_COVARIANCES)
        check_choice("init", self.init, ("pca", "random"))
        check_float("channel_noise", self.channel_noise, 0.0, low_open=True,
                    remedy="Pass the channel-noise variance s² > 0, e.g. channel_noise=1.0.")
        check_float("reg_covar", self.reg_covar, 0.0, remedy="Pass a small non-negative ridge, e.g. reg_covar=1e-6.")
        check_float("init_scale", self.init_scale, 0.0, remedy="Pass a small non-negative number, e.g. 0.1.")
        check_float("tol", self.tol, 0.0, remedy="Pass a small non-negative number, e.g. tol=1e-6 (0 runs max_iter).")
        check_int("max_iter", self.max_iter, low=1, remedy="Pass e.g. max_iter=30.")
        check_int("inner_steps", self.inner_steps, low=1, remedy="Pass e.g. inner_steps=10.")
        check_int("n_init", self.n_init, low=1, remedy="Pass e.g. n_init=1.")
        check_seed(self.seed)
        if not isinstance(self.scale, (bool, np.bool_)):
            raise DataError(f"scale must be True or False; got {self.scale!r}. Pass scale=True to standardise.")
        if self.decoder_cov == "full" and self.reg_covar == 0 and M <= D:
            raise DataError(
                f"decoder_cov='full' with reg_covar=0 needs more rows than features (got {M} rows, n_features = "
                f"{D}): the decoder covariance would be singular. Pass reg_covar > 0 or decoder_cov='isotropic'."
            )

    # --- fitting --------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> InfoMaxProjection:
        """Run the IM algorithm on the rows of X (``y`` is ignored)."""
        Xv = check_X(self, X, reset=True, ensure_min_samples=2)
        M, D = Xv.shape
        self._check_params(M, D)
        self.mean_, self.scale_, Xs, var = _centre_and_scale(Xv, bool(self.scale))
        ridge = float(self.reg_covar) * var
        W_pca = pca_components(Xs, self.n_components)
        Xt = torch.as_tensor(Xs, dtype=torch.float64)
        gens = chain_generators(self.seed, self.n_init)  # start r depends on (seed, r) only

        def one(r: int) -> OptimizerRun:
            rng = as_rng(gens[r])
            W0 = W_pca if self.init == "pca" else _orthonormalise(rng.standard_normal((self.n_components, D)))
            run = self._fit_one(Xt, W0, rng, ridge)
            return OptimizerRun(state=run, trace=np.asarray(run["trace"], dtype=np.float64),
                                converged=bool(run["converged"]), interrupted=False, n_iter=len(run["trace"]) - 1)

        # the driver's one restart loop (the convergence warning below is this estimator's own)
        try:
            kept, runs = run_restarts(self.n_init, one, warn=False, desc="InfoMaxProjection")
        except torch.linalg.LinAlgError:
            raise DataError(
                f"the decoder covariance S_j is not positive definite (decoder_cov={self.decoder_cov!r}, "
                f"reg_covar={self.reg_covar!r}): X has {M} rows and {D} features and its covariance within an expert "
                "is singular (collinear or constant features). Pass reg_covar=1e-6 (a ridge) or "
                "decoder_cov='isotropic'."
            ) from None
        best: dict[str, Any] = kept.state
        finals = [r.objective for r in runs]
        if not all(np.isfinite(best[k]).all() for k in ("W", "V", "b", "U", "S", "q")) \
                or not np.isfinite(best["trace"]).all():  # the checks in _centre_and_scale should make this unreachable
            raise DataError(
                f"InfoMaxProjection reached non-finite parameters on X (mean square {var:.3g} in the model's units, "
                f"channel_noise={self.channel_noise!r}). Rescale X (e.g. X / X.std()) or pass scale=True."
            )
        self.components_ = best["W"]
        self.aux_coef_ = best["V"]
        self.aux_intercept_ = best["b"]
        self.decoder_ = {key: best[key] for key in ("U", "S", "q", "code_mean", "code_cov")}
        self.decoder_["ridge"] = ridge
        self.bound_ = np.asarray(best["trace"])
        self.init_bounds_ = np.asarray(finals)
        self.n_iter_ = len(best["trace"]) - 1
        self.n_components_ = int(self.n_components)
        if self.tol > 0 and not best["converged"]:
            warnings.warn(
                f"InfoMaxProjection: the bound still rose by more than tol={self.tol} after max_iter={self.max_iter} "
                "IM iterations; raise max_iter.", ConvergenceWarning, stacklevel=2,
            )
        return self

    def _fit_one(self, X: torch.Tensor, W0: np.ndarray, rng: np.random.Generator, ridge: float) -> dict[str, Any]:
        M, D = X.shape
        J = int(self.n_auxiliary)
        s2 = float(self.channel_noise)
        cov, channel = self.decoder_cov, self.channel
        rms = math.sqrt(max(float((X * X).sum(dim=1).mean()), 1e-300))
        V = torch.as_tensor(rng.normal(0.0, self.init_scale / rms, (J, D)))
        b = torch.as_tensor(rng.normal(0.0, self.init_scale, J))
        if J == 1:
            V, b = torch.zeros(1, D, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
        W = torch.as_tensor(W0.copy())

        def objective(Wm: torch.Tensor, Vm: torch.Tensor, bm: torch.Tensor, dec: tuple[Any, ...]) -> torch.Tensor:
            return _bound_per_sample(X, Wm, Vm, bm, dec[0], dec[1], dec[2], s2, cov, ridge, channel).mean()

        with torch.no_grad():
            dec = _decoder_step(X, W, _responsibilities(X, V, b)[0], s2, cov, ridge)
            f = float(objective(W, V, b, dec))
        trace = [f]
        steps = {"W": 1.0 / max(float((X * X).sum(dim=1).mean()) / s2, 1e-12), "Vb": 1.0}
        converged = False
        for _ in range(self.max_iter):
            f_start = f
            for _ in range(self.inner_steps):
                W, f, moved_w = self._encoder_line_search(objective, W, V, b, dec, f, steps, "W")
                if J > 1:
                    (V, b), f, moved_v = self._encoder_line_search(objective, W, V, b, dec, f, steps, "Vb")
                else:
                    moved_v = False
                if not (moved_w or moved_v):
                    break
            with torch.no_grad():
                new_dec = _decoder_step(X, W, _responsibilities(X, V, b)[0], s2, cov, ridge)
                f_new = float(objective(W, V, b, new_dec))
            if f_new >= f:  # exact maximiser, so this holds up to rounding; never accept a rounding loss
                dec, f = new_dec, f_new
            trace.append(f)
            if self.tol > 0 and f - f_start <= self.tol * max(1.0, abs(f)):
                converged = True
                break
        U, S, q = (t.detach().numpy().copy() for t in dec)
        with torch.no_grad():
            p = _responsibilities(X, V, b)[0]
            r = p.sum(dim=0).clamp_min(1e-300)
            Y0 = X @ W.T
            m = (p.T @ Y0) / r[:, None]  # W m_j  (J, K)
            dev = Y0[None] - m[:, None, :]
            G = torch.einsum("mj,jmk,jml->jkl", p, dev, dev) / r[:, None, None] + s2 * torch.eye(W.shape[0])
        return {"W": W.numpy().copy(), "V": V.numpy().copy(), "b": b.numpy().copy(), "U": U, "S": S, "q": q,
                "code_mean": m.numpy().copy(), "code_cov": G.numpy().copy(), "trace": trace, "converged": converged}

    @staticmethod
    def _encoder_line_search(
        objective: Any, W: torch.Tensor, V: torch.Tensor, b: torch.Tensor, dec: tuple[Any, ...], f: float,
        steps: dict[str, float], which: str,
    ) -> tuple[Any, float, bool]:
        """One gradient-ascent step with Armijo backtracking on W (Stiefel) or on (V, b); never lowers f."""
        if which == "W":
            Wv = W.clone().requires_grad_(True)
            val = objective(Wv, V, b, dec)
            (g,) = torch.autograd.grad(val, Wv)
            Wn = W.numpy()
            xi = _tangent(g.numpy(), Wn)
            g2 = float(np.sum(xi * xi))
        else:
            Vv, bv = V.clone().requires_grad_(True), b.clone().requires_grad_(True)
            val = objective(W, Vv, bv, dec)
            gV, gb = torch.autograd.grad(val, (Vv, bv))
            g2 = float((gV * gV).sum() + (gb * gb).sum())
        if not math.isfinite(g2) or g2 <= 1e-300:
            return (W if which == "W" else (V, b)), f, False
        t = steps[which]
        with torch.no_grad():
            for _ in range(60):
                if which == "W":
                    cand = torch.as_tensor(_orthonormalise(Wn + t * xi))
                    f_new = float(objective(cand, V, b, dec))
                else:
                    cand_v, cand_b = V + t * gV, b + t * gb
                    f_new = float(objective(W, cand_v, cand_b, dec))
                if math.isfinite(f_new) and f_new >= f + 1e-4 * t * g2:
                    steps[which] = t * 2.0
                    if which == "W":
                        return cand, f_new, True
                    return (cand_v, cand_b), f_new, True
                t *= 0.5
        steps[which] = t * 2.0**30
        return (W if which == "W" else (V, b)), f, False

    # --- using the fit --------------------------------------------------------------------------
    @property
    def _n_features_out(self) -> int:
        return int(self.n_components_)

    def _inputs(self, X: Any) -> np.ndarray:
        check_fitted(self, "components_", call="fit(X)")
        Xv = check_X(self, X, reset=False)
        return (Xv - self.mean_) / self.scale_

    def transform(self, X: Any) -> np.ndarray:
        """The noiseless code W x (x centred and scaled as in fit), (M, n_components)."""
        return self._inputs(X) @ self.components_.T

    def aux_proba(self, X: Any) -> np.ndarray:
        """p(z | x) (eq. 9) for the rows of X, (M, n_auxiliary)."""
        Xs = torch.as_tensor(self._inputs(X))
        p, _ = _responsibilities(Xs, torch.as_tensor(self.aux_coef_), torch.as_tensor(self.aux_intercept_))
        return p.numpy()

    def sample_code(self, X: Any, *, seed: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Send X through the channel: y = W x + s ε and z ~ p(z | x); returns ``(y, z)``."""
        rng = as_rng(seed)
        Y = self.transform(X)
        Y = Y + math.sqrt(float(self.channel_noise)) * rng.standard_normal(Y.shape)
        P = self.aux_proba(X)
        z = (P.cumsum(axis=1) > rng.random((P.shape[0], 1))).argmax(axis=1)
        return Y, z

    def reconstruct(self, Y: Any, z: Any = None) -> np.ndarray:
        """Decoder mean ⟨x⟩_{q(x | y, z)} = U_z y, back in the input units (the chapter's Fig. 4 reconstruction).

        Without ``z`` (the auxiliary channel, where z is not sent) the experts' means are averaged with weights
        p(z_j | y) ∝ q(z_j) N(y; W m_j, W Σ_j Wᵀ + s² I), m_j and Σ_j the responsibility-weighted mean and
        covariance of the training inputs: a moment-matched (as-if-Gaussian per expert) stand-in for the
        Bayes-consistent p(z | y) ∝ p(z) p(y | z) of the chapter's footnote 2 (whose printed weight reads
        p(y | z)). Pass ``z`` for the exact decoder mean of one expert.
        """
        check_fitted(self, "components_", call="fit(X)")
        Yv = np.asarray(Y, dtype=np.float64)
        K = self.n_components_
        if Yv.ndim != 2 or Yv.shape[1] != K or not np.isfinite(Yv).all():
            raise DataError(f"Y must be a finite (n, {K}) array of codes; got shape {Yv.shape}. Pass transform(X).")
        U = self.decoder_["U"]
        if z is None:
            Xs = np.einsum("mj,jdk,mk->md", self.code_posterior(Yv), U, Yv)
        else:
            zv = np.asarray(z)
            if zv.shape != (Yv.shape[0],) or zv.dtype.kind not in "iu" or zv.min() < 0 or zv.max() >= U.shape[0]:
                raise DataError(
                    f"z must hold one auxiliary state in 0..{U.shape[0] - 1} per row of Y ({Yv.shape[0]} rows); "
                    f"got {zv!r:.60}. Pass the z returned by sample_code, or aux_proba(X).argmax(axis=1)."
                )
            Xs = np.einsum("mdk,mk->md", U[zv], Yv)
        return Xs * self.scale_ + self.mean_

    def code_posterior(self, Y: Any) -> np.ndarray:
        """p(z | y) ∝ q(z_j) N(y; W m_j, W Σ_j Wᵀ + s² I) for codes Y (see :meth:`reconstruct`), (n, n_auxiliary)."""
        check_fitted(self, "components_", call="fit(X)")
        Yv = np.asarray(Y, dtype=np.float64)
        means, covs, q = self.decoder_["code_mean"], self.decoder_["code_cov"], self.decoder_["q"]
        logw = np.empty((Yv.shape[0], q.size))
        for j in range(q.size):
            diff = Yv - means[j]
            _, logdet = np.linalg.slogdet(covs[j])
            maha = np.einsum("mk,mk->m", diff @ np.linalg.inv(covs[j]), diff)
            logw[:, j] = np.log(max(float(q[j]), 1e-300)) - 0.5 * (maha + logdet)
        logw -= logw.max(axis=1, keepdims=True)
        w = np.exp(logw)
        return w / w.sum(axis=1, keepdims=True)

    def score_samples(self, X: Any) -> np.ndarray:
        """Per-row value of the bound minus H(x) at the fitted parameters (the terms whose mean is the bound)."""
        Xs = torch.as_tensor(self._inputs(X))
        d = self.decoder_
        with torch.no_grad():
            vals = _bound_per_sample(
                Xs, torch.as_tensor(self.components_), torch.as_tensor(self.aux_coef_),
                torch.as_tensor(self.aux_intercept_), torch.as_tensor(d["U"]), torch.as_tensor(d["S"]),
                torch.as_tensor(d["q"]), float(self.channel_noise), self.decoder_cov, float(d["ridge"]), self.channel,
            )
        return vals.numpy()

    def score(self, X: Any, y: Any = None) -> float:
        """The bound minus H(x) on X at the fitted parameters (mean of :meth:`score_samples`; higher is better)."""
        return float(np.mean(self.score_samples(X)))

    def feature_weights(self, method: str = "encoder") -> FeatureWeights:
        """Per-feature relevance read from the fitted projection.

        ``method="encoder"``: ‖W e_d‖² = Σ_k W_kd², the squared length of feature d's unit axis after projection
        onto the code subspace — the share of that feature's direction that passes through the channel. In
        [0, 1], summing to n_components. The scores are in the units the model saw: with ``scale=True``
        (standardised inputs) features compete on an equal footing; without it, a feature with a larger spread
        tends to get a larger score.

        ``method="decoder"``: Σ_j q(z_j) ‖U_j[d, :]‖², how strongly feature d is reconstructed from the code,
        averaged over the experts (expert-specific loadings are in ``info["per_expert"]``).
        """
        check_fitted(self, "components_", call="fit(X)")
        check_choice("method", method, ("encoder", "decoder"))
        names = getattr(self, "feature_names_in_", None)
        if method == "encoder":
            scores = np.sum(self.components_**2, axis=0)
            info: dict[str, Any] = {"definition": "sum_k W[k, d]^2 (squared norm of the projected unit axis)"}
        else:
            per = np.sum(self.decoder_["U"] ** 2, axis=2)  # (J, D)
            scores = self.decoder_["q"] @ per
            info = {"definition": "sum_j q(z_j) ||U_j[d, :]||^2", "per_expert": per.tolist()}
        info.update(scale=bool(self.scale), channel=self.channel, n_auxiliary=int(self.n_auxiliary))
        return FeatureWeights(scores, method=f"infomax.{method}",
                              feature_names=None if names is None else list(names), info=info)
