#!/usr/bin/env python
"""``hf-variants pretrain --streaming`` on a corpus ten times larger than the memory each process may use: it trains,
is killed, resumes, and ends with the uninterrupted run's weights — one process, and two under ``accelerate
launch``.

The memory budget is a hard limit the kernel enforces: every process of a run (the launcher and its workers too)
starts with its address space limited to ``--budget_mib`` (``RLIMIT_AS``: all the memory it can map, resident or
not), so a process that tried to hold the corpus would fail. The corpus is a text file repeated until it is
``--times`` that budget. To show that the budget binds, the same one-process run is also started under a budget
20% smaller, where it must fail.

For each process count: a run of ``--steps`` steps uninterrupted; the same run killed (SIGKILL, the engine's own
failpoint) right after step ``--kill_at`` and resumed from its last checkpoint; whether the two end with equal
weights (every tensor bit for bit) and the same logged losses, and each run's peak resident memory (the largest
process's ``ru_maxrss``). Writes ``<output_dir>/streaming_budget.json`` (the corpus and runs go to
``<output_dir>/scratch``, removed afterwards)::

    python benchmarks/benchmark_streaming_budget.py --train_file $DATA/wikitext-2/train.txt --output_dir OUT
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from hf_variants.storage.files import FAILPOINT_ENV
from hf_variants.tokenization import train_wordpiece_tokenizer

MODEL = ("hidden_size=64,num_hidden_layers=2,num_attention_heads=4,intermediate_size=128,"
         "hidden_dropout_prob=0.0,attention_probs_dropout_prob=0.0")  # no dropout: each process draws its own masks
BATCH = 8  # the global batch: one process of 8 rows, or two of 4


def write_corpus(text: bytes, path: Path, at_least: int) -> int:
    """``text`` repeated into ``path`` until the file holds ``at_least`` bytes; its size."""
    with path.open("wb") as handle:
        for _ in range(-(-at_least // len(text))):
            handle.write(text)
    return path.stat().st_size


def command(processes: int, corpus: Path, tokenizer: Path, output: Path, steps: int) -> list[str]:
    """``hf-variants pretrain --streaming`` in one process, or under ``accelerate launch`` in two."""
    pretrain = ["-m", "hf_variants.cli", "pretrain", "--model_type", "macaron_bert", "--config_overrides", MODEL,
                "--train_file", str(corpus), "--tokenizer_name", str(tokenizer), "--streaming",
                "--max_seq_length", "128", "--per_device_train_batch_size", str(BATCH // processes),
                "--max_train_steps", str(steps), "--checkpointing_steps", "10", "--max_eval_samples", "64",
                "--disable_tqdm", "--report_to", "none", "--output_dir", str(output)]  # fmt: skip
    if processes == 1:
        return [sys.executable, *pretrain]
    with socket.socket() as probe:  # a free rendezvous port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return [str(Path(sys.executable).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "2",
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
            str(port), *pretrain]  # fmt: skip


def run(arguments: list[str], budget_bytes: int, log: Path, failpoint: str | None = None) -> dict:
    """One run with every process's address space limited to ``budget_bytes``, its output in ``log``: its exit
    code, whether a process of it was killed by SIGKILL (the launcher reports its workers'), resumed or ran out of
    memory, the largest process's peak resident memory and its wall time."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (budget_bytes, budget_bytes))

    env = {key: value for key, value in os.environ.items() if key != FAILPOINT_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               **({FAILPOINT_ENV: failpoint} if failpoint else {}))  # fmt: skip
    started = time.perf_counter()
    with log.open("w") as output:
        process = subprocess.Popen(arguments, env=env, preexec_fn=limit, stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=subprocess.STDOUT)  # fmt: skip
        _, status, usage = os.wait4(process.pid, 0)
    printed = log.read_text(errors="replace")
    exit_code = os.waitstatus_to_exitcode(status)
    return {"exit_code": exit_code, "killed": exit_code == -9 or "Signal 9 (SIGKILL)" in printed,
            "resumed": "Resumed from" in printed,
            "out_of_memory": "Cannot allocate memory" in printed or "MemoryError" in printed,
            "peak_rss_mib": usage.ru_maxrss / 1024, "wall_seconds": time.perf_counter() - started}  # fmt: skip


def compare(first: Path, second: Path) -> dict:
    """Whether two runs ended with bit-identical weights (and the largest difference) and logged equal losses."""
    a, b = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    largest = max(float((a[key] - b[key]).abs().max()) for key in a) if a.keys() == b.keys() else float("inf")
    history = [[entry["loss"] for entry in json.loads((folder / "train_history.json").read_text())]
               for folder in (first, second)]  # fmt: skip
    return {"weights_equal": a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a),
            "largest_weight_difference": largest, "losses_equal": history[0] == history[1],
            "logged_losses": len(history[0])}  # fmt: skip


