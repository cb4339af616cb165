"""Out of memory is an outcome, not a kill: a cap on the process's address space, and the test that tells an
allocation refused by it (or by the GPU) from any other error.

Without a cap, a run that needs more memory than the machine has (an N-ODE block keeps every solver step's
activations for the backward pass, so its memory grows with the steps its adaptive solver takes) ends when the
kernel's OOM killer ends the process: the run leaves no record, and a resumed grid starts the same run again, to
be killed again. Under :func:`limit_address_space` the allocation that would cross the cap fails instead, torch
raises, and the engine's caller records the run as ``out_of_memory`` (:func:`is_out_of_memory`) with the cap in
force (:func:`address_space_limit_gib`), as it records a diverged run, and goes on.
"""

from __future__ import annotations

import math
import sys

#: Bytes in a GiB.
GIB = 1 << 30

#: What torch's CPU allocator says when the system refuses memory (``c10/core/impl/alloc_cpu.cpp``).
CPU_ALLOCATOR_REFUSED = "DefaultCPUAllocator: can't allocate memory"


def limit_address_space(gib: float) -> None:
    """Cap this process's address space (``RLIMIT_AS``, inherited by its children) at ``gib`` GiB. It counts
    mapped memory, not resident memory: a process that has imported torch and transformers maps about 2 GiB
    more than it holds, so leave that margin above the resident size a run may reach."""
    if not (math.isfinite(gib) and gib > 0):
        raise ValueError(f"The memory limit must be a positive number of GiB, got {gib}.")
    if sys.platform == "win32":
        raise ValueError("A memory limit needs a POSIX system (RLIMIT_AS); this one is Windows.")
    import resource

    limit = int(gib * GIB)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and limit > hard:
        raise ValueError(f"The memory limit {gib:g} GiB is above this process's hard limit ({hard / GIB:g} GiB).")
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def address_space_limit_gib() -> float | None:
    """The cap in force (:func:`limit_address_space`), in GiB; None when there is none."""
    if sys.platform == "win32":
        return None
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else round(soft / GIB, 3)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an allocation refused: Python's ``MemoryError``, torch's ``OutOfMemoryError`` (a
    GPU's), or the CPU allocator's ``RuntimeError``."""
    import torch

    if isinstance(error, (MemoryError, torch.OutOfMemoryError)):
        return True
    return isinstance(error, RuntimeError) and CPU_ALLOCATOR_REFUSED in str(error)


def out_of_memory_summary(error: BaseException) -> str:
    """One line for the record: the allocator's own sentence (without torch's source location), and the cap."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if CPU_ALLOCATOR_REFUSED in text:
        text = text[text.index(CPU_ALLOCATOR_REFUSED) :]
    limit = address_space_limit_gib()
    return f"out of memory: {text}" + (f" (address space capped at {limit:g} GiB)" if limit is not None else "")
