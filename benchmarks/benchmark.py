#!/usr/bin/env python
"""Model benchmarks: every variant against its matched control (the same model with only its idea
turned off, ``hf_variants.core.composition.matched_control``), ``transformers.BertForMaskedLM`` (sdpa)
of matched size as an external reference row, and the machine's measured fp32 matmul peak (docs/benchmarks.md
"Performance").

    python benchmarks/benchmark.py --output_dir OUT

For every hidden size and sequence length: one MLM training step (forward, backward, AdamW) and one
inference forward per model and per control, medians of interleaved repeats (every model once per
round, so drift of the machine hits all alike), each variant's throughput ratio to its control and
to BERT from the same rounds. Also:

* FLOPs of a training step counted with ``torch.utils.flop_counter.FlopCounterMode`` on the eager
  attention path (the same arithmetic as sdpa, which the counter does not see on the CPU); model
  FLOP utilisation = FLOPs / step time / peak, the peak being the best of repeated 4096² fp32
  matmuls on this machine with the same threads;
* memory: bytes of the tensors saved for backward (distinct storages, ``saved_tensors_hooks``) plus
  parameters, gradients and AdamW's two moments — the resident training state of a step;
* the exponent of step time in N, a least-squares fit over the measured lengths from 512 up;
* N-ODE: per solver tolerance, function evaluations and forward time, and time per function
  evaluation against one vanilla block of the same width (``layer_scheme="vanilla"``);
* TransJect: the fraction of its training step spent on its orthogonal parametrisations (against a
  twin holding the same matrices as plain weights), for its default Cayley map and for matrix_exp.

Writes ``model_benchmark.json``, ``model_benchmark.md`` (the tables of docs/benchmarks.md) and ``model_benchmark.png``.

``--device cuda`` runs the same matrix on a GPU: ``--precisions fp32 bf16`` (bf16 = ``torch.autocast``, as
``accelerate launch --mixed_precision bf16``), CUDA-event timing after a warm-up step with synchronisation,
the allocator's peak memory of a training step, and MFU against the card's measured matmul peak of each
precision (its name and datasheet peak recorded beside it). ``--tiny`` is a seconds-long dry run of every
code path at toy sizes (CI runs it on the CPU; ``benchmarks/device_check.sh`` runs the real one on a GPU).

``--compile`` instead measures eager against ``torch.compile`` training steps (forward, backward,
AdamW) per model at the first hidden size and length, interleaved as above, and writes
``compile_benchmark.json`` and ``compile_benchmark.md``:

    python benchmarks/benchmark.py --compile --output_dir OUT --hidden_sizes 256 --lengths 128
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from benchmark_attention import fit_exponent as slope_between
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForMaskedLM, BertConfig, PretrainedConfig

import hf_variants  # noqa: F401  (registers the variants)
from hf_variants.core.composition import matched_control, matched_size_fields
from hf_variants.core.ideas import MatchedSize
from hf_variants.lab.spec import CONTROL_PREFIX

MODELS = ("bert", "macaron_bert", "mgk_bert", "mlk_bert", "transject", "node_transformer")
#: ``--compile`` also measures the BERT control built from our core (the baseline of comparisons).
COMPILE_MODELS = ("bert", "bert_control", *MODELS[1:])


#: Dense datasheet peaks (FLOP/s) of cards the device check may run on: bf16 tensor cores and fp32 (non-tensor)
#: arithmetic, SXM parts (NVIDIA's H100/H200/A100 datasheets; sparsity doubles the bf16 figure, not used here).
DATASHEET_PEAKS = {
    "H200": {"bf16": 989e12, "fp32": 67e12},
    "H100": {"bf16": 989e12, "fp32": 67e12},
    "A100": {"bf16": 312e12, "fp32": 19.5e12},
}


@dataclass
class Device:
    """Where and in which precision a benchmark runs: its clock, peak memory, autocast and matmul peak."""

    name: str  # "cpu" or "cuda"
    precision: str = "fp32"  # or "bf16": autocast, float32 master weights

    @property
    def is_cuda(self) -> bool:
        return self.name == "cuda"

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.name, dtype=torch.bfloat16)

    def seconds(self, function) -> float:
        """Wall time of ``function()``: CUDA events around it, then a synchronisation, on a GPU."""
        if not self.is_cuda:
            return timed(function)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        function()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1000

    def matmul_peak(self, size: int | None = None, repeats: int = 5) -> float:
        """The best FLOP/s of repeated square matmuls in this precision (bf16 operands for bf16)."""
        size = size or (8192 if self.is_cuda else 4096)
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        a, b = (torch.randn(size, size, device=self.name, dtype=dtype) for _ in range(2))
        torch.mm(a, b)
        best = min(self.seconds(lambda: torch.mm(a, b)) for _ in range(repeats))
        return 2 * size**3 / best

    def describe(self) -> dict:
        """The device's name, its datasheet peak where known, and the software it ran."""
        if not self.is_cuda:
            return {"device": "cpu", "threads": torch.get_num_threads(), "torch": torch.__version__}
        card = torch.cuda.get_device_name()
        datasheet = next((peaks for key, peaks in DATASHEET_PEAKS.items() if key in card), None)
        return {"device": card, "torch": torch.__version__, "cuda": torch.version.cuda,
                "driver": _driver_version(), "datasheet_peak_flops": datasheet}  # fmt: skip


