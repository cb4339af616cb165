"""GLUE: task definitions, local/Hub loading and offline metrics."""

from pathlib import Path

from .data import load_glue, load_glue_local, read_glue_tsv
from .metrics import compute_glue_metrics
from .tasks import TASK_TO_KEYS, TASKS, GlueTask, get_task

#: Path of the offline `evaluate` module: ``evaluate.load(EVALUATE_MODULE, "sst2")``.
EVALUATE_MODULE = str(Path(__file__).parent / "evaluate_glue" / "evaluate_glue.py")

__all__ = [
    "EVALUATE_MODULE",
    "TASKS",
    "TASK_TO_KEYS",
    "GlueTask",
    "compute_glue_metrics",
    "get_task",
    "load_glue",
    "load_glue_local",
    "read_glue_tsv",
]
