"""The bootstrap's redraw rule, written once (model_selection.accepted_replicates) for bootstrap_lrt and
bootstrap_feature_weights: a replicate the model refuses is drawn again, up to 10 n draws. Exact tests."""

from __future__ import annotations

import pytest

from latentfs.core.data import DataError
from latentfs.inference.mixture.model_selection import accepted_replicates
from latentfs.inference.mixture.weights import bootstrap_feature_weights
from latentfs.models.mixture import LatentClass


def test_refused_replicates_are_drawn_again_in_order():
    calls = iter(range(100))

    def draw() -> int:
        i = next(calls)
        if i % 3 == 0:
            raise DataError("refused")
        return i

    assert accepted_replicates(4, draw, lambda r: f"gave up after {r}") == [1, 2, 4, 5]


def test_gives_up_after_ten_draws_per_replicate_with_the_count_refused():
    calls = []

    def draw() -> int:
        calls.append(1)
        raise DataError("refused")

    with pytest.raises(DataError, match=r"^gave up after 30$"):
        accepted_replicates(3, draw, lambda r: f"gave up after {r}")
    assert len(calls) == 30


def test_another_error_is_not_taken_for_a_refusal():
    def draw() -> int:
        raise ValueError("a bug, not a refused replicate")

    with pytest.raises(ValueError, match="a bug"):
        accepted_replicates(2, draw, lambda r: "")


def test_bootstrap_feature_weights_gives_up_in_its_own_words(monkeypatch):
    import latentfs.core.registry as registry

    X = LatentClass(2).simulate(60, 3, seed=0)["items"]
    real_fit = registry.fit
    first = []

    def fit(*args, **kwargs):
        if not first:  # the fit to the data itself succeeds; every resampled one is refused
            first.append(1)
            return real_fit(*args, **kwargs)
        raise DataError("constant column")

    monkeypatch.setattr(registry, "fit", fit)
    with pytest.raises(DataError, match=r"could not fit 20 resampled data sets \(constant columns"):
        bootstrap_feature_weights(LatentClass(2), X, n_bootstrap=2, seed=0)
