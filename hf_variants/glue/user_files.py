"""Users' own task files (``--train_file``/``--validation_file``/``--test_file``: CSV, JSON lines or a
JSON array), read cell by cell so that every bad cell is named with its file and line.

``datasets``' CSV/JSON builders infer each column's type from its cells, so one empty label cell turns
a classification task into regression, a repeated header row adds a class named ``label``, a JSON row
without a label adds a class ``None``, and their errors name a row index (or only a log record), not
the file's line. Here every cell stays text until it is checked:

* text cells must be present and non-empty; ``NA``, ``null`` or ``None`` written in a CSV are text;
* labels: with a GLUE task, the task's label set (:func:`~hf_variants.glue.data.parse_label`); without,
  ``label_type="auto"`` reads the label set from the training file — classification unless *every*
  training label is written as a non-integer number (``0.5``, ``3.0``), then regression — and
  ``"classification"``/``"regression"`` say it explicitly; ``"multi_label"``: each row has a set of labels,
  written ``comedy,drama`` (comma-separated; in a CSV file the cell is quoted) or, in JSON, as a list
  (:func:`label_set`; ``"auto"`` reads a training file whose every label is a JSON list so). Validation labels
  must be in the training set. ``-1`` or an empty label marks an
  unlabeled row: allowed in test files only;
* a CSV row with more or fewer fields than the header, a row that repeats the header and a line that is
  not a JSON object are errors naming the line.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

from ..tasks import GlueTask
from .data import parse_label, read_text_file

LABEL = "label"
LABEL_TYPES = ("auto", "classification", "regression", "multi_label")
#: What separates the labels of a multi-label row's cell (``comedy,drama``).
LABEL_SEPARATOR = ","
#: Label cells that mark an unlabeled row (datasets' convention for test sets).
UNLABELED = ("", "-1")


@dataclass(frozen=True)
class Table:
    """A file's columns and its rows, each with the line it starts on; every cell is text (``None``
    where a JSON row has no such key or a ``null``)."""

    path: Path
    columns: list[str]
    rows: list[tuple[int, dict[str, str | None]]]

    def where(self, line: int) -> str:
        return f"{self.path}:{line}"


def read_table(path: Path) -> Table:
    """A CSV or JSON(L) file as a :class:`Table`."""
    text = read_text_file(path)  # not UTF-8, or binary: an error with the line
    if path.suffix.lower() == ".csv":
        return _read_csv(path, text)
    return _read_json(path, text)


def _read_csv(path: Path, text: str) -> Table:
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""))
    rows: list[tuple[int, dict[str, str | None]]] = []
    header: list[str] | None = None
    start = 1
    for fields in reader:
        line, start = start, reader.line_num + 1
        if not fields or all(not field.strip() for field in fields):
            continue  # a blank line
        if header is None:
            if len(fields) == 1 and "\t" in fields[0]:
                raise ValueError(
                    f"{path}:{line}: the header is one field holding tabs ({fields[0]!r}): the file is tab-separated. "
                    "Save it with commas (a .csv file) or as JSON lines."
                )
            header = [name.strip() for name in fields]
            duplicated = sorted({name for name in header if header.count(name) > 1})
            if duplicated or "" in header:
                problem = f"names {duplicated} twice" if duplicated else "has an empty column name"
                raise ValueError(f"{path}:{line}: the header {problem} ({header}).")
            continue
        if [field.strip() for field in fields] == header:
            raise ValueError(f"{path}:{line}: this row repeats the header; remove it.")
        if len(fields) != len(header):
            raise ValueError(f"{path}:{line}: {len(fields)} fields, but the header has {len(header)} ({header}).")
        rows.append((line, dict(zip(header, fields, strict=True))))
    if header is None:
        raise ValueError(f"{path} is empty.")
    return Table(path, header, rows)


def _read_json(path: Path, text: str) -> Table:
    objects: list[tuple[int, Any]] = []
    if text.lstrip().startswith("["):  # one JSON array of objects
        try:
            items = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: not valid JSON ({error.msg}).") from None
        objects = [(_line_of_item(text, index), item) for index, item in enumerate(items)]
    else:  # JSON lines
        for line, content in enumerate(text.splitlines(), 1):
            if not content.strip():
                continue
            try:
                objects.append((line, json.loads(content)))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{line}: not a JSON object ({error.msg}, column {error.colno}).") from None
    columns: list[str] = []
    rows = []
    for line, item in objects:
        if not isinstance(item, dict):
            raise ValueError(f"{path}:{line}: a {type(item).__name__}, not a JSON object with named fields.")
        columns += [key for key in item if key not in columns]
        rows.append((line, {key: _json_cell(value) for key, value in item.items()}))
    if not rows:
        raise ValueError(f"{path} has no rows.")
    return Table(path, columns, rows)


def _line_of_item(text: str, index: int) -> int:
    """The line an array's ``index``-th top-level object starts on (for messages)."""
    depth, count = 0, -1
    in_string = escaped = False
    for position, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth == 2:
                count += 1
                if count == index:
                    return text.count("\n", 0, position) + 1
        elif char in "]}":
            depth -= 1
    return 1


