"""Where a text corpus comes from: the settings ``hf-variants pretrain`` and ``hf-variants train-tokenizer``
share (their ``--train_file``, ``--dataset_name``, ``--dataset_config_name`` and ``--text_column`` flags)."""

from __future__ import annotations

from dataclasses import dataclass

from .arguments import Settings, setting

DATA = "data (one of --train_file, --dataset_name)"


@dataclass(kw_only=True)
class CorpusArguments(Settings):
    """A local text file (.txt, .csv, .tsv or .json(l)) or a Hub dataset, and the column(s) of its texts."""

    train_file: str | None = setting(
        None, help="Local .txt (one text per line), .csv, .tsv (GLUE's) or .json(l) file.", group=DATA
    )
    dataset_name: str | None = setting(None, help="A Hub dataset, e.g. wikitext.", group=DATA)
    dataset_config_name: str | None = setting(
        None, help="The dataset's configuration, e.g. wikitext-2-raw-v1.", group=DATA
    )
    text_column: str = setting(
        "text", group=DATA,
        help="Column of the texts in CSV/TSV/JSON/Hub data; several, comma-separated, are joined (a pair task's "
        "sentence1,sentence2).",
    )  # fmt: skip

    def problems(self) -> list[str]:
        """One source of text is given."""
        if self.train_file is None and self.dataset_name is None:
            return ["give --train_file or --dataset_name"]
        return []
