"""BERT control (``model_type="bert_control"``): BERT on this package's core, the baseline of every comparison."""

from ..core.registration import register_variant
from .configuration_bert_control import BertControlConfig
from .modeling_bert_control import (
    BertControlForMaskedLM,
    BertControlForMultipleChoice,
    BertControlForQuestionAnswering,
    BertControlForSequenceClassification,
    BertControlForTokenClassification,
    BertControlModel,
    BertControlPreTrainedModel,
    state_dict_from_bert,
)

VARIANT = register_variant(
    BertControlConfig,
    BertControlModel,
    BertControlForMaskedLM,
    BertControlForSequenceClassification,
    BertControlForTokenClassification,
    BertControlForQuestionAnswering,
    BertControlForMultipleChoice,
)

__all__ = [
    "VARIANT",
    "BertControlConfig",
    "BertControlForMaskedLM",
    "BertControlForMultipleChoice",
    "BertControlForQuestionAnswering",
    "BertControlForSequenceClassification",
    "BertControlForTokenClassification",
    "BertControlModel",
    "BertControlPreTrainedModel",
    "state_dict_from_bert",
]
