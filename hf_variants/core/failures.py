"""What a model reports when it cannot compute an answer: one exception type that engines and the lab catch
without knowing which idea raised it."""

from __future__ import annotations

from typing import ClassVar


class ModelFailure(RuntimeError):
    """A failure a model knows of and names in one line, for an input it cannot compute (e.g. an ODE solver that
    could not integrate a block). A training engine stops the run with it, and a study records it as the run's
    outcome under :attr:`status` (a run that did not finish is a result), never as a bug in the package. A
    subclass is built from its one-line message alone: an engine re-raises it with the step it happened at."""

    #: the outcome a study records for a run this failure stopped
    status: ClassVar[str] = "model_failed"
