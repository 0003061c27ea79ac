"""Relabelling on every component-indexed site jointly (issue 30): two components that one site cannot tell apart
(HMM states with overlapping means, as on DAX daily returns) keep their other sites straight."""

import numpy as np

from latentfs.core.results import Posterior


def _switched_draws(rng, n_draws=400):
    # two components with the same mean and very different variances; every draw's labels permuted at random
    means = np.array([0.0, 0.0]) + 0.05 * rng.normal(size=(2, n_draws, 2))
    variances = np.array([0.5, 4.0]) * np.exp(0.05 * rng.normal(size=(2, n_draws, 2)))
    transmat = np.broadcast_to(np.array([[0.95, 0.05], [0.2, 0.8]]), (2, n_draws, 2, 2)).copy()
    flip = rng.random((2, n_draws)) < 0.3
    for arr in (means, variances):
        arr[flip] = arr[flip][:, ::-1]
    transmat[flip] = transmat[flip][:, ::-1, ::-1]
    return means, variances, transmat, flip


def _posterior(means, variances, transmat):
    return Posterior(model="m", method="gibbs", trace=np.zeros((2, means.shape[1])),
                     dims={"means": ("component",), "variances": ("component",),
                           "transmat": ("component", "component_to")},
                     coords={"component": ["c0", "c1"], "component_to": ["c0", "c1"]},
                     draws={"means": means, "variances": variances, "transmat": transmat})


def test_align_matches_on_every_component_site_jointly():
    rng = np.random.default_rng(0)
    means, variances, transmat, _ = _switched_draws(rng)
    joint = _posterior(means.copy(), variances.copy(), transmat.copy()).align("means", also=("component_to",))
    v = joint.samples("variances")
    # every draw puts the small variance on one label and the large on the other, in both chains
    small = v[..., 0] < v[..., 1]
    assert small.all() or (~small).all()
    assert joint.alignment["matched_on"] == ["means", "variances", "transmat"]
    t = joint.samples("transmat")
    np.testing.assert_allclose(np.sort(t[..., 0, 0].ravel())[[0, -1]], t[0, 0, 0, 0])  # one row in every draw
    # matching on the means alone (the one-site rule) leaves draws with their variances swapped
    alone = _posterior(means.copy(), variances.copy(), transmat.copy()).align("means", match_on=("means",))
    v1 = alone.samples("variances")
    share = float((v1[..., 0] < v1[..., 1]).mean())
    assert 0.1 < share < 0.9
