"""Reversible-jump MCMC for a univariate Gaussian mixture with an unknown number of components.

Richardson & Green (1997), "On Bayesian analysis of mixtures with an unknown number of components (with
discussion)", J. R. Statist. Soc. B 59, 731–792 (R&G below), §3; Green (1995) for the reversible-jump
framework; Titterington (2006) §1.7 for the context. The model conditional on k is
:class:`latentfs.models.mixture.UnivariateMixtureK`; k has the prior Uniform{1, …, k_max}.

Why reversible jump and not Stephens' (2000) birth–death process: R&G's sampler is the benchmark the
galaxies result is quoted from, its moves are stated in closed form, and every move is a discrete-time
Metropolis–Hastings step whose acceptance ratio can be checked term by term (``tests`` compare it with the
prior, where it must reproduce the uniform prior on k). Stephens' continuous-time sampler would need the
death rates of all components at every event, and its output is a time-weighted process, not a chain.

One sweep is R&G's moves (a)–(f), in their order:

(a) w ~ Dirichlet(δ + n_1, …, δ + n_k);
(b) μ_j ~ N((κξ + S_j/σ_j²)/(κ + n_j/σ_j²), 1/(κ + n_j/σ_j²)) for all j, S_j = Σ_{z_i=j} y_i; the draws are then
    sorted and every component quantity permuted with them (R&G reject a draw that breaks the order; as the
    μ_j are conditionally independent the joint draw is permutation-equivariant, so drawing them all and
    sorting leaves the ordered posterior invariant and wastes no draws);
(c) σ_j⁻² ~ Gamma(α + n_j/2, β + ½ Σ_{z_i=j} (y_i − μ_j)²);
(d) z_i ~ Categorical(∝ w_j σ_j⁻¹ exp(−(y_i − μ_j)²/(2σ_j²)));
(e) β ~ Gamma(g + kα, h + Σ_j σ_j⁻²);
(f) split one component or merge two adjacent ones (probabilities b_k, d_k = 1 − b_k);
(g) birth or death of an *empty* component (same probabilities);
with b_1 = 1, b_{k_max} = 0 and b_k = ½ otherwise.

Split / merge acceptance (derived here; it is R&G's eq. (11) with (12) as the Jacobian). Component j
(chosen with probability 1/k) becomes j1, j2 with u1, u2 ~ Beta(2, 2), u3 ~ Beta(1, 1)::

    w_j1 = w_j u1                           w_j2 = w_j (1 − u1)
    μ_j1 = μ_j − u2 σ_j √(w_j2/w_j1)         μ_j2 = μ_j + u2 σ_j √(w_j1/w_j2)
    σ²_j1 = u3 (1 − u2²) σ²_j w_j/w_j1        σ²_j2 = (1 − u3)(1 − u2²) σ²_j w_j/w_j2

which keeps the weight, mean and second moment of component j. The split is rejected at once when μ_j1, μ_j2
are not adjacent in the ordering (merges only pick adjacent pairs, with probability 1/k out of k + 1
components, which cancels the 1/k of choosing j). The observations of j are allocated to j1 or j2 with
probabilities ∝ w_jm N(y_i; μ_jm, σ²_jm) (P_alloc is the probability of the allocation made). With l1, l2 the
resulting counts, the split is accepted with probability min(1, A),

    A = (likelihood ratio) × p(k+1)/p(k) × (k + 1)
        × w_j1^{δ−1+l1} w_j2^{δ−1+l2} / (w_j^{δ−1+l1+l2} B(δ, kδ))
        × √(κ/2π) exp(−κ/2 [(μ_j1 − ξ)² + (μ_j2 − ξ)² − (μ_j − ξ)²])
        × β^α/Γ(α) (σ²_j1 σ²_j2/σ²_j)^{−α−1} exp(−β (σ_j1⁻² + σ_j2⁻² − σ_j⁻²))
        × d_{k+1} / (b_k P_alloc) × 1/(g_{2,2}(u1) g_{2,2}(u2) g_{1,1}(u3))
        × w_j |μ_j1 − μ_j2| σ²_j1 σ²_j2 / (u2 (1 − u2²) u3 (1 − u3) σ²_j)

Term by term: the likelihood ratio of the observations of j; the prior on k; (k + 1)!/k! from the ordering
constraint (the ordered prior is k! times the exchangeable one); the Dirichlet prior with its normalising
constants, Γ((k+1)δ)Γ(δ)^{−k−1}/(Γ(kδ)Γ(δ)^{−k}) = 1/B(δ, kδ), times p(z | w); the priors of the new
means and variances over the old (the variance prior is that of σ² = 1/λ for λ ~ Gamma(α, β), density
β^α/Γ(α) (σ²)^{−α−1} e^{−β/σ²}); the proposal probabilities of merge over split; the densities g_{a,b} of the
Beta(a, b) variables u; and the Jacobian |∂(w_j1, w_j2, μ_j1, μ_j2, σ²_j1, σ²_j2)/∂(w_j, μ_j, σ²_j, u1, u2, u3)|
(checked by finite differences in the tests). A merge of adjacent j1, j2 inverts the map (u1 = w_j1/w_j,
u2 = (μ_j − μ_j1)/(σ_j √(w_j2/w_j1)), u3 = σ²_j1 w_j1/((1 − u2²) σ²_j w_j)) and is accepted with probability
min(1, 1/A), A evaluated at the split that would undo it with P_alloc the probability of the current
allocation of j1's and j2's observations.

Birth / death of an empty component (R&G eq. (13)): a birth draws w ~ Beta(1, k), μ ~ N(ξ, κ⁻¹),
σ⁻² ~ Gamma(α, β) and rescales the other weights by (1 − w); a death removes one of the k0 + 1 empty components
of the larger state, chosen uniformly. The birth is accepted with probability min(1, A),

    A = p(k+1)/p(k) × 1/B(kδ, δ) × w^{δ−1} (1 − w)^{n + kδ − k} × (k + 1)
        × d_{k+1} / ((k0 + 1) b_k) × 1/g_{1,k}(w) × (1 − w)^{k−1}

(the new mean's and variance's priors cancel with their proposals; (1 − w)^n comes from p(z | w); (1 − w)^{k−1}
is the Jacobian of the rescaling), and a death with min(1, 1/A).

``prior_only=True`` drops the likelihood of y given z from every move (z then follows w alone): the chain
must then sample the prior, k ~ Uniform{1, …, k_max} included, which is the tests' check of the acceptance
ratios above (Titterington 2006 §1.9, oracle 10).

**Scale.** R&G's default priors are set from the data's midpoint and range, so the model is equivariant under
y → a + b y. The engine runs on y' = (y − midpoint) / range (values in [−½, ½]) with the prior mapped over
(ξ' = (ξ − midpoint)/R, κ' = κ R², h' = h R²; defaults ξ' = 0, κ' = 1, h' = 10) and returns μ, σ², β and
log f(y | θ) in the data's units; k and w do not change. Data × 1e−200 or × 1e300 or + 1e15 then give the
chain of the original data (R² under- or overflowed in the prior, and the merge's second moment lost every
digit to cancellation). A σ² beyond the float64 range in the data's units (data of scale ≳ 1e154 or
≲ 1e−154) comes back as inf or 0, with a :class:`~latentfs.core.data.DataWarning`.

**Impossible proposals.** A split or merge is rejected before anything is divided by a quantity that can be 0:
the merge's inverse map is written without cancellation, u2 = √(w_j1 w_j2) (μ_j2 − μ_j1)/(w_j σ_j) and
u3 = w_j1 σ²_j1/(w_j1 σ²_j1 + w_j2 σ²_j2) (and 1 − u2² = (w_j1 σ²_j1 + w_j2 σ²_j2)/(w_j σ²_j)); tied means give
u2 = 0, whose Beta(2, 2) density is 0: the reverse split could not have proposed it; log A is a sum of logs,
taken from the pair itself. A split whose weights or variances round to 0, or whose means round to one value,
is rejected (the merge could not return to it).

**Ties.** With tied data R&G's posterior puts no bound on the precision of a component sitting on one tied value
(its conditional grows without limit, and the chain's σ² underflowed). The variances are kept at or above
:data:`VARIANCE_FLOOR` (σ ≥ 2⁻⁵² R: below the data's float resolution a standard deviation cannot be told from
0) by truncating σ⁻²'s prior there; a result with components within 10× of the floor lists them in
``diagnostics["collapsed"]`` and warns (:class:`~latentfs.inference.mixture.em.CollapsedComponentWarning`):
p(k | y) then counts the ties, not clusters.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.special import gammaln

from latentfs.core.data import DataError, check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options
from latentfs.core.registry import register_spec
from latentfs.core.results import Posterior
from latentfs.models.mixture import UnivariateMixtureK

__all__ = [
    "RJMCMC",
    "RJState",
    "log_joint",
    "merge_inverse",
    "predictive_density",
    "split_jacobian",
    "split_parameters",
]

_LOG_2PI = math.log(2.0 * math.pi)
_MOVES = ("split", "merge", "birth", "death")

#: The smallest component variance, in the sampler's units (the data's range R = 1): σ ≥ 2⁻⁵² R, a standard
#: deviation below the data's float resolution, which cannot be told from 0. R&G's posterior is unbounded when
#: a component sits on tied values (its precision's conditional grows without limit); the prior of σ⁻² is
#: truncated at 1/floor. Its normalising constant is left out of the moves' ratios: it is 1 to within 1e−25
#: unless β < 1e−29, which happens only in a fit whose components sit at the floor (flagged as collapsed).
VARIANCE_FLOOR = 2.0**-104
#: A component whose variance is within this factor of :data:`VARIANCE_FLOOR` counts as collapsed.
COLLAPSED = 10.0


class RJState:
    """The sampler's state: k, weights w, ordered means μ, variances σ², allocations z, β, and counters."""

    __slots__ = ("accepted", "beta", "k", "mu", "proposed", "rng", "s2", "w", "z")

    def __init__(self, w: np.ndarray, mu: np.ndarray, s2: np.ndarray, z: np.ndarray, beta: float,
                 rng: np.random.Generator) -> None:
        self.k = int(w.size)
        self.w, self.mu, self.s2, self.z, self.beta, self.rng = w, mu, s2, z, float(beta), rng
        self.proposed = dict.fromkeys(_MOVES, 0)
        self.accepted = dict.fromkeys(_MOVES, 0)


