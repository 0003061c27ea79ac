"""Test configuration for tests/ and the doctests in latentfs/: one thread (FIELD_NOTES: small ops are
100-1000x slower with 2 threads under load), float64 by default, a fixed-seed generator fixture, and one tier
marker on every test (``exact``, ``statistical`` or ``recovery``; :func:`pytest_collection_modifyitems`).

The tiers (issue 30, item 6), for contributors:

* ``statistical``: a test of a distribution with a fixed seed and a stated false-alarm rate (the project's rule
  for such tests, STYLE.md). A test is put here when its source states that rate ("false-alarm" / "false alarm"),
  or by an explicit ``@pytest.mark.statistical``.
* ``recovery``: a fit recovers planted parameters to a stated tolerance: tests whose name or module says
  ``recover`` (``test_dca_recovery.py``, ``test_recovers_...``), or an explicit ``@pytest.mark.recovery``.
* ``exact``: everything else: identities, oracles to rounding, errors and messages, bit-for-bit reproducibility.

The fast stage while editing: ``python -m pytest -m "exact and not slow and not docs" -x`` (a -m replaces the
default one, which deselects the docs tests) (then the whole suite before a
commit, as CI runs it).
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed numpy generator for tests that need random inputs."""
    return np.random.default_rng(20261122)


_TIERS = ("exact", "statistical", "recovery")


def _tier(item: pytest.Item) -> str:
    for tier in _TIERS:
        if item.get_closest_marker(tier) is not None:
            return tier
    fn = getattr(item, "function", None)
    if fn is None:  # a doctest: an example's output, exact
        return "exact"
    import inspect

    try:
        source = inspect.getsource(fn).lower()
    except (OSError, TypeError):
        source = ""
    if "false-alarm" in source or "false alarm" in source:
        return "statistical"
    if "recover" in item.name.lower() or "recover" in item.path.name.lower():
        return "recovery"
    return "exact"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test gets exactly one tier marker (module docstring), so ``-m exact`` and the like select by tier."""
    for item in items:
        tier = _tier(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(getattr(pytest.mark, tier))
