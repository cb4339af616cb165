"""Spec of ``attention_type="orthogonal"``: TransJect's orthogonal attention ``A(X) = X U Σ V`` (paper
§3.1, Theorem 1), implemented by :class:`~hf_variants.core.mixers.orthogonal.modeling_orthogonal.OrthogonalAttention`;
its orthogonal weights are the core's shared building block
(:mod:`hf_variants.core.configuration_orthogonal_weights`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ...configuration_orthogonal_weights import OrthogonalWeightsSpec, validate_orthogonal_map
from ...ideas import MatchedSize
from ...validation import require_choice, require_number

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig

EIGENVALUE_MODES = ("approx", "exact", "random")


class OrthogonalAttentionSpec(OrthogonalWeightsSpec):
    """One orthogonal attention of Theorem 1: ``A(X) = X U Σ V`` (rows of X are tokens).

    Config fields (on every config whose ``attention_type`` is ``"orthogonal"``):
        eigenvalue_mode: How Σ is obtained: ``"approx"`` (paper default: learned orthogonal
            eigenvectors Ũ, ``Σ = diag(ŨᵀXᵀXŨ)``, and the reconstruction loss added to the loss),
            ``"exact"`` (``torch.linalg.eigvalsh``; not in the paper) or ``"random"``
            (Random-TransJect: a learnable diagonal initialised at random, not redrawn per call as in
            the authors' code).
        reconstruction_loss_weight: Weight of the reconstruction loss (authors' code: 0.001).
        orthogonal_map: Map of ``torch.nn.utils.parametrizations.orthogonal``: ``"cayley"`` (default,
            one d × d solve forward and backward), ``"matrix_exp"`` (torch's default and the authors'
            code; several times the cost) or ``"householder"``. A parametrisation field:
            ``model.reparametrize(orthogonal_map=...)``, or loading with another map, switches a trained
            model exactly.

    Attention-free in transformers' sense: ``output_attentions=True`` gives ``None`` for it.
    """

    control_overrides: ClassVar[dict[str, Any]] = {"attention_type": "softmax"}
    config_defaults: ClassVar[dict[str, Any]] = {
        "eigenvalue_mode": "approx",
        "reconstruction_loss_weight": 1e-3,
        "orthogonal_map": "cayley",
    }
    has_attention_probabilities = False
    lora_target_modules = ("U", "V")  # orthogonal: an adapter makes them non-orthogonal
    training_only_fields = frozenset({"reconstruction_loss_weight"})  # a term of the loss, not of the function

    @classmethod
    def validate_config(cls, config: EncoderConfig) -> None:
        require_choice(config, "eigenvalue_mode", EIGENVALUE_MODES)
        validate_orthogonal_map(config)
        require_number(config, "reconstruction_loss_weight", strict=False)

    @classmethod
    def rotary_positions_error(cls, config: EncoderConfig) -> str | None:
        return (
            "TransJect's orthogonal attention A(X) = X U Σ V has no query–key product to rotate; its positions are "
            "the embeddings' (the transject model's sinusoidal half, §3.4)."
        )

    @classmethod
    def document_packing_error(cls, config: EncoderConfig) -> str | None:
        return (
            "TransJect's orthogonal attention mixes tokens only through Σ, the spectrum of the whole row's Gram "
            "matrix XᵀX, so every document of a packed row would change the others'; use one document per row."
        )

    @classmethod
    def matched_size_fields(cls, size: MatchedSize) -> dict[str, Any]:
        """One full-width map (U Σ Vᵀ has no heads), whatever the comparison's head width."""
        return {"num_attention_heads": 1}
