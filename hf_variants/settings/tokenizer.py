"""Settings of ``hf-variants train-tokenizer`` and of its engine,
:func:`hf_variants.training.train_tokenizer.train_tokenizer`: one field per flag, declared once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .arguments import argument_parser, parse_into, setting
from .checks import at_least
from .corpus import CorpusArguments

DESCRIPTION = """\
Train a BERT-style WordPiece tokenizer on a corpus and save it in the Hugging Face format.

  hf-variants train-tokenizer --train_file train.txt --vocab_size 8000 --output_dir runs/tokenizer
"""


@dataclass(kw_only=True)
class TokenizerArguments(CorpusArguments):
    """``hf-variants train-tokenizer``'s settings, typed: one field per flag (the corpus fields from
    :class:`~.corpus.CorpusArguments`); values set in Python meet the flags' checks (``ValueError``)."""

    vocab_size: int = setting(8000, parse=at_least(16), help="Tokens in the vocabulary.")
    min_frequency: int = setting(2, parse=at_least(1), help="Least count of a merged token.")
    cased: bool = setting(False, help="Keep case (default: lower-case, like bert-base-uncased).")
    model_max_length: int = setting(512, parse=at_least(1), help="The tokenizer's model_max_length.")
    output_dir: Path = setting(help="Folder to save the tokenizer in.")


def build_parser(prog: str = "hf-variants train-tokenizer"):
    """The command line, generated from :class:`TokenizerArguments`."""
    return argument_parser(TokenizerArguments, prog, DESCRIPTION)


def parse_args(argv: list[str] | None = None) -> TokenizerArguments:
    """The command line as typed settings; every mistake is named in one usage error."""
    return parse_into(TokenizerArguments, build_parser(), argv)
