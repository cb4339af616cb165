"""GLUE metrics exactly as GLUE defines them, in numpy/scipy (no network, no scikit-learn).

CoLA: Matthews correlation; STS-B: Pearson and Spearman correlation; MRPC and QQP: accuracy and F1
of the positive class; every other task: accuracy. ``combined_score`` is the mean of a task's metrics
when it has more than one, as transformers' run_glue reports.

Correlations of a constant predictor: Matthews correlation is 0 (scikit-learn's convention, which
GLUE's metric uses); Pearson and Spearman are undefined and reported as NaN (scipy's answer, which
GLUE's metric returns), with a warning that says why.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy import stats

from ..tasks import get_glue_task

logger = logging.getLogger(__name__)


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


def correlations(predictions: np.ndarray, references: np.ndarray) -> dict[str, float]:
    """Pearson and Spearman correlation; NaN (with a warning) when either side is constant."""
    for side, values in (("predictions", predictions), ("references", references)):
        if np.ptp(values) == 0:
            logger.warning(
                f"All {len(values)} {side} are equal ({float(values.flat[0]):.4g}): Pearson and Spearman "
                "correlations are undefined and reported as NaN."
            )
            return {"pearson": float("nan"), "spearmanr": float("nan")}
    return {
        "pearson": float(stats.pearsonr(predictions, references)[0]),
        "spearmanr": float(stats.spearmanr(predictions, references)[0]),
    }


def compute_glue_metrics(task_name: str, predictions, references) -> dict[str, float]:
    """The task's metrics for class predictions (or scores for STS-B) against references."""
    task = get_glue_task(task_name)
    predictions, references = np.asarray(predictions), np.asarray(references)
    if predictions.shape != references.shape:
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references.")
    if references.size == 0:
        raise ValueError(f"No examples to score for {task.name}.")
    if task.is_regression:
        result = correlations(predictions, references)
    elif "matthews_correlation" in task.metrics:
        result = {"matthews_correlation": matthews_correlation(predictions, references)}
    elif "f1" in task.metrics:
        result = {"accuracy": accuracy(predictions, references), "f1": f1_positive(predictions, references)}
    else:
        result = {"accuracy": accuracy(predictions, references)}
    if len(result) > 1:
        result["combined_score"] = float(np.mean(list(result.values())))
    return result
