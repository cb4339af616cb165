"""Arguments of ``hf-variants pretrain`` (the engine: ``hf_variants.training.run_mlm``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from .checks import (
    above,
    at_least,
    check_fields,
    field_defaults,
    half_open_interval,
    open_interval,
    parse_into,
    seed_range,
)
from .corpus import CorpusArguments
from .formatting import ArgumentParser, HelpFormatter

#: The package's model types (``hf_variants.VARIANTS``; tests/test_cli.py checks they agree) and
#: transformers' own BERT, which run_mlm trains as an external reference.
MODEL_TYPES = ("bert_control", "macaron_bert", "mgk_bert", "node_transformer", "transject", "bert")

#: accelerate's trackers (``accelerate.utils.LoggerType``) besides the local CSV file.
TRACKERS = ("all", "aim", "clearml", "comet_ml", "dvclive", "mlflow", "swanlab", "tensorboard", "trackio", "wandb")

DESCRIPTION = """\
Masked-language-model pretraining on accelerate, one process or many (run_mlm_no_trainer-style).

  hf-variants pretrain --model_type macaron_bert \\
      --config_overrides hidden_size=256,num_hidden_layers=4,num_attention_heads=4,intermediate_size=1024 \\
      --train_file train.txt --validation_file valid.txt --train_tokenizer_vocab_size 8000 \\
      --max_seq_length 128 --max_train_steps 1000 --output_dir runs/macaron
  accelerate launch --multi_gpu --num_processes 2 -m hf_variants_cli pretrain ...

Launcher settings (mixed precision, number of processes, CPU) come from 'accelerate launch' or
'accelerate config' unless --mixed_precision or --cpu is given here.

