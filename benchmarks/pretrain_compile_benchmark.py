#!/usr/bin/env python
"""``hf-variants pretrain`` eager against ``--torch_compile``, side by side on one machine.

    python benchmarks/pretrain_compile_benchmark.py --output_dir OUT

The same command (the BERT control, generated sentences grouped into full blocks of ``--max_seq_length``,
a fixed number of steps) runs eager and compiled in alternation, ``--repeats`` times each, every run in a
fresh folder and process. Per run: the engine's own tokens/s over the whole run (compilation included) and
over the second half of the steps (after compilation: from the training history, whose blocks all hold
batch × length real tokens), and the final training loss. Writes ``pretrain_compile.json`` and
``pretrain_compile.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmark import recorded_arguments, save_benchmark_record

from hf_variants.synthetic import synthetic_sentences

MODES = {"eager": [], "compiled": ["--torch_compile"]}


def pretrain(mode: str, args: argparse.Namespace, corpus: Path, folder: Path) -> dict:
    """One run of the command line in its own process; its results and the throughput after compilation."""
    command = [
        sys.executable, "-m", "hf_variants.cli", "pretrain", "--model_type", "bert_control",
        "--config_overrides", f"hidden_size={args.hidden_size},num_hidden_layers={args.layers},"
        f"num_attention_heads={args.hidden_size // 64},intermediate_size={4 * args.hidden_size}",
        "--train_tokenizer_vocab_size", "8000", "--train_file", str(corpus), "--max_seq_length", str(args.length),
        "--per_device_train_batch_size", str(args.batch_size), "--max_train_steps", str(args.steps),
        "--logging_steps", "1", "--report_to", "none", "--disable_tqdm", "--seed", "0", "--output_dir", str(folder),
        *MODES[mode],
    ]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    results = json.loads((folder / "results.json").read_text())
    history = json.loads((folder / "train_history.json").read_text())
    tokens_per_step = args.batch_size * args.length
    half, last = history[len(history) // 2 - 1], history[-1]

    def seconds(entry: dict) -> float:  # cumulative training seconds at a logged step
        return entry["step"] * tokens_per_step / entry["tokens_per_second"]

    return {"mode": mode, "wall_seconds": wall, "tokens_per_second": results["tokens_per_second"],
            "second_half_tokens_per_second": (last["step"] - half["step"]) * tokens_per_step
            / (seconds(last) - seconds(half)),
            "final_train_loss": results["final_train_loss"], "steps": results["steps"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, required=True)
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=20000)
    args = parser.parse_args()
    import torch

    runs = []
    with tempfile.TemporaryDirectory() as work:
        corpus = Path(work) / "train.txt"
        corpus.write_text("\n".join(synthetic_sentences(args.sentences, seed=0)) + "\n")
        for repeat in range(args.repeats):
            for mode in MODES:
                runs.append(pretrain(mode, args, corpus, Path(work) / f"{mode}-{repeat}"))
                print(json.dumps(runs[-1]), flush=True)
    measured = ("tokens_per_second", "second_half_tokens_per_second", "final_train_loss")
    summary = {}
    for mode in MODES:
        mine = [run for run in runs if run["mode"] == mode]
        summary[mode] = {"runs": len(mine), **{key: statistics.median(run[key] for run in mine) for key in measured}}
    record = {
        "command": " ".join(["benchmarks/pretrain_compile_benchmark.py", *recorded_arguments(sys.argv[1:])]),
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "settings": {k: v for k, v in vars(args).items() if k != "output_dir"},
        "runs": runs, "summary": summary,
        "compiled_vs_eager": {
            "whole_run": summary["compiled"]["tokens_per_second"] / summary["eager"]["tokens_per_second"],
            "second_half": summary["compiled"]["second_half_tokens_per_second"]
            / summary["eager"]["second_half_tokens_per_second"],
        },
    }  # fmt: skip
    save_benchmark_record(args.output_dir, "pretrain_compile", record)


if __name__ == "__main__":
    main()
