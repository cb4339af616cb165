"""Exports for serving (``hf_variants.serving``): ONNX through onnxruntime and ``torch.export`` give the eager
outputs at other batch sizes and lengths than traced, with padding; TransJect's orthogonal weights become constants
in the copy only; the N-ODE Transformer is refused in one line; a link planted in the export folder is replaced,
never written through."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.nn.utils import parametrize
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

import hf_variants  # noqa: F401  (registers the variants)
from hf_variants.serving import example_inputs, export_onnx, export_program, static_copy

ort = pytest.importorskip("onnxruntime")  # the [onnx] extra; CI installs it with [dev]

#: Every exportable variant, tiny: {name: (model type, config fields)}.
TINY = {
    "bert_control": ("bert_control", {"num_attention_heads": 4, "intermediate_size": 64}),
    "macaron_bert": ("macaron_bert", {"num_attention_heads": 4, "intermediate_size": 64}),
    "mgk_bert": ("mgk_bert", {"num_attention_heads": 2, "head_dim": 16, "intermediate_size": 64}),
    "mlk": ("mgk_bert", {"num_attention_heads": 2, "head_dim": 16, "intermediate_size": 64, "attention_type": "mlk"}),
    "transject": ("transject", {"num_experts": 2}),
}


def tiny(name: str, head: type = AutoModelForSequenceClassification):
    torch.manual_seed(0)
    model_type, fields = TINY[name]
    config = AutoConfig.for_model(model_type, hidden_size=32, num_hidden_layers=2, vocab_size=100,
                                  max_position_embeddings=64, **fields)  # fmt: skip
    return head.from_config(config).eval()


@pytest.mark.parametrize("name", sorted(TINY))
def test_onnxruntime_and_torch_export_give_the_eager_outputs(name: str, tmp_path: Path) -> None:
    model = tiny(name)
    inputs = example_inputs(model, batch_size=3, length=21)  # traced at 2 × 16
    with torch.no_grad():
        expected = model(**inputs).logits
    path = export_onnx(model, tmp_path / "onnx")
    session = ort.InferenceSession(str(path))
    assert [node.name for node in session.get_inputs()] == ["input_ids", "attention_mask"]
    assert [node.name for node in session.get_outputs()] == ["logits"]
    (served,) = session.run(None, {name: tensor.numpy() for name, tensor in inputs.items()})
    torch.testing.assert_close(torch.from_numpy(served), expected, atol=1e-5, rtol=1e-5)
    program = export_program(model)
    torch.testing.assert_close(program.module()(**inputs).logits, expected, atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # the model itself is unchanged
        torch.testing.assert_close(model(**inputs).logits, expected, atol=0, rtol=0)


def test_orthogonal_weights_are_constants_in_the_copy_only() -> None:
    model = tiny("transject", AutoModel)
    parametrized = [name for name, module in model.named_modules() if parametrize.is_parametrized(module)]
    assert parametrized  # TransJect's orthogonal attention and FFN
    copy = static_copy(model)
    assert not any(parametrize.is_parametrized(module) for module in copy.modules())
    assert all(parametrize.is_parametrized(model.get_submodule(name)) for name in parametrized)
    inputs = example_inputs(model)
    with torch.no_grad():
        torch.testing.assert_close(copy(**inputs).last_hidden_state, model(**inputs).last_hidden_state, atol=0, rtol=0)
    model.train()  # the original still trains through its parametrisation
    model(**inputs).last_hidden_state.sum().backward()
    # every parametrisation is still in the graph (zero where ReZero's residual scale starts at 0)
    assert all(model.get_submodule(name).parametrizations["weight"].original.grad is not None for name in parametrized)


def test_the_node_transformer_is_refused_in_one_line(tmp_path: Path) -> None:
    config = AutoConfig.for_model("node_transformer", hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                  intermediate_size=32, vocab_size=100)  # fmt: skip
    model = AutoModel.from_config(config)
    for export in (lambda: export_onnx(model, tmp_path / "onnx"), lambda: export_program(model)):
        with pytest.raises(ValueError, match="node_transformer cannot be exported as a static graph: each block is an "
                                             "ODE solved by torchdiffeq") as refused:  # fmt: skip
            export()
        assert "\n" not in str(refused.value)
    assert not (tmp_path / "onnx").exists()


def test_a_link_planted_in_the_export_folder_is_replaced_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.onnx"
    outside.write_bytes(b"not the package's")
    folder = tmp_path / "onnx"
    folder.mkdir()
    (folder / "model.onnx").symlink_to(outside)
    path = export_onnx(tiny("bert_control"), folder)
    assert outside.read_bytes() == b"not the package's"
    assert not path.is_symlink() and ort.InferenceSession(str(path)).get_inputs()[0].name == "input_ids"
