"""Held-out likelihood estimators against brute force on a tiny corpus (digest book part 1, §1.8, §1.10)."""

import numpy as np
import pytest
from scipy import integrate, stats

import latentfs
from latentfs.core.data import DataError, DataWarning
from latentfs.evaluate.heldout import completion_loglik
from latentfs.evaluate.heldout_estimators import (
    HeldOutLikelihood,
    exact_loglik,
    heldout_loglik,
    importance_sampling,
    left_to_right,
    per_token_loglik,
    perplexity,
    select_n_components,
    vb_bound,
)
from latentfs.models.dca import DirichletDCA
from latentfs.models.plsa import PLSA

THETA = np.array([[0.55, 0.25, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]])
ALPHA = np.array([0.5, 0.8])
DOCS = np.array([[1, 0, 0, 0], [2, 1, 0, 0], [0, 1, 1, 2], [1, 1, 1, 1], [3, 0, 0, 2], [0, 0, 4, 1]])


@pytest.fixture(scope="module")
def exact():
    return exact_loglik(THETA, DOCS, ALPHA).per_document


def test_exact_enumeration_equals_quadrature_and_the_one_token_closed_form(exact):
    # one token: p(x) = Σ_k α_k / Σα θ_kx
    assert exact[0] == pytest.approx(np.log(ALPHA @ THETA[:, 0] / ALPHA.sum()), rel=1e-12)
    # K = 2: m = (t, 1 − t) with t ~ Beta(α_1, α_2); integrate the sequence likelihood
    for doc, value in zip(DOCS, exact, strict=True):
        def integrand(t, doc=doc):
            probs = t * THETA[0] + (1 - t) * THETA[1]
            return np.prod(probs ** doc) * stats.beta.pdf(t, ALPHA[0], ALPHA[1])
        quad = integrate.quad(integrand, 0, 1, limit=200)[0]
        assert value == pytest.approx(np.log(quad), rel=1e-6)


@pytest.mark.parametrize(("proposal", "atol"), [("posterior", 0.01), ("prior", 0.03)])
def test_importance_sampling_close_to_brute_force(exact, proposal, atol):
    est = importance_sampling(THETA, DOCS, ALPHA, proposal=proposal, n_samples=20000, seed=1)
    np.testing.assert_allclose(est.per_document, exact, atol=atol)


@pytest.mark.parametrize("proposal", ["posterior", "prior"])
def test_importance_sampling_is_unbiased_for_p(exact, proposal):
    doc, target = DOCS[4:5], exact[4]
    rng = np.random.default_rng(20261122)
    small = np.array([importance_sampling(THETA, doc, ALPHA, proposal=proposal, n_samples=3, seed=rng).per_document[0]
                      for _ in range(600)])
    ratio = np.exp(small - target)
    # E[p̂] = p: z-test at 4.5 standard errors (false-alarm rate ≈ 7e-6 for a correct estimator)
    assert abs(ratio.mean() - 1) < 4.5 * ratio.std(ddof=1) / np.sqrt(ratio.size)


@pytest.mark.parametrize("proposal", ["posterior", "prior"])
def test_log_importance_estimate_is_a_stochastic_lower_bound_that_tightens(exact, proposal):
    rng = np.random.default_rng(5)

    def gaps(S, reps):
        return np.array([importance_sampling(THETA, DOCS, ALPHA, proposal=proposal, n_samples=S, seed=rng)
                         .per_document.sum() - exact.sum() for _ in range(reps)])

    one, many = gaps(1, 150), gaps(300, 40)
    se_one, se_many = one.std(ddof=1) / np.sqrt(150), many.std(ddof=1) / np.sqrt(40)
    # E[log p̂] < log p (Jensen), seen at 3 standard errors (false-alarm rate 0.13 % for a correct estimator
    # whose gap were 0; the gap here is several standard errors)
    assert one.mean() < -3 * se_one
    # more draws: closer to log p, from below
    assert many.mean() > one.mean() + 3 * np.hypot(se_one, se_many)
    assert many.mean() < 4 * se_many


