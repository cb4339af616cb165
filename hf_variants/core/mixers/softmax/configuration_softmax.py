"""Spec of ``attention_type="softmax"``: scaled dot-product multi-head self-attention (Vaswani et al.
2017; BERT's), implemented by :class:`~hf_variants.core.attention.MultiHeadSelfAttention`."""

from __future__ import annotations

from typing import Any

from ...ideas import ConfigurableIdea, MatchedSize


class SoftmaxAttentionSpec(ConfigurableIdea):
    """Softmax attention owns no config fields of its own (it reads BERT's sizes); at a comparison's
    matched size it has ``hidden_size // head_size`` heads."""

    lora_target_modules = ("query", "key", "value", "output")

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        return {"num_attention_heads": size.num_attention_heads}
