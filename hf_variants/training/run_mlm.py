"""Masked-language-model pretraining on ``accelerate`` (run_mlm_no_trainer-style), one process or many.

    hf-variants pretrain --model_type macaron_bert \\
        --config_overrides hidden_size=256,num_hidden_layers=4,num_attention_heads=4,intermediate_size=1024 \\
        --train_file $DATA/wikitext-2/train.txt --validation_file $DATA/wikitext-2/valid.txt \\
        --train_tokenizer_vocab_size 8000 --max_seq_length 128 --max_train_steps 1000 --output_dir runs/macaron
    accelerate launch --multi_gpu --num_processes 2 -m hf_variants.cli pretrain ...  # data-parallel

The arguments are defined in :mod:`hf_variants.settings.pretraining`. Launcher settings (mixed precision,
processes) come from ``accelerate launch`` / ``accelerate config`` unless ``--mixed_precision`` or
``--cpu`` is given. On a machine without GPUs the processes use gloo on the CPU. FSDP and DeepSpeed are
refused (:func:`check_parallelism`). Metrics go to accelerate's trackers (``--report_to``), with a
local ``metrics.csv`` by default (:mod:`hf_variants.training.tracking`).

Determinism: the data order of an epoch and the masks of a step are functions of ``--data_seed`` (default
``--seed``) and the step only, and global batches are split across processes by rows. So ``--resume_from_checkpoint``
continues exactly (same data, same masks, same next loss). Losses are sums over the masked tokens of
the whole optimizer step divided by their count — independent of how the step is split into
processes and gradient-accumulation micro-batches — so N processes with per-device batch b/N train
the same model as one process with batch b *when the model has no dropout*
(``hidden_dropout_prob=attention_probs_dropout_prob=0``): dropout masks are drawn from each process's
own random stream, so with dropout the two runs are equally valid draws, not the same numbers.

Safety (:mod:`hf_variants.training.checkpoints`): the output folder is locked for the run; a folder
holding another run is refused (``--overwrite_output_dir`` empties it); a folder holding this run
resumes from its newest complete checkpoint, and a finished run extends to a larger
``--max_train_steps`` when its schedule does not depend on the length (:func:`run_fingerprint`);
checkpoints are written atomically as safetensors + JSON (no pickles) and any state that cannot be
restored is an error naming the file; the training history continues across resumes; a non-finite
loss or gradient stops the run with the step, the value and the batch (``--skip_nonfinite_steps``
skips such steps instead and counts them).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import transformers
from accelerate import Accelerator
from accelerate.utils import DistributedType, set_seed
from datasets import DatasetDict
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer, PreTrainedTokenizerBase, get_scheduler

from ..core.composition import document_packing_error
from ..core.overrides import check_override_fields, parse_overrides
from ..core.registration import VARIANTS
from ..settings import pretraining
from ..settings.pretraining import PretrainingArguments
from ..storage import run_folder, run_identity
from ..storage.files import CheckpointError, inside, staged_into, write_text_atomic
from ..storage.record_schema import load_json
from ..tokenization import train_wordpiece_tokenizer
from . import checkpoints, streaming, tracking
from .data import SeededMaskingCollator, check_maskable, global_batches, load_text_corpus, tokenize_corpus
from .interrupts import StopOnSignal, TrainingInterrupted
from .nonfinite import NonFiniteStepError, nonfinite_gradients
from .processes import end_process_group

BASELINE_MODEL_TYPES = ("bert",)
STATE_FILE = "training_state.json"
EVAL_KEY_OFFSET = 10**9  # evaluation masks use keys disjoint from training steps
#: Arguments that do not change the trained model or its metrics (left out of the run fingerprint).
NOT_FINGERPRINTED = frozenset({
    "output_dir", "resume_from_checkpoint", "overwrite_output_dir", "disable_tqdm", "preprocessing_num_workers",
    "checkpointing_steps", "report_to", "with_tracking", "export_dir", "push_to_hub", "hub_model_id",
    # the length of the schedule: in the fingerprint only where it changes the steps already taken (run_fingerprint)
    "max_train_steps", "num_train_epochs", "time_budget_seconds",
    # where the run executes: mixed precision is recorded in results.json and is not a resume-blocking change
    # the effective mixed precision (flag or launcher) enters run_fingerprint instead of the flag
    "mixed_precision", "trust_remote_code", "allow_function_changes",
    # recomputing activations gives the same losses and weights (tests/test_run_mlm.py): the same run either way
    "gradient_checkpointing",
    # the tokenizer enters through its whole definition (the same tokenizer, trained or loaded, is the same run)
    "tokenizer_name", "train_tokenizer_vocab_size",
    # local files enter by content (run_fingerprint), their paths are only recorded
    "train_file", "validation_file",
})  # fmt: skip
#: Settings added after runs were made without them, with the value those runs had: at that value a setting is
#: left out of the fingerprint, so a run started before it existed resumes and extends after an upgrade.
LATER_SETTINGS = {"packing": "blocks", "streaming": False, "shuffle_window_blocks": 1024,
                  "streaming_validation_lines": 1000}  # fmt: skip


def model_types() -> list[str]:
    import hf_variants  # noqa: F401  (registers the variants)

    return sorted(VARIANTS) + list(BASELINE_MODEL_TYPES)


def check_model_type(settings: PretrainingArguments) -> None:
    """The model type against the live registry, which includes variants registered by the user."""
    if settings.model_type is not None and settings.model_type not in model_types():
        raise ValueError(f"unknown --model_type {settings.model_type!r}; choose from {', '.join(model_types())}")


def parse_args(argv: Sequence[str] | None = None) -> PretrainingArguments:
    """The command line of ``hf-variants pretrain`` as typed settings (declared in
    :mod:`hf_variants.settings.pretraining`, which imports nothing heavy, so that ``--help`` is fast)."""
    settings = pretraining.parse_args(None if argv is None else list(argv))
    try:
        check_model_type(settings)
    except ValueError as error:
        pretraining.build_parser().error(str(error))
    return settings


def requested_arguments(settings: PretrainingArguments) -> dict[str, Any]:
    """Every setting as a JSON value (paths as given), recorded in ``results.json`` so that a study tells
    a finished run of the same settings from another."""
    return run_identity.arguments_with_effect(vars(settings), frozenset())


def recorded_arguments(results: dict[str, Any], record: Path) -> dict[str, Any]:
    """The settings the run whose ``results.json`` is ``record`` was made with (:func:`requested_arguments`):
    its ``arguments``, or, in a record written before they were recorded, its command line read by this
    engine's parser."""
    return checkpoints.recorded_arguments(
        results, record, lambda argv: requested_arguments(parse_args(argv)), "run_mlm"
    )


