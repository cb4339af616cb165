"""Settings of ``hf-variants pretrain`` and of its engine, :func:`hf_variants.training.run_mlm.run`:
one field per flag, declared once (the flags are generated from the fields)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .. import VARIANT_MODEL_TYPES
from .arguments import argument_parser, parse_into, setting
from .checks import above, at_least, half_open_interval, open_interval, seed_range
from .corpus import DATA, CorpusArguments

#: The package's model types (the variants ``import hf_variants`` registers) and transformers' own BERT,
#: which run_mlm trains as an external reference.
MODEL_TYPES = (*VARIANT_MODEL_TYPES, "bert")

#: accelerate's trackers (``accelerate.utils.LoggerType``) besides the local CSV file.
TRACKERS = ("all", "aim", "clearml", "comet_ml", "dvclive", "mlflow", "swanlab", "tensorboard", "trackio", "wandb")

MODEL = "model (exactly one of --model_type, --config_name, --model_name_or_path)"
TOKENIZER = "tokenizer"
TRAINING = "training"
EXPORT = "export"

DESCRIPTION = """\
Masked-language-model pretraining on accelerate, one process or many (run_mlm_no_trainer-style).

  hf-variants pretrain --model_type macaron_bert \\
      --config_overrides hidden_size=256,num_hidden_layers=4,num_attention_heads=4,intermediate_size=1024 \\
      --train_file train.txt --validation_file valid.txt --train_tokenizer_vocab_size 8000 \\
      --max_seq_length 128 --max_train_steps 1000 --output_dir runs/macaron
  accelerate launch --multi_gpu --num_processes 2 -m hf_variants.cli pretrain ...

Launcher settings (mixed precision, number of processes, CPU) come from 'accelerate launch' or
'accelerate config' unless --mixed_precision or --cpu is given here.

