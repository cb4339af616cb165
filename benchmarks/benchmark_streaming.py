#!/usr/bin/env python
"""What ``hf-variants pretrain --streaming`` holds as the corpus grows 10×, against the in-memory path.

The same short run (a tiny Macaron-BERT, a fixed number of steps, a tokenizer trained beforehand on a sample) on a
corpus and on the same corpus repeated ten times, once streamed and once loaded the usual way. For each run, in a
fresh process: its **peak resident memory** (``ru_maxrss`` of that process), the bytes it wrote to the ``datasets``
cache (the in-memory path tokenises the whole corpus into Arrow files before the first step) and its wall time
(one run each, nothing interleaved: a rough figure, not a speed comparison). And, to see memory over a whole
epoch rather than a few steps, the peak resident memory of a process that reads the streamed blocks of each corpus
from its first line to its last (windows of 1024 blocks, as ``--streaming`` does by default), with its resident
memory sampled every 10,000 blocks (Linux's ``/proc/self/status``).

Writes ``<output_dir>/streaming_benchmark.json`` (the corpora and runs go to ``<output_dir>/scratch``)::

    python benchmarks/benchmark_streaming.py --train_file $DATA/wikitext-2/train.txt --output_dir OUT
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hf_variants.tokenization import train_wordpiece_tokenizer

MODEL = "hidden_size=64,num_hidden_layers=2,num_attention_heads=4,intermediate_size=128"


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def run_once(corpus: Path, tokenizer: Path, scratch: Path, name: str, streaming: bool, steps: int) -> dict:
    """One pretraining run in a fresh process: its peak RSS, cache bytes and wall time."""
    output, cache = scratch / f"run-{name}", scratch / f"cache-{name}"
    for folder in (output, cache):
        shutil.rmtree(folder, ignore_errors=True)
    command = [sys.executable, "-m", "hf_variants.cli", "pretrain", "--model_type", "macaron_bert",
               "--config_overrides", MODEL, "--train_file", str(corpus), "--tokenizer_name", str(tokenizer),
               "--max_seq_length", "128", "--per_device_train_batch_size", "8", "--max_train_steps", str(steps),
               "--max_eval_samples", "64", "--disable_tqdm", "--report_to", "none", "--output_dir", str(output),
               *(["--streaming"] if streaming else [])]  # fmt: skip
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{name} failed:\n{process.stderr.read()[-3000:]}")
    results = json.loads((output / "results.json").read_text())
    return {"corpus_bytes": corpus.stat().st_size, "streaming": streaming, "steps": results["steps"],
            "peak_rss_mib": usage.ru_maxrss / 1024, "datasets_cache_mib": folder_bytes(cache) / 2**20,
            "wall_seconds": seconds}  # fmt: skip


#: A process that reads one epoch of a corpus's stream and prints how many blocks and tokens it held.
READ_ONE_EPOCH = """
import json, sys
from transformers import AutoTokenizer
from hf_variants.training.streaming import BlockStream, StreamPosition, open_source
stream = BlockStream(lambda: open_source(sys.argv[1], None, None), ["text"], AutoTokenizer.from_pretrained(sys.argv[2]),
                     128, "blocks", 1024, 0, "corpus")
def resident_mib():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024
samples = []
for blocks, (block, after) in enumerate(stream.blocks(StreamPosition()), start=1):
    if blocks % 10_000 == 1:
        samples.append([blocks, resident_mib()])
    if after.epoch == 1:
        break
print(json.dumps({"blocks": blocks, "resident_mib_every_10000_blocks": samples}))
"""


def read_one_epoch(corpus: Path, tokenizer: Path) -> dict:
    """The peak RSS of a process that reads every block of ``corpus``'s stream once."""
    command = [sys.executable, "-c", READ_ONE_EPOCH, str(corpus), str(tokenizer)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"reading {corpus} failed:\n{process.stderr.read()[-3000:]}")
    return {"corpus_bytes": corpus.stat().st_size, **json.loads(process.stdout.read()),
            "peak_rss_mib": usage.ru_maxrss / 1024}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train_file", type=Path, required=True)
    parser.add_argument("--output_dir", type=Path, required=True)
    parser.add_argument("--growth", type=int, default=10, help="How many times the corpus is repeated.")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    scratch = args.output_dir / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    text = args.train_file.read_text(encoding="utf-8")
    small, large = scratch / "corpus-1x.txt", scratch / f"corpus-{args.growth}x.txt"
    small.write_text(text, encoding="utf-8")
    with large.open("w", encoding="utf-8") as handle:
        for _ in range(args.growth):
            handle.write(text)
    tokenizer = scratch / "tokenizer"
    train_wordpiece_tokenizer(text.splitlines()[:20_000], vocab_size=8000).save_pretrained(tokenizer)
    runs = {}
    for streaming in (True, False):
        for corpus, size in ((small, "1x"), (large, f"{args.growth}x")):
            name = f"{'streamed' if streaming else 'in_memory'}-{size}"
            runs[name] = run_once(corpus, tokenizer, scratch, name, streaming, args.steps)
            print(name, json.dumps(runs[name]), flush=True)
    growth = f"{args.growth}x"
    epochs = {size: read_one_epoch(corpus, tokenizer) for corpus, size in ((small, "1x"), (large, growth))}
    print("one epoch read", json.dumps(epochs), flush=True)
    summary = {
        "epoch_read_rss_growth": epochs[growth]["peak_rss_mib"] / epochs["1x"]["peak_rss_mib"],
        "streamed_rss_growth": runs[f"streamed-{growth}"]["peak_rss_mib"] / runs["streamed-1x"]["peak_rss_mib"],
        "in_memory_rss_growth": runs[f"in_memory-{growth}"]["peak_rss_mib"] / runs["in_memory-1x"]["peak_rss_mib"],
    }
    corpus_name = f"{args.train_file.parent.name}/{args.train_file.name}"
    record = {"benchmark": "streaming", "corpus": corpus_name, "growth": args.growth, "steps": args.steps,
              "model": MODEL, "runs": runs, "epoch_reads": epochs, "summary": summary,
              "environment": {"python": platform.python_version(), "cpu_count": os.cpu_count()}}  # fmt: skip
    (args.output_dir / "streaming_benchmark.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(scratch)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