def input_paths(args: PretrainingArguments) -> dict[str, str | Path | None]:
    """Every input of a run by its flag (paths or Hub names): what ``--overwrite_output_dir`` must not remove."""
    names = ("model_name_or_path", "config_name", "tokenizer_name", "train_file", "validation_file",
             "resume_from_checkpoint")  # fmt: skip
    return {f"--{name}": getattr(args, name) for name in names}


def build_tokenizer(args: PretrainingArguments, corpus) -> PreTrainedTokenizerBase:
    if args.train_tokenizer_vocab_size:
        return train_wordpiece_tokenizer(
            corpus["train"]["text"], vocab_size=args.train_tokenizer_vocab_size, model_max_length=args.max_seq_length
        )
    name = args.tokenizer_name or args.model_name_or_path
    if name is None:
        raise ValueError("Give --tokenizer_name or --train_tokenizer_vocab_size when training from scratch.")
    return AutoTokenizer.from_pretrained(name, trust_remote_code=args.trust_remote_code)


def build_model(args: PretrainingArguments, tokenizer: PreTrainedTokenizerBase) -> transformers.PreTrainedModel:
    """A new model (model_type/config_name + overrides, vocabulary sized to the tokenizer) or a checkpoint."""
    overrides = parse_overrides(args.config_overrides)
    source = args.model_name_or_path or args.config_name
    check_override_fields(
        overrides,
        (lambda **switches: AutoConfig.from_pretrained(source, trust_remote_code=args.trust_remote_code, **switches))
        if source is not None else (lambda **switches: AutoConfig.for_model(args.model_type, **switches)),
    )  # fmt: skip
    if args.model_name_or_path is not None:
        model, loading = checkpoints.load_pretrained(
            AutoModelForMaskedLM.from_pretrained, args.model_name_or_path, dtype=torch.float32,
            output_loading_info=True, trust_remote_code=args.trust_remote_code, **overrides,
        )  # fmt: skip
        checkpoints.check_backbone_loaded(model, loading, args.model_name_or_path, new_heads=())
        pretrained = AutoConfig.from_pretrained(args.model_name_or_path, trust_remote_code=args.trust_remote_code)
        checkpoints.check_function_kept(pretrained, model.config, args.model_name_or_path, args.allow_function_changes)
    else:
        if args.config_name is not None:
            config = AutoConfig.from_pretrained(args.config_name, trust_remote_code=args.trust_remote_code, **overrides)
        else:
            config = AutoConfig.for_model(args.model_type, **overrides)
        if "vocab_size" not in overrides:
            config.vocab_size = len(tokenizer)
        if "max_position_embeddings" not in overrides:
            config.max_position_embeddings = max(getattr(config, "max_position_embeddings", 0), args.max_seq_length)
        config.pad_token_id = tokenizer.pad_token_id
        if config.model_type in VARIANTS:
            config.validate()  # the fields changed above must still build a model
        model = AutoModelForMaskedLM.from_config(config)
    if len(tokenizer) > model.config.vocab_size:
        raise ValueError(
            f"The tokenizer has {len(tokenizer)} tokens but the model's vocab_size is {model.config.vocab_size}: "
            "its ids would index past the embedding table. Use the model's tokenizer or resize the embeddings."
        )
    if args.packing == "documents":
        reason = document_packing_error(model.config) if model.config.model_type in VARIANTS else (
            f"model_type {model.config.model_type!r} does not read documents from position_ids beside an attention "
            "mask, so the documents of a block would attend to each other; use an hf-variants model type")
        if reason is not None:
            raise ValueError(f"--packing documents: {reason}")
    checkpoints.check_position_table(model.config, args.max_seq_length)
    return model


