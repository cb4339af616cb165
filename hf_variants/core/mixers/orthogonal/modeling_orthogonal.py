"""Token mixer ``attention_type="orthogonal"``: TransJect's orthogonal attention ``A(X) = X U Σ V``
(paper §3.1, Theorem 1), introduced by TransJect and usable by every variant.

* Σ: the eigenvalues of ``X⁽⁰⁾ᵀX⁽⁰⁾`` of the sequence's initial embeddings (padding excluded),
  computed once per forward by :class:`EigenvalueEstimator` (the backbone's ``eigenvalues`` module),
  standardised to ``max |λ| = 1`` (modes ``approx``/``exact``/``random``).
* ``A(X) = X U Σ V`` with orthogonal U, V: each token's row is rotated, scaled by Σ (|λ| ≤ 1) and
  rotated again, so ``‖A(x) − A(y)‖ ≤ ‖x − y‖``. Tokens interact only through Σ.

Orthogonal matrices come from ``torch.nn.utils.parametrizations.orthogonal`` (``config.orthogonal_map``,
Cayley by default) and are computed once per forward pass, all of the model's in one batched call
(:func:`~hf_variants.core.modeling_orthogonal_weights.held_orthogonal_weights`). Outside
``layer_scheme="injective"`` the attention is still 1-Lipschitz, but the layer around it is not bounded by
Theorem 2 (see the TransJect model card).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers import initialization as init

from ...encoder_layers import LayerInputs, TokenMixer
from ...inputs import full_precision
from ...modeling_orthogonal_weights import HoldsOrthogonalLinears, orthogonal_linear, orthogonal_matrix

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig
    from ...inputs import TokenLayout


def _standardise(eigenvalues: torch.Tensor) -> torch.Tensor:
    scale = eigenvalues.abs().amax(dim=-1, keepdim=True).clamp_min(torch.finfo(eigenvalues.dtype).tiny)
    return eigenvalues / scale


class EigenvalueEstimator(nn.Module):
    """Σ of Theorem 1: eigenvalues of ``XᵀX`` (padding rows excluded) of the initial embeddings.

    ``approx``: learned orthogonal Ũ with ``Σ = diag(ŨᵀGŨ)`` — the minimiser of ``‖G − ŨΣŨᵀ‖`` over
    diagonal Σ for that Ũ — and the relative reconstruction error ``‖G − ŨΣŨᵀ‖_F / ‖G‖_F``;
    ``exact``: ``eigvalsh(G)`` in float64, in descending order; ``random``: a learnable diagonal, fixed per model.
    Every mode standardises Σ to ``max |λ| = 1``. ``forward`` returns ``(Σ (B, d), reconstruction
    error or None)``; :meth:`layer_inputs` packs it for the layers.
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.mode = config.eigenvalue_mode
        self.loss_weight = config.reconstruction_loss_weight
        size = config.hidden_size
        self.eigenvectors = orthogonal_matrix(size, config.orthogonal_map) if self.mode == "approx" else None
        self.random_eigenvalues = nn.Parameter(torch.empty(size)) if self.mode == "random" else None

    def init_extra_parameters(self, config: EncoderConfig) -> None:
        if self.random_eigenvalues is not None:
            init.uniform_(self.random_eigenvalues, -1.0, 1.0)

    def forward(
        self, embeddings: torch.Tensor, padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.mode == "random":
            eigenvalues = self.random_eigenvalues.expand(embeddings.shape[0], -1)
            return _standardise(eigenvalues), None
        with full_precision(embeddings.device):
            return self.spectrum(embeddings.float(), padding_mask, embeddings.dtype)

    def spectrum(
        self, x: torch.Tensor, padding_mask: torch.Tensor | None, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The standardised eigenvalues of the Gram matrix of ``x`` (float32), and the estimate's error."""
        if padding_mask is not None:
            x = x * padding_mask[..., None]
        gram = x.transpose(1, 2) @ x  # (B, d, d)
        if self.mode == "exact":
            # float64: float32's eigvalsh can fail to converge on ill-conditioned Gram matrices. A Gram matrix
            # that overflowed (inputs too large for float32) gets NaN eigenvalues instead of a LAPACK error, so
            # the model's output is NaN and the usual non-finite checks name the cause.
            finite = torch.isfinite(gram).all(dim=(-2, -1), keepdim=True)
            eigenvalues = torch.linalg.eigvalsh(torch.where(finite, gram, 0.0).double()).flip(-1)
            eigenvalues = torch.where(finite[..., 0], eigenvalues, torch.nan)
            return _standardise(eigenvalues).to(dtype), None
        vectors = self.eigenvectors.matrix()  # float32; columns are the eigenvector estimates
        diagonal = torch.einsum("di,bde,ei->bi", vectors, gram, vectors)
        reconstruction = vectors @ torch.diag_embed(diagonal) @ vectors.T
        error = torch.linalg.matrix_norm(gram - reconstruction) / torch.linalg.matrix_norm(gram).clamp_min(1e-12)
        return _standardise(diagonal).to(dtype), error.mean()

    def layer_inputs(self, embeddings: torch.Tensor, padding_mask: torch.Tensor | None) -> LayerInputs:
        """``((Σ,), weighted reconstruction loss or None, diagnostics)`` for the backbone."""
        eigenvalues, reconstruction = self(embeddings, padding_mask)
        if reconstruction is None:
            return (eigenvalues,), None, {"eigenvalues": eigenvalues.detach()}
        diagnostics = {"eigenvalues": eigenvalues.detach(), "reconstruction_loss": reconstruction.detach()}
        return (eigenvalues,), self.loss_weight * reconstruction, diagnostics


class OrthogonalAttention(TokenMixer, HoldsOrthogonalLinears):
    """One orthogonal attention of Theorem 1: ``A(X) = X U Σ V`` (rows of X are tokens); its config fields
    are documented on :class:`.configuration_orthogonal.OrthogonalAttentionSpec`.

    Attention-free in transformers' sense: ``output_attentions=True`` gives ``None`` for it.
    """

    context_module = ("eigenvalues", EigenvalueEstimator)

    def __init__(self, config: EncoderConfig, layer_idx: int | None = None) -> None:
        super().__init__()
        self.U = orthogonal_linear(config.hidden_size, False, config.orthogonal_map)
        self.V = orthogonal_linear(config.hidden_size, False, config.orthogonal_map)

    def forward(
        self,
        hidden_states: torch.Tensor,
        padding_mask: TokenLayout,
        eigenvalues: torch.Tensor,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, None]:
        # nn.Linear computes x Wᵀ; Wᵀ is orthogonal whenever W is, so U := Wᵀ.
        return self.V(self.U(hidden_states) * eigenvalues[:, None, :]), None
