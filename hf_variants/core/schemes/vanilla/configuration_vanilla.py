"""Spec of ``layer_scheme="vanilla"``: the N-ODE Transformer paper's vanilla block, eq. (1), the ODE
scheme's matched control,
implemented by :class:`~hf_variants.core.schemes.vanilla.modeling_vanilla.VanillaTransformerBlock`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ...ideas import FeedForwardSchemeSpec
from ...validation import require_bool

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig


class VanillaSpec(FeedForwardSchemeSpec):
    """Eq. (1): ``Y = X + MHSA(X)``, ``X' = Y + FFN(Y)``, with dropout after each sub-layer.

    Config fields (on every config whose ``layer_scheme`` is ``"vanilla"``):
        use_layer_norm: Pre-LayerNorm before each sub-layer (off, as in the paper; the ODE scheme's
            field of the same name, with the same meaning inside F).
    """

    config_defaults: ClassVar[dict[str, Any]] = {"use_layer_norm": False}

    @classmethod
    def validate_config(cls, config: EncoderConfig) -> None:
        require_bool(config, "use_layer_norm")
