"""Implementation of ``attention_type="mean"`` (spec: :mod:`.configuration_mean`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from ...encoder_layers import TokenMixer

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig
    from ...inputs import TokenLayout


class MeanMixer(TokenMixer, nn.Module):
    """``h_i = W_o ( (1/|R_i|) Σ_{j ∈ R_i} W_v x_j )`` for every token i, R_i the real (non-padding) tokens of
    its document (its row, unless rows are packed): softmax attention with every score equal, so no token weighs
    another. The value and output projections of :class:`~hf_variants.core.attention.MultiHeadSelfAttention`,
    at its width; no attention probabilities (``output_attentions=True`` gives ``None``) and no query–key
    product, so rotary positions leave it blind to order."""

    def __init__(self, config: EncoderConfig, layer_idx: int | None = None) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.value = nn.Linear(config.hidden_size, config.attention_width)
        self.output = nn.Linear(config.attention_width, config.hidden_size)

    def forward(
        self,
        hidden_states: torch.Tensor,
        layout: TokenLayout,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, None]:
        values = self.value(hidden_states)
        documents = layout.document_one_hot(values.dtype)
        if documents is not None:  # (B, N, K): each real token's document
            sums = torch.einsum("bnk,bnd->bkd", documents, values)
            means = sums / documents.sum(dim=1)[..., None].clamp(min=1)
            return self.output(torch.einsum("bnk,bkd->bnd", documents, means)), None
        if layout.tensor is None:
            mean = values.mean(dim=1, keepdim=True)
        else:
            weights = layout.tensor.to(values.dtype).unsqueeze(-1)
            mean = (values * weights).sum(dim=1, keepdim=True) / weights.sum(dim=1, keepdim=True).clamp(min=1)
        return self.output(mean).expand_as(hidden_states), None
