#!/usr/bin/env python
"""Serving a sequence classifier: onnxruntime on the ONNX export (``hf_variants.serving.export_onnx``) against the
eager PyTorch forward, on the CPU, for every variant that exports.

Each model (hidden 256, 4 layers, random weights: speed does not depend on them) classifies a batch of 32 × 128
tokens; the two runtimes alternate over ``--repeats`` rounds after a warm-up, and the record keeps the median
seconds per batch of each, their ratio, and the largest difference of their logits.

Writes ``<output_dir>/onnx_benchmark.json``::

    python benchmarks/benchmark_onnx.py --output_dir OUT
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import onnxruntime
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification

import hf_variants  # noqa: F401  (registers the variants)
from hf_variants.serving import example_inputs, export_onnx

SIZE = {"hidden_size": 256, "num_hidden_layers": 4, "vocab_size": 8000, "max_position_embeddings": 128}
MODELS = {
    "bert_control": {"num_attention_heads": 4, "intermediate_size": 1024},
    "macaron_bert": {"num_attention_heads": 4, "intermediate_size": 1024},
    "mgk_bert": {"num_attention_heads": 2, "head_dim": 128, "intermediate_size": 1024},
    "transject": {"num_experts": 2},
}


def seconds(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def measure(model_type: str, args: argparse.Namespace, folder: Path) -> dict[str, float]:
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **SIZE, **MODELS[model_type])
    model = AutoModelForSequenceClassification.from_config(config).eval()
    inputs = example_inputs(model, args.batch_size, args.length)
    session = onnxruntime.InferenceSession(str(export_onnx(model, folder / model_type)))
    feed = {name: tensor.numpy() for name, tensor in inputs.items()}

    def eager():
        with torch.inference_mode():
            return model(**inputs).logits

    def served():
        return session.run(None, feed)[0]

    difference = float((torch.from_numpy(served()) - eager()).abs().max())
    times: dict[str, list[float]] = {"eager": [], "onnxruntime": []}
    for round_index in range(args.repeats + 1):
        order = ("eager", "onnxruntime") if round_index % 2 == 0 else ("onnxruntime", "eager")
        for name in order:
            measured = seconds(eager if name == "eager" else served)
            if round_index:  # the first round warms both up
                times[name].append(measured)
    eager_s, served_s = statistics.median(times["eager"]), statistics.median(times["onnxruntime"])
    return {"eager_seconds": eager_s, "onnxruntime_seconds": served_s, "onnxruntime_speedup": eager_s / served_s,
            "max_logit_difference": difference}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, required=True)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        results = {}
        for model_type in MODELS:
            results[model_type] = measure(model_type, args, Path(scratch))
            print(model_type, json.dumps(results[model_type]), flush=True)
    record = {"benchmark": "onnx", "batch_size": args.batch_size, "length": args.length, "repeats": args.repeats,
              "size": SIZE, "models": results,
              "versions": {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__},
              "environment": {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                              "torch_threads": torch.get_num_threads()}}  # fmt: skip
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "onnx_benchmark.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
