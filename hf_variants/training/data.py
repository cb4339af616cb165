"""Corpora for masked-language-model pretraining: loading, tokenising, grouping and masking.

Everything random here is a pure function of a seed and a position (epoch, step), so a run resumed
from a checkpoint sees exactly the data and masks the uninterrupted run would have seen, and a
multi-process run sees the same global batches as a single process.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import torch
from datasets import DatasetDict, load_dataset
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerBase

from ..glue.data import read_text_file
from ..storage.files import require_regular_file

LOADER_BY_SUFFIX = {".txt": "text", ".text": "text", ".raw": "text", ".csv": "csv", ".tsv": "csv", ".json": "json",
                    ".jsonl": "json"}
#: How ``datasets`` reads a GLUE-style TSV: tab-separated, quotes are text (GLUE's files are not quoted).
TSV_OPTIONS = {"delimiter": "\t", "quoting": 3}  # csv.QUOTE_NONE


def load_text_corpus(
    train_file: str | Path | None = None,
    validation_file: str | Path | None = None,
    dataset_name: str | None = None,
    dataset_config_name: str | None = None,
    text_column: str = "text",
    validation_split_percentage: float = 5.0,
    seed: int = 0,
) -> DatasetDict:
    """``{"train", "validation"}`` with one ``text`` column and no empty lines.

    Local ``.txt``/``.csv``/``.tsv``/``.json(l)`` files or a Hub dataset name; ``text_column`` names one column
    of a table, or several separated by commas (``sentence1,sentence2``: a pair task's texts, joined by a space),
    so that a task's own training file is a corpus (self-pretraining). Without a validation file or
    split, ``validation_split_percentage`` of the training rows are held out (seeded). Raises
    ``FileNotFoundError`` for a missing file and ``ValueError`` for an unknown format, a missing
    text column or a corpus without text.
    """
    if dataset_name is not None:
        raw = load_dataset(dataset_name, dataset_config_name)
    elif train_file is not None:
        files = {"train": Path(train_file)}
        if validation_file is not None:
            files["validation"] = Path(validation_file)
        for split, path in files.items():
            require_regular_file(path, f"The {split} corpus")
        suffixes = {path.suffix.lower() for path in files.values()}
        if len(suffixes) != 1 or next(iter(suffixes)) not in LOADER_BY_SUFFIX:
            raise ValueError(
                f"Corpus files must share one of the formats {sorted(LOADER_BY_SUFFIX)}; got {sorted(suffixes)}."
            )
        for path in files.values():  # a clear error for binary or non-UTF-8 files, naming file and line
            if not read_text_file(path).strip():
                raise ValueError(f"The corpus {path} contains no text (every line is empty).")
        suffix = suffixes.pop()
        options = TSV_OPTIONS if suffix == ".tsv" else {}
        raw = load_dataset(LOADER_BY_SUFFIX[suffix], data_files={k: str(v) for k, v in files.items()}, **options)
    else:
        raise ValueError("Give a corpus: train_file (and optionally validation_file) or dataset_name.")

    columns = [name.strip() for name in text_column.split(",")]
    for split, dataset in raw.items():
        missing = [name for name in columns if name not in dataset.column_names]
        if missing:
            raise ValueError(
                f"The {split} corpus has no column {missing[0]!r} (columns: {dataset.column_names}); "
                "set the text column."
            )
    corpus = DatasetDict(
        {
            split: dataset.map(lambda row: {"text": joined_text(row, columns)}, remove_columns=dataset.column_names)
            .filter(lambda row: bool(row["text"].strip()))
            for split, dataset in raw.items()
        }
    )
    if "train" not in corpus or len(corpus["train"]) == 0:
        raise ValueError("The training corpus contains no text (every line is empty).")
    if "validation" not in corpus:
        if not 0 < validation_split_percentage < 100:
            raise ValueError("validation_split_percentage must be in (0, 100) when no validation set is given.")
        lines = len(corpus["train"])
        if lines - math.ceil(lines * validation_split_percentage / 100) < 1:
            raise ValueError(
                f"Too little text to hold out {validation_split_percentage}% for validation: the training corpus has "
                f"{lines} non-empty line(s). Add text or give a validation file."
            )
        split = corpus["train"].train_test_split(test_size=validation_split_percentage / 100, seed=seed)
        corpus = DatasetDict({"train": split["train"], "validation": split["test"]})
    if len(corpus["validation"]) == 0:
        raise ValueError("The validation corpus contains no text.")
    return corpus


def joined_text(row: dict, columns: list[str]) -> str:
    """The row's texts in ``columns`` joined by a space (a missing or non-text cell counts as empty)."""
    return " ".join(row[name] for name in columns if isinstance(row[name], str) and row[name].strip())


def tokenize_corpus(
    corpus: DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
    line_by_line: bool = False,
    num_proc: int | None = None,
    packing: str = "blocks",
) -> DatasetDict:
    """Token ids per example: each line truncated (``line_by_line``) or all lines concatenated and cut
    into blocks of ``max_seq_length`` tokens (the last partial block is dropped), as run_mlm does.

    ``packing="documents"`` keeps the lines of a block apart: each block gets ``position_ids`` that restart at 0
    where a line (a document) starts, and at the block's start for the part of a line the previous block cut, so
    the model attends within each document only (``hf_variants.core.inputs.packed_documents``) and every
    position is a real token."""
    if line_by_line:

        def encode(batch: dict[str, list[str]]) -> dict[str, Any]:
            return tokenizer(batch["text"], truncation=True, max_length=max_seq_length, return_special_tokens_mask=True)

        return check_maskable(corpus.map(encode, batched=True, remove_columns=["text"], num_proc=num_proc,
                                         desc="tokenize"))  # fmt: skip

    def encode_all(batch: dict[str, list[str]]) -> dict[str, Any]:
        return tokenizer(batch["text"], return_special_tokens_mask=True)

    expect_long_lines(tokenizer)

    def group(batch: dict[str, list[list[int]]]) -> dict[str, list[list[int]]]:
        return cut_blocks(joined_lines(batch, packing), max_seq_length, packing)[0]

    encoded = corpus.map(encode_all, batched=True, remove_columns=["text"], num_proc=num_proc, desc="tokenize")
    grouped = encoded.map(group, batched=True, batch_size=1000, num_proc=num_proc, desc=f"group into {max_seq_length}")
    for split, dataset in grouped.items():
        if len(dataset) == 0:
            raise ValueError(
                f"The {split} corpus has fewer than max_seq_length={max_seq_length} tokens; use a smaller "
                "max_seq_length or --line_by_line."
            )
    return check_maskable(grouped)


def expect_long_lines(tokenizer: PreTrainedTokenizerBase) -> None:
    """Whole lines are tokenized, then cut into blocks: a line longer than the model's maximum is expected, so the
    tokenizer's "Token indices sequence length is longer than ..." warning (raised once per tokenizer, as this flag
    records) would only tell the user that something broke."""
    tokenizer.deprecation_warnings["sequence-length-is-longer-than-the-specified-maximum"] = True


def joined_lines(lines: Mapping[str, list[list[int]]], packing: str) -> dict[str, list[int]]:
    """The tokenized lines concatenated, with ``position_ids`` counting from 0 in each line for
    ``packing="documents"``."""
    if packing == "documents":
        lines = {**lines, "position_ids": [list(range(len(ids))) for ids in lines["input_ids"]]}
    return {key: list(chain.from_iterable(values)) for key, values in lines.items()}


def cut_blocks(
    tokens: Mapping[str, list[int]], max_seq_length: int, packing: str
) -> tuple[dict[str, list[list[int]]], dict[str, list[int]]]:
    """Blocks of ``max_seq_length`` tokens cut from concatenated ``tokens`` (:func:`joined_lines`), and the
    tokens after the last whole block. With ``packing="documents"`` a line the previous block cut starts over
    at a block's start (:func:`restart_at_block_start`)."""
    total = (len(tokens["input_ids"]) // max_seq_length) * max_seq_length
    starts = range(0, total, max_seq_length)
    blocks = {key: [values[i : i + max_seq_length] for i in starts] for key, values in tokens.items()}
    if packing == "documents":
        blocks["position_ids"] = [restart_at_block_start(block) for block in blocks["position_ids"]]
    return blocks, {key: list(values[total:]) for key, values in tokens.items()}


def restart_at_block_start(positions: list[int]) -> list[int]:
    """A block's positions with the part of a document the previous block cut counted from 0 (the block's first
    tokens, up to the next document's start)."""
    cut = next((i for i, position in enumerate(positions) if position == 0), len(positions))
    return [position - positions[0] for position in positions[:cut]] + positions[cut:]


def check_maskable(tokenized: DatasetDict, limits: Mapping[str, int | None] | None = None) -> DatasetDict:
    """Refuse a corpus split in which no token can be masked (every text empty after the tokenizer's
    normalisation, e.g. zero-width or control characters only): training would "train" at loss 0 on nothing,
    and a validation split would have no loss to report. ``limits`` gives the examples of a split that are
    used (``--max_eval_samples``); the whole split otherwise."""
    for split, dataset in tokenized.items():
        limit = (limits or {}).get(split)
        masks = dataset["special_tokens_mask"] if limit is None else dataset.select(
            range(min(limit, len(dataset))))["special_tokens_mask"]  # fmt: skip
        if not any(0 in mask for mask in masks):
            name = {"train": "training"}.get(split, split)
            raise ValueError(
                f"The {name} corpus has no token to mask: all {len(masks)} examples used are special tokens only "
                "(every text is empty after the tokenizer's normalisation, e.g. zero-width or control characters). "
                f"Check the {name} file's content and encoding."
            )
    return tokenized


class SeededMaskingCollator:
    """BERT's masking (``mlm_probability`` of the tokens; 80% ``[MASK]``, 10% random, 10% kept) with
    masks that depend only on ``(seed, key)``: ``collate(examples, key)``.

    transformers' collator draws from the global RNG when it has no seed of its own (documented), so
    each call seeds the CPU generator inside :func:`torch.random.fork_rng` and leaves the caller's
    state (dropout's) untouched. Its own ``seed`` is not used: how it keeps that generator changed
    between releases (5.24 re-creates it on a process's first call), which broke exact resumption."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, mlm_probability: float = 0.15, seed: int = 0) -> None:
        if tokenizer.mask_token is None:
            raise ValueError("The tokenizer has no mask token; masked-language modelling needs one.")
        if not 0 < mlm_probability < 1:
            raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability}.")
        self.seed = seed
        self.collator = DataCollatorForLanguageModeling(
            tokenizer, mlm=True, mlm_probability=mlm_probability, return_tensors="pt"
        )

    def __call__(self, examples: Sequence[dict[str, Any]], key: int) -> dict[str, torch.Tensor]:
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(self.seed * 1_000_003 + key)
            return dict(self.collator([dict(example) for example in examples]))


def epoch_order(num_examples: int, epoch: int, seed: int) -> torch.Tensor:
    """The permutation of the training set used in ``epoch`` (a function of seed and epoch only)."""
    return torch.randperm(num_examples, generator=torch.Generator().manual_seed(seed * 7919 + epoch))


def global_batches(num_examples: int, batch_size: int, epoch: int, seed: int) -> Iterator[list[int]]:
    """Index lists of the full (all processes, one optimizer micro-step) batches of an epoch; the last
    incomplete batch is dropped so every step has the same size."""
    order = epoch_order(num_examples, epoch, seed).tolist()
    for start in range(0, num_examples - batch_size + 1, batch_size):
        yield order[start : start + batch_size]