def _driver_version() -> str | None:
    import subprocess

    try:
        found = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip().splitlines()[0] if found.returncode == 0 and found.stdout.strip() else None


#: Benchmark names that are a model type with a switch.
SWITCHED = {
    "mlk_bert": ("mgk_bert", {"attention_type": "mlk"}),
    "node_transformer_vanilla": ("node_transformer", {"layer_scheme": "vanilla"}),
}


def model_config(name: str, hidden: int, layers: int, vocab: int, max_len: int) -> PretrainedConfig:
    """The config of model ``name`` at this size: ``"bert"`` (``transformers``), a variant of
    :data:`MODELS`, or ``"control of <variant>"``, the variant's matched control. Every model takes the
    size its ideas derive from one matched size (heads of 64, FFN 4 × hidden, rtol = atol = 1e-3)."""
    if name.startswith(CONTROL_PREFIX):
        return matched_control(model_config(name.removeprefix(CONTROL_PREFIX), hidden, layers, vocab, max_len))
    size = MatchedSize(hidden, layers, head_size=64, solver_tolerance=1e-3)
    common = dict(vocab_size=vocab, max_position_embeddings=max_len, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)  # fmt: skip
    if name == "bert":
        return BertConfig(**matched_size_fields("softmax", "lie_trotter", size), **common)
    model_type, switches = SWITCHED.get(name, (name, {}))
    pair = AutoConfig.for_model(model_type, **switches)
    fields = matched_size_fields(pair.attention_type, pair.layer_scheme, size)
    return AutoConfig.for_model(model_type, **switches, **fields, **common)


def build(
    name: str, hidden: int, layers: int, vocab: int, max_len: int, attention: str, device: str = "cpu"
) -> torch.nn.Module:
    """The masked-LM model of :func:`model_config`, with ``attention`` as its attention implementation."""
    config = model_config(name, hidden, layers, vocab, max_len)
    if name == "transject":  # no softmax attention: neither eager nor sdpa applies
        return AutoModelForMaskedLM.from_config(config).to(device)
    return AutoModelForMaskedLM.from_config(config, attn_implementation=attention).to(device)


def batch(vocab: int, size: int, length: int, seed: int = 0, device: str = "cpu") -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (size, length), generator=generator)
    labels = torch.full_like(ids, -100)
    masked = torch.rand(ids.shape, generator=generator) < 0.15
    labels[masked] = ids[masked]
    return {key: value.to(device) for key, value in
            {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}.items()}  # fmt: skip


