"""latentfs.core.convergence against ArviZ 0.23 (exact tier): the same R-hat, ESS and MCSE, entry by entry.

ArviZ is the oracle: ``az.rhat(method="rank")``, ``az.ess(method="bulk" | "tail" | "mean")`` and
``az.mcse(method="mean")``, called on a dataset so that every entry of a site goes through ArviZ's own
per-entry loop. Agreement is to 1e-12 relative (NaN where ArviZ gives NaN, inf where it gives inf).
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator

import arviz as az
import numpy as np
import pytest
from arviz.utils import Numba

from latentfs.core import convergence as cv
from latentfs.core.errors import DataError

RTOL = 1e-12

OURS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "rhat": cv.rhat,
    "ess_bulk": cv.ess_bulk,
    "ess_tail": cv.ess_tail,
    "ess_mean": cv.ess_mean,
    "mcse_mean": cv.mcse_mean,
}
THEIRS = {
    "rhat": lambda ds: az.rhat(ds, method="rank"),
    "ess_bulk": lambda ds: az.ess(ds, method="bulk"),
    "ess_tail": lambda ds: az.ess(ds, method="tail"),
    "ess_mean": lambda ds: az.ess(ds, method="mean"),
    "mcse_mean": lambda ds: az.mcse(ds, method="mean"),
}


def arviz_value(name: str, draws: np.ndarray) -> np.ndarray:
    """ArviZ's answer for every entry of ``draws`` (chain, draw, *site_shape)."""
    # ArviZ divides 0 by 0 on constant draws, and warns of fewer draws than chains; the answers, not the
    # warnings, are under test
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        dataset = az.convert_to_dataset({"theta": draws})
        return np.asarray(THEIRS[name](dataset)["theta"].values, dtype=np.float64)


def assert_matches_arviz(draws: np.ndarray, names: tuple[str, ...] = tuple(OURS), rtol: float = RTOL) -> None:
    for name in names:
        ours = OURS[name](draws)
        theirs = arviz_value(name, draws)
        assert ours.shape == draws.shape[2:], name
        assert ours.dtype == np.float64, name
        # assert_allclose also requires NaN and inf at the same places
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=0, err_msg=name)