# ----------------------------------------------------------------------------- the model's pieces
def _log_gamma_pdf(x: Any, shape: float, rate: Any) -> Any:
    return shape * np.log(rate) - gammaln(shape) + (shape - 1.0) * np.log(x) - rate * x


def log_joint(state: RJState, y: np.ndarray, prior: dict[str, float]) -> float:
    """log p(β, w, μ, σ⁻², z, y | k) of :class:`~latentfs.models.mixture.UnivariateMixtureK` at the state, in
    its sites' parametrisation (precisions σ⁻²), *without* the ordering factor log k! and the prior on k:
    the quantity the Pyro model's trace gives for the same values."""
    w, mu, lam = state.w, state.mu, 1.0 / state.s2
    d, k = prior["delta"], state.k
    out = _log_gamma_pdf(state.beta, prior["g"], prior["h"])
    out += gammaln(k * d) - k * gammaln(d) + (d - 1.0) * np.log(w).sum()
    out += (0.5 * math.log(prior["kappa"]) - 0.5 * _LOG_2PI - 0.5 * prior["kappa"] * (mu - prior["xi"]) ** 2).sum()
    out += _log_gamma_pdf(lam, prior["alpha"], state.beta).sum()
    z = state.z
    out += np.log(w[z]).sum()
    out += (0.5 * np.log(lam[z]) - 0.5 * _LOG_2PI - 0.5 * lam[z] * (y - mu[z]) ** 2).sum()
    return float(out)


