"""hf-variants: research Transformer encoders as first-class HuggingFace models.

``import hf_variants`` registers every variant with the transformers Auto classes before any Auto
lookup can be made, and is lazy (PEP 562): it imports neither torch nor transformers itself. The
variants are imported when first named (``hf_variants.MgkBertModel``) or when transformers' Auto
classes are first imported (:mod:`hf_variants.auto_registration`), so that the torch-free parts of the
package (:mod:`hf_variants.settings`, the command line) load in milliseconds.
"""

from __future__ import annotations

import importlib
from importlib import metadata as _metadata
from typing import TYPE_CHECKING, Any

from .auto_registration import register_when_ready

#: The variants this package registers (each one's folder and ``model_type``), the BERT control first.
VARIANT_MODEL_TYPES = ("bert_control", "macaron_bert", "mgk_bert", "node_transformer", "transject")

#: Public name → the module that defines it.
_EXPORTS = {
    "VARIANTS": "core", "EncoderConfig": "core", "register_variant": "core",
    **{f"{prefix}{suffix}": variant for variant, prefix in (
        ("bert_control", "BertControl"), ("macaron_bert", "MacaronBert"), ("mgk_bert", "MgkBert"),
        ("node_transformer", "NodeTransformer"), ("transject", "TransJect"),
    ) for suffix in ("Config", "Model", "ForMaskedLM")},
}  # fmt: skip
#: The subpackages and modules that ``hf_variants.<name>`` imports on first use.
_SUBMODULES = frozenset({*VARIANT_MODEL_TYPES, "cli", "core", "glue", "hub", "lab", "settings", "synthetic",
                         "tokenization", "training"})  # fmt: skip

try:
    __version__ = _metadata.version("hf-variants")  # one place: pyproject.toml
except _metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"


def register_variants() -> None:
    """Import every variant, which registers it with ``AutoConfig`` and its ``AutoModel*`` classes."""
    for model_type in VARIANT_MODEL_TYPES:
        importlib.import_module(f"{__name__}.{model_type}")


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        register_variants()  # VARIANTS and every class complete, whatever is named first
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_SUBMODULES})


register_when_ready(register_variants)

if TYPE_CHECKING:  # the names __getattr__ provides, for type checkers and editors
    from . import bert_control, macaron_bert, mgk_bert, node_transformer, transject
    from .bert_control import BertControlConfig, BertControlForMaskedLM, BertControlModel
    from .core import VARIANTS, EncoderConfig, register_variant
    from .macaron_bert import MacaronBertConfig, MacaronBertForMaskedLM, MacaronBertModel
    from .mgk_bert import MgkBertConfig, MgkBertForMaskedLM, MgkBertModel
    from .node_transformer import NodeTransformerConfig, NodeTransformerForMaskedLM, NodeTransformerModel
    from .transject import TransJectConfig, TransJectForMaskedLM, TransJectModel

__all__ = [
    "VARIANTS",
    "VARIANT_MODEL_TYPES",
    "BertControlConfig",
    "BertControlForMaskedLM",
    "BertControlModel",
    "EncoderConfig",
    "MacaronBertConfig",
    "MacaronBertForMaskedLM",
    "MacaronBertModel",
    "MgkBertConfig",
    "MgkBertForMaskedLM",
    "MgkBertModel",
    "NodeTransformerConfig",
    "NodeTransformerForMaskedLM",
    "NodeTransformerModel",
    "TransJectConfig",
    "TransJectForMaskedLM",
    "TransJectModel",
    "__version__",
    "bert_control",
    "macaron_bert",
    "mgk_bert",
    "node_transformer",
    "register_variant",
    "register_variants",
    "transject",
]