def test_pure_q_proposal_has_heavy_tailed_weights_but_stays_a_lower_bound_in_expectation(exact):
    # q alone (defensive=0): a_k ≥ 2 α_k here, so the weights' variance is infinite (docstring)
    est = importance_sampling(THETA, DOCS, ALPHA, defensive=0.0, n_samples=4000, seed=3)
    assert est.info["defensive"] == 0.0
    np.testing.assert_allclose(est.per_document, exact, atol=0.05)
    rng = np.random.default_rng(11)
    logs = np.array([importance_sampling(THETA, DOCS[3:4], ALPHA, defensive=0.0, n_samples=5, seed=rng)
                     .per_document[0] for _ in range(300)])
    assert logs.mean() < exact[3]


def test_left_to_right_close_to_brute_force(exact):
    # run-to-run sd measured at these sizes: ≈ 0.013 (wallach, 10000 particles) and ≈ 0.008 (sequential,
    # 3000 particles) on the 5-token document; tolerances are 3–4 sd
    wallach = left_to_right(THETA, DOCS, ALPHA, n_particles=10000, seed=2)
    np.testing.assert_allclose(wallach.per_document, exact, atol=0.04)
    sequential = left_to_right(THETA, DOCS, ALPHA, n_particles=3000, variant="sequential", seed=2)
    np.testing.assert_allclose(sequential.per_document, exact, atol=0.03)
    assert wallach.info == {"n_particles": 10000, "variant": "wallach"}


def test_sequential_left_to_right_is_unbiased(exact):
    doc, target = DOCS[2:3], exact[2]
    rng = np.random.default_rng(7)
    ratio = np.exp([left_to_right(THETA, doc, ALPHA, n_particles=2, variant="sequential", seed=rng).per_document[0]
                    - target for _ in range(600)])
    # z-test at 4.5 standard errors (false-alarm rate ≈ 7e-6)
    assert abs(ratio.mean() - 1) < 4.5 * ratio.std(ddof=1) / np.sqrt(ratio.size)


def test_vb_bound_is_below_and_tight_when_exact(exact):
    bound = vb_bound(THETA, DOCS, ALPHA).per_document
    assert np.all(bound <= exact + 1e-10) and np.any(bound < exact - 1e-3)
    # K = 1 and disjoint supports: q(m) is the exact posterior, the bound is tight
    one = np.array([[0.4, 0.3, 0.2, 0.1]])
    np.testing.assert_allclose(vb_bound(one, DOCS, 0.7).per_document, exact_loglik(one, DOCS, 0.7).per_document,
                               rtol=1e-10)
    disjoint = np.array([[0.6, 0.4, 0.0, 0.0], [0.0, 0.0, 0.3, 0.7]])
    np.testing.assert_allclose(vb_bound(disjoint, DOCS, ALPHA).per_document,
                               exact_loglik(disjoint, DOCS, ALPHA).per_document, rtol=1e-8)


def test_one_per_token_definition():
    ho = HeldOutLikelihood(np.array([-3.0, -9.0]), np.array([2.0, 4.0]), "x")
    assert ho.per_token == pytest.approx(-2.0) and ho.perplexity == pytest.approx(np.exp(2.0))
    assert perplexity([-3.0, -9.0], [2, 4]) == pytest.approx(np.exp(-per_token_loglik([-3.0, -9.0], [2, 4])))
    # With a point mixture (completion) the same definition: Σ h log Σ_k m_k θ_kj / Σ h
    m = np.array([[0.3, 0.7]])
    held = np.array([[1, 0, 2, 0]])
    direct = (np.log(m @ THETA)[0] * held[0]).sum() / held.sum()
    assert completion_loglik(THETA, m, held) == pytest.approx(direct, rel=1e-12)
    # A document of one token: every estimator's per-token value is log p(x) exactly or nearly
    single = np.array([[0, 0, 1, 0]])
    truth = np.log(ALPHA @ THETA[:, 2] / ALPHA.sum())
    for method in ("exact", "left_to_right"):
        assert heldout_loglik(THETA, single, ALPHA, method=method).per_token == pytest.approx(truth, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["completion", "is_posterior"])
