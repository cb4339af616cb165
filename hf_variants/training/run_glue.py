"""GLUE fine-tuning on ``transformers.Trainer`` (run_glue-style), for any model that
``AutoModelForSequenceClassification`` loads: the hf-variants models, BERT, or anything on the Hub.

    hf-variants finetune --model_name_or_path runs/pretrain-wikitext2/macaron_bert \\
        --task_name sst2 --glue_dir $DATA/glue --do_train --do_eval --do_predict \\
        --max_seq_length 128 --per_device_train_batch_size 32 --learning_rate 5e-4 \\
        --num_train_epochs 3 --output_dir runs/glue/macaron_bert/sst2

Data, in this order: ``--glue_dir`` (a folder in the original GLUE TSV layout, read by
:mod:`hf_variants.glue`), ``--train_file``/``--validation_file``/``--test_file`` (CSV or JSON; with
``--task_name`` they must have the task's columns and labels, without it the label set is read from
the training file), else the Hub's ``nyu-mll/glue``. Metrics are GLUE's (offline ``evaluate``
module :data:`hf_variants.glue.EVALUATE_MODULE`), with run_glue's ``combined_score``.

The arguments are defined in :mod:`hf_variants.settings.finetuning`. Everything else is run_glue's surface: the
model/config/tokenizer names, ``--max_seq_length``, ``--pad_to_max_length``,
``--max_{train,eval,predict}_samples`` and all ``TrainingArguments`` (eval/save strategies, seeds,
``--resume_from_checkpoint``, ``--report_to``, ``--push_to_hub``).
Additions: ``--dtype`` (weights' dtype, default float32), ``--random_init`` (the checkpoint's
architecture with fresh weights — the control for "did pretraining help?"), ``--export_dir``
(a Hub folder through :mod:`hf_variants.hub`, whose card carries a ``model-index`` with the measured
dev results; ``--push_to_hub`` uploads that folder for hf-variants models). ``--do_predict`` writes
run_glue's ``predict_results_<task>.txt`` and the file GLUE's submission server expects
(``SST-2.tsv``, ``MNLI-m.tsv``, ...; MNLI also predicts ``AX.tsv`` when the diagnostic set is found).
Results: ``all_results.json`` (Trainer) and ``results.json`` (task, seed, parameters, metrics, the command
line and the typed settings with an effect). Studies call the engine as a function, :func:`run`, with
typed settings; only :func:`main` parses a command line.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import logging
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import evaluate
import numpy as np
import torch
import transformers
from datasets import ClassLabel, DatasetDict, Features, List, Value, load_dataset
from packaging import version
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    EvalPrediction,
    TrainerCallback,
    TrainerState,
    TrainingArguments,
    default_data_collator,
    set_seed,
)
from transformers.trainer import TRAINER_STATE_NAME, TRAINING_ARGS_NAME
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from ..core.failures import ModelFailure
from ..core.overrides import check_override_fields, parse_overrides
from ..core.registration import VARIANTS
from ..glue import EVALUATE_MODULE, GlueTask, get_glue_task, load_glue
from ..glue.user_files import choose_text_columns, load_task_files
from ..settings import finetuning
from ..settings.checks import above, at_least, half_open_interval, seed_range
from ..settings.finetuning import DataTrainingArguments, ModelArguments, RunArguments
from ..storage import run_folder, run_identity
from ..storage.files import (
    inside,
    is_link,
    make_folder,
    remove_path,
    require_regular_file,
    staged_into,
    write_text_atomic,
)
from ..storage.record_schema import load_json
from . import checkpoints, trainer_internals
from .interrupts import StopOnSignal, TrainingInterrupted
from .nonfinite import StopOnNonFiniteGradients
from .processes import end_process_group

logger = logging.getLogger(__name__)

#: File names of GLUE's submission server, per predicted split.
SUBMISSION_FILES = {
    ("cola", "test"): "CoLA.tsv",
    ("sst2", "test"): "SST-2.tsv",
    ("mrpc", "test"): "MRPC.tsv",
    ("qqp", "test"): "QQP.tsv",
    ("stsb", "test"): "STS-B.tsv",
    ("mnli", "test_matched"): "MNLI-m.tsv",
    ("mnli", "test_mismatched"): "MNLI-mm.tsv",
    ("qnli", "test"): "QNLI.tsv",
    ("rte", "test"): "RTE.tsv",
    ("wnli", "test"): "WNLI.tsv",
    ("ax", "test"): "AX.tsv",
}
#: Tasks whose submission files hold label names rather than class indices.
SUBMIT_LABEL_NAMES = ("mnli", "qnli", "rte", "ax")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


#: Arguments that change neither the fine-tuned model nor its metrics: logging, saving, paths, workers,
#: the Hub. Every other argument — including a field a later transformers adds — is part of the run's
#: identity (run_identity.arguments_with_effect). Local inputs enter by content instead of by path.
TRAINING_ARGUMENTS_WITHOUT_EFFECT = frozenset({
    "output_dir", "overwrite_output_dir", "resume_from_checkpoint", "run_name", "project", "report_to", "disable_tqdm",
    "log_level", "log_level_replica", "log_on_each_node", "logging_*", "skip_memory_metrics",
    "include_num_input_tokens_seen", "save_*", "push_to_hub", "hub_*", "trackio_*", "dataloader_num_workers",
    "dataloader_pin_memory", "dataloader_persistent_workers", "dataloader_prefetch_factor",
    "dataloader_multiprocessing_context", "ddp_timeout", "local_rank", "torch_empty_cache_steps",
    "eval_accumulation_steps", "print_logs",
})  # fmt: skip
MODEL_ARGUMENTS_WITHOUT_EFFECT = frozenset({
    "cache_dir", "token", "trust_remote_code", "tokenizer_name", "allow_function_changes",
})  # fmt: skip
DATA_ARGUMENTS_WITHOUT_EFFECT = frozenset({"export_dir", "preprocessing_num_workers", "overwrite_cache"})
LOSS_FILE = "train_loss_sum.json"


class GlueTrainer(trainer_internals.CheckpointHooks):
    """The Trainer with three guarantees:

    * a non-finite training loss or gradient stops the run before the optimizer step
      (:class:`~hf_variants.training.nonfinite.StopOnNonFiniteGradients`; the Trainer would log a substitute
      loss and train on NaN weights) — or, with ``skip_nonfinite_steps``, skips that optimizer step and
      counts it;
    * each checkpoint is marked complete (``checkpoint_complete.json``: every file's size and SHA-256, and
      the run's ``fingerprint`` beside them) before ``save_total_limit`` removes an older one, so that a kill
      at any instant leaves a complete checkpoint (the Trainer removes the old one first); the checkpoint
      being written is named in a pending note, so that the package knows it as its own;
    * each checkpoint stores the training loss summed over *every* step before it — across any number of
      resumes — so that a resumed run reports the uninterrupted run's ``train_loss``
      (:attr:`train_loss_sum`).
    """

    def __init__(self, *args: Any, skip_nonfinite_steps: bool = False, fingerprint: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        self.nonfinite_guard = StopOnNonFiniteGradients(
            skip=skip_nonfinite_steps,
            hint="lower --learning_rate, check the data, or pass --skip_nonfinite_steps true.",
        )
        kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), self.nonfinite_guard, StepFailpoint()]
        super().__init__(*args, **kwargs)
        self.fingerprint = fingerprint
        self.loss_sum_before_resume = 0.0

    @property
    def skipped_steps(self) -> int:
        return self.nonfinite_guard.skipped_steps

    @property
    def train_loss_sum(self) -> float:
        """The training loss summed over every step of the run, those before a resume included."""
        return self.loss_sum_before_resume + trainer_internals.logged_loss_sum(self)

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any):
        if isinstance(resume_from_checkpoint, str) and (Path(resume_from_checkpoint) / LOSS_FILE).is_file():
            self.loss_sum_before_resume = load_json(Path(resume_from_checkpoint) / LOSS_FILE)["loss_sum"]
        try:
            return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        except ModelFailure as error:  # the model knows what failed, not the step: name it, as a stop does
            if not self.model.training:  # an evaluation between steps
                raise
            raise type(error)(f"Step {self.state.global_step + 1}: {error}") from error

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The Trainer's loss; a training micro-batch's goes to the non-finite check too."""
        computed = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)  # fmt: skip
        if model.training:
            loss = computed[0] if return_outputs else computed
            self.nonfinite_guard.record_loss(loss, len(inputs["input_ids"]))
        return computed

    def evaluation_loop(self, *args: Any, **kwargs: Any):
        """Trainer's evaluation loop, with the model's parametrised weights (TransJect's orthogonal matrices)
        computed once for every batch of it rather than once per batch."""
        hold = getattr(self.model, "hold_parametrized_weights", None)
        with torch.no_grad(), hold() if hold is not None else contextlib.nullcontext():
            return super().evaluation_loop(*args, **kwargs)

    def before_checkpoint(self, run_dir: Path, folder: Path) -> None:
        """A link in the checkpoint's place is removed (the Trainer would write into what it points to), and the
        checkpoint being written is named in a pending note."""
        if not self.args.should_save:
            return
        make_folder(run_dir, within=run_dir)
        if is_link(folder):
            logger.warning("%s is a symbolic link: it is removed (never what it points to) before the "
                           "checkpoint of step %d is written there.", folder, self.state.global_step)  # fmt: skip
            remove_path(folder, within=run_dir)
        checkpoints.write_json(run_dir / run_folder.PENDING_FILE, {"checkpoint": folder.name}, within=run_dir)

    def after_checkpoint(self, run_dir: Path, folder: Path, save_total_limit: int | None) -> None:
        """The checkpoint's loss sum and fingerprint written, the checkpoint marked complete, then older ones
        rotated."""
        if not (self.args.should_save and folder.is_dir()):
            return
        step = self.state.global_step
        loss_sum = self.train_loss_sum + trainer_internals.loss_since_last_log(self)
        checkpoints.write_json(folder / LOSS_FILE, {"loss_sum": loss_sum, "global_step": step}, within=run_dir)
        if self.fingerprint is not None:
            checkpoints.write_json(folder / run_folder.FINGERPRINT_FILE, self.fingerprint, within=run_dir)
        checkpoints.failpoint("checkpoint_files_written", step)
        checkpoints.mark_complete(folder)
        remove_path(run_dir / run_folder.PENDING_FILE, within=run_dir)
        checkpoints.failpoint("checkpoint_marked", step)
        checkpoints.rotate_checkpoints(run_dir, save_total_limit, keep=self.state.best_model_checkpoint)

    def save_metrics(self, split: str, metrics: dict[str, float], combined: bool = True) -> None:
        """``Trainer.save_metrics`` through the package's checked writer (never through a link)."""
        if not self.is_world_process_zero():
            return
        folder = Path(self.args.output_dir)
        write_text_atomic(folder / f"{split}_results.json", json.dumps(metrics, indent=4, sort_keys=True),
                          within=folder)
        if combined:
            combined_file = folder / "all_results.json"
            every = load_json(combined_file) if combined_file.is_file() else {}
            write_text_atomic(combined_file, json.dumps({**every, **metrics}, indent=4, sort_keys=True), within=folder)

    def save_state(self) -> None:
        """``Trainer.save_state`` through the package's checked writer (never through a link)."""
        if self.is_world_process_zero():
            state = json.dumps(dataclasses.asdict(self.state), indent=2, sort_keys=True) + "\n"
            folder = Path(self.args.output_dir)
            write_text_atomic(folder / TRAINER_STATE_NAME, state, within=folder)


