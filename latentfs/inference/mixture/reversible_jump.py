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

from latentfs.core.data import DataError, check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options
from latentfs.core.registry import register_spec
from latentfs.core.results import Posterior
from latentfs.inference.mixture.rj_sampler import (  # noqa: F401  (the sampler, re-exported)
    _LOG_2PI,
    _MOVES,
    COLLAPSED,
    VARIANCE_FLOOR,
    DataUnits,
    RJState,
    _betaln,
    _log_beta_pdf,
    _log_gamma_pdf,
    _Sampler,
    _truncate_precision,
    _valid_pair,
    log_joint,
    merge_inverse,
    split_jacobian,
    split_parameters,
)
from latentfs.models.mixture import UnivariateMixtureK

__all__ = [
    "RJMCMC",
    "RJState",
    "log_joint",
    "merge_inverse",
    "predictive_density",
    "spaced_draws",
    "split_jacobian",
    "split_parameters",
]


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
    w, mu, s2 = spaced_draws(result, check_int("max_draws", max_draws, low=1))
    out = np.zeros(g.size)
    for a in range(0, w.shape[0], 256):
        ww, mm, vv = (np.nan_to_num(v[a:a + 256], nan=1.0) for v in (w, mu, s2))
        ww = np.where(np.isnan(w[a:a + 256]), 0.0, ww)
        dens = ww[:, None, :] * np.exp(-0.5 * (g[None, :, None] - mm[:, None, :]) ** 2 / vv[:, None, :])
        out += (dens / np.sqrt(2.0 * np.pi * vv[:, None, :])).sum((0, 2))
    return out / w.shape[0]


def spaced_draws(result: Any, max_draws: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At most ``max_draws`` kept draws of an ``rjmcmc`` result, evenly spaced over all chains' draws: (weights,
    means, variances), each (draws, max_components), NaN in the components a draw does not have."""
    kmax = result.samples("weights").shape[-1]
    w = result.samples("weights").reshape(-1, kmax)
    idx = np.unique(np.linspace(0, w.shape[0] - 1, min(max_draws, w.shape[0])).astype(int))
    return w[idx], result.samples("means").reshape(-1, kmax)[idx], result.samples("variances").reshape(-1, kmax)[idx]


rjmcmc = register_spec(RJMCMC(), UnivariateMixtureK)
