"""The end of a launched run: how the engines leave the process group that ``accelerate launch`` (torchrun)
started, on success and on failure alike."""

from __future__ import annotations

import torch


def end_process_group() -> None:
    """Destroy the launcher's process group before the process exits, as torch asks: left to interpreter
    shutdown, gloo's worker threads can be destroyed while running, which aborts a finished process
    ("terminate called without an active exception"). Both engines' ``main`` call it in a ``finally``; a
    process that was not launched (or has already ended its group) has nothing to destroy."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
