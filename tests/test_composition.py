"""Mix and match: any token mixer (``attention_type``) with any layer scheme (``layer_scheme``) on any
variant, the two registries, the BERT control, and the errors of pairs that are not meaningful."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
import transformers
from torch import nn
from transformers import AutoConfig, AutoModel, BertConfig, BertForMaskedLM, BertForSequenceClassification, BertModel

from hf_variants import bert_control, macaron_bert, mgk_bert, node_transformer, transject
from hf_variants.bert_control import BertControlConfig, BertControlForMaskedLM, BertControlModel, state_dict_from_bert
from hf_variants.core import composition
from hf_variants.core.encoder_layers import FeedForward, TokenMixer
from hf_variants.core.ideas import MatchedSize
from hf_variants.core.mixers.mgk.modeling_mgk import MixtureOfKeysAttention
from hf_variants.core.mixers.orthogonal.modeling_orthogonal import OrthogonalAttention
from hf_variants.core.registration import VARIANTS, Variant
from hf_variants.core.schemes.injective.modeling_injective import InjectiveLayer
from hf_variants.core.schemes.lie_trotter.modeling_lie_trotter import TransformerLayer
from hf_variants.core.schemes.ode.modeling_ode import NodeTransformerBlock
from hf_variants.core.schemes.strang.modeling_strang import StrangLayer
from hf_variants.core.schemes.vanilla.modeling_vanilla import VanillaTransformerBlock

from .common import CommonEncoderTests, make_inputs

MGK = {"num_attention_heads": 2, "head_dim": 16}
TIGHT_ODE = {"rtol": 1e-7, "atol": 1e-7}


def grid_class(variant: Variant, overrides: dict[str, Any], full: bool = True) -> type[CommonEncoderTests]:
    """The common suite for ``variant`` with ``overrides`` (its flags follow from the pair); a mixed pair is
    part of the full suite, which CI runs (``HF_VARIANTS_FULL_TESTS=1``; tests/conftest.py)."""
    config = variant.config_class(**overrides)
    probabilities = composition.has_attention_probabilities(config)
    attributes = {
        "variant": variant,
        "config_kwargs": overrides,
        # eager vs sdpa and the probability checks apply to the softmax-normalised mixers
        "softmax_attention": probabilities and config.attention_type in ("softmax", "mgk"),
        "pytestmark": [pytest.mark.full] if full else [],
    }
    return type(f"Grid_{variant.model_type}", (CommonEncoderTests,), attributes)


# Beyond the four defaults (tested in each variant's module): every attention under lie_trotter and
# strang, softmax / MGK / MLK under ode, softmax under injective — each on a variant whose own pair
# differs, so that the switch, not the variant, is what is tested.
class TestBertControlCommon(grid_class(bert_control.VARIANT, {}, full=False)):  # lie_trotter × softmax
    pass


class TestLieTrotterMgkCommon(grid_class(node_transformer.VARIANT, {"layer_scheme": "lie_trotter",
                                                                   "attention_type": "mgk", **MGK})):  # fmt: skip
    pass


class TestLieTrotterMlkCommon(grid_class(transject.VARIANT, {"layer_scheme": "lie_trotter",
                                                             "attention_type": "mlk", **MGK})):  # fmt: skip
    pass


class TestLieTrotterOrthogonalCommon(grid_class(macaron_bert.VARIANT, {"layer_scheme": "lie_trotter",
                                                                       "attention_type": "orthogonal"})):  # fmt: skip
    pass


class TestStrangSoftmaxCommon(grid_class(bert_control.VARIANT, {"layer_scheme": "strang"})):
    pass


class TestStrangMgkCommon(grid_class(macaron_bert.VARIANT, {"attention_type": "mgk", **MGK})):
    pass


class TestStrangMlkCommon(grid_class(macaron_bert.VARIANT, {"attention_type": "mlk", **MGK})):
    pass


class TestStrangOrthogonalCommon(grid_class(mgk_bert.VARIANT, {"layer_scheme": "strang",
                                                               "attention_type": "orthogonal"})):  # fmt: skip
    pass


class TestOdeSoftmaxCommon(grid_class(bert_control.VARIANT, {"layer_scheme": "ode", **TIGHT_ODE})):
    pass


class TestOdeMgkCommon(grid_class(mgk_bert.VARIANT, {"layer_scheme": "ode", **MGK, **TIGHT_ODE})):
    pass


class TestOdeMlkCommon(grid_class(node_transformer.VARIANT, {"attention_type": "mlk", **MGK, **TIGHT_ODE})):
    pass


class TestInjectiveSoftmaxCommon(grid_class(bert_control.VARIANT, {"layer_scheme": "injective"})):
    pass


# ---------------------------------------------------------------------------------------------- config
def test_default_pairs_are_the_papers() -> None:
    pairs = {name: (v.config_class().attention_type, v.config_class().layer_scheme) for name, v in VARIANTS.items()}
    assert pairs == {
        "bert_control": ("softmax", "lie_trotter"),
        "macaron_bert": ("softmax", "strang"),
        "mgk_bert": ("mgk", "lie_trotter"),
        "transject": ("orthogonal", "injective"),
        "node_transformer": ("softmax", "ode"),
    }


def test_switched_config_has_the_fields_of_its_pair_and_round_trips(tmp_path: Path) -> None:
    config = AutoConfig.for_model("macaron_bert", attention_type="mgk", num_key_components=3,
                                  variance_factors=[1.0, 1.0, 2.0])  # fmt: skip
    assert (config.attention_type, config.layer_scheme) == ("mgk", "strang")
    assert config.mixture_weights == "learned" and config.first_ffn_activation is None  # defaults of both ideas
    assert not hasattr(config, "rtol") and not hasattr(AutoConfig.for_model("macaron_bert"), "mixture_weights")
    config.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert type(loaded) is type(config)
    saved, original = loaded.to_dict(), config.to_dict()
    assert {k: v for k, v in saved.items() if k != "_name_or_path"} == {
        k: v for k, v in original.items() if k != "_name_or_path"
    }

    ode = AutoConfig.for_model("node_transformer", attention_type="mlk")
    assert (ode.attention_type, ode.layer_scheme, ode.ode_method) == ("mlk", "ode", "dopri5")


def test_fields_are_validated_only_when_their_idea_is_used() -> None:
    macaron_bert.MacaronBertConfig(mixture_weights="bogus", rtol=-1)  # softmax × strang: not its fields
    with pytest.raises(ValueError, match="mixture_weights must be one of"):
        macaron_bert.MacaronBertConfig(attention_type="mgk", mixture_weights="bogus")
    with pytest.raises(ValueError, match="rtol must be a positive number"):
        macaron_bert.MacaronBertConfig(layer_scheme="ode", rtol=-1)
    with pytest.raises(ValueError, match="num_experts must be a positive integer"):
        BertControlConfig(layer_scheme="injective", num_experts=0)
    with pytest.raises(ValueError, match="eigenvalue_mode must be one of"):
        mgk_bert.MgkBertConfig(attention_type="orthogonal", eigenvalue_mode="guess")


def test_pairs_that_are_not_meaningful_raise_and_say_why() -> None:
    with pytest.raises(ValueError, match="attention_type must be one of 'softmax', 'mgk', 'mlk', 'orthogonal'"):
        BertControlConfig(attention_type="performer")
    schemes = "'lie_trotter', 'strang', 'ode', 'vanilla', 'injective'"
    with pytest.raises(ValueError, match=f"layer_scheme must be one of {schemes}"):
        BertControlConfig(layer_scheme="reversible")
    with pytest.raises(ValueError, match=r"soft_em' cannot be used with layer_scheme='ode'.*per function evaluation"):
        node_transformer.NodeTransformerConfig(attention_type="mgk", mixture_weights="soft_em")
    with pytest.raises(ValueError, match="time_dependent_attention=True needs attention_type='softmax'"):
        node_transformer.NodeTransformerConfig(attention_type="mgk", time_dependent_attention=True)
    with pytest.raises(ValueError, match="supports only mixture_weights='learned'"):
        macaron_bert.MacaronBertConfig(attention_type="mlk", mixture_weights="hard")
    with pytest.raises(ValueError, match="contradicts attention_type"):
        mgk_bert.MgkBertConfig(attention_kind="linear", attention_type="mgk")


def test_v010_attention_kind_still_selects_mlk() -> None:
    assert mgk_bert.MgkBertConfig(attention_kind="linear").attention_type == "mlk"
    assert mgk_bert.MgkBertConfig(attention_kind="gaussian").attention_type == "mgk"


def test_pair_changed_after_construction_gets_its_fields(tmp_path: Path) -> None:
    """``from_pretrained(..., attention_type=...)`` sets the field after the config is built."""
    macaron_bert.MacaronBertModel(macaron_bert.MacaronBertConfig(vocab_size=50, hidden_size=16,
                                                                 num_attention_heads=2)).save_pretrained(tmp_path)
    model = AutoModel.from_pretrained(tmp_path, attention_type="mgk", ignore_mismatched_sizes=True)
    assert isinstance(model.encoder.layer[0].attention, MixtureOfKeysAttention)
    assert model.config.num_key_components == 2


def test_unused_inputs_of_an_invalid_field_type_name_the_field() -> None:
    with pytest.raises(ValueError, match="entropic must be True or False"):
        transject.TransJectConfig(entropic="yes")


# ---------------------------------------------------------------------------------------------- structure
@pytest.mark.parametrize("scheme", list(composition.LAYER_SCHEMES))
@pytest.mark.parametrize("attention", list(composition.ATTENTION_TYPES))
def test_every_pair_builds_from_the_two_registries_and_trains(scheme: str, attention: str) -> None:
    """The layer is the scheme's class and its mixer the attention's class, for all 16 pairs."""
    config = BertControlConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=32, layer_scheme=scheme, attention_type=attention,
                               rtol=1e-3, atol=1e-3, hidden_dropout_prob=0.0) if scheme == "ode" else BertControlConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        layer_scheme=scheme, attention_type=attention, hidden_dropout_prob=0.0)  # fmt: skip
    torch.manual_seed(0)
    model = BertControlForMaskedLM(config).train()
    layer = model.bert_control.encoder.layer[0]
    assert isinstance(layer, composition.LAYER_SCHEMES.implementation(scheme))
    mixers = [m for m in layer.modules() if isinstance(m, TokenMixer)]
    assert mixers and all(type(m) is composition.ATTENTION_TYPES.implementation(attention) for m in mixers)
    inputs = make_inputs(config)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    loss = model(**inputs, labels=labels).loss
    loss.backward()
    assert torch.isfinite(loss)
    grads = [p.grad for p in model.bert_control.encoder.parameters() if p.grad is not None]
    assert grads and any(float(g.abs().sum()) > 0 for g in grads)


#: What each variant's matched control changes, written out independently of the registries.
CONTROL_CHANGES = {
    "bert_control": {},
    "macaron_bert": {"layer_scheme": ("strang", "lie_trotter")},
    "mgk_bert": {"attention_type": ("mgk", "softmax")},
    "transject": {"attention_type": ("orthogonal", "softmax"), "layer_scheme": ("injective", "lie_trotter")},
    "node_transformer": {"layer_scheme": ("ode", "vanilla")},
}


@pytest.mark.parametrize("model_type", list(VARIANTS))
@pytest.mark.parametrize("layer_norm_position", ["pre", "post"])
def test_matched_control_changes_only_the_variants_idea(model_type: str, layer_norm_position: str) -> None:
    """The control differs from the variant in its idea's switches only, keeps its embeddings and
    pooler (same parameter names and shapes), and has no piece of the idea left."""
    sizes = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    config = AutoConfig.for_model(model_type, **sizes, layer_norm_position=layer_norm_position)
    control = composition.matched_control(config)
    variant_fields, control_fields = config.to_dict(), control.to_dict()
    changed = {
        name: (variant_fields.get(name), control_fields.get(name))
        for name in variant_fields.keys() | control_fields.keys()
        if variant_fields.get(name) != control_fields.get(name)
    }
    assert changed == CONTROL_CHANGES[model_type]
    assert composition.matched_control(control).to_dict() == control_fields  # a control is its own control
    models = [VARIANTS[model_type].models["AutoModel"](c) for c in (config, control)]
    shared = [{n: p.shape for n, p in m.named_parameters() if n.startswith(("embeddings.", "pooler."))} for m in models]
    assert shared[0] and shared[0] == shared[1]
    idea_classes = (StrangLayer, InjectiveLayer, MixtureOfKeysAttention, OrthogonalAttention)
    assert not any(isinstance(m, idea_classes) for m in models[1].modules())
    assert not any(isinstance(m, NodeTransformerBlock) for m in models[1].modules())
    mixers = [m for m in models[1].modules() if isinstance(m, TokenMixer)]
    assert mixers and all(type(m) is composition.ATTENTION_TYPES.implementation("softmax") for m in mixers)
    for model in models:  # device_map keeps each of these whole: the embeddings and the layers the model holds
        held = {type(model.embeddings).__name__} | {type(layer).__name__ for layer in model.encoder.layer}
        assert set(model._no_split_modules) == held
    if model_type == "node_transformer":
        assert "VanillaTransformerBlock" in models[1]._no_split_modules  # the control's eq. (1) blocks


@pytest.mark.parametrize("scheme", list(composition.LAYER_SCHEMES))
@pytest.mark.parametrize("attention", list(composition.ATTENTION_TYPES))
def test_every_pairs_control_is_softmax_with_a_bert_or_vanilla_layer(scheme: str, attention: str) -> None:
    config = BertControlConfig(layer_scheme=scheme, attention_type=attention)
    control = composition.matched_control(config)
    assert control.attention_type == "softmax"
    assert control.layer_scheme == ("vanilla" if scheme in ("ode", "vanilla") else "lie_trotter")
    assert composition.matched_control_overrides(control).items() <= control.to_dict().items()


#: What each idea takes at a matched size of width 32, 2 layers, heads of 8 (written out independently).
MATCHED_AT_32 = {
    "softmax": {"num_attention_heads": 4},
    "mgk": {"num_attention_heads": 2, "head_dim": 8},  # the paper's M/2 heads of two keys each
    "mlk": {"num_attention_heads": 2, "head_dim": 8},
    "orthogonal": {"num_attention_heads": 1},  # one full-width map, no heads
    "mean": {"num_attention_heads": 4},  # softmax's width, for its value projection
    "lie_trotter": {"intermediate_size": 128},
    "strang": {"intermediate_size": 128},  # the matched BERT's; each of the two FFNs gets half
    "ode": {"intermediate_size": 128, "rtol": 1e-4, "atol": 1e-4, "max_num_steps": 20},
    "vanilla": {"intermediate_size": 128},  # the ode scheme's FFN, without a solver
    "injective": {"num_experts": 4},  # the orthogonal FFN has no intermediate width
}


@pytest.mark.parametrize("scheme", list(composition.LAYER_SCHEMES))
@pytest.mark.parametrize("attention", list(composition.ATTENTION_TYPES))
def test_every_pair_derives_its_matched_size_from_its_ideas(scheme: str, attention: str) -> None:
    size = MatchedSize(32, 2, head_size=8, solver_tolerance=1e-4, max_solver_steps=20)
    fields = composition.matched_size_fields(attention, scheme, size)
    assert fields == {"hidden_size": 32, "num_hidden_layers": 2, **MATCHED_AT_32[attention], **MATCHED_AT_32[scheme]}
    config = BertControlConfig(vocab_size=40, attention_type=attention, layer_scheme=scheme, **fields)
    model = BertControlModel(config)
    widths = {m.fc_in.out_features for m in model.modules() if isinstance(m, FeedForward)}
    assert widths <= {128, 64}  # 4 × hidden, halved in each of Macaron's two FFNs


def test_a_pairing_rule_reads_what_the_other_idea_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """MGK's soft E-step asks the scheme whether it calls its mixer once (not whether it is named "ode"): a
    new scheme that evaluates its mixer repeatedly is refused the same way, and one that does not is allowed."""

    class RepeatedLayer(TransformerLayer):
        calls_mixer_once = False

    monkeypatch.setitem(composition.LAYER_SCHEMES, "repeated", RepeatedLayer)
    sizes = {"hidden_size": 16, "num_attention_heads": 2, "attention_type": "mgk", "mixture_weights": "soft_em"}
    with pytest.raises(ValueError, match="soft_em' cannot be used with layer_scheme='repeated'"):
        BertControlConfig(layer_scheme="repeated", **sizes)
    monkeypatch.setattr(RepeatedLayer, "calls_mixer_once", True)
    assert BertControlConfig(layer_scheme="repeated", **sizes).mixture_weights == "soft_em"


def test_ideas_that_size_one_field_differently_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    class WideMixer(TokenMixer):
        @classmethod
        def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
            return {"intermediate_size": 2 * size.hidden_size}

    monkeypatch.setitem(composition.ATTENTION_TYPES, "wide", WideMixer)
    with pytest.raises(TypeError, match=r"LieTrotterSpec sizes intermediate_size=128, the other idea 64"):
        composition.matched_size_fields("wide", "lie_trotter", MatchedSize(32, 2, head_size=8))


def test_a_mixer_has_the_same_parameters_in_every_scheme_and_variant() -> None:
    """No per-pair code: MGK in Macaron's layer is the module MGK-BERT uses (same parameter names)."""
    sizes = {"vocab_size": 40, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32}
    mgk = mgk_bert.MgkBertModel(mgk_bert.MgkBertConfig(**sizes)).encoder.layer[0].attention
    mixed = macaron_bert.MacaronBertModel(macaron_bert.MacaronBertConfig(attention_type="mgk", **sizes))
    assert isinstance(mixed.encoder.layer[0], StrangLayer)
    assert mgk.state_dict().keys() == mixed.encoder.layer[0].attention.state_dict().keys()
    orthogonal = transject.TransJectModel(transject.TransJectConfig(layer_scheme="lie_trotter", **sizes))
    assert isinstance(orthogonal.encoder.layer[0], TransformerLayer)
    assert isinstance(orthogonal.encoder.layer[0].attention, OrthogonalAttention)
    assert hasattr(orthogonal, "eigenvalues")  # the mixer's context module, on any scheme


