"""Layer scheme ``layer_scheme="vanilla"``: the N-ODE Transformer paper's vanilla block, eq. (1)
(Baier-Reinio & De Sterck 2020, §2), the N-ODE scheme's matched control and usable with every token mixer::

    Y  = X + MHSA(X)
    X' = Y + FFN(Y)                                    (1)

BERT's layer (``"lie_trotter"``) without its residual LayerNorms, built from the ODE block's pieces
(time-independent maps): one explicit step where the N-ODE block solves ``X' = F(X, t)`` (its eq. (9)
dynamics take exactly this step with one Euler step of size 1). ``use_layer_norm`` puts a LayerNorm
before each sub-layer, as it does inside the ODE block's F.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from ...encoder_layers import FeedForward, LayerScheme, optional_pre_norms

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig
    from ...inputs import TokenLayout


class VanillaTransformerBlock(LayerScheme):
    """Eq. (1): ``Y = X + MHSA(X)``, ``X' = Y + FFN(Y)``, with dropout after each sub-layer (its config
    field: :class:`.configuration_vanilla.VanillaSpec`)."""

    def __init__(self, config: EncoderConfig, layer_idx: int | None, make_attention: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.attention = make_attention()
        self.feed_forward = FeedForward.from_config(config)
        self.attention_norm, self.feed_forward_norm = optional_pre_norms(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        hidden_states: torch.Tensor,
        layout: TokenLayout,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> torch.Tensor:
        normed = self.attention_norm(hidden_states)
        attended = self.attention(normed, layout, *context, output_attentions=output_attentions)[0]
        hidden_states = hidden_states + self.dropout(attended)
        return hidden_states + self.dropout(self.feed_forward(self.feed_forward_norm(hidden_states)))
