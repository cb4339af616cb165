"""GLUE: local/Hub loading and offline metrics of the task table's GLUE tasks (:mod:`hf_variants.tasks`)."""

from pathlib import Path

from ..tasks import TASK_TO_KEYS, GlueTask, get_glue_task
from .data import load_glue, load_glue_local, read_glue_tsv
from .metrics import compute_glue_metrics

#: Path of the offline `evaluate` module: ``evaluate.load(EVALUATE_MODULE, "sst2")``.
EVALUATE_MODULE = str(Path(__file__).parent / "evaluate_glue" / "evaluate_glue.py")

__all__ = [
    "EVALUATE_MODULE",
    "TASK_TO_KEYS",
    "GlueTask",
    "compute_glue_metrics",
    "get_glue_task",
    "load_glue",
    "load_glue_local",
    "read_glue_tsv",
]
