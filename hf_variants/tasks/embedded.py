"""The embedded tasks of the task table: the package's synthetic language (:mod:`hf_variants.synthetic`) asked
four questions, generated from a seed, so that the main job runs with no data at all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import synthetic
from .base import TaskDeclaration


@dataclass(frozen=True)
class EmbeddedLevels:
    """The difficulty knobs of the embedded tasks (``--attractors``, ``--recall_pairs``)."""

    attractors: int = synthetic.DEFAULT_ATTRACTORS
    recall_pairs: int = synthetic.DEFAULT_RECALL_PAIRS

    @classmethod
    def from_settings(cls, settings: Any) -> EmbeddedLevels:
        """The levels a comparison's settings ask for (its arguments or the settings a results file records):
        each knob left unset at its default."""
        values = settings if isinstance(settings, dict) else vars(settings)
        return cls(**{knob: values[knob] for knob in ("attractors", "recall_pairs") if values.get(knob) is not None})

    def __post_init__(self) -> None:
        if not 1 <= self.recall_pairs <= synthetic.RECALL_KEYS:
            raise ValueError(f"argument --recall_pairs: {self.recall_pairs} is outside 1..{synthetic.RECALL_KEYS} "
                             f"(the task has {synthetic.RECALL_KEYS} keys, each used once per sequence)")  # fmt: skip


#: The levels the main job runs at unless asked otherwise.
DEFAULT_LEVELS = EmbeddedLevels()

Rows = list[tuple[str, int]]


@dataclass(frozen=True)
class EmbeddedTask(TaskDeclaration):
    """A synthetic classification task: ``generate(count, seed, levels)`` gives ``(sentence, label)`` rows,
    ``describe(levels)`` says what it asks; ``guessing(levels)``, where given, is its guessing level above the
    majority share."""

    name: str
    labels: tuple[str, ...]
    generate: Callable[[int, int, EmbeddedLevels], Rows] = field(compare=False)
    describe: Callable[[EmbeddedLevels], str] = field(compare=False)
    guessing: Callable[[EmbeddedLevels], float] | None = field(default=None, compare=False)
    metrics: tuple[str, ...] = ("accuracy",)
    score_range: tuple[float, float] | None = None

    def guessing_level(self, levels: EmbeddedLevels | None = None) -> float | None:
        return None if self.guessing is None else self.guessing(levels or DEFAULT_LEVELS)


EMBEDDED_TASKS: dict[str, EmbeddedTask] = {
    "attractor_number": EmbeddedTask(
        "attractor_number", ("singular", "plural"),
        lambda count, seed, levels: synthetic.synthetic_attractor_number(count, seed, levels.attractors),
        lambda levels: f"attractor number (is the subject plural, past up to {levels.attractors} phrases with nouns "
                       "of either number?)",
    ),
    "recall": EmbeddedTask(
        "recall", tuple(f"v{value}" for value in range(synthetic.RECALL_VALUES)),
        lambda count, seed, levels: synthetic.synthetic_recall(count, seed, levels.recall_pairs),
        lambda levels: f"recall (which value came with the asked key, among {levels.recall_pairs} key–value pairs?)",
        guessing=lambda levels: synthetic.recall_guessing_level(levels.recall_pairs),
    ),
    "subject_number": EmbeddedTask(
        "subject_number", ("singular", "plural"),
        lambda count, seed, levels: synthetic.synthetic_subject_number(count, seed),
        lambda levels: "subject number (is the subject plural? the verb's form is no clue)",
    ),
    "agreement": EmbeddedTask(
        "agreement", ("unacceptable", "acceptable"),
        lambda count, seed, levels: synthetic.synthetic_acceptability(count, seed),
        lambda levels: "subject–verb agreement (is the verb form right for the subject's number?)",
    ),
}  # fmt: skip
