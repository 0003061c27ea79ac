"""Issue 31 item 6: selection and model choice deliver what they promise."""

import numpy as np
import pytest


# ---- LeverageScoreSelector keeps the number of features asked for --------------------------------
def _leverage_data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 200))
    X[:30, :6] += 4.0  # a few high-leverage features, so i.i.d. draws repeat them
    return X


def test_leverage_selector_keeps_n_features_to_select():
    from latentfs.select.leverage import LeverageScoreSelector

    X = _leverage_data()
    for k in (5, 20, 120):
        for seed in range(3):
            sel = LeverageScoreSelector(n_features_to_select=k, n_components=2, seed=seed).fit(X)
            assert sel.get_support().sum() == k, (k, seed)
            assert sel.transform(X).shape == (60, k)
            assert sel.weights_.info["n_draws"] >= k  # the i.i.d. draws it took (repeats merged)
    # the paper's fixed number of i.i.d. draws stays available: r = 20 draws keep at most 20 features
    paper = LeverageScoreSelector(n_draws=20, n_components=2, seed=0).fit(X)
    assert paper.get_support().sum() <= 20 and paper.weights_.info["n_draws"] == 20


def test_leverage_until_k_distinct_is_the_iid_scheme():
    # Statistical: the selection "i.i.d. draws until k distinct features" built from successive sampling
    # (Efraimidis–Spirakis keys) with geometric repeat counts must match brute-force i.i.d. draws. On 3 features
    # with p = (0.6, 0.3, 0.1) and k = 2: P(feature 2 kept) = 1 − P({0, 1}) = 1 − (0.6·0.3/0.4 + 0.3·0.6/0.7)
    # = 0.2929, and E[r] = Σ over the first feature f of p_f (1 + 1/(1 − p_f)) = 3.040. 20,000 draws: the
    # frequency is within 4 s.e. (s.e. 0.0032) and the mean r within 4 s.e. (from the sample sd); false alarm
    # ≈ 1e-4 for the pair.
    from latentfs.select.leverage import _sample_until_distinct

    p = np.array([0.6, 0.3, 0.1])
    rng = np.random.default_rng(0)
    kept2, rs = 0, []
    for _ in range(20_000):
        idx, counts, r = _sample_until_distinct(p, 2, rng)
        kept2 += 2 in idx
        rs.append(r)
        assert counts.sum() == r and counts.min() >= 1 and idx.size == 2
    exact = 1 - (0.6 * 0.3 / 0.4 + 0.3 * 0.6 / 0.7)
    assert abs(kept2 / 20_000 - exact) < 4 * np.sqrt(exact * (1 - exact) / 20_000)
    mean_r = sum(pf * (1 + 1 / (1 - pf)) for pf in p)
    assert abs(np.mean(rs) - mean_r) < 4 * np.std(rs) / np.sqrt(20_000)


def test_leverage_bernoulli_keeps_the_asked_number_on_average():
    # scheme="bernoulli" keeps each feature independently; the inclusion probabilities min(1, c p_i) are set so
    # that their sum is exactly n_features_to_select (it was min(1, r p_i), whose sum falls short of r when some
    # r p_i > 1).
    from latentfs.select.leverage import LeverageScoreSelector

    X = _leverage_data()
    sel = LeverageScoreSelector(20, n_components=2, scheme="bernoulli", seed=0).fit(X)
    assert sel.weights_.info["expected_kept"] == pytest.approx(20.0, rel=1e-12)


def test_leverage_errors():
    from latentfs.core.data import DataError
    from latentfs.select.leverage import LeverageScoreSelector

    X = _leverage_data()
    with pytest.raises(DataError, match=r"n_features_to_select must be at most the number of features \(200\)"):
        LeverageScoreSelector(201, n_components=2).fit(X)
    with pytest.raises(DataError, match="pass n_features_to_select or n_draws, not both"):
        LeverageScoreSelector(10, n_draws=10, n_components=2).fit(X)
    with pytest.raises(DataError, match="n_draws applies to scheme='iid' only"):
        LeverageScoreSelector(n_draws=10, n_components=2, scheme="top").fit(X)
    with pytest.raises(DataError, match="n_draws must be a positive integer; got 0"):
        LeverageScoreSelector(n_draws=0, n_components=2).fit(X)


# ---- Q-α selects by default -----------------------------------------------------------------------
def test_q_alpha_selectors_select_by_default():
    # Wolf & Shashua report "a sharp break at the border of the relevant set" in the sorted α and give no
    # cut-off; the default is now that break (n_features_to_select="gap"), not every feature.
    from latentfs.select.q_alpha import QAlpha, SupervisedQAlpha
    from latentfs.select.q_alpha_kernel import KernelQAlpha

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 30))
    y = np.repeat([0, 1], 30)
    X[:30, :4] += 3.0  # four relevant features: two clusters along them
    for sel in (QAlpha(), KernelQAlpha(), SupervisedQAlpha()):
        assert sel.n_features_to_select == "gap"
    kept = QAlpha().fit(X).get_support(indices=True).tolist()
    assert kept == [0, 1, 2, 3]
    assert SupervisedQAlpha().fit(X, y).get_support(indices=True).tolist() == [0, 1, 2, 3]
    assert 0 < KernelQAlpha().fit(X).get_support().sum() < 30
    assert QAlpha(None).fit(X).get_support().all()  # every feature on request (soft selection: use weights_)
