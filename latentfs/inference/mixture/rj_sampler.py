"""The reversible-jump sampler of :mod:`latentfs.inference.mixture.reversible_jump` (Richardson & Green 1997): its
state, the model's pieces (log joint, the split/merge map and its Jacobian), the data's units and one sweep of
the moves. The moves, their acceptance ratios and the references are described in the module docstring of
:mod:`latentfs.inference.mixture.reversible_jump`, with the engine spec that runs the sweeps.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import gammaln

from latentfs.models.mixture import UnivariateMixtureK

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
