"""Settings of ``hf-variants finetune`` and of its engine, :func:`hf_variants.training.run_glue.run`.

run_glue's own settings are declared here as ``HfArgumentParser`` dataclasses (the ecosystem's way, each
flag's help in its field), importing neither torch nor transformers' training stack, so that ``hf-variants
finetune --help`` is fast; the engine adds every ``transformers.TrainingArguments`` field (``--help_all``
lists them with their defaults, which imports the Trainer) and parses them all with :func:`parse_settings`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .arguments import ArgumentParser, HelpFormatter, Settings

#: GLUE's tasks (``hf_variants.glue.TASKS``; tests/test_cli.py checks they agree).
TASK_NAMES = ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli", "ax")
#: ``--dtype`` choices (``run_glue.DTYPES`` maps them to torch dtypes).
DTYPE_NAMES = ("float32", "bfloat16", "float16", "auto")

DESCRIPTION = """\
GLUE-style fine-tuning on the transformers Trainer (run_glue), for any model that
AutoModelForSequenceClassification loads: the hf-variants models, BERT, or a Hub model.

  hf-variants finetune --model_name_or_path runs/mlm --task_name sst2 --glue_dir glue/ \\
      --do_train --do_eval --learning_rate 5e-4 --num_train_epochs 3 --output_dir runs/sst2
"""
EPILOG = """\
Every transformers.TrainingArguments flag is accepted as well (--learning_rate, --num_train_epochs,
--per_device_train_batch_size, --seed, --eval_strategy, --save_strategy, --report_to, --push_to_hub, ...):
'hf-variants finetune --help_all' lists them all with their defaults.
"""


@dataclass
class ModelArguments(Settings):
    model_name_or_path: str | None = field(default=None, metadata={"help": "Checkpoint path or Hub name (required)."})
    config_name: str | None = field(default=None, metadata={"help": "Config, if not the checkpoint's."})
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer, if not the checkpoint's."})
    cache_dir: str | None = field(default=None)
    model_revision: str = field(default="main")
    token: str | None = field(default=None)
    trust_remote_code: bool = field(default=False, metadata={"help": "Load Hub code (hf-variants Hub repos)."})
    ignore_mismatched_sizes: bool = field(
        default=False, metadata={"help": "Replace a classifier head of another size (e.g. another task's)."}
    )
    dtype: str = field(default="float32", metadata={"help": "Weights' dtype.", "choices": list(DTYPE_NAMES)})
    config_overrides: str | None = field(
        default=None, metadata={"help": "Comma-separated key=value config changes, e.g. rtol=1e-3,atol=1e-3."}
    )
    random_init: bool = field(
        default=False, metadata={"help": "Same architecture, freshly initialised weights (no pretraining)."}
    )
    allow_function_changes: bool = field(
        default=False,
        metadata={"help": "Let --config_overrides/--config_name change what the checkpoint's weights compute (e.g. "
                  "attention_type=mlk on an MGK checkpoint); refused without it."},
    )


    def problems(self) -> list[str]:
        return [] if self.model_name_or_path else ["the following arguments are required: --model_name_or_path"]


@dataclass
class DataTrainingArguments(Settings):
    task_name: str | None = field(default=None, metadata={"help": f"One of {', '.join(TASK_NAMES)}."})
    glue_dir: str | None = field(default=None, metadata={"help": "Folder in the original GLUE TSV layout."})
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset (default nyu-mll/glue)."})
    dataset_config_name: str | None = field(default=None)
    train_file: str | None = field(default=None, metadata={"help": "CSV/JSON training file."})
    validation_file: str | None = field(default=None)
    test_file: str | None = field(default=None)
    label_type: str = field(
        default="auto",
        metadata={"help": "Labels of --train_file without --task_name: auto (classification unless every label is "
                  "written as a non-integer number), classification, regression, or multi_label (each row's labels "
                  "separated by commas, e.g. \"comedy,drama\", or a JSON list).",
                  "choices": ["auto", "classification", "regression", "multi_label"]},
    )
    max_seq_length: int = field(default=128)
    pad_to_max_length: bool = field(
        default=False,
        metadata={"help": "Pad every sequence to max_seq_length (default: each batch is padded to its longest example "
                  "only, and the command line groups examples of similar length into batches: "
                  "--train_sampling_strategy group_by_length)."},
    )
    overwrite_cache: bool = field(default=False)
    preprocessing_num_workers: int | None = field(default=None)
    max_train_samples: int | None = field(default=None)
    max_eval_samples: int | None = field(default=None)
    max_predict_samples: int | None = field(default=None)
    export_dir: str | None = field(default=None, metadata={"help": "Write a Hub folder (hf_variants.hub) here."})
    heldout_fraction: float | None = field(
        default=None,
        metadata={"help": "Hold out this share of the training split (drawn with --heldout_seed) and evaluate on "
                  "it instead of the dev set: for choosing hyperparameters without seeing dev."},
    )
    heldout_seed: int = field(default=0, metadata={"help": "Seed of the --heldout_fraction split."})

    def problems(self) -> list[str]:
        problems = []
        if self.heldout_fraction is not None and not 0 < self.heldout_fraction < 1:
            problems.append(f"--heldout_fraction must be between 0 and 1, got {self.heldout_fraction}")
        if self.task_name is None and self.train_file is None and self.dataset_name is None:
            problems.append("give --task_name (GLUE), --train_file or --dataset_name")
        given_files = [f"--{name}" for name in ("train_file", "validation_file", "test_file") if getattr(self, name)]
        if self.glue_dir is not None and given_files:
            problems.append(f"--glue_dir and {'/'.join(given_files)} are two sources of data: give one of them")
        for name in ("train_file", "validation_file", "test_file"):
            path = getattr(self, name)
            if path is not None and Path(path).suffix.lower() not in (".csv", ".json", ".jsonl"):
                problems.append(f"--{name} {path} must be a .csv or .json(l) file")
        return problems


@dataclass
class RunArguments(Settings):
    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "Delete the contents of a non-empty --output_dir that holds another run."}
    )
    skip_nonfinite_steps: bool = field(
        default=False,
        metadata={"help": "Skip an optimizer step whose loss or gradient is NaN/inf (counted) instead of stopping."},
    )
    print_logs: bool = field(
        default=True,
        metadata={"help": "Print each logged {'loss': ...} dict (the Trainer's default); false keeps them only in "
                  "trainer_state.json, leaving the progress bar alone on the console."},
    )


#: ``TrainingArguments`` defaults of ``hf-variants finetune``'s command line that differ from ``transformers``': batches
#: of examples of similar length (drawn from the run's seed like the rest of its order), so that dynamic padding
#: computes little padding; and the real (non-padding) tokens counted (``REAL_TOKENS``), so that the run reports real
#: tokens per second.
COMMAND_LINE_DEFAULTS = {"train_sampling_strategy": "group_by_length"}
REAL_TOKENS = ("include_num_input_tokens_seen", "non_padding")
#: The defaults a command recorded before the arguments were (an old ``results.json``'s ``command``) ran with.
RECORDED_COMMAND_DEFAULTS = {"train_sampling_strategy": "random", "pad_to_max_length": True}


def parser_class() -> type:
    """``transformers.HfArgumentParser`` with this package's two-line usage error."""
    from transformers import HfArgumentParser

    class FinetuneArgumentParser(HfArgumentParser):
        error = ArgumentParser.error

    return FinetuneArgumentParser