def test_injective_scheme_has_no_layer_norm() -> None:
    injective = BertControlConfig(layer_scheme="injective", layer_norm_position="pre")
    assert not injective.uses_final_layer_norm
    assert BertControlConfig(layer_norm_position="pre").uses_final_layer_norm
    model = BertControlModel(BertControlConfig(vocab_size=40, hidden_size=16, num_attention_heads=2,
                                               layer_scheme="injective"))  # fmt: skip
    assert isinstance(model.encoder.layer[0], InjectiveLayer)
    assert not any(isinstance(m, nn.LayerNorm) for m in model.encoder.modules())
    ode = BertControlModel(BertControlConfig(vocab_size=40, hidden_size=16, num_attention_heads=2, layer_scheme="ode"))
    assert isinstance(ode.encoder.layer[0], NodeTransformerBlock)


def test_the_ode_schemes_earlier_block_type_loads_as_todays_scheme(tmp_path: Path) -> None:
    """hf-variants ≤ 0.2 chose eq. (1) blocks inside the ode scheme (``block_type="vanilla"``): a config
    saved so, or built with the keyword, is ``layer_scheme="vanilla"`` and saves without the old field;
    ``block_type="ode"`` keeps the ode scheme; another value is refused naming the field and its values."""
    sizes = dict(vocab_size=40, hidden_size=16, num_attention_heads=2)
    saved = {**BertControlConfig(**sizes).to_dict(), "layer_scheme": "ode", "block_type": "vanilla", "rtol": 1e-3}
    for config in (BertControlConfig(layer_scheme="ode", block_type="vanilla", **sizes),
                   BertControlConfig.from_dict(saved)):  # fmt: skip
        assert config.layer_scheme == "vanilla" and not hasattr(config, "block_type")
        assert isinstance(BertControlModel(config).encoder.layer[0], VanillaTransformerBlock)
        config.save_pretrained(tmp_path)
        assert "block_type" not in json.loads((tmp_path / "config.json").read_text())
        assert BertControlConfig.from_pretrained(tmp_path).layer_scheme == "vanilla"
    assert BertControlConfig(layer_scheme="ode", block_type="ode", **sizes).layer_scheme == "ode"
    with pytest.raises(ValueError, match=r"block_type='eq1': .* 'ode' is layer_scheme='ode'; 'vanilla' is layer_sc"):
        BertControlConfig(layer_scheme="ode", block_type="eq1", **sizes)
    # the field is the ode scheme's: under another scheme it is nobody's, and stays an unused attribute
    assert BertControlConfig(block_type="vanilla", **sizes).layer_scheme == "lie_trotter"