def _json_cell(value: Any) -> str | None:
    """A JSON value as the text a CSV cell would hold (``true``, ``1``, ``0.5``); ``null`` → ``None``."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


def load_task_files(
    files: Mapping[str, Path], task: GlueTask | None, text_columns: Sequence[str] | None, label_type: str = "auto"
) -> DatasetDict:
    """The splits of users' files with the text columns as strings and ``label`` as class index
    (``ClassLabel`` with the label set) or float score. ``text_columns`` ``None`` chooses them from the
    training file as run_glue does (:func:`choose_text_columns`)."""
    if label_type not in LABEL_TYPES:
        raise ValueError(f"--label_type must be one of {LABEL_TYPES}; got {label_type!r}.")
    tables = {split: read_table(Path(path)) for split, path in files.items()}
    for split, table in tables.items():
        if not table.rows:
            raise ValueError(f"The {split} file {table.path} has no rows (a header only).")
    reference = tables.get("train") or next(iter(tables.values()))
    keys = list(text_columns) if text_columns is not None else choose_text_columns(reference.columns)
    for split, table in tables.items():
        needed = [*keys, *([LABEL] if not split.startswith("test") else [])]
        missing = [name for name in needed if name not in table.columns]
        if missing:
            for_task = f" for task {task.name}" if task is not None else ""
            raise ValueError(f"{table.path}: missing column(s) {missing}{for_task} (columns: {table.columns}).")
        for line, row in table.rows:
            for key in keys:
                if row.get(key) is None or not row[key].strip():
                    raise ValueError(f"{table.where(line)}: the {key!r} cell is empty.")
    if task is not None and label_type == "multi_label":
        raise ValueError(f"--label_type multi_label is for files without --task_name; {task.name} has one label per "
                         "row.")  # fmt: skip
    labels = _label_feature(tables, task, label_type)
    return DatasetDict({split: _dataset(table, keys, labels, task, split) for split, table in tables.items()})


def choose_text_columns(columns: Sequence[str]) -> list[str]:
    """run_glue's choice of input columns for files without a task: ``sentence1``/``sentence2``, else
    the first one or two columns that are not ``label``/``idx``."""
    candidates = [name for name in columns if name not in (LABEL, "idx")]
    if "sentence1" in candidates and "sentence2" in candidates:
        return ["sentence1", "sentence2"]
    if not candidates:
        raise ValueError(f"No text column besides the label: columns {list(columns)}.")
    return candidates[:2]


def _label_cells(table: Table, split: str) -> Iterator[tuple[int, str]]:
    """``(line, label text)`` of the labeled rows; an unlabeled row is an error outside test files."""
    for line, row in table.rows:
        cell = (row.get(LABEL) or "").strip() if LABEL in table.columns else ""
        if cell in UNLABELED:
            if split.startswith("test"):
                continue
            what = "has no label" if cell == "" else "has label -1 (unlabeled)"
            raise ValueError(f"{table.where(line)}: this {split} row {what}; training and validation rows need one.")
        yield line, cell


def label_set(cell: str, where: str) -> list[str]:
    """The labels of a multi-label row: a JSON list (``["comedy", "drama"]``, what a JSON file's list becomes)
    or :data:`LABEL_SEPARATOR`-separated text (``comedy,drama``); a label named twice or an empty one is an
    error naming ``where``."""
    if cell.startswith("["):
        try:
            parsed = json.loads(cell)
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, list) or not all(isinstance(item, str | int) for item in parsed):
            raise ValueError(f"{where}: label {cell!r} is not a list of labels (strings or integers).")
        labels = [str(item).strip() for item in parsed]
    else:
        labels = [part.strip() for part in cell.split(LABEL_SEPARATOR)]
    if "" in labels or len(set(labels)) != len(labels):
        problem = "an empty label" if "" in labels else "a label twice"
        raise ValueError(f"{where}: label {cell!r} holds {problem}; write the row's labels as a,b (multi-label).")
    return labels


def _multi_label_feature(tables: Mapping[str, Table]) -> List:
    """The label sets' feature: a list of class ids among every label of the training file (sorted)."""
    names = sorted({label for line, cell in _label_cells(tables["train"], "train")
                    for label in label_set(cell, tables["train"].where(line))})  # fmt: skip
    for split, table in tables.items():
        for line, cell in _label_cells(table, split) if split != "train" else ():
            unknown = sorted(set(label_set(cell, table.where(line))) - set(names))
            if unknown:
                raise ValueError(f"{table.where(line)}: label(s) {unknown} not in the label set of the training file "
                                 f"{tables['train'].path} ({names}).")  # fmt: skip
    return List(ClassLabel(names=names))


def _label_feature(tables: Mapping[str, Table], task: GlueTask | None, label_type: str) -> ClassLabel | Value | List:
    """The label feature: the task's, or read from the training file and checked against the others."""
    if task is not None:
        return Value("float32") if task.is_regression else ClassLabel(names=list(task.labels))
    if "train" not in tables:
        raise ValueError("Files without --task_name need a training file: the label set is read from it.")
    cells = list(_label_cells(tables["train"], "train"))
    if label_type == "multi_label" or (label_type == "auto" and all(cell.startswith("[") for _, cell in cells)):
        return _multi_label_feature(tables)  # a JSON file's label lists are label sets
    numbers = {cell: _number(cell) for _, cell in cells}
    if label_type == "regression" or (
        label_type == "auto" and all(value is not None for value in numbers.values())
        and any(not _is_integer_text(cell) for cell in numbers)
    ):  # fmt: skip
        for line, cell in cells:
            if numbers[cell] is None or not math.isfinite(numbers[cell]):
                raise ValueError(f"{tables['train'].where(line)}: label {cell!r} is not a finite number (regression).")
        return Value("float32")
    names = sorted(numbers, key=lambda cell: (numbers[cell], cell)) if all(
        _is_integer_text(cell) for cell in numbers
    ) else sorted(numbers)  # fmt: skip
    for split, table in tables.items():
        if split == "train":
            continue
        for line, cell in _label_cells(table, split):
            if cell not in numbers:
                raise ValueError(
                    f"{table.where(line)}: label {cell!r} is not in the label set of the training file "
                    f"{tables['train'].path} ({names})."
                )
    return ClassLabel(names=names)


def _dataset(table: Table, keys: Sequence[str], labels: ClassLabel | Value | List, task: GlueTask | None,
             split: str) -> Dataset:  # fmt: skip
    columns: dict[str, list[Any]] = {key: [row[key] for _, row in table.rows] for key in keys}
    features = {key: Value("string") for key in keys}
    if LABEL in table.columns:
        encoded = []
        for line, row in table.rows:
            cell = (row.get(LABEL) or "").strip()
            if cell in UNLABELED and split.startswith("test"):
                encoded.append(-1 if isinstance(labels, ClassLabel) else [] if isinstance(labels, List) else math.nan)
            elif isinstance(labels, List):
                encoded.append([labels.feature.str2int(label) for label in label_set(cell, table.where(line))])
            elif task is not None:
                encoded.append(parse_label(task, cell, table.where(line)))
            elif isinstance(labels, ClassLabel):
                encoded.append(labels.str2int(cell))
            else:
                encoded.append(float(cell))
        columns[LABEL], features[LABEL] = encoded, labels
    return Dataset.from_dict(columns, features=Features(features))


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _is_integer_text(text: str) -> bool:
    return text.lstrip("+-").isdigit()
