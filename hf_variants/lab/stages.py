"""The main job's stages, each an engine called as a function with typed settings: the tokenizer
(``train_tokenizer``), a pretraining (``run_mlm.run``) and a fine-tuning run (``run_glue.run``), and the record a
stage leaves when it finished (:func:`finished_stage`), from which a re-run after a kill takes its result when its
settings, the content of its inputs and its folder are unchanged."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..core.failures import ModelFailure
from ..core.ideas import MatchedSize
from ..core.overrides import format_overrides
from ..settings.compare import CompareArguments
from ..storage import run_folder, run_identity
from ..training import checkpoints
from . import records
from .data_sources import DataSource
from .execution import console_to_file
from .protocol import Run
from .spec import ModelSpec

#: Solver steps per N-ODE block and forward in the comparison (healthy runs take a handful at rtol 1e-3).
NODE_MAX_STEPS = 50


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------
def matched_size(args: CompareArguments) -> MatchedSize:
    """The size every model of this comparison shares (``--hidden_size``, ``--num_layers``,
    ``--head_size``, ``--node_tolerance``; at most :data:`NODE_MAX_STEPS` solver steps)."""
    return MatchedSize(args.hidden_size, args.num_layers, args.head_size, args.node_tolerance, NODE_MAX_STEPS)


def matched_fields(spec: ModelSpec, size: MatchedSize) -> dict[str, Any]:
    """The spec's config fields at the matched ``size``: what each idea of the variant's pair derives
    from the size (:func:`~hf_variants.core.composition.matched_size_fields`), then the spec's own
    overrides, which win; a matched control takes its variant's fields and then the changes that turn
    the variant's idea off."""
    from ..core.composition import matched_size_fields

    variant = spec.control_of or spec
    return spec.fields(matched_size_fields(*variant.pair(), size))


def train_or_take_tokenizer(args: CompareArguments, source: DataSource) -> str:
    from ..settings.tokenizer import TokenizerArguments
    from ..training import train_tokenizer

    if args.tokenizer:
        return args.tokenizer
    vocab_size = args.vocab_size or source.vocab_size or 8000
    corpus = {name: value for name, value in source.corpus.items() if name != "validation_file"}  # training text
    settings = TokenizerArguments(**corpus, vocab_size=vocab_size, output_dir=args.output_dir / "tokenizer")
    return str(train_tokenizer.train_tokenizer(settings))


def pretrain(
    args: CompareArguments, source: DataSource, tokenizer: str, spec: ModelSpec, seed: int
) -> dict[str, Any]:
    """The model's MLM pretraining at ``seed`` into ``models/<spec>/mlm-seed<seed>`` on the pretraining engine
    (its data order and masks from :meth:`~.spec.ModelSpec.data_seed`)."""
    from ..settings.pretraining import PretrainingArguments
    from ..training import run_mlm

    settings = PretrainingArguments(
        model_type=spec.model_type, config_overrides=format_overrides(matched_fields(spec, matched_size(args))),
        **source.corpus, tokenizer_name=tokenizer, max_seq_length=args.max_seq_length,
        per_device_train_batch_size=args.pretrain_batch_size, learning_rate=args.pretrain_learning_rate,
        num_warmup_steps=0.1, max_train_steps=args.pretrain_steps, max_eval_samples=args.max_pretrain_eval_samples,
        logging_steps=5, seed=seed, data_seed=spec.data_seed(seed),
        output_dir=args.output_dir / "models" / spec.folder / f"mlm-seed{seed}",
        time_budget_seconds=args.pretrain_seconds, overwrite_output_dir=args.overwrite_output_dir,
        disable_tqdm=not stage_bars(args),
    )  # fmt: skip
    inputs = [*source.input_files(), *sorted(Path(tokenizer).glob("*"))]
    return finished_stage(settings.output_dir, run_mlm.requested_arguments(settings), inputs,
                          lambda: run_mlm.run(settings), within=args.output_dir)  # fmt: skip


def stage_bars(args: CompareArguments) -> bool:
    """Whether each stage shows its own progress bar: only when runs go one after another on a console
    (side by side, their bars would overwrite each other; the run's own bar remains)."""
    return not args.disable_tqdm and args.workers == 1


