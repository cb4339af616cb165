#!/usr/bin/env python
"""The price and the saving of ``--packing documents`` on a real corpus.

* **Positions computed** (a count, no timing): one document per row padded to the block length (what keeping
  documents apart costs without packing) against packed blocks, whose every position is a real token.
* **Tokens per second** of a masked-LM training step (forward and backward) of a BERT-control model on the same
  packed blocks, without document boundaries (run_mlm's grouping) and with them (a block-diagonal mask): the
  price of the mask. Medians over interleaved repeats, so slow drifts of the machine hit both alike.

Writes ``<output_dir>/packing_benchmark.json``::

    python benchmarks/benchmark_packing.py --train_file $DATA/wikitext-2/train.txt --output_dir OUT
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
from datasets import Dataset, DatasetDict

from hf_variants import BertControlConfig, BertControlForMaskedLM
from hf_variants.tokenization import train_wordpiece_tokenizer
from hf_variants.training.data import SeededMaskingCollator, tokenize_corpus


def count_positions(lines: list[str], tokenizer, length: int) -> dict[str, float]:
    """Positions a model computes for the corpus: one line per row padded to ``length`` against packed blocks."""
    corpus = DatasetDict({"train": Dataset.from_dict({"text": lines})})
    packed = tokenize_corpus(corpus, tokenizer, length, packing="documents")["train"]
    token_counts = [len(ids) for ids in tokenizer(lines)["input_ids"]]
    rows = sum(-(-count // length) for count in token_counts)  # a line longer than a row continues in the next
    packed_positions = len(packed) * length
    return {
        "documents": len(lines),
        "tokens": sum(token_counts),
        "padded_row_positions": rows * length,
        "packed_positions": packed_positions,
        "real_token_share_padded": sum(token_counts) / (rows * length),
        "real_token_share_packed": 1.0,
        "padded_over_packed": rows * length / packed_positions,
    }


def step_tokens_per_second(blocks: Dataset, tokenizer, args: argparse.Namespace) -> dict[str, float]:
    torch.manual_seed(0)
    config = BertControlConfig(vocab_size=len(tokenizer), hidden_size=args.hidden_size, num_hidden_layers=4,
                               num_attention_heads=4, intermediate_size=4 * args.hidden_size,
                               max_position_embeddings=args.max_seq_length, attn_implementation="sdpa")  # fmt: skip
    model = BertControlForMaskedLM(config).train()
    collate = SeededMaskingCollator(tokenizer)
    batch = collate([blocks[i] for i in range(args.batch_size)], key=0)
    variants = {"blocks": {k: v for k, v in batch.items() if k != "position_ids"}, "documents": batch}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_index in range(args.repeats + 1):
        for name, inputs in variants.items():
            start = time.perf_counter()
            model(**inputs).loss.backward()
            elapsed = time.perf_counter() - start
            model.zero_grad(set_to_none=True)
            if round_index:  # the first round warms up
                times[name].append(elapsed)
    tokens = args.batch_size * args.max_seq_length
    rates = {f"{name}_tokens_per_second": tokens / statistics.median(values) for name, values in times.items()}
    rates["documents_over_blocks"] = rates["documents_tokens_per_second"] / rates["blocks_tokens_per_second"]
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train_file", type=Path, required=True)
    parser.add_argument("--output_dir", type=Path, required=True)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    lines = [line for line in args.train_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    tokenizer = train_wordpiece_tokenizer(lines, vocab_size=8000)
    corpus = DatasetDict({"train": Dataset.from_dict({"text": lines})})
    blocks = tokenize_corpus(corpus, tokenizer, args.max_seq_length, packing="documents")["train"]
    record = {
        "corpus": f"{args.train_file.parent.name}/{args.train_file.name}",
        "max_seq_length": args.max_seq_length,
        "positions": count_positions(lines, tokenizer, args.max_seq_length),
        "training_step": step_tokens_per_second(blocks, tokenizer, args),
        "model": {"hidden_size": args.hidden_size, "num_hidden_layers": 4, "batch_size": args.batch_size},
        "torch": torch.__version__,
        "machine": platform.machine(),
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "packing_benchmark.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
