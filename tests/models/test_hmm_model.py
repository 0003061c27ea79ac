"""Hidden Markov models declared in Pyro: the engines' log joint and log-likelihood against the model
(exact tier: ``poutine.trace(...).log_prob_sum()`` at fixed states, and ``TraceEnum_ELBO`` with every state
enumerated), simulation, and input validation."""

import numpy as np
import pytest
import torch
from pyro import poutine
from pyro.infer import TraceEnum_ELBO

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.hmm import viterbi
from latentfs.inference.hmm.family import prepare
from latentfs.inference.hmm.forward_backward import forward_backward, log_joint_path
from latentfs.models.hmm import CategoricalHMM, GaussianHMM, pad_sequences

PARAM_SITES = ("startprob", "transmat", "means", "precision", "emission_probs")
LENGTHS = [5, 3, 7]


def _case(kind: str):
    if kind == "categorical":
        model = CategoricalHMM(3, 4)
        sim = model.simulate(len(LENGTHS), LENGTHS, seed=0)
    else:
        model = GaussianHMM(3, covariance_type=kind, mean_precision=0.1)
        sim = model.simulate(len(LENGTHS), LENGTHS, 2, seed=0)
    return model, sim


def _engine_params(model, sim):
    fam = prepare(model, sim["data"], sim["lengths"], for_fit=False)
    given = {k: sim[k] for k in ("startprob", "transmat", "means", "precision", "emission_probs") if k in sim}
    return fam, fam.import_(given, 0.0)


def _padded(model, sim):
    fill = 0 if isinstance(model, CategoricalHMM) else 0.0
    return pad_sequences(sim["data"], sim["lengths"], fill=fill)


def _conditioned(model, sim):
    cond = {k: torch.as_tensor(v) for k, v in sim.items() if k in PARAM_SITES}
    return poutine.condition(model.model, cond)


@pytest.mark.parametrize("kind", ["diag", "full", "categorical"])
def test_engine_log_joint_equals_pyro_trace(kind):
    # Exact tier: Σ_s log p(y_s, z_s | θ) of the engine = the Pyro trace's log density minus the prior sites.
    model, sim = _case(kind)
    fam, params = _engine_params(model, sim)
    seqs, lens = _padded(model, sim)
    states, _ = pad_sequences(sim["states"], sim["lengths"])
    # past a sequence's end the declared state stays put (probability one)
    for s, t_len in enumerate(sim["lengths"]):
        states[s, t_len:] = states[s, t_len - 1]
    cond = {f"state_{t}": states[:, t] for t in range(states.shape[1])}
    tr = poutine.trace(poutine.condition(_conditioned(model, sim), cond)).get_trace(seqs, lens)
    prior = sum(float(tr.nodes[n]["fn"].log_prob(tr.nodes[n]["value"]).sum()) for n in PARAM_SITES if n in tr.nodes)
    pyro_joint = float(tr.log_prob_sum()) - prior
    engine = log_joint_path(
        params["startprob"], params["transmat"], fam.log_emission(params), fam.layout, torch.as_tensor(sim["states"])
    )
    assert float(engine.sum()) == pytest.approx(pyro_joint, rel=1e-12)


@pytest.mark.parametrize("kind", ["diag", "full", "categorical"])
def test_forward_log_likelihood_equals_enumerated_pyro_model(kind):
    # Exact tier: TraceEnum_ELBO with an empty guide sums every z_t out: −loss = log p(y, θ).
    model, sim = _case(kind)
    fam, params = _engine_params(model, sim)
    seqs, lens = _padded(model, sim)
    conditioned = _conditioned(model, sim)
    loss = TraceEnum_ELBO(max_plate_nesting=2).loss(conditioned, lambda *a, **k: None, seqs, lens)
    tr = poutine.trace(conditioned).get_trace(seqs, lens)
    prior = sum(float(tr.nodes[n]["fn"].log_prob(tr.nodes[n]["value"]).sum()) for n in PARAM_SITES if n in tr.nodes)
    fb = forward_backward(params["startprob"], params["transmat"], fam.log_emission(params), fam.layout)
    assert float(fb.log_likelihood.sum()) == pytest.approx(-loss - prior, rel=1e-12)


