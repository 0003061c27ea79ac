"""What every plot shares: matplotlib imported on first use, and the checks of a result, names and levels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from latentfs.core.data import DataError
from latentfs.core.results import Posterior


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise DataError(
            "plots need the package 'matplotlib', which is not installed. Install it with "
            "pip install 'latentfs[plot]'."
        ) from None
    return plt


def _check_result(result: Any, needs: Sequence[str], what: str) -> Posterior:
    if not isinstance(result, Posterior):
        raise DataError(f"result must be a latentfs Posterior (from latentfs.fit); got {type(result).__name__}.")
    missing = [s for s in needs if s not in result.sites]
    if missing:
        raise DataError(
            f"result must come from {what} (sites {list(needs)}); sites {missing} are missing from {result.sites}."
        )
    return result


def _names(given: Sequence[str] | None, fallback: Sequence[str] | None, n: int, arg: str, prefix: str) -> list[str]:
    if given is not None:
        names = [str(x) for x in given]
        if len(names) != n:
            raise DataError(f"{arg} must have one name per column ({n}); got {len(names)} names. Pass {n} names.")
        return names
    if fallback is not None and len(fallback) == n:
        return [str(x) for x in fallback]
    return [f"{prefix}{j}" for j in range(n)]


def _check_level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < float(level) < 1:
        raise DataError(f"level must lie in (0, 1); got {level!r}. Use e.g. 0.9 for a 90% band.")
    return float(level)


def _grid(n: int, ncols: int) -> tuple[int, int]:
    ncols = max(1, min(ncols, n))
    return -(-n // ncols), ncols