def fine_tune(
    args: CompareArguments, source: DataSource, spec: ModelSpec, task: str, learning_rate: float,
    output_name: str, seed: int, heldout: bool = False,
) -> dict[str, Any]:
    """One fine-tuning run on the fine-tuning engine into ``models/<spec>/<output_name>``, from the model's
    pretraining at the same ``seed``; with ``heldout`` it trains on the training split without a held-out
    slice and is scored on that slice, never on dev. Its data order and that slice are drawn with
    :meth:`~.spec.ModelSpec.data_seed`."""
    from transformers import TrainingArguments

    from ..settings.finetuning import DataTrainingArguments, ModelArguments, RunArguments
    from ..training import run_glue

    pretrained = args.output_dir / "models" / spec.folder / f"mlm-seed{seed}"
    held_out = {"heldout_fraction": args.heldout_fraction, "heldout_seed": spec.data_seed(seed)} if heldout else {}
    settings = (
        ModelArguments(model_name_or_path=str(pretrained)),
        DataTrainingArguments(
            **source.tasks[task], max_train_samples=args.finetune_steps * args.finetune_batch_size,
            max_seq_length=args.max_seq_length, pad_to_max_length=False, **held_out,
        ),
        TrainingArguments(
            output_dir=str(args.output_dir / "models" / spec.folder / output_name), do_train=True, do_eval=True,
            max_steps=args.finetune_steps, per_device_train_batch_size=args.finetune_batch_size,
            per_device_eval_batch_size=64, learning_rate=learning_rate, warmup_steps=0.1, seed=seed,
            data_seed=spec.data_seed(seed), logging_steps=5,
            save_strategy="no", report_to="none", log_level="error", dataloader_pin_memory=False,
            disable_tqdm=not stage_bars(args),
        ),
        RunArguments(print_logs=False, overwrite_output_dir=args.overwrite_output_dir),
    )  # fmt: skip
    inputs = [*source.input_files(task), pretrained / run_folder.MANIFEST_FILE]
    return finished_stage(Path(settings[2].output_dir), run_glue.requested_arguments(*settings), inputs,
                          lambda: run_glue.run(*settings), within=args.output_dir)  # fmt: skip


STAGE_RECORD_SUFFIX = ".finished.json"


def finished_stage(folder: Path, arguments: dict[str, Any], inputs: Sequence[Path],
                   run_stage: Callable[[], dict[str, Any]], *, within: Path) -> dict[str, Any]:  # fmt: skip
    """``run_stage()`` (a pretraining or fine-tuning run writing ``folder``, whose settings are the engine's
    ``requested_arguments``), recorded next to the folder when it finishes. A re-run after a kill takes the
    recorded result instead when the settings and the content of ``inputs`` are the same and the folder is
    what the stage wrote (its manifest verifies: an altered file is an error naming it)."""
    record = folder.with_name(folder.name + STAGE_RECORD_SUFFIX)
    identity = {"arguments": arguments, "inputs": run_identity.describe_files(inputs)[0]}
    with contextlib.suppress(records.OtherSettings):  # other settings or inputs: the stage runs again
        saved = records.record_for(record, identity, lambda saved: {key: saved.get(key) for key in identity})
        if saved is not None and run_folder.verify_manifest(folder) is not None:
            return saved["result"]
    result = run_stage()
    records.write_record(record, {**identity, "result": result}, within=within)
    checkpoints.failpoint(f"compare:{folder.parent.name}/{folder.name}", 0)  # tests kill here
    return result


def folder_name(run: Run) -> str:
    """A run's folder (and ``.log`` file) under ``models/<spec>/``: its name, after its task's."""
    return run.name if run.task is None else f"{run.task}-{run.name}"


def train(args: CompareArguments, source: DataSource, tokenizer: str, run: Run) -> dict[str, Any]:
    """The run's stage (in a worker or in this process; ``run.model`` is its :class:`~.spec.ModelSpec`), what it
    prints going to its log file. A
    fine-tuning run that the N-ODE solver or the non-finite check stops is an outcome, recorded as
    ``{"failed": "<error>"}``; a pretraining that stops ends the comparison."""
    quiet = not args.disable_tqdm or args.workers > 1  # beside bars, or side by side: to the log file only
    log = args.output_dir / "models" / run.model.folder / f"{folder_name(run)}.log"
    with console_to_file(log, quiet, within=args.output_dir):
        if run.task is None:
            return pretrain(args, source, tokenizer, run.model, run.seed)
        try:
            return fine_tune(args, source, run.model, run.task, run.learning_rate, folder_name(run), run.seed,
                             heldout=run.heldout)  # fmt: skip
        except (ModelFailure, FloatingPointError) as error:
            return {"failed": f"{type(error).__name__}: {error}"}