def masked_lm_loss_sum(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], sparse: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Sum of the cross-entropy over the masked tokens of ``batch`` (and the model's auxiliary loss).

    With ``sparse`` (the config's ``sparse_prediction``), the model computes logits only at the
    masked positions."""
    labels = batch["labels"]
    inputs = {k: v for k, v in batch.items() if k not in ("labels", "special_tokens_mask")}
    outputs = model(**inputs, labels=labels if sparse else None, output_diagnostics=True)
    logits = outputs.logits.float()
    targets = labels[labels != -100] if sparse else labels.reshape(-1)
    loss_sum = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets, ignore_index=-100, reduction="sum")
    return loss_sum, getattr(outputs, "auxiliary_loss", None)


def held_weights(
    model: torch.nn.Module, accelerator: Accelerator, accumulate_gradients: bool = False
) -> contextlib.AbstractContextManager:
    """The model's parametrised weights computed once for a block (``hold_parametrized_weights``): for all
    evaluation batches, or for the micro-batches of one optimizer step, whose summed gradients
    :func:`accumulate_gradients` then sends on. Gradients that wait for the step's end would reach the
    parameters after data-parallel training reduced them, so several processes hold them for one forward pass
    each, as outside a block."""
    hold = getattr(accelerator.unwrap_model(model), "hold_parametrized_weights", None)
    if hold is None or (accumulate_gradients and accelerator.num_processes > 1):
        return contextlib.nullcontext()
    return hold(accumulate_gradients)


def evaluate(
    model: torch.nn.Module,
    dataset,
    collator: SeededMaskingCollator,
    batch_size: int,
    accelerator: Accelerator,
    max_samples: int | None,
) -> dict[str, float]:
    """Masked-token loss and perplexity on the validation set; the same masks at every evaluation."""
    sparse = getattr(accelerator.unwrap_model(model).config, "sparse_prediction", False)
    model.eval()
    size = len(dataset) if max_samples is None else min(max_samples, len(dataset))
    rank, world = accelerator.process_index, accelerator.num_processes
    totals = torch.zeros(2, dtype=torch.float64, device=accelerator.device)
    with torch.no_grad(), held_weights(model, accelerator):
        for index, start in enumerate(range(0, size, batch_size)):
            if index % world != rank:
                continue
            examples = [dataset[i] for i in range(start, min(start + batch_size, size))]
            batch = {k: v.to(accelerator.device) for k, v in collator(examples, EVAL_KEY_OFFSET + index).items()}
            loss_sum, _ = masked_lm_loss_sum(model, batch, sparse)
            totals += torch.stack([loss_sum.double(), (batch["labels"] != -100).sum().double()])
    totals = accelerator.reduce(totals, reduction="sum")
    loss = float(totals[0] / totals[1].clamp_min(1))
    model.train()
    return {"eval_loss": loss, "perplexity": math.exp(min(loss, 50.0)), "eval_tokens": float(totals[1])}


#: Parallelism whose optimizer state is partitioned over the processes: the main process alone cannot
#: write it, so run_mlm's checkpoints (written by the main process) would resume with a wrong state.
SHARDED_OPTIMIZER_STATE = (DistributedType.FSDP, DistributedType.DEEPSPEED)


def check_parallelism(accelerator: Accelerator) -> None:
    """Refuse FSDP and DeepSpeed (their optimizer state is sharded: a resumed run would silently lose
    most of it), and say so when an FSDP/DeepSpeed launch config ran as plain data parallelism (on a
    CPU-only machine accelerate selects FSDP only from a multi-accelerator setup, see
    ``accelerate/state.py``)."""
    if accelerator.distributed_type in SHARDED_OPTIMIZER_STATE:
        raise SystemExit(
            f"run_mlm does not support {accelerator.distributed_type.value}: its checkpoints are written by the main "
            "process, which holds only its shard of the optimizer state, so resuming would be wrong. Use data "
            "parallelism (`accelerate launch --multi_gpu`, or an accelerate config whose distributed_type is MULTI_GPU "
            "or MULTI_CPU)."
        )
    requested = [name for name in ("FSDP", "DEEPSPEED") if os.environ.get(f"ACCELERATE_USE_{name}") == "true"]
    if requested:
        accelerator.print(
            f"Warning: accelerate launch asked for {requested[0]}, but this run uses "
            f"{accelerator.distributed_type.value} (accelerate shards only across accelerators); results equal "
            "data parallelism."
        )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """``hf-variants pretrain``: the command line parsed into typed settings, then :func:`run`."""
    settings = parse_args(argv)
    try:
        return run(settings, command=" ".join(["run_mlm.py", *(argv if argv is not None else sys.argv[1:])]))
    finally:
        end_process_group()  # also when the run failed (on success, accelerator.end_training() has done it)


def run(args: PretrainingArguments, command: str | None = None) -> dict[str, Any]:
    """The engine called as a function, with typed settings, inside the output folder's lock; ``command``
    is the command line they came from, if any, recorded in ``results.json`` beside the settings."""
    check_model_type(args)
    # Mixed precision and the processes come from `accelerate launch` / `accelerate config` unless a flag is
    # given (``mixed_precision=None`` reads the launcher's). Without a GPU, processes started by
    # `accelerate launch --multi_gpu` / torchrun use gloo on the CPU.
    accelerator = Accelerator(
        mixed_precision=args.mixed_precision,
        cpu=args.cpu or not torch.cuda.is_available(),
        log_with=tracking.trackers(args.report_to, args.output_dir) or None,
        project_dir=str(args.output_dir),
    )
    check_parallelism(accelerator)
    lock = run_folder.OutputDirLock(args.output_dir) if accelerator.is_main_process else None
    try:
        with StopOnSignal() as stop_on_signal:
            return train(args, accelerator, command, stop_on_signal)
    finally:
        if lock is not None:
            lock.release()


@dataclass
class StepPlan:
    """How the training set is cut into optimizer steps: per-device micro-batches, accumulated, on every process."""

    per_device: int
    accumulation: int
    world: int
    rank: int
    steps_per_epoch: int | None  # None for a stream (its length is not known)
    max_steps: int
    warmup: int

    @property
    def global_micro(self) -> int:
        return self.per_device * self.world


@dataclass
class PretrainingRun:
    """What the steps of one run share: settings, data, model and optimization, and the state checkpoints keep."""

    args: PretrainingArguments
    accelerator: Accelerator
    tokenizer: PreTrainedTokenizerBase
    train_set: Any  # a tokenized Dataset, or a BlockStream (--streaming)
    eval_set: Any
    plan: StepPlan
    fingerprint: dict[str, Any]
    collator: SeededMaskingCollator
    model: Any = None
    optimizer: Any = None
    scheduler: Any = None
    state: dict[str, Any] = field(default_factory=dict)
    stream_position: streaming.StreamPosition | None = None  # --streaming: after the last step


@dataclass
class StepBatch:
    """One optimizer step's data: its micro-batches (lists of tokenized examples, every process's rows), the
    examples' numbers for messages (indices in the training set, or blocks of the stream), and for a stream the
    position after it (saved with a checkpoint of this step, which then resumes after it)."""

    micro_batches: list[list[dict[str, list[int]]]]
    examples: list[int]
    stream: streaming.StreamPosition | None = None


def train(
    args: PretrainingArguments, accelerator: Accelerator, command: str | None, stop_on_signal: StopOnSignal
) -> dict[str, Any]:
    """The run itself, inside the output folder's lock, in named steps; a SIGTERM or SIGINT (``stop_on_signal``)
    ends it after the current step with a checkpoint of that step (:mod:`.interrupts`)."""
    set_seed(args.seed)
    tokenizer, train_set, eval_set = load_data(args, accelerator)
    plan = plan_steps(args, accelerator, None if args.streaming else len(train_set))
    fingerprint, finished = check_run_folder(args, accelerator, tokenizer, plan)
    if finished is not None:
        return finished
    run = PretrainingRun(args, accelerator, tokenizer, train_set, eval_set, plan, fingerprint,
                         SeededMaskingCollator(tokenizer, args.mlm_probability, args.order_seed))  # fmt: skip
    prepare_optimization(run)
    files_before = start_run(run)
    progress = tqdm(total=plan.max_steps, initial=run.state["global_step"], desc="MLM",
                    disable=args.disable_tqdm or not accelerator.is_local_main_process)  # fmt: skip
    run.model.train()
    if run.state["global_step"] < plan.max_steps:
        for batch in (streamed_steps if args.streaming else steps_in_memory)(run):
            record = optimizer_step(run, batch)
            progress.update(1)
            if record is not None:
                progress.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_second']:.0f}")
            if after_step(run, record, stop_on_signal, progress):
                break
    progress.close()
    return finish_run(run, command, files_before)


def steps_in_memory(run: PretrainingRun) -> Iterator[StepBatch]:
    """The steps from the run's current one on: each epoch a permutation of the training set (:func:`global_batches`),
    cut into steps of ``accumulation`` global micro-batches."""
    plan, step = run.plan, run.state["global_step"]
    while True:
        epoch, step_in_epoch = divmod(step, plan.steps_per_epoch)
        batches = list(global_batches(len(run.train_set), plan.global_micro, epoch, run.args.order_seed))
        for first in range(step_in_epoch * plan.accumulation, plan.steps_per_epoch * plan.accumulation,
                           plan.accumulation):  # fmt: skip
            indices = batches[first : first + plan.accumulation]
            yield StepBatch([[run.train_set[i] for i in micro] for micro in indices],
                            [int(i) for micro in indices for i in micro])  # fmt: skip
            step += 1


def streamed_steps(run: PretrainingRun) -> Iterator[StepBatch]:
    """The steps from the run's current one on, read from the stream where the run's state says it stands."""
    plan, state = run.plan, run.state
    position = streaming.StreamPosition(**state["stream"]) if "stream" in state else streaming.StreamPosition()
    blocks = run.train_set.blocks(position)
    size = plan.global_micro * plan.accumulation
    first = state["global_step"] * size
    while True:
        taken = [next(blocks) for _ in range(size)]
        micro_batches = [[block for block, _ in taken[i : i + plan.global_micro]]
                         for i in range(0, size, plan.global_micro)]  # fmt: skip
        yield StepBatch(micro_batches, list(range(first, first + size)), taken[-1][1])
        first += size


def load_data(args: PretrainingArguments, accelerator: Accelerator) -> tuple[PreTrainedTokenizerBase, Any, Any]:
    """The corpus, its tokenizer (trained or loaded) and the tokenized training and validation sets (the
    training set as a :class:`BlockStream` with ``--streaming``)."""
    if args.streaming:
        return load_stream(args, accelerator)
    corpus = load_text_corpus(
        args.train_file, args.validation_file, args.dataset_name, args.dataset_config_name,
        args.text_column, args.validation_split_percentage, args.order_seed,
    )  # fmt: skip
    tokenizer = build_tokenizer(args, corpus)
    if tokenizer.model_max_length < args.max_seq_length:
        tokenizer.model_max_length = args.max_seq_length
    with accelerator.main_process_first():
        tokenized = tokenize_corpus(
            corpus, tokenizer, args.max_seq_length, args.line_by_line, args.preprocessing_num_workers, args.packing
        )
    check_maskable(tokenized, {"validation": args.max_eval_samples})  # before training, not after it
    return tokenizer, tokenized["train"], tokenized["validation"]


def load_stream(args: PretrainingArguments, accelerator: Accelerator) -> tuple[PreTrainedTokenizerBase, Any, Any]:
    """``--streaming``: the tokenizer, the training stream (the held-out rows skipped when they are the validation
    set) and the validation set, tokenized in memory."""
    columns = [name.strip() for name in args.text_column.split(",")]
    tokenizer = build_tokenizer(args, None)
    if tokenizer.model_max_length < args.max_seq_length:
        tokenizer.model_max_length = args.max_seq_length
    where = args.dataset_name or str(args.train_file)
    source = streaming.open_source(args.train_file, args.dataset_name, args.dataset_config_name)
    texts, held_out = streaming.validation_texts(args.validation_file, args.dataset_name, args.dataset_config_name,
                                                 source.take(args.streaming_validation_lines), columns,
                                                 f"The validation rows of {where}")  # fmt: skip

    def rows():
        source = streaming.open_source(args.train_file, args.dataset_name, args.dataset_config_name)
        return source.skip(args.streaming_validation_lines) if held_out else source

    if not texts:
        raise ValueError("The validation corpus contains no text.")
    with accelerator.main_process_first():
        eval_set = streaming.tokenized_validation(texts, tokenizer, args.max_seq_length, args.packing)
    check_maskable(DatasetDict({"validation": eval_set}), {"validation": args.max_eval_samples})
    stream = streaming.BlockStream(rows, columns, tokenizer, args.max_seq_length, args.packing,
                                   args.shuffle_window_blocks, args.order_seed,
                                   f"The training stream ({where})")  # fmt: skip
    return tokenizer, stream, eval_set


def plan_steps(args: PretrainingArguments, accelerator: Accelerator, train_examples: int | None) -> StepPlan:
    """Steps per epoch (``None`` for a stream), the run's length and its warmup; an error when the data cannot
    fill one step."""
    world = accelerator.num_processes
    per_device, accumulation = args.per_device_train_batch_size, args.gradient_accumulation_steps
    steps_per_epoch = None if train_examples is None else train_examples // (per_device * world) // accumulation
    if steps_per_epoch == 0:
        raise ValueError(
            f"The training set has {train_examples} examples, fewer than one optimizer step needs "
            f"({per_device * world * accumulation}); lower the batch size or add data."
        )
    # a stream has no epoch length: its settings require --max_train_steps
    max_steps = args.max_train_steps or math.ceil(args.num_train_epochs * steps_per_epoch)
    warmup = int(args.num_warmup_steps * max_steps) if args.num_warmup_steps < 1 else int(args.num_warmup_steps)
    return StepPlan(per_device, accumulation, world, accelerator.process_index, steps_per_epoch, max_steps, warmup)


def check_run_folder(
    args: PretrainingArguments, accelerator: Accelerator, tokenizer: PreTrainedTokenizerBase, plan: StepPlan
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The run's fingerprint checked against the output folder (the one-run-per-folder rule), and the results of
    this run when the folder already holds it finished at this length (then nothing is trained)."""
    fingerprint = run_fingerprint(args, tokenizer, accelerator.mixed_precision)
    if schedule_depends_on_length(args):  # the steps already taken depend on the length: another length, another run
        fingerprint["schedule_steps"] = plan.max_steps
    this_run = run_folder.check_output_dir(args.output_dir, fingerprint, args.overwrite_output_dir,
                                            replace_unstarted=True)  # fmt: skip
    if args.overwrite_output_dir:
        run_folder.check_inputs_kept(args.output_dir, input_paths(args))
    finished = checkpoints.finished_run(args.output_dir) if this_run else None
    if finished is not None and finished.get("steps", 0) >= plan.max_steps:
        accelerator.print(
            f"{args.output_dir} holds this run, finished: nothing was trained or written (it finished at step "
            f"{finished['steps']}; a larger --max_train_steps continues it; --overwrite_output_dir runs it again; "
            "`hf-variants export` exports or pushes it)."
        )
        return fingerprint, finished
    if args.resume_from_checkpoint not in (None, "latest"):  # the clearest message for the commonest mistake
        check_checkpoint_tokenizer(Path(args.resume_from_checkpoint), tokenizer)
    return fingerprint, None


def prepare_optimization(run: PretrainingRun) -> None:
    """The model (compiled if asked), AdamW without decay on biases and norms (fused where the device has it) and
    the schedule, prepared by accelerate."""
    args, accelerator = run.args, run.accelerator
    model = build_model(args, run.tokenizer)
    if args.gradient_checkpointing:  # before anything is written: a model that refuses it says why
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        try:
            enable()  # transformers' current name where it has one (gradient_checkpointing_enable is deprecated)
        except ValueError as error:
            raise ValueError(f"--gradient_checkpointing: {error}") from None
    # fine-tuning scripts refuse a tokenizer with another vocabulary (same size, other tokens)
    model.config.tokenizer_vocabulary_sha256 = run_identity.vocabulary_sha256(run.tokenizer)
    no_decay = ("bias", "LayerNorm.weight", "layer_norm", "norm.weight")
    decay_groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]  # fmt: skip
    fused = args.torch_compile and accelerator.device.type == "cuda"  # the fused kernel, where the device has it
    optimizer = torch.optim.AdamW(decay_groups, lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
                                  fused=fused or None)  # fmt: skip
    if args.torch_compile:  # in place: the module, its parameters and its state_dict keys stay the same
        model.compile(backend=args.torch_compile_backend)
    run.scheduler = get_scheduler(args.lr_scheduler_type, optimizer, num_warmup_steps=run.plan.warmup,
                                  num_training_steps=run.plan.max_steps)  # fmt: skip
    # The scheduler stays unwrapped: accelerate's wrapper steps it once per process, which would make
    # the schedule depend on the number of processes. It is still saved in checkpoints.
    run.model, run.optimizer = accelerator.prepare(model, optimizer)
    accelerator.register_for_checkpointing(run.scheduler)


