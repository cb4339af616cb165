"""GLUE metrics exactly as GLUE defines them, in numpy/scipy (no network, no scikit-learn).

CoLA: Matthews correlation; STS-B: Pearson and Spearman correlation; MRPC and QQP: accuracy and F1
of the positive class; every other task: accuracy. ``combined_score`` is the mean of a task's metrics
when it has more than one, as transformers' run_glue reports.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from .tasks import get_task


def accuracy(predictions: np.ndarray, references: np.ndarray) -> float:
    return float((predictions == references).mean())


def f1_positive(predictions: np.ndarray, references: np.ndarray) -> float:
    true_positive = float(((predictions == 1) & (references == 1)).sum())
    predicted, actual = float((predictions == 1).sum()), float((references == 1).sum())
    return 0.0 if true_positive == 0 else 2 * true_positive / (predicted + actual)


def matthews_correlation(predictions: np.ndarray, references: np.ndarray) -> float:
    tp = float(((predictions == 1) & (references == 1)).sum())
    tn = float(((predictions == 0) & (references == 0)).sum())
    fp = float(((predictions == 1) & (references == 0)).sum())
    fn = float(((predictions == 0) & (references == 1)).sum())
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return 0.0 if denominator == 0 else float((tp * tn - fp * fn) / denominator)


def compute_glue_metrics(task_name: str, predictions, references) -> dict[str, float]:
    """The task's metrics for class predictions (or scores for STS-B) against references."""
    task = get_task(task_name)
    predictions, references = np.asarray(predictions), np.asarray(references)
    if predictions.shape != references.shape:
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references.")
    if task.is_regression:
        result = {
            "pearson": float(stats.pearsonr(predictions, references)[0]),
            "spearmanr": float(stats.spearmanr(predictions, references)[0]),
        }
    elif task.name == "cola":
        result = {"matthews_correlation": matthews_correlation(predictions, references)}
    elif "f1" in task.metrics:
        result = {"accuracy": accuracy(predictions, references), "f1": f1_positive(predictions, references)}
    else:
        result = {"accuracy": accuracy(predictions, references)}
    if len(result) > 1:
        result["combined_score"] = float(np.mean(list(result.values())))
    return result
