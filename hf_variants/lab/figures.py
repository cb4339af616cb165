"""PNG figures of the ``hf-variants compare`` report (matplotlib, Agg backend, small files): each drawing returns
its figure and savefig options, and :func:`write_all` writes them through the checked writer."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..storage.files import make_folder, write_bytes_atomic
from . import require_lab_extra

DPI = 80
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def _pyplot():
    require_lab_extra()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def smoothed(values: list[float], window: int) -> np.ndarray:
    """Trailing moving average over ``window`` points (shorter at the start), so curves of noisy
    per-step losses can be told apart."""
    values = np.asarray(values, dtype=float)
    cumulative = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    return (cumulative[1:] - cumulative[np.arange(1, len(values) + 1) - counts]) / counts


def learning_curves(models: dict[str, dict[str, Any]], task: str, window: int = 10) -> tuple[Any, dict[str, Any]]:
    """MLM training loss and fine-tuning loss against the optimizer step, per model, smoothed over
    ``window`` logged points (fine-tuning: the model's first seed that finished; no band)."""
    plt = _pyplot()
    figure, (mlm, fine) = plt.subplots(1, 2, figsize=(11, 3.8))
    for index, (name, entry) in enumerate(models.items()):
        style = {"label": name, "linewidth": 1.2, "color": f"C{index % 10}", "linestyle": LINESTYLES[index // 10 % 4]}
        curve = entry["pretraining_curve"]
        mlm.plot([p["step"] for p in curve], smoothed([p["loss"] for p in curve], window), **style)
        tuned = next((run["curve"] for run in entry["fine_tuning"][task]["runs"].values() if "curve" in run), [])
        fine.plot([p["step"] for p in tuned], smoothed([p["loss"] for p in tuned], window), **style)
    mlm.set(title="MLM pretraining", xlabel="step", ylabel=f"masked-token loss (mean of {window} logs)")
    fine.set(title=f"Fine-tuning on {task}", xlabel="step", ylabel=f"training loss (mean of {window} logs)")
    fine.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    figure.tight_layout()
    return figure, {}


def attention_maps(name: str, maps: list[np.ndarray], tokens: list[str]) -> tuple[Any, dict[str, Any]]:
    """Every layer (rows) and head (columns) of one sentence (MGK paper Fig. 2 style), with the
    tokens on both axes and one colour bar for all panels."""
    import textwrap

    plt = _pyplot()
    layers, heads = len(maps), maps[0].shape[0]
    size = max(2.6, 0.16 * len(tokens) + 1.0)
    figure, axes = plt.subplots(
        layers, heads, figsize=(size * heads + 1.0, size * layers + 0.8), squeeze=False, layout="constrained"
    )
    top = max(float(np.max(m)) for m in maps)
    for layer in range(layers):
        for head in range(heads):
            axis = axes[layer][head]
            image = axis.imshow(maps[layer][head], cmap="viridis", vmin=0.0, vmax=top)
            axis.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
            axis.set_yticks(range(len(tokens)), tokens, fontsize=6)
            axis.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=8)
            axis.set(xlabel="key" if layer == layers - 1 else None, ylabel="query" if head == 0 else None)
    figure.colorbar(image, ax=axes, shrink=0.8, label="attention probability")
    figure.suptitle("\n".join(textwrap.wrap(f"{name}: {' '.join(tokens)}", 110)), fontsize=8)
    return figure, {"bbox_inches": "tight"}


def attention_ranks(fractions: dict[str, list[float]]) -> tuple[Any, dict[str, Any]]:
    """Distribution of numerical rank / N of the attention matrices, per model (MGK paper Fig. 3)."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6, 3.4))
    bins = np.linspace(0, 1, 21)
    for index, (name, values) in enumerate(fractions.items()):
        axis.hist(values, bins=bins, histtype="step", linewidth=1.5, linestyle=LINESTYLES[index % 4],
                  label=f"{name} (mean {np.mean(values):.2f})")  # fmt: skip
    axis.set(xlabel="numerical rank / sequence length", ylabel="attention matrices",
             title="Rank of attention matrices (all layers and heads, dev sentences)")  # fmt: skip
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return figure, {"bbox_inches": "tight"}


def function_evaluations(counts: list[list[int]]) -> tuple[Any, dict[str, Any]]:
    """N-ODE function evaluations per block over the dev sentences."""
    plt = _pyplot()
    values = np.asarray(counts)
    figure, axis = plt.subplots(figsize=(5, 3.2))
    axis.boxplot([values[:, block] for block in range(values.shape[1])])
    axis.set_xticks(range(1, values.shape[1] + 1), [f"block {b + 1}" for b in range(values.shape[1])])
    axis.set(ylabel="function evaluations", title="N-ODE: solver evaluations per block (dev sentences)")
    figure.tight_layout()
    return figure, {}


def distance_ratios(ratios: dict[str, list[dict[str, float]]]) -> tuple[Any, dict[str, Any]]:
    """Per layer, median and max of ‖h_i − h_j‖ after / before the layer (TransJect paper Fig. 5c)."""
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7, 3.6))
    count = len(ratios)
    for index, (name, layers) in enumerate(ratios.items()):
        positions = np.arange(1, len(layers) + 1) + (index - (count - 1) / 2) * 0.04  # no marker hides another
        marker = MARKERS[index % len(MARKERS)]
        line = axis.plot(positions, [s["max"] for s in layers], marker=marker, label=f"{name} max")[0]
        axis.plot(positions, [s["median"] for s in layers], marker=marker, fillstyle="none", linestyle="--",
                  color=line.get_color(), label=f"{name} median")  # fmt: skip
    axis.axhline(1.0, color="gray", linewidth=0.8)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set(xlabel="layer", ylabel="distance ratio", title="Layer-wise distance ratios (dev sentences)")
    axis.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return figure, {"bbox_inches": "tight"}


def save_figure(figure: Any, path: Path, options: dict[str, Any], *, within: Path) -> None:
    """``figure`` as a PNG at ``path`` inside ``within``, through the package's checked writer (never through a
    link), then closed."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, **options)
    _pyplot().close(figure)
    write_bytes_atomic(path, buffer.getvalue(), within=within)


def write_all(
    output_dir: Path, models: dict[str, dict], analyses: dict[str, dict], task: str
) -> list[dict[str, str]]:
    """Every figure the data supports, each with a caption that says what to look for; returns
    ``[{"path": relative path, "caption": text}]``."""
    folder = make_folder(output_dir / "figures", within=output_dir)
    written: list[dict[str, str]] = []

    def record(name: str, caption: str, drawn: tuple[Any, dict[str, Any]]) -> None:
        name = re.sub(r"_*\.png$", ".png", re.sub(r"[^\w.-]+", "_", name))  # "macaron_bert:attention_type=mgk"
        written.append({"path": f"figures/{name}", "caption": caption})
        save_figure(drawn[0], folder / name, drawn[1], within=output_dir)

    record("learning_curves.png", "Training losses (moving averages; fine-tuning: each model's first seed). Look "
           f"for a fine-tuning loss that stays flat near ln(classes): that run did not learn {task}.",
           learning_curves(models, task))
    for name, analysis in analyses.items():
        if analysis["attention_maps"] is not None:
            caption = (f"{name}: attention of one dev sentence, every layer and head (rows: queries, columns: keys). "
                       "Diagonal or [CLS]/[SEP] columns are the usual untrained patterns; structure elsewhere is "
                       "what fine-tuning learned.")
            record(f"attention_{name}.png", caption,
                   attention_maps(name, analysis["attention_maps"], analysis["attention_sentence"]))
    ranks = {n: a["attention_rank_fraction"] for n, a in analyses.items() if a["attention_rank_fraction"] is not None}
    if ranks:
        caption = ("Numerical rank / length of every attention matrix. The MGK paper reports higher ranks for MGK "
                   "than for softmax attention (its Fig. 3): compare a variant's curve with its control's.")
        record("attention_rank.png", caption, attention_ranks(ranks))
    for name, analysis in analyses.items():
        if analysis["nfe_per_block"] is not None:
            caption = (f"{name}: solver function evaluations per block over the dev sentences — the effective depth; "
                       "a block whose count varies between sentences adapts its depth to the input.")
            record(f"nfe_{name}.png", caption, function_evaluations(analysis["nfe_per_block"]))
    caption = ("Per layer, max (solid) and median (dashed) of ‖h_i − h_j‖ after / before the layer over token pairs. "
               "TransJect's Theorem 2 keeps its ratios near 1; a ratio far from 1 is a layer that stretches or "
               "shrinks distances.")
    record("distance_ratios.png", caption, distance_ratios({n: a["distance_ratio"] for n, a in analyses.items()}))
    return written