def start_run(run: PretrainingRun) -> dict[str, Any]:
    """The folder claimed, the state resumed from a checkpoint if there is one, the trackers started; returns the
    folder's files before this run (the manifest records what the run writes)."""
    args, accelerator = run.args, run.accelerator
    # the run starts: the folder becomes its own (a run refused above left nothing that refuses the next)
    with accelerator.main_process_first():
        if accelerator.is_main_process:
            run_folder.claim_output_dir(args.output_dir, run.fingerprint, args.overwrite_output_dir)
    files_before = run_folder.file_states(args.output_dir)
    resume_from = checkpoints.checkpoint_to_resume(args.resume_from_checkpoint, args.output_dir, run.fingerprint)
    run.state = {"global_step": 0, "train_seconds": 0.0, "train_tokens": 0, "skipped_steps": 0, "history": [],
                 "logged": []}  # fmt: skip
    if resume_from is not None:
        run.state = load_checkpoint(resume_from, accelerator, run.model, run.optimizer, run.scheduler)
        if args.streaming:  # the stream's position, schema-checked before a block is read
            streaming.StreamPosition.from_json(run.state.get("stream"), resume_from / STATE_FILE)
        accelerator.print(f"Resumed from {resume_from} at step {run.state['global_step']}.")
    for tracker in accelerator.log_with:
        if isinstance(tracker, tracking.CSVTracker):
            tracker.rows = list(run.state["logged"])  # the whole run's history, across resumes
    accelerator.init_trackers(args.output_dir.name, config=tracker_config(run.fingerprint))
    plan = run.plan
    train = "streamed" if args.streaming else f"{len(run.train_set):,}"
    accelerator.print(
        f"{type(accelerator.unwrap_model(run.model)).__name__}: {parameter_count(run):,} parameters; "
        f"{train} train / {len(run.eval_set):,} validation examples of ≤{args.max_seq_length} tokens; "
        f"{plan.max_steps} steps of {plan.global_micro * plan.accumulation} examples on {plan.world} process(es)."
    )
    return files_before


