"""Configuration of MGK-BERT (Nguyen et al. 2022, "Improving Transformers with Probabilistic
Attention Keys": Transformer-MGK and its linear form Transformer-MLK)."""

from __future__ import annotations

from typing import Any

from ..core.configuration_encoder import EncoderConfig, require_choice, require_positive_int

KEY_MODES = ("separate", "shifted")
MIXTURE_WEIGHT_MODES = ("learned", "soft_em", "hard")
ATTENTION_KINDS = ("gaussian", "linear")


class MgkBertConfig(EncoderConfig):
    r"""A BERT-style encoder whose attention keys are Gaussian mixtures (paper §2, eq. 5–8).

    Every key position j carries ``M = num_key_components`` keys ``k_j1 … k_jM``; a query attends
    to position j with weight ``∝ Σ_r π_r exp(-‖q_i − k_jr‖² / 2σ_r²)`` (eq. 7), normalised over j.
    The paper's comparisons use half the heads of the baseline at the same per-head width D: for
    a BERT with H heads of width D = hidden/H, use ``num_attention_heads=H/2, head_dim=D``.

    Args:
        num_key_components: M, keys per position (paper: 2).
        key_mode: ``"separate"`` — one key projection per component, ``k_jr = x_j W_Kr`` (option A,
            "MGK"); ``"shifted"`` — ``k_jr = x_j W_K + b_r`` (option B, "sMGK").
        key_shift_init_std: Standard deviation of the initial shifts ``b_r`` (paper: N(0, 1); the
            authors' code starts them smaller).
        variance_factors: Per-component factors c_r with ``σ_r² = c_r · √D`` (paper: [1, 3]; LRA
            code: [1, 1]; WikiText code: [1, 1/3]). One factor per component.
        mixture_weights: How the priors π_r are obtained (paper Table 5):
            ``"learned"`` — by SGD (default), one softmax-normalised π per head shared over
            positions; ``"soft_em"`` — the M-step of eq. (8), ``π_r = mean_{i,j} γ_ijr``, computed in
            each training forward (no gradient to π) and frozen in eval; ``"hard"`` — hard E-step,
            ``max_r`` instead of the π-weighted sum (the σ→0 limit; π is not used).
        attention_kind: ``"gaussian"`` (MGK, softmax over Gaussian-kernel scores) or ``"linear"``
            (MLK, §2.4: linear attention with φ = elu + 1 and a mixture of linear keys; needs
            ``mixture_weights="learned"``).
        **kwargs: The fields of ``EncoderConfig`` (``head_dim`` included).
    """

    model_type = "mgk_bert"

    def __init__(
        self,
        num_key_components: int = 2,
        key_mode: str = "separate",
        key_shift_init_std: float = 1.0,
        variance_factors: list[float] | None = None,
        mixture_weights: str = "learned",
        attention_kind: str = "gaussian",
        **kwargs: Any,
    ) -> None:
        self.num_key_components = num_key_components
        self.key_mode = key_mode
        self.key_shift_init_std = key_shift_init_std
        self.variance_factors = list(variance_factors) if variance_factors is not None else [1.0, 3.0]
        self.mixture_weights = mixture_weights
        self.attention_kind = attention_kind
        super().__init__(**kwargs)

    def validate(self) -> None:
        super().validate()
        require_positive_int(self, "num_key_components")
        require_choice(self, "key_mode", KEY_MODES)
        require_choice(self, "mixture_weights", MIXTURE_WEIGHT_MODES)
        require_choice(self, "attention_kind", ATTENTION_KINDS)
        if len(self.variance_factors) != self.num_key_components:
            raise ValueError(
                f"variance_factors has {len(self.variance_factors)} entries but num_key_components is "
                f"{self.num_key_components}; give one factor per component."
            )
        if not all(isinstance(c, (int, float)) and c > 0 for c in self.variance_factors):
            raise ValueError(f"variance_factors must be positive numbers, got {self.variance_factors!r}.")
        if not isinstance(self.key_shift_init_std, (int, float)) or self.key_shift_init_std < 0:
            raise ValueError(f"key_shift_init_std must be a non-negative number, got {self.key_shift_init_std!r}.")
        if self.attention_kind == "linear" and self.mixture_weights != "learned":
            raise ValueError(
                f"attention_kind='linear' (MLK) supports only mixture_weights='learned', got "
                f"{self.mixture_weights!r}: the soft/hard E-steps need every query-key pair, which linear "
                "attention never forms."
            )
