"""Rotary positions (``position_embedding_type="rotary"``) and packed documents (``position_ids`` that restart
inside a row), for every token mixer and layer scheme that takes them, and the one-line refusals of those that
cannot."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from hf_variants import BertControlConfig, BertControlForMaskedLM, BertControlModel, TransJectConfig, TransJectModel
from hf_variants.core.positions import rotary_code, rotate
from hf_variants.training.checkpoints import check_position_table

SIZES: dict[str, Any] = {
    "vocab_size": 60,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 48,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
MGK_HEADS = {"num_attention_heads": 2, "head_dim": 16}

#: Every mixer × scheme setting that takes packed documents: (name, config fields, attention implementation).
PACKABLE = [
    ("softmax-eager", {}, "eager"),
    ("softmax-sdpa", {}, "sdpa"),
    ("softmax-rotary", {"position_embedding_type": "rotary"}, "sdpa"),
    ("mgk-fused", {"attention_type": "mgk", **MGK_HEADS}, "sdpa"),
    ("mgk-eager", {"attention_type": "mgk", **MGK_HEADS}, "eager"),
    ("mgk-hard", {"attention_type": "mgk", "mixture_weights": "hard", **MGK_HEADS}, "sdpa"),
    ("mgk-soft-em", {"attention_type": "mgk", "mixture_weights": "soft_em", **MGK_HEADS}, "sdpa"),
    ("mgk-rotary", {"attention_type": "mgk", "position_embedding_type": "rotary", **MGK_HEADS}, "sdpa"),
    ("mlk", {"attention_type": "mlk", **MGK_HEADS}, "sdpa"),
    ("mlk-rotary", {"attention_type": "mlk", "position_embedding_type": "rotary", **MGK_HEADS}, "sdpa"),
    ("mean", {"attention_type": "mean"}, "sdpa"),
    ("strang", {"layer_scheme": "strang", "layer_norm_position": "pre"}, "sdpa"),
    ("vanilla", {"layer_scheme": "vanilla"}, "sdpa"),
    ("ode", {"layer_scheme": "ode", "ode_method": "rk4", "step_size": 0.25}, "sdpa"),
    ("injective-softmax", {"layer_scheme": "injective", "num_experts": 2}, "sdpa"),
    # flex attention compiles its kernels (tens of seconds on a CPU): the full tier
    pytest.param("softmax-flex", {}, "flex_attention", marks=pytest.mark.full),
    pytest.param("mgk-flex", {"attention_type": "mgk", **MGK_HEADS}, "flex_attention", marks=pytest.mark.full),
]


def model_for(fields: dict[str, Any], implementation: str = "sdpa", seed: int = 0) -> BertControlModel:
    torch.manual_seed(seed)
    config = BertControlConfig(**{**SIZES, **fields}, attn_implementation=implementation)
    model = BertControlModel(config).eval()
    with torch.no_grad():  # weights far from their initialisation, so every position and document matters
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.2)
    return model


def packed_rows(documents: list[list[torch.Tensor]], length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``input_ids``, ``position_ids`` (restarting at every document) and ``attention_mask`` (padding after the
    documents, numbered as one more document) of rows of whole documents."""
    input_ids = torch.zeros(len(documents), length, dtype=torch.long)
    positions = torch.zeros_like(input_ids)
    attention_mask = torch.zeros_like(input_ids)
    for row, row_documents in enumerate(documents):
        start = 0
        for document in row_documents:
            input_ids[row, start : start + len(document)] = document
            positions[row, start : start + len(document)] = torch.arange(len(document))
            attention_mask[row, start : start + len(document)] = 1
            start += len(document)
        positions[row, start:] = torch.arange(length - start)
    return input_ids, positions, attention_mask


# ------------------------------------------------------------------------------------------------ rotary
def test_rotary_code_rotates_each_pair_of_dimensions_by_position_times_frequency() -> None:
    """RoFormer eq. 34 written out by hand: dimension pairs (k, k + D/2) turn by m·θ_k, θ_k = base^(−2k/D)."""
    states = torch.randn(1, 1, 3, 4, dtype=torch.float64)
    got = rotate(states, rotary_code(torch.tensor([[0, 5, 11]]), head_dim=4, theta=100.0, dtype=torch.float64))
    for m, position in enumerate((0, 5, 11)):
        for k, frequency in enumerate((1.0, 100.0**-0.5)):
            angle = position * frequency
            x, y = states[0, 0, m, k], states[0, 0, m, k + 2]
            expected = (x * math.cos(angle) - y * math.sin(angle), x * math.sin(angle) + y * math.cos(angle))
            torch.testing.assert_close(got[0, 0, m, k], expected[0])
            torch.testing.assert_close(got[0, 0, m, k + 2], expected[1])


