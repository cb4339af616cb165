"""Spec of ``layer_scheme="injective"``: TransJect's injective residuals around a mixture of attention
experts, then an orthogonal residual FFN (paper §3, eq. 3–6), implemented by
:class:`~hf_variants.core.schemes.injective.modeling_injective.InjectiveLayer`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ...configuration_orthogonal_weights import OrthogonalWeightsSpec, validate_orthogonal_map
from ...ideas import LayerSchemeSpec, MatchedSize
from ...validation import require_bool, require_choice, require_positive_int

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig

#: ``residual_weight`` values: the map from the learnable a_l to α_l (``"linear"``: α_l = a_l).
RESIDUAL_WEIGHT_NAMES = ("linear", "tanh", "sigmoid")
EXPERT_WEIGHTS = ("constant", "input_dependent")
ENTROPIC_EVAL = ("expectation", "sample")


class InjectiveSpec(OrthogonalWeightsSpec, LayerSchemeSpec):
    """Mixture of attention experts with an injective residual (eq. 3–5), then the orthogonal
    residual FFN (eq. 6); one learnable step ``α_l`` shared by both residuals.

    Config fields (on every config whose ``layer_scheme`` is ``"injective"``):
        num_experts: E, attention experts per layer (paper: 4).
        residual_weight: ``"tanh"`` (default; authors' code: step ``tanh(a_l) / L`` with learnable
            a_l initialised at 0, ReZero) bounds the residual weight α_l = tanh(a_l) inside (−1, 1), so
            ``|α_l / L| < 1/L`` holds throughout training as Lemma 3 and Theorem 2 need (eq. 3 states
            α_l ∈ (0, 1); the proofs use only |α_l| < 1, and ReZero's α_l = 0 start is that interval's
            edge). ``"sigmoid"`` (eq. 3's α_l ∈ (0, 1) as stated: ``α_l = sigmoid(a_l)``, a_l at 0, so
            every layer starts at α_l = 0.5, the start of the authors' commented-out
            ``relu(sigmoid(resweight))/N``) gives the layers a step from the first update: at ReZero's
            α_l = 0 the gradients of U, V, W are proportional to α_l, which then random-walks near 0
            (issue 29). The default stays ``"tanh"`` by measurement: on the classification grid (AG News,
            ListOps, IMDb, 3 seeds; docs/results.md) ``"sigmoid"`` scored below it on every task, though its
            layers carry weight. ``"linear"`` (eq. 3 read literally, and v0.1.0's default: step ``α_l / L``
            with α_l unbounded) lets training leave the range in which the theorem holds.
        expert_weights: ``"constant"`` (paper eq. 5: learned convex weights ``softmax(w)``) or
            ``"input_dependent"`` (authors' code: ``softmax_e(g · max_tokens X^(l,e))``, which breaks
            the Lipschitz argument).
        entropic: Entropic-TransJect (eq. 4): per hidden unit and sequence, the residual update is
            ``1.5x + r``, ``1.5x − r``, ``4r`` or ``x`` with probability ¼ each (expectation ``x + r``).
        entropic_eval: ``"expectation"`` (default: deterministic predictions, ``x + r``) or
            ``"sample"`` (authors' code: keeps sampling at evaluation).
        orthogonal_map: Map of the orthogonal FFN weights (see ``OrthogonalAttention``).
    """

    control_overrides: ClassVar[dict[str, Any]] = {"layer_scheme": "lie_trotter"}
    config_defaults: ClassVar[dict[str, Any]] = {
        "num_experts": 4,
        "residual_weight": "tanh",
        "expert_weights": "constant",
        "entropic": False,
        "entropic_eval": "expectation",
        "orthogonal_map": "cayley",
    }
    has_layer_norm = False
    has_attention_probabilities = False  # E experts are mixed after a nonlinearity: no single map
    lora_target_modules = ("ffn_in", "ffn_out")  # orthogonal: an adapter makes them non-orthogonal

    @classmethod
    def validate_config(cls, config: EncoderConfig) -> None:
        require_positive_int(config, "num_experts")
        require_choice(config, "residual_weight", RESIDUAL_WEIGHT_NAMES)
        require_choice(config, "expert_weights", EXPERT_WEIGHTS)
        require_bool(config, "entropic")
        require_choice(config, "entropic_eval", ENTROPIC_EVAL)
        validate_orthogonal_map(config)

    @classmethod
    def document_packing_error(cls, config: EncoderConfig) -> str | None:
        if config.expert_weights == "input_dependent":
            return (
                "expert_weights='input_dependent' max-pools each expert's output over the whole row, so one "
                "document's tokens would weigh another's experts; use 'constant' or one document per row."
            )
        if config.entropic:
            return (
                "entropic=True draws one residual update per hidden unit and row, shared by every document of a "
                "packed row; use one document per row."
            )
        return None

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        """Four experts; no ``intermediate_size``: the orthogonal FFN is ``hidden_size`` wide."""
        return {"num_experts": 4}
