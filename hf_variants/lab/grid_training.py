"""One from-scratch classification run: a model built from a config, AdamW with linear warmup and
decay for a fixed number of steps, then accuracy on an evaluation set.

A plain loop (no ``Trainer``) because a grid runs hundreds of short runs in one process: the data are
tokenized once per task and shared, and each run is a few hundred steps. Same data order and masks for
every model at a given seed; a non-finite loss, or a non-finite gradient found before clipping
(:mod:`hf_variants.training.nonfinite`), stops the run and is recorded as ``diverged`` with the step
and the parameters (never trained on), an ODE solver failure as ``solver_failed`` with its message.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AutoModelForSequenceClassification, PreTrainedTokenizerFast

import hf_variants  # noqa: F401  (registers the variants)

from ..core.ode_layer import ODESolverError
from ..training.nonfinite import describe_parameters, nonfinite_gradients
from .statistics import predicts_one_class


@dataclass(frozen=True)
class EncodedSplit:
    """Token ids (unpadded, truncated) and labels of one split."""

    input_ids: list[list[int]]
    labels: list[int]

    @classmethod
    def encode(cls, tokenizer: PreTrainedTokenizerFast, texts: Sequence[str], labels: Sequence[int], max_length: int):
        ids = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
        return cls(ids, list(labels))

    def batch(self, indices: Sequence[int], pad_token_id: int) -> dict[str, torch.Tensor]:
        rows = [self.input_ids[i] for i in indices]
        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = torch.tensor(row)
            attention_mask[i, : len(row)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}


def train_and_evaluate(
    config: Any,
    train: EncodedSplit,
    evaluation: EncodedSplit,
    *,
    learning_rate: float,
    warmup_ratio: float,
    steps: int,
    batch_size: int,
    seed: int,
    weight_decay: float = 0.01,
    max_grad_norm: float = 1.0,
) -> dict[str, Any]:
    """Train a fresh model of ``config`` for ``steps`` steps and evaluate it; returns the result record
    (accuracy, prediction counts, whether it predicts one class, losses, timing, parameter count)."""
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    warmup = round(warmup_ratio * steps)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (steps - step) / max(1, steps - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    generator = torch.Generator().manual_seed(seed)
    order: list[int] = []
    losses: list[float] = []
    model.train()
    started = time.perf_counter()
    tokens = 0
    for step in range(steps):
        if len(order) < batch_size:
            order += torch.randperm(len(train.labels), generator=generator).tolist()
        indices, order = order[:batch_size], order[batch_size:]
        batch = train.batch(indices, config.pad_token_id)
        tokens += int(batch["attention_mask"].sum())
        try:
            loss = model(**batch, labels=torch.tensor([train.labels[i] for i in indices])).loss
        except ODESolverError as error:  # an outcome of this learning rate, recorded, not trained through
            return {"status": "solver_failed", "failed_at_step": step, "error": str(error)}
        if not torch.isfinite(loss):
            return {"status": "diverged", "diverged_at_step": step, "loss": float(loss)}
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nonfinite = nonfinite_gradients(model.named_parameters())  # before clipping: it spreads inf as NaN
        if nonfinite:
            return {"status": "diverged", "diverged_at_step": step, "loss": loss.item(),
                    "cause": f"non-finite gradient in {describe_parameters(nonfinite)} with a finite loss",
                    "nonfinite_gradients": nonfinite}  # fmt: skip
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    train_seconds = time.perf_counter() - started
    try:
        predictions = predict(model, evaluation, config.pad_token_id)
    except (ODESolverError, FloatingPointError) as error:
        return {"status": "solver_failed" if isinstance(error, ODESolverError) else "diverged", "error": str(error)}
    counts = [predictions.count(c) for c in range(config.num_labels)]
    correct = sum(p == y for p, y in zip(predictions, evaluation.labels, strict=True))
    tail = losses[-max(1, steps // 10) :]
    return {
        "status": "finished",
        "accuracy": correct / len(predictions),
        "prediction_counts": counts,
        "predicts_one_class": predicts_one_class(counts),
        "final_train_loss": sum(tail) / len(tail),
        "train_seconds": round(train_seconds, 2),
        "train_tokens_per_second": round(tokens / train_seconds, 1),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


@torch.no_grad()
def predict(model: torch.nn.Module, split: EncodedSplit, pad_token_id: int, batch_size: int = 128) -> list[int]:
    model.eval()
    predictions: list[int] = []
    for start in range(0, len(split.labels), batch_size):
        batch = split.batch(range(start, min(start + batch_size, len(split.labels))), pad_token_id)
        logits = model(**batch).logits
        if not torch.isfinite(logits).all():
            raise FloatingPointError("non-finite logits at evaluation")
        predictions += logits.argmax(-1).tolist()
    return predictions
