"""Rotary positions (RoFormer, Su et al. 2021): ``position_embedding_type="rotary"``.

Each pair of a head's dimensions ``(x_k, x_{k+D/2})`` is rotated by the angle ``m θ_k`` of its token's position
m, with ``θ_k = rope_theta^(−2k/D)`` (eq. 34, in the half-split layout of GPT-NeoX, Llama and ModernBERT). A
query at position m and a key at position n then meet as ``(R_m q)·(R_n k) = q·R_{n−m} k`` (eq. 16): attention
depends on relative positions only, and no table limits the length.
"""

from __future__ import annotations

import torch


def rotary_code(
    position_ids: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` of the angles ``m θ_k`` for positions ``(batch or 1, seq_len)``, each
    ``(batch or 1, seq_len, head_dim)`` in ``dtype`` (computed in float32: angles reach thousands of radians)."""
    exponents = torch.arange(0, head_dim, 2, device=position_ids.device, dtype=torch.float32) / head_dim
    frequencies = theta**-exponents
    angles = position_ids.float()[..., None] * frequencies
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(states: torch.Tensor, code: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``R_m x`` for per-head states ``(batch, heads, [components,] seq_len, head_dim)`` and the
    :func:`rotary_code` of their positions."""
    cos, sin = code
    while cos.dim() < states.dim():  # broadcast over heads (and MGK's key components)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    first, second = states.chunk(2, dim=-1)
    return states * cos.to(states.dtype) + torch.cat([-second, first], dim=-1) * sin.to(states.dtype)
