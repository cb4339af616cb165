"""Configuration of Macaron-BERT (Lu et al. 2019, "Understanding and Improving Transformer From a
Multi-Particle Dynamic System Point of View")."""

from __future__ import annotations

from typing import Any

from ..core.configuration_encoder import EncoderConfig, require_choice


class MacaronBertConfig(EncoderConfig):
    r"""A BERT-sized encoder whose layers are FFN(½) → self-attention → FFN(½) (paper eq. 17–19).

    All BERT fields of :class:`~hf_variants.core.configuration_encoder.EncoderConfig` keep their
    meaning; ``intermediate_size`` is that of the BERT model being matched, and each of the two
    FFNs of a layer gets half of it (paper §4: "reduce the dimensionality of the inner-layer of the
    two FFN sub-layers by half"), so the parameter count equals BERT's up to one LayerNorm and
    one bias per layer.

    Args:
        layer_norm_position: ``"pre"`` (default; the authors' code, with a final LayerNorm after the
            stack) or ``"post"`` (BERT's placement).
        first_ffn_activation: Activation of the first (lower) FFN. ``None`` (default) uses
            ``hidden_act``. The authors' code hard-wires ReLU here even when ``hidden_act`` is GELU;
            set ``"relu"`` to reproduce it.
        **kwargs: The fields of ``EncoderConfig``.
    """

    model_type = "macaron_bert"

    def __init__(
        self,
        layer_norm_position: str = "pre",
        first_ffn_activation: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.first_ffn_activation = first_ffn_activation
        super().__init__(layer_norm_position=layer_norm_position, **kwargs)

    @property
    def ffn_inner_size(self) -> int:
        """Inner width of each of the two FFNs: half of the matched BERT's ``intermediate_size``."""
        return self.intermediate_size // 2

    def validate(self) -> None:
        super().validate()
        if self.intermediate_size < 2:
            raise ValueError(
                f"intermediate_size ({self.intermediate_size}) must be at least 2: each of the two FFNs gets half."
            )
        if self.first_ffn_activation is not None:
            from transformers.activations import ACT2FN

            require_choice(self, "first_ffn_activation", ACT2FN.keys())
