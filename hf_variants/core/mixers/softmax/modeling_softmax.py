"""Implementation of ``attention_type="softmax"`` (spec: :mod:`.configuration_softmax`): the core's
multi-head self-attention (:mod:`hf_variants.core.attention`), the building block other ideas extend."""

from __future__ import annotations

from ...attention import MultiHeadSelfAttention

__all__ = ["MultiHeadSelfAttention"]