def parse_settings(parser: Any, argv: Sequence[str] | None) -> tuple[Any, ...]:
    """The command line as one instance of each of ``parser``'s dataclasses, as
    ``HfArgumentParser.parse_args_into_dataclasses`` builds them, except that every dataclass is built
    before a problem is reported, so that one usage error names every mistake (a missing
    --model_name_or_path and a missing task together)."""
    namespace = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    built, problems = [], []
    for settings_class in parser.dataclass_types:
        names = {item.name for item in fields(settings_class) if item.init}
        try:
            built.append(settings_class(**{name: value for name, value in vars(namespace).items() if name in names}))
        except ValueError as error:
            problems.append(str(error).rstrip("."))
    if problems:
        parser.error("; ".join(problems))
    return tuple(built)


def parse_or_help(argv: list[str]) -> None:
    """``--help``: run_glue's own arguments (fast); ``--help_all``: with every ``TrainingArguments``
    field. Otherwise nothing: the engine parses ``argv`` itself."""
    if "--help_all" in argv:
        from transformers import HfArgumentParser, TrainingArguments

        every_field = (ModelArguments, DataTrainingArguments, TrainingArguments, RunArguments)
        HfArgumentParser(every_field, prog="hf-variants finetune").parse_args(["--help"])
    if "-h" in argv or "--help" in argv:
        help_parser().print_help()
        sys.exit(0)


def help_parser() -> Any:
    """The parser of the engine's own flags (``--help``; ``TrainingArguments``' are accepted too)."""
    return parser_class()((ModelArguments, DataTrainingArguments, RunArguments), prog="hf-variants finetune",
                          description=DESCRIPTION, epilog=EPILOG, formatter_class=HelpFormatter)  # fmt: skip

