"""The two axes of a layer, as two registries, and the one place where a layer is built from them.

* ``ATTENTION_TYPES`` — how tokens mix (``config.attention_type``).
* ``LAYER_SCHEMES`` — how a layer composes its sub-steps around the token mixer (``config.layer_scheme``).

Every variant's config carries both switches (its paper's pair by default), so any token mixer runs
in any scheme: :func:`build_layer` is the only code that combines them, and no pair has code of its
own. Each registered class owns its config fields (``config_defaults``) and their validation
(``validate_config``), which :class:`~hf_variants.core.configuration_encoder.EncoderConfig` applies
only to the pair a config selects.

Adding a token mixer: write a :class:`~hf_variants.core.encoder_layers.TokenMixer` module
(``cls(config, layer_idx=...)``, called as ``mixer(hidden_states, padding_mask, *context,
output_attentions=...)`` → ``(output, probabilities or None)``) and add one line to ``ATTENTION_TYPES``.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from torch import nn

from .encoder_layers import ConfigurableIdea, LayerScheme, MultiHeadSelfAttention, TokenMixer, TransformerLayer
from .injective_layer import InjectiveLayer
from .mixture_of_keys import LinearMixtureAttention, MixtureOfKeysAttention
from .ode_layer import NodeTransformerBlock
from .orthogonal_attention import OrthogonalAttention
from .strang_layer import StrangLayer

if TYPE_CHECKING:
    from .configuration_encoder import EncoderConfig

#: ``attention_type`` → token mixer.
ATTENTION_TYPES: dict[str, type[TokenMixer]] = {
    "softmax": MultiHeadSelfAttention,  # Vaswani et al. 2017 (BERT)
    "mgk": MixtureOfKeysAttention,  # Nguyen et al. 2022, eq. 7
    "mlk": LinearMixtureAttention,  # Nguyen et al. 2022, §2.4
    "orthogonal": OrthogonalAttention,  # TransJect, Theorem 1
}

#: ``layer_scheme`` → layer.
LAYER_SCHEMES: dict[str, type[LayerScheme]] = {
    "lie_trotter": TransformerLayer,  # BERT; Lu et al. 2019, eq. 12-13
    "strang": StrangLayer,  # Macaron; Lu et al. 2019, eq. 17-19
    "ode": NodeTransformerBlock,  # N-ODE Transformer, eq. 2/3/9
    "injective": InjectiveLayer,  # TransJect, eq. 3-6
}


def selected_ideas(attention_type: str, layer_scheme: str) -> tuple[type[ConfigurableIdea], ...]:
    """The registered classes of a pair; ``ValueError`` for a name that is not registered."""
    if attention_type not in ATTENTION_TYPES:
        raise ValueError(
            f"attention_type must be one of {', '.join(map(repr, ATTENTION_TYPES))}; got {attention_type!r}."
        )
    if layer_scheme not in LAYER_SCHEMES:
        raise ValueError(f"layer_scheme must be one of {', '.join(map(repr, LAYER_SCHEMES))}; got {layer_scheme!r}.")
    return ATTENTION_TYPES[attention_type], LAYER_SCHEMES[layer_scheme]


def option_defaults(attention_type: str, layer_scheme: str) -> dict[str, Any]:
    """The config fields a pair uses, with their defaults (a field two ideas share has one default)."""
    defaults: dict[str, Any] = {}
    for idea in selected_ideas(attention_type, layer_scheme):
        for name, value in idea.config_defaults.items():
            if name in defaults and defaults[name] != value:
                raise TypeError(f"{idea.__name__} declares {name}={value!r}, another idea {defaults[name]!r}.")
            defaults[name] = value
    return defaults


def validate_composition(config: EncoderConfig) -> None:
    """Validate the fields of the config's token mixer and layer scheme (and their pairing)."""
    for idea in selected_ideas(config.attention_type, config.layer_scheme):
        idea.validate_config(config)


def gradient_checkpointing_error(config: EncoderConfig) -> str | None:
    """Why gradient checkpointing would change the results of this config's pair, if it would."""
    for idea in selected_ideas(config.attention_type, config.layer_scheme):
        reason = idea.gradient_checkpointing_error(config)
        if reason is not None:
            return reason
    return None


def build_attention(config: EncoderConfig, layer_idx: int | None = None) -> nn.Module:
    return ATTENTION_TYPES[config.attention_type](config, layer_idx=layer_idx)


def build_layer(config: EncoderConfig, layer_idx: int) -> LayerScheme:
    """The layer ``layer_idx`` of a config: its scheme, given a factory of its token mixer."""
    scheme = LAYER_SCHEMES[config.layer_scheme]
    return scheme.build(config, layer_idx, partial(build_attention, config, layer_idx))


def context_modules(config: EncoderConfig) -> dict[str, nn.Module]:
    """The per-backbone modules the config's token mixer needs (e.g. TransJect's eigenvalue estimator)."""
    context = ATTENTION_TYPES[config.attention_type].context_module
    return {} if context is None else {context[0]: context[1](config)}


def lora_target_modules(config: EncoderConfig) -> list[str]:
    """PEFT ``target_modules`` for a LoRA adapter on this config's pair: the token mixer's and the
    layer scheme's linear layers (e.g. ``["query", "key", "value", "output", "fc_in", "fc_out"]``)."""
    ideas = selected_ideas(config.attention_type, config.layer_scheme)
    return [name for idea in ideas for name in idea.lora_target_modules]


def has_attention_probabilities(config: EncoderConfig) -> bool:
    """Whether ``output_attentions=True`` gives attention probabilities for this config's pair."""
    return all(idea.has_attention_probabilities for idea in selected_ideas(config.attention_type, config.layer_scheme))


def matched_control_overrides(config: EncoderConfig) -> dict[str, Any]:
    """The config changes that turn the config's ideas off (``{}`` for BERT's own pair): softmax
    attention for a non-softmax token mixer, BERT's layer for the Strang and injective schemes,
    vanilla eq. (1) blocks for the ODE scheme (the N-ODE paper's own baseline)."""
    overrides: dict[str, Any] = {}
    for idea in selected_ideas(config.attention_type, config.layer_scheme):
        overrides.update(idea.control_overrides)
    return overrides


def matched_control(config: EncoderConfig) -> EncoderConfig:
    """The matched control of ``config``: the same model type, sizes, embeddings, LayerNorm placement,
    pooling, activation and initialisation, with only its ideas turned off
    (:func:`matched_control_overrides`). A config that has no idea of its own is its own control.

    Example: the control of Macaron-BERT (pre-LN, Strang layers) is Macaron-BERT with
    ``layer_scheme="lie_trotter"`` — pre-LN BERT layers with the same final LayerNorm — so the
    comparison changes the layer's splitting and nothing else."""
    fields = config.to_dict()
    fields.pop("transformers_version", None)
    fields.update(matched_control_overrides(config))
    return type(config).from_dict(fields)