def split_parameters(w: float, mu: float, s2: float, u1: float, u2: float, u3: float) -> np.ndarray:
    """R&G's split map (w, μ, σ², u1, u2, u3) → (w1, w2, μ1, μ2, σ²1, σ²2); see the module docstring. Written
    with w2/w1 = (1 − u1)/u1, so nothing is divided by a weight that may underflow."""
    w1, w2 = w * u1, w * (1.0 - u1)
    sd = math.sqrt(s2)
    mu1 = mu - u2 * sd * math.sqrt((1.0 - u1) / u1)
    mu2 = mu + u2 * sd * math.sqrt(u1 / (1.0 - u1))
    spread = (1.0 - u2 * u2) * s2
    return np.array([w1, w2, mu1, mu2, u3 * spread / u1, (1.0 - u3) * spread / (1.0 - u1)])


def split_jacobian(w: float, mu: float, s2: float, u1: float, u2: float, u3: float) -> float:
    """|∂(w1, w2, μ1, μ2, σ²1, σ²2)/∂(w, μ, σ², u1, u2, u3)| = w |μ1 − μ2| σ²1 σ²2 / (u2 (1 − u2²) u3 (1 − u3) σ²)
    (R&G 1997, eq. (12))."""
    w1, w2, mu1, mu2, v1, v2 = split_parameters(w, mu, s2, u1, u2, u3)
    return float(w * abs(mu1 - mu2) * v1 * v2 / (u2 * (1.0 - u2 * u2) * u3 * (1.0 - u3) * s2))


