"""Implementation of ``layer_scheme="lie_trotter"``, BERT's layer (spec: :mod:`.configuration_lie_trotter`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from ...encoder_layers import AttentionCall, FeedForward, LayerScheme, SublayerConnection

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig
    from ...inputs import TokenLayout


class TransformerLayer(LayerScheme):
    """``layer_scheme="lie_trotter"``, BERT's layer: ``x̃ = x + MHSA(x)``, ``x' = x̃ + FFN(x̃)``.

    The Lie–Trotter splitting step of Lu et al. (2019), eq. (12)–(13), with LayerNorm placed as
    ``config.layer_norm_position`` says and any token mixer in place of MHSA.
    """

    def __init__(self, config: EncoderConfig, layer_idx: int | None, make_attention: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.attention = make_attention()
        self.attention_residual = SublayerConnection(config, config.layer_norm_position)
        self.feed_forward = FeedForward.from_config(config)
        self.feed_forward_residual = SublayerConnection(config, config.layer_norm_position)

    def forward(
        self,
        hidden_states: torch.Tensor,
        layout: TokenLayout,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> torch.Tensor:
        attend = AttentionCall(self.attention, layout, context, output_attentions)
        hidden_states = self.attention_residual(hidden_states, attend)
        return self.feed_forward_residual(hidden_states, self.feed_forward)