def kill_and_resume(processes: int, corpus: Path, tokenizer: Path, scratch: Path, budget: int, steps: int,
                    kill_at: int) -> dict:  # fmt: skip
    """Uninterrupted, then killed after step ``kill_at`` and resumed, under ``budget`` bytes per process."""
    full, killed = scratch / f"full-{processes}", scratch / f"killed-{processes}"
    logs = scratch / f"log-{processes}"
    runs = {"uninterrupted": run(command(processes, corpus, tokenizer, full, steps), budget, logs.with_suffix(".full")),
            "killed": run(command(processes, corpus, tokenizer, killed, steps), budget, logs.with_suffix(".killed"),
                          f"train_step@{kill_at}")}  # fmt: skip
    runs["resumed"] = run(command(processes, corpus, tokenizer, killed, steps), budget, logs.with_suffix(".resumed"))
    for name, result in runs.items():
        print(processes, name, json.dumps(result), flush=True)
    ended = runs["uninterrupted"]["exit_code"] == 0 and runs["resumed"]["exit_code"] == 0
    return {"runs": runs, **(compare(full, killed) if ended else {"weights_equal": False})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train_file", type=Path, required=True)
    parser.add_argument("--output_dir", type=Path, required=True)
    parser.add_argument("--budget_mib", type=int, default=3072, help="Each process's address-space limit.")
    parser.add_argument("--times", type=int, default=10, help="The corpus's size in budgets.")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--kill_at", type=int, default=25)
    args = parser.parse_args()
    scratch = args.output_dir / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    budget = args.budget_mib * 2**20
    text = args.train_file.read_bytes()
    tokenizer = scratch / "tokenizer"
    train_wordpiece_tokenizer(text.decode("utf-8").splitlines()[:20_000], vocab_size=8000).save_pretrained(tokenizer)
    corpus = scratch / "corpus.txt"
    try:
        corpus_bytes = write_corpus(text, corpus, args.times * budget)
        smaller = int(budget * 0.8)
        binds = run(command(1, corpus, tokenizer, scratch / "smaller-budget", args.steps), smaller,
                    scratch / "log-smaller-budget")
        print("under 80% of the budget", json.dumps(binds), flush=True)
        results = {str(n): kill_and_resume(n, corpus, tokenizer, scratch, budget, args.steps, args.kill_at)
                   for n in (1, 2)}  # fmt: skip
    finally:
        shutil.rmtree(scratch)
    record = {"benchmark": "streaming_budget", "corpus": f"{args.train_file.parent.name}/{args.train_file.name}",
              "corpus_bytes": corpus_bytes, "budget_bytes": budget, "corpus_over_budget": corpus_bytes / budget,
              "model": MODEL, "global_batch": BATCH, "block": 128, "steps": args.steps, "kill_at": args.kill_at,
              "smaller_budget": {"budget_bytes": smaller, **binds}, "processes": results,
              "environment": {"python": platform.python_version(), "cpu_count": os.cpu_count()}}  # fmt: skip
    (args.output_dir / "streaming_budget.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({n: r["weights_equal"] for n, r in results.items()}))


if __name__ == "__main__":
    main()
