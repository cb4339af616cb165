"""The grid's reading of a task from the task table (:data:`hf_variants.tasks.TASKS`): a from-scratch
classification file (:class:`~hf_variants.tasks.FileTask`: IMDb, AG News, ListOps), or a single-sentence GLUE
classification task scored by accuracy (SST-2: its training file shuffled with a fixed seed, its dev file as the
test split, since GLUE's test file has no labels)."""

from __future__ import annotations

from pathlib import Path

from ..tasks import TASKS, FileTask, GlueTask, TaskDeclaration, TextClassificationData
from ..tasks.classification_files import SPLIT_SEED, shuffled


def readable(task: TaskDeclaration) -> bool:
    """Whether the grid reads ``task``: one text, classes, and accuracy as its metric (the grid reports
    accuracy; a task scored otherwise would get a number it does not report)."""
    if isinstance(task, FileTask):
        return True
    return isinstance(task, GlueTask) and len(task.keys) == 1 and not task.is_regression and \
        task.headline_metric == "accuracy" and "train" in task.splits and "validation" in task.splits  # fmt: skip


#: The tasks a study may name.
GRID_TASKS = tuple(name for name, task in TASKS.items() if readable(task))


def load_glue_task(task: GlueTask, data_dir: Path) -> TextClassificationData:
    from ..glue.data import load_glue_local

    splits = load_glue_local(task.name, data_dir / "glue")
    key = task.keys[0]
    train = shuffled(list(zip(splits["train"][key], splits["train"]["label"], strict=True)))
    test = list(zip(splits["validation"][key], splits["validation"]["label"], strict=True))
    return TextClassificationData.from_pairs(
        task.name, task.num_labels, train, test,
        f"glue/{task.folder}/train.tsv ({len(train)}, shuffled with seed {SPLIT_SEED}) and glue/{task.folder}/dev.tsv "
        f"({len(test)}) as the test split (GLUE's test file has no labels)",
    )  # fmt: skip


def load_task(name: str, data_dir: Path | str, max_train: int | None = None, max_test: int | None = None):
    """Load a task; ``max_train``/``max_test`` keep the first examples of the seeded order (a random
    subset, the same for every model and run)."""
    if name not in GRID_TASKS:
        raise ValueError(f"Unknown task {name!r}; choose one of {', '.join(GRID_TASKS)}.")
    task = TASKS[name]
    data = task.load(Path(data_dir)) if isinstance(task, FileTask) else load_glue_task(task, Path(data_dir))
    train, test = slice(None, max_train), slice(None, max_test)
    split = data.split
    if max_train is not None or max_test is not None:
        split += f"; first {len(data.train_texts[train])} train / {len(data.test_texts[test])} test examples used"
    return TextClassificationData(
        data.name,
        data.num_labels,
        data.train_texts[train],
        data.train_labels[train],
        data.test_texts[test],
        data.test_labels[test],
        split,
    )
