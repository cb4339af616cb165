"""The from-scratch sequence-classification tasks of the MGK (LRA) and TransJect papers, read from local files
(the task table's :class:`FileTask` rows).

Layout under ``data_dir`` (``hf-variants study --data_dir``):

* ``imdb/{train,test}.csv`` — columns ``id,label,rating,text``, labels 0/1, 25,000 rows each;
* ``ag_news/test.csv`` — columns ``label,title,description``, labels 1–4; only the official *test* file
  exists here, so it is split into train/test with a fixed seed (:data:`SPLIT_SEED`), 80/20;
* ``listops/test_d20s.tsv`` — ``label<TAB>expression``, labels 0–9 (the original ListOps of Nangia &
  Bowman 2018, not LRA's 2K-token version); also only a test file, split likewise;

Every malformed row is an error naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .base import TaskDeclaration

#: Seed of the train/test split of a task that has only one file, and of the subsampling.
SPLIT_SEED = 0
#: Share of such a file that becomes the test split.
TEST_SHARE = 0.2


@dataclass(frozen=True)
class TextClassificationData:
    """Texts and integer labels of one task's train and test splits, and how they were made."""

    name: str
    num_labels: int
    train_texts: list[str]
    train_labels: list[int]
    test_texts: list[str]
    test_labels: list[int]
    split: str

    @classmethod
    def from_pairs(cls, name: str, num_labels: int, train: list[tuple[str, int]], test: list[tuple[str, int]],
                   split: str) -> TextClassificationData:  # fmt: skip
        """The splits from ``(text, label)`` pairs."""
        return cls(name, num_labels, [text for text, _ in train], [label for _, label in train],
                   [text for text, _ in test], [label for _, label in test], split)  # fmt: skip

    def held_out(self, fraction: float) -> tuple[tuple[list[str], list[int]], tuple[list[str], list[int]]]:
        """``(fit, held_out)``: the training split without / with only its last ``fraction`` (the
        training split is already in a seeded random order), for choosing hyperparameters without
        touching the test split."""
        if not 0 < fraction < 1:
            raise ValueError(f"held-out fraction must be in (0, 1), got {fraction}.")
        cut = len(self.train_texts) - max(1, round(fraction * len(self.train_texts)))
        return (self.train_texts[:cut], self.train_labels[:cut]), (self.train_texts[cut:], self.train_labels[cut:])


def _read_rows(path: Path, delimiter: str, header: list[str] | None) -> list[tuple[int, list[str]]]:
    """``(line number, fields)`` of a CSV/TSV file, checking the header and the field count."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (expected the layout in "
                                "hf_variants.tasks.classification_files).")
    csv.field_size_limit(1 << 27)
    rows = []
    with path.open(encoding="utf-8", newline="") as handle:
        quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
        reader = csv.reader(handle, delimiter=delimiter, quoting=quoting)
        try:
            if header is not None:
                found = next(reader, None)
                if found != header:
                    raise ValueError(f"{path}: line 1 should be the header {header}, found {found}.")
            width = len(header) if header else 2
            for fields in reader:
                if len(fields) != width:
                    raise ValueError(f"{path}: line {reader.line_num} has {len(fields)} fields, expected {width}.")
                rows.append((reader.line_num, fields))
        except UnicodeDecodeError as error:
            raise ValueError(f"{path} is not UTF-8 text ({error}).") from None
    if not rows:
        raise ValueError(f"{path} has no data rows.")
    return rows


def _label(path: Path, line: int, text: str, allowed: range) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{path}: line {line}: label {text!r} is not an integer.") from None
    if value not in allowed:
        raise ValueError(f"{path}: line {line}: label {value} is outside {allowed.start}–{allowed.stop - 1}.")
    return value


def shuffled(pairs: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``pairs`` in the seeded order every split of these tasks uses (:data:`SPLIT_SEED`)."""
    pairs = list(pairs)
    random.Random(SPLIT_SEED).shuffle(pairs)
    return pairs


def _split_one_file(name: str, num_labels: int, pairs: list[tuple[str, int]], path: Path) -> TextClassificationData:
    pairs = shuffled(pairs)
    cut = round(len(pairs) * (1 - TEST_SHARE))
    train, test = pairs[:cut], pairs[cut:]
    split = (
        f"{path.name} ({len(pairs)} rows, the only labelled file here) shuffled with seed {SPLIT_SEED} and split "
        f"{len(train)} train / {len(test)} test"
    )
    return TextClassificationData.from_pairs(name, num_labels, train, test, split)


def load_imdb(data_dir: Path) -> TextClassificationData:
    splits = {}
    for split in ("train", "test"):
        path = data_dir / "imdb" / f"{split}.csv"
        rows = _read_rows(path, ",", ["id", "label", "rating", "text"])
        splits[split] = shuffled([(fields[3], _label(path, line, fields[1], range(2))) for line, fields in rows])
    return TextClassificationData.from_pairs(
        "imdb", 2, splits["train"], splits["test"],
        f"imdb/train.csv ({len(splits['train'])}) and imdb/test.csv ({len(splits['test'])}), each shuffled with seed "
        f"{SPLIT_SEED}",
    )  # fmt: skip


def load_ag_news(data_dir: Path) -> TextClassificationData:
    path = data_dir / "ag_news" / "test.csv"
    rows = _read_rows(path, ",", ["label", "title", "description"])
    pairs = [(f"{fields[1]}. {fields[2]}", _label(path, line, fields[0], range(1, 5)) - 1) for line, fields in rows]
    return _split_one_file("ag_news", 4, pairs, path)


def load_listops(data_dir: Path) -> TextClassificationData:
    path = data_dir / "listops" / "test_d20s.tsv"
    rows = _read_rows(path, "\t", None)
    pairs = [(fields[1], _label(path, line, fields[0], range(10))) for line, fields in rows]
    return _split_one_file("listops", 10, pairs, path)


@dataclass(frozen=True)
class FileTask(TaskDeclaration):
    """A classification task read from its own files (``load(data_dir)``), scored by accuracy."""

    name: str
    labels: tuple[str, ...]
    load: Callable[[Path], TextClassificationData] = field(compare=False)
    metrics: tuple[str, ...] = ("accuracy",)
    score_range: tuple[float, float] | None = None


FILE_TASKS: dict[str, FileTask] = {
    "imdb": FileTask("imdb", ("negative", "positive"), load_imdb),
    "ag_news": FileTask("ag_news", ("world", "sports", "business", "sci_tech"), load_ag_news),
    "listops": FileTask("listops", tuple(str(value) for value in range(10)), load_listops),
}