def test_missing_entries_integrate_out_of_diagonal_emissions():
    model, sim = _case("diag")
    X = sim["data"].copy()
    X[2, 0] = X[9, 1] = np.nan
    sim = {**sim, "data": X}
    fam, params = _engine_params(model, sim)
    seqs, lens = _padded(model, sim)
    conditioned = _conditioned(model, sim)
    loss = TraceEnum_ELBO(max_plate_nesting=2).loss(conditioned, lambda *a, **k: None, seqs, lens)
    tr = poutine.trace(conditioned).get_trace(seqs, lens)
    prior = sum(float(tr.nodes[n]["fn"].log_prob(tr.nodes[n]["value"]).sum()) for n in PARAM_SITES if n in tr.nodes)
    fb = forward_backward(params["startprob"], params["transmat"], fam.log_emission(params), fam.layout)
    assert float(fb.log_likelihood.sum()) == pytest.approx(-loss - prior, rel=1e-12)


def test_simulate_shapes_and_seed():
    sim = GaussianHMM(2, covariance_type="full").simulate(3, [4, 2, 6], 3, seed=5)
    assert sim["data"].shape == (12, 3) and sim["states"].shape == (12,)
    assert sim["precision"].shape == (2, 3, 3) and sim["lengths"].tolist() == [4, 2, 6]
    again = GaussianHMM(2, covariance_type="full").simulate(3, [4, 2, 6], 3, seed=5)
    np.testing.assert_array_equal(sim["data"], again["data"])
    cat = CategoricalHMM(2, 5).simulate(2, 8, seed=1)
    assert cat["data"].dtype == np.int64 and cat["data"].max() < 5 and cat["emission_probs"].shape == (2, 5)


def test_list_input_equals_concatenated_with_lengths():
    sim = GaussianHMM(2, mean_precision=0.05).simulate(3, [30, 20, 25], 2, seed=2)
    X, lens = sim["data"], sim["lengths"]
    parts = np.split(X, np.cumsum(lens)[:-1])
    a = latentfs.fit(GaussianHMM(2), X, lengths=lens, seed=0, n_init=1)
    b = latentfs.fit(GaussianHMM(2), parts, seed=0, n_init=1)
    assert a.diagnostics["log_likelihood"] == pytest.approx(b.diagnostics["log_likelihood"], rel=1e-12)


# ----------------------------------------------------------------------------- bad input
BAD_INPUT = [
    ("empty sequence in a list", lambda X: [X[:5], X[:0], X[5:]], None, r"X\[1\] is an empty sequence"),
    ("zero length", lambda X: X, [10, 0, 20], r"lengths must be positive: sequence 1 has length 0"),
    ("lengths do not sum", lambda X: X, [10, 10], r"lengths must sum to the number of rows of X: sum\(lengths\) = 20"),
    ("all sequences of length 1", lambda X: X[:4], [1, 1, 1, 1], r"every sequence of X has length 1"),
    ("ragged nested list", lambda X: [[0.1, 0.2], [0.3]], None, r"X is ragged"),
    ("3-D array", lambda X: X[:30].reshape(3, 10, 1), None, r"X must be 2-D .* got a 3-D array"),
    ("lengths with a list", lambda X: [X[:10], X[10:]], [10, 20], r"lengths must not be given when X is a list"),
    ("features differ", lambda X: [X[:10], np.hstack([X[10:], X[10:]])], None, r"same number of features"),
    ("non-integer lengths", lambda X: X, [10.5, 19.5], r"lengths must be a 1-D list of positive integers"),
]


