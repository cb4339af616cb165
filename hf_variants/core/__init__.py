"""The shared core: config base, building blocks, encoder skeleton, heads and registration."""

from .configuration_encoder import EncoderConfig
from .modeling_encoder import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderModel,
    EncoderPreTrainedModel,
    TransformerLayer,
)
from .registration import AUTO_CLASS_BY_HEAD, VARIANTS, Variant, register_variant

__all__ = [
    "AUTO_CLASS_BY_HEAD",
    "VARIANTS",
    "EncoderConfig",
    "EncoderForMaskedLM",
    "EncoderForMultipleChoice",
    "EncoderForQuestionAnswering",
    "EncoderForSequenceClassification",
    "EncoderForTokenClassification",
    "EncoderModel",
    "EncoderPreTrainedModel",
    "TransformerLayer",
    "Variant",
    "register_variant",
]
