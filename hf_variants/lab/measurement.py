"""What the main job measures on a reloaded model: its dev score recomputed batch by batch (no Trainer), whether
it learned (one class, the chance it then has), and the analyses of its encoder (attention maps and ranks,
function evaluations, distance ratios)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..tasks import EmbeddedLevels, get_task
from . import verdicts
from .data_sources import DataSource
from .outcomes import MAIN_JOB_RUN, read_outcome

if TYPE_CHECKING:
    from ..settings.compare import CompareArguments
    from .protocol import Run
    from .spec import ModelSpec


def headline_metric(task: str) -> str:
    """The name of the task's headline metric, as the task table declares it."""
    return get_task(task).headline_metric


def headline(task: str, metrics: dict[str, float]) -> tuple[str, float]:
    """The task's headline metric and its value."""
    name = headline_metric(task)
    return name, metrics[name]


@dataclass(frozen=True)
class DevSet:
    """A task's dev set as every reloaded classifier of a comparison reads it: tokenized once, in batches of 64
    padded to their longest example, with its labels."""

    task: str
    synthetic: bool  # scored by accuracy (the embedded tasks) or by the GLUE task's metrics
    batches: list[dict[str, torch.Tensor]]
    labels: np.ndarray


def dev_set(tokenizer, source: DataSource, task: str, max_length: int) -> DevSet:
    """``task``'s dev set, tokenized as the fine-tuning engine's evaluation reads it (truncated to ``max_length``)."""
    first, second, labels = source.dev_split(task)
    batches = []
    for start in range(0, len(first), 64):
        texts = (first[start : start + 64],) + ((second[start : start + 64],) if second else ())
        batches.append(dict(tokenizer(*texts, padding=True, truncation=True, max_length=max_length,
                                      return_tensors="pt")))  # fmt: skip
    return DevSet(task, source.kind == "synthetic", batches, labels)


def recomputed_metric(model, dev: DevSet) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
    """The dev metrics of a reloaded classifier, computed here (batch by batch, no Trainer), with its
    predictions and the dev labels."""
    from ..glue import compute_glue_metrics

    predictions = []
    model.eval()
    with torch.no_grad():
        for batch in dev.batches:
            logits = model(**batch).logits.float()
            predictions.append(logits[:, 0] if model.config.num_labels == 1 else logits.argmax(-1))
    predicted = torch.cat(predictions).numpy()
    if dev.synthetic:
        return {"accuracy": float((predicted == dev.labels).mean())}, predicted, dev.labels
    return compute_glue_metrics(dev.task, predicted, dev.labels), predicted, dev.labels


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


def final_run(
    args: CompareArguments, dev: DevSet, spec: ModelSpec, run: Run, outcomes: dict[Run, dict[str, Any]]
) -> dict[str, Any]:
    """One final fine-tuning run's record: its dev score, recomputed from the model reloaded with
    ``AutoModelForSequenceClassification`` (an error when the two differ), whether it learned
    (:func:`~hf_variants.lab.verdicts.run_status`), its training curve; or the error that stopped it."""
    from .stages import folder_name

    result = outcomes[run]
    if "failed" in result:
        return {"failed": result["failed"], "status": verdicts.FAILED}
    folder = args.output_dir / "models" / spec.folder / folder_name(run)
    classifier = classifier_from(folder)
    recomputed, predicted, labels = recomputed_metric(classifier, dev)
    reported = result["eval"]["validation"]
    metric, value = headline(run.task, reported)
    if abs(recomputed[metric] - value) > 1e-6:
        raise RuntimeError(
            f"{spec.name}/{folder_name(run)}: the reloaded model scores {metric}={recomputed[metric]:.6f}, the run "
            f"reported {value:.6f}: the saved model is not the evaluated one."
        )
    state = json.loads((folder / "trainer_state.json").read_text())
    record = {
        "metric": metric,
        "value": value,
        "metrics": {k: v for k, v in reported.items() if k not in ("runtime", "samples_per_second",
                                                                   "steps_per_second", "epoch")},
        "recomputed_after_reload": recomputed[metric],
        **learning_verdict(classifier, predicted, labels),
        "train_seconds": result["train"]["train_runtime"],
        "curve": [{"step": e["step"], "loss": e["loss"]} for e in state["log_history"] if "loss" in e],
    }  # fmt: skip
    declared = get_task(run.task).guessing_level(EmbeddedLevels.from_settings(args))
    return {**record, "status": verdicts.run_status(read_outcome(record, MAIN_JOB_RUN, run.task, chance=declared))}
