"""The BERT control: ``transformers.BertModel``'s computation on the hf-variants core.

:func:`state_dict_from_bert` renames a ``transformers`` BERT state dict (``BertModel`` or
``BertFor*``) to this core's names, so that a BERT checkpoint can start a control model.
"""

from __future__ import annotations

import re

import torch

from ..core.modeling_encoder import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderModel,
    EncoderPreTrainedModel,
)
from .configuration_bert_control import BertControlConfig

#: transformers BERT name → core name (regular expressions over the full parameter name).
_BERT_RENAMES = (
    (r"^bert\.", "bert_control."),
    (r"\.attention\.self\.(query|key|value)\.", r".attention.\1."),
    (r"\.attention\.output\.dense\.", ".attention.output."),
    (r"\.attention\.output\.LayerNorm\.", ".attention_residual.LayerNorm."),
    (r"\.intermediate\.dense\.", ".feed_forward.fc_in."),
    (r"\.output\.dense\.", ".feed_forward.fc_out."),
    (r"\.output\.LayerNorm\.", ".feed_forward_residual.LayerNorm."),
    (r"^cls\.predictions\.transform\.", "lm_head."),
    (r"^cls\.predictions\.decoder\.", "lm_head.decoder."),
    (r"^cls\.predictions\.bias$", "lm_head.decoder.bias"),
)


def state_dict_from_bert(state_dict: dict[str, torch.Tensor], base_model: bool = False) -> dict[str, torch.Tensor]:
    """A ``transformers`` BERT state dict under this core's names. ``base_model=True`` for the
    state dict of a bare ``BertModel`` (no ``bert.`` prefix), to load into :class:`BertControlModel`."""
    renamed = {}
    for name, tensor in state_dict.items():
        if name.endswith("position_ids"):
            continue  # a buffer of older BERT checkpoints; the core builds positions on the fly
        for pattern, replacement in _BERT_RENAMES:
            if base_model and pattern == r"^bert\.":
                continue
            name = re.sub(pattern, replacement, name)
        renamed[name] = tensor
    return renamed


class BertControlPreTrainedModel(EncoderPreTrainedModel):
    config_class = BertControlConfig
    base_model_prefix = "bert_control"


class BertControlModel(BertControlPreTrainedModel, EncoderModel):
    """The bare BERT control encoder (embeddings → layers → pooler)."""


class BertControlForMaskedLM(BertControlPreTrainedModel, EncoderForMaskedLM):
    """The BERT control with the masked-LM head (decoder tied to the word embeddings)."""

    base_model_class = BertControlModel


class BertControlForSequenceClassification(BertControlPreTrainedModel, EncoderForSequenceClassification):
    """The BERT control with a sequence classification/regression head on the pooled output."""

    base_model_class = BertControlModel


class BertControlForTokenClassification(BertControlPreTrainedModel, EncoderForTokenClassification):
    """The BERT control with a token classification head."""

    base_model_class = BertControlModel


class BertControlForQuestionAnswering(BertControlPreTrainedModel, EncoderForQuestionAnswering):
    """The BERT control with an extractive question-answering (span) head."""

    base_model_class = BertControlModel


class BertControlForMultipleChoice(BertControlPreTrainedModel, EncoderForMultipleChoice):
    """The BERT control with a multiple-choice head."""

    base_model_class = BertControlModel
