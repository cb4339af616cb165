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
output_attentions=...)`` → ``(output, probabilities or None)``) and add one line to ``ATTENTION_TYPES``
(the class itself, or ``"module:Class"`` for a module of this package). Adding a layer scheme: a
:class:`~hf_variants.core.encoder_layers.LayerScheme` (``cls(config, layer_idx, make_attention)``, called as
``layer(hidden_states, padding_mask, *context, output_attentions=...)`` → ``(output, probabilities or None)``,
its ``control_overrides`` naming its matched control) and one line in ``LAYER_SCHEMES``; docs/mix-and-match.md
has a worked example, run by the test suite.

The registries name each idea's module instead of importing it (:class:`IdeaRegistry`), so a model
imports the modules of its own pair only, and a Hub export ships only those (``hf_variants.hub``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from functools import partial
from typing import TYPE_CHECKING, Any

from torch import nn

from .encoder_layers import ConfigurableIdea, LayerScheme, MatchedSize

if TYPE_CHECKING:
    from .configuration_encoder import EncoderConfig


class IdeaRegistry(MutableMapping[str, type]):
    """``name → idea class``. An entry is the class, or ``"module:Class"`` naming a module of this
    package, imported the first time the name is looked up — so looking up one pair imports only
    its two modules, and :meth:`module_name` tells an exporter which files a pair needs."""

    def __init__(self, axis: str, entries: dict[str, type | str]) -> None:
        self.axis = axis
        self._entries = dict(entries)

    def __getitem__(self, name: str) -> type:
        entry = self._entries[name]
        if isinstance(entry, str):
            module_name, class_name = entry.split(":")
            try:
                module = importlib.import_module(f"{__package__}.{module_name}")
            except ModuleNotFoundError as error:
                if error.name != f"{__package__}.{module_name}":
                    raise
                raise ImportError(
                    f"{self.axis}={name!r} needs {module_name}.py, which this copy of the code does not have: a Hub "
                    "export ships the modules of its own pair only. Install hf-variants (pip install hf-variants) "
                    "to build other pairs."
                ) from None
            entry = self._entries[name] = getattr(module, class_name)
        return entry

    def __setitem__(self, name: str, idea: type | str) -> None:
        self._entries[name] = idea

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def module_name(self, name: str) -> str:
        """The dotted module of ``name``'s class, without importing it."""
        entry = self._entries[name]
        return f"{__package__}.{entry.split(':')[0]}" if isinstance(entry, str) else entry.__module__

    def class_names(self) -> list[str]:
        """The class names of every entry, without importing them."""
        return [entry.split(":")[1] if isinstance(entry, str) else entry.__name__ for entry in self._entries.values()]


#: ``attention_type`` → token mixer.
ATTENTION_TYPES = IdeaRegistry("attention_type", {
    "softmax": "encoder_layers:MultiHeadSelfAttention",  # Vaswani et al. 2017 (BERT)
    "mgk": "mixture_of_keys:MixtureOfKeysAttention",  # Nguyen et al. 2022, eq. 7
    "mlk": "mixture_of_keys:LinearMixtureAttention",  # Nguyen et al. 2022, §2.4
    "orthogonal": "orthogonal_attention:OrthogonalAttention",  # TransJect, Theorem 1
})  # fmt: skip

#: ``layer_scheme`` → layer.
LAYER_SCHEMES = IdeaRegistry("layer_scheme", {
    "lie_trotter": "encoder_layers:TransformerLayer",  # BERT; Lu et al. 2019, eq. 12-13
    "strang": "strang_layer:StrangLayer",  # Macaron; Lu et al. 2019, eq. 17-19
    "ode": "ode_layer:NodeTransformerBlock",  # N-ODE Transformer, eq. 2/3/9
    "vanilla": "vanilla_layer:VanillaTransformerBlock",  # N-ODE Transformer, eq. 1 (its baseline)
    "injective": "injective_layer:InjectiveLayer",  # TransJect, eq. 3-6
})  # fmt: skip


def pair_modules(attention_type: str, layer_scheme: str) -> list[str]:
    """The dotted modules of a pair's two classes (what a Hub export of the pair must ship)."""
    selected_ideas(attention_type, layer_scheme)  # a clear error for an unregistered name
    return list(dict.fromkeys([ATTENTION_TYPES.module_name(attention_type), LAYER_SCHEMES.module_name(layer_scheme)]))


def selected_ideas(attention_type: str, layer_scheme: str) -> tuple[type[ConfigurableIdea], ...]:
    """The registered classes of a pair; ``ValueError`` for a name that is not registered."""
    if attention_type not in ATTENTION_TYPES:
        raise ValueError(
            f"attention_type must be one of {', '.join(map(repr, ATTENTION_TYPES))}; got {attention_type!r}."
        )
    if layer_scheme not in LAYER_SCHEMES:
        raise ValueError(f"layer_scheme must be one of {', '.join(map(repr, LAYER_SCHEMES))}; got {layer_scheme!r}.")
    return ATTENTION_TYPES[attention_type], LAYER_SCHEMES[layer_scheme]


def resolve_legacy_switches(attention_type: str, layer_scheme: str, fields: dict[str, Any]) -> tuple[str, str]:
    """The pair an earlier release's spelling selects (:attr:`ConfigurableIdea.legacy_switches`): each
    legacy field of the pair's ideas is taken out of ``fields`` and its value turned into today's switch.
    Example: ``("softmax", "ode")`` with ``block_type="vanilla"`` → ``("softmax", "vanilla")``."""
    switches = {"attention_type": attention_type, "layer_scheme": layer_scheme}
    for idea in selected_ideas(attention_type, layer_scheme):
        for name, by_value in idea.legacy_switches.items():
            if name not in fields:
                continue
            value = fields.pop(name)
            if value not in by_value:
                today = "; ".join(
                    f"{known!r} is " + ", ".join(f"{k}={v!r}" for k, v in switch.items())
                    for known, switch in by_value.items()
                )
                raise ValueError(f"{name}={value!r}: an earlier release's switch, whose values were {today}.")
            switches.update(by_value[value])
    return switches["attention_type"], switches["layer_scheme"]


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


def weight_initializers(config: EncoderConfig) -> list[Callable[[nn.Module, EncoderConfig], None]]:
    """The pair's :meth:`~hf_variants.core.encoder_layers.ConfigurableIdea.init_weights` hooks, each once
    (TransJect's two ideas share the orthogonal weights' one, which must not draw twice)."""
    hooks: dict[Callable[..., None], Callable[[nn.Module, EncoderConfig], None]] = {}
    for idea in selected_ideas(config.attention_type, config.layer_scheme):
        hooks.setdefault(idea.init_weights.__func__, idea.init_weights)
    return list(hooks.values())


def parametrization_owners(attention_type: str, layer_scheme: str) -> dict[str, type[ConfigurableIdea]]:
    """Each parametrisation field of the pair (how weights are stored, not the function they define,
    e.g. ``orthogonal_map``) → the idea that re-parametrises a model for it."""
    owners: dict[str, type[ConfigurableIdea]] = {}
    for idea in selected_ideas(attention_type, layer_scheme):
        for name in idea.parametrization_fields:
            owners.setdefault(name, idea)
    return owners


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
    vanilla eq. (1) blocks (``layer_scheme="vanilla"``) for the ODE scheme (the N-ODE paper's own baseline)."""
    overrides: dict[str, Any] = {}
    for idea in selected_ideas(config.attention_type, config.layer_scheme):
        overrides.update(idea.control_overrides)
    return overrides


def matched_size_fields(attention_type: str, layer_scheme: str, size: MatchedSize) -> dict[str, Any]:
    """The config values of a pair at a comparison's matched ``size``: the width and depth every model
    shares, then what each idea of the pair derives from it (:meth:`ConfigurableIdea.matched_size_fields`).

    Example: at ``MatchedSize(128, 2, head_size=32)`` softmax attention takes 4 heads, MGK 2 heads of
    width 32; BERT's and Macaron's layers an FFN 512 wide, the injective scheme 4 experts and no FFN."""
    fields: dict[str, Any] = {"hidden_size": size.hidden_size, "num_hidden_layers": size.num_hidden_layers}
    for idea in selected_ideas(attention_type, layer_scheme):
        for name, value in idea.matched_size_fields(size).items():
            if name in fields and fields[name] != value:
                raise TypeError(f"{idea.__name__} sizes {name}={value!r}, the other idea {fields[name]!r}.")
            fields[name] = value
    return fields


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
