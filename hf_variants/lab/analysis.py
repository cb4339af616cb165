"""Measurements on trained models, shared by the report of ``hf-variants compare`` and the experiment
scripts: layer-wise distance ratios (TransJect paper Fig. 5c), attention maps and the numerical rank
of attention matrices (MGK paper Fig. 2–3), ODE function evaluations per block (N-ODE)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch


@torch.no_grad()
def encoder_outputs(
    model: torch.nn.Module, encodings: Iterable[dict[str, torch.Tensor]], attentions: bool = False
) -> list[Any]:
    """One eval-mode forward per encoding with ``hidden_states``, ``diagnostics`` (and ``attentions``
    when asked): every measurement below reads these outputs, so each sentence runs through the model
    once."""
    model.eval()
    return [
        model(**encoding, output_hidden_states=True, output_attentions=attentions, output_diagnostics=True)
        for encoding in encodings
    ]


def distance_ratios(outputs: Iterable[Any]) -> dict[str, list[np.ndarray]]:
    """Per layer l, every ratio ‖h_i^(l) − h_j^(l)‖ / ‖h_i^(l−1) − h_j^(l−1)‖ over the token pairs of
    each sentence, and every per-token norm ratio ‖h_i^(l)‖ / ‖h_i^(l−1)‖. One unpadded sentence
    per output; ``hidden_states`` start with the embeddings."""
    distance: list[list[np.ndarray]] = []
    norm: list[list[np.ndarray]] = []
    for output in outputs:
        states = [s[0].double() for s in output.hidden_states]
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


def layer_distance_ratios(
    model: torch.nn.Module, encodings: Iterable[dict[str, torch.Tensor]]
) -> dict[str, list[np.ndarray]]:
    """:func:`distance_ratios` of ``model`` on ``encodings``."""
    return distance_ratios(encoder_outputs(model, encodings))


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


def attention_maps(output: Any) -> list[np.ndarray] | None:
    """One sentence's attention probabilities, ``[layer] → (heads, N, N)``; ``None`` for models
    without attention matrices (TransJect's orthogonal attention)."""
    attentions = getattr(output, "attentions", None)
    if not attentions or any(a is None for a in attentions):
        return None
    return [a[0].float().numpy() for a in attentions]


def numerical_rank(matrix: np.ndarray, relative_tolerance: float = 1e-3) -> int:
    """Number of singular values above ``relative_tolerance`` × the largest (MGK paper §3.3)."""
    singular = np.linalg.svd(matrix, compute_uv=False)
    return int((singular > relative_tolerance * singular[0]).sum()) if singular.size and singular[0] > 0 else 0


def attention_rank_fractions(outputs: Iterable[Any], relative_tolerance: float = 1e-3) -> list[float] | None:
    """numerical rank / N of every head's attention matrix in every layer, over the sentences."""
    fractions = []
    for output in outputs:
        maps = attention_maps(output)
        if maps is None:
            return None
        length = maps[0].shape[-1]
        fractions += [numerical_rank(head, relative_tolerance) / length for layer in maps for head in layer]
    return fractions


def function_evaluations(outputs: Iterable[Any]) -> list[list[int]] | None:
    """ODE function evaluations per block for each sentence; ``None`` for models without ODE blocks."""
    counts = []
    for output in outputs:
        diagnostics = getattr(output, "diagnostics", None) or {}
        if "nfe_per_block" not in diagnostics:
            return None
        counts.append([int(n) for n in torch.as_tensor(diagnostics["nfe_per_block"]).reshape(-1)])
    return counts