def _betaln(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _log_beta_pdf(x: float, a: float, b: float) -> float:
    return (a - 1.0) * math.log(x) + (b - 1.0) * math.log1p(-x) - _betaln(a, b)


def _valid_pair(new: np.ndarray) -> bool:
    """w_j1, w_j2 > 0, σ²_j1, σ²_j2 ≥ :data:`VARIANCE_FLOOR`, μ_j1 < μ_j2 and everything finite: a split inside
    the target's support that can be scored (and undone)."""
    w1, w2, mu1, mu2, v1, v2 = (float(x) for x in new)
    return bool(np.all(np.isfinite(new)) and w1 > 0.0 and w2 > 0.0 and min(v1, v2) >= VARIANCE_FLOOR and mu1 < mu2)


def _truncate_precision(lam: np.ndarray, shape: np.ndarray, rate: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """λ ~ Gamma(shape, rate) truncated to λ ≤ 1/:data:`VARIANCE_FLOOR`, given untruncated draws ``lam``: a draw
    inside is kept, one outside is replaced by an inverse-CDF draw from the truncated law (the mixture of the two
    is the truncated law exactly; data without ties never reach the bound, and their draws are unchanged). When
    the truncated law's mass underflows, λ is the bound (its density increases up to it)."""
    top = 1.0 / VARIANCE_FLOOR
    over = ~(lam <= top)
    if not over.any():
        return lam
    from scipy.special import gammainc, gammaincinv

    a, b = np.broadcast_to(shape, lam.shape)[over], np.broadcast_to(rate, lam.shape)[over]
    mass = gammainc(a, b * top)
    redraw = np.where(mass > 0.0, gammaincinv(a, rng.random(a.size) * mass) / b, top)
    out = lam.copy()
    out[over] = np.minimum(np.where(np.isfinite(redraw), redraw, top), top)
    return out


def merge_inverse(w1: float, w2: float, mu1: float, mu2: float, v1: float, v2: float) -> tuple[float, ...] | None:
    """The merged (w, μ, σ²) and the (u1, u2, u3) of the split that undoes it, or None when no split could have
    proposed the pair (tied means, u2 = 0; a zero or non-finite variance). Free of cancellation: σ² = within +
    between with within = (w1 σ²1 + w2 σ²2)/w, u2 = √(w1/w) √(w2/w) (μ2 − μ1)/σ, u3 = w1 σ²1/(w1 σ²1 + w2 σ²2)
    (so 1 − u2² = within/σ², exactly)."""
    w = w1 + w2
    gap = mu2 - mu1
    p1, p2 = w1 / w, w2 / w
    within = p1 * v1 + p2 * v2
    s2 = within + p1 * p2 * gap * gap
    if not (gap > 0.0 and within > 0.0 and p1 > 0.0 and p2 > 0.0 and math.isfinite(s2)):
        return None
    mu = mu1 + p2 * gap
    u2 = math.sqrt(p1) * math.sqrt(p2) * gap / math.sqrt(s2)
    u3 = p1 * v1 / within
    if not (0.0 < p1 < 1.0 and 0.0 < u2 < 1.0 and 0.0 < u3 < 1.0):
        return None
    return w, mu, s2, p1, u2, u3


class DataUnits:
    """The affine map between the data's units and the sampler's y' = (y − c) / R, R the data's range and c its
    midpoint (R&G's ξ), computed without overflow: R is kept as its half, ``half`` (finite for any finite data),
    and ``log_range`` = log R.

    Attributes
    ----------
    centre : float, c = (min + max) / 2.
    half : float, R / 2.
    log_range : float, log R.
    """

    def __init__(self, centre: float, half: float) -> None:
        self.centre, self.half = float(centre), float(half)
        self.log_range = math.log(2.0) + math.log(self.half)

    @classmethod
    def of(cls, y: np.ndarray) -> DataUnits:
        lo, hi = float(np.min(y)), float(np.max(y))
        return cls(0.5 * lo + 0.5 * hi, 0.5 * hi - 0.5 * lo)

    def standardise(self, y: np.ndarray) -> np.ndarray:
        """y' = (y − c) / R, in [−½, ½]."""
        return 0.5 * ((y - self.centre) / self.half)

    def to_data(self, mu: np.ndarray, s2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """μ = c + R μ', σ² = R² σ²' (also β, a variance-scale quantity); under- or overflow gives 0 or inf."""
        with np.errstate(over="ignore", under="ignore"):
            return self.centre + self.half * (2.0 * np.asarray(mu)), (self.half * self.half) * (4.0 * np.asarray(s2))

    def standard_prior(self, model: UnivariateMixtureK, y: np.ndarray) -> dict[str, float]:
        """The model's prior for y': R&G's defaults from y' itself (ξ' = 0, κ' = 1, h' = 10), or the model's
        values in the data's units mapped over (ξ' = (ξ − c)/R, κ' = κ R², h' = h R²)."""
        pr = model.prior(y)
        with np.errstate(over="ignore", under="ignore"):
            if model.mean_prior is not None:
                pr["xi"] = float(0.5 * ((np.float64(model.mean_prior) - self.centre) / self.half))
            if model.mean_precision is not None:
                pr["kappa"] = float(np.float64(model.mean_precision) * self.half * self.half * 4.0)
            if model.beta_rate is not None:
                pr["h"] = float(np.float64(model.beta_rate) * self.half * self.half * 4.0)
        return pr

    def data_prior(self, pr: dict[str, float]) -> dict[str, float]:
        """The prior in the data's units (what ``diagnostics["prior"]`` reports): ξ, κ, h mapped back."""
        with np.errstate(over="ignore", under="ignore", divide="ignore"):
            scale2 = np.float64(self.half) * np.float64(self.half) * 4.0
            return {**pr, "xi": float(self.centre + self.half * 2.0 * pr["xi"]), "kappa": float(pr["kappa"] / scale2),
                    "h": float(pr["h"] / scale2)}

    def describe(self) -> str:
        return f"{self.centre - self.half:.3g} to {self.centre + self.half:.3g}"


class _Sampler:
    """One sweep of R&G's moves for fixed data and prior (see the module docstring)."""

    def __init__(self, y: np.ndarray, prior: dict[str, float], kmax: int, power: float) -> None:
        self.y, self.n = y, y.size
        self.pr, self.kmax, self.t = prior, kmax, power

    # ---------------------------------------------------------------- proposal probabilities
    def b(self, k: int) -> float:
        return 0.0 if k >= self.kmax else (1.0 if k <= 1 else 0.5)

    def d(self, k: int) -> float:
        return 1.0 - self.b(k) if k > 1 else 0.0

    # ---------------------------------------------------------------- helpers
    def _loglik_terms(self, y: np.ndarray, mu: Any, s2: Any) -> Any:
        return -0.5 * (_LOG_2PI + np.log(s2) + (y - mu) ** 2 / s2)

    def _log_joint_matrix(self, st: RJState, power: float) -> np.ndarray:
        """log w_j + power × log N(y_i; μ_j, σ²_j), shape (n, k)."""
        c = np.log(st.w) - power * 0.5 * (_LOG_2PI + np.log(st.s2))
        r = self.y[:, None] - st.mu
        r *= r
        r *= -0.5 * power / st.s2
        r += c
        return r

    def observed_loglik(self, st: RJState) -> np.ndarray:
        """log f(y_i | θ) per observation."""
        lj = self._log_joint_matrix(st, 1.0)
        m = lj.max(1)
        lj -= m[:, None]
        np.exp(lj, out=lj)
        return m + np.log(lj.sum(1))

    @staticmethod
    def _reorder(st: RJState, order: np.ndarray) -> None:
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        st.w, st.mu, st.s2 = st.w[order], st.mu[order], st.s2[order]
        st.z = inv[st.z]

    # ---------------------------------------------------------------- fixed-k moves (a)–(e)
    def gibbs(self, st: RJState) -> float:
        pr, rng, y, t, k = self.pr, st.rng, self.y, self.t, st.k
        counts = np.bincount(st.z, minlength=k).astype(np.float64)
        g = rng.standard_gamma(pr["delta"] + counts)
        st.w = np.maximum(g / g.sum(), 1e-300)
        sums = np.bincount(st.z, weights=y, minlength=k)
        prec = pr["kappa"] + t * counts / st.s2
        mean = (pr["kappa"] * pr["xi"] + t * sums / st.s2) / prec
        st.mu = mean + rng.standard_normal(k) / np.sqrt(prec)
        order = np.argsort(st.mu, kind="stable")
        if np.any(order != np.arange(k)):
            self._reorder(st, order)
            counts = counts[order]
        ss = np.bincount(st.z, weights=(y - st.mu[st.z]) ** 2, minlength=k)
        shape, rate = pr["alpha"] + 0.5 * t * counts, st.beta + 0.5 * t * ss
        lam = rng.standard_gamma(shape) / rate
        st.s2 = 1.0 / _truncate_precision(lam, shape, rate, rng)
        lj = self._log_joint_matrix(st, t)
        m = lj.max(1)
        lj -= m[:, None]
        np.exp(lj, out=lj)
        cum = np.cumsum(lj, 1)
        u = rng.random(self.n) * cum[:, -1]
        st.z = np.minimum((cum < u[:, None]).sum(1), k - 1)
        st.beta = rng.standard_gamma(pr["g"] + k * pr["alpha"]) / (pr["h"] + (1.0 / st.s2).sum())
        # log f(y | θ) at the (w, μ, σ²) the allocations were drawn from (the log-likelihood when t = 1)
        return float((m + np.log(cum[:, -1])).sum())

    # ---------------------------------------------------------------- split / merge
    def _log_split_ratio(
        self, k: int, w: float, mu: float, s2: float, new: np.ndarray, u: tuple[float, float, float],
        l1: int, l2: int, dloglik: float, log_palloc: float, beta: float,
    ) -> float:
        """log A for splitting one of k components into two (module docstring)."""
        pr = self.pr
        d, a, kap, xi = pr["delta"], pr["alpha"], pr["kappa"], pr["xi"]
        w1, w2, mu1, mu2, v1, v2 = new
        u1, u2, u3 = u
        log_v1, log_v2, log_s2 = math.log(v1), math.log(v2), math.log(s2)
        out = self.t * dloglik + math.log(k + 1)
        out += (d - 1.0 + l1) * math.log(w1) + (d - 1.0 + l2) * math.log(w2) - (d - 1.0 + l1 + l2) * math.log(w)
        out -= _betaln(d, k * d)
        out += 0.5 * math.log(kap / (2.0 * math.pi)) - 0.5 * kap * ((mu1 - xi) ** 2 + (mu2 - xi) ** 2 - (mu - xi) ** 2)
        out += a * math.log(beta) - math.lgamma(a) - (a + 1.0) * (log_v1 + log_v2 - log_s2)
        out -= beta * (1.0 / v1 + 1.0 / v2 - 1.0 / s2)
        out += math.log(self.d(k + 1)) - math.log(self.b(k)) - log_palloc
        out -= _log_beta_pdf(u1, 2.0, 2.0) + _log_beta_pdf(u2, 2.0, 2.0) + _log_beta_pdf(u3, 1.0, 1.0)
        # the Jacobian w |μ1 − μ2| σ²1 σ²2 / (u2 (1 − u2²) u3 (1 − u3) σ²), as a sum of logs (a product underflowed)
        out += math.log(w) + math.log(abs(mu1 - mu2)) + log_v1 + log_v2 - log_s2
        out -= math.log(u2) + math.log1p(-u2 * u2) + math.log(u3) + math.log1p(-u3)
        return out

    def _pair_alloc(self, y: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Log probabilities of allocating each y to the first / second of a split pair, and the log-likelihoods."""
        w1, w2, mu1, mu2, v1, v2 = new
        ll1, ll2 = self._loglik_terms(y, mu1, v1), self._loglik_terms(y, mu2, v2)
        a1, a2 = math.log(w1) + self.t * ll1, math.log(w2) + self.t * ll2
        m = np.maximum(a1, a2)
        lse = m + np.log(np.exp(a1 - m) + np.exp(a2 - m))
        return a1 - lse, a2 - lse, np.stack([ll1, ll2])

    def split(self, st: RJState) -> bool:
        rng, k = st.rng, st.k
        j = int(rng.integers(k))
        u = (float(rng.beta(2.0, 2.0)), float(rng.beta(2.0, 2.0)), float(rng.random()))
        if not (0.0 < u[0] < 1.0 and 0.0 < u[1] < 1.0 and 0.0 < u[2] < 1.0):
            return False
        w, mu, s2 = float(st.w[j]), float(st.mu[j]), float(st.s2[j])
        new = split_parameters(w, mu, s2, *u)
        if not _valid_pair(new):
            return False  # a weight or variance rounded to 0, or the means to one value: no merge returns here
        if (j > 0 and new[2] <= st.mu[j - 1]) or (j < k - 1 and new[3] >= st.mu[j + 1]):
            return False  # j1, j2 would not be adjacent: the reverse merge could not propose this state
        members = np.flatnonzero(st.z == j)
        yj = self.y[members]
        lp1, lp2, ll = self._pair_alloc(yj, new)
        to2 = rng.random(yj.size) < np.exp(lp2)
        log_palloc = float(np.where(to2, lp2, lp1).sum())
        dloglik = float(np.where(to2, ll[1], ll[0]).sum() - self._loglik_terms(yj, mu, s2).sum())
        l2 = int(to2.sum())
        log_a = self._log_split_ratio(k, w, mu, s2, new, u, yj.size - l2, l2, dloglik, log_palloc, st.beta)
        if not math.log(rng.random()) < log_a:
            return False
        st.w = np.concatenate([st.w[:j], new[0:2], st.w[j + 1:]])
        st.mu = np.concatenate([st.mu[:j], new[2:4], st.mu[j + 1:]])
        st.s2 = np.concatenate([st.s2[:j], new[4:6], st.s2[j + 1:]])
        z = st.z
        z[z > j] += 1
        z[members[to2]] = j + 1
        st.k = k + 1
        return True

    def merge(self, st: RJState) -> bool:
        rng, k = st.rng, st.k
        j = int(rng.integers(k - 1))  # merge j and j + 1
        w1, w2 = float(st.w[j]), float(st.w[j + 1])
        mu1, mu2 = float(st.mu[j]), float(st.mu[j + 1])
        v1, v2 = float(st.s2[j]), float(st.s2[j + 1])
        inverse = merge_inverse(w1, w2, mu1, mu2, v1, v2)
        if inverse is None:
            return False  # rejected before any division: no split proposes tied means or a zero variance
        w, mu, s2, u1, u2, u3 = inverse
        new = np.array([w1, w2, mu1, mu2, v1, v2])
        in1, in2 = st.z == j, st.z == j + 1
        members = np.flatnonzero(in1 | in2)
        yj = self.y[members]
        lp1, lp2, ll = self._pair_alloc(yj, new)
        is2 = st.z[members] == j + 1
        log_palloc = float(np.where(is2, lp2, lp1).sum())
        dloglik = float(np.where(is2, ll[1], ll[0]).sum() - self._loglik_terms(yj, mu, s2).sum())
        l2 = int(is2.sum())
        log_a = self._log_split_ratio(
            k - 1, w, mu, s2, new, (u1, u2, u3), yj.size - l2, l2, dloglik, log_palloc, st.beta
        )
        if not math.log(rng.random()) < -log_a:
            return False
        st.w = np.concatenate([st.w[:j], [w], st.w[j + 2:]])
        st.mu = np.concatenate([st.mu[:j], [mu], st.mu[j + 2:]])
        st.s2 = np.concatenate([st.s2[:j], [s2], st.s2[j + 2:]])
        z = st.z
        z[z > j] -= 1
        st.k = k - 1
        return True

    # ---------------------------------------------------------------- birth / death of empty components
    def _log_birth_ratio(self, k: int, wnew: float, n_empty_after: int) -> float:
        """log A for a birth from k to k + 1 components with new weight ``wnew``; ``n_empty_after`` = k0 + 1."""
        d = self.pr["delta"]
        out = -_betaln(k * d, d) + (d - 1.0) * math.log(wnew)
        out += (self.n + k * d - k) * math.log1p(-wnew) + math.log(k + 1)
        out += math.log(self.d(k + 1)) - math.log(n_empty_after) - math.log(self.b(k))
        out -= _log_beta_pdf(wnew, 1.0, float(k))
        out += (k - 1) * math.log1p(-wnew)
        return out

    def birth(self, st: RJState) -> bool:
        rng, k, pr = st.rng, st.k, self.pr
        wnew = float(rng.beta(1.0, k))
        if not 0.0 < wnew < 1.0:
            return False
        mu = pr["xi"] + rng.standard_normal() / math.sqrt(pr["kappa"])
        draw = float(rng.standard_gamma(pr["alpha"]))
        s2 = st.beta / draw if draw > 0.0 else math.inf  # 1/λ, λ ~ Gamma(α, β): the prior's draw
        if not VARIANCE_FLOOR <= s2 < math.inf:
            return False  # outside the (truncated) prior's support: a proposal the target gives density 0
        n_empty = int((np.bincount(st.z, minlength=k) == 0).sum())
        if not math.log(rng.random()) < self._log_birth_ratio(k, wnew, n_empty + 1):
            return False
        pos = int(np.searchsorted(st.mu, mu))
        st.w = np.insert(st.w * (1.0 - wnew), pos, wnew)
        st.mu = np.insert(st.mu, pos, mu)
        st.s2 = np.insert(st.s2, pos, s2)
        st.z[st.z >= pos] += 1
        st.k = k + 1
        return True

    def death(self, st: RJState) -> bool:
        rng, k = st.rng, st.k
        empty = np.flatnonzero(np.bincount(st.z, minlength=k) == 0)
        if empty.size == 0:
            return False
        j = int(empty[rng.integers(empty.size)])
        wj = float(st.w[j])
        if not math.log(rng.random()) < -self._log_birth_ratio(k - 1, wj, int(empty.size)):
            return False
        st.w = np.delete(st.w, j) / (1.0 - wj)
        st.mu, st.s2 = np.delete(st.mu, j), np.delete(st.s2, j)
        st.z[st.z > j] -= 1
        st.k = k - 1
        return True

    # ---------------------------------------------------------------- a sweep
    def sweep(self, st: RJState) -> float:
        ll = self.gibbs(st)
        for pair in (("split", "merge"), ("birth", "death")):
            r, b = st.rng.random(), self.b(st.k)
            if r >= b + self.d(st.k):
                continue  # k_max = 1: no jumps
            move = pair[0] if r < b else pair[1]
            st.proposed[move] += 1
            st.accepted[move] += bool(getattr(self, move)(st))
        return ll


# ----------------------------------------------------------------------------- the engine
def _prior_only(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise DataError(f"{name} must be True or False; got {value!r}.")
    return bool(value)


@dataclass
class RJFit:
    """What one ``rjmcmc`` fit works on: the data in the sampler's units, the map back, the prior there, the
    sweep, the log Jacobian log f(y | θ) − log f(y' | θ') = −n log R, and the checked ``init_k``."""

    model: UnivariateMixtureK
    y: np.ndarray
    units: DataUnits
    prior: dict[str, float]
    sampler: _Sampler
    power: float
    log_jacobian: float
    init_k: int | None


class RJMCMC(EngineSpec):
    """Richardson & Green's (1997) reversible-jump sampler (:func:`latentfs.fit` with ``method="rjmcmc"``).

    Options (``option_table``): ``num_chains`` (2), ``num_warmup`` (2000), ``num_samples`` (10000), ``thin`` (1):
    sweeps per chain ``num_warmup + num_samples × thin``, one draw kept every ``thin`` sweeps; ``seed``;
    ``init_k``: the starting k of every chain, by default chain c starts at a k drawn uniformly from
    1..min(k_max, 10) (dispersed starts, so that R̂ on k means something); ``prior_only``: drop the likelihood of
    y given z, the chain then samples the prior (a check of the sampler); ``progress``; ``warn``. The model's
    ``max_components`` is k_max; the prior on k is uniform on 1..k_max.

    The pipeline runs the chains (chain c from the c-th generator spawned from the seed), records the seed and
    the run diagnostics and checks R̂ / ESS of every sampled site, on the standardised data
    (:class:`~latentfs.core.driver.ConvergenceWarning` when ``warn``); :meth:`after_align` then maps the draws to the
    data's units. No relabelling: R&G's ordering of the means is the labelling.

    Returns a Posterior with draws (chain, draw, …): ``k`` (), ``beta`` (), and ``weights``, ``means``,
    ``variances`` stored as (chain, draw, k_max) arrays, the components of a draw with k components in the first
    k slots in increasing order of their means and NaN after (the draws are ragged across k).
    ``extras["k_posterior"]`` (k_max,) is p(k | y) from all draws, ``extras["k_prior"]`` the prior;
    ``diagnostics["acceptance"]`` gives the acceptance rate of each move type; R̂ / ESS are in
    ``diagnostics["convergence"]`` (of a padded site, on the slots filled in every draw). ``sample_stats
    ["total_log_likelihood"]`` holds log f(y | θ) per draw. ``diagnostics["collapsed"]`` lists components whose
    variance sat at the floor (tied data; module docstring), [] when none. Means, variances, β and log-likelihoods
    are in the data's units (the sampler runs on the standardised data). Ctrl-C keeps the draws made so far.

    Examples
    --------
    >>> import numpy as np, latentfs
    >>> from latentfs.models.mixture import UnivariateMixtureK
    >>> y = np.concatenate([np.random.default_rng(0).normal(m, 1.0, 60) for m in (-5, 5)])
    >>> post = latentfs.fit(UnivariateMixtureK(max_components=10), y, method="rjmcmc",
    ...                     num_warmup=200, num_samples=500, seed=0, warn=False)
    >>> post.samples("k").shape, int(np.argmax(post.extras["k_posterior"])) + 1
    ((2, 500), 2)
    """

    method = "rjmcmc"
    kind = "sampler"
    desc = "RJMCMC"
    options = {
        **chain_options(num_chains=2, num_warmup=2000, num_samples=10000),
        # its rule needs the model's max_components: checked in prepare
        "init_k": Option(None, None, "int in 1..max_components, or None",
                         "the starting k of every chain; None draws it uniformly from 1..min(max_components, 10)"),
        "prior_only": Option(False, _prior_only, "bool", "drop the likelihood of the data: sample the prior"),
    }

    def prepare(self, model: Any, data: Any, o: Options) -> RJFit:
        if not isinstance(model, UnivariateMixtureK):
            raise DataError(f"model must be a UnivariateMixtureK; got {type(model).__name__}.")
        kmax = model.max_components
        init_k = None if o.init_k is None else check_int(
            "init_k", o.init_k, low=1, high=kmax, remedy="Pass a starting k within 1..max_components.")
        power = 0.0 if o.prior_only else 1.0
        raw = model.check_data(data, name="data")
        units = DataUnits.of(raw)
        y = units.standardise(raw)
        prior = units.standard_prior(model, y)
        return RJFit(model, y, units, prior, _Sampler(y, prior, kmax, power), power, -y.size * units.log_range,
                     init_k)

    def init(self, prep: RJFit, o: Options, gen: torch.Generator) -> RJState:
        y, kmax = prep.y, prep.model.max_components
        rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=gen).item()))
        k = prep.init_k if prep.init_k is not None else int(rng.integers(1, min(kmax, 10) + 1))
        qs = np.quantile(y, (np.arange(k) + 0.5) / k)
        mu = np.sort(qs + 1e-9 * np.arange(k))
        s2 = np.full(k, (np.ptp(y) / k) ** 2 / 4.0)
        beta = prep.prior["g"] / prep.prior["h"]
        st = RJState(np.full(k, 1.0 / k), mu, s2, np.zeros(y.size, dtype=np.int64), beta, rng)
        st.z = np.argmin(np.abs(y[:, None] - mu), axis=1).astype(np.int64)
        return st

    def sample(self, prep: RJFit, o: Options, state: RJState, gen: torch.Generator) -> tuple[RJState, float]:
        return state, prep.sampler.sweep(state) + prep.power * prep.log_jacobian

    def collect(self, prep: RJFit, o: Options, state: RJState) -> dict[str, Any]:
        # μ, σ², β in the sampler's units: checked there by the pipeline, mapped to the data's in after_align
        kmax = prep.model.max_components
        pad = np.full((3, kmax), np.nan)
        pad[0, : state.k] = state.w
        pad[1, : state.k], pad[2, : state.k] = state.mu, state.s2
        return {
            "k": np.int64(state.k),
            "beta": np.float64(state.beta),
            "weights": pad[0],
            "means": pad[1],
            "variances": pad[2],
            "log_likelihood": np.float64(prep.sampler.observed_loglik(state).sum() + prep.log_jacobian),
            "at_floor": np.int64((state.s2 <= COLLAPSED * VARIANCE_FLOOR).sum()),
        }

    def export(self, prep: RJFit, o: Options, outcome: Any) -> Export:
        kmax = prep.model.max_components
        draws = dict(outcome.draws)
        total_ll = draws.pop("log_likelihood")
        at_floor = draws.pop("at_floor")
        collapsed_share = float((at_floor > 0).mean())
        collapsed = [] if collapsed_share == 0.0 else [{
            "component": "any", "feature": "y", "relative_variance": VARIANCE_FLOOR, "weight": None,
            "share_of_draws": collapsed_share, "most_at_floor": int(at_floor.max()),
        }]
        ks = draws["k"]
        k_post = np.bincount(ks.ravel() - 1, minlength=kmax)[:kmax] / ks.size
        proposed = {m: sum(s.proposed[m] for s in outcome.final_states) for m in _MOVES}
        accepted = {m: sum(s.accepted[m] for s in outcome.final_states) for m in _MOVES}
        acceptance = {m: (accepted[m] / proposed[m] if proposed[m] else math.nan) for m in _MOVES}
        comp = ("component",)
        return Export(
            dims={"k": (), "beta": (), "weights": comp, "means": comp, "variances": comp},
            coords={"component": [str(i) for i in range(kmax)]},
            draws=draws,
            diagnostics={
                "observation_dim": "sample",
                "n_observations": int(prep.y.size),
                "acceptance": acceptance,
                "proposed": proposed,
                "prior": prep.units.data_prior(prep.prior),
                "collapsed": collapsed,
                "prior_only": bool(o.prior_only),
                "storage": "weights/means/variances padded to max_components with NaN; first k slots, means "
                           "increasing",
            },
            extras={"k_posterior": k_post, "k_prior": np.full(kmax, 1.0 / kmax)},
            sample_stats={"total_log_likelihood": total_ll},
        )

    def checked_sites(self, prep: RJFit, o: Options) -> list[str]:
        # k alone, as before the pipeline: the padded weights, means and variances change meaning with k (slot j
        # is the j-th smallest mean of whichever k the draw has), so their R-hat mixes models
        return ["k"]

    def after_align(self, post: Any, prep: RJFit, o: Options, outcome: Any) -> None:
        """The draws of μ, σ² and β mapped to the data's units, once R̂ / ESS are checked on the standardised data
        (where they are finite at any scale: an R̂ of variances beyond float64 would be NaN; R̂ and ESS do not change
        under the affine map); the warnings of a fit at the variance floor and of variances outside float64."""
        # samples() hands back the stored arrays: map them where they are (NaN padding stays NaN)
        means, variances, beta = post.samples("means"), post.samples("variances"), post.samples("beta")
        means[...], variances[...] = prep.units.to_data(means, variances)
        beta[...] = prep.units.to_data(np.zeros(1), beta)[1]
        if not o.warn:
            return
        for flag in post.diagnostics["collapsed"]:  # at most one: "any" component
            from latentfs.inference.mixture.em import CollapsedComponentWarning

            warnings.warn(
                f"rjmcmc on UnivariateMixtureK: in {flag['share_of_draws']:.0%} of the draws a component's variance "
                f"sits at the floor σ² = 2^-104 R² (R the data's range; up to {flag['most_at_floor']} components in "
                "one draw), the σ⁻² prior's truncation is then no longer negligible, "
                "components collapse onto tied values, where the model's likelihood has no bound, and p(k | y) "
                "follows the ties. Jitter or de-round the data (add noise within its rounding), or use a prior that "
                "bounds the variances (a larger precision_shape with a fixed beta_rate).",
                CollapsedComponentWarning,
                stacklevel=4,
            )
        if np.isinf(variances).any() or (variances == 0.0).any() or not np.isfinite(beta).all():
            from latentfs.core.data import DataWarning

            warnings.warn(
                f"rjmcmc on UnivariateMixtureK: the component variances in the data's units (range "
                f"{prep.units.describe()}) are outside the float64 range and are reported as inf or 0 (β likewise); "
                "k, the weights and the means were sampled on the standardised data and are unaffected. Divide the "
                "data by a constant to read the variances.",
                DataWarning,
                stacklevel=4,
            )


def predictive_density(result: Posterior, grid: Any, *, max_draws: int = 4000) -> np.ndarray:
    """Posterior predictive density E[f(y | θ) | data] at the points of ``grid`` from an ``rjmcmc`` result
    (averaged over k as well as θ; label-invariant). At most ``max_draws`` draws, evenly spaced, are used.

    Examples
    --------
    >>> import numpy as np, latentfs
    >>> from latentfs.models.mixture import UnivariateMixtureK
    >>> y = np.random.default_rng(1).normal(0.0, 1.0, 50)
    >>> post = latentfs.fit(UnivariateMixtureK(max_components=4), y, method="rjmcmc", num_warmup=50,
    ...                     num_samples=100, seed=0, warn=False)
    >>> dens = predictive_density(post, np.linspace(-6, 6, 601))
    >>> bool(abs(dens.sum() * 0.02 - 1.0) < 0.01)
    True
    """
    if getattr(result, "method", None) != "rjmcmc":
        raise DataError(
            f"result must come from latentfs.fit(..., method='rjmcmc'); got method {getattr(result, 'method', None)!r}."
        )
    g = np.asarray(grid, dtype=np.float64).ravel()
    if g.size == 0 or not np.all(np.isfinite(g)):
        raise DataError(
            f"grid must be a non-empty vector of finite values; got {g.size} values. Pass np.linspace(...)."
        )
    max_draws = check_int("max_draws", max_draws, low=1)
    kmax = result.samples("weights").shape[-1]
    w_all = result.samples("weights").reshape(-1, kmax)
    idx = np.unique(np.linspace(0, w_all.shape[0] - 1, min(max_draws, w_all.shape[0])).astype(int))
    w = w_all[idx]
    mu = result.samples("means").reshape(-1, kmax)[idx]
    s2 = result.samples("variances").reshape(-1, kmax)[idx]
    out = np.zeros(g.size)
    for a in range(0, idx.size, 256):
        ww, mm, vv = (np.nan_to_num(v[a:a + 256], nan=1.0) for v in (w, mu, s2))
        ww = np.where(np.isnan(w[a:a + 256]), 0.0, ww)
        dens = ww[:, None, :] * np.exp(-0.5 * (g[None, :, None] - mm[:, None, :]) ** 2 / vv[:, None, :])
        out += (dens / np.sqrt(2.0 * np.pi * vv[:, None, :])).sum((0, 2))
    return out / idx.size


rjmcmc = register_spec(RJMCMC(), UnivariateMixtureK)
