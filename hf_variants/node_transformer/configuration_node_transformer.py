"""Configuration of the N-ODE Transformer (Baier-Reinio & De Sterck 2020, "N-ODE Transformer: A
Depth-Adaptive Variant of the Transformer Using Neural Ordinary Differential Equations")."""

from __future__ import annotations

from typing import Any

from ..core.configuration_encoder import EncoderConfig


class NodeTransformerConfig(EncoderConfig):
    r"""An encoder of N = ``num_hidden_layers`` blocks, each the solution of ``X' = F(X, t)`` on
    ``[0, T_F]`` started from the previous block's end state (paper §3).

    The block's fields (``ode_function``, ``time_dependent_attention``, ``use_layer_norm``,
    ``ode_method``, ``rtol``, ``atol``, ``final_time``, ``step_size``, ``max_num_steps``, ``adjoint``,
    ``kinetic_regularization``) are documented on
    :class:`~hf_variants.core.schemes.ode.configuration_ode.OdeSpec`; any variant with
    ``layer_scheme="ode"`` has them.

    Args:
        attention_type: Token mixer inside F (default ``"softmax"``, the paper's MHSA).
        layer_scheme: Layer scheme (default ``"ode"``; ``"vanilla"`` gives the paper's eq. (1) blocks, the
            matched control; ``"lie_trotter"`` BERT's layer). Configs of hf-variants ≤ 0.2 chose eq. (1)
            with ``block_type="vanilla"``; they load as ``layer_scheme="vanilla"``.
        **kwargs: The fields of ``EncoderConfig`` and of the selected pair; ``intermediate_size``
            defaults to ``hidden_size`` (the paper's dimension-preserving FFN), dropout to 0 (the
            paper uses none).
        hidden_act: Activation of the FFN's hidden layer (default ``"relu"``: the paper's FFN, §3;
            v0.1.0 defaulted to GELU, and checkpoints saved then keep it).
    """

    model_type = "node_transformer"

    def __init__(
        self,
        attention_type: str = "softmax",
        layer_scheme: str = "ode",
        hidden_size: int = 256,
        intermediate_size: int | None = None,
        num_attention_heads: int = 4,
        num_hidden_layers: int = 2,
        hidden_dropout_prob: float = 0.0,
        attention_probs_dropout_prob: float = 0.0,
        hidden_act: str = "relu",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            hidden_act=hidden_act,
            attention_type=attention_type,
            layer_scheme=layer_scheme,
            hidden_size=hidden_size,
            intermediate_size=hidden_size if intermediate_size is None else intermediate_size,
            num_attention_heads=num_attention_heads,
            num_hidden_layers=num_hidden_layers,
            hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            **kwargs,
        )
