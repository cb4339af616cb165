"""The N-ODE Transformer: each block integrates ``X'(t) = F(X(t), t)`` over ``[0, T_F]`` with an
adaptive solver, so the number of function evaluations (the "depth") adapts to the input
(Baier-Reinio & De Sterck 2020, §3).

* F (``config.ode_function``): eq. (2) ``FFN_t(MHSA_t(X))``, eq. (3) ``FFN_t(X + MHSA_t(X))`` or
  eq. (9) ``MHSA_t(X) + FFN_t(X + MHSA_t(X))``.
* Time dependence (eq. 5): affine maps ``Ax + b + ct`` — always in the FFN, optionally in the MHSA.
* Solver: ``torchdiffeq.odeint`` (backprop through the solver) or ``odeint_adjoint``; the number of
  function evaluations (NFE) per block is reported in ``diagnostics``.
* Kinetic regulariser (eq. 6): ``λ/(2L) ∫₀^{T_F} ‖X'(t)‖²_F dt`` per block and sequence, integrated
  by augmenting the ODE state, added to the loss and reported as ``diagnostics["kinetic_energy"]``.

Padded positions get ``X' = 0`` (they stay at their embedding) and are masked as keys, so they
influence neither real tokens nor, through exploding values, the step-size control.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn
from torchdiffeq import odeint, odeint_adjoint
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer

from ..core.encoder_layers import FeedForward, MultiHeadSelfAttention
from ..core.modeling_encoder import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderModel,
    EncoderPreTrainedModel,
)
from .configuration_node_transformer import NodeTransformerConfig


class ODESolverError(RuntimeError):
    """The ODE solver could not integrate a block (step cap exceeded, step size underflow, or a
    non-finite state)."""


class TimeDependentLinear(nn.Linear):
    """The concatenation layer of eq. (5): ``x ↦ Ax + b + ct``. The ODE function sets ``time``."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.time_coefficient = nn.Parameter(torch.empty(out_features))
        self.time: torch.Tensor | float = 0.0

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return super().forward(hidden_states) + self.time * self.time_coefficient


class TimeDependentAttention(MultiHeadSelfAttention):
    """MHSA whose four affine maps are time-dependent (eq. 5 applied to MHSA, §4)."""

    projection_class = TimeDependentLinear