The output folder is locked for the run and holds one run: the same command resumes it from its newest
complete checkpoint, and the same command with a larger --max_train_steps or --num_train_epochs extends a
finished run (see --max_train_steps). Another run in a used folder is refused.
"""


@dataclass(kw_only=True)
class PretrainingArguments(CorpusArguments):
    """``hf-variants pretrain``'s settings, typed: one field per flag (the corpus fields from
    :class:`~.corpus.CorpusArguments`). The engine (``hf_variants.training.run_mlm.run``) takes them; build
    them in Python, or parse a command line into them (:func:`parse_args`). Either way every value is checked
    by its field's own check and the combinations by :meth:`problems`: a ``ValueError`` names each."""

    HELP_GROUPS: ClassVar[tuple[str, ...]] = (MODEL, DATA, TOKENIZER, TRAINING, EXPORT)

    model_type: str | None = setting(
        None, group=MODEL, help=f"Train from scratch: one of {', '.join(MODEL_TYPES)} (or a variant registered in "
        "the same process).",
    )  # fmt: skip
    config_name: str | None = setting(None, group=MODEL, help="A config (path or Hub name) to train from scratch.")
    model_name_or_path: str | None = setting(
        None, group=MODEL, help="Continue pretraining from a checkpoint (path or Hub name)."
    )
    config_overrides: str | None = setting(
        None, group=MODEL, help="Comma-separated key=value config fields, e.g. hidden_size=256,num_hidden_layers=4."
    )
    allow_function_changes: bool = setting(
        False, group=MODEL, help="Let --config_overrides change what a --model_name_or_path checkpoint's weights "
        "compute (e.g. attention_type=mlk on an MGK checkpoint); refused without it.",
    )  # fmt: skip
    trust_remote_code: bool = setting(
        False, group=MODEL, help="Allow a Hub checkpoint or tokenizer to run its own code (hf-variants exports do; "
        "installed models don't need it).",
    )  # fmt: skip
    validation_file: str | None = setting(
        None, group=DATA, help="Validation file (default: a split of the training data)."
    )
    validation_split_percentage: float = setting(
        5.0, group=DATA, parse=open_interval(0, 100),
        help="Share of the training data held out when no validation file is given.",
    )  # fmt: skip
    max_seq_length: int = setting(
        128, group=DATA, parse=at_least(3), help="Tokens per example ([CLS], at least one text token, [SEP])."
    )
    line_by_line: bool = setting(False, group=DATA, help="One example per line instead of packed blocks.")
    packing: str = setting(
        "blocks", group=DATA, choices=("blocks", "documents"),
        help="How lines share a packed block: 'blocks' (run_mlm's: every token attends to the whole block) or "
        "'documents' (position ids restart at each line, and a token attends within its own line only; no "
        "padding either way). Not with --line_by_line.",
    )  # fmt: skip
    streaming: bool = setting(
        False, group=DATA,
        help="Read the training corpus as a stream (a local file or a Hub dataset): lines are tokenised and cut into "
        "blocks as training needs them, so the corpus is never held in memory, and a checkpoint keeps the stream's "
        "position (a resumed run uses the same blocks and masks). Needs --max_train_steps and a tokenizer "
        "(--tokenizer_name or --model_name_or_path); blocks are shuffled within --shuffle_window_blocks.",
    )  # fmt: skip
    shuffle_window_blocks: int = setting(
        1024, group=DATA, parse=at_least(1),
        help="With --streaming: consecutive blocks used in a shuffled order (1: the corpus's order).",
    )  # fmt: skip
    streaming_validation_lines: int = setting(
        1000, group=DATA, parse=at_least(1),
        help="With --streaming and no --validation_file (nor a Hub validation split): the first N lines of the "
        "training stream are the validation set, and training skips them.",
    )  # fmt: skip
    mlm_probability: float = setting(0.15, group=DATA, parse=open_interval(0, 1), help="Share of tokens masked.")
    max_eval_samples: int | None = setting(
        None, group=DATA, parse=at_least(1), help="Evaluate on at most this many validation examples."
    )
    preprocessing_num_workers: int | None = setting(
        None, group=DATA, parse=at_least(1), help="Processes for tokenizing the data."
    )
    tokenizer_name: str | None = setting(
        None, group=TOKENIZER, help="Tokenizer path or Hub name (default: the checkpoint's)."
    )
    train_tokenizer_vocab_size: int | None = setting(
        None, group=TOKENIZER, parse=at_least(16), help="Train a WordPiece tokenizer of this size."
    )
    output_dir: Path = setting(group=TRAINING, help="Folder of the run (locked while it runs).")
    per_device_train_batch_size: int = setting(
        16, group=TRAINING, parse=at_least(1), help="Examples per process and step."
    )
    per_device_eval_batch_size: int = setting(
        32, group=TRAINING, parse=at_least(1), help="Examples per evaluation batch."
    )
    gradient_accumulation_steps: int = setting(1, group=TRAINING, parse=at_least(1), help="Micro-batches per step.")
    learning_rate: float = setting(5e-4, group=TRAINING, parse=above(0), help="Peak learning rate of AdamW.")
    weight_decay: float = setting(
        0.01, group=TRAINING, parse=at_least(0, float), help="AdamW weight decay (not on biases/norms)."
    )
    adam_beta1: float = setting(0.9, group=TRAINING, parse=half_open_interval(0, 1), help="AdamW beta1.")
    adam_beta2: float = setting(0.98, group=TRAINING, parse=half_open_interval(0, 1), help="AdamW beta2.")
    max_grad_norm: float = setting(
        1.0, group=TRAINING, parse=at_least(0, float),
        help="Gradient clipping norm; 0 means no clipping (as in transformers).",
    )  # fmt: skip
    num_train_epochs: float = setting(1.0, group=TRAINING, parse=above(0), help="Passes over the training data.")
    max_train_steps: int | None = setting(
        None, group=TRAINING, parse=at_least(1),
        help="Optimizer steps (overrides --num_train_epochs). Raising it on a finished run in the same --output_dir "
        "continues that run from its final checkpoint; the learning-rate schedule is then the one of the new length "
        "(a constant schedule continues exactly as one longer run would).",
    )  # fmt: skip
    time_budget_seconds: float | None = setting(
        None, group=TRAINING, parse=above(0), help="Stop after this much training time."
    )
    lr_scheduler_type: str = setting(
        "linear", group=TRAINING, choices=("linear", "cosine", "constant", "constant_with_warmup"),
        help="Learning-rate schedule (transformers' get_scheduler).",
    )  # fmt: skip
    num_warmup_steps: float = setting(
        0.06, group=TRAINING, parse=at_least(0, float), help="Warmup steps, or a fraction (< 1) of all steps."
    )
    mixed_precision: str | None = setting(
        None, group=TRAINING, choices=("no", "fp16", "bf16"),
        help="Overrides the launcher's setting (accelerate launch / accelerate config).",
    )  # fmt: skip
    cpu: bool = setting(False, group=TRAINING, help="Train on the CPU even when a GPU is available.")
    torch_compile: bool = setting(
        False, group=TRAINING,
        help="Compile the model's forward with torch.compile (nn.Module.compile: its weights, checkpoints and "
        "exports are the same as without), and use the fused AdamW on a GPU. The first steps wait for the "
        "compilation.",
    )  # fmt: skip
    gradient_checkpointing: bool = setting(
        False, group=TRAINING,
        help="Recompute each layer's activations in the backward pass instead of keeping them (less memory, about a "
        "third more compute; the same losses and weights). Refused, with the reason, for a model whose recomputation "
        "would not be exact (MGK's soft E-step).",
    )  # fmt: skip
    torch_compile_backend: str = setting(
        "inductor", group=TRAINING,
        help="torch.compile's backend with --torch_compile ('inductor'; 'aot_eager' or 'eager' to check a model's "
        "graph breaks without generating code).",
    )  # fmt: skip
    seed: int = setting(
        42, group=TRAINING, parse=seed_range(),
        help="Seed of the initialisation and dropout, and of the data order and masks unless --data_seed is given.",
    )
    data_seed: int | None = setting(
        None, group=TRAINING, parse=seed_range(),
        help="Seed of the data order, the masks and the validation split (default: --seed), so that two runs can "
        "differ in their initialisation only.",
    )
    logging_steps: int = setting(10, group=TRAINING, parse=at_least(1), help="Log the training loss every N steps.")
    eval_steps: int | None = setting(
        None, group=TRAINING, parse=at_least(1), help="Evaluate every N steps (default: only at the end)."
    )
    checkpointing_steps: int | None = setting(
        None, group=TRAINING, parse=at_least(1), help="Save a resumable checkpoint every N steps."
    )
    resume_from_checkpoint: str | None = setting(
        None, group=TRAINING,
        help="'latest' (the newest complete checkpoint in --output_dir) or a checkpoint-<step> folder of this run. "
        "A folder that holds this run resumes from its newest complete checkpoint without it.",
    )  # fmt: skip
    overwrite_output_dir: bool = setting(
        False, group=TRAINING, help="Delete the contents of a non-empty --output_dir first."
    )
    skip_nonfinite_steps: bool = setting(
        False, group=TRAINING,
        help="Skip an optimizer step whose loss or gradient is NaN/inf (counted in the results) instead of stopping.",
    )  # fmt: skip
    report_to: list[str] = setting(
        group=TRAINING, metavar="TRACKER", default_factory=lambda: ["csv"],
        help=f"Where metrics go: csv (metrics.csv in --output_dir), none, or accelerate's trackers: "
        f"{', '.join(TRACKERS)}.",
    )  # fmt: skip
    with_tracking: bool = setting(
        False, group=TRAINING, help="Also report to every accelerate tracker installed (--report_to all)."
    )
    disable_tqdm: bool = setting(False, group=TRAINING, help="No progress bar.")
    export_dir: Path | None = setting(
        None, group=EXPORT, help="Also write a Hub folder (remote code and model card) here."
    )
    push_to_hub: bool = setting(False, group=EXPORT, help="Upload that folder to --hub_model_id.")
    hub_model_id: str | None = setting(None, group=EXPORT, help="The Hub repository, e.g. you/macaron-bert-small.")

    def __post_init__(self) -> None:
        self.report_to = list(self.report_to)
        super().__post_init__()
        if self.with_tracking and "all" not in self.report_to:
            self.report_to = [name for name in self.report_to if name != "none"] + ["all"]

    @property
    def order_seed(self) -> int:
        """The seed of the data order, the masks and the validation split: ``--data_seed``, else ``--seed``."""
        return self.seed if self.data_seed is None else self.data_seed

    def problems(self) -> list[str]:
        """The combinations a field's own check cannot see."""
        problems = []
        sources = [self.model_type, self.config_name, self.model_name_or_path]
        if sum(s is not None for s in sources) != 1:
            problems.append("give exactly one of --model_type, --config_name, --model_name_or_path")
        problems += super().problems()
        if self.push_to_hub and not self.hub_model_id:
            problems.append("--push_to_hub needs --hub_model_id")
        if self.packing == "documents" and self.line_by_line:
            problems.append("--packing documents packs lines into blocks; --line_by_line gives each line its own row")
        if self.streaming:
            problems += [f"--streaming {problem}" for problem in self.streaming_problems()]
        report_to = list(self.report_to or [])
        unknown = sorted(set(report_to) - {"csv", "none", *TRACKERS})
        if unknown:
            problems.append(f"--report_to: unknown tracker(s) {', '.join(unknown)}; "
                            f"choose from csv, none, {', '.join(TRACKERS)}")  # fmt: skip
        if "none" in report_to and len(report_to) > 1:
            problems.append("--report_to none cannot be combined with other trackers")
        return problems

    def streaming_problems(self) -> list[str]:
        """What a stream of unknown length cannot do."""
        problems = []
        if self.max_train_steps is None:
            problems.append("needs --max_train_steps (a stream's length is not known in advance)")
        if self.line_by_line:
            problems.append("packs lines into blocks; --line_by_line is not streamed")
        if self.train_tokenizer_vocab_size is not None:
            problems.append("does not train a tokenizer (that reads the whole corpus into memory); train one with "
                            "'hf-variants train-tokenizer' on a sample and pass --tokenizer_name")  # fmt: skip
        return problems


def build_parser(prog: str = "hf-variants pretrain"):
    """The command line, generated from :class:`PretrainingArguments`."""
    return argument_parser(PretrainingArguments, prog, DESCRIPTION)


def parse_args(argv: list[str] | None = None) -> PretrainingArguments:
    """The command line as typed settings; every mistake is named in one usage error."""
    return parse_into(PretrainingArguments, build_parser(), argv)