def parameter_count(run: PretrainingRun) -> int:
    return sum(p.numel() for p in run.accelerator.unwrap_model(run.model).parameters())


def optimizer_step(run: PretrainingRun, batch: StepBatch) -> dict[str, float] | None:
    """One optimizer step over its micro-batches: losses summed over the step's masked tokens, gradients checked
    for non-finite values before clipping, then the update. Returns the step's logged record, or None for a step
    whose batch masked no token (skipped and counted, never logged as a step at loss 0)."""
    args, accelerator, plan, state = run.args, run.accelerator, run.plan, run.state
    started = time.perf_counter()
    step = state["global_step"]
    full = [run.collator(examples, step * plan.accumulation + m) for m, examples in enumerate(batch.micro_batches)]
    masked_total = sum(int((b["labels"] != -100).sum()) for b in full)
    nothing_masked = masked_total == 0
    checkpoints.failpoint("train_step", step + 1)
    local_loss = accumulate_gradients(run, [] if nothing_masked else full, masked_total)
    # checked before clipping, which would spread an infinite norm as NaN (nonfinite.py); under a
    # grad scaler (fp16) overflow steps are the scaler's to skip
    nonfinite = [] if accelerator.scaler is not None else nonfinite_gradients(
        accelerator.unwrap_model(run.model).named_parameters())  # fmt: skip
    # the norm before clipping (0 = no clipping, as in transformers: the norm is still measured)
    grad_norm = accelerator.clip_grad_norm_(run.model.parameters(), args.max_grad_norm or math.inf)
    step_loss = float(accelerator.reduce(local_loss, reduction="sum")) / max(masked_total, 1)
    examples = batch.examples
    if nothing_masked:
        state["steps_without_masked_tokens"] = state.get("steps_without_masked_tokens", 0) + 1
        accelerator.print(f"Step {step + 1}: its batch (training examples {examples[:16]}) masked no token, so "
                          "it has no loss: skipped, no optimizer step.")  # fmt: skip
    elif math.isfinite(step_loss) and not nonfinite and math.isfinite(float(grad_norm)):
        run.optimizer.step()
    else:
        error = NonFiniteStepError(
            step + 1, nonfinite, None if math.isfinite(step_loss) else str(step_loss),
            hint="lower --learning_rate, check the data, or pass --skip_nonfinite_steps.",
            detail=f" (gradient norm {float(grad_norm)}) on the batch of training examples {examples[:16]}"
            f"{' ...' if len(examples) > 16 else ''}",
        )  # fmt: skip
        if not args.skip_nonfinite_steps:
            raise error
        state["skipped_steps"] += 1
        accelerator.print(f"{error.summary}: skipped.")
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    state["global_step"] += 1
    if batch.stream is not None:
        run.stream_position = batch.stream
    state["train_seconds"] += time.perf_counter() - started
    state["train_tokens"] += sum(
        int(b["attention_mask"].sum()) if "attention_mask" in b else b["input_ids"].numel() for b in full
    )
    if nothing_masked:
        return None
    record = {"loss": step_loss, "learning_rate": run.scheduler.get_last_lr()[0], "grad_norm": float(grad_norm),
              "tokens_per_second": state["train_tokens"] / max(state["train_seconds"], 1e-9)}  # fmt: skip
    state["history"].append({"step": state["global_step"], **record})  # continues across resumes
    return record


