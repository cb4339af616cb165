#!/usr/bin/env python
"""Model benchmarks against ``transformers.BertForMaskedLM`` (sdpa) of matched size, and against the
machine's measured fp32 matmul peak (README "Performance").

    python scripts/benchmark.py --output_dir docs/benchmarks

For every hidden size and sequence length: one MLM training step (forward, backward, AdamW) and one
inference forward per model, medians of interleaved repeats (every model once per round, so drift
of the machine hits all alike), ratios to BERT from the same rounds. Also:

* FLOPs of a training step counted with ``torch.utils.flop_counter.FlopCounterMode`` on the eager
  attention path (the same arithmetic as sdpa, which the counter does not see on the CPU); model
  FLOP utilisation = FLOPs / step time / peak, the peak being the best of repeated 4096² fp32
  matmuls on this machine with the same threads;
* memory: bytes of the tensors saved for backward (distinct storages, ``saved_tensors_hooks``) plus
  parameters, gradients and AdamW's two moments — the resident training state of a step;
* the exponent of step time in N, fitted between the two longest lengths measured per model;
* N-ODE: per solver tolerance, function evaluations and forward time, and time per function
  evaluation against one vanilla block of the same width (``block_type="vanilla"``);
* TransJect: time of evaluating its orthogonal parametrisations (forward and backward), as a
  fraction of its training step.

Writes ``model_benchmark.json`` and ``model_benchmark.png``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForMaskedLM, BertConfig, BertForMaskedLM

import hf_variants  # noqa: F401  (registers the variants)

MODELS = ("bert", "macaron_bert", "mgk_bert", "mlk_bert", "transject", "node_transformer")


def build(name: str, hidden: int, layers: int, vocab: int, max_len: int, attention: str) -> torch.nn.Module:
    heads = hidden // 64
    common = dict(
        hidden_size=hidden, num_hidden_layers=layers, intermediate_size=4 * hidden, vocab_size=vocab,
        max_position_embeddings=max_len, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    if name == "bert":
        return BertForMaskedLM(BertConfig(num_attention_heads=heads, attn_implementation=attention, **common))
    if name in ("mgk_bert", "mlk_bert"):
        kind = "linear" if name == "mlk_bert" else "gaussian"
        config = AutoConfig.for_model("mgk_bert", num_attention_heads=max(heads // 2, 1), head_dim=64,
                                      attention_kind=kind, **common)  # fmt: skip
    elif name == "transject":
        common.pop("intermediate_size")
        config = AutoConfig.for_model("transject", num_experts=4, **common)
    elif name.startswith("node_transformer"):
        block = "vanilla" if name.endswith("vanilla") else "ode"
        config = AutoConfig.for_model("node_transformer", num_attention_heads=heads, block_type=block,
                                      rtol=1e-3, atol=1e-3, **common)  # fmt: skip
    else:
        config = AutoConfig.for_model(name, num_attention_heads=heads, **common)
    if name == "transject":  # no softmax attention: neither eager nor sdpa applies
        return AutoModelForMaskedLM.from_config(config)
    return AutoModelForMaskedLM.from_config(config, attn_implementation=attention)


def batch(vocab: int, size: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (size, length), generator=generator)
    labels = torch.full_like(ids, -100)
    masked = torch.rand(ids.shape, generator=generator) < 0.15
    labels[masked] = ids[masked]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, inputs: dict) -> None:
    loss = model(**inputs).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def interleaved_timings(
    models: dict[str, torch.nn.Module], optimizers: dict[str, torch.optim.Optimizer], inputs: dict, repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Training-step and inference seconds per model, every model once per round."""
    forward = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
    for name, model in models.items():  # warm-up (and the first AdamW state allocation)
        train_step(model.train(), optimizers[name], inputs)
    step: dict[str, list[float]] = {name: [] for name in models}
    infer: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(repeats):
        for name, model in models.items():
            model.train()
            started = time.perf_counter()
            train_step(model, optimizers[name], inputs)
            step[name].append(time.perf_counter() - started)
            model.eval()
            with torch.no_grad():
                started = time.perf_counter()
                model(**forward)
                infer[name].append(time.perf_counter() - started)
    return step, infer


def training_flops(name: str, hidden: int, layers: int, vocab: int, length: int, size: int) -> int:
    model = build(name, hidden, layers, vocab, length, "eager").train()
    inputs = batch(vocab, size, length)
    with FlopCounterMode(display=False) as counter:
        model(**inputs).loss.backward()
    return int(counter.get_total_flops())


