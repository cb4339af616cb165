"""Registration of a variant with the transformers Auto classes.

Which Auto class a model belongs to follows from the core head it subclasses, so a variant only
lists its classes: ``register_variant(MyConfig, MyModel, MyForMaskedLM, ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import transformers
from transformers import AutoConfig, PreTrainedModel

from .configuration_encoder import EncoderConfig
from .modeling_encoder import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderModel,
)

#: Core head → the transformers Auto class that loads it.
AUTO_CLASS_BY_HEAD: dict[type[PreTrainedModel], str] = {
    EncoderModel: "AutoModel",
    EncoderForMaskedLM: "AutoModelForMaskedLM",
    EncoderForSequenceClassification: "AutoModelForSequenceClassification",
    EncoderForTokenClassification: "AutoModelForTokenClassification",
    EncoderForQuestionAnswering: "AutoModelForQuestionAnswering",
    EncoderForMultipleChoice: "AutoModelForMultipleChoice",
}


@dataclass(frozen=True)
class Variant:
    """A registered variant: its config class and ``{auto class name: model class}``."""

    config_class: type[EncoderConfig]
    models: dict[str, type[PreTrainedModel]] = field(default_factory=dict)

    @property
    def model_type(self) -> str:
        return self.config_class.model_type


#: model_type → Variant, filled by :func:`register_variant`.
VARIANTS: dict[str, Variant] = {}


def auto_class_name(model_class: type[PreTrainedModel]) -> str:
    """The Auto class for a model class, from the core head it subclasses."""
    for head, auto_name in AUTO_CLASS_BY_HEAD.items():
        if issubclass(model_class, head):
            return auto_name
    raise TypeError(f"{model_class.__name__} does not subclass any core head of hf_variants.")


def register_variant(config_class: type[EncoderConfig], *model_classes: type[PreTrainedModel]) -> Variant:
    """Register a config with ``AutoConfig`` and each model with its Auto class (idempotent)."""
    models: dict[str, type[PreTrainedModel]] = {}
    for model_class in model_classes:
        if model_class.config_class is not config_class:
            raise TypeError(f"{model_class.__name__}.config_class is not {config_class.__name__}.")
        name = auto_class_name(model_class)
        if name in models:
            raise TypeError(f"Two {config_class.model_type} classes map to {name}.")
        models[name] = model_class
    missing = set(AUTO_CLASS_BY_HEAD.values()) - set(models)
    if missing:
        raise TypeError(f"{config_class.model_type} lacks classes for: {', '.join(sorted(missing))}.")

    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    for name, model_class in models.items():
        getattr(transformers, name).register(config_class, model_class, exist_ok=True)
    variant = Variant(config_class, models)
    VARIANTS[config_class.model_type] = variant
    return variant
