"""Macaron-BERT: BERT whose layers follow the Strang–Marchuk splitting scheme.

Lu et al. (2019) read a Transformer layer as one Lie–Trotter splitting step of a convection
(FFN) – diffusion (attention) ODE. The Strang–Marchuk scheme, eq. (14)–(16), splits the convection
into two half steps around the diffusion step, which gives the Macaron layer, eq. (17)–(19)::

    x̃ = x + ½ · FFN_down(x)          (17)
    x̂ = x̃ + MultiHeadAtt(x̃)          (18)
    x' = x̂ + ½ · FFN_up(x̂)           (19)

The ½ multiplies the FFN output (after dropout) before the residual add; attention has no factor.
Everything else (embeddings, heads, attention) is the shared BERT-style core.
"""

from __future__ import annotations

import torch
from transformers.modeling_layers import GradientCheckpointingLayer

from ..core.encoder_layers import FeedForward, MultiHeadSelfAttention, SublayerConnection
from ..core.modeling_encoder import (
    AttentionCall,
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderModel,
    EncoderPreTrainedModel,
)
from .configuration_macaron_bert import MacaronBertConfig


class MacaronBertLayer(GradientCheckpointingLayer):
    """One Macaron layer, eq. (17)–(19), each sub-layer with its own residual LayerNorm."""

    def __init__(self, config: MacaronBertConfig, layer_idx: int | None = None) -> None:
        super().__init__()
        position = config.layer_norm_position
        first_activation = config.first_ffn_activation or config.hidden_act
        self.ffn_down = FeedForward(config.hidden_size, config.ffn_inner_size, first_activation)
        self.ffn_down_residual = SublayerConnection(config, position)
        self.attention = MultiHeadSelfAttention(config, layer_idx=layer_idx)
        self.attention_residual = SublayerConnection(config, position)
        self.ffn_up = FeedForward(config.hidden_size, config.ffn_inner_size, config.hidden_act)
        self.ffn_up_residual = SublayerConnection(config, position)

    def forward(
        self,
        hidden_states: torch.Tensor,
        padding_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        hidden_states = self.ffn_down_residual(hidden_states, self.ffn_down, scale=0.5)  # eq. (17)
        attend = AttentionCall(self.attention, padding_mask, output_attentions)
        hidden_states = self.attention_residual(hidden_states, attend)  # eq. (18)
        hidden_states = self.ffn_up_residual(hidden_states, self.ffn_up, scale=0.5)  # eq. (19)
        return hidden_states, attend.weights


class MacaronBertPreTrainedModel(EncoderPreTrainedModel):
    config_class = MacaronBertConfig
    base_model_prefix = "macaron_bert"
    layer_class = MacaronBertLayer


class MacaronBertModel(MacaronBertPreTrainedModel, EncoderModel):
    """The bare Macaron-BERT encoder (embeddings → Macaron layers → final LN → pooler)."""


class MacaronBertForMaskedLM(MacaronBertPreTrainedModel, EncoderForMaskedLM):
    """Macaron-BERT with the masked-LM head (decoder tied to the word embeddings)."""


class MacaronBertForSequenceClassification(MacaronBertPreTrainedModel, EncoderForSequenceClassification):
    """Macaron-BERT with a sequence classification/regression head on the pooled output."""


class MacaronBertForTokenClassification(MacaronBertPreTrainedModel, EncoderForTokenClassification):
    """Macaron-BERT with a token classification head."""


class MacaronBertForQuestionAnswering(MacaronBertPreTrainedModel, EncoderForQuestionAnswering):
    """Macaron-BERT with an extractive question-answering (span) head."""


class MacaronBertForMultipleChoice(MacaronBertPreTrainedModel, EncoderForMultipleChoice):
    """Macaron-BERT with a multiple-choice head."""
