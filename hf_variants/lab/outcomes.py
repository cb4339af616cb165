"""The one reading of a run's record into the protocol's :class:`~.verdicts.RunOutcome`, for every study.

A study's records come in one of three formats, each written by the package: the fine-tuning engine's
``results.json`` (:data:`ENGINE_RESULTS`: the main job's held-out runs and the GLUE studies' runs), the main
job's final-run record (:data:`MAIN_JOB_RUN`, :func:`~.measurement.final_run`) and the grid's run record
(:data:`GRID_RUN`, :func:`~.grid_training.train_and_evaluate`). Each format is declared once, as a field map
(:class:`RecordFields`: where it keeps the score, the failure, the one-class flag, the loss curve, the chance
level), and :func:`read_outcome` is the one function that reads any of them, so that the rules of
:mod:`.verdicts` see the same run the same way whichever study ran it. A format that does not record a
measure declares None for it, and the test that needs it is not made (no loss curve: no plateau test; no
chance level: no at-chance test).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..tasks import get_task
from .verdicts import RunOutcome, collapsed

#: The metric whose constant guess the at-chance test knows (:func:`~.statistics.guessing_bound`).
ACCURACY = "accuracy"


@dataclass(frozen=True)
class RecordFields:
    """Where one record format keeps what the verdicts read. Each field is a dotted path into the record
    (``eval.validation.{metric}``, where ``{metric}`` is the task's headline metric); None: not recorded."""

    value: str  # the headline score
    failed: str  # what stopped a failed run: its error text or its status
    finished_as: str | None = None  # the value ``failed`` holds on a finished run; None: absent there
    one_class: str | None = None  # a flag: predicted one class, or one constant score
    collapse_measures: str | None = None  # or the engine's collapse measures (:func:`~.verdicts.collapsed`)
    curve: str | None = None  # the training-loss curve, ``[{"step", "loss"}, …]``
    chance: str | None = None  # a constant guess's accuracy on the scored split
    examples: str | None = None  # the size of the scored split
    loss: str | None = None  # the loss on the scored split (breaks a tie in the rate choice)
    scored_by: str | None = None  # the metric every run of the format is scored by; None: the task's headline


#: ``run_glue``'s ``results.json`` (a run that raised is kept by the main job as ``{"failed": error}``).
ENGINE_RESULTS = RecordFields(value="eval.validation.{metric}", failed="failed",
                              collapse_measures="eval.validation", loss="eval.validation.loss")  # fmt: skip
#: The main job's final-run record (:func:`~.measurement.final_run`).
MAIN_JOB_RUN = RecordFields(value="value", failed="failed", one_class="did_not_learn", curve="curve",
                            chance="chance", examples="dev_examples")  # fmt: skip
#: The grid's run record. Its scored split's size and majority share are kept beside it, in ``data.json``
#: (:func:`~.grid.run_outcome` passes them); its loss curve is kept but not declared: no plateau test (ibid.).
GRID_RUN = RecordFields(value="accuracy", failed="status", finished_as="finished", one_class="predicts_one_class",
                        scored_by=ACCURACY)  # fmt: skip


def field(record: Mapping[str, Any], path: str | None) -> Any:
    """The value at a dotted ``path`` of ``record``; None when any step of it is missing (or no path)."""
    if path is None:
        return None
    value: Any = record
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def read_outcome(record: Mapping[str, Any], fields: RecordFields, task: str | None = None, *,
                 chance: float | None = None, examples: int | None = None) -> RunOutcome:  # fmt: skip
    """``record`` (of the format ``fields`` declares) as the protocol's verdicts read it. ``task`` names the
    headline metric (needed unless the format declares ``scored_by``). ``chance``: a guessing level known
    beside the record (the task's declared level, or the scored split's majority share): the at-chance test
    uses the highest of it and the recorded one, and only for an accuracy. ``examples``: the scored split's
    size where the record does not keep it. A finished run whose score is undefined (a correlation of
    constant predictions) is counted as one class, with a NaN score."""
    if fields.scored_by is None and task is None:
        raise ValueError("read_outcome: this record format is scored by its task's headline metric; name the task")
    metric = fields.scored_by or get_task(task).headline_metric
    stopped = field(record, fields.failed)
    if stopped is not None and stopped != fields.finished_as:
        return RunOutcome(None, failed=str(stopped))
    raw = field(record, fields.value.format(metric=metric))
    value = math.nan if raw is None else float(raw)
    measures = field(record, fields.collapse_measures)
    one_class = (bool(field(record, fields.one_class)) or (measures is not None and collapsed(measures))
                 or not math.isfinite(value))  # fmt: skip
    levels = [level for level in (field(record, fields.chance), chance) if level is not None]
    loss = field(record, fields.loss)
    return RunOutcome(
        value,
        one_class=one_class,
        losses=[point["loss"] for point in field(record, fields.curve) or []],
        chance=max(levels) if levels and metric == ACCURACY else None,
        examples=field(record, fields.examples) or examples,
        loss=None if loss is None else float(loss),
    )