ROTARY = [
    ("softmax-eager", {}, "eager"),
    ("softmax-sdpa", {}, "sdpa"),
    ("mgk-fused", {"attention_type": "mgk", **MGK_HEADS}, "sdpa"),
    ("mgk-eager", {"attention_type": "mgk", **MGK_HEADS}, "eager"),
    ("mlk", {"attention_type": "mlk", **MGK_HEADS}, "sdpa"),
    ("mlk-eager-attentions", {"attention_type": "mlk", **MGK_HEADS}, "eager"),
]


@pytest.mark.parametrize(("name", "fields", "implementation"), ROTARY, ids=[case[0] for case in ROTARY])
def test_rotary_attention_sees_relative_positions_only(name: str, fields: dict, implementation: str) -> None:
    """Shifting every position by a constant changes nothing (eq. 16: R_mᵀR_n = R_{n−m}); reversing the tokens
    changes more than the order of the outputs (the model does see order)."""
    model = model_for({**fields, "position_embedding_type": "rotary"}, implementation)
    input_ids = torch.randint(1, 60, (2, 11))
    positions = torch.arange(11)[None]
    asked = {"output_attentions": True} if name.endswith("attentions") else {}
    with torch.no_grad():
        base = model(input_ids, position_ids=positions, **asked)
        shifted = model(input_ids, position_ids=positions + 37, **asked)
        reversed_output = model(input_ids.flip(1)).last_hidden_state.flip(1)
    torch.testing.assert_close(shifted.last_hidden_state, base.last_hidden_state, atol=2e-5, rtol=1e-4)
    assert (reversed_output - base.last_hidden_state).abs().max() > 1e-2
    assert model.embeddings.position_embeddings is None  # no table: nothing limits the length


@pytest.mark.parametrize("attention_type", ["softmax", "mlk"])
def test_a_rotary_model_trains_at_2048_tokens(attention_type: str) -> None:
    """Past ``max_position_embeddings`` (64 here): a masked-LM step at 2,048 tokens has a finite loss and
    gradients; the same input to a model with a learned position table is refused, naming the field."""
    fields = {**SIZES, "num_hidden_layers": 1, "position_embedding_type": "rotary", "attention_type": attention_type}
    if attention_type == "mlk":
        fields.update(MGK_HEADS)
    torch.manual_seed(0)
    model = BertControlForMaskedLM(BertControlConfig(**fields))
    input_ids = torch.randint(1, 60, (1, 2048))
    labels = torch.full_like(input_ids, -100)
    labels[0, ::97] = input_ids[0, ::97]
    output = model(input_ids, labels=labels)
    output.loss.backward()
    assert torch.isfinite(output.loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    absolute = BertControlForMaskedLM(BertControlConfig(**{**fields, "position_embedding_type": "absolute"}))
    with pytest.raises(ValueError, match="exceeds max_position_embeddings=64"):
        absolute(input_ids)


def test_both_engines_let_a_rotary_model_run_past_max_position_embeddings() -> None:
    """The engines' one length check (pretraining and fine-tuning): a learned table bounds --max_seq_length, rotary
    positions do not."""
    absolute, rotary = (BertControlConfig(**SIZES, position_embedding_type=kind) for kind in ("absolute", "rotary"))
    check_position_table(rotary, 2048)
    check_position_table(absolute, 64)
    with pytest.raises(ValueError, match=r"^--max_seq_length 65 exceeds the model's position table"):
        check_position_table(absolute, 65)


def test_rotary_positions_are_refused_where_nothing_can_take_them() -> None:
    with pytest.raises(ValueError, match=r"position_embedding_type='rotary' cannot be used here: TransJect's orth"):
        BertControlConfig(**SIZES, attention_type="orthogonal", position_embedding_type="rotary")
    with pytest.raises(ValueError, match=r"position_embedding_type='rotary': TransJect's embeddings carry"):
        TransJectConfig(attention_type="softmax", layer_scheme="lie_trotter", position_embedding_type="rotary")
    with pytest.raises(ValueError, match="head width 9 is odd"):
        BertControlConfig(**{**SIZES, "num_attention_heads": 2, "head_dim": 9}, position_embedding_type="rotary")
    with pytest.raises(ValueError, match="position_embedding_type must be one of"):
        BertControlConfig(**SIZES, position_embedding_type="relative_key")


def test_a_rotary_model_saves_and_loads_without_a_position_table(tmp_path) -> None:
    model = model_for({"position_embedding_type": "rotary"})
    model.save_pretrained(tmp_path)
    loaded = BertControlModel.from_pretrained(tmp_path).eval()
    input_ids = torch.randint(1, 60, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids).last_hidden_state, model(input_ids).last_hidden_state)
    assert loaded.config.position_embedding_type == "rotary"


