"""One from-scratch classification run on the fine-tuning engine: a model built from a config, trained
by :class:`~hf_variants.training.run_glue.GlueTrainer` (the Trainer of ``hf-variants finetune``: AdamW,
linear warmup and decay, gradient clipping, the non-finite check) for a fixed number of steps, then
accuracy on an evaluation set.

A grid runs hundreds of short runs in one process, so the data are tokenized once per task and shared
(:class:`EncodedSplit`); each run gets the Trainer with typed settings (:class:`RunSettings`), no argv.
At a given seed every model sees the same data order. A non-finite loss or gradient (checked before
clipping) stops the run and is recorded as ``diverged`` with the step and the parameters — never
trained on; an ODE solver failure as ``solver_failed`` with its message; an allocation refused (under the cap
of :func:`~hf_variants.training.memory.limit_address_space`, or on a GPU) as ``out_of_memory`` with the step.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    TrainerCallback,
    TrainingArguments,
)
from transformers.trainer_callback import PrinterCallback, ProgressCallback

import hf_variants  # noqa: F401  (registers the variants)

from ..core.diagnostics import ablated, ablations, diagnostics
from ..core.failures import ModelFailure
from ..training.memory import is_out_of_memory, out_of_memory_summary
from ..training.nonfinite import NonFiniteStepError
from ..training.run_glue import GlueTrainer
from .statistics import predicts_one_class


def stop_status(error: BaseException) -> str | None:
    """The status of a run that ``error`` stopped — ``diverged`` (a non-finite step), a model's failure's own
    status (:class:`~hf_variants.core.failures.ModelFailure`, e.g. ``solver_failed`` for an ODE solver that gave
    up), ``out_of_memory`` (an allocation refused) — or None for an error that is a bug, to raise.
    The one rule for fine-tuning, evaluation and a grid's self-pretraining."""
    if isinstance(error, NonFiniteStepError):
        return "diverged"
    if isinstance(error, ModelFailure):
        return error.status
    return "out_of_memory" if is_out_of_memory(error) else None


def stop_summary(error: BaseException) -> str:
    """The one line a stopped run's record keeps of ``error``."""
    if isinstance(error, NonFiniteStepError):
        return error.summary
    return out_of_memory_summary(error) if is_out_of_memory(error) else str(error)


@dataclass(frozen=True)
class EncodedSplit(torch.utils.data.Dataset):
    """Token ids (unpadded, truncated) and labels of one split; a dataset of ``{"input_ids", "labels"}``."""

    input_ids: list[list[int]]
    labels: list[int]

    @classmethod
    def encode(cls, tokenizer: PreTrainedTokenizerFast, texts: Sequence[str], labels: Sequence[int], max_length: int):
        ids = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
        return cls(ids, list(labels))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"input_ids": self.input_ids[index], "labels": self.labels[index]}


class TokenCountingCollator(DataCollatorWithPadding):
    """transformers' padding collator (the one ``hf-variants finetune`` uses) that also counts the real
    tokens it has seen (the run's throughput)."""

    tokens: int = 0

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = super().__call__(features)
        self.tokens += int(batch["attention_mask"].sum())
        return batch


#: Points of a run's recorded training-loss curve: each the mean loss of its window of steps, as the Trainer logs
#: with ``logging_steps`` = steps / CURVE_POINTS (the main job's records keep the Trainer's own log).
CURVE_POINTS = 20


@dataclass(frozen=True)
class RunSettings:
    """The training settings of one run (the rest are the Trainer's defaults)."""

    learning_rate: float
    warmup_ratio: float
    steps: int
    batch_size: int
    seed: int
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    eval_batch_size: int = 128

    def training_arguments(self, output_dir: str) -> TrainingArguments:
        return TrainingArguments(
            output_dir=output_dir, max_steps=self.steps, per_device_train_batch_size=self.batch_size,
            per_device_eval_batch_size=self.eval_batch_size, learning_rate=self.learning_rate,
            warmup_steps=round(self.warmup_ratio * self.steps), lr_scheduler_type="linear",
            weight_decay=self.weight_decay, max_grad_norm=self.max_grad_norm, seed=self.seed,
            logging_strategy="steps", logging_steps=1, save_strategy="no", report_to="none",
            disable_tqdm=True, log_level="error", dataloader_pin_memory=False, use_cpu=not torch.cuda.is_available(),
        )  # fmt: skip


