"""Issue 31 item 9: UMass coherence follows gensim's convention by default; Mimno et al.'s sum is an option."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from latentfs.core.data import DataError
from latentfs.evaluate.coherence import topic_coherence, umass

# 6 documents × 4 words (presence is what counts). D(0) = 4, D(1) = 3, D(2) = 2, D(3) = 2; D(0,1) = 2, D(0,2) = 1,
# D(1,2) = 0, D(0,3) = 2, D(1,3) = 2, D(2,3) = 0.
R = np.array([
    [1, 1, 0, 1],
    [2, 0, 1, 0],
    [1, 1, 0, 1],
    [3, 0, 0, 0],
    [0, 1, 0, 0],
    [0, 0, 3, 0],
])


def test_umass_default_is_gensims_mean_with_epsilon_on_the_fraction():
    # gensim 4 (CoherenceModel(coherence="u_mass"): segmentation.s_one_pre, then
    # direct_confirmation_measure.log_conditional_probability, then the arithmetic mean): for the top words
    # (v_1, v_2, v_3) the pairs are (v_2, v_1), (v_3, v_1), (v_3, v_2), each scored
    # log((D(v_m, v_l)/N + 1e-12) / (D(v_l)/N)), N the number of documents. Written out by hand for words 0, 1, 2:
    n, eps = 6, 1e-12
    expected = (math.log((2 / n + eps) / (4 / n))      # (1, 0): D(0,1) = 2, D(0) = 4
                + math.log((1 / n + eps) / (4 / n))    # (2, 0): D(0,2) = 1
                + math.log((0 / n + eps) / (3 / n))    # (2, 1): never together, D(1) = 3
                ) / 3
    got = umass(np.array([0, 1, 2]), sp.csr_matrix(R))
    assert got == pytest.approx(expected, rel=1e-12)
    assert got == pytest.approx(-9.6724, abs=1e-4)  # gensim 4.4 gives -9.67243849234648 (checked interactively)
    tc = topic_coherence([[0, 1, 2], [0, 3, 1]], R)
    expected2 = (math.log((2 / n + eps) / (4 / n)) + math.log((2 / n + eps) / (4 / n))
                 + math.log((2 / n + eps) / (2 / n))) / 3  # gensim: -0.4620981203702968
    np.testing.assert_allclose(tc, [expected, expected2], rtol=1e-12)


def test_umass_mimno_convention_keeps_the_sum_with_plus_one():
    # Mimno et al. (2011), eq. 1: Σ_{m=2}^{M} Σ_{l<m} log((D(v_m, v_l) + 1) / D(v_l)); the value latentfs gave before
    expected = math.log(3 / 4) + math.log(2 / 4) + math.log(1 / 3)
    got = umass(np.array([0, 1, 2]), sp.csr_matrix(R), convention="mimno")
    assert got == pytest.approx(expected, rel=1e-12)
    tc = topic_coherence([[0, 1, 2]], R, umass_convention="mimno")
    assert tc[0] == pytest.approx(expected, rel=1e-12)


def test_umass_convention_errors():
    with pytest.raises(DataError, match="convention must be 'gensim' or 'mimno'; got 'sum'"):
        umass(np.array([0, 1]), sp.csr_matrix(R), convention="sum")
    with pytest.raises(DataError, match="umass_convention must be 'gensim' or 'mimno'; got 'x'"):
        topic_coherence([[0, 1]], R, umass_convention="x")