def test_select_n_components_finds_the_planted_k(method):
    X = DirichletDCA(3, alpha=0.2).simulate(80, 30, doc_length=60, seed=3)["counts"]
    sel = select_n_components(lambda k: DirichletDCA(k, alpha=0.2), X, [1, 3], method=method, seed=0,
                              fit_options={"seed": 0, "max_iter": 100, "warn": False, "num_ll_draws": 0},
                              estimator_options={"n_samples": 200} if method != "completion" else None)
    assert sel.best == 3 and sel.scores[1] > sel.scores[0]
    assert list(sel.to_frame().index) == [1, 3]


def test_select_n_components_with_plsa_needs_alpha():
    X = PLSA(2).simulate(20, 10, doc_length=30, seed=0)["counts"]
    with pytest.raises(DataError, match="alpha is needed to score PLSA"):
        select_n_components(PLSA, X, [2], fit_options={"max_iter": 5, "warn": False})
    sel = select_n_components(PLSA, X, [1, 2], alpha=0.5, fit_options={"max_iter": 50, "warn": False})
    assert sel.method == "completion" and np.isfinite(sel.scores).all()


def test_bad_inputs():
    with pytest.raises(DataError, match="method must be one of"):
        heldout_loglik(THETA, DOCS, ALPHA, method="harmonic_mean")
    with pytest.raises(DataError, match="proposal must be one of"):
        importance_sampling(THETA, DOCS, ALPHA, proposal="uniform")
    with pytest.raises(DataError, match="n_samples must be an integer"):
        importance_sampling(THETA, DOCS, ALPHA, n_samples=0)
    with pytest.raises(DataError, match=r"defensive must be a number in \[0, 1\)"):
        importance_sampling(THETA, DOCS, ALPHA, defensive=1.0)
    with pytest.raises(DataError, match="batch must be an integer"):
        importance_sampling(THETA, DOCS, ALPHA, batch=-1)
    with pytest.raises(DataError, match="seed must be an int or a numpy Generator"):
        importance_sampling(THETA, DOCS, ALPHA, seed="a")
    with pytest.raises(DataError, match="variant must be one of"):
        left_to_right(THETA, DOCS, ALPHA, variant="chib")
    with pytest.raises(DataError, match="n_particles must be an integer"):
        left_to_right(THETA, DOCS, ALPHA, n_particles=True)
    with pytest.raises(DataError, match="above max_assignments"):
        exact_loglik(THETA, DOCS * 10, ALPHA)
    with pytest.raises(DataError, match="X must have 4 features"):
        vb_bound(THETA, DOCS[:, :3], ALPHA)
    with pytest.raises(DataError, match=r"alpha must be a scalar or have shape \(2,\)"):
        vb_bound(THETA, DOCS, [1.0, 2.0, 3.0])
    with pytest.raises(DataError, match="max_iter must be an integer"):
        vb_bound(THETA, DOCS, ALPHA, max_iter=0)
    with pytest.raises(DataError, match="same shape and positive total length"):
        per_token_loglik([-1.0, -2.0], [3])


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((DirichletDCA, DOCS, [2]), {"method": "harmonic"}, "method must be 'completion' or one of"),
        ((3, DOCS, [2]), {}, "model_factory must be a callable"),
        ((DirichletDCA, DOCS, []), {}, "Ks must be a non-empty list of positive integers"),
        ((DirichletDCA, DOCS, [0, 2]), {}, "Ks must be a non-empty list of positive integers"),
        ((DirichletDCA, DOCS, [2]), {"test_fraction": 1.0}, r"test_fraction must be a number in \(0, 1\)"),
        ((DirichletDCA, DOCS, [2]), {"test_fraction": 0.01}, "leaves 0 test documents"),
    ],
)
def test_bad_selection_inputs(args, kwargs, match):
    with pytest.raises(DataError, match=match):
        select_n_components(*args, **kwargs)


def test_posterior_is_accepted_as_topic_word():
    X = DirichletDCA(2, alpha=0.5).simulate(20, 4, doc_length=5, seed=0)["counts"]
    result = latentfs.fit(DirichletDCA(2, alpha=0.5), X, method="vb", seed=0, max_iter=30, warn=False, num_ll_draws=0)
    a = heldout_loglik(result, DOCS, 0.5, method="exact").per_document
    b = exact_loglik(result.mean("topic_word"), DOCS, 0.5).per_document
    np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ each model in its own terms (issue 12)
