"""TransJect: an encoder whose layers are injective and Lipschitz, so distances between token
representations are preserved within a bound (paper §3, Theorems 1–2).

* Embeddings: ``X⁽⁰⁾ = concat(Emb(x), PE)``, d/2 each (§3.4), so no two tokens share an embedding.
* Σ: the eigenvalues of ``X⁽⁰⁾ᵀX⁽⁰⁾`` of the sequence (padding excluded), computed once per forward,
  standardised to ``max |λ| = 1`` (§3.1; modes ``approx``/``exact``/``random``).
* Orthogonal attention (Theorem 1): ``A_e(X) = X U_e Σ V_e`` with orthogonal U_e, V_e: each token's
  row is rotated, scaled by Σ (|λ| ≤ 1) and rotated again, so ``‖A_e(x) − A_e(y)‖ ≤ ‖x − y‖``.
* Injective residual (eq. 3) and mixture of E experts (eq. 5):
  ``X ← Σ_e λ_e (X + s·ELU(A_e(X))) = X + s·Σ_e λ_e ELU(A_e(X))`` with ``s = α_l / L``.
* Orthogonal residual FFN (eq. 6): ``X ← X + s·ELU(ELU(X W1 + b1) W2 + b2)``, W1, W2 orthogonal.
* Entropic-TransJect (eq. 4): the residual update is randomised per hidden unit; its expectation
  ``X + r`` is used at evaluation.

Each layer is therefore ``(1 + |s|)²``-Lipschitz and ``(1 − |s|)²``-co-Lipschitz; with ``|s| < 1/L``
the L-layer encoder stays within ``[(1 − 1/L)^{2L}, e²]`` (Theorem 2). Orthogonal matrices come from
``torch.nn.utils.parametrizations.orthogonal`` (Cayley map by default, ``config.orthogonal_map``) and
are computed once per forward pass (``parametrize.cached()``).
"""

from __future__ import annotations

import copy
import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer

from ..core.inputs import embedding_ids
from ..core.modeling_encoder import (
    EncoderForMaskedLM,
    EncoderForMultipleChoice,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    EncoderModel,
    EncoderPreTrainedModel,
    LayerInputs,
)
from .configuration_transject import ORTHOGONAL_MAPS, TransJectConfig

HUB_KWARGS = ("cache_dir", "force_download", "proxies", "token", "local_files_only", "revision", "subfolder")


def sinusoidal_positions(position_ids: torch.Tensor, width: int, dtype: torch.dtype) -> torch.Tensor:
    """Vaswani et al.'s code ``PE[p, 2i] = sin(p / 10000^{2i/w})``, ``PE[p, 2i+1] = cos(…)``, computed
    on the fly (nothing stored that could come back stale after loading)."""
    frequencies = torch.exp(
        torch.arange(0, width, 2, device=position_ids.device, dtype=torch.float32) * (-math.log(10000.0) / width)
    )
    angles = position_ids.float()[..., None] * frequencies
    code = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)[..., :width]
    return code.to(dtype)


def orthogonal_linear(size: int, bias: bool, orthogonal_map: str) -> nn.Linear:
    """A ``size × size`` linear map whose weight is constrained to be orthogonal.

    Built on the CPU even inside ``from_pretrained``'s meta-device context: registering the
    parametrization checks orthogonality with real numbers. The matrices are small (d × d).
    """
    with torch.device("cpu"):
        return orthogonal(nn.Linear(size, size, bias=bias), orthogonal_map=orthogonal_map)