def accumulate_gradients(run: PretrainingRun, micro_batches: list[dict[str, torch.Tensor]], masked_total: int
                         ) -> torch.Tensor:  # fmt: skip
    """Forward and backward of each micro-batch (this process's rows), gradients synchronised on the last one;
    the summed masked-token loss of this process."""
    accelerator, plan, model = run.accelerator, run.plan, run.model
    sparse = getattr(accelerator.unwrap_model(model).config, "sparse_prediction", False)
    local_loss = torch.zeros((), dtype=torch.float64, device=accelerator.device)
    rows = slice(plan.rank * plan.per_device, (plan.rank + 1) * plan.per_device)
    with held_weights(model, accelerator, accumulate_gradients=len(micro_batches) > 1) as held:
        for m, batch in enumerate(micro_batches):
            local = {k: v[rows].to(accelerator.device) for k, v in batch.items()}
            sync = m == len(micro_batches) - 1
            with accelerator.no_sync(model) if not sync else contextlib.nullcontext():
                with accelerator.autocast():
                    loss_sum, auxiliary = masked_lm_loss_sum(model, local, sparse)
                loss = loss_sum * plan.world / max(masked_total, 1)
                if auxiliary is not None:
                    loss = loss + auxiliary / plan.accumulation
                accelerator.backward(loss)
            local_loss += loss_sum.detach().double()
    send_waiting_gradients(held)
    return local_loss


def send_waiting_gradients(held: Any) -> None:
    """The gradients a held block's micro-batches summed (``hold_parametrized_weights(accumulate_gradients=
    True)``), sent through the maps once, into the parameters; nothing for a block without any."""
    matrices, gradients = held.waiting_gradients() if held is not None else ([], [])
    if matrices:
        torch.autograd.backward(matrices, gradients)