class SilentLogProgressCallback(ProgressCallback):
    """The Trainer's progress bar without its printed log dicts (they stay in ``log_history``)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return control


class StepFailpoint(TrainerCallback):
    """``HF_VARIANTS_FAILPOINT=train_step@N`` (tests): the process stops itself after optimizer step N."""

    def on_step_end(self, args, state, control, **kwargs):
        checkpoints.failpoint("train_step", state.global_step)
        return control


@dataclass
class LabelSpace:
    """The task's labels: ``names`` for classification, ``None`` for regression; ``multi_label``: each example
    has a set of them (a multi-hot row, scored label by label)."""

    names: list[str] | None
    multi_label: bool = False

    @property
    def is_regression(self) -> bool:
        return self.names is None

    @property
    def num_labels(self) -> int:
        return 1 if self.names is None else len(self.names)

    @property
    def problem_type(self) -> str:
        """transformers' ``config.problem_type``, which picks the loss (MSE, cross-entropy, per-label BCE)."""
        if self.is_regression:
            return "regression"
        return "multi_label_classification" if self.multi_label else "single_label_classification"

    def predictions(self, logits: np.ndarray) -> np.ndarray:
        """The predicted scores, class ids, or multi-hot rows (each label whose logit is above 0, i.e. whose
        probability is above one half)."""
        if self.is_regression:
            return np.squeeze(logits, -1)
        return (logits > 0).astype(int) if self.multi_label else np.argmax(logits, axis=-1)


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
def load_raw_datasets(data_args: DataTrainingArguments, model_args: ModelArguments | None = None) -> DatasetDict:
    """The splits, with the task's text columns and a ``label`` column (class index or float score); ``model_args``
    gives the Hub cache and token for a Hub dataset."""
    if data_args.train_file is not None or data_args.validation_file is not None:
        return load_files(data_args)
    if data_args.task_name is not None and data_args.dataset_name is None:
        raw = load_glue(data_args.task_name, data_args.glue_dir)
        if data_args.task_name == "mnli":
            ax = try_load_ax(data_args.glue_dir)
            if ax is not None:
                raw["test_ax"] = ax
        return raw
    return load_dataset(
        data_args.dataset_name, data_args.dataset_config_name or data_args.task_name,
        cache_dir=model_args and model_args.cache_dir, token=model_args and model_args.token,
    )  # fmt: skip


