"""Configuration of Macaron-BERT (Lu et al. 2019, "Understanding and Improving Transformer From a
Multi-Particle Dynamic System Point of View")."""

from __future__ import annotations

from typing import Any

from ..core.configuration_encoder import EncoderConfig


class MacaronBertConfig(EncoderConfig):
    r"""A BERT-sized encoder whose layers are FFN(½) → self-attention → FFN(½) (paper eq. 17–19).

    All BERT fields of :class:`~hf_variants.core.configuration_encoder.EncoderConfig` keep their
    meaning; ``intermediate_size`` is that of the BERT model being matched, and each of the two
    FFNs of a layer gets half of it, so the parameter count equals BERT's up to one LayerNorm and
    one bias per layer. The layer's own field, ``first_ffn_activation``, is documented on
    :class:`~hf_variants.core.schemes.strang.configuration_strang.StrangSpec`.

    Args:
        attention_type: Token mixer (default ``"softmax"``, the paper's; any of ``ATTENTION_TYPES``).
        layer_scheme: Layer scheme (default ``"strang"``, the paper's idea; ``"lie_trotter"`` turns it off).
        layer_norm_position: ``"pre"`` (default; the authors' code, with a final LayerNorm after the
            stack) or ``"post"`` (BERT's placement).
        **kwargs: The fields of ``EncoderConfig`` and of the selected pair.
    """

    model_type = "macaron_bert"

    def __init__(
        self,
        attention_type: str = "softmax",
        layer_scheme: str = "strang",
        layer_norm_position: str = "pre",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            attention_type=attention_type,
            layer_scheme=layer_scheme,
            layer_norm_position=layer_norm_position,
            **kwargs,
        )
