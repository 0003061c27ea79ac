"""Test configuration for tests/ and the doctests in latentfs/: one thread (FIELD_NOTES: small ops are
100-1000x slower with 2 threads under load), float64 by default, and a fixed-seed generator fixture."""

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