def try_load_ax(glue_dir: str | None):
    """GLUE's diagnostic set (predicted with an MNLI model), or None when it is not available."""
    try:
        return load_glue("ax", glue_dir)["test"]
    except (OSError, ValueError) as error:  # missing files (OSError covers network errors too) or bad rows
        logger.info("No AX diagnostic set (%s); skipping AX.tsv.", error)
        return None


def load_files(data_args: DataTrainingArguments) -> DatasetDict:
    """Users' CSV/JSON files, read cell by cell (:mod:`hf_variants.glue.user_files`): with
    ``--task_name`` the labels are checked against (and encoded as) the task's; without, the label set
    is read from the training file. Every bad cell is named with its file and line."""
    files = {
        split: Path(path)
        for split, path in (("train", data_args.train_file), ("validation", data_args.validation_file),
                            ("test", data_args.test_file))
        if path is not None
    }  # fmt: skip
    for split, path in files.items():
        require_regular_file(path, f"The {split} file")
    task = get_glue_task(data_args.task_name) if data_args.task_name is not None else None
    return load_task_files(files, task, task.keys if task is not None else None, data_args.label_type)


def text_keys(raw: DatasetDict, task: GlueTask | None) -> tuple[str, str | None]:
    """run_glue's choice of input columns: the task's keys, else sentence1/sentence2, else the first
    one or two non-label columns. Raises when a split lacks one of them."""
    reference = raw["train"] if "train" in raw else next(iter(raw.values()))
    keys = task.keys if task is not None else choose_text_columns(reference.column_names)
    for split, dataset in raw.items():
        missing = [key for key in keys if key not in dataset.column_names]
        if missing:
            raise ValueError(f"The {split} split has no column(s) {missing} (columns: {dataset.column_names}).")
    return keys[0], keys[1] if len(keys) > 1 else None


def label_space(raw: DatasetDict, task: GlueTask | None) -> LabelSpace:
    """The task's label set; for custom files, read from the training labels (floats → regression).
    Raises when an evaluation split has labels outside the training set."""
    if task is not None:
        return LabelSpace(None if task.is_regression else list(task.labels))
    if "train" not in raw or "label" not in raw["train"].column_names:
        raise ValueError("Custom data needs a training file with a 'label' column.")
    feature = raw["train"].features["label"]
    if isinstance(feature, ClassLabel):
        return LabelSpace(list(feature.names))
    if isinstance(feature, List) and isinstance(feature.feature, ClassLabel):
        return LabelSpace(list(feature.feature.names), multi_label=True)
    if isinstance(feature, Value) and feature.dtype.startswith("float"):
        return LabelSpace(None)
    names = sorted({str(v) for v in raw["train"]["label"]})
    for split, dataset in raw.items():
        if split != "train" and "label" in dataset.column_names:
            unknown = sorted({str(v) for v in dataset["label"]} - set(names))
            if unknown:
                raise ValueError(f"The {split} split has labels {unknown} that the training set does not: {names}.")
    return LabelSpace(names)


def encode_labels(raw: DatasetDict, labels: LabelSpace) -> DatasetDict:
    """Custom files' class labels (strings or numbers) as indices into ``labels.names``; a multi-label row's
    class ids as its multi-hot row of floats (what the per-label BCE loss takes)."""
    if labels.is_regression:
        return raw
    if labels.multi_label:
        def multi_hot(batch: dict[str, list]) -> dict[str, list]:
            return {"label": [[float(index in ids) for index in range(labels.num_labels)] for ids in batch["label"]]}

        return DatasetDict({split: dataset.map(multi_hot, batched=True, features=Features(
            {**dataset.features, "label": List(Value("float32"), length=labels.num_labels)}))
            if "label" in dataset.column_names else dataset for split, dataset in raw.items()})  # fmt: skip
    for split, dataset in raw.items():
        if "label" in dataset.column_names and not isinstance(dataset.features["label"], ClassLabel):
            if split.startswith("test") and set(dataset["label"]) <= {-1, None}:
                continue  # unlabeled test rows
            as_text = dataset.cast_column("label", Value("string"))
            raw[split] = as_text.cast_column("label", ClassLabel(names=labels.names))
    return raw


def check_task_matches_model(config: transformers.PretrainedConfig, labels: LabelSpace, task: str | None,
                             ignore_mismatched_sizes: bool) -> None:  # fmt: skip
    """A checkpoint that already has a classification head must have the task's number of labels."""
    architectures = getattr(config, "architectures", None) or []
    has_head = any(name.endswith("ForSequenceClassification") for name in architectures)
    if has_head and config.num_labels != labels.num_labels and not ignore_mismatched_sizes:
        raise ValueError(
            f"The checkpoint has a classification head with num_labels={config.num_labels}, but task "
            f"{task or 'of the given files'} has {labels.num_labels} label(s)"
            f"{' (regression)' if labels.is_regression else ''}. Use a checkpoint without a task head, "
            "or pass --ignore_mismatched_sizes to replace the head."
        )


def hold_out(raw: DatasetDict, fraction: float, seed: int) -> DatasetDict:
    """The training split without a seeded random ``fraction`` of it, and that fraction as the only
    evaluation split (``validation``); dev splits are dropped so they cannot be evaluated by mistake,
    test splits kept."""
    if "train" not in raw:
        raise ValueError("--heldout_fraction needs a training split.")
    split = raw["train"].train_test_split(test_size=fraction, seed=seed, shuffle=True)
    kept = {name: data for name, data in raw.items() if name.startswith("test")}
    return DatasetDict({"train": split["train"], "validation": split["test"], **kept})


def input_paths(model_args, data_args, training_args) -> dict[str, str | None]:
    """Every input of a run by its flag (paths or Hub names): what ``--overwrite_output_dir`` must not remove."""
    return {
        "--model_name_or_path": model_args.model_name_or_path, "--config_name": model_args.config_name,
        "--tokenizer_name": model_args.tokenizer_name, "--glue_dir": data_args.glue_dir,
        "--train_file": data_args.train_file, "--validation_file": data_args.validation_file,
        "--test_file": data_args.test_file, "--resume_from_checkpoint": training_args.resume_from_checkpoint,
    }  # fmt: skip


