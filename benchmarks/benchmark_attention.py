#!/usr/bin/env python
"""Benchmark MGK attention: fused (one SDPA call) vs reference vs BERT's self-attention, MLK vs
softmax scaling, and an MGK-BERT (H/2 heads) MLM training step vs BertForMaskedLM (H heads).

Writes ``<output_dir>/attention_benchmark.json`` and ``attention_benchmark.png``::

    python benchmarks/benchmark_attention.py --output_dir OUT

Timings are medians over interleaved repeats (every implementation measured once per round), so
slow drifts of the machine hit all of them alike. Peak memory is measured in a fresh subprocess per
point (after one warm-up step) as the peak resident set size during one step minus the resident size
before it: Linux's ``VmHWM`` is reset through ``/proc/self/clear_refs``. CPU tensors have no
allocator statistics, so this is what the operating system had to provide.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import BertConfig, BertForMaskedLM
from transformers.models.bert.modeling_bert import BertSelfAttention

from hf_variants.core import composition
from hf_variants.core.inputs import TokenLayout
from hf_variants.mgk_bert import MgkBertConfig, MgkBertForMaskedLM

HIDDEN, BERT_HEADS, HEAD_DIM = 256, 4, 64


# ------------------------------------------------------------------------------------------------
# Attention modules under test
# ------------------------------------------------------------------------------------------------
def build_attention(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "bert_sdpa":
        config = BertConfig(
            hidden_size=HIDDEN,
            num_attention_heads=BERT_HEADS,
            attention_probs_dropout_prob=0.0,
            attn_implementation="sdpa",
        )
        return BertSelfAttention(config)
    mgk = dict(
        hidden_size=HIDDEN, num_attention_heads=BERT_HEADS // 2, head_dim=HEAD_DIM, attention_probs_dropout_prob=0.0
    )
    configs = {
        "mgk_fused": MgkBertConfig(attn_implementation="sdpa", **mgk),
        "mgk_reference": MgkBertConfig(attn_implementation="eager", **mgk),
        "mlk": MgkBertConfig(attention_type="mlk", **mgk),
    }
    if kind not in configs:
        raise ValueError(f"unknown attention kind {kind!r}")
    return composition.build_attention(configs[kind], layer_idx=0)  # the token mixer the config names, as a model


def attention_step(module: torch.nn.Module, batch: int, seq_len: int) -> Callable[[], None]:
    """One forward + backward of the attention block on random input."""
    hidden = torch.randn(batch, seq_len, HIDDEN, requires_grad=True)
    unpadded = () if isinstance(module, BertSelfAttention) else (TokenLayout(None),)  # a token mixer's padding

    def step() -> None:
        output = module(hidden, *unpadded)[0]
        output.sum().backward()
        hidden.grad = None
        module.zero_grad(set_to_none=True)

    return step


def median_times(steps: dict[str, Callable[[], None]], repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds per call, measured in interleaved rounds."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def peak_memory_mib(kind: str, batch: int, seq_len: int) -> float:
    """Growth of peak RSS during one attention forward+backward, in a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, __file__, "--_memory_probe", kind, str(batch), str(seq_len)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(result.stdout.strip().splitlines()[-1])


def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"/proc/self/status has no {field}; peak memory needs Linux.")
    return int(match.group(1))


def _memory_probe(kind: str, batch: int, seq_len: int) -> None:
    module = build_attention(kind)
    step = attention_step(module, batch, seq_len)
    step()  # warm-up: lazily created buffers and thread pools are not the step's memory
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = _status_kib("VmRSS")
    step()
    print((_status_kib("VmHWM") - before) / 1024.0)


def fit_exponent(lengths: list[int], times: list[float], low: int, high: int) -> float:
    """Slope of log(time) against log(N) between N = low and N = high (least squares)."""
    points = [(math.log(n), math.log(t)) for n, t in zip(lengths, times, strict=True) if low <= n <= high]
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)


