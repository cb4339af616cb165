"""Orthogonally parametrised weights, shared by every idea that has them (spec:
:mod:`.configuration_orthogonal_weights`): the float32-kept linear map, initialisation, adapters and exact
re-parametrisation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal
from transformers import initialization as init

from .configuration_orthogonal_weights import ORTHOGONAL_MAPS
from .ideas import ConfigurableIdea
from .inputs import full_precision

if TYPE_CHECKING:
    from .configuration_encoder import EncoderConfig


class OrthogonalLinear(nn.Linear):
    """A linear map whose orthogonal parametrisation stays in float32 inside a half-precision model.

    The maps (Cayley's solve, ``matrix_exp``, Householder) have no half-precision CPU kernels and lose
    orthogonality in bf16, so casting the model to float16/bfloat16 moves these parameters to the new
    device but keeps them in float32; ``forward`` casts the computed weight to the input's dtype (the
    matmul then runs in half precision, as the rest of the model does). State-dict names are those of
    ``nn.Linear`` with ``torch.nn.utils.parametrizations.orthogonal``.
    """

    def _apply(self, fn, recurse=True):
        probe = fn(torch.zeros((), dtype=torch.float32))
        if probe.dtype in (torch.float16, torch.bfloat16):
            device = probe.device
            return super()._apply(lambda tensor: tensor.to(device=device), recurse)
        return super()._apply(fn, recurse)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(hidden_states.dtype)
        with full_precision(hidden_states.device):  # the map in float32 under autocast too
            weight = self.weight
        return nn.functional.linear(hidden_states, weight.to(hidden_states.dtype), bias)


class HoldsOrthogonalLinears(ConfigurableIdea, nn.Module):
    """An idea whose weights include orthogonally parametrised linears (orthogonal attention, the
    injective scheme's FFN), with what those weights need of a model:

    * Initialisation (:meth:`init_weights`): ``weight = base @ map(skew(original))`` starts from a random
      orthogonal base and a zero offset, set at torch's ``ParametrizationList`` (which holds
      ``original``): transformers never calls ``_init_weights`` on a custom-code module without
      parameters of its own, which a bias-free parametrised Linear is.
    * ``orthogonal_map`` is a parametrisation field: the same matrices under another map are other
      parameters, so a checkpoint loads with its saved map and :meth:`reparametrize` switches exactly.
    * Adapters (PEFT's LoRA) may wrap these linears. An adapter adds ΔW to a frozen W and merges by
      writing W + ΔW into ``weight.data``; for a parametrised weight that tensor is computed at each
      access, so the write would be lost and the "merged" model would silently be the base model. W + ΔW
      is not orthogonal in general anyway, so when a module that holds one of these linears as its base
      layer (``get_base_layer()``) is assigned in its place, the linear's weight becomes a plain
      parameter with the same values: the function is unchanged, adapter training is unchanged (the base
      weight is frozen), and a merge is exact.
    """

    @classmethod
    def init_weights(cls, module: nn.Module, config: EncoderConfig) -> None:
        if isinstance(module, parametrize.ParametrizationList) and getattr(module[0], "base", None) is not None:
            init.orthogonal_(module[0].base)
            init.zeros_(module.original)

    @classmethod
    def reparametrize(cls, model: nn.Module, name: str, value: Any) -> None:
        set_orthogonal_map(model, value)  # name is orthogonal_map, the one field declared

    def __setattr__(self, name: str, value: object) -> None:
        base = value.get_base_layer() if isinstance(value, nn.Module) and hasattr(value, "get_base_layer") else None
        if isinstance(base, OrthogonalLinear) and parametrize.is_parametrized(base, "weight"):
            parametrize.remove_parametrizations(base, "weight", leave_parametrized=True)
        super().__setattr__(name, value)


def orthogonal_linear(size: int, bias: bool, orthogonal_map: str) -> OrthogonalLinear:
    """A ``size × size`` linear map whose weight is constrained to be orthogonal.

    Built on the CPU in float32 even inside ``from_pretrained``'s meta-device and ``dtype`` contexts:
    registering the parametrization checks orthogonality with real numbers. The matrices are small (d × d).
    """
    with torch.device("cpu"):
        linear = OrthogonalLinear(size, size, bias=bias, dtype=torch.float32)
        return orthogonal(linear, orthogonal_map=orthogonal_map)


def set_orthogonal_map(model: nn.Module, orthogonal_map: str) -> None:
    """Re-parametrise every orthogonal weight of ``model`` with another map without changing the
    function: each current matrix Q becomes the new parametrisation's base (``right_inverse``), so a
    checkpoint trained with ``matrix_exp`` continues with ``cayley`` (or back) from the same weights."""
    if orthogonal_map not in ORTHOGONAL_MAPS:
        raise ValueError(f"orthogonal_map must be one of {ORTHOGONAL_MAPS}, got {orthogonal_map!r}.")
    for module in list(model.modules()):
        if parametrize.is_parametrized(module, "weight"):
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)
            with torch.device(module.weight.device):
                orthogonal(module, orthogonal_map=orthogonal_map)
