"""The one table of tasks (:data:`TASKS`): the GLUE tasks, the from-scratch classification files of the MGK
and TransJect papers (IMDb, AG News, ListOps) and the embedded synthetic tasks, each declaring its labels,
metrics, score range, special splits and guessing level (:class:`~.base.TaskDeclaration`). The fine-tuning
engine, the GLUE loaders and metrics, the main job and the grid all read tasks from it, never by name."""

from __future__ import annotations

from typing import TypeVar

from .base import TaskDeclaration
from .classification_files import FILE_TASKS, FileTask, TextClassificationData
from .embedded import EMBEDDED_TASKS, EmbeddedLevels, EmbeddedTask
from .glue import GLUE_TASKS, TASK_TO_KEYS, GlueTask

#: Every task, name → declaration.
TASKS: dict[str, TaskDeclaration] = {**GLUE_TASKS, **FILE_TASKS, **EMBEDDED_TASKS}

Kind = TypeVar("Kind", bound=TaskDeclaration)


def get_task(name: str, kind: type[Kind] = TaskDeclaration, what: str = "task") -> Kind:
    """The task ``name`` of the family ``kind`` (a GLUE name's case and hyphens ignored: "SST-2"); an unknown
    name is a ``ValueError`` listing that family's tasks."""
    key = name if name in TASKS else name.lower().replace("-", "")
    task = TASKS.get(key)
    if not isinstance(task, kind):
        names = ", ".join(task_name for task_name, declared in TASKS.items() if isinstance(declared, kind))
        raise ValueError(f"Unknown {what} {name!r}; choose from {names}.")
    return task


def get_glue_task(name: str) -> GlueTask:
    """The GLUE task ``name`` (:func:`get_task` of the GLUE family)."""
    return get_task(name, GlueTask, "GLUE task")


__all__ = [
    "EMBEDDED_TASKS",
    "FILE_TASKS",
    "GLUE_TASKS",
    "TASKS",
    "TASK_TO_KEYS",
    "EmbeddedLevels",
    "EmbeddedTask",
    "FileTask",
    "GlueTask",
    "TaskDeclaration",
    "TextClassificationData",
    "get_glue_task",
    "get_task",
]
