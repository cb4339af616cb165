"""Out of memory as an outcome (hf_variants.training.memory): the refused allocation is told from other errors,
and the address-space cap makes torch refuse one instead of the kernel killing the process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from hf_variants.training.memory import is_out_of_memory, limit_address_space, out_of_memory_summary


def refused_allocation() -> RuntimeError:
    """The error torch's CPU allocator raises when the system refuses memory (here: 4 EiB asked for)."""
    with pytest.raises(RuntimeError) as caught:
        torch.empty(1 << 62, dtype=torch.uint8)
    return caught.value


def test_a_refused_allocation_is_told_from_other_errors() -> None:
    refused = refused_allocation()
    assert is_out_of_memory(refused) and is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not is_out_of_memory(ValueError("DefaultCPUAllocator: can't allocate memory"))  # not an allocation
    summary = out_of_memory_summary(refused)
    assert summary.startswith("out of memory: DefaultCPUAllocator: can't allocate memory: you tried to allocate")
    assert "alloc_cpu.cpp" not in summary and "\n" not in summary


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_under_the_cap_an_allocation_beyond_it_is_refused_and_reported_with_the_cap() -> None:
    """In a fresh process: cap the address space 1 GiB above what it maps now, ask for 2 GiB — torch refuses
    (no kill), the error is read as out of memory and its summary names the cap; a small allocation still works."""
    script = textwrap.dedent("""
        import resource, torch
        from hf_variants.training.memory import (GIB, address_space_limit_gib, is_out_of_memory,
                                                 limit_address_space, out_of_memory_summary)
        assert address_space_limit_gib() is None
        mapped = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        limit_address_space(mapped / GIB + 1)
        try:
            torch.ones(1 << 29, dtype=torch.float32)  # 2 GiB
        except RuntimeError as error:
            assert is_out_of_memory(error), error
            print(out_of_memory_summary(error))
        torch.ones(1 << 20)  # 4 MiB: under the cap
        print(address_space_limit_gib())
    """)
    # One thread: on a many-core machine each OpenMP thread started under the cap would map its own stack and arena.
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env=environment)  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary, limit = result.stdout.strip().splitlines()
    assert summary.startswith("out of memory: DefaultCPUAllocator: can't allocate memory")
    assert summary.endswith(f"(address space capped at {float(limit):g} GiB)")


@pytest.mark.parametrize("gib", [0, -2, float("nan"), float("inf")])
def test_a_cap_that_is_not_a_positive_finite_number_is_refused(gib: float) -> None:
    with pytest.raises(ValueError, match=f"positive number of GiB, got {gib}"):
        limit_address_space(gib)
