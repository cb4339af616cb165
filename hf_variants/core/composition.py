"""The two axes of a layer, as two registries, and the one place where a layer is built from them.

* ``ATTENTION_TYPES`` — how tokens mix (``config.attention_type``).
* ``LAYER_SCHEMES`` — how a layer composes its sub-steps around the token mixer (``config.layer_scheme``).

Every variant's config carries both switches (its paper's pair by default), so any token mixer runs
in any scheme: :func:`build_layer` is the only code that combines them, and no pair has code of its
own. Each idea has a torch-free spec (:class:`~hf_variants.core.ideas.ConfigurableIdea`: its config fields
with defaults, their validation, its matched control and sizes), which
:class:`~hf_variants.core.configuration_encoder.EncoderConfig` applies only to the pair a config
selects, and an implementation (the ``nn.Module``), which only a model imports.

Adding a token mixer: write a :class:`~hf_variants.core.encoder_layers.TokenMixer` module
(``cls(config, layer_idx=...)``, called as ``mixer(hidden_states, padding_mask, *context,
output_attentions=...)`` → ``(output, probabilities or None)``) and add one line to ``ATTENTION_TYPES``.
Adding a layer scheme: a :class:`~hf_variants.core.encoder_layers.LayerScheme` (``cls(config, layer_idx,
make_attention)``, called as ``layer(hidden_states, padding_mask, *context, output_attentions=...)`` → the new
hidden states, its ``control_overrides`` naming its matched control) and one line in
``LAYER_SCHEMES``. The line is the class itself (its own spec), or, for an idea of this package, its folder
``mixers/<key>/`` or ``schemes/<key>/`` holding ``configuration_<key>.py`` (the spec) and ``modeling_<key>.py``;
docs/extending.md has the recipe and docs/mix-and-match.md a worked example, run by the test suite.

The registries name each idea's modules instead of importing them (:class:`IdeaRegistry`), so a config
imports its pair's specs only, a model its pair's implementations, and a Hub export ships only those
(``hf_variants.hub``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .ideas import ConfigurableIdea, MatchedSize

if TYPE_CHECKING:
    from torch import nn

    from .configuration_encoder import EncoderConfig
    from .encoder_layers import LayerScheme
    from .registered_specs import *  # noqa: F403 - the files the registries below may import by name


@dataclass(frozen=True)
class IdeaModules:
    """Where a package idea lives, as ``"module:Class"`` relative to ``hf_variants.core``: its torch-free
    ``spec`` (config fields, validation, control, sizes) and its ``implementation`` (the ``nn.Module``)."""

    spec: str
    implementation: str


class IdeaRegistry(MutableMapping[str, type]):
    """``name → idea``. An entry is a class (its own spec and implementation) or :class:`IdeaModules`
    naming a spec and an implementation module of this package, each imported the first time it is
    needed: ``registry[name]`` gives the spec (all a config needs), :meth:`implementation` the module
    class (what a model builds). So a config imports no modeling code, a model only its own pair's,
    and :meth:`module_names` tells an exporter which files a pair needs."""

    def __init__(self, axis: str, entries: dict[str, type | IdeaModules]) -> None:
        self.axis = axis
        self._entries = dict(entries)
        self._loaded: dict[str, type] = {}

    def _load(self, name: str, reference: str) -> type:
        if reference not in self._loaded:
            module_name, class_name = reference.split(":")
            try:
                module = importlib.import_module(f"{__package__}.{module_name}")
            except ModuleNotFoundError as error:
                if error.name != f"{__package__}.{module_name}":
                    raise
                file_name = module_name.rsplit(".", 1)[-1] + ".py"
                raise ImportError(
                    f"{self.axis}={name!r} needs {file_name}, which this copy of the code does not have: a Hub "
                    "export ships the modules of its own pair only. Install hf-variants (pip install hf-variants) "
                    "to build other pairs."
                ) from None
            self._loaded[reference] = getattr(module, class_name)
        return self._loaded[reference]

    def __getitem__(self, name: str) -> type:
        """The idea's spec: its config fields, validation, control and sizes."""
        entry = self._entries[name]
        return self._load(name, entry.spec) if isinstance(entry, IdeaModules) else entry

    def implementation(self, name: str) -> type:
        """The ``nn.Module`` class that implements the idea (imports its modeling code)."""
        entry = self._entries[name]
        return self._load(name, entry.implementation) if isinstance(entry, IdeaModules) else entry

    def __setitem__(self, name: str, idea: type | IdeaModules) -> None:
        self._entries[name] = idea

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def references(self, name: str) -> list[tuple[str, str]]:
        """``(dotted module, class name)`` of ``name``'s spec and implementation (one pair for a class
        registered on its own), without importing them."""
        entry = self._entries[name]
        if not isinstance(entry, IdeaModules):
            return [(entry.__module__, entry.__name__)]
        pairs = (reference.split(":") for reference in (entry.spec, entry.implementation))
        return [(f"{__package__}.{module}", class_name) for module, class_name in pairs]

    def module_names(self, name: str) -> list[str]:
        """The dotted modules of ``name``'s spec and implementation, without importing them."""
        return [module for module, _ in self.references(name)]

    def class_names(self) -> list[str]:
        """The implementation class names of every entry, without importing them."""
        return [self.references(name)[-1][1] for name in self]


