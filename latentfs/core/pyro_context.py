"""Running Pyro's global machinery safely: seeded, serialised, and leaving the caller's state alone.

Pyro keeps global state: the effect-handler stack, the parameter store, and ``pyro.set_rng_seed``, which
reseeds Python's, NumPy's and torch's global generators. Two fits in two threads collide on the first two
("Messenger is not on the bottom of the stack"), and any seeded run overwrites the caller's random state.
:func:`pyro_scope` wraps every Pyro-backed path (NUTS, SVI, simulation): one process-wide lock serialises
them, the caller's Python, NumPy and torch generators are saved and restored, and the parameter store is
scoped to the call.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

__all__ = ["pyro_scope"]

# Re-entrant: a seeded simulation may run inside a seeded fit.
_PYRO_LOCK = threading.RLock()


@contextmanager
def pyro_scope(seed: int | None = None) -> Iterator[None]:
    """Run a block of Pyro code under the process-wide Pyro lock, seeded with ``seed`` (if given), with
    the caller's Python, NumPy and torch random states restored afterwards."""
    import pyro

    with _PYRO_LOCK:
        py_state = random.getstate()
        np_state = np.random.get_state()
        try:
            with torch.random.fork_rng(devices=[]), pyro.get_param_store().scope():
                if seed is not None:
                    pyro.set_rng_seed(int(seed))
                yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