def run_fingerprint(model_args, data_args, training_args, run_args, tokenizer) -> dict[str, Any]:
    """What makes two fine-tuning runs the same run (:mod:`.run_identity`): every argument except those
    without effect; the model, config and data by content where they are local files (their paths only
    recorded), the tokenizer's whole definition; the library versions recorded."""
    model_files = run_identity.local_model_files(model_args.model_name_or_path)
    config_files = run_identity.local_model_files(model_args.config_name) if model_args.config_name else None
    data_files = [data_args.train_file, data_args.validation_file, data_args.test_file]
    if data_args.glue_dir is not None and data_args.task_name is not None:
        data_files += sorted((Path(data_args.glue_dir) / get_glue_task(data_args.task_name).folder).glob("*.tsv"))
    by_content = {"glue_dir", "train_file", "validation_file", "test_file"}
    by_content |= {"model_name_or_path"} if model_files else set()
    by_content |= {"config_name"} if config_files else set()
    files, locations = run_identity.describe_files([*(model_files or []), *(config_files or []), *data_files])
    return {
        **requested_arguments(model_args, data_args, training_args, run_args, frozenset(by_content)),
        "tokenizer_sha256": run_identity.tokenizer_sha256(tokenizer),
        # the launcher's --mixed_precision reaches the Trainer through the environment, not a field
        "mixed_precision": "bf16" if training_args.bf16 else "fp16" if training_args.fp16 else getattr(
            training_args, "mixed_precision", "no"),
        "files": files,
        "locations": locations,
        "versions": run_identity.library_versions(),
    }


def check_tokenizer_matches(config: transformers.PretrainedConfig, tokenizer: Any, source: str) -> None:
    """A checkpoint pretrained by run_mlm records its vocabulary's SHA-256: another vocabulary (even of
    the same size) would feed other tokens to the same embedding rows."""
    expected = getattr(config, "tokenizer_vocabulary_sha256", None)
    if expected is not None and run_identity.vocabulary_sha256(tokenizer) != expected:
        raise ValueError(
            f"The tokenizer {source} has another vocabulary than the one the model was pretrained with "
            f"(config.tokenizer_vocabulary_sha256={expected[:12]}…); use the checkpoint's own tokenizer."
        )


# --------------------------------------------------------------------------------------------
# Metrics and predictions
# --------------------------------------------------------------------------------------------
def metric_function(task: str | None, labels: LabelSpace):
    """``compute_metrics`` for the Trainer: GLUE's metrics, or accuracy / mse for custom files."""
    metric = evaluate.load(EVALUATE_MODULE, task) if task is not None else None

    def compute(prediction: EvalPrediction) -> dict[str, float]:
        logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        predicted = labels.predictions(logits)
        if metric is not None:
            scores = metric.compute(predictions=predicted, references=prediction.label_ids)
        elif labels.multi_label:
            scores = multi_label_scores(predicted, prediction.label_ids.astype(int))
        elif labels.is_regression:
            scores = {"mse": float(((predicted - prediction.label_ids) ** 2).mean())}
        else:
            scores = {"accuracy": float((predicted == prediction.label_ids).mean())}
        return {**scores, **collapse_measure(predicted, labels.is_regression)}

    return compute


