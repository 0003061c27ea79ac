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
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

__all__ = ["pyro_scope", "simulate_sites", "simulation_seed"]

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


def simulation_seed(seed: Any) -> int | None:
    """``simulate``'s seed checked by :func:`~latentfs.core.options.check_seed`, as an int for
    ``torch.manual_seed`` (a numpy or torch Generator gives one draw)."""
    from latentfs.core.options import as_rng, check_seed

    seed = check_seed(seed)
    if seed is None or isinstance(seed, int):
        return seed
    return int(as_rng(seed).integers(2**62))


def simulate_sites(fn: Any, seed: Any, *args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
    """The one simulation runner of the Pyro models: run ``fn(*args, **kwargs)`` (a model, possibly conditioned
    on some sites) under :func:`pyro_scope` with torch seeded by ``seed`` (checked by :func:`simulation_seed`;
    the caller's random state is restored), and return every sample site's value as a numpy array (the plates'
    index sites left out)."""
    from pyro import poutine
    from pyro.poutine.util import site_is_subsample

    seed = simulation_seed(seed)
    with pyro_scope():  # the process-wide Pyro lock and a scoped RNG (caller state restored)
        if seed is not None:
            torch.manual_seed(int(seed))
        with torch.no_grad(), warnings.catch_warnings():
            # torch 2.x Wishart.rsample flags every *valid* draw as "Singular sample detected" (it tests the
            # support check without negating it); the draws themselves are fine.
            warnings.filterwarnings("ignore", message="Singular sample detected")
            trace = poutine.trace(fn).get_trace(*args, **kwargs)
    return {
        name: site["value"].detach().cpu().numpy()
        for name, site in trace.nodes.items()
        if site["type"] == "sample" and not site_is_subsample(site)
    }