class InjectiveEmbeddings(nn.Module):
    """``concat(Emb(x), PE)``: d/2 learned token embedding and d/2 sinusoidal position code (§3.4)."""

    def __init__(self, config: TransJectConfig) -> None:
        super().__init__()
        self.config = config
        half = config.word_embedding_size
        self.word_embeddings = nn.Embedding(config.vocab_size, half, padding_idx=config.pad_token_id)
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, half) if config.use_token_type_embeddings else None
        )
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        shape, position_ids, token_type_ids = embedding_ids(
            input_ids,
            inputs_embeds,
            token_type_ids,
            position_ids,
            self.word_embeddings.num_embeddings,
            self.config.max_position_embeddings,
            self.config.type_vocab_size,
        )
        tokens = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        if self.token_type_embeddings is not None:
            tokens = tokens + self.token_type_embeddings(token_type_ids)
        positions = sinusoidal_positions(position_ids, tokens.shape[-1], tokens.dtype).expand(shape[0], -1, -1)
        return self.dropout(torch.cat([tokens, positions], dim=-1))


class EigenvalueEstimator(nn.Module):
    """Σ of Theorem 1: eigenvalues of ``XᵀX`` (padding rows excluded) of the initial embeddings.

    ``approx``: learned orthogonal Ũ with ``Σ = diag(ŨᵀGŨ)`` — the minimiser of ``‖G − ŨΣŨᵀ‖`` over
    diagonal Σ for that Ũ — and the relative reconstruction error ``‖G − ŨΣŨᵀ‖_F / ‖G‖_F``;
    ``exact``: ``eigvalsh(G)`` in descending order; ``random``: a learnable diagonal, fixed per model.
    Every mode standardises Σ to ``max |λ| = 1``. Returns ``(Σ (B, d), reconstruction error or None)``.
    """

    def __init__(self, config: TransJectConfig) -> None:
        super().__init__()
        self.mode = config.eigenvalue_mode
        size = config.hidden_size
        self.eigenvectors = orthogonal_linear(size, False, config.orthogonal_map) if self.mode == "approx" else None
        self.random_eigenvalues = nn.Parameter(torch.empty(size)) if self.mode == "random" else None

    def forward(
        self, embeddings: torch.Tensor, padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.mode == "random":
            eigenvalues = self.random_eigenvalues.expand(embeddings.shape[0], -1)
            return _standardise(eigenvalues), None
        x = embeddings.float()
        if padding_mask is not None:
            x = x * padding_mask[..., None]
        gram = x.transpose(1, 2) @ x  # (B, d, d)
        if self.mode == "exact":
            return _standardise(torch.linalg.eigvalsh(gram).flip(-1)).to(embeddings.dtype), None
        vectors = self.eigenvectors.weight.float()  # columns are the eigenvector estimates
        diagonal = torch.einsum("di,bde,ei->bi", vectors, gram, vectors)
        reconstruction = vectors @ torch.diag_embed(diagonal) @ vectors.T
        error = torch.linalg.matrix_norm(gram - reconstruction) / torch.linalg.matrix_norm(gram).clamp_min(1e-12)
        return _standardise(diagonal).to(embeddings.dtype), error.mean()


def _standardise(eigenvalues: torch.Tensor) -> torch.Tensor:
    scale = eigenvalues.abs().amax(dim=-1, keepdim=True).clamp_min(torch.finfo(eigenvalues.dtype).tiny)
    return eigenvalues / scale


class OrthogonalAttention(nn.Module):
    """One expert of Theorem 1: ``A(X) = X U Σ V`` (rows of X are tokens)."""

    def __init__(self, config: TransJectConfig) -> None:
        super().__init__()
        self.U = orthogonal_linear(config.hidden_size, False, config.orthogonal_map)
        self.V = orthogonal_linear(config.hidden_size, False, config.orthogonal_map)

    def forward(self, hidden_states: torch.Tensor, eigenvalues: torch.Tensor) -> torch.Tensor:
        # nn.Linear computes x Wᵀ; Wᵀ is orthogonal whenever W is, so U := Wᵀ.
        return self.V(self.U(hidden_states) * eigenvalues[:, None, :])


class TransJectLayer(GradientCheckpointingLayer):
    """Mixture of orthogonal attention experts with an injective residual (eq. 3–5), then the
    orthogonal residual FFN (eq. 6); one learnable step ``α_l`` shared by both residuals."""

    def __init__(self, config: TransJectConfig, layer_idx: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.experts = nn.ModuleList(OrthogonalAttention(config) for _ in range(config.num_experts))
        if config.expert_weights == "constant":
            self.expert_logits = nn.Parameter(torch.zeros(config.num_experts))
            self.expert_gate = None
        else:
            self.expert_logits = None
            self.expert_gate = nn.Linear(config.hidden_size, 1)
        self.alpha = nn.Parameter(torch.zeros(()))
        self.ffn_in = orthogonal_linear(config.hidden_size, True, config.orthogonal_map)
        self.ffn_out = orthogonal_linear(config.hidden_size, True, config.orthogonal_map)

    def step_size(self) -> torch.Tensor:
        """``s = α_l / L`` (paper) or ``tanh(α_l) / L`` (authors' code)."""
        alpha = torch.tanh(self.alpha) if self.config.residual_weight == "tanh" else self.alpha
        return alpha / self.config.num_hidden_layers

    def expert_weights(
        self, hidden_states: torch.Tensor, updates: torch.Tensor, padding_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Convex weights ``(B, E)``: constant ``softmax(w)`` (eq. 5) or, as in the authors' code, a
        softmax over a linear score of each expert's output ``X + s·ELU(A_e(X))``, max-pooled over real
        tokens (computed only in that mode)."""
        if self.expert_logits is not None:
            return torch.softmax(self.expert_logits, dim=0).expand(hidden_states.shape[0], -1)
        pooled = hidden_states[:, None] + updates
        if padding_mask is not None:
            pooled = pooled.masked_fill(~padding_mask[:, None, :, None], torch.finfo(pooled.dtype).min)
        return torch.softmax(self.expert_gate(pooled.amax(dim=2)).squeeze(-1), dim=-1)

    def residual(self, hidden_states: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """``X + r`` (eq. 3), or eq. (4)'s randomised version for Entropic-TransJect."""
        sample = self.config.entropic and (self.training or self.config.entropic_eval == "sample")
        if not sample:
            return hidden_states + update
        # One draw per sequence and hidden unit ("for each neuron i", X_{:,i}), shared over tokens.
        u = torch.rand(hidden_states.shape[0], 1, hidden_states.shape[-1], device=hidden_states.device)
        keep_scale = torch.where(u <= 0.5, 1.5, torch.where(u <= 0.75, 0.0, 1.0)).to(hidden_states.dtype)
        update_scale = torch.where(u <= 0.25, 1.0, torch.where(u <= 0.5, -1.0, torch.where(u <= 0.75, 4.0, 0.0)))
        return keep_scale * hidden_states + update_scale.to(hidden_states.dtype) * update

    def forward(
        self,
        hidden_states: torch.Tensor,
        padding_mask: torch.Tensor | None,
        eigenvalues: torch.Tensor,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, None]:
        step = self.step_size()
        updates = step * torch.stack([F.elu(expert(hidden_states, eigenvalues)) for expert in self.experts], dim=1)
        update = torch.einsum("be,bend->bnd", self.expert_weights(hidden_states, updates, padding_mask), updates)
        hidden_states = self.residual(hidden_states, update)
        feed_forward = F.elu(self.ffn_out(F.elu(self.ffn_in(hidden_states))))
        return hidden_states + step * feed_forward, None


class TransJectPreTrainedModel(EncoderPreTrainedModel):
    config_class = TransJectConfig
    base_model_prefix = "transject"
    layer_class = TransJectLayer
    embeddings_class = InjectiveEmbeddings
    _supports_sdpa = False  # no softmax attention

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if parametrize.is_parametrized(module, "weight"):
            # weight = base @ map(skew(original)): a random orthogonal base and a zero offset.
            init.orthogonal_(module.parametrizations.weight[0].base)
            init.zeros_(module.parametrizations.weight.original)
        if isinstance(module, TransJectLayer):
            init.zeros_(module.alpha)  # ReZero: every layer starts as the identity
            if module.expert_logits is not None:
                init.zeros_(module.expert_logits)
        if isinstance(module, EigenvalueEstimator) and module.random_eigenvalues is not None:
            init.uniform_(module.random_eigenvalues, -1.0, 1.0)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """``from_pretrained`` that honours a requested ``orthogonal_map`` exactly: the stored weights
        are parametrised with the checkpoint's map (the same tensors under another map would be
        other matrices), so the model is loaded with that map and then switched."""
        config = kwargs.get("config")
        requested = kwargs.pop("orthogonal_map", None) or getattr(config, "orthogonal_map", None)
        if requested is None:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        hub = {key: kwargs[key] for key in HUB_KWARGS if key in kwargs}
        saved = cls.config_class.get_config_dict(pretrained_model_name_or_path, **hub)[0]
        saved_map = saved.get("orthogonal_map", requested)
        if saved_map != requested and config is not None:
            kwargs["config"] = copy.deepcopy(config)
            kwargs["config"].orthogonal_map = saved_map
        elif saved_map != requested:
            kwargs["orthogonal_map"] = saved_map
        model = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        if saved_map != requested:
            model.set_orthogonal_map(requested)
        return model

    def set_orthogonal_map(self, orthogonal_map: str) -> None:
        """Re-parametrise every orthogonal weight with another map without changing the function:
        each current matrix Q becomes the new parametrisation's base (``right_inverse``), so a
        checkpoint trained with ``matrix_exp`` continues with ``cayley`` (or back) from the same
        weights. Updates ``config.orthogonal_map``."""
        if orthogonal_map not in ORTHOGONAL_MAPS:
            raise ValueError(f"orthogonal_map must be one of {ORTHOGONAL_MAPS}, got {orthogonal_map!r}.")
        for module in list(self.modules()):
            if parametrize.is_parametrized(module, "weight"):
                parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)
                orthogonal(module, orthogonal_map=orthogonal_map)
        self.config.orthogonal_map = orthogonal_map


class TransJectModel(TransJectPreTrainedModel, EncoderModel):
    """The bare TransJect encoder; ``auxiliary_loss`` carries the weighted eigen-reconstruction loss
    (``approx`` mode) and ``diagnostics["reconstruction_loss"]`` the unweighted one."""

    extra_modules: ClassVar[dict[str, type[nn.Module]]] = {"eigenvalues": EigenvalueEstimator}

    def forward(self, *args, **kwargs):
        # Every orthogonal matrix is computed once per forward pass, not once per use.
        with parametrize.cached():
            return super().forward(*args, **kwargs)

    def prepare_layer_inputs(self, embeddings: torch.Tensor, padding_mask: torch.Tensor | None) -> LayerInputs:
        eigenvalues, reconstruction = self.eigenvalues(embeddings, padding_mask)
        if reconstruction is None:
            return (eigenvalues,), None, {"eigenvalues": eigenvalues.detach()}
        diagnostics = {"eigenvalues": eigenvalues.detach(), "reconstruction_loss": reconstruction.detach()}
        return (eigenvalues,), self.config.reconstruction_loss_weight * reconstruction, diagnostics


class TransJectForMaskedLM(TransJectPreTrainedModel, EncoderForMaskedLM):
    """TransJect with the masked-LM head; the decoder is tied to the d/2-wide token embeddings."""


class TransJectForSequenceClassification(TransJectPreTrainedModel, EncoderForSequenceClassification):
    """TransJect with a sequence classification/regression head on the pooled output."""


class TransJectForTokenClassification(TransJectPreTrainedModel, EncoderForTokenClassification):
    """TransJect with a token classification head."""


class TransJectForQuestionAnswering(TransJectPreTrainedModel, EncoderForQuestionAnswering):
    """TransJect with an extractive question-answering (span) head."""


class TransJectForMultipleChoice(TransJectPreTrainedModel, EncoderForMultipleChoice):
    """TransJect with a multiple-choice head."""
