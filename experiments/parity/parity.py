#!/usr/bin/env python
"""The PARITY experiment of Baier-Reinio & De Sterck (2020), §5 / Table 1, at this machine's scale.

Task: all binary strings of length 1…n (default n = 6, 126 strings), each prefixed with an SOS token;
predict whether the number of 1s is odd. Model: embeddings → N blocks → the final SOS state → a
two-layer dimension-preserving FFN → a linear softmax classifier. Blocks are either N-ODE blocks
(eq. 2, time-independent MHSA with d/2 heads, dimension-preserving FFN, dopri5 with rtol = atol =
1e-5: ``layer_scheme="ode"``) or vanilla Transformer blocks (eq. 1, ``layer_scheme="vanilla"``) of
the same modules, so both have about the same weight count. Training is full-batch Adam on the whole set
(constant rate, no clipping), on the fine-tuning engine's Trainer with its non-finite check: a run stopped
by a non-finite loss or gradient or by a solver failure is recorded with its status, not averaged in.

For every (d, N, block type) an ensemble of runs over learning rates × seeds is trained; following the
paper's rule, the worst sixth of the runs (by best training accuracy) is dropped, and the mean best
training accuracy and the mean wall time to first reach it are reported. Writes ``parity.json`` and
``parity.png``::

    python experiments/parity/parity.py --output_dir OUT                     # small default grid
    python experiments/parity/parity.py --dims 4 6 8 10 --blocks 1 2 3 4 \\
        --learning_rates 3e-3 1e-2 3e-2 --seeds 0 1 2 3 4 5 --epochs 1000  # closer to the paper
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm
from transformers import TrainerCallback, TrainingArguments
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from hf_variants.core.schemes.ode.modeling_ode import ODESolverError
from hf_variants.node_transformer import NodeTransformerConfig, NodeTransformerModel
from hf_variants.training.nonfinite import NonFiniteStepError
from hf_variants.training.run_glue import GlueTrainer

PAD, SOS, ZERO, ONE = 0, 1, 2, 3

#: Paper Table 1 (training accuracy %, vanilla / N-ODE) for comparison in the output.
PAPER_TABLE_1 = {
    (4, 1): (77.9, 76.4), (4, 2): (90.7, 75.5), (4, 3): (87.2, 76.9), (4, 4): (91.4, 78.2),
    (6, 1): (91.5, 78.9), (6, 2): (98.3, 85.7), (6, 3): (95.3, 85.4), (6, 4): (95.6, 80.9),
    (8, 1): (98.2, 82.6), (8, 2): (98.8, 83.6), (8, 3): (98.5, 86.2), (8, 4): (99.0, 86.2),
    (10, 1): (98.6, 84.2), (10, 2): (99.0, 87.2), (10, 3): (99.4, 86.8), (10, 4): (98.9, 84.0),
}  # fmt: skip


def parity_dataset(max_length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every binary string of length 1…max_length as ``[SOS] bits [PAD]…``, its mask and its parity."""
    strings = [bits for length in range(1, max_length + 1) for bits in itertools.product((0, 1), repeat=length)]
    input_ids = torch.full((len(strings), max_length + 1), PAD)
    attention_mask = torch.zeros_like(input_ids)
    for row, bits in enumerate(strings):
        input_ids[row, 0] = SOS
        input_ids[row, 1 : len(bits) + 1] = torch.tensor(bits) + ZERO
        attention_mask[row, : len(bits) + 1] = 1
    labels = torch.tensor([sum(bits) % 2 for bits in strings])
    return input_ids, attention_mask, labels


class ParityClassifier(nn.Module):
    """Encoder → SOS state → two-layer dimension-preserving FFN → linear classifier (paper §4).

    In training it keeps the accuracy and the number of function evaluations of its last forward
    (:attr:`last_training_forward`): PARITY's "best training accuracy" is read off each full-batch step's
    own forward, as in the paper."""

    def __init__(self, config: NodeTransformerConfig) -> None:
        super().__init__()
        self.encoder = NodeTransformerModel(config, add_pooling_layer=False)
        width = config.hidden_size
        self.head = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
        self.classifier = nn.Linear(width, 2)
        self.last_training_forward: tuple[float, float] | None = None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> dict:
        output = self.encoder(input_ids=input_ids, attention_mask=attention_mask, output_diagnostics=True)
        nfe = float(output.diagnostics["nfe_total"]) if output.diagnostics else 0.0
        logits = self.classifier(self.head(output.last_hidden_state[:, 0]))
        if self.training:
            self.last_training_forward = (float((logits.argmax(-1) == labels).float().mean()), nfe)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


