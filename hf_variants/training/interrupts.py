"""SIGTERM and SIGINT stop a training run at the end of its step, with a checkpoint, instead of losing
the steps since the last one.

Schedulers (Slurm, Kubernetes, ``timeout``) end a job with SIGTERM and a grace period, a user with
Ctrl-C (SIGINT). While :class:`StopOnSignal` is active, the first such signal only records itself; the
engines look at :attr:`StopOnSignal.received` after each optimizer step, write a checkpoint of that
step and exit with status 128 + the signal's number (the shell's convention), and the same command
resumes the run exactly. A second signal stops at once, as without the handler. Handlers can only be
installed in the main thread: elsewhere (an engine called from a thread) the signals keep their
default behaviour.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingInterrupted(SystemExit):
    """A run stopped by a signal after writing a checkpoint; its exit status is 128 + the signal's number."""

    def __init__(self, signum: int, step: int, checkpoint: str) -> None:
        name = signal.Signals(signum).name
        self.message = (f"Stopped by {name} after step {step}: {checkpoint} holds the run; the same command "
                        "resumes it.")  # fmt: skip
        super().__init__(128 + signum)


class StopOnSignal(TrainerCallback):
    """A context manager that turns the first SIGTERM/SIGINT into :attr:`received` (the signal's number),
    and a Trainer callback that then saves a checkpoint at the end of the step and stops training."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self.previous[signum] = signal.signal(signum, self._record)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous.clear()

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:  # the second signal: stop now, as without this handler
            self.__exit__()
            signal.raise_signal(signum)
            return
        self.received = signum
        logger.warning("%s received: stopping after this step with a checkpoint (send it again to stop at once).",
                       signal.Signals(signum).name)  # fmt: skip

    def on_step_end(self, args, state, control, **kwargs):
        if self.received is not None:
            control.should_save = True
            control.should_training_stop = True
        return control
