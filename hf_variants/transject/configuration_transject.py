"""Configuration of TransJect, the distance-preserving encoder ("Don't Bet on Sparsity: Designing
Brain-Inspired Distance-Preserving Encoder"; authors' code: victor7246/TransJect)."""

from __future__ import annotations

from typing import Any

from ..core.configuration_encoder import EncoderConfig, require_choice, require_positive_int

EIGENVALUE_MODES = ("approx", "exact", "random")
RESIDUAL_WEIGHTS = ("linear", "tanh")
EXPERT_WEIGHTS = ("constant", "input_dependent")
ENTROPIC_EVAL = ("expectation", "sample")
ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


class TransJectConfig(EncoderConfig):
    r"""An encoder of orthogonal attention experts with injective residuals (paper §3, eq. 3–7).

    Only these ``EncoderConfig`` fields are used: ``vocab_size``, ``hidden_size`` (d, even: token
    embeddings and positions get d/2 each), ``num_hidden_layers`` (L), ``max_position_embeddings``
    (longest accepted input; the sinusoidal code itself has no table), ``type_vocab_size`` (with
    ``use_token_type_embeddings``), ``hidden_dropout_prob`` (embedding dropout, default 0: the paper
    uses none), ``pad_token_id``, ``initializer_range``, ``layer_norm_eps``/``hidden_act`` (MLM head
    only), ``classifier_dropout``, ``tie_word_embeddings``. The encoder has no heads, no LayerNorm
    and no d_ff: ``num_attention_heads`` and ``intermediate_size`` are ignored.

    Args:
        num_experts: E, orthogonal attention experts per layer (paper: 4).
        eigenvalue_mode: How Σ, the eigenvalues of ``XᵀX`` of the initial embeddings, is obtained:
            ``"approx"`` (paper default: learned orthogonal eigenvectors Ũ, ``Σ = diag(ŨᵀXᵀXŨ)``, and
            the reconstruction loss ``‖XᵀX − ŨΣŨᵀ‖_F / ‖XᵀX‖_F`` added to the loss),
            ``"exact"`` (``torch.linalg.eigvalsh``; not in the paper) or ``"random"``
            (Random-TransJect: a learnable diagonal initialised at random, not redrawn per call as in
            the authors' code). Σ is standardised to ``max |λ| = 1``.
        reconstruction_loss_weight: Weight of the reconstruction loss (authors' code: 0.001).
        residual_weight: ``"linear"`` (paper eq. 3: step ``α_l / L`` with learnable α_l initialised at 0,
            ReZero) or ``"tanh"`` (authors' code: ``tanh(α_l) / L``, which keeps ``|step| < 1/L`` as
            Lemma 3 and Theorem 2 assume).
        expert_weights: ``"constant"`` (paper eq. 5: learned convex weights ``softmax(w)``) or
            ``"input_dependent"`` (authors' code: ``softmax_e(g · max_tokens X^(l,e))``, which breaks
            the Lipschitz argument).
        entropic: Entropic-TransJect (eq. 4): per hidden unit and sequence, the residual update is
            ``1.5x + r``, ``1.5x − r``, ``4r`` or ``x`` with probability ¼ each (expectation ``x + r``).
        entropic_eval: ``"expectation"`` (default: deterministic predictions, ``x + r``) or
            ``"sample"`` (authors' code: keeps sampling at evaluation).
        orthogonal_map: Map of ``torch.nn.utils.parametrizations.orthogonal``: ``"cayley"`` (default:
            ``Q = B (I + A)⁻¹(I − A)``, one d × d solve forward and backward) or ``"matrix_exp"``
            (torch's default, hence the authors' code: ``Q = B exp(A)``, whose backward is a 2d × 2d
            exponential whose degree grows with the weights: several times the cost, and the largest
            part of a TransJect step; ``scripts/benchmark.py`` measures both). Both give orthogonal
            matrices; the paper does not fix the parametrisation. ``model.set_orthogonal_map``
            switches a trained model exactly.
        use_token_type_embeddings: Add token-type embeddings to the token half of the input (our
            addition for sentence pairs; off by default, as in the paper).
        pooling: ``"mean"`` (default; the authors' classifiers mean-pool, and with tokens mixed only
            through Σ the first token alone says little about the sentence) or ``"first"``.
        **kwargs: The remaining ``EncoderConfig`` fields.
    """

    model_type = "transject"

    def __init__(
        self,
        num_experts: int = 4,
        eigenvalue_mode: str = "approx",
        reconstruction_loss_weight: float = 1e-3,
        residual_weight: str = "linear",
        expert_weights: str = "constant",
        entropic: bool = False,
        entropic_eval: str = "expectation",
        orthogonal_map: str = "cayley",
        use_token_type_embeddings: bool = False,
        pooling: str = "mean",
        hidden_size: int = 512,
        num_hidden_layers: int = 6,
        num_attention_heads: int = 1,
        intermediate_size: int = 512,
        hidden_dropout_prob: float = 0.0,
        attention_probs_dropout_prob: float = 0.0,
        **kwargs: Any,
    ) -> None:
        self.num_experts = num_experts
        self.eigenvalue_mode = eigenvalue_mode
        self.reconstruction_loss_weight = reconstruction_loss_weight
        self.residual_weight = residual_weight
        self.expert_weights = expert_weights
        self.entropic = entropic
        self.entropic_eval = entropic_eval
        self.orthogonal_map = orthogonal_map
        self.use_token_type_embeddings = use_token_type_embeddings
        super().__init__(
            hidden_size=hidden_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            intermediate_size=intermediate_size,
            hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            pooling=pooling,
            **kwargs,
        )

    @property
    def word_embedding_size(self) -> int:
        """Token embeddings take half of the hidden size; positions take the other half."""
        return self.hidden_size // 2

    def validate(self) -> None:
        super().validate()
        if self.hidden_size % 2:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be even: token embeddings and positions get half each."
            )
        require_positive_int(self, "num_experts")
        require_choice(self, "eigenvalue_mode", EIGENVALUE_MODES)
        require_choice(self, "residual_weight", RESIDUAL_WEIGHTS)
        require_choice(self, "expert_weights", EXPERT_WEIGHTS)
        require_choice(self, "entropic_eval", ENTROPIC_EVAL)
        require_choice(self, "orthogonal_map", ORTHOGONAL_MAPS)
        weight = self.reconstruction_loss_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ValueError(f"reconstruction_loss_weight must be a non-negative number, got {weight!r}.")
