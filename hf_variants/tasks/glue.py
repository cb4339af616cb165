"""The GLUE tasks of the task table: input columns (run_glue's ``task_to_keys``), labels, metrics, score
range, special splits (AX: a test split only) and the layout of the original GLUE TSV release (files, header,
column positions)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import TaskDeclaration


@dataclass(frozen=True)
class GlueTask(TaskDeclaration):
    """One task. ``labels`` is ``None`` for regression (STS-B). ``columns`` maps our column names
    (HF's ``nyu-mll/glue`` names) to the TSV header names of the original release; ``header=False``
    means positional columns (CoLA train/dev)."""

    name: str
    folder: str
    keys: tuple[str, ...]
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    splits: dict[str, str]
    columns: dict[str, str]
    label_column: str
    test_columns: dict[str, str] = field(default_factory=dict)
    header: bool = True
    positional: dict[str, int] = field(default_factory=dict)
    hub_config: str = ""
    #: The range of a regression task's scores (STS-B: 0-5); scores outside it are data errors.
    score_range: tuple[float, float] | None = None


def _pair(first: str, second: str, header_first: str, header_second: str) -> dict[str, str]:
    return {first: header_first, second: header_second}


GLUE_TASKS: dict[str, GlueTask] = {
    "cola": GlueTask(
        "cola", "CoLA", ("sentence",), ("unacceptable", "acceptable"), ("matthews_correlation",),
        {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"},
        {"sentence": "sentence"}, "label", test_columns={"sentence": "sentence"},
        header=False, positional={"sentence": 3, "label": 1}, hub_config="cola",
    ),
    "sst2": GlueTask(
        "sst2", "SST-2", ("sentence",), ("negative", "positive"), ("accuracy",),
        {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"},
        {"sentence": "sentence"}, "label", test_columns={"sentence": "sentence"}, hub_config="sst2",
    ),
    "mrpc": GlueTask(
        "mrpc", "MRPC", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"), ("accuracy", "f1"),
        {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"},
        _pair("sentence1", "sentence2", "#1 String", "#2 String"), "Quality",
        test_columns=_pair("sentence1", "sentence2", "#1 String", "#2 String"), hub_config="mrpc",
    ),
    "qqp": GlueTask(
        "qqp", "QQP", ("question1", "question2"), ("not_duplicate", "duplicate"), ("accuracy", "f1"),
        {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"},
        _pair("question1", "question2", "question1", "question2"), "is_duplicate",
        test_columns=_pair("question1", "question2", "question1", "question2"), hub_config="qqp",
    ),
    "stsb": GlueTask(
        "stsb", "STS-B", ("sentence1", "sentence2"), None, ("pearson", "spearmanr"),
        {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"},
        _pair("sentence1", "sentence2", "sentence1", "sentence2"), "score",
        test_columns=_pair("sentence1", "sentence2", "sentence1", "sentence2"), hub_config="stsb",
        score_range=(0.0, 5.0),
    ),
    "mnli": GlueTask(
        "mnli", "MNLI", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), ("accuracy",),
        {"train": "train.tsv", "validation_matched": "dev_matched.tsv", "validation_mismatched": "dev_mismatched.tsv",
         "test_matched": "test_matched.tsv", "test_mismatched": "test_mismatched.tsv"},
        _pair("premise", "hypothesis", "sentence1", "sentence2"), "gold_label",
        test_columns=_pair("premise", "hypothesis", "sentence1", "sentence2"), hub_config="mnli",
    ),
    "qnli": GlueTask(
        "qnli", "QNLI", ("question", "sentence"), ("entailment", "not_entailment"), ("accuracy",),
        {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"},
        _pair("question", "sentence", "question", "sentence"), "label",
        test_columns=_pair("question", "sentence", "question", "sentence"), hub_config="qnli",
    ),
    "rte": GlueTask(
        "rte", "RTE", ("sentence1", "sentence2"), ("entailment", "not_entailment"), ("accuracy",),
        {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"},
        _pair("sentence1", "sentence2", "sentence1", "sentence2"), "label",
        test_columns=_pair("sentence1", "sentence2", "sentence1", "sentence2"), hub_config="rte",
    ),
    "wnli": GlueTask(
        "wnli", "WNLI", ("sentence1", "sentence2"), ("not_entailment", "entailment"), ("accuracy",),
        {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"},
        _pair("sentence1", "sentence2", "sentence1", "sentence2"), "label",
        test_columns=_pair("sentence1", "sentence2", "sentence1", "sentence2"), hub_config="wnli",
    ),
    "ax": GlueTask(
        "ax", "diagnostic", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), ("accuracy",),
        {"test": "diagnostic.tsv"},
        _pair("premise", "hypothesis", "sentence1", "sentence2"), "label",
        test_columns=_pair("premise", "hypothesis", "sentence1", "sentence2"), hub_config="ax",
    ),
}  # fmt: skip

#: run_glue's ``task_to_keys``.
TASK_TO_KEYS = {name: task.keys if len(task.keys) == 2 else (task.keys[0], None) for name, task in GLUE_TASKS.items()}
