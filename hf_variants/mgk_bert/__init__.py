"""MGK-BERT (``model_type="mgk_bert"``): attention with a mixture of Gaussian keys (MGK) or of
linear keys (MLK)."""

from ..core.mixers.mgk.modeling_mgk import LinearMixtureAttention, MixtureOfKeysAttention
from ..core.registration import register_variant
from .configuration_mgk_bert import MgkBertConfig
from .modeling_mgk_bert import (
    MgkBertForMaskedLM,
    MgkBertForMultipleChoice,
    MgkBertForQuestionAnswering,
    MgkBertForSequenceClassification,
    MgkBertForTokenClassification,
    MgkBertModel,
    MgkBertPreTrainedModel,
)

VARIANT = register_variant(
    MgkBertConfig,
    MgkBertModel,
    MgkBertForMaskedLM,
    MgkBertForSequenceClassification,
    MgkBertForTokenClassification,
    MgkBertForQuestionAnswering,
    MgkBertForMultipleChoice,
)

__all__ = [
    "VARIANT",
    "LinearMixtureAttention",
    "MgkBertConfig",
    "MgkBertForMaskedLM",
    "MgkBertForMultipleChoice",
    "MgkBertForQuestionAnswering",
    "MgkBertForSequenceClassification",
    "MgkBertForTokenClassification",
    "MgkBertModel",
    "MgkBertPreTrainedModel",
    "MixtureOfKeysAttention",
]
