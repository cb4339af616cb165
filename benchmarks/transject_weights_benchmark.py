#!/usr/bin/env python
"""TransJect's orthogonal weights: the exact maps compared, and their share of a training step.

    python benchmarks/transject_weights_benchmark.py --output_dir OUT

1. **The maps.** For a stack of d × d matrices (as many as a 4-layer TransJect has at hidden 256; fewer
   at 768), forward + backward of ``base @ map(skew(X))`` — Cayley, matrix exponential, Householder
   product — all in one batched call, and, for each, one call per matrix (how torch's parametrisation
   runs them, layer by layer); the largest deviation from orthogonality ``max |QᵀQ − I|``. Offsets at
   initialisation (zero) and at a trained model's scale.
2. **The step.** One MLM training step (forward, backward, AdamW) at hidden 256, N = 128, batch 8, 4
   layers, in interleaved rounds: TransJect as it runs (all matrices in one batched call per forward pass),
   TransJect computing each matrix in its layer (torch's ``parametrize.cached``, as before the batching),
   its twin with the same matrices as plain weights (no parametrisation at all: the bound on what any map
   could reach), and its matched control. Also four micro-batches of one optimizer step with the matrices
   held for the whole step (``hold_parametrized_weights(accumulate_gradients=True)``) against one forward
   pass each.

Writes ``transject_weights.json`` and ``transject_weights.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import sys
from pathlib import Path

import torch
from benchmark import build, recorded_arguments, save_benchmark_record, timed, twin
from torch.nn.utils import parametrize

from hf_variants.core import modeling_encoder
from hf_variants.core.configuration_orthogonal_weights import ORTHOGONAL_MAPS
from hf_variants.core.modeling_orthogonal_weights import OrthogonalLinear, orthogonal_matrices
from hf_variants.training.run_mlm import send_waiting_gradients

VOCAB = 8000


def offsets(count: int, size: int, scale: float, orthogonal_map: str, seed: int = 0) -> torch.Tensor:
    """Offsets X of ``count`` parametrisations; Householder keeps the signs ±1 on the diagonal."""
    generator = torch.Generator().manual_seed(seed)
    stack = torch.randn(count, size, size, generator=generator) * scale
    if orthogonal_map == "householder":
        stack.diagonal(dim1=-2, dim2=-1).copy_(torch.where(torch.rand(count, size, generator=generator) < 0.5, -1, 1))
    return stack


def map_seconds(stack: torch.Tensor, bases: torch.Tensor, orthogonal_map: str, batched: bool, repeats: int) -> float:
    def once() -> None:
        leaf = stack.clone().requires_grad_()
        if batched:
            matrices = orthogonal_matrices(leaf, bases, orthogonal_map)
        else:
            matrices = torch.stack([orthogonal_matrices(x[None], b[None], orthogonal_map)[0]
                                    for x, b in zip(leaf, bases, strict=True)])  # fmt: skip
        matrices.sum().backward()

    once()
    return statistics.median(timed(once) for _ in range(repeats))


def compare_maps(sizes: dict[int, int], scales: list[float], repeats: int) -> list[dict]:
    rows = []
    for size, count in sizes.items():
        bases = torch.linalg.qr(torch.randn(count, size, size, generator=torch.Generator().manual_seed(1)))[0]
        for scale in scales:
            for orthogonal_map in ORTHOGONAL_MAPS:
                stack = offsets(count, size, scale, orthogonal_map)
                with torch.no_grad():
                    matrices = orthogonal_matrices(stack, bases, orthogonal_map)
                    error = float((matrices.mT @ matrices - torch.eye(size)).abs().max())
                row = {"hidden": size, "matrices": count, "offset_scale": scale, "map": orthogonal_map,
                       "batched_seconds": map_seconds(stack, bases, orthogonal_map, True, repeats),
                       "one_by_one_seconds": map_seconds(stack, bases, orthogonal_map, False, repeats),
                       "orthogonality_error": error}  # fmt: skip
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def each_in_its_layer(model: torch.nn.Module) -> parametrize.cached:
    """Torch's parametrisation, each matrix computed where its layer first uses it (the unbatched path)."""
    return parametrize.cached()


