"""Compiling with numba: one rule for every compiled kernel of the library."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["jit"]


def jit(numba: Any, fn: Any, **options: Any) -> Any:
    """``numba.njit(cache=True, nogil=True, **options)(fn)`` when a cache location is writable, else the same
    without a cache (silently). ``numba`` is the module, imported by the caller on first use."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NumbaWarning on an unusable cache must not fail strict runs
            return numba.njit(cache=True, nogil=True, **options)(fn)
    except (RuntimeError, OSError):  # "cannot cache function …: no locator available", or a read-only folder
        return numba.njit(cache=False, nogil=True, **options)(fn)
