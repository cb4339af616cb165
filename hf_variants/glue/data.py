"""Loading GLUE: from a local folder in the original TSV layout, or from the Hub (``nyu-mll/glue``).

Both give the columns of the Hub dataset: the task's text columns (run_glue's ``task_to_keys``),
``label`` (class index; float for STS-B; -1 in unlabeled test files) and ``idx``. The local reader
handles the release's quirks: CoLA train/dev have no header, MRPC's header starts with a BOM and
names its columns ``Quality``/``#1 String``/``#2 String``, RTE/QNLI/MNLI labels are strings, STS-B
scores are floats, test files have no labels. Malformed files raise ``ValueError`` naming the file,
line and problem.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Features, Value, load_dataset

from ..tasks import GlueTask, get_glue_task

GLUE_HUB_ID = "nyu-mll/glue"


def features(task: GlueTask) -> Features:
    label = Value("float32") if task.is_regression else ClassLabel(names=list(task.labels))
    return Features({**{key: Value("string") for key in task.keys}, "label": label, "idx": Value("int32")})


def parse_label(task: GlueTask, raw: str, where: str) -> float | int:
    """A TSV label as the Hub encodes it: class index (numeric or by name) or a float score."""
    text = raw.strip()
    if task.is_regression:
        try:
            score = float(text)
        except ValueError:
            raise ValueError(f"{where}: score {raw!r} is not a number.") from None
        if not math.isfinite(score):
            raise ValueError(f"{where}: score {raw!r} is not a finite number.")
        if task.score_range is not None and not task.score_range[0] <= score <= task.score_range[1]:
            low, high = task.score_range
            raise ValueError(f"{where}: score {raw!r} is outside {task.folder}'s range {low:g}–{high:g}.")
        return score
    if text in task.labels:
        return task.labels.index(text)
    if text.lstrip("-").isdigit() and 0 <= int(text) < len(task.labels):
        return int(text)
    raise ValueError(f"{where}: label {raw!r} is not in the {task.name} label set {list(task.labels)}.")


def read_text_file(path: Path, encoding: str = "utf-8") -> str:
    """A text file's content; bytes that are not UTF-8, or NUL bytes (a binary file), are an error
    naming the file and line."""
    data = path.read_bytes()
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: NUL byte; this is not a text file.")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ValueError(
            f"{path}:{line}: byte 0x{data[error.start]:02x} is not UTF-8; convert the file to UTF-8."
        ) from None


def read_glue_tsv(task: GlueTask, path: Path, labeled: bool) -> Dataset:
    """One split file of the original release as a Dataset with the Hub's columns."""
    if not path.is_file():
        raise FileNotFoundError(f"{task.name}: {path} does not exist (expected the GLUE TSV layout).")
    rows: dict[str, list] = {key: [] for key in (*task.keys, "label", "idx")}
    with io.StringIO(read_text_file(path, "utf-8-sig"), newline="") as handle:  # utf-8-sig drops MRPC's BOM
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        if task.header or not labeled:
            header = next(reader, None)
            if header is None:
                raise ValueError(f"{path} is empty.")
            needed = [*task.columns.values(), *([task.label_column] if labeled else [])]
            missing = [name for name in needed if name not in header]
            if missing:
                raise ValueError(f"{path}: missing column(s) {missing}; the header has {header}.")
            position = {ours: header.index(theirs) for ours, theirs in task.columns.items()}
            if labeled:
                position["label"] = header.index(task.label_column)
            width = len(header)
        else:
            position = dict(task.positional)
            width = max(position.values()) + 1
        for number, fields in enumerate(reader, start=2 if (task.header or not labeled) else 1):
            if not fields or fields == [""]:
                continue
            where = f"{path}:{number}"
            if len(fields) != width:
                raise ValueError(f"{where}: {len(fields)} tab-separated fields, expected {width}.")
            for key in task.keys:
                rows[key].append(fields[position[key]])
            rows["label"].append(parse_label(task, fields[position["label"]], where) if labeled else -1)
            rows["idx"].append(len(rows["idx"]))
    if not rows["idx"]:
        raise ValueError(f"{path} has no examples.")
    if not labeled and not task.is_regression:
        # Unlabeled test rows: -1 is outside the ClassLabel range, so keep the label as an integer column.
        return Dataset.from_dict(rows)
    return Dataset.from_dict(rows, features=features(task))


def load_glue_local(task_name: str, glue_dir: str | Path) -> DatasetDict:
    """Every split of ``task_name`` found in ``glue_dir/<TaskFolder>/`` (test splits unlabeled)."""
    task = get_glue_task(task_name)
    folder = Path(glue_dir) / task.folder
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder} does not exist: --glue_dir must hold the GLUE folders (e.g. {task.folder}/)."
        )
    splits = {}
    for split, filename in task.splits.items():
        path = folder / filename
        if path.is_file():
            splits[split] = read_glue_tsv(task, path, labeled=not split.startswith("test"))
    labeled = [split for split in task.splits if not split.startswith("test")]  # none: a test-only task (AX)
    if labeled and not any(split in splits for split in labeled):
        raise FileNotFoundError(f"{folder} has none of the labeled files {list(task.splits.values())}.")
    return DatasetDict(splits)


def load_glue(task_name: str, glue_dir: str | Path | None = None) -> DatasetDict:
    """Local GLUE folder when given, else the Hub's ``nyu-mll/glue``."""
    if glue_dir is not None:
        return load_glue_local(task_name, glue_dir)
    return load_dataset(GLUE_HUB_ID, get_glue_task(task_name).hub_config)
