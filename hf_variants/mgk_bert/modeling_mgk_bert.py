"""MGK-BERT: BERT whose attention keys are mixtures of Gaussians (Transformer-MGK) or of linear
keys (Transformer-MLK), Nguyen et al. (2022).

The attention is :mod:`hf_variants.core.mixers.mgk.modeling_mgk` (``attention_type="mgk"`` / ``"mlk"``); the
layer is BERT's (``layer_scheme="lie_trotter"``).
"""

from __future__ import annotations

from ..core.modeling_encoder import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderModel,
    EncoderPreTrainedModel,
)
from .configuration_mgk_bert import MgkBertConfig


class MgkBertPreTrainedModel(EncoderPreTrainedModel):
    config_class = MgkBertConfig
    base_model_prefix = "mgk_bert"


class MgkBertModel(MgkBertPreTrainedModel, EncoderModel):
    """The bare MGK-BERT encoder."""


class MgkBertForMaskedLM(MgkBertPreTrainedModel, EncoderForMaskedLM):
    """MGK-BERT with the masked-LM head (decoder tied to the word embeddings)."""

    base_model_class = MgkBertModel


class MgkBertForSequenceClassification(MgkBertPreTrainedModel, EncoderForSequenceClassification):
    """MGK-BERT with a sequence classification/regression head on the pooled output."""

    base_model_class = MgkBertModel


class MgkBertForTokenClassification(MgkBertPreTrainedModel, EncoderForTokenClassification):
    """MGK-BERT with a token classification head."""

    base_model_class = MgkBertModel


class MgkBertForQuestionAnswering(MgkBertPreTrainedModel, EncoderForQuestionAnswering):
    """MGK-BERT with an extractive question-answering (span) head."""

    base_model_class = MgkBertModel


class MgkBertForMultipleChoice(MgkBertPreTrainedModel, EncoderForMultipleChoice):
    """MGK-BERT with a multiple-choice head."""

    base_model_class = MgkBertModel