#: Whether the idea folders are flattened into this module's own folder, read from the files beside it: in the
#: package each idea has its folder (``mixers/<key>/``), in a Hub export every file sits in one folder.
IDEA_FOLDERS_FLATTENED = not (Path(__file__).parent / "mixers").is_dir()


def _package_idea(folder: str, spec_class: str, implementation_class: str) -> IdeaModules:
    """The entry of an idea of the folder ``"<axis>.<key>"``: ``configuration_<key>`` and ``modeling_<key>`` (a
    folder may hold one idea's readings under other keys, e.g. MGK's linear form, MLK)."""
    key = folder.rsplit(".", 1)[-1]
    prefix = "" if IDEA_FOLDERS_FLATTENED else f"{folder}."
    return IdeaModules(f"{prefix}configuration_{key}:{spec_class}", f"{prefix}modeling_{key}:{implementation_class}")


#: ``attention_type`` → token mixer (``mixers/<key>/``).
ATTENTION_TYPES = IdeaRegistry("attention_type", {
    "softmax": _package_idea("mixers.softmax", "SoftmaxAttentionSpec", "MultiHeadSelfAttention"),  # Vaswani 2017
    "mgk": _package_idea("mixers.mgk", "MixtureOfKeysSpec", "MixtureOfKeysAttention"),  # Nguyen et al. 2022, eq. 7
    "mlk": _package_idea("mixers.mgk", "LinearMixtureSpec", "LinearMixtureAttention"),  # Nguyen et al. 2022, §2.4
    # TransJect, Theorem 1
    "orthogonal": _package_idea("mixers.orthogonal", "OrthogonalAttentionSpec", "OrthogonalAttention"),
    "mean": _package_idea("mixers.mean", "MeanMixerSpec", "MeanMixer"),  # no token mixing: a floor for comparisons
})  # fmt: skip

#: ``layer_scheme`` → layer (``schemes/<key>/``).
LAYER_SCHEMES = IdeaRegistry("layer_scheme", {
    "lie_trotter": _package_idea("schemes.lie_trotter", "LieTrotterSpec", "TransformerLayer"),  # BERT; Lu, eq. 12-13
    "strang": _package_idea("schemes.strang", "StrangSpec", "StrangLayer"),  # Macaron; Lu et al. 2019, eq. 17-19
    "ode": _package_idea("schemes.ode", "OdeSpec", "NodeTransformerBlock"),  # N-ODE Transformer, eq. 2/3/9
    "vanilla": _package_idea("schemes.vanilla", "VanillaSpec", "VanillaTransformerBlock"),  # N-ODE Transformer, eq. 1
    "injective": _package_idea("schemes.injective", "InjectiveSpec", "InjectiveLayer"),  # TransJect, eq. 3-6
})  # fmt: skip


def pair_modules(attention_type: str, layer_scheme: str) -> list[str]:
    """The dotted modules of a pair's specs and implementations (what an export of the pair ships)."""
    selected_ideas(attention_type, layer_scheme)  # a clear error for an unregistered name
    modules = [*ATTENTION_TYPES.module_names(attention_type), *LAYER_SCHEMES.module_names(layer_scheme)]
    return list(dict.fromkeys(modules))


def selected_ideas(attention_type: str, layer_scheme: str) -> tuple[type[ConfigurableIdea], ...]:
    """The specs of a pair (torch-free); ``ValueError`` for a name that is not registered."""
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


def idea_field_names() -> frozenset[str]:
    """The config fields of every registered token mixer and layer scheme (their specs only are imported)."""
    registries = (ATTENTION_TYPES, LAYER_SCHEMES)
    return frozenset(name for registry in registries for key in registry for name in registry[key].config_defaults)


def validate_composition(config: EncoderConfig) -> None:
    """Validate the fields of the config's token mixer and layer scheme, then their pairing: a mixer setting
    that must be called once per layer forward (``single_call_requirement``) beside a scheme that calls its
    mixer repeatedly (``calls_mixer_once``); then rotary positions, where an idea refuses them."""
    for idea in selected_ideas(config.attention_type, config.layer_scheme):
        idea.validate_config(config)
    requirement = ATTENTION_TYPES[config.attention_type].single_call_requirement(config)
    scheme = LAYER_SCHEMES[config.layer_scheme]
    if requirement is not None and not scheme.calls_mixer_once:
        setting, why = requirement
        how = f" ({scheme.mixer_calls})" if scheme.mixer_calls else ""
        raise ValueError(
            f"{setting} cannot be used with layer_scheme={config.layer_scheme!r}, which calls the token mixer a "
            f"varying number of times per layer{how}: {why}"
        )
    if config.position_embedding_type == "rotary":
        reason = first_refusal(config, "rotary_positions_error")
        if reason is not None:
            raise ValueError(f"position_embedding_type='rotary' cannot be used here: {reason}")


