"""Building blocks shared by the variants: embeddings, softmax self-attention, feed-forward,
residual connections, BERT's (Lie–Trotter) layer, pooler and the masked-LM prediction head — and
the two base classes of the composition registries (:class:`TokenMixer`, :class:`LayerScheme`).

Naming follows BERT where it helps a reader (``word_embeddings``, ``LayerNorm``, ``query``/``key``/
``value``); variants import these blocks instead of re-writing them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import eager_attention_forward
from transformers.pytorch_utils import apply_chunking_to_forward

from .inputs import additive_attention_bias, embedding_ids, flex_block_mask, sdpa_attention_mask

if TYPE_CHECKING:
    from .configuration_encoder import EncoderConfig

#: What a backbone computes once per forward for its layers: extra tensors every layer receives
#: (after ``hidden_states`` and ``padding_mask``), a weighted auxiliary loss, and named diagnostics.
LayerInputs = tuple[tuple[torch.Tensor, ...], torch.Tensor | None, dict[str, torch.Tensor]]


@dataclass(frozen=True)
class MatchedSize:
    """The size every model of a controlled comparison shares; each idea derives its own fields from it
    (:meth:`ConfigurableIdea.matched_size_fields`, combined by
    :func:`~hf_variants.core.composition.matched_size_fields`).

    ``head_size`` is the width of one softmax head (``hidden_size // head_size`` heads); a feed-forward
    network is ``4 × hidden_size`` wide (BERT's ratio); an adaptive solver runs at ``solver_tolerance``
    (rtol = atol) with at most ``max_solver_steps`` steps (``None``: the config's default)."""

    hidden_size: int
    num_hidden_layers: int
    head_size: int
    solver_tolerance: float = 1e-3
    max_solver_steps: int | None = None

    @property
    def num_attention_heads(self) -> int:
        return max(self.hidden_size // self.head_size, 1)

    @property
    def intermediate_size(self) -> int:
        return 4 * self.hidden_size


class ConfigurableIdea:
    """What the composition registries need from a token mixer or a layer scheme: the config fields
    it owns (with defaults, set on every config that selects it) and their validation, which runs
    only for configs that select it."""

    #: Config fields this idea owns and their defaults.
    config_defaults: ClassVar[dict[str, Any]] = {}
    #: Whether ``output_attentions=True`` yields attention probabilities (False: ``None``).
    has_attention_probabilities: ClassVar[bool] = True
    #: Names of this idea's linear layers that a LoRA adapter targets (PEFT's ``target_modules``).
    lora_target_modules: ClassVar[tuple[str, ...]] = ()
    #: Config changes that turn this idea off, leaving everything else (embeddings, sizes, LayerNorm
    #: placement, pooling, initialisation): its matched control. Empty for BERT's own pieces.
    control_overrides: ClassVar[dict[str, Any]] = {}
    #: Fields of this idea that change how a model trains or how precisely it is computed, not the
    #: function its weights define: a pretrained checkpoint may take other values without a word.
    training_only_fields: ClassVar[frozenset[str]] = frozenset()
    #: Fields added after a release, with the value every config saved before had (its weights were
    #: trained with it). A saved config that lacks such a field loads with this value, not the default
    #: (:meth:`~hf_variants.core.configuration_encoder.EncoderConfig.from_dict`).
    legacy_values: ClassVar[dict[str, Any]] = {}
    #: Fields of an earlier release whose values now select another idea: ``{field: {value: {switch:
    #: today's value}}}`` (the ode scheme's ``block_type="vanilla"`` is ``layer_scheme="vanilla"``). A
    #: config given such a field (a saved one, or a keyword) gets today's switch and loses the field.
    legacy_switches: ClassVar[dict[str, dict[Any, dict[str, Any]]]] = {}
    #: Fields that choose how this idea *stores* its weights, not the function they define (e.g.
    #: ``orthogonal_map``: other parameters for the same orthogonal matrices). A checkpoint loads with
    #: its saved values; a model reaches other values through :meth:`reparametrize`.
    parametrization_fields: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def validate_config(cls, config: EncoderConfig) -> None:
        """Raise ``ValueError`` naming the field when a value of this idea's fields (or its pairing
        with the other axis) cannot build a meaningful model."""

    @classmethod
    def gradient_checkpointing_error(cls, config: EncoderConfig) -> str | None:
        """Why gradient checkpointing would change this idea's results, or ``None`` when it is fine."""
        return None

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        """This idea's config values at a comparison's matched ``size``, beside the width and depth every
        model shares (e.g. MGK's half the heads, an FFN's width). Empty: the idea has no size of its own."""
        return {}

    @classmethod
    def init_weights(cls, module: nn.Module, config: EncoderConfig) -> None:
        """Initialise what this idea puts into a model beyond ``PreTrainedModel._init_weights`` and the
        modules' own ``init_extra_parameters`` (e.g. the parametrisations of orthogonal weights, which
        sit on torch's modules). Called with every module of a model that selects the idea; through
        ``transformers.initialization``, which leaves loaded tensors alone."""

    @classmethod
    def reparametrize(cls, model: nn.Module, name: str, value: Any) -> None:
        """Store ``model``'s weights under ``name=value``, one of :attr:`parametrization_fields`, without
        changing the function they define."""
        raise NotImplementedError(f"{cls.__name__} has no parametrization field {name!r}.")


class TokenMixer(ConfigurableIdea):
    """Base of the ``attention_type`` registry (``hf_variants.core.composition.ATTENTION_TYPES``).

    A token mixer is an ``nn.Module`` built as ``cls(config, layer_idx=...)`` and called as
    ``mixer(hidden_states, padding_mask, *context, output_attentions=False)``; it returns
    ``(output (B, N, hidden), attention probabilities (B, H, N, N) or None)``. ``context`` are the
    per-forward tensors its :attr:`context_module` computes once from the embeddings.
    """

    #: ``(backbone attribute, module class)`` built once per backbone; its ``layer_inputs(embeddings,
    #: padding_mask)`` returns :data:`LayerInputs` (e.g. TransJect's eigenvalues Σ). ``None``: no context.
    context_module: ClassVar[tuple[str, type[nn.Module]] | None] = None


class LayerScheme(ConfigurableIdea, GradientCheckpointingLayer):
    """Base of the ``layer_scheme`` registry (``hf_variants.core.composition.LAYER_SCHEMES``).

    A layer scheme composes a layer's sub-steps around a token mixer it receives as a factory:
    ``cls.build(config, layer_idx, make_attention)``. Called as ``layer(hidden_states, padding_mask,
    *context, output_attentions=...)``, it returns ``(hidden_states, attention probabilities or None,
    *extra_outputs)``; :meth:`summarize_outputs` turns the extra outputs of all layers into an
    auxiliary loss and diagnostics.
    """

    #: Whether the scheme's sub-layers carry LayerNorms, so that a pre-LN stack ends with one.
    has_layer_norm: ClassVar[bool] = True

    @classmethod
    def build(
        cls, config: EncoderConfig, layer_idx: int | None, make_attention: Callable[[], nn.Module]
    ) -> LayerScheme:
        return cls(config, layer_idx, make_attention)

    @classmethod
    def summarize_outputs(
        cls, config: EncoderConfig, extra_outputs: list[tuple[torch.Tensor, ...]], padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        """The layers' extra outputs → (weighted auxiliary loss or None, diagnostics)."""
        return None, {}


class FeedForwardScheme(LayerScheme):
    """A layer scheme whose layers hold position-wise FFNs (:class:`FeedForward`, ``fc_in`` → ``fc_out``):
    BERT's, Macaron's, the ODE and the vanilla eq. (1) layers. At a comparison's matched size the FFN is
    the shared ``intermediate_size`` (4 × width), and a LoRA adapter targets its two linears."""

    lora_target_modules = ("fc_in", "fc_out")

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        return {"intermediate_size": size.intermediate_size}


class EncoderEmbeddings(nn.Module):
    """BERT embeddings: word + learned absolute position + token type, then LayerNorm and dropout.

    Position and token-type ids default to ``arange(seq_len)`` and zeros, built on the fly (no
    buffers that could come back stale after ``from_pretrained``). Token ids outside the vocabulary
    and sequences longer than ``max_position_embeddings`` raise ``ValueError``.
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
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
            self.position_embeddings.num_embeddings,
            self.token_type_embeddings.num_embeddings,
            self.word_embeddings.embedding_dim,
        )
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids) + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class MultiHeadSelfAttention(TokenMixer, nn.Module):
    """``attention_type="softmax"``: scaled dot-product multi-head self-attention with eager and SDPA
    implementations.

    ``softmax(Q Kᵀ / √D) V`` per head (Vaswani et al. 2017, eq. 1), followed by the output projection
    from ``heads * head_dim`` to ``hidden_size``. The implementation comes from
    ``config._attn_implementation`` through ``ALL_ATTENTION_FUNCTIONS``; attention probabilities are
    only materialised by the eager path, which is therefore used whenever ``output_attentions=True``.
    """

    #: The affine map of the four projections (the N-ODE Transformer swaps in ``Ax + b + ct``).
    projection_class: type[nn.Linear] = nn.Linear

    lora_target_modules = ("query", "key", "value", "output")

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        return {"num_attention_heads": size.num_attention_heads}

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
        padding_mask: torch.Tensor | None = None,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        query = self.split_heads(self.query(hidden_states))
        key = self.split_heads(self.key(hidden_states))
        value = self.split_heads(self.value(hidden_states))
        implementation = self.config._attn_implementation or "eager"
        if output_attentions or implementation == "eager":
            attention: Callable = eager_attention_forward
            mask = additive_attention_bias(padding_mask, query.dtype)
        else:
            attention = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
            if implementation == "flex_attention":
                mask = flex_block_mask(padding_mask, query.shape[-2])
            else:
                mask = sdpa_attention_mask(padding_mask)
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
        return self.output(context), weights


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
    """Adapts a token mixer to the ``x -> f(x)`` form of :class:`SublayerConnection`, keeping the
    attention probabilities it returned."""

    def __init__(
        self,
        attention: nn.Module,
        padding_mask: torch.Tensor | None,
        context: tuple[torch.Tensor, ...],
        output_attentions: bool,
    ) -> None:
        self.attention = attention
        self.padding_mask = padding_mask
        self.context = context
        self.output_attentions = output_attentions
        self.weights: torch.Tensor | None = None

    def __call__(self, hidden_states: torch.Tensor) -> torch.Tensor:
        output, self.weights = self.attention(
            hidden_states, self.padding_mask, *self.context, output_attentions=self.output_attentions
        )
        return output


class TransformerLayer(FeedForwardScheme):
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
        padding_mask: torch.Tensor | None = None,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attend = AttentionCall(self.attention, padding_mask, context, output_attentions)
        hidden_states = self.attention_residual(hidden_states, attend)
        hidden_states = self.feed_forward_residual(hidden_states, self.feed_forward)
        return hidden_states, attend.weights


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