The output folder is locked for the run and holds one run: the same command resumes it from its newest
complete checkpoint, and the same command with a larger --max_train_steps or --num_train_epochs extends a
finished run (see --max_train_steps). Another run in a used folder is refused.
"""


def build_parser(prog: str = "hf-variants pretrain") -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=prog, description=DESCRIPTION, formatter_class=HelpFormatter)
    model = parser.add_argument_group("model (exactly one of --model_type, --config_name, --model_name_or_path)")
    model.add_argument("--model_type", help=f"Train from scratch: one of {', '.join(MODEL_TYPES)} (or a variant "
                       "registered in the same process).")  # fmt: skip
    model.add_argument("--config_name", help="A config (path or Hub name) to train from scratch.")
    model.add_argument("--model_name_or_path", help="Continue pretraining from a checkpoint (path or Hub name).")
    model.add_argument(
        "--config_overrides", help="Comma-separated key=value config fields, e.g. hidden_size=256,num_hidden_layers=4."
    )
    model.add_argument(
        "--allow_function_changes", action="store_true",
        help="Let --config_overrides change what a --model_name_or_path checkpoint's weights compute (e.g. "
        "attention_type=mlk on an MGK checkpoint); refused without it.",
    )  # fmt: skip
    model.add_argument(
        "--trust_remote_code", action="store_true",
        help="Allow a Hub checkpoint or tokenizer to run its own code (hf-variants exports do; installed models don't "
        "need it).",
    )  # fmt: skip
    data = parser.add_argument_group("data (one of --train_file, --dataset_name)")
    data.add_argument("--train_file", help="Local .txt (one text per line), .csv or .json(l) file.")
    data.add_argument("--validation_file", help="Validation file (default: a split of the training data).")
    data.add_argument("--dataset_name", help="A Hub dataset, e.g. wikitext.")
    data.add_argument("--dataset_config_name", help="The dataset's configuration, e.g. wikitext-2-raw-v1.")
    data.add_argument("--text_column", help="Column of the texts in CSV/JSON/Hub data.")
    data.add_argument("--validation_split_percentage", type=open_interval(0, 100),
                      help="Share of the training data held out when no validation file is given.")  # fmt: skip
    data.add_argument("--max_seq_length", type=at_least(3),
                      help="Tokens per example ([CLS], at least one text token, [SEP]).")  # fmt: skip
    data.add_argument("--line_by_line", action="store_true", help="One example per line instead of packed blocks.")
    data.add_argument("--mlm_probability", type=open_interval(0, 1), help="Share of tokens masked.")
    data.add_argument("--max_eval_samples", type=at_least(1), help="Evaluate on at most this many validation examples.")
    data.add_argument("--preprocessing_num_workers", type=at_least(1), help="Processes for tokenizing the data.")
    tokenizer = parser.add_argument_group("tokenizer")
    tokenizer.add_argument("--tokenizer_name", help="Tokenizer path or Hub name (default: the checkpoint's).")
    tokenizer.add_argument("--train_tokenizer_vocab_size", type=at_least(16),
                           help="Train a WordPiece tokenizer of this size.")  # fmt: skip
    training = parser.add_argument_group("training")
    training.add_argument("--output_dir", type=Path, required=True, help="Folder of the run (locked while it runs).")
    training.add_argument("--per_device_train_batch_size", type=at_least(1),
                          help="Examples per process and step.")  # fmt: skip
    training.add_argument("--per_device_eval_batch_size", type=at_least(1),
                          help="Examples per evaluation batch.")  # fmt: skip
    training.add_argument("--gradient_accumulation_steps", type=at_least(1), help="Micro-batches per step.")
    training.add_argument("--learning_rate", type=above(0), help="Peak learning rate of AdamW.")
    training.add_argument("--weight_decay", type=at_least(0, float),
                          help="AdamW weight decay (not on biases/norms).")  # fmt: skip
    training.add_argument("--adam_beta1", type=half_open_interval(0, 1), help="AdamW beta1.")
    training.add_argument("--adam_beta2", type=half_open_interval(0, 1), help="AdamW beta2.")
    training.add_argument("--max_grad_norm", type=at_least(0, float),
                          help="Gradient clipping norm; 0 means no clipping (as in transformers).")  # fmt: skip
    training.add_argument("--num_train_epochs", type=above(0), help="Passes over the training data.")
    training.add_argument(
        "--max_train_steps", type=at_least(1),
        help="Optimizer steps (overrides --num_train_epochs). Raising it on a finished run in the same --output_dir "
        "continues that run from its final checkpoint; the learning-rate schedule is then the one of the new length "
        "(a constant schedule continues exactly as one longer run would).",
    )  # fmt: skip
    training.add_argument("--time_budget_seconds", type=above(0), help="Stop after this much training time.")
    training.add_argument("--lr_scheduler_type",
                          choices=["linear", "cosine", "constant", "constant_with_warmup"],
                          help="Learning-rate schedule (transformers' get_scheduler).")  # fmt: skip
    training.add_argument("--num_warmup_steps", type=at_least(0, float),
                          help="Warmup steps, or a fraction (< 1) of all steps.")  # fmt: skip
    training.add_argument("--mixed_precision", choices=["no", "fp16", "bf16"],
                          help="Overrides the launcher's setting (accelerate launch / accelerate config).")  # fmt: skip
    training.add_argument("--cpu", action="store_true", help="Train on the CPU even when a GPU is available.")
    training.add_argument("--seed", type=seed_range(), help="Seed of the initialisation, data order and masks.")
    training.add_argument("--logging_steps", type=at_least(1), help="Log the training loss every N steps.")
    training.add_argument("--eval_steps", type=at_least(1), help="Evaluate every N steps (default: only at the end).")
    training.add_argument("--checkpointing_steps", type=at_least(1), help="Save a resumable checkpoint every N steps.")
    training.add_argument(
        "--resume_from_checkpoint",
        help="'latest' (the newest complete checkpoint in --output_dir) or a checkpoint-<step> folder of this run. "
        "A folder that holds this run resumes from its newest complete checkpoint without it.",
    )
    training.add_argument(
        "--overwrite_output_dir", action="store_true", help="Delete the contents of a non-empty --output_dir first."
    )
    training.add_argument(
        "--skip_nonfinite_steps", action="store_true",
        help="Skip an optimizer step whose loss or gradient is NaN/inf (counted in the results) instead of stopping.",
    )  # fmt: skip
    training.add_argument(
        "--report_to", nargs="+", metavar="TRACKER",
        help=f"Where metrics go: csv (metrics.csv in --output_dir), none, or accelerate's trackers: "
        f"{', '.join(TRACKERS)}.",
    )  # fmt: skip
    training.add_argument("--with_tracking", action="store_true",
                          help="Also report to every accelerate tracker installed (--report_to all).")  # fmt: skip
    training.add_argument("--disable_tqdm", action="store_true", help="No progress bar.")
    export = parser.add_argument_group("export")
    export.add_argument("--export_dir", type=Path, help="Also write a Hub folder (remote code and model card) here.")
    export.add_argument("--push_to_hub", action="store_true", help="Upload that folder to --hub_model_id.")
    export.add_argument("--hub_model_id", help="The Hub repository, e.g. you/macaron-bert-small.")
    parser.set_defaults(**PretrainingArguments.defaults())  # one place for the defaults: the settings class
    return parser


@dataclass(kw_only=True)
class PretrainingArguments(CorpusArguments):
    """``hf-variants pretrain``'s settings, typed: one field per flag of :func:`build_parser` (same name;
    the corpus fields from :class:`~.corpus.CorpusArguments`; the flags' defaults are these). The engine
    (``hf_variants.training.run_mlm.run``) takes them; build them in Python, or parse a command line into
    them (:func:`parse_args`). Either way every value is checked by its flag's own type and choices, and
    the combinations by :meth:`check`: a bad value is a ``ValueError`` naming the field."""

    output_dir: Path
    # model (exactly one of model_type, config_name, model_name_or_path)
    model_type: str | None = None
    config_name: str | None = None
    model_name_or_path: str | None = None
    config_overrides: str | None = None
    allow_function_changes: bool = False
    trust_remote_code: bool = False
    # data (one of train_file, dataset_name: CorpusArguments)
    validation_file: str | None = None
    validation_split_percentage: float = 5.0
    max_seq_length: int = 128
    line_by_line: bool = False
    mlm_probability: float = 0.15
    max_eval_samples: int | None = None
    preprocessing_num_workers: int | None = None
    # tokenizer
    tokenizer_name: str | None = None
    train_tokenizer_vocab_size: int | None = None
    # training
    per_device_train_batch_size: int = 16
    per_device_eval_batch_size: int = 32
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-4
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    max_grad_norm: float = 1.0
    num_train_epochs: float = 1.0
    max_train_steps: int | None = None
    time_budget_seconds: float | None = None
    lr_scheduler_type: str = "linear"
    num_warmup_steps: float = 0.06
    mixed_precision: str | None = None
    cpu: bool = False
    seed: int = 42
    logging_steps: int = 10
    eval_steps: int | None = None
    checkpointing_steps: int | None = None
    resume_from_checkpoint: str | None = None
    overwrite_output_dir: bool = False
    skip_nonfinite_steps: bool = False
    report_to: list[str] = field(default_factory=lambda: ["csv"])
    with_tracking: bool = False
    disable_tqdm: bool = False
    # export
    export_dir: Path | None = None
    push_to_hub: bool = False
    hub_model_id: str | None = None

    @classmethod
    def defaults(cls) -> dict[str, object]:
        """Every field's default (the flags show them in ``--help``)."""
        return field_defaults(cls)

    def __post_init__(self) -> None:
        self.report_to = list(self.report_to)
        check_fields(self, build_parser())
        self.check()

    def check(self) -> None:
        """The combinations a flag's type cannot express."""
        sources = [self.model_type, self.config_name, self.model_name_or_path]
        if sum(s is not None for s in sources) != 1:
            raise ValueError("give exactly one of --model_type, --config_name, --model_name_or_path")
        self.check_corpus()
        if self.push_to_hub and not self.hub_model_id:
            raise ValueError("--push_to_hub needs --hub_model_id")
        unknown = sorted(set(self.report_to) - {"csv", "none", *TRACKERS})
        if unknown:
            raise ValueError(f"--report_to: unknown tracker(s) {', '.join(unknown)}; "
                             f"choose from csv, none, {', '.join(TRACKERS)}")  # fmt: skip
        if "none" in self.report_to and len(self.report_to) > 1:
            raise ValueError("--report_to none cannot be combined with other trackers")
        if self.with_tracking and "all" not in self.report_to:
            self.report_to = [name for name in self.report_to if name != "none"] + ["all"]


def parse_args(argv: list[str] | None = None) -> PretrainingArguments:
    """The command line as typed settings; a bad value or combination is argparse's usage error."""
    return parse_into(PretrainingArguments, build_parser(), argv)
