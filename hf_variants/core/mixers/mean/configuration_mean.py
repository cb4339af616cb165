"""Spec of ``attention_type="mean"``: token mixing removed — every token receives the same unweighted
mean of the sequence, implemented by :class:`~hf_variants.core.mixers.mean.modeling_mean.MeanMixer`.

Not a paper's idea: a floor for comparisons. A model with it sees its input as a bag of words (each
word with its position embedding, but no token can weigh another by content or position), so a task
that needs tokens to be related (which noun is the subject) must separate it from softmax attention;
``hf-variants compare`` runs it as the positive control that shows what its seeds can detect.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ...ideas import ConfigurableIdea, MatchedSize


class MeanMixerSpec(ConfigurableIdea):
    """No config fields of its own; its matched control is softmax attention (the same model with
    tokens mixed by attention again), whose width (heads × head size) its value projection keeps."""

    control_overrides: ClassVar[dict[str, Any]] = {"attention_type": "softmax"}
    has_attention_probabilities = False
    lora_target_modules = ("value", "output")

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        return {"num_attention_heads": size.num_attention_heads}
