"""Exports for serving (``hf_variants.serving``): ONNX through onnxruntime and ``torch.export`` give the eager
outputs at other batch sizes and lengths than traced, with padding; TransJect's orthogonal weights are constants
in the graph while the model keeps training; the N-ODE Transformer is refused in one line, by the model's own
forward too; an export loaded without the package exports the same way; a link planted in the export folder is
replaced, never written through."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch
from torch.nn.utils import parametrize
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

import hf_variants  # noqa: F401  (registers the variants)
from hf_variants.hub import export_for_hub
from hf_variants.serving import example_inputs, export_onnx, export_program

from .common import WITHOUT_PACKAGE
from .helpers import run_python

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


def test_the_export_holds_orthogonal_weights_as_constants_and_leaves_the_model_training() -> None:
    model = tiny("transject", AutoModel).train()
    parametrized = [name for name, module in model.named_modules() if parametrize.is_parametrized(module)]
    assert parametrized  # TransJect's orthogonal attention and FFN
    program = export_program(model)
    operators = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    assert not any("linalg" in name or "matrix_exp" in name for name in operators), operators
    assert model.training and all(module.training for module in model.modules())  # its modes restored
    assert all(parametrize.is_parametrized(model.get_submodule(name)) for name in parametrized)
    inputs = example_inputs(model)
    model.eval()
    with torch.no_grad():
        expected = model(**inputs).last_hidden_state
    torch.testing.assert_close(program.module()(**inputs).last_hidden_state, expected, atol=1e-6, rtol=1e-6)
    model.train()  # the model still trains through its parametrisation
    model(**inputs).last_hidden_state.sum().backward()
    # every parametrisation is still in the graph (zero where ReZero's residual scale starts at 0)
    assert all(model.get_submodule(name).parametrizations["weight"].original.grad is not None for name in parametrized)


def test_the_models_own_forward_refuses_what_a_graph_cannot_hold(tmp_path: Path) -> None:
    """The refusals live in the model's forward, so a plain ``torch.export`` or ``torch.onnx.export`` (a user of the
    remote code, without this package's functions) gets them: the N-ODE solver; orthogonal weights not held as
    constants."""
    config = AutoConfig.for_model("node_transformer", hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                  intermediate_size=32, vocab_size=100)  # fmt: skip
    node = AutoModel.from_config(config).eval()
    with pytest.raises(ValueError, match="^node_transformer cannot be exported as a static graph: each block is an "
                                         r"ODE solved by torchdiffeq[^\n]*$"):  # fmt: skip
        torch.export.export(node, (), kwargs=example_inputs(node))
    transject = tiny("transject")
    held = ("transject's orthogonal weights are computed from its parameters at each call (a linear solve, which ONNX "
            "has no operator for): export inside `with torch.no_grad(), model.hold_parametrized_weights():`, which "
            "holds them as constants.")  # fmt: skip
    with pytest.raises(ValueError) as refused:
        torch.export.export(transject, (), kwargs=example_inputs(transject))
    assert str(refused.value) == held
    with pytest.raises(Exception) as refused:  # the ONNX exporter wraps what torch.export raised
        torch.onnx.export(transject, (), tmp_path / "plain.onnx", kwargs=example_inputs(transject), dynamo=True,
                          verbose=False)  # fmt: skip
    assert isinstance(refused.value.__cause__, ValueError) and str(refused.value.__cause__) == held
    with torch.no_grad(), transject.hold_parametrized_weights():  # as the message says
        torch.export.export(transject, (), kwargs=example_inputs(transject))


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


#: Run without the package: each exported folder loaded with its remote code, exported to ONNX inside the model's
#: own ``hold_parametrized_weights()`` block (as the how-to does), served by onnxruntime; the N-ODE refused in one line.
REMOTE_ONNX_SCRIPT = WITHOUT_PACKAGE + textwrap.dedent(
    """
    import torch, onnxruntime, transformers
    report = {}
    for folder in sys.argv[1:]:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        generator = torch.Generator().manual_seed(1)
        traced, served = ({"input_ids": torch.randint(0, 100, shape, generator=generator),
                           "attention_mask": torch.ones(shape, dtype=torch.long)} for shape in ((2, 16), (3, 21)))
        served["attention_mask"][-1, 9:] = 0
        dims = {name: {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO} for name in traced}
        try:
            with torch.no_grad(), model.hold_parametrized_weights():
                torch.onnx.export(model, (), f"{folder}.onnx", kwargs=traced, dynamo=True, dynamic_shapes=dims,
                                  input_names=list(traced), output_names=["logits"], verbose=False)
        except Exception as error:
            report[folder] = "refused: " + str(error.__cause__ or error)
            continue
        (logits,) = onnxruntime.InferenceSession(f"{folder}.onnx").run(None, {k: v.numpy() for k, v in served.items()})
        with torch.no_grad():
            report[folder] = float((torch.from_numpy(logits) - model(**served).logits).abs().max())
    print(json.dumps(report))
    """
)


def test_an_export_loaded_without_the_package_serves_through_onnxruntime(tmp_path: Path) -> None:
    names = {**TINY, "node_transformer": ("node_transformer", {"num_attention_heads": 4, "intermediate_size": 32})}
    folders = []
    for name, (model_type, fields) in names.items():
        torch.manual_seed(0)
        config = AutoConfig.for_model(model_type, hidden_size=32, num_hidden_layers=2, vocab_size=100,
                                      max_position_embeddings=64, **fields)  # fmt: skip
        folders.append(str(export_for_hub(AutoModelForSequenceClassification.from_config(config), tmp_path / name)))
    result = run_python(REMOTE_ONNX_SCRIPT, *folders, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report.pop(str(tmp_path / "node_transformer")) == (
        "refused: node_transformer cannot be exported as a static graph: each block is an ODE solved by torchdiffeq, "
        "which checks its time grid by value and, with an adaptive method, chooses its number of steps from the "
        "input: torch.export cannot trace it into one static graph; serve it with PyTorch.")  # fmt: skip
    assert sorted(report) == sorted(str(tmp_path / name) for name in TINY)
    assert all(difference <= 1e-5 for difference in report.values()), report
