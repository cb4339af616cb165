"""Orthogonally parametrised weights, shared by every idea that has them (spec:
:mod:`.configuration_orthogonal_weights`): the float32-kept linear map, all of a model's orthogonal matrices
computed in one batched call and held for as long as they are valid, initialisation, adapters and exact
re-parametrisation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal
from transformers import initialization as init

from .configuration_orthogonal_weights import ORTHOGONAL_MAPS
from .ideas import ConfigurableIdea
from .inputs import full_precision

if TYPE_CHECKING:
    from .configuration_encoder import EncoderConfig


class OrthogonalWeight(nn.Module):
    """A module whose orthogonally parametrised ``weight`` stays in float32 inside a half-precision model.

    The maps (Cayley's solve, ``matrix_exp``, Householder) have no half-precision CPU kernels and lose
    orthogonality in bf16, so casting the model to float16/bfloat16 moves these parameters to the new
    device but keeps them in float32. State-dict names are those of ``torch.nn.utils.parametrizations.orthogonal``
    on ``weight``.

    Inside :func:`held_orthogonal_weights` the weight is not computed here but taken from ``held``, which
    that block computed for all of a model's orthogonal weights together.
    """

    #: the orthogonal map's name, set where the parametrisation is registered (:func:`orthogonal_linear`)
    orthogonal_map: str | None = None
    #: this linear's orthogonal matrix (float32) while a :func:`held_orthogonal_weights` block is open
    held: torch.Tensor | None = None

    def _apply(self, fn, recurse=True):
        probe = fn(torch.zeros((), dtype=torch.float32))
        if probe.dtype in (torch.float16, torch.bfloat16):
            device = probe.device
            return super()._apply(lambda tensor: tensor.to(device=device), recurse)
        return super()._apply(fn, recurse)

    def matrix(self) -> torch.Tensor:
        """The orthogonal weight in float32: the held one, or computed now (in float32 under autocast too)."""
        if self.held is not None:
            return self.held
        with full_precision(next(self.parameters()).device):
            return self.weight


class OrthogonalLinear(OrthogonalWeight, nn.Linear):
    """A linear map with an orthogonal weight (:class:`OrthogonalWeight`); ``forward`` casts the computed weight to
    the input's dtype (the matmul then runs in half precision, as the rest of the model does)."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(hidden_states.dtype)
        return nn.functional.linear(hidden_states, self.matrix().to(hidden_states.dtype), bias)


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


class OrthogonalMatrix(OrthogonalWeight):
    """An orthogonal matrix that no input passes through as a layer — read with :meth:`matrix` (TransJect's
    eigenvector estimate Ũ): it is no ``nn.Linear``, so an adapter that targets every linear layer (PEFT's
    ``target_modules="all-linear"``) leaves it alone."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size, size, dtype=torch.float32))


def check_orthogonal_weights_kept(model: nn.Module) -> None:
    """Refuse, naming the layer, a model whose orthogonal weight an adapter merge replaced by a plain one
    (``merge_and_unload``: W + ΔW is not orthogonal): saved, it would load as the model type it claims to be with
    other weights. Its adapter is what to save (``PeftModel.save_pretrained``), onto the base model."""
    for name, module in model.named_modules():
        if isinstance(module, OrthogonalWeight) and not parametrize.is_parametrized(module, "weight"):
            raise ValueError(
                f"{name}: its orthogonal weight was replaced by a plain one (an adapter merged into it), so this model "
                f"is no longer a {type(model).__name__} with orthogonal layers and would not load back as it is. Save "
                "the adapter (PeftModel.save_pretrained) and load it onto the base model, or adapt other layers."
            )


def orthogonal_matrix(size: int, orthogonal_map: str) -> OrthogonalMatrix:
    """A ``size × size`` orthogonal matrix that is not a layer (:class:`OrthogonalMatrix`), built as
    :func:`orthogonal_linear` builds its weight."""
    with torch.device("cpu"):
        matrix = OrthogonalMatrix(size)
        matrix.orthogonal_map = orthogonal_map
        return orthogonal(matrix, orthogonal_map=orthogonal_map)


def orthogonal_linear(size: int, bias: bool, orthogonal_map: str) -> OrthogonalLinear:
    """A ``size × size`` linear map whose weight is constrained to be orthogonal.

    Built on the CPU in float32 even inside ``from_pretrained``'s meta-device and ``dtype`` contexts:
    registering the parametrization checks orthogonality with real numbers. The matrices are small (d × d).
    """
    with torch.device("cpu"):
        linear = OrthogonalLinear(size, size, bias=bias, dtype=torch.float32)
        linear.orthogonal_map = orthogonal_map
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
            module.orthogonal_map = orthogonal_map


def orthogonal_matrices(originals: torch.Tensor, bases: torch.Tensor, orthogonal_map: str) -> torch.Tensor:
    """``bases @ map(skew(originals))`` for a stack of square matrices, in one batched call: the function
    ``torch.nn.utils.parametrizations.orthogonal`` computes for one matrix (its trivialisation: a fixed
    orthogonal base times the map of a skew-symmetric offset A built from the lower triangle).

    * ``matrix_exp``: ``exp(A)``;
    * ``cayley``: ``(I + A/2)(I − A/2)⁻¹``, one batched solve;
    * ``householder``: the product of the reflections stored below the diagonal, times the signs kept on it.
    """
    if orthogonal_map == "householder":
        reflectors = originals.tril(diagonal=-1)
        tau = 2.0 / (1.0 + (reflectors * reflectors).sum(dim=-2))
        matrices = torch.linalg.householder_product(reflectors, tau)
        matrices = matrices * originals.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
    else:
        lower = originals.tril()
        skew = lower - lower.mT
        matrices = torch.matrix_exp(skew) if orthogonal_map == "matrix_exp" else CayleyMap.apply(skew)
    return bases @ matrices


class CayleyMap(torch.autograd.Function):
    """The Cayley map ``Q = (I − A/2)⁻¹(I + A/2)`` of a stack of skew-symmetric ``A``, computed as torch's
    parametrisation computes it (one solve), with a backward of two matrix products instead of a second
    solve: ``Q = 2N − I`` for ``N = (I − A/2)⁻¹``, so ``N = (Q + I)/2``, ``dQ = N dA N`` and the gradient
    is ``Nᵀ G Nᵀ``."""

    @staticmethod
    def forward(ctx: Any, skew: torch.Tensor) -> torch.Tensor:
        identity = torch.eye(skew.shape[-1], dtype=skew.dtype, device=skew.device)
        matrices = torch.linalg.solve(torch.add(identity, skew, alpha=-0.5), torch.add(identity, skew, alpha=0.5))
        ctx.save_for_backward(matrices)
        return matrices

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, gradient: torch.Tensor) -> torch.Tensor:
        (matrices,) = ctx.saved_tensors
        inverse = (matrices + torch.eye(matrices.shape[-1], dtype=matrices.dtype, device=matrices.device)) / 2
        return inverse.mT @ gradient @ inverse.mT


def weights_held(model: nn.Module) -> bool:
    """Whether every parametrised orthogonal weight of ``model`` is held by a :func:`held_orthogonal_weights`
    block."""
    return all(module.held is not None for module in model.modules()
               if isinstance(module, OrthogonalWeight) and parametrize.is_parametrized(module, "weight"))  # fmt: skip


def _batchable(linear: nn.Module) -> bool:
    """An :class:`OrthogonalWeight` whose weight is exactly this module's parametrisation (one orthogonal
    map with its base), not held by an enclosing block."""
    return (
        isinstance(linear, OrthogonalWeight)
        and linear.held is None
        and linear.orthogonal_map is not None
        and parametrize.is_parametrized(linear, "weight")
        and len(linear.parametrizations.weight) == 1
        and getattr(linear.parametrizations.weight[0], "base", None) is not None
    )


def compute_together(linears: Sequence[OrthogonalWeight]) -> list[torch.Tensor]:
    """Every linear's orthogonal weight (float32), one batched call per (map, size, device): a model's
    4 × layers matrices of TransJect cost one matrix function, not one per layer and matrix."""
    groups: dict[tuple, list[int]] = {}
    for index, linear in enumerate(linears):
        original = linear.parametrizations.weight.original
        groups.setdefault((linear.orthogonal_map, tuple(original.shape), original.device), []).append(index)
    weights: list[torch.Tensor | None] = [None] * len(linears)
    for (orthogonal_map, _, device), indices in groups.items():
        with full_precision(device):
            originals = torch.stack([linears[i].parametrizations.weight.original for i in indices])
            bases = torch.stack([linears[i].parametrizations.weight[0].base for i in indices])
            for index, weight in zip(
                indices, orthogonal_matrices(originals, bases, orthogonal_map).unbind(0), strict=True
            ):
                weights[index] = weight
    return weights  # type: ignore[return-value]


@dataclass
class HeldWeights:
    """What a :func:`held_orthogonal_weights` block computed: the matrices, in the autograd graph of the
    parameters (``computed``), and the tensors its forward passes used (``used``: the same tensors, or, to
    accumulate gradients, detached copies that sum them)."""

    computed: list[torch.Tensor] = field(default_factory=list)
    used: list[torch.Tensor] = field(default_factory=list)

    def waiting_gradients(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The computed matrices whose detached copies summed a gradient, and those gradients: what one backward
        pass through the maps sends on to the parameters (``torch.autograd.backward(*held.waiting_gradients())``,
        the pretraining engine's, after the step's micro-batches). Empty without detached copies."""
        pairs = [(computed, used.grad) for computed, used in zip(self.computed, self.used, strict=True)
                 if used is not computed and used.grad is not None]  # fmt: skip
        return [computed for computed, _ in pairs], [gradient for _, gradient in pairs]