@pytest.fixture
def arviz_numba(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run ArviZ with numba on (param True: its default where numba is installed, as with latentfs) or off."""
    before = Numba.numba_flag
    if request.param:
        Numba.enable_numba()  # raises if numba is missing: latentfs depends on it
    else:
        Numba.disable_numba()
    try:
        yield
    finally:
        Numba.numba_flag = before


@pytest.mark.parametrize("site_shape", [(), (3,), (5, 4)], ids=str)
@pytest.mark.parametrize("n_draw", [4, 7, 100, 1000])
@pytest.mark.parametrize("n_chain", [1, 2, 4])
def test_normal_draws_match_arviz(n_chain: int, n_draw: int, site_shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng([n_chain, n_draw, len(site_shape)])
    draws = rng.normal(size=(n_chain, n_draw, *site_shape))
    assert_matches_arviz(draws)
    if n_chain == 1:
        assert np.isnan(cv.rhat(draws)).all()  # R-hat needs two chains; ESS splits one
        assert np.isfinite(cv.ess_bulk(draws)).all()


@pytest.mark.parametrize("arviz_numba", [True, False], indirect=True, ids=["numba", "numpy"])
def test_autocorrelated_short_and_antithetic_chains_match_arviz(arviz_numba: None) -> None:
    """AR(1) chains from antithetic (φ < 0) to sticky (φ ≈ 1), 4 to 40 draws: every branch of Geyer's sequence."""
    rng = np.random.default_rng(7)
    for trial in range(24):
        n_chain, n_draw = int(rng.integers(1, 5)), int(rng.integers(4, 41))
        phi = np.linspace(-0.95, 0.98, 24)[trial]
        noise = rng.normal(size=(n_chain, n_draw, 12))
        draws = np.empty_like(noise)
        draws[:, 0] = noise[:, 0]
        for t in range(1, n_draw):
            draws[:, t] = phi * draws[:, t - 1] + noise[:, t]
        if trial % 3 == 0:
            draws = np.round(draws)  # ties as well
        assert_matches_arviz(draws)


def test_heavy_tailed_draws_match_arviz() -> None:
    rng = np.random.default_rng(11)
    draws = rng.standard_t(df=1.0, size=(4, 500, 6))  # Cauchy: moments do not exist, ranks do
    draws[2] *= 50.0
    assert_matches_arviz(draws)
    assert np.isfinite(cv.rhat(draws)).all()


def test_many_ties_match_arviz() -> None:
    rng = np.random.default_rng(12)
    small_range = rng.integers(0, 3, size=(4, 100, 8)).astype(np.float64)
    rare = rng.poisson(0.3, size=(4, 101, 8))  # integers, odd draws; the 95% quantile is often the maximum
    assert_matches_arviz(small_range)
    assert_matches_arviz(rare)
    # the indicator below the 95% quantile is constant for some entries (ArviZ: ESS = split draws there);
    # tail ESS is then the 5% side's, which the comparison above covers either way
    assert_matches_arviz(np.stack([np.zeros((4, 100)), np.ones((4, 100))], axis=-1) + (rng.random((4, 100, 2)) < 0.02))


def test_constant_entries_match_arviz() -> None:
    rng = np.random.default_rng(13)
    draws = rng.normal(size=(4, 7, 5))
    draws[:, :, 1] = 2.5
    draws[:, :, 3] = 0.1
    assert_matches_arviz(draws, ("rhat", "ess_bulk", "ess_tail", "ess_mean"))
    # ArviZ's conventions: R-hat NaN (0 / 0), ESS the number of split draws, 4 x 2 x 3 and not 4 x 7
    assert np.isnan(cv.rhat(draws)[[1, 3]]).all()
    for name in ("ess_bulk", "ess_tail", "ess_mean"):
        np.testing.assert_array_equal(OURS[name](draws)[[1, 3]], [24.0, 24.0])
    assert np.isfinite(cv.rhat(draws)[[0, 2, 4]]).all()


@pytest.mark.parametrize("arviz_numba", [False], indirect=True, ids=["numpy"])
def test_mcse_of_constant_entries_is_zero_as_with_a_two_pass_variance(arviz_numba: None) -> None:
    draws = np.random.default_rng(14).normal(size=(4, 100, 3))
    draws[:, :, 1] = 0.1  # with numba ArviZ's one-pass variance is negative here and its MCSE is NaN
    ours = cv.mcse_mean(draws)
    assert 0.0 <= ours[1] < 1e-15
    np.testing.assert_allclose(ours, arviz_value("mcse_mean", draws), rtol=RTOL, atol=1e-15)


@pytest.mark.parametrize("arviz_numba", [True], indirect=True, ids=["numba"])
def test_chains_constant_apart_give_arviz_rounding_ratio(arviz_numba: None) -> None:
    """Each chain constant, chains different: W is a rounding error and R-hat a huge, infinite or NaN ratio.

    ArviZ with numba (latentfs's configuration) computes W in one pass in draw order; so does rhat, to the bit.
    """
    chain_values = np.array([[0.1, 0.1, 7.3, 7.3], [0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 1.0],
                             [np.pi, np.e, 1 / 3, 0.7], [-1.0, -1.0, 1.0, 1.0]]).T
    draws = np.broadcast_to(chain_values[:, None, :], (4, 100, 5)).copy()
    ours = cv.rhat(draws)
    np.testing.assert_array_equal(ours, arviz_value("rhat", draws))
    assert (np.isnan(ours) | (ours > 1e6)).all()
    assert_matches_arviz(draws, ("ess_bulk", "ess_tail", "ess_mean"))
    # here the bulk R-hat is NaN and the tail R-hat 2.1e8: ArviZ's max(bulk, tail) keeps the NaN
    draws = np.broadcast_to(np.array([-1.0, 2.5, 2.5, 1 / 3])[:, None], (4, 19)).copy()
    assert np.isnan(cv.rhat(draws))
    assert np.isnan(arviz_value("rhat", draws))


def test_nan_draws_match_arviz() -> None:
    rng = np.random.default_rng(15)
    draws = rng.normal(size=(4, 101, 4))
    draws[0, 3, 1] = np.nan
    draws[2, 50, 2] = np.nan  # the middle draw, which splitting drops: still NaN, as in ArviZ
    draws[:, :, 3] = np.nan
    assert_matches_arviz(draws)
    for name, function in OURS.items():
        values = function(draws)
        assert np.isnan(values[1:]).all(), name
        assert np.isfinite(values[0]), name


def test_infinite_draws_match_arviz() -> None:
    rng = np.random.default_rng(16)
    draws = rng.normal(size=(4, 100, 3))
    draws[0, :60, 0] = np.inf  # a few infinite draws: ranks are still defined
    draws[:, :, 1][draws[:, :, 1] > 1.0] = np.inf
    draws[:, :, 2][draws[:, :, 2] > -0.5] = -np.inf  # most draws -inf: the median and the fold are not finite
    assert_matches_arviz(draws, ("rhat", "ess_bulk", "ess_tail"))


def test_label_switched_chains_give_large_rhat() -> None:
    rng = np.random.default_rng(17)
    draws = rng.normal(size=(2, 500, 3))
    draws[1] += 4.0  # the second chain sits in the other mode
    ours = cv.rhat(draws)
    assert (ours > 1.5).all()
    np.testing.assert_allclose(ours, arviz_value("rhat", draws), rtol=RTOL, atol=0)
    assert cv.rhat(draws - np.array([0.0, 4.0])[:, None, None]).max() < 1.05  # relabelled: converged


def test_float32_draws_match_arviz() -> None:
    """ArviZ folds float32 draws about their median in float32; so does rhat (MCSE's sd is float64 here)."""
    rng = np.random.default_rng(18)
    draws = (rng.normal(size=(4, 100, 6)) * 3 + 1).astype(np.float32)
    assert_matches_arviz(draws, ("rhat", "ess_bulk", "ess_tail", "ess_mean"))
    np.testing.assert_allclose(cv.mcse_mean(draws), arviz_value("mcse_mean", draws), rtol=1e-6)


@pytest.mark.parametrize("arviz_numba", [False], indirect=True, ids=["numpy"])
def test_mean_diagnostics_far_from_zero_match_two_pass_arviz(arviz_numba: None) -> None:
    """Draws with |mean| / sd = 500: ArviZ without numba keeps full precision, and so do ess_mean and mcse_mean."""
    draws = np.random.default_rng(19).normal(size=(4, 100, 3)) * 0.1 + 50.0
    assert_matches_arviz(draws, ("ess_mean", "mcse_mean"), rtol=1e-11)


def test_too_few_draws_give_nan_like_arviz() -> None:
    draws = np.random.default_rng(20).normal(size=(4, 3, 2))
    assert_matches_arviz(draws)
    for name, function in OURS.items():
        assert np.isnan(function(draws)).all(), name


def test_diagnostics_equals_the_single_functions() -> None:
    rng = np.random.default_rng(21)
    for shape in [(4, 100, 7), (3, 101, 2, 3), (1, 50, 4)]:
        draws = rng.normal(size=shape)
        draws[..., 0] = np.round(draws[..., 0])
        out = cv.diagnostics(draws)
        np.testing.assert_array_equal(out["r_hat"], cv.rhat(draws))
        np.testing.assert_array_equal(out["ess_bulk"], cv.ess_bulk(draws))
        np.testing.assert_array_equal(out["ess_tail"], cv.ess_tail(draws))


def test_results_do_not_depend_on_blocks_or_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(22)
    draws = rng.normal(size=(3, 60, 40, 7))
    draws[:, :, 5] = np.round(draws[:, :, 5])
    draws[:, :, 6, 2] = np.nan
    whole = {name: function(draws) for name, function in OURS.items()}
    monkeypatch.setattr(cv, "_BLOCK_VALUES", 1000)  # 5 entries per block, the last one short
    for name, function in OURS.items():
        np.testing.assert_array_equal(function(draws), whole[name], err_msg=name)
        strided = np.asfortranarray(draws)  # another memory layout, the same draws
        np.testing.assert_array_equal(function(strided), whole[name], err_msg=name)


def test_integer_and_boolean_draws_are_read_as_float() -> None:
    rng = np.random.default_rng(23)
    counts = rng.poisson(2.0, size=(4, 80, 3))
    for name, function in OURS.items():
        np.testing.assert_array_equal(function(counts), function(counts.astype(np.float64)), err_msg=name)
    flags = rng.random((4, 80)) < 0.3
    np.testing.assert_array_equal(cv.ess_bulk(flags), cv.ess_bulk(flags.astype(np.float64)))


def test_fft_length_is_scipy_next_fast_len() -> None:
    from scipy.fftpack import next_fast_len

    assert [cv._next_regular(n) for n in range(1, 3001)] == [next_fast_len(n) for n in range(1, 3001)]


def test_bad_draws_are_refused_with_a_remedy() -> None:
    with pytest.raises(DataError, match=r"draws must have shape \(chain, draw, \*site_shape\); got shape \(100,\)"):
        cv.rhat(np.zeros(100))
    with pytest.raises(DataError, match="draws must hold real numbers; got dtype complex128"):
        cv.ess_bulk(np.zeros((2, 10), dtype=complex))


def test_import_brings_in_neither_arviz_nor_scipy_stats() -> None:
    code = (
        "import sys, numpy as np\n"
        "import latentfs.core.convergence as cv\n"
        "after_import = sorted(m for m in ('arviz', 'scipy.stats') if m in sys.modules)\n"
        "cv.diagnostics(np.random.default_rng(0).normal(size=(4, 50, 3))); cv.mcse_mean(np.ones((2, 8)))\n"
        "after_call = sorted(m for m in ('arviz', 'scipy.stats') if m in sys.modules)\n"
        "print(after_import, after_call)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[] []"


def test_the_worst_entry_is_named_without_naming_every_entry():
    # check_convergence names the entry of the largest R̂ by its index alone (a K × J site can have 60M entries):
    # the same name as the full list gives, with coordinates, without them, and with a dimension left unnamed.
    from latentfs.core.posterior_checks import _entry_name, _entry_names

    coords = {"component": ["a", "b", "c"], "feature": [f"w{i}" for i in range(4)]}
    for shape, dims in [((3, 4), ("component", "feature")), ((3, 4), ("component",)), ((3, 4), ()),
                        ((3, 4, 2), ("component", "feature")), ((5,), ("x",))]:
        names = _entry_names("s", shape, dims, coords)
        assert [_entry_name("s", shape, dims, coords, i) for i in range(len(names))] == names


def test_the_largest_means_are_found_without_a_full_sort():
    # _entries_to_check takes the largest posterior means by a partition: the same indices, in the same order,
    # as a stable sort of all of them, ties (many equal means: empty components) included.
    from latentfs.core.posterior_checks import _largest

    rng = np.random.default_rng(5)
    for values in [rng.random(5000), np.round(rng.random(5000), 2), np.zeros(3000), rng.integers(0, 3, 4000) * 1.0,
                   np.where(rng.random(2000) < 0.1, np.nan, rng.random(2000))]:
        for h in (1, 7, 1000, values.size):
            np.testing.assert_array_equal(_largest(values, h), np.argsort(-values, kind="stable")[:h])
