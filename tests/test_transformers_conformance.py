"""Conformance run: every variant through transformers' own ``ModelTesterMixin``.

The mixin comes from the source distribution of the installed transformers (see
``transformers_suite.py``), with a ``ModelTester`` shaped like transformers' ``BertModelTester``.
Families that do not apply to a model are declared the way in-tree models declare them (class
attributes such as ``has_attentions = False``, ``_supports_sdpa = False`` on the model); every
``skipTest`` the suite then takes names its reason in pytest's summary (``-ra``).
"""

from __future__ import annotations

import contextlib
import copy
import sys
import unittest
from typing import Any, ClassVar

import pytest
import torch
from torch.nn.utils import parametrize
from transformers.models.auto import modeling_auto

from hf_variants import bert_control, macaron_bert, mgk_bert, node_transformer, transject
from hf_variants.core.composition import has_attention_probabilities
from hf_variants.core.registration import Variant

from .transformers_suite import load_model_tester_mixin

pytestmark = pytest.mark.conformance

ModelTesterMixin = load_model_tester_mixin()
skip_weight_init = sys.modules[ModelTesterMixin.__module__].skip_weight_init

#: The Auto class each head registers with → transformers' name table an in-tree model is listed in.
MAPPING_NAMES = {
    "AutoModel": modeling_auto.MODEL_MAPPING_NAMES,
    "AutoModelForMaskedLM": modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    "AutoModelForSequenceClassification": modeling_auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    "AutoModelForTokenClassification": modeling_auto.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES,
    "AutoModelForQuestionAnswering": modeling_auto.MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES,
    "AutoModelForMultipleChoice": modeling_auto.MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES,
}


class EncoderModelTester:
    """transformers' ``BertModelTester``'s sizes, for any of our variants."""

    batch_size = 13
    seq_length = 7
    is_training = True
    vocab_size = 99
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 4
    intermediate_size = 37
    max_position_embeddings = 512
    type_vocab_size = 16
    num_labels = 3
    num_choices = 4

    def __init__(self, parent: unittest.TestCase, variant: Variant, config_kwargs: dict[str, Any]) -> None:
        self.parent = parent
        self.variant = variant
        self.config_kwargs = config_kwargs
        self.num_hidden_layers = config_kwargs.get("num_hidden_layers", self.num_hidden_layers)
        self.num_attention_heads = config_kwargs.get("num_attention_heads", self.num_attention_heads)

    def get_config(self) -> Any:
        return self.variant.config_class(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            num_labels=self.num_labels,
            **{k: v for k, v in self.config_kwargs.items() if k not in ("num_hidden_layers", "num_attention_heads")},
        )

    def prepare_config_and_inputs_for_common(self) -> tuple[Any, dict[str, torch.Tensor]]:
        shape = (self.batch_size, self.seq_length)
        input_ids = torch.randint(0, self.vocab_size, shape)
        attention_mask = torch.randint(0, 2, shape)
        attention_mask[:, 0] = 1  # BERT's tester: random masks; the first token is kept so no row is empty
        token_type_ids = torch.randint(0, self.type_vocab_size, shape)
        inputs = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
        return self.get_config(), inputs


