#!/usr/bin/env python
"""Throughput at the batch that fills the device (``python benchmarks/benchmark.py --saturating_batch``).

A benchmark at a fixed small batch measures kernel launches on a GPU, not the models. Here, per model
and sequence length, the batch is doubled from ``--batch_size`` until a doubling raises training
tokens/s by less than 5%, memory runs out or ``--max_batch_size`` is reached. The *saturating batch* is
the last batch that still paid: the one before that doubling (or the last that fitted). Its tokens/s
and MFU (FLOPs counted as in ``benchmark.py``, over the measured matmul peak of the precision) are
reported beside the first, fixed batch of the sweep. Each variant's ratio to its matched control
compares the two at their own saturating batches; unlike ``benchmark.py``'s rows they come from
separate sweeps, not interleaved rounds.

Writes ``saturation.json`` and ``saturation.md`` into ``--output_dir``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from benchmark import (
    CONTROL_PREFIX,
    MODELS,
    Device,
    batch,
    build,
    model_flops_utilisation,
    recorded_arguments,
    train_step,
    training_flops,
)

#: A doubling of the batch must raise tokens/s by at least this factor to count as still filling the device.
MIN_GAIN = 1.05
#: The BERT control of our core, which the pretraining engine trains, beside the variants and their controls.
SATURATION_MODELS = (*MODELS, "bert_control")


def step_seconds(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, inputs: dict, device: Device, repeats: int
) -> float:
    """The median time of ``repeats`` training steps after a warm-up step at this shape."""
    train_step(model, optimizer, inputs, device)
    timings = [device.seconds(lambda: train_step(model, optimizer, inputs, device)) for _ in range(repeats)]
    return statistics.median(timings)


def sweep(name: str, hidden: int, length: int, args: argparse.Namespace, device: Device) -> dict:
    """Tokens/s of training steps at batches ``--batch_size``, 2×, 4×, … until the gain is under 5%, memory
    runs out or the batch would exceed ``--max_batch_size``; the saturating batch and why the sweep stopped."""
    model = build(name, hidden, args.layers, args.vocab_size, length, "sdpa", device.name).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    points: list[dict] = []
    stopped, size = "reached --max_batch_size", args.batch_size
    while size <= args.max_batch_size:
        inputs = batch(args.vocab_size, size, length, device=device.name)
        try:
            seconds = step_seconds(model, optimizer, inputs, device, args.repeats)
        except torch.OutOfMemoryError:
            stopped = f"out of memory at batch {size}"
            break
        finally:
            del inputs
            if device.is_cuda:
                torch.cuda.empty_cache()
        points.append({"batch": size, "step_seconds": seconds, "tokens_per_second": size * length / seconds})
        if len(points) > 1 and points[-1]["tokens_per_second"] < MIN_GAIN * points[-2]["tokens_per_second"]:
            stopped = f"gain under {100 * (MIN_GAIN - 1):.0f}% from {points[-2]['batch']} to {size}"
            break
        size *= 2
    saturating = (points[-2] if stopped.startswith("gain") else points[-1]) if points else None
    return {"model": name, "hidden": hidden, "length": length, "precision": device.precision,
            "sweep": points, "stopped": stopped, "saturating": saturating}  # fmt: skip


def with_flops(row: dict, args: argparse.Namespace, device: Device, peak: float) -> dict:
    """The row's FLOPs and MFU at its fixed (first) and saturating batches."""
    for key in ("fixed", "saturating"):
        point = row["sweep"][0] if key == "fixed" else row["saturating"]
        if point is not None:
            flops = training_flops(row["model"], row["hidden"], args.layers, args.vocab_size, row["length"],
                                   point["batch"], device.name)  # fmt: skip
            row[f"{key}_mfu"] = model_flops_utilisation(flops, point["step_seconds"], peak)
    return row


def saturation_rows(args: argparse.Namespace, device: Device, peak: float) -> list[dict]:
    """One row per model (each variant followed by its matched control) × hidden size × length."""
    limits = {k: int(v) for k, v in (item.split("=") for item in args.max_length_by_model.split(",") if item)}
    rows = []
    for hidden in args.hidden_sizes:
        for length in args.lengths:
            names = [n for n in args.models if length <= limits.get(n, length)]
            controls = {n: CONTROL_PREFIX + n for n in names if n not in ("bert", "bert_control")}
            measured = {}
            for name in [m for n in names for m in (n, controls.get(n)) if m is not None]:
                row = with_flops(sweep(name, hidden, length, args, device), args, device, peak)
                measured[name] = row
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "sweep"}), flush=True)
            for name, control in controls.items():
                ours, theirs = measured[name]["saturating"], measured[control]["saturating"]
                if ours is not None and theirs is not None:
                    measured[name]["vs_control"] = ours["tokens_per_second"] / theirs["tokens_per_second"]
    return rows


def markdown(results: dict) -> str:
    lines = [
        f"`python {results['command']}` — {results['device']}; batches doubled from "
        f"{results['rows'][0]['sweep'][0]['batch']} until a doubling gains under {100 * (MIN_GAIN - 1):.0f}%.",
        "",
        "Saturating batch: the last batch whose doubling still raised training tokens/s by 5% or more (or the "
        "last that fitted). × control: tokens/s over the matched control's, each at its own saturating batch "
        "(separate sweeps). MFU: counted FLOPs per second over the measured matmul peak of the row's precision.",
        "",
        "| hidden | N | model | precision | fixed batch | tokens/s | MFU | saturating batch | tokens/s | "
        "× control | MFU | sweep stopped |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results["rows"]:
        fixed, best = r["sweep"][0] if r["sweep"] else None, r["saturating"]
        cells = [f"{fixed['batch']}", f"{fixed['tokens_per_second']:,.0f}", f"{100 * r['fixed_mfu']:.0f}%"] \
            if fixed else ["—"] * 3  # fmt: skip
        cells += [f"{best['batch']}", f"{best['tokens_per_second']:,.0f}",
                  f"{r['vs_control']:.2f}" if "vs_control" in r else "—", f"{100 * r['saturating_mfu']:.0f}%"] \
            if best else ["—"] * 4  # fmt: skip
        lines.append(f"| {r['hidden']} | {r['length']} | {r['model']} | {r['precision']} | {' | '.join(cells)} | "
                     f"{r['stopped']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> dict:
    """The sweep of every model × hidden × length × precision; writes saturation.json and saturation.md."""
    peak_size = 512 if args.tiny else None
    rows = []
    for precision in args.precisions:
        device = Device(args.device, precision)
        rows += saturation_rows(args, device, device.matmul_peak(peak_size))
    results = {"command": " ".join(["benchmarks/benchmark.py", *recorded_arguments(sys.argv[1:])]),
               **Device(args.device).describe(),
               "min_gain": MIN_GAIN, "rows": rows}  # fmt: skip
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "saturation.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.output_dir / "saturation.md").write_text(markdown(results))
    return results


def saturating_batch(results: dict, model: str, length: int, precision: str) -> int:
    """The saturating batch of ``model`` at ``length`` in a saturation.json (what the device check pretrains at)."""
    for row in results["rows"]:
        if (row["model"], row["length"], row["precision"]) == (model, length, precision) and row["saturating"]:
            return row["saturating"]["batch"]
    raise SystemExit(f"saturation.json has no saturating batch of {model} at N = {length} in {precision}")


if __name__ == "__main__":  # python benchmarks/benchmark_saturation.py saturation.json MODEL LENGTH PRECISION
    print(saturating_batch(json.loads(Path(sys.argv[1]).read_text()), sys.argv[2], int(sys.argv[3]), sys.argv[4]))
