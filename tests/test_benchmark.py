"""benchmarks/benchmark.py: its FLOP extrapolation, matched controls, exponent fit and a tiny end-to-end run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import benchmark  # noqa: E402

from hf_variants.core.composition import matched_control  # noqa: E402


@pytest.mark.parametrize("name", ["bert", "transject", "mlk_bert", "control of transject"])
def test_flops_extrapolated_from_batches_of_one_and_two_equal_the_direct_count(name: str) -> None:
    model = benchmark.build(name, 64, 2, 100, 32, "eager").train()
    with FlopCounterMode(display=False) as counter:
        model(**benchmark.batch(100, 5, 32)).loss.backward()
    assert benchmark.training_flops(name, 64, 2, 100, 32, 5) == counter.get_total_flops()


@pytest.mark.parametrize("name", [name for name in benchmark.MODELS if name != "bert"])
def test_a_control_is_its_variant_with_only_the_idea_turned_off(name: str) -> None:
    variant = benchmark.build(name, 64, 2, 100, 32, "sdpa")
    control = benchmark.build(f"control of {name}", 64, 2, 100, 32, "sdpa")
    expected = matched_control(variant.config).to_dict()
    differing = {k for k, v in variant.config.to_dict().items() if expected.get(k) != v}
    assert differing and differing <= {"attention_type", "layer_scheme"}
    assert {k: v for k, v in control.config.to_dict().items() if k != "_attn_implementation_autoset"} == {
        k: v for k, v in expected.items() if k != "_attn_implementation_autoset"
    }


def test_exponent_fit_recovers_a_power_law_from_512_up() -> None:
    points = [(128, 99.0), *((n, 3e-4 * n**1.5) for n in (512, 2048, 4096))]  # 128 is left out
    assert benchmark.fit_exponent(points) == pytest.approx(1.5)
    assert benchmark.fit_exponent([(128, 1.0), (512, 2.0)]) is None


#: The tiny end-to-end run: BERT, one variant per kind of idea (layer scheme, token mixer with its own
#: parametrisation, ODE blocks) and their controls; every variant builds and runs in the tests above.
TINY_RUN_MODELS = ("bert", "macaron_bert", "transject", "node_transformer")


@pytest.mark.full  # a benchmark script's end-to-end run (the scripts' own tool, not the package's)
def test_tiny_run_writes_consistent_json_and_tables(tmp_path) -> None:
    command = [
        sys.executable, str(ROOT / "benchmarks" / "benchmark.py"), "--output_dir", str(tmp_path),
        "--hidden_sizes", "64", "--lengths", "16", "32", "--mlk_lengths", "--repeats", "1",
        "--long_repeats", "1", "--tolerances", "1e-2", "--vocab_size", "100", "--layers", "2",
        "--models", *TINY_RUN_MODELS,
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    results = json.loads((tmp_path / "model_benchmark.json").read_text())
    rows = results["rows"]
    controls = {f"control of {name}" for name in TINY_RUN_MODELS if name != "bert"}
    assert {r["model"] for r in rows} == set(TINY_RUN_MODELS) | controls
    assert {r["length"] for r in rows if r["model"] == "node_transformer"} == {16, 32}
    seconds = {(r["model"], r["length"]): r["step_seconds"] for r in rows}
    for row in rows:
        if row["model"] in controls or row["model"] == "bert":
            assert "throughput_vs_control" not in row
        else:
            control_seconds = seconds[f"control of {row['model']}", row["length"]]
            assert row["throughput_vs_control"] == pytest.approx(control_seconds / row["step_seconds"])
        assert row["mfu"] == pytest.approx(row["step_flops"] / row["step_seconds"] / results["matmul_peak_flops"])
        assert row["tokens_per_second"] == pytest.approx(row["batch"] * row["length"] / row["step_seconds"])
        if row["model"] == "bert":
            assert row["throughput_vs_bert"] == 1.0
        if row["model"] == "transject":
            assert set(row["orthogonal_overhead_fraction"]) == {"cayley", "matrix_exp"}
    sweep = results["node_transformer"]["sweep"]
    assert [p["tolerance"] for p in sweep] == [1e-2] and sweep[0]["nfe_total"] >= 6
    table = (tmp_path / "model_benchmark.md").read_text()
    assert sum(line.startswith("| 64 | 32 |") for line in table.splitlines()) == len(TINY_RUN_MODELS) + len(controls)
    assert (tmp_path / "model_benchmark.png").stat().st_size > 0


@pytest.mark.full  # minutes of compiling on a CPU: in the full suite (CI)
def test_compile_mode_records_eager_and_compiled_throughput(tmp_path) -> None:
    command = [
        sys.executable, str(ROOT / "benchmarks" / "benchmark.py"), "--compile", "--output_dir", str(tmp_path),
        "--models", "bert", "node_transformer", "--hidden_sizes", "64", "--lengths", "16", "--repeats", "1",
        "--vocab_size", "100", "--layers", "1",
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    results = json.loads((tmp_path / "compile_benchmark.json").read_text())
    rows = {row["model"]: row for row in results["rows"]}
    assert list(rows) == ["bert", "bert_control", "node_transformer"]  # the control always
    for row in rows.values():
        assert row["compiled_vs_eager"] == pytest.approx(row["eager_step_seconds"] / row["compiled_step_seconds"])
        assert row["compiled_tokens_per_second"] == pytest.approx(16 * 8 / row["compiled_step_seconds"])
    assert rows["bert_control"]["fullgraph"] and not rows["node_transformer"]["fullgraph"]
    assert (tmp_path / "compile_benchmark.md").read_text().count("\n| ") == 4  # header + 3 models


def hand_counted_bert_flops(hidden: int, layers: int, vocab: int, length: int, size: int) -> int:
    """Forward + backward FLOPs of transformers' BertForMaskedLM, by hand: per layer, the Q, K, V and output
    projections (4 · 2·B·N·h²), the FFN (2 · 2·B·N·h·4h) and the two attention products QKᵀ and AV
    (2 · 2·B·N²·h); the MLM head's transform (2·B·N·h²) and decoder (2·B·N·h·V); backward twice the forward
    (a gradient for the input and one for the weight of every product)."""
    b, n, h = size, length, hidden
    layer = 24 * b * n * h * h + 4 * b * n * n * h
    head = 2 * b * n * h * h + 2 * b * n * h * vocab
    return 3 * (layers * layer + head)


def test_one_bert_layer_costs_the_hand_counted_flops() -> None:
    one, two = (benchmark.training_flops("bert", 32, layers, 100, 16, 2) for layers in (1, 2))
    assert two - one == hand_counted_bert_flops(32, 2, 100, 16, 2) - hand_counted_bert_flops(32, 1, 100, 16, 2)
    assert one == hand_counted_bert_flops(32, 1, 100, 16, 2)


@pytest.mark.full  # minutes of compiling on a CPU: in the full suite (CI)
def test_the_device_check_dry_run_covers_the_gpu_code_path(tmp_path) -> None:
    """`benchmarks/device_check.sh --device cpu --tiny`: what the script runs at BERT-base size on a GPU — the
    versions, the benchmark's device path (a Device's clock, autocast, memory, matmul peak per precision, MFU)
    and a bf16 pretraining run from the launcher's mixed precision — at toy sizes, in under a minute."""
    env = {**os.environ, "PYTHON": sys.executable, "HF_VARIANTS_SENTENCES": "2000"}
    command = ["bash", str(ROOT / "benchmarks" / "device_check.sh"), "--device", "cpu", "--tiny",
               "--output_dir", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    versions = json.loads((tmp_path / "versions.json").read_text())
    assert versions["device"] == "cpu" and versions["packages"]["torch"] and versions["packages"]["transformers"]
    saturation = json.loads((tmp_path / "saturation.json").read_text())
    swept = {row["model"]: row for row in saturation["rows"]}
    assert set(swept) == {"bert", "macaron_bert", "control of macaron_bert", "mgk_bert", "control of mgk_bert",
                          "bert_control"}  # fmt: skip
    for row in swept.values():
        assert row["precision"] == "bf16" and [p["batch"] for p in row["sweep"]][:2] == [2, 4]
        assert row["saturating"] in row["sweep"]
    batch = swept["bert_control"]["saturating"]["batch"]
    for name, compiled in (("pretrain_bf16", False), ("pretrain_bf16_compiled", True)):
        pretraining = json.loads((tmp_path / f"{name}.json").read_text())
        assert pretraining["mixed_precision"] == "bf16" and pretraining["steps"] > 0
        assert pretraining["tokens_per_second"] > 0
        assert pretraining["arguments"]["per_device_train_batch_size"] == batch
        assert pretraining["arguments"]["torch_compile"] is compiled
    results = json.loads((tmp_path / "model_benchmark.json").read_text())
    peaks = results["matmul_peak_flops_by_precision"]
    assert set(peaks) == {"bf16"} and results["device"] == "cpu"
    rows = results["rows"]
    expected_models = {*benchmark.MODELS, *(f"control of {name}" for name in benchmark.MODELS if name != "bert")}
    assert {r["model"] for r in rows if r["precision"] == "bf16" and r["length"] == 16} == expected_models
    for row in rows:
        assert row["step_seconds"] > 0 and row["inference_seconds"] > 0 and row["training_state_bytes"] > 0
        assert row["mfu"] == pytest.approx(row["step_flops"] / row["step_seconds"] / peaks[row["precision"]])
        if row["model"] == "bert":
            assert row["step_flops"] == hand_counted_bert_flops(32, 2, 100, row["length"], 2)
    assert {r["length"] for r in rows if r["model"] == "mlk_bert"} == {16, 32}  # the long-N rows
    assert results["node_transformer"]["sweep"][0]["nfe_total"] > 0
    table = (tmp_path / "model_benchmark.md").read_text()
    assert "| 32 | 16 | bert | bf16 |" in table and "bf16 matmul peak" in table


@pytest.fixture
def simulated_device(monkeypatch: pytest.MonkeyPatch) -> dict[int, float]:
    """The sweep on a simulated device: a step at batch b takes ``seconds[b]``, and batches missing from it
    run out of memory."""
    import benchmark_saturation
    import torch

    seconds: dict[int, float] = {}

    def step_seconds(model, optimizer, inputs, device, repeats) -> float:
        size = len(inputs["input_ids"])
        if size not in seconds:
            raise torch.OutOfMemoryError(f"batch {size}")
        return seconds[size]

    monkeypatch.setattr(benchmark_saturation, "build", lambda *args, **kwargs: torch.nn.Linear(1, 1))
    monkeypatch.setattr(benchmark_saturation, "step_seconds", step_seconds)
    return seconds


def sweep_of(seconds: dict[int, float], max_batch_size: int = 1024) -> dict:
    import argparse

    import benchmark_saturation

    args = argparse.Namespace(layers=1, vocab_size=50, batch_size=8, max_batch_size=max_batch_size, repeats=1)
    return benchmark_saturation.sweep("bert", 32, 16, args, benchmark.Device("cpu"))


def test_the_sweep_stops_where_doubling_gains_under_five_percent(simulated_device: dict[int, float]) -> None:
    # tokens/s = 16 b / seconds: 8 → 16 doubles it, 16 → 32 gains 10%, 32 → 64 gains 4%
    simulated_device.update({8: 1.0, 16: 1.0, 32: 1.0 * 2 / 1.10, 64: 1.0 * 4 / (1.10 * 1.04), 128: 1.0})
    row = sweep_of(simulated_device)
    assert [point["batch"] for point in row["sweep"]] == [8, 16, 32, 64]
    assert row["saturating"]["batch"] == 32 and row["stopped"] == "gain under 5% from 32 to 64"
    assert row["saturating"]["tokens_per_second"] == pytest.approx(32 * 16 / simulated_device[32])


def test_the_sweep_keeps_the_last_batch_that_fitted(simulated_device: dict[int, float]) -> None:
    simulated_device.update({8: 1.0, 16: 1.0, 32: 1.0})  # still gaining when 64 runs out of memory
    row = sweep_of(simulated_device)
    assert row["saturating"]["batch"] == 32 and row["stopped"] == "out of memory at batch 64"
    assert sweep_of(simulated_device, max_batch_size=16)["saturating"]["batch"] == 16
    simulated_device.clear()
    nothing = sweep_of(simulated_device)
    assert nothing["saturating"] is None and nothing["stopped"] == "out of memory at batch 8"


def test_a_recorded_command_names_the_readers_output_folder() -> None:
    argv = ["--output_dir", "/home/someone/runs", "--repeats", "3", "--output_dir=kept"]
    assert benchmark.recorded_arguments(argv) == ["--output_dir", "OUT", "--repeats", "3", "--output_dir=kept"]
    assert benchmark.recorded_arguments([]) == []


@pytest.mark.parametrize(("kind", "attention_type"), [("mgk_fused", "mgk"), ("mgk_reference", "mgk"), ("mlk", "mlk")])
def test_the_attention_benchmark_measures_the_mixer_it_names(kind: str, attention_type: str) -> None:
    """Each case of benchmarks/benchmark_attention.py is the token mixer a model of that attention type builds (its
    MLK case was once the MGK class with the MLK config), and it runs one step."""
    import benchmark_attention

    from hf_variants.core.composition import ATTENTION_TYPES

    module = benchmark_attention.build_attention(kind)
    assert type(module) is ATTENTION_TYPES.implementation(attention_type)
    benchmark_attention.attention_step(module, batch=1, seq_len=8)()
