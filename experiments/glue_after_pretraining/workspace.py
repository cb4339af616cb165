"""What the study scripts share that is about the workspace, not about the experiments: where the data is and
the study options. A study writes its records into its ``--output_dir`` and nothing else: it commits nothing.
A person reads the records, keeps those worth keeping (``git add`` them) and re-renders the pages from them
(``python tools/render_tables.py``). The experiments themselves are in :mod:`hf_variants.lab`; the scripts
import this module from their own folder."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from glue_study import FineTuning

from hf_variants.settings.compare import DATA_ENV


def add_data_argument(parser: argparse.ArgumentParser) -> None:
    """``--data_dir``: the data folder (the layout of docs/data.md), by default ``$HF_VARIANTS_DATA``; required
    when that is not set, so that no script reads a folder outside the one it was given."""
    default = os.environ.get(DATA_ENV)
    parser.add_argument("--data_dir", type=Path, default=Path(default) if default else None, required=not default,
                        help=f"the data folder (default: ${DATA_ENV})")  # fmt: skip


def add_study_arguments(parser: argparse.ArgumentParser) -> None:
    """The options both GLUE studies share: data, fine-tuning protocol, workers."""
    add_data_argument(parser)
    parser.add_argument("--tasks", nargs="+", default=list(FineTuning.tasks))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(FineTuning.seeds))
    parser.add_argument("--learning_rates", type=float, nargs="+", default=list(FineTuning.learning_rates))
    parser.add_argument("--max_train_samples", type=int, default=FineTuning.max_train_samples)
    parser.add_argument("--workers", type=int, default=1, help="fine-tuning runs at a time, one CPU thread each")


def study_setup(args: argparse.Namespace) -> FineTuning:
    """The fine-tuning protocol of the parsed options. Sets the offline environment."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return FineTuning(tuple(args.tasks), tuple(args.seeds), tuple(args.learning_rates),
                      max_train_samples=args.max_train_samples)  # fmt: skip