def multi_label_scores(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """A multi-label task's scores: ``f1``, micro-averaged over every (example, label) decision — 2·TP / (predicted
    + gold labels), 1.0 when neither holds any — and ``exact_match``, the share of examples whose predicted label
    set is exactly theirs."""
    positives = int(predicted.sum() + gold.sum())
    f1 = 2 * int((predicted * gold).sum()) / positives if positives else 1.0
    return {"f1": float(f1), "exact_match": float((predicted == gold).all(axis=-1).mean())}


def collapse_measure(predicted: np.ndarray, is_regression: bool) -> dict[str, float]:
    """How far the predictions are from one constant answer (a model that "did not learn"):
    ``largest_class_share`` (share of the most predicted class, or label set) for classification,
    ``prediction_std`` for regression."""
    if is_regression:
        return {"prediction_std": float(np.std(predicted))}
    _, counts = np.unique(predicted.astype(int), axis=0, return_counts=True)
    return {"largest_class_share": float(counts.max() / max(len(predicted), 1))}


def write_predictions(
    path: Path, task: str | None, labels: LabelSpace, predicted: np.ndarray, label_names: bool, *, within: Path
) -> None:
    """``index<TAB>prediction`` rows: scores (clipped to the task's score range, STS-B's 0–5), class ids or
    names, or a multi-label row's labels separated by commas (ids or names; empty when it predicts none)."""
    score_range = get_glue_task(task).score_range if task is not None else None
    rows = ["index\tprediction\n"]
    for index, value in enumerate(predicted):
        if labels.is_regression:
            score = float(value) if score_range is None else float(np.clip(value, *score_range))
            rows.append(f"{index}\t{score:.3f}\n")
        elif labels.multi_label:
            chosen = np.flatnonzero(value)
            rows.append(f"{index}\t{','.join(labels.names[i] if label_names else str(i) for i in chosen)}\n")
        else:
            rows.append(f"{index}\t{labels.names[int(value)] if label_names else int(value)}\n")
    write_text_atomic(path, "".join(rows), within=within)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------
#: Ranges of fine-tuning settings, checked by the range types of ``hf-variants pretrain``'s flags
#: (:mod:`hf_variants.settings.checks`); every other number of every settings group must be finite.
SETTING_RANGES: dict[str, Callable[[str], int | float]] = {
    "learning_rate": above(0), "weight_decay": at_least(0, float), "adam_beta1": half_open_interval(0, 1),
    "adam_beta2": half_open_interval(0, 1), "adam_epsilon": above(0), "max_grad_norm": at_least(0, float),
    "seed": seed_range(), "data_seed": seed_range(), "heldout_seed": seed_range(),
    "per_device_train_batch_size": at_least(1), "per_device_eval_batch_size": at_least(1),
    "gradient_accumulation_steps": at_least(1), "label_smoothing_factor": half_open_interval(0, 1),
    "max_seq_length": at_least(3), "max_train_samples": at_least(1), "max_eval_samples": at_least(1),
    "max_predict_samples": at_least(1), "preprocessing_num_workers": at_least(1),
}  # fmt: skip


def check_settings(*groups: Any) -> None:
    """Every numeric setting of the settings ``groups`` in its range (:data:`SETTING_RANGES`) and finite, and a
    training run that trains at least one step; otherwise a ``ValueError`` naming the flag and its value."""
    for group in groups:
        for name, value in vars(group).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            try:
                if name in SETTING_RANGES:
                    SETTING_RANGES[name](str(value))
                elif isinstance(value, float) and not math.isfinite(value):
                    raise ValueError(f"{value} is not a finite number")
            except (argparse.ArgumentTypeError, ValueError) as error:
                raise ValueError(f"argument --{name}: {error}") from None
    training = next((group for group in groups if isinstance(group, TrainingArguments)), None)
    if training is not None and training.do_train and training.max_steps <= 0 and not training.num_train_epochs > 0:
        raise ValueError(
            f"argument --num_train_epochs: {training.num_train_epochs} trains no step; give a number above 0, or "
            "--max_steps."
        )


def refuse_sharded_state(training_args: TrainingArguments) -> None:
    """Refuse FSDP and DeepSpeed, whose checkpoints every process writes a shard of: the completeness marker
    (written by the main process after its own save) could not vouch for the other processes' shards, and a
    resume could pick a half-written checkpoint. Data parallelism is supported (``accelerate launch
    --multi_gpu``; gloo on a machine without GPUs)."""
    requested = [name for name in ("FSDP", "DEEPSPEED") if os.environ.get(f"ACCELERATE_USE_{name}") == "true"]
    if training_args.fsdp:
        requested.append("FSDP")
    if training_args.deepspeed:
        requested.append("DEEPSPEED")
    if requested:
        raise ValueError(
            f"hf-variants finetune does not support {requested[0]}: its checkpoints are written in shards by every "
            "process, which the main process's completeness marker cannot vouch for. Use data parallelism "
            "(`accelerate launch --multi_gpu`, or an accelerate config whose distributed_type is MULTI_GPU or "
            "MULTI_CPU)."
        )


def check_cpu_processes_can_resume() -> None:
    """transformers 5.17's Trainer loads the optimizer state of a run of several processes onto their device,
    which on a CPU is ``cpu:0`` — a location torch cannot restore to (5.18 loads onto ``cpu``): refused with
    the fix instead of that traceback."""
    if version.parse(transformers.__version__) < version.parse("5.18.0"):
        raise ValueError(
            f"Resuming a fine-tuning run of several CPU processes needs transformers >= 5.18 (this is "
            f"{transformers.__version__}, whose Trainer cannot load the optimizer state it saved): upgrade "
            "transformers."
        )


def launched_processes() -> int:
    """The number of processes ``accelerate launch`` / torchrun started (1 without a launcher). On a machine
    without GPUs they train data-parallel over gloo on the CPU, as the pretraining engine does: the Trainer
    does so only with ``ACCELERATE_USE_CPU`` set before its ``TrainingArguments`` set up their devices
    (otherwise every process trains alone, each as process 0), so it is set here."""
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    if processes > 1 and not torch.cuda.is_available():
        os.environ.setdefault("ACCELERATE_USE_CPU", "true")
    return processes


def parse_args(argv: Sequence[str] | None, recorded: bool = False):
    """run_glue's settings (:mod:`hf_variants.settings.finetuning`) and every ``TrainingArguments`` field, with the
    command line's own defaults (:data:`~hf_variants.settings.finetuning.COMMAND_LINE_DEFAULTS`; ``recorded``: those
    an old record's command ran with); the task name is normalised here (``SST-2`` → ``sst2``), where the GLUE
    registry is at hand. Every mistake (missing flags, a value out of range: :func:`check_settings`) is named in
    one usage error."""
    launched_processes()  # before TrainingArguments exist
    parser = finetuning.parser_class()((ModelArguments, DataTrainingArguments, TrainingArguments, RunArguments),
                                       prog="hf-variants finetune")  # fmt: skip
    parser.set_defaults(**(finetuning.RECORDED_COMMAND_DEFAULTS if recorded else finetuning.COMMAND_LINE_DEFAULTS))
    parser.add_argument("--no_pad_to_max_length", action="store_false", dest="pad_to_max_length",
                        help="Pad each batch to its longest example (the default; kept for commands that say it).")
    try:
        if argv is None and len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
            parsed = parser.parse_json_file(json_file=os.path.abspath(sys.argv[1]))
        else:
            parsed = finetuning.parse_settings(parser, argv)
        check_settings(*parsed)
    except ValueError as error:  # a dataclass's own check, or a range
        parser.error(str(error))
    data_args, training_args = parsed[1], parsed[2]
    if data_args.task_name is not None:
        data_args.task_name = get_glue_task(data_args.task_name).name
    counted, how = finetuning.REAL_TOKENS
    arguments = sys.argv[1:] if argv is None else argv
    given = [arg for arg in arguments if arg.replace("-", "_").startswith(f"__{counted}")]
    if not recorded and not given:  # a typed default: argparse would read a string default as its bool flag
        setattr(training_args, counted, how)
    return parsed


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """``hf-variants finetune``: the command line parsed into typed settings, then :func:`run`."""
    settings = parse_args(argv)
    try:
        return run(*settings, command=" ".join(["run_glue.py", *(argv if argv is not None else sys.argv[1:])]))
    finally:
        end_process_group()


def run(
    model_args: ModelArguments,
    data_args: DataTrainingArguments,
    training_args: TrainingArguments,
    run_args: RunArguments | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """The engine called as a function, with typed settings (:mod:`hf_variants.settings.finetuning`'s groups and
    ``TrainingArguments``), inside the output folder's lock; ``command`` is the command line it came from,
    if any, recorded in ``results.json`` beside the settings (:func:`requested_arguments`)."""
    import hf_variants  # noqa: F401  (registers the variants with the Auto classes)

    run_args = run_args if run_args is not None else RunArguments()
    check_settings(model_args, data_args, training_args, run_args)
    refuse_sharded_state(training_args)
    processes = launched_processes()
    if training_args.world_size != processes:
        raise ValueError(
            f"This process is one of {processes} started by a launcher, but the TrainingArguments were set up for "
            f"{training_args.world_size}: build them after calling run_glue.launched_processes() (on a machine "
            "without GPUs it selects data parallelism over gloo on the CPU)."
        )
    lock = run_folder.OutputDirLock(Path(training_args.output_dir)) if training_args.process_index == 0 else None
    try:
        return fine_tune(model_args, data_args, training_args, run_args, command)
    finally:
        if lock is not None:
            lock.release()


def requested_arguments(
    model_args, data_args, training_args, run_args, by_content: frozenset[str] = frozenset()
) -> dict[str, dict[str, Any]]:
    """The run's settings with an effect, by group, as JSON values: recorded in ``results.json`` (paths as
    given) so that a study tells a finished run of the same settings from another, and the arguments of
    :func:`run_fingerprint` (which leaves out the paths in ``by_content`` and describes those inputs by
    content instead)."""
    return {
        "model": run_identity.arguments_with_effect(vars(model_args), MODEL_ARGUMENTS_WITHOUT_EFFECT | by_content),
        "data": run_identity.arguments_with_effect(vars(data_args), DATA_ARGUMENTS_WITHOUT_EFFECT | by_content),
        "training": run_identity.arguments_with_effect(
            {**training_args.to_dict(), **vars(run_args)}, TRAINING_ARGUMENTS_WITHOUT_EFFECT
        ),
    }


def recorded_arguments(results: dict[str, Any], record: Path) -> dict[str, dict[str, Any]]:
    """The settings the run whose ``results.json`` is ``record`` was made with (:func:`requested_arguments`):
    its ``arguments``, or, in a record written before they were recorded, its command line read by this
    engine's parser."""
    return checkpoints.recorded_arguments(
        results, record, lambda argv: requested_arguments(*parse_args(argv, recorded=True)), "run_glue"
    )


@dataclass
class TaskData:
    """The raw splits of a run with their labels encoded, the task's declaration (None for the user's own files)
    and the text columns the model reads."""

    raw: DatasetDict
    task: GlueTask | None
    labels: LabelSpace
    sentence1_key: str
    sentence2_key: str | None


def configure_logging(training_args: TrainingArguments) -> None:
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
    log_level = training_args.get_process_log_level()
    logger.setLevel(log_level)
    datasets.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.set_verbosity(log_level)


def load_task_data(model_args, data_args) -> TaskData:
    """Step 1: the splits (GLUE or the user's files), labels encoded, a held-out slice split off when asked."""
    raw = load_raw_datasets(data_args, model_args)
    task = get_glue_task(data_args.task_name) if data_args.task_name is not None else None
    labels = label_space(raw, task)
    raw = encode_labels(raw, labels)
    if data_args.heldout_fraction is not None:
        raw = hold_out(raw, data_args.heldout_fraction, data_args.heldout_seed)
    return TaskData(raw, task, labels, *text_keys(raw, task))


def load_task_config(model_args, data_args, labels: LabelSpace) -> transformers.PretrainedConfig:
    """Step 2: the model's configuration with the overrides applied and checked, and the task's label space."""
    hub = {"cache_dir": model_args.cache_dir, "revision": model_args.model_revision, "token": model_args.token,
           "trust_remote_code": model_args.trust_remote_code}  # fmt: skip
    config = AutoConfig.from_pretrained(model_args.config_name or model_args.model_name_or_path, **hub)
    pretrained_config = copy.deepcopy(config)
    overrides = parse_overrides(model_args.config_overrides)
    check_override_fields(overrides, lambda **switches: type(config).from_dict({**config.to_dict(), **switches}))
    for key, value in overrides.items():
        setattr(config, key, value)
    if config.model_type in VARIANTS:
        config.validate()
    if not model_args.random_init:
        if model_args.config_name is not None:
            pretrained_config = AutoConfig.from_pretrained(model_args.model_name_or_path, **hub)
        checkpoints.check_function_kept(pretrained_config, config, model_args.model_name_or_path,
                                        model_args.allow_function_changes)  # fmt: skip
    check_task_matches_model(config, labels, data_args.task_name, model_args.ignore_mismatched_sizes)
    config.num_labels = labels.num_labels
    config.problem_type = labels.problem_type
    config.finetuning_task = data_args.task_name
    if not labels.is_regression:
        config.label2id = {name: i for i, name in enumerate(labels.names)}
        config.id2label = dict(enumerate(labels.names))
    return config


def load_model_and_tokenizer(model_args, config: transformers.PretrainedConfig) -> tuple[Any, Any]:
    """Step 3: the tokenizer, and the model from its checkpoint (every backbone weight loaded) or initialised."""
    tokenizer = AutoTokenizer.from_pretrained(
        model_args.tokenizer_name or model_args.model_name_or_path, cache_dir=model_args.cache_dir,
        revision=model_args.model_revision, token=model_args.token, trust_remote_code=model_args.trust_remote_code,
    )  # fmt: skip
    dtype = DTYPES[model_args.dtype]
    if model_args.random_init:
        model = AutoModelForSequenceClassification.from_config(
            config, trust_remote_code=model_args.trust_remote_code, dtype=None if dtype == "auto" else dtype
        )
    else:
        model, loading = checkpoints.load_pretrained(
            AutoModelForSequenceClassification.from_pretrained, model_args.model_name_or_path, config=config,
            cache_dir=model_args.cache_dir, revision=model_args.model_revision, token=model_args.token, dtype=dtype,
            trust_remote_code=model_args.trust_remote_code, ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
            output_loading_info=True,
        )  # fmt: skip
        checkpoints.check_backbone_loaded(model, loading, model_args.model_name_or_path)
    check_tokenizer_matches(config, tokenizer, model_args.tokenizer_name or model_args.model_name_or_path)
    if len(tokenizer) > model.config.vocab_size:
        raise ValueError(
            f"The tokenizer has {len(tokenizer)} tokens but the model's vocab_size is {model.config.vocab_size}."
        )
    return model, tokenizer


def check_run_folder(output_dir: Path, fingerprint: dict[str, Any], model_args, data_args, training_args,
                     run_args) -> dict[str, Any] | None:  # fmt: skip
    """Step 4: refuse a folder that holds another run; this run's results when the folder holds it finished."""
    this_run = run_folder.check_output_dir(output_dir, fingerprint, run_args.overwrite_output_dir,
                                           replace_unstarted=True)  # fmt: skip
    if run_args.overwrite_output_dir:
        run_folder.check_inputs_kept(output_dir, input_paths(model_args, data_args, training_args))
    finished = checkpoints.finished_run(output_dir) if this_run else None
    if finished is not None:
        logger.warning("%s holds this run, finished: nothing was trained or written (--overwrite_output_dir runs it "
                       "again; `hf-variants export` exports or pushes it).", output_dir)  # fmt: skip
    return finished


def tokenized_splits(data: TaskData, tokenizer: Any, model: Any, data_args, training_args) -> dict[str, Any]:
    """Step 5: the splits the run reads, each cut to its ``--max_*_samples`` and tokenised: ``train`` (a dataset),
    ``eval`` and ``predict`` (split name → dataset); None for a split not asked for."""
    checkpoints.check_position_table(model.config, data_args.max_seq_length)
    max_seq_length = min(data_args.max_seq_length, tokenizer.model_max_length)
    padding = "max_length" if data_args.pad_to_max_length else False

    def preprocess(examples: dict[str, list]) -> dict[str, list]:
        columns = [data.sentence1_key] if data.sentence2_key is None else [data.sentence1_key, data.sentence2_key]
        return tokenizer(*(examples[column] for column in columns), padding=padding, max_length=max_seq_length,
                         truncation=True)  # fmt: skip

    def prepared(prefix: str, limit: int | None, flag: str) -> dict[str, datasets.Dataset]:
        names = [name for name in data.raw if name.startswith(prefix)]
        if not names:
            raise ValueError(f"--{flag} needs a {prefix} split; the data has {list(data.raw)}.")
        splits = {}
        for name in names:
            dataset = data.raw[name] if limit is None else data.raw[name].select(range(min(limit, len(data.raw[name]))))
            with training_args.main_process_first(desc="dataset map pre-processing"):
                splits[name] = dataset.map(
                    preprocess, batched=True, num_proc=data_args.preprocessing_num_workers,
                    load_from_cache_file=not data_args.overwrite_cache, desc=f"Running tokenizer on {name}",
                )  # fmt: skip
        return splits

    asked = training_args
    return {
        "train": prepared("train", data_args.max_train_samples, "do_train")["train"] if asked.do_train else None,
        "eval": prepared("validation", data_args.max_eval_samples, "do_eval") if asked.do_eval else None,
        "predict": prepared("test", data_args.max_predict_samples, "do_predict") if asked.do_predict else None,
    }


def build_trainer(model: Any, tokenizer: Any, splits: dict[str, Any], data: TaskData, fingerprint: dict[str, Any],
                  data_args, training_args, run_args, stop_on_signal: StopOnSignal) -> GlueTrainer:  # fmt: skip
    """Step 6: the Trainer with the task's metric, dynamic padding (or the fixed padding asked for) and the
    package's callbacks."""
    collator = default_data_collator if data_args.pad_to_max_length else DataCollatorWithPadding(tokenizer)
    trainer = GlueTrainer(
        model=model, callbacks=[stop_on_signal], fingerprint=fingerprint,
        skip_nonfinite_steps=run_args.skip_nonfinite_steps, args=training_args, train_dataset=splits["train"],
        eval_dataset=next(iter(splits["eval"].values())) if splits["eval"] else None,
        compute_metrics=metric_function(data_args.task_name, data.labels), processing_class=tokenizer,
        data_collator=collator,
    )  # fmt: skip
    if not run_args.print_logs:
        for printer in (ProgressCallback, PrinterCallback):
            trainer.remove_callback(printer)
        if not training_args.disable_tqdm:
            trainer.add_callback(SilentLogProgressCallback)
    return trainer


def train(trainer: GlueTrainer, train_dataset: Any, output_dir: Path, fingerprint: dict[str, Any],
          stop_on_signal: StopOnSignal) -> dict[str, Any]:  # fmt: skip
    """Step 7: train (or resume, or finish at a checkpoint that holds the last step) and save the model; the
    training metrics. A stop signal ends in :class:`TrainingInterrupted` after the checkpoint it asked for."""
    args = trainer.args
    resume_from = checkpoints.checkpoint_to_resume(args.resume_from_checkpoint, output_dir, fingerprint)
    if resume_from is not None and args.world_size > 1 and args.device.type == "cpu":
        check_cpu_processes_can_resume()
    if resume_from is not None and reached_its_last_step(resume_from):  # the Trainer would take one more step
        train_metrics = finish_at_last_checkpoint(trainer, resume_from)
    else:
        with stop_on_signal:
            train_metrics = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None).metrics
    if stop_on_signal.received is not None:
        interrupted = TrainingInterrupted(stop_on_signal.received, trainer.state.global_step,
                                          str(output_dir / f"checkpoint-{trainer.state.global_step}"))  # fmt: skip
        logger.warning(interrupted.message)
        raise interrupted
    metrics = {**train_metrics, "train_samples": len(train_dataset), "skipped_nonfinite_steps": trainer.skipped_steps}
    # the Trainer's own train_loss covers only the steps since the last resume
    metrics["train_loss"] = trainer.train_loss_sum / max(trainer.state.global_step, 1)
    saving = staged_into(output_dir) if trainer.is_world_process_zero() else contextlib.nullcontext(output_dir)
    with saving as staging:  # never through a link in the folder
        trainer.save_model(str(staging))
        if trainer.is_world_process_zero():  # save_model pickles the TrainingArguments: results.json has them
            remove_path(staging / TRAINING_ARGS_NAME, within=staging)
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    trainer.save_state()
    return metrics


def evaluate_splits(trainer: GlueTrainer, eval_splits: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Step 8: each validation split's metrics (``validation_matched`` → ``eval_matched_*`` in the files)."""
    results = {}
    for name, dataset in eval_splits.items():
        suffix = name.removeprefix("validation").lstrip("_")
        prefix = "eval" if not suffix else f"eval_{suffix}"
        metrics = {**trainer.evaluate(eval_dataset=dataset, metric_key_prefix=prefix),
                   f"{prefix}_samples": len(dataset)}  # fmt: skip
        trainer.log_metrics(prefix, metrics)
        trainer.save_metrics(prefix, metrics, combined=True)
        results[name] = {k.removeprefix(f"{prefix}_"): v for k, v in metrics.items()}
    return results


def predict_splits(trainer: GlueTrainer, splits: dict[str, Any], labels: LabelSpace, task_name: str | None,
                   output_dir: Path) -> None:  # fmt: skip
    """Step 9: each test split's predictions, in a text file and, for a GLUE task, the benchmark's submission file."""
    for name, dataset in splits.items():
        dataset = dataset.remove_columns([c for c in ("label",) if c in dataset.column_names])
        logits = trainer.predict(dataset, metric_key_prefix="predict").predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        predicted = labels.predictions(logits)
        split_task = "ax" if name == "test_ax" else task_name
        if trainer.is_world_process_zero():
            base = f"predict_results_{split_task or 'custom'}{'_' + name if name not in ('test', 'test_ax') else ''}"
            write_predictions(output_dir / f"{base}.txt", split_task, labels, predicted, label_names=True,
                              within=output_dir)
            submission = SUBMISSION_FILES.get((split_task, "test" if name == "test_ax" else name))
            if submission is not None:
                write_predictions(output_dir / submission, split_task, labels, predicted,
                                  label_names=split_task in SUBMIT_LABEL_NAMES, within=output_dir)  # fmt: skip


def fine_tune(model_args, data_args, training_args, run_args, command: str | None) -> dict[str, Any]:
    """The run itself, inside the output folder's lock: the steps above in order; the run's results."""
    configure_logging(training_args)
    # Hub pushes of hf-variants models go through hf_variants.hub (with the card); the Trainer's own stays off.
    push_to_hub = training_args.push_to_hub
    set_seed(training_args.seed)
    data = load_task_data(model_args, data_args)
    config = load_task_config(model_args, data_args, data.labels)
    model, tokenizer = load_model_and_tokenizer(model_args, config)
    fingerprint = run_fingerprint(model_args, data_args, training_args, run_args, tokenizer)
    output_dir = Path(training_args.output_dir)
    finished = check_run_folder(output_dir, fingerprint, model_args, data_args, training_args, run_args)
    if finished is not None:
        return finished
    splits = tokenized_splits(data, tokenizer, model, data_args, training_args)
    training_args.push_to_hub = push_to_hub and model.config.model_type not in VARIANTS
    stop_on_signal = StopOnSignal()
    trainer = build_trainer(model, tokenizer, splits, data, fingerprint, data_args, training_args, run_args,
                            stop_on_signal)  # fmt: skip
    results: dict[str, Any] = {
        "command": command, "arguments": requested_arguments(model_args, data_args, training_args, run_args),
        "task": data_args.task_name, "model_name_or_path": model_args.model_name_or_path,
        "model_type": model.config.model_type, "random_init": model_args.random_init,
        "evaluated_on": "dev set" if data_args.heldout_fraction is None else (
            f"held-out {data_args.heldout_fraction:g} of the training split (seed {data_args.heldout_seed})"),
        "seed": training_args.seed, "parameters": sum(p.numel() for p in model.parameters()),
    }  # fmt: skip
    # the run starts: the folder becomes its own (a run refused above left nothing that refuses the next)
    with training_args.main_process_first(desc="claiming the output folder"):
        if training_args.process_index == 0:
            run_folder.claim_output_dir(output_dir, fingerprint, run_args.overwrite_output_dir)
    files_before = run_folder.file_states(output_dir)  # the manifest records what this run writes
    if training_args.do_train:
        results["train"] = train(trainer, splits["train"], output_dir, fingerprint, stop_on_signal)
    if training_args.do_eval:
        results["eval"] = evaluate_splits(trainer, splits["eval"])
    if training_args.do_predict:
        predict_splits(trainer, splits["predict"], data.labels, data_args.task_name, output_dir)
    if trainer.is_world_process_zero():
        finish_run(trainer, output_dir, files_before, results, model_args, data_args, training_args, push_to_hub,
                   tokenizer)  # fmt: skip
    return results


def finish_run(trainer: GlueTrainer, output_dir: Path, files_before: dict, results: dict[str, Any], model_args,
               data_args, training_args, push_to_hub: bool, tokenizer: Any) -> None:  # fmt: skip
    """Step 10 (the main process): results.json, the export or push asked for, and the run's manifest."""
    make_folder(output_dir, within=output_dir)
    write_text_atomic(output_dir / "results.json", json.dumps(results, indent=2) + "\n", within=output_dir)
    export_if_asked(data_args, training_args, push_to_hub, trainer.model, tokenizer, results)
    if training_args.push_to_hub:  # a model without hf-variants card: the Trainer's own push
        trainer.push_to_hub(finetuned_from=model_args.model_name_or_path, tasks="text-classification")
    run_folder.write_manifest(output_dir, files_before, "finetune")


def reached_its_last_step(checkpoint: Path) -> bool:
    """Whether the Trainer checkpoint holds its run's last step (a run stopped by a signal at its last step, or
    killed between its last checkpoint and its manifest)."""
    state = load_json(checkpoint / TRAINER_STATE_NAME)
    return isinstance(state, dict) and 0 < int(state.get("max_steps") or 0) <= int(state.get("global_step") or 0)


def finish_at_last_checkpoint(trainer: GlueTrainer, checkpoint: Path) -> dict[str, Any]:
    """Finish a run whose checkpoint holds its last step without training (``Trainer.train`` resumed there takes
    one more step): its state and weights (the best checkpoint's with ``load_best_model_at_end``) are restored
    and its training metrics read from the checkpoint — the train loss summed over every step, as
    :attr:`GlueTrainer.train_loss_sum` would give. Returns those metrics."""
    trainer.state = TrainerState.load_from_json(str(checkpoint / TRAINER_STATE_NAME))
    weights_from = checkpoint
    if trainer.args.load_best_model_at_end and trainer.state.best_model_checkpoint:
        weights_from = Path(trainer.state.best_model_checkpoint)
    load_model_weights(trainer.model, weights_from / "model.safetensors")
    loss_sum = load_json(checkpoint / LOSS_FILE)["loss_sum"]
    trainer.loss_sum_before_resume = float(loss_sum)
    logger.warning("%s holds this run's last step (%d): the run finishes without training.", checkpoint,
                   trainer.state.global_step)  # fmt: skip
    return {"epoch": trainer.state.epoch, "total_flos": trainer.state.total_flos,
            "train_loss": float(loss_sum) / max(trainer.state.global_step, 1)}  # fmt: skip


def load_model_weights(model: torch.nn.Module, weights: Path) -> None:
    """Load a checkpoint's ``model.safetensors`` into ``model``: every weight but those tied to another (saved
    once) must be there, and nothing else."""
    missing, unexpected = model.load_state_dict(checkpoints.load_tensors(weights), strict=False)
    tied = {name for name, _ in model.named_parameters(remove_duplicate=False)} - dict(model.named_parameters()).keys()
    if unexpected or set(missing) - tied:
        raise checkpoints.CheckpointError(f"{weights} does not fit this model: missing {sorted(missing)[:5]}, "
                                          f"unexpected {sorted(unexpected)[:5]}.")  # fmt: skip


def export_if_asked(data_args, training_args, push_to_hub: bool, model, tokenizer, results: dict) -> None:
    if data_args.export_dir is None and not push_to_hub:
        return
    if model.config.model_type not in VARIANTS:
        if data_args.export_dir is not None:
            raise ValueError("--export_dir writes hf-variants model cards; use --push_to_hub for other models.")
        return
    from ..hub import card_hyperparameters, export_for_hub, glue_task_results, push_folder_to_hub, user_data_results

    # the default export folder is the run's own: a link there that leads out is refused
    folder = Path(data_args.export_dir or inside(training_args.output_dir, "hub_export", "the run's export folder"))
    steps = results.get("train", {}).get("train_samples")
    examples = f" ({steps:,} examples)." if steps else "."
    if data_args.task_name is not None:  # GLUE: the Hub's dataset, its metrics
        data, scores = ["nyu-mll/glue"], glue_task_results(data_args.task_name, results)
        summary = f"Fine-tuned on GLUE {data_args.task_name}{examples}"
    else:  # the user's own files, named as such (no Hub dataset)
        source = data_args.train_file or data_args.dataset_name
        data, scores = None, user_data_results(source, results) if data_args.train_file else []
        summary = f"Fine-tuned on the user's own data, `{Path(source).name}`{examples}"
    export_for_hub(model, folder, tokenizer, repo_id=training_args.hub_model_id, datasets=data, results=scores,
                   training_summary=summary, hyperparameters=card_hyperparameters(results["arguments"]), overwrite=True,
                   max_seq_length=data_args.max_seq_length)  # fmt: skip  # the run's own: its previous one replaced
    if push_to_hub:
        if not training_args.hub_model_id:
            raise ValueError("--push_to_hub needs --hub_model_id.")
        push_folder_to_hub(folder, training_args.hub_model_id, token=training_args.hub_token)


if __name__ == "__main__":
    main()