# ------------------------------------------------------------------------------------------------
# MLM training step: MGK-BERT with H/2 heads vs BertForMaskedLM with H heads
# ------------------------------------------------------------------------------------------------
def mlm_step(model: torch.nn.Module, batch: int, seq_len: int, vocab: int) -> Callable[[], None]:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, vocab, (batch, seq_len), generator=generator)
    labels = input_ids.masked_fill(torch.rand(batch, seq_len, generator=generator) > 0.15, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        model(input_ids=input_ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def benchmark_mlm(batch: int, seq_len: int, repeats: int, vocab: int = 30522) -> dict:
    sizes = dict(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        num_hidden_layers=4,
        intermediate_size=4 * HIDDEN,
        max_position_embeddings=max(512, seq_len),
    )
    torch.manual_seed(0)
    bert = BertForMaskedLM(BertConfig(num_attention_heads=BERT_HEADS, attn_implementation="sdpa", **sizes)).train()
    mgk = MgkBertForMaskedLM(
        MgkBertConfig(num_attention_heads=BERT_HEADS // 2, head_dim=HEAD_DIM, attn_implementation="sdpa", **sizes)
    ).train()
    times = median_times(
        {"bert_sdpa": mlm_step(bert, batch, seq_len, vocab), "mgk_bert": mlm_step(mgk, batch, seq_len, vocab)},
        repeats,
    )
    tokens = batch * seq_len
    return {
        "batch": batch,
        "seq_len": seq_len,
        "hidden": HIDDEN,
        "layers": 4,
        "vocab": vocab,
        "bert_heads": BERT_HEADS,
        "mgk_heads": BERT_HEADS // 2,
        "seconds_per_step": times,
        "tokens_per_second": {name: tokens / seconds for name, seconds in times.items()},
        "mgk_over_bert_throughput": times["bert_sdpa"] / times["mgk_bert"],
        "parameters": {
            "bert_sdpa": sum(p.numel() for p in bert.parameters()),
            "mgk_bert": sum(p.numel() for p in mgk.parameters()),
        },
    }


# ------------------------------------------------------------------------------------------------
def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(11, 4))
    lengths = results["seq_lens"]
    for kind, values in results["seconds"].items():
        points = [(n, v) for n, v in zip(lengths, values, strict=True) if v is not None]
        time_axis.loglog(*zip(*points, strict=True), marker="o", label=kind)
    time_axis.set(xlabel="sequence length N", ylabel="forward+backward seconds", title="attention block time")
    time_axis.legend()
    for kind, values in results["peak_memory_mib"].items():
        points = [(n, v) for n, v in zip(lengths, values, strict=True) if v is not None]
        memory_axis.loglog(*zip(*points, strict=True), marker="o", label=kind)
    memory_axis.set(xlabel="sequence length N", ylabel="peak RSS growth (MiB)", title="attention block memory")
    memory_axis.legend()
    figure.suptitle(f"hidden {HIDDEN}, batch {results['batch']}, BERT {BERT_HEADS} heads vs MGK/MLK {BERT_HEADS // 2}")
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/benchmarks"))
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq_lens", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--reference_max_len", type=int, default=4096, help="Skip the reference above this N.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mlm_batch", type=int, default=8)
    parser.add_argument("--mlm_seq_len", type=int, default=512)
    parser.add_argument("--mlm_repeats", type=int, default=9)
    parser.add_argument("--_memory_probe", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._memory_probe:
        kind, batch, seq_len = args._memory_probe
        _memory_probe(kind, int(batch), int(seq_len))
        return

    kinds = ["bert_sdpa", "mgk_fused", "mgk_reference", "mlk"]
    modules = {kind: build_attention(kind) for kind in kinds}
    seconds: dict[str, list[float | None]] = {kind: [] for kind in kinds}
    memory: dict[str, list[float | None]] = {kind: [] for kind in kinds}
    for seq_len in args.seq_lens:
        active = [k for k in kinds if k != "mgk_reference" or seq_len <= args.reference_max_len]
        times = median_times({k: attention_step(modules[k], args.batch, seq_len) for k in active}, args.repeats)
        for kind in kinds:
            seconds[kind].append(times.get(kind))
            memory[kind].append(peak_memory_mib(kind, args.batch, seq_len) if kind in active else None)
        print(f"N={seq_len}: " + ", ".join(f"{k} {times[k] * 1e3:.1f} ms / {memory[k][-1]:.0f} MiB" for k in active))

    def at(kind: str, seq_len: int, table: dict) -> float | None:
        return table[kind][args.seq_lens.index(seq_len)] if seq_len in args.seq_lens else None

    summary: dict[str, float | None] = {}
    if at("mgk_reference", 2048, seconds):
        summary["fused_speedup_over_reference_at_2048"] = at("mgk_reference", 2048, seconds) / at(
            "mgk_fused", 2048, seconds
        )
        summary["fused_memory_fraction_of_reference_at_2048"] = at("mgk_fused", 2048, memory) / at(
            "mgk_reference", 2048, memory
        )
    longest = max(args.seq_lens)
    summary[f"mlk_speedup_over_softmax_at_{longest}"] = at("bert_sdpa", longest, seconds) / at("mlk", longest, seconds)
    if min(args.seq_lens) <= 512 < longest:
        summary["mlk_time_exponent_512_to_max"] = fit_exponent(args.seq_lens, seconds["mlk"], 512, longest)
        summary["softmax_time_exponent_512_to_max"] = fit_exponent(args.seq_lens, seconds["bert_sdpa"], 512, longest)

    print(f"MLM step: batch {args.mlm_batch}, N={args.mlm_seq_len} ...")
    mlm = benchmark_mlm(args.mlm_batch, args.mlm_seq_len, args.mlm_repeats)
    summary["mgk_bert_over_bert_mlm_throughput"] = mlm["mgk_over_bert_throughput"]

    from benchmark import recorded_arguments  # here: benchmark.py imports this script's exponent fit

    results = {
        "command": " ".join(["benchmarks/benchmark_attention.py", *recorded_arguments(sys.argv[1:])]),
        "machine": {"platform": platform.platform(), "threads": torch.get_num_threads(), "torch": torch.__version__},
        "batch": args.batch,
        "seq_lens": args.seq_lens,
        "seconds": seconds,
        "peak_memory_mib": memory,
        "mlm_step": mlm,
        "summary": summary,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "attention_benchmark.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, args.output_dir / "attention_benchmark.png")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