def after_step(
    run: PretrainingRun, record: dict[str, float] | None, stop_on_signal: StopOnSignal, progress: tqdm
) -> bool:
    """Logging, evaluation and checkpoints after a step; whether the run stops here (its length, its time budget).
    A stop signal checkpoints the step and raises :class:`TrainingInterrupted`."""
    args, accelerator, state = run.args, run.accelerator, run.state
    step = state["global_step"]
    if step % args.logging_steps == 0 and record is not None:
        accelerator.log(record, step=step)
    if args.eval_steps and step % args.eval_steps == 0:
        accelerator.log(evaluate(run.model, run.eval_set, run.collator, args.per_device_eval_batch_size, accelerator,
                                 args.max_eval_samples), step=step)  # fmt: skip
    over_budget = args.time_budget_seconds is not None and state["train_seconds"] >= args.time_budget_seconds
    flags = torch.tensor([float(over_budget), float(stop_on_signal.received is not None)])
    over_budget, signalled = (bool(flag) for flag in accelerator.reduce(flags.to(accelerator.device), "max"))
    stop = step >= run.plan.max_steps or over_budget
    # a checkpoint at the last step too, so that a longer run of the same schedule continues from it, and
    # at a stop signal, so that no step is lost
    checkpoint = args.output_dir / f"checkpoint-{step}"
    every = args.checkpointing_steps
    if signalled or (every and (step % every == 0 or stop)):
        state["logged"] = tracking.csv_rows(accelerator)
        if run.stream_position is not None:  # as JSON only here: it holds the tokens read ahead
            state["stream"] = run.stream_position.to_json()
        save_checkpoint(accelerator, checkpoint, state, run.fingerprint, run.tokenizer, run.model, run.optimizer,
                        run.scheduler, within=args.output_dir)  # fmt: skip
    if signalled:
        progress.close()
        interrupted = TrainingInterrupted(stop_on_signal.received or signal.SIGTERM, step, str(checkpoint))
        accelerator.print(interrupted.message)
        raise interrupted
    return stop


def finish_run(run: PretrainingRun, command: str | None, files_before: dict[str, Any]) -> dict[str, Any]:
    """The final evaluation, then the model, tokenizer, results, history and manifest written into the folder."""
    args, accelerator, state, history = run.args, run.accelerator, run.state, run.state["history"]
    metrics = evaluate(run.model, run.eval_set, run.collator, args.per_device_eval_batch_size, accelerator,
                       args.max_eval_samples)  # fmt: skip
    if metrics["eval_tokens"] == 0:
        raise ValueError(
            f"No validation token was masked ({len(run.eval_set)} validation examples, --max_eval_samples "
            f"{args.max_eval_samples}, --max_seq_length {args.max_seq_length}, --mlm_probability "
            f"{args.mlm_probability}): there is no loss to report. Give more validation data or longer sequences."
        )
    accelerator.log(metrics, step=state["global_step"])
    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(run.model)
    results = {
        "command": command,
        "arguments": requested_arguments(args),
        "model_type": unwrapped.config.model_type,
        "parameters": parameter_count(run),
        "steps": state["global_step"],
        "train_seconds": state["train_seconds"],
        "train_tokens": state["train_tokens"],
        "tokens_per_second": state["train_tokens"] / max(state["train_seconds"], 1e-9),
        "final_train_loss": history[-1]["loss"] if history else None,
        "skipped_nonfinite_steps": state["skipped_steps"],
        "steps_without_masked_tokens": state.get("steps_without_masked_tokens", 0),
        "processes": run.plan.world,
        "mixed_precision": accelerator.mixed_precision,
        **metrics,
    }
    if accelerator.is_main_process:
        with staged_into(args.output_dir) as staging:  # never through a link in the folder
            unwrapped.save_pretrained(staging, safe_serialization=True)
            run.tokenizer.save_pretrained(staging)
        folder = args.output_dir
        write_text_atomic(folder / "results.json", json.dumps(results, indent=2) + "\n", within=folder)
        write_text_atomic(folder / "train_history.json", json.dumps(history) + "\n", within=folder)
        export_if_asked(args, unwrapped, run.tokenizer, results)
        run_folder.write_manifest(args.output_dir, files_before, "pretrain")
    accelerator.print(json.dumps({k: v for k, v in results.items() if k not in ("command", "arguments")}, indent=2))
    accelerator.wait_for_everyone()  # every process returns once the folder is complete, and all end together
    accelerator.end_training()
    return results


def run_fingerprint(
    args: PretrainingArguments, tokenizer: PreTrainedTokenizerBase, mixed_precision: str = "no"
) -> dict[str, Any]:
    """What makes two runs the same run: every argument that changes the result, the effective mixed
    precision (flag or launcher), the data files (size and SHA-256) and the tokenizer's vocabulary.

    The schedule's length (``--max_train_steps``, ``--num_train_epochs``, ``--time_budget_seconds``)
    is left out where it does not change the steps already taken — a constant schedule with warmup
    in steps — so a finished run continues to a larger ``--max_train_steps`` exactly as one longer
    run would; for a decaying schedule or a warmup given as a fraction, :func:`train` adds the
    resolved ``schedule_steps``, and a run of another length is another run."""
    model_files = run_identity.local_model_files(args.model_name_or_path)
    config_files = run_identity.local_model_files(args.config_name)
    by_content = {name for name, files in (("model_name_or_path", model_files), ("config_name", config_files)) if files}
    as_before = {name for name, value in LATER_SETTINGS.items() if getattr(args, name) == value}
    fingerprint = run_identity.arguments_with_effect(vars(args), NOT_FINGERPRINTED | by_content | as_before)
    fingerprint["mixed_precision"] = str(mixed_precision)
    fingerprint["data_files"], data_locations = run_identity.describe_files([args.train_file, args.validation_file])
    fingerprint["model_files"], model_locations = run_identity.describe_files([*(model_files or []),
                                                                                *(config_files or [])])  # fmt: skip
    fingerprint["tokenizer_sha256"] = run_identity.tokenizer_sha256(tokenizer)
    fingerprint["locations"] = data_locations + model_locations
    fingerprint["versions"] = run_identity.library_versions()
    return fingerprint


def schedule_depends_on_length(args: PretrainingArguments) -> bool:
    """Whether the learning rate of a step depends on how many steps the run has in all."""
    warmup_is_a_fraction = 0 < args.num_warmup_steps < 1
    return args.lr_scheduler_type not in ("constant", "constant_with_warmup") or warmup_is_a_fraction


