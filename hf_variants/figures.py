"""PNG figures of the ``hf-variants compare`` report (matplotlib, Agg backend, small files)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

DPI = 80


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def learning_curves(path: Path, models: dict[str, dict[str, Any]], task: str) -> None:
    """MLM training loss and fine-tuning loss against the optimizer step, per model."""
    plt = _pyplot()
    figure, (mlm, fine) = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, entry in models.items():
        curve = entry["pretraining_curve"]
        mlm.plot([p["step"] for p in curve], [p["loss"] for p in curve], label=name, linewidth=1)
        tuned = entry["fine_tuning"][task]["curve"]
        fine.plot([p["step"] for p in tuned], [p["loss"] for p in tuned], label=name, linewidth=1)
    mlm.set(title="MLM pretraining", xlabel="step", ylabel="masked-token loss")
    fine.set(title=f"Fine-tuning on {task}", xlabel="step", ylabel="training loss")
    mlm.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def attention_maps(path: Path, name: str, maps: list[np.ndarray], tokens: list[str]) -> None:
    """Every layer (rows) and head (columns) of one sentence (MGK paper Fig. 2 style)."""
    plt = _pyplot()
    layers, heads = len(maps), maps[0].shape[0]
    figure, axes = plt.subplots(layers, heads, figsize=(2.2 * heads, 2.2 * layers), squeeze=False)
    for layer in range(layers):
        for head in range(heads):
            axis = axes[layer][head]
            axis.imshow(maps[layer][head], cmap="viridis", vmin=0.0)
            axis.set_xticks([])
            axis.set_yticks([])
            axis.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=7)
    sentence = " ".join(tokens)
    figure.suptitle(f"{name}: {sentence[:90]}{'…' if len(sentence) > 90 else ''}", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def attention_ranks(path: Path, fractions: dict[str, list[float]]) -> None:
    """Distribution of numerical rank / N of the attention matrices, per model (MGK paper Fig. 3)."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6, 3.4))
    bins = np.linspace(0, 1, 21)
    for name, values in fractions.items():
        axis.hist(values, bins=bins, alpha=0.5, label=f"{name} (mean {np.mean(values):.2f})")
    axis.set(xlabel="numerical rank / sequence length", ylabel="attention matrices",
             title="Rank of attention matrices (all layers and heads, dev sentences)")  # fmt: skip
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def function_evaluations(path: Path, counts: list[list[int]]) -> None:
    """N-ODE function evaluations per block over the dev sentences."""
    plt = _pyplot()
    values = np.asarray(counts)
    figure, axis = plt.subplots(figsize=(5, 3.2))
    axis.boxplot([values[:, block] for block in range(values.shape[1])])
    axis.set_xticks(range(1, values.shape[1] + 1), [f"block {b + 1}" for b in range(values.shape[1])])
    axis.set(ylabel="function evaluations", title="N-ODE: solver evaluations per block (dev sentences)")
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def distance_ratios(path: Path, ratios: dict[str, list[dict[str, float]]]) -> None:
    """Per layer, median and max of ‖h_i − h_j‖ after / before the layer (TransJect paper Fig. 5c)."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6, 3.4))
    for name, layers in ratios.items():
        positions = np.arange(1, len(layers) + 1)
        line = axis.plot(positions, [s["max"] for s in layers], marker="o", label=f"{name} max")[0]
        axis.plot(positions, [s["median"] for s in layers], marker=".", linestyle="--", color=line.get_color(),
                  label=f"{name} median")  # fmt: skip
    axis.axhline(1.0, color="gray", linewidth=0.8)
    axis.set(xlabel="layer", ylabel="distance ratio", title="Layer-wise distance ratios (dev sentences)")
    axis.legend(fontsize=6, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def write_all(output_dir: Path, models: dict[str, dict], analyses: dict[str, dict], task: str) -> list[str]:
    """Every figure the data supports; returns their paths relative to ``output_dir``."""
    folder = output_dir / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    written = []

    def record(name: str) -> Path:
        name = re.sub(r"[^\w.-]+", "_", name)  # model specs such as "macaron_bert:attention_type=mgk"
        written.append(f"figures/{name}")
        return folder / name

    learning_curves(record("learning_curves.png"), models, task)
    for name, analysis in analyses.items():
        if analysis["attention_maps"] is not None:
            attention_maps(record(f"attention_{name}.png"), name, analysis["attention_maps"],
                           analysis["attention_sentence"])  # fmt: skip
    ranks = {n: a["attention_rank_fraction"] for n, a in analyses.items() if a["attention_rank_fraction"] is not None}
    if ranks:
        attention_ranks(record("attention_rank.png"), ranks)
    for name, analysis in analyses.items():
        if analysis["nfe_per_block"] is not None:
            function_evaluations(record(f"nfe_{name}.png"), analysis["nfe_per_block"])
    distance_ratios(record("distance_ratios.png"), {n: a["distance_ratio"] for n, a in analyses.items()})
    return written