def idea_effect(model: torch.nn.Module, trainer: GlueTrainer, evaluation: EncodedSplit) -> dict:
    """What the model's ideas report of themselves (:mod:`hf_variants.core.diagnostics`, e.g. TransJect's trained
    α_l as ``residual_weights``) and the accuracy under each ablation they offer (``accuracy_with_<name>``, e.g.
    ``accuracy_with_identity_layers``: how much the layers carry); nothing for a model whose ideas report none."""
    effect: dict[str, Any] = {name: [round(value, 6) for value in values]
                              for name, values in diagnostics(model).items()}  # fmt: skip
    for name in ablations(model):
        with ablated(model, name):
            predictions = trainer.predict(evaluation).predictions.argmax(-1).tolist()
        correct = sum(p == y for p, y in zip(predictions, evaluation.labels, strict=True))
        effect[f"accuracy_with_{name}"] = correct / len(predictions)
    return effect


def train_and_evaluate(
    config: Any,
    tokenizer: PreTrainedTokenizerFast,
    train: EncodedSplit,
    evaluation: EncodedSplit,
    settings: RunSettings,
    *,
    callbacks: Sequence[TrainerCallback] = (),
    measure: Callable[[PreTrainedModel], dict] | None = None,
    initial_weights: str | Path | None = None,
    initialisation_seed: int | None = None,
) -> dict:
    """Train a fresh model of ``config`` (or, from ``initial_weights``, a pretrained encoder of that config with a
    new classification head) on ``train`` and evaluate it on ``evaluation`` (both encoded by
    ``tokenizer``, which pads the batches); returns the result
    record (accuracy, prediction counts, whether it predicts one class, the final training loss and the loss
    curve — :data:`CURVE_POINTS` window means —, timing, parameter count).

    A study that watches the training passes Trainer ``callbacks`` (they see the model at each event);
    one that measures the trained model passes ``measure``, whose fields join a finished run's record.
    ``initialisation_seed``: the seed of the new weights (the encoder's, or a pretrained encoder's new head) when it is
    not ``settings.seed``, which then seeds the data order and dropout only (an A/A replica's run)."""
    torch.manual_seed(settings.seed if initialisation_seed is None else initialisation_seed)
    if initial_weights is None:
        model = AutoModelForSequenceClassification.from_config(config)
    else:
        model = AutoModelForSequenceClassification.from_pretrained(initial_weights, num_labels=config.num_labels)
    collator = TokenCountingCollator(tokenizer)
    with tempfile.TemporaryDirectory(prefix="grid-run-") as scratch:
        trainer = GlueTrainer(model=model, args=settings.training_arguments(scratch), train_dataset=train,
                              data_collator=collator, callbacks=list(callbacks))  # fmt: skip
        for printer in (PrinterCallback, ProgressCallback):
            trainer.remove_callback(printer)
        started = time.perf_counter()
        try:
            trainer.train()
        except Exception as error:  # an outcome of this learning rate, recorded, not trained through
            if (status := stop_status(error)) is None:
                raise
            if isinstance(error, NonFiniteStepError):
                record = {"status": status, "diverged_at_step": error.step - 1, "cause": error.summary}
                return {**record, "nonfinite_gradients": error.parameters} if error.parameters else record
            return {"status": status, "failed_at_step": trainer.state.global_step, "error": stop_summary(error)}
        train_seconds = time.perf_counter() - started
        train_tokens = collator.tokens
        try:
            logits = trainer.predict(evaluation).predictions
        except Exception as error:
            if (status := stop_status(error)) is None:
                raise
            return {"status": status, "error": stop_summary(error)}
    if not torch.isfinite(torch.as_tensor(logits)).all():
        return {"status": "diverged", "error": "non-finite logits at evaluation"}
    predictions = logits.argmax(-1).tolist()
    counts = [predictions.count(c) for c in range(config.num_labels)]
    correct = sum(p == y for p, y in zip(predictions, evaluation.labels, strict=True))
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    tail = losses[-max(1, settings.steps // 10) :]
    window = max(1, len(losses) // CURVE_POINTS)
    curve = [{"step": end, "loss": sum(losses[end - window : end]) / window}
             for end in range(window, len(losses) + 1, window)]  # fmt: skip
    return {
        "status": "finished",
        "accuracy": correct / len(predictions),
        **idea_effect(model, trainer, evaluation),
        "prediction_counts": counts,
        "predicts_one_class": predicts_one_class(counts),
        "final_train_loss": sum(tail) / len(tail),
        "curve": curve,
        "train_seconds": round(train_seconds, 2),
        "train_tokens_per_second": round(train_tokens / train_seconds, 1),
        "parameters": sum(p.numel() for p in model.parameters()),
        **(measure(model) if measure is not None else {}),
    }