def train_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, inputs: dict, device: Device | None = None
) -> None:
    with device.autocast() if device is not None else contextlib.nullcontext():
        loss = model(**inputs).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def interleaved_timings(
    models: dict[str, torch.nn.Module],
    optimizers: dict[str, torch.optim.Optimizer],
    inputs: dict,
    repeats: int,
    device: Device | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, int]]:
    """Training-step and inference seconds per model, every model once per round, and the memory of each
    model's warm-up step: on a GPU the allocator's peak, on the CPU the training state bytes."""
    device = device or Device("cpu")
    forward = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
    memory = {name: step_memory(model.train(), optimizers[name], inputs, device) for name, model in models.items()}
    step: dict[str, list[float]] = {name: [] for name in models}
    infer: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(repeats):
        for name, model in models.items():
            model.train()
            step[name].append(device.seconds(lambda m=model, n=name: train_step(m, optimizers[n], inputs, device)))
            model.eval()
            with torch.no_grad(), device.autocast():
                infer[name].append(device.seconds(lambda m=model: m(**forward)))
    return step, infer, memory


def step_memory(model: torch.nn.Module, optimizer: torch.optim.Optimizer, inputs: dict, device: Device) -> int:
    """One training step (the warm-up: it also allocates AdamW's state) and the bytes it needed: the CUDA
    allocator's peak on a GPU (everything: weights, gradients, optimizer state, activations, workspaces), the
    resident training state (:func:`state_memory`) on the CPU, which has no allocator statistics."""
    if not device.is_cuda:
        return state_memory(model, optimizer, inputs, device)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    train_step(model, optimizer, inputs, device)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def training_flops(
    name: str, hidden: int, layers: int, vocab: int, length: int, size: int, device: str = "cpu"
) -> int:
    """FLOPs of forward + backward for a batch of ``size``, extrapolated from batches of 1 and 2: the
    count is affine in the batch (per-sequence work plus per-step work such as TransJect's orthogonal
    matrices), and small batches keep the eager N×N attention matrices small at N = 4096. The count does
    not depend on the device or the precision (a bf16 matmul is the same number of FLOPs)."""
    model = build(name, hidden, layers, vocab, length, "eager", device).train()
    counts = []
    for sequences in (1, 2):
        with FlopCounterMode(display=False) as counter:
            model(**batch(vocab, sequences, length, device=device)).loss.backward()
        model.zero_grad(set_to_none=True)
        counts.append(int(counter.get_total_flops()))
    return counts[0] + (size - 1) * (counts[1] - counts[0])


def state_memory(model: torch.nn.Module, optimizer: torch.optim.Optimizer, inputs: dict, device: Device) -> int:
    """One training step (the warm-up: it also allocates AdamW's state) that returns the bytes saved
    for backward (distinct storages) + parameters, gradients and AdamW's two moments."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), device.autocast():
        loss = model(**inputs).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    return sum(storages.values()) + 4 * parameters


def profile_step(name: str, hidden: int, length: int, args: argparse.Namespace) -> None:
    from torch.profiler import ProfilerActivity, profile

    model = build(name, hidden, args.layers, args.vocab_size, length, "sdpa").train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    inputs = batch(args.vocab_size, args.batch_size, length)
    train_step(model, optimizer, inputs)  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        train_step(model, optimizer, inputs)
    print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def twin(model: torch.nn.Module) -> torch.nn.Module:
    clone = AutoModelForMaskedLM.from_config(copy.deepcopy(model.config))
    clone.load_state_dict({name: tensor.cpu() for name, tensor in model.state_dict().items()})
    return clone


def orthogonal_overhead(
    model: torch.nn.Module, inputs: dict, repeats: int, device: Device | None = None
) -> dict[str, float]:
    """Fraction of a TransJect training step spent on its orthogonal parametrisations, per map:
    ``1 − step(twin with the same matrices as plain weights) / step(model)``, interleaved. At
    initialisation the offsets are zero, where ``matrix_exp`` is at its cheapest (its degree grows
    with the weights' norm), so its fraction here is a lower bound."""
    from torch.nn.utils import parametrize

    device = device or Device("cpu")
    plain, matrix_exp = (twin(model).to(device.name) for _ in range(2))  # (deepcopy cannot copy parametrizations)
    for module in list(plain.modules()):
        if parametrize.is_parametrized(module, "weight"):
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)
    matrix_exp.reparametrize(orthogonal_map="matrix_exp")
    twins = {"default": model, "matrix_exp": matrix_exp, "plain": plain}
    optimizers = {name: torch.optim.AdamW(twin.parameters(), lr=1e-4) for name, twin in twins.items()}
    step, _, _ = interleaved_timings(twins, optimizers, inputs, repeats, device)
    plain_seconds = statistics.median(step["plain"])
    names = {model.config.orthogonal_map: "default", "matrix_exp": "matrix_exp"}
    return {label: 1 - plain_seconds / statistics.median(step[name]) for label, name in names.items()}


