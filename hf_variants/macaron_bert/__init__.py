"""Macaron-BERT (``model_type="macaron_bert"``): FFN(½) → self-attention → FFN(½) layers."""

from ..core.registration import register_variant
from .configuration_macaron_bert import MacaronBertConfig
from .modeling_macaron_bert import (
    MacaronBertForMaskedLM,
    MacaronBertForMultipleChoice,
    MacaronBertForQuestionAnswering,
    MacaronBertForSequenceClassification,
    MacaronBertForTokenClassification,
    MacaronBertLayer,
    MacaronBertModel,
    MacaronBertPreTrainedModel,
)

VARIANT = register_variant(
    MacaronBertConfig,
    MacaronBertModel,
    MacaronBertForMaskedLM,
    MacaronBertForSequenceClassification,
    MacaronBertForTokenClassification,
    MacaronBertForQuestionAnswering,
    MacaronBertForMultipleChoice,
)

__all__ = [
    "VARIANT",
    "MacaronBertConfig",
    "MacaronBertForMaskedLM",
    "MacaronBertForMultipleChoice",
    "MacaronBertForQuestionAnswering",
    "MacaronBertForSequenceClassification",
    "MacaronBertForTokenClassification",
    "MacaronBertLayer",
    "MacaronBertModel",
    "MacaronBertPreTrainedModel",
]