def state_memory(model: torch.nn.Module, inputs: dict) -> int:
    """Bytes saved for backward (distinct storages) + parameters, gradients and AdamW moments."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(**inputs).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    return sum(storages.values()) + 4 * parameters


def matmul_peak(size: int = 4096, repeats: int = 5) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best = min(timed(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2 * size**3 / best


def orthogonal_overhead_seconds(model: torch.nn.Module, repeats: int) -> float:
    """Time to evaluate (and backpropagate through) every orthogonal parametrisation once."""
    from torch.nn.utils import parametrize

    modules = [m for m in model.modules() if parametrize.is_parametrized(m)]

    def evaluate() -> None:
        total = sum(getattr(m, name).sum() for m in modules for name in m.parametrizations)
        total.backward()
        model.zero_grad(set_to_none=True)

    evaluate()
    return statistics.median(timed(evaluate) for _ in range(repeats))


def fit_exponent(lengths: list[int], seconds: list[float]) -> float | None:
    if len(lengths) < 2:
        return None
    return float(np.polyfit(np.log(lengths[-2:]), np.log(seconds[-2:]), 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=Path("docs/benchmarks"))
    parser.add_argument("--hidden_sizes", nargs="+", type=int, default=[256, 512])
    parser.add_argument("--lengths", nargs="+", type=int, default=[128, 512, 2048])
    parser.add_argument("--mlk_lengths", nargs="+", type=int, default=[4096], help="Extra lengths for MLK/BERT.")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--max_length_by_model", default="node_transformer=512,transject=2048",
                        help="Skip longer lengths for these models (too slow on a CPU).")  # fmt: skip
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tolerances", nargs="+", type=float, default=[1e-2, 1e-3, 1e-4, 1e-5])
    args = parser.parse_args()
    limits = {k: int(v) for k, v in (item.split("=") for item in args.max_length_by_model.split(",") if item)}
    torch.manual_seed(0)
    peak = matmul_peak()
    print(f"fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s ({torch.get_num_threads()} threads)", flush=True)

    rows = []
    for hidden in args.hidden_sizes:
        for length in [*args.lengths, *args.mlk_lengths]:
            extra = length in args.mlk_lengths and length not in args.lengths
            names = [
                n for n in args.models if length <= limits.get(n, length) and (not extra or n in ("bert", "mlk_bert"))
            ]
            if "bert" not in names:
                continue
            inputs = batch(args.vocab_size, args.batch_size, length)
            models = {n: build(n, hidden, args.layers, args.vocab_size, length, "sdpa") for n in names}
            optimizers = {n: torch.optim.AdamW(m.parameters(), lr=1e-4) for n, m in models.items()}
            step, infer = interleaved_timings(models, optimizers, inputs, args.repeats)
            bert_step = statistics.median(step["bert"])
            for name in names:
                flops = training_flops(name, hidden, args.layers, args.vocab_size, length, args.batch_size)
                seconds = statistics.median(step[name])
                row = {
                    "model": name, "hidden": hidden, "length": length, "batch": args.batch_size,
                    "parameters": sum(p.numel() for p in models[name].parameters()),
                    "step_seconds": seconds, "tokens_per_second": args.batch_size * length / seconds,
                    "throughput_vs_bert": bert_step / seconds,
                    "inference_seconds": statistics.median(infer[name]),
                    "training_state_bytes": state_memory(models[name].train(), inputs),
                    "step_flops": flops, "mfu": flops / seconds / peak,
                }  # fmt: skip
                if name == "transject":
                    overhead = orthogonal_overhead_seconds(models[name], args.repeats)
                    row["orthogonal_overhead_fraction"] = overhead / seconds
                rows.append(row)
                print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)

    exponents = {}
    for hidden in args.hidden_sizes:
        for name in args.models:
            points = sorted(
                (r["length"], r["step_seconds"]) for r in rows if r["model"] == name and r["hidden"] == hidden
            )
            exponent = fit_exponent([p[0] for p in points], [p[1] for p in points])
            if exponent is not None:
                exponents[f"{name}/h{hidden}"] = {"exponent": exponent, "between": [points[-2][0], points[-1][0]]}

    ode = node_tolerance_sweep(args)
    results = {
        "command": " ".join(["scripts/benchmark.py", *sys.argv[1:]]),
        "threads": torch.get_num_threads(),
        "matmul_peak_flops": peak,
        "rows": rows,
        "exponents": exponents,
        "node_transformer": ode,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "model_benchmark.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, args.output_dir / "model_benchmark.png")
    print(json.dumps({"exponents": exponents, "node_transformer": ode}, indent=2))


def node_tolerance_sweep(args: argparse.Namespace, hidden: int = 256, length: int = 128) -> dict:
    """NFE and forward time per tolerance; time per NFE vs one vanilla block (same width)."""
    inputs = batch(args.vocab_size, args.batch_size, length)
    forward = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
    vanilla = build("node_transformer_vanilla", hidden, args.layers, args.vocab_size, length, "sdpa").eval()
    ode = build("node_transformer", hidden, args.layers, args.vocab_size, length, "sdpa").eval()
    ode.load_state_dict(vanilla.state_dict(), strict=False)
    sweep = []
    with torch.no_grad():
        vanilla(**forward)
        block = statistics.median(timed(lambda: vanilla(**forward)) for _ in range(args.repeats)) / args.layers
        for tolerance in args.tolerances:
            ode.config.rtol = ode.config.atol = tolerance  # the blocks read the solver settings per forward
            nfe = int(ode(**forward).diagnostics["nfe_total"])
            seconds = statistics.median(timed(lambda: ode(**forward)) for _ in range(args.repeats))
            sweep.append({
                "tolerance": tolerance, "nfe_total": nfe, "forward_seconds": seconds,
                "seconds_per_nfe": seconds / nfe, "per_nfe_vs_vanilla_block": seconds / nfe / block,
            })  # fmt: skip
    return {"hidden": hidden, "length": length, "vanilla_block_seconds": block, "sweep": sweep}


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hidden_sizes = sorted({r["hidden"] for r in results["rows"]})
    figure, axes = plt.subplots(1, len(hidden_sizes), figsize=(5 * len(hidden_sizes), 3.6), squeeze=False)
    for axis, hidden in zip(axes[0], hidden_sizes, strict=True):
        for name in dict.fromkeys(r["model"] for r in results["rows"]):
            points = sorted((r["length"], r["tokens_per_second"]) for r in results["rows"]
                            if r["model"] == name and r["hidden"] == hidden)  # fmt: skip
            axis.plot(*zip(*points, strict=True), marker="o", label=name)
        axis.set(xscale="log", yscale="log", xlabel="sequence length", ylabel="training tokens/s",
                 title=f"MLM training step, hidden {hidden}")  # fmt: skip
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


if __name__ == "__main__":
    main()