@contextlib.contextmanager
def held_orthogonal_weights(model: nn.Module, accumulate_gradients: bool = False) -> Iterator[HeldWeights]:
    """Compute every orthogonal weight of ``model`` once, together (:func:`compute_together`), and use it
    for every forward pass inside the block.

    * Around one forward pass (what the encoder does on every call), gradients flow through the batched
      maps as usual.
    * Without autograd (evaluation, inference), the weights are computed once for all batches in the block.
    * ``accumulate_gradients=True``, around the micro-batches of one optimizer step: the forward passes use
      detached copies, so their backward passes stop there and sum their gradients; after the block the
      caller sends the sum through the maps once (:meth:`HeldWeights.waiting_gradients`): the same gradients,
      by linearity, for one map's backward instead of one per micro-batch. Not for parallel training, where
      each backward must reach the parameters to be reduced.

    Linears already held by an enclosing block are left to it; parameters must not change inside a block.
    """
    linears = [module for module in model.modules() if _batchable(module)]
    if not linears:
        yield HeldWeights()
        return
    computed = compute_together(linears)
    accumulate = accumulate_gradients and any(weight.requires_grad for weight in computed)
    used = [weight.detach().requires_grad_() for weight in computed] if accumulate else computed
    for linear, weight in zip(linears, used, strict=True):
        linear.held = weight
    try:
        yield HeldWeights(computed, used)
    finally:
        for linear in linears:
            linear.held = None
