"""Macaron-BERT: BERT whose layers follow the Strang–Marchuk splitting scheme, eq. (17)–(19).

The layer is :class:`~hf_variants.core.schemes.strang.modeling_strang.StrangLayer` (``layer_scheme="strang"``);
embeddings, heads and attention are the shared BERT-style core.
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
from ..core.schemes.strang.modeling_strang import StrangLayer
from .configuration_macaron_bert import MacaronBertConfig

#: The Macaron layer under its historical name.
MacaronBertLayer = StrangLayer


class MacaronBertPreTrainedModel(EncoderPreTrainedModel):
    config_class = MacaronBertConfig
    base_model_prefix = "macaron_bert"


class MacaronBertModel(MacaronBertPreTrainedModel, EncoderModel):
    """The bare Macaron-BERT encoder (embeddings → Macaron layers → final LN → pooler)."""


class MacaronBertForMaskedLM(MacaronBertPreTrainedModel, EncoderForMaskedLM):
    """Macaron-BERT with the masked-LM head (decoder tied to the word embeddings)."""

    base_model_class = MacaronBertModel


class MacaronBertForSequenceClassification(MacaronBertPreTrainedModel, EncoderForSequenceClassification):
    """Macaron-BERT with a sequence classification/regression head on the pooled output."""

    base_model_class = MacaronBertModel


class MacaronBertForTokenClassification(MacaronBertPreTrainedModel, EncoderForTokenClassification):
    """Macaron-BERT with a token classification head."""

    base_model_class = MacaronBertModel


class MacaronBertForQuestionAnswering(MacaronBertPreTrainedModel, EncoderForQuestionAnswering):
    """Macaron-BERT with an extractive question-answering (span) head."""

    base_model_class = MacaronBertModel


class MacaronBertForMultipleChoice(MacaronBertPreTrainedModel, EncoderForMultipleChoice):
    """Macaron-BERT with a multiple-choice head."""

    base_model_class = MacaronBertModel
