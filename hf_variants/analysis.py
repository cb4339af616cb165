"""Measurements on trained models, shared by the report of ``hf-variants compare`` and the experiment
scripts: layer-wise distance ratios (TransJect paper Fig. 5c), attention maps and the numerical rank
of attention matrices (MGK paper Fig. 2–3), ODE function evaluations per block (N-ODE)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch


@torch.no_grad()
def layer_distance_ratios(
    model: torch.nn.Module, encodings: Iterable[dict[str, torch.Tensor]]
) -> dict[str, list[np.ndarray]]:
    """Per layer l, every ratio ‖h_i^(l) − h_j^(l)‖ / ‖h_i^(l−1) − h_j^(l−1)‖ over the token pairs of
    each sentence, and every per-token norm ratio ‖h_i^(l)‖ / ‖h_i^(l−1)‖. One unpadded sentence
    per encoding; ``model`` returns ``hidden_states`` (embeddings first)."""
    model.eval()
    distance: list[list[np.ndarray]] = []
    norm: list[list[np.ndarray]] = []
    for encoding in encodings:
        states = model(**encoding, output_hidden_states=True).hidden_states
        states = [s[0].double() for s in states]
        for layer in range(1, len(states)):
            if len(distance) < layer:
                distance.append([])
                norm.append([])
            before, after = torch.cdist(states[layer - 1], states[layer - 1]), torch.cdist(states[layer], states[layer])
            upper = torch.triu_indices(before.shape[0], before.shape[0], offset=1)
            keep = before[upper[0], upper[1]] > 1e-9
            distance[layer - 1].append((after[upper[0], upper[1]][keep] / before[upper[0], upper[1]][keep]).numpy())
            norm[layer - 1].append((states[layer].norm(dim=-1) / states[layer - 1].norm(dim=-1)).numpy())
    return {
        "distance_ratio": [np.concatenate(values) for values in distance],
        "norm_ratio": [np.concatenate(values) for values in norm],
    }


def summarise(values: np.ndarray) -> dict[str, float]:
    """min, 1st percentile, median, 99th percentile, max and count of ``values``."""
    return {
        "min": float(values.min()),
        "p1": float(np.percentile(values, 1)),
        "median": float(np.median(values)),
        "p99": float(np.percentile(values, 99)),
        "max": float(values.max()),
        "count": int(values.size),
    }


@torch.no_grad()
def attention_maps(model: torch.nn.Module, encoding: dict[str, torch.Tensor]) -> list[np.ndarray] | None:
    """One sentence's attention probabilities, ``[layer] → (heads, N, N)``; ``None`` for models
    without attention matrices (TransJect's orthogonal attention, N-ODE blocks)."""
    model.eval()
    try:
        outputs = model(**encoding, output_attentions=True)
    except (ValueError, NotImplementedError):
        return None
    attentions = getattr(outputs, "attentions", None)
    if not attentions or any(a is None for a in attentions):
        return None
    return [a[0].float().numpy() for a in attentions]


def numerical_rank(matrix: np.ndarray, relative_tolerance: float = 1e-3) -> int:
    """Number of singular values above ``relative_tolerance`` × the largest (MGK paper §3.3)."""
    singular = np.linalg.svd(matrix, compute_uv=False)
    return int((singular > relative_tolerance * singular[0]).sum()) if singular.size and singular[0] > 0 else 0


def attention_rank_fractions(
    model: torch.nn.Module, encodings: Iterable[dict[str, torch.Tensor]], relative_tolerance: float = 1e-3
) -> list[float] | None:
    """numerical rank / N of every head's attention matrix in every layer, over the sentences."""
    fractions = []
    for encoding in encodings:
        maps = attention_maps(model, encoding)
        if maps is None:
            return None
        length = maps[0].shape[-1]
        fractions += [numerical_rank(head, relative_tolerance) / length for layer in maps for head in layer]
    return fractions


@torch.no_grad()
def function_evaluations(
    model: torch.nn.Module, encodings: Iterable[dict[str, torch.Tensor]]
) -> list[list[int]] | None:
    """ODE function evaluations per block for each sentence; ``None`` for models without ODE blocks."""
    model.eval()
    counts = []
    for encoding in encodings:
        diagnostics = getattr(model(**encoding), "diagnostics", None) or {}
        if "nfe_per_block" not in diagnostics:
            return None
        counts.append([int(n) for n in torch.as_tensor(diagnostics["nfe_per_block"]).reshape(-1)])
    return counts