def save_benchmark_record(
    output_dir: Path, name: str, record: dict, table: Callable[[dict], str] | None = None
) -> None:
    """A benchmark's record ``<name>.json`` in ``output_dir`` and, given ``table``, its table ``<name>.md``, printed;
    a record whose table is a page's block (``tools/benchmark_tables.py``) is printed as its path."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    if table is None:
        print(f"{output_dir / f'{name}.json'}: tools/render_tables.py renders it as the pages' table")
        return
    (output_dir / f"{name}.md").write_text(table(record))
    print(table(record))


def recorded_arguments(argv: list[str]) -> list[str]:
    """The command line as pages show it: the output folder is the reader's (``OUT``)."""
    previous = ["", *argv][: len(argv)]
    return ["OUT" if before == "--output_dir" else item for before, item in zip(previous, argv, strict=True)]


def fit_exponent(points: list[tuple[int, float]], shortest: int = 512) -> float | None:
    """Least-squares slope of log(step time) against log(N) over the lengths ≥ ``shortest`` (the
    attention benchmark's fit), or None with fewer than two such lengths."""
    lengths = [length for length, _ in points if length >= shortest]
    if len(lengths) < 2:
        return None
    return slope_between([n for n, _ in points], [t for _, t in points], shortest, max(lengths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/benchmarks"))
    parser.add_argument("--hidden_sizes", nargs="+", type=int, default=[256, 512])
    parser.add_argument("--lengths", nargs="+", type=int, default=[128, 512, 2048])
    parser.add_argument("--mlk_lengths", nargs="*", type=int, default=[4096], help="Extra lengths for MLK/BERT.")
    parser.add_argument("--mlk_hidden_sizes", nargs="*", type=int, default=[256], help="Where --mlk_lengths run.")
    parser.add_argument("--overhead_max_length", type=int, default=512,
                        help="Measure TransJect's parametrisation share up to this N (a per-step cost, "
                             "independent of N: longer steps only dilute it).")  # fmt: skip
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(COMPILE_MODELS),
                        help="bert_control (our core's BERT) only with --compile or --saturating_batch.")
    parser.add_argument("--saturating_batch", action="store_true",
                        help="Per model and length, double the batch from --batch_size until tokens/s gains under "
                        "5%% (benchmarks/benchmark_saturation.py): saturation.json and .md.")
    parser.add_argument("--max_batch_size", type=int, default=1024, help="The sweep's largest batch.")
    parser.add_argument("--max_length_by_model", default="node_transformer=128,transject=2048",
                        help="Skip longer lengths for these models (too slow on a CPU).")  # fmt: skip
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--long_repeats", type=int, default=3, help="Repeats for lengths above 512.")
    parser.add_argument("--tolerances", nargs="+", type=float, default=[1e-2, 1e-3, 1e-4, 1e-5])
    parser.add_argument("--render_only", action="store_true", help="Re-render the .md/.png from the saved JSON.")
    parser.add_argument("--recount_flops", action="store_true", help="Recount FLOPs/MFU of the saved JSON's rows.")
    parser.add_argument("--compile", action="store_true",
                        help="Eager vs torch.compile training throughput per model (compile_benchmark.json).")
    parser.add_argument("--profile", metavar="MODEL,HIDDEN,N",
                        help="Print torch.profiler's top operators of one training step there, then exit.")  # fmt: skip
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="Where the models run.")
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"], default=["fp32"],
                        help="fp32, and/or bf16 autocast with float32 weights (--mixed_precision bf16).")  # fmt: skip
    parser.add_argument("--tiny", action="store_true",
                        help="A dry run of every code path at toy sizes (seconds; what CI runs).")  # fmt: skip
    args = parser.parse_args()
    if args.tiny:
        args.hidden_sizes, args.lengths, args.mlk_lengths, args.mlk_hidden_sizes = [32], [16], [32], [32]
        args.layers, args.batch_size, args.vocab_size, args.repeats, args.long_repeats = 2, 2, 100, 2, 1
        args.tolerances, args.overhead_max_length, args.max_length_by_model = [1e-3], 16, "node_transformer=16"
        args.max_batch_size = 8
    if "bert_control" in args.models and not (args.compile or args.saturating_batch):
        parser.error("--models bert_control: only with --compile or --saturating_batch (it is every control's core)")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch finds no CUDA device on this machine")
    if args.profile:
        name, hidden, length = args.profile.split(",")
        profile_step(name, int(hidden), int(length), args)
        return
    if args.compile:
        compile_comparison(args)
        return
    if args.saturating_batch:
        from benchmark_saturation import run

        run(args)
        return
    if args.render_only or args.recount_flops:
        results = json.loads((args.output_dir / "model_benchmark.json").read_text())
        if args.recount_flops:  # FLOP counts are deterministic: no re-timing needed
            for r in results["rows"]:
                r["step_flops"] = training_flops(r["model"], r["hidden"], args.layers, args.vocab_size, r["length"],
                                                 r["batch"])  # fmt: skip
                r["mfu"] = r["step_flops"] / r["step_seconds"] / results["matmul_peak_flops"]
            (args.output_dir / "model_benchmark.json").write_text(json.dumps(results, indent=2) + "\n")
        render(results, args.output_dir)
        return
    limits = {k: int(v) for k, v in (item.split("=") for item in args.max_length_by_model.split(",") if item)}
    torch.manual_seed(0)
    # --tiny measures a 512² matmul: 4096² in bf16 takes minutes on a CPU without native bf16 (e.g. AMD EPYC).
    peak_size = 512 if args.tiny else None
    peaks = {precision: Device(args.device, precision).matmul_peak(peak_size) for precision in args.precisions}
    for precision, peak in peaks.items():
        print(f"{precision} matmul peak on {args.device}: {peak / 1e9:.1f} GFLOP/s", flush=True)

    rows = []
    for precision in args.precisions:
        rows += benchmark_rows(args, Device(args.device, precision), peaks[precision], limits)

    exponents = {}
    for precision in args.precisions:
        for hidden in args.hidden_sizes:
            for name in dict.fromkeys(r["model"] for r in rows):
                same = [r for r in rows if (r["model"], r["hidden"], r["precision"]) == (name, hidden, precision)]
                points = sorted((r["length"], r["step_seconds"]) for r in same)
                exponent = fit_exponent(points)
                if exponent is not None:
                    fitted = [length for length, _ in points if length >= 512]
                    key = f"{name}/h{hidden}" + ("" if precision == "fp32" else f"/{precision}")
                    exponents[key] = {"exponent": exponent, "lengths": fitted}

    hidden, length = (args.hidden_sizes[0], args.lengths[0]) if args.tiny else (256, 128)
    ode = node_tolerance_sweep(args, Device(args.device, args.precisions[0]), hidden, length)
    description = Device(args.device).describe()
    results = {
        "command": " ".join(["benchmarks/benchmark.py", *sys.argv[1:]]),
        **description,
        "threads": torch.get_num_threads(),
        "matmul_peak_flops": peaks[args.precisions[0]],
        "matmul_peak_flops_by_precision": peaks,
        "rows": rows,
        "exponents": exponents,
        "node_transformer": ode,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "model_benchmark.json").write_text(json.dumps(results, indent=2) + "\n")
    render(results, args.output_dir)
    print(json.dumps({"exponents": exponents, "node_transformer": ode}, indent=2))