GAP_THETA = np.array([[0.6, 0.3, 0.1], [0.05, 0.25, 0.7]])
GAP_ALPHA, GAP_BETA = np.array([0.5, 1.5]), np.array([0.2, 4.0])
GAP_DOCS = np.array([[2, 1, 0], [0, 1, 3], [3, 0, 2]])


def _gap_quadrature(doc):
    """log p(sequence | L) of GaP by 2-D quadrature of the model itself: ∫ Poisson(L; Σl) ∏_n (lθ)_{x_n}/Σl dΓ(l)
    over ∫ Poisson(L; Σl) dΓ(l), with l_k = v_k^(1/α_k) so that the gamma densities have no singularity."""
    import math
    import warnings

    from scipy.special import gammaln

    tokens = np.repeat(np.arange(doc.size), doc)
    L = tokens.size

    def f(v2, v1, seq):
        out = math.exp(-gammaln(L + 1))
        ls = []
        for k, v in enumerate((v1, v2)):
            lk = v ** (1 / GAP_ALPHA[k])
            ls.append(lk)
            out *= math.exp(GAP_ALPHA[k] * math.log(GAP_BETA[k]) - gammaln(GAP_ALPHA[k]) - (GAP_BETA[k] + 1) * lk)
            out /= GAP_ALPHA[k]
        rates = ls[0] * GAP_THETA[0] + ls[1] * GAP_THETA[1]
        return out * (np.prod(rates[tokens]) if seq else (ls[0] + ls[1]) ** L)

    hi = (60 ** GAP_ALPHA[0], 20 ** GAP_ALPHA[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)  # the tails are negligible
        num, den = (integrate.dblquad(f, 0, hi[0], 0, hi[1], args=(seq,), epsabs=1e-12, epsrel=1e-7)[0]
                    for seq in (True, False))
    return np.log(num / den)


@pytest.fixture(scope="module")
def gap_exact():
    return exact_loglik(GAP_THETA, GAP_DOCS, GAP_ALPHA, beta=GAP_BETA).per_document


def test_gap_with_per_component_beta_is_scored_in_its_own_terms(gap_exact):
    quad = np.array([_gap_quadrature(d) for d in GAP_DOCS])
    np.testing.assert_allclose(gap_exact, quad, atol=1e-5)  # measured agreement 1e-6
    # the DM formula (what was used before) is off by 0.6–2.5 nats on these short documents
    dm = exact_loglik(GAP_THETA, GAP_DOCS, GAP_ALPHA).per_document
    assert np.abs(dm - quad).max() > 0.5
    # a common β is the DM formula (Lemma 1)
    np.testing.assert_allclose(exact_loglik(GAP_THETA, GAP_DOCS, GAP_ALPHA, beta=3.0).per_document,
                               dm, rtol=1e-12)


def test_gap_importance_sampling_and_bound_against_exact(gap_exact):
    est = importance_sampling(GAP_THETA, GAP_DOCS, GAP_ALPHA, beta=GAP_BETA, n_samples=20000, seed=1)
    np.testing.assert_allclose(est.per_document, gap_exact, atol=0.02)  # measured within 0.005
    assert est.info["beta"] == GAP_BETA.tolist()
    bound = vb_bound(GAP_THETA, GAP_DOCS, GAP_ALPHA, beta=GAP_BETA).per_document
    assert (bound <= gap_exact + 1e-10).all() and (bound > gap_exact - 1.0).all()
    with pytest.raises(DataError, match="left_to_right is derived for DirichletDCA"):
        left_to_right(GAP_THETA, GAP_DOCS, GAP_ALPHA, beta=GAP_BETA)


def test_gap_posterior_brings_its_rates_and_cgp_is_refused():
    from latentfs.models import ConditionalGammaPoissonDCA, GammaPoissonDCA

    X = DirichletDCA(2, alpha=0.5).simulate(30, 4, doc_length=20, seed=0)["counts"]
    gap = latentfs.fit(GammaPoissonDCA(2, alpha=0.5, beta=[0.05, 0.5]), X, method="vb", seed=0, max_iter=30,
                       warn=False, num_ll_draws=0)
    docs = DOCS[:3]
    a = heldout_loglik(gap, docs, 0.5, method="exact")
    b = exact_loglik(gap.mean("topic_word"), docs, 0.5, beta=[0.05, 0.5])
    np.testing.assert_allclose(a.per_document, b.per_document, rtol=1e-12)
    cgp = latentfs.fit(ConditionalGammaPoissonDCA(2, alpha=0.5, rho=0.5), X, method="vb", seed=0, max_iter=20,
                       warn=False)
    with pytest.raises(DataError, match="no formula for a ConditionalGammaPoissonDCA.*document completion"):
        heldout_loglik(cgp, docs, 0.5, method="is_posterior")


GROUPS = np.array([0, 0, 1, 1, 1])
G_THETA = np.array([[0.8, 0.2, 0.1, 0.3, 0.6], [0.3, 0.7, 0.5, 0.4, 0.1]])  # normalised within groups
G_DOCS = np.array([[1, 0, 0, 0, 1], [0, 2, 1, 0, 0], [1, 1, 0, 1, 1], [0, 0, 0, 0, 2]])


def test_grouped_estimators_normalise_within_groups():
    exact = exact_loglik(G_THETA, G_DOCS, ALPHA, groups=GROUPS).per_document
    for doc, value in zip(G_DOCS, exact, strict=True):
        def integrand(t, doc=doc):
            return np.prod((t * G_THETA[0] + (1 - t) * G_THETA[1]) ** doc) * stats.beta.pdf(t, *ALPHA)
        assert value == pytest.approx(np.log(integrate.quad(integrand, 0, 1, limit=200)[0]), rel=1e-6)
    # renormalising over the whole vocabulary (before) shifted every token by −log G
    with pytest.warns(DataWarning, match="normalised within 2 groups"):  # and a grouped Θ without groups is flagged
        flat = exact_loglik(G_THETA, G_DOCS, ALPHA).per_document
    np.testing.assert_allclose(exact - flat, G_DOCS.sum(1) * np.log(2), rtol=1e-10)
    est = importance_sampling(G_THETA, G_DOCS, ALPHA, groups=GROUPS, n_samples=20000, seed=1)
    np.testing.assert_allclose(est.per_document, exact, atol=0.01)
    l2r = left_to_right(G_THETA, G_DOCS, ALPHA, groups=GROUPS, n_particles=500, seed=1)
    np.testing.assert_allclose(l2r.per_document, exact, atol=0.05)
    assert (vb_bound(G_THETA, G_DOCS, ALPHA, groups=GROUPS).per_document <= exact + 1e-10).all()


def test_grouped_rollcall_scores_and_selection_are_on_the_vote_scale():
    from latentfs.datasets.rollcall import simulate_rollcalls

    rc = simulate_rollcalls(200, n_senators=30, n_blocs=3, seed=0)
    result = latentfs.fit(DirichletDCA(3, alpha=0.1, groups=rc.groups), rc.counts[:160], method="vb", seed=0,
                          warn=False, num_ll_draws=0)
    test = rc.counts[160:170]
    planted = heldout_loglik(rc.topic_word, test, 0.1, method="is_posterior", groups=rc.groups)
    fitted = heldout_loglik(result, test, 0.1, method="is_posterior")
    # binary votes: measured perplexity 1.48 (planted Θ) and 1.50 (fit); before, 31 × that
    assert 1.2 < planted.perplexity < 1.8 and abs(fitted.per_token - planted.per_token) < 0.1
    assert fitted.info["n_groups"] == 31
    sel = select_n_components(lambda k: DirichletDCA(k, alpha=0.1, groups=rc.groups), rc.counts, [1, 3],
                              fit_options={"seed": 0, "warn": False, "num_ll_draws": 0})
    assert sel.best == 3 and 1.2 < np.exp(-sel.scores[1]) < 1.8  # measured 1.44