def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batches: list[dict], hold: bool) -> None:
    """One optimizer step over ``batches``; with ``hold``, the matrices held for all of them (as the pretraining
    engine does)."""
    with model.hold_parametrized_weights(accumulate_gradients=True) if hold else contextlib.nullcontext() as held:
        for inputs in batches:
            (model(**inputs).loss / len(batches)).backward()
    send_waiting_gradients(held)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def compare_steps(args: argparse.Namespace) -> dict:
    from benchmark import batch

    transject = build("transject", 256, 4, VOCAB, args.length, "sdpa")
    plain = twin(transject)
    for module in list(plain.modules()):
        if isinstance(module, OrthogonalLinear) and parametrize.is_parametrized(module, "weight"):
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)
    models = {"transject": transject, "transject, each matrix in its layer": transject, "plain twin": plain,
              "control": build("control of transject", 256, 4, VOCAB, args.length, "sdpa")}  # fmt: skip
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=1e-4) for name, model in models.items()}
    one = [batch(VOCAB, args.batch_size, args.length)]
    four = [batch(VOCAB, args.batch_size, args.length, seed=seed) for seed in range(4)]
    cases = {**{name: (name, one, False) for name in models},
             "transject, 4 micro-batches, held for the step": ("transject", four, True),
             "transject, 4 micro-batches, once per forward pass": ("transject", four, False)}  # fmt: skip
    batched = modeling_encoder.held_orthogonal_weights
    timings: dict[str, list[float]] = {case: [] for case in cases}
    for round_ in range(args.step_repeats + 1):  # round 0 warms up
        for case, (name, batches, hold) in cases.items():
            unbatched = name == "transject, each matrix in its layer"
            modeling_encoder.held_orthogonal_weights = each_in_its_layer if unbatched else batched
            seconds = timed(functools.partial(step, models[name], optimizers[name], batches, hold))
            if round_:
                timings[case].append(seconds)
    modeling_encoder.held_orthogonal_weights = batched
    seconds = {case: statistics.median(values) for case, values in timings.items()}
    return {
        "hidden": 256, "length": args.length, "batch": args.batch_size, "layers": 4, "seconds": seconds,
        "vs_control": {case: seconds["control"] / value for case, value in seconds.items() if "micro" not in case},
        "parametrisation_share": {
            "batched": 1 - seconds["plain twin"] / seconds["transject"],
            "each matrix in its layer": 1 - seconds["plain twin"] / seconds["transject, each matrix in its layer"],
        },
        "held_for_the_step_vs_per_forward": seconds["transject, 4 micro-batches, once per forward pass"]
        / seconds["transject, 4 micro-batches, held for the step"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, required=True)
    parser.add_argument("--map_sizes", default="256=41,768=8", help="hidden=matrices in the stack, comma-separated")
    parser.add_argument("--offset_scales", nargs="+", type=float, default=[0.0, 0.02])
    parser.add_argument("--map_repeats", type=int, default=3)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--step_repeats", type=int, default=7)
    args = parser.parse_args()
    sizes = {int(k): int(v) for k, v in (item.split("=") for item in args.map_sizes.split(","))}
    torch.manual_seed(0)
    record = {"command": " ".join(["benchmarks/transject_weights_benchmark.py", *recorded_arguments(sys.argv[1:])]),
              "threads": torch.get_num_threads(), "torch": torch.__version__,
              "maps": compare_maps(sizes, args.offset_scales, args.map_repeats),
              "steps": compare_steps(args)}  # fmt: skip
    save_benchmark_record(args.output_dir, "transject_weights", record)


if __name__ == "__main__":
    main()
