"""Layer scheme ``layer_scheme="strang"``: Macaron Net's layer (Lu et al. 2019), introduced by
Macaron-BERT and usable with every token mixer.

Lu et al. read a Transformer layer as one Lie–Trotter splitting step of a convection (FFN) –
diffusion (attention) ODE. The Strang–Marchuk scheme, eq. (14)–(16), splits the convection into two
half steps around the diffusion step, which gives the Macaron layer, eq. (17)–(19)::

    x̃ = x + ½ · FFN_down(x)          (17)
    x̂ = x̃ + MultiHeadAtt(x̃)          (18)
    x' = x̂ + ½ · FFN_up(x̂)           (19)

The ½ multiplies the FFN output (after dropout) before the residual add; attention has no factor.
Each FFN has half of ``intermediate_size`` (the matched BERT's), so parameters match BERT's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from ...encoder_layers import AttentionCall, FeedForward, LayerScheme, SublayerConnection

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig
    from ...inputs import TokenLayout


class StrangLayer(LayerScheme):
    """One Macaron layer, eq. (17)–(19), each sub-layer with its own residual LayerNorm; each of the two
    FFNs gets half of ``intermediate_size``. Its config fields are documented on
    :class:`.configuration_strang.StrangSpec`."""

    def __init__(self, config: EncoderConfig, layer_idx: int | None, make_attention: Callable[[], nn.Module]) -> None:
        super().__init__()
        position = config.layer_norm_position
        inner_size = config.intermediate_size // 2
        first_activation = config.first_ffn_activation or config.hidden_act
        chunk_size = config.chunk_size_feed_forward
        self.ffn_down = FeedForward(config.hidden_size, inner_size, first_activation, chunk_size=chunk_size)
        self.ffn_down_residual = SublayerConnection(config, position)
        self.attention = make_attention()
        self.attention_residual = SublayerConnection(config, position)
        self.ffn_up = FeedForward(config.hidden_size, inner_size, config.hidden_act, chunk_size=chunk_size)
        self.ffn_up_residual = SublayerConnection(config, position)

    def forward(
        self,
        hidden_states: torch.Tensor,
        layout: TokenLayout,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> torch.Tensor:
        hidden_states = self.ffn_down_residual(hidden_states, self.ffn_down, scale=0.5)  # eq. (17)
        attend = AttentionCall(self.attention, layout, context, output_attentions)
        hidden_states = self.attention_residual(hidden_states, attend)  # eq. (18)
        return self.ffn_up_residual(hidden_states, self.ffn_up, scale=0.5)  # eq. (19)
