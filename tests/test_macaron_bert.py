"""Macaron-BERT: the common suite, parameter parity with BERT, and eq. (17)–(19) by hand."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertModel

from hf_variants import macaron_bert
from hf_variants.core.composition import build_layer
from hf_variants.core.inputs import TokenLayout
from hf_variants.macaron_bert import MacaronBertConfig, MacaronBertLayer, MacaronBertModel

from .common import CommonEncoderTests


class TestMacaronBertCommon(CommonEncoderTests):
    variant = macaron_bert.VARIANT
    config_kwargs: ClassVar[dict] = {}


class TestMacaronBertPostLNCommon(CommonEncoderTests):
    """The same suite with BERT's post-LN placement."""

    variant = macaron_bert.VARIANT
    config_kwargs: ClassVar[dict] = {"layer_norm_position": "post"}


SIZES = [
    dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    dict(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    dict(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256),
]


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: f"h{s['hidden_size']}")
def test_parameter_count_matches_bert(sizes: dict) -> None:
    """Two FFNs of half BERT's inner size keep BERT's parameter count (paper §4), within 0.5%."""
    with torch.device("meta"):
        bert = sum(p.numel() for p in BertModel(BertConfig(**sizes)).parameters())
        macaron = sum(p.numel() for p in MacaronBertModel(MacaronBertConfig(**sizes)).parameters())
    # Macaron adds one LayerNorm and one output bias per layer plus a final LayerNorm.
    hidden, layers = sizes["hidden_size"], sizes["num_hidden_layers"]
    assert macaron - bert == layers * 3 * hidden + 2 * hidden
    assert abs(macaron - bert) / bert < 0.005


def _ffn(x: torch.Tensor, ffn: torch.nn.Module, activation) -> torch.Tensor:
    hidden = activation(x @ ffn.fc_in.weight.T + ffn.fc_in.bias)
    return hidden @ ffn.fc_out.weight.T + ffn.fc_out.bias


def _attention(x: torch.Tensor, attn: torch.nn.Module, heads: int) -> torch.Tensor:
    batch, seq_len, hidden = x.shape
    d = hidden // heads

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.view(batch, seq_len, heads, d).transpose(1, 2)

    q = split(x @ attn.query.weight.T + attn.query.bias)
    k = split(x @ attn.key.weight.T + attn.key.bias)
    v = split(x @ attn.value.weight.T + attn.value.bias)
    probabilities = torch.softmax(q @ k.transpose(-1, -2) / d**0.5, dim=-1)
    context = (probabilities @ v).transpose(1, 2).reshape(batch, seq_len, hidden)
    return context @ attn.output.weight.T + attn.output.bias


def _layer_norm(x: torch.Tensor, connection: torch.nn.Module) -> torch.Tensor:
    norm = connection.LayerNorm
    return F.layer_norm(x, (x.shape[-1],), norm.weight, norm.bias, norm.eps)


@pytest.mark.parametrize("position", ["pre", "post"])
@pytest.mark.parametrize("first_activation", [None, "relu"])
def test_layer_matches_equations_17_to_19(position: str, first_activation: str | None) -> None:
    torch.manual_seed(0)
    config = MacaronBertConfig(
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=40,
        hidden_act="gelu",
        layer_norm_position=position,
        first_ffn_activation=first_activation,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="eager",
    )
    layer = build_layer(config, 0).double().eval()
    assert isinstance(layer, MacaronBertLayer)
    with torch.no_grad():
        for parameter in layer.parameters():  # LayerNorm scales/biases away from 1/0 too
            parameter.add_(0.1 * torch.randn_like(parameter))
    assert layer.ffn_down.fc_in.out_features == layer.ffn_up.fc_in.out_features == 20
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    first = F.relu if first_activation == "relu" else F.gelu

    def sublayer(x, connection, f, scale):
        if position == "pre":
            return x + scale * f(_layer_norm(x, connection))
        return _layer_norm(x + scale * f(x), connection)

    x_tilde = sublayer(x, layer.ffn_down_residual, lambda h: _ffn(h, layer.ffn_down, first), 0.5)  # (17)
    x_hat = sublayer(x_tilde, layer.attention_residual, lambda h: _attention(h, layer.attention, 2), 1.0)  # (18)
    expected = sublayer(x_hat, layer.ffn_up_residual, lambda h: _ffn(h, layer.ffn_up, F.gelu), 0.5)  # (19)
    with torch.no_grad():
        got = layer(x, TokenLayout(None))
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_pre_ln_stack_ends_with_layer_norm_and_post_ln_does_not() -> None:
    small = dict(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    assert MacaronBertModel(MacaronBertConfig(**small)).encoder.final_layer_norm is not None
    assert MacaronBertModel(MacaronBertConfig(layer_norm_position="post", **small)).encoder.final_layer_norm is None


def test_macaron_config_errors() -> None:
    with pytest.raises(ValueError, match="layer_norm_position must be one of"):
        MacaronBertConfig(layer_norm_position="middle")
    with pytest.raises(ValueError, match="first_ffn_activation must be one of"):
        MacaronBertConfig(first_ffn_activation="swishy")
    with pytest.raises(ValueError, match="intermediate_size"):
        MacaronBertConfig(intermediate_size=1)
