"""What a config knows of a token mixer or a layer scheme: its declarative spec (fields, defaults,
validation, matched control, matched sizes), apart from the ``nn.Module`` that implements it.

Torch-free (no torch import of its own; transformers' config classes import torch anyway), like every
``mixers/<key>/configuration_<key>.py`` and ``schemes/<key>/configuration_<key>.py`` spec: a config (and
``AutoConfig`` of an exported checkpoint) imports these and no modeling code, so building one imports
neither flex attention nor ``torchdiffeq``. The registries
(:mod:`hf_variants.core.composition`) pair each spec with its implementation, imported only when a model
is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from torch import nn

    from .configuration_encoder import EncoderConfig


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
    only for configs that select it.

    The package's ideas declare these on a torch-free spec class (``configuration_<key>.py``) and
    implement the idea in a separate module class (``modeling_<key>.py``), which the registry names
    beside it. A class registered on its own (a :class:`~hf_variants.core.encoder_layers.TokenMixer` or
    :class:`~hf_variants.core.encoder_layers.LayerScheme`) is both its spec and its implementation.
    The two model-side hooks (:meth:`init_weights`, :meth:`reparametrize`) are called on the
    implementation."""

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
    def single_call_requirement(cls, config: EncoderConfig) -> tuple[str, str] | None:
        """(Token mixers.) When this config's mixer must be called exactly once per layer forward (it updates
        state in every call): ``(the setting, why)``; ``None`` otherwise. ``validate_composition`` refuses such a
        setting beside a layer scheme that calls its mixer repeatedly (:attr:`LayerSchemeSpec.calls_mixer_once`)."""
        return None

    @classmethod
    def gradient_checkpointing_error(cls, config: EncoderConfig) -> str | None:
        """Why gradient checkpointing would change this idea's results, or ``None`` when it is fine."""
        return None

    @classmethod
    def rotary_positions_error(cls, config: EncoderConfig) -> str | None:
        """Why this idea cannot take rotary positions (``position_embedding_type="rotary"``, which rotate the
        queries and keys of a dot product), or ``None`` when it can."""
        return None

    @classmethod
    def document_packing_error(cls, config: EncoderConfig) -> str | None:
        """Why this idea cannot keep the documents of a packed row apart (a token would be computed from
        another document's), or ``None`` when each token depends on its own document only."""
        return None

    @classmethod
    def static_graph_error(cls, config: EncoderConfig) -> str | None:
        """Why this idea's forward cannot be traced into one static graph (``torch.export``, ONNX), or ``None``
        when it can (orthogonal weights count as constants there: ``hold_parametrized_weights``)."""
        return None

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        """This idea's config values at a comparison's matched ``size``, beside the width and depth every
        model shares (e.g. MGK's half the heads, an FFN's width). Empty: the idea has no size of its own."""
        return {}

    @classmethod
    def init_weights(cls, module: nn.Module, config: EncoderConfig) -> None:
        """(Implementation.) Initialise what this idea puts into a model beyond
        ``PreTrainedModel._init_weights`` and the modules' own ``init_extra_parameters`` (e.g. the
        parametrisations of orthogonal weights, which sit on torch's modules). Called with every module
        of a model that selects the idea; through ``transformers.initialization``, which leaves loaded
        tensors alone."""

    @classmethod
    def reparametrize(cls, model: nn.Module, name: str, value: Any) -> None:
        """(Implementation.) Store ``model``'s weights under ``name=value``, one of
        :attr:`parametrization_fields`, without changing the function they define."""
        raise NotImplementedError(f"{cls.__name__} has no parametrization field {name!r}.")


class LayerSchemeSpec(ConfigurableIdea):
    """A layer scheme's spec: beside :class:`ConfigurableIdea`'s fields, whether its layers carry
    LayerNorms (so that a pre-LN stack ends with one) and call their token mixer once."""

    has_layer_norm: ClassVar[bool] = True
    #: Whether a layer calls its token mixer exactly once per forward (an ODE solver calls it once per
    #: function evaluation): a mixer whose forward updates state (MGK's soft E-step) needs it.
    calls_mixer_once: ClassVar[bool] = True
    #: For a scheme that does not: how it calls its mixer, for error messages ("an ODE solver: once per NFE").
    mixer_calls: ClassVar[str | None] = None


class FeedForwardSchemeSpec(LayerSchemeSpec):
    """A layer scheme whose layers hold position-wise FFNs (``fc_in`` → ``fc_out``): BERT's, Macaron's,
    the ODE and the vanilla eq. (1) layers. At a comparison's matched size the FFN is the shared
    ``intermediate_size`` (4 × width), and a LoRA adapter targets its two linears."""

    lora_target_modules = ("fc_in", "fc_out")

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        return {"intermediate_size": size.intermediate_size}