# ------------------------------------------------------------------------------------------------ packing
@pytest.mark.usefixtures("fresh_compiler")  # its flex cases compile (tests/conftest.py)
@pytest.mark.parametrize(("name", "fields", "implementation"), PACKABLE, ids=[
    case.values[0] if hasattr(case, "values") else case[0] for case in PACKABLE])  # fmt: skip
def test_a_packed_row_computes_each_document_as_if_it_were_alone(name: str, fields: dict, implementation: str) -> None:
    """Per token, to 1e-5: two rows of packed documents (one row ending in padding) against each document run on
    its own, with its own positions from 0."""
    model = model_for(fields, implementation)
    generator = torch.Generator().manual_seed(1)
    documents = [[torch.randint(1, 60, (n,), generator=generator) for n in lengths] for lengths in ([4, 6, 3], [5, 5])]
    input_ids, positions, attention_mask = packed_rows(documents, 13)
    with torch.no_grad():
        packed = model(input_ids, position_ids=positions, attention_mask=attention_mask).last_hidden_state
        for row, row_documents in enumerate(documents):
            start = 0
            for document in row_documents:
                alone = model(document[None]).last_hidden_state[0]
                torch.testing.assert_close(packed[row, start : start + len(document)], alone, atol=1e-5, rtol=1e-5)
                start += len(document)


@pytest.mark.parametrize("attention_type", ["softmax", "mgk", "mlk"])
def test_no_token_attends_outside_its_document(attention_type: str) -> None:
    """Zero weight outside a token's document, weights summing to one inside it; a padding query (whose output
    nothing reads) spreads its weight over the real keys, so no row of the mask is empty on any backend."""
    fields = {"attention_type": attention_type, **({} if attention_type == "softmax" else MGK_HEADS)}
    model = model_for(fields, "eager")
    input_ids, positions, attention_mask = packed_rows([[torch.randint(1, 60, (n,)) for n in (3, 5, 2)]], 12)
    with torch.no_grad():
        output = model(input_ids, position_ids=positions, attention_mask=attention_mask, output_attentions=True)
    document = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 2, 2])
    outside = document[:, None] != document[None, :]
    for layer in output.attentions:
        real = layer[..., :10, :10]
        assert bool((real[..., outside] == 0).all()) and bool((layer[..., 10:] == 0).all())
        torch.testing.assert_close(layer.sum(-1), torch.ones_like(layer.sum(-1)))
    assert bool(torch.isfinite(output.last_hidden_state).all())


def test_packed_documents_are_refused_by_the_pairs_that_mix_a_whole_row() -> None:
    """One line naming position_ids and the reason, never a silently mixed answer."""
    input_ids, positions, _ = packed_rows([[torch.randint(1, 60, (n,)) for n in (3, 4)]], 7)
    config = TransJectConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1, num_experts=2)
    with pytest.raises(ValueError, match=r"position_ids restart inside a row .* Gram matrix"):
        TransJectModel(config).eval()(input_ids, position_ids=positions)
    gated = model_for({"layer_scheme": "injective", "num_experts": 2, "expert_weights": "input_dependent"})
    with pytest.raises(ValueError, match="input_dependent' max-pools"):
        gated(input_ids, position_ids=positions)
    with torch.no_grad():  # positions that only count up are one document, as before
        gated(input_ids, position_ids=torch.arange(7)[None] + 3)


def test_a_masked_lm_step_on_packed_rows_scores_every_document() -> None:
    """The masked-LM head on packed rows equals the per-document loss: a pretraining batch without padding."""
    model = BertControlForMaskedLM(BertControlConfig(**SIZES)).eval()
    documents = [torch.randint(1, 60, (n,)) for n in (6, 7)]
    input_ids, positions, _ = packed_rows([documents], 13)
    labels = input_ids.clone()
    with torch.no_grad():
        packed = model(input_ids, position_ids=positions, labels=labels).loss
        alone = [model(d[None], labels=d[None]).loss * len(d) for d in documents]
    torch.testing.assert_close(packed, sum(alone) / 13)
