"""Configuration of the N-ODE Transformer (Baier-Reinio & De Sterck 2020, "N-ODE Transformer: A
Depth-Adaptive Variant of the Transformer Using Neural Ordinary Differential Equations")."""

from __future__ import annotations

from typing import Any

from ..core.configuration_encoder import EncoderConfig, require_choice, require_positive_int

ODE_FUNCTIONS = ("eq2", "eq3", "eq9")
ADAPTIVE_METHODS = ("dopri5", "dopri8", "bosh3", "fehlberg2", "adaptive_heun")
FIXED_STEP_METHODS = ("euler", "midpoint", "heun2", "heun3", "rk4", "explicit_adams", "implicit_adams")
BLOCK_TYPES = ("ode", "vanilla")


class NodeTransformerConfig(EncoderConfig):
    r"""An encoder of N = ``num_hidden_layers`` blocks, each the solution of ``X' = F(X, t)`` on
    ``[0, T_F]`` started from the previous block's end state (paper §3).

    Args:
        ode_function: F of the block: ``"eq2"`` ``FFN_t(MHSA_t(X))`` (the paper's final choice),
            ``"eq3"`` ``FFN_t(X + MHSA_t(X))`` (eq. 3 with α = 1; eq. 3 with α = 0 is eq. 2), or
            ``"eq9"`` ``MHSA_t(X) + FFN_t(X + MHSA_t(X))`` (§7), whose one Euler step of size 1 is a
            vanilla block, eq. (1).
        time_dependent_attention: Make the MHSA affine maps ``Ax + b + ct`` (eq. 5) too. Off by
            default: the paper finds time-independent MHSA best (§4). The FFN is always time-dependent.
        block_type: ``"ode"`` or ``"vanilla"`` — eq. (1) ``Y = X + MHSA(X), X' = Y + FFN(Y)`` with the
            same building blocks, for baselines such as the PARITY experiment.
        use_layer_norm: Pre-LayerNorm inside F (off, as in the paper).
        ode_method: torchdiffeq solver: adaptive ``dopri5`` (default, the paper's) / ``dopri8`` /
            ``bosh3`` / ``fehlberg2`` / ``adaptive_heun``, or fixed-step ``euler`` / ``midpoint`` /
            ``heun2`` / ``heun3`` / ``rk4`` / ``explicit_adams`` / ``implicit_adams``.
        rtol, atol: Tolerances of adaptive solvers (paper: 1e-5).
        final_time: T_F (paper: 1).
        step_size: Step of fixed-step methods (``None``: one step of size T_F).
        max_num_steps: Cap on solver steps per block; exceeding it (a stiff input, an exploding
            trajectory) raises ``ODESolverError`` instead of hanging.
        adjoint: Backpropagate with ``torchdiffeq.odeint_adjoint`` (O(1) memory, slower) instead of
            through the solver's operations (the paper's choice).
        kinetic_regularization: λ of eq. (6): ``λ/(2L) ∫ ‖X'(t)‖²_F dt`` per block and sequence (L =
            number of real tokens), integrated alongside the state and added to the loss; 0 disables.
        **kwargs: The fields of ``EncoderConfig``; ``intermediate_size`` defaults to ``hidden_size``
            (the paper's dimension-preserving FFN), dropout to 0 (the paper uses none).
    """

    model_type = "node_transformer"

    def __init__(
        self,
        ode_function: str = "eq2",
        time_dependent_attention: bool = False,
        block_type: str = "ode",
        use_layer_norm: bool = False,
        ode_method: str = "dopri5",
        rtol: float = 1e-5,
        atol: float = 1e-5,
        final_time: float = 1.0,
        step_size: float | None = None,
        max_num_steps: int = 1000,
        adjoint: bool = False,
        kinetic_regularization: float = 0.0,
        hidden_size: int = 256,
        intermediate_size: int | None = None,
        num_attention_heads: int = 4,
        num_hidden_layers: int = 2,
        hidden_dropout_prob: float = 0.0,
        attention_probs_dropout_prob: float = 0.0,
        **kwargs: Any,
    ) -> None:
        self.ode_function = ode_function
        self.time_dependent_attention = time_dependent_attention
        self.block_type = block_type
        self.use_layer_norm = use_layer_norm
        self.ode_method = ode_method
        self.rtol = rtol
        self.atol = atol
        self.final_time = final_time
        self.step_size = step_size
        self.max_num_steps = max_num_steps
        self.adjoint = adjoint
        self.kinetic_regularization = kinetic_regularization
        super().__init__(
            hidden_size=hidden_size,
            intermediate_size=hidden_size if intermediate_size is None else intermediate_size,
            num_attention_heads=num_attention_heads,
            num_hidden_layers=num_hidden_layers,
            hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            **kwargs,
        )

    @property
    def adaptive(self) -> bool:
        return self.ode_method in ADAPTIVE_METHODS

    def validate(self) -> None:
        super().validate()
        require_choice(self, "ode_function", ODE_FUNCTIONS)
        require_choice(self, "block_type", BLOCK_TYPES)
        require_choice(self, "ode_method", ADAPTIVE_METHODS + FIXED_STEP_METHODS)
        require_positive_int(self, "max_num_steps")
        for name in ("rtol", "atol", "final_time"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}.")
        if self.step_size is not None:
            if isinstance(self.step_size, bool) or not isinstance(self.step_size, (int, float)) or self.step_size <= 0:
                raise ValueError(f"step_size must be a positive number or None, got {self.step_size!r}.")
            if self.adaptive:
                raise ValueError(f"step_size is for fixed-step methods; {self.ode_method!r} chooses its own steps.")
            if self.final_time / self.step_size > self.max_num_steps:
                raise ValueError(
                    f"final_time / step_size = {self.final_time / self.step_size:.0f} steps exceeds "
                    f"max_num_steps={self.max_num_steps}."
                )
        reg = self.kinetic_regularization
        if isinstance(reg, bool) or not isinstance(reg, (int, float)) or reg < 0:
            raise ValueError(f"kinetic_regularization must be a non-negative number, got {reg!r}.")