class NodeDynamics(nn.Module):
    """The right-hand side ``F(X, t)`` of one block, with an evaluation counter.

    Called by torchdiffeq as ``dynamics(t, state)``; ``state`` is X, or ``(X, E)`` when the kinetic
    energy ``E' = ‖X'‖²_F / L`` is integrated alongside (eq. 6).
    """

    def __init__(self, config: NodeTransformerConfig) -> None:
        super().__init__()
        self.ode_function = config.ode_function
        attention_class = TimeDependentAttention if config.time_dependent_attention else MultiHeadSelfAttention
        self.attention = attention_class(config)
        self.feed_forward = FeedForward(
            config.hidden_size, config.intermediate_size, config.hidden_act, linear_class=TimeDependentLinear
        )
        norm = config.use_layer_norm
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if norm else nn.Identity()
        self.feed_forward_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if norm else nn.Identity()
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.time_dependent = [m for m in self.modules() if isinstance(m, TimeDependentLinear)]
        # Per-solve context, set by the block before integrating.
        self.padding_mask: torch.Tensor | None = None
        self.token_counts: torch.Tensor | None = None
        self.evaluations = 0

    def velocity(self, time: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        """``X' = F(X, t)`` (eq. 2, 3 or 9), zero at padded positions."""
        for module in self.time_dependent:
            module.time = time
        attended = self.dropout(self.attention(self.attention_norm(hidden_states), self.padding_mask)[0])
        if self.ode_function == "eq2":
            derivative = self.feed_forward(self.feed_forward_norm(attended))
        else:
            derivative = self.feed_forward(self.feed_forward_norm(hidden_states + attended))
            if self.ode_function == "eq9":
                derivative = attended + derivative
        derivative = self.dropout(derivative)
        if self.padding_mask is not None:
            derivative = derivative * self.padding_mask[..., None].to(derivative.dtype)
        return derivative

    def forward(self, time: torch.Tensor, state):
        self.evaluations += 1
        if isinstance(state, tuple):
            derivative = self.velocity(time, state[0])
            energy_rate = derivative.pow(2).sum(dim=(1, 2)) / self.token_counts
            return derivative, energy_rate
        return self.velocity(time, state)


class NodeTransformerBlock(GradientCheckpointingLayer):
    """One N-ODE block: ``X(T_F)`` from ``X(0) = hidden_states``. Returns the end state, the attention
    probabilities of F at ``(X(T_F), T_F)`` when asked, the NFE and the per-sequence kinetic energy."""

    def __init__(self, config: NodeTransformerConfig, layer_idx: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.dynamics = NodeDynamics(config)

    def solver_options(self) -> dict:
        config = self.config
        if config.adaptive:
            return {"max_num_steps": config.max_num_steps}
        return {} if config.step_size is None else {"step_size": config.step_size}

    def forward(
        self,
        hidden_states: torch.Tensor,
        padding_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
        config, dynamics = self.config, self.dynamics
        batch, seq_len = hidden_states.shape[:2]
        dynamics.padding_mask = padding_mask
        dynamics.evaluations = 0
        regularise = config.kinetic_regularization > 0
        state = hidden_states
        if regularise:
            counts = padding_mask.sum(-1) if padding_mask is not None else torch.full((batch,), seq_len)
            dynamics.token_counts = counts.to(hidden_states)
            state = (hidden_states, hidden_states.new_zeros(batch))
        times = torch.tensor([0.0, config.final_time], dtype=torch.float32, device=hidden_states.device)
        kwargs = {
            "rtol": config.rtol,
            "atol": config.atol,
            "method": config.ode_method,
            "options": self.solver_options(),
        }
        try:
            if config.adjoint:
                trajectory = odeint_adjoint(
                    dynamics, state, times, adjoint_params=tuple(dynamics.parameters()), **kwargs
                )
            else:
                trajectory = odeint(dynamics, state, times, **kwargs)
        except AssertionError as error:  # torchdiffeq signals step-cap and underflow failures this way
            raise ODESolverError(
                f"N-ODE block {self.layer_idx}: the {config.ode_method} solver failed ({error}) after "
                f"{dynamics.evaluations} function evaluations. The input may be stiff or its trajectory may "
                "explode; raise max_num_steps, loosen rtol/atol, or use a fixed-step method."
            ) from error
        final = trajectory[0][-1] if regularise else trajectory[-1]
        energy = trajectory[1][-1] if regularise else hidden_states.new_zeros(batch)
        if not torch.isfinite(final).all():
            raise ODESolverError(f"N-ODE block {self.layer_idx}: the solution contains NaN or infinity.")
        evaluations = torch.tensor(float(dynamics.evaluations), device=hidden_states.device)
        attention = None
        if output_attentions:
            for module in dynamics.time_dependent:
                module.time = times[-1]
            attention = dynamics.attention(dynamics.attention_norm(final), padding_mask, output_attentions=True)[1]
        return final, attention, evaluations, energy


class VanillaTransformerBlock(GradientCheckpointingLayer):
    """Eq. (1) with the same building blocks and time-independent maps: ``Y = X + MHSA(X)``,
    ``X' = Y + FFN(Y)`` (optional pre-LayerNorm and dropout as in the ODE blocks)."""

    def __init__(self, config: NodeTransformerConfig, layer_idx: int | None = None) -> None:
        super().__init__()
        self.attention = MultiHeadSelfAttention(config, layer_idx=layer_idx)
        self.feed_forward = FeedForward(config.hidden_size, config.intermediate_size, config.hidden_act)
        norm = config.use_layer_norm
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if norm else nn.Identity()
        self.feed_forward_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if norm else nn.Identity()
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        hidden_states: torch.Tensor,
        padding_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, attention = self.attention(self.attention_norm(hidden_states), padding_mask, output_attentions)
        hidden_states = hidden_states + self.dropout(attended)
        hidden_states = hidden_states + self.dropout(self.feed_forward(self.feed_forward_norm(hidden_states)))
        return hidden_states, attention


def build_block(config: NodeTransformerConfig, layer_idx: int | None = None) -> nn.Module:
    """An ODE block, or a vanilla eq. (1) block when ``config.block_type == "vanilla"``."""
    block_class = NodeTransformerBlock if config.block_type == "ode" else VanillaTransformerBlock
    return block_class(config, layer_idx=layer_idx)


class NodeTransformerPreTrainedModel(EncoderPreTrainedModel):
    config_class = NodeTransformerConfig
    base_model_prefix = "node_transformer"
    layer_class = staticmethod(build_block)
    _no_split_modules: ClassVar[list[str]] = ["EncoderEmbeddings", "NodeTransformerBlock", "VanillaTransformerBlock"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, TimeDependentLinear):
            init.normal_(module.time_coefficient, mean=0.0, std=self.config.initializer_range)


class NodeTransformerModel(NodeTransformerPreTrainedModel, EncoderModel):
    """The bare N-ODE Transformer. ``diagnostics`` holds ``nfe_per_block`` and ``nfe_total`` (ODE
    blocks) and, when λ > 0, ``kinetic_energy`` per sequence (summed over blocks); the weighted
    regulariser is ``auxiliary_loss``."""

    def summarize_layer_outputs(
        self, extra_outputs: list[tuple[torch.Tensor, ...]], padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        if not extra_outputs or not extra_outputs[0]:
            return None, {}  # vanilla blocks
        evaluations = torch.stack([extras[0] for extras in extra_outputs])
        diagnostics = {"nfe_per_block": evaluations, "nfe_total": evaluations.sum()}
        weight = self.config.kinetic_regularization
        if weight == 0:
            return None, diagnostics
        kinetic = torch.stack([extras[1] for extras in extra_outputs]).sum(dim=0)  # (B,): Σ_blocks ∫‖X'‖²/L
        diagnostics["kinetic_energy"] = kinetic.detach()
        return 0.5 * weight * kinetic.mean(), diagnostics


class NodeTransformerForMaskedLM(NodeTransformerPreTrainedModel, EncoderForMaskedLM):
    """N-ODE Transformer with the masked-LM head (decoder tied to the word embeddings)."""


class NodeTransformerForSequenceClassification(NodeTransformerPreTrainedModel, EncoderForSequenceClassification):
    """N-ODE Transformer with a sequence classification/regression head on the pooled output."""


class NodeTransformerForTokenClassification(NodeTransformerPreTrainedModel, EncoderForTokenClassification):
    """N-ODE Transformer with a token classification head."""


class NodeTransformerForQuestionAnswering(NodeTransformerPreTrainedModel, EncoderForQuestionAnswering):
    """N-ODE Transformer with an extractive question-answering (span) head."""


class NodeTransformerForMultipleChoice(NodeTransformerPreTrainedModel, EncoderForMultipleChoice):
    """N-ODE Transformer with a multiple-choice head."""
