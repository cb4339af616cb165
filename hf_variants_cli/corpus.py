"""Where a text corpus comes from: the settings ``hf-variants pretrain`` and ``hf-variants train-tokenizer``
share (their ``--train_file``, ``--dataset_name``, ``--dataset_config_name`` and ``--text_column`` flags)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True)
class CorpusArguments:
    """A local text file (.txt, .csv or .json(l)) or a Hub dataset, and the column of its texts."""

    train_file: str | None = None
    dataset_name: str | None = None
    dataset_config_name: str | None = None
    text_column: str = "text"

    def check_corpus(self) -> None:
        """One source of text is given."""
        if self.train_file is None and self.dataset_name is None:
            raise ValueError("give --train_file or --dataset_name")
