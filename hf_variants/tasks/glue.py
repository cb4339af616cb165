"""The GLUE tasks of the task table: input columns (run_glue's ``task_to_keys``), labels, metrics, score
range, special splits (AX: a test split only) and the layout of the original GLUE TSV release (files, header,
column positions)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import TaskDeclaration

#: The files of a task released with a train, a dev and a test split (every GLUE task but MNLI and AX).
STANDARD_SPLITS = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}


@dataclass(frozen=True)
class GlueTask(TaskDeclaration):
    """One task. ``labels`` is ``None`` for regression (STS-B). ``columns`` maps our column names
    (HF's ``nyu-mll/glue`` names) to the TSV header names of the original release, in every file of the task;
    ``header=False`` means positional columns in the labeled files (CoLA train/dev)."""

    name: str
    folder: str
    keys: tuple[str, ...]
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    columns: dict[str, str]
    label_column: str
    splits: dict[str, str] = field(default_factory=lambda: dict(STANDARD_SPLITS))
    header: bool = True
    positional: dict[str, int] = field(default_factory=dict)
    #: The range of a regression task's scores (STS-B: 0-5); scores outside it are data errors.
    score_range: tuple[float, float] | None = None

    @property
    def hub_config(self) -> str:
        """The task's configuration of ``nyu-mll/glue`` on the Hub: its name."""
        return self.name


def same_names(*names: str) -> dict[str, str]:
    """Columns whose TSV header names are our names."""
    return {name: name for name in names}


GLUE_TASKS: dict[str, GlueTask] = {
    "cola": GlueTask(
        "cola", "CoLA", ("sentence",), ("unacceptable", "acceptable"), ("matthews_correlation",),
        same_names("sentence"), "label", header=False, positional={"sentence": 3, "label": 1},
    ),
    "sst2": GlueTask(
        "sst2", "SST-2", ("sentence",), ("negative", "positive"), ("accuracy",), same_names("sentence"), "label",
    ),
    "mrpc": GlueTask(
        "mrpc", "MRPC", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"), ("accuracy", "f1"),
        {"sentence1": "#1 String", "sentence2": "#2 String"}, "Quality",
    ),
    "qqp": GlueTask(
        "qqp", "QQP", ("question1", "question2"), ("not_duplicate", "duplicate"), ("accuracy", "f1"),
        same_names("question1", "question2"), "is_duplicate",
    ),
    "stsb": GlueTask(
        "stsb", "STS-B", ("sentence1", "sentence2"), None, ("pearson", "spearmanr"),
        same_names("sentence1", "sentence2"), "score", score_range=(0.0, 5.0),
    ),
    "mnli": GlueTask(
        "mnli", "MNLI", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), ("accuracy",),
        {"premise": "sentence1", "hypothesis": "sentence2"}, "gold_label",
        splits={"train": "train.tsv", "validation_matched": "dev_matched.tsv",
                "validation_mismatched": "dev_mismatched.tsv", "test_matched": "test_matched.tsv",
                "test_mismatched": "test_mismatched.tsv"},
    ),
    "qnli": GlueTask(
        "qnli", "QNLI", ("question", "sentence"), ("entailment", "not_entailment"), ("accuracy",),
        same_names("question", "sentence"), "label",
    ),
    "rte": GlueTask(
        "rte", "RTE", ("sentence1", "sentence2"), ("entailment", "not_entailment"), ("accuracy",),
        same_names("sentence1", "sentence2"), "label",
    ),
    "wnli": GlueTask(
        "wnli", "WNLI", ("sentence1", "sentence2"), ("not_entailment", "entailment"), ("accuracy",),
        same_names("sentence1", "sentence2"), "label",
    ),
    "ax": GlueTask(
        "ax", "diagnostic", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), ("accuracy",),
        {"premise": "sentence1", "hypothesis": "sentence2"}, "label", splits={"test": "diagnostic.tsv"},
    ),
}  # fmt: skip

#: run_glue's ``task_to_keys``.
TASK_TO_KEYS = {name: task.keys if len(task.keys) == 2 else (task.keys[0], None) for name, task in GLUE_TASKS.items()}
