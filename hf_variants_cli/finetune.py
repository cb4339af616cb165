"""``hf-variants finetune`` (the engine: ``hf_variants.training.run_glue``).

Its arguments are run_glue's dataclasses and every ``transformers.TrainingArguments`` field, parsed by
``HfArgumentParser``; building that parser imports transformers' training stack, so this subcommand's
``--help`` is the one that takes as long as ``import transformers.TrainingArguments``.
"""

from __future__ import annotations


def parse_or_help(argv: list[str]) -> None:
    """Parse ``argv`` as run_glue does (printing the help and exiting for ``--help``)."""
    from hf_variants.training.run_glue import parse_args

    parse_args(argv)
