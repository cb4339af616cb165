"""TransJect (``model_type="transject"``): orthogonal attention experts with injective residuals."""

from ..core.mixers.orthogonal.modeling_orthogonal import EigenvalueEstimator, OrthogonalAttention
from ..core.registration import register_variant
from .configuration_transject import TransJectConfig
from .modeling_transject import (
    InjectiveEmbeddings,
    TransJectForMaskedLM,
    TransJectForMultipleChoice,
    TransJectForQuestionAnswering,
    TransJectForSequenceClassification,
    TransJectForTokenClassification,
    TransJectLayer,
    TransJectModel,
    TransJectPreTrainedModel,
)

VARIANT = register_variant(
    TransJectConfig,
    TransJectModel,
    TransJectForMaskedLM,
    TransJectForSequenceClassification,
    TransJectForTokenClassification,
    TransJectForQuestionAnswering,
    TransJectForMultipleChoice,
)

__all__ = [
    "VARIANT",
    "EigenvalueEstimator",
    "InjectiveEmbeddings",
    "OrthogonalAttention",
    "TransJectConfig",
    "TransJectForMaskedLM",
    "TransJectForMultipleChoice",
    "TransJectForQuestionAnswering",
    "TransJectForSequenceClassification",
    "TransJectForTokenClassification",
    "TransJectLayer",
    "TransJectModel",
    "TransJectPreTrainedModel",
]