def benchmark_rows(args: argparse.Namespace, device: Device, peak: float, limits: dict[str, int]) -> list[dict]:
    """One row per model × hidden size × length in ``device``'s precision: step and inference time from
    interleaved rounds, throughput ratios to the control and to BERT, memory, FLOPs and MFU against ``peak``."""
    rows = []
    for hidden in args.hidden_sizes:
        mlk_lengths = args.mlk_lengths if hidden in args.mlk_hidden_sizes else []
        for length in [*args.lengths, *mlk_lengths]:
            extra = length in args.mlk_lengths and length not in args.lengths
            names = [
                n for n in args.models if length <= limits.get(n, length) and (not extra or n in ("bert", "mlk_bert"))
            ]
            if "bert" not in names:
                continue
            controls = {n: CONTROL_PREFIX + n for n in names if n != "bert"}
            names = [m for n in names for m in (n, controls.get(n)) if m is not None]  # each control after its variant
            inputs = batch(args.vocab_size, args.batch_size, length, device=device.name)
            models = {n: build(n, hidden, args.layers, args.vocab_size, length, "sdpa", device.name) for n in names}
            optimizers = {n: torch.optim.AdamW(m.parameters(), lr=1e-4) for n, m in models.items()}
            repeats = args.repeats if length <= 512 else args.long_repeats
            step, infer, memory = interleaved_timings(models, optimizers, inputs, repeats, device)
            bert_step = statistics.median(step["bert"])
            for name in names:
                flops = training_flops(name, hidden, args.layers, args.vocab_size, length, args.batch_size, device.name)
                seconds = statistics.median(step[name])
                row = {
                    "model": name, "hidden": hidden, "length": length, "batch": args.batch_size,
                    "device": device.name, "precision": device.precision,
                    "parameters": sum(p.numel() for p in models[name].parameters()),
                    "step_seconds": seconds, "tokens_per_second": args.batch_size * length / seconds,
                    "throughput_vs_bert": bert_step / seconds,
                    **({"throughput_vs_control": statistics.median(step[controls[name]]) / seconds}
                       if name in controls else {}),
                    "inference_seconds": statistics.median(infer[name]),
                    "training_state_bytes" if not device.is_cuda else "peak_memory_bytes": memory[name],
                    "step_flops": flops, "mfu": model_flops_utilisation(flops, seconds, peak),
                }  # fmt: skip
                if name == "transject" and length <= args.overhead_max_length:
                    row["orthogonal_overhead_fraction"] = orthogonal_overhead(models[name], inputs, repeats, device)
                rows.append(row)
                print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
            del models, optimizers
            if device.is_cuda:
                torch.cuda.empty_cache()
    return rows


