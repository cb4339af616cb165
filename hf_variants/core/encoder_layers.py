"""Building blocks shared by the variants: embeddings, feed-forward, residual connections, pooler and
the masked-LM prediction head — and the two base classes of the registries' implementations
(:class:`TokenMixer`, :class:`LayerScheme`). Softmax attention and BERT's layer are ideas like the
others: ``mixers/softmax`` and ``schemes/lie_trotter``.

Naming follows BERT where it helps a reader (``word_embeddings``, ``LayerNorm``, ``query``/``key``/
``value``); variants import these blocks instead of re-writing them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.pytorch_utils import apply_chunking_to_forward

from .ideas import ConfigurableIdea, LayerSchemeSpec
from .inputs import TokenLayout, embedding_ids

if TYPE_CHECKING:
    from .configuration_encoder import EncoderConfig

#: What a backbone computes once per forward for its layers: extra tensors every layer receives
#: (after ``hidden_states`` and the :class:`~hf_variants.core.inputs.TokenLayout`), a weighted auxiliary loss,
#: and named diagnostics.
LayerInputs = tuple[tuple[torch.Tensor, ...], torch.Tensor | None, dict[str, torch.Tensor]]


class TokenMixer(ConfigurableIdea):
    """Base of the ``attention_type`` registry (``hf_variants.core.composition.ATTENTION_TYPES``).

    A token mixer is an ``nn.Module`` built as ``cls(config, layer_idx=...)`` and called as
    ``mixer(hidden_states, layout, *context, output_attentions=False)``; it returns
    ``(output (B, N, hidden), attention probabilities (B, H, N, N) or None)``, the probabilities only when
    ``output_attentions`` (transformers' output recorders take them from here, as from BERT's attention
    module). ``layout`` is the forward's :class:`~hf_variants.core.inputs.TokenLayout` (its padding ``tensor``,
    packed ``documents`` and ``rotary`` positions, and the masks built once per forward); ``context`` are the
    per-forward tensors its :attr:`context_module` computes once from the embeddings.
    """

    #: ``(backbone attribute, module class)`` built once per backbone; its ``layer_inputs(embeddings,
    #: padding_mask)`` returns :data:`LayerInputs` (e.g. TransJect's eigenvalues Σ). ``None``: no context.
    context_module: ClassVar[tuple[str, type[nn.Module]] | None] = None


class LayerScheme(LayerSchemeSpec, GradientCheckpointingLayer):
    """Base of the ``layer_scheme`` registry (``hf_variants.core.composition.LAYER_SCHEMES``).

    A layer scheme composes a layer's sub-steps around a token mixer it receives as a factory:
    ``cls.build(config, layer_idx, make_attention)``. Called as ``layer(hidden_states, layout,
    *context, output_attentions=...)``, it returns the new hidden states (a tensor, as transformers 5's
    layers do: attention probabilities are recorded from the token mixer); :meth:`summarize_layers` turns
    what the layers kept of this forward pass (e.g. the N-ODE blocks' function evaluations) into an
    auxiliary loss and diagnostics.
    """

    @classmethod
    def build(
        cls, config: EncoderConfig, layer_idx: int | None, make_attention: Callable[[], nn.Module]
    ) -> LayerScheme:
        return cls(config, layer_idx, make_attention)

    @classmethod
    def summarize_layers(
        cls, config: EncoderConfig, layers: list[nn.Module], padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        """What the stack's layers kept of this forward pass → (weighted auxiliary loss or None, diagnostics)."""
        return None, {}


class EncoderEmbeddings(nn.Module):
    """BERT embeddings: word + learned absolute position + token type, then LayerNorm and dropout; with
    rotary positions (``position_embedding_type="rotary"``, applied inside attention) no position table.

    Position and token-type ids default to ``arange(seq_len)`` and zeros, built on the fly (no
    buffers that could come back stale after ``from_pretrained``). Token ids outside the vocabulary
    and sequences longer than the position table raise ``ValueError``.
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = None  # rotary positions are applied inside attention
        if config.position_embedding_type == "absolute":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        _, position_ids, token_type_ids = embedding_ids(
            input_ids,
            inputs_embeds,
            token_type_ids,
            position_ids,
            self.word_embeddings.num_embeddings,
            None if self.position_embeddings is None else self.position_embeddings.num_embeddings,
            self.token_type_embeddings.num_embeddings,
            self.word_embeddings.embedding_dim,
        )
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids)
        if self.position_embeddings is not None:
            embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class FeedForward(nn.Module):
    """Position-wise feed-forward network ``act(x W1 + b1) W2 + b2`` (``linear_class`` builds the two
    affine maps). ``chunk_size`` > 0 runs it on that many positions at a time (``config.
    chunk_size_feed_forward``, as in BERT): the same result with a smaller activation peak."""

    def __init__(
        self,
        hidden_size: int,
        inner_size: int,
        activation: str,
        linear_class: type[nn.Linear] = nn.Linear,
        chunk_size: int = 0,
    ) -> None:
        super().__init__()
        self.fc_in = linear_class(hidden_size, inner_size)
        self.activation = ACT2FN[activation]
        self.fc_out = linear_class(inner_size, hidden_size)
        self.chunk_size = chunk_size

    @classmethod
    def from_config(cls, config: EncoderConfig, linear_class: type[nn.Linear] = nn.Linear) -> FeedForward:
        """The config's FFN: ``hidden_size`` → ``intermediate_size`` → ``hidden_size`` with ``hidden_act``."""
        return cls(config.hidden_size, config.intermediate_size, config.hidden_act, linear_class,
                   config.chunk_size_feed_forward)  # fmt: skip

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return apply_chunking_to_forward(self.position_wise, self.chunk_size, 1, hidden_states)

    def position_wise(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.fc_out(self.activation(self.fc_in(hidden_states)))


def optional_pre_norms(config: EncoderConfig) -> tuple[nn.Module, nn.Module]:
    """The LayerNorms before the attention and the FFN of the ODE and vanilla blocks when
    ``config.use_layer_norm`` (identities otherwise: the N-ODE paper uses none)."""
    if not config.use_layer_norm:
        return nn.Identity(), nn.Identity()
    return tuple(nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) for _ in range(2))


class SublayerConnection(nn.Module):
    """Residual connection around one sub-layer, with its LayerNorm placed before or after.

    * ``"post"`` (BERT): ``LN(x + scale · dropout(f(x)))``
    * ``"pre"``: ``x + scale · dropout(f(LN(x)))``

    ``scale`` is the step size of the residual update (½ for Macaron's half-step FFNs).
    """

    def __init__(self, config: EncoderConfig, layer_norm_position: str) -> None:
        super().__init__()
        self.pre_norm = layer_norm_position == "pre"
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, hidden_states: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor], scale: float = 1.0
    ) -> torch.Tensor:
        # torch.add's alpha fuses the step size into the residual add (no separate multiply)
        if self.pre_norm:
            return torch.add(hidden_states, self.dropout(sublayer(self.LayerNorm(hidden_states))), alpha=scale)
        return self.LayerNorm(torch.add(hidden_states, self.dropout(sublayer(hidden_states)), alpha=scale))