class ConformanceTests(ModelTesterMixin):
    """Binds the mixin to one variant; subclasses set ``variant`` and ``config_kwargs``."""

    variant: ClassVar[Variant]
    config_kwargs: ClassVar[dict[str, Any]] = {}

    def setUp(self) -> None:
        self.model_tester = EncoderModelTester(self, self.variant, self.config_kwargs)
        self.all_model_classes = tuple(self.variant.models.values())
        # An attention-free pair declares itself as transformers' attention-free models' tests do.
        self.has_attentions = has_attention_probabilities(self.model_tester.get_config())
        self._listed = contextlib.ExitStack()
        for head, names in MAPPING_NAMES.items():
            self._listed.enter_context(_listed_in(names, self.variant.model_type, self.variant.models[head].__name__))

    def tearDown(self) -> None:
        self._listed.close()

    def test_init_weights_can_init_buffers(self) -> None:
        """The suite's test, except for one buffer it cannot apply to: ``base`` of torch's orthogonal
        parametrisation is a *random* orthogonal matrix (the trivialisation point; torch keeps it as a
        buffer), so two constructions cannot agree on it. Every other buffer must match exactly, and
        after building on the meta device + ``init_weights`` each ``base`` must be orthogonal."""
        config, _ = self.model_tester.prepare_config_and_inputs_for_common()
        if not any(isinstance(m, parametrize.ParametrizationList) for m in self.all_model_classes[0](config).modules()):
            return super().test_init_weights_can_init_buffers()
        for model_class in self.all_model_classes:
            with skip_weight_init():
                from_init = model_class(copy.deepcopy(config))
            with torch.device("meta"):
                from_meta = model_class(copy.deepcopy(config))
            from_meta.to_empty(device="cpu")
            from_meta.init_weights()
            expected, got = dict(from_init.named_buffers()), dict(from_meta.named_buffers())
            self.assertEqual(sorted(expected), sorted(got))
            for name, buffer in got.items():
                if name.endswith(".base"):
                    identity = torch.eye(buffer.shape[-1])
                    torch.testing.assert_close(buffer.T @ buffer, identity, atol=1e-5, rtol=0, msg=name)
                else:
                    self.assertTrue(torch.equal(buffer, expected[name]), name)


@contextlib.contextmanager
def _listed_in(names: dict[str, str], model_type: str, class_name: str):
    """Lists a class in one of transformers' name tables while a test runs, as an in-tree model is."""
    names[model_type] = class_name
    try:
        yield
    finally:
        del names[model_type]


class TestBertControlConformance(ConformanceTests, unittest.TestCase):
    variant = bert_control.VARIANT


class TestMacaronBertConformance(ConformanceTests, unittest.TestCase):
    variant = macaron_bert.VARIANT


class TestMgkBertConformance(ConformanceTests, unittest.TestCase):
    variant = mgk_bert.VARIANT
    config_kwargs: ClassVar[dict] = {"num_attention_heads": 2, "head_dim": 16}


class TestMlkBertConformance(ConformanceTests, unittest.TestCase):
    variant = mgk_bert.VARIANT
    config_kwargs: ClassVar[dict] = {"num_attention_heads": 2, "head_dim": 16, "attention_type": "mlk"}


class TestRotaryBertControlConformance(ConformanceTests, unittest.TestCase):
    """Rotary positions (no position table) in BERT's layer."""

    variant = bert_control.VARIANT
    config_kwargs: ClassVar[dict] = {"position_embedding_type": "rotary"}


class TestRotaryMlkBertConformance(ConformanceTests, unittest.TestCase):
    """Rotary positions on MLK's feature maps."""

    variant = mgk_bert.VARIANT
    config_kwargs: ClassVar[dict] = {"num_attention_heads": 2, "head_dim": 16, "attention_type": "mlk",
                                     "position_embedding_type": "rotary"}  # fmt: skip


class TestTransJectConformance(ConformanceTests, unittest.TestCase):
    variant = transject.VARIANT
    config_kwargs: ClassVar[dict] = {"num_experts": 2, "num_attention_heads": 1}


class TestNodeTransformerConformance(ConformanceTests, unittest.TestCase):
    variant = node_transformer.VARIANT
    config_kwargs: ClassVar[dict] = {"rtol": 1e-7, "atol": 1e-7}

    @unittest.skip(
        "N-ODE attentions are a diagnostic: the map at the block's final state t=T, computed after the solve; "
        "the output depends on the attention at every solver evaluation, not on that map, so no gradient reaches it"
    )
    def test_retain_grad_hidden_states_attentions(self) -> None: ...