def model_flops_utilisation(flops: int, seconds: float, peak: float) -> float:
    """The share of the machine's measured matmul peak that a step of ``flops`` in ``seconds`` reaches."""
    return flops / seconds / peak


def compile_comparison(args: argparse.Namespace) -> None:
    """Eager vs ``torch.compile`` (fullgraph except the N-ODE solver) training-step throughput."""
    hidden, length = args.hidden_sizes[0], args.lengths[0]
    names = [name for name in COMPILE_MODELS if name in args.models or name == "bert_control"]
    inputs = batch(args.vocab_size, args.batch_size, length)
    models, optimizers, started = {}, {}, {}
    for name in names:
        torch.manual_seed(0)
        eager = build(name, hidden, args.layers, args.vocab_size, length, "sdpa").train()
        twin_model = copy.deepcopy(eager)
        fullgraph = not name.startswith("node_transformer")
        models[f"{name}/eager"] = eager
        models[f"{name}/compiled"] = torch.compile(twin_model, fullgraph=fullgraph)
        for key in (f"{name}/eager", f"{name}/compiled"):
            optimizers[key] = torch.optim.AdamW(models[key].parameters(), lr=1e-4)
            begin = time.perf_counter()
            train_step(models[key], optimizers[key], inputs)  # warm-up; compiles the compiled twin
            started[key] = time.perf_counter() - begin
    seconds: dict[str, list[float]] = {key: [] for key in models}
    for _ in range(args.repeats):
        for key, model in models.items():
            seconds[key].append(timed(lambda model=model, key=key: train_step(model, optimizers[key], inputs)))
    rows = []
    for name in names:
        eager, compiled = (statistics.median(seconds[f"{name}/{kind}"]) for kind in ("eager", "compiled"))
        rows.append({
            "model": name, "hidden": hidden, "length": length, "batch": args.batch_size,
            "eager_step_seconds": eager, "compiled_step_seconds": compiled,
            "eager_tokens_per_second": args.batch_size * length / eager,
            "compiled_tokens_per_second": args.batch_size * length / compiled,
            "compiled_vs_eager": eager / compiled, "compile_seconds": started[f"{name}/compiled"],
            "fullgraph": not name.startswith("node_transformer"),
        })  # fmt: skip
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in rows[-1].items()}), flush=True)
    results = {
        "command": " ".join(["benchmarks/benchmark.py", *sys.argv[1:]]),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "note": "wall-clock medians on a shared machine: ratios from the same interleaved rounds are what compares",
        "rows": rows,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "compile_benchmark.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        f"Training step (forward, backward, AdamW), hidden {hidden}, length {length}, batch {args.batch_size}, "
        f"{args.layers} layers, {results['threads']} threads, median of {args.repeats} interleaved rounds.",
        "",
        "| model | eager tokens/s | compiled tokens/s | compiled / eager | compile time (s) | fullgraph |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['eager_tokens_per_second']:,.0f} | {row['compiled_tokens_per_second']:,.0f} | "
            f"{row['compiled_vs_eager']:.2f}× | {row['compile_seconds']:.0f} | "
            f"{'yes' if row['fullgraph'] else 'no (one break per ODE block)'} |"
        )
    (args.output_dir / "compile_benchmark.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def node_tolerance_sweep(
    args: argparse.Namespace, device: Device | None = None, hidden: int = 256, length: int = 128
) -> dict:
    """NFE and forward time per tolerance; time per NFE vs one vanilla block (same width)."""
    device = device or Device("cpu")
    inputs = batch(args.vocab_size, args.batch_size, length, device=device.name)
    forward = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
    vanilla = build("node_transformer_vanilla", hidden, args.layers, args.vocab_size, length, "sdpa", device.name)
    ode = build("node_transformer", hidden, args.layers, args.vocab_size, length, "sdpa", device.name).eval()
    vanilla.eval()
    ode.load_state_dict(vanilla.state_dict(), strict=False)
    sweep = []
    with torch.no_grad(), device.autocast():
        vanilla(**forward)
        block = statistics.median(device.seconds(lambda: vanilla(**forward)) for _ in range(args.repeats)) / args.layers
        for tolerance in args.tolerances:
            ode.config.rtol = ode.config.atol = tolerance  # the blocks read the solver settings per forward
            nfe = int(ode(**forward, output_diagnostics=True).diagnostics["nfe_total"])
            seconds = statistics.median(device.seconds(lambda: ode(**forward)) for _ in range(args.repeats))
            sweep.append({
                "tolerance": tolerance, "nfe_total": nfe, "forward_seconds": seconds,
                "seconds_per_nfe": seconds / nfe, "per_nfe_vs_vanilla_block": seconds / nfe / block,
            })  # fmt: skip
    return {"hidden": hidden, "length": length, "precision": device.precision, "vanilla_block_seconds": block,
            "sweep": sweep}


