"""The N-ODE Transformer: each block integrates ``X'(t) = F(X(t), t)`` over ``[0, T_F]`` with an
adaptive solver, so the number of function evaluations (the "depth") adapts to the input
(Baier-Reinio & De Sterck 2020, §3).

The block is :class:`~hf_variants.core.schemes.ode.modeling_ode.NodeTransformerBlock` (``layer_scheme="ode"``; the
paper's vanilla eq. (1) baseline, its matched control, is ``layer_scheme="vanilla"``:
:class:`~hf_variants.core.schemes.vanilla.modeling_vanilla.VanillaTransformerBlock`);
``diagnostics`` holds ``nfe_per_block`` and ``nfe_total`` and, when λ > 0, ``kinetic_energy`` per
sequence (summed over blocks); the weighted kinetic regulariser is ``auxiliary_loss``.
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
from .configuration_node_transformer import NodeTransformerConfig


class NodeTransformerPreTrainedModel(EncoderPreTrainedModel):
    config_class = NodeTransformerConfig
    base_model_prefix = "node_transformer"


class NodeTransformerModel(NodeTransformerPreTrainedModel, EncoderModel):
    """The bare N-ODE Transformer (diagnostics: NFE per block, kinetic energy)."""


class NodeTransformerForMaskedLM(NodeTransformerPreTrainedModel, EncoderForMaskedLM):
    """N-ODE Transformer with the masked-LM head (decoder tied to the word embeddings)."""

    base_model_class = NodeTransformerModel


class NodeTransformerForSequenceClassification(NodeTransformerPreTrainedModel, EncoderForSequenceClassification):
    """N-ODE Transformer with a sequence classification/regression head on the pooled output."""

    base_model_class = NodeTransformerModel


class NodeTransformerForTokenClassification(NodeTransformerPreTrainedModel, EncoderForTokenClassification):
    """N-ODE Transformer with a token classification head."""

    base_model_class = NodeTransformerModel


class NodeTransformerForQuestionAnswering(NodeTransformerPreTrainedModel, EncoderForQuestionAnswering):
    """N-ODE Transformer with an extractive question-answering (span) head."""

    base_model_class = NodeTransformerModel


class NodeTransformerForMultipleChoice(NodeTransformerPreTrainedModel, EncoderForMultipleChoice):
    """N-ODE Transformer with a multiple-choice head."""

    base_model_class = NodeTransformerModel
