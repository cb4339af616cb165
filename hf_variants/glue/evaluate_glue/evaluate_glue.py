"""An `evaluate` metric module for GLUE that works offline:
``evaluate.load(hf_variants.glue.EVALUATE_MODULE, "sst2")`` (the path of this file), like
``evaluate.load("glue", "sst2")`` without the Hub."""

import datasets
import evaluate

from hf_variants.glue.metrics import compute_glue_metrics
from hf_variants.tasks import get_glue_task

_DESCRIPTION = (
    "GLUE metrics: Matthews correlation (CoLA), Pearson/Spearman (STS-B), accuracy and F1 (MRPC, QQP), accuracy."
)


class EvaluateGlue(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        try:
            task = get_glue_task(self.config_name)
        except ValueError as error:
            raise KeyError(str(error)) from None
        value = datasets.Value("float32" if task.is_regression else "int64")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description="predictions and references: class ids (float scores for a regression task)",
            features=datasets.Features({"predictions": value, "references": value}),
        )

    def _compute(self, predictions, references):
        return compute_glue_metrics(self.config_name, predictions, references)
