"""Exports for serving: a model as one static graph, for ``torch.export`` and ONNX (torch's dynamo exporter).

    from hf_variants.serving import export_onnx
    path = export_onnx(model, "onnx-export")  # onnx-export/model.onnx; inputs input_ids, attention_mask

Every variant exports except the N-ODE Transformer (its ODE solver is not a static graph: refused in one line by
the scheme's ``static_graph_error``, by these functions and by the model's own forward when traced). TransJect's
orthogonal weights are functions of parameters (the Cayley or matrix-exponential map of
``torch.nn.utils.parametrizations.orthogonal``) that evaluation computes again at every call; the export traces
the model inside its ``hold_parametrized_weights()`` block, where they are values, so the graph holds them as
constants and needs no linear solve. That block is a method of the model, shipped with its remote code, so a
model loaded with ``trust_remote_code=True`` exports the same way without this package (docs: "Serve with ONNX
Runtime").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import PreTrainedModel

from .core.composition import static_graph_error
from .core.registration import VARIANTS
from .storage.files import make_folder, staged_into

#: The exported graph's inputs; batch and sequence dimensions stay free.
INPUT_NAMES = ("input_ids", "attention_mask")
DYNAMIC_SHAPES = {name: {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO} for name in INPUT_NAMES}


def check_exportable(model: PreTrainedModel) -> None:
    """A ``ValueError`` naming the model type and the reason when its forward is no static graph."""
    config = model.config
    reason = static_graph_error(config) if config.model_type in VARIANTS else None
    if reason is not None:
        raise ValueError(f"{config.model_type} cannot be exported as a static graph: {reason}.")


@contextlib.contextmanager
def held_for_export(model: PreTrainedModel) -> Iterator[PreTrainedModel]:
    """``model`` in evaluation mode, without autograd, its parametrised weights held as constants
    (``hold_parametrized_weights``); every module's mode is restored afterwards and the model keeps training
    through its parametrisations."""
    check_exportable(model)
    modes = {module: module.training for module in model.modules()}
    hold = getattr(model, "hold_parametrized_weights", contextlib.nullcontext)  # another library's model: nothing
    model.eval()
    try:
        with torch.no_grad(), hold():
            yield model
    finally:
        for module, training in modes.items():
            module.training = training


def example_inputs(model: PreTrainedModel, batch_size: int = 2, length: int = 16) -> dict[str, torch.Tensor]:
    """Token ids and an attention mask with padding in the last row: the inputs a graph is traced with."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, model.config.vocab_size, (batch_size, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, length // 2 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def export_program(model: PreTrainedModel, inputs: dict[str, torch.Tensor] | None = None
                   ) -> torch.export.ExportedProgram:  # fmt: skip
    """``torch.export`` of the model in evaluation (:func:`held_for_export`), with free batch and sequence
    dimensions."""
    inputs = inputs or example_inputs(model)
    with held_for_export(model):
        return torch.export.export(model, (), kwargs=inputs, dynamic_shapes=DYNAMIC_SHAPES)


def export_onnx(model: PreTrainedModel, output_dir: str | Path, inputs: dict[str, torch.Tensor] | None = None) -> Path:
    """``output_dir/model.onnx``: the model in evaluation (:func:`held_for_export`) through torch's dynamo ONNX
    exporter (needs ``onnx`` and ``onnxscript``: ``pip install "hf-variants[onnx]"``). Its inputs are
    ``input_ids`` and ``attention_mask`` of any batch size and length, its outputs named as the model's output
    fields (``logits``, ``last_hidden_state``, ...). The files are written inside ``output_dir`` (created), never
    through a link there."""
    inputs = inputs or example_inputs(model)
    with held_for_export(model):
        output_names = list(model(**inputs).keys())  # e.g. logits, or last_hidden_state and pooler_output
        folder = make_folder(Path(output_dir), within=Path(output_dir))
        with staged_into(folder) as staging:
            torch.onnx.export(model, (), staging / "model.onnx", kwargs=inputs, dynamo=True,
                              input_names=list(INPUT_NAMES), output_names=output_names,
                              dynamic_shapes=DYNAMIC_SHAPES, verbose=False)  # fmt: skip
    return folder / "model.onnx"