class AttentionCall:
    """Adapts a token mixer to the ``x -> f(x)`` form of :class:`SublayerConnection` (its attention
    probabilities, when asked for, are recorded from the mixer by transformers' output hooks)."""

    def __init__(
        self,
        attention: nn.Module,
        layout: TokenLayout,
        context: tuple[torch.Tensor, ...],
        output_attentions: bool,
    ) -> None:
        self.attention = attention
        self.layout = layout
        self.context = context
        self.output_attentions = output_attentions

    def __call__(self, hidden_states: torch.Tensor) -> torch.Tensor:
        asked = self.output_attentions
        return self.attention(hidden_states, self.layout, *self.context, output_attentions=asked)[0]


class Pooler(nn.Module):
    """BERT's pooler ``tanh(W h + b)`` on the first (``[CLS]``) token, or on the mean of the real
    tokens when ``config.pooling == "mean"``."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.mean = config.pooling == "mean"
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        if not self.mean:
            summary = hidden_states[:, 0]
        elif padding_mask is None:
            summary = hidden_states.mean(dim=1)
        else:
            weights = padding_mask.to(hidden_states.dtype)[..., None]
            summary = (hidden_states * weights).sum(dim=1) / weights.sum(dim=1)
        return self.activation(self.dense(summary))


class MaskedLMHead(nn.Module):
    """BERT's MLM head: dense → activation → LayerNorm → decoder (tied to the word embeddings).

    The dense layer maps ``hidden_size`` to ``config.word_embedding_size`` so that the decoder can
    share the embedding matrix when the word embeddings are narrower than the hidden state.
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        width = config.word_embedding_size
        self.dense = nn.Linear(config.hidden_size, width)
        self.activation = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(width, config.vocab_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.LayerNorm(self.activation(self.dense(hidden_states))))
