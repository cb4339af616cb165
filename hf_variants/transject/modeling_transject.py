"""TransJect: an encoder whose layers are injective and Lipschitz, so distances between token
representations are preserved within a bound (paper §3, Theorems 1–2).

* Embeddings (here): ``X⁽⁰⁾ = concat(Emb(x), PE)``, d/2 each (§3.4), so no two tokens share an embedding.
* Orthogonal attention ``X U Σ V`` with Σ from ``X⁽⁰⁾ᵀX⁽⁰⁾`` (Theorem 1):
  :mod:`hf_variants.core.mixers.orthogonal.modeling_orthogonal` (``attention_type="orthogonal"``).
* Injective residuals, mixture of experts and the orthogonal FFN (eq. 3–6), Entropic-TransJect (eq. 4):
  :mod:`hf_variants.core.schemes.injective.modeling_injective` (``layer_scheme="injective"``).

With both, each layer is ``(1 + |s|)²``-Lipschitz and ``(1 − |s|)²``-co-Lipschitz; with ``|s| < 1/L``
the L-layer encoder stays within ``[(1 − 1/L)^{2L}, e²]`` (Theorem 2).
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn
from transformers import initialization as init

from ..core.inputs import embedding_ids
from ..core.modeling_encoder import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderModel,
    EncoderPreTrainedModel,
)
from ..core.schemes.injective.modeling_injective import InjectiveLayer
from .configuration_transject import TransJectConfig

#: The TransJect layer under its historical name.
TransJectLayer = InjectiveLayer


def sinusoidal_positions(position_ids: torch.Tensor, width: int, dtype: torch.dtype) -> torch.Tensor:
    """Vaswani et al.'s code ``PE[p, 2i] = sin(p / 10000^{2i/w})``, ``PE[p, 2i+1] = cos(…)``, computed
    on the fly (nothing stored that could come back stale after loading)."""
    frequencies = torch.exp(
        torch.arange(0, width, 2, device=position_ids.device, dtype=torch.float32) * (-math.log(10000.0) / width)
    )
    angles = position_ids.float()[..., None] * frequencies
    code = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)[..., :width]
    return code.to(dtype)


class TokenEmbedding(nn.Embedding):
    """The token half of the injective embedding, started as ``config.embedding_init`` says."""

    def init_extra_parameters(self, config: TransJectConfig) -> None:
        """``"standard_normal"``: the authors' N(0, 1) (``nn.Embedding``'s own), padding row 0 — after
        the N(0, initializer_range²) every embedding gets first; never on loaded weights."""
        if config.embedding_init != "standard_normal" or getattr(self.weight, "_is_hf_initialized", False):
            return
        init.normal_(self.weight, mean=0.0, std=1.0)
        if self.padding_idx is not None:
            self.weight[self.padding_idx].zero_()


class InjectiveEmbeddings(nn.Module):
    """``concat(Emb(x), PE)``: d/2 learned token embedding and d/2 sinusoidal position code (§3.4)."""

    def __init__(self, config: TransJectConfig) -> None:
        super().__init__()
        self.config = config
        half = config.word_embedding_size
        self.word_embeddings = TokenEmbedding(config.vocab_size, half, padding_idx=config.pad_token_id)
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, half) if config.use_token_type_embeddings else None
        )
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        shape, position_ids, token_type_ids = embedding_ids(
            input_ids,
            inputs_embeds,
            token_type_ids,
            position_ids,
            self.word_embeddings.num_embeddings,
            self.config.max_position_embeddings,
            self.config.type_vocab_size,
            self.word_embeddings.embedding_dim,
        )
        tokens = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        if self.token_type_embeddings is not None:
            tokens = tokens + self.token_type_embeddings(token_type_ids)
        positions = sinusoidal_positions(position_ids, tokens.shape[-1], tokens.dtype).expand(shape[0], -1, -1)
        return self.dropout(torch.cat([tokens, positions], dim=-1))


class TransJectPreTrainedModel(EncoderPreTrainedModel):
    config_class = TransJectConfig
    base_model_prefix = "transject"
    embeddings_class = InjectiveEmbeddings

    def set_orthogonal_map(self, orthogonal_map: str) -> None:
        """Deprecated (hf-variants 0.2's name): ``model.reparametrize(orthogonal_map=...)``, which every
        model with orthogonal weights has, whatever its variant."""
        warnings.warn(
            "set_orthogonal_map is deprecated and will be removed in hf-variants 0.4; use "
            f"model.reparametrize(orthogonal_map={orthogonal_map!r}).",
            FutureWarning,
            stacklevel=2,
        )
        self.reparametrize(orthogonal_map=orthogonal_map)


class TransJectModel(TransJectPreTrainedModel, EncoderModel):
    """The bare TransJect encoder; ``auxiliary_loss`` carries the weighted eigen-reconstruction loss
    (``approx`` mode) and ``diagnostics["reconstruction_loss"]`` the unweighted one."""


class TransJectForMaskedLM(TransJectPreTrainedModel, EncoderForMaskedLM):
    """TransJect with the masked-LM head; the decoder is tied to the d/2-wide token embeddings."""

    base_model_class = TransJectModel


class TransJectForSequenceClassification(TransJectPreTrainedModel, EncoderForSequenceClassification):
    """TransJect with a sequence classification/regression head on the pooled output."""

    base_model_class = TransJectModel


class TransJectForTokenClassification(TransJectPreTrainedModel, EncoderForTokenClassification):
    """TransJect with a token classification head."""

    base_model_class = TransJectModel


class TransJectForQuestionAnswering(TransJectPreTrainedModel, EncoderForQuestionAnswering):
    """TransJect with an extractive question-answering (span) head."""

    base_model_class = TransJectModel


class TransJectForMultipleChoice(TransJectPreTrainedModel, EncoderForMultipleChoice):
    """TransJect with a multiple-choice head."""

    base_model_class = TransJectModel
