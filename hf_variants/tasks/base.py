"""What every task declares, whichever family it belongs to: its labels (or none: regression), its metrics,
the range of its scores and the level a model reaches by guessing."""

from __future__ import annotations

from typing import Any


class TaskDeclaration:
    """The part of a task that the engines, the studies and the verdicts read. Each family (GLUE, the
    from-scratch classification files, the embedded synthetic tasks) is a frozen dataclass that declares these
    fields among its own:

    * ``name``; ``labels``: the class names, ``None`` for regression;
    * ``metrics``: the metrics it reports, the first of them (F1 where it is reported) its headline;
    * ``score_range``: the range of a regression task's scores (STS-B: 0–5); scores outside it are data errors.
    """

    name: str
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    score_range: tuple[float, float] | None

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def headline_metric(self) -> str:
        """The one number a summary table shows: F1 where it is reported (MRPC, QQP), else the first metric."""
        return "f1" if "f1" in self.metrics else self.metrics[0]

    def guessing_level(self, levels: Any = None) -> float | None:
        """The score a model that did not learn the task reaches by guessing, where the task declares one above
        its dev majority share (``levels``: the embedded tasks' difficulty); ``None`` for a task whose guessing
        level is the majority share each run records."""
        return None
