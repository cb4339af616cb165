"""Train a BERT-style WordPiece tokenizer on a corpus and save it in the HF format.

    hf-variants train-tokenizer --train_file $DATA/wikitext-2/train.txt \\
        --vocab_size 8000 --output_dir runs/tokenizer-wikitext2
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from pathlib import Path

from ..settings.tokenizer import TokenizerArguments, parse_args
from ..storage.files import staged_into
from ..tokenization import train_wordpiece_tokenizer
from .data import load_text_corpus


def train_tokenizer(args: TokenizerArguments) -> Path:
    """Train and save the tokenizer that the typed settings ``args`` describe (the engine as a function)."""
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
    with staged_into(args.output_dir) as staging:  # never through a link in the folder
        tokenizer.save_pretrained(staging)
    print(f"Saved a {len(tokenizer)}-token WordPiece tokenizer to {args.output_dir}")
    return args.output_dir


def main(argv: Sequence[str] | None = None) -> Path:
    return train_tokenizer(parse_args(None if argv is None else list(argv)))


if __name__ == "__main__":
    main()
