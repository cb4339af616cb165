"""Arguments of ``hf-variants train-tokenizer`` (the engine: ``hf_variants.training.train_tokenizer``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from .checks import at_least, check_fields, field_defaults, parse_into
from .corpus import CorpusArguments
from .formatting import ArgumentParser, HelpFormatter

DESCRIPTION = """\
Train a BERT-style WordPiece tokenizer on a corpus and save it in the Hugging Face format.

  hf-variants train-tokenizer --train_file train.txt --vocab_size 8000 --output_dir runs/tokenizer
"""


def build_parser(prog: str = "hf-variants train-tokenizer") -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=prog, description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument("--train_file", help="Local .txt/.csv/.json(l) corpus.")
    parser.add_argument("--dataset_name", help="Or a Hub dataset, e.g. wikitext.")
    parser.add_argument("--dataset_config_name", help="The dataset's configuration, e.g. wikitext-2-raw-v1.")
    parser.add_argument("--text_column", help="Column of the texts in CSV/JSON/Hub data.")
    parser.add_argument("--vocab_size", type=at_least(16), help="Tokens in the vocabulary.")
    parser.add_argument("--min_frequency", type=at_least(1), help="Least count of a merged token.")
    parser.add_argument("--cased", action="store_true", help="Keep case (default: lower-case, like bert-base-uncased).")
    parser.add_argument("--model_max_length", type=at_least(1), help="The tokenizer's model_max_length.")
    parser.add_argument("--output_dir", type=Path, required=True, help="Folder to save the tokenizer in.")
    parser.set_defaults(**field_defaults(TokenizerArguments))  # one place for the defaults: the settings class
    return parser


@dataclass(kw_only=True)
class TokenizerArguments(CorpusArguments):
    """``hf-variants train-tokenizer``'s settings, typed: one field per flag of :func:`build_parser` (the
    corpus fields from :class:`~.corpus.CorpusArguments`), whose defaults are these; values set in Python
    are checked by the flags' own types (``ValueError`` naming the field)."""

    output_dir: Path
    vocab_size: int = 8000
    min_frequency: int = 2
    cased: bool = False
    model_max_length: int = 512

    def __post_init__(self) -> None:
        check_fields(self, build_parser())
        self.check_corpus()


def parse_args(argv: list[str] | None = None) -> TokenizerArguments:
    """The command line as typed settings; a bad value or combination is argparse's usage error."""
    return parse_into(TokenizerArguments, build_parser(), argv)