class FullBatch(torch.utils.data.Dataset):
    """Every string of :func:`parity_dataset` as one example: the full batch ``{"input_ids",
    "attention_mask", "labels"}`` the paper trains on at each step. Handing the Trainer one prepared batch
    (batch size 1, :func:`unwrap`) instead of 126 examples to collate keeps the engine's per-step work out of
    the time to best as far as it can."""

    def __init__(self, data: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
        input_ids, attention_mask, labels = data
        self.batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.batch


def unwrap(features: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The collator of :class:`FullBatch`: its one example is already the batch."""
    (batch,) = features
    return batch


class BestTrainingAccuracy(TrainerCallback):
    """After each step: the best training accuracy so far, the wall time and step that first reached it
    (from the start of training) and the NFE per forward; stops the run at 100%."""

    def __init__(self) -> None:
        self.best_accuracy, self.time_to_best, self.step_of_best, self.nfe = -1.0, 0.0, 0, []
        self.started = time.perf_counter()

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        accuracy, nfe = model.last_training_forward
        self.nfe.append(nfe)
        if accuracy > self.best_accuracy:
            self.best_accuracy, self.step_of_best = accuracy, state.global_step
            self.time_to_best = time.perf_counter() - self.started
        control.should_training_stop = self.best_accuracy == 1.0


def model_config(dim: int, blocks: int, block_type: str, max_length: int) -> NodeTransformerConfig:
    return NodeTransformerConfig(
        vocab_size=4,
        hidden_size=dim,
        num_attention_heads=max(dim // 2, 1),
        intermediate_size=dim,
        num_hidden_layers=blocks,
        max_position_embeddings=max_length + 1,
        type_vocab_size=1,
        pad_token_id=PAD,
        layer_scheme=block_type,  # the records' block_type names the scheme: "ode" or "vanilla"
        hidden_act="relu",
    )


def training_arguments(learning_rate: float, seed: int, epochs: int, output_dir: str) -> TrainingArguments:
    """The paper's optimisation on the Trainer: full-batch Adam (AdamW without decay) at a constant rate,
    no clipping, every string in one batch (:class:`FullBatch`), one step per epoch."""
    return TrainingArguments(
        output_dir=output_dir, max_steps=epochs, per_device_train_batch_size=1, learning_rate=learning_rate,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=0.0, optim="adamw_torch",
        seed=seed, remove_unused_columns=False, logging_strategy="no", save_strategy="no",
        report_to="none", disable_tqdm=True, log_level="error", dataloader_pin_memory=False, use_cpu=True,
    )  # fmt: skip


def train_run(
    dim: int, blocks: int, block_type: str, learning_rate: float, seed: int, epochs: int, data: tuple
) -> dict:
    """One run on the fine-tuning engine's Trainer; returns the best training accuracy, when it was first
    reached, NFE — or, for a run stopped by a non-finite loss or gradient or a solver failure, its status
    and cause (such a run is reported, never averaged in)."""
    strings = FullBatch(data)
    torch.manual_seed(seed)
    model = ParityClassifier(model_config(dim, blocks, block_type, data[0].shape[1] - 1))
    tracker = BestTrainingAccuracy()
    parameters = sum(p.numel() for p in model.parameters())
    record: dict = {"learning_rate": learning_rate, "seed": seed, "parameters": parameters}
    with tempfile.TemporaryDirectory(prefix="parity-run-") as scratch:
        trainer = GlueTrainer(model=model, args=training_arguments(learning_rate, seed, epochs, scratch),
                              train_dataset=strings, data_collator=unwrap, callbacks=[tracker])  # fmt: skip
        for printer in (PrinterCallback, ProgressCallback):
            trainer.remove_callback(printer)
        try:
            trainer.train()
        except NonFiniteStepError as error:
            return {**record, "status": "diverged", "cause": error.summary, "nonfinite_gradients": error.parameters}
        except ODESolverError as error:
            return {**record, "status": "solver_failed", "failed_at_step": trainer.state.global_step,
                    "error": str(error)}  # fmt: skip
    return {
        **record,
        "status": "finished",
        "best_accuracy": tracker.best_accuracy,
        "time_to_best_s": tracker.time_to_best,
        "epoch_of_best": tracker.step_of_best,
        "epochs_run": trainer.state.global_step,
        "mean_nfe_per_forward": sum(tracker.nfe) / len(tracker.nfe),
    }


def summarise(runs: list[dict], drop_fraction: float) -> dict:
    """The paper's rule over the finished runs: drop the worst ``drop_fraction`` of them, average the rest.
    Runs that stopped (non-finite values, solver failures) are counted by status, not averaged in."""
    finished = [run for run in runs if run["status"] == "finished"]
    stopped = {status: sum(run["status"] == status for run in runs) for status in ("diverged", "solver_failed")}
    if not finished:
        return {"runs": len(runs), "kept": 0, **stopped}
    kept = sorted(finished, key=lambda run: run["best_accuracy"], reverse=True)
    kept = kept[: max(1, len(finished) - math.floor(len(finished) * drop_fraction))]
    return {
        "runs": len(runs),
        "kept": len(kept),
        **stopped,
        "mean_best_accuracy": sum(r["best_accuracy"] for r in kept) / len(kept),
        "mean_time_to_best_s": sum(r["time_to_best_s"] for r in kept) / len(kept),
        "mean_nfe_per_forward": sum(r["mean_nfe_per_forward"] for r in kept) / len(kept),
        "parameters": kept[0]["parameters"],
    }


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys((cell["dim"], cell["blocks"]) for cell in results["cells"]))
    labels = [f"d={dim}, N={blocks}" for dim, blocks in shapes]
    figure, (accuracy_axis, time_axis) = plt.subplots(1, 2, figsize=(11, 4))
    for offset, block_type in ((-0.2, "vanilla"), (0.2, "ode")):
        kept = [(shapes.index((c["dim"], c["blocks"])), c) for c in results["cells"]
                if c["block_type"] == block_type and c["kept"]]  # a cell with no finished run has no bar
        positions = [index + offset for index, _ in kept]
        name = "vanilla (eq. 1)" if block_type == "vanilla" else "N-ODE (eq. 2)"
        accuracy_axis.bar(positions, [100 * c["mean_best_accuracy"] for _, c in kept], width=0.4, label=name)
        time_axis.bar(positions, [c["mean_time_to_best_s"] for _, c in kept], width=0.4, label=name)
    for index, shape in enumerate(shapes):
        if paper := PAPER_TABLE_1.get(shape):
            accuracy_axis.plot([index - 0.2, index + 0.2], paper, "k_", markersize=18, markeredgewidth=2)
    accuracy_axis.plot([], [], "k_", markersize=12, markeredgewidth=2, label="paper Table 1")
    for axis, ylabel in ((accuracy_axis, "mean best training accuracy (%)"), (time_axis, "mean time to best (s)")):
        axis.set_xticks(range(len(labels)))
        axis.set_xticklabels(labels, rotation=30)
        axis.set_ylabel(ylabel)
        axis.legend(fontsize=8)
    accuracy_axis.set_ylim(40, 101)
    figure.suptitle(f"PARITY, strings of length ≤ {results['settings']['max_length']}")
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/parity"))
    parser.add_argument("--max_length", type=int, default=6, help="Longest binary string n.")
    parser.add_argument("--dims", type=int, nargs="+", default=[4, 8], help="Embedding dimensions d.")
    parser.add_argument("--blocks", type=int, nargs="+", default=[1, 2], help="Numbers of blocks N.")
    parser.add_argument("--block_types", nargs="+", default=["vanilla", "ode"], choices=["vanilla", "ode"])
    parser.add_argument("--learning_rates", type=float, nargs="+", default=[3e-3, 1e-2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=600, help="Full-batch training steps per run.")
    parser.add_argument("--drop_fraction", type=float, default=1 / 6, help="Worst share of runs to drop.")
    args = parser.parse_args()
    torch.set_num_threads(max(torch.get_num_threads(), 1))

    data = parity_dataset(args.max_length)
    grid = list(itertools.product(args.dims, args.blocks, args.block_types))
    runs_per_cell = len(args.learning_rates) * len(args.seeds)
    cells = []
    with tqdm(total=len(grid) * runs_per_cell, desc="PARITY runs") as progress:
        for dim, blocks, block_type in grid:
            runs = []
            for learning_rate, seed in itertools.product(args.learning_rates, args.seeds):
                runs.append(train_run(dim, blocks, block_type, learning_rate, seed, args.epochs, data))
                last = runs[-1]
                shown = f"{last['best_accuracy']:.3f}" if last["status"] == "finished" else last["status"]
                progress.set_postfix(d=dim, N=blocks, type=block_type, acc=shown)
                progress.update()
            summary = summarise(runs, args.drop_fraction)
            paper = PAPER_TABLE_1.get((dim, blocks))
            cells.append(
                {
                    "dim": dim,
                    "blocks": blocks,
                    "block_type": block_type,
                    **summary,
                    "paper_accuracy_percent": None if paper is None else paper[0 if block_type == "vanilla" else 1],
                    "all_runs": runs,
                }
            )
    results = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "machine": {"platform": platform.platform(), "threads": torch.get_num_threads(), "torch": torch.__version__},
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "engine": "transformers.Trainer (hf_variants.training.run_glue.GlueTrainer)",
        "num_strings": len(data[2]),
        "cells": cells,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "parity.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, args.output_dir / "parity.png")
    print(f"{'d':>3} {'N':>2} {'type':>8} {'acc %':>7} {'paper %':>8} {'time s':>8} {'NFE/fwd':>8} {'params':>7}")
    for cell in cells:
        paper = cell["paper_accuracy_percent"]
        if not cell["kept"]:
            print(f"{cell['dim']:>3} {cell['blocks']:>2} {cell['block_type']:>8}  no run finished")
            continue
        print(
            f"{cell['dim']:>3} {cell['blocks']:>2} {cell['block_type']:>8} {100 * cell['mean_best_accuracy']:7.1f} "
            f"{'' if paper is None else f'{paper:.1f}':>8} {cell['mean_time_to_best_s']:8.1f} "
            f"{cell['mean_nfe_per_forward']:8.1f} {cell['parameters']:7d}"
        )


if __name__ == "__main__":
    main()
