"""Scaled dot-product multi-head self-attention (Vaswani et al. 2017, eq. 1), BERT's token mixer: the
building block that ``attention_type="softmax"`` registers and that other ideas extend (MGK's mixture of
keys, the N-ODE Transformer's time-dependent attention)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import eager_attention_forward

from .encoder_layers import TokenMixer
from .inputs import TokenLayout
from .positions import rotate

if TYPE_CHECKING:
    from .configuration_encoder import EncoderConfig


class MultiHeadSelfAttention(TokenMixer, nn.Module):
    """``attention_type="softmax"``: scaled dot-product multi-head self-attention with eager and SDPA
    implementations.

    ``softmax(Q Kᵀ / √D) V`` per head (Vaswani et al. 2017, eq. 1), followed by the output projection
    from ``heads * head_dim`` to ``hidden_size``. The implementation comes from
    ``config._attn_implementation`` through ``ALL_ATTENTION_FUNCTIONS``; attention probabilities are
    only materialised by the eager path, which is therefore used whenever ``output_attentions=True``. With
    rotary positions, queries and keys are rotated by their positions first (RoFormer eq. 34); a query sees the
    real keys of its own document (packed rows).
    """

    #: The affine map of the four projections (the N-ODE Transformer swaps in ``Ax + b + ct``).
    projection_class: type[nn.Linear] = nn.Linear

    def __init__(self, config: EncoderConfig, layer_idx: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.head_dim = config.attention_head_size
        self.scaling = self.head_dim**-0.5
        self.is_causal = False  # the sdpa integration assumes causal unless told otherwise
        width = config.attention_width
        self.query = self.projection_class(config.hidden_size, width)
        self.key = self.projection_class(config.hidden_size, width)
        self.value = self.projection_class(config.hidden_size, width)
        self.output = self.projection_class(width, config.hidden_size)
        self.attention_dropout = config.attention_probs_dropout_prob

    def split_heads(self, projected: torch.Tensor) -> torch.Tensor:
        """``(batch, seq, heads * head_dim)`` → ``(batch, heads, seq, head_dim)``."""
        batch, seq_len, _ = projected.shape
        return projected.view(batch, seq_len, -1, self.head_dim).transpose(1, 2)

    def forward(
        self,
        hidden_states: torch.Tensor,
        layout: TokenLayout,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        query = self.split_heads(self.query(hidden_states))
        key = self.split_heads(self.key(hidden_states))
        value = self.split_heads(self.value(hidden_states))
        if layout.rotary is not None:
            query, key = rotate(query, layout.rotary), rotate(key, layout.rotary)
        implementation = self.config._attn_implementation or "eager"
        if output_attentions or implementation == "eager":
            attention: Callable = eager_attention_forward
            mask = layout.additive(query.dtype)
        else:
            attention = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
            mask = layout.flex(query.shape[-2]) if implementation == "flex_attention" else layout.sdpa()
        context, weights = attention(
            self,
            query,
            key,
            value,
            mask,
            scaling=self.scaling,
            dropout=self.attention_dropout if self.training else 0.0,
        )
        context = context.reshape(*hidden_states.shape[:-1], -1)
        return self.output(context), weights if output_attentions else None
