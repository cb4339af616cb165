"""Train a BERT-style WordPiece tokenizer on a corpus and save it in the HF format.

    python scripts/train_tokenizer.py --train_file ../shared/data/wikitext-2/train.txt \\
        --vocab_size 8000 --output_dir runs/tokenizer-wikitext2
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

from ..tokenization import train_wordpiece_tokenizer
from .data import load_text_corpus


def main(argv: Sequence[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train_file", help="Local .txt/.csv/.json(l) corpus.")
    parser.add_argument("--dataset_name", help="Or a Hub dataset, e.g. 'wikitext'.")
    parser.add_argument("--dataset_config_name")
    parser.add_argument("--text_column", default="text")
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--min_frequency", type=int, default=2)
    parser.add_argument("--cased", action="store_true", help="Keep case (default: lower-case, like bert-base-uncased).")
    parser.add_argument("--model_max_length", type=int, default=512)
    parser.add_argument("--output_dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.train_file is None and args.dataset_name is None:
        parser.error("give --train_file or --dataset_name")
    corpus = load_text_corpus(
        args.train_file,
        None,
        args.dataset_name,
        args.dataset_config_name,
        args.text_column,
        validation_split_percentage=1,
    )
    texts = chain(corpus["train"]["text"], corpus["validation"]["text"])
    tokenizer = train_wordpiece_tokenizer(
        texts, args.vocab_size, args.min_frequency, lowercase=not args.cased, model_max_length=args.model_max_length
    )
    tokenizer.save_pretrained(args.output_dir)
    print(f"Saved a {len(tokenizer)}-token WordPiece tokenizer to {args.output_dir}")
    return args.output_dir


if __name__ == "__main__":
    main()
