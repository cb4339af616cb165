"""Spec of ``attention_type="mgk"``: attention keys that are mixtures of Gaussians (Transformer-MGK,
Nguyen et al. 2022, eq. 7), implemented by
:class:`~hf_variants.core.mixers.mgk.modeling_mgk.MixtureOfKeysAttention`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ...ideas import ConfigurableIdea, MatchedSize
from ...validation import require_bool, require_choice, require_number, require_positive_int

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig

KEY_MODES = ("separate", "shifted")
MIXTURE_WEIGHT_MODES = ("learned", "soft_em", "hard")


class MixtureOfKeysSpec(ConfigurableIdea):
    r"""M keys per position, a query attending to position j with weight ``∝ Σ_r π_r exp(-‖q_i − k_jr‖² /
    2σ_r²)`` (eq. 7); the same ``query``/``value``/``output`` projections as softmax attention.

    Config fields (on every config whose ``attention_type`` is ``"mgk"`` or ``"mlk"``):
        num_key_components: M, keys per position (paper: 2).
        key_mode: ``"separate"`` — one key projection per component, ``k_jr = x_j W_Kr`` (option A,
            "MGK"); ``"shifted"`` — ``k_jr = x_j W_K + b_r`` (option B, "sMGK").
        key_bias: Whether the key projections carry a bias. ``False`` (default): the paper's keys
            ``x_j W_Krᵀ`` (eq. 5-7; appendix B's parameter counts have no biases); ``True``: an
            ``nn.Linear`` bias per key, as the authors' code and hf-variants ≤ 0.2 (a config saved
            without this field loads with ``True``). With ``"shifted"`` keys a bias only duplicates b_r.
        key_shift_init_std: Standard deviation of the initial shifts ``b_r`` (paper: N(0, 1); the
            authors' code starts them smaller).
        variance_factors: Per-component factors c_r with ``σ_r² = c_r · √D``; one factor per component,
            MGK only. Default ``[1, 1]``: §2.3 and appendix A.1 (the setting of every reported
            experiment) and the LRA code. ``[1, 3]`` is the §3 ablation; ``[1, 1/3]`` the WikiText
            code. The kernel has no Gaussian normaliser, so unequal variances bias both E-steps
            toward the wide component (the MGK-BERT model card gives the measured share).
        mixture_weights: How the priors π_r are obtained (paper Table 5):
            ``"learned"`` — by SGD (default), one softmax-normalised π per head shared over
            positions; ``"soft_em"`` — the M-step of eq. (8), ``π_r = mean_{i,j} γ_ijr``, computed in
            each training forward (no gradient to π) and frozen in eval; ``"hard"`` — hard E-step,
            ``max_r`` instead of the π-weighted sum (the σ→0 limit; π is not used). MLK
            (``attention_type="mlk"``, §2.4: linear attention with φ = elu + 1) needs ``"learned"``.
    """

    lora_target_modules = ("query", "key", "value", "output")  # softmax attention's four projections
    control_overrides: ClassVar[dict[str, Any]] = {"attention_type": "softmax"}
    config_defaults: ClassVar[dict[str, Any]] = {
        "num_key_components": 2,
        "key_mode": "separate",
        "key_bias": False,
        "key_shift_init_std": 1.0,
        "variance_factors": [1.0, 1.0],
        "mixture_weights": "learned",
    }
    training_only_fields = frozenset({"key_shift_init_std"})  # the initialisation of new shifts only
    legacy_values: ClassVar[dict[str, Any]] = {"key_bias": True}  # hf-variants ≤ 0.2 keys had biases

    @classmethod
    def validate_config(cls, config: EncoderConfig) -> None:
        require_positive_int(config, "num_key_components")
        require_choice(config, "key_mode", KEY_MODES)
        require_bool(config, "key_bias")
        require_choice(config, "mixture_weights", MIXTURE_WEIGHT_MODES)
        factors = config.variance_factors
        if not isinstance(factors, (list, tuple)) or len(factors) != config.num_key_components:
            count = len(factors) if isinstance(factors, (list, tuple)) else factors
            raise ValueError(
                f"variance_factors has {count!r} entries but num_key_components is {config.num_key_components}; "
                "give one factor per component."
            )
        if not all(isinstance(c, (int, float)) and not isinstance(c, bool) and c > 0 for c in config.variance_factors):
            raise ValueError(f"variance_factors must be positive numbers, got {config.variance_factors!r}.")
        require_number(config, "key_shift_init_std", strict=False)

    @classmethod
    def single_call_requirement(cls, config: EncoderConfig) -> tuple[str, str] | None:
        if config.mixture_weights != "soft_em":
            return None
        return "mixture_weights='soft_em'", (
            "the soft E-step updates π in every forward of the attention, so π would depend on how many times a "
            "layer calls it. Use 'learned' or 'hard'."
        )

    @classmethod
    def gradient_checkpointing_error(cls, config: EncoderConfig) -> str | None:
        if config.mixture_weights == "soft_em":
            return (
                "mixture_weights='soft_em' updates π inside the forward pass; gradient checkpointing would "
                "re-run that update during backward and use a different π. Use 'learned' or 'hard', or train "
                "without gradient checkpointing."
            )
        return None

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        """Half the softmax heads at the same head width (the paper's comparison: MGK with M/2 heads of
        two keys each against softmax with M heads)."""
        return {"num_attention_heads": max(size.num_attention_heads // 2, 1), "head_dim": size.head_size}


class LinearMixtureSpec(MixtureOfKeysSpec):
    """MGK's fields (``num_key_components``, ``key_mode``, ``key_bias``, …), with the E-step fixed to
    learned priors: the soft and hard E-steps need every query-key pair, which linear attention never
    forms."""

    @classmethod
    def validate_config(cls, config: EncoderConfig) -> None:
        super().validate_config(config)
        if config.mixture_weights != "learned":
            raise ValueError(
                f"attention_type='mlk' supports only mixture_weights='learned', got {config.mixture_weights!r}: "
                "the soft/hard E-steps need every query-key pair, which linear attention never forms."
            )
