"""A training corpus read as a stream (``hf-variants pretrain --streaming``): lines tokenised and cut into blocks
on the fly, shuffled within windows of blocks, never held in memory as a whole, and resumed exactly.

The stream's position after any block is a :class:`StreamPosition` — the epoch, the window, where that window
started (the source's ``datasets`` state and the tokens read but not yet cut into blocks) and how many of its
blocks were used: a small JSON value the engine keeps in each checkpoint's training state. A resumed run re-reads
only the current window, so the blocks that follow are the ones an uninterrupted run would have used. Every process
reads the whole stream and keeps its rows of each global batch, as with a corpus in memory, so the batches do not
depend on the number of processes (sharding the source by process would make them depend on it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset, DatasetDict, IterableDataset, load_dataset
from transformers import PreTrainedTokenizerBase

from ..storage.files import require_regular_file
from ..storage.record_schema import check_record, integer_at_least
from .data import (
    LOADER_BY_SUFFIX,
    TSV_OPTIONS,
    cut_blocks,
    expect_long_lines,
    joined_lines,
    joined_text,
    tokenize_corpus,
)

#: Lines tokenised together (one call of the tokenizer); a position is recorded after each such read.
LINES_PER_READ = 256


@dataclass(frozen=True)
class StreamPosition:
    """Where the stream stands: block ``used`` of window ``window`` of ``epoch``. The window starts where the
    source's iteration state is ``source`` (``None``: the epoch's first line) with ``carry`` (tokens read, not yet
    in a block) in front of it."""

    epoch: int = 0
    window: int = 0
    source: dict[str, Any] | None = None
    carry: dict[str, list[int]] = field(default_factory=dict)
    used: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any, path: Path) -> StreamPosition:
        """A position read back from a checkpoint's ``path``, schema-checked (a ``CheckpointError`` naming the
        field otherwise)."""
        record = check_record(value, {
            "epoch": integer_at_least(0), "window": integer_at_least(0), "used": integer_at_least(0),
            "source": lambda v: None if v is None or isinstance(v, dict) else "must be an object or null",
            "carry": lambda v: None if isinstance(v, dict) and all(
                isinstance(ids, list) and all(isinstance(i, int) for i in ids) for ids in v.values())
            else "must map token fields to lists of integers",
        }, path)  # fmt: skip
        return cls(**{name: record[name] for name in ("epoch", "window", "source", "carry", "used")})


def open_source(train_file: str | Path | None, dataset_name: str | None, dataset_config_name: str | None,
                ) -> IterableDataset:  # fmt: skip
    """The training split as a ``datasets`` stream: a local .txt/.csv/.tsv/.json(l) file or a Hub dataset."""
    if dataset_name is not None:
        return load_dataset(dataset_name, dataset_config_name, split="train", streaming=True)
    path = Path(train_file)
    require_regular_file(path, "The train corpus")
    suffix = path.suffix.lower()
    if suffix not in LOADER_BY_SUFFIX:
        raise ValueError(f"Corpus files must have one of the formats {sorted(LOADER_BY_SUFFIX)}; got {suffix!r}.")
    options = TSV_OPTIONS if suffix == ".tsv" else {}
    return load_dataset(LOADER_BY_SUFFIX[suffix], data_files={"train": str(path)}, split="train", streaming=True,
                        **options)  # fmt: skip


def texts(rows: IterableDataset, columns: list[str], where: str) -> Iterator[str]:
    """The non-empty texts of ``rows`` (``columns`` joined by a space); a missing column or a file that is not
    UTF-8 is a ``ValueError`` naming ``where``."""
    try:
        for row in rows:
            missing = [name for name in columns if name not in row]
            if missing:
                raise ValueError(f"{where} has no column {missing[0]!r} (columns: {list(row)}); set --text_column.")
            text = joined_text(row, columns)
            if text.strip():
                yield text
    except UnicodeDecodeError as error:
        raise ValueError(f"{where} is not UTF-8 text ({error.reason} at byte {error.start} of a chunk); convert it "
                         "to UTF-8.") from None  # fmt: skip


def validation_texts(
    validation_file: str | Path | None, dataset_name: str | None, dataset_config_name: str | None,
    held_out: IterableDataset, columns: list[str], where: str,
) -> tuple[list[str], bool]:  # fmt: skip
    """The validation texts, held in memory — the validation file, a Hub dataset's validation split, or else the
    rows ``held_out`` of the training stream (named ``where`` in errors) — and whether they are those rows (which
    training then skips)."""
    if validation_file is not None:
        return list(texts(open_source(validation_file, None, None), columns, str(validation_file))), False
    if dataset_name is not None:
        try:
            split = load_dataset(dataset_name, dataset_config_name, split="validation", streaming=True)
        except ValueError:  # the dataset has no validation split: the held-out rows serve
            split = None
        if split is not None:
            return list(texts(split, columns, f"{dataset_name}'s validation split")), False
    return list(texts(held_out, columns, where)), True


class BlockStream:
    """The training blocks of a streamed corpus, epoch after epoch, each with the :class:`StreamPosition` after it.

    ``rows`` opens the training rows anew (a fresh ``datasets`` stream, the validation rows skipped). Lines are
    tokenised :data:`LINES_PER_READ` at a time, concatenated and cut into blocks of ``max_seq_length`` tokens as
    :func:`~.data.tokenize_corpus` cuts them (``packing`` as there; the tokens left at an epoch's end are dropped);
    ``window_blocks`` consecutive blocks are used in an order drawn from ``(seed, epoch, window)``."""

    def __init__(self, rows: Callable[[], IterableDataset], columns: list[str], tokenizer: PreTrainedTokenizerBase,
                 max_seq_length: int, packing: str, window_blocks: int, seed: int, where: str) -> None:  # fmt: skip
        self.rows, self.columns, self.tokenizer = rows, columns, tokenizer
        expect_long_lines(tokenizer)
        self.max_seq_length, self.packing, self.window_blocks, self.seed, self.where = (
            max_seq_length, packing, window_blocks, seed, where)  # fmt: skip

    def blocks(self, position: StreamPosition) -> Iterator[tuple[dict[str, list[int]], StreamPosition]]:
        """Every block from ``position`` on, with the position that follows it (endless: epochs repeat)."""
        while True:
            emitted = False
            for window, start, following in self.windows(position):
                order = np.random.default_rng([self.seed, start.epoch, start.window]).permutation(len(window))
                for used in range(start.used, len(window)):
                    emitted = True
                    after = replace(start, used=used + 1) if used + 1 < len(window) else following
                    yield window[order[used]], after
            if not emitted and position == StreamPosition(epoch=position.epoch):
                raise ValueError(f"{self.where} has fewer than max_seq_length={self.max_seq_length} tokens; use a "
                                 "smaller --max_seq_length or more text.")  # fmt: skip
            position = StreamPosition(epoch=position.epoch + 1)

    def windows(self, position: StreamPosition) -> Iterator[tuple[list[dict], StreamPosition, StreamPosition]]:
        """The windows of ``position``'s epoch from its window on: each window's blocks, the position of its start
        (``used`` as given for the first) and the position of the next window's start."""
        rows = self.rows()
        if position.source is not None:
            rows.load_state_dict(position.source)
        lines = texts(rows, self.columns, self.where)
        start, carry, exhausted = position, {key: list(ids) for key, ids in position.carry.items()}, False
        while True:
            window: list[dict] = []
            source = start.source
            while len(window) < self.window_blocks:
                whole = min(self.window_blocks - len(window), len(carry.get("input_ids", ())) // self.max_seq_length)
                if whole:
                    blocks, carry = self.cut(carry, whole)
                    window += blocks
                    continue
                if exhausted:
                    break
                batch = [line for _, line in zip(range(LINES_PER_READ), lines, strict=False)]
                exhausted = len(batch) < LINES_PER_READ
                if batch:
                    encoded = dict(self.tokenizer(batch, return_special_tokens_mask=True))
                    read = joined_lines(encoded, self.packing)
                    carry = {key: carry.get(key, []) + read[key] for key in read}
                    source = rows.state_dict()
            if not window:
                return
            following = StreamPosition(start.epoch, start.window + 1, source, carry)
            if exhausted and len(carry.get("input_ids", ())) < self.max_seq_length:
                following = StreamPosition(epoch=start.epoch + 1)
            yield window, start, following
            if following.epoch != start.epoch:
                return
            start = following

    def cut(self, tokens: dict[str, list[int]], count: int) -> tuple[list[dict], dict[str, list[int]]]:
        """The first ``count`` blocks of ``tokens`` and the tokens after them."""
        end = count * self.max_seq_length
        blocks, _ = cut_blocks({key: ids[:end] for key, ids in tokens.items()}, self.max_seq_length, self.packing)
        return [dict(zip(blocks, row, strict=True)) for row in zip(*blocks.values(), strict=True)], {
            key: ids[end:] for key, ids in tokens.items()}  # fmt: skip


def tokenized_validation(texts_: list[str], tokenizer: PreTrainedTokenizerBase, max_seq_length: int, packing: str,
                         ) -> Dataset:  # fmt: skip
    """The validation texts cut into blocks as the training stream's are."""
    corpus = DatasetDict({"validation": Dataset.from_dict({"text": texts_})})
    return tokenize_corpus(corpus, tokenizer, max_seq_length, packing=packing)["validation"]
