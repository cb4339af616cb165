"""Configuration of the BERT control: BERT built from this package's own core."""

from __future__ import annotations

from typing import Any

from ..core.configuration_encoder import EncoderConfig


class BertControlConfig(EncoderConfig):
    r"""BERT (Devlin et al. 2019) on the hf-variants core: the matched control of every comparison.

    Same embeddings, pooler, heads, initialisation, LayerNorm options, ``head_dim``, sparse
    prediction and Hub export as the variants, with BERT's layer (``layer_scheme="lie_trotter"``)
    and softmax attention by default. With the default post-LN placement and weights copied from
    ``transformers.BertModel`` (:func:`~hf_variants.bert_control.modeling_bert_control.state_dict_from_bert`)
    it computes the same outputs. A variant's control is this config with the variant's sizes and
    LayerNorm placement; switching one axis (``attention_type`` or ``layer_scheme``) turns exactly
    one variant's idea on.

    Args:
        attention_type: Token mixer (default ``"softmax"``).
        layer_scheme: Layer scheme (default ``"lie_trotter"``).
        **kwargs: The fields of ``EncoderConfig`` (BERT's defaults: post-LN, first-token pooling) and
            of the selected pair.
    """

    model_type = "bert_control"

    def __init__(self, attention_type: str = "softmax", layer_scheme: str = "lie_trotter", **kwargs: Any) -> None:
        super().__init__(attention_type=attention_type, layer_scheme=layer_scheme, **kwargs)
