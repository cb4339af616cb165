"""Layer scheme ``layer_scheme="ode"``: the N-ODE Transformer's block (Baier-Reinio & De Sterck 2020,
§3), introduced by the N-ODE Transformer and usable with every token mixer.

Each block integrates ``X'(t) = F(X(t), t)`` over ``[0, T_F]`` with an adaptive solver, so the number
of function evaluations (the "depth") adapts to the input.

* F (``config.ode_function``): eq. (2) ``FFN_t(MHSA_t(X))``, eq. (3) ``FFN_t(X + MHSA_t(X))`` or
  eq. (9) ``MHSA_t(X) + FFN_t(X + MHSA_t(X))``, with the config's token mixer in place of MHSA.
* Time dependence (eq. 5): affine maps ``Ax + b + ct`` — always in the FFN, optionally in the MHSA.
* Solver: ``torchdiffeq.odeint`` (backprop through the solver) or ``odeint_adjoint``; the number of
  function evaluations (NFE) per block is reported in ``diagnostics``.
* Kinetic regulariser (eq. 6): ``λ/(2L) ∫₀^{T_F} ‖X'(t)‖²_F dt`` per block and sequence, integrated
  by augmenting the ODE state, added to the loss and reported as ``diagnostics["kinetic_energy"]``.

Padded positions get ``X' = 0`` (they stay at their embedding) and are masked as keys, so they
influence neither real tokens nor, through exploding values, the step-size control.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers import initialization as init

from ...attention import MultiHeadSelfAttention
from ...encoder_layers import FeedForward, LayerScheme, optional_pre_norms
from ...failures import ModelFailure
from ...inputs import value_checks_enabled
from .configuration_ode import ADAPTIVE_METHODS

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig
    from ...inputs import TokenLayout

#: Function-evaluation budget per allowed step (dopri8, the largest tableau, uses 13 per step).
EVALUATIONS_PER_STEP = 16


def require_solver() -> None:
    """Building an N-ODE block needs ``torchdiffeq`` (imported on the first solve, so that a config never
    imports it): name it with its pip command, in transformers' remote-code wording, when it is missing —
    at load time, not at the first forward."""
    try:
        found = importlib.util.find_spec("torchdiffeq") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            "This modeling file requires the following packages that were not found in your environment: "
            "torchdiffeq. Run `pip install torchdiffeq`"
        )


class ODESolverError(ModelFailure):
    """The ODE solver could not integrate a block (step cap exceeded, step size underflow, or a
    non-finite state)."""

    status = "solver_failed"


class TimeDependentLinear(nn.Linear):
    """The concatenation layer of eq. (5): ``x ↦ Ax + b + ct``. The ODE function sets ``time``."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.time_coefficient = nn.Parameter(torch.empty(out_features))
        self.time: torch.Tensor | float = 0.0

    def init_extra_parameters(self, config: EncoderConfig) -> None:
        init.normal_(self.time_coefficient, mean=0.0, std=config.initializer_range)

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

    def __init__(self, config: EncoderConfig, make_attention: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.ode_function = config.ode_function
        self.attention = TimeDependentAttention(config) if config.time_dependent_attention else make_attention()
        self.feed_forward = FeedForward.from_config(config, linear_class=TimeDependentLinear)
        self.attention_norm, self.feed_forward_norm = optional_pre_norms(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.time_dependent = [m for m in self.modules() if isinstance(m, TimeDependentLinear)]
        # Per-solve context, set by the block before integrating.
        self.layout: TokenLayout | None = None
        self.context: tuple[torch.Tensor, ...] = ()
        self.token_counts: torch.Tensor | None = None
        self.evaluations = 0
        self.max_evaluations = EVALUATIONS_PER_STEP * config.max_num_steps

    def velocity(self, time: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        """``X' = F(X, t)`` (eq. 2, 3 or 9), zero at padded positions."""
        for module in self.time_dependent:
            module.time = time
        attended = self.dropout(self.attention(self.attention_norm(hidden_states), self.layout, *self.context)[0])
        if self.ode_function == "eq2":
            derivative = self.feed_forward(self.feed_forward_norm(attended))
        else:
            derivative = self.feed_forward(self.feed_forward_norm(hidden_states + attended))
            if self.ode_function == "eq9":
                derivative = attended + derivative
        derivative = self.dropout(derivative)
        if self.layout.tensor is not None:
            derivative = derivative * self.layout.tensor[..., None].to(derivative.dtype)
        return derivative

    def forward(self, time: torch.Tensor, state):
        self.evaluations += 1
        if self.evaluations > self.max_evaluations:
            raise ODESolverError(
                f"the solve exceeded its budget of {self.max_evaluations} function evaluations "
                f"({EVALUATIONS_PER_STEP} × max_num_steps); the input may be stiff or its trajectory may explode."
            )
        hidden_states = state[0] if isinstance(state, tuple) else state
        # The solver integrates in float32 (see NodeTransformerBlock); F runs in the model's dtype.
        derivative = self.velocity(time, hidden_states.to(self.compute_dtype)).to(hidden_states.dtype)
        if isinstance(state, tuple):
            energy_rate = derivative.pow(2).sum(dim=(1, 2)) / self.token_counts
            return derivative, energy_rate
        return derivative

    @property
    def compute_dtype(self) -> torch.dtype:
        return self.feed_forward.fc_in.weight.dtype


class NodeTransformerBlock(LayerScheme):
    """One N-ODE block: ``X(T_F)`` from ``X(0) = hidden_states``. Returns the end state; the attention
    probabilities of F at ``(X(T_F), T_F)`` are recorded from its token mixer when asked, and the solve's
    :attr:`solver_statistics` (function evaluations, per-sequence kinetic energy) are kept for
    :meth:`summarize_layers`. Its config fields are documented on :class:`.configuration_ode.OdeSpec`."""

    @classmethod
    def summarize_layers(
        cls, config: EncoderConfig, layers: list[nn.Module], padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        """``diagnostics``: ``nfe_per_block`` and ``nfe_total`` and, when λ > 0, ``kinetic_energy`` per
        sequence (summed over blocks), from each block's :attr:`solver_statistics` of this forward pass; the
        weighted regulariser is the auxiliary loss."""
        statistics = [layer.solver_statistics for layer in layers]
        evaluations = torch.stack([evaluations for evaluations, _ in statistics])
        diagnostics = {"nfe_per_block": evaluations, "nfe_total": evaluations.sum()}
        weight = config.kinetic_regularization
        if weight == 0:
            return None, diagnostics
        kinetic = torch.stack([energy for _, energy in statistics]).sum(dim=0)  # (B,): Σ_blocks ∫‖X'‖²/L
        diagnostics["kinetic_energy"] = kinetic.detach()
        return 0.5 * weight * kinetic.mean(), diagnostics

    def __init__(self, config: EncoderConfig, layer_idx: int | None, make_attention: Callable[[], nn.Module]) -> None:
        super().__init__()
        require_solver()
        self.config = config
        self.layer_idx = layer_idx
        self.dynamics = NodeDynamics(config, make_attention)
        #: ``(function evaluations, kinetic energy per sequence)`` of the last solve (set by :meth:`forward`).
        self.solver_statistics: tuple[torch.Tensor, torch.Tensor] | None = None

    def solver_options(self) -> dict:
        config = self.config
        if config.ode_method in ADAPTIVE_METHODS:
            return {"max_num_steps": config.max_num_steps}
        return {} if config.step_size is None else {"step_size": config.step_size}

    def forward(
        self,
        hidden_states: torch.Tensor,
        layout: TokenLayout,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> torch.Tensor:
        final, evaluations, energy = self.integrate(hidden_states, layout, context)
        self.solver_statistics = (evaluations, energy)
        if output_attentions:  # F's attention at the end state, recorded from the token mixer
            dynamics = self.dynamics
            for module in dynamics.time_dependent:
                module.time = float(self.config.final_time)
            dynamics.attention(dynamics.attention_norm(final), layout, *context, output_attentions=True)
        return final

    def check_finite(self, hidden_states: torch.Tensor) -> None:
        """A non-finite state or weight makes the adaptive solver shrink its step to nothing ("underflow
        in dt"), which would read as stiffness: name the real cause before solving."""
        if not value_checks_enabled():
            return
        if not bool(torch.isfinite(hidden_states).all()):
            raise FloatingPointError(
                f"N-ODE block {self.layer_idx}: its input state contains NaN or infinity (not a stiff ODE): the inputs "
                "overflow, or an earlier part of the model has non-finite weights."
            )
        broken = [name for name, parameter in self.named_parameters() if not bool(torch.isfinite(parameter).all())]
        if broken:
            raise FloatingPointError(
                f"N-ODE block {self.layer_idx}: non-finite weights in {', '.join(broken[:5])} (not a stiff ODE): the "
                "checkpoint is damaged, or a training step wrote NaN/inf into it."
            )

    @torch.compiler.disable(reason="torchdiffeq's adaptive solver chooses its steps from the data")
    def integrate(
        self, hidden_states: torch.Tensor, layout: TokenLayout, context: tuple[torch.Tensor, ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Solve the block's ODE from ``hidden_states``: ``(X(T_F), NFE, kinetic energy per sequence)``.

        Under ``torch.compile`` this is the N-ODE Transformer's one graph break per block: the solver
        loop runs eagerly (its step-size control and step count depend on the values), the rest of
        the model is compiled.
        """
        config, dynamics = self.config, self.dynamics
        self.check_finite(hidden_states)
        batch, seq_len = hidden_states.shape[:2]
        dynamics.layout, dynamics.context = layout, context
        dynamics.evaluations = 0
        regularise = config.kinetic_regularization > 0
        # A half-precision model still integrates in float32: the adaptive step-size control compares
        # errors with rtol/atol (1e-5), far below float16/bfloat16 resolution.
        state = hidden_states.float() if hidden_states.dtype in (torch.float16, torch.bfloat16) else hidden_states
        if regularise:
            padding = layout.tensor
            counts = padding.sum(-1) if padding is not None else torch.full((batch,), seq_len)
            dynamics.token_counts = counts.to(state)
            state = (state, state.new_zeros(batch))
        times = torch.tensor([0.0, config.final_time], dtype=torch.float32, device=hidden_states.device)
        kwargs = {
            "rtol": config.rtol,
            "atol": config.atol,
            "method": config.ode_method,
            "options": self.solver_options(),
        }
        # Imported on the first solve, so that building or validating a config never imports torchdiffeq.
        # Unguarded on purpose: transformers' remote-code loader reads every import of a file it loads
        # (functions' too) and names torchdiffeq, with its pip command, when a Hub export lacks it.
        from torchdiffeq import odeint, odeint_adjoint

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
        final = (trajectory[0][-1] if regularise else trajectory[-1]).to(hidden_states.dtype)
        energy = trajectory[1][-1] if regularise else final.new_zeros(batch, dtype=trajectory.dtype)
        if not torch.isfinite(final).all():
            raise ODESolverError(f"N-ODE block {self.layer_idx}: the solution contains NaN or infinity.")
        evaluations = torch.tensor(float(dynamics.evaluations), device=hidden_states.device)
        return final, evaluations, energy
