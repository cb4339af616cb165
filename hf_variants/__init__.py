"""hf-variants: research Transformer encoders as first-class HuggingFace models.

``import hf_variants`` registers every variant with the transformers Auto classes.
"""

from importlib import metadata as _metadata

from . import bert_control, macaron_bert, mgk_bert, node_transformer, transject
from .bert_control import BertControlConfig, BertControlForMaskedLM, BertControlModel
from .core import VARIANTS, EncoderConfig, register_variant
from .macaron_bert import MacaronBertConfig, MacaronBertForMaskedLM, MacaronBertModel
from .mgk_bert import MgkBertConfig, MgkBertForMaskedLM, MgkBertModel
from .node_transformer import NodeTransformerConfig, NodeTransformerForMaskedLM, NodeTransformerModel
from .transject import TransJectConfig, TransJectForMaskedLM, TransJectModel

try:
    __version__ = _metadata.version("hf-variants")  # one place: pyproject.toml
except _metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "VARIANTS",
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
    "transject",
]
