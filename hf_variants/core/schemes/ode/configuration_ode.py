"""Spec of ``layer_scheme="ode"``: the N-ODE Transformer's block (Baier-Reinio & De Sterck 2020, §3), each
block an ODE ``X'(t) = F(X(t), t)`` solved adaptively, implemented by
:class:`~hf_variants.core.schemes.ode.modeling_ode.NodeTransformerBlock` (which imports ``torchdiffeq``;
this spec does not)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ...ideas import FeedForwardSchemeSpec, MatchedSize
from ...validation import require_bool, require_choice, require_number, require_positive_int

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig

ODE_FUNCTIONS = ("eq2", "eq3", "eq9")
ADAPTIVE_METHODS = ("dopri5", "dopri8", "bosh3", "fehlberg2", "adaptive_heun")
FIXED_STEP_METHODS = ("euler", "midpoint", "heun2", "heun3", "rk4", "explicit_adams", "implicit_adams")
#: Upper bound of ``max_num_steps``: beyond it a stiff input would run for hours instead of failing.
MAX_NUM_STEPS_LIMIT = 100_000


class OdeSpec(FeedForwardSchemeSpec):
    """The N-ODE block, ``X(T_F)`` from ``X(0) = hidden_states`` by an ODE solver: its config fields, their
    validation, its matched control (the vanilla eq. (1) block) and its matched size.

    Config fields (on every config whose ``layer_scheme`` is ``"ode"``):
        ode_function: F of the block: ``"eq2"`` ``FFN_t(MHSA_t(X))`` (the paper's final choice),
            ``"eq3"`` ``FFN_t(X + MHSA_t(X))`` (eq. 3 with α = 1; eq. 3 with α = 0 is eq. 2), or
            ``"eq9"`` ``MHSA_t(X) + FFN_t(X + MHSA_t(X))`` (§7), whose one Euler step of size 1 is a
            vanilla block, eq. (1).
        time_dependent_attention: Make the MHSA affine maps ``Ax + b + ct`` (eq. 5) too (softmax
            attention only). Off by default: the paper finds time-independent MHSA best (§4). The FFN
            is always time-dependent.
        use_layer_norm: Pre-LayerNorm inside F (off, as in the paper).
        ode_method: torchdiffeq solver: adaptive ``dopri5`` (default, the paper's) / ``dopri8`` /
            ``bosh3`` / ``fehlberg2`` / ``adaptive_heun``, or fixed-step ``euler`` / ``midpoint`` /
            ``heun2`` / ``heun3`` / ``rk4`` / ``explicit_adams`` / ``implicit_adams``.
        rtol, atol: Tolerances of adaptive solvers (paper: 1e-5).
        final_time: T_F (paper: 1).
        step_size: Step of fixed-step methods (``None``: one step of size T_F).
        max_num_steps: Cap on solver steps per block (at most 100,000); exceeding it, or
            ``EVALUATIONS_PER_STEP`` function evaluations per allowed step (a stiff input, an exploding
            trajectory), raises ``ODESolverError`` instead of hanging.
        adjoint: Backpropagate with ``torchdiffeq.odeint_adjoint`` (O(1) memory, slower) instead of
            through the solver's operations (the paper's choice).
        kinetic_regularization: λ of eq. (6): ``λ/(2L) ∫ ‖X'(t)‖²_F dt`` per block and sequence (L =
            number of real tokens), integrated alongside the state and added to the loss; 0 disables.
    """

    calls_mixer_once = False  # the solver evaluates F (and its token mixer) a data-dependent number of times
    mixer_calls = "an ODE solver: once per function evaluation, rejected steps included"
    #: The paper's own baseline: vanilla eq. (1) blocks of the same pieces (``layer_scheme="vanilla"``).
    control_overrides: ClassVar[dict[str, Any]] = {"layer_scheme": "vanilla"}
    #: hf-variants ≤ 0.2 chose the baseline inside this scheme with ``block_type``; configs saved then load.
    legacy_switches: ClassVar[dict[str, dict[Any, dict[str, Any]]]] = {
        "block_type": {"ode": {"layer_scheme": "ode"}, "vanilla": {"layer_scheme": "vanilla"}}
    }
    config_defaults: ClassVar[dict[str, Any]] = {
        "ode_function": "eq2",
        "time_dependent_attention": False,
        "use_layer_norm": False,
        "ode_method": "dopri5",
        "rtol": 1e-5,
        "atol": 1e-5,
        "final_time": 1.0,
        "step_size": None,
        "max_num_steps": 1000,
        "adjoint": False,
        "kinetic_regularization": 0.0,
    }
    # the solver's accuracy and memory, and the training-only kinetic energy term (eq. 6)
    training_only_fields = frozenset({"rtol", "atol", "max_num_steps", "adjoint", "kinetic_regularization"})

    @classmethod
    def static_graph_error(cls, config: EncoderConfig) -> str | None:
        return ("each block is an ODE solved by torchdiffeq, which checks its time grid by value and, with an "
                "adaptive method, chooses its number of steps from the input: torch.export cannot trace it into one "
                "static graph; serve it with PyTorch")  # fmt: skip

    @classmethod
    def validate_config(cls, config: EncoderConfig) -> None:
        require_choice(config, "ode_function", ODE_FUNCTIONS)
        require_choice(config, "ode_method", ADAPTIVE_METHODS + FIXED_STEP_METHODS)
        require_positive_int(config, "max_num_steps", maximum=MAX_NUM_STEPS_LIMIT)
        for name in ("rtol", "atol", "final_time"):
            require_number(config, name)
        for name in ("time_dependent_attention", "use_layer_norm", "adjoint"):
            require_bool(config, name)
        if config.step_size is not None:
            require_number(config, "step_size")
            if config.ode_method in ADAPTIVE_METHODS:
                raise ValueError(f"step_size is for fixed-step methods; {config.ode_method!r} chooses its own steps.")
            if config.final_time / config.step_size > config.max_num_steps:
                raise ValueError(
                    f"final_time / step_size = {config.final_time / config.step_size:.0f} steps exceeds "
                    f"max_num_steps={config.max_num_steps}."
                )
        require_number(config, "kinetic_regularization", strict=False)
        if config.time_dependent_attention and config.attention_type != "softmax":
            raise ValueError(
                f"time_dependent_attention=True needs attention_type='softmax' (got {config.attention_type!r}): "
                "the time-dependent maps Ax + b + ct (eq. 5) replace the four projections of softmax attention."
            )

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        """The FFN of the dynamics at the shared width, the solver at the comparison's tolerance and step
        cap (a run whose dynamics grow stiff fails fast, and is recorded as such)."""
        fields = super().matched_size_fields(size)
        fields.update(rtol=size.solver_tolerance, atol=size.solver_tolerance)
        if size.max_solver_steps is not None:
            fields["max_num_steps"] = size.max_solver_steps
        return fields
