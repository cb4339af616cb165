"""The configuration every hf-variants encoder shares: BERT's sizes, the two composition switches
(``attention_type``, ``layer_scheme``) with the fields of the selected pair, plus validation.

A variant subclasses :class:`EncoderConfig` and sets its paper's defaults in ``__init__``. Bad values
raise ``ValueError`` naming the field, at construction time and again when a saved config is loaded.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from transformers import PretrainedConfig
from transformers.activations import ACT2FN

from .compatibility import check_supported_versions  # noqa: F401  (its import refuses an unsupported version)
from .composition import (
    LAYER_SCHEMES,
    option_defaults,
    resolve_legacy_switches,
    selected_ideas,
    validate_composition,
)
from .validation import (
    require_bool,
    require_choice,
    require_non_negative_int,
    require_positive_int,
    require_probability,
)


class EncoderConfig(PretrainedConfig):
    r"""Sizes and regularisation of a BERT-style encoder.

    Args:
        vocab_size: Number of tokens in the vocabulary.
        hidden_size: Width of the residual stream (``d_model``).
        num_hidden_layers: Number of encoder layers.
        num_attention_heads: Number of attention heads.
        head_dim: Width of one head. ``None`` means ``hidden_size // num_attention_heads``, which then
            must divide exactly. Setting it decouples attention width (``heads * head_dim``) from
            ``hidden_size``.
        intermediate_size: Inner width of the feed-forward network (BERT: ``4 * hidden_size``).
        hidden_act: Activation of the feed-forward network, a key of ``transformers.activations.ACT2FN``.
        hidden_dropout_prob: Dropout on embeddings and sub-layer outputs.
        attention_probs_dropout_prob: Dropout on attention probabilities.
        max_position_embeddings: Length of the learned position table (longer inputs raise); with rotary
            positions there is no table and this is only the length the model was trained for.
        position_embedding_type: ``"absolute"`` (BERT: a learned position table added to the embeddings) or
            ``"rotary"`` (RoFormer, Su et al. 2021, eq. 34: each head's queries and keys are rotated by their
            position, so query–key products depend on relative positions only; no table, no length limit). Taken by
            the token mixers with a query–key product (softmax, MGK, and MLK on its feature maps, §3.3 of the
            RoFormer paper); refused by those without one (TransJect's orthogonal attention). The ``mean`` mixer has
            no query–key product: with rotary positions it is blind to order.
        rope_theta: Base of the rotary frequencies ``θ_k = rope_theta^(−2k/head_dim)`` (RoFormer: 10,000).
        type_vocab_size: Number of token types (segments).
        initializer_range: Standard deviation of the normal initialisation of weights.
        layer_norm_eps: Epsilon of every LayerNorm.
        layer_norm_position: ``"post"`` (BERT: ``LN(x + f(x))``) or ``"pre"`` (``x + f(LN(x))``, with a
            final LayerNorm after the last layer).
        pooling: How the pooler summarises a sequence before its dense + tanh layer: ``"first"``
            (BERT's ``[CLS]`` token) or ``"mean"`` (mean over real tokens).
        pad_token_id: Id of the padding token (its embedding row starts at zero).
        classifier_dropout: Dropout before classification heads; ``None`` uses ``hidden_dropout_prob``.
        sparse_prediction: Run the masked-LM head only at positions with a label (MosaicBERT-style):
            same loss, far less work with large vocabularies; ``logits`` then has one row per scored
            token instead of ``(batch, seq_len, vocab)``.
        tie_word_embeddings: Tie the masked-LM decoder to the input word embeddings (transformers 5
            no longer declares this on the base config, so every encoder config must).
        output_diagnostics: Whether outputs carry ``auxiliary_loss`` (a variant's weighted extra
            objective, always added to ``loss`` when labels are given) and ``diagnostics`` (e.g. the
            N-ODE solver's function evaluations). Off by default, like transformers' own
            ``output_router_logits``: these values describe the whole batch, so pipelines could not
            split them per example. ``forward(..., output_diagnostics=True)`` asks for them per call.
        attention_type: The token mixer, a key of ``hf_variants.core.composition.ATTENTION_TYPES``:
            ``"softmax"`` (BERT), ``"mgk"`` / ``"mlk"`` (MGK-BERT), ``"orthogonal"`` (TransJect), ``"mean"``
            (no token mixing: every token gets the sequence's mean, a floor for comparisons).
        layer_scheme: How a layer composes its sub-steps, a key of ``LAYER_SCHEMES``:
            ``"lie_trotter"`` (BERT), ``"strang"`` (Macaron), ``"ode"`` (N-ODE), ``"vanilla"`` (the N-ODE paper's
            eq. (1) baseline), ``"injective"`` (TransJect).
        **kwargs: The fields the selected token mixer and layer scheme own (documented on their classes,
            e.g. ``num_key_components`` of MGK or ``rtol`` of the ODE scheme; missing ones get their
            defaults), then ``PretrainedConfig``'s.
    """

    # Subclasses set ``model_type``; the base class is never registered.
    model_type = "hf_variants_encoder"
    #: Fields that change how a model trains or what its forward returns, not the function its weights
    #: define (with those of the selected pair's ideas: :meth:`training_only_fields`).
    base_training_only_fields: ClassVar[frozenset[str]] = frozenset({
        "hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout", "initializer_range",
        "sparse_prediction", "output_diagnostics",
    })  # fmt: skip
    # Trainer.evaluate/predict collect every output but these (they are not predictions).
    keys_to_ignore_at_inference: ClassVar[list[str]] = ["auxiliary_loss", "diagnostics"]

    def __init__(
        self,
        vocab_size: int = 30522,
        hidden_size: int = 768,
        num_hidden_layers: int = 12,
        num_attention_heads: int = 12,
        head_dim: int | None = None,
        intermediate_size: int = 3072,
        hidden_act: str = "gelu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 512,
        position_embedding_type: str = "absolute",
        rope_theta: float = 10000.0,
        type_vocab_size: int = 2,
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-12,
        layer_norm_position: str = "post",
        pooling: str = "first",
        pad_token_id: int | None = 0,
        classifier_dropout: float | None = None,
        sparse_prediction: bool = False,
        tie_word_embeddings: bool = True,
        output_diagnostics: bool = False,
        attention_type: str = "softmax",
        layer_scheme: str = "lie_trotter",
        **kwargs: Any,
    ) -> None:
        attention_type, layer_scheme = resolve_legacy_switches(attention_type, layer_scheme, kwargs)
        self.attention_type = attention_type
        self.layer_scheme = layer_scheme
        for name, default in option_defaults(attention_type, layer_scheme).items():
            setattr(self, name, copy.deepcopy(kwargs.pop(name, default)))
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.head_dim = head_dim
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.position_embedding_type = position_embedding_type
        self.rope_theta = rope_theta
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.layer_norm_position = layer_norm_position
        self.pooling = pooling
        self.pad_token_id = pad_token_id
        self.classifier_dropout = classifier_dropout
        self.sparse_prediction = sparse_prediction
        self.tie_word_embeddings = tie_word_embeddings
        self.output_diagnostics = output_diagnostics
        super().__init__(**kwargs)
        self.validate()

    # ----------------------------------------------------------------------------------------
    @property
    def attention_head_size(self) -> int:
        """Width of one attention head (``head_dim`` or ``hidden_size // num_attention_heads``)."""
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_attention_heads

    @property
    def attention_width(self) -> int:
        """Width of the concatenated heads, the input of the attention output projection."""
        return self.num_attention_heads * self.attention_head_size

    @property
    def word_embedding_size(self) -> int:
        """Width of the word embeddings, which the tied MLM decoder shares (TransJect: hidden/2)."""
        return self.hidden_size

    @property
    def uses_final_layer_norm(self) -> bool:
        """Pre-LN stacks end with a LayerNorm so that the output is normalised like a post-LN one (not
        schemes without LayerNorms, such as the injective one)."""
        return self.layer_norm_position == "pre" and LAYER_SCHEMES[self.layer_scheme].has_layer_norm

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs: Any) -> Any:
        """transformers' ``from_dict`` (the path of every ``from_pretrained``), after which a field that an
        idea of the saved pair added after a release, given neither by ``config_dict`` nor by a keyword,
        takes the value configs saved before it had (:attr:`ConfigurableIdea.legacy_values`), not
        today's default: an old checkpoint keeps computing the function its weights were trained for.
        An idea a keyword switches to was never saved, so it gets today's defaults."""
        loaded = super().from_dict(config_dict, **kwargs)
        config = loaded[0] if isinstance(loaded, tuple) else loaded
        given = config_dict.keys() | kwargs.keys()
        switched = kwargs.keys() & {"attention_type", "layer_scheme"}  # set after construction, as every keyword
        saved = super().from_dict(config_dict) if switched else config
        ideas = set(selected_ideas(saved.attention_type, saved.layer_scheme))
        ideas &= set(selected_ideas(config.attention_type, config.layer_scheme))
        legacy = {name: value for idea in ideas for name, value in idea.legacy_values.items() if name not in given}
        for name, value in legacy.items():
            setattr(config, name, copy.deepcopy(value))
        if legacy:
            config.validate()
        return loaded

    # ----------------------------------------------------------------------------------------
    def training_only_fields(self) -> frozenset[str]:
        """The fields a pretrained checkpoint may take other values of without computing another
        function: dropout, initialisation, what the forward returns, and the selected ideas' own (e.g.
        the ODE solver's tolerances). Every other field — ``attention_type``, ``hidden_act``, a
        mixer's or scheme's structure — changes what the checkpoint's weights compute."""
        ideas = selected_ideas(self.attention_type, self.layer_scheme)
        return self.base_training_only_fields.union(*(idea.training_only_fields for idea in ideas))

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field whose value cannot build a model.

        Fields of the selected pair that are missing (``attention_type`` or ``layer_scheme`` was
        changed after construction, e.g. by a ``from_pretrained`` keyword) first get their defaults.
        """
        for name, default in option_defaults(self.attention_type, self.layer_scheme).items():
            if not hasattr(self, name):
                setattr(self, name, copy.deepcopy(default))
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            require_positive_int(self, name)
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads != 0:
                raise ValueError(
                    f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                    f"({self.num_attention_heads}); change one of them or set head_dim explicitly."
                )
        else:
            require_positive_int(self, "head_dim")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            require_probability(self, name)
        if self.classifier_dropout is not None:
            require_probability(self, "classifier_dropout")
        require_choice(self, "hidden_act", ACT2FN.keys())
        require_choice(self, "layer_norm_position", ("pre", "post"))
        require_choice(self, "pooling", ("first", "mean"))
        require_choice(self, "position_embedding_type", ("absolute", "rotary"))
        if self.position_embedding_type == "rotary" and self.attention_head_size % 2:
            raise ValueError(
                f"position_embedding_type='rotary' rotates pairs of a head's dimensions; the head width "
                f"{self.attention_head_size} is odd (change head_dim, or hidden_size / num_attention_heads)."
            )
        for name in ("initializer_range", "layer_norm_eps", "rope_theta"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}.")
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"pad_token_id ({self.pad_token_id}) must be a token id in [0, vocab_size={self.vocab_size})."
            )
        require_non_negative_int(self, "chunk_size_feed_forward")
        require_bool(self, "output_diagnostics")
        validate_composition(self)
