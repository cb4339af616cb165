#!/usr/bin/env python
"""The trade of ``hf-variants pretrain --gradient_checkpointing``: peak memory against training speed.

The same pretraining run (a BERT control or any ``--model_type``, long blocks so that activations dominate the
memory) with and without the flag, each in a fresh process, interleaved over ``--repeats`` rounds: the process's
peak resident memory (``ru_maxrss``) and the run's training tokens per second (its own ``results.json``); medians
over the rounds, and the ratios of the medians.

Writes ``<output_dir>/gradient_checkpointing_benchmark.json``::

    python benchmarks/benchmark_gradient_checkpointing.py --train_file $DATA/wikitext-2/train.txt --output_dir OUT
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from hf_variants.tokenization import train_wordpiece_tokenizer


def run_once(args: argparse.Namespace, tokenizer: Path, scratch: Path, checkpointing: bool) -> dict[str, float]:
    output = scratch / ("checkpointed" if checkpointing else "plain")
    shutil.rmtree(output, ignore_errors=True)
    command = [sys.executable, "-m", "hf_variants.cli", "pretrain", "--model_type", args.model_type,
               "--config_overrides", args.config_overrides, "--train_file", str(args.train_file),
               "--tokenizer_name", str(tokenizer), "--max_seq_length", str(args.max_seq_length),
               "--per_device_train_batch_size", str(args.batch_size), "--max_train_steps", str(args.steps),
               "--max_eval_samples", "8", "--disable_tqdm", "--report_to", "none", "--output_dir", str(output),
               *(["--gradient_checkpointing"] if checkpointing else [])]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the run failed:\n{process.stderr.read()[-3000:]}")
    results = json.loads((output / "results.json").read_text())
    return {"peak_rss_mib": usage.ru_maxrss / 1024, "tokens_per_second": results["tokens_per_second"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train_file", type=Path, required=True)
    parser.add_argument("--output_dir", type=Path, required=True)
    parser.add_argument("--model_type", default="bert_control")
    parser.add_argument("--config_overrides",
                        default="hidden_size=256,num_hidden_layers=8,num_attention_heads=4,intermediate_size=1024")
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    scratch = args.output_dir / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    tokenizer = scratch / "tokenizer"
    lines = args.train_file.read_text(encoding="utf-8").splitlines()[:20_000]
    train_wordpiece_tokenizer(lines, vocab_size=8000, model_max_length=args.max_seq_length).save_pretrained(tokenizer)
    rounds: dict[str, list[dict[str, float]]] = {"plain": [], "checkpointed": []}
    for round_index in range(args.repeats):
        order = ("plain", "checkpointed") if round_index % 2 == 0 else ("checkpointed", "plain")
        for name in order:
            rounds[name].append(run_once(args, tokenizer, scratch, name == "checkpointed"))
            print(round_index, name, rounds[name][-1], flush=True)
    medians = {name: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
               for name, runs in rounds.items()}  # fmt: skip
    corpus_name = f"{args.train_file.parent.name}/{args.train_file.name}"
    record = {
        "benchmark": "gradient_checkpointing", "corpus": corpus_name, "model_type": args.model_type,
        "config_overrides": args.config_overrides, "max_seq_length": args.max_seq_length,
        "batch_size": args.batch_size, "steps": args.steps, "repeats": args.repeats, "rounds": rounds,
        "medians": medians,
        "memory_ratio": medians["checkpointed"]["peak_rss_mib"] / medians["plain"]["peak_rss_mib"],
        "speed_ratio": medians["checkpointed"]["tokens_per_second"] / medians["plain"]["tokens_per_second"],
        "environment": {"python": platform.python_version(), "cpu_count": os.cpu_count()},
    }  # fmt: skip
    (args.output_dir / "gradient_checkpointing_benchmark.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(scratch)
    print(json.dumps({k: record[k] for k in ("medians", "memory_ratio", "speed_ratio")}, indent=2))


if __name__ == "__main__":
    main()
