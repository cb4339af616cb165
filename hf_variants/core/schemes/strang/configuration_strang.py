"""Spec of ``layer_scheme="strang"``: Macaron Net's layer (Lu et al. 2019, eq. (17)–(19)), implemented by
:class:`~hf_variants.core.schemes.strang.modeling_strang.StrangLayer`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from transformers.activations import ACT2FN

from ...ideas import FeedForwardSchemeSpec
from ...validation import require_choice

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig


class StrangSpec(FeedForwardSchemeSpec):
    """One Macaron layer, eq. (17)–(19), each sub-layer with its own residual LayerNorm.

    Config fields (on every config whose ``layer_scheme`` is ``"strang"``):
        first_ffn_activation: Activation of the first (lower) FFN. ``None`` (default) uses
            ``hidden_act``. The authors' code hard-wires ReLU here even when ``hidden_act`` is GELU;
            set ``"relu"`` to reproduce it.

    ``intermediate_size`` is that of the BERT model being matched; each of the two FFNs gets half of
    it (paper §4: "reduce the dimensionality of the inner-layer of the two FFN sub-layers by half").
    """

    control_overrides: ClassVar[dict[str, Any]] = {"layer_scheme": "lie_trotter"}
    config_defaults: ClassVar[dict[str, Any]] = {"first_ffn_activation": None}

    @classmethod
    def validate_config(cls, config: EncoderConfig) -> None:
        if config.intermediate_size < 2:
            raise ValueError(
                f"intermediate_size ({config.intermediate_size}) must be at least 2 for layer_scheme='strang': "
                "each of the two FFNs gets half."
            )
        if config.first_ffn_activation is not None:
            require_choice(config, "first_ffn_activation", ACT2FN.keys())
