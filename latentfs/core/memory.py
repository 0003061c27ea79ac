"""Memory before a long fit: what this process may still allocate, and the check a sampler makes before it keeps
its draws (DESIGN.md: memory is estimated before a long fit)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["available_memory", "check_draw_memory"]


def available_memory() -> int | None:
    """Bytes of memory available to new allocations, or None when unknown: Linux ``MemAvailable``, lowered to
    what an address-space limit (``ulimit -v``, ``RLIMIT_AS``) leaves above the current mapping, since an
    allocation past that limit fails whatever the machine has free."""
    avail: int | None = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        avail = None
    room = _address_space_room()
    if room is not None:
        avail = room if avail is None else min(avail, room)
    return avail


def _address_space_room() -> int | None:
    """Bytes left under the soft ``RLIMIT_AS`` (None when there is no such limit or it cannot be read)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    mapped = 0
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    mapped = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return max(int(soft) - mapped, 0)


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def check_draw_memory(
    sample: dict[str, Any], num_chains: int, num_samples: int, budget: float | None, desc: str
) -> int:
    """Bytes the requested draws will take, from one collected draw; a DataError before sampling when that
    is over ``budget`` (default: half the memory available now)."""
    from latentfs.core.data import DataError

    per_draw = sum(np.asarray(v).nbytes for v in sample.values())
    total = per_draw * num_chains * num_samples
    if budget is None:
        avail = available_memory()
        budget = None if avail is None else avail / 2
    if budget is not None and total > budget:
        sizes = ", ".join(f"{k} {_gib(np.asarray(v).nbytes * num_chains * num_samples)}" for k, v in sample.items()
                          if not k.startswith("_"))  # internal bookkeeping (a draw's seed) is counted, not named
        raise DataError(
            f"{desc}: the requested draws need {_gib(total)} ({num_chains} chains × {num_samples} draws × "
            f"{per_draw / 2**20:.2f} MiB a draw: {sizes}), over the memory budget of {_gib(budget)}. Ask for "
            "fewer num_samples, thin the chains (thin=...), store fewer sites (store=...), or raise "
            "memory_budget (bytes)."
        )
    return int(total)
