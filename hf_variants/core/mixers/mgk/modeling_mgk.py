"""Token mixers ``attention_type="mgk"`` and ``"mlk"``: attention keys that are mixtures of Gaussians
(Transformer-MGK) or of linear keys (Transformer-MLK), Nguyen et al. (2022) — introduced by MGK-BERT
and usable by every variant.

Attention of query i to key position j with M components (eq. 7)::

    a_ij = Σ_r π_r exp(-‖q_i − k_jr‖² / 2σ_r²)  /  Σ_j' Σ_r π_r exp(-‖q_i − k_j'r‖² / 2σ_r²)
    h_i  = Σ_j a_ij v_j

computed stably as log-scores ``ℓ_ijr = log π_r − ‖q_i − k_jr‖²/(2σ_r²)``, a log-sum-exp over r and a
masked softmax over j (the authors' code has no log-sum-exp and divides 0 by 0 when every key is
far from a query).

Two exact implementations of the Gaussian kind:

* **reference** (``attn_implementation="eager"``): the formula above, materialising the N×N scores;
* **fused** (``"sdpa"``, the default): with ``q̃ = [q, ‖q‖², 1]`` and
  ``k̃_jr = [k_jr/σ_r², −1/(2σ_r²), log π_r − ‖k_jr‖²/(2σ_r²)]`` the score is ``q̃·k̃_jr = ℓ_ijr``, so
  MGK is ordinary softmax attention (scale 1) over the M·N keys ``k̃_jr`` with values ``[V; …; V]``:
  one ``scaled_dot_product_attention`` call, with its memory-efficient kernels. The augmented dot
  product adds and subtracts ‖q‖², ‖k‖², so this path always runs in float32.

The hard E-step (``max_r``) has no single-softmax form and always uses the reference path.
MLK (§2.4): ``h_i = φ(q_i)ᵀ Σ_j k̄_j v_jᵀ / φ(q_i)ᵀ Σ_j k̄_j`` with ``k̄_j = Σ_r π_r φ(k_jr)`` and
φ = elu + 1, in O(N) time and memory.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from ...attention import MultiHeadSelfAttention
from ...inputs import TokenLayout, full_precision
from ...positions import rotate

if TYPE_CHECKING:
    from ...configuration_encoder import EncoderConfig

#: Denominator guard of linear attention (Katharopoulos et al. 2020 use the same).
LINEAR_ATTENTION_EPS = 1e-6


def upcast(tensor: torch.Tensor) -> torch.Tensor:
    """float16/bfloat16 → float32 (scores and sums need the range); float32/float64 unchanged."""
    return tensor.float() if tensor.dtype in (torch.float16, torch.bfloat16) else tensor


def squared_distances(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """``‖q_i − k_jr‖²`` for queries ``(B, H, N, D)`` and keys ``(B, H, M, N, D)`` → ``(B, H, M, N, N)``."""
    query_norms = query.pow(2).sum(-1)[:, :, None, :, None]
    key_norms = keys.pow(2).sum(-1)[:, :, :, None, :]
    cross = torch.einsum("bhid,bhrjd->bhrij", query, keys)
    return (query_norms - 2.0 * cross + key_norms).clamp_min(0.0)


def component_log_scores(
    query: torch.Tensor, keys: torch.Tensor, variances: torch.Tensor, log_priors: torch.Tensor | None
) -> torch.Tensor:
    """``ℓ_ijr = log π_r − ‖q_i − k_jr‖² / (2σ_r²)`` as ``(B, H, M, N, N)`` (without ``log π`` if None)."""
    scores = -squared_distances(query, keys) / (2.0 * variances[None, None, :, None, None])
    if log_priors is not None:
        scores = scores + log_priors[None, :, :, None, None]
    return scores


def mixture_log_scores(
    query: torch.Tensor,
    keys: torch.Tensor,
    variances: torch.Tensor,
    log_priors: torch.Tensor | None,
    hard: bool = False,
) -> torch.Tensor:
    """Attention logits ``(B, H, N, N)``: ``log Σ_r π_r exp(−d_ijr/2σ_r²)`` (eq. 7), or for the hard
    E-step ``max_r −d_ijr/2σ_r²`` (π plays no role, paper Remark 3)."""
    scores = component_log_scores(query, keys, variances, None if hard else log_priors)
    return scores.amax(dim=2) if hard else torch.logsumexp(scores, dim=2)


def fused_gaussian_mixture_attention(
    query: torch.Tensor,
    keys: torch.Tensor,
    value: torch.Tensor,
    variances: torch.Tensor,
    log_priors: torch.Tensor,
    layout: TokenLayout,
    dropout: float = 0.0,
    module: nn.Module | None = None,
) -> torch.Tensor:
    """MGK as one softmax attention over augmented keys (see the module docstring): torch's
    ``scaled_dot_product_attention``, or transformers' ``flex_attention`` when ``module`` (the
    attention layer, whose ``training`` flag flex attention reads) is given.

    Shapes: query/value ``(B, H, N, D)``, keys ``(B, H, M, N, D)``, variances ``(M,)``, log_priors
    ``(H, M)``. Returns ``(B, H, N, D)``, in float32 for half inputs.
    """
    batch, heads, components, seq_len, head_dim = keys.shape
    query, keys, value = upcast(query), upcast(keys), upcast(value)
    variances = variances.to(query.dtype)[None, None, :, None, None]
    ones = query.new_ones(batch, heads, seq_len, 1)
    augmented_query = torch.cat([query, query.pow(2).sum(-1, keepdim=True), ones], dim=-1)
    augmented_keys = torch.cat(
        [
            keys / variances,
            (-0.5 / variances).expand(batch, heads, components, seq_len, 1),
            log_priors.to(query.dtype)[None, :, :, None, None] - keys.pow(2).sum(-1, keepdim=True) / (2.0 * variances),
        ],
        dim=-1,
    ).reshape(batch, heads, components * seq_len, head_dim + 2)
    # Values are padded to the augmented width so every SDPA kernel (equal head dims) applies.
    padded_value = F.pad(value, (0, 2)).repeat(1, 1, components, 1)
    if module is not None:
        block_mask = layout.flex(seq_len, key_copies=components)
        # imported here: building or validating a config must not import flex attention
        from transformers.integrations import flex_attention

        output = flex_attention.flex_attention_forward(
            module, augmented_query, augmented_keys, padded_value, block_mask, scaling=1.0, dropout=dropout
        )[0]
        return output.transpose(1, 2)[..., :head_dim]
    output = F.scaled_dot_product_attention(
        augmented_query,
        augmented_keys,
        padded_value,
        attn_mask=layout.sdpa(key_copies=components),
        dropout_p=dropout,
        scale=1.0,
    )
    return output[..., :head_dim]


def linear_mixture_attention(
    query: torch.Tensor,
    keys: torch.Tensor,
    value: torch.Tensor,
    priors: torch.Tensor,
    layout: TokenLayout,
    output_attentions: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """MLK (§2.4) in O(N): ``h_i = φ(q_i)ᵀ Σ_j k̄_j v_jᵀ / φ(q_i)ᵀ Σ_j k̄_j``, ``k̄_j = Σ_r π_r φ(k_jr)``, the
    sums over the real keys of query i's document.

    With rotary positions the numerator's features are rotated, ``(R_i φ(q_i))ᵀ Σ_j (R_j k̄_j) v_jᵀ``, and the
    denominator keeps the unrotated (positive) ones, as RoFormer §3.3 (eq. 19) does for linear attention.
    Half inputs accumulate in float32. Returns ``(B, H, N, D)`` and, only when asked, the implied
    ``(B, H, N, N)`` attention matrix; the output is then computed from that matrix (the same function in
    O(N²)), so that the returned attentions are the ones the output depends on (gradients reach them, as for
    softmax attention).
    """
    phi_query = F.elu(upcast(query)) + 1.0
    mixed_keys = torch.einsum("bhrnd,hr->bhnd", F.elu(upcast(keys)) + 1.0, priors.to(phi_query.dtype))
    if layout.tensor is not None:
        mixed_keys = mixed_keys * layout.tensor[:, None, :, None]
    rotated_query, rotated_keys = phi_query, mixed_keys
    if layout.rotary is not None:
        rotated_query, rotated_keys = rotate(phi_query, layout.rotary), rotate(mixed_keys, layout.rotary)
    value = upcast(value)
    if output_attentions:
        scores = torch.einsum("bhid,bhjd->bhij", rotated_query, rotated_keys)
        kernel = torch.einsum("bhid,bhjd->bhij", phi_query, mixed_keys)
        visible = layout.visible()
        if visible is not None:
            scores, kernel = scores * visible, kernel * visible
        weights = scores / (kernel.sum(dim=-1, keepdim=True) + LINEAR_ATTENTION_EPS)
        return weights @ value, weights
    documents = layout.document_one_hot(phi_query.dtype)
    if documents is None:
        key_value = torch.einsum("bhnd,bhne->bhde", rotated_keys, value)
        numerator = torch.einsum("bhnd,bhde->bhne", rotated_query, key_value)
        normaliser = torch.einsum("bhnd,bhd->bhn", phi_query, mixed_keys.sum(dim=2))
    else:  # the same sums per document (documents: (B, N, K) one-hot of each real token's document)
        key_value = torch.einsum("bnk,bhnd,bhne->bhkde", documents, rotated_keys, value)
        numerator = torch.einsum("bnk,bhnd,bhkde->bhne", documents, rotated_query, key_value)
        key_sums = torch.einsum("bnk,bhnd->bhkd", documents, mixed_keys)
        normaliser = torch.einsum("bnk,bhnd,bhkd->bhn", documents, phi_query, key_sums)
    return numerator / (normaliser[..., None] + LINEAR_ATTENTION_EPS), None


class MixtureOfKeysAttention(MultiHeadSelfAttention):
    r"""Multi-head attention with M keys per position: MGK (Gaussian kernel) or MLK (linear).

    Every key position j carries ``M = num_key_components`` keys ``k_j1 … k_jM``; a query attends
    to position j with weight ``∝ Σ_r π_r exp(-‖q_i − k_jr‖² / 2σ_r²)`` (eq. 7), normalised over j.
    The paper's comparisons use half the heads of the baseline at the same per-head width D: for
    a BERT with H heads of width D = hidden/H, use ``num_attention_heads=H/2, head_dim=D``.

    Shares the ``query``/``value`` (``hidden → H·D``) and ``output`` (``H·D → hidden``) projections of
    the core attention; ``key`` maps ``hidden → M·H·D`` (option A) or stays ``hidden → H·D`` with
    shifts ``key_shift`` ``b_r`` of shape ``(M, H, D)`` (option B). ``mixture_logits`` ``(H, M)`` give
    ``π = softmax(mixture_logits)`` when π is learned; the buffer ``mixture_prior`` ``(H, M)`` holds
    π for the soft E-step.

    With rotary positions (``position_embedding_type="rotary"``) the query and every component key are rotated by
    their position, so ``‖R_i q_i − R_j k_jr‖²`` depends on ``j − i`` only; MLK rotates its feature maps instead
    (:func:`linear_mixture_attention`). In packed rows a query attends within its own document.

    Its config fields (``num_key_components``, ``key_mode``, ``key_bias``, ``key_shift_init_std``,
    ``variance_factors``, ``mixture_weights``) are documented on :class:`.configuration_mgk.MixtureOfKeysSpec`.
    """

    #: Linear attention over the mixture (MLK, :class:`LinearMixtureAttention`) instead of the Gaussian kernel.
    linear = False

    def __init__(self, config: EncoderConfig, layer_idx: int | None = None) -> None:
        super().__init__(config, layer_idx=layer_idx)
        self.num_components = config.num_key_components
        self.key_shift = None
        if config.key_mode == "separate":
            width = self.num_components * config.attention_width
            self.key = nn.Linear(config.hidden_size, width, bias=config.key_bias)
        else:
            if not config.key_bias:
                self.key = nn.Linear(config.hidden_size, config.attention_width, bias=False)
            self.key_shift = nn.Parameter(torch.empty(self.num_components, self.num_heads, self.head_dim))
        prior_shape = (self.num_heads, self.num_components)
        learned, soft = config.mixture_weights == "learned", config.mixture_weights == "soft_em"
        self.mixture_logits = nn.Parameter(torch.zeros(prior_shape)) if learned else None
        self.register_buffer("mixture_prior", torch.full(prior_shape, 1.0 / self.num_components) if soft else None)

    # ---------------------------------------------------------------- projections and priors
    def variances(self, reference: torch.Tensor) -> torch.Tensor:
        """``σ_r² = c_r · √D`` (paper §2.3 with per-component factors c_r), on ``reference``'s device
        in its (upcast) dtype."""
        factors = torch.tensor(self.config.variance_factors, dtype=upcast(reference).dtype, device=reference.device)
        return factors * math.sqrt(self.head_dim)

    def log_priors(self) -> torch.Tensor | None:
        """``log π`` of shape ``(H, M)``; ``None`` for the hard E-step."""
        if self.mixture_logits is not None:
            return torch.log_softmax(upcast(self.mixture_logits), dim=-1)
        if self.mixture_prior is not None:
            prior = upcast(self.mixture_prior)
            return prior.clamp_min(torch.finfo(prior.dtype).tiny).log()
        return None

    def project(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries ``(B, H, N, D)``, keys ``(B, H, M, N, D)``, values ``(B, H, N, D)``."""
        batch, seq_len, _ = hidden_states.shape
        query = self.split_heads(self.query(hidden_states))
        value = self.split_heads(self.value(hidden_states))
        if self.key_shift is None:
            keys = self.key(hidden_states).view(batch, seq_len, self.num_components, self.num_heads, self.head_dim)
            keys = keys.permute(0, 3, 2, 1, 4)
        else:
            shared = self.split_heads(self.key(hidden_states))
            keys = shared[:, :, None] + self.key_shift.transpose(0, 1)[None, :, :, None, :]
        return query, keys, value

    @torch.no_grad()
    def update_priors(self, query: torch.Tensor, keys: torch.Tensor, layout: TokenLayout) -> None:
        """Soft E-step + M-step (eq. 8): responsibilities ``γ_ijr = softmax_r ℓ_ijr`` with the current
        π, then ``π_r = mean of γ_ijr`` over the (query, key) pairs of the batch that attend, per head: both
        real, of one document."""
        with full_precision(query.device):
            query, keys = query.float(), keys.float()
            scores = component_log_scores(query, keys, self.variances(query), self.log_priors().float())
            responsibilities = torch.softmax(scores, dim=2)  # (B, H, M, N, N)
        visible = layout.visible()
        if visible is None:
            priors = responsibilities.mean(dim=(0, 3, 4))
        else:
            real_queries = layout.tensor[:, None, :, None] if layout.tensor is not None else True
            pairs = (visible & real_queries).float()[:, :, None]
            priors = (responsibilities * pairs).sum(dim=(0, 3, 4)) / pairs.sum(dim=(0, 3, 4))
        self.mixture_prior.copy_(priors.to(self.mixture_prior.dtype))

    # ---------------------------------------------------------------- forward
    def init_extra_parameters(self, config: EncoderConfig) -> None:
        """π = 1/M (the paper's 0.5 for M = 2) and N(0, key_shift_init_std²) shifts, with
        ``transformers.initialization`` (which skips loaded tensors)."""
        if self.mixture_logits is not None:
            init.zeros_(self.mixture_logits)
        if self.mixture_prior is not None:
            init.constant_(self.mixture_prior, 1.0 / self.num_components)
        if self.key_shift is not None:
            init.normal_(self.key_shift, mean=0.0, std=config.key_shift_init_std)

    def forward(
        self,
        hidden_states: torch.Tensor,
        layout: TokenLayout,
        *context: torch.Tensor,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        query, keys, value = self.project(hidden_states)
        if layout.rotary is not None and not self.linear:  # MLK rotates its feature maps instead
            query, keys = rotate(query, layout.rotary), rotate(keys, layout.rotary)
        if self.linear:
            priors = torch.softmax(upcast(self.mixture_logits), dim=-1)
            context, weights = linear_mixture_attention(query, keys, value, priors, layout, output_attentions)
        else:
            if self.training and self.mixture_prior is not None:
                self.update_priors(query, keys, layout)
            context, weights = self.gaussian_attention(query, keys, value, layout, output_attentions)
        batch, _, seq_len, _ = context.shape
        context = context.transpose(1, 2).reshape(batch, seq_len, -1).to(hidden_states.dtype)
        return self.output(context), weights

    def gaussian_attention(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        value: torch.Tensor,
        layout: TokenLayout,
        output_attentions: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        variances = self.variances(query)
        dropout = self.attention_dropout if self.training else 0.0
        hard = self.config.mixture_weights == "hard"
        implementation = self.config._attn_implementation
        if implementation in ("sdpa", "flex_attention") and not (output_attentions or hard):
            module = self if implementation == "flex_attention" else None
            context = fused_gaussian_mixture_attention(
                query, keys, value, variances, self.log_priors(), layout, dropout, module
            )
            return context, None
        query, keys, log_priors = upcast(query), upcast(keys), self.log_priors()
        log_priors = None if log_priors is None else log_priors.to(query.dtype)
        scores = mixture_log_scores(query, keys, variances, log_priors, hard=hard)
        visible = layout.visible()
        if visible is not None:
            scores = scores.masked_fill(~visible, torch.finfo(scores.dtype).min)
        probabilities = torch.softmax(scores, dim=-1)
        context = F.dropout(probabilities, p=dropout, training=self.training) @ upcast(value)
        return context, probabilities.to(query.dtype) if output_attentions else None


class LinearMixtureAttention(MixtureOfKeysAttention):
    """Transformer-MLK (§2.4): ``h_i = φ(q_i)ᵀ Σ_j k̄_j v_jᵀ / φ(q_i)ᵀ Σ_j k̄_j`` with
    ``k̄_j = Σ_r π_r φ(k_jr)`` and φ = elu + 1, in O(N) time and memory; MGK's module and parameters
    with the linear kernel."""

    linear = True
