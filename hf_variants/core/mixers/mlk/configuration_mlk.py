"""Spec of ``attention_type="mlk"``: Transformer-MLK (Nguyen et al. 2022, §2.4), linear attention over a
mixture of linear keys, implemented by :class:`~hf_variants.core.mixers.mlk.modeling_mlk.LinearMixtureAttention`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..mgk.configuration_mgk import MixtureOfKeysSpec

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig


class LinearMixtureSpec(MixtureOfKeysSpec):
    """MGK's fields (``num_key_components``, ``key_mode``, ``key_bias``, …), with the E-step fixed to
    learned priors: the soft and hard E-steps need every query-key pair, which linear attention never
    forms."""

    @classmethod
    def validate_config(cls, config: EncoderConfig) -> None:
        super().validate_config(config)
        if config.mixture_weights != "learned":
            raise ValueError(
                f"attention_type='mlk' supports only mixture_weights='learned', got {config.mixture_weights!r}: "
                "the soft/hard E-steps need every query-key pair, which linear attention never forms."
            )
