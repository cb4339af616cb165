"""What the main job measures on a reloaded model: its dev score recomputed batch by batch (no Trainer), whether
it learned (one class, the chance it then has), and the analyses of its encoder (attention maps and ranks,
function evaluations, distance ratios)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from .data_sources import DataSource, embedded_tasks


def headline_metric(task: str) -> str:
    """The name of the task's headline metric (accuracy for the embedded tasks)."""
    from ..glue import get_task

    return "accuracy" if task in embedded_tasks() else get_task(task).headline_metric


def headline(task: str, metrics: dict[str, float]) -> tuple[str, float]:
    """The task's headline metric and its value."""
    name = headline_metric(task)
    return name, metrics[name]


def recomputed_metric(
    model, tokenizer, source: DataSource, task: str, max_length: int
) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
    """The dev metrics of a reloaded classifier, computed here (batch by batch, no Trainer), with its
    predictions and the dev labels."""
    from ..glue import compute_glue_metrics

    first, second, labels = source.dev_split(task)
    predictions = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(first), 64):
            texts = (first[start : start + 64],) + ((second[start : start + 64],) if second else ())
            batch = tokenizer(*texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            logits = model(**batch).logits.float()
            predictions.append(logits[:, 0] if model.config.num_labels == 1 else logits.argmax(-1))
    predicted = torch.cat(predictions).numpy()
    if source.kind == "synthetic":
        return {"accuracy": float((predicted == labels).mean())}, predicted, labels
    return compute_glue_metrics(task, predicted, labels), predicted, labels


def learning_verdict(model, predicted: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Whether a classifier "did not learn" (≥ 99% of its dev predictions one class, or one constant
    regression score) and the chance score it then has (the dev majority share)."""
    from .statistics import majority_share, predicts_one_class

    if model.config.num_labels == 1:
        return {"did_not_learn": bool(np.ptp(predicted) == 0), "chance": None}
    counts = np.bincount(predicted.astype(int), minlength=model.config.num_labels).tolist()
    return {"did_not_learn": predicts_one_class(counts), "chance": majority_share(labels.tolist()),
            "prediction_counts": counts, "dev_examples": len(labels)}  # fmt: skip


def analyse(model, tokenizer, sentences: list[str], max_length: int) -> dict[str, Any]:
    """Attention maps (first sentence), attention ranks, NFE per block and distance ratios."""
    from . import analysis

    encodings = [tokenizer(s, truncation=True, max_length=max_length, return_tensors="pt") for s in sentences]
    outputs = analysis.encoder_outputs(model, encodings, attentions=True)
    ratios = analysis.distance_ratios(outputs)["distance_ratio"]
    return {
        "attention_sentence": tokenizer.convert_ids_to_tokens(encodings[0]["input_ids"][0].tolist()),
        "attention_maps": analysis.attention_maps(outputs[0]),
        "attention_rank_fraction": analysis.attention_rank_fractions(outputs),
        "nfe_per_block": analysis.function_evaluations(outputs),
        "distance_ratio": [analysis.summarise(values) for values in ratios],
    }


def classifier_from(folder: Path, **kwargs: Any):
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(folder, **kwargs)

