"""Senator-level blocs of the roll-call simulator (Buntine & Jakulin Section 8.1; issue 12)."""

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import latentfs
from latentfs.core.data import DataError
from latentfs.datasets.rollcall import bloc_membership, senator_blocs, simulate_rollcalls


@pytest.fixture(scope="module")
def fitted():
    rc = simulate_rollcalls(seed=0)  # the simulator's defaults: 459 roll calls, 100 senators, 5 blocs
    model = latentfs.DirichletDCA(5, alpha=0.1, groups=rc.groups)
    return rc, latentfs.fit(model, rc.counts, method="vb", seed=0, warn=False, num_ll_draws=0)


def test_senator_blocs_separate_the_planted_blocs(fitted):
    rc, result = fitted
    blocs = senator_blocs(result, rc.groups, n_senators=rc.n_senators)
    assert blocs.membership.shape == (100, 5) and np.allclose(blocs.membership.sum(1), 1.0)
    # labels are unordered: ARI is label-invariant; measured 1.00
    assert adjusted_rand_score(rc.senator_bloc, blocs.membership.argmax(1)) >= 0.8
    # the roll-call summary credits every vote to the roll call's agenda: nearly one row for everybody
    # (measured ARI 0.03), which is why the senator-level summary exists
    old = bloc_membership(result.mean("topic_word"), result.mean("doc_topic"), rc.counts, rc.groups)[:100]
    assert adjusted_rand_score(rc.senator_bloc, old.argmax(1)) < 0.3
    # the planted Θ gives the planted blocs exactly
    planted = senator_blocs(rc.topic_word, rc.groups, n_senators=rc.n_senators)
    assert adjusted_rand_score(rc.senator_bloc, planted.labels) == pytest.approx(1.0)


def test_senator_blocs_inputs():
    theta = np.array([[0.9, 0.1, 0.5, 0.5, 0.2]])
    with pytest.raises(DataError, match="every group must hold two columns"):
        senator_blocs(theta, [0, 0, 1, 1, 1])
    with pytest.raises(DataError, match="groups must have one entry per column"):
        senator_blocs(theta, [0, 0, 1, 1])
    with pytest.raises(DataError, match="n_blocs"):
        senator_blocs(np.array([[0.9, 0.1, 0.5, 0.5]]), [0, 0, 1, 1], n_blocs=3)
