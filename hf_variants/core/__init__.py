"""The shared core: config base, the building blocks ideas share (``attention``, ``*_orthogonal_weights``,
``encoder_layers``), the two composition registries (token mixers and layer schemes), encoder skeleton, heads and
registration."""

from .composition import ATTENTION_TYPES, LAYER_SCHEMES, build_layer
from .configuration_encoder import EncoderConfig
from .encoder_layers import LayerScheme, TokenMixer
from .ideas import ConfigurableIdea, MatchedSize
from .modeling_encoder import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderModel,
    EncoderPreTrainedModel,
)
from .registration import AUTO_CLASS_BY_HEAD, VARIANTS, Variant, register_variant
from .schemes.lie_trotter.modeling_lie_trotter import TransformerLayer

__all__ = [
    "ATTENTION_TYPES",
    "AUTO_CLASS_BY_HEAD",
    "LAYER_SCHEMES",
    "VARIANTS",
    "ConfigurableIdea",
    "EncoderConfig",
    "EncoderForMaskedLM",
    "EncoderForMultipleChoice",
    "EncoderForQuestionAnswering",
    "EncoderForSequenceClassification",
    "EncoderForTokenClassification",
    "EncoderModel",
    "EncoderPreTrainedModel",
    "LayerScheme",
    "MatchedSize",
    "TokenMixer",
    "TransformerLayer",
    "Variant",
    "build_layer",
    "register_variant",
]
