"""``hf-variants pretrain --packing documents``: blocks of whole lines whose position ids restart at every line,
so that a token attends within its own line only, with no padding; and rotary positions past the position table."""

from __future__ import annotations

from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict
from transformers import AutoTokenizer

from hf_variants.settings.pretraining import parse_args
from hf_variants.training import run_mlm
from hf_variants.training.data import SeededMaskingCollator, tokenize_corpus

from .mlm_helpers import corpus, history, mlm_args, tokenizer_dir  # noqa: F401  (fixtures)


def test_document_blocks_restart_positions_at_every_line_and_at_a_cut(tokenizer_dir: Path) -> None:  # noqa: F811
    """The blocks hold the same tokens as run_mlm's grouping; positions count from 0 in each line, and the part of
    a line the previous block cut counts from 0 again. Computed here from the lines' own token counts."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    lines = ["the cat sat", "a dog ran far away from home", "it rained", "birds sing at dawn every day", "yes"]
    corpus_dict = DatasetDict({"train": Dataset.from_dict({"text": lines})})
    blocks = tokenize_corpus(corpus_dict, tokenizer, 8)["train"]
    documents = tokenize_corpus(corpus_dict, tokenizer, 8, packing="documents")["train"]
    assert documents["input_ids"] == blocks["input_ids"]
    assert all(len(row) == 8 for row in documents["position_ids"])  # every position is a real token
    expected, position = [], 0
    for line in lines:
        for index in range(len(tokenizer(line)["input_ids"])):
            position = 0 if index == 0 or len(expected) % 8 == 0 else position + 1
            expected.append(position)
    flat = [p for row in documents["position_ids"] for p in row]
    assert flat == expected[: len(flat)]
    assert any(row[0] == 0 and 0 in row[1:] for row in documents["position_ids"])  # several lines in one block


def test_the_masking_collator_carries_the_position_ids(tokenizer_dir: Path) -> None:  # noqa: F811
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    examples = [{"input_ids": [2, 7, 8, 3, 2, 9, 3], "special_tokens_mask": [1, 0, 0, 1, 1, 0, 1],
                 "position_ids": [0, 1, 2, 3, 0, 1, 2]}] * 2  # fmt: skip
    batch = SeededMaskingCollator(tokenizer)(examples, key=0)
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3, 0, 1, 2]] * 2


def test_pretraining_with_document_packing_trains_another_function_than_blocks(
    corpus: Path,  # noqa: F811
    tokenizer_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The same data, masks and initial weights: the first step's loss differs only by what a token may attend to,
    so it differs; rotary positions run past the position table (64 tokens against max_position_embeddings=24)."""
    steps = ("--max_train_steps", "2")
    run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "blocks", "macaron_bert", *steps))
    run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "documents", "macaron_bert", *steps,
                          "--packing", "documents"))  # fmt: skip
    first = {name: history(tmp_path / name)[0]["loss"] for name in ("blocks", "documents")}
    assert first["blocks"] != first["documents"]
    rotary = mlm_args(corpus, tokenizer_dir, tmp_path / "rotary", "mgk_bert", *steps, "--packing", "documents")
    rotary[rotary.index("--config_overrides") + 1] += ",attention_type=mlk,position_embedding_type=rotary,"
    rotary[rotary.index("--config_overrides") + 1] += "max_position_embeddings=24"
    rotary[rotary.index("--max_seq_length") + 1] = "64"
    run_mlm.main(rotary)
    assert len(history(tmp_path / "rotary")) == 2


def test_document_packing_is_refused_with_the_models_reason_before_anything_is_written(
    corpus: Path,  # noqa: F811
    tokenizer_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    arguments = mlm_args(corpus, tokenizer_dir, tmp_path / "run", "transject", "--packing", "documents")
    with pytest.raises(ValueError, match=r"^--packing documents: TransJect's orthogonal attention mixes tokens"):
        run_mlm.main(arguments)
    assert not (tmp_path / "run").exists()
    with pytest.raises(SystemExit):
        parse_args([*arguments, "--line_by_line"])
