"""Configuration of MGK-BERT (Nguyen et al. 2022, "Improving Transformers with Probabilistic
Attention Keys": Transformer-MGK and its linear form Transformer-MLK)."""

from __future__ import annotations

from typing import Any

from ..core.configuration_encoder import EncoderConfig

#: v0.1.0 selected MGK/MLK with ``attention_kind``; configs saved then still load.
ATTENTION_KIND_TO_TYPE = {"gaussian": "mgk", "linear": "mlk"}


class MgkBertConfig(EncoderConfig):
    r"""A BERT-style encoder whose attention keys are Gaussian mixtures (paper §2, eq. 5–8).

    The attention's fields (``num_key_components``, ``key_mode``, ``key_shift_init_std``,
    ``variance_factors``, ``mixture_weights``) are documented on
    :class:`~hf_variants.core.mixers.mgk.configuration_mgk.MixtureOfKeysSpec`; any variant with
    ``attention_type="mgk"`` or ``"mlk"`` has them.

    Args:
        attention_type: ``"mgk"`` (default, softmax over Gaussian-kernel scores) or ``"mlk"`` (§2.4,
            linear attention with φ = elu + 1 and a mixture of linear keys); ``"softmax"`` turns the
            idea off (the matched control), and every other token mixer is allowed.
        layer_scheme: Layer scheme (default ``"lie_trotter"``: BERT's post-LN layer, as in the paper).
        attention_kind: v0.1.0's name of the switch (``"gaussian"`` = ``"mgk"``, ``"linear"`` = ``"mlk"``),
            accepted when ``attention_type`` is not given so that old checkpoints load.
        **kwargs: The fields of ``EncoderConfig`` (``head_dim`` included) and of the selected pair.
    """

    model_type = "mgk_bert"

    def __init__(
        self,
        attention_type: str | None = None,
        layer_scheme: str = "lie_trotter",
        attention_kind: str | None = None,
        **kwargs: Any,
    ) -> None:
        if attention_kind is not None:
            if attention_kind not in ATTENTION_KIND_TO_TYPE:
                raise ValueError(f"attention_kind must be one of 'gaussian', 'linear'; got {attention_kind!r}.")
            if attention_type not in (None, ATTENTION_KIND_TO_TYPE[attention_kind]):
                raise ValueError(
                    f"attention_kind={attention_kind!r} contradicts attention_type={attention_type!r}; "
                    "give only attention_type."
                )
            attention_type = ATTENTION_KIND_TO_TYPE[attention_kind]
        super().__init__(attention_type=attention_type or "mgk", layer_scheme=layer_scheme, **kwargs)
