"""Exports for serving: a model as one static graph, for ``torch.export`` and ONNX (torch's dynamo exporter).

    from hf_variants.serving import export_onnx
    path = export_onnx(model, "onnx-export")  # onnx-export/model.onnx; inputs input_ids, attention_mask

Every variant exports except the N-ODE Transformer (its ODE solver is not a static graph: refused in one line by
the scheme's ``static_graph_error``). TransJect's orthogonal weights are functions of parameters (the Cayley or
matrix-exponential map of ``torch.nn.utils.parametrizations.orthogonal``) that evaluation computes again at every
call; the exported copy holds their values instead (:func:`static_copy`), so the graph needs no linear solve.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from torch.nn.utils import parametrize
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


def static_copy(model: PreTrainedModel) -> PreTrainedModel:
    """A copy of ``model`` in evaluation mode whose parametrised weights (orthogonal matrices) are plain tensors
    holding their present values: the same function, with no parametrisation left to compute in a graph."""
    check_exportable(model)
    frozen = copy.deepcopy(model).eval()
    for module in frozen.modules():
        if parametrize.is_parametrized(module):
            hold_present_values(module)
    return frozen


def hold_present_values(module: torch.nn.Module) -> None:
    """Replace ``module``'s parametrised tensors by parameters holding their present values. Done by hand, not by
    ``parametrize.remove_parametrizations``: that deletes the tensor's property from the parametrised class, which a
    deep copy shares with the module it was copied from — the original would lose its weights."""
    with torch.no_grad():
        values = {name: getattr(module, name).detach().clone() for name in module.parametrizations}
    module.__class__ = module.__class__.__bases__[0]  # this instance only: the class itself is left as it was
    del module._modules["parametrizations"]
    for name, value in values.items():
        module.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))


def example_inputs(model: PreTrainedModel, batch_size: int = 2, length: int = 16) -> dict[str, torch.Tensor]:
    """Token ids and an attention mask with padding in the last row: the inputs a graph is traced with."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, model.config.vocab_size, (batch_size, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, length // 2 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def export_program(model: PreTrainedModel, inputs: dict[str, torch.Tensor] | None = None
                   ) -> torch.export.ExportedProgram:  # fmt: skip
    """``torch.export`` of the model's static copy, with free batch and sequence dimensions."""
    inputs = inputs or example_inputs(model)
    return torch.export.export(static_copy(model), (), kwargs=inputs, dynamic_shapes=DYNAMIC_SHAPES)


def export_onnx(model: PreTrainedModel, output_dir: str | Path, inputs: dict[str, torch.Tensor] | None = None) -> Path:
    """``output_dir/model.onnx``: the model's static copy through torch's dynamo ONNX exporter (needs ``onnx`` and
    ``onnxscript``: ``pip install "hf-variants[onnx]"``). Its inputs are ``input_ids`` and ``attention_mask`` of any
    batch size and length, its outputs named as the model's output fields (``logits``, ``last_hidden_state``, ...).
    The files are written inside ``output_dir`` (created), never through a link there."""
    inputs = inputs or example_inputs(model)
    frozen = static_copy(model)
    with torch.no_grad():
        output_names = list(frozen(**inputs).keys())  # e.g. logits, or last_hidden_state and pooler_output
    folder = make_folder(Path(output_dir), within=Path(output_dir))
    with staged_into(folder) as staging:
        torch.onnx.export(frozen, (), staging / "model.onnx", kwargs=inputs, dynamo=True, input_names=list(INPUT_NAMES),
                          output_names=output_names, dynamic_shapes=DYNAMIC_SHAPES, verbose=False)  # fmt: skip
    return folder / "model.onnx"
