"""Configuration of TransJect, the distance-preserving encoder of Sengupta, Akhtar and Chakraborty, "Manifold-Preserving
Transformers are Effective for Short-Long Range Encoding" (Findings of EMNLP 2023); equation numbers follow the
manuscript reviewed as "Don't Bet on Sparsity: Designing Brain-Inspired Distance-Preserving Encoder"; authors' code:
victor7246/TransJect."""

from __future__ import annotations

from typing import Any

from ..core.configuration_encoder import EncoderConfig
from ..core.validation import require_choice

#: ``embedding_init`` → how the token half of the injective embedding starts.
EMBEDDING_INITS = ("initializer_range", "standard_normal")


class TransJectConfig(EncoderConfig):
    r"""An encoder of orthogonal attention experts with injective residuals (paper §3, eq. 3–7).

    Its two ideas are its defaults: ``attention_type="orthogonal"`` (fields ``eigenvalue_mode``,
    ``reconstruction_loss_weight``, ``orthogonal_map``: see
    :class:`~hf_variants.core.mixers.orthogonal.configuration_orthogonal.OrthogonalAttentionSpec`) and
    ``layer_scheme="injective"`` (fields ``num_experts``, ``residual_weight``, ``expert_weights``,
    ``entropic``, ``entropic_eval``, ``orthogonal_map``: see
    :class:`~hf_variants.core.schemes.injective.configuration_injective.InjectiveSpec`). With them, only these
    ``EncoderConfig`` fields are used: ``vocab_size``, ``hidden_size`` (d, even: token embeddings and
    positions get d/2 each), ``num_hidden_layers`` (L), ``max_position_embeddings`` (longest accepted
    input; the sinusoidal code itself has no table), ``type_vocab_size`` (with
    ``use_token_type_embeddings``), ``hidden_dropout_prob`` (embedding dropout, default 0: the paper
    uses none), ``pad_token_id``, ``initializer_range``, ``layer_norm_eps``/``hidden_act`` (MLM head
    only), ``classifier_dropout``, ``tie_word_embeddings``: the encoder has no heads, no LayerNorm and
    no d_ff. Another ``attention_type`` or ``layer_scheme`` uses the other fields as BERT does.

    Args:
        attention_type: Token mixer (default ``"orthogonal"``).
        layer_scheme: Layer scheme (default ``"injective"``).
        use_token_type_embeddings: Add token-type embeddings to the token half of the input (our
            addition for sentence pairs; off by default, as in the paper).
        pooling: ``"mean"`` (default; the authors' classifiers mean-pool, and with tokens mixed only
            through Σ the first token alone says little about the sentence) or ``"first"``.
        embedding_init: How the token half of the injective embedding starts: ``"initializer_range"``
            (default, BERT's N(0, initializer_range²): with std 0.02 against the sinusoidal half's rms
            0.71, X⁽⁰⁾ and Σ start almost purely positional) or ``"standard_normal"`` (the authors'
            code: ``nn.Embedding``'s N(0, 1), padding row 0). The default is kept by measurement: on the
            classification grid (3 tasks, 3 seeds; docs/results.md) N(0, 1) scored 15.3 points lower on AG
            News and 9.3 on IMDb, +2.9 [−1.1, +6.8] on ListOps. Training only: a checkpoint's loaded
            embeddings are never re-initialised.
        **kwargs: The remaining ``EncoderConfig`` fields and those of the selected pair.
    """

    model_type = "transject"
    base_training_only_fields = EncoderConfig.base_training_only_fields | {"embedding_init"}

    def __init__(
        self,
        attention_type: str = "orthogonal",
        layer_scheme: str = "injective",
        use_token_type_embeddings: bool = False,
        pooling: str = "mean",
        hidden_size: int = 512,
        num_hidden_layers: int = 6,
        num_attention_heads: int = 1,
        intermediate_size: int = 512,
        hidden_dropout_prob: float = 0.0,
        attention_probs_dropout_prob: float = 0.0,
        embedding_init: str = "initializer_range",
        **kwargs: Any,
    ) -> None:
        self.use_token_type_embeddings = use_token_type_embeddings
        self.embedding_init = embedding_init
        super().__init__(
            attention_type=attention_type,
            layer_scheme=layer_scheme,
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
        require_choice(self, "embedding_init", EMBEDDING_INITS)
        if self.hidden_size % 2:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be even: token embeddings and positions get half each."
            )
        if self.position_embedding_type != "absolute":
            raise ValueError(
                f"position_embedding_type={self.position_embedding_type!r}: TransJect's embeddings carry its own "
                "positions (a sinusoidal half of every embedding, §3.4); use 'absolute'."
            )