METHODS = ["em", "gibbs", "vb"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_sequences_raise(case, method):
    # every engine validates through the model's check_data, before any work
    _, make, lengths, match = case
    X = GaussianHMM(2).simulate(1, 30, seed=0)["data"]
    with pytest.raises(DataError, match=match):
        latentfs.fit(GaussianHMM(2), make(X), method=method, lengths=lengths)


@pytest.mark.parametrize("method", METHODS)
def test_more_states_than_observations_raises(method):
    X = np.array([[0.0], [1.0], [3.0]])
    with pytest.raises(DataError, match=r"n_components must be at most 3 \(the number of observations in X, 3\)"):
        latentfs.fit(GaussianHMM(4), X, method=method)
    with pytest.raises(DataError, match=r"n_components must be at most 4 \(the number of observations in X, 4\)"):
        latentfs.fit(CategoricalHMM(5), [np.array([0, 1]), np.array([1, 0])], method=method)


@pytest.mark.parametrize("method", METHODS)
def test_short_sequences_raise_or_fit(method):
    # one sequence of length 1: no transition to learn from
    with pytest.raises(DataError, match=r"every sequence of X has length 1 \(1 sequences\)"):
        latentfs.fit(GaussianHMM(1), np.array([[0.5]]), method=method)
    with pytest.raises(DataError, match=r"X is empty \(0 observations\)"):
        latentfs.fit(GaussianHMM(1), np.zeros((0, 2)), method=method)
    with pytest.raises(DataError, match=r"X is empty; pass at least one sequence"):
        latentfs.fit(GaussianHMM(1), [], method=method)
    # sequences of length 1 beside a longer one are fine: they inform π and the emissions only
    X = GaussianHMM(2, mean_precision=0.05).simulate(3, [1, 40, 1], seed=3)["data"]
    res = latentfs.fit(GaussianHMM(2), X, lengths=[1, 40, 1], method=method, seed=0, warn=False,
                       **({"num_chains": 2, "num_warmup": 5, "num_samples": 5} if method == "gibbs" else {}))
    assert res.diagnostics["n_sequences"] == 3


def test_ragged_object_array_raises():
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = np.zeros(3), np.zeros(5)
    with pytest.raises(DataError, match=r"X is ragged \(an object array\); pass a list of numpy arrays"):
        latentfs.fit(GaussianHMM(2), ragged)


@pytest.mark.parametrize("method", METHODS)
def test_categorical_bad_symbols_raise(method):
    with pytest.raises(DataError, match=r"symbols coded 0, 1, …, S−1; row 2 holds -1"):
        latentfs.fit(CategoricalHMM(2), np.array([0, 1, -1, 0]), method=method)
    with pytest.raises(DataError, match=r"symbols coded 0, 1, …, S−1; row 1 holds 1.5"):
        latentfs.fit(CategoricalHMM(2), np.array([0, 1.5, 1, 0]), method=method)
    with pytest.raises(DataError, match=r"holds symbol 3 \(row 2\) but n_categories=3"):
        latentfs.fit(CategoricalHMM(2, 3), np.array([0, 1, 3, 0]), method=method)
    with pytest.raises(DataError, match=r"holds a single symbol \(0\)"):
        latentfs.fit(CategoricalHMM(2), np.zeros(10, dtype=int), method=method)


def test_decoding_symbols_the_model_never_saw_raises():
    sim = CategoricalHMM(2, 3).simulate(2, 30, seed=0)
    res = latentfs.fit(CategoricalHMM(2), sim["data"], lengths=sim["lengths"], seed=0)
    s = res.mean("emission_probs").shape[1]
    with pytest.raises(DataError, match=rf"X holds symbol {s} \(row 2\) but n_categories={s}\. Decode only symbols"):
        viterbi(res, np.array([0, 1, s, 0]))


def test_bad_model_options_raise():
    with pytest.raises(DataError, match=r"covariance_type must be one of \['diag', 'full'\]"):
        GaussianHMM(2, covariance_type="tied")
    with pytest.raises(DataError, match=r"n_categories must be an integer ≥ 2"):
        CategoricalHMM(2, 1)
    with pytest.raises(DataError, match=r"length must be a positive integer"):
        GaussianHMM(2).simulate(2, 0)
    with pytest.raises(DataError, match=r"must not contain NaN for this method"):
        latentfs.fit(GaussianHMM(2, covariance_type="full"), np.array([[0.0, 1.0], [np.nan, 2.0], [1.0, 0.5]]))