def tracker_config(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The run's settings as the scalars every tracker accepts (tensorboard's hparams take no lists)."""
    return {key: value for key, value in fingerprint.items() if isinstance(value, (bool, int, float, str))}


def save_checkpoint(
    accelerator: Accelerator,
    directory: Path,
    state: dict,
    fingerprint: dict[str, Any],
    tokenizer: PreTrainedTokenizerBase,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    *,
    within: Path,
) -> None:
    """Model, optimizer, scheduler, random states of every process, training state, history and
    tokenizer as safetensors + JSON, written atomically by the main process into the run folder ``within``."""
    torch_states = accelerator.gather(torch.get_rng_state()[None].to(accelerator.device)).cpu()
    cuda_states = None
    if torch.cuda.is_available():
        cuda_states = list(accelerator.gather(torch.cuda.get_rng_state()[None].to(accelerator.device)).cpu())
    model_state = accelerator.get_state_dict(model)
    if accelerator.is_main_process:

        def write_files(folder: Path) -> None:
            checkpoints.save_tensors(folder / "model.safetensors", model_state)
            tensors, metadata = checkpoints.optimizer_state_to_files(optimizer.state_dict())
            checkpoints.save_tensors(folder / "optimizer.safetensors", tensors)
            checkpoints.write_json(folder / "optimizer.json", metadata, within=folder)
            checkpoints.write_json(folder / "scheduler.json", scheduler.state_dict(), within=folder)
            tensors, metadata = checkpoints.rng_state_to_files(list(torch_states), cuda_states)
            checkpoints.save_tensors(folder / "random_states.safetensors", tensors)
            checkpoints.write_json(folder / "random_states.json", metadata, within=folder)
            checkpoints.write_json(folder / STATE_FILE, state, within=folder)
            checkpoints.write_json(folder / run_folder.FINGERPRINT_FILE, fingerprint, within=folder)
            tokenizer.save_pretrained(folder / "tokenizer")

        checkpoints.write_checkpoint(directory, write_files, state["global_step"], within=within)
    accelerator.wait_for_everyone()


def load_checkpoint(
    folder: Path, accelerator: Accelerator, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
) -> dict[str, Any]:
    """Restore everything :func:`save_checkpoint` wrote, or raise naming the file that is missing,
    damaged or incompatible; returns the training state (step, history, logged metrics)."""
    checkpoints.verify_checkpoint(folder)
    try:
        return restore_checkpoint(folder, accelerator, model, optimizer, scheduler)
    except (KeyError, TypeError, IndexError, AttributeError) as error:  # a record altered together with its marker
        raise CheckpointError(f"{folder} holds a malformed record ({type(error).__name__}: {error}): it is not "
                              "resumed from.") from None  # fmt: skip


def restore_checkpoint(
    folder: Path, accelerator: Accelerator, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
) -> dict[str, Any]:
    """The restoring half of :func:`load_checkpoint`, on a checkpoint whose files are verified."""
    weights = checkpoints.load_tensors(folder / "model.safetensors")
    unwrapped = accelerator.unwrap_model(model)
    expected = set(unwrapped.state_dict())
    if set(weights) != expected:
        missing, unexpected = sorted(expected - set(weights)), sorted(set(weights) - expected)
        raise CheckpointError(
            f"{folder / 'model.safetensors'} does not fit this model: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}."
        )
    unwrapped.load_state_dict(weights)
    optimizer_state = checkpoints.optimizer_state_from_files(
        checkpoints.load_tensors(folder / "optimizer.safetensors"), load_json(folder / "optimizer.json")
    )
    try:
        optimizer.load_state_dict(optimizer_state)
    except (ValueError, KeyError) as error:
        raise CheckpointError(f"{folder / 'optimizer.safetensors'} does not fit this optimizer: {error}") from None
    scheduler.load_state_dict(load_json(folder / "scheduler.json"))
    checkpoints.restore_rng_state(
        checkpoints.load_tensors(folder / "random_states.safetensors"),
        load_json(folder / "random_states.json"),
        folder / "random_states.safetensors",
        accelerator.process_index,
        accelerator.num_processes,
    )
    state = load_json(folder / STATE_FILE)
    missing = {"global_step", "train_seconds", "train_tokens", "history", "logged"} - set(state)
    if missing:
        raise CheckpointError(f"{folder / STATE_FILE} lacks {sorted(missing)}.")
    state.setdefault("skipped_steps", 0)
    return state


def check_checkpoint_tokenizer(checkpoint: Path, tokenizer: PreTrainedTokenizerBase) -> None:
    """A checkpoint resumes only with the vocabulary it was trained with (ids are rows of its embeddings)."""
    saved = checkpoint / "tokenizer"
    if saved.is_dir() and AutoTokenizer.from_pretrained(saved).get_vocab() != tokenizer.get_vocab():
        raise ValueError(
            f"{checkpoint} was trained with another vocabulary than this run's tokenizer; resume with "
            f"--tokenizer_name {saved} (and without --train_tokenizer_vocab_size)."
        )


def export_if_asked(args: PretrainingArguments, model, tokenizer, results: dict) -> None:
    if args.export_dir is None and not args.push_to_hub:
        return
    if model.config.model_type not in VARIANTS:
        raise ValueError("--export_dir/--push_to_hub write hf-variants model cards; the bert baseline has none.")
    from ..hub import export_for_hub, push_folder_to_hub

    # the default export folder is the run's own: a link there that leads out is refused
    folder = args.export_dir or inside(args.output_dir, "hub_export", "the run's export folder")
    summary = (
        f"Pretrained with masked-language modelling for {results['steps']} steps "
        f"({results['train_tokens']:,} tokens); validation perplexity {results['perplexity']:.2f}."
    )
    # the run's own export: its previous one (of a run replaced or resumed) is replaced
    export_for_hub(model, folder, tokenizer, repo_id=args.hub_model_id, training_summary=summary, overwrite=True,
                   max_seq_length=args.max_seq_length)  # fmt: skip
    if args.push_to_hub:
        push_folder_to_hub(folder, args.hub_model_id)


if __name__ == "__main__":
    main()