def test_orthogonal_weights_shared_by_two_ideas_are_drawn_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Orthogonal attention and the injective scheme share the orthogonal weights' init hook: each
    parametrisation gets one random orthogonal base and a zero offset, drawn once (a second draw would
    change every TransJect model a seed gives)."""
    from hf_variants.core.mixers.orthogonal import modeling_orthogonal

    draws: list[torch.Tensor] = []
    drawn = modeling_orthogonal.init.orthogonal_
    monkeypatch.setattr(modeling_orthogonal.init, "orthogonal_", lambda tensor: draws.append(tensor) or drawn(tensor))
    config = transject.TransJectConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2)
    model = transject.TransJectModel(config)
    parametrizations = [m for m in model.modules() if isinstance(m, nn.utils.parametrize.ParametrizationList)]
    # per layer U and V of each expert and the FFN's two; once per backbone the eigenvectors Ũ
    assert len(parametrizations) == config.num_hidden_layers * (2 * config.num_experts + 2) + 1
    assert len(draws) == len(parametrizations)
    assert {id(t) for t in draws} == {id(m[0].base) for m in parametrizations}
    for module in parametrizations:
        assert torch.count_nonzero(module.original) == 0
        torch.testing.assert_close(module[0].base @ module[0].base.T, torch.eye(16), atol=1e-5, rtol=0)


def test_parametrization_fields_are_switched_for_any_variant_holding_the_idea(tmp_path: Path) -> None:
    """``orthogonal_map`` belongs to the orthogonal weights, not to TransJect: BERT's layers with the
    injective scheme load under another map with the same function, and a pair without orthogonal
    weights says it has no such field."""
    config = BertControlConfig(vocab_size=40, hidden_size=16, num_attention_heads=2, layer_scheme="injective")
    torch.manual_seed(0)
    model = BertControlModel(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("original"):
                parameter.normal_(0.0, 0.3)  # away from the base, where the maps differ
    inputs = make_inputs(config)
    with torch.no_grad():
        before = model(**inputs).last_hidden_state
    model.save_pretrained(tmp_path)
    loaded = BertControlModel.from_pretrained(tmp_path, orthogonal_map="householder").eval()
    assert loaded.config.orthogonal_map == "householder"
    with torch.no_grad():
        torch.testing.assert_close(loaded(**inputs).last_hidden_state, before, atol=1e-5, rtol=1e-5)
    plain = BertControlModel(BertControlConfig(vocab_size=40, hidden_size=16, num_attention_heads=2))
    with pytest.raises(ValueError, match=r"orthogonal_map is not a parametrization field .*its fields: none"):
        plain.reparametrize(orthogonal_map="cayley")


class TokenMean(TokenMixer, nn.Module):
    """A fifth token mixer for the test: each token gets the projected mean of the real tokens."""

    config_defaults: ClassVar[dict[str, Any]] = {"mean_scale": 1.0}
    has_attention_probabilities = False

    @classmethod
    def validate_config(cls, config: Any) -> None:
        if config.mean_scale <= 0:
            raise ValueError("mean_scale must be positive")

    def __init__(self, config: Any, layer_idx: int | None = None) -> None:
        super().__init__()
        self.scale = config.mean_scale
        self.output = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states, padding_mask, *context, output_attentions=False):
        real = padding_mask.tensor  # boolean (batch, seq_len), or None when nothing is padded
        weights = torch.ones(hidden_states.shape[:2]) if real is None else real.float()
        mean = (hidden_states * weights[..., None]).sum(1, keepdim=True) / weights.sum(1)[:, None, None]
        return self.output(self.scale * mean).expand_as(hidden_states), None


@pytest.mark.parametrize("scheme", list(composition.LAYER_SCHEMES))
def test_a_fifth_attention_needs_one_module_and_one_registry_line(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(composition.ATTENTION_TYPES, "token_mean", TokenMean)  # the one registry line
    config = AutoConfig.for_model("macaron_bert", vocab_size=40, hidden_size=16, num_attention_heads=2,
                                  intermediate_size=32, attention_type="token_mean", layer_scheme=scheme)  # fmt: skip
    assert config.mean_scale == 1.0
    with pytest.raises(ValueError, match="mean_scale must be positive"):
        AutoConfig.for_model("macaron_bert", attention_type="token_mean", mean_scale=0.0)
    torch.manual_seed(0)
    model = transformers.AutoModelForMaskedLM.from_config(config)
    assert any(isinstance(m, TokenMean) for m in model.modules())
    inputs = make_inputs(config)
    output = model(**inputs, labels=inputs["input_ids"])
    output.loss.backward()
    model.save_pretrained(tmp_path)
    loaded = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(loaded.eval()(**inputs).logits, model.eval()(**inputs).logits, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------- BERT control
BERT_SIZES = dict(vocab_size=60, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=48,
                  max_position_embeddings=32, type_vocab_size=2, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)  # fmt: skip


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_bert_control_equals_transformers_bert_with_copied_weights(implementation: str) -> None:
    torch.manual_seed(0)
    bert = BertModel(BertConfig(**BERT_SIZES, attn_implementation=implementation)).eval()
    with torch.no_grad():  # move LayerNorms and biases away from 1/0 too
        for parameter in bert.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    control = BertControlModel(BertControlConfig(**BERT_SIZES, attn_implementation=implementation)).eval()
    missing, unexpected = control.load_state_dict(state_dict_from_bert(bert.state_dict(), base_model=True),
                                                  strict=False)  # fmt: skip
    assert missing == [] and unexpected == []
    inputs = make_inputs(control.config, batch=3, seq_len=11)
    with torch.no_grad():
        expected, got = bert(**inputs), control(**inputs, output_hidden_states=True)
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(got.last_hidden_state[real], expected.last_hidden_state[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output, atol=1e-5, rtol=1e-5)


def test_bert_control_heads_equal_transformers_bert_heads() -> None:
    torch.manual_seed(0)
    config = BertConfig(**BERT_SIZES, num_labels=3)
    bert_mlm, bert_cls = BertForMaskedLM(config).eval(), BertForSequenceClassification(config).eval()
    ours_config = BertControlConfig(**BERT_SIZES, num_labels=3)
    ours_mlm = BertControlForMaskedLM(ours_config).eval()
    ours_cls = bert_control.BertControlForSequenceClassification(ours_config).eval()
    for ours, theirs in ((ours_mlm, bert_mlm), (ours_cls, bert_cls)):
        incompatible = ours.load_state_dict(state_dict_from_bert(theirs.state_dict()), strict=False)
        assert incompatible.missing_keys == [] and incompatible.unexpected_keys == []
    inputs = make_inputs(ours_config)
    with torch.no_grad():
        torch.testing.assert_close(ours_mlm(**inputs).logits, bert_mlm(**inputs).logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ours_cls(**inputs).logits, bert_cls(**inputs).logits, atol=1e-5, rtol=1e-5)
    assert ours_mlm.get_output_embeddings().weight is ours_mlm.get_input_embeddings().weight


def test_configs_of_one_model_identity_build_one_model() -> None:
    """``model_identity`` leaves out only a config's class name and the fields of ideas it does not select: the
    controls of Macaron-BERT and MGK-BERT are BERT on the core (bert_control), the same weights at one seed and the
    same outputs (under the base model's name), and every other config of the variants is a model of its own; a
    field the model reads (here a dropout) tells two configs apart."""
    sizes = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                 num_labels=3)  # fmt: skip
    groups: dict[str, list[tuple[str, transformers.PretrainedConfig]]] = {}
    for model_type in VARIANTS:
        for position in ("pre", "post"):
            config = AutoConfig.for_model(model_type, **sizes, layer_norm_position=position)
            for role, member in (("variant", config), ("control", composition.matched_control(config))):
                identity = json.dumps(composition.model_identity(member), sort_keys=True)
                groups.setdefault(identity, []).append((f"{model_type} {position} {role}", member))
    shared = sorted(sorted(name for name, _ in group) for group in groups.values() if len(group) > 1)
    assert shared == [
        [f"bert_control {p} control", f"bert_control {p} variant", f"macaron_bert {p} control", f"mgk_bert {p} control"]
        for p in ("post", "pre")
    ]
    bert = AutoConfig.for_model("bert_control", **sizes)
    inputs = make_inputs(bert)
    for group in groups.values():
        states, logits = [], []
        for _, config in group:
            torch.manual_seed(0)
            model = transformers.AutoModelForSequenceClassification.from_config(config).eval()
            prefix = model.base_model_prefix + "."  # the variant's name: bert_control.encoder..., mgk_bert.encoder...
            states.append({name.removeprefix(prefix): value for name, value in model.state_dict().items()})
            logits.append(model(**inputs).logits)
        for state, output in zip(states[1:], logits[1:], strict=True):
            assert state.keys() == states[0].keys() and all(state[k].equal(states[0][k]) for k in state)
            assert output.equal(logits[0])
    assert composition.model_identity(bert) != composition.model_identity(
        AutoConfig.for_model("bert_control", **sizes, hidden_dropout_prob=0.2)
    )
