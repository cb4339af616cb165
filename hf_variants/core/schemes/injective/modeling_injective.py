"""Layer scheme ``layer_scheme="injective"``: TransJect's injective residuals around a mixture of
attention experts, then an orthogonal residual FFN (paper §3, eq. 3–6), introduced by TransJect and
usable with every token mixer.

* Injective residual (eq. 3) and mixture of E experts (eq. 5):
  ``X ← Σ_e λ_e (X + s·ELU(A_e(X))) = X + s·Σ_e λ_e ELU(A_e(X))`` with ``s = α_l / L``.
* Orthogonal residual FFN (eq. 6): ``X ← X + s·ELU(ELU(X W1 + b1) W2 + b2)``, W1, W2 orthogonal.
* Entropic-TransJect (eq. 4): the residual update is randomised per hidden unit; its expectation
  ``X + r`` is used at evaluation.

With orthogonal attention experts (``attention_type="orthogonal"``, TransJect's default) each layer is
``(1 + |s|)²``-Lipschitz and ``(1 − |s|)²``-co-Lipschitz; with ``|s| < 1/L`` the L-layer encoder stays
within ``[(1 − 1/L)^{2L}, e²]`` (Theorem 2). Other token mixers are allowed (an ablation of TransJect's
attention), but softmax, MGK and MLK attention are not Lipschitz-bounded, so Theorem 2 does not hold
for them. The scheme has no LayerNorm, so a pre-LN config gets no final LayerNorm either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.pytorch_utils import apply_chunking_to_forward

from ...diagnostics import ablated, diagnostics
from ...encoder_layers import LayerScheme
from ...modeling_orthogonal_weights import HoldsOrthogonalLinears, orthogonal_linear

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig
    from ...inputs import TokenLayout

#: ``residual_weight`` (:data:`.configuration_injective.RESIDUAL_WEIGHT_NAMES`) → the map from the learnable
#: a_l to α_l (``None``: α_l = a_l).
RESIDUAL_WEIGHTS = {"linear": None, "tanh": torch.tanh, "sigmoid": torch.sigmoid}


class InjectiveLayer(HoldsOrthogonalLinears, LayerScheme):
    """Mixture of attention experts with an injective residual (eq. 3–5), then the orthogonal
    residual FFN (eq. 6); one learnable step ``α_l`` shared by both residuals. Its config fields are
    documented on :class:`.configuration_injective.InjectiveSpec`."""

    def __init__(self, config: EncoderConfig, layer_idx: int | None, make_attention: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.config = config
        self.experts = nn.ModuleList(make_attention() for _ in range(config.num_experts))
        if config.expert_weights == "constant":
            self.expert_logits = nn.Parameter(torch.zeros(config.num_experts))
            self.expert_gate = None
        else:
            self.expert_logits = None
            self.expert_gate = nn.Linear(config.hidden_size, 1)
        self.alpha = nn.Parameter(torch.zeros(()))
        self.ffn_in = orthogonal_linear(config.hidden_size, True, config.orthogonal_map)
        self.ffn_out = orthogonal_linear(config.hidden_size, True, config.orthogonal_map)
        self.chunk_size = config.chunk_size_feed_forward

    def init_extra_parameters(self, config: EncoderConfig) -> None:
        init.zeros_(self.alpha)  # tanh/linear: ReZero, every layer starts as the identity; sigmoid: α_l = 0.5
        if self.expert_logits is not None:
            init.zeros_(self.expert_logits)

    def step_size(self) -> torch.Tensor:
        """``s = α_l / L`` with ``α_l = tanh(a_l)`` (default), ``sigmoid(a_l)`` or ``a_l`` (``"linear"``)."""
        return self.residual_weight() / self.config.num_hidden_layers

    def residual_weight(self) -> torch.Tensor:
        """α_l of eq. (3): ``tanh(a_l)`` (in (−1, 1)), ``sigmoid(a_l)`` (in (0, 1)) or the raw parameter
        (``"linear"``)."""
        squash = RESIDUAL_WEIGHTS[self.config.residual_weight]
        return self.alpha if squash is None else squash(self.alpha)

    #: The ablation this layer offers (:mod:`hf_variants.core.diagnostics`): α_l = 0, the layer the identity.
    ABLATION = "identity_layers"

    def diagnostic_values(self) -> dict[str, float]:
        """The trained α_l (:mod:`hf_variants.core.diagnostics`): near 0 the layer does nothing."""
        return {"residual_weights": self.residual_weight().item()}

    @contextlib.contextmanager
    def ablated(self) -> Iterator[None]:
        """α_l = 0 inside the block: the layer is the identity, so the score lost is what it contributes."""
        self.residual_weight = lambda: torch.zeros_like(self.alpha)
        try:
            yield
        finally:
            del self.residual_weight

    def expert_weights(self, hidden_states: torch.Tensor, updates: torch.Tensor, layout: TokenLayout) -> torch.Tensor:
        """Convex weights ``(B, E)``: constant ``softmax(w)`` (eq. 5) or, as in the authors' code, a
        softmax over a linear score of each expert's output ``X + s·ELU(A_e(X))``, max-pooled over real
        tokens (computed only in that mode)."""
        if self.expert_logits is not None:
            return torch.softmax(self.expert_logits, dim=0).expand(hidden_states.shape[0], -1)
        pooled = hidden_states[:, None] + updates
        if layout.tensor is not None:
            pooled = pooled.masked_fill(~layout.tensor[:, None, :, None], torch.finfo(pooled.dtype).min)
        return torch.softmax(self.expert_gate(pooled.amax(dim=2)).squeeze(-1), dim=-1)

    def residual(self, hidden_states: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """``X + r`` (eq. 3), or eq. (4)'s randomised version for Entropic-TransJect."""
        sample = self.config.entropic and (self.training or self.config.entropic_eval == "sample")
        if not sample:
            return hidden_states + update
        # One draw per sequence and hidden unit ("for each neuron i", X_{:,i}), shared over tokens.
        u = torch.rand(hidden_states.shape[0], 1, hidden_states.shape[-1], device=hidden_states.device)
        keep_scale = torch.where(u <= 0.5, 1.5, torch.where(u <= 0.75, 0.0, 1.0)).to(hidden_states.dtype)
        update_scale = torch.where(u <= 0.25, 1.0, torch.where(u <= 0.5, -1.0, torch.where(u <= 0.75, 4.0, 0.0)))
        return keep_scale * hidden_states + update_scale.to(hidden_states.dtype) * update

    def forward(
        self,
        hidden_states: torch.Tensor,
        layout: TokenLayout,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> torch.Tensor:
        step = self.step_size()
        outputs = [F.elu(expert(hidden_states, layout, *context)[0]) for expert in self.experts]
        updates = step * torch.stack(outputs, dim=1)
        update = torch.einsum("be,bend->bnd", self.expert_weights(hidden_states, updates, layout), updates)
        hidden_states = self.residual(hidden_states, update)
        feed_forward = apply_chunking_to_forward(self.feed_forward, self.chunk_size, 1, hidden_states)
        return hidden_states + step * feed_forward

    def feed_forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The orthogonal residual FFN's update ``ELU(ELU(x W1 + b1) W2 + b2)`` (eq. 6), position-wise."""
        return F.elu(self.ffn_out(F.elu(self.ffn_in(hidden_states))))


def residual_weights(model: nn.Module) -> list[float]:
    """α_l of every injective layer of ``model``; empty when it has none."""
    return diagnostics(model).get("residual_weights", [])


def layers_as_identity(model: nn.Module) -> contextlib.AbstractContextManager[None]:
    """Every injective layer of ``model`` with α_l = 0 (each layer the identity) inside the block."""
    return ablated(model, InjectiveLayer.ABLATION)