def render(results: dict, output_dir: Path) -> None:
    (output_dir / "model_benchmark.md").write_text(markdown(results))
    plot(results, output_dir / "model_benchmark.png")


def markdown(results: dict) -> str:
    """The tables of docs/benchmarks.md: one row per model × hidden × length, then exponents, N-ODE and TransJect."""
    peaks = results.get("matmul_peak_flops_by_precision", {"fp32": results["matmul_peak_flops"]})
    measured = ", ".join(f"{precision} matmul peak {peak / 1e9:,.0f} GFLOP/s" for precision, peak in peaks.items())
    where = results.get("device", "cpu")
    where = f"{results['threads']} threads" if where == "cpu" else f"{where} (CUDA {results.get('cuda')})"
    on_gpu = any("peak_memory_bytes" in r for r in results["rows"])
    lines = [
        f"`python {results['command']}` — {where}, {measured}; batch {results['rows'][0]['batch']}, medians.",
        "",
        "× control: the variant's training throughput over its matched control's (same rounds); × BERT: over "
        "`transformers` BERT's, an external reference. Wall-clock ratios: they move with the machine's load. MFU: "
        "counted FLOPs per second over the measured matmul peak of the row's precision.",
        "",
        f"| hidden | N | model | precision | parameters | train tokens/s | × control | × BERT | inference ms | "
        f"{'peak memory' if on_gpu else 'training state'} MiB | MFU |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results["rows"]:
        to_control = f"{r['throughput_vs_control']:.2f}" if "throughput_vs_control" in r else "—"
        memory = r.get("peak_memory_bytes", r.get("training_state_bytes"))
        lines.append(
            f"| {r['hidden']} | {r['length']} | {r['model']} | {r.get('precision', 'fp32')} | "
            f"{r['parameters'] / 1e6:.2f} M | {r['tokens_per_second']:,.0f} | {to_control} | "
            f"{r['throughput_vs_bert']:.2f} | {1000 * r['inference_seconds']:,.1f} | {memory / 2**20:,.0f} | "
            f"{100 * r['mfu']:.0f}% |"
        )
    lines += ["", "| step-time exponent in N | lengths | exponent |", "|---|---|---:|"]
    for key, value in results["exponents"].items():
        lines.append(f"| {key} | {', '.join(map(str, value['lengths']))} | {value['exponent']:.2f} |")
    ode = results["node_transformer"]
    lines += [
        "",
        f"N-ODE (hidden {ode['hidden']}, N = {ode['length']}, inference; one vanilla block "
        f"{1000 * ode['vanilla_block_seconds']:.1f} ms):",
        "",
        "| rtol = atol | NFE (all blocks) | forward ms | ms per NFE | per NFE / vanilla block |",
        "|---:|---:|---:|---:|---:|",
    ]
    for point in ode["sweep"]:
        lines.append(
            f"| {point['tolerance']:g} | {point['nfe_total']} | {1000 * point['forward_seconds']:,.0f} | "
            f"{1000 * point['seconds_per_nfe']:.1f} | {point['per_nfe_vs_vanilla_block']:.2f} |"
        )
    lines += ["", "| TransJect: orthogonal parametrisation share of a step | hidden | N | cayley | matrix_exp |"]
    lines.append("|---|---:|---:|---:|---:|")
    for r in results["rows"]:
        if "orthogonal_overhead_fraction" in r:
            cayley, matrix_exp = (100 * r["orthogonal_overhead_fraction"][m] for m in ("cayley", "matrix_exp"))
            lines.append(f"| {r.get('precision', 'fp32')} | {r['hidden']} | {r['length']} | {cayley:.0f}% | "
                         f"{matrix_exp:.0f}% |")
    return "\n".join(lines) + "\n"


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
            style = "--" if name.startswith(CONTROL_PREFIX) else "-"
            axis.plot(*zip(*points, strict=True), style, marker="o", label=name)
        axis.set(xscale="log", yscale="log", xlabel="sequence length", ylabel="training tokens/s",
                 title=f"MLM training step, hidden {hidden}")  # fmt: skip
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


if __name__ == "__main__":
    main()
