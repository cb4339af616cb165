"""Arguments of ``hf-variants train-tokenizer`` (the engine: ``hf_variants.training.train_tokenizer``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .formatting import HelpFormatter

DESCRIPTION = """\
Train a BERT-style WordPiece tokenizer on a corpus and save it in the Hugging Face format.

  hf-variants train-tokenizer --train_file train.txt --vocab_size 8000 --output_dir runs/tokenizer
"""


def build_parser(prog: str = "hf-variants train-tokenizer") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument("--train_file", help="Local .txt/.csv/.json(l) corpus.")
    parser.add_argument("--dataset_name", help="Or a Hub dataset, e.g. wikitext.")
    parser.add_argument("--dataset_config_name", help="The dataset's configuration, e.g. wikitext-2-raw-v1.")
    parser.add_argument("--text_column", default="text", help="Column of the texts in CSV/JSON/Hub data.")
    parser.add_argument("--vocab_size", type=int, default=8000, help="Tokens in the vocabulary.")
    parser.add_argument("--min_frequency", type=int, default=2, help="Least count of a merged token.")
    parser.add_argument("--cased", action="store_true", help="Keep case (default: lower-case, like bert-base-uncased).")
    parser.add_argument("--model_max_length", type=int, default=512, help="The tokenizer's model_max_length.")
    parser.add_argument("--output_dir", type=Path, required=True, help="Folder to save the tokenizer in.")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.train_file is None and args.dataset_name is None:
        parser.error("give --train_file or --dataset_name")
    return args