def first_refusal(config: EncoderConfig, question: str) -> str | None:
    """The first reason an idea of the config's pair gives when asked ``question`` (the name of a
    :class:`~hf_variants.core.ideas.ConfigurableIdea` hook returning a reason or ``None``), or ``None``."""
    for idea in selected_ideas(config.attention_type, config.layer_scheme):
        reason = getattr(idea, question)(config)
        if reason is not None:
            return reason
    return None


def gradient_checkpointing_error(config: EncoderConfig) -> str | None:
    """Why gradient checkpointing would change the results of this config's pair, if it would."""
    return first_refusal(config, "gradient_checkpointing_error")


def document_packing_error(config: EncoderConfig) -> str | None:
    """Why this config's pair cannot keep packed documents apart, if it cannot."""
    return first_refusal(config, "document_packing_error")


def static_graph_error(config: EncoderConfig) -> str | None:
    """Why this config's pair cannot be exported as one static graph (``torch.export``, ONNX), if it cannot."""
    return first_refusal(config, "static_graph_error")


def weight_initializers(config: EncoderConfig) -> list[Callable[[nn.Module, EncoderConfig], None]]:
    """The pair's :meth:`~hf_variants.core.ideas.ConfigurableIdea.init_weights` hooks, each once
    (TransJect's two ideas share the orthogonal weights' one, which must not draw twice)."""
    hooks: dict[Callable[..., None], Callable[[nn.Module, EncoderConfig], None]] = {}
    for idea in selected_implementations(config):
        hooks.setdefault(idea.init_weights.__func__, idea.init_weights)
    return list(hooks.values())


def parametrization_owners(attention_type: str, layer_scheme: str) -> dict[str, type[ConfigurableIdea]]:
    """Each parametrisation field of the pair (how weights are stored, not the function they define,
    e.g. ``orthogonal_map``) → the implementation that re-parametrises a model for it."""
    owners: dict[str, type[ConfigurableIdea]] = {}
    for registry, name in ((ATTENTION_TYPES, attention_type), (LAYER_SCHEMES, layer_scheme)):
        for field in registry[name].parametrization_fields:
            owners.setdefault(field, registry.implementation(name))
    return owners


def selected_implementations(config: EncoderConfig) -> tuple[type[ConfigurableIdea], ...]:
    """The ``nn.Module`` classes of the config's pair (imports their modeling code)."""
    selected_ideas(config.attention_type, config.layer_scheme)
    return ATTENTION_TYPES.implementation(config.attention_type), LAYER_SCHEMES.implementation(config.layer_scheme)


def build_attention(config: EncoderConfig, layer_idx: int | None = None) -> nn.Module:
    return ATTENTION_TYPES.implementation(config.attention_type)(config, layer_idx=layer_idx)


def build_layer(config: EncoderConfig, layer_idx: int) -> LayerScheme:
    """The layer ``layer_idx`` of a config: its scheme, given a factory of its token mixer."""
    scheme = LAYER_SCHEMES.implementation(config.layer_scheme)
    return scheme.build(config, layer_idx, partial(build_attention, config, layer_idx))


def context_modules(config: EncoderConfig) -> dict[str, nn.Module]:
    """The per-backbone modules the config's token mixer needs (e.g. TransJect's eigenvalue estimator)."""
    context = ATTENTION_TYPES.implementation(config.attention_type).context_module
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


#: Config fields that name a model's class, the release that saved it or where it was read from, not the model
#: it builds.
NAMING_FIELDS = frozenset({"model_type", "architectures", "auto_map", "transformers_version", "_name_or_path"})


def model_identity(config: EncoderConfig) -> dict[str, Any]:
    """The config as the model it builds, by exclusion: every field but those that name its class
    (:data:`NAMING_FIELDS`) and those of registered ideas it does not select. Configs with equal identities
    build the same model — the same parameters at the same seed, the same forward — since every variant's
    model is the core's encoder with the selected pair (a variant folder only declares): the matched control
    of MGK-BERT (softmax attention in BERT's post-LN layer, MGK's fields unused) is post-LN Macaron-BERT's
    (BERT's layer, its Strang fields unused). A field no idea owns counts, so a new one can only tell
    models apart, never merge two. Example: a grid runs such a twin once (:class:`hf_variants.lab.grid.Grid`)."""
    unused = idea_field_names() - set(option_defaults(config.attention_type, config.layer_scheme))
    return {name: value for name, value in config.to_dict().items() if name not in NAMING_FIELDS | unused}
